"""Native linear-algebra ops of the NumPy backend (the main namespace's four and ``linalg``).

The front end (:mod:`tessera_array._linear_algebra_functions`,
:mod:`tessera_array.linalg`) has already validated every argument: shapes are
checked, operands are cast to the computation dtype (floating point for the
``linalg`` routines), ``axis`` of ``vecdot``/``cross`` arrives as a negative int,
``axis`` of ``vector_norm`` as ``None`` or a tuple of non-negative ints, and
``tensordot``'s ``axes`` as a pair of tuples of non-negative ints. These
functions compute and always return ``numpy.ndarray`` (never a NumPy scalar).

LAPACK failures (singular matrix, not positive definite, no convergence) are
raised as :class:`tessera_array.LinAlgError`, chained to NumPy's error.
"""

from __future__ import annotations

import numpy as np

from tessera_array._errors import LinAlgError

from ._threads import DOT_MIN_BYTES as _DOT_MIN_BYTES
from ._threads import blas_dot as _blas_dot

__all__ = [
    # main namespace
    "matmul",
    "matrix_transpose",
    "tensordot",
    "vecdot",
    # linalg extension
    "cholesky",
    "cross",
    "det",
    "diagonal",
    "eig",
    "eigh",
    "eigvals",
    "eigvalsh",
    "inv",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "outer",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "svd",
    "svdvals",
    "trace",
    "vector_norm",
]

_ndarray = np.ndarray
_np_matmul = np.matmul
_np_asarray = np.asarray
_LAPACKError = np.linalg.LinAlgError
_add_reduce = np.add.reduce
_isfinite = np.isfinite
# The real dtype of each floating dtype's precision (result dtype of the norms).
_REAL = {np.dtype(c): np.dtype(r) for c, r in (
    ("float32", "float32"), ("float64", "float64"), ("complex64", "float32"),
    ("complex128", "float64"),
)}


def _lapack(func: str, what: str, f, a, *args, **kwargs):
    """``f(a, *args, **kwargs)``; NumPy's LinAlgError becomes tessera's, naming ``func``."""
    try:
        return f(a, *args, **kwargs)
    except _LAPACKError as err:
        raise LinAlgError(
            f"linalg.{func}: {what} (LAPACK: {err}). Received: x.shape={a.shape}, "
            f"x.dtype={a.dtype}"
        ) from err


# ---- main namespace ------------------------------------------------------------


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for operands of one dtype (shapes already checked)."""
    # Note: as NumPy does, a floating-point overflow to inf emits NumPy's RuntimeWarning;
    # no errstate here, to keep the tiny-matrix path short.
    r = _np_matmul(a, b)
    return r if r.__class__ is _ndarray else _np_asarray(r)


def matrix_transpose(a: np.ndarray) -> np.ndarray:
    """A view of ``a`` with its last two axes swapped."""
    return a.swapaxes(-1, -2)


def tensordot(a: np.ndarray, b: np.ndarray, axes: tuple) -> np.ndarray:
    """Contract ``a`` over ``axes[0]`` with ``b`` over ``axes[1]`` (non-negative ints)."""
    return _np_asarray(np.tensordot(a, b, axes=(list(axes[0]), list(axes[1]))))


def vecdot(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    """``sum(conj(a) * b)`` along the negative ``axis``, other axes broadcast.

    Long contiguous real vectors of one dtype go through ``_threads.blas_dot``: the
    value of ``np.dot``, bit for bit, with OpenBLAS's threads held (see _threads.py).
    """
    if (a.ndim == 1 and b.ndim == 1 and a.nbytes >= _DOT_MIN_BYTES and a.dtype is b.dtype
            and a.dtype.kind == "f" and a.flags.c_contiguous and b.flags.c_contiguous):
        r = _blas_dot(a, b)
        if r is not None:
            return r
    return _np_asarray(np.vecdot(a, b, axis=axis))


# ---- linalg: factorizations and solvers -----------------------------------------


def cholesky(a: np.ndarray, upper: bool = False) -> np.ndarray:
    """The lower (or upper) Cholesky factor of each matrix of the stack."""
    return _lapack(
        "cholesky", "x (or a matrix of the stack) is not positive definite",
        np.linalg.cholesky, a, upper=upper,
    )


def det(a: np.ndarray) -> np.ndarray:
    """The determinant of each square matrix of the stack."""
    with np.errstate(all="ignore"):
        return _np_asarray(_lapack("det", "the factorization failed", np.linalg.det, a))


def slogdet(a: np.ndarray) -> tuple:
    """``(sign, logabsdet)`` of each square matrix; ``logabsdet`` is real."""
    with np.errstate(all="ignore"):
        sign, logabsdet = _lapack("slogdet", "the factorization failed", np.linalg.slogdet, a)
    return _np_asarray(sign), _np_asarray(logabsdet)


def inv(a: np.ndarray) -> np.ndarray:
    """The inverse of each square matrix of the stack."""
    return _lapack("inv", "x (or a matrix of the stack) is singular", np.linalg.inv, a)


def solve(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``X`` with ``a @ X == b``; a 1-D ``b`` is one right-hand-side vector for every matrix."""
    try:
        return np.linalg.solve(a, b)
    except _LAPACKError as err:
        raise LinAlgError(
            f"linalg.solve: x1 (or a matrix of the stack) is singular (LAPACK: {err}). "
            f"Received: x1.shape={a.shape}, x2.shape={b.shape}"
        ) from err


def _complex_of(dt: np.dtype) -> np.dtype:
    return dt if dt.kind == "c" else np.result_type(dt, np.complex64)


def eig(a: np.ndarray) -> tuple:
    """Eigenvalues and right eigenvectors of general matrices, always complex."""
    w, v = _lapack(
        "eig", "the eigenvalue iteration did not converge, or x has inf/nan entries",
        np.linalg.eig, a,
    )
    ct = _complex_of(a.dtype)
    return w.astype(ct, copy=False), v.astype(ct, copy=False)


def eigvals(a: np.ndarray) -> np.ndarray:
    """Eigenvalues of general matrices, always complex."""
    w = _lapack(
        "eigvals", "the eigenvalue iteration did not converge, or x has inf/nan entries",
        np.linalg.eigvals, a,
    )
    return w.astype(_complex_of(a.dtype), copy=False)


def eigh(a: np.ndarray) -> tuple:
    """Eigenvalues (real, ascending) and eigenvectors of Hermitian matrices (lower triangle read)."""
    w, v = _lapack("eigh", "the eigenvalue iteration did not converge", np.linalg.eigh, a)
    return w, v


def eigvalsh(a: np.ndarray) -> np.ndarray:
    """Eigenvalues (real, ascending) of Hermitian matrices (lower triangle read)."""
    return _lapack("eigvalsh", "the eigenvalue iteration did not converge", np.linalg.eigvalsh, a)


def qr(a: np.ndarray, mode: str = "reduced") -> tuple:
    """``(Q, R)`` of each matrix; ``mode`` is ``"reduced"`` or ``"complete"``."""
    q, r = _lapack("qr", "the factorization failed", np.linalg.qr, a, mode=mode)
    return q, r


def svd(a: np.ndarray, full_matrices: bool = True) -> tuple:
    """``(U, S, Vh)`` of each matrix, ``S`` real and descending."""
    u, s, vh = _lapack(
        "svd", "the SVD did not converge", np.linalg.svd, a, full_matrices=full_matrices
    )
    return u, s, vh


def svdvals(a: np.ndarray) -> np.ndarray:
    """The singular values of each matrix, real and descending."""
    return _lapack("svdvals", "the SVD did not converge", np.linalg.svd, a, compute_uv=False)


def _default_rtol(a: np.ndarray, rtol):
    if rtol is None:
        return max(a.shape[-2:]) * np.finfo(a.dtype).eps
    return rtol


def pinv(a: np.ndarray, rtol=None) -> np.ndarray:
    """Moore-Penrose pseudo-inverse, ``V diag(1/s) U^H`` over singular values above the cutoff.

    ``rtol`` (a Python float or an array broadcast against the stack) times the
    largest singular value is the cutoff; ``None`` means ``max(M, N) * eps``.
    """
    m, n = a.shape[-2:]
    rt = _np_asarray(_default_rtol(a, rtol))
    if m == 0 or n == 0:
        stack = np.broadcast_shapes(a.shape[:-2], rt.shape)
        return np.zeros(stack + (n, m), dtype=a.dtype)
    u, s, vh = _lapack("pinv", "the SVD did not converge", np.linalg.svd, a, full_matrices=False)
    cutoff = rt[..., None] * np.max(s, axis=-1, keepdims=True)
    large = s > cutoff
    s_inv = np.divide(1, s, out=np.zeros(large.shape, dtype=s.dtype), where=large)
    v = vh.conj().swapaxes(-1, -2)
    uh = u.conj().swapaxes(-1, -2)
    return _np_matmul(v * s_inv[..., None, :], uh)


def matrix_rank(a: np.ndarray, rtol=None) -> np.ndarray:
    """The number of singular values above ``rtol * largest`` (int64)."""
    s = svdvals(a)
    rt = _np_asarray(_default_rtol(a, rtol))
    tol = rt[..., None] * np.max(s, axis=-1, keepdims=True, initial=0)
    return _np_asarray(np.count_nonzero(s > tol, axis=-1)).astype(np.int64, copy=False)


def matrix_power(a: np.ndarray, n: int) -> np.ndarray:
    """``a`` multiplied by itself ``n`` times (``n < 0``: of its inverse; ``0``: identity)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return _lapack(
            "matrix_power", "x (or a matrix of the stack) is singular, so n < 0 is undefined",
            np.linalg.matrix_power, a, n,
        )


# ---- linalg: products and diagonals ----------------------------------------------


def outer(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The outer product of two 1-D arrays of one dtype."""
    return np.multiply.outer(a, b)


def cross(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    """3-vector cross products along the negative ``axis``, other axes broadcast."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.cross(a, b, axis=axis)


def diagonal(a: np.ndarray, offset: int = 0) -> np.ndarray:
    """The ``offset`` diagonal of each matrix (a copy, not NumPy's read-only view)."""
    return np.diagonal(a, offset, -2, -1).copy()


def trace(a: np.ndarray, offset: int = 0, dtype=None) -> np.ndarray:
    """The sum of the ``offset`` diagonal of each matrix, accumulated in the DType ``dtype``."""
    np_dtype = None if dtype is None else dtype._np
    with np.errstate(over="ignore", invalid="ignore"):
        return _np_asarray(np.trace(a, offset, -2, -1, dtype=np_dtype))


# ---- linalg: norms ---------------------------------------------------------------


def _abs2(a: np.ndarray) -> np.ndarray:
    if a.dtype.kind == "c":
        re, im = a.real, a.imag
        return re * re + im * im
    return a * a


def _two_norm(a: np.ndarray, axis, keepdims: bool) -> np.ndarray:
    """``sqrt(sum(|a|**2))``, rescaled by ``max|a|`` only where the plain sum overflows."""
    r = np.sqrt(_add_reduce(_abs2(a), axis=axis, keepdims=keepdims))
    if not _isfinite(r).all():
        bad = ~_isfinite(r)
        absa = np.abs(a)
        big = np.max(absa, axis=axis, keepdims=True, initial=0)
        scale = np.where((big > 0) & np.isfinite(big), big, 1).astype(absa.dtype, copy=False)
        scaled = np.sqrt(np.sum(_abs2(absa / scale), axis=axis, keepdims=keepdims))
        if not keepdims:
            scale = scale.reshape(scaled.shape)
        r = np.where(bad & np.isfinite(big.reshape(r.shape)), scaled * scale, r)
    return r


def vector_norm(a: np.ndarray, axis=None, keepdims: bool = False, ord=2) -> np.ndarray:
    """The ``ord``-norm over ``axis`` (``None`` or a tuple of non-negative ints); real result."""
    rdt = _REAL[a.dtype]
    with np.errstate(all="ignore"):
        if ord == 2:
            r = _two_norm(a, axis, keepdims)
        elif ord == 1:
            r = np.sum(np.abs(a), axis=axis, keepdims=keepdims)
        elif ord == np.inf:
            r = np.max(np.abs(a), axis=axis, keepdims=keepdims, initial=0)
        elif ord == -np.inf:
            r = np.min(np.abs(a), axis=axis, keepdims=keepdims, initial=np.inf)
        elif ord == 0:
            r = np.sum(a != 0, axis=axis, keepdims=keepdims, dtype=rdt)
        elif ord > 0:
            # sum(|a|**p)**(1/p), scaled by max|a| so that |a|**p cannot overflow.
            absa = np.abs(a)
            big = np.max(absa, axis=axis, keepdims=True, initial=0)
            scale = np.where((big > 0) & np.isfinite(big), big, 1).astype(rdt, copy=False)
            r = np.sum((absa / scale) ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)
            if not keepdims:
                scale = scale.reshape(r.shape)
                big = big.reshape(r.shape)
            r = np.where(np.isfinite(big), r * scale, big)
        else:
            r = np.sum(np.abs(a) ** ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)
    return _np_asarray(r).astype(rdt, copy=False)


def matrix_norm(a: np.ndarray, keepdims: bool = False, ord="fro") -> np.ndarray:
    """The ``ord`` norm of each matrix (``'fro'``, ``'nuc'``, ±1, ±2, ±inf); real result.

    An empty matrix (``M == 0`` or ``N == 0``) has norm 0 for every ``ord``.
    """
    rdt = _REAL[a.dtype]
    m, n = a.shape[-2:]
    if m == 0 or n == 0:
        shape = a.shape[:-2] + ((1, 1) if keepdims else ())
        return np.zeros(shape, dtype=rdt)
    with np.errstate(all="ignore"):
        if ord == "fro":
            r = _two_norm(a, (-2, -1), False)
        elif ord == "nuc":
            r = np.sum(svdvals(a), axis=-1)
        elif ord == 2:
            r = svdvals(a)[..., 0]
        elif ord == -2:
            r = svdvals(a)[..., -1]
        elif ord == 1 or ord == -1:
            col = np.sum(np.abs(a), axis=-2)
            r = np.max(col, axis=-1) if ord == 1 else np.min(col, axis=-1)
        else:  # ±inf
            row = np.sum(np.abs(a), axis=-1)
            r = np.max(row, axis=-1) if ord > 0 else np.min(row, axis=-1)
    r = _np_asarray(r).astype(rdt, copy=False)
    if keepdims:
        r = r.reshape(r.shape + (1, 1))
    return r
