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
AXPY_SCRATCH_MIN = 1 << 16
_scratch = threading.local()


def axpy(alpha, x: np.ndarray, y: np.ndarray, subtract: bool = False) -> None:
    """``y += alpha * x`` (``y -= alpha * x`` when ``subtract``) in place, rounded as NumPy.

    ``x`` and ``y`` are 1-D of one floating dtype; ``alpha`` is a Python scalar or a
    0-d array of that dtype.
    """
    n = y.shape[0]
    if n < AXPY_SCRATCH_MIN or y.ndim != 1 or x.dtype != y.dtype:
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
    (np.subtract if subtract else np.add)(y, s, out=y)


def dense_matvec(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """y = A @ x for a 2-D ``a`` and 1-D ``x`` of one floating dtype."""
    return np.asarray(np.matmul(a, x))


def register(registry, backend_name: str) -> None:
    for variant in VARIANTS:
        registry.register("matvec", backend_name, _dtypes.FLOATING, dense_matvec, variant=variant)
    registry.register("axpy", backend_name, _dtypes.FLOATING, axpy)
