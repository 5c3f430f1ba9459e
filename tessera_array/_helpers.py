"""Shared front-end helpers: argument checks, wrapping, scalar promotion.

Every namespace function validates its arguments here, then calls the native
``ops`` namespace of its operands' device. Error messages start with the public
function's name, say what was expected, then ``Received:`` (see STYLE).
"""

from __future__ import annotations

import math

from . import _dtypes
from ._array import Array, check_same_device
from ._dtypes import DType
from ._errors import MissingCapabilityError, ScalarOutOfRangeError

__all__ = [
    "Array",
    "check_array",
    "check_same_device",
    "wrap",
    "default_int",
    "default_float",
    "default_complex",
    "scalar_dtype_for",
    "check_scalar_range",
    "check_dtype_on_device",
    "elementwise_binary",
    "elementwise_unary",
    "astype_native",
]

_builtin_bool = bool
_PY_SCALARS = (bool, int, float, complex)


def check_array(x, func: str, name: str = "x") -> Array:
    """``x`` itself when it is an Array; TypeError naming ``func`` and ``name`` otherwise."""
    if x.__class__ is Array or isinstance(x, Array):
        return x
    raise TypeError(
        f"{func}: {name} must be a tessera_array Array. "
        f"Received: {name} of type {type(x).__name__}"
    )


def wrap(native, device) -> Array:
    """Wrap a native buffer produced on ``device`` (reads its dtype from the buffer)."""
    be = device._backend
    if native.__class__ is not be.native_type:
        native = be.coerce_native(native)
    return Array._new(native, be.native_dtype(native), device)


def wrap_as(native, dtype: DType, device) -> Array:
    """Wrap a native buffer whose dtype the caller already knows."""
    be = device._backend
    if native.__class__ is not be.native_type:
        native = be.coerce_native(native)
    return Array._new(native, dtype, device)


def default_int(device=None) -> DType:
    return _dtypes.int64


def default_float(device=None) -> DType:
    if device is not None and _dtypes.float64 not in device._backend.dtypes(device):
        return _dtypes.float32
    return _dtypes.float64


def default_complex(device=None) -> DType:
    return _dtypes.COMPLEX_OF[default_float(device)]


def check_dtype_on_device(dtype: DType, device, func: str) -> None:
    """MissingCapabilityError when ``device`` cannot hold ``dtype``."""
    if dtype not in device._backend.dtypes(device):
        raise MissingCapabilityError(
            f"{func}: device {device} does not support dtype {dtype}. Supported on "
            f"{device}: {', '.join(d.name for d in device._backend.dtypes(device))}."
        )


def scalar_dtype_for(func: str, array_dtype: DType, scalar, device=None) -> DType:
    """The dtype an operation computes in when an array meets a Python scalar.

    The scalar is *weak* (NEP 50 / the standard): it takes the array's dtype when the
    kinds fit. Across kinds NumPy's rules apply: a float scalar with a bool/integer
    array computes in the default float dtype, a complex scalar in the complex dtype
    matching the array's precision.
    """
    kind = array_dtype.kind
    if isinstance(scalar, _builtin_bool):
        return array_dtype
    if isinstance(scalar, int):
        if kind == "b":
            return default_int(device)
        if kind in "iu":
            check_scalar_range(func, array_dtype, scalar)
        return array_dtype
    if isinstance(scalar, float):
        if kind in "biu":
            return default_float(device)
        return array_dtype
    if isinstance(scalar, complex):
        if kind in "biu":
            return default_complex(device)
        if kind == "f":
            return _dtypes.COMPLEX_OF[array_dtype]
        return array_dtype
    raise TypeError(
        f"{func}: expected an array or a Python scalar (bool, int, float, complex). "
        f"Received: {type(scalar).__name__}"
    )


_INT_RANGES = {}


def _int_range(dtype: DType):
    rng = _INT_RANGES.get(dtype)
    if rng is None:
        if dtype.kind == "u":
            rng = (0, 2**dtype.bits - 1)
        else:
            rng = (-(2 ** (dtype.bits - 1)), 2 ** (dtype.bits - 1) - 1)
        _INT_RANGES[dtype] = rng
    return rng


def check_scalar_range(func: str, dtype: DType, value: int, name: str = "scalar") -> None:
    lo, hi = _int_range(dtype)
    if value < lo or value > hi:
        raise ScalarOutOfRangeError(
            f"{func}: the Python int {name}={value} is out of range for the array's dtype "
            f"{dtype} ([{lo}, {hi}]). Cast the array first, e.g. astype(x, int64)."
        )


def astype_native(x: Array, dtype: DType):
    """The native buffer of ``x`` converted to ``dtype`` (no copy when it already is)."""
    if x._dtype is dtype:
        return x._data
    return x._device.ops.astype(x._data, dtype)


def elementwise_binary(func: str, x1, x2, native, *, result_dtype=None, compute=None):
    """Apply a native binary op with the standard's promotion and device rules.

    ``native(a, b)`` receives two native buffers of the computation dtype, or one
    buffer and a weak Python scalar. ``compute(dtype) -> dtype`` may remap the
    promoted dtype (e.g. true division of integers computes in float64);
    ``result_dtype`` fixes the result's dtype when the op always returns one
    (comparisons: bool).
    """
    if x1.__class__ is Array:
        if x2.__class__ is Array:
            dev = x1._device
            if x2._device is not dev:
                check_same_device(func, x1, x2)
            dt = x1._dtype if x1._dtype is x2._dtype else _dtypes.PROMOTION_TABLE[x1._dtype, x2._dtype]
            if compute is not None:
                dt = compute(dt)
            a = x1._data if x1._dtype is dt else dev.ops.astype(x1._data, dt)
            b = x2._data if x2._dtype is dt else dev.ops.astype(x2._data, dt)
        else:
            x2 = _coerce_scalar(func, x2, "x2")
            dev = x1._device
            dt = scalar_dtype_for(func, x1._dtype, x2, dev)
            if compute is not None:
                dt = compute(dt)
            a = x1._data if x1._dtype is dt else dev.ops.astype(x1._data, dt)
            b = _scalar_as(x2, dt)
    elif x2.__class__ is Array:
        x1 = _coerce_scalar(func, x1, "x1")
        dev = x2._device
        dt = scalar_dtype_for(func, x2._dtype, x1, dev)
        if compute is not None:
            dt = compute(dt)
        a = _scalar_as(x1, dt)
        b = x2._data if x2._dtype is dt else dev.ops.astype(x2._data, dt)
    else:
        if isinstance(x1, Array) or isinstance(x2, Array):
            raise TypeError(f"{func}: Array subclasses are not supported")
        raise TypeError(
            f"{func}: at least one of x1, x2 must be a tessera_array Array. Received: "
            f"x1 of type {type(x1).__name__}, x2 of type {type(x2).__name__}"
        )
    r = native(a, b)
    if result_dtype is not None:
        return wrap_as(r, result_dtype, dev)
    return wrap(r, dev)


def _coerce_scalar(func: str, s, name: str):
    if isinstance(s, _PY_SCALARS):
        return s
    if hasattr(s, "__array_namespace__"):
        raise TypeError(
            f"{func}: {name} is an array of another library ({type(s).__module__}."
            f"{type(s).__name__}); convert it with tessera_array.asarray() first."
        )
    # NumPy scalars and other numbers that convert losslessly.
    import numpy as np

    if isinstance(s, np.generic) and s.ndim == 0:
        return s.item()
    raise TypeError(
        f"{func}: {name} must be a tessera_array Array or a Python scalar. "
        f"Received: {name} of type {type(s).__name__}"
    )


def _scalar_as(s, dt: DType):
    """A Python scalar adjusted to the computation dtype's kind (weak, not cast)."""
    if dt.kind == "f" and isinstance(s, complex):
        return s  # caller's compute() decides; kept as-is
    if dt.kind in "fc" and isinstance(s, int) and not isinstance(s, _builtin_bool):
        # Huge Python ints do not fit a float weakly in NumPy; convert explicitly.
        try:
            return float(s) if dt.kind == "f" else complex(s)
        except OverflowError:
            return math.copysign(math.inf, s)
    return s


def elementwise_unary(func: str, x, native, *, compute=None, result_dtype=None):
    """Apply a native unary op; ``compute(dtype)`` may remap the input dtype first."""
    if x.__class__ is not Array:
        check_array(x, func)
    dt = x._dtype
    if compute is not None:
        dt = compute(dt)
    a = x._data if x._dtype is dt else x._device.ops.astype(x._data, dt)
    r = native(a)
    if result_dtype is not None:
        return wrap_as(r, result_dtype, x._device)
    return wrap(r, x._device)
