"""The fused conjugate-gradient solve of the OpenCL backend (``kernels/opencl/cg.cl``).

``cg_fused(x, r, p, A, M, atol, maxiter)``, the registered op ``cg_fused`` of the
``matvec`` family, implements the contract of :mod:`tessera_array.sparse.linalg._fused`
(its module docstring: the arguments, the in-place updates of ``x`` and ``r``, what
``run(k)`` reports): it returns a :class:`FusedCG` (it never declines) over three 1-D
contiguous ``pyopencl.array.Array`` of one real floating dtype, length and context.

``FusedCG.run(k)`` enqueues ``k`` iterations (at most :data:`KMAX`, and no more than
``maxiter`` leaves), each::

    z = M.apply(r); rho = r . z             (with M only: the caller's product, one dot)
    tessera_cg_direction                    the stopping test of r_i; p = s or beta p + s
    q = A.apply(p)                          the operator's registered matvec / spmv
    tessera_cg_dot, tessera_cg_update       p . q; alpha; x, r and the partial sums of r . r

then, when ``maxiter`` steps are done, the final check of the last ``p . q``, and reads
the state buffer's status words and the run's residual norms once (``# sync``). A test
that stops freezes the solve on the device (``cg.cl``): the rest of the run's launches
return at once, but ``A.apply`` and ``M.apply`` are still called for them (their results
unused). The stopping test is evaluated in ``x``'s dtype against the threshold of
:func:`~tessera_array.sparse.linalg._fused.stop_threshold`, so it decides as the
host's ``sqrt(r . r) < atol`` would on the same ``r . r``.

Why fused: the generic path launches each dot product, scalar operation and update on
its own and reads a norm back every iteration (about ten launches and one sync per
iteration). Here every scalar stays on the device: four launches per iteration and one
read per ``k`` iterations. The dot products sum in another order than the generic path's,
so iterates agree with it to rounding; ``tests/test_krylov.py`` holds them to 1e-10
(float64) after 1, 3 and 10 iterations and the iteration counts to within one, and the
iterates to be the same bit for bit for every ``k``.

The state buffer and the kernels' geometry are described in ``cg.cl``.
"""

from __future__ import annotations

import numpy as np
from tessera_array.backends._common import memo
from tessera_array.backends._common.cg import check_k, check_solve, check_vector, report, running

from tessera_array import _dtypes

from . import _memory, _programs

__all__ = ["KMAX", "FusedCG", "cg_fused", "register"]

FILE = "cg.cl"
PMAX = 256  # the most partial sums of one dot product (work-groups on GPUs)
WG_MAX = 256  # work-group size on GPUs (a power of two, clamped to the device's)
KMAX = 64  # the most iterations of one run (the history slots of the state buffer)
_REAL = frozenset(np.dtype(d._np) for d in _dtypes.REAL_FLOATING)
_setup = memo("opencl.cg.setup")  # (context, dtype) -> GroupSetup of the three kernels


def _is_native(a) -> bool:
    return isinstance(a, _memory.NATIVE)


def _layout(a):
    """None for a 1-D contiguous array at the start of its buffer; else what it is."""
    if a.ndim != 1 or not a.flags.c_contiguous or a.offset:
        return f"of shape {a.shape}, strides {a.strides}, offset {a.offset}"
    return None


def _kernels(context, dtype):
    hit = _setup.get((context, dtype))
    if hit is None:
        names = ("tessera_cg_dot", "tessera_cg_direction", "tessera_cg_update")
        hit = _setup[(context, dtype)] = _programs.group_kernels("cg", context, dtype, FILE,
                                                                 names, WG_MAX)
    return hit


# Regions of the state buffer (offsets in elements): the partial sums of rho for this and
# the previous iteration (swapped each iteration), of p . q, of r . r when rho is r . z
# (preconditioned), then the status words (cg.cl's W_*, from _FLAG) and the history.
_RHO_A, _RHO_B, _PQ, _RR, _FLAG = 0, PMAX, 2 * PMAX, 3 * PMAX, 4 * PMAX
_W_OK, _W_STATUS_D, _W_STATUS_U, _W_STOP_AT, _W_CAUSE, _HIST = 0, 2, 3, 4, 5, 8
_MODE_FIRST, _MODE_NEXT, _MODE_FINAL = 0, 1, 2


class FusedCG:
    """The device state of one CG solve: see the module docstring."""

    def __init__(self, x, r, p, A, M, atol, maxiter):
        check_solve(x, r, p, A, M, atol, maxiter, native="pyopencl.array.Array",
                    is_native=_is_native, layout=_layout, dtypes=_REAL)
        if not (x.context == r.context == p.context):
            raise ValueError("cg_fused: x, r and p must be in one OpenCL context. "
                             "Received: more than one context")
        from tessera_array.sparse.linalg._fused import stop_threshold

        self.queue = _memory.queue_of("cg_fused", r)
        self.x, self.r, self.p = x, r, p
        self.A, self.M = A, M
        self.dtype = r.dtype
        self.maxiter = int(maxiter)
        self._thr = stop_threshold(atol, self.dtype)
        (self._dot, self._dir, self._upd), wg, cpu, units = _kernels(r.context, r.dtype)
        n = r.shape[0]
        # (at most wg partial sums: the kernels load them into a work-group's memory)
        chunk, self.np, gsize = _programs.group_geometry(n, wg, cpu, units, min(PMAX, wg))
        self._head = (np.int64(n), np.int64(chunk))
        self._gs, self._ls = (gsize,), (wg,)
        self._np = np.int32(self.np)
        init = np.zeros(_FLAG + _HIST + KMAX, dtype=self.dtype)
        init[_FLAG + _W_OK] = 1  # (no step yet)
        init[_FLAG + _W_STATUS_D] = init[_FLAG + _W_STATUS_U] = 1  # RUNNING
        self.st = _memory.upload(self.queue, init, r.allocator)
        self.cur, self.prev = _RHO_A, _RHO_B
        self._done = 0  # steps enqueued (and, while running, taken)
        self._finished = False
        # r . r of the start: where the first test finds it
        self._wait(x, r, p)
        self._launch_dot(r, r, _RR if M is not None else self.cur)

    @staticmethod
    def _mark(evt, *arrays):
        """Record ``evt`` as the last write of ``arrays``. The queue is in order, so it
        completes after every earlier launch: the one event a reader on another queue
        needs (appending instead would make pyopencl wait on old events once a dozen
        pile up: a host sync inside a run)."""
        for a in arrays:
            a.events[:] = [evt]

    def _wait(self, *arrays):
        """Wait for the pending events of buffers last written on another queue."""
        for a in arrays:
            if a.queue is not self.queue and a.events:
                import pyopencl as cl

                cl.wait_for_events(a.events)

    def _launch_dot(self, a, b, at):
        self._mark(self._dot(self.queue, self._gs, self._ls, *self._head, a.base_data,
                             b.base_data, self.st.base_data, np.int64(at),
                             np.int64(_FLAG + _W_STATUS_D)), self.st)

    def _vector(self, v, what):
        """``v`` as the kernels take it (contiguous, r's dtype and shape, this queue)."""
        check_vector(v, what, self.dtype, self.r.shape, native="pyopencl.array.Array",
                     is_native=_is_native)
        self._wait(v)
        if v.offset or not v.flags.c_contiguous:  # (a user operator's view)
            v = v.copy(queue=self.queue)
        return v

    def _direction(self, mode, test, src):
        rr_at = _RR if self.M is not None else self.cur
        evt = self._dir(self.queue, self._gs, self._ls, *self._head, np.int32(mode),
                        src.base_data, self.p.base_data, self.st.base_data, self._np,
                        np.int64(self.cur), np.int64(self.prev), np.int64(_FLAG),
                        np.int64(rr_at), np.int32(test), self._thr)
        self._mark(evt, self.p, self.st)

    def _iteration(self, test):
        """Enqueue iteration ``test`` of this run: the test, then one step."""
        first = self._done == 0
        if self.M is not None:
            z = self._vector(self.M.apply(self.r), "z = M r")
            self._launch_dot(self.r, z, self.prev)  # rho = r . z
            self.cur, self.prev = self.prev, self.cur
            src = z
        else:
            src = self.r
        self._direction(_MODE_FIRST if first else _MODE_NEXT, test, src)
        q = self._vector(self.A.apply(self.p), "q = A p")
        self._launch_dot(self.p, q, _PQ)
        nxt = _RR if self.M is not None else self.prev
        evt = self._upd(self.queue, self._gs, self._ls, *self._head, self.p.base_data,
                        q.base_data, self.x.base_data, self.r.base_data, self.st.base_data,
                        self._np, np.int64(_PQ), np.int64(self.cur), np.int64(nxt),
                        np.int64(_FLAG))
        self._mark(evt, self.x, self.r, self.st)
        if self.M is None:  # the new r . r is the next rho
            self.cur, self.prev = self.prev, self.cur
        self._done += 1

    def run(self, k: int):
        """Up to ``k`` iterations (at most :data:`KMAX`), then one read: a
        :class:`~tessera_array.sparse.linalg._fused.CGReport`. Synchronizes once."""
        check_k(k, self._finished)
        before = self._done
        steps = min(int(k), KMAX, self.maxiter - before)
        for test in range(steps):
            self._iteration(test)
        final = self._done == self.maxiter
        if final:
            self._direction(_MODE_FINAL, 0, self.r)
        # sync: the status words and this run's r . r values.
        tail = self.st[_FLAG:_FLAG + _HIST + steps].get(self.queue)
        out = report(tail[_W_STATUS_D], tail[_W_STOP_AT], tail[_W_CAUSE], tail[_HIST:],
                     steps=steps, before=before, after=self._done, maxiter=self.maxiter)
        self._finished = out.status is not running()
        return out


def cg_fused(x, r, p, A, M, atol, maxiter) -> FusedCG:
    """The fused CG solve over ``x``, ``r`` and ``p``: the ``cg_fused`` contract of
    :mod:`tessera_array.sparse.linalg._fused` (see :class:`FusedCG` for this backend's
    realisation: ``run(k)`` is ``k`` times four launches, five with ``M``, and one read)."""
    return FusedCG(x, r, p, A, M, atol, maxiter)


def register(registry, backend_name: str) -> None:
    registry.register("cg_fused", backend_name, _dtypes.REAL_FLOATING, cg_fused)
