"""Native set ops (the front end's :mod:`tessera_array._set_functions`).

Each NaN is its own unique value (``equal_nan=False``), as the standard asks;
-0.0 and +0.0 are one value. Where the module's ``isin`` refuses Python scalars
(CuPy: the trait ``isin_takes_scalars``), such an operand is made a 0-d buffer of
the other operand's dtype first.
"""

from __future__ import annotations

from ._dtypes import INDEX

__all__ = ["SetFunctions"]


class SetFunctions:
    """The ``set`` chapter of the ops contract (a mixin of ``Namespace``)."""

    def isin(self, a, b, /, *, invert=False):
        """Whether each element of ``a`` is in ``b`` (buffers or weak scalars)."""
        m = self.m
        if not self.isin_takes_scalars:
            if a.__class__ is not self.ndarray:
                a = m.asarray(a, dtype=b.dtype)
            elif b.__class__ is not self.ndarray:
                b = m.asarray(b, dtype=a.dtype)
        return m.asarray(m.isin(a, b, invert=invert))

    def _unique(self, a, index: bool, inverse: bool, counts: bool):
        # ``return_index`` makes NumPy sort stably, so indices are first occurrences.
        return self.m.unique(a.reshape(-1), return_index=index, return_inverse=inverse,
                             return_counts=counts, equal_nan=False)

    def unique_all(self, a, /):
        """``(values, indices, inverse_indices, counts)``; inverse_indices has ``a``'s
        shape."""
        m = self.m
        values, indices, inverse, counts = self._unique(a, True, True, True)
        return (
            values,
            m.asarray(indices, dtype=INDEX),
            m.asarray(inverse, dtype=INDEX).reshape(a.shape),
            m.asarray(counts, dtype=INDEX),
        )

    def unique_counts(self, a, /):
        """``(values, counts)`` of the flattened ``a``."""
        values, counts = self._unique(a, False, False, True)
        return values, self.m.asarray(counts, dtype=INDEX)

    def unique_inverse(self, a, /):
        """``(values, inverse_indices)``; inverse_indices has ``a``'s shape."""
        values, inverse = self._unique(a, False, True, False)
        return values, self.m.asarray(inverse, dtype=INDEX).reshape(a.shape)

    def unique_values(self, a, /):
        """The sorted unique values of the flattened ``a`` (each NaN distinct)."""
        return self._unique(a, False, False, False)
