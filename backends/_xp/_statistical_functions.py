"""Native statistical ops (the front end's :mod:`tessera_array._statistical_functions`).

``axis`` arrives as None or a tuple of non-negative ints (an int for the cumulative
ops), dtypes as :class:`~tessera_array.DType` objects or None (the standard's
default). ``sum``, ``prod``, ``max`` and ``min`` are the namespace's reduction hooks
(NumPy's ``ufunc.reduce`` is faster, CuPy has it only for add and multiply); the
others are written over them: ``mean``, and ``var``/``std``, which give NaN where
the divisor ``M - correction`` is not positive (NumPy gives inf and warns).
"""

from __future__ import annotations

import math

from tessera_array._dtypes import FROM_NUMPY

__all__ = ["StatisticalFunctions"]


class StatisticalFunctions:
    """The ``statistical`` chapter of the ops contract (a mixin of ``Namespace``)."""

    # ---- the reduction hooks -------------------------------------------------------

    def sum(self, a, /, *, axis=None, dtype=None, keepdims=False):
        """Sum over ``axis``; ``dtype`` (a DType or None) is the accumulation and result
        dtype."""
        npdt = None if dtype is None else dtype._np
        return self.m.asarray(self.m.sum(a, axis=axis, dtype=npdt, keepdims=keepdims))

    def prod(self, a, /, *, axis=None, dtype=None, keepdims=False):
        """Product over ``axis``; ``dtype`` (a DType or None) is the accumulation and
        result dtype."""
        npdt = None if dtype is None else dtype._np
        return self.m.asarray(self.m.prod(a, axis=axis, dtype=npdt, keepdims=keepdims))

    def max(self, a, /, *, axis=None, keepdims=False):
        """Maximum over ``axis`` (NaNs propagate); the front end rejects empty reductions."""
        return self.m.asarray(self.m.max(a, axis=axis, keepdims=keepdims))

    def min(self, a, /, *, axis=None, keepdims=False):
        """Minimum over ``axis`` (NaNs propagate); the front end rejects empty reductions."""
        return self.m.asarray(self.m.min(a, axis=axis, keepdims=keepdims))

    # ---- written over them -----------------------------------------------------------

    def mean(self, a, /, *, axis=None, keepdims=False):
        """Arithmetic mean of a floating array over ``axis`` (NaN for an empty reduction)."""
        s = self.sum(a, axis=axis, keepdims=keepdims)
        with self.quiet():
            self.m.true_divide(s, _count(a.shape, axis), out=s)
        return s

    def var(self, a, /, *, axis=None, correction=0.0, keepdims=False):
        """Variance of a floating array over ``axis``; real for complex input.

        The divisor is ``M - correction``; where it is <= 0 the result is NaN, as the
        standard asks.
        """
        m = self.m
        n = _count(a.shape, axis)
        with self.quiet():
            mu = self.sum(a, axis=axis, keepdims=True)
            m.true_divide(mu, n, out=mu)
            d = m.subtract(a, mu)
            if d.__class__ is not self.ndarray:  # a scalar, from a 0-d a
                d = m.asarray(d)
            if d.dtype.kind == "c":
                re = d.real
                im = d.imag
                sq = m.multiply(re, re)
                if sq.__class__ is not self.ndarray:
                    sq = m.asarray(sq)
                sq += m.multiply(im, im)
            else:
                sq = m.multiply(d, d, out=d)
            s = self.sum(sq, axis=axis, keepdims=keepdims)
            dof = n - correction
            if dof > 0:
                m.true_divide(s, dof, out=s)
            else:
                s.fill(math.nan)
        return s

    def std(self, a, /, *, axis=None, correction=0.0, keepdims=False):
        """Standard deviation: the square root of :meth:`var`."""
        s = self.var(a, axis=axis, correction=correction, keepdims=keepdims)
        return self.m.sqrt(s, out=s)

    def cumulative_sum(self, a, /, *, axis=0, dtype=None, include_initial=False):
        """Cumulative sum along the int ``axis``; a 0-d ``a`` counts as one element."""
        if a.ndim == 0:
            a = a.reshape(1)
        return self._cumulative(a.cumsum, 0, axis, dtype, include_initial)

    def cumulative_prod(self, a, /, *, axis=0, dtype=None, include_initial=False):
        """Cumulative product along the int ``axis``; a 0-d ``a`` counts as one element."""
        if a.ndim == 0:
            a = a.reshape(1)
        return self._cumulative(a.cumprod, 1, axis, dtype, include_initial)

    def _cumulative(self, accumulate, initial, axis, dtype, include_initial):
        # ``accumulate``: the buffer's own method (the module's function wraps it).
        m = self.m
        with self.quiet():  # overflow -> inf, inf - inf -> nan, as add/multiply do
            r = accumulate(axis=axis, dtype=None if dtype is None else dtype._np)
        if include_initial:
            shape = list(r.shape)
            shape[axis] = 1
            first = self.full(tuple(shape), initial, dtype=FROM_NUMPY[r.dtype])
            r = m.concatenate((first, r), axis=axis)
        return r


def _count(shape: tuple, axis) -> int:
    """The number of elements each reduction over ``axis`` combines."""
    if axis is None:
        return math.prod(shape)
    return math.prod(shape[ax] for ax in axis)
