"""Native ``unique_all``, ``unique_counts``, ``unique_inverse``, ``unique_values`` and
``isin`` of the OpenCL backend, built from its own kernels: the stable sort (or argsort and a gather),
a not-equal of each sorted element with the one before it, a compaction of where
that holds (``nonzero``) and, for the inverse, a running sum scattered back through
the sort's permutation. Nothing goes through the host but the group count that
``nonzero`` reads back.

Semantics are the NumPy backend's (``np.unique(..., equal_nan=False)``): values sorted
with NaNs last, each NaN its own value, ``-0.0`` and ``0.0`` one value; ``indices``
are first occurrences (the sort is stable); ``inverse_indices`` has the input's shape;
indices and counts are int64. The value kept for a group of equal elements is its
first in input order (for ``±0.0`` NumPy's sign may differ: ``unique_values`` without
``return_index`` sorts unstably there).

``isin(a, b)``: ``b`` sorted once, each element of ``a`` looked up with ``searchsorted``
and compared (``==``, so NaN is in nothing and ``-0.0`` is in ``[0.0]``, as NumPy's
``isin``); a weak scalar ``b`` is one ``equal``.
"""

from __future__ import annotations

import numpy as np

from tessera_array import _dtypes

from . import _kernels, _memory, _programs
from ._ops_core import astype, setitem
from ._ops_elementwise import add, equal, logical_not, minimum, not_equal, subtract
from ._ops_indexing import nonzero, searchsorted, take
from ._ops_manipulation import concat, reshape
from ._ops_reductions import any as _any
from ._ops_reductions import cumulative_sum
from ._ops_sorting import argsort, sort

__all__ = ["isin", "unique_all", "unique_counts", "unique_inverse", "unique_values"]

_I64 = np.dtype(np.int64)


def _flat(a):
    return reshape(a, (a.size,))


def _starts(s):
    """``(starts, neq)`` of the sorted 1-D ``s`` (size >= 1): the int64 positions where a
    new value begins (0 first), and the bool ``s[1:] != s[:-1]``."""
    n = s.size
    q = s.queue
    zero = _memory.empty(q, (1,), _I64)
    _programs.zero_fill(q, zero)
    if n == 1:
        return zero, None
    neq = not_equal(s[1:], s[:-1])
    return concat([zero, add(nonzero(neq)[0], 1)]), neq


def _counts(starts, n):
    q = starts.queue
    end = _memory.to_device(q, np.array([n], _I64))
    return subtract(concat([starts[1:], end]), starts)


def _empty_index(q, shape=(0,)):
    return _memory.empty(q, shape, _I64)


def unique_values(a, /):
    """The sorted unique values of the flattened ``a`` (each NaN distinct)."""
    s = sort(_flat(a))
    if s.size == 0:
        return s
    return take(s, _starts(s)[0])


def unique_counts(a, /):
    """``(values, counts)`` of the flattened ``a``."""
    s = sort(_flat(a))
    if s.size == 0:
        return s, _empty_index(a.queue)
    starts, _ = _starts(s)
    return take(s, starts), _counts(starts, s.size)


def _by_order(a):
    """``(order, s, starts, neq)``: the stable argsort of the flattened ``a``, the sorted
    values and their group starts (size >= 1)."""
    flat = _flat(a)
    order = argsort(flat, axis=-1, descending=False, stable=True)
    s = take(flat, order)
    starts, neq = _starts(s)
    return order, s, starts, neq


def _inverse(a, order, neq):
    """int64 of ``a``'s shape: the group of each element (a running count of the group
    starts, scattered back through ``order``)."""
    q = a.queue
    inv = _memory.empty(q, (a.size,), _I64)
    if neq is None:
        _programs.zero_fill(q, inv)
    else:
        zero = _memory.empty(q, (1,), _I64)
        _programs.zero_fill(q, zero)
        group = cumulative_sum(concat([zero, astype(neq, _dtypes.int64)]), axis=0)
        setitem(inv, (order,), group)
    return reshape(inv, a.shape)


def unique_inverse(a, /):
    """``(values, inverse_indices)``; inverse_indices has ``a``'s shape."""
    if a.size == 0:
        return _flat(a), _empty_index(a.queue, a.shape)
    order, s, starts, neq = _by_order(a)
    return take(s, starts), _inverse(a, order, neq)


def unique_all(a, /):
    """``(values, indices, inverse_indices, counts)``; inverse_indices has ``a``'s shape."""
    q = a.queue
    if a.size == 0:
        return _flat(a), _empty_index(q), _empty_index(q, a.shape), _empty_index(q)
    order, s, starts, neq = _by_order(a)
    return (take(s, starts), take(order, starts), _inverse(a, order, neq),
            _counts(starts, s.size))


def isin(a, b, /, *, invert=False):
    """Whether each element of ``a`` is in ``b`` (buffers of one dtype, or one of them a weak
    Python scalar of that kind)."""
    if not hasattr(b, "queue"):  # a scalar b: a plain comparison
        return (not_equal if invert else equal)(a, b)
    if not hasattr(a, "queue"):  # a scalar a: a 0-d answer
        found = _any(equal(b, a))
        return logical_not(found) if invert else found
    q = a.queue
    if b.size == 0 or a.size == 0:
        out = _memory.empty(q, a.shape, np.dtype(np.bool_))
        _kernels.launch_map(q, "true" if invert else "false", out, [], "bool")
        return out
    s = sort(_flat(b))
    flat = _flat(a)
    at = minimum(searchsorted(s, flat, side="left"), s.size - 1)
    found = reshape(equal(take(s, at), flat), a.shape)
    return logical_not(found) if invert else found
