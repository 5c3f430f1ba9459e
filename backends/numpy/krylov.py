"""gmres's vector operations on ndarrays: the op ``krylov_vectors`` of the NumPy backend.

``krylov_vectors(b, A, M, blas)`` implements the contract of
:mod:`tessera_array.sparse.linalg._vectors` for the four floating dtypes: gmres's loop
then runs on the ndarrays themselves. On the host there is no launch to save; what this
saves is the front end. A modified Gram-Schmidt step of the generic loop is a row of the
basis (an Array getitem), a dot (a new Array), its host read, an axpy (through a closure)
and a settle, each about 1 us of front-end cost on a 2-core EPYC, more than the
4096-long dot itself. Here each is the backend's own routine on the ndarrays:

- ``A v`` (and ``M v``): the operand's ``apply``, which for a stored matrix is the
  registered ``spmv`` / ``matvec`` of the routed variant called on the ndarrays (a CSR
  stencil's runs where the solve's products pay for them, ``expect``: the same bits),
  and for any other operator its matvec on the ndarray wrapped as a tessera Array;
- dots and norms: the registered ``vecdot`` (NumPy's BLAS dot, the pool's for long
  vectors), as ``ndarray.dot`` below the pool's length (the same value, bit for bit,
  without a 0-d array: :func:`.cg._real_dot`); a complex norm over contiguous copies of
  the real and imaginary parts, as the namespace's ``real`` / ``imag`` make them;
- ``axpy`` (NumPy's two-step rounding) and ``vecmat``: the registered kernels;
- ``mgs`` (real float32/float64 vectors shorter than the pool's dots): a column's whole
  modified Gram-Schmidt in one C call (``_krylov_c.c``: the same BLAS dots and updates),
  where cg's dense loop's first solve found those calls equal NumPy's (:func:`.cg._dense_loop`).

So the iterates are the generic loop's bit for bit (and, as its are, SciPy's). Both
``products`` settings are the host BLAS's order here, so ``blas`` is always met.
"""

from __future__ import annotations

import numpy as np

from tessera_array import _dtypes

from . import matvec as _mv
from . import sparse as _sp
from ._namespace import vecdot as _vecdot
from .cg import _dense_loop, _norm_for, _real_dot

__all__ = ["HostVectors", "krylov_vectors", "register"]

_FLOATING = frozenset(np.dtype(d._np) for d in _dtypes.FLOATING)


def _same(v):
    return v


def _as_is(*values):
    return values


class _Rows:
    """The basis as the rows of one (m, n) ndarray."""

    __slots__ = ("V",)

    def __init__(self, m, n, dtype):
        self.V = np.empty((m, n), dtype=dtype)

    def set(self, k, v):
        self.V[k] = v

    def row(self, k):
        return self.V[k]

    def first(self, k):
        return self.V[:k]


class HostVectors:
    """gmres's vector operations on ndarrays of ``b``'s length and dtype (the module
    docstring; the contract: :class:`~tessera_array.sparse.linalg._vectors.KrylovVectors`)."""

    settle = staticmethod(_as_is)

    def __init__(self, b, A, M):
        n, dt = b.shape[0], b.dtype
        self.n, self.dtype = n, dt
        self._ops = (A, M)
        self.matvec = A.apply
        self.psolve = _same if M is None else M.apply
        cplx = dt.kind == "c"
        self.dot = _vecdot if cplx else _real_dot(n, dt)
        self.norm = _norm_for(n, dt)
        loop = _dense_loop(dt, n)
        if loop is not None:
            mod, (f64, i64, _, dot) = loop
            c_mgs = mod.mgs

            def mgs(V, w, count, owned):
                """The loop's modified Gram-Schmidt of ``w`` against rows ``0 .. count-1``
                (the contract's optional ``mgs``): ``(h, w)``."""
                if not owned:
                    w = w.copy()
                return c_mgs(f64, i64, dot, n, V.V, w, count), w

            self.mgs = mgs

    def expect(self, products: int) -> None:
        """The most products of A (and M) the solve may take: a CSR stencil's runs where
        that many pay for finding them (set before the loop's first product)."""
        A, M = self._ops
        self.matvec = _stencil_product(A, self.n, self.dtype, products) or self.matvec
        if M is not None:
            self.psolve = _stencil_product(M, self.n, self.dtype, products) or self.psolve

    @staticmethod
    def axpy(alpha, x, y, subtract=False):
        _mv.axpy(alpha, x, y, subtract)
        return y

    def basis(self, m):
        return _Rows(m, self.n, self.dtype)

    def vecmat(self, coef, V, k):
        return _mv.vecmat(np.asarray(coef, dtype=self.dtype), V.first(k))


def _stencil_product(op, n, dtype, products):
    """``f(v) -> op v`` (a new vector) from a CSR operand's stencil runs
    (:func:`.sparse.stencil`: csr_matvec's bits, the runs' rows without their column
    indices) where it is one and :func:`.sparse.stencil_pays` for ``products``; else
    None."""
    if op is None or op.kind != "csr" or op.arrays[0].dtype != dtype:
        return None
    data, indices, indptr = op.arrays
    if not _sp.stencil_pays(products, data.shape[0]):
        return None
    st = _sp.stencil(data, indices, indptr, (n, n))
    if st is None:
        return None
    into, empty = st.into, np.empty
    return lambda v: into(v, empty(n, dtype))


def krylov_vectors(b, A, M, blas) -> HostVectors | None:
    """The ``krylov_vectors`` launcher: :class:`HostVectors` for a 1-D contiguous ndarray
    ``b`` of a floating dtype; None (the generic loop) for anything else. ``blas`` is met
    either way: the dots here sum in the host BLAS's order."""
    if (not isinstance(b, np.ndarray) or b.ndim != 1 or not b.flags.c_contiguous
            or b.dtype not in _FLOATING):
        return None
    return HostVectors(b, A, M)


def register(registry, backend_name: str) -> None:
    registry.register("krylov_vectors", backend_name, _dtypes.FLOATING, krylov_vectors)
