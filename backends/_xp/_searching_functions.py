"""Native searching ops (the front end's :mod:`tessera_array._searching_functions`).

Index results are int64 buffers (``_dtypes.INDEX``), never the module's intp scalars.
``count_nonzero`` is written with the module's ``count_nonzero`` over ``axis`` and
restores the reduced axes itself for ``keepdims`` (CuPy's has no ``keepdims``).
"""

from __future__ import annotations

from ._dtypes import INDEX

__all__ = ["SearchingFunctions"]


class SearchingFunctions:
    """The ``searching`` chapter of the ops contract (a mixin of ``Namespace``)."""

    def argmax(self, a, /, *, axis=None, keepdims=False):
        """Index of the first maximum along the int ``axis`` or of the flattened array."""
        return self.m.asarray(a.argmax(axis=axis, keepdims=keepdims), dtype=INDEX)

    def argmin(self, a, /, *, axis=None, keepdims=False):
        """Index of the first minimum along the int ``axis`` or of the flattened array."""
        return self.m.asarray(a.argmin(axis=axis, keepdims=keepdims), dtype=INDEX)

    def count_nonzero(self, a, /, *, axis=None, keepdims=False):
        """Number of non-zero elements over ``axis`` (None or a tuple of ints)."""
        r = self.m.asarray(self.m.count_nonzero(a, axis=axis), dtype=INDEX)
        if keepdims:
            axes = range(a.ndim) if axis is None else axis
            r = r.reshape(tuple(1 if i in axes else n for i, n in enumerate(a.shape)))
        return r

    def nonzero(self, a, /):
        """Tuple of index arrays, one per axis of ``a`` (``a.ndim >= 1``)."""
        return tuple(self.m.asarray(i, dtype=INDEX) for i in self.m.nonzero(a))

    def searchsorted(self, a, v, /, *, side="left", sorter=None):
        """Insertion indices of ``v`` (a buffer or weak scalar) into the 1-D ``a``."""
        return self.m.asarray(self.m.searchsorted(a, v, side=side, sorter=sorter), dtype=INDEX)

    def where(self, condition, a, b, /):
        """``a`` where ``condition`` else ``b``; ``a``/``b`` are buffers or weak scalars."""
        return self.m.where(condition, a, b)
