"""The ``linalg`` extension.

Specification: https://data-apis.org/array-api/2025.12/extensions/linear_algebra_functions.html

Every function validates its arguments here and computes through the native ops
of its operands' device. Functions that the standard defines for floating-point
input (``inv``, ``det``, ``svd``, ...) compute integer and boolean input in the
default floating dtype (float64 where the device has it), as NumPy does; float32
and complex64 input stays in single precision. A LAPACK failure (singular matrix,
not positive definite, no convergence) raises :class:`LinAlgError`, a ValueError.
"""

from __future__ import annotations

import math
from typing import Literal, NamedTuple

from . import _dtypes
from ._array import Array
from ._dtypes import COMPLEX_OF, COMPUTE_IN, REAL_OF, DType, coerce_dtype
from ._errors import AxisError, DeviceMismatchError, LinAlgError
from ._helpers import check_array, check_dtype_on_device, default_float, refuse_half, wrap_as
from ._linear_algebra_functions import (
    as_int,
    broadcast_shapes,
    matmul,
    matrix_transpose,
    negative_axis,
    tensordot,
    two_arrays,
    vecdot,
)

__all__ = [
    "cholesky",
    "cross",
    "det",
    "diagonal",
    "eig",
    "eigh",
    "eigvals",
    "eigvalsh",
    "inv",
    "matmul",
    "matrix_norm",
    "matrix_power",
    "matrix_rank",
    "matrix_transpose",
    "outer",
    "pinv",
    "qr",
    "slogdet",
    "solve",
    "svd",
    "svdvals",
    "tensordot",
    "trace",
    "vecdot",
    "vector_norm",
    # result types and the error class, as numpy.linalg has them
    "EigResult",
    "EighResult",
    "QRResult",
    "SlogdetResult",
    "SVDResult",
    "LinAlgError",
]

_INF = float("inf")


class EigResult(NamedTuple):
    """Result of :func:`eig`."""

    eigenvalues: Array  # (..., M), complex
    eigenvectors: Array  # (..., M, M), complex; column j belongs to eigenvalues[..., j]


class EighResult(NamedTuple):
    """Result of :func:`eigh`."""

    eigenvalues: Array  # (..., M), real, ascending
    eigenvectors: Array  # (..., M, M), orthonormal columns


class QRResult(NamedTuple):
    """Result of :func:`qr`."""

    Q: Array  # orthonormal columns
    R: Array  # upper triangular


class SlogdetResult(NamedTuple):
    """Result of :func:`slogdet`."""

    sign: Array  # dtype of x; 0 for a singular matrix
    logabsdet: Array  # real; -inf for a singular matrix


class SVDResult(NamedTuple):
    """Result of :func:`svd`."""

    U: Array  # left singular vectors (columns)
    S: Array  # real, descending
    Vh: Array  # right singular vectors (rows), conjugate-transposed


# ---- argument checks ----------------------------------------------------------------


def _float_array(func: str, x, name: str = "x"):
    """``(device, dtype, native)`` of ``x`` in its floating computation dtype."""
    if x.__class__ is not Array:
        check_array(x, func, name)
    dt = x._dtype
    dev = x._device
    refuse_half(func, dt, name, _NO_HALF)
    if dt.kind in "fc":
        return dev, dt, x._data
    # Note: the standard asks for floating-point input; like NumPy, integer and
    # boolean input is computed in the default floating dtype.
    fdt = default_float(dev)
    return dev, fdt, dev.ops.astype(x._data, fdt)


# Note: numpy.linalg refuses float16 too; PyTorch's CPU linalg refuses both 16-bit dtypes.
_NO_HALF = "LAPACK and the device solvers have no 16-bit routines"


def _check_matrix(func: str, shape: tuple, square: bool = False, name: str = "x") -> None:
    if len(shape) < 2:
        raise ValueError(
            f"{func}: {name} must have at least 2 dimensions (a matrix or a stack of "
            f"matrices). Received: {name}.shape={shape}"
        )
    if square and shape[-1] != shape[-2]:
        raise ValueError(
            f"{func}: {name} must be a square matrix (or a stack of square matrices). "
            f"Received: {name}.shape={shape}"
        )


def _float_matrix(func: str, x, square: bool = False):
    dev, dt, a = _float_array(func, x)
    _check_matrix(func, a.shape, square)
    return dev, dt, a


def _rtol(func: str, rtol, dev, stack: tuple):
    """``rtol`` as the device's native value: None, a Python float or a native array."""
    if rtol is None:
        return None
    if isinstance(rtol, Array):
        if rtol._dtype.kind != "f":
            raise TypeError(
                f"{func}: an array rtol must have a real floating-point dtype. Received: "
                f"rtol.dtype={rtol._dtype}"
            )
        if rtol._device is not dev:
            raise DeviceMismatchError(
                f"{func}: x and rtol are on different devices. Received: x.device={dev}, "
                f"rtol.device={rtol._device}. Use to_device() to move one."
            )
        broadcast_shapes(func, stack, rtol.shape, "rtol and the stack shape of x")
        return rtol._data
    if isinstance(rtol, (int, float)) and not isinstance(rtol, bool):
        return float(rtol)
    raise TypeError(
        f"{func}: rtol must be None, a Python float or a real floating-point array. "
        f"Received: rtol of type {type(rtol).__name__}"
    )


def _real_of(dt: DType) -> DType:
    return REAL_OF.get(dt, dt)


# ---- decompositions and inverses ------------------------------------------------------


def cholesky(x: Array, /, *, upper: bool = False) -> Array:
    """Cholesky factor of Hermitian positive-definite matrices (lower, or upper with ``upper=True``).

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.linalg.cholesky.html

    Only the lower triangle of ``x`` is read; a matrix that is not positive
    definite raises :class:`LinAlgError`.
    """
    dev, dt, a = _float_matrix("linalg.cholesky", x, square=True)
    return wrap_as(dev.ops.cholesky(a, bool(upper)), dt, dev)


def det(x: Array, /) -> Array:
    """Determinant of a square matrix (or a stack of them).

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.linalg.det.html
    """
    dev, dt, a = _float_matrix("linalg.det", x, square=True)
    return wrap_as(dev.ops.det(a), dt, dev)


def slogdet(x: Array, /) -> SlogdetResult:
    """Sign and natural log of the absolute determinant.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.linalg.slogdet.html
    """
    dev, dt, a = _float_matrix("linalg.slogdet", x, square=True)
    sign, logabsdet = dev.ops.slogdet(a)
    return SlogdetResult(wrap_as(sign, dt, dev), wrap_as(logabsdet, _real_of(dt), dev))


def inv(x: Array, /) -> Array:
    """Inverse of a square matrix (or a stack of them).

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.linalg.inv.html

    A singular matrix raises :class:`LinAlgError`.
    """
    dev, dt, a = _float_matrix("linalg.inv", x, square=True)
    return wrap_as(dev.ops.inv(a), dt, dev)


def solve(x1: Array, x2: Array, /) -> Array:
    """Solution ``X`` of ``x1 @ X == x2``.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.linalg.solve.html

    A 1-D ``x2`` of shape ``(M,)`` is one right-hand side for every matrix of
    ``x1`` (result ``x1.shape[:-2] + (M,)``); otherwise ``x2`` is ``(..., M, K)``
    and the stack dimensions broadcast. A singular ``x1`` raises :class:`LinAlgError`.
    """
    func = "linalg.solve"
    dev, dt, a, b = two_arrays(func, x1, x2)
    refuse_half(func, x1._dtype, "x1", _NO_HALF)
    refuse_half(func, x2._dtype, "x2", _NO_HALF)
    if dt.kind not in "fc":
        dt = default_float(dev)
        a = dev.ops.astype(a, dt)
        b = dev.ops.astype(b, dt)
    s1, s2 = a.shape, b.shape
    _check_matrix(func, s1, square=True, name="x1")
    m = s1[-1]
    if len(s2) == 1:
        if s2[0] != m:
            raise ValueError(
                f"{func}: a 1-D x2 must have the size of x1's last axis. Received: "
                f"x1.shape={s1}, x2.shape={s2}"
            )
    elif len(s2) == 0 or s2[-2] != m:
        raise ValueError(
            f"{func}: x2 must have shape (M,) or (..., M, K) with M = x1.shape[-1]. "
            f"Received: x1.shape={s1}, x2.shape={s2}"
        )
    else:
        broadcast_shapes(func, s1[:-2], s2[:-2], "the stack dimensions of x1 and x2")
    return wrap_as(dev.ops.solve(a, b), dt, dev)


def eig(x: Array, /) -> EigResult:
    """Eigenvalues and right eigenvectors of general square matrices (always complex).

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.linalg.eig.html

    float32 input gives complex64 results, float64 gives complex128.
    """
    dev, dt, a = _float_matrix("linalg.eig", x, square=True)
    w, v = dev.ops.eig(a)
    ct = COMPLEX_OF.get(dt, dt)
    return EigResult(wrap_as(w, ct, dev), wrap_as(v, ct, dev))


def eigvals(x: Array, /) -> Array:
    """Eigenvalues of general square matrices (always complex).

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.linalg.eigvals.html
    """
    dev, dt, a = _float_matrix("linalg.eigvals", x, square=True)
    return wrap_as(dev.ops.eigvals(a), COMPLEX_OF.get(dt, dt), dev)


def eigh(x: Array, /) -> EighResult:
    """Eigen-decomposition of Hermitian (real symmetric) matrices.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.linalg.eigh.html

    Only the lower triangle of ``x`` is read; eigenvalues come in ascending order.
    """
    dev, dt, a = _float_matrix("linalg.eigh", x, square=True)
    w, v = dev.ops.eigh(a)
    return EighResult(wrap_as(w, _real_of(dt), dev), wrap_as(v, dt, dev))


def eigvalsh(x: Array, /) -> Array:
    """Eigenvalues of Hermitian (real symmetric) matrices, ascending.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.linalg.eigvalsh.html
    """
    dev, dt, a = _float_matrix("linalg.eigvalsh", x, square=True)
    return wrap_as(dev.ops.eigvalsh(a), _real_of(dt), dev)


def qr(x: Array, /, *, mode: Literal["reduced", "complete"] = "reduced") -> QRResult:
    """QR decomposition.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.linalg.qr.html
    """
    func = "linalg.qr"
    if mode != "reduced" and mode != "complete":
        raise ValueError(
            f"{func}: mode must be 'reduced' or 'complete'. Received: mode={mode!r}"
        )
    dev, dt, a = _float_matrix(func, x)
    q, r = dev.ops.qr(a, mode)
    return QRResult(wrap_as(q, dt, dev), wrap_as(r, dt, dev))


def svd(x: Array, /, *, full_matrices: bool = True) -> SVDResult:
    """Singular value decomposition ``x = U @ diag(S) @ Vh``.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.linalg.svd.html
    """
    dev, dt, a = _float_matrix("linalg.svd", x)
    u, s, vh = dev.ops.svd(a, bool(full_matrices))
    return SVDResult(wrap_as(u, dt, dev), wrap_as(s, _real_of(dt), dev), wrap_as(vh, dt, dev))


def svdvals(x: Array, /) -> Array:
    """Singular values, descending.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.linalg.svdvals.html
    """
    dev, dt, a = _float_matrix("linalg.svdvals", x)
    return wrap_as(dev.ops.svdvals(a), _real_of(dt), dev)


def pinv(x: Array, /, *, rtol: float | Array | None = None) -> Array:
    """Moore-Penrose pseudo-inverse.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.linalg.pinv.html
    """
    func = "linalg.pinv"
    dev, dt, a = _float_matrix(func, x)
    rt = _rtol(func, rtol, dev, a.shape[:-2])
    return wrap_as(dev.ops.pinv(a, rt), dt, dev)


def matrix_rank(x: Array, /, *, rtol: float | Array | None = None) -> Array:
    """Number of singular values above ``rtol`` times the largest.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.linalg.matrix_rank.html
    """
    func = "linalg.matrix_rank"
    dev, _, a = _float_matrix(func, x)
    rt = _rtol(func, rtol, dev, a.shape[:-2])
    return wrap_as(dev.ops.matrix_rank(a, rt), _dtypes.int64, dev)


def matrix_power(x: Array, n: int, /) -> Array:
    """``x`` raised to the integer power ``n`` (``n < 0``: powers of the inverse).

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.linalg.matrix_power.html
    """
    func = "linalg.matrix_power"
    n = as_int(func, n, "n")
    # Note: the standard's result is floating point, so integer input computes in
    # float64 even for n >= 0 (NumPy keeps integers there).
    dev, dt, a = _float_matrix(func, x, square=True)
    return wrap_as(dev.ops.matrix_power(a, n), dt, dev)


# ---- products, diagonals ----------------------------------------------------------------


def outer(x1: Array, x2: Array, /) -> Array:
    """Outer product of two 1-D arrays.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.linalg.outer.html
    """
    dev, dt, a, b = two_arrays("linalg.outer", x1, x2)
    if len(a.shape) != 1 or len(b.shape) != 1:
        raise ValueError(
            f"linalg.outer: x1 and x2 must be 1-D. Received: x1.shape={a.shape}, "
            f"x2.shape={b.shape}"
        )
    return wrap_as(dev.ops.outer(a, b), dt, dev)


def cross(x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
    """Cross product of 3-element vectors along ``axis``.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.linalg.cross.html
    """
    func = "linalg.cross"
    dev, dt, a, b = two_arrays(func, x1, x2)
    if dt.kind == "b":
        raise TypeError(
            f"{func}: x1 and x2 must have a numeric dtype. Received: x1.dtype={x1.dtype}, "
            f"x2.dtype={x2.dtype}"
        )
    s1, s2 = a.shape, b.shape
    if not s1 or not s2:
        raise ValueError(
            f"{func}: x1 and x2 must have at least one dimension. Received: x1.shape={s1}, "
            f"x2.shape={s2}"
        )
    ax = negative_axis(func, axis, s1, s2)
    if s1[ax] != 3 or s2[ax] != 3:
        raise ValueError(
            f"{func}: x1 and x2 must have size 3 along axis (it is not broadcast). "
            f"Received: axis={axis}, x1.shape={s1}, x2.shape={s2}"
        )
    broadcast_shapes(func, s1, s2, "x1 and x2")
    return wrap_as(dev.ops.cross(a, b, ax), dt, dev)


def diagonal(x: Array, /, *, offset: int = 0) -> Array:
    """The ``offset`` diagonal of each matrix (a new array).

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.linalg.diagonal.html
    """
    func = "linalg.diagonal"
    x = check_array(x, func)
    offset = as_int(func, offset, "offset")
    _check_matrix(func, x.shape)
    return wrap_as(x._device.ops.diagonal(x._data, offset), x._dtype, x._device)


_KIND_RANK = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}


def trace(x: Array, /, *, offset: int = 0, dtype: DType | None = None) -> Array:
    """Sum of the ``offset`` diagonal of each matrix.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.linalg.trace.html

    ``dtype`` may not lower the kind of ``x`` (complex to real, floating to integer):
    that would drop information silently.
    """
    func = "linalg.trace"
    x = check_array(x, func)
    offset = as_int(func, offset, "offset")
    _check_matrix(func, x.shape)
    dev = x._device
    xdt = x._dtype
    if dtype is None:
        if xdt.kind == "b" or (xdt.kind == "i" and xdt.bits < 64):
            rdt = _dtypes.int64  # Note: NumPy sums booleans as the default integer too
        elif xdt.kind == "u" and xdt.bits < 64:
            rdt = _dtypes.uint64
        else:
            rdt = xdt
    else:
        rdt = coerce_dtype(dtype, "dtype", func)
        if _KIND_RANK[rdt.kind] < _KIND_RANK[xdt.kind]:
            raise TypeError(
                f"{func}: dtype must not lower the kind of x's dtype (it would drop "
                f"information). Received: dtype={rdt}, x.dtype={xdt}"
            )
        check_dtype_on_device(rdt, dev, func)
    acc = COMPUTE_IN.get(rdt)
    if acc is not None:  # a 16-bit result: summed in float32 and rounded back
        r = dev.ops.trace(dev.ops.astype(x._data, acc), offset, acc)
        return wrap_as(dev.ops.astype(r, rdt), rdt, dev)
    return wrap_as(dev.ops.trace(x._data, offset, rdt), rdt, dev)


# ---- norms ------------------------------------------------------------------------------


def vector_norm(
    x: Array,
    /,
    *,
    axis: int | tuple[int, ...] | None = None,
    keepdims: bool = False,
    ord: float = 2,
) -> Array:
    """Vector norm over ``axis`` (all axes by default); real result.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.linalg.vector_norm.html
    """
    func = "linalg.vector_norm"
    dev, dt, a = _float_array(func, x)
    nd = len(a.shape)
    if axis is None:
        axes = None
    else:
        items = axis if isinstance(axis, (tuple, list)) else (axis,)
        norm = []
        for ax in items:
            ax = as_int(func, ax, "axis")
            if not -nd <= ax < nd:
                raise AxisError(
                    f"{func}: axis {ax} is out of range for an array of {nd} dimensions. "
                    f"Received: axis={axis!r}, x.shape={a.shape}"
                )
            norm.append(ax % nd)
        if len(set(norm)) != len(norm):
            raise ValueError(f"{func}: axis has repeated entries. Received: axis={axis!r}")
        axes = tuple(norm)
    if isinstance(ord, bool) or not isinstance(ord, (int, float)):
        raise TypeError(
            f"{func}: ord must be an int or a float (inf, -inf allowed). Received: ord={ord!r}"
        )
    if math.isnan(ord):
        raise ValueError(f"{func}: ord must not be nan. Received: ord={ord!r}")
    return wrap_as(dev.ops.vector_norm(a, axes, bool(keepdims), ord), _real_of(dt), dev)


_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, _INF, -_INF)


def matrix_norm(
    x: Array,
    /,
    *,
    keepdims: bool = False,
    ord: float | Literal["fro", "nuc"] | None = "fro",
) -> Array:
    """Matrix norm of each matrix; real result.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.linalg.matrix_norm.html

    An empty matrix (a zero-sized last axis) has norm 0 for every ``ord``.
    """
    func = "linalg.matrix_norm"
    if ord is None:
        ord = "fro"  # Note: as NumPy's norm, None means the Frobenius norm
    valid = (
        ord in ("fro", "nuc") if isinstance(ord, str)
        else isinstance(ord, (int, float)) and not isinstance(ord, bool) and ord in _MATRIX_ORDS
    )
    if not valid:
        raise ValueError(
            f"{func}: ord must be one of 'fro', 'nuc', 1, -1, 2, -2, inf, -inf. "
            f"Received: ord={ord!r}"
        )
    dev, dt, a = _float_matrix(func, x)
    return wrap_as(dev.ops.matrix_norm(a, bool(keepdims), ord), _real_of(dt), dev)
