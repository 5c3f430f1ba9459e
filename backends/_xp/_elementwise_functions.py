"""Native elementwise ops (the front end's :mod:`tessera_array._elementwise_functions`).

The array module's own functions are bound as they are wherever they meet the
standard (:data:`MODULE_FUNCTIONS`: ``ops.add`` is ``numpy.add`` itself on the NumPy
backend, no Python wrapper between). The methods below patch the IEEE special cases
where the module and the standard part ways: each computes with the module first,
then rewrites the special positions: ``mask_any`` says whether the mask may hold one
(on the host it counts; on a device it answers yes without a read, a sync) and the
``patch`` hook rewrites them (mask-compact on the host, where-based on a device).
Patches every
module needs (NumPy's ``floor_divide`` with infinities, complex ``expm1`` and
``tanh``) are always bound; the others are bound by a trait of the namespace when
the module misses that case (``remainder_by_inf_ok``, ``complex_specials_ok``,
``nextafter_equal_ok``).
"""

from __future__ import annotations

import math
from types import MappingProxyType

from ._dtypes import kind_of

__all__ = ["MODULE_FUNCTIONS", "ElementwiseFunctions"]

# The standard's names that the module's functions share.
_UNCHANGED = (
    "add", "bitwise_and", "bitwise_or", "bitwise_xor", "ceil", "copysign", "cos", "cosh",
    "divide", "equal", "exp", "floor", "greater", "greater_equal", "hypot", "isfinite",
    "isinf", "isnan", "less", "less_equal", "log", "log10", "log1p", "log2", "logaddexp",
    "logical_and", "logical_not", "logical_or", "logical_xor", "maximum", "minimum",
    "multiply", "negative", "nextafter", "not_equal", "positive", "reciprocal", "remainder",
    "sign", "signbit", "sin", "sinh", "sqrt", "square", "subtract", "tan", "trunc",
)

MODULE_FUNCTIONS = MappingProxyType({
    **{n: n for n in _UNCHANGED},
    "abs": "absolute",
    "acos": "arccos",
    "acosh": "arccosh",
    "asin": "arcsin",
    "asinh": "arcsinh",
    "atan": "arctan",
    "atan2": "arctan2",
    "atanh": "arctanh",
    "bitwise_invert": "invert",
    # Note: shift counts that are negative or not smaller than the bit width give
    # NumPy's results (0, or -1 for a right shift of a negative value).
    "bitwise_left_shift": "left_shift",
    "bitwise_right_shift": "right_shift",
    "conj": "conjugate",
    # Integer arrays to negative integer powers raise ValueError, as in NumPy; the
    # front end words the error.
    "pow": "power",
})
"""The standard's name -> the module's function, bound as is unless the namespace
class defines that name (a patch) or a trait binds a patch in its place."""


class ElementwiseFunctions:
    """The ``elementwise`` chapter of the ops contract (a mixin of ``Namespace``)."""

    # ---- functions the module has in another shape -------------------------------

    def real(self, a, /):
        """The real part, as a new array (NumPy returns a view, or ``a`` itself)."""
        return self.m.array(a.real, copy=True)

    def imag(self, a, /):
        """The imaginary part, as a new writeable array."""
        return self.m.array(a.imag, copy=True)

    def round(self, a, decimals=0, /):
        """Round half to even (NumPy's rule, the standard's too)."""
        if decimals >= 0 and a.dtype.kind in "biu":
            return a.copy()
        return self.m.asarray(self.m.round(a, decimals))

    def clip(self, a, lo, hi, /):
        """Clamp ``a`` to ``[lo, hi]``; NaN in ``a`` or in a bound gives NaN.

        The front end passes each bound as None, a Python scalar that fits ``a``'s
        dtype, or a buffer of ``a``'s dtype, so the result keeps ``a``'s dtype.
        """
        if lo is None and hi is None:
            return a.copy()
        r = self.m.asarray(self.m.clip(a, lo, hi))
        if r.dtype != a.dtype:
            # Note: ml_dtypes' bfloat16 clip answers in float32; the cast back gives
            # what clipping to the bounds rounded to a's dtype gives.
            r = r.astype(a.dtype)
        return r

    # ---- special-case patches every module needs ---------------------------------

    def floor_divide(self, a, b, /):
        """``floor(a / b)`` for floats, including its IEEE special cases.

        NumPy (and CuPy after it) pairs ``//`` with ``%`` as Python does, which gives
        ``inf // 2 -> nan`` and ``-1 // inf -> -1``; the standard asks for
        ``floor(a / b)`` there (``inf`` and ``-0``). Only positions where an operand
        is infinite are patched.
        """
        m = self.m
        r = m.floor_divide(a, b)
        if kind_of(r.dtype) != "f":
            return r
        inf_a, inf_b = m.isinf(a), m.isinf(b)
        if not (self.mask_any(inf_a) or self.mask_any(inf_b)):
            return r
        return self.patch(r, inf_a | inf_b, self._floor_of_quotient, a, b)

    def _floor_of_quotient(self, a, b):
        return self.m.floor(self.m.divide(a, b))

    def expm1(self, a, /):
        """``exp(a) - 1``; complex non-finite and zero inputs follow the standard.

        For complex ``z = x + iy`` the patched positions use
        ``exp(x)*cos(y) - 1 + i*exp(x)*sin(y)`` with the standard's values where that
        formula meets ``inf * 0`` or ``inf * nan``.
        """
        m = self.m
        r = m.expm1(a)
        if a.dtype.kind != "c":
            return r
        mask = ~m.isfinite(a)
        mask |= a == 0
        if not self.mask_any(mask):
            return r
        return self.patch(r, mask, self._expm1_specials, a)

    def _expm1_specials(self, z):
        m = self.m
        x, y = z.real, z.imag
        e = m.exp(x)
        re = e * m.cos(y) - 1
        im = m.where(y == 0, y, e * m.sin(y))
        # Infinite x with a non-finite y: exp(+inf) -> inf + nan j, exp(-inf) -> -1 + 0j.
        bad_y = ~m.isfinite(y)
        pos = bad_y & (x == math.inf)
        neg = bad_y & (x == -math.inf)
        re = m.where(pos, math.inf, m.where(neg, -1.0, re))
        im = m.where(pos, math.nan, m.where(neg, 0.0, im))
        return self._complex(re, im, z.dtype)

    def tanh(self, a, /):
        """Hyperbolic tangent; complex ``tanh(+-inf + iy)`` is ``+-1 + 0j`` with y's sign.

        NumPy follows C99 here (``1 + i*0*sin(2y)``, so ``tanh(inf + 2j) -> 1 - 0j``);
        the standard asks for an imaginary zero with the sign of ``y``. Where the
        module misses them (``complex_specials_ok`` False), ``tanh(+-0 + inf j)`` and
        ``tanh(+-0 + nan j)`` are patched too (``+-0 + nan j``).
        """
        m = self.m
        r = m.tanh(a)
        if a.dtype.kind != "c":
            return r
        x = a.real
        mask = m.isinf(x)
        if not self.complex_specials_ok:
            mask |= (x == 0) & ~m.isfinite(a.imag)
        if not self.mask_any(mask):
            return r
        return self.patch(r, mask, self._tanh_specials, a)

    def _tanh_specials(self, z):
        m = self.m
        x, y = z.real, z.imag
        inf_x = m.isinf(x)
        re = m.where(inf_x, m.sign(x), x)
        im = m.where(inf_x, m.copysign(0.0, y), math.nan)
        return self._complex(re, im, z.dtype)

    def _complex(self, re, im, dtype):
        out = self.m.empty(re.shape, dtype=dtype)
        out.real[...] = re
        out.imag[...] = im
        return out

    # ---- patches bound by a trait ------------------------------------------------

    def remainder_by_inf(self, a, b, /):
        """``remainder`` with a finite ``a`` by an infinite ``b`` as the standard says
        (Python's rule: ``a`` when their signs agree, else ``b``; a zero ``a`` gives a
        zero with ``b``'s sign). Bound when ``remainder_by_inf_ok`` is False."""
        m = self.m
        r = m.remainder(a, b)
        if kind_of(r.dtype) != "f":
            return r
        mask = m.isfinite(a) & m.isinf(b)
        if not self.mask_any(mask):
            return r
        return self.patch(r, mask, self._remainder_by_inf_values, a, b)

    def _remainder_by_inf_values(self, a, b):
        m = self.m
        same = m.signbit(a) == m.signbit(b)
        return m.where(m.asarray(a == 0), m.copysign(0.0, b), m.where(same, a, b))

    def acosh_specials(self, a, /):
        """``acosh`` with ``acosh(+-0 + nan j) = nan + pi/2 j`` (the standard's case for
        +0, and C99's for both zeros, which the module misses). Bound when
        ``complex_specials_ok`` is False."""
        m = self.m
        r = m.arccosh(a)
        if a.dtype.kind != "c":
            return r
        mask = (a.real == 0) & m.isnan(a.imag)
        if not self.mask_any(mask):
            return r
        return self.patch(r, mask, self._nan_plus_half_pi_j, a)

    def _nan_plus_half_pi_j(self, z):
        m = self.m
        return self._complex(m.full(z.shape, math.nan, dtype=z.real.dtype),
                             m.full(z.shape, math.pi / 2, dtype=z.real.dtype), z.dtype)

    def log_specials(self, a, /):
        """``log`` with ``log(nan +- inf j) = log(+-inf + nan j) = +inf + nan j`` (the
        standard's cases the module misses). Bound when ``complex_specials_ok`` is False."""
        return self._log_like(self.m.log, a)

    def log1p_specials(self, a, /):
        """``log1p`` with the same two cases as :meth:`log_specials`. Bound when
        ``complex_specials_ok`` is False."""
        return self._log_like(self.m.log1p, a)

    def _log_like(self, f, a):
        m = self.m
        r = f(a)
        if a.dtype.kind != "c":
            return r
        re, im = a.real, a.imag
        mask = (m.isnan(re) & m.isinf(im)) | (m.isinf(re) & m.isnan(im))
        if not self.mask_any(mask):
            return r
        return self.patch(r, mask, self._inf_plus_nan_j, a)

    def _inf_plus_nan_j(self, z):
        m = self.m
        return self._complex(m.full(z.shape, math.inf, dtype=z.real.dtype),
                             m.full(z.shape, math.nan, dtype=z.real.dtype), z.dtype)

    def nextafter_equal(self, a, b, /):
        """``nextafter`` with ``x2`` returned where ``x1 == x2`` (``nextafter(+0, -0)``
        is ``-0``). Bound when ``nextafter_equal_ok`` is False."""
        m = self.m
        r = m.nextafter(a, b)
        mask = a == b
        if not self.mask_any(mask):
            return r
        return self.patch(r, mask, self._second, a, b)

    @staticmethod
    def _second(a, b):
        return b
