"""``Array.__getitem__`` / ``Array.__setitem__``: the standard's indexing rules.

The front end validates the key (types, devices, integer bounds, the number of
indexed axes), turns tessera Arrays inside it into native buffers, and calls the
device's ``ops.getitem`` / ``ops.setitem``. Boolean-mask shapes and integer-array
bounds are checked by the backend (NumPy raises IndexError).

Specification: https://data-apis.org/array-api/2025.12/API_specification/indexing.html

Notes
-----
Beyond the standard, as NumPy does: Python lists and NumPy arrays of integers or
booleans are accepted as index arrays, a Python bool is a 0-d mask, and integer
arrays may be combined with slices. In ``__setitem__`` a value array must promote
to the target's dtype (``int8`` into ``int16`` is fine, ``float64`` into
``float32`` raises TypeError); a Python scalar must be of a kind the target holds
(a float into an integer array raises TypeError) and, for integers, in range.
"""

from __future__ import annotations

import numpy as np

from . import _dtypes
from ._array import Array
from ._errors import DeviceMismatchError

__all__ = ["getitem", "setitem"]

_builtin_bool = bool
_object_new = object.__new__
_SCALARS = frozenset({bool, int, float, complex})
_VALID = (
    "only integers, slices (`:`), ellipsis (`...`), None (newaxis), and integer or "
    "boolean arrays are valid indices"
)


def getitem(x: Array, key) -> Array:
    """``x[key]``; the result always has ``x``'s dtype (a 0-d Array for a scalar result)."""
    cls = key.__class__
    data = x._data
    if cls is int:
        shape = data.shape
        if not shape:
            raise IndexError(f"__getitem__: too many indices: x is 0-d. Received: key={key!r}")
        n = shape[0]
        if key >= n or key < -n:
            raise IndexError(
                f"__getitem__: index {key} is out of bounds for axis 0 with size {n}"
            )
    elif cls is slice:
        if not data.shape:
            raise IndexError(f"__getitem__: too many indices: x is 0-d. Received: key={key!r}")
    elif cls is tuple and len(key) == len(data.shape) and _all_ints_in_bounds(key, data.shape):
        pass  # x[i, j, ...]: one element
    else:
        key = _native_key(x, key, "__getitem__")
    dev = x._device
    try:
        out = dev.ops.getitem(data, key)
    except IndexError as err:
        raise IndexError(f"__getitem__: {err}") from err
    obj = _object_new(Array)
    obj._data = out
    obj._dtype = x._dtype
    obj._device = dev
    return obj


def _all_ints_in_bounds(key: tuple, shape: tuple) -> bool:
    """True when every item is an int within its axis; False to take the full check."""
    for i, n in zip(key, shape):
        if i.__class__ is not int or i >= n or i < -n:
            return False
    return True


def setitem(x: Array, key, value) -> None:
    """``x[key] = value``; ``x`` keeps its dtype and shape."""
    cls = key.__class__
    shape = x._data.shape
    if cls is tuple and len(key) == len(shape) and _all_ints_in_bounds(key, shape):
        pass  # x[i, j, ...] = value: one element
    elif cls is not int and cls is not slice or not shape:
        key = _native_key(x, key, "__setitem__")
    elif cls is int:
        n = x._data.shape[0]
        if key >= n or key < -n:
            raise IndexError(
                f"__setitem__: index {key} is out of bounds for axis 0 with size {n}"
            )
    dt = x._dtype
    vcls = value.__class__
    if vcls is Array:
        if value._device is not x._device:
            raise DeviceMismatchError(
                f"__setitem__: value is on device {value._device} but x is on {x._device}. "
                f"Use to_device() to move one."
            )
        vdt = value._dtype
        if vdt is not dt:
            if _dtypes.PROMOTION_TABLE[dt, vdt] is not dt:
                raise TypeError(
                    f"__setitem__: value of dtype {vdt} does not promote to x's dtype {dt}; "
                    f"setting it would change its values. Cast it first with astype(). "
                    f"Received: x.dtype={dt}, value.dtype={vdt}"
                )
            v = x._device.ops.astype(value._data, dt)
        else:
            v = value._data
    else:
        if vcls not in _SCALARS:
            value = _coerce_value(value)
        _check_scalar(dt, value)
        v = value
    try:
        x._device.ops.setitem(x._data, key, v)
    except (ValueError, IndexError) as err:
        raise type(err)(f"__setitem__: {err}") from err


def _coerce_value(value):
    if isinstance(value, (_builtin_bool, int, float, complex)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Array):
        raise TypeError("__setitem__: Array subclasses are not supported as values")
    raise TypeError(
        f"__setitem__: value must be a tessera_array Array or a Python scalar (bool, int, "
        f"float, complex); convert other values with asarray(value, dtype=x.dtype). "
        f"Received: value of type {type(value).__name__}"
    )


def _check_scalar(dt, value) -> None:
    kind = dt.kind
    if isinstance(value, _builtin_bool):
        return
    if isinstance(value, int):
        if kind in "iu":
            from ._helpers import check_scalar_range

            check_scalar_range("__setitem__", dt, value, "value")
            return
        if kind in "fc":
            return
    elif isinstance(value, float):
        if kind in "fc":
            return
    elif kind == "c":
        return
    # Note: NumPy casts silently here (1.5 -> 1, 2 -> True, 1j raises); tessera refuses.
    raise TypeError(
        f"__setitem__: a Python {type(value).__name__} value cannot be stored in an array "
        f"of dtype {dt} without changing its value kind. Received: value={value!r}"
    )


def _index_array(x: Array, item, func: str):
    """A native index array from a tessera Array, a list, or a NumPy array."""
    if item.__class__ is Array or isinstance(item, Array):
        if item._device is not x._device:
            raise DeviceMismatchError(
                f"{func}: the index array is on device {item._device} but x is on "
                f"{x._device}. Use to_device() to move it."
            )
        arr = item
    else:
        host = np.asarray(item)
        if host.size == 0 and host.dtype.kind == "f":
            host = host.astype(np.int64)  # [] indexes nothing, as in NumPy
        if host.dtype.kind not in "biu":
            raise IndexError(
                f"{func}: {_VALID}. Received: an index sequence of NumPy dtype {host.dtype}"
            )
        be = x._device._backend
        arr = Array._new(be.from_host(host, x._device), _dtypes.FROM_NUMPY[host.dtype], x._device)
    if arr._dtype.kind not in "biu":
        raise IndexError(
            f"{func}: index arrays must have an integer or boolean dtype. "
            f"Received: an index array of dtype {arr._dtype}"
        )
    return arr._data, (arr.ndim if arr._dtype.kind == "b" else 1)


def _native_key(x: Array, key, func: str):
    """Validate ``key`` against ``x`` and return the key for the native ``ops``."""
    items = key if key.__class__ is tuple else (key,)
    shape = x._data.shape
    ndim = len(shape)
    native = []
    n_axes = []  # axes each item consumes (-1 for the ellipsis)
    ellipsis_seen = False
    for item in items:
        cls = item.__class__
        if cls is int or cls is slice:
            native.append(item)
            n_axes.append(1)
        elif item is None:
            native.append(None)
            n_axes.append(0)
        elif item is Ellipsis:
            if ellipsis_seen:
                raise IndexError(f"{func}: an index can only have a single ellipsis ('...')")
            ellipsis_seen = True
            native.append(Ellipsis)
            n_axes.append(-1)
        elif cls is _builtin_bool or cls is np.bool_:
            # A Python bool is a 0-d mask (NumPy): adds an axis of length 1 or 0.
            native.append(_builtin_bool(item))
            n_axes.append(0)
        elif cls is Array or isinstance(item, (Array, list, np.ndarray)):
            data, k = _index_array(x, item, func)
            native.append(data)
            n_axes.append(k)
        elif hasattr(item, "__index__") and not isinstance(item, (float, complex)):
            # NumPy integers and other integer-like objects.
            try:
                native.append(item.__index__())
            except TypeError:
                raise IndexError(f"{func}: {_VALID}. Received: key={key!r}") from None
            n_axes.append(1)
        else:
            raise IndexError(
                f"{func}: {_VALID}. Received: an index of type {type(item).__name__} in "
                f"key={key!r}"
            )
    used = sum(k for k in n_axes if k > 0)
    if used > ndim:
        raise IndexError(
            f"{func}: too many indices: x has {ndim} dimension(s) but {used} were indexed. "
            f"Received: key={key!r}"
        )
    axis = 0
    for item, k in zip(native, n_axes):
        if k == -1:
            axis += ndim - used
            continue
        if item.__class__ is int:
            n = shape[axis]
            if item >= n or item < -n:
                raise IndexError(
                    f"{func}: index {item} is out of bounds for axis {axis} with size {n}"
                )
        axis += k
    return tuple(native) if key.__class__ is tuple or len(native) != 1 else native[0]
