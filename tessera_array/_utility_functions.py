"""Utility functions of the standard.

Specification: https://data-apis.org/array-api/2025.12/API_specification/utility_functions.html
"""

from __future__ import annotations

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
from ._statistical_functions import _check_flag, _normalize_axes, _normalize_axis

__all__ = ["all", "any", "diff"]

_bool = _dtypes.bool


def all(
    x: Array, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False
) -> Array:
    """Whether all elements of ``x`` are true (non-zero) over ``axis``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.all.html
    """
    check_array(x, "all")
    _check_flag("all", "keepdims", keepdims)
    axes = _normalize_axes("all", axis, len(x._data.shape))
    dev = x._device
    return wrap_as(dev.ops.all(x._data, axis=axes, keepdims=keepdims), _bool, dev)


def any(
    x: Array, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False
) -> Array:
    """Whether any element of ``x`` is true (non-zero) over ``axis``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.any.html
    """
    check_array(x, "any")
    _check_flag("any", "keepdims", keepdims)
    axes = _normalize_axes("any", axis, len(x._data.shape))
    dev = x._device
    return wrap_as(dev.ops.any(x._data, axis=axes, keepdims=keepdims), _bool, dev)


def _edge(x: Array, ax: int, value, name: str):
    """Check ``prepend``/``append``: an Array of x's shape except along ``ax``, or a
    Python scalar (NumPy's extension: broadcast to length 1 along ``ax``)."""
    if isinstance(value, Array):
        check_same_device("diff", x, value)
        xs, vs = x.shape, value.shape
        if len(vs) != len(xs) or _shape_differs(xs, vs, ax):
            raise ValueError(
                f"diff: {name} must have the shape of x except along axis {ax}. "
                f"Received: x.shape={xs}, {name}.shape={vs}"
            )
        return value, value._dtype
    value = _coerce_scalar("diff", value, name)
    return value, scalar_dtype_for("diff", x._dtype, value, x._device, name=name)


def _shape_differs(xs: tuple, vs: tuple, ax: int) -> bool:
    for i, (a, b) in enumerate(zip(xs, vs)):
        if i != ax and a != b:
            return True
    return False


def diff(
    x: Array,
    /,
    *,
    axis: int = -1,
    n: int = 1,
    prepend: Array | None = None,
    append: Array | None = None,
) -> Array:
    """The ``n``-th forward difference of ``x`` along ``axis``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.diff.html

    ``prepend``/``append`` of another dtype promote with ``x``; a Python scalar is
    accepted there too and counts as one value along ``axis`` (as in NumPy). Boolean
    arrays difference with ``not_equal``, as in NumPy.
    """
    check_array(x, "diff")
    ndim = len(x._data.shape)
    if ndim == 0:
        raise ValueError("diff: x must have at least one dimension. Received: x.shape=()")
    ax = _normalize_axis("diff", axis, ndim)
    if n.__class__ is not int:
        if isinstance(n, bool) or not hasattr(n, "__index__"):
            raise TypeError(f"diff: n must be an int. Received: n={n!r}")
        n = n.__index__()
    if n < 0:
        raise ValueError(f"diff: n must be >= 0. Received: n={n}")
    dt = x._dtype
    edges = []
    for name, value in (("prepend", prepend), ("append", append)):
        if value is None:
            edges.append(None)
            continue
        value, vdt = _edge(x, ax, value, name)
        edges.append(value)
        dt = _dtypes.PROMOTION_TABLE[dt, vdt]
    dev = x._device
    ops = dev.ops
    natives = []
    for value in edges:
        if value is None:
            natives.append(None)
        elif isinstance(value, Array):
            natives.append(value._data if value._dtype is dt else ops.astype(value._data, dt))
        else:
            natives.append(_scalar_as(value, dt))
    a = x._data if x._dtype is dt else ops.astype(x._data, dt)
    r = ops.diff(a, axis=ax, n=n, prepend=natives[0], append=natives[1])
    return wrap_as(r, dt, dev)
