"""Matvec launchers of the NumPy backend.

``matvec(A, x) -> y`` for a dense 2-D ``A`` (row-major or not) and a 1-D ``x``:
``y = A @ x`` through BLAS gemv (float32/float64/complex). Integer and boolean
dtypes are not registered: the Krylov solvers never need them, and a lookup for
them names what is registered.

The GPU backends register ``scalar`` (one thread per row) and ``warp`` (one warp
per row) variants; on the CPU both names reach the same BLAS call, so the per-solver
routing table of ``tessera_array.sparse.linalg`` resolves on every backend.
"""

from __future__ import annotations

import threading

import numpy as np

from tessera_array import _dtypes

from . import _threads

VARIANTS = ("default", "scalar", "warp")

# axpy: ``y += alpha * x`` (or ``y -= alpha * x``) in place, for the Krylov solvers.
# It must round exactly as NumPy's ``y -= alpha * x`` (the product rounded, then the
# sum rounded), because the solvers' iterates are tested equal to SciPy's, which
# computes it so: BLAS ?axpy fuses the multiply-add (one rounding), and GMRES
# amplified that to a relative 5e-6 after 20 Arnoldi steps. So it is NumPy's two
# ufuncs without the temporary: the product goes into a reused scratch buffer.
# Measured on 2**20 float64, medians of 40 (ms; 16-core Xeon, taskset to 2 cores):
#   y -= 0.37 * x (a temporary)                     1.96
#   multiply into scratch, subtract in place         1.69
#   the same cut in 2 parts over 2 threads           0.98 alone, but a loss inside
#                                                    the solvers (backends/numpy/sparse.py)
# scipy.linalg.blas daxpy for the sum was tried and dropped: SciPy's OpenBLAS thread
# pool then contended with NumPy's, and gmres on Poisson 1024^2 ran 2.1x slower than
# SciPy on 2 cores, 3.9x on 16.
#
# Above AXPY_PARALLEL_MIN the two ufuncs run on contiguous parts over the pool (the
# same operations per element, so the same bits). That lost inside the solvers while
# OpenBLAS's dots kept its workers spinning; with their dots held (_threads.py) it is
# part of the 15.8-16.5 ms row of the table there.
#
# Both ufuncs of a step walk the vectors in blocks of AXPY_BLOCK elements, so the product
# and the block of y it is added to are still in the core's cache when the sum reads
# them: the vectors cross memory once instead of twice. The same operations per element,
# so the same bits. Measured (2-core Sapphire Rapids VM; us a call, the caches flushed
# by sums over four other vectors between calls; blocks of 8192 / 16384 / 32768):
#   axpy 2^18 float64   whole-vector scratch 306    blocks 224 / 193 / 187
#   axpy 2^18 float32                        151           141 / 118 / 108
#   axpy 2^20 float64   2 threads            871    one thread, blocks 875 / 717 / 675
#   aypx 2^18 float64   two whole passes     215           187 / 170 / 163
#
# Where the _krylov_c extension is built, both updates are one C pass instead (the same
# two roundings per element, so the same bits) for contiguous float32/float64 vectors and
# a scalar of their dtype: 2-core EPYC (Zen 4), us a call, medians of 400, warm caches:
#   axpy 4096 float64      C 2.3    NumPy 3.0
#   axpy 2^16 float64        14.9         31.3     float32 7.1 / 17.0
#   axpy 2^18 float64        47.4        114.7     float32 32.9 / 67.6
AXPY_SCRATCH_MIN = 1 << 16
AXPY_PARALLEL_MIN_BYTES = 1 << 23
AXPY_BLOCK = 1 << 15
_scratch = threading.local()


def _scratch_for(y: np.ndarray, n: int) -> np.ndarray:
    s = getattr(_scratch, "buf", None)
    if s is None or s.dtype != y.dtype or s.shape[0] < n:
        s = _scratch.buf = np.empty(n, dtype=y.dtype)
    return s[:n]


def _blocks(lo: int, hi: int):
    return [(b, min(hi, b + AXPY_BLOCK)) for b in range(lo, hi, AXPY_BLOCK)]


def _parts(n: int, itemsize: int) -> list:
    nt = _threads.threads()
    return [(0, n)] if n * itemsize < AXPY_PARALLEL_MIN_BYTES or nt < 2 else _threads.split(n, nt)


_KRYLOV_C = []  # [the _krylov_c module, or None], set on first use


def krylov_c():
    """The compiled updates and dense cg loop (``_krylov_c.c``), or None where the
    extension was not built (the NumPy ufuncs then do the updates)."""
    if not _KRYLOV_C:
        try:
            from . import _krylov_c as mod
        except ImportError:
            mod = None
        _KRYLOV_C.append(mod)
    return _KRYLOV_C[0]


def _in_c(alpha, x, y):
    """``alpha`` as the Python float the C update takes (rounded there to the vectors'
    dtype, as NumPy rounds a scalar of that dtype: exactly), or None where the update is
    NumPy's: no extension, vectors that are not contiguous float32/float64 of one dtype and
    length, or an ``alpha`` NumPy would not compute in their dtype (a float64 scalar
    against float32 vectors, say)."""
    dt = y.dtype
    if (dt.char not in "fd" or x.dtype != dt or y.ndim != 1 or x.shape != y.shape
            or not (x.flags.c_contiguous and y.flags.c_contiguous) or krylov_c() is None):
        return None
    if isinstance(alpha, (np.generic, np.ndarray)):
        return float(alpha) if alpha.dtype == dt and alpha.ndim == 0 else None
    return alpha if type(alpha) is float and dt.char == "d" else None


def _update(kind: int, a: float, x, y) -> None:
    """The C update over the whole vectors, in parts over the pool where they are long."""
    update = _KRYLOV_C[0].update
    parts = _parts(y.shape[0], y.itemsize)
    if len(parts) == 1:
        update(kind, a, x, y, 0, y.shape[0])
    else:
        _threads.run_parts(lambda lo, hi: update(kind, a, x, y, lo, hi), parts)


def axpy(alpha, x: np.ndarray, y: np.ndarray, subtract: bool = False) -> None:
    """``y += alpha * x`` (``y -= alpha * x`` when ``subtract``) in place, rounded as NumPy.

    ``x`` and ``y`` are 1-D of one floating dtype; ``alpha`` is a Python scalar or a
    0-d array of that dtype.
    """
    a = _in_c(alpha, x, y)
    if a is not None:
        _update(1 if subtract else 0, a, x, y)
        return
    n = y.shape[0]
    if n < AXPY_SCRATCH_MIN or y.ndim != 1 or x.dtype != y.dtype:
        if subtract:
            y -= alpha * x
        else:
            y += alpha * x
        return
    op = np.subtract if subtract else np.add
    mul = np.multiply

    def part(lo, hi):
        s = _scratch_for(y, AXPY_BLOCK)  # (the calling thread's)
        for b, e in _blocks(lo, hi):
            ss, ys = s[:e - b], y[b:e]
            mul(x[b:e], alpha, out=ss)
            op(ys, ss, out=ys)

    _threads.run_parts(part, _parts(n, y.itemsize))


def aypx(beta, x: np.ndarray, y: np.ndarray) -> None:
    """``y = x + beta * y`` in place, rounded as NumPy's ``y *= beta; y += x`` (CG's
    direction update ``p = z + beta p``); the same arguments as :func:`axpy`."""
    a = _in_c(beta, x, y)
    if a is not None:
        _update(2, a, x, y)
        return
    n = y.shape[0]
    if n < AXPY_SCRATCH_MIN or y.ndim != 1 or x.dtype != y.dtype:
        y *= beta
        y += x
        return
    mul, add = np.multiply, np.add

    def part(lo, hi):
        for b, e in _blocks(lo, hi):
            ys = y[b:e]
            mul(ys, beta, out=ys)
            add(ys, x[b:e], out=ys)

    _threads.run_parts(part, _parts(n, y.itemsize))


def dense_matvec(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """y = A @ x for a 2-D ``a`` and 1-D ``x`` of one floating dtype."""
    return np.asarray(np.matmul(a, x))


def vecdot(x, y):
    """``conj(x) . y`` of two vectors: the namespace's ``vecdot`` (a 0-d array)."""
    from ._ops import vecdot as _vecdot

    return _vecdot(x, y, -1)


def vecmat(x, a):
    """``conj(x) @ a`` for a vector ``x`` (k,) and a matrix ``a`` (k, n): the namespace's
    ``matmul`` (NumPy's ``vecmat``)."""
    from ._ops import matmul

    return matmul(np.conj(x) if x.dtype.kind == "c" else x, a)


# linear: x @ w.T + bias + residual as ONE BLAS ?gemm with beta = 1 over the output
# pre-filled with bias + residual (one pass writing it), through SciPy's BLAS wrappers:
# the C-contiguous output is the Fortran-order C^T = W X^T, so x and w go in as their
# transposed views and nothing is copied (_gemm_into checks that C came back in place).
# Measured (python -m benchmarks --suite linear, float32 4096^3, 2-core Xeon, two runs):
# 0.93x / 0.96x the time of torch's addmm(bias, x, w.T) + residual (MKL); the history
# is in benchmarks/NOTES.md. Without SciPy: NumPy's matmul, then the additions in place.


def _gemm_into(c: np.ndarray, x: np.ndarray, w: np.ndarray) -> bool:
    """``c += x @ w.T`` in place by one ?gemm (``c`` (R, N) C-contiguous, ``x`` (R, K),
    ``w`` (N, K)); False, having written nothing, without SciPy."""
    try:
        from scipy.linalg import blas
    except ImportError:
        return False
    gemm = blas.dgemm if c.dtype == np.float64 else blas.sgemm
    # Fortran view: C^T (N, R) = op(A) op(B) with op(A) = W (N, K), op(B) = X^T (K, R).
    a, ta = (w, 0) if w.flags.f_contiguous and not w.flags.c_contiguous else (w.T, 1)
    b, tb = (x, 1) if x.flags.f_contiguous and not x.flags.c_contiguous else (x.T, 0)
    ct = c.T
    r = gemm(1.0, a, b, beta=1.0, c=ct, trans_a=ta, trans_b=tb, overwrite_c=1)
    if r.ctypes.data != ct.ctypes.data:  # f2py copied C (it cannot for a fresh buffer)
        c[...] = r.T
    return True


def linear(x: np.ndarray, weight: np.ndarray, bias=None, residual=None) -> np.ndarray:
    """``x @ weight.T + bias + residual`` (the ``linear`` op; shapes checked by nn.linear)."""
    n, k = weight.shape
    lead = x.shape[:-1]
    if bias is None and residual is None:
        return np.asarray(np.matmul(x, weight.T))
    out = np.empty(lead + (n,), dtype=x.dtype)
    if bias is not None and residual is not None:
        np.add(residual, bias, out=out)
    else:
        np.copyto(out, bias if residual is None else residual)
    if out.size == 0 or k == 0:
        return out
    rows = out.size // n
    c = out.reshape(rows, n)
    x2 = x.reshape(rows, k)
    if not _gemm_into(c, x2, weight):
        c += np.matmul(x2, weight.T)
    return out


def linear_half(x: np.ndarray, weight: np.ndarray, bias=None, residual=None) -> np.ndarray:
    """:func:`linear` of float16 or bfloat16 operands: computed in float32 (one sgemm into
    the output pre-filled in float32) and rounded to the 16-bit dtype once.

    Note: torch on the CPU computes its 16-bit addmm so (float32 accumulation, one
    rounding); NumPy's float16 matmul has no BLAS, and ml_dtypes' bfloat16 matmul answers
    in float32.
    """
    f32 = np.float32
    out32 = linear(x.astype(f32), weight.astype(f32),
                   None if bias is None else bias.astype(f32),
                   None if residual is None else residual.astype(f32))
    return out32.astype(x.dtype)


def register(registry, backend_name: str) -> None:
    for variant in VARIANTS:
        registry.register("matvec", backend_name, _dtypes.FLOATING, dense_matvec, variant=variant)
    registry.register("axpy", backend_name, _dtypes.FLOATING, axpy)
    registry.register("aypx", backend_name, _dtypes.FLOATING, aypx)
    registry.register("linear", backend_name, _dtypes.REAL_FLOATING, linear)
    registry.register("linear", backend_name, _dtypes.HALF_FLOATING, linear_half)
    # vecdot / vecmat (the Krylov solvers' products): NumPy's own, which is the host BLAS's
    # order, under both variants (see backends/opencl/dot.py for what "blas" means there).
    for variant in ("default", "blas"):
        registry.register("vecdot", backend_name, _dtypes.FLOATING, vecdot, variant=variant)
        registry.register("vecmat", backend_name, _dtypes.FLOATING, vecmat, variant=variant)
