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
``asarray(-0.0)`` stores +0.0 (a fill)             host bytes copied (``from_host``)
``remainder(5, inf)`` is nan                       NumPy's ``fmod``-based rule, a kernel
complex ``tanh``/``acosh``/``log``/``log1p`` cases  the shared special-value patches
``nextafter(+0, -0)`` is +0                        the shared nextafter patch
``cholesky`` has no ``upper``                      ``U = L^H``
a singular ``inv`` gives nan/inf, no error         ``cupyx.errstate(linalg="raise")``
``solve`` broadcasts no batch dimensions           operands broadcast first
``remainder`` differs from NumPy's at extremes     (the same kernel)
``logical_*`` refuse complex operands              ``x != 0`` first, as NumPy does
complex ``z/0``, ``z/inf``: nan (NumPy: inf, 0)    NumPy's division, a kernel
``tensordot`` refuses 0-d operands                 the outer product
``clip`` with a NaN bound ignores it               ``minimum(maximum(x, lo), hi)``
integer ``pow`` to a negative power: garbage       ValueError (a sync reads the sign)
float to unsigned saturates (-50.0 -> 0)           through int64, as NumPy on x86-64 (206)
``linspace`` one ulp off; complex ones raise       NumPy's formula, ``arange * step``
a Python float stored in float32 warns (NumPy's)   ``quiet`` is ``numpy.errstate``
``sort``/``argsort`` refuse bfloat16 (thrust)      as float32 (exact, the same order)
``remainder``'s kernel fails to build for half     in float32, rounded back (NumPy's)
=================================================  =========================================

CuPy's kernels report no floating-point flags; its host-side conversion of Python scalars
goes through NumPy, which does (``quiet`` silences NumPy). It has no ``ufunc.reduce``
beyond add and multiply (the shared reductions use ``cupy.max``...).
"""

from __future__ import annotations

import functools

import numpy as np
from tessera_array.backends._xp import Namespace
from tessera_array.backends._xp._dtypes import is_bfloat16

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
        self._divide_kernel = cupy.ElementwiseKernel(
            "T a, T b", "T r",
            # NumPy's complex division (Smith's, a zero divisor by its parts), each product
            # and sum rounded on its own (no multiply-add contraction: --fmad=false).
            """
            typedef typename T::value_type R;
            const R ar = a.real(), ai = a.imag(), br = b.real(), bi = b.imag();
            const R abr = fabs(br), abi = fabs(bi);
            if (abr >= abi) {
                if (abr == (R)0 && abi == (R)0) {
                    r = T(ar / abr, ai / abr);
                } else {
                    const R rat = bi / br, scl = (R)1 / (br + bi * rat);
                    r = T((ar + ai * rat) * scl, (ai - ar * rat) * scl);
                }
            } else {
                const R rat = br / bi, scl = (R)1 / (bi + br * rat);
                r = T((ar * rat + ai) * scl, (ai * rat - ar) * scl);
            }
            """,
            "tessera_complex_divide", options=("--fmad=false",))
        self._inplace_ufuncs["divide"] = self._divide_into
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

    def _result_dtype(self, a, b):
        """The dtype of a binary op of buffers or weak Python scalars (the front end has
        checked the pairing): a Python complex with a real buffer makes it complex."""
        nd = self.ndarray
        if a.__class__ is nd and b.__class__ is nd:
            return self.m.result_type(a, b)
        dt = (a if a.__class__ is nd else b).dtype
        other = b if a.__class__ is nd else a
        if other.__class__ is complex and dt.kind != "c":
            return np.dtype(np.complex64 if dt == np.float32 else np.complex128)
        return dt

    def divide(self, a, b, /):
        m = self.m
        dt = self._result_dtype(a, b)
        if dt.kind != "c":
            return m.divide(a, b)
        # CuPy's complex division differs from NumPy's at zero and infinite divisors.
        return self._divide_kernel(m.asarray(a, dtype=dt), m.asarray(b, dtype=dt))

    def _divide_into(self, a, b, out):
        # ``a /= b`` (the front end calls it with b of a's dtype or a weak scalar).
        if a.dtype.kind != "c":
            return self.m.divide(a, b, out=out)
        return self._divide_kernel(a, self.m.asarray(b, dtype=a.dtype), out)

    def remainder(self, a, b, /):
        m = self.m
        dt = self._result_dtype(a, b)
        if dt.kind != "f":
            return m.remainder(a, b)
        if dt.itemsize == 2:
            # float16/bfloat16: in float32, rounded back once (NumPy computes its half
            # remainder so); the kernel's T arithmetic does not compile for CuPy's half.
            f32 = np.dtype(np.float32)
            r = self._remainder_kernel(m.asarray(a, dtype=f32), m.asarray(b, dtype=f32))
            return r.astype(dt)
        return self._remainder_kernel(m.asarray(a, dtype=dt), m.asarray(b, dtype=dt))

    def argsort(self, a, /, *, axis=-1, descending=False, stable=True):
        # CuPy's sort (thrust) has no bfloat16: float32 holds every bfloat16 exactly and
        # in the same order (NaNs and signed zeros included), so its order is bfloat16's.
        if is_bfloat16(a.dtype):
            a = a.astype(np.float32)
        return super().argsort(a, axis=axis, descending=descending, stable=stable)

    def sort(self, a, /, *, axis=-1, descending=False, stable=True):
        if is_bfloat16(a.dtype):  # (as argsort; the values round back exactly)
            r = super().sort(a.astype(np.float32), axis=axis, descending=descending,
                             stable=stable)
            return r.astype(a.dtype)
        return super().sort(a, axis=axis, descending=descending, stable=stable)

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

    def tensordot(self, a, b, axes, /):
        if not axes[0]:
            # Nothing contracted: the outer product (CuPy refuses 0-d operands here).
            m = self.m
            return m.multiply(a.reshape(a.shape + (1,) * b.ndim), b)
        return super().tensordot(a, b, axes)
