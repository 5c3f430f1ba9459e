"""The matvec routing table: which registered matvec/spmv variant each solver uses, per matrix kind.

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
kept 1.24-1.56x. These figures are the seed's, from that GPU, for solvers fused into
cooperative (grid-synced) kernels.

tessera_array's first GPU backend (OpenCL) launches one kernel per product, with no
grid sync, and was measured on an NVIDIA H200 (NVIDIA's OpenCL driver 580.159.04).
The choice then depends on the matrix kind rather than the solver, so the table is
per solver *and* kind (``"dense"``: op ``matvec``; ``"csr"``: op ``spmv``). Whole
solves, ``rtol=1e-30``, medians of 5 (``.devrun``-style script, 2026-11-30), scalar ->
warp:

============================  ======================  ==============
solve                         scalar -> warp (ms)     warp / scalar
============================  ======================  ==============
cg, dense SPD 2049, 50 it     17.9 -> 15.2            0.85
gmres, dense SPD 2049, 2x20   85.8 -> 72.0            0.84
cg, Poisson 512^2 CSR, 50 it  89.9 -> 88.7            0.99
gmres, Poisson 512^2 CSR      453.0 -> 444.3          0.98
============================  ======================  ==============

and the kernels alone against cuBLAS/cuSPARSE (``benchmarks/opencl_vs_cupy.py``, CuPy
time / OpenCL time): dense matvec warp 0.79-1.16, scalar 0.09-0.22; CSR spmv on
Poisson 1024^2 and 2048^2 scalar 1.48-1.83, warp 0.89-1.44. So dense products use
``warp`` in every solver; CSR products keep the seed's split (``scalar`` for CG and
the CG-like solvers, ``warp`` for GMRES), where the whole solves differ by 1-2%,
within noise, and the kernels favour scalar. A backend that fuses a solver into
grid-synced kernels (the seed's setting) re-measures and updates this table.

On the NumPy backend every variant name reaches the same BLAS gemv / SciPy CSR
routine (see ``backends/numpy/matvec.py`` and ``backends/numpy/sparse.py``), so the
table changes nothing there but must still resolve.

The solvers without a measurement (bicg, bicgstab, cgs, minres) follow CG: their
per-iteration structure (one or two matvecs, a few dot products, each followed by a
host check) is CG's, not GMRES's long Arnoldi sweep.
"""

from __future__ import annotations

from types import MappingProxyType

__all__ = ["KINDS", "MATVEC_ROUTING", "matvec_variant"]

KINDS = ("dense", "csr")


def _row(dense: str, csr: str):
    return MappingProxyType({"dense": dense, "csr": csr})


MATVEC_ROUTING = MappingProxyType({
    # dense: H200 OpenCL, warp 0.84-0.85x of scalar's solve time; csr: the seed (RTX 5070,
    # fused CG: warp 0.44-0.63x of scalar's speed) and the H200 kernels (scalar faster)
    "cg": _row("warp", "scalar"),
    "gmres": _row("warp", "warp"),     # seed: warp 1.22-1.56x of scalar; H200 dense 0.84
    "bicg": _row("warp", "scalar"),      # not measured: CG-like iteration
    "bicgstab": _row("warp", "scalar"),  # not measured: CG-like iteration
    "cgs": _row("warp", "scalar"),       # not measured: CG-like iteration
    "minres": _row("warp", "scalar"),    # not measured: CG-like (Lanczos) iteration
})


def matvec_variant(solver: str, kind: str) -> str:
    """The variant ``solver`` uses for a ``kind`` ("dense" or "csr") matrix; KeyError names
    the known solvers and kinds."""
    try:
        return MATVEC_ROUTING[solver][kind]
    except KeyError:
        raise KeyError(
            f"matvec_variant: no routing for solver={solver!r}, kind={kind!r}. Known: "
            f"solvers {sorted(MATVEC_ROUTING)}, kinds {list(KINDS)}"
        ) from None
