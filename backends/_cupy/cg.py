"""The fused conjugate-gradient solve of the CuPy backend: one persistent cooperative kernel
(``kernels/cuda/cg.cu``) per run.

``cg_fused(x, r, p, A, M, atol, maxiter)``, the registered op ``cg_fused`` of the
``matvec`` family, implements the contract of :mod:`tessera_array.sparse.linalg._fused`
over three 1-D contiguous ``cupy.ndarray`` of one floating dtype (real or complex),
length and device.
``FusedCG.run(k)`` is one launch of ``tessera_cg_run`` when ``A`` and ``M`` are stored
matrices (dense or CSR): the kernel runs the ``k`` iterations (at most :data:`KMAX`)
with every product, dot product, update and stopping test on the device, synchronizing
the grid three times an iteration (four with ``M``) and never the host; then one read of
the state words and the run's residual history (``# sync``). A callable operator (kind
None) is the slower path: the kernel stops before its product and resumes after it, so a
run is one launch, then, each iteration, the host's ``M.apply(r)`` and ``A.apply(p)`` each
followed by one launch (still one read per run). A stop freezes the solve: later launches
of the run return at once.

``cg_fused.plain`` (:func:`cg_plain`, :class:`PlainCG`) is ``cg(A, b)`` alone for a
stored A and a real b: the first launch also sets x = 0 and r = b and takes ||b|| (in
the vecdot kernels' order and root, so x, info and report are the general path's bit for
bit) and the threshold, so a short solve is one launch and one read; the kernel, grid
and finished solves' workspaces are kept per (device, n, dtype, layout). The read needs
no copy and no stream synchronization: the launch's last act copies its state words to
mapped pinned memory and sets a flag there, which the host polls for up to
:data:`POLL_S` (then it synchronizes). ``cg(A, b, maxiter=1)``, dense SPD 2049 float32,
wall time (medians of 400): H200, 238 us before (a vecdot, a root and a read for ||b||,
then the solve), 138 with the one launch, 93 with the kept workspaces and the pinned
read (cupyx's 495-751); an H100's host, 68 with a copy and a synchronization, 59 with
the polled flag (benchmarks/NOTES.md).

Geometry (:func:`geometry`): blocks of :data:`BLOCK` threads, as many as the rows need
and at most :data:`BLOCKS_PER_SM` per multiprocessor, never more than stay resident
(``cuOccupancyMaxActiveBlocksPerMultiprocessor``, so CuPy's cooperative launch never
trims the grid). The grid depends on n and the device only, so the bits of a solve do not
depend on ``k``. Products: the routed variant of each operator (``FusedOperand.variant``):
``scalar`` a row per thread; ``warp`` a row per warp (dense) or :func:`~._sparse.lanes_for`
lanes per row (CSR).

The dot products and rows sum in the kernel's own order, so iterates agree with the
generic path to rounding (``tests/test_krylov.py``: 1e-10 in float64 after 1, 3 and 10
iterations, iteration counts within one, the same bits for every ``k``).
"""

from __future__ import annotations

import ctypes
import time

import numpy as np
from tessera_array.backends._common import memo
from tessera_array.backends._common.cg import check_k, check_solve, check_vector, report, running

from tessera_array import _dtypes

from . import _kernels
from .matvec import CTYPE, dot_parts
from .sparse import lanes_for

__all__ = ["BLOCK", "BLOCKS_PER_SM", "KMAX", "MEASURED", "ROUTING", "FusedCG", "PlainCG",
           "cg_fused", "cg_plain", "geometry", "instances", "register"]

FILE = "cg.cu"
BLOCK = 256  # threads per block (a multiple of the warp, at most 32 warps: block_sum)
BLOCKS_PER_SM = 2  # blocks per multiprocessor at most (fewer blocks: cheaper grid syncs)
KMAX = 64  # the most iterations of one run (the history slots of the state buffer)
_FLOATING = frozenset(np.dtype(d._np) for d in _dtypes.FLOATING)
_INDEX = {np.dtype(np.int32): "int", np.dtype(np.int64): "long long"}
_INT32 = np.dtype(np.int32)
# Operator kinds, entry points and state words: cg.cu's values.
OP_NONE, OP_DENSE, OP_CSR, OP_HOST = 0, 1, 2, 3
E_INIT, E_START, E_ZDOT, E_QDOT = 0, 1, 2, 3
(W_STATUS, W_STOP_AT, W_CAUSE, W_OK, W_RR, W_RHO, W_RHO_PREV, W_PQ, W_BNRM, W_THR,
 HIST) = range(11)
S_BAD_B = 3  # cg_plain: ||b|| not finite (the host's general path answers)
_resident = memo("cuda.cg.resident")  # (device id, kernel name) -> resident blocks
# (device id, n, dtype, index types, lanes, warp) -> _Plan of cg_plain's solves
_plans = memo("cuda.cg.plain", limit=256)

# The CUDA row of the matvec routing table for cg (tessera_array/sparse/_routing.py): the
# products inside this kernel, per iteration on the H200 (CUDA events, medians, whole
# solves of 220 minus 20 iterations; benchmarks/NOTES.md, "CUDA fused CG"), float32:
#
#   system                            scalar        warp          cupyx cg
#   dense SPD 2049 (q q^T / n + 0.01)  117 us        12.4-12.8 us  298-324 us
#   Poisson 1024^2 CSR                37.7-38.9 us  67-69 us      206 us
#
# so dense rows take a warp (a thread per row reads 4n-byte-strided lanes) and CSR rows
# a thread (five entries a row leave the lanes of a shared row idle).
ROUTING = {"dense": "warp", "csr": "scalar"}
MEASURED = ("H200, fused cg per iteration, float32: dense SPD 2049 warp 12.4-12.8 us, scalar "
            "117; Poisson 1024^2 CSR scalar 37.7-38.9 us, warp 67-69")


def _cupy():
    import cupy

    return cupy


def _is_native(a) -> bool:
    return isinstance(a, _cupy().ndarray)


def _layout(a):
    """None for a 1-D C-contiguous array; else what it is."""
    if a.ndim != 1 or not a.flags.c_contiguous:
        return f"of shape {a.shape}, strides {a.strides}"
    return None


def _ptr(a):
    """A kernel pointer argument: the device address of ``a`` (None: null)."""
    return ctypes.c_void_p(0 if a is None else a.data.ptr)


def _name(dtype, itype, ptype, warp: int) -> str:
    return (f"tessera_cg_run<{CTYPE[np.dtype(dtype)]}, {_INDEX[np.dtype(itype)]}, "
            f"{_INDEX[np.dtype(ptype)]}, {warp}, {BLOCK}>")


def geometry(n: int, lanes: int, warp: int, sms: int, resident: int,
             per_sm: int = BLOCKS_PER_SM) -> int:
    """Blocks of one solve: enough for every row's lanes in one pass over the rows
    (``ceil(n / (warp / lanes))`` warps), at least 1, at most ``per_sm`` (and no more
    than ``resident``) blocks per multiprocessor on ``sms`` of them."""
    rows_per_warp = warp // lanes
    warps = -(-max(n, 1) // rows_per_warp)
    need = -(-warps * warp // BLOCK)
    return max(1, min(need, sms * min(per_sm, resident)))


def _resident_blocks(kernel, name: str, device, block: int = BLOCK) -> int:
    hit = _resident.get((device.id, name))
    if hit is None:
        cupy = _cupy()
        hit = cupy.cuda.driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.ptr, block, 0)
        if hit < 1:
            raise RuntimeError(f"cg_fused: {name} cannot keep one block of {block} threads "
                               f"resident on {_kernels.device_label(device.id)}")
        _resident[(device.id, name)] = hit
    return hit


class _Stored:
    """An operator's kernel arguments: kind, lanes, val, idx, ptr, ld."""

    __slots__ = ("idx", "kind", "lanes", "ld", "ptr", "val")

    def __init__(self, kind, lanes=1, val=None, idx=None, ptr=None, ld=0):
        self.kind, self.lanes, self.val, self.idx, self.ptr, self.ld = kind, lanes, val, idx, \
            ptr, ld

    def ctypes_args(self) -> list:
        return [ctypes.c_int(self.kind), ctypes.c_int(self.lanes), _ptr(self.val),
                _ptr(self.idx), _ptr(self.ptr), ctypes.c_longlong(self.ld)]


def _stored(op, n, dtype, warp, index):
    """``op`` (a FusedOperand) as the kernel takes it: a stored dense or CSR matrix of
    the solve's dtype and device (CSR index types converted to ``index`` where given),
    else OP_HOST (its ``apply`` between launches)."""
    cupy = _cupy()
    if op is None:
        return _Stored(OP_NONE)
    scalar = op.variant == "scalar"
    if op.kind == "dense":
        (a,) = op.arrays
        if a.dtype != dtype or a.shape != (n, n):
            return _Stored(OP_HOST)
        if a.strides[1] != a.itemsize or a.strides[0] % a.itemsize or a.strides[0] < 0:
            a = cupy.ascontiguousarray(a)
        return _Stored(OP_DENSE, 1 if scalar else warp, a, None, None,
                       a.strides[0] // a.itemsize)
    if op.kind == "csr":
        data, indices, indptr = op.arrays
        if (data.dtype != dtype or indices.dtype not in _INDEX or indptr.dtype not in _INDEX
                or indptr.shape != (n + 1,) or indices.shape != data.shape):
            return _Stored(OP_HOST)
        if index is not None:
            indices, indptr = indices.astype(index[0], copy=False), \
                indptr.astype(index[1], copy=False)
        data, indices, indptr = (cupy.ascontiguousarray(v) for v in (data, indices, indptr))
        return _Stored(OP_CSR, 1 if scalar else lanes_for(n, data.size, warp), data, indices,
                       indptr)
    return _Stored(OP_HOST)


class FusedCG:
    """The device state of one CG solve: see the module docstring."""

    def __init__(self, x, r, p, A, M, atol, maxiter):
        check_solve(x, r, p, A, M, atol, maxiter, native="cupy.ndarray",
                    is_native=_is_native, layout=_layout, dtypes=_FLOATING,
                    kind="floating")
        if not (x.device.id == r.device.id == p.device.id):
            raise ValueError("cg_fused: x, r and p must be on one device. Received: "
                             f"{x.device}, {r.device}, {p.device}")
        from tessera_array.sparse.linalg._fused import stop_threshold

        cupy = _cupy()
        self.device = r.device
        self.x, self.r, self.p = x, r, p
        self.A, self.M = A, M
        self.dtype = r.dtype
        self.n = n = r.shape[0]
        self.maxiter = int(maxiter)
        self._thr = stop_threshold(atol, np.finfo(self.dtype).dtype)
        with self.device:
            warp = _kernels.warp_size(self.device)
            self._a = _stored(A, n, self.dtype, warp, None)
            index = None
            if self._a.kind == OP_CSR:
                index = (self._a.idx.dtype, self._a.ptr.dtype)
            self._m = _stored(M, n, self.dtype, warp, index)
            if index is None and self._m.kind == OP_CSR:
                index = (self._m.idx.dtype, self._m.ptr.dtype)
            it, pt = index if index is not None else (_INT32, _INT32)
            name = _name(self.dtype, it, pt, warp)
            self._kernel = _kernels.function(FILE, name, self.device)
            # (the operator whose rows take the most lanes sets the threads a pass needs)
            lanes = max([op.lanes for op in (self._a, self._m)
                         if op.kind in (OP_DENSE, OP_CSR)] or [1])
            self.blocks = geometry(n, lanes, warp, _kernels.multiprocessors(self.device),
                                   _resident_blocks(self._kernel, name, self.device))
            # One workspace: q, z (a stored M's product), the partial sums, the state
            # words and history (the first launch writes them), and the barrier's counter
            # (zeroed: the one write before the first launch).
            nz = n if self._m.kind in (OP_DENSE, OP_CSR) else 0
            parts = 3 * self.blocks
            words = HIST + KMAX
            size = n + nz + parts + words
            work = _kernels.empty((size,), self.dtype)
            self.q = work[:n]
            self.z = work[n:n + nz] if nz else None
            self.part = work[n + nz:n + nz + parts]
            self.st = work[n + nz + parts:n + nz + parts + words]
            self.bar = cupy.zeros((1,), dtype=np.uint64)
        # The kernel's arguments that stay (ctypes values: _launch passes their addresses).
        real = np.finfo(self.dtype).dtype
        thr = (ctypes.c_float if real == np.float32 else ctypes.c_double)(float(self._thr))
        self._static = [thr, *self._a.ctypes_args(), *self._m.ctypes_args()]
        self._vectors = [_ptr(v) for v in (self.x, self.r, self.p)]
        self._work = [_ptr(v) for v in (self.part, self.st, self.bar)]
        self._done = 0  # steps launched (and, while running, taken)
        self._entry = E_INIT
        self._finished = False

    def _vector(self, v, what):
        """A host-computed product as the kernel takes it (contiguous, on this device)."""
        check_vector(v, what, self.dtype, (self.n,), native="cupy.ndarray",
                     is_native=_is_native)
        if v.device.id != self.device.id:
            raise ValueError(f"cg_fused: {what} must be on {self.device}. Received: a vector "
                             f"on {v.device}")
        return v if v.flags.c_contiguous else _cupy().ascontiguousarray(v)

    def _launch(self, entry, target, final, run_base, q, z):
        """One cooperative launch of ``tessera_cg_run``, through the driver: CuPy's own
        cooperative path reads every device attribute on each launch (some hundred
        driver calls), and the grid is already sized to stay resident."""
        c = ctypes
        head = [c.c_longlong(self.n), c.c_int(entry), c.c_longlong(self._done),
                c.c_longlong(target), c.c_int(final), c.c_longlong(run_base)]
        args = (head + self._static + _NO_B + self._vectors + [_ptr(q), _ptr(z)] + self._work
                + _NO_HOST)
        params = (c.c_void_p * len(args))(*[c.addressof(a) for a in args])
        driver = _cupy().cuda.driver
        driver.launchCooperativeKernel(self._kernel.ptr, self.blocks, 1, 1, BLOCK, 1, 1, 0,
                                       _cupy().cuda.get_current_stream().ptr,
                                       c.addressof(params))

    def run(self, k: int):
        """Up to ``k`` iterations (at most :data:`KMAX`), then one read: a
        :class:`~tessera_array.sparse.linalg._fused.CGReport`. Synchronizes once."""
        check_k(k, self._finished)
        before = self._done
        steps = min(int(k), KMAX, self.maxiter - before)
        target = before + steps
        final = int(target == self.maxiter)
        q, z = self.q, self.z
        with self.device:
            # Stored operators: this one launch runs every step. A callable one: each
            # launch stops before its product, and the next resumes after it.
            self._launch(self._entry, target, final, before, q, z)
            for _ in range(steps if OP_HOST in (self._a.kind, self._m.kind) else 0):
                if self._m.kind == OP_HOST:
                    z = self._vector(self.M.apply(self.r), "z = M r")
                    self._launch(E_ZDOT, target, final, before, q, z)
                if self._a.kind == OP_HOST:
                    q = self._vector(self.A.apply(self.p), "q = A p")
                    self._launch(E_QDOT, target, final, before, q, z)
                self._done += 1
            self._entry = E_START
            # sync: the status words and this run's r . r values.
            tail = self._read(HIST + steps)
        self._done = target
        out = report(tail[W_STATUS], tail[W_STOP_AT], tail[W_CAUSE], tail[HIST:],
                     steps=steps, before=before, after=target, maxiter=self.maxiter)
        self._finished = out.status is not running()
        return out

    def _read(self, count: int):
        """The first ``count`` state words (real parts), read to the host (``# sync``)."""
        return self.st[:count].real.get()


class _Plan:
    """What the solves of one (device, n, dtype, matrix layout) share: the kernel, its
    grid, and workspaces no running solve holds (:class:`_Work`, at most two kept)."""

    __slots__ = ("blocks", "free", "kernel")

    def __init__(self, kernel, blocks):
        self.kernel, self.blocks, self.free = kernel, blocks, []


class _Work:
    """One PlainCG workspace (r, p, q, the partial sums, the state words; the barrier's
    counter; a pinned host copy of the words) and the kernel's arguments over it, as
    ctypes values that a solve rebinds (:meth:`bind`) instead of building anew. A solve
    takes it from its plan and gives it back when it finishes, after its last read, so
    no two solves use it at once. The counter is zeroed once: a launch leaves it at a
    multiple of the grid's blocks, where the barrier (cg.cu, grid_sync) may start."""

    __slots__ = ("a", "args", "b", "bar", "flag", "head", "host", "params", "params_addr",
                 "pinned", "seq", "st", "work", "x")

    def __init__(self, plan, n, dt):
        c, cupy = ctypes, _cupy()
        dparts = dot_parts(n)
        parts = 3 * plan.blocks + dparts
        words = HIST + KMAX
        size = dt.itemsize
        self.work = _kernels.empty((3 * n + parts + words,), dt)
        self.bar = cupy.zeros((1,), dtype=np.uint64)
        base = self.work.data.ptr
        self.st = base + (3 * n + parts) * size
        # the words, then the flag the kernel sets once they are there (kernels/cuda/cg.cu,
        # publish); the device reaches pinned memory at its host address (unified
        # addressing), or at the one the runtime gives
        self.pinned = cupy.cuda.alloc_pinned_memory(words * size + 8)
        self.host = np.frombuffer(self.pinned, dtype=dt, count=words)
        self.flag = np.frombuffer(self.pinned, dtype=np.uint64, count=1,
                                  offset=words * size)
        self.flag[0] = 0
        mapped = _mapped(self.pinned.ptr)
        self.seq = c.c_ulonglong(0)
        self.head = [c.c_longlong(n), c.c_int(0), c.c_longlong(0), c.c_longlong(0),
                     c.c_int(0), c.c_longlong(0)]
        thr = (c.c_float if dt == np.float32 else c.c_double)(0.0)  # (the kernel's own)
        self.a = [c.c_int(0), c.c_int(1), c.c_void_p(0), c.c_void_p(0), c.c_void_p(0),
                  c.c_longlong(0)]
        self.b = [c.c_void_p(0), c.c_double(0.0), c.c_double(0.0), c.c_int(dparts)]
        self.x = c.c_void_p(0)
        self.args = (self.head + [thr] + self.a + _Stored(OP_NONE).ctypes_args() + self.b
                     + [self.x, c.c_void_p(base), c.c_void_p(base + n * size),
                        c.c_void_p(base + 2 * n * size), c.c_void_p(0),
                        c.c_void_p(base + 3 * n * size), c.c_void_p(self.st),
                        c.c_void_p(self.bar.data.ptr), c.c_void_p(mapped),
                        c.c_void_p(mapped + words * size), self.seq])
        self.params = (c.c_void_p * len(self.args))(*[c.addressof(v) for v in self.args])
        self.params_addr = c.addressof(self.params)

    def bind(self, b, x, op, rtol, atol):
        a = self.a
        a[0].value, a[1].value, a[5].value = op.kind, op.lanes, op.ld
        for slot, buf in ((2, op.val), (3, op.idx), (4, op.ptr)):
            a[slot].value = 0 if buf is None else buf.data.ptr
        self.b[0].value, self.b[1].value, self.b[2].value = b.data.ptr, rtol, atol
        self.x.value = x.data.ptr


class PlainCG(FusedCG):
    """``cg(A, b)`` from x = 0 on a stored ``A`` (real dtypes): the kernel's first launch
    starts the system itself (x = 0, r = b, ||b|| in the vecdot kernels' order and its
    root, the threshold of ``max(atol, rtol ||b||)``), so a short solve is one launch and
    one read. ``run(k)`` as :class:`FusedCG`'s, but None when ``b`` was not finite (the
    caller's general path then answers); after the first run ``bnrm2`` is ||b||. ``x``
    is the solution's own buffer. The kernel, grid and free workspaces of a (device, n,
    dtype, matrix layout) are kept between solves (``_plans``)."""

    polling = True
    """False once a launch's words did not reach the pinned memory (then copied)."""

    def __init__(self, b, a, rtol, atol, maxiter):
        self.device = dev = b.device
        self.dtype = dt = b.dtype
        self.n = n = b.shape[0]
        self.maxiter = int(maxiter)
        self.A, self.M = a, None
        self.bnrm2 = None
        self.q = self.z = None
        with dev:
            warp = _kernels.warp_size(dev)
            self._a = op = _stored(a, n, dt, warp, None)
            self._m = _NONE
            if op.kind not in (OP_DENSE, OP_CSR):
                self._w = None
                return
            csr = op.kind == OP_CSR
            key = (dev.id, n, dt, op.idx.dtype if csr else _INT32,
                   op.ptr.dtype if csr else _INT32, op.lanes, warp)
            plan = _plans.get(key)
            if plan is None:
                name = _name(dt, key[3], key[4], warp)
                kernel = _kernels.function(FILE, name, dev)
                plan = _plans.put(key, _Plan(kernel, geometry(
                    n, op.lanes, warp, _kernels.multiprocessors(dev),
                    _resident_blocks(kernel, name, dev))))
            self.x = _kernels.empty((n,), dt)  # (the kernel writes x, r and p first)
            self._w = plan.free.pop() if plan.free else _Work(plan, n, dt)
        self._plan, self._kernel, self.blocks = plan, plan.kernel, plan.blocks
        self._w.bind(b, self.x, op, rtol, atol)
        self._b = b  # (read by the first launch)
        self._done = 0
        self._entry = E_INIT
        self._finished = False

    def run(self, k: int):
        """:meth:`FusedCG.run` for this solve's stored A (the only kind it takes): one
        launch and one read, without the general method's import, its checks of what a
        plain solve cannot be, and its loop over host products (~3.5 us of a run's host
        time on a 2-core EPYC; benchmarks/NOTES.md)."""
        if self._finished or k.__class__ is not int or k < 1:
            check_k(k, self._finished)  # (raises, or k is an int-like >= 1)
            k = int(k)
        before = self._done
        steps = min(k, KMAX, self.maxiter - before)
        target = before + steps
        with self.device:
            self._launch(self._entry, target, int(target == self.maxiter), before)
            tail = self._read(HIST + steps)  # sync: the published words
        self._entry = E_START
        self._done = target
        if tail[W_STATUS] == S_BAD_B:
            self._finished = True
            self._release()
            return None
        if before == 0:
            self.bnrm2 = float(tail[W_BNRM])
        out = report(tail[W_STATUS], tail[W_STOP_AT], tail[W_CAUSE], tail[HIST:],
                     steps=steps, before=before, after=target, maxiter=self.maxiter)
        if out.status is not running():
            self._finished = True
            self._release()
        return out

    def _launch(self, entry, target, final, run_base):
        w = self._w
        h = w.head
        h[1].value, h[2].value, h[3].value, h[4].value, h[5].value = \
            entry, self._done, target, final, run_base
        w.seq.value += 1  # (the value the launch's publish writes to the flag)
        cuda = _cupy().cuda
        cuda.driver.launchCooperativeKernel(
            self._kernel.ptr, self.blocks, 1, 1, BLOCK, 1, 1, 0,
            cuda.get_current_stream().ptr, w.params_addr)

    def _read(self, count: int):
        """The first ``count`` state words, which the launch copied to pinned memory
        before setting its flag: polled for up to :data:`POLL_S` seconds (a short solve's
        read without a driver call), then waited for by a stream synchronization, which
        also raises the launch's error if it failed (``# sync``). Where the device did
        not write the pinned words, they are copied (and later reads copy)."""
        w, cupy = self._w, _cupy()
        flag, seq = w.flag, w.seq.value
        if PlainCG.polling:
            end = time.perf_counter() + POLL_S
            while flag[0] != seq and time.perf_counter() < end:
                continue  # (spins: a short launch's words arrive within microseconds)
        if flag[0] != seq:
            stream = cupy.cuda.get_current_stream()
            # sync: a launch longer than the poll (its error, if it failed, raised here).
            stream.synchronize()
            if flag[0] != seq:
                PlainCG.polling = False
                cupy.cuda.runtime.memcpyAsync(w.host.ctypes.data, w.st,
                                              count * w.host.itemsize,
                                              cupy.cuda.runtime.memcpyDeviceToHost,
                                              stream.ptr)
                stream.synchronize()  # sync: the copy
        return w.host[:count].tolist()  # (Python floats: the report reads each once)

    def _release(self):
        w, self._w = self._w, None
        if w is not None and len(self._plan.free) < 2:
            self._plan.free.append(w)


_NONE = _Stored(OP_NONE)


_NO_B = [ctypes.c_void_p(0), ctypes.c_double(0.0), ctypes.c_double(0.0), ctypes.c_int(0)]
# no host copy of the state (FusedCG reads it with a copy): host_st, host_flag, seq
_NO_HOST = [ctypes.c_void_p(0), ctypes.c_void_p(0), ctypes.c_ulonglong(0)]
POLL_S = 200e-6
"""How long PlainCG's read polls its flag before it synchronizes the stream (which
releases the GIL, where polling holds it): a one-iteration solve's launch takes some
20-30 us on an H100, a run of 32 Poisson 1024^2 iterations over a millisecond."""


def _mapped(host_ptr: int) -> int:
    """The device address of pinned host memory at ``host_ptr``: the runtime's
    ``cudaHostGetDevicePointer`` where CuPy binds it, else the host address itself (under
    unified addressing, every 64-bit CUDA platform, the two are one)."""
    rt = _cupy().cuda.runtime
    get = getattr(rt, "hostGetDevicePointer", None)
    return int(get(host_ptr, 0)) if get is not None else host_ptr
_REAL = frozenset((np.dtype(np.float32), np.dtype(np.float64)))


def cg_plain(b, A, rtol: float, atol: float, maxiter: int) -> PlainCG | None:
    """``cg(A, b)`` with nothing else, in :class:`PlainCG`: ``b`` a 1-D contiguous real
    ``cupy.ndarray``, ``A`` a :class:`~tessera_array.sparse.linalg._fused.FusedOperand` of
    a stored matrix of b's dtype; ``rtol`` and ``atol`` checked by the caller. None (the
    caller's other paths) for anything else."""
    if (not _is_native(b) or b.ndim != 1 or b.dtype not in _REAL or b.shape[0] == 0
            or not b.flags.c_contiguous or A.kind not in ("dense", "csr")):
        return None
    solve = PlainCG(b, A, float(rtol), float(atol), maxiter)
    return solve if solve._w is not None else None


def cg_fused(x, r, p, A, M, atol, maxiter) -> FusedCG | None:
    """The fused CG solve over ``x``, ``r`` and ``p``: the ``cg_fused`` contract of
    :mod:`tessera_array.sparse.linalg._fused` (see :class:`FusedCG`). Declines (None) an
    empty system, which the generic loop serves."""
    if _is_native(r) and r.ndim == 1 and r.shape[0] == 0:
        return None
    return FusedCG(x, r, p, A, M, atol, maxiter)


cg_fused.plain = cg_plain  # (what _isolve._cg_plain looks for: one launch for cg(A, b))


def instances(warp: int) -> list:
    """``(file, name)`` of every kernel template instance these launchers may ask for at
    warp width ``warp`` (``.ci/compile-kernels`` compiles each)."""
    return [(FILE, _name(dt, it, pt, warp)) for dt in sorted(_FLOATING, key=str)
            for it in _INDEX for pt in _INDEX]


def register(registry, backend_name: str) -> None:
    from tessera_array.sparse._routing import register_routing

    registry.register("cg_fused", backend_name, _dtypes.FLOATING, cg_fused)
    register_routing(backend_name, "cg", ROUTING, measured=MEASURED, replace=True)
