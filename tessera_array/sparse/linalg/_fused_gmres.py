"""The contract of the ``gmres_fused`` op: a device runs gmres's restart cycles itself.

A backend may register op ``gmres_fused`` (family ``matvec``) for floating dtypes (the
CUDA backend: a persistent cooperative kernel, ``kernels/cuda/gmres.cu``).
:func:`tessera_array.sparse.linalg.gmres` calls its launcher once per solve, for a
tessera ``b`` of a registered dtype with ``products="device"``, after its own set-up
(``||b||``, ``atol``, ``||M b||`` and the first inner tolerance ``ptol``, read on the
host as the generic loop reads them)::

    solve = launcher(x, b, A, M, restart=, maxiter=, inner_limit=, atol=, ptol=, eps=,
                     nonzero=)                           # FusedGMRESSolve, or None
    report = solve.run(cycles, presids=False)            # GMRESReport, <= cycles cycles

``x``, ``b``
    Native 1-D contiguous buffers of one floating dtype, length and device: the start
    (updated in place: after each run the iterate its report describes) and the right-
    hand side (never written). ``nonzero``: whether ``x`` holds anything but zeros
    (the first residual is then ``b - A x``, else ``b``).
``A``, ``M``
    :class:`~._fused.FusedOperand` (``M`` None without a preconditioner); a backend
    that needs stored matrices declines the others.
``restart``, ``maxiter``, ``inner_limit``
    The restart length, the budget of restart cycles, and the budget of inner
    iterations (``callback_type='legacy'``, where SciPy's ``maxiter`` counts those;
    -1: none).
``atol``, ``ptol``, ``eps``
    The outer threshold (SciPy's ``max(atol, rtol ||b||)``), the first inner one
    (``||M b|| min(1, atol / ||b||)``) and the dtype's machine epsilon (the breakdown
    test ``||w_orthogonalized|| <= eps ||w||``).

The iteration is the generic loop's, ``_gmres._gmres_loop``, test for test (its
Arnoldi process may orthogonalize otherwise, e.g. CGS2 instead of MGS: iterates agree
with the generic loop's to rounding). ``run(cycles)`` (``cycles >= 1``, at most
``solve.cycles_max``) advances by up to that many restart cycles on the device, reads
back to the host once (``# sync``), and returns a :class:`GMRESReport`; after a report
whose status is not RUNNING the solve is finished and ``run`` is not called again.
``presids=True`` asks for the inner residual estimates of the run (callback types
``'legacy'`` and ``'pr_norm'``).

A launcher may also carry ``launcher.plain(b, A, *, restart, maxiter, rtol, atol, eps)``
for ``gmres(A, b)`` from x = 0 without M or callback (``_gmres._gmres_plain``): the same
solve, whose first run takes ||b|| and sets ``max(atol, rtol ||b||)`` and the first inner
tolerance on the device (no read before the launch). Its x is ``solve.x``; its first
report's first residual norm is ||b|| (not finite: the caller's general path answers).
"""

from __future__ import annotations

import enum
from typing import NamedTuple, Protocol

__all__ = ["FusedGMRESLauncher", "FusedGMRESSolve", "GMRESReport", "GMRESStatus"]


class GMRESStatus(enum.IntEnum):
    """Where a fused gmres solve stands after a ``run``."""

    RUNNING = 1  # cycles are left and no test stopped it: call run() again
    MAXITER = 2  # stopped unconverged: budget spent or a breakdown (gmres's info = maxiter)
    CONVERGED = 0  # ||r|| below atol (the first test: <, later ones: <=)
    NONFINITE = -20  # ||r|| or ||A v|| not finite


class GMRESReport(NamedTuple):
    """What one ``run`` of a fused gmres solve reports."""

    status: GMRESStatus
    iterations: int  # inner iterations over the whole solve so far (gmres's count)
    cycles: int  # restart cycles completed over the whole solve so far
    residual_norms: tuple  # ||r|| of this run: the first test's (first run), one a cycle
    presids: tuple  # this run's inner residual estimates (with presids=True; else ())
    x_points: int  # cycles of this run that reached SciPy's callback(x) point


class FusedGMRESSolve(Protocol):
    cycles_max: int  # the most cycles one run takes

    def run(self, cycles: int, presids: bool = False) -> GMRESReport:
        """Advance by up to ``cycles`` restart cycles; one host read, at the end."""


class FusedGMRESLauncher(Protocol):
    def __call__(self, x, b, A, M, *, restart: int, maxiter: int, inner_limit: int,
                 atol: float, ptol: float, eps: float,
                 nonzero: bool) -> FusedGMRESSolve | None:
        """A fused gmres solve (module docstring), or None to decline."""
