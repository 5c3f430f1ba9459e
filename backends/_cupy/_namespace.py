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
=================================================  =========================================

CuPy reports no floating-point flags (``quiet`` is the null context) and has no
``ufunc.reduce`` beyond add and multiply (the shared reductions use ``cupy.max``...).
"""

from __future__ import annotations

from tessera_array.backends._xp import Namespace

__all__ = ["CupyNamespace"]


class CupyNamespace(Namespace):
    """The standard's namespace over ``cupy.ndarray`` buffers."""

    host_reads_cheap = False
    index_arrays_checked = False
    scatter_last_wins = False
    stores_negative_zero = False
    remainder_by_inf_ok = False
    complex_specials_ok = False
    nextafter_equal_ok = False
    cholesky_has_upper = False
    linalg_library = "cuSOLVER"

    def __init__(self, cupy):
        super().__init__(cupy)
        import cupyx

        self._errstate = cupyx.errstate

    def linalg_call(self, func: str, what: str, f, *args, **kwargs):
        # sync: cuSOLVER's info is read back to raise on a failed factorization.
        with self._errstate(linalg="raise"):
            return super().linalg_call(func, what, f, *args, **kwargs)
