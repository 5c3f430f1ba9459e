"""Sparse matvec (spmv) launchers of the NumPy backend.

``spmv(data, indices, indptr, shape, x) -> y`` computes ``y = A @ x`` for a CSR
matrix ``A`` of ``shape = (m, n)`` given by ``data``/``indices``/``indptr`` and a
dense ``x`` of shape ``(n,)`` or ``(n, k)``; ``y`` has shape ``(m,)`` or ``(m, k)``.
The front end (:class:`tessera_array.sparse.csr_array`) has already cast ``data``
and ``x`` to one dtype and checked the shapes.

The work is done by SciPy's compiled CSR routines (``csr_matvec`` /
``csr_matvecs``, the ones ``scipy.sparse`` itself calls for ``A @ x``). Without
SciPy a NumPy reference runs instead (a gather, a product and a segmented sum),
slower and summing in another order.

GPU backends register ``scalar`` (one thread per row) and ``warp`` (one warp per
row) variants; on the CPU every variant name reaches the same routine, so the
per-solver routing table of :mod:`tessera_array.sparse._routing` resolves here too.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from tessera_array import _dtypes

from . import _threads

VARIANTS = ("default", "scalar", "warp")

# Rows are cut into ranges of about equal nnz that the pool computes (csr_matvec
# releases the GIL; each row is summed as in one call, so the result is bit-identical
# to SciPy's). This loses when OpenBLAS's spinning workers hold the other cores: on a
# 16-core Xeon taskset to 2 cores, tessera/SciPy per cg iteration went from 0.98 to 1.09
# with this cut and OpenBLAS's own threaded dots. The solvers' dots now run with
# OpenBLAS held (backends/numpy/_threads.py); the table there has the figures.
# Stored entries before the rows are shared among threads. Alone, Poisson CSR (us,
# serial / 2 threads, 2-core EPYC): 128^2 96 / 363, 256^2 342 / 360, 512^2 1919 / 1174,
# 1024^2 9157 / 5754 (float64); float32 95 / 166, 354 / 323, 1478 / 900, 6351 / 3729.
SPMV_PARALLEL_MIN = 1 << 20

_routines = None  # (csr_matvec, csr_matvecs), or () without SciPy; imported on first use


def _scipy_routines():
    """SciPy's CSR routines, imported on the first spmv (so loading the backend does not
    import SciPy); () when SciPy is absent."""
    global _routines
    if _routines is None:
        try:
            from scipy.sparse._sparsetools import csr_matvec, csr_matvecs

            _routines = (csr_matvec, csr_matvecs)
        except ImportError:  # pragma: no cover - exercised only without SciPy
            _routines = ()
    return _routines


def _spmv_reference(data, indices, indptr, shape, x):
    """The same product in plain NumPy (no SciPy): per-row sums of data * x[indices]."""
    m = shape[0]
    prod = data * x[indices] if x.ndim == 1 else data[:, None] * x[indices]
    out = np.zeros((m,) + x.shape[1:], dtype=np.result_type(data, x))
    counts = np.diff(indptr)
    rows = np.repeat(np.arange(m), counts)
    np.add.at(out, rows, prod)
    return out


def spmv(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple,
         x: np.ndarray) -> np.ndarray:
    """y = A @ x for CSR ``A`` and a 1-D or 2-D ``x`` of ``data``'s dtype."""
    m, n = shape
    routines = _routines if _routines else _scipy_routines()
    if not routines:
        return _spmv_reference(data, indices, indptr, shape, x)
    if x.ndim == 1:
        return spmv_into(data, indices, indptr, shape, x, None)
    k = x.shape[1]
    y = np.zeros((m, k), dtype=data.dtype)
    routines[1](m, n, k, indptr, indices, data, np.ascontiguousarray(x).ravel(), y.ravel())
    return y


def spmv_into(data, indices, indptr, shape, x, y):
    """``y = A @ x`` for a 1-D ``x``, written into ``y`` (C-contiguous ``(m,)`` of data's
    dtype; None: a new array) and returned: the same sums as :func:`spmv`'s.

    cg's loop on ndarrays (``HostCG``) passes the same ``y`` every iteration instead of
    taking a new vector from the allocator each product.
    """
    m, n = shape
    routines = _routines if _routines else _scipy_routines()
    if not routines:
        r = _spmv_reference(data, indices, indptr, shape, x)
        if y is None:
            return r
        y[...] = r
        return y
    nnz = data.shape[0]
    nt = _threads.threads()
    if nnz < SPMV_PARALLEL_MIN or nt < 2 or m < 2 * nt:
        if y is None:
            y = np.zeros(m, dtype=data.dtype)
        else:
            y.fill(0)
        routines[0](m, n, indptr, indices, data, x, y)
        return y
    if y is None:
        y = np.empty(m, dtype=data.dtype)
    # Row cuts at equal shares of the stored entries.
    # (The keys in indptr's dtype: other keys would make searchsorted cast indptr.)
    keys = np.array([nnz * i // nt for i in range(1, nt)], dtype=indptr.dtype)
    cuts = np.searchsorted(indptr, keys).tolist()
    bounds = [0, *cuts, m]
    ranges = [(lo, hi) for lo, hi in pairwise(bounds) if hi > lo]
    mv = routines[0]

    def rows(lo, hi):
        part = y[lo:hi]
        part.fill(0)
        mv(hi - lo, n, indptr[lo:hi + 1], indices, data, x, part)

    _threads.run_parts(rows, ranges)
    return y


def register(registry, backend_name: str) -> None:
    for variant in VARIANTS:
        registry.register("spmv", backend_name, _dtypes.FLOATING, spmv, variant=variant)
    registry.register("spmv", backend_name, _dtypes.INTEGER, spmv)
