"""Creation functions of the standard.

Specification: https://data-apis.org/array-api/2025.12/API_specification/creation_functions.html
"""

from __future__ import annotations

from . import _dtypes
from ._array import Array
from ._devices import as_device
from ._dtypes import coerce_dtype
from ._helpers import check_dtype_on_device

__all__ = ["asarray"]


def asarray(obj, /, *, dtype=None, device=None, copy=None) -> Array:
    """Convert ``obj`` to an Array.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.asarray.html

    ``obj`` may be an Array, a NumPy array, a Python scalar, a nested sequence, or any
    object supporting DLPack or the buffer protocol. ``copy=False`` raises ValueError
    when a copy would be needed (a dtype or device change).
    """
    import numpy as np

    if dtype is not None:
        dtype = coerce_dtype(dtype, "dtype", "asarray")
    if obj.__class__ is Array or isinstance(obj, Array):
        dev = obj._device if device is None else as_device(device, "asarray")
        if dev is not obj._device:
            if copy is False:
                raise ValueError(
                    f"asarray: copy=False but the array is on {obj._device} and device={dev} "
                    f"was asked for; a copy is needed."
                )
            obj = obj.to_device(dev)
            copy = False if dtype is None or dtype is obj._dtype else copy
        if dtype is None or dtype is obj._dtype:
            if copy:
                return Array._new(dev.ops.astype(obj._data, obj._dtype, copy=True), obj._dtype, dev)
            return obj
        if copy is False:
            raise ValueError(
                f"asarray: copy=False but converting {obj._dtype} to {dtype} needs a copy."
            )
        check_dtype_on_device(dtype, dev, "asarray")
        return Array._new(dev.ops.astype(obj._data, dtype), dtype, dev)
    dev = as_device(device, "asarray")
    be = dev._backend
    npdt = None if dtype is None else dtype._np
    if isinstance(obj, (bool, int, float, complex)):
        host = np.asarray(obj, dtype=npdt if npdt is not None else _scalar_default(obj))
    else:
        try:
            host = np.asarray(obj, dtype=npdt, copy=copy if be.is_host else None)
        except ValueError as err:
            raise ValueError(f"asarray: {err}") from err
        if dtype is None and host.dtype not in _dtypes.FROM_NUMPY:
            if host.dtype.kind == "f" and host.dtype.itemsize < 4:
                host = host.astype(np.float32)
            elif host.dtype.kind in "OUSV":
                raise TypeError(
                    f"asarray: obj must hold numbers or booleans. Received: an object "
                    f"converting to dtype {host.dtype}"
                )
            else:
                raise TypeError(f"asarray: dtype {host.dtype} is not an Array API dtype")
    dt = _dtypes.FROM_NUMPY[host.dtype]
    check_dtype_on_device(dt, dev, "asarray")
    return Array._new(be.from_host(host, dev), dt, dev)


def _scalar_default(obj):
    if isinstance(obj, bool):
        return _dtypes.bool._np
    if isinstance(obj, int):
        return _dtypes.int64._np
    if isinstance(obj, float):
        return _dtypes.float64._np
    return _dtypes.complex128._np
