"""The fused GMRES solve of the CuPy backend: one persistent cooperative kernel
(``kernels/cuda/gmres.cu``) per run of restart cycles.

``gmres_fused(x, b, A, M, *, restart, maxiter, inner_limit, atol, ptol, eps, nonzero)``,
the registered op ``gmres_fused`` of the ``matvec`` family, implements the contract of
:mod:`tessera_array.sparse.linalg._fused_gmres` for stored matrices (dense or CSR, ``A``
and ``M``) over 1-D contiguous ``cupy.ndarray`` of one floating dtype (real or complex);
it declines (None) a callable operator and a restart longer than :data:`RESTART_MAX`.
:meth:`FusedGMRES.run` is one cooperative launch running up to ``cycles`` restart cycles
(at most :attr:`FusedGMRES.cycles_max`) with the Arnoldi process (CGS2), the Givens
rotations, the triangular solve, the update of x and every stopping test on the device,
three grid barriers an inner iteration (four with ``M``), or two (three with ``M``) where
the basis is at most :data:`PIPELINE_BYTES` (with one reduction instead of two where the
rows also fit the row cache: :func:`column_form`); then one read of the state words and
histories through pinned memory (``# sync``). :func:`gmres_plain` (``gmres_fused.plain``)
is ``gmres(A, b)`` from zero without M, its ||b|| and threshold taken by the first launch.

Geometry (:func:`geometry`): each block owns a contiguous run of rows (their products,
updates and partial dot products), as many blocks as the rows fill and at most
:data:`BLOCKS_PER_SM` blocks of :data:`BLOCK` threads per multiprocessor where the basis
is at most :data:`PIPELINE_BYTES` (fewer blocks: each reduction reads fewer partial
sums), else :data:`STREAM_BLOCKS_PER_SM` of :data:`STREAM_BLOCK`; never more than stay
resident. The grid depends on n, the restart, the dtype and the device only.
"""

from __future__ import annotations

import ctypes

import numpy as np
from tessera_array.backends._common import memo

from tessera_array import _dtypes

from . import _kernels
from ._persistent import Launch, check_vectors, kernel_name, lanes_of, stored_pair
from ._persistent import geometry as _geometry
from .cg import _INDEX, OP_DENSE, OP_NONE, _ptr, _resident_blocks

c_int, c_void_p = ctypes.c_int, ctypes.c_void_p

__all__ = ["BLOCK", "BLOCKS_PER_SM", "ONE_REDUCTION_RMAX", "RESTART_MAX", "STREAM_BLOCK",
           "STREAM_BLOCKS_PER_SM", "FusedGMRES", "column_form", "geometry", "gmres_fused",
           "gmres_plain", "instances", "launch_shape", "register"]

FILE = "gmres.cu"
# Blocks. Where the basis is at most PIPELINE_BYTES (a latency-bound system, the two-
# barrier column): one block of 512 threads a multiprocessor, the warps of two blocks of
# 256 with half the partial sums for each reduction to read. Past it (memory-bound
# sweeps): two blocks of 256 a multiprocessor. (128 registers a thread allow either.)
# H100, us an inner iteration (benchmarks/probe_gmres_stages.py --block --blocks-per-sm,
# restart 30, 4 cycles, CUDA events over whole solves, medians of 15; two runs on two
# machines, trees of this file's history before its last changes):
#
#   system                    512 x 1          256 x 2
#   dense SPD 2049 float32    16.95 / 22.16    19.32 / 23.15
#   dense SPD 2049 float64    20.83 / 24.22    22.93 / 24.41
#   Poisson 1024^2 float32          262.0            244.8
#
# (cupyx's gmres on the dense system took 95-245 us an iteration in those runs, its
# host's share varying from machine to machine; on the large sparse system it is ahead,
# its classical Gram-Schmidt sweeping the basis twice an iteration to CGS2's four:
# benchmarks/NOTES.md, "Fused GMRES on CUDA: 512-thread blocks, the dot products'
# loads, and what did not move")
BLOCKS_PER_SM = 1
BLOCK = 512  # threads a block
STREAM_BLOCKS_PER_SM = 2  # (past PIPELINE_BYTES)
STREAM_BLOCK = 256
RESTART_MAX = 128  # gmres.cu's RMAX: the longest restart it takes
SLOTS = RESTART_MAX + 4  # gmres.cu's: a block's partial sums (a multiple of 16 / itemsize)
# The two-barrier column (gmres.cu's "Two barriers") keeps M A V, restart more vectors,
# and sweeps them once more a column: taken where the basis is at most this many bytes
# (a latency-bound system). H100, dense SPD 2049 (a basis of 0.25 / 0.5 MB), us an inner
# iteration, two against three barriers, three runs: float32 19.3 / 20.4, 22.2 / 23.6,
# 21.6 / 21.0; float64 22.9 / 25.0, 24.2 / 27.3, 21.2 / 26.4. Past it, as Poisson 1024^2
# (126 MB), the extra sweep would cost more than a barrier saves; 8 MiB between the two
# is a guess, not a measured crossing.
PIPELINE_BYTES = 8 << 20
# The two-barrier column's product reads U from each block's shared memory (gmres.cu's
# stage_v) where a dense A's vector of n elements is at most STAGE_BYTES and the grid
# stays resident with it. H100, dense 2049, the product stage (us an inner iteration,
# float32 / float64): 3.81 / 6.05 reading U from L2, 3.91 / 5.84 staged (one call). Kept
# for float64's 0.2; the first product's ~1.1 us over a repeated one (3.68 against 2.55
# under TESSERA_GMRES_PRODUCT_PROBE) is not U's loads.
STAGE_BYTES = 64 << 10
# A dense A's own rows in each block's shared memory for the whole launch (gmres.cu's
# a_cols: their first columns, as many as fit beside the kernel's static shared memory
# and U's copy, at most A_CACHE_BYTES a block), where a warp takes a row: the product
# reads them there instead of streaming A from L2 every column. 0 turns it off. H100,
# dense SPD 2049, whole solves (us an inner iteration, float32 / float64), two calls:
# cached 12.40 / 14.23 and 12.07 / 14.24, not cached 14.31 / 16.81 and 13.91 / 16.41; the
# product stage 4.43 -> 2.65 (whole rows, 131 KB a block) and 6.49 -> 4.55 (float64: ~1,400
# of a row's 2,049 columns fit).
A_CACHE_BYTES = 256 << 10
_MAX_DYNAMIC_SHARED = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
_SHARED_SIZE = 1  # CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES (the static shared memory)
_OPTIN = 97  # cudaDevAttrMaxSharedMemoryPerBlockOptin
_opted = memo("cuda.gmres.shared")  # (device id, function) -> dynamic bytes allowed
# (device id, n, dtype, restart, index types, A's and M's kinds, lanes, warp) -> _Plan
_plans = memo("cuda.gmres.plans", limit=256)
# One reduction a column (gmres.cu's "One reduction", pipe 2, its own instance) where the
# two-barrier column keeps its rows in shared memory (a warp a row, restart <=
# ONE_REDUCTION_RMAX, gmres.cu's CACHE_RMAX) and T is not complex128. H100, dense 2049,
# whole solves (us an inner iteration, float32 / float64): two reductions 15.64 / 18.51,
# one reduction in the kernel of three forms 14.69 / 18.94 (its product 1.1 us slower:
# spills), as its own instance without spills 14.31 / 16.81 against that kernel's 14.75 /
# 19.11 in the same call (A not cached in either).
ONE_REDUCTION_RMAX = 32
PRESID_MAX = 4096  # the inner estimates one run may record (cycles_max * restart)
CYCLES_MAX = 64  # the most cycles of one run
# Entry points, state words and status values: gmres.cu's.
E_INIT, E_CYCLE = 0, 1
S_FORM = 3  # gmres.cu's: the one-reduction instance launched where its rows do not fit
(W_STATUS, W_ITER, W_INNER, W_RNORM, W_PTOL, W_PMAX, W_PRESID, W_XPOINTS, W_NHIST, W_NPR,
 W_ATOL, WORDS) = range(12)
_FLOATING = frozenset(np.dtype(d._np) for d in _dtypes.FLOATING)


def _cupy():
    import cupy

    return cupy


def _name(dtype, itype, ptype, warp: int, block: int, one: bool = False) -> str:
    """gmres.cu's instance ``tessera_gmres_run<T, I, P, WARP, BLOCK, ONE>`` (ONE: the
    one-reduction column alone)."""
    return (kernel_name("tessera_gmres_run", dtype, itype, ptype, warp, block)[:-1]
            + (", true>" if one else ", false>"))


def geometry(n: int, lanes: int, warp: int, sms: int, resident: int,
             per_sm: int = 1, block: int = BLOCK) -> int:
    """Blocks of one solve (:func:`._persistent.geometry`, at most ``per_sm`` a
    multiprocessor, blocks of ``block`` threads, :data:`BLOCK` by default; the launcher
    passes :data:`BLOCKS_PER_SM` and :data:`BLOCK`, or the ``STREAM_`` pair past
    :data:`PIPELINE_BYTES`)."""
    return _geometry(n, lanes, warp, sms, resident, per_sm, block)


def launch_shape(n: int, restart: int, itemsize: int) -> tuple:
    """``(pipelined, block, per_sm)`` of a solve: the two-barrier column and
    :data:`BLOCK` threads a block, :data:`BLOCKS_PER_SM` a multiprocessor, where the basis
    (``restart + 1`` vectors of ``n`` elements of ``itemsize`` bytes) is at most
    :data:`PIPELINE_BYTES`; else the three-barrier column and the ``STREAM_`` pair."""
    pipelined = (restart + 1) * n * itemsize <= PIPELINE_BYTES
    if pipelined:
        return True, BLOCK, BLOCKS_PER_SM
    return False, STREAM_BLOCK, STREAM_BLOCKS_PER_SM


def stage_bytes(kernel, device, a, n: int, itemsize: int, pipelined: bool,
                block: int, blocks: int, sms: int) -> int:
    """Dynamic shared memory a block for U (gmres.cu's stage_v; 0: not staged): n
    elements, in the two-barrier column of a dense A, where that is at most STAGE_BYTES,
    the kernel may take it (the device's limit, its static shared memory beside it) and
    ``blocks`` blocks stay resident on ``sms`` multiprocessors."""
    need = n * itemsize
    if not pipelined or a.kind != OP_DENSE or need > STAGE_BYTES:
        return 0
    return need if _dynamic(kernel, device, need, block, blocks, sms) else 0


def _dynamic(kernel, device, need: int, block: int, blocks: int, sms: int) -> bool:
    """Whether the kernel may take ``need`` bytes of dynamic shared memory a block (asked
    for once: refused where they and the static shared memory pass the device's limit)
    with ``blocks`` blocks resident on ``sms`` multiprocessors."""
    driver = _cupy().cuda.driver
    key = (device.id, kernel.ptr)  # (a build: one name may have builds of other options)
    if need > _opted.get(key, 0):
        try:
            driver.funcSetAttribute(kernel.ptr, _MAX_DYNAMIC_SHARED, need)
        except driver.CUDADriverError:
            return False
        _opted[key] = need
    return driver.occupancyMaxActiveBlocksPerMultiprocessor(kernel.ptr, block, need) * sms \
        >= blocks


def a_columns(a, n: int, rows: int, itemsize: int, block: int, warp: int, room: int) -> int:
    """gmres.cu's a_cols: how many leading columns of each of a block's ``rows`` rows of
    a dense A (row lanes a warp, at most a row a warp) fit ``room`` bytes (capped at
    :data:`A_CACHE_BYTES`): all n, or a multiple of the warp; 0 for anything else."""
    room = min(room, A_CACHE_BYTES)
    if a.kind != OP_DENSE or a.lanes != warp or rows > block // warp or rows < 1 or room <= 0:
        return 0
    cols = min(n, room // (rows * itemsize))
    return cols if cols == n else cols // warp * warp


def shared_plan(kernel, device, a, n: int, itemsize: int, pipelined: bool,
                block: int, blocks: int, sms: int, warp: int) -> tuple:
    """``(stage, a_cols, bytes)``: U's staged bytes (:func:`stage_bytes`), the columns of
    A's rows each block keeps (:func:`a_columns`: the room the device's per-block limit
    leaves beside the static shared memory and U's copy, 16-byte aligned) and the launch's
    dynamic shared memory a block; a_cols 0 where the grid would not stay resident."""
    stage = stage_bytes(kernel, device, a, n, itemsize, pipelined, block, blocks, sms)
    base = -(-stage // 16) * 16
    rows = -(-n // blocks)
    cols = 0
    if a.kind == OP_DENSE and A_CACHE_BYTES > 0:
        cupy = _cupy()
        try:
            room = (cupy.cuda.runtime.deviceGetAttribute(_OPTIN, device.id)
                    - cupy.cuda.driver.funcGetAttribute(_SHARED_SIZE, kernel.ptr) - base)
        except (cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError):
            room = 0
        cols = a_columns(a, n, rows, itemsize, block, warp, room)
        if cols and not _dynamic(kernel, device, base + rows * cols * itemsize, block, blocks,
                                 sms):
            cols = 0
    return stage, cols, (base + rows * cols * itemsize) if cols else stage


def _check(x, b, restart, maxiter, inner_limit, atol, ptol, eps):
    check_vectors("gmres_fused", (("x", x), ("b", b)), _FLOATING)
    for name, v in (("restart", restart), ("maxiter", maxiter)):
        if isinstance(v, bool) or int(v) != v or v < 1:
            raise ValueError(f"gmres_fused: {name} must be an int >= 1. Received: "
                             f"{name}={v!r}")
    if isinstance(inner_limit, bool) or int(inner_limit) != inner_limit or inner_limit < -1:
        raise ValueError(f"gmres_fused: inner_limit must be an int >= 1, or -1 for none. "
                         f"Received: inner_limit={inner_limit!r}")
    for name, v in (("atol", atol), ("ptol", ptol), ("eps", eps)):
        if not float(v) >= 0:
            raise ValueError(f"gmres_fused: {name} must be >= 0. Received: {name}={v!r}")


def column_form(n: int, restart: int, dtype, pipelined: bool, block: int, blocks: int,
                warp: int) -> int:
    """gmres.cu's ``pipe``: 2 (one reduction a column) where the two-barrier column keeps
    its rows in shared memory (at most a row a warp, restart <= ONE_REDUCTION_RMAX) and
    the dtype is not complex128; else 1 (two barriers) or 0 (three)."""
    if not pipelined:
        return 0
    rows = -(-n // blocks)
    one = (restart <= ONE_REDUCTION_RMAX and rows <= block // warp
           and np.dtype(dtype) != np.complex128)
    return 2 if one else 1


def _plan(dev, n, dt, restart, index, a, lanes, warp) -> _Plan:
    """A new :class:`_Plan`: the launch shape, the column form (:func:`column_form`; the
    instance of one reduction where it is 2), the grid (resident with the instance's
    registers and U's shared memory) and the staging of U."""
    pipelined, block, per_sm = launch_shape(n, restart, dt.itemsize)
    sms = _kernels.multiprocessors(dev)
    # (the form from the grid the rows ask for; then the instance's own residency)
    blocks = geometry(n, lanes, warp, sms, per_sm, per_sm, block)
    pipe = column_form(n, restart, dt, pipelined, block, blocks, warp)
    while True:
        name = _name(dt, index[0], index[1], warp, block, pipe == 2)
        kernel = _kernels.function(FILE, name, dev)
        blocks = geometry(n, lanes, warp, sms, _resident_blocks(kernel, name, dev, block),
                          per_sm, block)
        if pipe != 2 or column_form(n, restart, dt, pipelined, block, blocks, warp) == 2:
            break
        pipe = 1  # (fewer blocks resident: rows past the cache)
    stage, cols, shared = shared_plan(kernel, dev, a, n, dt.itemsize, pipelined, block,
                                      blocks, sms, warp)
    return _Plan(kernel, pipelined, pipe, block, blocks, stage, cols, shared)


class _Plan:
    """What the solves of one (device, n, dtype, restart, operator layout) share: the
    kernel, its launch shape, and workspaces no running solve holds (:class:`_Work`, at
    most two kept)."""

    __slots__ = ("a_cols", "block", "blocks", "free", "kernel", "pipe", "pipelined", "shared",
                 "stage")

    def __init__(self, kernel, pipelined, pipe, block, blocks, stage, a_cols, shared):
        self.kernel, self.pipelined, self.pipe, self.block = kernel, pipelined, pipe, block
        self.blocks, self.stage, self.a_cols, self.shared = blocks, stage, a_cols, shared
        self.free = []


class _Work:
    """One solve's device workspace (gmres.cu's part, r, z, V, y, U and Z in one T
    buffer; small; the state words st; the barrier's counter), a pinned host copy of
    the words, and the kernel's launch over them: its arguments as ctypes values that a
    solve rebinds (:meth:`bind`) instead of building anew. A solve takes it from its plan
    and gives it back once finished, after its last read, so no two solves use it at
    once. Every buffer is written before it is read in a solve, but the counter: zeroed
    once, a launch leaves it at a multiple of the grid's blocks, where the barrier may
    start (persistent.cuh, grid_sync)."""

    __slots__ = ("bar", "launch", "small", "st", "work")

    def __init__(self, plan, n, dt, restart, nz, words):
        pipelined = plan.pipelined
        nu = (restart + 1) * n if pipelined else 0  # U, then Z (restart vectors)
        parts = 2 * SLOTS * plan.blocks
        # One T workspace: the partial sums first (16-byte aligned, as persistent.cuh's
        # RowGrid loads them), then r, z (M's products), the basis V, y, U and Z.
        self.work = w = _kernels.empty((parts + n + nz + (restart + 1) * n + restart + nu,),
                                       dt)
        c = 2 if dt.kind == "c" else 1
        self.small = _kernels.empty((c * restart * (restart + 1) + 2,), np.float64)
        self.st = _kernels.empty((words,), np.float64)
        self.bar = _cupy().zeros((1,), dtype=np.uint64)
        o = parts + n + nz + (restart + 1) * n
        u = w[o + restart:o + restart + n] if pipelined else None
        zs = w[o + restart + n:o + restart + nu] if pipelined else None
        c_, none = ctypes, (c_int(0), c_int(0), c_void_p(0), c_void_p(0), c_void_p(0),
                            ctypes.c_longlong(0))
        args = [c_.c_longlong(n), c_int(E_INIT), c_int(restart), c_.c_longlong(0),
                c_.c_longlong(0), c_int(1), c_int(0), c_.c_double(0.0), c_.c_double(0.0),
                c_.c_double(0.0), *none, *[type(v)(v.value) for v in none],
                *[_ptr(v) for v in (None, None, w[parts:parts + n], w[parts + n + nz:o],
                                    w[parts + n:parts + 2 * n] if nz else None,
                                    w[o:o + restart], w[:parts], self.small, self.st,
                                    self.bar)],
                c_int(plan.pipe), _ptr(u), _ptr(zs), c_int(int(plan.stage > 0)),
                c_.c_double(-1.0), c_.c_longlong(plan.a_cols)]
        self.launch = Launch(plan.kernel, plan.blocks, args, self.st, words, plan.block,
                             plan.shared)

    def bind(self, x, b, a, m, maxiter, inner_limit, atol, ptol, eps, nonzero, rtol):
        """The arguments of one solve (the entry and cycles are the run's)."""
        args = self.launch.args
        args[1].value = E_INIT
        args[3].value, args[4].value = int(maxiter), int(inner_limit)
        args[6].value = int(bool(nonzero))
        args[7].value, args[8].value, args[9].value = float(atol), float(eps), float(ptol)
        for dst, src in zip(args[10:22], (*a.ctypes_args(), *m.ctypes_args())):
            dst.value = src.value
        args[22].value, args[23].value = b.data.ptr, x.data.ptr
        args[36].value = float(rtol)


class FusedGMRES:
    """The device state of one GMRES solve: see the module docstring. ``rtol >= 0``
    (:func:`gmres_plain`: x zero, no M) has the first launch take ||b|| and set the
    threshold ``max(atol, rtol ||b||)`` and the first inner tolerance itself (``ptol``
    unused); the kernel, its shape and finished solves' workspaces (with their launch
    arguments) are kept per (device, n, dtype, restart, operator layout) (``_plans``)."""

    def __init__(self, x, b, A, M, restart, maxiter, inner_limit, atol, ptol, eps, nonzero,
                 rtol=-1.0):
        self.device = dev = b.device
        self.dtype = dt = b.dtype
        self.n = n = b.shape[0]
        self.restart = restart = int(restart)
        self.cycles_max = max(1, min(CYCLES_MAX, PRESID_MAX // restart))
        self.x, self.b = x, b
        self._finished = False
        self._entry = E_INIT
        self._w = None
        with dev:
            warp = _kernels.warp_size(dev)
            a, m, index = stored_pair(A, M, n, dt, warp)
            self.declined = a is None
            if self.declined:
                return
            lanes = lanes_of(a, m)
            key = (dev.id, n, dt, restart, index, a.kind, m.kind, lanes, warp)
            plan = _plans.get(key)
            if plan is None:
                plan = _plans.put(key, _plan(dev, n, dt, restart, index, a, lanes, warp))
            self.pipelined, self.blocks = plan.pipelined, plan.blocks
            self.form = ("three barriers", "two barriers", "one reduction")[plan.pipe]
            self.staged = plan.stage > 0
            self.a_cols = plan.a_cols  # (A's columns each block keeps in shared memory)
            self._plan = plan
            nz = n if m.kind != OP_NONE else 0
            self._w = w = plan.free.pop() if plan.free else _Work(
                plan, n, dt, restart, nz, WORDS + self.cycles_max * (restart + 1) + 1)
            w.bind(x, b, a, m, maxiter, inner_limit, atol, ptol, eps, nonzero, rtol)
            self._launch = w.launch
            self._keep = (a, m)  # (what the kernel reads lives with the solve)

    def _release(self):
        w, self._w = self._w, None
        if w is not None and len(self._plan.free) < 2:
            self._plan.free.append(w)

    def run(self, cycles: int, presids: bool = False):
        """Up to ``cycles`` restart cycles in one launch, then one read: a
        :class:`~tessera_array.sparse.linalg._fused_gmres.GMRESReport`."""
        from tessera_array.sparse.linalg._fused_gmres import GMRESReport, GMRESStatus

        if isinstance(cycles, bool) or int(cycles) != cycles or not 1 <= cycles <= \
                self.cycles_max:
            raise ValueError(f"gmres_fused: run takes 1 <= cycles <= {self.cycles_max}. "
                             f"Received: cycles={cycles!r}")
        if self._finished:
            raise ValueError("gmres_fused: the solve has finished (its last report was not "
                             "RUNNING); run is not called again")
        cycles = int(cycles)
        launch = self._launch
        with self.device:
            launch.args[1].value, launch.args[5].value = self._entry, cycles
            launch()
            self._entry = E_CYCLE
            hist0 = WORDS + cycles + 1  # (gmres.cu: the estimates follow this run's norms)
            # sync: the state words, this run's ||r|| history and (asked) its estimates.
            st = launch.read(hist0 + (cycles * self.restart if presids else 0))
        if st[W_STATUS] == S_FORM:
            raise RuntimeError(f"gmres_fused: the one-reduction instance ran where its rows "
                               f"do not fit its cache (n={self.n}, {self.blocks} blocks): a "
                               f"launcher error")
        status = GMRESStatus(int(st[W_STATUS]))
        nhist, npr = int(st[W_NHIST]), int(st[W_NPR])
        inner = int(st[W_INNER])
        self._finished = status is not GMRESStatus.RUNNING
        if self._finished:
            self._release()
        return GMRESReport(status, inner, int(st[W_ITER]),
                           tuple(float(v) for v in st[WORDS:WORDS + nhist]),
                           tuple(float(v) for v in st[hist0:hist0 + npr]) if presids else (),
                           int(st[W_XPOINTS]))


def gmres_fused(x, b, A, M, *, restart, maxiter, inner_limit, atol, ptol, eps, nonzero):
    """The fused gmres solve over ``x`` and ``b`` (:class:`FusedGMRES`), or None: an
    empty system, a restart past :data:`RESTART_MAX`, or an operator that is not a
    stored matrix of b's dtype (the generic loop serves those)."""
    _check(x, b, restart, maxiter, inner_limit, atol, ptol, eps)
    if b.shape[0] == 0 or int(restart) > RESTART_MAX:
        return None
    solve = FusedGMRES(x, b, A, M, restart, maxiter, inner_limit, atol, ptol, eps, nonzero)
    return None if solve.declined else solve


def gmres_plain(b, A, *, restart: int, maxiter: int, rtol: float, atol: float,
                eps: float) -> FusedGMRES | None:
    """``gmres(A, b)`` from x = 0 without M or callback, in a :class:`FusedGMRES` whose
    first launch takes ||b||, the threshold and the first inner tolerance itself (no read
    before it): ``b`` a 1-D contiguous ``cupy.ndarray`` of a floating dtype, ``A`` a
    :class:`~tessera_array.sparse.linalg._fused.FusedOperand` of a stored matrix of b's
    dtype; ``restart`` and ``maxiter`` ints >= 1, ``rtol`` and ``atol`` >= 0, checked by
    the caller. The solve's x (``solve.x``) is zeroed by the first launch; its first
    report's first residual norm is ||b||. None (the caller's other paths) for anything else."""
    cupy = _cupy()
    if (not isinstance(b, cupy.ndarray) or b.ndim != 1 or b.dtype not in _FLOATING
            or b.shape[0] == 0 or not b.flags.c_contiguous or A.kind not in ("dense", "csr")
            or int(restart) > RESTART_MAX or not float(rtol) >= 0):
        return None
    with b.device:
        x = _kernels.empty(b.shape, b.dtype)  # (the first launch zeroes it)
    solve = FusedGMRES(x, b, A, None, restart, maxiter, -1, atol, 0.0, eps, False,
                       rtol=float(rtol))
    return None if solve.declined else solve


gmres_fused.plain = gmres_plain  # (what _gmres._gmres_plain looks for: no read before)


def instances(warp: int) -> list:
    """``(file, name)`` of every kernel template instance these launchers may ask for at
    warp width ``warp`` (``.ci/compile-kernels`` compiles each)."""
    return [(FILE, _name(dt, it, pt, warp, block, one))
            for dt in sorted(_FLOATING, key=str) for it in _INDEX for pt in _INDEX
            for block in sorted({BLOCK, STREAM_BLOCK})
            for one in ((False, True) if block == BLOCK and dt != np.complex128 else (False,))]


def register(registry, backend_name: str) -> None:
    registry.register("gmres_fused", backend_name, _dtypes.FLOATING, gmres_fused)
