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

import numpy as np

from tessera_array import _dtypes

VARIANTS = ("default", "scalar", "warp")

# One call of SciPy's routine, on purpose. Cutting the rows into ranges that threads
# compute (csr_matvec releases the GIL; the sums are bit-identical) is 2x faster in
# isolation on Poisson 1024^2 (16-core Xeon, 2 cores: 7.85 -> 3.88 ms; 16: 4.99 ->
# 1.42 ms with 8 threads), but inside cg and gmres, between NumPy's BLAS dot products,
# it lost: tessera/SciPy per iteration went from 0.98 / 0.99 to 1.09 / 1.22 (2 cores)
# and from 1.31 to 1.96 on Poisson 256^2 float32 (threaded axpy in the same run;
# likely OpenBLAS's spinning worker threads contending with the pool). Not retried.

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
        y = np.zeros(m, dtype=data.dtype)
        routines[0](m, n, indptr, indices, data, x, y)
        return y
    k = x.shape[1]
    y = np.zeros((m, k), dtype=data.dtype)
    routines[1](m, n, k, indptr, indices, data, np.ascontiguousarray(x).ravel(), y.ravel())
    return y


def register(registry, backend_name: str) -> None:
    for variant in VARIANTS:
        registry.register("spmv", backend_name, _dtypes.FLOATING, spmv, variant=variant)
    registry.register("spmv", backend_name, _dtypes.INTEGER, spmv)
