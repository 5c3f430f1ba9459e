"""Array operators against NumPy: forward, reflected and in-place binary operators,
comparisons and unary operators, with arrays, Python scalars and NumPy scalars on
either side; the standard's in-place rules; errors."""

from __future__ import annotations

import operator
import warnings

import numpy as np
import pytest

import tessera_array as xp
from tessera_array import _dtypes
from tessera_array._array import Array
from tessera_array._errors import DeviceMismatchError, ScalarOutOfRangeError

SEED = 777

ALL_DTYPES = [d.name for d in _dtypes.ALL_DTYPES]

# (operator symbol, forward, in-place, namespace function)
BINARY_OPS = [
    ("+", operator.add, operator.iadd, "add"),
    ("-", operator.sub, operator.isub, "subtract"),
    ("*", operator.mul, operator.imul, "multiply"),
    ("/", operator.truediv, operator.itruediv, "divide"),
    ("//", operator.floordiv, operator.ifloordiv, "floor_divide"),
    ("%", operator.mod, operator.imod, "remainder"),
    ("**", operator.pow, operator.ipow, "pow"),
    ("&", operator.and_, operator.iand, "bitwise_and"),
    ("|", operator.or_, operator.ior, "bitwise_or"),
    ("^", operator.xor, operator.ixor, "bitwise_xor"),
    ("<<", operator.lshift, operator.ilshift, "bitwise_left_shift"),
    (">>", operator.rshift, operator.irshift, "bitwise_right_shift"),
]
COMPARE_OPS = [
    ("==", operator.eq, "equal"),
    ("!=", operator.ne, "not_equal"),
    ("<", operator.lt, "less"),
    ("<=", operator.le, "less_equal"),
    (">", operator.gt, "greater"),
    (">=", operator.ge, "greater_equal"),
]
SMALL_OPERANDS = {"**", "<<", ">>"}


def _host(x):
    return np.asarray(x.to_device("cpu"))


def _sample(rng, dtype, shape=(6,), small=False):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        a = np.asarray(rng.random(shape) < 0.5)
        a.flat[0] = True
    elif dt.kind in "iu":
        lo = 0 if (dt.kind == "u" or small) else -9
        a = np.asarray(rng.integers(lo, 3 if small else 50, shape, endpoint=True)).astype(dt)
        a.flat[0] = 2
    elif dt.kind == "f":
        a = np.asarray(rng.standard_normal(shape) * 4).astype(dt)
    else:
        a = np.asarray(rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    return a


def _numpy_result(op, *args):
    """NumPy's answer, or TypeError; float16 (not a standard dtype) redone in float32."""
    try:
        with np.errstate(all="ignore"):
            r = np.asarray(op(*args))
    except TypeError:
        return TypeError
    if r.dtype == np.float16:
        up = [a.astype(np.float32) if isinstance(a, np.ndarray) else a for a in args]
        with np.errstate(all="ignore"):
            r = np.asarray(op(*up)).astype(np.float32)
    return r


def _floordiv_reference(a, b):
    # The standard's floor(a / b) where an operand is infinite (NumPy: inf // 2 -> nan).
    r = np.asarray(np.floor_divide(a, b))
    if r.dtype.kind == "f":
        m = np.broadcast_to(np.isinf(a) | np.isinf(b), r.shape)
        r = np.where(m, np.floor(np.divide(a, b)), r).astype(r.dtype)
    return r


_UFUNCS = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
    "/": np.divide,
    "%": np.remainder,
    "**": np.power,
    "&": np.bitwise_and,
    "|": np.bitwise_or,
    "^": np.bitwise_xor,
    "<<": np.left_shift,
    ">>": np.right_shift,
}


def _reference(symbol, op):
    """The NumPy ufunc of the operator's namespace function: tessera's ``x op y`` is
    ``xp.<function>(x, y)`` (NumPy's own ``**`` has fast paths that differ, e.g.
    ``bool_array ** 2`` gives int8 there but int64 from ``np.power``)."""
    return _floordiv_reference if symbol == "//" else _UFUNCS[symbol]


def _same(result, expected, where=""):
    assert result.__class__ is Array, (where, type(result))
    assert str(result.dtype) == expected.dtype.name, (where, result.dtype, expected.dtype)
    got = _host(result)
    assert got.shape == expected.shape, where
    if expected.dtype.kind in "fc":
        rtol = 2e-6 if expected.dtype in (np.float32, np.complex64) else 1e-13
        np.testing.assert_allclose(
            got, expected, rtol=rtol, atol=rtol, equal_nan=True, err_msg=where
        )
    else:
        np.testing.assert_array_equal(got, expected, err_msg=where)


# ---- forward and reflected --------------------------------------------------------


@pytest.mark.parametrize("symbol,op,iop,name", BINARY_OPS, ids=[o[3] for o in BINARY_OPS])
def test_binary_operator_matches_numpy_for_every_dtype_pair(symbol, op, iop, name, device):
    rng = np.random.default_rng(SEED)
    small = symbol in SMALL_OPERANDS
    for d1 in ALL_DTYPES:
        for d2 in ALL_DTYPES:
            a = _sample(rng, d1, (2, 6), small)
            b = _sample(rng, d2, (6,), small)
            expected = _numpy_result(_reference(symbol, op), a, b)
            x1, x2 = xp.asarray(a, device=device), xp.asarray(b, device=device)
            if expected is TypeError:
                with pytest.raises(TypeError, match=rf"^{name}: expected "):
                    op(x1, x2)
                continue
            _same(op(x1, x2), expected, f"{d1} {symbol} {d2}")


@pytest.mark.parametrize("symbol,op,name", COMPARE_OPS, ids=[o[2] for o in COMPARE_OPS])
def test_comparison_operator_matches_numpy(symbol, op, name, device):
    rng = np.random.default_rng(SEED + 1)
    for d1 in ALL_DTYPES:
        for d2 in ALL_DTYPES:
            a = _sample(rng, d1, (3, 1))
            b = _sample(rng, d2, (4,))
            x1, x2 = xp.asarray(a, device=device), xp.asarray(b, device=device)
            _same(op(x1, x2), np.asarray(op(a, b)), f"{d1} {symbol} {d2}")
            assert op(x1, x2).dtype == xp.bool


SCALARS = [True, 2, 0, 1.5, -2.25, 2 - 1j]


@pytest.mark.parametrize("symbol,op,iop,name", BINARY_OPS, ids=[o[3] for o in BINARY_OPS])
def test_binary_operator_with_python_scalars_on_either_side(symbol, op, iop, name, device):
    rng = np.random.default_rng(SEED + 2)
    small = symbol in SMALL_OPERANDS
    for dtype in ALL_DTYPES:
        a = _sample(rng, dtype, small=small)
        x = xp.asarray(a, device=device)
        for s in SCALARS:
            for args, xargs in (((a, s), (x, s)), ((s, a), (s, x))):
                expected = _numpy_result(_reference(symbol, op), *args)
                if expected is TypeError:
                    with pytest.raises(TypeError, match=rf"^{name}: expected "):
                        op(*xargs)
                    continue
                _same(op(*xargs), expected, f"{xargs[0]!r} {symbol} {xargs[1]!r}")


@pytest.mark.parametrize("symbol,op,name", COMPARE_OPS, ids=[o[2] for o in COMPARE_OPS])
def test_comparison_with_scalars_on_either_side(symbol, op, name, device):
    rng = np.random.default_rng(SEED + 3)
    for dtype in ALL_DTYPES:
        a = _sample(rng, dtype)
        x = xp.asarray(a, device=device)
        for s in [True, 3, 0.5, float("nan"), 1 + 1j]:
            with np.errstate(all="ignore"):
                ref, rref = np.asarray(op(a, s)), np.asarray(op(s, a))
            _same(op(x, s), ref, f"x({dtype}) {symbol} {s!r}")
            _same(op(s, x), rref, f"{s!r} {symbol} x({dtype})")


def test_numpy_scalars_keep_their_dtype(device):
    x = xp.asarray(np.array([1.0, 2.0], dtype=np.float32), device=device)
    a = np.array([1.0, 2.0], dtype=np.float32)
    for s in [np.float64(1.5), np.float32(2.5), np.int8(3), np.uint8(2), np.bool_(True)]:
        for op in (operator.add, operator.mul, operator.truediv, operator.lt):
            _same(op(x, s), np.asarray(op(a, s)), f"x {op.__name__} {s!r}")
            _same(op(s, x), np.asarray(op(s, a)), f"{s!r} {op.__name__} x")
    i = xp.asarray(np.array([4, 5], dtype=np.int16), device=device)
    _same(i + np.int8(1), np.array([5, 6], dtype=np.int16))
    _same(i + np.int32(1), np.array([5, 6], dtype=np.int32))


def test_operators_are_the_namespace_functions(device):
    rng = np.random.default_rng(SEED + 4)
    x1 = xp.asarray(_sample(rng, "float64"), device=device)
    x2 = xp.asarray(_sample(rng, "float64"), device=device)
    for symbol, op, iop, name in BINARY_OPS[:7]:
        _same(op(x1, x2), _host(getattr(xp, name)(x1, x2)), symbol)
    for symbol, op, name in COMPARE_OPS:
        _same(op(x1, x2), _host(getattr(xp, name)(x1, x2)), symbol)


# ---- unary ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op,name",
    [
        (operator.neg, "negative"),
        (operator.pos, "positive"),
        (abs, "abs"),
        (operator.invert, "bitwise_invert"),
    ],
)
def test_unary_operators_match_numpy(op, name, device):
    rng = np.random.default_rng(SEED + 5)
    for dtype in ALL_DTYPES:
        for shape in [(5,), ()]:
            a = _sample(rng, dtype, shape)
            x = xp.asarray(a, device=device)
            expected = _numpy_result(op, a)
            if expected is TypeError:
                with pytest.raises(TypeError, match=rf"^{name}: expected "):
                    op(x)
                continue
            r = op(x)
            _same(r, expected, f"{name}({dtype})")
            assert r._data.__class__ is device.backend.native_type


def test_results_of_0d_operands_are_0d_arrays(device):
    x = xp.asarray(2.0, device=device)
    y = xp.asarray(3.0, device=device)
    for r in (x + y, x * 2, 2 - x, x < y, -x, abs(x), x**y, x // y, x % y):
        assert r.__class__ is Array and r.shape == ()
        assert r._data.__class__ is device.backend.native_type


# ---- in-place ---------------------------------------------------------------------


@pytest.mark.parametrize("symbol,op,iop,name", BINARY_OPS, ids=[o[3] for o in BINARY_OPS])
def test_inplace_operator_same_dtype_matches_numpy(symbol, op, iop, name, device):
    rng = np.random.default_rng(SEED + 6)
    small = symbol in SMALL_OPERANDS
    for dtype in ALL_DTYPES:
        a = _sample(rng, dtype, (2, 5), small)
        b = _sample(rng, dtype, (5,), small)
        expected = _numpy_result(_reference(symbol, op), a, b)
        x = xp.asarray(a.copy(), device=device)
        y = xp.asarray(b, device=device)
        if expected is TypeError or expected.dtype != a.dtype:
            with pytest.raises(TypeError, match=rf"^(__i\w+__|{name}): "):
                iop(x, y)
            np.testing.assert_array_equal(_host(x), a)  # untouched
            continue
        buf = x._data
        r = iop(x, y)
        assert r is x and x._data is buf  # updated in place
        _same(x, expected, f"{dtype} {symbol}= {dtype}")


def test_inplace_keeps_dtype_and_shape(device):
    f32 = xp.asarray(np.ones(3, np.float32), device=device)
    f64 = xp.asarray(np.ones(3, np.float64), device=device)
    i8 = xp.asarray(np.ones(3, np.int8), device=device)
    i16 = xp.asarray(np.ones(3, np.int16), device=device)
    # Allowed: the promoted dtype is x1's.
    f64 += f32
    i16 += i8
    f32 += 2
    f32 *= 0.5
    i8 += True
    c64 = xp.asarray(np.ones(2, np.complex64), device=device)
    c64 += 1.5
    c64 *= 1j
    assert (f64.dtype, i16.dtype, f32.dtype, i8.dtype, c64.dtype) == (
        xp.float64,
        xp.int16,
        xp.float32,
        xp.int8,
        xp.complex64,
    )
    np.testing.assert_array_equal(_host(f32), [1.5, 1.5, 1.5])
    np.testing.assert_array_equal(_host(c64), [2.5j, 2.5j])
    # Refused: the dtype would change.
    with pytest.raises(
        TypeError,
        match=r"^__iadd__: the in-place result would have dtype "
        r"float64, but x1 has dtype float32",
    ):
        f32 += f64
    with pytest.raises(TypeError, match=r"^__iadd__: .*dtype float64, but x1 has dtype int8"):
        i8 += 1.5
    with pytest.raises(TypeError, match=r"^__itruediv__: .*float64, but x1 has dtype int16"):
        i16 /= 2
    with pytest.raises(TypeError, match=r"^__imul__: .*complex64, but x1 has dtype float32"):
        f32 *= 1j
    with pytest.raises(ScalarOutOfRangeError, match=r"^add: the Python int x2=300"):
        i8 += 300
    np.testing.assert_array_equal(_host(f32), [1.5, 1.5, 1.5])
    # Refused: the shape would change. Broadcasting x2 into x1 is fine.
    m = xp.asarray(np.ones((2, 3)), device=device)
    m += f64
    assert m.shape == (2, 3)
    with pytest.raises(
        ValueError,
        match=r"^__iadd__: the in-place result would have shape "
        r"\(2, 3\), but x1 has shape \(3,\)",
    ):
        f64 += m


def test_inplace_refuses_other_libraries_arrays_and_bad_types(device):
    x = xp.ones(3, device=device)
    buf = x._data
    with pytest.raises(TypeError, match=r"^add: x2 is an array of another library"):
        x += np.ones(3)
    with pytest.raises(TypeError, match=r"^multiply: x2 must be a tessera_array Array.*str"):
        x *= "a"
    assert x._data is buf
    np.testing.assert_array_equal(_host(x), np.ones(3))


def test_inplace_with_scalars_and_integer_division_by_zero(device):
    a = np.array([5, -7, 9], dtype=np.int32)
    x = xp.asarray(a.copy(), device=device)
    x //= 0
    np.testing.assert_array_equal(_host(x), [0, 0, 0])
    x = xp.asarray(a.copy(), device=device)
    x %= 0
    np.testing.assert_array_equal(_host(x), [0, 0, 0])
    f = xp.asarray([1.0, -1.0], device=device)
    f /= 0.0
    np.testing.assert_array_equal(_host(f), [np.inf, -np.inf])
    f = xp.asarray([np.inf, 1.0], device=device)
    f //= 2.0
    np.testing.assert_array_equal(_host(f), [np.inf, 0.0])


# ---- special values and errors ----------------------------------------------------


def test_operators_raise_no_floating_point_warnings(device):
    x = xp.asarray([0.0, 1.0, -1.0, np.inf], device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = x / x
        assert np.isnan(_host(r)[0])
        np.testing.assert_array_equal(_host(1.0 / x)[:3], [np.inf, 1.0, -1.0])
        assert np.isnan(_host(x - x)[3])
        assert np.isnan(_host(x * 0.0)[3])
        assert _host(x**1e6)[1] == 1.0
        assert np.isnan(_host(x % 0.0)).all()


def test_operator_errors(device):
    x = xp.asarray([1.0, 2.0], device=device)
    i = xp.asarray([1, 2], device=device)
    b = xp.asarray([True, False], device=device)
    with pytest.raises(TypeError, match=r"unsupported operand"):
        _ = x + "a"
    with pytest.raises(TypeError, match=r"unsupported operand"):
        _ = None * x
    with pytest.raises(TypeError, match=r"^bitwise_and: expected integer or boolean"):
        _ = x & x
    with pytest.raises(TypeError, match=r"^bitwise_left_shift: expected integer"):
        _ = x << 1
    with pytest.raises(TypeError, match=r"^subtract: expected numeric operands"):
        _ = b - b
    with pytest.raises(TypeError, match=r"^negative: expected an array of numeric dtype"):
        _ = -b
    with pytest.raises(TypeError, match=r"^bitwise_invert: expected"):
        _ = ~x
    with pytest.raises(ValueError, match=r"^pow: .*negative"):
        _ = i**-2
    with pytest.raises(ValueError, match=r"^add: the operands' shapes do not broadcast"):
        _ = x + xp.ones(3, device=device)
    with pytest.raises(ScalarOutOfRangeError, match=r"^add: the Python int x2="):
        _ = i + 2**63
    # Comparisons with unrelated objects fall back to Python's identity rules.
    assert (x == "a") is False
    assert (x != None) is True
    assert (b + b).dtype == xp.bool  # NumPy's rule for booleans: logical or


def test_operators_refuse_mixed_devices(device):
    x = xp.ones(3, device=device)
    fake = Array._new(np.ones(3), xp.float64, xp.Device("fake", 0))
    for call in (lambda: x + fake, lambda: fake * x, lambda: x < fake, lambda: fake == x):
        with pytest.raises(DeviceMismatchError, match=r"^\w+: arrays are on different devices"):
            call()
    y = xp.ones(3, device=device)
    with pytest.raises(DeviceMismatchError):
        y += fake
    np.testing.assert_array_equal(_host(y), np.ones(3))


def test_matmul_operator_uses_matmul(device):
    a = np.arange(6.0).reshape(2, 3)
    b = np.arange(12.0).reshape(3, 4)
    x, y = xp.asarray(a, device=device), xp.asarray(b, device=device)
    _same(x @ y, a @ b)
    z = xp.asarray(np.eye(3), device=device)
    buf = z._data
    z @= xp.asarray(np.eye(3) * 2, device=device)
    assert z._data is buf
    np.testing.assert_array_equal(_host(z), np.eye(3) * 2)


@pytest.mark.parametrize("op", ["+=", "-=", "*=", "/="])
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128", "int32"])
def test_inplace_writes_into_x1_and_matches_out_of_place(op, dtype, device):
    """The in-place short path updates x1's own buffer (views see it) with the
    out-of-place values, for an Array operand and for a Python scalar."""
    if op == "/=" and dtype == "int32":
        return  # true division of integers changes the dtype: tested elsewhere
    rng = np.random.default_rng(11)
    a = (rng.standard_normal((3, 4)) * 10 + 1).astype(dtype)
    b = (rng.standard_normal(4) * 10 + 1).astype(dtype)
    for other in (xp.asarray(b, device=device), 2.5 if dtype != "int32" else None):
        if other is None:
            continue
        x = xp.asarray(a.copy(), device=device)
        view = x[1]
        expected = {"+=": x + other, "-=": x - other, "*=": x * other, "/=": x / other}[op]
        y = x
        if op == "+=":
            y += other
        elif op == "-=":
            y -= other
        elif op == "*=":
            y *= other
        else:
            y /= other
        assert y is x
        np.testing.assert_array_equal(np.asarray(x.to_device("cpu")),
                                      np.asarray(expected.to_device("cpu")))
        np.testing.assert_array_equal(np.asarray(view.to_device("cpu")),
                                      np.asarray(expected[1].to_device("cpu")))
