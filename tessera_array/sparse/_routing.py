"""The per-solver matvec routing table: which registered matvec/spmv variant each solver uses.

Every Krylov solver of :mod:`tessera_array.sparse.linalg` applies ``A`` through the
kernel registry, ops ``matvec`` (dense) and ``spmv`` (CSR), with the variant named
here. The table is the one place the choice is made; ``tests/test_krylov.py`` pins it,
so the solvers cannot silently be merged onto one kernel again.

Why they differ (the seed's lesson). A warp-per-row matvec was shipped for both CG
and GMRES on a reasoned claim (32 lanes share one row, so fewer memory transactions)
that had not been measured. Measured afterwards through the seed project on an
NVIDIA RTX 5070 (sm_120), medians of 9 repetitions, device-event timing, time per
solve, scalar-row -> warp-per-row:

==============  ===================  ==================
benchmark       scalar -> warp (ms)  warp vs scalar
==============  ===================  ==================
dense_cg 2049   1.011 -> 2.277       0.44x (regression)
dense_cg 1025   0.534 -> 1.073       0.50x (regression)
dense_cg 513    0.306 -> 0.488       0.63x (regression)
dense_gmres 2049  0.967 -> 0.621     1.56x (win)
dense_gmres 1025  0.579 -> 0.400     1.45x (win)
dense_gmres 513   0.367 -> 0.300     1.22x (win)
==============  ===================  ==================

A cooperative launch caps the grid at what stays resident, so warp-per-row also
buys 32x fewer rows in flight; GMRES absorbs that, CG (which grid-syncs more per
iteration) does not. After the split CG measured 1.00-1.06x of scalar and GMRES
kept 1.24-1.56x. These figures are the seed's, from that GPU; they have not been
re-measured on tessera_array's own GPU backends (none exists yet), and whoever
adds one re-measures and updates this table with its own figures.

On the NumPy backend every variant name reaches the same BLAS gemv / SciPy CSR
routine (see ``backends/numpy/matvec.py`` and ``backends/numpy/sparse.py``), so the
table changes nothing there but must still resolve.

The solvers without a measurement use ``scalar``: their per-iteration structure
(one or two matvecs, a few dot products, each followed by a host check) is CG's,
not GMRES's long Arnoldi sweep. Unmeasured; re-measure with a GPU backend.
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = ["MATVEC_ROUTING", "matvec_variant"]

MATVEC_ROUTING = MappingProxyType({
    "cg": "scalar",        # measured (seed, RTX 5070): warp was 0.44-0.63x of scalar
    "gmres": "warp",       # measured (seed, RTX 5070): warp was 1.22-1.56x of scalar
    "bicg": "scalar",      # not measured: CG-like iteration
    "bicgstab": "scalar",  # not measured: CG-like iteration
    "cgs": "scalar",       # not measured: CG-like iteration
    "minres": "scalar",    # not measured: CG-like (Lanczos) iteration
})


def matvec_variant(solver: str) -> str:
    """The matvec/spmv variant ``solver`` uses; KeyError names the known solvers."""
    try:
        return MATVEC_ROUTING[solver]
    except KeyError:
        raise KeyError(
            f"matvec_variant: no routing for solver={solver!r}. Known: {sorted(MATVEC_ROUTING)}"
        ) from None
