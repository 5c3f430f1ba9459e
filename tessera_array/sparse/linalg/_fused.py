"""The contract of the ``cg_fused`` op: a device runs conjugate-gradient iterations itself.

A backend may register op ``cg_fused`` (family ``matvec``) for floating dtypes (the
OpenCL backend for the real ones, the CUDA backend for all four). Its launcher, a
:class:`FusedCGLauncher`, is called once per solve by
:func:`tessera_array.sparse.linalg.cg` (``b`` of a registered dtype, one right-hand
side, ``products="device"``; a callback is called after each run that moved x)::

    solve = launcher(x, r, p, A, M, atol, maxiter)     # FusedCGSolve, or None
    report = solve.run(k)                              # CGReport, after <= k iterations

``x``, ``r``, ``p``
    Native 1-D contiguous buffers of one floating dtype, length and device,
    owned by the solver: the start ``x`` and its residual ``r = b - A x`` (both updated
    in place: on return ``x`` is the iterate the report describes and ``r`` its
    recurrence residual), and a work vector ``p`` (written before it is read).
``A``, ``M``
    :class:`FusedOperand`: how to apply ``A`` (and the preconditioner ``M``, or None),
    as a launcher ``apply(v) -> A v`` on native buffers, and, where the operator is a
    stored matrix, that matrix (``kind`` ``"dense"`` or ``"csr"``, its native arrays and
    the routed variant) for a backend that computes ``A v`` inside its own kernel.
``atol``
    The stopping threshold (a Python float, SciPy's ``max(rtol * ||b||, atol)``):
    iteration ``i`` stops, converged, when ``||r_i|| < atol``, with ``||r_i||`` the square
    root in float64 of the device's ``r_i^H r_i`` (a real; see :func:`stop_threshold`,
    called with the real dtype of a complex system).
``maxiter``
    The iteration budget of the whole solve (an int >= 0).

The launcher returns None to decline (say a kernel that needs a stored matrix, given a
callable): ``cg`` then runs its generic loop. Otherwise every call ``run(k)`` (``k >= 1``)
advances the solve by up to ``k`` iterations on the device (a backend may cap k: it then
reports RUNNING and is called again), evaluating each stopping test there, and returns a
:class:`CGReport`; it reads back to the host once (``# sync``), at its end.

Iteration ``i`` (from 0) is SciPy's cg. Its test, on ``r_i``: the previous step's
``p^H A p`` (its real part) not > 0 stops it (INDEFINITE where ``||r_i||`` is finite and
``p^H A p <= 0``, else NONFINITE); then ``||r_i|| < atol`` (CONVERGED); then ``||r_i||``
not finite (NONFINITE). Unless it stopped, one step: ``z = M r_i`` (or ``r_i``), ``rho_i
= r_i^H z``; ``p = z`` (``i = 0``) or ``p = z + (rho_i / rho_{i-1}) p``; ``q = A p``;
``alpha = rho_i / (p^H q)``; ``x += alpha p`` only where ``p^H q > 0``; ``r -= alpha q``
(for a real system ``^H`` is ``^T``). Once ``maxiter``
steps are done, ``run`` checks the last step's ``p . q`` and reports MAXITER (or
INDEFINITE / NONFINITE). The report's ``iterations`` is cg's count: ``i`` for a stop at
test ``i``, ``i - 1`` when it is the previous step's ``p . q`` (that step did not move
``x``), ``maxiter`` (or ``maxiter - 1``) after the budget. After a report whose status is
not RUNNING the solve is finished and ``run`` is not called again. A backend may apply
``A`` and ``M`` past the stopping test within one ``run`` (the results unused: ``x`` and
``r`` stay as the report says).

How a backend realises it is its own: the OpenCL backend enqueues ``k`` times its four
(five with ``M``) launches and reads once (:mod:`tessera_array.backends.opencl.cg`); a
persistent cooperative kernel may run the ``k`` iterations in one launch.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from typing import NamedTuple, Protocol

import numpy as np

__all__ = ["CGReport", "CGStatus", "FusedCGLauncher", "FusedCGSolve", "FusedOperand",
           "stop_threshold"]


class CGStatus(enum.IntEnum):
    """Where a fused solve stands after a ``run`` (the stopped values are cg's info codes)."""

    RUNNING = 1  # no test stopped it and steps are left: call run() again
    MAXITER = 2  # maxiter steps done without converging (cg's info = maxiter)
    CONVERGED = 0  # ||r_i|| < atol
    NONFINITE = -20  # ||r_i|| is NaN/inf, or the last step's p^T A p was NaN
    INDEFINITE = -30  # the last step's p^T A p <= 0 (A or M not positive definite)


class CGReport(NamedTuple):
    """What one ``run(k)`` of a fused solve reports."""

    status: CGStatus  # see CGStatus; not RUNNING: the solve is finished
    iterations: int  # steps that moved x, over the whole solve so far (cg's iteration count)
    residual_norms: tuple  # ||r_i|| (floats) at each stopping test of this run, in order


class FusedOperand(NamedTuple):
    """An operator (``A`` or ``M``) as a fused solve takes it."""

    apply: Callable  # native v -> native A v (r's dtype, shape, device); no host read
    kind: str | None  # "dense" or "csr": a stored matrix; None: only apply() is known
    arrays: tuple  # the matrix's native buffers: (a,) dense, (data, indices, indptr) csr
    variant: str | None  # the matvec/spmv variant the routing table gives cg here


class FusedCGSolve(Protocol):
    def run(self, k: int) -> CGReport:
        """Advance by up to ``k`` iterations on the device; one host read, at the end."""


class FusedCGLauncher(Protocol):
    def __call__(self, x, r, p, A: FusedOperand, M: FusedOperand | None, atol: float,
                 maxiter: int) -> FusedCGSolve | None:
        """A fused solve over ``x``, ``r``, ``p`` (module docstring), or None to decline."""


def stop_threshold(atol: float, dtype) -> np.generic:
    """The value ``t`` of ``dtype`` (real floating) with ``rr < t`` exactly when
    ``math.sqrt(float(rr)) < atol``, for every ``rr >= 0`` of ``dtype``: the stopping test
    a device evaluates on ``r . r`` in its own precision, rounded as the host's test.

    ``sqrt`` (correctly rounded) is monotone, so the values passing the test are those
    below the smallest one that fails; that one is found from ``atol**2`` by stepping
    one ulp at a time (a step or two). ``atol = 0``: ``t = 0`` (no ``rr`` passes).
    """
    dt = np.dtype(dtype)
    atol = float(atol)

    def passes(v) -> bool:
        return math.sqrt(float(v)) < atol

    with np.errstate(over="ignore"):
        t = dt.type(atol) * dt.type(atol)
    inf = dt.type(np.inf)
    while t < inf and passes(t):  # up to a value that fails,
        t = np.nextafter(t, inf)
    while t > 0 and not passes(np.nextafter(t, dt.type(0))):  # down to the least one
        t = np.nextafter(t, dt.type(0))
    return t
