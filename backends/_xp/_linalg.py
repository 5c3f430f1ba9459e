"""Native ops of the ``linalg`` extension (the front end's :mod:`tessera_array.linalg`).

Operands arrive floating (the front end casts them), ``axis`` of ``cross`` as a
negative int, ``axis`` of ``vector_norm`` as None or a tuple of non-negative ints.
Every factorization goes through the namespace's ``linalg_call`` hook: the module's
failure (singular matrix, not positive definite, no convergence) becomes
:class:`tessera_array.LinAlgError`, chained to the module's error. The norms,
``pinv`` and ``matrix_rank`` are written here (a module without them, CuPy, gets
the same values): the two-norm rescales by ``max|x|`` only where the plain sum of
squares overflows.
"""

from __future__ import annotations

import math

import numpy as np

from ._dtypes import COMPLEX_OF, REAL_OF

__all__ = ["LinalgFunctions"]


class LinalgFunctions:
    """The ``linalg`` extension's part of the ``linear_algebra`` chapter (a mixin of
    ``Namespace``)."""

    # ---- factorizations and solvers ----------------------------------------------

    def cholesky(self, a, upper=False, /):
        """The lower (or upper) Cholesky factor of each matrix of the stack."""
        chol = self.m.linalg.cholesky
        what = "x (or a matrix of the stack) is not positive definite"
        if not upper:
            return self.linalg_call("cholesky", what, chol, a)
        if self.cholesky_has_upper:
            return self.linalg_call("cholesky", what, chol, a, upper=True)
        # U = L^H (the module reads the lower triangle of the Hermitian input).
        return self.m.conj(self.linalg_call("cholesky", what, chol, a).swapaxes(-1, -2))

    def det(self, a, /):
        """The determinant of each square matrix of the stack."""
        with self.quiet():
            r = self.linalg_call("det", "the factorization failed", self.m.linalg.det, a)
        return self.m.asarray(r)

    def slogdet(self, a, /):
        """``(sign, logabsdet)`` of each square matrix; ``logabsdet`` is real."""
        with self.quiet():
            sign, logabsdet = self.linalg_call(
                "slogdet", "the factorization failed", self.m.linalg.slogdet, a)
        return self.m.asarray(sign), self.m.asarray(logabsdet)

    def inv(self, a, /):
        """The inverse of each square matrix of the stack."""
        return self.linalg_call(
            "inv", "x (or a matrix of the stack) is singular", self.m.linalg.inv, a)

    def solve(self, a, b, /):
        """``X`` with ``a @ X == b``; a 1-D ``b`` is one right-hand side for every matrix."""
        return self.linalg_call(
            "solve", "x1 (or a matrix of the stack) is singular", self.m.linalg.solve, a, b)

    def eig(self, a, /):
        """Eigenvalues and right eigenvectors of general matrices, always complex."""
        w, v = self.linalg_call(
            "eig", "the eigenvalue iteration did not converge, or x has inf/nan entries",
            self.m.linalg.eig, a)
        ct = COMPLEX_OF[a.dtype]
        return w.astype(ct, copy=False), v.astype(ct, copy=False)

    def eigvals(self, a, /):
        """Eigenvalues of general matrices, always complex."""
        w = self.linalg_call(
            "eigvals", "the eigenvalue iteration did not converge, or x has inf/nan entries",
            self.m.linalg.eigvals, a)
        return w.astype(COMPLEX_OF[a.dtype], copy=False)

    def eigh(self, a, /):
        """Eigenvalues (real, ascending) and eigenvectors of Hermitian matrices (lower
        triangle read)."""
        w, v = self.linalg_call(
            "eigh", "the eigenvalue iteration did not converge", self.m.linalg.eigh, a)
        return w, v

    def eigvalsh(self, a, /):
        """Eigenvalues (real, ascending) of Hermitian matrices (lower triangle read)."""
        return self.linalg_call(
            "eigvalsh", "the eigenvalue iteration did not converge", self.m.linalg.eigvalsh, a)

    def qr(self, a, mode="reduced", /):
        """``(Q, R)`` of each matrix; ``mode`` is ``"reduced"`` or ``"complete"``."""
        q, r = self.linalg_call("qr", "the factorization failed", self.m.linalg.qr, a, mode=mode)
        return q, r

    def svd(self, a, full_matrices=True, /):
        """``(U, S, Vh)`` of each matrix, ``S`` real and descending."""
        u, s, vh = self.linalg_call("svd", "the SVD did not converge", self.m.linalg.svd, a,
                                    full_matrices=full_matrices)
        return u, s, vh

    def svdvals(self, a, /):
        """The singular values of each matrix, real and descending."""
        return self.linalg_call(
            "svdvals", "the SVD did not converge", self.m.linalg.svd, a, compute_uv=False)

    def pinv(self, a, rtol=None, /):
        """Moore-Penrose pseudo-inverse, ``V diag(1/s) U^H`` over singular values above
        the cutoff.

        ``rtol`` (a Python float or a buffer broadcast against the stack) times the
        largest singular value is the cutoff; ``None`` means ``max(M, N) * eps``.
        """
        m = self.m
        rows, cols = a.shape[-2:]
        rt = m.asarray(_default_rtol(a, rtol))
        if rows == 0 or cols == 0:
            stack = np.broadcast_shapes(a.shape[:-2], rt.shape)
            return m.zeros(stack + (cols, rows), dtype=a.dtype)
        u, s, vh = self.linalg_call(
            "pinv", "the SVD did not converge", m.linalg.svd, a, full_matrices=False)
        cutoff = rt[..., None] * self.max(s, axis=(s.ndim - 1,), keepdims=True)
        large = s > cutoff
        s_inv = m.where(large, 1 / m.where(large, s, 1), 0).astype(s.dtype, copy=False)
        v = vh.conj().swapaxes(-1, -2)
        uh = u.conj().swapaxes(-1, -2)
        return m.matmul(v * s_inv[..., None, :], uh)

    def matrix_rank(self, a, rtol=None, /):
        """The number of singular values above ``rtol * largest`` (int64)."""
        m = self.m
        s = self.svdvals(a)
        rt = m.asarray(_default_rtol(a, rtol))
        last = (s.ndim - 1,)
        tol = rt[..., None] * self._max_or(s, last, True, 0)
        return self.count_nonzero(s > tol, axis=last, keepdims=False)

    def matrix_power(self, a, n, /):
        """``a`` multiplied by itself ``n`` times (``n < 0``: of its inverse; ``0``:
        identity)."""
        with self.quiet():
            return self.linalg_call(
                "matrix_power",
                "x (or a matrix of the stack) is singular, so n < 0 is undefined",
                self.m.linalg.matrix_power, a, n)

    # ---- products and diagonals ----------------------------------------------------

    def outer(self, a, b, /):
        """The outer product of two 1-D arrays of one dtype."""
        return self.m.outer(a, b)

    def cross(self, a, b, axis=-1, /):
        """3-vector cross products along the negative ``axis``, other axes broadcast."""
        with self.quiet():
            return self.m.cross(a, b, axis=axis)

    def diagonal(self, a, offset=0, /):
        """The ``offset`` diagonal of each matrix (a copy, not NumPy's read-only view)."""
        return self.m.diagonal(a, offset, -2, -1).copy()

    def trace(self, a, offset=0, dtype=None, /):
        """The sum of the ``offset`` diagonal of each matrix, accumulated in the DType
        ``dtype``."""
        np_dtype = None if dtype is None else dtype._np
        with self.quiet():
            return self.m.asarray(self.m.trace(a, offset, -2, -1, dtype=np_dtype))

    # ---- norms -----------------------------------------------------------------------

    def vector_norm(self, a, axis=None, keepdims=False, ord=2, /):
        """The ``ord``-norm over ``axis`` (``None`` or a tuple of non-negative ints);
        real result."""
        m = self.m
        rdt = REAL_OF[a.dtype]
        total = self.sum
        with self.quiet():
            if ord == 2:
                r = self._two_norm(a, axis, keepdims)
            elif ord == 1:
                r = total(m.abs(a), axis=axis, keepdims=keepdims)
            elif ord == math.inf:
                r = self._max_or(m.abs(a), axis, keepdims, 0)
            elif ord == -math.inf:
                r = self._min_or(m.abs(a), axis, keepdims, math.inf)
            elif ord == 0:
                r = m.sum(a != 0, axis=axis, keepdims=keepdims, dtype=rdt)
            elif ord > 0:
                # sum(|a|**p)**(1/p), scaled by max|a| so that |a|**p cannot overflow.
                absa = m.abs(a)
                big = self._max_or(absa, axis, True, 0)
                scale = m.where((big > 0) & m.isfinite(big), big, 1).astype(rdt, copy=False)
                r = total((absa / scale) ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)
                if not keepdims:
                    scale = scale.reshape(r.shape)
                    big = big.reshape(r.shape)
                r = m.where(m.isfinite(big), r * scale, big)
            else:
                r = total(m.abs(a) ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)
        return m.asarray(r).astype(rdt, copy=False)

    def matrix_norm(self, a, keepdims=False, ord="fro", /):
        """The ``ord`` norm of each matrix (``'fro'``, ``'nuc'``, +-1, +-2, +-inf); real
        result.

        An empty matrix (``M == 0`` or ``N == 0``) has norm 0 for every ``ord``.
        """
        m = self.m
        rdt = REAL_OF[a.dtype]
        rows, cols = a.shape[-2:]
        if rows == 0 or cols == 0:
            return m.zeros(a.shape[:-2] + ((1, 1) if keepdims else ()), dtype=rdt)
        rows_axis, cols_axis = (a.ndim - 2,), (a.ndim - 1,)
        with self.quiet():
            if ord == "fro":
                r = self._two_norm(a, rows_axis + cols_axis, False)
            elif ord == "nuc":
                r = self.sum(self.svdvals(a), axis=rows_axis)
            elif ord == 2:
                r = self.svdvals(a)[..., 0]
            elif ord == -2:
                r = self.svdvals(a)[..., -1]
            elif ord == 1 or ord == -1:
                col = self.sum(m.abs(a), axis=rows_axis)  # column sums: one per column
                r = self.max(col, axis=rows_axis) if ord == 1 else self.min(col, axis=rows_axis)
            else:  # +-inf
                row = self.sum(m.abs(a), axis=cols_axis)
                r = self.max(row, axis=rows_axis) if ord > 0 else self.min(row, axis=rows_axis)
        r = m.asarray(r).astype(rdt, copy=False)
        if keepdims:
            r = r.reshape(r.shape + (1, 1))
        return r

    def _two_norm(self, a, axis, keepdims):
        """``sqrt(sum(|a|**2))``, rescaled by ``max|a|`` only where the plain sum overflows.

        On the host the rescaling runs only when a result is not finite; on a device
        (``host_reads_cheap`` False) it always runs, where-based, as reading the test
        would be a sync.
        """
        m = self.m
        r = m.sqrt(self.sum(_abs2(a), axis=axis, keepdims=keepdims))
        if self.host_reads_cheap and m.isfinite(r).all():  # sync: on the host, free
            return r
        bad = ~m.isfinite(r)
        absa = m.abs(a)
        big = self._max_or(absa, axis, True, 0)
        scale = m.where((big > 0) & m.isfinite(big), big, 1).astype(absa.dtype, copy=False)
        scaled = m.sqrt(self.sum(_abs2(absa / scale), axis=axis, keepdims=keepdims))
        if not keepdims:
            scale = scale.reshape(scaled.shape)
        return m.where(bad & m.isfinite(big.reshape(r.shape)), scaled * scale, r)

    def _max_or(self, a, axis, keepdims, empty):
        """``max`` over ``axis``, ``empty`` where the reduction has no element (NumPy's
        ``initial=``, which a module's ``max`` may lack)."""
        if _reduced_count(a.shape, axis):
            return self.max(a, axis=axis, keepdims=keepdims)
        return self.m.full(_reduced_shape(a.shape, axis, keepdims), empty, dtype=a.dtype)

    def _min_or(self, a, axis, keepdims, empty):
        """``min`` over ``axis``, ``empty`` where the reduction has no element."""
        if _reduced_count(a.shape, axis):
            return self.min(a, axis=axis, keepdims=keepdims)
        return self.m.full(_reduced_shape(a.shape, axis, keepdims), empty, dtype=a.dtype)


def _default_rtol(a, rtol):
    if rtol is None:
        return max(a.shape[-2:]) * np.finfo(a.dtype).eps
    return rtol


def _abs2(a):
    if a.dtype.kind == "c":
        re, im = a.real, a.imag
        return re * re + im * im
    return a * a


def _reduced_count(shape: tuple, axis) -> int:
    """How many elements each result of a reduction over ``axis`` combines."""
    if axis is None:
        return math.prod(shape)
    return math.prod(shape[ax] for ax in axis)


def _reduced_shape(shape: tuple, axis, keepdims: bool) -> tuple:
    ndim = len(shape)
    axes = range(ndim) if axis is None else {ax % ndim for ax in axis}
    if keepdims:
        return tuple(1 if i in axes else n for i, n in enumerate(shape))
    return tuple(n for i, n in enumerate(shape) if i not in axes)
