"""Creation functions of the standard.

Every function resolves its device (``device=`` is a Device, a string such as
``"cpu"`` or ``"cuda:0"``, or None for the default device), resolves the dtype
(the standard's defaults, which depend on the device: a device without float64
defaults to float32), checks that the device supports it, and allocates through
the device's native ``ops``.

Specification: https://data-apis.org/array-api/2025.12/API_specification/creation_functions.html
"""

from __future__ import annotations

import math
import operator

import numpy as np

from . import _dtypes
from ._array import Array, check_same_device
from ._devices import as_device
from ._dtypes import coerce_dtype
from ._errors import DeviceMismatchError, ImplicitHostCopyError
from ._helpers import (
    check_array,
    check_dtype_on_device,
    check_scalar_range,
    default_complex,
    default_float,
    default_int,
    supports_dtype,
)

__all__ = [
    "arange",
    "asarray",
    "empty",
    "empty_like",
    "eye",
    "from_dlpack",
    "full",
    "full_like",
    "linspace",
    "meshgrid",
    "ones",
    "ones_like",
    "tril",
    "triu",
    "zeros",
    "zeros_like",
]

_builtin_bool = bool
_PY_SCALARS = (bool, int, float, complex)
_SCALAR_CLASSES = frozenset(_PY_SCALARS)
_MAX_DIMS = 64  # NumPy 2's limit; __array_namespace_info__ reports it


# ---- argument helpers ---------------------------------------------------------


def _shape(shape, func: str) -> tuple:
    """``shape`` as a tuple of non-negative ints (an int means a 1-D shape)."""
    if shape.__class__ is int and shape >= 0:
        return (shape,)
    if shape.__class__ is tuple and len(shape) <= _MAX_DIMS:
        for s in shape:
            if s.__class__ is not int or s < 0:
                break
        else:
            return shape
    if isinstance(shape, (tuple, list)):
        items = tuple(shape)
    elif hasattr(shape, "__index__") and not isinstance(shape, _builtin_bool):
        items = (shape,)
    else:
        raise TypeError(f"{func}: shape must be an int or a tuple of ints. Received: shape={shape!r}")
    out = []
    for s in items:
        if isinstance(s, _builtin_bool) or not hasattr(s, "__index__"):
            raise TypeError(
                f"{func}: shape must be an int or a tuple of ints. Received: shape={shape!r}"
            )
        s = operator.index(s)
        if s < 0:
            raise ValueError(f"{func}: shape entries must be >= 0. Received: shape={items!r}")
        out.append(s)
    if len(out) > _MAX_DIMS:
        raise ValueError(
            f"{func}: at most {_MAX_DIMS} dimensions are supported. "
            f"Received: {len(out)} dimensions"
        )
    return tuple(out)


def _dtype_or(dtype, default, dev, func: str):
    """The DType for ``dtype=`` (``default`` when None), checked against ``dev``."""
    dt = default if dtype is None else coerce_dtype(dtype, "dtype", func)
    check_dtype_on_device(dt, dev, func)
    return dt


def _int_arg(value, func: str, name: str) -> int:
    if isinstance(value, _builtin_bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{func}: {name} must be an int. Received: {name}={value!r}")
    return operator.index(value)


def _check_fill(func: str, fill_value, dtype) -> None:
    """TypeError when ``fill_value`` cannot be stored in ``dtype`` without losing its kind.

    A bool fits every dtype, an int every numeric dtype (range checked for
    integers), a float the floating dtypes, a complex the complex dtypes.
    """
    kind = dtype.kind
    if isinstance(fill_value, _builtin_bool):
        return
    if isinstance(fill_value, int):
        if kind in "iu":
            check_scalar_range(func, dtype, fill_value, "fill_value")
            return
        if kind in "fc":
            return
    elif isinstance(fill_value, float):
        if kind in "fc":
            return
    elif isinstance(fill_value, complex):
        if kind == "c":
            return
    else:
        raise TypeError(
            f"{func}: fill_value must be a Python bool, int, float or complex. "
            f"Received: fill_value of type {type(fill_value).__name__}"
        )
    # Note: NumPy casts silently here (1.5 -> 1, 2 -> True); tessera refuses.
    raise TypeError(
        f"{func}: a Python {type(fill_value).__name__} fill_value cannot be stored in an "
        f"array of dtype {dtype} without changing its value kind. "
        f"Received: fill_value={fill_value!r}, dtype={dtype}"
    )


def _fill_scalar(func: str, fill_value):
    """Python scalars pass through; NumPy scalars become Python scalars."""
    if fill_value.__class__ in _SCALAR_CLASSES:
        return fill_value
    if isinstance(fill_value, _PY_SCALARS):
        return fill_value
    if isinstance(fill_value, np.generic):
        return fill_value.item()
    raise TypeError(
        f"{func}: fill_value must be a Python bool, int, float or complex. "
        f"Received: fill_value of type {type(fill_value).__name__}"
    )


# ---- asarray ------------------------------------------------------------------


def asarray(obj, /, *, dtype=None, device=None, copy=None) -> Array:
    """Convert the input to an array.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.asarray.html

    ``obj`` may be an Array, a Python scalar, a nested sequence (of scalars or of
    Arrays on one device), a NumPy array, any object supporting DLPack or the buffer
    protocol. ``copy=False`` raises ValueError when a copy is needed (a dtype or
    device change, or a conversion from Python objects).

    Notes
    -----
    With an explicit ``dtype`` the conversion of Python values follows NumPy (a
    float converted to an integer dtype is truncated; an int outside the dtype's
    range raises OverflowError). Without ``dtype``, Python floats use the device's
    default float dtype, while a float64 NumPy array on a device without float64
    raises MissingCapabilityError (no silent downcast).
    """
    if dtype is not None:
        dtype = coerce_dtype(dtype, "dtype", "asarray")
    if copy is not None and copy.__class__ is not _builtin_bool:
        raise TypeError(f"asarray: copy must be True, False or None. Received: copy={copy!r}")
    if obj.__class__ is Array or isinstance(obj, Array):
        return _asarray_array(obj, dtype, device, copy)
    dev = as_device(device, "asarray")
    be = dev._backend
    if obj.__class__ in _SCALAR_CLASSES:
        if copy is False:
            raise ValueError(
                "asarray: copy=False but obj is a Python scalar; making an array from it "
                "always allocates. Received: copy=False"
            )
        if dtype is None:
            dt = _scalar_default(obj, dev)
        else:
            dt = dtype
            _check_fill_explicit(obj, dt)
        check_dtype_on_device(dt, dev, "asarray")
        try:
            host = np.asarray(obj, dtype=dt._np)
        except ValueError as err:  # e.g. NaN to an integer dtype
            raise ValueError(f"asarray: {err}. Received: obj={obj!r}, dtype={dt}") from err
        return Array._new(be.from_host(host, dev), dt, dev)

    cls = obj.__class__
    from_python = cls is list or cls is tuple
    if from_python:
        if copy is False:
            raise ValueError(
                "asarray: copy=False but obj is a Python sequence; converting it always "
                "copies. Received: copy=False"
            )
        if device is None:
            # The device of Arrays inside the sequence wins over the default device
            # (judged by the first element, so long lists of scalars are not scanned).
            first = obj
            while (first.__class__ is list or first.__class__ is tuple) and first:
                first = first[0]
            if first.__class__ is Array and first._device is not dev:
                dev, be = first._device, first._device._backend
    elif cls is bytes:
        obj = memoryview(obj)
    elif (
        hasattr(obj, "__dlpack__")
        and not isinstance(obj, (np.ndarray, np.generic))
        and hasattr(obj, "__dlpack_device__")
    ):
        # Another library's array: DLPack keeps it on its device, without a copy
        # where possible.
        try:
            out = from_dlpack(obj, device=device, copy=copy)
        except (BufferError, TypeError):
            out = None  # not exportable: NumPy's protocols may still read it
        if out is not None:
            return _asarray_array(out, dtype, None, None if copy else copy)
    if copy is False and not be.is_host:
        raise ValueError(
            f"asarray: copy=False but obj is host memory and device={dev} is not the host; "
            f"a copy is needed."
        )
    npdt = None if dtype is None else dtype._np
    host_copy = copy if be.is_host else None
    try:
        try:
            host = np.asarray(obj, dtype=npdt, copy=host_copy)
        except ImplicitHostCopyError:
            if not from_python:
                raise
            # Arrays of a non-host device inside the sequence: an explicit conversion.
            host = np.asarray(_to_host_nested(obj, []), dtype=npdt)
    except ValueError as err:
        raise ValueError(f"asarray: {err}") from err
    if dtype is None:
        dt = _dtypes.lookup_numpy(host.dtype)
        if dt is None:
            host, dt = _host_default(host)
        elif from_python and dt.kind in "fc" and not supports_dtype(dev, dt):
            # Python floats take the device's default float dtype.
            dt = default_float(dev) if dt.kind == "f" else default_complex(dev)
            host = host.astype(dt._np)
    else:
        dt = dtype
    check_dtype_on_device(dt, dev, "asarray")
    return Array._new(be.from_host(host, dev), dt, dev)


def _asarray_array(obj: Array, dtype, device, copy) -> Array:
    dev = obj._device if device is None else as_device(device, "asarray")
    if dtype is not None and dtype is not obj._dtype:
        if copy is False:
            raise ValueError(
                f"asarray: copy=False but converting dtype {obj._dtype} to {dtype} needs a copy."
            )
        if obj._dtype.kind == "c" and dtype.kind in "iuf":
            raise TypeError(
                f"asarray: converting a complex array to dtype {dtype} would drop the imaginary "
                f"part; use real() or imag() first. Received: obj.dtype={obj._dtype}, "
                f"dtype={dtype}"
            )
        check_dtype_on_device(dtype, dev, "asarray")
        src = obj._device
        if not supports_dtype(src, dtype):
            obj = obj.to_device(dev)  # the source device cannot hold the result: move first
            src = dev
        obj = Array._new(src.ops.astype(obj._data, dtype), dtype, src)
        return obj if src is dev else obj.to_device(dev)
    if dev is not obj._device:
        if copy is False:
            raise ValueError(
                f"asarray: copy=False but the array is on {obj._device} and device={dev} "
                f"was asked for; a copy is needed."
            )
        check_dtype_on_device(obj._dtype, dev, "asarray")
        return obj.to_device(dev)  # the transfer makes a new buffer
    if copy:
        return Array._new(dev.ops.astype(obj._data, obj._dtype, copy=True), obj._dtype, dev)
    return obj


def _check_fill_explicit(value, dtype) -> None:
    # asarray(scalar, dtype=...) converts as NumPy does, except that a complex value
    # is never silently made real.
    if isinstance(value, complex) and dtype.kind != "c":
        raise TypeError(
            f"asarray: a complex value cannot be converted to dtype {dtype}; "
            f"take real() or imag() first. Received: obj={value!r}"
        )
    if value.__class__ is int and dtype.kind in "iu":
        check_scalar_range("asarray", dtype, value, "obj")


def _scalar_default(obj, dev):
    if obj.__class__ is _builtin_bool:
        return _dtypes.bool
    if obj.__class__ is int:
        check_scalar_range("asarray", _dtypes.int64, obj, "obj")
        return default_int(dev)
    if obj.__class__ is float:
        return default_float(dev)
    return default_complex(dev)


def _host_default(host):
    """Map a NumPy array of a dtype tessera lacks to one it has (or TypeError).

    NumPy's float16 and ml_dtypes' bfloat16 are tessera dtypes (extensions) and keep
    their dtype; they never arrive here.
    """
    kind = host.dtype.kind
    if kind == "O":
        raise TypeError(
            "asarray: obj must hold numbers or booleans (nested sequences of equal "
            "lengths, ints within the int64/uint64 range). Received: an object that "
            "NumPy converts to dtype object"
        )
    raise TypeError(
        f"asarray: obj must hold numbers or booleans. Received: an object converting to "
        f"NumPy dtype {host.dtype}, which is not an Array API dtype"
    )


def _to_host_nested(s, seen: list):
    """A nested sequence with its Arrays (all on one device) copied to the host."""
    cls = s.__class__
    if cls is Array:
        if seen and s._device is not seen[0]:
            raise DeviceMismatchError(
                f"asarray: the Arrays inside obj are on different devices. Received: devices "
                f"{seen[0]} and {s._device}. Use to_device() to move them to one."
            )
        seen.append(s._device)
        # sync: an explicit conversion copies device Arrays to the host first.
        return s._device._backend.to_host(s._data)
    if cls is list or cls is tuple:
        return [_to_host_nested(e, seen) for e in s]
    return s


# ---- DLPack -------------------------------------------------------------------

# DLPack device types (dlpack.h DLDeviceType) -> tessera device kinds.
_DLPACK_KINDS = {1: "cpu", 2: "cuda", 3: "cpu", 4: "opencl", 8: "metal", 10: "rocm", 13: "cuda"}


def from_dlpack(x, /, *, device=None, copy=None) -> Array:
    """An Array holding the data of any object that implements ``__dlpack__``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.from_dlpack.html

    Accepts tessera Arrays, NumPy arrays, and other libraries' arrays (PyTorch,
    CuPy, JAX). With ``device=None`` the result stays on the producer's device,
    which must belong to a loaded backend.
    """
    if copy is not None and copy.__class__ is not _builtin_bool:
        raise TypeError(f"from_dlpack: copy must be True, False or None. Received: copy={copy!r}")
    if x.__class__ is Array or isinstance(x, Array):
        return _asarray_array(x, None, device, copy)
    if not hasattr(x, "__dlpack__") or not hasattr(x, "__dlpack_device__"):
        raise AttributeError(
            f"from_dlpack: x must implement __dlpack__ and __dlpack_device__. "
            f"Received: x of type {type(x).__name__}"
        )
    dl_type, dl_id = x.__dlpack_device__()
    src = _device_from_dlpack(int(dl_type), int(dl_id))
    if device is None:
        if src is None:
            raise BufferError(
                f"from_dlpack: x lives on DLPack device ({int(dl_type)}, {int(dl_id)}), which "
                f"no loaded tessera_array backend owns; pass device= to copy it elsewhere."
            )
        dev = src
    else:
        dev = as_device(device, "from_dlpack")
    be = dev._backend
    importer = getattr(be, "from_dlpack", None)
    if importer is not None:
        native = importer(x, device=dev, copy=copy)
    else:
        if copy is False and not be.is_host:
            raise ValueError(
                f"from_dlpack: copy=False but the {be.name} backend imports DLPack data "
                f"through the host; a copy is needed."
            )
        native = be.from_host(np.from_dlpack(x, device="cpu", copy=copy), dev)
    try:
        dt = be.native_dtype(native)
    except TypeError as err:
        raise TypeError(f"from_dlpack: x has a dtype outside the Array API standard: {err}") from err
    check_dtype_on_device(dt, dev, "from_dlpack")
    return Array._new(native, dt, dev)


def _device_from_dlpack(dl_type: int, dl_id: int):
    """The loaded tessera Device for a DLPack (device_type, device_id), or None."""
    kind = _DLPACK_KINDS.get(dl_type)
    if kind is None:
        return None
    from ._devices import Device
    from ._discovery import all_devices

    dev = Device(kind, 0 if kind == "cpu" else dl_id)
    return dev if dev in all_devices() else None


# ---- filled arrays ------------------------------------------------------------


def empty(shape, *, dtype=None, device=None) -> Array:
    """An uninitialized array.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.empty.html
    """
    dev = as_device(device, "empty")
    dt = _dtype_or(dtype, default_float(dev), dev, "empty")
    return Array._new(dev.ops.empty(_shape(shape, "empty"), dtype=dt, device=dev), dt, dev)


def zeros(shape, *, dtype=None, device=None) -> Array:
    """An array of zeros.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.zeros.html
    """
    dev = as_device(device, "zeros")
    dt = _dtype_or(dtype, default_float(dev), dev, "zeros")
    return Array._new(dev.ops.zeros(_shape(shape, "zeros"), dtype=dt, device=dev), dt, dev)


def ones(shape, *, dtype=None, device=None) -> Array:
    """An array of ones.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.ones.html
    """
    dev = as_device(device, "ones")
    dt = _dtype_or(dtype, default_float(dev), dev, "ones")
    return Array._new(dev.ops.ones(_shape(shape, "ones"), dtype=dt, device=dev), dt, dev)


def full(shape, fill_value, *, dtype=None, device=None) -> Array:
    """An array filled with ``fill_value``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.full.html

    Notes
    -----
    A fill value of another kind than ``dtype`` (a float for an integer dtype, an
    int for bool, a complex for a real dtype) raises TypeError, and an int outside
    an integer dtype's range raises ScalarOutOfRangeError (an OverflowError). A
    NumPy scalar without ``dtype`` keeps its own dtype, as in NumPy.
    """
    dev = as_device(device, "full")
    if dtype is None and isinstance(fill_value, np.generic):
        # A NumPy scalar keeps its dtype, as in numpy.full.
        dtype = _dtypes.lookup_numpy(fill_value.dtype)
    fill_value = _fill_scalar("full", fill_value)
    if dtype is None:
        cls = fill_value.__class__
        if cls is _builtin_bool:
            default = _dtypes.bool
        elif cls is int:
            default = default_int(dev)
        elif cls is float:
            default = default_float(dev)
        else:
            default = default_complex(dev)
    else:
        default = None
    dt = _dtype_or(dtype, default, dev, "full")
    _check_fill("full", fill_value, dt)
    return Array._new(
        dev.ops.full(_shape(shape, "full"), fill_value, dtype=dt, device=dev), dt, dev
    )


def _like(func: str, x, dtype, device):
    check_array(x, func)
    dev = x._device if device is None else as_device(device, func)
    dt = x._dtype if dtype is None else coerce_dtype(dtype, "dtype", func)
    check_dtype_on_device(dt, dev, func)
    return x._data.shape, dt, dev


def empty_like(x: Array, /, *, dtype=None, device=None) -> Array:
    """An uninitialized array shaped like ``x``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.empty_like.html
    """
    shape, dt, dev = _like("empty_like", x, dtype, device)
    return Array._new(dev.ops.empty(shape, dtype=dt, device=dev), dt, dev)


def zeros_like(x: Array, /, *, dtype=None, device=None) -> Array:
    """An array of zeros shaped like ``x``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.zeros_like.html
    """
    shape, dt, dev = _like("zeros_like", x, dtype, device)
    return Array._new(dev.ops.zeros(shape, dtype=dt, device=dev), dt, dev)


def ones_like(x: Array, /, *, dtype=None, device=None) -> Array:
    """An array of ones shaped like ``x``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.ones_like.html
    """
    shape, dt, dev = _like("ones_like", x, dtype, device)
    return Array._new(dev.ops.ones(shape, dtype=dt, device=dev), dt, dev)


def full_like(x: Array, /, fill_value, *, dtype=None, device=None) -> Array:
    """An array filled with ``fill_value`` shaped like ``x``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.full_like.html

    Notes
    -----
    As for :func:`full`, a fill value of another kind than the result dtype raises
    TypeError (NumPy would cast it silently).
    """
    shape, dt, dev = _like("full_like", x, dtype, device)
    fill_value = _fill_scalar("full_like", fill_value)
    _check_fill("full_like", fill_value, dt)
    return Array._new(dev.ops.full(shape, fill_value, dtype=dt, device=dev), dt, dev)


# ---- ranges and matrices ------------------------------------------------------


def _real_arg(value, func: str, name: str):
    """A Python int or float from ``value`` (NumPy scalars and 0-d Arrays are accepted)."""
    cls = value.__class__
    if cls is int or cls is float:
        return value
    if not isinstance(value, (_builtin_bool, complex, np.bool_, np.complexfloating)):
        if isinstance(value, (float, np.floating)):
            return float(value)
        if hasattr(value, "__index__"):
            try:
                return operator.index(value)
            except TypeError:
                pass
    raise TypeError(
        f"{func}: {name} must be an int or a float. Received: {name}={value!r}"
    )


def arange(start, /, stop=None, step=1, *, dtype=None, device=None) -> Array:
    """Evenly spaced values in the half-open interval ``[start, stop)``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.arange.html

    Notes
    -----
    Integer ranges are computed exactly. An integer ``dtype`` with a float
    ``start``/``stop``/``step`` raises TypeError (NumPy truncates).
    """
    start = _real_arg(start, "arange", "start")
    if stop is None:
        start, stop = 0, start
    else:
        stop = _real_arg(stop, "arange", "stop")
    step = _real_arg(step, "arange", "step")
    if step == 0:
        raise ValueError("arange: step must not be 0. Received: step=0")
    dev = as_device(device, "arange")
    all_int = start.__class__ is int and stop.__class__ is int and step.__class__ is int
    if dtype is None:
        dt = default_int(dev) if all_int else default_float(dev)
    else:
        dt = coerce_dtype(dtype, "dtype", "arange")
    if dt.kind == "b":
        raise TypeError(f"arange: dtype must be a numeric dtype. Received: dtype={dt}")
    if dt.kind in "iu" and not all_int:
        raise TypeError(
            f"arange: an integer dtype needs int start, stop and step. Received: "
            f"start={start!r}, stop={stop!r}, step={step!r}, dtype={dt}"
        )
    check_dtype_on_device(dt, dev, "arange")
    for v in (start, stop, step):
        if v.__class__ is float and not math.isfinite(v):
            raise ValueError(
                f"arange: start, stop and step must be finite. Received: start={start!r}, "
                f"stop={stop!r}, step={step!r}"
            )
    return Array._new(dev.ops.arange(start, stop, step, dtype=dt, device=dev), dt, dev)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True) -> Array:
    """``num`` evenly spaced numbers over ``[start, stop]`` (or ``[start, stop)``).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.linspace.html
    """
    for name, v in (("start", start), ("stop", stop)):
        if isinstance(v, (_builtin_bool, np.bool_)) or not isinstance(
            v, (int, float, complex, np.number)
        ):
            raise TypeError(
                f"linspace: {name} must be an int, float or complex. "
                f"Received: {name} of type {type(v).__name__}"
            )
    num = _int_arg(num, "linspace", "num")
    if num < 0:
        raise ValueError(f"linspace: num must be >= 0. Received: num={num}")
    if endpoint.__class__ is not _builtin_bool:
        raise TypeError(f"linspace: endpoint must be a bool. Received: endpoint={endpoint!r}")
    dev = as_device(device, "linspace")
    is_complex = isinstance(start, complex) or isinstance(stop, complex) or any(
        getattr(v, "dtype", None) is not None and v.dtype.kind == "c" for v in (start, stop)
    )
    if dtype is None:
        dt = default_complex(dev) if is_complex else default_float(dev)
    else:
        dt = coerce_dtype(dtype, "dtype", "linspace")
        if is_complex and dt.kind != "c":
            raise TypeError(
                f"linspace: complex start/stop need a complex dtype. Received: dtype={dt}"
            )
    check_dtype_on_device(dt, dev, "linspace")
    return Array._new(
        dev.ops.linspace(start, stop, num, dtype=dt, device=dev, endpoint=endpoint), dt, dev
    )


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None) -> Array:
    """A 2-D array with ones on the ``k``-th diagonal and zeros elsewhere.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.eye.html
    """
    n_rows = _int_arg(n_rows, "eye", "n_rows")
    n_cols = n_rows if n_cols is None else _int_arg(n_cols, "eye", "n_cols")
    k = _int_arg(k, "eye", "k")
    if n_rows < 0 or n_cols < 0:
        raise ValueError(
            f"eye: n_rows and n_cols must be >= 0. Received: n_rows={n_rows}, n_cols={n_cols}"
        )
    dev = as_device(device, "eye")
    dt = _dtype_or(dtype, default_float(dev), dev, "eye")
    return Array._new(dev.ops.eye(n_rows, n_cols, k=k, dtype=dt, device=dev), dt, dev)


def meshgrid(*arrays: Array, indexing: str = "xy") -> tuple:
    """Coordinate matrices from coordinate vectors (a tuple, as in 2025.12).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.meshgrid.html
    """
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij'. Received: indexing={indexing!r}")
    for i, a in enumerate(arrays):
        check_array(a, "meshgrid", f"arrays[{i}]")
        if a.ndim != 1:
            raise ValueError(
                f"meshgrid: every array must be 1-D. Received: arrays[{i}].shape={a.shape}"
            )
    if not arrays:
        return ()
    check_same_device("meshgrid", *arrays)
    dev = arrays[0]._device
    outs = dev.ops.meshgrid(*(a._data for a in arrays), indexing=indexing)
    return tuple(Array._new(o, a._dtype, dev) for o, a in zip(outs, arrays))


def _triangle(func: str, x, k):
    check_array(x, func)
    k = _int_arg(k, func, "k")
    if x.ndim < 2:
        raise ValueError(
            f"{func}: x must have at least 2 dimensions. Received: x.shape={x.shape}"
        )
    return k


def tril(x: Array, /, *, k: int = 0) -> Array:
    """The lower triangle of ``x`` (or of each matrix in a stack).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.tril.html
    """
    k = _triangle("tril", x, k)
    return Array._new(x._device.ops.tril(x._data, k=k), x._dtype, x._device)


def triu(x: Array, /, *, k: int = 0) -> Array:
    """The upper triangle of ``x`` (or of each matrix in a stack).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.triu.html
    """
    k = _triangle("triu", x, k)
    return Array._new(x._device.ops.triu(x._data, k=k), x._dtype, x._device)

