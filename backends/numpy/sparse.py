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

``stencil(data, indices, indptr, shape)`` finds the runs of rows of a square real CSR
matrix that are one stencil (2-D/3-D Poisson: the same few diagonals; :class:`Stencil`,
its loops in C: ``_stencil_c.c``), for the solvers' repeated products: csr_matvec's bits,
the runs' rows from contiguous loads and no column indices (2-D Poisson 256^2 float64,
2-core EPYC: 111 us a product against csr_matvec's 203; NOTES.md).

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


# ---- a stencil's product from its diagonals (the solvers' repeated products) -----------

# At most this many diagonals, and at most this share of rows off the stencil (they take
# the CSR loop): past either, the CSR routine is kept.
# (2-D Poisson 64^2: 5 diagonals, 6% of the rows off; 3-D 7-point 16^3: 7, 33%.)
STENCIL_MAXD = 16
STENCIL_MARKED_MAX = 0.5
# Finding the runs costs about one product (a pass over the row starts and indices) and
# some 40 us of set-up; a run's product saves 25-45% of csr_matvec's (2-D Poisson,
# 2-core EPYC; NOTES.md). So a solve takes it from 8 products, and from enough work
# (products x stored entries) that the set-up is paid back: Poisson 256^2 from 8
# products, 64^2 from ~100.
STENCIL_MIN_PRODUCTS = 8
STENCIL_MIN_WORK = 1 << 21


def stencil_pays(products: int, nnz: int) -> bool:
    """Whether a solve of at most ``products`` products of a matrix of ``nnz`` stored
    entries takes :func:`stencil` (see :data:`STENCIL_MIN_PRODUCTS`)."""
    return products >= STENCIL_MIN_PRODUCTS and products * nnz >= STENCIL_MIN_WORK

_stencil_mod = []  # [the _stencil_c module, or None], set on first use


def _stencil_c():
    if not _stencil_mod:
        try:
            from . import _stencil_c as mod
        except ImportError:
            mod = None
        _stencil_mod.append(mod)
    return _stencil_mod[0]


class Stencil:
    """A square real CSR matrix whose rows are mostly one stencil (the same few diagonals):
    ``into(x, y)`` is :func:`spmv_into`'s product, bit for bit (backends/numpy/_stencil_c.c
    says why), reading the stencil rows' values without their column indices.

    The runs of consecutive stencil rows come from the values and the stencil; every other
    row (an edge, a missing entry, unsorted or repeated columns) from the CSR loop. The matrix's arrays are read again by each product: they must not change
    while this is used (one solve's products)."""

    __slots__ = ("data_at", "f64", "i64", "keep", "mod", "n", "nd", "off_at", "parts",
                 "ptrs", "rest", "rest_at")

    def __init__(self, mod, data, indices, indptr, off, runs, rest):
        n = indptr.shape[0] - 1
        self.mod, self.n, self.nd = mod, n, off.shape[0]
        self.f64 = data.dtype == np.float64
        self.i64 = indptr.dtype == np.int64
        self.keep = (data, indices, indptr, off, runs, rest)  # (the addresses' owners)
        self.off_at, self.data_at = off.ctypes.data, data.ctypes.data
        self.rest, self.rest_at = rest.shape[0], rest.ctypes.data
        self.ptrs = (indptr.ctypes.data, indices.ctypes.data, data.ctypes.data)
        # the runs (address, count) in one part, or cut in two of about equal rows for the
        # pool; empty parts left out
        at, count = runs.ctypes.data, runs.shape[0]
        parts = [(at, count)]
        if count > 1 and _threads.threads() > 1 and n * self.nd >= SPMV_PARALLEL_MIN:
            rows = np.cumsum(runs[:, 1] - runs[:, 0])
            cut = int(np.searchsorted(rows, rows[-1] // 2)) + 1
            parts = [(at, cut), (at + 24 * cut, count - cut)]
        self.parts = [p for p in parts if p[1]]

    def into(self, x, y):
        """``y = A @ x`` (``x``, ``y``: contiguous vectors of n elements, A's dtype)."""
        mod, n, nd, off, data, f64 = (self.mod, self.n, self.nd, self.off_at, self.data_at,
                                      self.f64)
        def part(at, count):
            mod.runs(n, count, at, nd, off, data, x, y, f64)

        if len(self.parts) > 1:
            _threads.run_parts(part, self.parts)
        elif self.parts:
            part(*self.parts[0])
        if self.rest:
            mod.csr(n, self.rest, self.rest_at, *self.ptrs, x, y, self.i64, f64)
        return y


def stencil(data, indices, indptr, shape) -> Stencil | None:
    """:class:`Stencil` of a CSR matrix, or None where it does not apply: no compiled
    module, no SciPy (whose sums it repeats; the reference sums otherwise), not square,
    not float32/float64 data, index arrays not both int32 or both int64, an empty matrix,
    a stencil (the columns of the fullest of 3 x 64 rows spread over the matrix, less the
    row) of more than :data:`STENCIL_MAXD` entries, or more than
    :data:`STENCIL_MARKED_MAX` of the rows off it. One pass over the row starts and column indices (less than a product)."""
    mod = _stencil_c()
    m, n = shape
    routines = _routines if _routines else _scipy_routines()
    if (mod is None or not routines or m != n or n == 0 or data.shape[0] == 0
            or data.dtype not in (np.float32, np.float64)
            or indptr.dtype != indices.dtype or indptr.dtype not in (np.int32, np.int64)
            or not all(a.flags.c_contiguous for a in (data, indices, indptr))
            or indptr.shape != (n + 1,) or indices.shape != data.shape):
        return None
    r, most = 0, -1
    for lo in sorted({n // 4, n // 2, 3 * n // 4}):  # (64 rows at each: past any edge row)
        counts = np.diff(indptr[lo:min(n, lo + 64) + 1])
        k = int(np.argmax(counts))
        if counts[k] > most:
            r, most = lo + k, int(counts[k])
    off = indices[indptr[r]:indptr[r + 1]].astype(np.int64) - r
    if not 1 <= off.shape[0] <= STENCIL_MAXD or np.any(off[1:] <= off[:-1]):
        return None
    runs, rest = mod.scan(n, indptr.ctypes.data, indices.ctypes.data,
                          indptr.dtype == np.int64, off.shape[0], off.ctypes.data)
    runs = np.frombuffer(runs, dtype=np.int64).reshape(-1, 3)
    rest = np.frombuffer(rest, dtype=np.int64)
    if rest.shape[0] > STENCIL_MARKED_MAX * n:
        return None
    return Stencil(mod, data, indices, indptr, off, runs, rest)


def register(registry, backend_name: str) -> None:
    for variant in VARIANTS:
        registry.register("spmv", backend_name, _dtypes.FLOATING, spmv, variant=variant)
    registry.register("spmv", backend_name, _dtypes.INTEGER, spmv)
