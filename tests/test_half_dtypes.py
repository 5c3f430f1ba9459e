"""float16 and bfloat16, the extension dtypes, on every device that loads.

References are NumPy float32 computations on the 16-bit inputs, rounded to the
16-bit dtype; tolerances come from the dtype's eps (never one machine's rounding).
A device that does not hold a 16-bit dtype must refuse it with a TypeError naming
what it lacks. The promotion table is checked against a hard-coded table and, where
PyTorch is installed, against ``torch.promote_types``.
"""

from __future__ import annotations

import re

import _gate
import ml_dtypes
import numpy as np
import pytest

import tessera_array as xp
from tessera_array import _dispatch, _dtypes
from tessera_array._helpers import supports_dtype

HALF = [xp.float16, xp.bfloat16]
HALF_IDS = ["float16", "bfloat16"]
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7}


def _host(x) -> np.ndarray:
    return np.asarray(x.to_device("cpu"))


def _rand(rng, shape, lo=-3.0, hi=3.0) -> np.ndarray:
    a = rng.uniform(lo, hi, size=shape).astype(np.float32)
    a.flat[0] = 0.75 * hi  # never all zeros
    return a


def _needs(device, dt):
    if not supports_dtype(device, dt):
        pytest.skip(f"{device} does not hold {dt} (test_refused_where_not_held checks the error)")


def _on(device, a32: np.ndarray, dt):
    """``a32`` rounded to ``dt`` on ``device``, and the rounded values as float32."""
    x = xp.astype(xp.asarray(a32, device=device), dt)
    return x, _host(x).astype(np.float32)


def _close(got, ref32: np.ndarray, dt, ulps: float = 2.0, atol: float | None = None):
    """``got`` (an Array of dt) against the float32 reference rounded to dt."""
    assert got.dtype == dt, (got.dtype, dt)
    g = _host(got).astype(np.float64)
    r = ref32.astype(dt._np).astype(np.float64)
    eps = EPS[dt.name]
    tol_abs = ulps * eps if atol is None else atol
    np.testing.assert_allclose(g, r, rtol=ulps * eps, atol=tol_abs, equal_nan=True)


# ---- the dtype objects ---------------------------------------------------------------------


def test_dtype_objects():
    assert xp.float16.name == "float16" and xp.bfloat16.name == "bfloat16"
    assert xp.float16.bits == xp.bfloat16.bits == 16
    assert xp.float16.kind == xp.bfloat16.kind == "f"
    assert np.dtype(xp.float16) == np.float16
    assert np.dtype(xp.bfloat16) == np.dtype(ml_dtypes.bfloat16)
    assert xp.float16 == "float16" and xp.bfloat16 == "bfloat16"
    assert "float16" in xp.__all__ and "bfloat16" in xp.__all__
    import pickle

    assert pickle.loads(pickle.dumps(xp.bfloat16)) is xp.bfloat16


def test_standard_groups_unchanged():
    # Kernels are registered for these groups: the 16-bit dtypes must stay out of them.
    assert _dtypes.REAL_FLOATING == (xp.float32, xp.float64)
    assert _dtypes.FLOATING == (xp.float32, xp.float64, xp.complex64, xp.complex128)
    assert len(_dtypes.ALL_DTYPES) == 13
    for d in HALF:
        assert d not in _dtypes.ALL_DTYPES and d not in _dtypes.NUMERIC
    registered = _dispatch.registry.keys()  # a list of KernelKeys
    # the 16-bit kernels are registered by name, never through a group: nn.linear's on the
    # CPU (float32 sgemm, one rounding) and on CUDA (cuBLASLt), and attention on CUDA
    # (tensor cores)
    deliberate = {("linear", "numpy"), ("linear", "cuda"), ("attention_fwd", "cuda"),
                  ("attention_bwd", "cuda")}
    for key in registered:
        assert key.dtype not in HALF or (key.op, key.backend) in deliberate, key
    half_linear = {k.backend for k in registered if k.op == "linear" and k.dtype in HALF}
    assert "numpy" in half_linear and "opencl" not in half_linear


def test_isdtype():
    for d in HALF:
        assert xp.isdtype(d, "real floating")
        assert xp.isdtype(d, "numeric")
        assert xp.isdtype(d, ("bool", "real floating"))
        assert not xp.isdtype(d, "complex floating")
        assert not xp.isdtype(d, "integral")
        assert not xp.isdtype(d, xp.float32)
        assert xp.isdtype(d, d)
    assert not xp.isdtype(xp.float16, xp.bfloat16)


def test_info_dtypes_lists_the_standard_only(device):
    # array-api-tests' test_array_namespace_info_dtypes asserts that every name
    # dtypes() returns is one of the standard's.
    info = xp.__array_namespace_info__()
    for kind in (None, "real floating", "numeric"):
        names = info.dtypes(device=device, kind=kind)
        assert "float16" not in names and "bfloat16" not in names


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_finfo(dt):
    fi = xp.finfo(dt)
    ref = ml_dtypes.finfo(dt._np)
    assert fi.bits == 16 and fi.dtype is dt
    assert fi.eps == EPS[dt.name] == float(ref.eps)
    assert fi.max == float(ref.max) and fi.min == -fi.max
    assert fi.smallest_normal == float(ref.smallest_normal)
    assert fi.max == (65504.0 if dt is xp.float16 else float(np.float32(3.3895314e38)))
    with pytest.raises(ValueError, match=r"^iinfo: type must be an integer dtype"):
        xp.iinfo(dt)


def test_coerce_names():
    assert xp.asarray([1.0], dtype="bfloat16").dtype is xp.bfloat16
    assert xp.asarray([1.0], dtype=np.float16).dtype is xp.float16
    assert xp.asarray([1.0], dtype=ml_dtypes.bfloat16).dtype is xp.bfloat16


# ---- promotion ------------------------------------------------------------------------------

# (a, b) -> result, for every pair with a 16-bit dtype among floats, complex and bool:
# PyTorch's table (torch.promote_types).
TORCH_TABLE = {
    ("float16", "float16"): "float16",
    ("bfloat16", "bfloat16"): "bfloat16",
    ("float16", "bfloat16"): "float32",
    ("float16", "float32"): "float32",
    ("bfloat16", "float32"): "float32",
    ("float16", "float64"): "float64",
    ("bfloat16", "float64"): "float64",
    ("float16", "complex64"): "complex64",
    ("bfloat16", "complex64"): "complex64",
    ("float16", "complex128"): "complex128",
    ("bfloat16", "complex128"): "complex128",
    ("float16", "bool"): "float16",
    ("bfloat16", "bool"): "bfloat16",
    ("float16", "int8"): "float16",
    ("bfloat16", "int8"): "bfloat16",
    ("float16", "uint8"): "float16",
    ("bfloat16", "uint8"): "bfloat16",
}
# Mixed kinds beyond 8 bits: tessera follows NumPy's rule, as for float32 (the narrowest
# float holding both); PyTorch answers with the 16-bit float for every integer dtype.
NUMPY_RULE = {
    ("float16", "int16"): "float32",
    ("bfloat16", "int16"): "float32",
    ("float16", "uint16"): "float32",
    ("float16", "int32"): "float64",
    ("bfloat16", "int32"): "float64",
    ("float16", "int64"): "float64",
    ("bfloat16", "uint64"): "float64",
}


@pytest.mark.parametrize("table", [TORCH_TABLE, NUMPY_RULE], ids=["torch", "numpy-rule"])
def test_promotion_table(table):
    for (a, b), want in table.items():
        da, db = getattr(xp, a), getattr(xp, b)
        assert xp.result_type(da, db) is getattr(xp, want), (a, b)
        assert xp.result_type(db, da) is getattr(xp, want), (b, a)
        assert xp.can_cast(da, getattr(xp, want)) and xp.can_cast(db, getattr(xp, want))


def test_promotion_matches_torch():
    torch = pytest.importorskip("torch")
    names = ["float16", "bfloat16", "float32", "float64", "complex64", "complex128", "bool",
             "int8", "uint8"]
    for a in names:
        for b in names:
            if a not in ("float16", "bfloat16") and b not in ("float16", "bfloat16"):
                continue
            want = str(torch.promote_types(getattr(torch, a), getattr(torch, b)))
            got = xp.result_type(getattr(xp, a), getattr(xp, b))
            assert f"torch.{got.name}" == want, (a, b, got, want)


def test_can_cast():
    assert xp.can_cast(xp.float16, xp.float32) and xp.can_cast(xp.bfloat16, xp.float32)
    assert not xp.can_cast(xp.float32, xp.float16)
    assert not xp.can_cast(xp.float16, xp.bfloat16) and not xp.can_cast(xp.bfloat16, xp.float16)
    assert xp.can_cast(xp.bfloat16, xp.complex64)


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_python_scalars_are_weak(device, dt):
    _needs(device, dt)
    rng = np.random.default_rng(1)
    x, x32 = _on(device, _rand(rng, (5,)), dt)
    assert (x * 2.0).dtype is dt and (2.0 * x).dtype is dt
    assert (x + 1).dtype is dt and (x - True).dtype is dt
    assert xp.result_type(dt, 1.0) is dt and xp.result_type(dt, 3) is dt
    assert (x * 1j).dtype is xp.complex64  # no complex32: the narrowest complex dtype
    assert xp.result_type(dt, 1j) is xp.complex64
    _close(x * 2.5, x32 * np.float32(dt._np.type(2.5)), dt)
    _close(x / 3.0, x32 / np.float32(dt._np.type(3.0)), dt)


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_mixed_arrays(device, dt):
    _needs(device, dt)
    rng = np.random.default_rng(2)
    x, x32 = _on(device, _rand(rng, (4,)), dt)
    y = xp.asarray(_rand(rng, (4,)), device=device)  # float32
    r = x + y
    assert r.dtype is xp.float32
    np.testing.assert_allclose(_host(r), x32 + _host(y), rtol=1e-6)
    i8 = xp.asarray(np.array([1, -2, 3, 4], np.int8), device=device)
    assert (x * i8).dtype is dt
    i32 = xp.asarray(np.array([1, -2, 3, 4], np.int32), device=device)
    if supports_dtype(device, xp.float64):
        assert (x * i32).dtype is xp.float64
    other = xp.bfloat16 if dt is xp.float16 else xp.float16
    if supports_dtype(device, other):
        assert (x + xp.astype(x, other)).dtype is xp.float32
    # integer input to a floating function still gives float32, never a 16-bit dtype
    assert xp.sin(i8).dtype is xp.float32


# ---- creation, conversion, indexing ---------------------------------------------------------


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_creation(device, dt):
    _needs(device, dt)
    for make, want in [
        (lambda: xp.zeros((2, 3), dtype=dt, device=device), np.zeros((2, 3))),
        (lambda: xp.ones(4, dtype=dt, device=device), np.ones(4)),
        (lambda: xp.full((2,), 1.5, dtype=dt, device=device), np.full(2, 1.5)),
        (lambda: xp.arange(0, 3, 0.5, dtype=dt, device=device), np.arange(0, 3, 0.5)),
        (lambda: xp.linspace(0, 1, 5, dtype=dt, device=device), np.linspace(0, 1, 5)),
        (lambda: xp.eye(3, k=1, dtype=dt, device=device), np.eye(3, k=1)),
        (lambda: xp.asarray([1.25, -2.5], dtype=dt, device=device), np.array([1.25, -2.5])),
    ]:
        r = make()
        assert r.dtype is dt and r.device == device
        np.testing.assert_array_equal(_host(r).astype(np.float64), want)
    e = xp.empty((2, 2), dtype=dt, device=device)
    assert e.dtype is dt and e.shape == (2, 2)
    x = xp.ones(3, dtype=dt, device=device)
    for like in (xp.zeros_like, xp.ones_like, xp.empty_like):
        assert like(x).dtype is dt
    assert xp.full_like(x, 0.5).dtype is dt
    np.testing.assert_array_equal(_host(xp.tril(xp.ones((2, 2), dtype=dt, device=device)))
                                  .astype(np.float64), [[1, 0], [1, 1]])


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_astype_both_ways(device, dt):
    _needs(device, dt)
    rng = np.random.default_rng(3)
    a = _rand(rng, (50,), -1000, 1000)
    a[1:4] = [np.inf, -np.inf, np.nan]
    x = xp.asarray(a, device=device)
    h = xp.astype(x, dt)
    assert h.dtype is dt
    # NumPy's (and ml_dtypes') round-to-nearest-even cast is the reference
    np.testing.assert_array_equal(_host(h), a.astype(dt._np))
    back = xp.astype(h, xp.float32)
    np.testing.assert_array_equal(_host(back), a.astype(dt._np).astype(np.float32))
    big = xp.astype(xp.asarray([1e6], device=device), dt)
    assert np.isinf(_host(big)[0]) == (dt is xp.float16)  # float16's max is 65504
    ints = xp.astype(xp.asarray(np.array([1.75, -2.25, 3.5], np.float32), device=device), dt)
    np.testing.assert_array_equal(_host(xp.astype(ints, xp.int32)), [1, -2, 3])
    other = xp.bfloat16 if dt is xp.float16 else xp.float16
    if supports_dtype(device, other):
        o = xp.astype(h, other)
        assert o.dtype is other
        with np.errstate(over="ignore"):
            ref = a.astype(dt._np).astype(np.float32).astype(other._np)
        np.testing.assert_array_equal(_host(o), ref)


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_numpy_arrays_keep_their_dtype(device, dt):
    _needs(device, dt)
    a = np.array([0.5, -1.5, 2.0], dtype=dt._np)
    x = xp.asarray(a, device=device)
    assert x.dtype is dt
    np.testing.assert_array_equal(_host(x), a)
    h = np.asarray(x.to_device("cpu"))
    assert h.dtype == dt._np


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_indexing(device, dt):
    _needs(device, dt)
    rng = np.random.default_rng(4)
    x, x32 = _on(device, _rand(rng, (4, 5)), dt)
    ref = x32.astype(dt._np)
    np.testing.assert_array_equal(_host(x[1]), ref[1])
    np.testing.assert_array_equal(_host(x[:, 1:3]), ref[:, 1:3])
    np.testing.assert_array_equal(_host(x[x > 0]), ref[ref > 0])
    idx = xp.asarray([3, 0], device=device)
    np.testing.assert_array_equal(_host(xp.take(x, idx, axis=0)), ref[[3, 0]])
    y = xp.asarray(x, copy=True)
    y[0, 0] = 0.1
    y[1] = xp.ones(5, dtype=dt, device=device)
    assert y.dtype is dt
    want = ref.copy()
    want[0, 0] = 0.1
    want[1] = 1
    np.testing.assert_array_equal(_host(y), want)
    r = xp.where(x > 0, x, 0.0)
    assert r.dtype is dt
    np.testing.assert_array_equal(_host(r), np.where(ref > 0, ref, 0))
    s = xp.sort(x, axis=1, descending=True)
    np.testing.assert_array_equal(_host(s), -np.sort(-ref.astype(np.float32), axis=1))
    np.testing.assert_array_equal(_host(xp.argmax(x, axis=1)),
                                  np.argmax(ref.astype(np.float32), axis=1))
    c = xp.concat([x, x], axis=0)
    assert c.dtype is dt and c.shape == (8, 5)


# ---- elementwise ----------------------------------------------------------------------------

# name -> (the float32 reference, input range)
UNARY = {
    "abs": (np.abs, (-3, 3)), "negative": (np.negative, (-3, 3)),
    "square": (np.square, (-3, 3)), "sqrt": (np.sqrt, (0.01, 9)),
    "exp": (np.exp, (-3, 3)), "expm1": (np.expm1, (-1, 1)), "log": (np.log, (0.01, 9)),
    "log1p": (np.log1p, (-0.5, 3)), "log2": (np.log2, (0.01, 9)),
    "log10": (np.log10, (0.01, 9)), "sin": (np.sin, (-3, 3)), "cos": (np.cos, (-3, 3)),
    "tan": (np.tan, (-1.2, 1.2)), "sinh": (np.sinh, (-3, 3)), "cosh": (np.cosh, (-3, 3)),
    "tanh": (np.tanh, (-3, 3)), "asin": (np.arcsin, (-0.99, 0.99)),
    "acos": (np.arccos, (-0.99, 0.99)), "atan": (np.arctan, (-3, 3)),
    "asinh": (np.arcsinh, (-3, 3)), "acosh": (np.arccosh, (1.01, 9)),
    "atanh": (np.arctanh, (-0.9, 0.9)), "reciprocal": (np.reciprocal, (0.1, 3)),
    "floor": (np.floor, (-3, 3)), "ceil": (np.ceil, (-3, 3)), "trunc": (np.trunc, (-3, 3)),
    "round": (np.round, (-3, 3)), "sign": (np.sign, (-3, 3)), "positive": (np.positive, (-3, 3)),
}
BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "pow": np.power, "maximum": np.maximum, "minimum": np.minimum, "atan2": np.arctan2,
    "hypot": np.hypot, "logaddexp": np.logaddexp, "copysign": np.copysign,
    "remainder": np.remainder, "floor_divide": np.floor_divide,
}
PREDICATES = {
    "less": np.less, "greater_equal": np.greater_equal, "equal": np.equal,
    "not_equal": np.not_equal,
}


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(device, dt, name):
    _needs(device, dt)
    ref, (lo, hi) = UNARY[name]
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    x, x32 = _on(device, _rand(rng, (64,), lo, hi), dt)
    got = getattr(xp, name)(x)
    # Results near 0 of functions with a root in range: an absolute floor of 4 eps.
    _close(got, ref(x32), dt, ulps=2, atol=4 * EPS[dt.name])


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary(device, dt, name):
    _needs(device, dt)
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    lo = 0.25 if name == "pow" else -3.0
    x, x32 = _on(device, _rand(rng, (64,), lo, 3.0), dt)
    y, y32 = _on(device, _rand(rng, (64,), 0.5, 2.5), dt)
    got = getattr(xp, name)(x, y)
    with np.errstate(all="ignore"):
        want = BINARY[name](x32, y32)
    _close(got, want, dt, ulps=2, atol=4 * EPS[dt.name])


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_predicates_and_specials(device, dt):
    _needs(device, dt)
    rng = np.random.default_rng(5)
    x, x32 = _on(device, _rand(rng, (32,)), dt)
    y, y32 = _on(device, _rand(rng, (32,)), dt)
    for name, ref in PREDICATES.items():
        r = getattr(xp, name)(x, y)
        assert r.dtype is xp.bool
        np.testing.assert_array_equal(_host(r), ref(x32, y32))
    s = xp.asarray(np.array([np.inf, -np.inf, np.nan, -0.0, 1.0], np.float32), device=device)
    s = xp.astype(s, dt)
    np.testing.assert_array_equal(_host(xp.isnan(s)), [False, False, True, False, False])
    np.testing.assert_array_equal(_host(xp.isinf(s)), [True, True, False, False, False])
    np.testing.assert_array_equal(_host(xp.isfinite(s)), [False, False, False, True, True])
    np.testing.assert_array_equal(_host(xp.signbit(s)), [False, True, False, True, False])
    # floor_divide's IEEE cases (the standard's floor(a / b))
    q = xp.floor_divide(xp.astype(xp.asarray([np.inf, -1.0], device=device), dt), 2.0)
    np.testing.assert_array_equal(_host(q).astype(np.float32), [np.inf, -1.0])
    c = xp.clip(x, -1.0, 0.5)
    assert c.dtype is dt
    np.testing.assert_array_equal(_host(c), np.clip(x32, -1.0, 0.5).astype(dt._np))


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_operators_and_inplace(device, dt):
    _needs(device, dt)
    rng = np.random.default_rng(6)
    x, x32 = _on(device, _rand(rng, (16,)), dt)
    y, y32 = _on(device, _rand(rng, (16,), 0.5, 2), dt)
    _close(x + y, x32 + y32, dt)
    _close(x * y, x32 * y32, dt)
    _close(x / y, x32 / y32, dt)
    _close(-x, -x32, dt)
    _close(abs(x), np.abs(x32), dt)
    np.testing.assert_array_equal(_host(x < y), x32 < y32)
    z = xp.asarray(x, copy=True)
    z += y
    assert z.dtype is dt
    _close(z, x32 + y32, dt)
    z *= 2.0
    _close(z, (x32 + y32).astype(dt._np).astype(np.float32) * 2, dt)
    with pytest.raises(TypeError, match=r"^bitwise_and: expected integer or boolean operands"):
        xp.bitwise_and(x, y)


# ---- reductions and products: float32 accumulation ------------------------------------------


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_sum_accumulates_in_float32(device, dt):
    _needs(device, dt)
    # 4096 ones: a float16 accumulator stalls at 2048, a bfloat16 one at 256.
    ones = xp.ones(4096, dtype=dt, device=device)
    assert xp.sum(ones).dtype is dt
    assert float(_host(xp.sum(ones))) == 4096.0
    assert float(_host(xp.mean(ones))) == 1.0
    cs = xp.cumulative_sum(ones)
    assert cs.dtype is dt
    np.testing.assert_array_equal(_host(cs)[[255, 1023, 2047]].astype(np.float32),
                                  [256.0, 1024.0, 2048.0])
    m = xp.ones((4096, 2), dtype=dt, device=device)
    v = xp.ones((2, 4096), dtype=dt, device=device)
    assert float(_host(xp.matmul(v, m))[0, 0]) == 4096.0
    assert float(_host(xp.vecdot(ones, ones))) == 4096.0


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_reductions(device, dt, axis):
    _needs(device, dt)
    rng = np.random.default_rng(7)
    x, x32 = _on(device, _rand(rng, (40, 30), 0.5, 1.5), dt)
    checks = {
        "sum": np.sum(x32, axis=axis), "mean": np.mean(x32, axis=axis),
        "max": np.max(x32, axis=axis), "min": np.min(x32, axis=axis),
        "std": np.std(x32, axis=axis), "var": np.var(x32, axis=axis),
    }
    for name, want in checks.items():
        got = getattr(xp, name)(x, axis=axis)
        _close(got, np.asarray(want, np.float32), dt, ulps=1, atol=0.0)
    # prod of a few values near 1 (no overflow)
    p, p32 = _on(device, _rand(rng, (6, 5), 0.8, 1.25), dt)
    _close(xp.prod(p, axis=0), np.prod(p32, axis=0), dt, ulps=1, atol=0.0)
    k = xp.sum(x, axis=axis, keepdims=True)
    assert k.dtype is dt and k.ndim == 2
    wide = xp.sum(x, axis=axis, dtype=xp.float32)
    assert wide.dtype is xp.float32
    np.testing.assert_allclose(_host(wide), np.sum(x32, axis=axis), rtol=1e-5)


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_matmul_tensordot_vecdot(device, dt):
    _needs(device, dt)
    rng = np.random.default_rng(8)
    a, a32 = _on(device, _rand(rng, (2, 7, 33)), dt)
    b, b32 = _on(device, _rand(rng, (33, 5)), dt)
    # float32 products of the 16-bit values, rounded once: a reference of the same
    # accumulation; the summation order may differ, so one ulp (plus cancellation's
    # absolute slack) is allowed.
    scale = float(np.abs(a32).max() * np.abs(b32).max() * 33)
    atol = scale * 2.0**-20
    _close(a @ b, a32 @ b32, dt, ulps=1, atol=atol)
    _close(xp.matmul(a, b), a32 @ b32, dt, ulps=1, atol=atol)
    _close(xp.tensordot(a, b, axes=1), np.tensordot(a32, b32, axes=1), dt, ulps=1, atol=atol)
    c, c32 = _on(device, _rand(rng, (2, 7, 33)), dt)
    _close(xp.vecdot(a, c), np.sum(a32 * c32, axis=-1), dt, ulps=1, atol=atol)
    _close(xp.linalg.matmul(a, b), a32 @ b32, dt, ulps=1, atol=atol)
    sq, sq32 = _on(device, _rand(rng, (6, 6)), dt)
    _close(xp.linalg.trace(sq), np.asarray(np.trace(sq32)), dt, ulps=1, atol=4 * EPS[dt.name])


# ---- interop --------------------------------------------------------------------------------


def test_dlpack_float16():
    x = xp.asarray(np.array([0.5, -1.25, 3.0], np.float16))
    back = np.from_dlpack(x)
    assert back.dtype == np.float16
    np.testing.assert_array_equal(back, [0.5, -1.25, 3.0])
    y = xp.from_dlpack(np.array([1.5, 2.5], np.float16))
    assert y.dtype is xp.float16


def test_dlpack_bfloat16_refused_on_numpy():
    x = xp.asarray([0.5, 1.5], dtype=xp.bfloat16)
    with pytest.raises(BufferError, match=r"^__dlpack__: the numpy backend cannot export "
                                          r"bfloat16 through DLPack.*kDLBfloat, code 4"):
        x.__dlpack__()
    _imports_or_refuses(lambda: xp.from_dlpack(np.ones(2, ml_dtypes.bfloat16)), [1.0, 1.0])


def _imports_or_refuses(call, want):
    """bfloat16 DLPack data into the numpy backend: NumPy's importer decides. Older NumPy
    lacks kDLBfloat (a TypeError naming it); where the import succeeds (NumPy 2.5 takes a
    bfloat16 ndarray), the result must be bfloat16 with the producer's values."""
    try:
        x = call()
    except TypeError as err:
        assert re.match(r"^from_dlpack: the numpy backend cannot import bfloat16 DLPack "
                        r"data.*kDLBfloat", str(err)), err
        return
    assert x.dtype is xp.bfloat16 and x.device == xp.__array_namespace_info__().devices()[0]
    np.testing.assert_array_equal(np.asarray(x).astype(np.float32), want)


def test_dlpack_from_torch():
    torch = pytest.importorskip("torch")
    t = torch.tensor([0.5, -2.0], dtype=torch.float16)
    x = xp.from_dlpack(t)
    assert x.dtype is xp.float16
    np.testing.assert_array_equal(_host(x), [0.5, -2.0])
    _imports_or_refuses(lambda: xp.from_dlpack(torch.ones(2, dtype=torch.bfloat16)), [1.0, 1.0])


# ---- refusals -------------------------------------------------------------------------------


def test_refused_where_not_held(device):
    be = device._backend
    for dt in HALF:
        if supports_dtype(device, dt):
            continue
        need = be.missing_capability(device, dt) if hasattr(be, "missing_capability") else None
        with pytest.raises(TypeError, match=rf"^zeros: device {device} does not support "
                                            rf"dtype {dt.name}"):
            xp.zeros(2, dtype=dt, device=device)
        with pytest.raises(TypeError, match=rf"^astype: .*dtype {dt.name}"):
            xp.astype(xp.ones(2, device=device), dt)
        with pytest.raises(TypeError, match=rf"^to_device: .*dtype {dt.name}"):
            xp.ones(2, dtype=dt).to_device(device)
        if need is not None:
            with pytest.raises(TypeError, match=r"the device lacks " + need.split(" ")[0]):
                xp.asarray([1.0], dtype=dt, device=device)


def test_opencl_names_the_capability():

    be = _gate.loaded_backend("opencl")
    dev = be.devices()[0]
    ext = be.extensions(dev)
    need = be.missing_capability(dev, xp.float16)
    if "cl_khr_fp16" in ext:
        assert "cl_khr_fp16" in need and "not built for half" in need
    else:
        assert need == "cl_khr_fp16"
    assert "OpenCL C has no bfloat16 type" in be.missing_capability(dev, xp.bfloat16)
    assert not supports_dtype(dev, xp.float16) and not supports_dtype(dev, xp.bfloat16)
    assert be.capabilities(dev)["float16"] is False and be.capabilities(dev)["bfloat16"] is False


def test_opencl_with_cl_khr_fp16(monkeypatch):

    be = _gate.loaded_backend("opencl")
    dev = be.devices()[0]
    monkeypatch.setattr(be, "extensions", lambda d: frozenset({"cl_khr_fp16", "cl_khr_fp64"}))
    with pytest.raises(TypeError, match=r"^zeros: .*dtype float16 \(the device lacks float16 "
                                        r"kernels: it has cl_khr_fp16"):
        xp.zeros(2, dtype=xp.float16, device=dev)


def _registered(op, device, dt) -> bool:
    """Whether ``op`` has a kernel for ``dt`` on ``device`` (attention: CUDA's tensor cores)."""
    try:
        _dispatch.lookup(op, device, dt)
    except xp.KernelNotFoundError:
        return False
    return True


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_kernel_functions_refuse(device, dt):
    _needs(device, dt)
    rng = np.random.default_rng(9)
    m, _ = _on(device, _rand(rng, (4, 4)), dt)
    v, _ = _on(device, _rand(rng, (1, 2, 4, 8)), dt)
    cast = rf"; cast with astype\((\w+), float32\) first. Received: \w+\.dtype={dt.name}$"
    for func, call in [
        ("linalg.inv", lambda: xp.linalg.inv(m)),
        ("linalg.solve", lambda: xp.linalg.solve(m, m)),
        ("linalg.cholesky", lambda: xp.linalg.cholesky(m)),
        ("linalg.svd", lambda: xp.linalg.svd(m)),
        ("linalg.vector_norm", lambda: xp.linalg.vector_norm(m)),
        ("fft", lambda: xp.fft.fft(m)),
        ("rfft", lambda: xp.fft.rfft(m)),
        ("fftn", lambda: xp.fft.fftn(m)),
        ("csr_array", lambda: xp.sparse.csr_array(m)),
    ] + ([] if _registered("attention_fwd", device, dt) else [
        ("attention", lambda: xp.nn.attention(v, v, v))]):
        with pytest.raises(TypeError, match=rf"^{func}: float16 and bfloat16 are not "
                                            rf"supported \(.*\){cast}"):
            call()
    with pytest.raises(TypeError, match=r"parameters must be float32 or float64"):
        _sgd(m)


def test_solvers_refuse_through_the_registry():
    rng = np.random.default_rng(10)
    a = rng.standard_normal((6, 6)).astype(np.float32)
    a = a @ a.T + 6 * np.eye(6, dtype=np.float32)
    for dt in HALF:
        A = xp.astype(xp.asarray(a), dt)
        b = xp.astype(xp.asarray(rng.standard_normal(6).astype(np.float32)), dt)
        with pytest.raises(TypeError, match=r"none is registered for float16 or bfloat16; "
                                            r"cast to float32 first"):
            xp.sparse.linalg.cg(A, b)
        with pytest.raises(xp.KernelNotFoundError):
            _dispatch.lookup("matvec", A.device, dt)


def _sgd(p):
    from tessera_array.optim import SGD

    opt = SGD([p], lr=0.1)
    opt.step([p])


# ---- the float32 route for missing bfloat16 loops --------------------------------------------


def test_via_float32_for_a_missing_loop():
    from tessera_array.backends._xp._namespace import via_float32

    calls = []

    def no_bfloat16(a, b):
        if a.dtype == ml_dtypes.bfloat16 or b.dtype == ml_dtypes.bfloat16:
            raise TypeError("no loop for bfloat16")
        calls.append(a.dtype)
        return np.hypot(a, b)

    fn = via_float32(no_bfloat16, np)
    a = np.array([3.0, 0.5], ml_dtypes.bfloat16)
    b = np.array([4.0, 1.25], ml_dtypes.bfloat16)
    r = fn(a, b)
    assert r.dtype == ml_dtypes.bfloat16 and calls == [np.float32]
    np.testing.assert_array_equal(r, np.hypot(a.astype(np.float32), b.astype(np.float32))
                                  .astype(ml_dtypes.bfloat16))
    f = np.array([3.0], np.float32)
    assert fn(f, f).dtype == np.float32  # other dtypes untouched


def test_numpy_namespace_binds_the_route_where_a_loop_is_missing():
    from tessera_array.backends.numpy import _ops

    ns = _ops.namespace
    for name in ns.bfloat16_gaps():
        assert getattr(getattr(ns, name), "__wrapped__", None) is not None, name


def test_cupy_bfloat16_from_version_14():
    from tessera_array.backends._cupy._backend import takes_bfloat16

    assert takes_bfloat16("14.0.0") and takes_bfloat16("15.1.2")
    assert not takes_bfloat16("13.6.0") and not takes_bfloat16("dev")
