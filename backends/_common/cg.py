"""What every device's fused CG solve shares: the checks of its arguments and the report.

A backend's ``cg_fused`` launcher (the contract: :mod:`tessera_array.sparse.linalg._fused`)
checks its buffers and operands here, naming them as the contract does, and turns the
status words and residual history its kernels leave on the device (read once per run)
into the :class:`~tessera_array.sparse.linalg._fused.CGReport` of that run. Nothing here
touches a device library: the callers say what their native buffers are.
"""

from __future__ import annotations

import math

__all__ = ["check_k", "check_solve", "check_vector", "report"]

FUNC = "cg_fused"


def check_solve(x, r, p, A, M, atol, maxiter, *, native: str, is_native, layout, dtypes,
                kind: str = "real floating") -> None:
    """Refuse what a fused solve cannot take, naming the argument:

    ``x``, ``r``, ``p`` must be native buffers (``is_native(a)``; ``native`` names the
    type in the message) whose ``layout(a)`` is None (else the text of what is wrong:
    1-D, contiguous, ...), of one shape and one dtype of ``dtypes`` (``kind`` names them
    in the message); ``A`` (and ``M``
    when given) FusedOperands with ``apply``; ``maxiter`` an int >= 0; ``atol`` >= 0."""
    for name, a in (("x", x), ("r", r), ("p", p)):
        if not is_native(a):
            raise TypeError(f"{FUNC}: {name} must be a {native}. Received: {name} of type "
                            f"{type(a).__name__}")
        bad = layout(a)
        if bad is not None:
            raise ValueError(f"{FUNC}: {name} must be 1-D, contiguous and start its buffer. "
                             f"Received: {name} {bad}")
    if not (x.shape == r.shape == p.shape):
        raise ValueError(f"{FUNC}: x, r and p must have one shape. Received: "
                         f"{x.shape}, {r.shape}, {p.shape}")
    if not (x.dtype == r.dtype == p.dtype) or r.dtype not in dtypes:
        names = ", ".join(sorted(str(d) for d in dtypes))
        raise TypeError(f"{FUNC}: x, r and p must share one {kind} dtype ({names}). "
                        f"Received: {x.dtype}, {r.dtype}, {p.dtype}")
    for name, op in (("A", A), ("M", M)):
        if (op is not None or name == "A") and not callable(getattr(op, "apply", None)):
            raise TypeError(f"{FUNC}: {name} must be a FusedOperand (with apply). "
                            f"Received: {name}={op!r}")
    if isinstance(maxiter, bool) or int(maxiter) != maxiter or maxiter < 0:
        raise ValueError(f"{FUNC}: maxiter must be an int >= 0. Received: "
                         f"maxiter={maxiter!r}")
    if not float(atol) >= 0:
        raise ValueError(f"{FUNC}: atol must be >= 0. Received: atol={atol!r}")


def check_vector(v, what: str, dtype, shape, *, native: str, is_native) -> None:
    """A product the host computed for the solve (``what``: "q = A p", "z = M r") must be
    a native vector of the solve's dtype and shape."""
    if not is_native(v):
        raise TypeError(f"{FUNC}: {what} must be a {native}. Received: {type(v).__name__}")
    if v.dtype != dtype or tuple(v.shape) != tuple(shape):
        raise ValueError(f"{FUNC}: {what} must be a {dtype} vector of shape {tuple(shape)}. "
                         f"Received: dtype={v.dtype}, shape={tuple(v.shape)}")


def check_k(k, finished: bool) -> None:
    """``run(k)`` takes an int k >= 1, and only while the solve runs."""
    if isinstance(k, bool) or int(k) != k or k < 1:
        raise ValueError(f"{FUNC}: run takes k >= 1 iterations. Received: k={k!r}")
    if finished:
        raise ValueError(f"{FUNC}: the solve has finished (its last report was not "
                         "RUNNING); run is not called again")


def report(status, stop_at, cause, history, *, steps: int, before: int, after: int,
           maxiter: int):
    """The CGReport of one run from what its kernels left: ``status`` (a CGStatus value),
    ``stop_at`` (the run's test index that stopped it; < 0: the final check after
    ``maxiter`` steps), ``cause`` (true: the stop was the previous step's ``p . q``, which
    did not move x), ``history`` (``r . r`` of each of the run's tests, at least as many
    as it ran). ``steps``: the run's step budget; ``before`` / ``after``: the solve's
    steps before the run and after it, had no test stopped it."""
    kinds = _kinds or _load_kinds()
    word, status = status, kinds[0].get(int(status))
    if status is None:
        raise ValueError(f"{FUNC}: a run left the status word {word!r}, which is no "
                         "CGStatus value")
    if status is kinds[1]:
        tests, iterations = steps, after
    else:
        stop = int(stop_at)
        if stop < 0:  # the final check
            tests = steps
            iterations = maxiter - (0 if status is kinds[2] else 1)
        else:
            tests = stop + 1
            iterations = before + stop - (1 if cause else 0)
    sqrt, nan = math.sqrt, math.nan
    norms = tuple([sqrt(v) if v >= 0 else nan for v in map(float, history[:tests])])
    return kinds[3](status, iterations, norms)


def running():
    """``CGStatus.RUNNING``, read once with :func:`report`'s kinds (the fused solves'
    ``run`` compares a report's status with it, without an import per run)."""
    return (_kinds or _load_kinds())[1]


_kinds: tuple = ()
"""(CGStatus by value, RUNNING, MAXITER, CGReport), read once (:func:`_load_kinds`): an
import inside :func:`report` cost ~1 us a run."""


def _load_kinds() -> tuple:
    global _kinds
    from tessera_array.sparse.linalg._fused import CGReport, CGStatus

    _kinds = ({int(s): s for s in CGStatus}, CGStatus.RUNNING, CGStatus.MAXITER, CGReport)
    return _kinds
