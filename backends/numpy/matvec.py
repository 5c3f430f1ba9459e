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

VARIANTS = ("default", "scalar", "warp")

# axpy: ``y += alpha * x`` (or ``y -= alpha * x``) in place, for the Krylov solvers.
# It must round exactly as NumPy's ``y -= alpha * x`` (the product rounded, then the
# sum rounded), because the solvers' iterates are tested equal to SciPy's, which
# computes it so. BLAS ?axpy alone is faster but fuses the multiply-add (FMA): one
# rounding instead of two, and GMRES amplified that to a relative 5e-6 after 20
# Arnoldi steps. So the product goes through NumPy into a reused scratch buffer and
# only the sum through BLAS, as ?axpy(scratch, y, a=+-1.0): 1.0 * s is exact, so the
# fused operation rounds once, exactly as NumPy's add or subtract does.
# Measured on 2**20 float64 (2-core EPYC, medians of 60, three runs, ms):
#   y -= t * x (NumPy, a temporary)          0.85-1.00
#   multiply into scratch + daxpy(a=-1.0)    0.66-0.77   (bit-identical to the line above)
#   daxpy(x, y, a=-t) (fused, not identical) 0.13-0.18
# Below _BLAS_MIN elements the NumPy expression is as fast and the scratch not worth it.
_BLAS_MIN = 1 << 14
_BLAS_AXPY = None  # dtype -> ?axpy, or {} without SciPy; imported on first use
_scratch = threading.local()


def _blas_axpy():
    global _BLAS_AXPY
    if _BLAS_AXPY is None:
        try:
            from scipy.linalg.blas import daxpy, saxpy

            _BLAS_AXPY = {np.dtype(np.float64): daxpy, np.dtype(np.float32): saxpy}
        except ImportError:  # pragma: no cover - exercised only without SciPy
            _BLAS_AXPY = {}
    return _BLAS_AXPY


def axpy(alpha, x: np.ndarray, y: np.ndarray, subtract: bool = False) -> None:
    """``y += alpha * x`` (``y -= alpha * x`` when ``subtract``) in place, rounded as NumPy.

    ``x`` and ``y`` are 1-D of one floating dtype; ``alpha`` is a Python scalar or a
    0-d array of that dtype.
    """
    n = y.shape[0]
    f = (_BLAS_AXPY if _BLAS_AXPY is not None else _blas_axpy()).get(y.dtype)
    if (f is None or n < _BLAS_MIN or y.ndim != 1 or x.dtype != y.dtype
            or not (y.flags.c_contiguous and x.flags.c_contiguous)):
        if subtract:
            y -= alpha * x
        else:
            y += alpha * x
        return
    s = getattr(_scratch, "buf", None)
    if s is None or s.dtype != y.dtype or s.shape[0] < n:
        s = _scratch.buf = np.empty(n, dtype=y.dtype)
    s = s[:n]
    np.multiply(x, alpha, out=s)
    f(s, y, a=-1.0 if subtract else 1.0)


def dense_matvec(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """y = A @ x for a 2-D ``a`` and 1-D ``x`` of one floating dtype."""
    return np.asarray(np.matmul(a, x))


def register(registry, backend_name: str) -> None:
    for variant in VARIANTS:
        registry.register("matvec", backend_name, _dtypes.FLOATING, dense_matvec, variant=variant)
    registry.register("axpy", backend_name, _dtypes.FLOATING, axpy)
