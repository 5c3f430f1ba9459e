"""The matvec routing table: which registered matvec/spmv variant each solver uses, per matrix kind.

Every Krylov solver of :mod:`tessera_array.sparse.linalg` applies ``A`` through the
kernel registry, ops ``matvec`` (dense, kind ``"dense"``) and ``spmv`` (CSR, kind
``"csr"``), with the variant named here. The table is the one place the choice is
made; ``tests/test_krylov.py`` pins it.

Default rows (:data:`MATVEC_ROUTING`, every backend without its own row), measured on
an NVIDIA H200 through NVIDIA's OpenCL driver, whole solves, ``rtol=1e-30``, medians
of 5, scalar -> warp (ms):

============================  ======================  ==============
solve                         scalar -> warp (ms)     warp / scalar
============================  ======================  ==============
cg, dense SPD 2049, 50 it     17.9 -> 15.2            0.85
gmres, dense SPD 2049, 2x20   85.8 -> 72.0            0.84
cg, Poisson 512^2 CSR, 50 it  89.9 -> 88.7            0.99
gmres, Poisson 512^2 CSR      453.0 -> 444.3          0.98
============================  ======================  ==============

and the kernels alone against cuBLAS/cuSPARSE (CuPy time / OpenCL time): dense warp
0.79-1.16, scalar 0.09-0.22; CSR on Poisson 1024^2 and 2048^2 scalar 1.48-1.83, warp
0.89-1.44. So dense products use ``warp`` in every solver; CSR products keep ``scalar``
for CG and the CG-like solvers (bicg, bicgstab, cgs, minres: not measured, their
iteration is CG's shape) and ``warp`` for GMRES, where whole solves differ by 1-2% and
an earlier GPU with grid-synced solvers measured warp 1.22-1.56x faster for GMRES and
0.44-0.63x for CG. On the NumPy backend every variant reaches the same BLAS gemv /
SciPy CSR routine, so the table changes nothing there but must still resolve. How these
figures were taken, and what came before: ``benchmarks/NOTES.md``, section "Krylov
routing and fused CG".

The row ``matmul`` is not a solver's: it is the variant of a csr_array's own products
(``A @ x``, ``x @ A``, ``aslinearoperator(A)``), ``default`` unless a backend registers
a row measured faster (CUDA: ``warp``, where cuSPARSE through CuPy rebuilds its matrix
and checks its format on the host at every call).

Backend rows. A backend whose kernels favour another choice (say a persistent, grid-
synced CG on CUDA) registers its own rows with :func:`register_routing`, its
measurement beside the call::

    register_routing("cuda", "cg", {"dense": "warp", "csr": "warp"},
                     measured="H200, Poisson 1024^2 cg: warp 0.61 ms/it, scalar 0.74")

A backend row overrides the default row of that solver on that backend only; solvers
it names no row for keep the default. :func:`routing` gives the table one backend sees,
:func:`matvec_variant` one entry of it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

__all__ = ["KINDS", "MATVEC_ROUTING", "BackendRow", "backend_rows", "matvec_variant",
           "register_routing", "routing", "unregister_routing"]

KINDS = ("dense", "csr")


def _row(dense: str, csr: str):
    return MappingProxyType({"dense": dense, "csr": csr})


MATVEC_ROUTING = MappingProxyType({
    # dense: H200 OpenCL, warp 0.84-0.85x of scalar's solve time; csr: scalar kernels
    # faster on the H200 (1.48-1.83 vs 0.89-1.44 of cuSPARSE), whole solves within 1-2%
    "cg": _row("warp", "scalar"),
    "gmres": _row("warp", "warp"),       # H200 dense 0.84; grid-synced GMRES: warp 1.22-1.56x
    "bicg": _row("warp", "scalar"),      # not measured: CG-like iteration
    "bicgstab": _row("warp", "scalar"),  # not measured: CG-like iteration
    "cgs": _row("warp", "scalar"),       # not measured: CG-like iteration
    "minres": _row("warp", "scalar"),    # not measured: CG-like (Lanczos) iteration
    # not a solver: ``A @ x``, ``x @ A`` and ``aslinearoperator(A)`` of a csr_array (the
    # library's own BLAS / SciPy / cuSPARSE unless a backend measured better)
    "matmul": _row("default", "default"),
})


class BackendRow(NamedTuple):
    """One backend's own row for one solver."""

    row: Mapping  # kind ("dense", "csr") -> variant name
    measured: str  # the measurement that justifies it (device, case, figures)


_lock = threading.Lock()
_backend_rows: dict = {}  # backend name -> {solver: BackendRow}


def _check_solver(func: str, solver: str) -> None:
    if solver not in MATVEC_ROUTING:
        raise KeyError(f"{func}: no routing for solver={solver!r}. Known: solvers "
                       f"{sorted(MATVEC_ROUTING)}")


def register_routing(backend: str, solver: str, row: Mapping, *, measured: str,
                     replace: bool = False) -> None:
    """Give ``backend`` its own row for ``solver``: ``row`` maps every kind of
    :data:`KINDS` to a variant name; ``measured`` says what measurement justifies it.

    Raises KeyError for an unknown solver, ValueError for a row that misses or adds a
    kind, for an empty ``measured``, or for a second row of the same backend and solver
    without ``replace=True``.
    """
    _check_solver("register_routing", solver)
    if not isinstance(backend, str) or not backend:
        raise TypeError(f"register_routing: backend must be a backend's name. Received: "
                        f"backend={backend!r}")
    if not isinstance(row, Mapping) or set(row) != set(KINDS) or not all(
            isinstance(v, str) and v for v in row.values()):
        raise ValueError(f"register_routing: row must map each kind {list(KINDS)} to a "
                         f"variant name. Received: row={dict(row) if isinstance(row, Mapping) else row!r}")
    if not isinstance(measured, str) or not measured.strip():
        raise ValueError("register_routing: measured must say which measurement justifies "
                         f"the row. Received: measured={measured!r}")
    with _lock:
        rows = _backend_rows.setdefault(backend, {})
        if solver in rows and not replace:
            raise ValueError(f"register_routing: {backend} already has a row for {solver}: "
                             f"{dict(rows[solver].row)} (pass replace=True to change it)")
        rows[solver] = BackendRow(MappingProxyType({k: row[k] for k in KINDS}), measured)


def unregister_routing(backend: str) -> None:
    """Drop every row of ``backend`` (it then sees the default rows)."""
    with _lock:
        _backend_rows.pop(backend, None)


def backend_rows(backend: str) -> Mapping:
    """``{solver: BackendRow}``: the rows ``backend`` registered (empty: none)."""
    with _lock:
        return MappingProxyType(dict(_backend_rows.get(backend, {})))


def routing(backend: str | None = None) -> Mapping:
    """The table ``backend`` sees (``{solver: {kind: variant}}``): its own rows where it
    has them, the default rows elsewhere; ``None``: the default rows."""
    own = {} if backend is None else backend_rows(backend)
    return MappingProxyType({s: own[s].row if s in own else row
                             for s, row in MATVEC_ROUTING.items()})


def matvec_variant(solver: str, kind: str, backend: str | None = None) -> str:
    """The variant ``solver`` uses for a ``kind`` ("dense" or "csr") matrix on ``backend``
    (its own row, else the default one); KeyError names the known solvers and kinds."""
    own = _backend_rows.get(backend) if backend is not None else None  # (reads need no lock)
    hit = own.get(solver) if own else None
    try:
        return (hit.row if hit is not None else MATVEC_ROUTING[solver])[kind]
    except KeyError:
        raise KeyError(
            f"matvec_variant: no routing for solver={solver!r}, kind={kind!r}. Known: "
            f"solvers {sorted(MATVEC_ROUTING)}, kinds {list(KINDS)}"
        ) from None
