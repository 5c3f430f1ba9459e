"""Native ops of the NumPy backend for the statistical, searching, sorting, set and
utility chapters.

The front end has already validated every argument: ``axis`` arrives as ``None`` or
a tuple of non-negative ints (a single int for ``argmax``/``argmin``/``sort``/...),
dtypes arrive as :class:`~tessera_array.DType` objects (or ``None`` for the
standard's default), and operands are native buffers of the computation dtype.
Every op returns ``numpy.ndarray`` objects, never NumPy scalars: ufunc reductions
are called with ``out=...``, which makes NumPy return a 0-d array.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "all",
    "any",
    "argmax",
    "argmin",
    "argsort",
    "count_nonzero",
    "cumulative_prod",
    "cumulative_sum",
    "diff",
    "isin",
    "max",
    "mean",
    "min",
    "nonzero",
    "prod",
    "searchsorted",
    "sort",
    "std",
    "sum",
    "unique_all",
    "unique_counts",
    "unique_inverse",
    "unique_values",
    "var",
    "where",
]

_add_reduce = np.add.reduce
_multiply_reduce = np.multiply.reduce
_maximum_reduce = np.maximum.reduce
_minimum_reduce = np.minimum.reduce
_and_reduce = np.logical_and.reduce
_or_reduce = np.logical_or.reduce
_true_divide = np.true_divide
_asarray = np.asarray
_int64 = np.dtype(np.int64)


def _count(shape: tuple, axis) -> int:
    """The number of elements each reduction over ``axis`` combines."""
    n = 1
    if axis is None:
        for s in shape:
            n *= s
    else:
        for ax in axis:
            n *= shape[ax]
    return n


def _index_result(r) -> np.ndarray:
    """An int64 ndarray from a NumPy index result (intp scalar or array)."""
    return _asarray(r, dtype=_int64)


# ---- statistical -----------------------------------------------------------------


def sum(a, /, *, axis=None, dtype=None, keepdims=False):
    """Sum over ``axis``; ``dtype`` (a DType or None) is the accumulation and result dtype."""
    if dtype is None:
        return _add_reduce(a, axis=axis, keepdims=keepdims, out=...)
    return _add_reduce(a, axis=axis, dtype=dtype._np, keepdims=keepdims, out=...)


def prod(a, /, *, axis=None, dtype=None, keepdims=False):
    """Product over ``axis``; ``dtype`` (a DType or None) is the accumulation and result dtype."""
    if dtype is None:
        return _multiply_reduce(a, axis=axis, keepdims=keepdims, out=...)
    return _multiply_reduce(a, axis=axis, dtype=dtype._np, keepdims=keepdims, out=...)


def max(a, /, *, axis=None, keepdims=False):
    """Maximum over ``axis`` (NaNs propagate); the front end rejects empty reductions."""
    return _maximum_reduce(a, axis=axis, keepdims=keepdims, out=...)


def min(a, /, *, axis=None, keepdims=False):
    """Minimum over ``axis`` (NaNs propagate); the front end rejects empty reductions."""
    return _minimum_reduce(a, axis=axis, keepdims=keepdims, out=...)


def mean(a, /, *, axis=None, keepdims=False):
    """Arithmetic mean of a floating array over ``axis`` (NaN for an empty reduction)."""
    s = _add_reduce(a, axis=axis, keepdims=keepdims, out=...)
    with np.errstate(invalid="ignore", divide="ignore"):
        _true_divide(s, _count(a.shape, axis), out=s)
    return s


def var(a, /, *, axis=None, correction=0.0, keepdims=False):
    """Variance of a floating array over ``axis``; real for complex input.

    The divisor is ``M - correction``; where it is <= 0 the result is NaN, as the
    standard asks (NumPy would give inf and warn).
    """
    n = _count(a.shape, axis)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        m = _add_reduce(a, axis=axis, keepdims=True, out=...)
        _true_divide(m, n, out=m)
        d = np.subtract(a, m, out=...)
        if d.dtype.kind == "c":
            re = d.real
            im = d.imag
            sq = np.multiply(re, re, out=...)
            sq += np.multiply(im, im, out=...)
        else:
            sq = np.multiply(d, d, out=d)
        s = _add_reduce(sq, axis=axis, keepdims=keepdims, out=...)
        dof = n - correction
        if dof > 0:
            _true_divide(s, dof, out=s)
        else:
            s.fill(np.nan)
    return s


def std(a, /, *, axis=None, correction=0.0, keepdims=False):
    """Standard deviation: the square root of :func:`var`."""
    s = var(a, axis=axis, correction=correction, keepdims=keepdims)
    return np.sqrt(s, out=s)


def cumulative_sum(a, /, *, axis=0, dtype=None, include_initial=False):
    """Cumulative sum along the int ``axis``; a 0-d ``a`` counts as one element."""
    if a.ndim == 0:
        a = a.reshape(1)
    with np.errstate(all="ignore"):  # overflow -> inf, inf - inf -> nan, as add/multiply do
        return np.cumulative_sum(
            a, axis=axis, dtype=None if dtype is None else dtype._np,
            include_initial=include_initial,
        )


def cumulative_prod(a, /, *, axis=0, dtype=None, include_initial=False):
    """Cumulative product along the int ``axis``; a 0-d ``a`` counts as one element."""
    if a.ndim == 0:
        a = a.reshape(1)
    with np.errstate(all="ignore"):  # overflow -> inf, inf - inf -> nan, as add/multiply do
        return np.cumulative_prod(
            a, axis=axis, dtype=None if dtype is None else dtype._np,
            include_initial=include_initial,
        )


# ---- searching -------------------------------------------------------------------


def argmax(a, /, *, axis=None, keepdims=False):
    """Index (int64) of the first maximum along the int ``axis`` or of the flattened array."""
    if axis is None and not keepdims:
        return a.argmax(None, np.empty((), _int64))
    return _index_result(a.argmax(axis, keepdims=keepdims))


def argmin(a, /, *, axis=None, keepdims=False):
    """Index (int64) of the first minimum along the int ``axis`` or of the flattened array."""
    if axis is None and not keepdims:
        return a.argmin(None, np.empty((), _int64))
    return _index_result(a.argmin(axis, keepdims=keepdims))


def count_nonzero(a, /, *, axis=None, keepdims=False):
    """Number (int64) of non-zero elements over ``axis``."""
    return _index_result(np.count_nonzero(a, axis=axis, keepdims=keepdims))


def nonzero(a, /):
    """Tuple of int64 index arrays, one per axis of ``a`` (``a.ndim >= 1``)."""
    return tuple(_index_result(i) for i in np.nonzero(a))


def searchsorted(a, v, /, *, side="left", sorter=None):
    """Insertion indices (int64) of ``v`` (a buffer or weak scalar) into the 1-D ``a``."""
    return _index_result(np.searchsorted(a, v, side=side, sorter=sorter))


def where(condition, a, b, /):
    """``a`` where ``condition`` else ``b``; ``a``/``b`` are buffers or weak scalars."""
    return np.where(condition, a, b)


# ---- sorting ---------------------------------------------------------------------


def argsort(a, /, *, axis=-1, descending=False, stable=True):
    """Indices (int64) sorting ``a`` along the int ``axis``.

    Descending and stable: equal elements keep their original order, so this is
    *not* the reverse of the stable ascending order. It sorts the reversed array
    ascending (stable), reverses that order and maps the indices back. NaNs sort
    last ascending and first descending.
    """
    if not descending:
        return _index_result(a.argsort(axis, "stable" if stable else None))
    if not stable:
        return _index_result(np.flip(a.argsort(axis), axis=axis))
    n = a.shape[axis]
    rev = np.flip(np.flip(a, axis=axis).argsort(axis, "stable"), axis=axis)
    return _index_result(np.subtract(n - 1, rev, dtype=_int64))


def sort(a, /, *, axis=-1, descending=False, stable=True):
    """A sorted copy of ``a`` along the int ``axis`` (order as in :func:`argsort`)."""
    if not descending:
        r = a.copy()
        r.sort(axis, "stable" if stable else None)
        return r
    if stable and a.dtype.kind in "fc":
        # Values that compare equal can still differ (-0.0/+0.0, NaN payloads):
        # gather through the stable descending order.
        idx = argsort(a, axis=axis, descending=True, stable=True)
        return np.take_along_axis(a, idx, axis=axis)
    return np.ascontiguousarray(np.flip(np.sort(a, axis=axis), axis=axis))


# ---- set -------------------------------------------------------------------------


def isin(a, b, /, *, invert=False):
    """Whether each element of ``a`` is in ``b`` (buffers or weak scalars)."""
    return _asarray(np.isin(a, b, invert=invert))


def _unique(a, index: bool, inverse: bool, counts: bool):
    # Each NaN is its own unique value (equal_nan=False), as the standard asks;
    # -0.0 and +0.0 are one value. ``return_index`` makes NumPy sort stably, so
    # indices are first occurrences.
    return np.unique(
        a.reshape(-1),
        return_index=index,
        return_inverse=inverse,
        return_counts=counts,
        equal_nan=False,
    )


def unique_all(a, /):
    """``(values, indices, inverse_indices, counts)``; inverse_indices has ``a``'s shape."""
    values, indices, inverse, counts = _unique(a, True, True, True)
    return (
        values,
        _index_result(indices),
        _index_result(inverse).reshape(a.shape),
        _index_result(counts),
    )


def unique_counts(a, /):
    """``(values, counts)`` of the flattened ``a``."""
    values, counts = _unique(a, False, False, True)
    return values, _index_result(counts)


def unique_inverse(a, /):
    """``(values, inverse_indices)``; inverse_indices has ``a``'s shape."""
    values, inverse = _unique(a, False, True, False)
    return values, _index_result(inverse).reshape(a.shape)


def unique_values(a, /):
    """The sorted unique values of the flattened ``a`` (each NaN distinct)."""
    return _unique(a, False, False, False)


# ---- utility ---------------------------------------------------------------------


def all(a, /, *, axis=None, keepdims=False):
    """Logical AND over ``axis`` (bool result; True for an empty reduction)."""
    return _and_reduce(a, axis=axis, keepdims=keepdims, out=...)


def any(a, /, *, axis=None, keepdims=False):
    """Logical OR over ``axis`` (bool result; False for an empty reduction)."""
    return _or_reduce(a, axis=axis, keepdims=keepdims, out=...)


def diff(a, /, *, axis=-1, n=1, prepend=None, append=None):
    """``n``-th forward difference along the int ``axis``.

    ``prepend``/``append`` are buffers of ``a``'s dtype or weak Python scalars (one
    value along ``axis``).
    """
    if prepend is not None or append is not None:
        parts = []
        for p in (prepend, a, append):
            if p is None:
                continue
            if p.__class__ is not np.ndarray:
                shape = list(a.shape)
                shape[axis] = 1
                p = np.full(shape, p, dtype=a.dtype)
            parts.append(p)
        a = np.concatenate(parts, axis=axis)
    if n == 0:
        return a.copy()
    # Note: NumPy differences booleans with not_equal, as here.
    with np.errstate(all="ignore"):  # inf - inf -> nan, as subtract does
        return np.diff(a, n=n, axis=axis)
