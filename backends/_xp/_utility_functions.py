"""Native utility ops (the front end's :mod:`tessera_array._utility_functions`).

``all`` and ``any`` are reduction hooks of the namespace, as ``max``/``min`` are
(NumPy's ``logical_and.reduce`` is faster; CuPy has no logical ``ufunc.reduce``).
"""

from __future__ import annotations

from tessera_array._dtypes import FROM_NUMPY

__all__ = ["UtilityFunctions"]


class UtilityFunctions:
    """The ``utility`` chapter of the ops contract (a mixin of ``Namespace``)."""

    def all(self, a, /, *, axis=None, keepdims=False):
        """Logical AND over ``axis`` (bool result; True for an empty reduction)."""
        return self.m.asarray(self.m.all(a, axis=axis, keepdims=keepdims))

    def any(self, a, /, *, axis=None, keepdims=False):
        """Logical OR over ``axis`` (bool result; False for an empty reduction)."""
        return self.m.asarray(self.m.any(a, axis=axis, keepdims=keepdims))

    def diff(self, a, /, *, axis=-1, n=1, prepend=None, append=None):
        """``n``-th forward difference along the int ``axis``.

        ``prepend``/``append`` are buffers of ``a``'s dtype or weak Python scalars (one
        value along ``axis``).
        """
        m = self.m
        if prepend is not None or append is not None:
            parts = []
            for p in (prepend, a, append):
                if p is None:
                    continue
                if p.__class__ is not self.ndarray:
                    shape = list(a.shape)
                    shape[axis] = 1
                    p = self.full(tuple(shape), p, dtype=FROM_NUMPY[a.dtype])
                parts.append(p)
            a = m.concatenate(parts, axis=axis)
        if n == 0:
            return a.copy()
        # Note: NumPy differences booleans with not_equal, as here.
        with self.quiet():  # inf - inf -> nan, as subtract does
            return m.diff(a, n=n, axis=axis)
