"""The fused conjugate-gradient steps of the OpenCL backend (``kernels/opencl/cg.cl``).

``cg_fused(x, r, p, preconditioned=False)`` (the registered op ``cg_fused`` of the
``matvec`` family) returns a :class:`FusedCG` over three 1-D contiguous
``pyopencl.array.Array`` of one real floating dtype, length and context: the iterate
``x`` and residual ``r`` (both updated in place) and the direction ``p`` (written before
it is read). The solver (:func:`tessera_array.sparse.linalg.cg`, real, without a
callback) then runs each iteration as::

    rr, ok, pq = steps.read()    # the one sync: r . r now, and the last step's p . q
    steps.direction(first)       # p = r, or p = (rho / rho_prev) p + r, rho = r . r
    q = A @ p                    # the operator's registered matvec / spmv
    steps.update(q)              # alpha = rho / (p . q); x += alpha p if p . q > 0;
                                 # r -= alpha q; the partial sums of the new r . r

and with a preconditioner (``preconditioned=True``), between the read and the
direction, ``z = M r`` (the caller's product), ``steps.rho_from(z)`` (rho = r . z, one
more dot launch) and ``steps.direction(first, z)`` (p = z or beta p + z).

Why fused: the generic path makes each dot product on the host's BLAS (so that its
iterates equal SciPy's bit for bit, see ``dot.py``), which copies two vectors to
the host per dot product, and runs each scalar operation as its own launch: about ten
launches, four vector copies and one sync per iteration. Here every scalar stays on the
device: four launches and a read of the partial sums. The dot products sum in another
order than BLAS, so iterates agree with the generic path's (and SciPy's) to rounding;
``tests/test_krylov.py`` holds them to 1e-10 (float64) after 1, 3 and 10 iterations and
the iteration counts to within one.

The state buffer and the kernels' geometry are described in ``cg.cl``.
"""

from __future__ import annotations

import numpy as np
from tessera_array.backends._common import memo

from tessera_array import _dtypes

from . import _memory, _programs

__all__ = ["FusedCG", "cg_fused", "register"]

FILE = "cg.cl"
PMAX = 256  # the most partial sums of one dot product (work-groups on GPUs)
WG_MAX = 256  # work-group size on GPUs (a power of two, clamped to the device's)
_REAL = frozenset(np.dtype(d._np) for d in _dtypes.REAL_FLOATING)
_setup = memo("opencl.cg.setup")  # (context, dtype) -> GroupSetup of the three kernels


def _kernels(context, dtype):
    hit = _setup.get((context, dtype))
    if hit is None:
        names = ("tessera_cg_dot", "tessera_cg_direction", "tessera_cg_update")
        hit = _setup[(context, dtype)] = _programs.group_kernels("cg", context, dtype, FILE,
                                                                 names, WG_MAX)
    return hit


# Regions of the state buffer (offsets in elements): the partial sums of rho for this and
# the previous iteration (swapped each iteration), of p . q, of r . r when rho is r . z
# (preconditioned), then the flag of p . q and p . q itself.
_RHO_A, _RHO_B, _PQ, _RR, _FLAG = 0, PMAX, 2 * PMAX, 3 * PMAX, 4 * PMAX


class FusedCG:
    """The device state of one CG solve: see the module docstring."""

    def __init__(self, x, r, p, preconditioned=False):
        for name, a in (("x", x), ("r", r), ("p", p)):
            _memory.check_array("cg_fused", name, a)
            if a.ndim != 1 or not a.flags.c_contiguous or a.offset:
                raise ValueError(f"cg_fused: {name} must be 1-D, contiguous and start its "
                                 f"buffer. Received: {name}.shape={a.shape}, "
                                 f"{name}.strides={a.strides}, {name}.offset={a.offset}")
        if not (x.shape == r.shape == p.shape):
            raise ValueError(f"cg_fused: x, r and p must have one shape. Received: "
                             f"{x.shape}, {r.shape}, {p.shape}")
        if not (x.dtype == r.dtype == p.dtype) or r.dtype not in _REAL:
            raise TypeError(f"cg_fused: x, r and p must share one real floating dtype "
                            f"(float32, float64). Received: {x.dtype}, {r.dtype}, {p.dtype}")
        if not (x.context == r.context == p.context):
            raise ValueError("cg_fused: x, r and p must be in one OpenCL context. "
                             "Received: more than one context")
        self.queue = _memory.queue_of("cg_fused", r)
        self.x, self.r, self.p = x, r, p
        self.dtype = r.dtype
        self.preconditioned = bool(preconditioned)
        (self._dot, self._dir, self._upd), wg, cpu, units = _kernels(r.context, r.dtype)
        n = r.shape[0]
        # (at most wg partial sums: the kernels load them into a work-group's memory)
        chunk, self.np, gsize = _programs.group_geometry(n, wg, cpu, units, min(PMAX, wg))
        self._head = (np.int64(n), np.int64(chunk))
        self._gs, self._ls = (gsize,), (wg,)
        self._np = np.int32(self.np)
        init = np.zeros(_FLAG + 2, dtype=self.dtype)
        init[_FLAG] = 1  # (no step yet)
        self.st = _memory.upload(self.queue, init, r.allocator)
        self.cur, self.prev = _RHO_A, _RHO_B
        # r . r of the start: where read() finds it
        self._rr = _RR if self.preconditioned else self.cur
        self._wait(r)
        self._launch_dot(r, r, self._rr)

    def _wait(self, *arrays):
        """Wait for the pending events of buffers last written on another queue."""
        for a in arrays:
            if a.queue is not self.queue and a.events:
                import pyopencl as cl

                cl.wait_for_events(a.events)

    def _launch_dot(self, a, b, at):
        self.st.add_event(self._dot(self.queue, self._gs, self._ls, *self._head, a.base_data,
                                    b.base_data, self.st.base_data, np.int64(at)))

    def _vector(self, v, what):
        """``v`` as the kernels take it (contiguous, r's dtype and shape, this queue)."""
        if v.dtype != self.dtype or v.shape != self.r.shape:
            raise ValueError(f"cg_fused: {what} must be a {self.dtype} vector of shape "
                             f"{self.r.shape}. Received: dtype={v.dtype}, shape={v.shape}")
        self._wait(v)
        if v.offset or not v.flags.c_contiguous:  # (a user operator's view)
            v = v.copy(queue=self.queue)
        return v

    def read(self) -> tuple:
        """``(rr, ok, pq)``: ``r . r`` now (the device's sum of its partial sums), and
        whether the last update's ``p . q`` was > 0, with that value. Synchronizes."""
        host = self.st.get(self.queue)
        part = host[self._rr:self._rr + self.np]
        rr = np.add.accumulate(part)[-1]  # in order, in the dtype: the device's value
        return float(rr), bool(host[_FLAG] == 1), float(host[_FLAG + 1])

    def rho_from(self, z) -> None:
        """Preconditioned: ``rho = r . z`` for ``z = M r`` (the previous rho is kept)."""
        if not self.preconditioned:
            raise ValueError("cg_fused: rho_from is for preconditioned steps "
                             "(preconditioned=True); without M rho is r . r")
        self._launch_dot(self.r, self._vector(z, "z = M r"), self.prev)
        self.cur, self.prev = self.prev, self.cur

    def direction(self, first: bool, z=None) -> None:
        """``p = s`` (first) or ``p = beta p + s`` with ``beta = rho / rho_prev``, where
        ``s`` is ``z`` (preconditioned; the one given to :meth:`rho_from`) or ``r``."""
        src = self.r if z is None else self._vector(z, "z = M r")
        if self.preconditioned != (z is not None):
            raise ValueError("cg_fused: direction takes z = M r exactly when the steps are "
                             f"preconditioned (preconditioned={self.preconditioned})")
        evt = self._dir(self.queue, self._gs, self._ls, *self._head, np.int32(1 if first else 0),
                        src.base_data, self.p.base_data, self.st.base_data, self._np,
                        np.int64(self.cur), np.int64(self.prev))
        self.p.add_event(evt)

    def update(self, q) -> None:
        """Given ``q = A p``: ``p . q``, then ``x``, ``r`` and the new ``r . r``."""
        q = self._vector(q, "q = A p")
        self._launch_dot(self.p, q, _PQ)
        nxt = _RR if self.preconditioned else self.prev
        evt = self._upd(self.queue, self._gs, self._ls, *self._head, self.p.base_data,
                        q.base_data, self.x.base_data, self.r.base_data, self.st.base_data,
                        self._np, np.int64(_PQ), np.int64(self.cur), np.int64(nxt),
                        np.int64(_FLAG))
        for a in (self.x, self.r, self.st):
            a.add_event(evt)
        if not self.preconditioned:  # the new r . r is the next rho
            self.cur, self.prev = self.prev, self.cur
            self._rr = self.cur


def cg_fused(x, r, p, preconditioned=False) -> FusedCG:
    """The fused CG steps over ``x``, ``r`` and ``p`` (see :class:`FusedCG`)."""
    return FusedCG(x, r, p, preconditioned)


def register(registry, backend_name: str) -> None:
    registry.register("cg_fused", backend_name, _dtypes.REAL_FLOATING, cg_fused)
