"""Tests of tessera_array.optim: kernels against the xp references, torch trajectories,
Adafactor's decay and state markers, state round trips, convergence, bad input.

The torch trajectories come from tests/data/optim_golden.npz (written by
tests/data/make_optim_golden.py); when torch is importable they are also checked live.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys

import numpy as np
import pytest

import tessera_array as xp
from tessera_array import _dispatch, optim
from tessera_array.optim import (
    Adafactor,
    AdafactorStateWarning,
    adafactor_decay,
    migrate_adafactor_state,
)

DATA = os.path.join(os.path.dirname(__file__), "data")
sys.path.insert(0, DATA)
import make_optim_golden as golden


def _have_torch() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except ValueError:  # sys.modules["torch"] is None: blocked
        return False


HAVE_TORCH = _have_torch()
GOLDEN = dict(np.load(os.path.join(DATA, "optim_golden.npz")))
CASES = sorted(golden.CASES)
TOL = {"float32": 2e-5, "float64": 1e-12}


def _np(a):
    return np.asarray(a._device._backend.to_host(a._data))


def _arr(a, device, dtype=None):
    return xp.asarray(np.array(a, copy=True), device=device, dtype=dtype)


def _case(case):
    spec = json.loads(str(GOLDEN[f"{case}/spec"]))
    kwargs = golden.torch_kwargs(spec["kwargs"])
    if spec["optimizer"] == "Adafactor":
        kwargs["decay"] = "pytorch"
    return spec["optimizer"], kwargs


def _run_golden(case, device, steps=golden.STEPS):
    """Our tree optimizer on the golden problem: the parameters after every step."""
    name, kwargs = _case(case)
    params = {n: _arr(GOLDEN[f"init/{n}"], device) for n in golden.SHAPES}
    opt = getattr(optim, name)(params, **kwargs)
    traj = {n: [] for n in golden.SHAPES}
    for t in range(1, steps + 1):
        opt.step({n: _arr(golden.grad(GOLDEN, n, _np(params[n]), t), device)
                  for n in golden.SHAPES})
        for n in golden.SHAPES:
            traj[n].append(_np(params[n]).copy())
    return {n: np.stack(v) for n, v in traj.items()}


# ---- registry ------------------------------------------------------------------


@pytest.mark.parametrize("op", _dispatch.FAMILIES["optimizer"])
def test_kernels_registered(device, op):
    for dt in (xp.float32, xp.float64):
        assert callable(_dispatch.lookup(op, device, dt))


# ---- 100-step trajectories equal torch.optim's ------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_trajectory_matches_torch_golden(device, case):
    ours = _run_golden(case, device)
    for n in golden.SHAPES:
        np.testing.assert_allclose(ours[n], GOLDEN[f"{case}/traj/{n}"], rtol=1e-10, atol=0,
                                   err_msg=f"{case}: {n}")


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed (golden files still checked)")
@pytest.mark.parametrize("case", ["sgd_nesterov", "adam_amsgrad_wd", "adamw_default",
                                  "adafactor_options"])
def test_trajectory_matches_live_torch(device, case):
    name, _ = _case(case)
    spec = json.loads(str(GOLDEN[f"{case}/spec"]))
    theirs = golden.run_torch(GOLDEN, name, spec["kwargs"], steps=30)
    ours = _run_golden(case, device, steps=30)
    for n in golden.SHAPES:
        np.testing.assert_allclose(ours[n], theirs[n], rtol=1e-10, atol=0)


# ---- kernels against the xp references ------------------------------------------

SHAPES = [(7, 5), (11,), (), (3, 4, 6)]


def _random(shapes, dtype, device, seed, positive=False):
    rng = np.random.default_rng(seed)
    out = []
    for s in shapes:
        a = rng.standard_normal(s)
        out.append(_arr(np.abs(a) + 0.1 if positive else a, device, dtype))
    return out


@pytest.fixture(params=[False, True], ids=["whole", "blocked"])
def blocked(request, monkeypatch):
    """Also run the kernels cut into tiny blocks shared among threads (NumPy backend)."""
    if request.param:
        from tessera_array.backends.numpy import optim as kernels

        monkeypatch.setattr(kernels, "BLOCK_BYTES", 64)
        monkeypatch.setattr(kernels, "PARALLEL_MIN", 1)
    return request.param


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("opts", [
    {}, {"momentum": 0.9}, {"momentum": 0.9, "dampening": 0.3, "weight_decay": 0.1},
    {"momentum": 0.8, "nesterov": True, "maximize": True, "weight_decay": 0.05},
])
@pytest.mark.parametrize("step", [1, 4])
def test_sgd_kernel_matches_reference(device, dtype, opts, step, blocked):
    dt = getattr(xp, dtype)
    params = _random(SHAPES, dt, device, 1)
    grads = _random(SHAPES, dt, device, 2)
    bufs = _random(SHAPES, dt, device, 3)
    want = [optim.sgd_reference(p, g, b, step=step, lr=0.1, **opts)
            for p, g, b in zip(params, grads, bufs)]
    optim.sgd(params, grads, bufs if opts.get("momentum") else None, step=step, lr=0.1, **opts)
    for i, (p, b) in enumerate(zip(params, bufs)):
        np.testing.assert_allclose(_np(p), _np(want[i][0]), rtol=TOL[dtype], atol=TOL[dtype])
        if opts.get("momentum"):
            np.testing.assert_allclose(_np(b), _np(want[i][1]), rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("decoupled", [False, True], ids=["adam", "adamw"])
@pytest.mark.parametrize("opts", [
    {}, {"amsgrad": True, "weight_decay": 0.1}, {"maximize": True, "betas": (0.5, 0.9),
                                                 "eps": 1e-3, "weight_decay": 0.2},
])
def test_adam_kernel_matches_reference(device, dtype, decoupled, opts, blocked):
    dt = getattr(xp, dtype)
    params = _random(SHAPES, dt, device, 1)
    grads = _random(SHAPES, dt, device, 2)
    ms = _random(SHAPES, dt, device, 3)
    vs = _random(SHAPES, dt, device, 4, positive=True)
    vmax = _random(SHAPES, dt, device, 5, positive=True)
    kw = {"weight_decay": 0.0, **opts}  # adamw's own default is 1e-2
    want = [optim.adam_reference(*a, step=3, lr=0.01, decoupled=decoupled, **kw)
            for a in zip(params, grads, ms, vs, vmax)]
    (optim.adamw if decoupled else optim.adam)(params, grads, ms, vs, vmax, step=3, lr=0.01,
                                               **kw)
    for i, got in enumerate(zip(params, ms, vs, vmax)):
        for k, g in enumerate(got):
            if k == 3 and not opts.get("amsgrad"):
                continue
            np.testing.assert_allclose(_np(g), _np(want[i][k]), rtol=TOL[dtype],
                                       atol=TOL[dtype])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("opts", [
    {"step": 1}, {"step": 7, "decay": "pytorch", "weight_decay": 0.1, "maximize": True},
    {"step": None, "d": 0.1, "eps": (1e-10, 0.5)},
])
def test_adafactor_kernel_matches_reference(device, dtype, opts, blocked):
    dt = getattr(xp, dtype)
    params = _random(SHAPES, dt, device, 1)
    grads = _random(SHAPES, dt, device, 2)
    rows, cols, vars_ = [], [], []
    for i, p in enumerate(params):
        shapes = optim.adafactor_state_shapes(p.shape)
        if shapes:
            r, c = _random(shapes, dt, device, 10 + i, positive=True)
            rows.append(r), cols.append(c), vars_.append(None)
        else:
            rows.append(None), cols.append(None)
            vars_.append(_random([p.shape], dt, device, 10 + i, positive=True)[0])
    want = [optim.adafactor_reference(*a, lr=0.3, beta2=0.9, **opts)
            for a in zip(params, grads, rows, cols, vars_)]
    rep = optim.adafactor(params, grads, rows, cols, vars_, lr=0.3, beta2=0.9, **opts)
    assert rep == ("raw_ema" if opts["step"] is None else "debiased")
    for i, got in enumerate(zip(params, rows, cols, vars_)):
        for k, g in enumerate(got):
            if g is not None:
                np.testing.assert_allclose(_np(g), _np(want[i][k]), rtol=TOL[dtype],
                                           atol=TOL[dtype])


def test_kernel_updates_non_contiguous_in_place(device):
    base = _arr(np.arange(24.0).reshape(4, 6) / 10, device)
    p = base[:, ::2]  # a strided view is updated whole, in place
    g = xp.ones_like(p)
    want, _ = optim.sgd_reference(p, g, None, step=1, lr=0.5)
    optim.sgd([p], [g], None, step=1, lr=0.5)
    np.testing.assert_allclose(_np(p), _np(want), rtol=1e-15)


# ---- Adafactor's decay ---------------------------------------------------------------


def test_adafactor_decay_values():
    b2 = 0.999
    assert adafactor_decay(b2, 1) == 0.0
    for t in (2, 10, 1000):
        assert adafactor_decay(b2, t) == pytest.approx(b2 * (1 - b2 ** (t - 1)) / (1 - b2**t),
                                                       rel=1e-15)
    assert adafactor_decay(b2, 10**6) == pytest.approx(b2, rel=1e-12)


def _constant_grad_runs(device, steps):
    """Second moments after ``steps`` constant-gradient steps, from every implementation."""
    g0 = np.array([0.5, -2.0, 1.5])
    m0 = np.outer([0.5, -2.0], [1.0, 0.25, -1.5])  # g**2 of rank 1: factored exactly
    kw = {"lr": 1e-3, "beta2": 0.999, "d": 1e30}  # v does not depend on lr
    out = {}
    # tree optimizer (flat op + kernel underneath)
    p1, p2 = _arr(np.ones(3), device), _arr(np.ones((2, 3)), device)
    opt = Adafactor([p1, p2], **kw)
    for _ in range(steps):
        opt.step([_arr(g0, device), _arr(m0, device)])
    out["tree"] = (_np(opt.state[0]["variance"]),
                   _np(opt.state[1]["row_var"]) * _np(opt.state[1]["col_var"])
                   / _np(opt.state[1]["row_var"]).mean())
    # flat op, and the legacy form without a step
    for name, with_step in (("flat", True), ("legacy", False)):
        p, v = _arr(np.ones(3), device), xp.zeros(3, dtype=xp.float64, device=device)
        for t in range(1, steps + 1):
            optim.adafactor([p], [_arr(g0, device)], [None], [None], [v],
                            step=t if with_step else None, **kw)
        out[name] = _np(v)
    # reference
    p, v = _arr(np.ones(3), device), xp.zeros(3, dtype=xp.float64, device=device)
    for t in range(1, steps + 1):
        p, _, _, v = optim.adafactor_reference(p, _arr(g0, device), None, None, v, step=t, **kw)
    out["reference"] = _np(v)
    return g0**2, m0**2, out


@pytest.mark.parametrize("steps,inflation", [(1, 31.6), (10, 10.0), (100, 3.2), (1000, 1.26)])
def test_adafactor_default_decay_removes_inflation(device, steps, inflation):
    g2, m2, runs = _constant_grad_runs(device, steps)
    # every implementation holds the unbiased g**2: the nominal decay would give
    # (1 - beta2**t) g**2, off by the measured inflation squared
    np.testing.assert_allclose(runs["tree"][0], g2, rtol=1e-12)
    np.testing.assert_allclose(runs["tree"][1], m2, rtol=1e-12)
    np.testing.assert_allclose(runs["flat"], g2, rtol=1e-12)
    np.testing.assert_allclose(runs["reference"], g2, rtol=1e-12)
    # the legacy (no step) form keeps the seed's measured inflation of the update
    measured = np.sqrt(g2 / runs["legacy"])
    np.testing.assert_allclose(measured, 1 / np.sqrt(1 - 0.999**steps), rtol=1e-9)
    np.testing.assert_allclose(measured, inflation, rtol=0.02)  # the seed's rounded figures


def test_adafactor_pytorch_decay_rule(device):
    p = _arr(np.ones(3), device)
    v = xp.zeros(3, dtype=xp.float64, device=device)
    g = _arr(np.array([1.0, 2.0, 3.0]), device)
    optim.adafactor([p], [g], [None], [None], [v], step=1, decay="pytorch")
    np.testing.assert_allclose(_np(v), [1.0, 4.0, 9.0])  # 1 - 1**-0.8 = 0
    optim.adafactor([p], [2 * g], [None], [None], [v], step=2, decay="pytorch")
    r = 2.0**-0.8
    np.testing.assert_allclose(_np(v), (1 - r) * np.array([1, 4, 9.0]) + r * np.array([4, 16,
                                                                                        36.0]))


# ---- state: round trips, markers, migration, torch layout ------------------------------

OPTIMIZERS = [
    ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True}),
    ("Adam", {"lr": 0.01, "amsgrad": True}),
    ("AdamW", {"lr": 0.01}),
    ("Adafactor", {"lr": 0.05}),
]


def _grads(params, device, t):
    return {n: _arr(golden.grad(GOLDEN, n, _np(params[n]), t), device) for n in params}


@pytest.mark.parametrize("name,kwargs", OPTIMIZERS, ids=[o[0] for o in OPTIMIZERS])
def test_state_round_trip_continues_identically(device, name, kwargs):
    params = {n: _arr(GOLDEN[f"init/{n}"], device) for n in golden.SHAPES}
    opt = getattr(optim, name)(params, **kwargs)
    for t in range(1, 6):
        opt.step(_grads(params, device, t))
    saved = opt.state_dict()
    assert saved["step"] == 5 and isinstance(saved["step"], int)
    copies = {n: xp.asarray(p, copy=True) for n, p in params.items()}
    for t in range(6, 11):
        opt.step(_grads(params, device, t))
    other = getattr(optim, name)(copies, **kwargs)
    other.load_state_dict(saved)
    for t in range(6, 11):
        other.step(_grads(copies, device, t))
    for n, p in params.items():
        np.testing.assert_array_equal(_np(copies[n]), _np(p))
    assert other.step_count == opt.step_count == 10


@pytest.mark.parametrize("name,kwargs", OPTIMIZERS, ids=[o[0] for o in OPTIMIZERS])
def test_torch_layout_round_trip(device, name, kwargs):
    params = {n: _arr(GOLDEN[f"init/{n}"], device) for n in golden.SHAPES}
    opt = getattr(optim, name)(params, **kwargs)
    for t in range(1, 4):
        opt.step(_grads(params, device, t))
    sd = opt.to_torch_state_dict()
    assert sorted(sd) == ["param_groups", "state"]
    assert sd["param_groups"][0]["params"] == [0, 1, 2]
    keys = {"SGD": {"momentum_buffer"}, "Adam": {"step", "exp_avg", "exp_avg_sq",
                                                  "max_exp_avg_sq"},
            "AdamW": {"step", "exp_avg", "exp_avg_sq"},
            "Adafactor": {"step", "row_var", "col_var"}}[name]
    assert set(sd["state"][0]) == keys
    if "step" in keys:
        assert sd["state"][0]["step"].dtype == np.float32 and float(sd["state"][0]["step"]) == 3
    copies = {n: xp.asarray(p, copy=True) for n, p in params.items()}
    other = getattr(optim, name)(copies, **kwargs)
    other.from_torch_state_dict(sd)
    for t in range(4, 7):
        opt.step(_grads(params, device, t))
        other.step(_grads(copies, device, t))
    for n, p in params.items():
        np.testing.assert_array_equal(_np(copies[n]), _np(p))


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("case", ["adam_amsgrad_wd", "adamw_default", "adafactor_default"])
def test_torch_state_loads_into_torch_and_back(device, case):
    import torch

    name, kwargs = _case(case)
    spec = json.loads(str(GOLDEN[f"{case}/spec"]))
    params = {n: _arr(GOLDEN[f"init/{n}"], device) for n in golden.SHAPES}
    opt = getattr(optim, name)(params, **kwargs)
    for t in range(1, 4):
        opt.step(_grads(params, device, t))
    tparams = [torch.tensor(_np(params[n]), requires_grad=True) for n in golden.SHAPES]
    topt = getattr(torch.optim, name)(tparams, **golden.torch_kwargs(spec["kwargs"]))
    sd = opt.to_torch_state_dict()
    topt.load_state_dict({"state": {i: {k: torch.from_numpy(np.array(v)) for k, v in s.items()}
                                    for i, s in sd["state"].items()},
                          "param_groups": sd["param_groups"]})
    for t in range(4, 7):
        opt.step(_grads(params, device, t))
        for n, p in zip(golden.SHAPES, tparams):
            p.grad = torch.from_numpy(golden.grad(GOLDEN, n, p.detach().numpy(), t))
        topt.step()
    for n, p in zip(golden.SHAPES, tparams):
        np.testing.assert_allclose(_np(params[n]), p.detach().numpy(), rtol=1e-10)
    # and back: torch's own state_dict loads into ours
    back = {"state": {i: {k: v.numpy() for k, v in s.items()}
                      for i, s in topt.state_dict()["state"].items()},
            "param_groups": topt.state_dict()["param_groups"]}
    again = getattr(optim, name)({n: xp.asarray(params[n], copy=True) for n in params},
                                 **kwargs)
    again.from_torch_state_dict(back)
    assert again.step_count == 6


def _legacy_and_native(device, steps=5):
    """Adafactor second moments after ``steps`` steps of the legacy and the native decay."""
    rng = np.random.default_rng(7)
    gs = [rng.standard_normal((3, 4)) for _ in range(steps)]
    out = {}
    for name, with_step in (("legacy", True), ("native", False)):
        p = _arr(np.ones((3, 4)), device)
        r = xp.zeros((3, 1), dtype=xp.float64, device=device)
        c = xp.zeros((1, 4), dtype=xp.float64, device=device)
        for t, g in enumerate(gs, 1):
            optim.adafactor([p], [_arr(g, device)], [r], [c], [None], beta2=0.9,
                            step=t if name == "native" else None)
        out[name] = {"step": steps, "param_groups": [{"beta2": 0.9}],
                     "state": {0: {"row_var": r, "col_var": c}}}
    out["native"]["state"][0]["v_representation"] = "debiased"
    return out


def test_migrate_adafactor_state_both_ways(device):
    runs = _legacy_and_native(device)
    up = migrate_adafactor_state(runs["legacy"])  # unmarked: taken as the legacy raw EMA
    assert up["state"][0]["v_representation"] == "debiased"
    for k in ("row_var", "col_var"):
        np.testing.assert_allclose(_np(up["state"][0][k]), _np(runs["native"]["state"][0][k]),
                                   rtol=1e-12)
    down = migrate_adafactor_state(runs["native"], to="raw_ema")
    for k in ("row_var", "col_var"):
        np.testing.assert_allclose(_np(down["state"][0][k]), _np(runs["legacy"]["state"][0][k]),
                                   rtol=1e-12)
    # a no-op on marked state
    same = migrate_adafactor_state(runs["native"])
    assert same["state"][0]["row_var"] is runs["native"]["state"][0]["row_var"]
    with pytest.raises(ValueError, match=r"migrate_adafactor_state: to must be one of"):
        migrate_adafactor_state(runs["native"], to="raw")


def test_adafactor_unmarked_state_warns(device):
    params = [_arr(np.ones((3, 4)), device), _arr(np.ones(2), device)]
    opt = Adafactor(params)
    opt.step([xp.ones((3, 4), dtype=xp.float64, device=device),
              xp.ones(2, dtype=xp.float64, device=device)])
    sd = opt.state_dict()
    assert all(s["v_representation"] == "debiased" for s in sd["state"].values())
    Adafactor(params).load_state_dict(sd)  # marked: silent
    for s in sd["state"].values():
        del s["v_representation"]
    with pytest.warns(AdafactorStateWarning, match=r"no v_representation marker at step 1"):
        Adafactor(params).load_state_dict(sd)
    sd["step"] = 0
    Adafactor(params).load_state_dict(sd)  # step 0: nothing to misread, no warning
    sd["step"] = 1
    for s in sd["state"].values():
        s["v_representation"] = "raw_ema"
    with pytest.raises(ValueError, match=r"Adafactor.load_state_dict: .*migrate_adafactor"):
        Adafactor(params).load_state_dict(sd)


def test_step_counter_is_exact_integer(device):
    p = xp.ones(3, dtype=xp.float32, device=device)
    opt = optim.Adam([p])
    for _ in range(3):
        opt.step([xp.ones(3, dtype=xp.float32, device=device)])
    assert opt.step_count == 3 and type(opt.step_count) is int
    assert opt.state[0]["exp_avg"].device == p.device


# ---- convergence ---------------------------------------------------------------------

QUAD = {"SGD": {"lr": 0.05, "momentum": 0.9}, "Adam": {"lr": 0.05},
        "AdamW": {"lr": 0.05, "weight_decay": 0.0}, "Adafactor": {"lr": 0.5}}
ROSEN = {"SGD": ({"lr": 1e-3, "momentum": 0.9, "nesterov": True}, 1e-3),
         "Adam": ({"lr": 0.05}, 1e-3), "AdamW": ({"lr": 0.05, "weight_decay": 0.0}, 1e-3),
         # relative step size 1/sqrt(t), no momentum: slower down the valley
         "Adafactor": ({"lr": 0.1, "beta2": 0.9, "eps": (None, 0.1)}, 0.2)}


@pytest.mark.parametrize("name", sorted(QUAD))
def test_converges_on_quadratic(device, name):
    rng = np.random.default_rng(0)
    q = rng.standard_normal((5, 5))
    a, b = q @ q.T / 5 + np.eye(5), rng.standard_normal(5)
    A, B = _arr(a, device), _arr(b, device)
    p = _arr(np.full(5, 0.5), device)
    opt = getattr(optim, name)({"x": p}, **QUAD[name])
    for _ in range(1500):
        opt.step({"x": A @ p - B})
        if np.max(np.abs(_np(p) - np.linalg.solve(a, b))) < 1e-4:
            break
    np.testing.assert_allclose(_np(p), np.linalg.solve(a, b), atol=1e-4)


@pytest.mark.parametrize("name", sorted(ROSEN))
def test_converges_on_rosenbrock(device, name):
    kwargs, tol = ROSEN[name]
    p = _arr(np.array([-1.2, 1.0]), device)
    opt = getattr(optim, name)([p], **kwargs)
    for _ in range(2500):
        x, y = p[0], p[1]
        opt.step([xp.stack([-2 * (1 - x) - 400 * x * (y - x * x), 200 * (y - x * x)])])
        if np.max(np.abs(_np(p) - 1)) < tol:
            break
    np.testing.assert_allclose(_np(p), [1.0, 1.0], atol=tol)


# ---- bad input ---------------------------------------------------------------------------


def _tree(device):
    return {"w": xp.ones((2, 3), dtype=xp.float64, device=device),
            "b": [xp.ones(3, dtype=xp.float64, device=device)]}


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adafactor"])
def test_bad_grads(device, name):
    params = _tree(device)
    opt = getattr(optim, name)(params, lr=0.1)
    g = _tree(device)
    with pytest.raises(ValueError, match=rf"{name}.step: grads must have one gradient .*"
                                         r"Received: no gradient for params\['b'\]\[0\]"):
        opt.step({"w": g["w"]})
    with pytest.raises(ValueError, match=rf"{name}.step: grads has entries that are not "
                                         r"parameters. Received: grads\['extra'\]"):
        opt.step(dict(g, extra=g["w"]))
    with pytest.raises(ValueError, match=rf"{name}.step: .*shape.*Received: params\['w'\]"
                                         r"\.shape=\(2, 3\)"):
        opt.step({"w": xp.ones((3, 2), dtype=xp.float64, device=device), "b": g["b"]})
    with pytest.raises(TypeError, match=rf"{name}.step: .*dtype.*float32"):
        opt.step({"w": xp.ones((2, 3), dtype=xp.float32, device=device), "b": g["b"]})
    bad = {"w": g["w"], "b": [xp.asarray([1.0, float("nan"), 0.0], device=device)]}
    with pytest.raises(ValueError, match=rf"{name}.step: gradient is not finite .*"
                                         r"grads\['b'\]\[0\].*check_finite=False"):
        opt.step(bad)
    assert opt.step_count == 0  # nothing applied
    np.testing.assert_array_equal(_np(params["b"][0]), 1.0)
    # opted out: applied as given (IEEE propagation)
    lax = getattr(optim, name)(params, lr=0.1, check_finite=False)
    lax.step(bad)
    assert np.isnan(_np(params["b"][0])).any() and lax.step_count == 1


def test_bad_hyperparameters():
    p = [xp.ones(3)]
    with pytest.raises(ValueError, match=r"Adam: lr must be >= 0. Received: lr=-0.1"):
        optim.Adam(p, lr=-0.1)
    with pytest.raises(ValueError, match=r"Adam: betas\[0\] must be in \[0, 1\)\. "
                                         r"Received: betas\[0\]=1.0"):
        optim.Adam(p, betas=(1.0, 0.9))
    with pytest.raises(ValueError, match=r"AdamW: betas\[1\] must be in \[0, 1\)"):
        optim.AdamW(p, betas=(0.9, -0.1))
    with pytest.raises(ValueError, match=r"SGD: nesterov needs momentum > 0"):
        optim.SGD(p, lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match=r"SGD: lr must be >= 0"):
        optim.SGD(p, lr=-1.0)
    with pytest.raises(ValueError, match=r"Adafactor: beta2 must be in \[0, 1\)"):
        optim.Adafactor(p, beta2=1.0)
    with pytest.raises(ValueError, match=r"Adafactor: decay must be one of"):
        optim.Adafactor(p, decay="nominal")
    with pytest.raises(TypeError, match=r"Adam: params must be an Array or a nested"):
        optim.Adam({"w": np.ones(3)})
    with pytest.raises(TypeError, match=r"SGD: parameters must be float32 or float64"):
        optim.SGD([xp.ones(3, dtype=xp.int64)], lr=0.1)
    with pytest.raises(ValueError, match=r"adam: step must be an integer >= 1"):
        optim.adam(p, p, p, p, step=0)
    with pytest.raises(ValueError, match=r"adafactor: decay='pytorch' needs the step number"):
        optim.adafactor(p, p, [None], [None], p, decay="pytorch")


def test_flat_op_bad_lists(device):
    p = [xp.ones((2, 3), dtype=xp.float64, device=device)]
    with pytest.raises(ValueError, match=r"adam: grads must have one entry per parameter"):
        optim.adam(p, [], p, p, step=1)
    with pytest.raises(ValueError, match=r"adam: exp_avgs\[0\] must have its parameter's shape"):
        optim.adam(p, p, [xp.ones(6, dtype=xp.float64, device=device)], p, step=1)
    with pytest.raises(ValueError, match=r"adafactor: row_vars\[0\] must have shape \(2, 1\)"):
        optim.adafactor(p, p, [None], [None], [None], step=1)
    with pytest.raises(TypeError, match=r"sgd: grads\[0\] must be a tessera_array Array"):
        optim.sgd(p, [np.ones((2, 3))], None, step=1, lr=0.1)
    with pytest.raises(ValueError, match=r"sgd: momentum != 0 needs momentum_buffers"):
        optim.sgd(p, p, None, step=1, lr=0.1, momentum=0.9)


def _fake_device_array(shape):
    from tessera_array._array import Array

    return Array._new(np.ones(shape), xp.float64, xp.Device("fake", 0))


@pytest.mark.parametrize("name", ["SGD", "Adam", "AdamW", "Adafactor"])
def test_device_mismatch(device, name):
    from tessera_array._errors import DeviceMismatchError

    params = {"w": xp.ones((2, 3), dtype=xp.float64, device=device)}
    opt = getattr(optim, name)(params, lr=0.1)
    with pytest.raises(DeviceMismatchError,
                       match=rf"{name}.step: grads\['w'\] must be on its parameter's device. "
                             r"Received: params\['w'\].device=.*fake"):
        opt.step({"w": _fake_device_array((2, 3))})
    p = [xp.ones(3, dtype=xp.float64, device=device)]
    with pytest.raises(DeviceMismatchError, match=r"adam: exp_avgs\[0\] must be on its "
                                                  r"parameter's device"):
        optim.adam(p, p, [_fake_device_array(3)], p, step=1)


def test_flat_op_mixed_dtypes_one_call(device):
    # one call, two dtype groups: each goes to its own registered kernel
    params = [_arr(np.full(3, 2.0), device, xp.float32), _arr(np.full(2, 2.0), device)]
    grads = [xp.ones_like(p) for p in params]
    ms = [xp.zeros_like(p) for p in params]
    vs = [xp.zeros_like(p) for p in params]
    optim.adam(params, grads, ms, vs, step=1, lr=0.5, eps=0.0)
    assert params[0].dtype == xp.float32 and params[1].dtype == xp.float64
    np.testing.assert_allclose(_np(params[0]), 1.5, rtol=1e-6)
    np.testing.assert_allclose(_np(params[1]), 1.5, rtol=1e-12)


def test_nested_tree_and_one_step_by_hand(device):
    # dicts, lists and tuples nest; SGD's first step is p - lr*g exactly
    params = {"a": [xp.ones(2, dtype=xp.float64, device=device),
                    (xp.full((2, 2), 3.0, dtype=xp.float64, device=device),)],
              "b": xp.zeros(1, dtype=xp.float64, device=device)}
    opt = optim.SGD(params, lr=0.5)
    grads = {"b": xp.ones(1, dtype=xp.float64, device=device),
             "a": [xp.full(2, 2.0, dtype=xp.float64, device=device),
                   (xp.ones((2, 2), dtype=xp.float64, device=device),)]}
    opt.step(grads)  # dict order of grads does not matter: matched by key
    np.testing.assert_array_equal(_np(params["a"][0]), 0.0)
    np.testing.assert_array_equal(_np(params["a"][1][0]), 2.5)
    np.testing.assert_array_equal(_np(params["b"]), -0.5)
    # Adam's first step moves every element by lr (bias-corrected m/sqrt(v) = sign(g))
    q = xp.asarray([1.0, -2.0, 3.0], device=device)
    optim.Adam([q], lr=0.1, eps=0.0).step([xp.asarray([0.3, -5.0, 1e-3], device=device)])
    np.testing.assert_allclose(_np(q), [0.9, -1.9, 2.9], rtol=1e-14)


def test_load_state_dict_bad_input_changes_nothing(device):
    p = [xp.ones((2, 3), dtype=xp.float64, device=device)]
    opt = optim.Adam(p, lr=0.1)
    opt.step([xp.ones((2, 3), dtype=xp.float64, device=device)])
    sd = opt.state_dict()
    sd["param_groups"][0]["lr"] = 0.5
    sd["state"][0]["exp_avg"] = xp.ones(6, dtype=xp.float64, device=device)
    with pytest.raises(ValueError, match=r"Adam.load_state_dict: state\[0\]\['exp_avg'\] must "
                                         r"have shape \(2, 3\)"):
        opt.load_state_dict(sd)
    assert opt.hyper["lr"] == 0.1 and opt.step_count == 1
    sd = opt.state_dict()
    sd["step"] = 1.0
    with pytest.raises(ValueError, match=r"Adam.load_state_dict: step must be an integer"):
        opt.load_state_dict(sd)
    with pytest.raises(ValueError, match=r"SGD.load_state_dict: the state belongs to another"):
        optim.SGD(p, lr=0.1).load_state_dict(opt.state_dict())
    # hyperparameters come with the state (torch's rule), amsgrad's buffer included
    other = optim.Adam(p, lr=0.1, amsgrad=True)
    other.step([xp.ones((2, 3), dtype=xp.float64, device=device)])
    opt.load_state_dict(other.state_dict())
    assert opt.hyper["amsgrad"] is True and "max_exp_avg_sq" in opt.state[0]


@pytest.mark.parametrize("op", ["sgd", "adam", "adamw", "adafactor"])
def test_flat_op_check_finite(device, op, blocked):
    def call(params, grads, **kw):
        st = [xp.zeros_like(p) for p in params]
        if op == "sgd":
            optim.sgd(params, grads, st, step=1, lr=0.1, momentum=0.5, **kw)
        elif op == "adafactor":
            optim.adafactor(params, grads, [None] * len(params), [None] * len(params), st,
                            step=1, **kw)
        else:
            getattr(optim, op)(params, grads, st, [xp.zeros_like(p) for p in params], step=1,
                               **kw)

    big = np.finfo(np.float32).max
    params = [_arr(np.ones(40), device, xp.float32), _arr(np.ones(50), device, xp.float32)]
    # finite values whose sum overflows are not mistaken for inf
    call(params, [_arr(np.full(40, big), device, xp.float32),
                  _arr(np.ones(50), device, xp.float32)], check_finite=True)
    before = [_np(p).copy() for p in params]
    bad = [_arr(np.ones(40), device, xp.float32), _arr(np.ones(50), device, xp.float32)]
    bad[1] = xp.where(xp.arange(50, device=device) == 37, xp.asarray(-np.inf, device=device,
                                                                       dtype=xp.float32), bad[1])
    with pytest.raises(optim.NonFiniteGradientError,
                       match=rf"^{op}: gradient is not finite .*grads\[1\]"):
        call(params, bad, check_finite=True)
    for b, p in zip(before, params):
        np.testing.assert_array_equal(_np(p), b)  # nothing updated, not even params[0]
    # two dtype groups: checked up front, before either group is updated
    mixed = [params[0], _arr(np.ones(3), device)]
    with pytest.raises(ValueError, match=rf"^{op}: gradient is not finite .*grads\[1\]"):
        call(mixed, [xp.ones_like(params[0]), _arr([0.0, np.nan, 1.0], device)],
             check_finite=True)
    np.testing.assert_array_equal(_np(params[0]), before[0])
