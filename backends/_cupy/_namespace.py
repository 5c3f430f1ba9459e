"""The CuPy backend's namespace: :class:`~tessera_array.backends._xp.Namespace` over
CuPy, with CuPy's deviations from the standard set as traits and hooks.

Measured on CuPy 14.2 (H200), and what each trait below does about it:

=================================================  =========================================
CuPy                                               here
=================================================  =========================================
reading a value on the host is a device sync       where-based patches (no mask read)
out-of-bounds index arrays wrap silently           bounds checked first: IndexError
duplicate scatter indices store an undefined one   the last value stored, as NumPy does
``fill``/``a[...] = -0.0`` store +0.0              a negative zero through a 0-d buffer
``remainder(5, inf)`` is nan                       the shared remainder patch
complex ``tanh``/``acosh``/``log`` specials        the shared special-value patches
``nextafter(+0, -0)`` is +0                        the shared nextafter patch
``cholesky`` has no ``upper``                      ``U = L^H``
a singular ``inv`` gives nan/inf, no error         ``cupyx.errstate(linalg="raise")``
``solve`` broadcasts no batch dimensions           operands broadcast first
``remainder`` differs from NumPy's at extremes     NumPy's ``fmod``-based rule, a kernel
``logical_*`` refuse complex operands              ``x != 0`` first, as NumPy does
complex ``z / 0`` is nan+nanj (NumPy: inf)         NumPy's rule where the divisor is 0
``clip`` with a NaN bound ignores it               ``minimum(maximum(x, lo), hi)``
integer ``pow`` to a negative power: garbage       ValueError (a sync reads the sign)
float to unsigned saturates (-50.0 -> 0)           through int64, as NumPy on x86-64 (206)
``linspace`` one ulp off; complex ones raise       NumPy's formula, ``arange * step``
a Python float stored in float32 warns (NumPy's)   ``quiet`` is ``numpy.errstate``
=================================================  =========================================

CuPy's kernels report no floating-point flags; its host-side conversion of Python scalars
goes through NumPy, which does (``quiet`` silences NumPy). It has no ``ufunc.reduce``
beyond add and multiply (the shared reductions use ``cupy.max``...).
"""

from __future__ import annotations

import functools

import numpy as np
from tessera_array.backends._xp import Namespace

__all__ = ["CupyNamespace"]


class CupyNamespace(Namespace):
    """The standard's namespace over ``cupy.ndarray`` buffers."""

    host_reads_cheap = False
    index_arrays_checked = False
    scatter_last_wins = False
    stores_negative_zero = False
    remainder_by_inf_ok = True  # remainder below is NumPy's rule (inf included)
    complex_specials_ok = False
    nextafter_equal_ok = False
    isin_takes_scalars = False
    cholesky_has_upper = False
    linalg_library = "cuSOLVER"
    quiet = functools.partial(np.errstate, all="ignore")

    def __init__(self, cupy):
        super().__init__(cupy)
        import cupyx

        self._errstate = cupyx.errstate
        self._remainder_kernel = cupy.ElementwiseKernel(
            "T x, T y", "T r",
            # NumPy's npy_divmod: fmod, then the divisor's sign; a zero takes it too.
            """
            T mod = fmod(x, y);
            if (y == (T)0) { r = mod; }
            else if (mod != (T)0) { r = ((y < (T)0) != (mod < (T)0)) ? mod + y : mod; }
            else { r = copysign((T)0, y); }
            """,
            "tessera_remainder")

    def linalg_call(self, func: str, what: str, f, *args, **kwargs):
        # sync: cuSOLVER's info is read back to raise on a failed factorization.
        with self._errstate(linalg="raise"):
            return super().linalg_call(func, what, f, *args, **kwargs)

    # ---- CuPy's deviations from NumPy, fixed (the table above) -------------------------

    def astype(self, a, dtype, /, copy=True):
        dst = dtype._np
        if a.dtype.kind == "f" and dst.kind == "u":
            # Out of range the standard leaves the value undefined; NumPy on x86-64
            # converts through a signed integer (a negative value wraps), CUDA saturates.
            m = self.m
            wrapped = a.astype(np.int64).astype(dst)
            if dst.itemsize < 8:
                return wrapped
            return m.where(a < 0, wrapped, a.astype(dst))
        return super().astype(a, dtype, copy=copy)

    def linspace(self, start, stop, num, /, *, dtype, device=None, endpoint=True):
        # NumPy's formula in float64 (complex128), then cast: start + arange(num) * step,
        # two roundings, the last point exactly stop. (CuPy's fuses the multiply-add,
        # one ulp off NumPy's, and refuses complex bounds.)
        m = self.m
        div = num - 1 if endpoint else num
        delta = stop - start
        y = m.arange(num, dtype=np.float64)
        if div > 0:
            step = delta / div
            y = y / div * delta if step == 0 else y * step
        else:
            y = y * delta
        y = y + start
        if endpoint and num > 1:
            y[-1] = stop
        return y.astype(dtype._np, copy=False)

    def _truth(self, x):
        # NumPy's logical ops take complex operands as ``x != 0``; CuPy's refuse them.
        if x.__class__ is self.ndarray:
            return x != 0 if x.dtype.kind == "c" else x
        return x != 0 if x.__class__ is complex else x

    def logical_and(self, a, b, /):
        return self.m.logical_and(self._truth(a), self._truth(b))

    def logical_or(self, a, b, /):
        return self.m.logical_or(self._truth(a), self._truth(b))

    def logical_xor(self, a, b, /):
        return self.m.logical_xor(self._truth(a), self._truth(b))

    def logical_not(self, a, /):
        return self.m.logical_not(self._truth(a))

    def divide(self, a, b, /):
        m = self.m
        r = m.divide(a, b)
        if r.dtype.kind != "c":
            return r
        zero = b == 0
        if zero is False:
            return r
        # NumPy divides each part by |re b| where b is zero: inf where a's part is not 0.
        a = m.asarray(a, dtype=r.dtype) if a.__class__ is not self.ndarray else a
        b = m.asarray(b)
        re_b = m.abs(m.real(b)).astype(r.real.dtype)
        fixed = m.empty(r.shape, dtype=r.dtype)
        fixed.real = m.real(a) / re_b  # part by part: inf * 1j would make a nan
        fixed.imag = m.imag(a) / re_b
        return m.where(m.asarray(zero), fixed, r)

    def remainder(self, a, b, /):
        m = self.m
        nd = self.ndarray
        if a.__class__ is nd and b.__class__ is nd:
            dt = m.result_type(a, b)
        else:
            dt = (a if a.__class__ is nd else b).dtype
        if dt.kind != "f":
            return m.remainder(a, b)
        return self._remainder_kernel(m.asarray(a, dtype=dt), m.asarray(b, dtype=dt))

    def clip(self, a, lo, hi, /):
        if a.dtype.kind != "f" or (lo is None and hi is None):
            return super().clip(a, lo, hi)
        # NaN in a bound gives NaN, as NumPy's clip (CuPy's ignores such a bound).
        m = self.m
        r = a if lo is None else m.maximum(a, lo)
        r = r if hi is None else m.minimum(r, hi)
        return r.astype(a.dtype, copy=False)

    def pow(self, a, b, /):
        m = self.m
        nd = self.ndarray
        ints = [x.dtype.kind in "iu" if x.__class__ is nd else x.__class__ is int
                for x in (a, b)]
        if all(ints):
            # sync: NumPy refuses integers to negative integer powers; the sign is read.
            negative = (b < 0) if b.__class__ is int else (
                b.dtype.kind == "i" and b.size and bool((b < 0).any()))
            if negative:
                raise ValueError("Integers to negative integer powers are not allowed.")
        return m.power(a, b)

    def solve(self, a, b, /):
        if b.ndim > 1 and a.shape[:-2] != b.shape[:-2]:
            # cupy.linalg.solve takes one batch shape; NumPy broadcasts them.
            m = self.m
            batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
            a = m.ascontiguousarray(m.broadcast_to(a, batch + a.shape[-2:]))
            b = m.ascontiguousarray(m.broadcast_to(b, batch + b.shape[-2:]))
        return super().solve(a, b)
