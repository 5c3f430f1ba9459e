"""Set functions of the standard.

Specification: https://data-apis.org/array-api/2025.12/API_specification/set_functions.html

The unique values come out sorted (NaNs last); each NaN is its own unique value,
and -0.0 and +0.0 are one.
"""

from __future__ import annotations

from typing import NamedTuple

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
from ._statistical_functions import _check_flag

__all__ = ["isin", "unique_all", "unique_counts", "unique_inverse", "unique_values"]

_int64 = _dtypes.int64


class UniqueAllResult(NamedTuple):
    """The result of :func:`unique_all`."""

    values: Array
    indices: Array
    inverse_indices: Array
    counts: Array


class UniqueCountsResult(NamedTuple):
    """The result of :func:`unique_counts`."""

    values: Array
    counts: Array


class UniqueInverseResult(NamedTuple):
    """The result of :func:`unique_inverse`."""

    values: Array
    inverse_indices: Array


def unique_all(x: Array, /) -> UniqueAllResult:
    """Unique values of ``x`` with first indices, inverse indices and counts.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.unique_all.html
    """
    check_array(x, "unique_all")
    dev = x._device
    values, indices, inverse, counts = dev.ops.unique_all(x._data)
    return UniqueAllResult(
        wrap_as(values, x._dtype, dev),
        wrap_as(indices, _int64, dev),
        wrap_as(inverse, _int64, dev),
        wrap_as(counts, _int64, dev),
    )


def unique_counts(x: Array, /) -> UniqueCountsResult:
    """Unique values of ``x`` and how often each occurs.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.unique_counts.html
    """
    check_array(x, "unique_counts")
    dev = x._device
    values, counts = dev.ops.unique_counts(x._data)
    return UniqueCountsResult(wrap_as(values, x._dtype, dev), wrap_as(counts, _int64, dev))


def unique_inverse(x: Array, /) -> UniqueInverseResult:
    """Unique values of ``x`` and the indices into them that rebuild ``x`` (x's shape).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.unique_inverse.html
    """
    check_array(x, "unique_inverse")
    dev = x._device
    values, inverse = dev.ops.unique_inverse(x._data)
    return UniqueInverseResult(wrap_as(values, x._dtype, dev), wrap_as(inverse, _int64, dev))


def unique_values(x: Array, /) -> Array:
    """Unique values of ``x`` (flattened), as a 1-D array.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.unique_values.html
    """
    check_array(x, "unique_values")
    dev = x._device
    return wrap_as(dev.ops.unique_values(x._data), x._dtype, dev)


def isin(x1: Array | int, x2: Array | int, /, *, invert: bool = False) -> Array:
    """Whether each element of ``x1`` is in ``x2`` (or not in it, with ``invert=True``).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.isin.html

    Elements are compared as :func:`equal` compares them, in the promoted dtype; a
    Python scalar on either side is weak, as in arithmetic.
    """
    _check_flag("isin", "invert", invert)
    a1 = isinstance(x1, Array)
    a2 = isinstance(x2, Array)
    if a1 and a2:
        check_same_device("isin", x1, x2)
        dev = x1._device
        dt = _dtypes.PROMOTION_TABLE[x1._dtype, x2._dtype]
    elif a1:
        dev = x1._device
        x2 = _coerce_scalar("isin", x2, "x2")
        dt = scalar_dtype_for("isin", x1._dtype, x2, dev, name="x2")
    elif a2:
        dev = x2._device
        x1 = _coerce_scalar("isin", x1, "x1")
        dt = scalar_dtype_for("isin", x2._dtype, x1, dev, name="x1")
    else:
        raise TypeError(
            f"isin: at least one of x1, x2 must be a tessera_array Array. Received: "
            f"x1 of type {type(x1).__name__}, x2 of type {type(x2).__name__}"
        )
    ops = dev.ops
    b1 = (x1._data if x1._dtype is dt else ops.astype(x1._data, dt)) if a1 else _scalar_as(x1, dt)
    b2 = (x2._data if x2._dtype is dt else ops.astype(x2._data, dt)) if a2 else _scalar_as(x2, dt)
    return wrap_as(ops.isin(b1, b2, invert=invert), _dtypes.bool, dev)
