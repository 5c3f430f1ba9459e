"""Elementwise functions of the standard.

Specification: https://data-apis.org/array-api/2025.12/API_specification/elementwise_functions.html

Each function is declared with its signature and docstring and decorated with
``@_unary(...)`` / ``@_binary(...)``, which builds it from
:func:`tessera_array._helpers.unary_function` / ``binary_function``: validation,
promotion and the call to the op of the same name in the device's native ``ops``
namespace, with the hot path (arrays of one dtype on one device) inlined. The
decorator's arguments:

``kinds``
    The ``DType.kind`` letters the (promoted) operand dtype may have; anything else
    is a TypeError naming the function.
``fast``
    The kinds computed in the operand dtype itself: two arrays of one such dtype on
    one device take the hot path straight to the backend.
``compute``
    For the other kinds, the dtype to compute in. tessera follows NumPy here:
    integer input to a floating-point function computes in NumPy's float dtype
    (float32 where NumPy would pick float16, which the standard lacks), true
    division of integers in float64, and boolean input to an integer-only
    arithmetic function in int8.

Python scalars are weak (they take the array's dtype when the kinds fit; across
kinds NumPy's rules apply); NumPy scalars keep their dtype, as in NumPy.
"""

from __future__ import annotations

import functools
import operator

from . import _dtypes
from ._array import Array
from ._dtypes import DType
from ._helpers import (
    _coerce_scalar,
    _rerun_quietly,
    binary_function,
    check_array,
    check_same_device,
    default_float,
    elementwise_unary,
    unary_function,
    wrap_as,
)

__all__ = [
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
    "bitwise_invert",
    "bitwise_left_shift",
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
    "sqrt",
    "square",
    "subtract",
    "tan",
    "tanh",
    "trunc",
]

# Kind strings (DType.kind letters) for the helpers' ``kinds`` and ``fast``.
_ALL = "biufc"
_NUMERIC = "iufc"
_REAL_B = "biuf"
_REAL = "iuf"
_INT_B = "biu"
_INT = "iu"
_FLOAT = "fc"
_REAL_FLOAT = "f"

# NumPy's floating-point result for integer and boolean input.
# Note: NumPy gives float16 for 8-bit and boolean input; the standard has no
# float16, so tessera gives float32 there.
_FLOAT_FOR = {
    "bool": _dtypes.float32,
    "int8": _dtypes.float32,
    "uint8": _dtypes.float32,
    "int16": _dtypes.float32,
    "uint16": _dtypes.float32,
    "int32": _dtypes.float64,
    "uint32": _dtypes.float64,
    "int64": _dtypes.float64,
    "uint64": _dtypes.float64,
}


def _float_for(dt: DType, device) -> DType:
    f = _FLOAT_FOR[dt.name]
    return f if f is _dtypes.float32 else default_float(device)


def _to_float(dt: DType, device) -> DType:
    """Unary ``compute``: integer/boolean input computes in NumPy's float dtype."""
    return _float_for(dt, device)


def _to_float_pair(dt: DType, dt1: DType, dt2: DType, device) -> DType:
    """Binary ``compute`` for real floating-point functions of integer operands.

    NumPy picks the smallest float both operand dtypes cast to safely, which can be
    narrower than the float of their promoted integer dtype (int8 with uint16 gives
    float32, not float64).
    """
    f1 = _float_for(dt1, device)
    f2 = _float_for(dt2, device)
    return f1 if f1.bits >= f2.bits else f2


def _true_divide(dt: DType, dt1: DType, dt2: DType, device) -> DType:
    """``divide`` of integer or boolean operands computes in the default float dtype."""
    return default_float(device)


def _bool_to_int8(dt: DType, device) -> DType:
    """Boolean input to an arithmetic function computes in int8, as in NumPy."""
    return _dtypes.int8


def _bool_to_int8_pair(dt: DType, dt1: DType, dt2: DType, device) -> DType:
    """Binary ``compute``: boolean operands of an integer-arithmetic function -> int8."""
    return _dtypes.int8


def _unary(kinds: str, fast: str, compute=None, result_dtype=None):
    """Decorator: the declared ``def f(x, /)`` (signature + docstring) becomes
    :func:`~tessera_array._helpers.unary_function` for ``f.__name__``."""

    def decorate(declared):
        op = unary_function(declared.__name__, kinds, fast, compute, result_dtype)
        return functools.update_wrapper(op, declared)

    return decorate


def _binary(kinds: str, fast: str, compute=None, result_dtype=None):
    """Decorator: the declared ``def f(x1, x2, /)`` becomes
    :func:`~tessera_array._helpers.binary_function` for ``f.__name__``."""

    def decorate(declared):
        op = binary_function(declared.__name__, kinds, fast, compute, result_dtype)
        return functools.update_wrapper(op, declared)

    return decorate


@_unary(_ALL, _REAL_B)
def abs(x: Array, /) -> Array:
    """Elementwise absolute value ``|x|`` (a real dtype for complex input).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.abs.html
    """


@_unary(_ALL, _FLOAT, _to_float)
def acos(x: Array, /) -> Array:
    """Elementwise inverse cosine.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.acos.html

    Integer and boolean input computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit input, where NumPy would give float16; float64 otherwise).
    """


@_unary(_ALL, _FLOAT, _to_float)
def acosh(x: Array, /) -> Array:
    """Elementwise inverse hyperbolic cosine.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.acosh.html

    Integer and boolean input computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit input, where NumPy would give float16; float64 otherwise).
    """


@_binary(_ALL, _ALL)
def add(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise sum ``x1 + x2``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.add.html
    """


@_unary(_ALL, _FLOAT, _to_float)
def asin(x: Array, /) -> Array:
    """Elementwise inverse sine.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.asin.html

    Integer and boolean input computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit input, where NumPy would give float16; float64 otherwise).
    """


@_unary(_ALL, _FLOAT, _to_float)
def asinh(x: Array, /) -> Array:
    """Elementwise inverse hyperbolic sine.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.asinh.html

    Integer and boolean input computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit input, where NumPy would give float16; float64 otherwise).
    """


@_unary(_ALL, _FLOAT, _to_float)
def atan(x: Array, /) -> Array:
    """Elementwise inverse tangent.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.atan.html

    Integer and boolean input computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit input, where NumPy would give float16; float64 otherwise).
    """


@_binary(_REAL_B, _REAL_FLOAT, _to_float_pair)
def atan2(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise inverse tangent of ``x1 / x2``, using both signs for the quadrant.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.atan2.html

    Integer and boolean operands computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit operands, where NumPy would give float16; float64 otherwise).
    """


@_unary(_ALL, _FLOAT, _to_float)
def atanh(x: Array, /) -> Array:
    """Elementwise inverse hyperbolic tangent.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.atanh.html

    Integer and boolean input computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit input, where NumPy would give float16; float64 otherwise).
    """


@_binary(_INT_B, _INT_B)
def bitwise_and(x1: Array | int | bool, x2: Array | int | bool, /) -> Array:
    """Elementwise bitwise AND ``x1 & x2``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.bitwise_and.html
    """


@_unary(_INT_B, _INT_B)
def bitwise_invert(x: Array, /) -> Array:
    """Elementwise bitwise NOT ``~x`` (logical NOT for booleans).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.bitwise_invert.html
    """


@_binary(_INT_B, _INT, _bool_to_int8_pair)
def bitwise_left_shift(x1: Array | int, x2: Array | int, /) -> Array:
    """Elementwise left shift ``x1 << x2``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.bitwise_left_shift.html

    Shift counts that are negative or not smaller than the bit width give NumPy's
    results (0 here).
    """


@_binary(_INT_B, _INT_B)
def bitwise_or(x1: Array | int | bool, x2: Array | int | bool, /) -> Array:
    """Elementwise bitwise OR ``x1 | x2``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.bitwise_or.html
    """


@_binary(_INT_B, _INT, _bool_to_int8_pair)
def bitwise_right_shift(x1: Array | int, x2: Array | int, /) -> Array:
    """Elementwise arithmetic right shift ``x1 >> x2``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.bitwise_right_shift.html

    Shift counts that are negative or not smaller than the bit width give NumPy's
    results (0, or -1 for a negative ``x1``).
    """


@_binary(_INT_B, _INT_B)
def bitwise_xor(x1: Array | int | bool, x2: Array | int | bool, /) -> Array:
    """Elementwise bitwise XOR ``x1 ^ x2``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.bitwise_xor.html
    """


@_unary(_REAL_B, _REAL_B)
def ceil(x: Array, /) -> Array:
    """Elementwise ceiling (integer and boolean input is returned as a copy).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.ceil.html
    """


def clip(
    x: Array,
    /,
    min: float | Array | None = None,
    max: float | Array | None = None,
) -> Array:
    """Elementwise clamp of ``x`` to ``[min, max]``; the result keeps x's dtype.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.clip.html

    Bounds may be None, Python scalars or arrays on x's device; the result has the
    broadcast shape of all three. A Python int bound outside an integer dtype's
    range is clamped to the range (exact). An array bound of another dtype is cast
    to x's dtype (integers clamped to its range first). A floating-point bound for
    an integer or boolean ``x`` is a TypeError, as is an int bound for a boolean
    ``x``: the result could not keep x's dtype exactly.
    """
    # Note: NumPy promotes (int x with a float bound gives float64); the standard
    # keeps x's dtype, so bounds that cannot convert exactly are refused instead.
    check_array(x, "clip")
    dt = x._dtype
    if dt.kind not in _REAL_B:
        raise TypeError(
            f"clip: expected an array of real-valued or boolean dtype. Received: x.dtype={dt}"
        )
    lo = _clip_bound(min, "min", x)
    hi = _clip_bound(max, "max", x)
    dev = x._device
    return wrap_as(_call_native("clip", dev, dev.ops.clip, x._data, lo, hi), dt, dev)


def _clip_bound(b, name: str, x: Array):
    """A bound for the native clip: None, a Python scalar fitting x, or a buffer of x's dtype."""
    if b is None:
        return None
    dt = x._dtype
    if b.__class__ is Array:
        check_same_device("clip", x, b)
        bd = b._dtype
        if bd is dt:
            return b._data
        if (
            bd.kind == "c"
            or (bd.kind == "f" and dt.kind != "f")
            or (dt.kind == "b" and bd.kind != "b")
        ):
            raise TypeError(
                f"clip: {name} must have x's dtype or one that converts to it exactly. "
                f"Received: x.dtype={dt}, {name}.dtype={bd}"
            )
        ops = x._device.ops
        data = b._data
        if dt.kind in "iu" and bd.kind in "iu":
            lo, hi = _int_bounds(dt)
            data = ops.clip(data, lo, hi)
        return ops.astype(data, dt)
    b = _coerce_scalar("clip", b, name)
    if isinstance(b, bool):
        return b
    if isinstance(b, int) and dt.kind != "b":
        if dt.kind in "iu":
            lo, hi = _int_bounds(dt)
            return max(lo, min(b, hi))
        try:
            return float(b)
        except OverflowError:
            return float("inf") if b > 0 else float("-inf")
    if isinstance(b, float) and dt.kind == "f":
        return b
    raise TypeError(
        f"clip: {name} must be a Python scalar of x's kind (the result keeps x's dtype). "
        f"Received: x.dtype={dt}, {name}={b!r} ({type(b).__name__})"
    )


def _int_bounds(dt: DType):
    if dt.kind == "u":
        return 0, 2**dt.bits - 1
    return -(2 ** (dt.bits - 1)), 2 ** (dt.bits - 1) - 1


def _call_native(func: str, dev, fn, *args):
    try:
        return fn(*args)
    except (Warning, FloatingPointError):
        return _rerun_quietly(dev, fn, *args)
    except ValueError as err:
        raise ValueError(f"{func}: {err}") from err


@_unary(_ALL, _NUMERIC, _bool_to_int8)
def conj(x: Array, /) -> Array:
    """Elementwise complex conjugate.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.conj.html
    """


@_binary(_REAL_B, _REAL_FLOAT, _to_float_pair)
def copysign(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise magnitude of ``x1`` with the sign of ``x2``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.copysign.html

    Integer and boolean operands computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit operands, where NumPy would give float16; float64 otherwise).
    """


@_unary(_ALL, _FLOAT, _to_float)
def cos(x: Array, /) -> Array:
    """Elementwise cosine.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.cos.html

    Integer and boolean input computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit input, where NumPy would give float16; float64 otherwise).
    """


@_unary(_ALL, _FLOAT, _to_float)
def cosh(x: Array, /) -> Array:
    """Elementwise hyperbolic cosine.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.cosh.html

    Integer and boolean input computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit input, where NumPy would give float16; float64 otherwise).
    """


@_binary(_ALL, _FLOAT, _true_divide)
def divide(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise true division ``x1 / x2``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.divide.html

    Integer and boolean operands compute in the default floating-point dtype
    (float64), as in NumPy.
    """


@_binary(_ALL, _ALL, None, _dtypes.bool)
def equal(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise ``x1 == x2``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.equal.html
    """


@_unary(_ALL, _FLOAT, _to_float)
def exp(x: Array, /) -> Array:
    """Elementwise exponential ``e**x``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.exp.html

    Integer and boolean input computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit input, where NumPy would give float16; float64 otherwise).
    """


@_unary(_ALL, _FLOAT, _to_float)
def expm1(x: Array, /) -> Array:
    """Elementwise ``exp(x) - 1``, accurate near zero.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.expm1.html

    Integer and boolean input computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit input, where NumPy would give float16; float64 otherwise).
    """


@_unary(_REAL_B, _REAL_B)
def floor(x: Array, /) -> Array:
    """Elementwise floor (integer and boolean input is returned as a copy).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.floor.html
    """


@_binary(_REAL_B, _REAL, _bool_to_int8_pair)
def floor_divide(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise floor division ``x1 // x2``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.floor_divide.html

    Integer division by zero gives 0 (NumPy's result), without a warning.
    """


@_binary(_ALL, _ALL, None, _dtypes.bool)
def greater(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``x1 > x2``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.greater.html
    """


@_binary(_ALL, _ALL, None, _dtypes.bool)
def greater_equal(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``x1 >= x2``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.greater_equal.html
    """


@_binary(_REAL_B, _REAL_FLOAT, _to_float_pair)
def hypot(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``sqrt(x1**2 + x2**2)`` without undue overflow.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.hypot.html

    Integer and boolean operands computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit operands, where NumPy would give float16; float64 otherwise).
    """


@_unary(_ALL, _REAL_B)
def imag(x: Array, /) -> Array:
    """Elementwise imaginary part (zeros of the same dtype for real input).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.imag.html
    """


@_unary(_ALL, _ALL, None, _dtypes.bool)
def isfinite(x: Array, /) -> Array:
    """Elementwise test for finite values.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.isfinite.html
    """


@_unary(_ALL, _ALL, None, _dtypes.bool)
def isinf(x: Array, /) -> Array:
    """Elementwise test for positive or negative infinity.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.isinf.html
    """


@_unary(_ALL, _ALL, None, _dtypes.bool)
def isnan(x: Array, /) -> Array:
    """Elementwise test for NaN.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.isnan.html
    """


@_binary(_ALL, _ALL, None, _dtypes.bool)
def less(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``x1 < x2``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.less.html
    """


@_binary(_ALL, _ALL, None, _dtypes.bool)
def less_equal(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``x1 <= x2``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.less_equal.html
    """


@_unary(_ALL, _FLOAT, _to_float)
def log(x: Array, /) -> Array:
    """Elementwise natural logarithm.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.log.html

    Integer and boolean input computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit input, where NumPy would give float16; float64 otherwise).
    """


@_unary(_ALL, _FLOAT, _to_float)
def log10(x: Array, /) -> Array:
    """Elementwise base-10 logarithm.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.log10.html

    Integer and boolean input computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit input, where NumPy would give float16; float64 otherwise).
    """


@_unary(_ALL, _FLOAT, _to_float)
def log1p(x: Array, /) -> Array:
    """Elementwise ``log(1 + x)``, accurate near zero.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.log1p.html

    Integer and boolean input computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit input, where NumPy would give float16; float64 otherwise).
    """


@_unary(_ALL, _FLOAT, _to_float)
def log2(x: Array, /) -> Array:
    """Elementwise base-2 logarithm.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.log2.html

    Integer and boolean input computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit input, where NumPy would give float16; float64 otherwise).
    """


@_binary(_REAL_B, _REAL_FLOAT, _to_float_pair)
def logaddexp(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise ``log(exp(x1) + exp(x2))`` without undue overflow.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.logaddexp.html

    Integer and boolean operands computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit operands, where NumPy would give float16; float64 otherwise).
    """


@_binary(_ALL, _ALL, None, _dtypes.bool)
def logical_and(x1: Array | bool, x2: Array | bool, /) -> Array:
    """Elementwise logical AND.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.logical_and.html
    """


@_unary(_ALL, _ALL, None, _dtypes.bool)
def logical_not(x: Array, /) -> Array:
    """Elementwise logical NOT.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.logical_not.html
    """


@_binary(_ALL, _ALL, None, _dtypes.bool)
def logical_or(x1: Array | bool, x2: Array | bool, /) -> Array:
    """Elementwise logical OR.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.logical_or.html
    """


@_binary(_ALL, _ALL, None, _dtypes.bool)
def logical_xor(x1: Array | bool, x2: Array | bool, /) -> Array:
    """Elementwise logical XOR.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.logical_xor.html
    """


@_binary(_ALL, _ALL)
def maximum(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise maximum (NaN propagates).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.maximum.html
    """


@_binary(_ALL, _ALL)
def minimum(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise minimum (NaN propagates).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.minimum.html
    """


@_binary(_ALL, _ALL)
def multiply(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise product ``x1 * x2``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.multiply.html
    """


@_unary(_NUMERIC, _NUMERIC)
def negative(x: Array, /) -> Array:
    """Elementwise numerical negative ``-x``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.negative.html
    """


@_binary(_REAL_B, _REAL_FLOAT, _to_float_pair)
def nextafter(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise next representable value after ``x1`` toward ``x2``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.nextafter.html

    Integer and boolean operands computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit operands, where NumPy would give float16; float64 otherwise).
    """


@_binary(_ALL, _ALL, None, _dtypes.bool)
def not_equal(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise ``x1 != x2``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.not_equal.html
    """


@_unary(_NUMERIC, _NUMERIC)
def positive(x: Array, /) -> Array:
    """Elementwise numerical positive ``+x`` (a copy).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.positive.html
    """


@_binary(_ALL, _NUMERIC, _bool_to_int8_pair)
def pow(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise power ``x1 ** x2``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.pow.html

    Integer arrays to negative integer powers raise ValueError, as in NumPy; cast
    ``x1`` to a floating-point dtype for those.
    """


@_unary(_ALL, _REAL_B)
def real(x: Array, /) -> Array:
    """Elementwise real part (a copy of real input).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.real.html
    """


@_unary(_ALL, _NUMERIC, _bool_to_int8)
def reciprocal(x: Array, /) -> Array:
    """Elementwise reciprocal ``1 / x``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.reciprocal.html

    Integer input computes an integer reciprocal, as NumPy does (``1 // x`` truncated
    toward zero).
    """


@_binary(_REAL_B, _REAL, _bool_to_int8_pair)
def remainder(x1: Array | float, x2: Array | float, /) -> Array:
    """Elementwise remainder of floor division (the sign of ``x2``, as Python's ``%``).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.remainder.html

    Integer division by zero gives 0 (NumPy's result), without a warning.
    """


_round_to_integer = unary_function("round", _ALL, _NUMERIC, _to_float)


def round(x: Array, /, decimals: int = 0) -> Array:
    """Elementwise rounding to the nearest integer, halves to even.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.round.html

    ``decimals`` is a NumPy extension: round to that many decimal places (negative:
    to tens, hundreds, ...), as ``numpy.round`` does.
    """
    if decimals == 0 and decimals.__class__ is int:
        return _round_to_integer(x)
    try:
        decimals = operator.index(decimals)
    except TypeError as err:
        raise TypeError(f"round: decimals must be an int. Received: decimals={decimals!r}") from err
    check_array(x, "round")
    ops = x._device.ops
    return elementwise_unary(
        "round", x, _ALL, _NUMERIC, _to_float, native=lambda a: ops.round(a, decimals)
    )


@_unary(_NUMERIC, _NUMERIC)
def sign(x: Array, /) -> Array:
    """Elementwise sign (``x / |x|`` for complex input, 0 at 0).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.sign.html
    """


@_unary(_REAL_B, _REAL_B, None, _dtypes.bool)
def signbit(x: Array, /) -> Array:
    """Elementwise test of the sign bit (True for -0.0).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.signbit.html
    """


@_unary(_ALL, _FLOAT, _to_float)
def sin(x: Array, /) -> Array:
    """Elementwise sine.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.sin.html

    Integer and boolean input computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit input, where NumPy would give float16; float64 otherwise).
    """


@_unary(_ALL, _FLOAT, _to_float)
def sinh(x: Array, /) -> Array:
    """Elementwise hyperbolic sine.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.sinh.html

    Integer and boolean input computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit input, where NumPy would give float16; float64 otherwise).
    """


@_unary(_ALL, _FLOAT, _to_float)
def sqrt(x: Array, /) -> Array:
    """Elementwise principal square root.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.sqrt.html

    Integer and boolean input computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit input, where NumPy would give float16; float64 otherwise).
    """


@_unary(_ALL, _NUMERIC, _bool_to_int8)
def square(x: Array, /) -> Array:
    """Elementwise square ``x * x``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.square.html
    """


@_binary(_NUMERIC, _NUMERIC)
def subtract(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise difference ``x1 - x2``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.subtract.html
    """


@_unary(_ALL, _FLOAT, _to_float)
def tan(x: Array, /) -> Array:
    """Elementwise tangent.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.tan.html

    Integer and boolean input computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit input, where NumPy would give float16; float64 otherwise).
    """


@_unary(_ALL, _FLOAT, _to_float)
def tanh(x: Array, /) -> Array:
    """Elementwise hyperbolic tangent.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.tanh.html

    Integer and boolean input computes in floating point with NumPy's result dtype
    (float32 for 8- and 16-bit input, where NumPy would give float16; float64 otherwise).
    """


@_unary(_REAL_B, _REAL_B)
def trunc(x: Array, /) -> Array:
    """Elementwise truncation toward zero (integer and boolean input is copied).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.trunc.html
    """
