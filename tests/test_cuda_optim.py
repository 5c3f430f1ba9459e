"""The CUDA optimizer-step launchers (``backends/_cupy/optim.py``) against the NumPy
backend's.

Each step runs over ten tensors of mixed sizes (0-d, one element, tails of every kind,
one of 3 * 2**20 + 7 elements: many blocks) for several steps, from random parameters,
gradients and state, and is compared with the NumPy backend's launcher on the same host
data: SGD and Adam/AdamW bit for bit (the kernels round every operation as NumPy does),
Adafactor to the dtype's tolerance (its sums run in another order). Scratch buffers come
from ``backends/_cupy/_kernels.empty``, poisoned by the autouse fixture, so a partial sum
read before it is written cannot pass. check_finite, strided views (updated in place),
the work-item layouts and the errors are checked too.

Without a CUDA backend the module is skipped with the reason; with
``TESSERA_REQUIRE_BACKENDS`` naming ``cuda`` that skip is a failure instead.
"""

from __future__ import annotations

import math
import warnings

import _gate
import numpy as np
import pytest
from _poison import poisoned_empty
from tessera_array.backends.numpy import optim as np_optim

from tessera_array._dispatch import KernelRegistry
from tessera_array.optim.adafactor import adafactor_decay

BACKEND = _gate.require_backend("cuda")

import cupy
from tessera_array.backends._cupy import _kernels
from tessera_array.backends._cupy import optim as cu_optim

BIG = 3 * 2**20 + 7
SHAPES = [(), (1,), (7,), (3, 5), (2, 3, 4), (1000,), (33, 65), (4096,), (4097,), (BIG,)]
DTYPES = [np.float32, np.float64]
STEPS = 4


@pytest.fixture(autouse=True)
def poisoned(monkeypatch):
    """Every buffer the launchers take from _kernels.empty starts as 0xFF bytes (NaN)."""
    monkeypatch.setattr(_kernels, "empty", poisoned_empty(cupy))


def dev(a):
    return cupy.asarray(np.array(a, copy=True))


def rand(rng, shape, dtype, scale=1.0, positive=False):
    """Random values as an array of ``shape`` (0-d included: an array, never a NumPy scalar,
    which the NumPy launchers could not update in place)."""
    a = rng.standard_normal(shape) * scale
    return np.asarray(np.abs(a) if positive else a).astype(dtype)


def assert_exact(got, ref):
    for g, r in zip(got, ref):
        np.testing.assert_array_equal(g.get(), r, strict=True)


def assert_close(got, ref, dtype):
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for g, r in zip(got, ref):
        g = g.get()
        assert g.shape == r.shape and g.dtype == r.dtype
        np.testing.assert_array_equal(np.isfinite(g), np.isfinite(r))  # NaN only where NumPy's
        top = float(np.max(np.abs(r[np.isfinite(r)]), initial=0.0))
        np.testing.assert_allclose(g, r, rtol=tol, atol=tol * max(1.0, top))


def test_register_mirrors_numpy_backend():
    ours, theirs = KernelRegistry(), KernelRegistry()
    cu_optim.register(ours, "cuda")
    np_optim.register(theirs, "numpy")

    def strip(reg):
        return {(k.op, k.dtype, k.variant) for k in KernelRegistry.keys(reg)}

    assert strip(ours) == strip(theirs)


# ---- SGD ---------------------------------------------------------------------------------

SGD_CONFIGS = [
    {"momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01, "nesterov": True,
     "maximize": False},
    {"momentum": 0.9, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False,
     "maximize": True},
    {"momentum": 0.0, "dampening": 0.0, "weight_decay": 0.05, "nesterov": False,
     "maximize": False},
    {"momentum": 0.5, "dampening": 0.5, "weight_decay": 0.1, "nesterov": False,
     "maximize": True},
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("config", range(len(SGD_CONFIGS)))
def test_sgd_matches_numpy(dtype, config):
    """Several steps over ten tensors equal the NumPy launcher's bit for bit."""
    kw = SGD_CONFIGS[config]
    rng = np.random.default_rng(10 + config)
    pn = [rand(rng, s, dtype) for s in SHAPES]
    bn = [rand(rng, s, dtype) for s in SHAPES]  # overwritten on the first step
    pd, bd = [dev(a) for a in pn], [dev(a) for a in bn]
    momentum = kw["momentum"] != 0
    for t in range(1, STEPS + 1):
        grads = [rand(rng, s, dtype) for s in SHAPES]
        assert np_optim.sgd_step(pn, grads, bn if momentum else None, lr=0.01,
                                 first=t == 1, **kw) == ()
        assert cu_optim.sgd_step(pd, [dev(g) for g in grads], bd if momentum else None,
                                 lr=0.01, first=t == 1, **kw) == ()
    assert_exact(pd, pn)
    if momentum:
        assert_exact(bd, bn)


# ---- Adam / AdamW -----------------------------------------------------------------------

ADAM_CONFIGS = [
    {"weight_decay": 0.01, "amsgrad": False, "maximize": False},
    {"weight_decay": 0.0, "amsgrad": True, "maximize": True},
    {"weight_decay": 0.1, "amsgrad": True, "maximize": False},
]


def _adam_state(rng, dtype):
    return [[rand(rng, s, dtype, 0.1) for s in SHAPES],
            [rand(rng, s, dtype, 0.01, positive=True) for s in SHAPES],
            [rand(rng, s, dtype, 0.01, positive=True) for s in SHAPES]]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["adam_step", "adamw_step"])
@pytest.mark.parametrize("config", range(len(ADAM_CONFIGS)))
def test_adam_matches_numpy(dtype, op, config):
    kw = dict(ADAM_CONFIGS[config], lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8)
    rng = np.random.default_rng(20 + config)
    pn = [rand(rng, s, dtype) for s in SHAPES]
    sn = _adam_state(rng, dtype)
    pd, sd = [dev(a) for a in pn], [[dev(a) for a in st] for st in sn]
    if not kw["amsgrad"]:
        sn[2] = sd[2] = None
    for t in range(1, STEPS + 1):
        grads = [rand(rng, s, dtype) for s in SHAPES]
        assert getattr(np_optim, op)(pn, grads, *sn, step=t, **kw) == ()
        assert getattr(cu_optim, op)(pd, [dev(g) for g in grads], *sd, step=t, **kw) == ()
    assert_exact(pd, pn)
    for got, ref in zip(sd, sn):
        if ref is not None:
            assert_exact(got, ref)


# ---- Adafactor ---------------------------------------------------------------------------

# factored (2+ dims: batches, one row, one column, wide, tall, empty rows or columns) and
# unfactored (0-d, 1-d) tensors
AF_SHAPES = [(), (1,), (7,), (3, 5), (2, 3, 4), (33, 65), (3, 1, 17), (64, 1), (1, 70),
             (0, 5), (4, 0), (300, 2100), (4097,), (BIG,), (2, 37, 1030), (0, 1500)]


def _adafactor_state(rng, shape, dtype):
    if len(shape) < 2:
        return None, None, rand(rng, shape, dtype, 0.01, positive=True)
    return (rand(rng, shape[:-1] + (1,), dtype, 0.01, positive=True),
            rand(rng, shape[:-2] + (1, shape[-1]), dtype, 0.01, positive=True), None)


def _np_adafactor(*args, **kw):
    """The NumPy launcher; an empty tensor's NaN moments (a mean over no rows) warn there."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np_optim.adafactor_step(*args, **kw)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weight_decay,maximize,eps1", [(0.0, False, None), (0.01, True, 1e-30)])
def test_adafactor_matches_numpy(dtype, weight_decay, maximize, eps1):
    """Several steps (the decay rate above and below 1/2: both lerp forms) within the dtype's
    tolerance; NaN exactly where NumPy's has it (the moments of empty rows or columns)."""
    rng = np.random.default_rng(30)
    pn = [rand(rng, s, dtype) for s in AF_SHAPES]
    state = [_adafactor_state(rng, s, dtype) for s in AF_SHAPES]
    rn, cn, vn = ([st[j] for st in state] for j in range(3))
    pd = [dev(a) for a in pn]
    rd, cd, vd = ([None if a is None else dev(a) for a in lst] for lst in (rn, cn, vn))
    for t in range(1, STEPS + 1):
        grads = [rand(rng, s, dtype) for s in AF_SHAPES]
        kw = {"lr": 0.01, "rho": min(0.01, 1 / math.sqrt(t)),
              "rate": 1 - adafactor_decay(0.999, t), "eps1": eps1, "eps2": 1e-3, "d": 1.0,
              "weight_decay": weight_decay, "maximize": maximize}
        assert _np_adafactor(pn, grads, rn, cn, vn, **kw) == ()
        assert cu_optim.adafactor_step(pd, [dev(g) for g in grads], rd, cd, vd, **kw) == ()
    assert_close(pd, pn, dtype)
    for got, ref in zip(rd + cd + vd, rn + cn + vn):
        if ref is not None:
            assert_close([got], [ref], dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_adafactor_clipping_and_legacy_rate(dtype):
    """A small d (the update clipped by RMS(U)/d) and the legacy constant rate."""
    rng = np.random.default_rng(31)
    shapes = [(40, 50), (17,), (5, 6, 7)]
    pn = [rand(rng, s, dtype) for s in shapes]
    state = [_adafactor_state(rng, s, dtype) for s in shapes]
    rn, cn, vn = ([st[j] for st in state] for j in range(3))
    pd = [dev(a) for a in pn]
    rd, cd, vd = ([None if a is None else dev(a) for a in lst] for lst in (rn, cn, vn))
    for _ in range(3):
        grads = [rand(rng, s, dtype, 10.0) for s in shapes]
        kw = {"lr": 0.3, "rho": 0.3, "rate": 1 - 0.9, "eps1": 1e-10, "eps2": 0.5, "d": 0.1,
              "weight_decay": 0.0, "maximize": False}
        _np_adafactor(pn, grads, rn, cn, vn, **kw)
        cu_optim.adafactor_step(pd, [dev(g) for g in grads], rd, cd, vd, **kw)
    assert_close(pd, pn, dtype)


def _misaligned(a):
    """A C-contiguous device copy of ``a`` starting one element past a 16-byte boundary."""
    buf = cupy.empty(a.size + 1, a.dtype)
    out = buf[1:].reshape(a.shape)
    out[...] = cupy.asarray(a)
    return out


@pytest.mark.parametrize("dtype", DTYPES)
def test_adafactor_vector_and_single_element_paths_agree(dtype):
    """Factored tensors whose columns make whole 16-byte groups take the vector loops
    unless g or p starts off a 16-byte boundary: both paths against NumPy, over several
    U^2 and update items per batch (R * C past USQ_CHUNK and APPLY_CHUNK)."""
    rng = np.random.default_rng(33)
    shapes = [(2, 70, 1000), (130, 4100)]
    assert all(math.prod(s[-2:]) > max(cu_optim.USQ_CHUNK, cu_optim.APPLY_CHUNK)
               for s in shapes)
    for move_p, move_g in ((False, False), (True, False), (False, True)):
        pn = [rand(rng, s, dtype) for s in shapes]
        state = [_adafactor_state(rng, s, dtype) for s in shapes]
        rn, cn, vn = ([st[j] for st in state] for j in range(3))
        pd = [_misaligned(a) if move_p else dev(a) for a in pn]
        rd, cd = ([dev(a) for a in lst] for lst in (rn, cn))
        for t in range(1, 3):
            grads = [rand(rng, s, dtype) for s in shapes]
            kw = {"lr": 0.01, "rho": 0.01, "rate": 1 - adafactor_decay(0.999, t),
                  "eps1": None, "eps2": 1e-3, "d": 1.0, "weight_decay": 0.01,
                  "maximize": False}
            _np_adafactor(pn, grads, rn, cn, vn, **kw)
            gd = [_misaligned(g) if move_g else dev(g) for g in grads]
            assert cu_optim.adafactor_step(pd, gd, rd, cd, vn, **kw) == ()
        assert_close(pd, pn, dtype)


def test_adafactor_layout_covers_every_element_once():
    """The host's work items: U^2 and update items each cover each element once and never
    cross a batch; row and column items cover every row and column; slots are
    consecutive."""
    shapes = [(), (5,), (2, 3, 4), (3000, 7), (1, 9000), (0, 4), (2, 0), (4097,),
              (3, 37, 1030), (0, 2048), (2, 0, 4096), (2, 300, 257)]
    lay = cu_optim.adafactor_layout(shapes, 32)
    kinds = lay.stats[:, 0] >> 32
    tens = lay.stats[:, 0] & 0xFFFFFFFF
    for t, shape in enumerate(shapes):
        n = math.prod(shape)
        info = lay.tinfo[t]
        assert info[0] == n and info[9] == (len(shape) >= 2)
        upd = lay.update[lay.update[:, 0] == t]
        app = lay.apply[lay.apply[:, 0] == t]
        for items in (upd, app):
            covered = np.concatenate([np.arange(lo, lo + c) for _, lo, c, _ in items]) \
                if items.size else np.zeros(0, np.int64)
            np.testing.assert_array_equal(np.sort(covered), np.arange(n))
        if n:
            np.testing.assert_array_equal(upd[:, 3], info[6] + np.arange(info[7]))
            psq = lay.stats[(kinds == cu_optim.K_PSQ) & (tens == t)]
            np.testing.assert_array_equal(psq[:, 3], info[4] + np.arange(info[5]))
        if len(shape) >= 2:
            B, R, C = cu_optim.factored_dims(shape)
            for items in (upd, app) if n else ():  # each item inside one batch
                assert np.all(items[:, 1] // (R * C) == (items[:, 1] + items[:, 2] - 1) // (R * C))
            tiled = C >= cu_optim.TILE_MIN_C and R > 0
            row_kind = cu_optim.K_TILE if tiled else cu_optim.K_ROWS
            rows = lay.stats[(kinds == row_kind) & (tens == t)]
            got = np.concatenate([np.arange(r0, r0 + nr) for _, r0, nr, _ in rows]) \
                if rows.size else np.zeros(0, np.int64)
            np.testing.assert_array_equal(np.sort(got), np.arange(B * R))
            if tiled:  # tiles inside one batch; column-sum slots consecutive per tile
                assert np.all(rows[:, 2] <= cu_optim.TILE_ROWS)
                assert np.all(rows[:, 1] // R == (rows[:, 1] + rows[:, 2] - 1) // R)
                assert info[11] == -(-R // cu_optim.TILE_ROWS)
                np.testing.assert_array_equal(rows[:, 3], info[10] + C * np.arange(len(rows)))
                assert info[10] % 4 == 0 and info[10] + C * len(rows) <= lay.n_cp
                kinds2 = lay.rmean[:, 0] >> 32
                cols = lay.rmean[(kinds2 == cu_optim.K_CFIN)
                                 & ((lay.rmean[:, 0] & 0xFFFFFFFF) == t)]
                assert not np.any((kinds == cu_optim.K_COLS) & (tens == t))
            else:
                cols = lay.stats[(kinds == cu_optim.K_COLS) & (tens == t)]
            got = np.concatenate([b * C + np.arange(c0, c0 + nc) for _, b, c0, nc in cols]) \
                if cols.size else np.zeros(0, np.int64)
            np.testing.assert_array_equal(np.sort(got), np.arange(B * C))
            assert np.all(cols[:, 3] <= min(32, 1 << max(0, C - 1).bit_length()))


def test_flat_items_cover_every_element_once():
    sizes = [0, 1, 4095, 4096, 4097, 3 * cu_optim.CHUNK + 5]
    items = cu_optim.flat_items(sizes)
    assert np.all(items[:, 2] <= cu_optim.CHUNK) and np.all(items[:, 2] > 0)
    for t, n in enumerate(sizes):
        mine = items[items[:, 0] == t]
        got = np.concatenate([np.arange(lo, lo + c) for _, lo, c, _ in mine]) if mine.size \
            else np.zeros(0, np.int64)
        np.testing.assert_array_equal(got, np.arange(n))


# ---- check_finite --------------------------------------------------------------------------


def _call(op, pd, gd, sd, check_finite):
    if op == "sgd_step":
        return cu_optim.sgd_step(pd, gd, sd[0], lr=0.1, momentum=0.9, dampening=0.0,
                                 weight_decay=0.0, nesterov=False, maximize=False, first=False,
                                 check_finite=check_finite)
    if op in ("adam_step", "adamw_step"):
        return getattr(cu_optim, op)(pd, gd, sd[0], sd[1], sd[2], lr=0.1, beta1=0.9,
                                     beta2=0.99, eps=1e-8, weight_decay=0.1, amsgrad=True,
                                     maximize=False, step=2, check_finite=check_finite)
    return cu_optim.adafactor_step(pd, gd, sd[0], sd[1], sd[2], lr=0.01, rho=0.01, rate=0.3,
                                   eps1=None, eps2=1e-3, d=1.0, weight_decay=0.1,
                                   maximize=False, check_finite=check_finite)


def _states(op, rng, shapes):
    if op == "adafactor_step":
        st = [_adafactor_state(rng, s, np.float32) for s in shapes]
        return [[None if x[j] is None else x[j] for x in st] for j in range(3)]
    k = 1 if op == "sgd_step" else 3
    return [[rand(rng, s, np.float32, 0.1, positive=True) for s in shapes] for _ in range(k)]


@pytest.mark.parametrize("op", ["sgd_step", "adam_step", "adamw_step", "adafactor_step"])
def test_check_finite_updates_nothing(op):
    rng = np.random.default_rng(40)
    shapes = [(5,), (3, 4), (6,), (BIG,)]
    ps = [rand(rng, s, np.float32) for s in shapes]
    grads = [rand(rng, s, np.float32) for s in shapes]
    grads[0][1] = np.finfo(np.float32).max  # finite (its square overflows): not flagged
    grads[1][2, 1] = np.nan
    grads[2][0] = np.inf
    grads[3][BIG - 1] = -np.inf  # in the last block of the last tensor
    states = _states(op, rng, shapes)
    pd, gd = [dev(p) for p in ps], [dev(g) for g in grads]
    sd = [[None if a is None else dev(a) for a in lst] for lst in states]
    assert _call(op, pd, gd, sd, True) == (1, 2, 3) == np_optim.nonfinite(grads)
    assert_exact(pd, ps)
    for got, ref in zip(sd, states):
        assert_exact([g for g in got if g is not None], [r for r in ref if r is not None])
    # all finite: checked, then the same update as without the check
    grads = [rand(rng, s, np.float32) for s in shapes]
    twin_p = [dev(p) for p in ps]
    twin_s = [[None if a is None else dev(a) for a in lst] for lst in states]
    assert _call(op, pd, [dev(g) for g in grads], sd, True) == ()
    assert _call(op, twin_p, [dev(g) for g in grads], twin_s, False) == ()
    assert_exact(pd, [p.get() for p in twin_p])


def test_nonfinite_matches_numpy():
    rng = np.random.default_rng(41)
    grads = [rand(rng, s, np.float64) for s in SHAPES]
    assert cu_optim.nonfinite([dev(g) for g in grads]) == ()
    grads[0][()] = np.nan
    grads[9][12345] = np.inf
    grads[6][32, 64] = -np.inf
    assert cu_optim.nonfinite([dev(g) for g in grads]) == (0, 6, 9) == np_optim.nonfinite(grads)
    assert cu_optim.nonfinite([]) == ()


# ---- layouts, caches, errors ----------------------------------------------------------------


@pytest.mark.parametrize("op", ["sgd_step", "adam_step", "adafactor_step"])
def test_strided_views_updated_in_place(op):
    """Views (base[:, ::2]) are updated in place, as the NumPy backend updates them; the
    other elements of the base keep their values."""
    rng = np.random.default_rng(50)
    base_shapes = [(6, 10), (40,), (3, 8, 6)]
    views = [np.s_[:, ::2], np.s_[::-3], np.s_[:, 1:7, ::2]]
    bases = [rand(rng, s, np.float64) for s in base_shapes]
    pn = [b[v] for b, v in zip(bases, views)]
    shapes = [p.shape for p in pn]
    grads = [rand(rng, s, np.float64) for s in shapes]
    if op == "adafactor_step":
        st = [_adafactor_state(rng, s, np.float64) for s in shapes]
        sn = [[x[j] for x in st] for j in range(3)]
    else:
        sn = [[rand(rng, s, np.float64, 0.1, positive=True) for s in shapes]
              for _ in range(1 if op == "sgd_step" else 3)]
    bd = [dev(b) for b in bases]
    pd = [b[v] for b, v in zip(bd, views)]
    sd = [[None if a is None else dev(a) for a in lst] for lst in sn]
    gd = [dev(g) for g in grads]
    if op == "sgd_step":
        kw = {"lr": 0.1, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.01,
              "nesterov": True, "maximize": False, "first": False}
        np_optim.sgd_step(pn, grads, sn[0], **kw)
        cu_optim.sgd_step(pd, gd, sd[0], **kw)
        assert_exact(sd[0], sn[0])
        assert_exact(bd, bases)
    elif op == "adam_step":
        kw = {"lr": 0.1, "beta1": 0.9, "beta2": 0.99, "eps": 1e-8, "weight_decay": 0.1,
              "amsgrad": True, "maximize": True, "step": 3}
        np_optim.adam_step(pn, grads, *sn, **kw)
        cu_optim.adam_step(pd, gd, *sd, **kw)
        for got, ref in zip(sd, sn):
            assert_exact(got, ref)
        assert_exact(bd, bases)
    else:
        kw = {"lr": 0.01, "rho": 0.01, "rate": 0.3, "eps1": None, "eps2": 1e-3, "d": 1.0,
              "weight_decay": 0.1, "maximize": False}
        _np_adafactor(pn, grads, *sn, **kw)
        cu_optim.adafactor_step(pd, gd, *sd, **kw)
        assert_close(bd, bases, np.float64)
        for got, ref in zip(sd, sn):
            assert_close([g for g in got if g is not None], [r for r in ref if r is not None],
                         np.float64)


def test_tables_kept_per_buffers(monkeypatch):
    """A second step over the same buffers uploads no new table."""
    monkeypatch.setattr(cu_optim, "_tables", {})
    monkeypatch.setattr(cu_optim, "_plans", {})
    rng = np.random.default_rng(60)
    pd = [dev(rand(rng, s, np.float32)) for s in SHAPES[:4]]
    gd = [dev(rand(rng, s, np.float32)) for s in SHAPES[:4]]
    kw = {"lr": 0.1, "momentum": 0.0, "dampening": 0.0, "weight_decay": 0.0,
          "nesterov": False, "maximize": False, "first": True}
    cu_optim.sgd_step(pd, gd, None, **kw)
    tables, plans = dict(cu_optim._tables), dict(cu_optim._plans)
    cu_optim.sgd_step(pd, gd, None, **kw)
    assert len(tables) == 1 and len(plans) == 1
    assert cu_optim._tables.keys() == tables.keys() and cu_optim._plans.keys() == plans.keys()
    assert all(cu_optim._tables[k] is tables[k] for k in tables)


def test_optimizer_bad_input():
    rng = np.random.default_rng(70)
    p, g = dev(rand(rng, (4,), np.float32)), dev(rand(rng, (4,), np.float32))
    kw = {"lr": 0.1, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False,
          "maximize": False, "first": True}
    with pytest.raises(TypeError, match=r"sgd_step: parameters must be float32 or float64\. "
                       r"Received: params\[0\].dtype=int32"):
        cu_optim.sgd_step([dev(np.ones(4, np.int32))], [dev(np.ones(4, np.int32))],
                          [dev(np.ones(4, np.int32))], **kw)
    with pytest.raises(ValueError, match=r"sgd_step: grads\[0\] must have its parameter's "
                       r"shape\. Received: params\[0\].shape=\(4,\), grads\[0\].shape=\(3,\)"):
        cu_optim.sgd_step([p], [dev(rand(rng, (3,), np.float32))],
                          [dev(np.zeros(4, np.float32))], **kw)
    with pytest.raises(TypeError, match=r"sgd_step: momentum_buffers\[0\] must have the "
                       r"parameters' dtype"):
        cu_optim.sgd_step([p], [g], [dev(np.zeros(4, np.int16))], **kw)
    with pytest.raises(TypeError, match=r"sgd_step: grads\[0\] must be a cupy\.ndarray"):
        cu_optim.sgd_step([p], [np.ones(4, np.float32)], [dev(np.zeros(4, np.float32))], **kw)
    with pytest.raises(ValueError, match=r"sgd_step: momentum_buffers\[0\] is needed"):
        cu_optim.sgd_step([p], [g], [None], **kw)
    with pytest.raises(ValueError, match=r"adam_step: exp_avgs must have one entry per "
                       r"parameter"):
        cu_optim.adam_step([p], [g], [], [p], None, lr=0.1, beta1=0.9, beta2=0.99, eps=1e-8,
                           weight_decay=0.0, amsgrad=False, maximize=False, step=1)
    with pytest.raises(ValueError, match=r"adafactor_step: row_vars\[0\] is needed"):
        cu_optim.adafactor_step([dev(rand(rng, (2, 3), np.float32))],
                                [dev(rand(rng, (2, 3), np.float32))], [None], [None], [None],
                                lr=0.01, rho=0.01, rate=1.0, eps1=None, eps2=1e-3, d=1.0,
                                weight_decay=0.0, maximize=False)
    with pytest.raises(ValueError, match=r"adafactor_step: col_vars\[0\] must hold 3 elements"):
        cu_optim.adafactor_step([dev(rand(rng, (2, 3), np.float32))],
                                [dev(rand(rng, (2, 3), np.float32))],
                                [dev(np.zeros((2, 1), np.float32))],
                                [dev(np.zeros((1, 4), np.float32))], [None],
                                lr=0.01, rho=0.01, rate=1.0, eps1=None, eps2=1e-3, d=1.0,
                                weight_decay=0.0, maximize=False)


def test_empty_lists_do_nothing():
    assert cu_optim.sgd_step([], [], [], lr=0.1, momentum=0.0, dampening=0.0,
                             weight_decay=0.0, nesterov=False, maximize=False, first=True) == ()
    assert cu_optim.adam_step([], [], [], [], None, lr=0.1, beta1=0.9, beta2=0.99, eps=1e-8,
                              weight_decay=0.0, amsgrad=False, maximize=False, step=1) == ()
    assert cu_optim.adafactor_step([], [], [], [], [], lr=0.1, rho=0.1, rate=1.0, eps1=None,
                                   eps2=1e-3, d=1.0, weight_decay=0.0, maximize=False) == ()


def _adafactor_buffers(rng, shapes, dtype):
    """Host parameters and states (params, rows, cols, vars), their device copies, and
    device gradient buffers (written before each step)."""
    pn = [rand(rng, s, dtype) for s in shapes]
    state = [_adafactor_state(rng, s, dtype) for s in shapes]
    rn, cn, vn = ([st[j] for st in state] for j in range(3))
    pd = [dev(a) for a in pn]
    rd, cd, vd = ([None if a is None else dev(a) for a in lst] for lst in (rn, cn, vn))
    gd = [cupy.empty(s, dtype) for s in shapes]
    return pn, rn, cn, vn, pd, rd, cd, vd, gd


@pytest.mark.parametrize("dtype", DTYPES)
def test_adafactor_kept_call_takes_each_calls_values(dtype):
    """Steps on the same buffers (gradients rewritten in place, as a training loop's) reuse
    the kept call: every hyperparameter of each step is still that step's (weight decay,
    maximize, d and the rates change from step to step), against NumPy."""
    rng = np.random.default_rng(34)
    shapes = [(40, 1100), (3, 8, 16), (33,)]
    pn, rn, cn, vn, pd, rd, cd, vd, gd = _adafactor_buffers(rng, shapes, dtype)
    cu_optim._calls.clear()
    for t in range(1, 6):
        grads = [rand(rng, s, dtype) for s in shapes]
        for g_dev, g in zip(gd, grads):
            g_dev[...] = cupy.asarray(g)
        kw = {"lr": 0.01 * t, "rho": min(0.01, 1 / math.sqrt(t)),
              "rate": 1 - adafactor_decay(0.999, t), "eps1": None, "eps2": 1e-3,
              "d": 1.0 if t % 2 else 0.05, "weight_decay": 0.0 if t < 3 else 0.02,
              "maximize": t == 4}
        _np_adafactor(pn, grads, rn, cn, vn, **kw)
        assert cu_optim.adafactor_step(pd, gd, rd, cd, vd, **kw) == ()
        assert len(cu_optim._calls) == 1
    assert_close(pd, pn, dtype)
    # a view in place of one parameter: another key, the copy-back path, not kept
    view_base = cupy.asarray(np.repeat(pn[0], 2, axis=1))
    pd[0] = view_base[:, ::2]
    grads = [rand(rng, s, dtype) for s in shapes]
    kw = {"lr": 0.01, "rho": 0.01, "rate": 0.1, "eps1": None, "eps2": 1e-3, "d": 1.0,
          "weight_decay": 0.0, "maximize": False}
    _np_adafactor(pn, grads, rn, cn, vn, **kw)
    assert cu_optim.adafactor_step(pd, [dev(g) for g in grads], rd, cd, vd, **kw) == ()
    assert len(cu_optim._calls) == 1
    assert_close(pd, pn, dtype)


def test_adafactor_call_found_by_its_objects(monkeypatch):
    """A step on the same array objects finds its kept call without reading the buffers'
    addresses; other objects on the same buffers find it through them; a gradient
    reshaped in place (CuPy's shape setter) is not taken for the kept one."""
    dtype = np.float32
    rng = np.random.default_rng(35)
    shapes = [(40, 1100), (33,)]
    pn, rn, cn, vn, pd, rd, cd, vd, gd = _adafactor_buffers(rng, shapes, dtype)
    kw = {"lr": 0.01, "rho": 0.01, "rate": 0.1, "eps1": None, "eps2": 1e-3, "d": 1.0,
          "weight_decay": 0.0, "maximize": False}
    real_key = cu_optim._call_key
    keys = []
    monkeypatch.setattr(cu_optim, "_call_key", lambda lists: keys.append(1) or real_key(lists))

    def step(params, grads):
        for g_dev, g in zip(gd, grads):
            g_dev[...] = cupy.asarray(g)
        _np_adafactor(pn, grads, rn, cn, vn, **kw)
        assert cu_optim.adafactor_step(params, gd, rd, cd, vd, **kw) == ()

    for _ in range(3):
        step(pd, [rand(rng, s, dtype) for s in shapes])
    assert len(keys) == 1  # the first step only
    assert_close(pd, pn, dtype)
    step([p[...] for p in pd], [rand(rng, s, dtype) for s in shapes])  # new objects
    assert len(keys) == 2
    assert_close(pd, pn, dtype)
    gd[0].shape = (1100, 40)  # in place: the same object, another shape
    with pytest.raises(ValueError, match="grads"):
        cu_optim.adafactor_step(pd, gd, rd, cd, vd, **kw)
    assert len(keys) == 3
