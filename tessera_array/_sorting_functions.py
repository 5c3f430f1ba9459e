"""Sorting functions of the standard.

Specification: https://data-apis.org/array-api/2025.12/API_specification/sorting_functions.html

Order: NaNs sort last ascending and first descending; complex numbers sort
lexicographically (real part, then imaginary part), as in NumPy. A stable
descending sort keeps equal elements in their original order (it is not the
reverse of the stable ascending sort).
"""

from __future__ import annotations

from . import _dtypes
from ._array import Array
from ._helpers import check_array, wrap_as
from ._statistical_functions import _check_flag, _normalize_axis

__all__ = ["argsort", "sort"]


def _sort_args(func: str, x, axis, descending, stable) -> int:
    check_array(x, func)
    _check_flag(func, "descending", descending)
    _check_flag(func, "stable", stable)
    return _normalize_axis(func, axis, len(x._data.shape))


def argsort(x: Array, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Array:
    """Indices that sort ``x`` along ``axis``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.argsort.html
    """
    ax = _sort_args("argsort", x, axis, descending, stable)
    dev = x._device
    r = dev.ops.argsort(x._data, axis=ax, descending=descending, stable=stable)
    return wrap_as(r, _dtypes.int64, dev)


def sort(x: Array, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Array:
    """A sorted copy of ``x`` along ``axis``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.sort.html
    """
    ax = _sort_args("sort", x, axis, descending, stable)
    dev = x._device
    r = dev.ops.sort(x._data, axis=ax, descending=descending, stable=stable)
    return wrap_as(r, x._dtype, dev)
