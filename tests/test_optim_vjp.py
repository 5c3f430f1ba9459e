"""Tests of tessera_array.optim's step VJPs (sgd_vjp, adam_vjp, adamw_vjp, adafactor_vjp).

Each VJP is checked in float64 against central finite differences of the forward
step it differentiates (the xp references): <v, J u> in random directions u for a
random cotangent v, and the whole J^T v component by component for small sizes.
A discrimination test shows that differentiating Adafactor's nominal decay beta2
instead of the step-dependent one would be caught. When torch is importable, the
VJPs are also checked against torch.autograd through torch-written steps and through
torch.optim's own functional steps with ``differentiable=True``.
"""

from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

import tessera_array as xp
from tessera_array import optim

REL = 1e-6  # the acceptance bound for the VJPs against finite differences
H = 1e-5  # central-difference step (inputs and directions are O(1); error ~ H**2)


def _have_torch() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except ValueError:  # sys.modules["torch"] is None: blocked
        return False


HAVE_TORCH = _have_torch()
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed (optional)")


def _np(a):
    return np.asarray(a._device._backend.to_host(a._data))


@pytest.fixture
def f64(device):
    if xp.float64 not in xp.__array_namespace_info__().dtypes(device=device).values():
        pytest.skip(f"{device} has no float64: finite differences need it")
    return device


# ---- the three steps as functions of named NumPy inputs -----------------------------
#
# A case is (step function, vjp function, input names, output names, kwargs). Inputs
# are a dict of float64 NumPy arrays (None for an absent state) plus "lr".

STEPS = {
    "sgd": (optim.sgd_reference, optim.sgd_vjp, ("param", "grad", "buf"), ("param", "buf")),
    "adam": (optim.adam_reference, optim.adam_vjp, ("param", "grad", "m", "v", "vmax"),
             ("param", "m", "v", "vmax")),
    "adamw": (lambda *a, **k: optim.adam_reference(*a, decoupled=True, **k), optim.adamw_vjp,
              ("param", "grad", "m", "v", "vmax"), ("param", "m", "v", "vmax")),
    "adafactor": (optim.adafactor_reference, optim.adafactor_vjp,
                  ("param", "grad", "row", "col", "var"), ("param", "row", "col", "var")),
}


def _to_dev(a, device, dtype=np.float64):
    return None if a is None else xp.asarray(np.array(a, dtype=dtype), device=device)


def _forward(kind, inputs, kwargs, device):
    fn, _, names, outs = STEPS[kind]
    args = [_to_dev(inputs[n], device) for n in names]
    res = fn(*args, lr=inputs["lr"], **kwargs)
    return {o: None if r is None else _np(r) for o, r in zip(outs, res)}


def _vjp(kind, inputs, cot, kwargs, device, dtype=np.float64):
    _, vjp, names, outs = STEPS[kind]
    args = [_to_dev(inputs[n], device, dtype) for n in names]
    cts = tuple(_to_dev(cot.get(o), device, dtype) for o in outs)
    res = vjp(*args, cotangents=cts, lr=inputs["lr"], **kwargs)
    out = {n: None if getattr(res, n) is None else _np(getattr(res, n)) for n in names}
    out["lr"] = float(_np(res.lr))
    return out


def _inputs(kind, shape, rng, *, kwargs):
    p = rng.standard_normal(shape)
    g = rng.standard_normal(shape)
    lr = kwargs.pop("lr")
    if kind == "sgd":
        buf = rng.standard_normal(shape) if kwargs.get("momentum", 0) else None
        return {"param": p, "grad": g, "buf": buf, "lr": lr}
    if kind in ("adam", "adamw"):
        m = rng.standard_normal(shape)
        v = rng.uniform(0.2, 2.0, shape)
        vmax = rng.uniform(0.2, 2.5, shape) if kwargs.get("amsgrad") else None
        return {"param": p, "grad": g, "m": m, "v": v, "vmax": vmax, "lr": lr}
    shapes = optim.adafactor_state_shapes(shape)
    rs, cs = kwargs.pop("row_scale", 1.0), kwargs.pop("col_scale", 1.0)  # test-only keys
    row = rs * rng.uniform(0.2, 2.0, shapes[0]) if shapes else None
    col = cs * rng.uniform(0.2, 2.0, shapes[1]) if shapes else None
    var = None if shapes else rng.uniform(0.2, 2.0, shape)
    return {"param": p, "grad": g, "row": row, "col": col, "var": var, "lr": lr}


def _dot(a: dict, b: dict) -> float:
    return sum(float(np.sum(a[k] * b[k])) for k in a if a[k] is not None and b.get(k) is not None)


def _shift(inputs, direction, t):
    out = dict(inputs)
    for k, u in direction.items():
        out[k] = inputs[k] + t * u
    return out


def _fd_directional(kind, inputs, cot, direction, kwargs, device):
    """<v, J u> by central differences."""
    fp = _forward(kind, _shift(inputs, direction, H), kwargs, device)
    fm = _forward(kind, _shift(inputs, direction, -H), kwargs, device)
    return (_dot(cot, fp) - _dot(cot, fm)) / (2 * H)


def _fd_full(kind, inputs, cot, kwargs, device):
    """J^T v, component by component, by central differences."""
    out = {}
    for k, x in inputs.items():
        if x is None:
            continue
        if k == "lr":
            h = H * x
            out[k] = (_dot(cot, _forward(kind, _shift(inputs, {k: 1.0}, h), kwargs, device))
                      - _dot(cot, _forward(kind, _shift(inputs, {k: 1.0}, -h), kwargs, device))
                      ) / (2 * h)
            continue
        gk = np.zeros(x.shape)
        for idx in np.ndindex(x.shape):
            e = np.zeros(x.shape)
            e[idx] = 1.0
            fp = _forward(kind, _shift(inputs, {k: e}, H), kwargs, device)
            fm = _forward(kind, _shift(inputs, {k: e}, -H), kwargs, device)
            gk[idx] = (_dot(cot, fp) - _dot(cot, fm)) / (2 * H)
        out[k] = gk
    return out


def _cotangent(kind, inputs, kwargs, device, rng):
    f0 = _forward(kind, inputs, kwargs, device)
    return {k: rng.standard_normal(v.shape) for k, v in f0.items() if v is not None}


def _direction(inputs, rng):
    return {k: (x * rng.standard_normal() if k == "lr" else rng.standard_normal(x.shape))
            for k, x in inputs.items() if x is not None}


def _flat(d: dict, keys) -> np.ndarray:
    return np.concatenate([np.ravel(d[k]) for k in keys])


SGD_CASES = [
    {"lr": 0.1},
    {"lr": 0.1, "weight_decay": 0.3, "maximize": True},
    {"lr": 0.05, "momentum": 0.9},
    {"lr": 0.05, "momentum": 0.9, "dampening": 0.3, "weight_decay": 0.1},
    {"lr": 0.07, "momentum": 0.8, "nesterov": True, "maximize": True, "weight_decay": 0.05},
]
ADAM_CASES = [
    {"lr": 0.01},
    {"lr": 0.02, "betas": (0.8, 0.95), "eps": 1e-3, "weight_decay": 0.1},
    {"lr": 0.01, "amsgrad": True, "maximize": True},
    {"lr": 0.03, "amsgrad": True, "weight_decay": 0.2, "eps": 0.05},
]
ADAFACTOR_CASES = [
    {"lr": 0.01},  # rho = lr, alpha = RMS(p)*rho, clip inactive for d=1 ... either
    {"lr": 0.05, "d": 0.2, "weight_decay": 0.1, "maximize": True},  # clip active
    {"lr": 0.02, "d": 50.0, "eps": (1e-2, 10.0)},  # clip off; alpha = eps2*rho
    {"lr": 2.0, "d": 0.5, "weight_decay": 0.01},  # rho = 1/sqrt(t) (lr only via decay)
    {"lr": 0.02, "decay": "pytorch", "beta2_decay": -0.6},
    {"lr": 0.02, "eps": (0.7, 1e-3)},  # the floor max(vhat, eps1**2) on some elements
    # the floor max(mean R, eps1) (small R, large C: vhat stays above eps1**2)
    {"lr": 0.02, "eps": (0.4, 1e-3), "row_scale": 0.05, "col_scale": 10.0},
]
SHAPES = [(), (7,), (4, 5), (2, 3, 4)]


def _cases():
    out = []
    for kw in SGD_CASES:
        for step in (1, 3):
            out.append(("sgd", kw, step))
    for kind in ("adam", "adamw"):
        for kw in ADAM_CASES:
            for step in (1, 4):
                kw2 = dict(kw)
                if kind == "adamw" and "weight_decay" not in kw2:
                    kw2["weight_decay"] = 0.05
                out.append((kind, kw2, step))
    for kw in ADAFACTOR_CASES:
        for step in ((1, 5) if kw.get("decay") != "pytorch" else (2, 5)):
            out.append(("adafactor", kw, step))
    out.append(("adafactor", {"lr": 0.02}, None))  # legacy: decay beta2, rho = lr
    return out


CASES = _cases()
IDS = [f"{k}-{'-'.join(f'{a}={b}' for a, b in kw.items())}-step{s}" for k, kw, s in CASES]


def _setup(kind, kw, step, shape, seed):
    rng = np.random.default_rng(seed)
    kwargs = dict(kw, step=step)
    inputs = _inputs(kind, shape, rng, kwargs=kwargs)
    return rng, inputs, kwargs


@pytest.mark.parametrize(("kind", "kw", "step"), CASES, ids=IDS)
def test_vjp_matches_directional_finite_differences(f64, kind, kw, step):
    for i, shape in enumerate(SHAPES):
        rng, inputs, kwargs = _setup(kind, kw, step, shape, 100 + i)
        cot = _cotangent(kind, inputs, kwargs, f64, rng)
        bar = _vjp(kind, inputs, cot, kwargs, f64)
        for _ in range(2):
            u = _direction(inputs, rng)
            want = _fd_directional(kind, inputs, cot, u, kwargs, f64)
            got = _dot(bar, u)
            assert abs(got - want) <= REL * abs(want), (shape, got, want)


@pytest.mark.parametrize(("kind", "kw", "step"), CASES, ids=IDS)
def test_vjp_matches_finite_differences_per_component(f64, kind, kw, step):
    for i, shape in enumerate([(), (3,), (2, 3)]):
        rng, inputs, kwargs = _setup(kind, kw, step, shape, 200 + i)
        cot = _cotangent(kind, inputs, kwargs, f64, rng)
        bar = _vjp(kind, inputs, cot, kwargs, f64)
        want = _fd_full(kind, inputs, cot, kwargs, f64)
        keys = list(want)
        assert {k for k, x in bar.items() if x is not None} == set(keys)
        w, g = _flat(want, keys), _flat(bar, keys)
        scale = np.max(np.abs(w))
        assert scale > 0
        np.testing.assert_allclose(g, w, rtol=REL, atol=REL * scale, err_msg=str(shape))


def test_vjp_cotangents_may_be_none(f64):
    """A None cotangent is zero: the result equals passing explicit zeros."""
    rng, inputs, kwargs = _setup("adam", {"lr": 0.01, "amsgrad": True}, 3, (3, 4), 7)
    cot = _cotangent("adam", inputs, kwargs, f64, rng)
    full = _vjp("adam", inputs, dict(cot, v=np.zeros((3, 4)), vmax=np.zeros((3, 4))),
                kwargs, f64)
    part = _vjp("adam", inputs, {"param": cot["param"], "m": cot["m"]}, kwargs, f64)
    for k in full:
        np.testing.assert_array_equal(part[k], full[k])


def test_vjp_state_that_the_step_ignores(f64):
    """SGD's buffer at step 1 gets zeros; without momentum it is passed on unchanged."""
    rng = np.random.default_rng(3)
    p, g, b, cb = (xp.asarray(rng.standard_normal(4), device=f64) for _ in range(4))
    cp = xp.asarray(rng.standard_normal(4), device=f64)
    r = optim.sgd_vjp(p, g, b, cotangents=(cp, cb), step=1, lr=0.1, momentum=0.9)
    np.testing.assert_array_equal(_np(r.buf), 0.0)
    r = optim.sgd_vjp(p, g, b, cotangents=(cp, cb), step=2, lr=0.1)
    np.testing.assert_array_equal(_np(r.buf), _np(cb))
    r = optim.sgd_vjp(p, g, None, cotangents=(cp, None), step=1, lr=0.1, momentum=0.9)
    assert r.buf is None


@pytest.mark.parametrize(("kind", "kw", "step"), [
    ("sgd", SGD_CASES[4], 3), ("adam", ADAM_CASES[2], 4), ("adamw", ADAM_CASES[3], 4),
    ("adafactor", ADAFACTOR_CASES[1], 5), ("adafactor", ADAFACTOR_CASES[0], 5)])
def test_vjp_float32_matches_float64(device, kind, kw, step):
    """float32 (every device has it) gives the float64 VJP to float32 precision."""
    for i, shape in enumerate([(7,), (3, 4)]):
        rng, inputs, kwargs = _setup(kind, kw, step, shape, 500 + i)
        cot = _cotangent(kind, inputs, kwargs, "cpu", rng)
        want = _vjp(kind, inputs, cot, kwargs, "cpu")
        got = _vjp(kind, inputs, cot, kwargs, device, np.float32)
        for k, w in want.items():
            if w is not None:
                assert k == "lr" or got[k].dtype == np.float32
                np.testing.assert_allclose(got[k], w, rtol=1e-4,
                                           atol=1e-4 * np.max(np.abs(w)), err_msg=k)


# ---- Adafactor's decay: the discrimination test --------------------------------------


@pytest.mark.parametrize("step", [1, 2, 10, 100])
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
def test_adafactor_vjp_uses_step_dependent_decay(f64, monkeypatch, step, shape):
    """The VJP through adafactor_decay passes; one on the nominal beta2 is > 5% wrong.

    "Wrong" is the largest relative error, in the 2-norm, of one input's cotangent
    (the moments' cotangents carry the decay most directly).
    """
    kw = {"lr": 0.02}  # beta2 = 0.999: the step's decay is 0 at step 1, 0.5 at 2, 0.9 at 10
    rng, inputs, kwargs = _setup("adafactor", kw, step, shape, 31 + step)
    cot = _cotangent("adafactor", inputs, kwargs, f64, rng)
    want = _fd_full("adafactor", inputs, cot, kwargs, f64)

    top = max(np.linalg.norm(np.ravel(w)) for w in want.values())

    def err(bar):  # over the cotangents that are not zero (row/col at step 1 are)
        return max(np.linalg.norm(np.ravel(bar[k] - w)) / np.linalg.norm(np.ravel(w))
                   for k, w in want.items() if np.linalg.norm(np.ravel(w)) > 1e-8 * top)

    assert err(_vjp("adafactor", inputs, cot, kwargs, f64)) <= REL
    # The mistake: the VJP differentiates the nominal decay beta2 (the forward keeps
    # the step-dependent one, as the finite differences above did).
    monkeypatch.setattr(sys.modules["tessera_array.optim.adafactor"], "adafactor_decay",
                        lambda beta2, step: beta2)
    nominal = err(_vjp("adafactor", inputs, cot, kwargs, f64))
    assert nominal > 0.05, nominal


# ---- any namespace; bad input ---------------------------------------------------------


def test_vjp_runs_on_numpy_arrays():
    """Written against the inputs' namespace: NumPy arrays give NumPy's results."""
    rng = np.random.default_rng(5)
    for kind, kw in (("sgd", {"lr": 0.1, "momentum": 0.9}), ("adam", {"lr": 0.01, "amsgrad": True}),
                     ("adafactor", {"lr": 0.02, "d": 0.3}), ("adafactor", {"lr": 0.02})):
        for shape in ((6,), (3, 4)):
            kwargs = dict(kw, step=3)
            inputs = _inputs(kind, shape, rng, kwargs=kwargs)
            _, vjp, names, outs = STEPS[kind]
            cts = tuple(rng.standard_normal(np.shape(inputs[n]))
                        if inputs.get(n) is not None else None for n in outs)
            ours = _vjp(kind, inputs, dict(zip(outs, cts)), kwargs, "cpu")
            res = vjp(*(inputs[n] for n in names), cotangents=cts, lr=inputs["lr"], **kwargs)
            assert isinstance(res.grad, np.ndarray)
            for n in names:
                if ours[n] is not None:
                    np.testing.assert_allclose(np.asarray(getattr(res, n)), ours[n],
                                               rtol=1e-13, atol=1e-15)
            np.testing.assert_allclose(float(res.lr), ours["lr"], rtol=1e-13)


def test_vjp_docstring_example():
    import doctest

    from tessera_array.optim import _vjp

    assert doctest.testmod(_vjp).failed == 0


def test_vjp_bad_input():
    p = xp.ones((3, 4))
    with pytest.raises(ValueError, match=r"adam_vjp: grad must have shape \(3, 4\)"):
        optim.adam_vjp(p, xp.ones(3), p, p, cotangents=(p, None, None, None), step=1)
    with pytest.raises(TypeError, match=r"adam_vjp: cotangents must be a tuple"):
        optim.adam_vjp(p, p, p, p, cotangents=(p,), step=1)
    with pytest.raises(ValueError, match=r"adamw_vjp: vmax is required"):
        optim.adamw_vjp(p, p, p, p, cotangents=(p, None, None, None), step=1, amsgrad=True)
    with pytest.raises(ValueError, match=r"sgd_vjp: step must be an integer >= 1"):
        optim.sgd_vjp(p, p, cotangents=(p, None), step=0, lr=0.1)
    with pytest.raises(ValueError, match=r"sgd_vjp: buf is required"):
        optim.sgd_vjp(p, p, None, cotangents=(p, None), step=2, lr=0.1, momentum=0.9)
    with pytest.raises(ValueError, match=r"sgd_vjp: cotangents.buf must be None"):
        optim.sgd_vjp(p, p, None, cotangents=(p, p), step=2, lr=0.1)
    with pytest.raises(ValueError, match=r"adafactor_vjp: row must have shape \(3, 1\)"):
        optim.adafactor_vjp(p, p, xp.ones((4, 1)), xp.ones((1, 4)),
                            cotangents=(p, None, None, None), step=1)
    with pytest.raises(ValueError, match=r"adafactor_vjp: cotangents.col must have shape"):
        optim.adafactor_vjp(p, p, xp.ones((3, 1)), xp.ones((1, 4)),
                            cotangents=(p, None, xp.ones((1, 3)), None), step=1)
    with pytest.raises(ValueError, match=r"adafactor_vjp: decay must be one of"):
        optim.adafactor_vjp(p, p, xp.ones((3, 1)), xp.ones((1, 4)),
                            cotangents=(p, None, None, None), step=1, decay="nominal")
    with pytest.raises(TypeError, match=r"adam_vjp: m must have param's dtype float64"):
        optim.adam_vjp(p, p, xp.ones((3, 4), dtype=xp.float32), p,
                       cotangents=(p, None, None, None), step=1)
    with pytest.raises(TypeError, match=r"sgd_vjp: param must have a real floating dtype"):
        optim.sgd_vjp(xp.ones(3, dtype=xp.int64), xp.ones(3, dtype=xp.int64),
                      cotangents=(None, None), step=1, lr=0.1)
    with pytest.raises(TypeError, match=r"sgd_vjp: param must be an array"):
        optim.sgd_vjp([1.0], p, cotangents=(p, None), step=1, lr=0.1)


# ---- torch.autograd cross-checks (optional: torch is not a dependency) ------------------


def _torch_sgd(torch, p, g, buf, lr, *, step, momentum=0.0, dampening=0.0, weight_decay=0.0,
               nesterov=False, maximize=False):
    g = -g if maximize else g
    if weight_decay != 0:
        g = g + weight_decay * p
    if momentum != 0:
        buf = g if step == 1 else momentum * buf + (1 - dampening) * g
        g = g + momentum * buf if nesterov else buf
    return p - lr * g, buf


def _torch_adam(torch, p, g, m, v, vmax, lr, *, step, betas=(0.9, 0.999), eps=1e-8,
                weight_decay=0.0, amsgrad=False, maximize=False, decoupled=False):
    b1, b2 = betas
    g = -g if maximize else g
    if weight_decay != 0:
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
    m = torch.lerp(m, g, 1 - b1)
    v = b2 * v + (1 - b2) * g * g
    if amsgrad:
        vmax = torch.maximum(vmax, v)
    denom = torch.sqrt(vmax if amsgrad else v) / (1 - b2**step) ** 0.5 + eps
    return p - lr / (1 - b1**step) * m / denom, m, v, vmax


def _torch_adafactor(torch, p, g, row, col, var, lr, *, step, beta2=0.999, beta2_decay=-0.8,
                     decay="debiased", eps=(None, 1e-3), d=1.0, weight_decay=0.0,
                     maximize=False):
    if step is None:  # the legacy step: decay beta2, relative step lr
        rate, rho = 1 - beta2, lr
    else:
        rate = step**beta2_decay if decay == "pytorch" else 1 - optim.adafactor_decay(beta2, step)
        rho = torch.clamp(lr, max=1 / step**0.5)  # min(lr, 1/sqrt(t)); ties pass to lr
    e1 = float(np.finfo(np.float64).eps) if eps[0] is None else eps[0]
    n = max(p.numel(), 1) ** 0.5
    alpha = torch.clamp(torch.linalg.vector_norm(p) / n, min=eps[1]) * rho
    if weight_decay != 0:
        p = p * (1 - lr * weight_decay)
    g = -g if maximize else g
    g2 = g * g
    if p.ndim > 1:
        row = torch.lerp(row, g2.mean(-1, keepdim=True), rate)
        col = torch.lerp(col, g2.mean(-2, keepdim=True), rate)
        vhat = row * col / torch.clamp(row.mean(-2, keepdim=True), min=e1)
    else:
        var = torch.lerp(var, g2, rate)
        vhat = var
    u = g / torch.sqrt(torch.clamp(vhat, min=e1 * e1))
    den = torch.clamp(torch.linalg.vector_norm(u) / n / d, min=1.0)
    return p - alpha / den * u, row, col, var


TORCH_STEPS = {"sgd": _torch_sgd, "adam": _torch_adam, "adafactor": _torch_adafactor,
               "adamw": lambda *a, **k: _torch_adam(*a, decoupled=True, **k)}


def _torch_vjp(kind, inputs, cot, kwargs, step_fn):
    import torch

    _, _, names, outs = STEPS[kind]
    leaves = {k: torch.tensor(np.asarray(x, dtype=np.float64), requires_grad=True)
              for k, x in inputs.items() if x is not None}
    res = step_fn(torch, *(leaves.get(n) for n in names), leaves["lr"], **kwargs)
    pairs = [(r, torch.from_numpy(cot[o])) for o, r in zip(outs, res)
             if r is not None and o in cot]
    grads = torch.autograd.grad([r for r, _ in pairs], list(leaves.values()),
                                grad_outputs=[c for _, c in pairs], allow_unused=True)
    return {k: (np.zeros(np.shape(inputs[k])) if gk is None else gk.numpy())
            for k, gk in zip(leaves, grads)}


def _assert_close_to(got, want, rtol):
    for k, w in want.items():
        np.testing.assert_allclose(np.asarray(got[k]), w, rtol=rtol,
                                   atol=rtol * max(np.max(np.abs(w)), 1e-300), err_msg=k)


@needs_torch
@pytest.mark.parametrize(("kind", "kw", "step"), CASES, ids=IDS)
def test_vjp_matches_torch_autograd(f64, kind, kw, step):
    """Against torch.autograd through the same step written with torch."""
    for i, shape in enumerate([(6,), (3, 4), (2, 3, 4)]):
        rng, inputs, kwargs = _setup(kind, kw, step, shape, 300 + i)
        cot = _cotangent(kind, inputs, kwargs, f64, rng)
        want = _torch_vjp(kind, inputs, cot, kwargs, TORCH_STEPS[kind])
        _assert_close_to(_vjp(kind, inputs, cot, kwargs, f64), want, 1e-10)


def _torch_optim_step(kind):
    """torch.optim's own functional step (``differentiable=True``) as a step function."""
    import torch
    import torch.optim.adam as tadam
    import torch.optim.sgd as tsgd

    def sgd(torch_, p, g, buf, lr, *, step, **kw):
        p, bufs = p.clone(), [None if buf is None else buf.clone()]
        tsgd.sgd([p], [g], bufs, lr=lr, foreach=False, **kw)
        return p, bufs[0]

    def adam(torch_, p, g, m, v, vmax, lr, *, step, betas=(0.9, 0.999), decoupled=False, **kw):
        p, m, v = p.clone(), m.clone(), v.clone()
        vmaxes = [vmax.clone()] if vmax is not None else []
        kw.setdefault("amsgrad", False)
        kw.setdefault("eps", 1e-8)
        kw.setdefault("weight_decay", 0.0)
        kw.setdefault("maximize", False)
        tadam.adam([p], [g], [m], [v], vmaxes, [torch.tensor(float(step - 1), dtype=torch.float64)],
                   foreach=False, differentiable=True, decoupled_weight_decay=decoupled,
                   lr=lr, beta1=betas[0], beta2=betas[1], **kw)
        return p, m, v, vmaxes[0] if vmaxes else None

    return {"sgd": sgd, "adam": adam,
            "adamw": lambda *a, **k: adam(*a, decoupled=True, **k)}[kind]


@needs_torch
@pytest.mark.parametrize(("kind", "kw", "step"),
                         [c for c in CASES if c[0] in ("sgd", "adam", "adamw")
                          and (c[0] != "sgd" or c[2] > 1 or not c[1].get("momentum"))],
                         ids=[i for i, c in zip(IDS, CASES) if c[0] in ("sgd", "adam", "adamw")
                              and (c[0] != "sgd" or c[2] > 1 or not c[1].get("momentum"))])
def test_vjp_matches_torch_optim_differentiable(f64, kind, kw, step):
    """Against torch.optim's functional SGD/Adam/AdamW with ``differentiable=True``.

    SGD with momentum is compared after step 1 only: torch detaches the first
    momentum buffer (``buf = grad.detach().clone()``), so its autograd sees no
    gradient through it, where this VJP differentiates ``buf = g``.
    """
    for i, shape in enumerate([(6,), (3, 4)]):
        rng, inputs, kwargs = _setup(kind, kw, step, shape, 400 + i)
        if kind == "sgd":
            kwargs.setdefault("momentum", 0.0)
            kwargs.setdefault("dampening", 0.0)
            kwargs.setdefault("weight_decay", 0.0)
            kwargs.setdefault("nesterov", False)
            kwargs.setdefault("maximize", False)
        cot = _cotangent(kind, inputs, kwargs, f64, rng)
        want = _torch_vjp(kind, inputs, cot, kwargs, _torch_optim_step(kind))
        _assert_close_to(_vjp(kind, inputs, cot, kwargs, f64), want, 1e-10)
