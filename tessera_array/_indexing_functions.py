"""Indexing functions of the standard.

Specification: https://data-apis.org/array-api/2025.12/API_specification/indexing_functions.html
"""

from __future__ import annotations

from ._array import Array, check_same_device
from ._helpers import check_array, wrap_as
from ._manipulation_functions import normalize_axis

__all__ = ["take", "take_along_axis"]


def _check_indices(func: str, x: Array, indices) -> None:
    check_array(x, func)
    check_array(indices, func, "indices")
    if indices._dtype.kind not in "iu":
        raise TypeError(
            f"{func}: indices must have an integer dtype. Received: indices.dtype={indices._dtype}"
        )
    if indices._device is not x._device:
        check_same_device(func, x, indices)


def take(x: Array, indices: Array, /, *, axis: int | None = None) -> Array:
    """Elements of an array at ``indices`` along ``axis``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.take.html

    Notes
    -----
    Out-of-bounds indices raise IndexError (no wrapping, no clipping). As in NumPy,
    ``indices`` may have any number of dimensions (the standard asks for 1-D), and a
    0-d ``x`` with ``axis=None`` is treated as 1-D.
    """
    _check_indices("take", x, indices)
    ndim = x.ndim
    if axis is None:
        if ndim > 1:
            # Note: the standard requires axis for N-d x; NumPy would flatten x.
            raise ValueError(
                f"take: axis is required when x has more than one dimension; to take from "
                f"the flattened array use take(reshape(x, (-1,)), indices). "
                f"Received: x.shape={x.shape}, axis=None"
            )
        if ndim == 1:
            axis = 0
    else:
        axis = normalize_axis("take", axis, ndim)
    dev = x._device
    return wrap_as(dev.ops.take(x._data, indices._data, axis=axis), x._dtype, dev)


def take_along_axis(x: Array, indices: Array, /, *, axis: int = -1) -> Array:
    """Elements of an array at the 1-D ``indices`` along ``axis``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.take_along_axis.html

    Notes
    -----
    Out-of-bounds indices raise IndexError. As in NumPy, ``axis=None`` takes from
    the flattened ``x`` with 1-D ``indices``.
    """
    _check_indices("take_along_axis", x, indices)
    xs, js = x.shape, indices.shape
    if axis is None:
        if len(js) != 1:
            raise ValueError(
                f"take_along_axis: with axis=None, indices must be 1-D. "
                f"Received: indices.shape={js}"
            )
    else:
        if len(js) != len(xs):
            raise ValueError(
                f"take_along_axis: indices must have as many dimensions as x. "
                f"Received: x.shape={xs}, indices.shape={js}"
            )
        axis = normalize_axis("take_along_axis", axis, len(xs))
        for i, (a, b) in enumerate(zip(xs, js)):
            if i != axis and a != b and a != 1 and b != 1:
                raise ValueError(
                    f"take_along_axis: x and indices must be broadcast-compatible except "
                    f"along axis {axis}, but axis {i} has sizes {a} and {b}. "
                    f"Received: x.shape={xs}, indices.shape={js}"
                )
    dev = x._device
    return wrap_as(dev.ops.take_along_axis(x._data, indices._data, axis=axis), x._dtype, dev)
