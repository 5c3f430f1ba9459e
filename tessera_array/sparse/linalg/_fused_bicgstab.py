"""The contract of the ``bicgstab_fused`` op: a device runs BiCGSTAB iterations itself.

A backend may register op ``bicgstab_fused`` (family ``matvec``) for floating dtypes (the
CUDA backend: a persistent cooperative kernel, ``kernels/cuda/bicgstab.cu``).
:func:`tessera_array.sparse.linalg.bicgstab` calls its launcher once per solve, for a
tessera ``b`` of a registered dtype with ``products="device"``, after its own set-up
(``||b||`` and ``atol`` read on the host, the first residual ``r`` formed)::

    solve = launcher(x, r, A, M, atol=, rhotol=, omegatol=, maxiter=)  # or None
    report = solve.run(k)                              # BiCGSTABReport, <= k iterations

``x``, ``r``
    Native 1-D contiguous buffers of one floating dtype, length and device, owned by
    the solver: the start and its residual ``b - A x``, both updated in place (after
    each run, the iterate its report describes and its recurrence residual).
``A``, ``M``
    :class:`~._fused.FusedOperand` (``M`` None without a preconditioner); a backend that
    needs stored matrices declines the others.
``atol``, ``rhotol``, ``omegatol``, ``maxiter``
    SciPy's thresholds (``max(atol, rtol ||b||)``; ``eps**2`` twice) and the budget.

Iteration ``i`` is the generic loop's (``_isolve.bicgstab``), test for test: ``||r|| <
atol`` (CONVERGED, ``i``), ``||r||`` not finite (NONFINITE, ``i``), ``|rho| < rhotol``
(RHO, ``i``), ``|omega| < omegatol`` (OMEGA, ``i``), ``rtilde^H v = 0`` (OMEGA, ``i``),
``||s|| < atol`` (CONVERGED, ``i + 1``, x moved by ``alpha phat``); after ``maxiter``
iterations MAXITER. ``run(k)`` (``1 <= k <= solve.k_max``) advances by up to ``k``
iterations on the device, reads back once (``# sync``), and returns a
:class:`BiCGSTABReport`; after a report whose status is not RUNNING the solve is
finished and ``run`` is not called again.
"""

from __future__ import annotations

import enum
from typing import NamedTuple, Protocol

__all__ = ["BiCGSTABReport", "BiCGSTABStatus", "FusedBiCGSTABLauncher",
           "FusedBiCGSTABSolve"]


class BiCGSTABStatus(enum.IntEnum):
    """Where a fused bicgstab solve stands after a ``run`` (stopped: bicgstab's info)."""

    RUNNING = 1
    MAXITER = 2  # the budget spent (bicgstab's info = maxiter)
    CONVERGED = 0
    NONFINITE = -20
    RHO = -10  # |rtilde^H r| < rhotol
    OMEGA = -11  # |omega| < omegatol, or rtilde^H v = 0


class BiCGSTABReport(NamedTuple):
    """What one ``run`` of a fused bicgstab solve reports."""

    status: BiCGSTABStatus
    iterations: int  # over the whole solve so far (bicgstab's count)
    residual_norms: tuple  # this run's ||r|| at each test, and ||s|| where it converged


class FusedBiCGSTABSolve(Protocol):
    k_max: int  # the most iterations one run takes

    def run(self, k: int) -> BiCGSTABReport:
        """Advance by up to ``k`` iterations; one host read, at the end."""


class FusedBiCGSTABLauncher(Protocol):
    def __call__(self, x, r, A, M, *, atol: float, rhotol: float, omegatol: float,
                 maxiter: int) -> FusedBiCGSTABSolve | None:
        """A fused bicgstab solve (module docstring), or None to decline."""
