"""Data type functions of the standard.

Specification: https://data-apis.org/array-api/2025.12/API_specification/data_type_functions.html
"""

from __future__ import annotations

import numpy as np

from . import _dtypes
from ._array import Array
from ._devices import as_device
from ._dtypes import DType, coerce_dtype
from ._errors import DeviceMismatchError, MissingCapabilityError
from ._helpers import (
    check_array,
    check_dtype_on_device,
    default_complex,
    default_float,
    default_int,
    supports_dtype,
)

__all__ = ["astype", "can_cast", "finfo", "iinfo", "isdtype", "result_type"]

_builtin_bool = bool


def astype(x: Array, dtype, /, *, copy: bool = True, device=None) -> Array:
    """Copy ``x`` to ``dtype`` (and optionally to ``device``), irrespective of promotion.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.astype.html

    Notes
    -----
    Casting a complex array to a real-valued (integer or real floating) dtype raises
    TypeError, as the standard recommends (NumPy drops the imaginary part); casting
    it to bool is allowed. Casting NaN or infinity to an integer dtype gives the
    backend's value, without a warning.
    """
    if x.__class__ is not Array:
        check_array(x, "astype")
    dt = dtype if dtype.__class__ is DType else coerce_dtype(dtype, "dtype", "astype")
    if copy.__class__ is not _builtin_bool:
        raise TypeError(f"astype: copy must be True or False. Received: copy={copy!r}")
    if x._dtype.kind == "c" and dt.kind in "iuf":
        raise TypeError(
            f"astype: casting a complex array to dtype {dt} would drop the imaginary part; "
            f"take real() or imag() first. Received: x.dtype={x._dtype}, dtype={dt}"
        )
    if device is not None:
        dev = as_device(device, "astype")
        if dev is not x._device:
            check_dtype_on_device(dt, dev, "astype")
            src = x._device
            if dt is not x._dtype and supports_dtype(src, dt):
                # Cast where x lives, then move: the target may not hold x's dtype.
                return Array._new(src.ops.astype(x._data, dt), dt, src).to_device(dev)
            x = x.to_device(dev)
            copy = False  # the transfer made a new buffer
    else:
        dev = x._device
    if dt is x._dtype:
        if not copy:
            return x
        return Array._new(dev.ops.astype(x._data, dt, copy=True), dt, dev)
    check_dtype_on_device(dt, dev, "astype")
    return Array._new(dev.ops.astype(x._data, dt), dt, dev)


def can_cast(from_, to, /) -> bool:
    """Whether ``from_`` (a dtype or an array) can be cast to ``to`` by promotion.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.can_cast.html

    Notes
    -----
    Mixed-kind casts follow NumPy's safe casting (``int32 -> float64`` is True).
    For an array, a ``to`` its device does not support gives False.
    """
    to = coerce_dtype(to, "to", "can_cast")
    if from_.__class__ is Array or isinstance(from_, Array):
        dev = from_._device
        if not supports_dtype(dev, to):
            return False
        from_ = from_._dtype
    else:
        from_ = coerce_dtype(from_, "from_", "can_cast")
    return _dtypes.PROMOTION_TABLE[from_, to] is to


# ---- finfo / iinfo ---------------------------------------------------------------


class finfo_object:
    """Machine limits of a real floating-point dtype (``finfo(complex64)`` describes float32).

    Attributes: ``bits``, ``eps``, ``max``, ``min``, ``smallest_normal`` (Python
    ints/floats) and ``dtype`` (a tessera DType).
    """

    __slots__ = ("bits", "dtype", "eps", "max", "min", "smallest_normal")

    def __init__(self, dtype: DType):
        if dtype in _dtypes._LAZY:  # ml_dtypes' finfo (imported with bfloat16 itself)
            import ml_dtypes

            info = ml_dtypes.finfo(dtype._np)
        else:
            info = np.finfo(dtype._np)
        self.bits = int(info.bits)
        self.eps = float(info.eps)
        self.max = float(info.max)
        self.min = float(info.min)
        self.smallest_normal = float(info.smallest_normal)
        self.dtype = dtype

    def __repr__(self) -> str:
        return (
            f"finfo(bits={self.bits}, eps={self.eps}, max={self.max}, min={self.min}, "
            f"smallest_normal={self.smallest_normal}, dtype={self.dtype})"
        )


class iinfo_object:
    """Machine limits of an integer dtype: ``bits``, ``max``, ``min`` (ints), ``dtype``."""

    __slots__ = ("bits", "dtype", "max", "min")

    def __init__(self, dtype: DType):
        self.bits = dtype.bits
        if dtype.kind == "u":
            self.min, self.max = 0, 2**dtype.bits - 1
        else:
            self.min, self.max = -(2 ** (dtype.bits - 1)), 2 ** (dtype.bits - 1) - 1
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"iinfo(bits={self.bits}, min={self.min}, max={self.max}, dtype={self.dtype})"


_FINFO: dict = {}
_IINFO: dict = {}


def _info_dtype(type, func: str) -> DType:
    if type.__class__ is Array or isinstance(type, Array):
        return type._dtype
    return coerce_dtype(type, "type", func)


def finfo(type, /) -> finfo_object:
    """Machine limits of a floating-point dtype (of an array's dtype, for an array).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.finfo.html
    """
    dt = _info_dtype(type, "finfo")
    if dt.kind not in "fc":
        # ValueError, as NumPy and array-api-strict raise for a dtype of the wrong kind.
        raise ValueError(
            f"finfo: type must be a floating-point dtype (or an array of one); use iinfo() "
            f"for integers. Received: dtype={dt}"
        )
    dt = _dtypes.REAL_OF.get(dt, dt)
    out = _FINFO.get(dt)
    if out is None:
        out = _FINFO[dt] = finfo_object(dt)
    return out


def iinfo(type, /) -> iinfo_object:
    """Machine limits of an integer dtype (of an array's dtype, for an array).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.iinfo.html
    """
    dt = _info_dtype(type, "iinfo")
    if dt.kind not in "iu":
        raise ValueError(
            f"iinfo: type must be an integer dtype (or an array of one); use finfo() for "
            f"floating-point dtypes. Received: dtype={dt}"
        )
    out = _IINFO.get(dt)
    if out is None:
        out = _IINFO[dt] = iinfo_object(dt)
    return out


# ---- isdtype / result_type --------------------------------------------------------


def isdtype(dtype, kind) -> bool:
    """Whether ``dtype`` is ``kind`` (a dtype, a kind name, or a tuple of them).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.isdtype.html
    """
    if dtype.__class__ is not DType:
        dtype = coerce_dtype(dtype, "dtype", "isdtype")
    if kind.__class__ is tuple:
        return any(_isdtype_one(dtype, k) for k in kind)
    return _isdtype_one(dtype, kind)


def _isdtype_one(dtype: DType, kind) -> bool:
    if kind.__class__ is str:
        members = _dtypes.KIND_NAMES.get(kind)
        if members is None:
            raise ValueError(
                f"isdtype: unknown kind. Expected a dtype or one of "
                f"{', '.join(repr(k) for k in _dtypes.KIND_NAMES)}. Received: kind={kind!r}"
            )
        return dtype in members
    if kind.__class__ is DType:
        return dtype is kind
    if isinstance(kind, tuple):
        raise TypeError(f"isdtype: kind tuples cannot be nested. Received: kind={kind!r}")
    return dtype is coerce_dtype(kind, "kind", "isdtype")


def result_type(*arrays_and_dtypes) -> DType:
    """The dtype that promotion gives for arrays, dtypes and Python scalars.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.result_type.html

    Notes
    -----
    Python scalars are weak: they take the other operands' dtype when the kinds
    fit (an int with float32 gives float32); a float with integers gives the
    device's default float, a complex with float32 gives complex64. Arrays on
    different devices raise DeviceMismatchError; a result their device does not
    support raises MissingCapabilityError.
    """
    dt = None
    dev = None
    scalars = []
    for a in arrays_and_dtypes:
        if a.__class__ is Array or isinstance(a, Array):
            if dev is None:
                dev = a._device
            elif a._device is not dev:
                raise DeviceMismatchError(
                    f"result_type: arrays are on different devices. Received: devices {dev} "
                    f"and {a._device}. Use to_device() to move one."
                )
            d = a._dtype
        elif isinstance(a, (_builtin_bool, int, float, complex)):
            scalars.append(a)
            continue
        else:
            d = a if a.__class__ is DType else coerce_dtype(a, "arrays_and_dtypes", "result_type")
        dt = d if dt is None else _dtypes.PROMOTION_TABLE[dt, d]
    if dt is None:
        raise ValueError(
            "result_type: at least one array or dtype is required. Received: "
            f"{len(scalars)} Python scalar(s) and no array or dtype"
        )
    for s in scalars:
        dt = _with_scalar(dt, s, dev)
    if dev is not None and not supports_dtype(dev, dt):
        raise MissingCapabilityError(
            f"result_type: the promoted dtype {dt} is not supported on device {dev}."
        )
    return dt


def _with_scalar(dt: DType, s, dev) -> DType:
    kind = dt.kind
    if isinstance(s, _builtin_bool):
        return dt
    if isinstance(s, int):
        return default_int(dev) if kind == "b" else dt
    if isinstance(s, float):
        return default_float(dev) if kind in "biu" else dt
    # complex
    if kind in "biu":
        return default_complex(dev)
    return _dtypes.COMPLEX_OF.get(dt, dt)
