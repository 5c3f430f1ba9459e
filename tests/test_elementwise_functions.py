"""Elementwise functions against NumPy: every function, every dtype (and every dtype
pair for binary functions), Python and NumPy scalars, the standard's special cases
that NumPy misses, warnings, and bad input.

The reference is NumPy itself: tessera must give NumPy's result dtype (float16,
which the standard lacks, becomes float32) and NumPy's values, and raise TypeError
wherever NumPy has no loop for the dtypes.
"""

from __future__ import annotations

import math
import subprocess
import sys
import warnings

import numpy as np
import pytest

import tessera_array as xp
from tessera_array import _dtypes
from tessera_array._array import Array
from tessera_array._errors import DeviceMismatchError, ScalarOutOfRangeError
from tessera_array._helpers import check_same_device

SEED = 20251201

ALL_DTYPES = [d.name for d in _dtypes.ALL_DTYPES]

# tessera name -> NumPy name, where they differ.
NP_NAMES = {
    "acos": "arccos",
    "acosh": "arccosh",
    "asin": "arcsin",
    "asinh": "arcsinh",
    "atan": "arctan",
    "atanh": "arctanh",
    "atan2": "arctan2",
    "bitwise_invert": "invert",
    "bitwise_left_shift": "left_shift",
    "bitwise_right_shift": "right_shift",
    "conj": "conjugate",
    "pow": "power",
}

UNARY = [
    "abs",
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "bitwise_invert",
    "ceil",
    "conj",
    "cos",
    "cosh",
    "exp",
    "expm1",
    "floor",
    "imag",
    "isfinite",
    "isinf",
    "isnan",
    "log",
    "log1p",
    "log2",
    "log10",
    "logical_not",
    "negative",
    "positive",
    "real",
    "reciprocal",
    "round",
    "sign",
    "signbit",
    "sin",
    "sinh",
    "square",
    "sqrt",
    "tan",
    "tanh",
    "trunc",
]
BINARY = [
    "add",
    "atan2",
    "bitwise_and",
    "bitwise_left_shift",
    "bitwise_or",
    "bitwise_right_shift",
    "bitwise_xor",
    "copysign",
    "divide",
    "equal",
    "floor_divide",
    "greater",
    "greater_equal",
    "hypot",
    "less",
    "less_equal",
    "logaddexp",
    "logical_and",
    "logical_or",
    "logical_xor",
    "maximum",
    "minimum",
    "multiply",
    "nextafter",
    "not_equal",
    "pow",
    "remainder",
    "subtract",
]


def test_every_function_of_the_standard_is_here():
    stub_all = {
        "abs",
        "acos",
        "acosh",
        "add",
        "asin",
        "asinh",
        "atan",
        "atan2",
        "atanh",
        "bitwise_and",
        "bitwise_left_shift",
        "bitwise_invert",
        "bitwise_or",
        "bitwise_right_shift",
        "bitwise_xor",
        "ceil",
        "clip",
        "conj",
        "copysign",
        "cos",
        "cosh",
        "divide",
        "equal",
        "exp",
        "expm1",
        "floor",
        "floor_divide",
        "greater",
        "greater_equal",
        "hypot",
        "imag",
        "isfinite",
        "isinf",
        "isnan",
        "less",
        "less_equal",
        "log",
        "log1p",
        "log2",
        "log10",
        "logaddexp",
        "logical_and",
        "logical_not",
        "logical_or",
        "logical_xor",
        "maximum",
        "minimum",
        "multiply",
        "negative",
        "nextafter",
        "not_equal",
        "positive",
        "pow",
        "real",
        "reciprocal",
        "remainder",
        "round",
        "sign",
        "signbit",
        "sin",
        "sinh",
        "square",
        "sqrt",
        "subtract",
        "tan",
        "tanh",
        "trunc",
    }
    assert set(UNARY) | set(BINARY) | {"clip"} == stub_all
    for name in stub_all:
        f = getattr(xp, name)
        assert f.__name__ == name
        assert f.__doc__ and "array_api." + name in f.__doc__


# ---- inputs and references --------------------------------------------------------


def _host(x):
    return np.asarray(x.to_device("cpu"))


def _sample(rng, dtype: str, shape=(7,), *, small=False, positive=False):
    """Random values of ``dtype`` (never all zeros)."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        a = np.asarray(rng.random(shape) < 0.5)
        a.flat[0] = True
        return a
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo = 0 if (dt.kind == "u" or positive) else -5
        hi = 4 if small else min(int(info.max), 100)
        a = np.asarray(rng.integers(lo, hi, shape, endpoint=True)).astype(dt)
        a.flat[0] = 3
        return a
    if dt.kind == "f":
        a = np.asarray(rng.standard_normal(shape) * 3)
        if positive:
            a = np.abs(a) + 0.5
        return a.astype(dt)
    a = rng.standard_normal(shape) * 2 + 1j * rng.standard_normal(shape) * 2
    return np.asarray(a).astype(dt)


def _np_func(name):
    return getattr(np, NP_NAMES.get(name, name))


def _floor_divide_reference(a, b):
    """NumPy's floor_divide, with the standard's ``floor(a / b)`` where an operand is
    infinite (NumPy gives ``inf // 2 -> nan``, ``-1 // inf -> -1``)."""
    r = np.asarray(np.floor_divide(a, b))
    if r.dtype.kind == "f":
        m = np.broadcast_to(np.isinf(a) | np.isinf(b), r.shape)
        r = np.where(m, np.floor(np.divide(a, b)), r).astype(r.dtype)
    return r


def _expected(name, *args):
    """NumPy's result, with float16 (not a standard dtype) redone in float32.

    Returns ``(dtype, values)``, or ``(TypeError, None)`` where NumPy has no loop.
    """
    f = _np_func(name)
    if name == "floor_divide":
        f = _floor_divide_reference
    try:
        with np.errstate(all="ignore"):
            r = np.asarray(f(*args))
    except TypeError:
        return TypeError, None
    if r.dtype == np.float16:
        up = [
            a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype.kind in "biu" else a
            for a in args
        ]
        with np.errstate(all="ignore"):
            r = np.asarray(f(*up)).astype(np.float32)
    return r.dtype, r


def _check_same(result, expected_dtype, expected, device):
    assert result.__class__ is Array, type(result)
    assert result.device is device
    assert result._data.__class__ is device._backend.native_type  # never a NumPy scalar
    assert str(result.dtype) == np.dtype(expected_dtype).name, (result.dtype, expected_dtype)
    got = _host(result)
    assert got.shape == expected.shape
    if expected.dtype.kind in "fc":
        rtol = 2e-6 if expected.dtype in (np.float32, np.complex64) else 1e-13
        np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)


def _inputs_for(name, dtype, rng, shape=(7,)):
    """Inputs inside the domain where that matters (integer powers, shifts)."""
    if name in ("bitwise_left_shift", "bitwise_right_shift", "pow"):
        return _sample(rng, dtype, shape, small=True, positive=True)
    return _sample(rng, dtype, shape)


# ---- unary ------------------------------------------------------------------------


@pytest.mark.parametrize("name", UNARY)
def test_unary_matches_numpy_for_every_dtype(name, device):
    rng = np.random.default_rng(SEED)
    f = getattr(xp, name)
    for dtype in ALL_DTYPES:
        for shape in [(7,), (), (2, 3)]:
            a = _sample(rng, dtype, shape)
            exp_dtype, expected = _expected(name, a)
            x = xp.asarray(a, device=device)
            if exp_dtype is TypeError:
                with pytest.raises(TypeError, match=rf"^{name}: expected .*x\.dtype={dtype}"):
                    f(x)
                continue
            _check_same(f(x), exp_dtype, expected, device)


@pytest.mark.parametrize("name", UNARY)
def test_unary_keeps_input_unchanged_and_returns_new_array(name, device):
    rng = np.random.default_rng(SEED + 1)
    a = _sample(rng, "int64" if name == "bitwise_invert" else "float64")
    x = xp.asarray(a.copy(), device=device)
    r = getattr(xp, name)(x)
    r[...] = True if r.dtype == xp.bool else 1  # results never alias their input
    np.testing.assert_array_equal(_host(x), a)


# ---- binary -----------------------------------------------------------------------


@pytest.mark.parametrize("name", BINARY)
def test_binary_matches_numpy_for_every_dtype_pair(name, device):
    rng = np.random.default_rng(SEED + 2)
    f = getattr(xp, name)
    for d1 in ALL_DTYPES:
        for d2 in ALL_DTYPES:
            a = _inputs_for(name, d1, rng, (3, 4))
            b = _inputs_for(name, d2, rng, (4,))
            exp_dtype, expected = _expected(name, a, b)
            x1 = xp.asarray(a, device=device)
            x2 = xp.asarray(b, device=device)
            if exp_dtype is TypeError:
                with pytest.raises(TypeError, match=rf"^{name}: expected "):
                    f(x1, x2)
                continue
            try:
                _check_same(f(x1, x2), exp_dtype, expected, device)
            except AssertionError as err:
                raise AssertionError(f"{name}({d1}, {d2}): {err}") from None


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("shapes", [((), ()), ((), (3,)), ((2, 1), (1, 3)), ((4,), (4,))])
def test_binary_broadcasting_and_0d(name, shapes, device):
    rng = np.random.default_rng(SEED + 3)
    a = _inputs_for(name, "int16", rng, shapes[0])
    b = _inputs_for(name, "int16", rng, shapes[1])
    exp_dtype, expected = _expected(name, a, b)
    r = getattr(xp, name)(xp.asarray(a, device=device), xp.asarray(b, device=device))
    _check_same(r, exp_dtype, expected, device)


SCALARS = [True, False, 3, -2, 0, 2.5, -0.75, float("inf"), 1.5 - 2j]
# Functions whose integer operands compute in floating point: any Python int is a
# valid operand there (NumPy: np.divide(uint8_array, -2) is -0.5, not an overflow).
COMPUTE_IN_FLOAT = {"divide", "atan2", "copysign", "hypot", "logaddexp", "nextafter"}


@pytest.mark.parametrize("name", BINARY)
def test_binary_with_python_scalars_on_either_side(name, device):
    rng = np.random.default_rng(SEED + 4)
    f = getattr(xp, name)
    for dtype in ALL_DTYPES:
        a = _inputs_for(name, dtype, rng)
        x = xp.asarray(a, device=device)
        for s in SCALARS:
            if name in ("pow", "bitwise_left_shift", "bitwise_right_shift") and (
                isinstance(s, int) and s < 0
            ):
                continue
            if (np.dtype(dtype).kind == "u" and isinstance(s, int) and s < 0
                    and s is not False and name not in COMPUTE_IN_FLOAT):
                with pytest.raises(ScalarOutOfRangeError, match=rf"^{name}: the Python int"):
                    f(x, s)
                continue
            for args, xargs in (((a, s), (x, s)), ((s, a), (s, x))):
                exp_dtype, expected = _expected(name, *args)
                if exp_dtype is TypeError:
                    with pytest.raises(TypeError, match=rf"^{name}: expected "):
                        f(*xargs)
                    continue
                try:
                    _check_same(f(*xargs), exp_dtype, expected, device)
                except AssertionError as err:
                    raise AssertionError(f"{name}{xargs!r}: {err}") from None


@pytest.mark.parametrize("name", ["add", "multiply", "less", "maximum", "atan2", "divide"])
def test_binary_with_numpy_scalars_keeps_their_dtype(name, device):
    rng = np.random.default_rng(SEED + 5)
    f = getattr(xp, name)
    for dtype in ["float32", "int16", "uint8", "float64"]:
        a = _sample(rng, dtype, positive=True)
        x = xp.asarray(a, device=device)
        for s in [np.float64(1.5), np.float32(2.0), np.int8(3), np.uint16(2), np.bool_(True)]:
            for args, xargs in (((a, s), (x, s)), ((s, a), (s, x))):
                exp_dtype, expected = _expected(name, *args)
                _check_same(f(*xargs), exp_dtype, expected, device)


def test_promotion_table_spot_checks(device):
    # The standard's table for same-kind pairs; NumPy's rules across kinds.
    cases = [
        ("int8", "uint8", "int16"),
        ("int16", "uint16", "int32"),
        ("int32", "uint32", "int64"),
        ("uint8", "uint16", "uint16"),
        ("int8", "int64", "int64"),
        ("float32", "float64", "float64"),
        ("float32", "complex64", "complex64"),
        ("float64", "complex64", "complex128"),
        ("bool", "int8", "int8"),
        ("bool", "float32", "float32"),
        ("int64", "uint64", "float64"),  # NumPy's choice (the standard leaves it open)
        ("int8", "float32", "float32"),
        ("int32", "float32", "float64"),
        ("uint8", "complex64", "complex64"),
    ]
    for d1, d2, out in cases:
        x1 = xp.ones(3, dtype=getattr(xp, d1), device=device)
        x2 = xp.ones(3, dtype=getattr(xp, d2), device=device)
        assert xp.add(x1, x2).dtype == getattr(xp, out), (d1, d2)
        assert xp.add(x2, x1).dtype == getattr(xp, out), (d2, d1)
        assert (x1 * x2).dtype == getattr(xp, out)
        assert xp.result_type(x1, x2) == getattr(xp, out)


def test_float_functions_of_integers_follow_numpy_dtypes(device):
    # Unary: NumPy's float for the input (float16 -> float32 here).
    for dt, out in [
        ("int8", "float32"),
        ("uint16", "float32"),
        ("int32", "float64"),
        ("uint64", "float64"),
        ("bool", "float32"),
    ]:
        x = xp.asarray(np.arange(1, 5).astype(dt), device=device)
        assert str(xp.sqrt(x).dtype) == out
        assert str(xp.exp(x).dtype) == out
    # Binary: the smallest float both operands cast to, as NumPy picks it.
    i8 = xp.asarray(np.ones(2, np.int8), device=device)
    u16 = xp.asarray(np.ones(2, np.uint16), device=device)
    i32 = xp.asarray(np.ones(2, np.int32), device=device)
    assert xp.atan2(i8, u16).dtype == xp.float32  # promote() would say int32 -> float64
    assert xp.atan2(i8, i32).dtype == xp.float64
    assert xp.divide(i8, i8).dtype == xp.float64  # true division of integers: float64
    assert (i8 / 2).dtype == xp.float64


# ---- integer and bitwise details --------------------------------------------------


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "uint64"])
def test_integer_floor_divide_and_remainder_by_zero_give_zero_quietly(dtype, device):
    rng = np.random.default_rng(SEED + 6)
    a = _sample(rng, dtype)
    b = _sample(rng, dtype)
    b[::2] = 0
    x1, x2 = xp.asarray(a, device=device), xp.asarray(b, device=device)
    with np.errstate(all="ignore"):
        fd, rm = np.floor_divide(a, b), np.remainder(a, b)
    # filterwarnings = error: a warning escaping would fail here.
    np.testing.assert_array_equal(_host(xp.floor_divide(x1, x2)), fd)
    np.testing.assert_array_equal(_host(x1 // x2), fd)
    np.testing.assert_array_equal(_host(xp.remainder(x1, x2)), rm)
    np.testing.assert_array_equal(_host(x1 % x2), rm)
    np.testing.assert_array_equal(_host(x1 // 0), np.zeros_like(a))
    assert not np.any(_host(x1 // x2)[::2])


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64", "uint8", "uint32"])
def test_shift_counts_outside_the_width_match_numpy(dtype, device):
    bits = np.dtype(dtype).itemsize * 8
    a = np.array([1, 3, 100, 7, 1, 5], dtype=dtype)
    if np.dtype(dtype).kind == "i":
        a[1] = -3
        counts = np.array([-1, 1, bits, bits + 3, -bits, 2], dtype=dtype)
    else:
        counts = np.array([0, 1, bits, bits + 3, bits - 1, 2], dtype=dtype)
    x, c = xp.asarray(a, device=device), xp.asarray(counts, device=device)
    np.testing.assert_array_equal(_host(xp.bitwise_left_shift(x, c)), np.left_shift(a, counts))
    np.testing.assert_array_equal(_host(xp.bitwise_right_shift(x, c)), np.right_shift(a, counts))
    np.testing.assert_array_equal(_host(x << c), np.left_shift(a, counts))
    np.testing.assert_array_equal(_host(x >> c), np.right_shift(a, counts))


def test_bitwise_of_booleans_is_logical(device):
    a = np.array([True, False, True, False])
    b = np.array([True, True, False, False])
    x, y = xp.asarray(a, device=device), xp.asarray(b, device=device)
    for name, ref in [("bitwise_and", a & b), ("bitwise_or", a | b), ("bitwise_xor", a ^ b)]:
        r = getattr(xp, name)(x, y)
        assert r.dtype == xp.bool
        np.testing.assert_array_equal(_host(r), ref)
    assert xp.bitwise_invert(x).dtype == xp.bool
    np.testing.assert_array_equal(_host(~x), ~a)


def test_pow_of_integers_to_negative_integer_powers_raises(device):
    x = xp.asarray([2, 3], device=device)
    with pytest.raises(ValueError, match=r"^pow: .*negative.*Cast x1 to a floating-point"):
        xp.pow(x, -1)
    with pytest.raises(ValueError, match=r"^pow: .*negative"):
        xp.pow(x, xp.asarray([1, -2], device=device))
    with pytest.raises(ValueError, match=r"^pow: .*negative"):
        x**-1
    np.testing.assert_array_equal(_host(xp.pow(x, 3)), [8, 27])
    np.testing.assert_allclose(_host(xp.pow(xp.astype(x, xp.float64), -1)), [0.5, 1 / 3])


# ---- clip and round ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["int8", "int64", "uint16", "float32", "float64"])
def test_clip_matches_numpy(dtype, device):
    rng = np.random.default_rng(SEED + 7)
    a = _sample(rng, dtype, (3, 5))
    lo_arr = _sample(rng, dtype, (5,))
    hi_arr = lo_arr + np.asarray(4, dtype=dtype)
    x = xp.asarray(a, device=device)
    lo, hi = xp.asarray(lo_arr, device=device), xp.asarray(hi_arr, device=device)
    for kw, ref in [
        ({}, a),
        ({"min": 2}, np.clip(a, 2, None)),
        ({"max": 5}, np.clip(a, None, 5)),
        ({"min": 1, "max": 6}, np.clip(a, 1, 6)),
        ({"min": lo}, np.clip(a, lo_arr, None)),
        ({"min": lo, "max": hi}, np.clip(a, lo_arr, hi_arr)),
        ({"min": 0, "max": hi}, np.clip(a, 0, hi_arr)),
    ]:
        r = xp.clip(x, **kw)
        assert r.dtype == x.dtype
        np.testing.assert_array_equal(_host(r), np.asarray(ref).astype(dtype))
    r = xp.clip(x)
    r[...] = 0  # a new array, not x
    np.testing.assert_array_equal(_host(x), a)


def test_clip_rules(device):
    x = xp.asarray(np.array([1, 50, 200], dtype=np.uint8), device=device)
    # Out-of-range Python ints are clamped to the dtype's range: exact.
    np.testing.assert_array_equal(_host(xp.clip(x, -5, 1000)), [1, 50, 200])
    np.testing.assert_array_equal(_host(xp.clip(x, 60, 1000)), [60, 60, 200])
    f = xp.asarray([1.0, float("nan"), -3.0], device=device)
    r = _host(xp.clip(f, -1.0, 0.5))
    np.testing.assert_array_equal(r, [0.5, np.nan, -1.0])
    assert np.isnan(_host(xp.clip(f, float("nan"), 2.0))).all()
    assert xp.clip(xp.asarray([1.0], dtype=xp.float32, device=device), 0, 2).dtype == xp.float32
    # Array bounds broadcast with x.
    assert xp.clip(f, xp.zeros((2, 1), device=device)).shape == (2, 3)
    with pytest.raises(TypeError, match=r"^clip: min must be .*Received: x.dtype=uint8"):
        xp.clip(x, 1.5)
    with pytest.raises(TypeError, match=r"^clip: max must have x's dtype"):
        xp.clip(x, None, xp.asarray([2.5], device=device))
    with pytest.raises(TypeError, match=r"^clip: expected an array of real-valued"):
        xp.clip(xp.asarray([1j], device=device), 0, 1)
    with pytest.raises(TypeError, match=r"^clip: x must be"):
        xp.clip([1, 2], 0, 1)


def test_round_halves_to_even_and_decimals(device):
    a = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 2.675, -0.0])
    x = xp.asarray(a, device=device)
    np.testing.assert_array_equal(_host(xp.round(x)), np.round(a))
    assert math.copysign(1.0, float(_host(xp.round(x))[-1])) == -1.0
    np.testing.assert_array_equal(_host(xp.round(x, decimals=2)), np.round(a, 2))
    np.testing.assert_array_equal(_host(xp.round(x, 1)), np.round(a, 1))
    i = xp.asarray([1234, -5678], device=device)
    np.testing.assert_array_equal(_host(xp.round(i, decimals=-2)), np.round([1234, -5678], -2))
    c = xp.asarray([1.5 + 2.5j], device=device)
    np.testing.assert_array_equal(_host(xp.round(c)), [2 + 2j])
    with pytest.raises(TypeError, match=r"^round: decimals must be an int"):
        xp.round(x, decimals=1.5)


# ---- special cases NumPy misses ---------------------------------------------------

INF, NAN = math.inf, math.nan


def _is(value, expected):
    """Exact match including the sign of zero and NaN."""
    if math.isnan(expected):
        return math.isnan(value)
    return value == expected and math.copysign(1, value) == math.copysign(1, expected)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_floor_divide_with_infinities_is_floor_of_divide(dtype, device):
    cases = [
        (INF, 2.0, INF),
        (INF, -2.0, -INF),
        (-INF, 2.0, -INF),
        (-INF, -2.0, INF),
        (1.0, INF, 0.0),
        (1.0, -INF, -0.0),
        (-1.0, INF, -0.0),
        (-1.0, -INF, 0.0),
        (INF, INF, NAN),
        (NAN, 1.0, NAN),
        (0.0, 0.0, NAN),
        (1.0, 0.0, INF),
        (-1.0, 0.0, -INF),
        (7.0, 2.0, 3.0),
        (-7.0, 2.0, -4.0),
        (0.0, -3.0, -0.0),
    ]
    a = np.array([c[0] for c in cases], dtype=dtype)
    b = np.array([c[1] for c in cases], dtype=dtype)
    x1, x2 = xp.asarray(a, device=device), xp.asarray(b, device=device)
    for r in (xp.floor_divide(x1, x2), x1 // x2):
        got = _host(r)
        for (p, q, want), g in zip(cases, got):
            assert _is(float(g), want), f"{p} // {q} = {g}, expected {want}"
    # Scalars and in-place too.
    assert _is(float(_host(xp.floor_divide(x1[:1], 2.0))[0]), INF)
    assert _is(float(_host(xp.floor_divide(-1.0, xp.asarray([INF], device=device)))[0]), -0.0)
    y = xp.asarray(a, device=device)
    y //= x2
    assert _is(float(_host(y)[0]), INF)


def test_expm1_complex_special_cases(device):
    cases = [
        (complex(0.0, 0.0), (0.0, 0.0)),
        (complex(-0.0, 0.0), (0.0, 0.0)),
        (complex(1.0, INF), (NAN, NAN)),
        (complex(1.0, NAN), (NAN, NAN)),
        (complex(INF, 0.0), (INF, 0.0)),
        (complex(-INF, 2.0), (-1.0, 0.0 * math.sin(2.0))),
        (complex(-INF, INF), (-1.0, 0.0)),
        (complex(INF, INF), (INF, NAN)),
        (complex(-INF, NAN), (-1.0, 0.0)),
        (complex(INF, NAN), (INF, NAN)),
        (complex(NAN, 0.0), (NAN, 0.0)),
        (complex(NAN, 1.0), (NAN, NAN)),
        (complex(NAN, NAN), (NAN, NAN)),
    ]
    for dtype in ["complex64", "complex128"]:
        x = xp.asarray(np.array([c[0] for c in cases], dtype=dtype), device=device)
        got = _host(xp.expm1(x))
        for (z, (re, im)), g in zip(cases, got):
            assert _is(float(g.real), re) and _is(float(g.imag), im), (z, g)
    # INF + bj, b finite nonzero: infinity * cis(b) - 1.
    g = complex(_host(xp.expm1(xp.asarray([complex(INF, 2.0)], device=device)))[0])
    assert g.real == -INF and g.imag == INF
    # Finite values still use NumPy's accurate expm1, and conj symmetry holds.
    z = np.array([1e-10 + 1e-10j, 0.3 - 0.2j])
    np.testing.assert_allclose(_host(xp.expm1(xp.asarray(z, device=device))), np.expm1(z))


def test_tanh_complex_with_infinite_real_part(device):
    cases = [
        (complex(INF, 2.0), (1.0, 0.0)),
        (complex(INF, -2.0), (1.0, -0.0)),
        (complex(INF, INF), (1.0, 0.0)),
        (complex(INF, NAN), (1.0, 0.0)),
        (complex(-INF, 2.0), (-1.0, 0.0)),
        (complex(0.0, 0.0), (0.0, 0.0)),
        (complex(NAN, 0.0), (NAN, 0.0)),
    ]
    for dtype in ["complex64", "complex128"]:
        x = xp.asarray(np.array([c[0] for c in cases], dtype=dtype), device=device)
        got = _host(xp.tanh(x))
        for (z, (re, im)), g in zip(cases, got):
            assert _is(float(g.real), re) and _is(float(g.imag), im), (z, g)


def test_special_values_give_the_standards_results_without_warnings(device):
    x = xp.asarray([0.0, -1.0, 1.0, INF], device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _host(xp.log(x))[0] == -INF
        assert np.isnan(_host(xp.sqrt(x))[1])
        np.testing.assert_array_equal(_host(xp.divide(1.0, x))[:3], [INF, -1.0, 1.0])
        np.testing.assert_array_equal(_host(x / 0.0)[1:], [-INF, INF, INF])
        assert np.isnan(_host(x - x)[3])
        assert np.isnan(_host(xp.subtract(x, x))[3])
        assert _host(xp.exp(xp.asarray([1000.0], device=device)))[0] == INF
        assert _host(xp.multiply(xp.asarray([1e308], device=device), 10.0))[0] == INF


def test_no_floating_point_warning_reaches_the_user_in_default_mode():
    code = (
        "import warnings, tessera_array as xp\n"
        "warnings.simplefilter('default')\n"
        "x = xp.asarray([0.0, -1.0, 1e308, float('inf')])\n"
        "xp.log(x); xp.sqrt(x); 1.0 / x; x * 10.0; x - x; x // 0.0; xp.floor_divide(x, x)\n"
        "i = xp.asarray([1, 2]); i // 0; i % 0\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


# ---- bad input ------------------------------------------------------------------


def _fake_device_array():
    return Array._new(np.ones(3), xp.float64, xp.Device("fake", 0))


def test_mixed_devices_raise_device_mismatch(device):
    x = xp.ones(3, device=device)
    fake = _fake_device_array()
    with pytest.raises(DeviceMismatchError, match=r"^add: arrays are on different devices"):
        check_same_device("add", x, fake)
    for call in (
        lambda: xp.add(x, fake),
        lambda: xp.add(fake, x),
        lambda: xp.less(x, fake),
        lambda: xp.atan2(fake, x),
        lambda: xp.clip(x, fake),
    ):
        with pytest.raises(DeviceMismatchError, match=r"^\w+: arrays are on different devices"):
            call()
    assert issubclass(DeviceMismatchError, ValueError)


def test_non_array_arguments_raise_type_error(device):
    x = xp.ones(3, device=device)
    with pytest.raises(TypeError, match=r"^sin: x must be a tessera_array Array.*list"):
        xp.sin([1.0, 2.0])
    with pytest.raises(TypeError, match=r"^abs: x must be a tessera_array Array.*float"):
        xp.abs(-1.0)
    with pytest.raises(TypeError, match=r"^add: at least one of x1, x2 must be .*int.*int"):
        xp.add(1, 2)
    with pytest.raises(TypeError, match=r"^multiply: x2 must be a tessera_array Array.*str"):
        xp.multiply(x, "2")
    with pytest.raises(TypeError, match=r"^less: x1 must be a tessera_array Array.*list"):
        xp.less([1, 2, 3], x)
    with pytest.raises(TypeError, match=r"^add: x2 is an array of another library"):
        xp.add(x, np.ones(3))
    with pytest.raises(TypeError, match=r"^equal: x2 must be .*NoneType"):
        xp.equal(x, None)


def test_wrong_dtypes_raise_type_error(device):
    f = xp.ones(3, device=device)
    b = xp.asarray([True, False], device=device)
    c = xp.asarray([1j], device=device)
    cases = [
        (
            lambda: xp.bitwise_and(f, f),
            (
                r"^bitwise_and: expected integer or boolean operands\. "
                r"Received: x1\.dtype=float64, x2\.dtype=float64"
            ),
        ),
        (lambda: xp.bitwise_left_shift(f, 1), r"^bitwise_left_shift: expected integer"),
        (lambda: xp.bitwise_invert(f), r"^bitwise_invert: expected an array of integer or boolean"),
        (
            lambda: xp.negative(b),
            r"^negative: expected an array of numeric dtype\. Received: x\.dtype=bool",
        ),
        (lambda: xp.subtract(b, b), r"^subtract: expected numeric operands"),
        (lambda: xp.floor(c), r"^floor: expected an array of real-valued or boolean dtype"),
        (lambda: xp.atan2(c, c), r"^atan2: expected real-valued or boolean operands"),
        (lambda: xp.remainder(f, 1j), r"^remainder: expected .*x2=1j \(complex\)"),
        (lambda: xp.bitwise_or(f, True), r"^bitwise_or: expected integer or boolean"),
        (lambda: xp.signbit(c), r"^signbit: expected"),
    ]
    for call, pattern in cases:
        with pytest.raises(TypeError, match=pattern):
            call()


def test_python_int_out_of_range_raises_scalar_out_of_range(device):
    x = xp.asarray(np.array([1, 2], dtype=np.int8), device=device)
    u = xp.asarray(np.array([1, 2], dtype=np.uint8), device=device)
    b = xp.asarray([True], device=device)
    for call, pattern in [
        (lambda: xp.add(x, 200), r"^add: the Python int x2=200 is out of range .*int8"),
        (lambda: xp.subtract(-129, x), r"^subtract: the Python int x1=-129 .*int8"),
        (lambda: xp.less(u, -1), r"^less: the Python int x2=-1 .*uint8"),
        (lambda: xp.add(b, 2**64), r"^add: the Python int x2=18446744073709551616 .*int64"),
        (lambda: xp.bitwise_and(u, 256), r"^bitwise_and: the Python int x2=256"),
    ]:
        with pytest.raises(ScalarOutOfRangeError, match=pattern):
            call()
    assert issubclass(ScalarOutOfRangeError, ValueError)
    # In range: fine, and the array's dtype is kept.
    assert xp.add(x, 127).dtype == xp.int8
    assert xp.add(u, 255).dtype == xp.uint8


def test_shapes_that_do_not_broadcast_raise_value_error(device):
    x = xp.ones((2, 3), device=device)
    y = xp.ones((4,), device=device)
    with pytest.raises(ValueError, match=r"^add: the operands' shapes do not broadcast.*\(2, 3\)"):
        xp.add(x, y)
    with pytest.raises(ValueError, match=r"^atan2: the operands' shapes do not broadcast"):
        xp.atan2(x, y)
    with pytest.raises(ValueError, match=r"^equal: the operands' shapes"):
        _ = x == y


def test_huge_python_ints_with_float_arrays(device):
    x = xp.asarray([1.0, 2.0], dtype=xp.float32, device=device)
    r = xp.add(x, 10**400)
    assert r.dtype == xp.float32
    assert np.isinf(_host(r)).all()
    assert xp.multiply(xp.asarray([1.0], device=device), 2**70).dtype == xp.float64
