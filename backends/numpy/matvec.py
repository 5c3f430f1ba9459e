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

import numpy as np

from tessera_array import _dtypes

VARIANTS = ("default", "scalar", "warp")


def dense_matvec(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    """y = A @ x for a 2-D ``a`` and 1-D ``x`` of one floating dtype."""
    return np.asarray(np.matmul(a, x))


def register(registry, backend_name: str) -> None:
    for variant in VARIANTS:
        registry.register("matvec", backend_name, _dtypes.FLOATING, dense_matvec, variant=variant)
