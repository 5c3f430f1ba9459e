"""Native sorting ops (the front end's :mod:`tessera_array._sorting_functions`).

NaNs sort last ascending and first descending. A stable descending order keeps
equal elements in their original order, so it is *not* the reverse of the stable
ascending order: the reversed array is sorted ascending (stable), that order
reversed and its indices mapped back.
"""

from __future__ import annotations

from ._dtypes import INDEX, kind_of

__all__ = ["SortingFunctions"]


class SortingFunctions:
    """The ``sorting`` chapter of the ops contract (a mixin of ``Namespace``)."""

    def argsort(self, a, /, *, axis=-1, descending=False, stable=True):
        """Indices sorting ``a`` along the int ``axis``."""
        m = self.m
        if not descending:
            return m.asarray(m.argsort(a, axis=axis, kind="stable" if stable else None),
                             dtype=INDEX)
        if not stable:
            return m.asarray(m.flip(m.argsort(a, axis=axis), axis=axis), dtype=INDEX)
        n = a.shape[axis]
        rev = m.flip(m.argsort(m.flip(a, axis=axis), axis=axis, kind="stable"), axis=axis)
        return m.asarray(m.subtract(n - 1, rev, dtype=INDEX))

    def sort(self, a, /, *, axis=-1, descending=False, stable=True):
        """A sorted copy of ``a`` along the int ``axis`` (order as in :meth:`argsort`)."""
        m = self.m
        if not descending:
            r = a.copy()
            r.sort(axis, "stable" if stable else None)
            return r
        if stable and kind_of(a.dtype) in "fc":
            # Values that compare equal can still differ (-0.0/+0.0, NaN payloads):
            # gather through the stable descending order.
            idx = self.argsort(a, axis=axis, descending=True, stable=True)
            return m.take_along_axis(a, idx, axis=axis)
        return m.ascontiguousarray(m.flip(m.sort(a, axis=axis), axis=axis))
