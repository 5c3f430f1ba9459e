"""Searching functions of the standard.

Specification: https://data-apis.org/array-api/2025.12/API_specification/searching_functions.html
"""

from __future__ import annotations

from typing import Literal

from . import _dtypes
from ._array import Array
from ._helpers import (
    _coerce_scalar,
    _scalar_as,
    check_array,
    check_same_device,
    scalar_dtype_for,
    wrap_as,
)
from ._statistical_functions import (
    _axis_index,
    _check_flag,
    _normalize_axes,
    _reduced_empty,
)

__all__ = ["argmax", "argmin", "count_nonzero", "nonzero", "searchsorted", "where"]

_int64 = _dtypes.int64
_bool = _dtypes.bool


def _arg_extreme(func: str, x, axis, keepdims) -> Array:
    check_array(x, func)
    _check_flag(func, "keepdims", keepdims)
    shape = x._data.shape
    if axis is not None:
        if axis.__class__ is tuple:
            raise TypeError(
                f"{func}: axis must be an int or None (one axis only). Received: axis={axis!r}"
            )
        axis = _axis_index(func, axis, len(shape), "an int or None")
    if 0 in shape and _reduced_empty(shape, None if axis is None else (axis,)):
        raise ValueError(
            f"{func}: cannot search an empty array or an axis of length 0. "
            f"Received: x.shape={shape}, axis={axis!r}"
        )
    dev = x._device
    native = dev.ops.argmax if func == "argmax" else dev.ops.argmin
    return wrap_as(native(x._data, axis=axis, keepdims=keepdims), _int64, dev)


def argmax(x: Array, /, *, axis: int | None = None, keepdims: bool = False) -> Array:
    """Index of the first maximum of ``x`` along ``axis`` (of the flattened ``x`` if None).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.argmax.html

    A NaN counts as the maximum (its first index is returned), as in NumPy. An empty
    search raises ValueError.
    """
    return _arg_extreme("argmax", x, axis, keepdims)


def argmin(x: Array, /, *, axis: int | None = None, keepdims: bool = False) -> Array:
    """Index of the first minimum of ``x`` along ``axis`` (of the flattened ``x`` if None).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.argmin.html

    A NaN counts as the minimum (its first index is returned), as in NumPy. An empty
    search raises ValueError.
    """
    return _arg_extreme("argmin", x, axis, keepdims)


def count_nonzero(
    x: Array, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False
) -> Array:
    """Number of non-zero elements of ``x`` over ``axis``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.count_nonzero.html
    """
    check_array(x, "count_nonzero")
    _check_flag("count_nonzero", "keepdims", keepdims)
    axes = _normalize_axes("count_nonzero", axis, len(x._data.shape))
    dev = x._device
    return wrap_as(dev.ops.count_nonzero(x._data, axis=axes, keepdims=keepdims), _int64, dev)


def nonzero(x: Array, /) -> tuple[Array, ...]:
    """Indices of the non-zero elements of ``x``, one int64 array per axis, in C order.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.nonzero.html
    """
    check_array(x, "nonzero")
    if not x._data.shape:
        raise ValueError(
            "nonzero: x must have at least one dimension; use reshape(x, (1,)) for a "
            "0-d array. Received: x.shape=()"
        )
    dev = x._device
    return tuple(wrap_as(r, _int64, dev) for r in dev.ops.nonzero(x._data))


def searchsorted(
    x1: Array,
    x2: Array | float,
    /,
    *,
    side: Literal["left", "right"] = "left",
    sorter: Array | None = None,
) -> Array:
    """Indices where the elements of ``x2`` would be inserted into the sorted 1-D ``x1``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.searchsorted.html

    ``x1`` and ``x2`` are compared in their promoted dtype. NaNs sort last, as in
    :func:`sort`.
    """
    check_array(x1, "searchsorted", "x1")
    if len(x1._data.shape) != 1:
        raise ValueError(
            f"searchsorted: x1 must be one-dimensional. Received: x1.shape={x1.shape}"
        )
    if side != "left" and side != "right":
        raise ValueError(
            f"searchsorted: side must be 'left' or 'right'. Received: side={side!r}"
        )
    dev = x1._device
    if isinstance(x2, Array):
        check_same_device("searchsorted", x1, x2)
        dt = _dtypes.PROMOTION_TABLE[x1._dtype, x2._dtype]
        v = x2._data if x2._dtype is dt else dev.ops.astype(x2._data, dt)
    else:
        x2 = _coerce_scalar("searchsorted", x2, "x2")
        dt = scalar_dtype_for("searchsorted", x1._dtype, x2, dev, name="x2")
        v = _scalar_as(x2, dt)
    a = x1._data if x1._dtype is dt else dev.ops.astype(x1._data, dt)
    s = None
    if sorter is not None:
        check_array(sorter, "searchsorted", "sorter")
        check_same_device("searchsorted", x1, sorter)
        if sorter._dtype.kind not in "iu":
            raise TypeError(
                f"searchsorted: sorter must have an integer dtype. "
                f"Received: sorter.dtype={sorter._dtype}"
            )
        if sorter.shape != x1.shape:
            raise ValueError(
                f"searchsorted: sorter must have the shape of x1. "
                f"Received: sorter.shape={sorter.shape}, x1.shape={x1.shape}"
            )
        s = sorter._data
    return wrap_as(dev.ops.searchsorted(a, v, side=side, sorter=s), _int64, dev)


def _broadcast_shapes(func: str, *shapes) -> tuple:
    """The broadcast shape of ``shapes``; ValueError naming them when they do not fit."""
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for s in shapes:
        off = ndim - len(s)
        for i, n in enumerate(s):
            m = out[off + i]
            if m == 1:
                out[off + i] = n
            elif n != 1 and n != m:
                raise ValueError(
                    f"{func}: the shapes cannot be broadcast together. "
                    f"Received: shapes {', '.join(str(t) for t in shapes)}"
                )
    return tuple(out)


def where(
    condition: Array,
    x1: Array | bool | complex,
    x2: Array | bool | complex,
    /,
) -> Array:
    """Elements of ``x1`` where ``condition`` is True, of ``x2`` elsewhere.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.where.html
    """
    if (
        condition.__class__ is Array
        and x1.__class__ is Array
        and x2.__class__ is Array
        and condition._dtype is _bool
        and x1._dtype is x2._dtype
        and x1._device is condition._device
        and x2._device is condition._device
    ):
        # The hot path: arrays of one dtype on one device.
        dev = condition._device
        c, b1, b2 = condition._data, x1._data, x2._data
        if c.shape == b1.shape == b2.shape:
            return Array._new(dev.ops.where(c, b1, b2), x1._dtype, dev)
    check_array(condition, "where", "condition")
    if condition._dtype is not _bool:
        raise TypeError(
            f"where: condition must have the bool dtype; compare first, e.g. "
            f"where(x != 0, ...). Received: condition.dtype={condition._dtype}"
        )
    dev = condition._device
    a1 = x1.__class__ is Array or isinstance(x1, Array)
    a2 = x2.__class__ is Array or isinstance(x2, Array)
    if a1 and a2:
        check_same_device("where", condition, x1, x2)
        dt = x1._dtype if x1._dtype is x2._dtype else _dtypes.PROMOTION_TABLE[x1._dtype, x2._dtype]
        shapes = (condition.shape, x1.shape, x2.shape)
    elif a1:
        check_same_device("where", condition, x1)
        x2 = _coerce_scalar("where", x2, "x2")
        dt = scalar_dtype_for("where", x1._dtype, x2, dev, name="x2")
        shapes = (condition.shape, x1.shape)
    elif a2:
        check_same_device("where", condition, x2)
        x1 = _coerce_scalar("where", x1, "x1")
        dt = scalar_dtype_for("where", x2._dtype, x1, dev, name="x1")
        shapes = (condition.shape, x2.shape)
    else:
        raise TypeError(
            f"where: at least one of x1, x2 must be a tessera_array Array. Received: "
            f"x1 of type {type(x1).__name__}, x2 of type {type(x2).__name__}"
        )
    if shapes[0] != shapes[1] or (len(shapes) == 3 and shapes[0] != shapes[2]):
        _broadcast_shapes("where", *shapes)
    ops = dev.ops
    if a1:
        b1 = x1._data if x1._dtype is dt else ops.astype(x1._data, dt)
    else:
        b1 = _scalar_as(x1, dt)
    if a2:
        b2 = x2._data if x2._dtype is dt else ops.astype(x2._data, dt)
    else:
        b2 = _scalar_as(x2, dt)
    r = ops.where(condition._data, b1, b2)
    be = dev._backend
    if r.__class__ is not be.native_type:
        r = be.coerce_native(r)
    if be.native_dtype(r) is not dt:
        r = ops.astype(r, dt)
    return Array._new(r, dt, dev)
