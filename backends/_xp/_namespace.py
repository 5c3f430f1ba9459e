"""The class :class:`Namespace`: the chapters joined, with the hooks and traits that
say how one array module differs from another."""

from __future__ import annotations

import contextlib

from tessera_array import _dtypes as _front_dtypes
from tessera_array._backend_api import OPS, OPTIONAL_OPS
from tessera_array._errors import LinAlgError

from ._core import CoreFunctions
from ._creation_functions import CreationFunctions
from ._dtypes import bfloat16
from ._elementwise_functions import MODULE_FUNCTIONS, ElementwiseFunctions
from ._linalg import LinalgFunctions
from ._linear_algebra_functions import LinearAlgebraFunctions
from ._manipulation_functions import ManipulationFunctions
from ._searching_functions import SearchingFunctions
from ._set_functions import SetFunctions
from ._sorting_functions import SortingFunctions
from ._statistical_functions import StatisticalFunctions
from ._utility_functions import UtilityFunctions

__all__ = ["Namespace"]


class Namespace(
    CoreFunctions,
    CreationFunctions,
    ElementwiseFunctions,
    LinearAlgebraFunctions,
    LinalgFunctions,
    ManipulationFunctions,
    StatisticalFunctions,
    SearchingFunctions,
    SetFunctions,
    SortingFunctions,
    UtilityFunctions,
):
    """The standard's namespace over the native buffers of the array module ``m``.

    Every name of :data:`tessera_array._backend_api.OPS` is an attribute: the module's
    own function where it meets the standard (``MODULE_FUNCTIONS``), a method
    otherwise. A backend subclasses this class and sets what its module needs; the
    defaults are NumPy's API and semantics (the other modules mirror them), except
    ``host_reads_cheap``, whose default is the choice that is right everywhere.

    Traits (class attributes), read when the namespace is built unless noted:

    ``host_reads_cheap`` (False)
        True where reading a buffer's value on the host costs nothing (NumPy): a patch
        counts its mask (``mask_any``), is skipped when it is empty, and rewrites only
        the masked positions (mask-compact). False (a device, CuPy): ``mask_any``
        answers yes without a read (a read is a sync) and patches are where-based.
    ``basic_views`` (True; read by the front end)
        The buffer's own ``a[i, ...]`` and ``a[s]`` (an in-bounds int, a slice, on an
        array of 1+ dims) are the standard's results as native views, so
        ``Array.__getitem__`` takes them without a call of ``getitem`` (NumPy's ``a[i]``
        alone would be a scalar; ``a[i, ...]`` is the 0-d view, as CuPy's ``a[i]``).
    ``index_arrays_checked`` (True)
        The module raises IndexError for an out-of-bounds index array. CuPy: False (it
        wraps silently); ``getitem``/``setitem``/``take``/``take_along_axis`` then call
        :meth:`check_index_bounds` first.
    ``scatter_last_wins`` (True)
        ``a[idx] = v`` with a position repeated in ``idx`` stores the last value. CuPy:
        False (undefined); ``setitem`` then makes every duplicate carry the last value
        (:meth:`~CoreFunctions.last_wins`).
    ``stores_negative_zero`` (True)
        ``fill`` and ``a[...] = -0.0`` keep the sign. CuPy: False (a memset stores
        +0.0); ``full``, ``copy_into`` and ``setitem`` then store a negative zero
        through a 0-d buffer (:meth:`~CoreFunctions.exact_scalar`).
    ``remainder_by_inf_ok``, ``complex_specials_ok``, ``nextafter_equal_ok`` (True)
        The module gets ``remainder(5, inf) = 5``; complex ``tanh(+0+inf j)``,
        ``acosh(+0+nan j)``, ``log``/``log1p`` of ``nan+inf j`` and ``inf+nan j``;
        ``nextafter(+0, -0) = -0``. CuPy:
        False for the last two (the shared patches are bound in their place); its
        ``remainder`` is replaced by a kernel of NumPy's rule, which gets the first.
    ``isin_takes_scalars`` (True)
        ``m.isin`` takes a Python scalar on either side. CuPy: False (the scalar is
        made a 0-d buffer of the other operand's dtype first).
    ``probe_bfloat16_loops`` (False)
        Probe every module function of :data:`MODULE_FUNCTIONS` with a bfloat16 buffer
        once, when the namespace is built, and bind :func:`via_float32` in place of
        those that have no bfloat16 loop (they compute in float32 and round back).
        NumPy: True (ml_dtypes' ufunc coverage varies by version; a probe costs a few
        microseconds). CuPy: False (a probe compiles a kernel; CuPy 14's own bfloat16
        support answers).
    ``cholesky_has_upper`` (True)
        ``m.linalg.cholesky`` takes ``upper=``. CuPy: False (``U = L^H`` is used).
    ``linalg_library`` ("LAPACK")
        The name :meth:`linalg_call` gives the module's solver in its messages.

    Hooks (methods to override):

    ``quiet`` (a class attribute: a callable, not bound)
        Returns a context in which the module reports no floating-point flags. NumPy:
        ``errstate(all="ignore")``; CuPy reports none (the default, a null context).
    ``quiet_context`` (None)
        For the front end's C short paths, which call the ops from no Python frame of
        tessera's: None where the ops called on buffers issue no floating-point warning
        (CuPy); a ``(ContextVar, value)`` pair set around each call to silence them
        (NumPy: its error-state variable at ``errstate(all="ignore")``); False where
        they warn and cannot be silenced so (those paths then step aside).
    :meth:`patch`
        Rewrites the special positions of a result; follows ``host_reads_cheap``.
    :meth:`check_index_bounds`
        IndexError for an out-of-bounds index array (a sync on a device). Read only
        where ``index_arrays_checked`` is False.
    :meth:`linalg_call`
        The error policy of every factorization: calls the module's routine and turns
        its error into :class:`tessera_array.LinAlgError`. CuPy: wrap the call in
        ``cupyx.errstate(linalg="raise")`` (else a singular ``inv`` gives nan/inf).
    ``sum``, ``prod``, ``max``, ``min``, ``all``, ``any`` (the ops)
        The reductions everything else reduces through. Default: ``m.sum``,
        ``m.max``, ``m.all``, ... (CuPy: ``ufunc.reduce`` exists only for add and
        multiply). NumPy: ``ufunc.reduce(..., out=...)``, faster and never a scalar.
    ``vecdot`` (the op)
        Default: ``matmul`` of (1, k) by (k, 1) (CuPy has no ``vecdot``). NumPy: its
        BLAS dot and ``numpy.vecdot``.

    Written in what both modules have, so nothing to override: ``count_nonzero`` (no
    ``keepdims``), ``unstack``, ``vector_norm``, ``matrix_norm``, ``svdvals``,
    ``cumulative_sum``/``cumulative_prod``. Not here: the FFT, a kernel family
    (``fft_c2c``...); a CuPy launcher must itself handle ``s`` with non-ascending
    ``axes`` (cupy#8248).
    """

    host_reads_cheap = False
    basic_views = True
    index_arrays_checked = True
    scatter_last_wins = True
    stores_negative_zero = True
    remainder_by_inf_ok = True
    complex_specials_ok = True
    nextafter_equal_ok = True
    isin_takes_scalars = True
    probe_bfloat16_loops = False
    cholesky_has_upper = True
    linalg_library = "LAPACK"
    quiet = contextlib.nullcontext
    quiet_context = None

    def __init__(self, m):
        cls = type(self)
        # The traits as instance attributes: some are read in op bodies, where reading
        # an instance attribute is the cheaper lookup.
        for name in _TRAITS:
            setattr(self, name, getattr(cls, name))
        self.m = m
        self.ndarray = m.ndarray
        # Whether a patch's mask may hold a True: on the host, count it (free); on a
        # device, yes without reading it (a read is a sync), and the patch runs.
        self.mask_any = m.count_nonzero if self.host_reads_cheap else _maybe_any
        # CuPy raises NumPy's LinAlgError and does not re-export it.
        self.linalg_error = getattr(m.linalg, "LinAlgError", None) or _np_linalg_error()
        self._inplace_ufuncs = {
            "add": m.add, "subtract": m.subtract, "multiply": m.multiply, "divide": m.divide,
        }
        for name, attr in MODULE_FUNCTIONS.items():
            if not hasattr(cls, name):
                setattr(self, name, getattr(m, attr))
        # Where the module misses a case, the trait binds the shared fix in its place.
        if not self.remainder_by_inf_ok:
            self.remainder = self.remainder_by_inf
        if not self.complex_specials_ok:
            self.acosh = self.acosh_specials
            self.log = self.log_specials
            self.log1p = self.log1p_specials
        if not self.nextafter_equal_ok:
            self.nextafter = self.nextafter_equal
        if not self.index_arrays_checked:
            self.getitem = self.getitem_checked
        if not (self.index_arrays_checked and self.scatter_last_wins
                and self.stores_negative_zero):
            self.setitem = self.setitem_checked
        if self.probe_bfloat16_loops:
            # bfloat16 (ml_dtypes) loads on its first use; the probe waits for it.
            _front_dtypes.when_loaded(_front_dtypes.bfloat16, self._patch_bfloat16_gaps)

    def _patch_bfloat16_gaps(self) -> None:
        for name in self.bfloat16_gaps():
            setattr(self, name, via_float32(getattr(self, name), self.m))

    def bfloat16_gaps(self) -> list:
        """The names of :data:`MODULE_FUNCTIONS` bound to the module's function that
        refuse bfloat16 operands (no loop for them), bitwise functions aside."""
        m = self.m
        sample = m.asarray([0.5, 1.5], dtype=bfloat16())
        gaps = []
        for name, attr in MODULE_FUNCTIONS.items():
            fn = getattr(self, name)
            if fn is not getattr(m, attr) or name.startswith("bitwise_"):
                continue  # a patch of the namespace's own, or integer-only
            nin = getattr(fn, "nin", 1)
            try:
                with self.quiet():
                    fn(*(sample,) * nin)
            except TypeError:
                gaps.append(name)
        return gaps

    def members(self) -> dict:
        """``{name: callable}`` for every name of the ops contract this namespace has."""
        names = [*OPS, *(n for n in OPTIONAL_OPS if hasattr(self, n))]
        return {name: getattr(self, name) for name in names}

    # ---- hooks ---------------------------------------------------------------------

    def patch(self, r, mask, fix, *args):
        """``r`` with ``fix(*args)`` at the positions where ``mask`` is True.

        ``args`` are the op's operands (buffers broadcasting to ``r``'s shape, or
        Python scalars); ``fix`` computes elementwise. Mask-compact where
        ``host_reads_cheap`` (``fix`` sees only the masked elements), else where-based
        (``fix`` sees every element; no host read). Ops call it only where
        :attr:`mask_any` answers True.
        """
        m = self.m
        if not self.host_reads_cheap:
            return m.asarray(m.where(mask, fix(*args), r)).astype(r.dtype, copy=False)
        r = m.array(r, copy=True)  # writeable, and a buffer where the module gave a scalar
        shape = r.shape
        mask = m.broadcast_to(mask, shape)
        picked = [_pick(m, x, shape, mask) if x.__class__ is self.ndarray else x for x in args]
        r[mask] = fix(*picked)
        return r

    def check_index_bounds(self, indices, n: int, axis: int) -> None:
        """IndexError unless every value of the integer buffer ``indices`` is in
        ``[-n, n)`` (``n``: the size of the indexed ``axis``)."""
        if indices.size == 0:
            return
        # sync: the bounds are read on the host, once for both.
        lo, hi = self.m.stack((indices.min(), indices.max())).tolist()
        bad = hi if hi >= n else lo if lo < -n else None
        if bad is not None:
            raise IndexError(f"index {bad} is out of bounds for axis {axis} with size {n}")

    def linalg_call(self, func: str, what: str, f, *args, **kwargs):
        """``f(*args, **kwargs)``; the module's linalg error becomes tessera's
        LinAlgError, naming ``linalg.<func>``, ``what`` failed and the operands."""
        try:
            return f(*args, **kwargs)
        except self.linalg_error as err:
            raise LinAlgError(
                f"linalg.{func}: {what} ({self.linalg_library}: {err}). "
                f"Received: {_received(args)}"
            ) from err


_TRAITS = (
    "host_reads_cheap", "basic_views", "index_arrays_checked", "scatter_last_wins", "stores_negative_zero",
    "remainder_by_inf_ok", "complex_specials_ok", "nextafter_equal_ok", "isin_takes_scalars",
    "probe_bfloat16_loops", "cholesky_has_upper", "linalg_library",
)


def _maybe_any(mask) -> bool:
    return True


def via_float32(fn, m):
    """``fn`` for a module function without a bfloat16 loop: bfloat16 operands are
    computed in float32 and a float32 result is rounded back to bfloat16.

    Note: one rounding of the float32 result, as PyTorch computes bfloat16 math
    functions on the CPU; other dtypes call ``fn`` unchanged.
    """
    f32 = m.dtype(m.float32)
    bf16 = bfloat16()

    def op(*args, **kwargs):
        if not any(getattr(a, "dtype", None) == bf16 for a in args):
            return fn(*args, **kwargs)
        wide = [a.astype(f32) if getattr(a, "dtype", None) == bf16 else a for a in args]
        r = fn(*wide, **kwargs)
        return r.astype(bf16) if getattr(r, "dtype", None) == f32 else r

    op.__name__ = op.__qualname__ = getattr(fn, "__name__", "op")
    op.__wrapped__ = fn
    return op


def _np_linalg_error():
    import numpy

    return numpy.linalg.LinAlgError


def _pick(m, x, shape, mask):
    return (x if x.shape == shape else m.broadcast_to(x, shape))[mask]


def _received(args) -> str:
    arrays = [a for a in args if hasattr(a, "shape")]
    if len(arrays) == 1:
        return f"x.shape={arrays[0].shape}, x.dtype={arrays[0].dtype}"
    return ", ".join(f"x{i}.shape={a.shape}" for i, a in enumerate(arrays, 1))
