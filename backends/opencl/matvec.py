"""Dense matvec launchers of the OpenCL backend (``kernels/opencl/matvec.cl``).

``dense_matvec_<variant>(a, x) -> y`` computes ``y = A @ x`` for a 2-D
``pyopencl.array.Array`` ``a`` and a 1-D ``x`` of the same dtype and context, with
the NumPy backend's call signature (:func:`tessera_array.backends.numpy.matvec.dense_matvec`).
Any strides and offsets are read in place (a transposed view costs no copy); ``y``
is a fresh contiguous array on ``a``'s queue and allocator. The context and queue
come from the arguments.

Variants (the keys of the per-solver routing table,
:mod:`tessera_array.sparse._routing`):

``scalar``
    One work-item per row on GPUs (``tessera_matvec_scalar``). On CPU devices
    (PoCL) one work-item (work-group of one) per block of contiguous rows,
    :data:`CPU_BLOCKS` blocks per compute unit, eight rows at a time sharing each
    load of ``x`` (row-major ``A``), or column by column into the block's slice of
    ``y`` (column-major ``A``, e.g. a transposed view), built with ``-DTESSERA_CPU``.
``warp``
    One work-group of :data:`WARP_WG` work-items per row with a local-memory tree
    reduction (``tessera_matvec_warp``): the portable form of a warp per row, since
    OpenCL has no warp. A sub-group form (``sub_group_reduce_add``) needs
    ``cl_khr_subgroups``, which NVIDIA's OpenCL driver and CI's PoCL 3.0 lack (PoCL
    5.0 has it, on CPU devices only, where this variant is not used: below), so it
    is not written: it could not be run where it would matter.
``default``
    The ``scalar`` kernel (see :data:`DEFAULT_IS`).

On CPU devices ``warp`` runs the ``scalar`` row-block kernel, as the NumPy backend
maps every variant name to one BLAS call: a work-group per row measured 0.1-0.3x of
the row-block kernel on PoCL 3.0 (float32, 513 to 4097 square, a shared 2-core
EPYC), so the per-solver routing keeps its meaning on GPUs and costs nothing on
CPUs. The tests force the GPU geometry on PoCL too, so both kernels run in CI.

Why the CPU kernel ran at half of BLAS (PoCL 3.0-rc2, LLVM 14, 2-core EPYC,
2026-11-30). PoCL used both cores (two worker threads, each ~0.5 of the wall time
under the shared machine's load, read from /proc/self/task), the rows were split
into 16 blocks, and the inner loop was explicit float8 arithmetic; but
``POCL_VECTORIZER_REMARKS=1`` and the disassembly of the cached ``.so``
(``POCL_LEAVE_KERNEL_COMPILER_TEMP_FILES=1``) show that PoCL 3.0 calls ``vload8``
and ``min`` out of line (remark: "not inlined ... should never be inlined"): five
calls per 8 columns of 4 rows, a compute-bound loop (2049^2, which stays in L3,
ran at 6 GB/s against BLAS's 54). Loads through an unaligned vector typedef
compile to plain ``vmovups``/``vmulps`` with no call. The launcher also spent
20-30 us a call in ``cla.empty`` (NumPy shape checks in pyopencl's constructor);
the fast constructor takes 3 us.

Variants tried (float32, PoCL 3.0 CPU path; ``numpy`` = ``a @ x``, OpenBLAS sgemv
on both cores; medians in ms of 21-41 reps alternated with NumPy in one process;
the machine's load average was 2-6 throughout, from other users, so a figure moves
by up to 2x between runs: compare within a run). The launcher, before and after,
with ``finish`` (scratch script alternating NumPy / before / after; 4 runs)::

                                          513^2       2049^2      4097^2
    numpy a @ x                           0.09-0.14   1.0-16      7.7-17
    before: vload8 calls, 4 rows          0.45-0.63   1.8-9.3     12-32
    after, 4 rows (first form)            0.15-0.18   1.0-3.6     7.9-12.6
    after, 8 rows (kept)                  0.17-0.20   2.0-3.9     16-18.5
    before/after, same run                2.9-3.4x    1.4-2.6x    1.3-1.9x

Kernels alone (arguments set once, ``enqueue_nd_range_kernel`` + ``finish``, 16-32
row blocks; run A at load 2, run B at load 5.7)::

                                          513^2   2049^2  4097^2
    A  numpy                              0.05    1.2-5.6 3.8-8.1
    A  4 rows, typedef loads              0.15    2.8     8.4
    A  2 rows x 2 accumulators            0.09    2.9     5.7
    A  1 row, scalar loop, clang fp
         reassociate pragma (vectorized)  0.09    2.0     12.1
    A  work-items across columns, work-
         group 8 / 16 / 64, local sums    0.22-0.31 4.3-9.1 31-64
    B  numpy                              0.05    1.1     10.9
    B  4 rows                             0.08    4.2     17.5
    B  8 rows (kept)                      0.08    2.2     16.1
    B  1 row, 4 accumulators              0.06    4.4     19.2
    B  1 row, scalar loop, no pragma      0.28    13.0    43.5
    B  4 rows + __builtin_prefetch 64     0.07    2.1     11.3

The work-items-across-columns form (consecutive work-items on consecutive
addresses, for PoCL's vectorizer across work-items) is not vectorized at all:
its remarks say "loop not vectorized: cannot prove it is safe to reorder
floating-point operations" (PoCL's work-item loop wraps the strided j loop).
Further rounds of three side-by-side runs each showed a position bias: the
variant timed right after NumPy's call loses 10-30% at 4097^2 (OpenBLAS's spinning
thread, below). Prefetching (32-512 floats ahead) looked 10% better in one round
and worse in the next with the order swapped; 8 rows vs 4 rows, and 4 / 8 / 16 /
32 blocks per compute unit, equal within noise in kernel-only times (profiling
events; 2049^2 1.36-1.82 vs 1.61-1.62 ms, 4097^2 12.1-13.2 vs 11.1-14.1 ms at load
6). 8 rows are kept (one load of x per 8 rows), 16 blocks per compute unit.
A in huge pages (``USE_HOST_PTR`` on NumPy's memory, which NumPy madvises; PoCL's
own buffers get 4 KiB pages), 4097^2, one thread each side: 5.13 ms against 5.58
(-8%); NumPy 4.58.

Launch cost (``enqueue_nd_range_kernel`` of an empty kernel + ``finish``): 17 us
minimum, 40-70 us median under the load above (two thread wake-ups in PoCL); the
whole 513^2 launcher call with ``finish``: 58 us minimum, 120 us median, against
NumPy's 19-24 us. 513^2 is launch bound: the kernel itself runs in 27-30 us
(profiling events), so no kernel change reaches 1.0 there.

``python -m benchmarks.opencl_kernels`` after the change (NumPy launcher time /
ours; load average 4-7 from other users). Two runs with the benchmark's old
back-to-back pairing: 513^2 0.34-0.45, 2049^2 3.3-6.2, 4097^2 0.66-0.99, float64
4097^2 0.85-0.93. There, each OpenCL call ran while OpenBLAS's worker thread, woken
by the NumPy call just before, still spun on one of the two cores for ~0.1 s (see
``BLAS_SETTLE_S`` in the benchmark: 4097^2 in 20.4 ms right after NumPy, 9.7 ms
0.3 s later), and NumPy's 2049^2 time swung between 0.7 and 16 ms. Two runs with
each side timed in its own steady state (a pause and an untimed call of its own
before each timed call): 513^2 0.24-0.44, 2049^2 0.35-1.27, 4097^2 1.16-1.25,
float64 4097^2 1.03-1.44; one more run of the old pairing in between: 513^2 0.33,
2049^2 0.54-5.3, 4097^2 0.86-1.91, float64 0.69. So 4097^2 (A streamed from DRAM
by both sides) reaches 1.0 in steady state; 2049^2, whose A stays in the 32 MiB L3
in steady state, does not when OpenBLAS runs at full speed (0.8 ms against our
2.0-2.3 ms). Why, measured back to back at load 3: one thread each, the kernel
reads L3 at 12-19 GB/s against OpenBLAS's 18-22 (1025^2: 38 against 44), but
OpenBLAS on both cores reaches 0.23 ms (73 GB/s) while two PoCL threads stay at
~1 ms. The per-thread CPU time (/proc/self/task, 1000 back-to-back 2049^2 calls
of 1.96 ms): each PoCL worker ran 0.37-0.38 of the wall time, so each call spends
more than half its time with its workers off the CPU (woken late, or preempted
by the other users' processes); at 4097^2 each runs ~0.5. 1, 2, 4 or 16 blocks per
compute unit did not change it (kernel 0.7-1.2 ms minimum in each).
Not fixed here: the thread scheduling is PoCL's and the OS's. 513^2 is launch
bound (above). Earlier figures, before the change: PoCL 5.0 on 2 pinned cores of
the H200 host's Xeon 513^2 0.27, 2049^2 0.73-0.75, 4097^2 0.64-0.77; NVIDIA H200
OpenCL: 4097^2 in 0.24 ms (scalar) and 0.09 ms (warp).

``axpy(alpha, x, y, subtract=False)`` updates ``y += alpha * x`` (``-=``) in place,
the product rounded and then the sum, as NumPy's expression (and the NumPy
backend's ``axpy``) rounds them; ``alpha`` is a Python scalar or a 0-d array of
``y``'s dtype, read on the device (no host sync).

Host cost per call. A call looks up its launch plan under a key of every attribute
the checks read (classes, contexts, dtypes, shapes, strides, offsets; ``subtract`` and
alpha's class for ``axpy``): kernel, geometry, the NumPy scalar arguments and the
result's layout. A new key runs the full checks (same errors, same order) and builds
the plan (:func:`_plan`, :func:`_axpy_plan`); ``_setup`` holds both, cleared at
:data:`~._launch.PLANS_MAX` entries. Expected before the change: the checks (~3 us),
nine NumPy scalars (0.4-0.6 us each) and the kernel key go from each call, the
result's allocation (2-3 us) stays: the matvec Python 8-9 us -> 3-4 us (the H200's
10-12 us per call was most of the gap to cuBLAS at 4096^2). Measured with
``python -m benchmarks.opencl_launch --against DIR`` (DIR: matvec.py,
sparse.py, optim.py of commit dd4c2a4), PoCL 3.0 on the shared 2-core EPYC, load 5-6,
tiny inputs (the kernel costs nothing), thread-CPU us per call, medians of 31 batches of
100 calls, three runs (the first and third at about twice the second's load). ``enqueue``: the
call's kernel invocations alone, replayed with its arguments; ``python``: the whole
call with each kernel a stub that enqueues nothing (the launcher's own Python, the
result's allocation included)::

                          enqueue     call before  call now    python before  now
    matvec scalar 8x8     11.9-17.4   25.2-40.7    15.6-23.9   9.3-17.9       4.0-7.8
    matvec warp 8x8       11.3-15.1   27.1-40.3    14.9-22.2   9.4-18.1       3.6-7.3
    axpy host alpha, 8    11.5-16.0   18.0-34.4    15.1-23.3   5.9-10.8       2.6-4.7
    axpy device alpha, 8   6.9-10.3   22.0-33.4    13.1-21.2   6.2-11.3       1.9-3.6

Python now / before within each run: matvec scalar 0.41-0.44, warp 0.38-0.41, axpy
host alpha 0.43-0.44, device alpha 0.31-0.34.

What is left of the matvec Python: the result through PyOpenCL's fast constructor
(2.3 us; a copy of a kept template's attributes measured 1.3 us, not used: it would
depend on PyOpenCL's private layout) and the plan key (0.6 us). ``axpy`` now also
waits for ``x``'s and a device alpha's events when they live on another queue, as
the other launchers do.

Registered for float32, complex64, float64 and complex128; the last two build only
on devices with ``cl_khr_fp64`` (MissingCapabilityError otherwise).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from tessera_array.backends._common import memo

from tessera_array import _dtypes

from . import _launch, _memory, _programs
from ._launch import KernelSetup, Work

__all__ = ["AXPY_ADD", "AXPY_SUBTRACT", "AYPX", "DEFAULT_IS", "VARIANTS", "WARP_WG", "axpy",
           "aypx", "dense_matvec", "dense_matvec_scalar", "dense_matvec_warp", "register"]

FILE = "matvec.cl"
VARIANTS = ("default", "scalar", "warp")
DEFAULT_IS = "scalar"
# Work-items per row in the warp variant (clamped to the device's limit). NVIDIA H200,
# NVIDIA OpenCL 580.159.04, float32 / float64, time against cuBLAS gemv (CuPy 14.2) in
# the same process, device timestamps, medians of 40 (cuBLAS time / ours):
#   scalar loads, groups of 64/128/256:   4096^2 0.63/0.61/0.59 (f32), 0.61/0.63/0.63 (f64);
#                                         8192^2 1.13/1.14/1.12, 0.86/0.87/0.87
#   vload4 (the kernel now), 64/128/256:  4096^2 0.82/0.86/0.83, 0.73/0.76/0.73;
#                                         8192^2 1.12/1.11/1.10, 0.82/0.82/0.81
#   vload4, 8 rows of 32 per group:       4096^2 0.88, 0.79; 8192^2 0.99, 0.82
# The vload4 rows were launched bare (no launcher, results not allocated per call); the
# launcher adds ~10 us of Python per call, which is most of the 4096^2 difference: with
# it, `python -m benchmarks.opencl_vs_cupy` gave 0.58-0.66 (f32) / 0.60-0.67 (f64) at
# 4096^2 both before and after vload4.
WARP_WG = 128
SCALAR_WG = 64  # work-group size of the scalar variant (global size rounded up to it)
CPU_BLOCKS = 16  # row blocks (work-items, work-groups of one) per compute unit on CPUs
_FLOAT_NP = frozenset(np.dtype(d._np) for d in _dtypes.FLOATING)
# The operations of tessera_axpy (its `sub` argument, see matvec.cl).
AXPY_ADD, AXPY_SUBTRACT, AYPX = 0, 1, 2  # y += alpha x, y -= alpha x, y = alpha y + x
# (context, dtype, variant) -> KernelSetup; the plan keys of _launch_matvec and axpy (a
# shape class each) -> their launch plans (_Plan, _AxpyPlan)
_setup = memo("opencl.matvec.setup", limit=_launch.PLANS_MAX)


class _Plan(NamedTuple):
    """What a call of one matvec shape class reuses (see :func:`_plan`)."""

    work: Work  # what a call does: Work.KERNEL, or y only allocated (m == 0) / zeroed (n == 0)
    kernel: object  # the pyopencl.Kernel (None unless work is Work.KERNEL)
    gsize: tuple  # global size
    lsize: tuple  # work-group size
    head: tuple  # leading int32 arguments: (m, n, rows per work-item); warp: (m, n)
    a_offset: np.int64  # a's offset, in elements
    a_row: np.int64  # a's row stride, in elements
    a_col: np.int64  # a's column stride, in elements
    x_offset: np.int64  # x's offset, in elements
    x_stride: np.int64  # x's stride, in elements
    y_shape: tuple  # the result's shape, (m,)
    y_strides: tuple  # the result's strides, in bytes
    y_size: int  # the result's element count, m


class _AxpyPlan(NamedTuple):
    """What a call of one axpy / aypx shape class reuses (see :func:`_axpy_plan`)."""

    n: int  # elements of y (0: nothing to do; the other fields are then None)
    device_alpha: bool  # alpha is a one-element device array (tessera_axpy_dev reads it)
    kernel: object  # the pyopencl.Kernel: tessera_axpy_dev or tessera_axpy
    gsize: tuple  # global size
    lsize: tuple  # work-group size
    n64: np.int64  # n as the kernel's first argument
    op: np.int32  # AXPY_ADD, AXPY_SUBTRACT or AYPX
    x_offset: np.int64  # x's offset, in elements
    x_stride: np.int64  # x's stride, in elements
    y_offset: np.int64  # y's offset, in elements
    y_stride: np.int64  # y's stride, in elements


_NO_AXPY = _AxpyPlan(0, False, None, None, None, None, None, None, None, None, None)


def _check(func, a, x):
    _memory.check_array(func, "a", a)
    _memory.check_array(func, "x", x)
    if a.ndim != 2 or x.ndim != 1 or a.shape[1] != x.shape[0]:
        raise ValueError(
            f"{func}: a must be 2-D (m, n) and x 1-D (n,). "
            f"Received: a.shape={a.shape}, x.shape={x.shape}"
        )
    if a.dtype != x.dtype or a.dtype not in _FLOAT_NP:
        raise TypeError(
            f"{func}: a and x must share one floating dtype (float32, float64, complex64, "
            f"complex128). Received: a.dtype={a.dtype}, x.dtype={x.dtype}"
        )
    if x.context != a.context:
        raise ValueError(f"{func}: a and x must be in one OpenCL context. Received: two contexts")


def _kernel(func, context, dtype, variant) -> KernelSetup:
    """The kernel of ``variant`` and its launch facts, kept per context, dtype and
    variant."""
    key = (context, dtype, variant)
    hit = _setup.get(key)
    if hit is None:
        dev = context.devices[0]
        cpu = _programs.is_cpu(dev)
        if variant == "warp" and not cpu:
            wg = min(WARP_WG, dev.max_work_group_size)
            wg = 1 << (wg.bit_length() - 1)  # a power of two
            extra, name = (f"-DWG={wg}",), "tessera_matvec_warp"
        elif variant in ("tessera_axpy", "tessera_axpy_dev"):
            wg = min(SCALAR_WG, dev.max_work_group_size)
            extra, name = ("-DWG=1",), variant
        else:  # scalar; on CPU devices warp too (see the module docstring)
            wg = min(SCALAR_WG, dev.max_work_group_size)
            extra, name = ("-DWG=1",), "tessera_matvec_scalar"
            if cpu:
                extra += ("-DTESSERA_CPU",)  # library-call-free loads (see matvec.cl)
        opts = _programs.dtype_options(func, dtype, dev, extra=extra)
        hit = _setup[key] = KernelSetup(_programs.kernel(context, FILE, opts, name), wg, cpu,
                                        max(1, dev.max_compute_units))
    return hit


def _cpu_rows(m: int, units: int) -> int:
    """Rows per work-item on a CPU device: about :data:`CPU_BLOCKS` blocks per compute
    unit (so PoCL's threads balance a shared machine's load), a multiple of 8 rows (the
    kernel's row group)."""
    per = -(-m // (CPU_BLOCKS * units))
    return max(8, -(-per // 8) * 8)


def _plan(func, variant, key, a, x):
    """The launch plan of a new shape class: the full checks, then everything a call of
    this class reuses (kernel, geometry, NumPy scalar arguments, the result's layout),
    kept under ``key`` (the attributes the checks read)."""
    _check(func, a, x)
    m, n = a.shape
    size = a.dtype.itemsize
    knl = gs = ls = head = None
    if m and n:
        knl, wg, cpu, units = _kernel(func, a.context, a.dtype, variant)
        if cpu:
            rper = _cpu_rows(m, units)
            gsize, wg = -(-m // rper), 1
            head = (np.int32(m), np.int32(n), np.int32(rper))
        elif variant == "warp":
            gsize = m * wg
            head = (np.int32(m), np.int32(n))
        else:
            gsize = -(-m // wg) * wg
            head = (np.int32(m), np.int32(n), np.int32(1))
        gs, ls = (gsize,), (wg,)
    s0, s1 = a.strides
    work = Work.KERNEL if m and n else Work.ZEROS if m else Work.NOTHING
    plan = _Plan(work, knl, gs, ls, head, np.int64(a.offset // size), np.int64(s0 // size),
                 np.int64(s1 // size), np.int64(x.offset // size),
                 np.int64(x.strides[0] // size), (m,), (size,), m)
    if key is not None:
        _setup.put(key, plan)
    return plan


def _launch_matvec(func, variant, a, x):
    key = None
    try:
        key = (variant, a.__class__, x.__class__, a.context, x.context, a.dtype, x.dtype,
               a.shape, a.strides, a.offset, x.shape, x.strides, x.offset)
        plan = _setup[key]
    except (KeyError, AttributeError, TypeError):  # a new shape class, or not an array
        plan = None
    if plan is None:  # (outside the except clause: its errors chain no KeyError)
        plan = _plan(func, variant, key, a, x)
    queue = a.queue
    if queue is None:
        _memory.queue_of(func, a)  # raises
    y = _memory.fresh(queue, a.context, plan.y_shape, plan.y_strides, plan.y_size, a.dtype,
                      a.allocator)
    if plan.work is not Work.KERNEL:
        if plan.work is Work.ZEROS:  # n == 0
            _programs.zero_fill(queue, y)
        return y
    wait = list(x.events) if x.queue is not queue and x.events else None
    y.events.append(plan.kernel(queue, plan.gsize, plan.lsize, *plan.head, a.base_data,
                                plan.a_offset, plan.a_row, plan.a_col, x.base_data,
                                plan.x_offset, plan.x_stride, y.base_data, wait_for=wait))
    return y


def dense_matvec_scalar(a, x):
    """y = A @ x, one work-item per row."""
    return _launch_matvec("matvec", "scalar", a, x)


def dense_matvec_warp(a, x):
    """y = A @ x, one work-group per row with a local-memory reduction."""
    return _launch_matvec("matvec", "warp", a, x)


def _axpy_plan(key, alpha, x, y, op):
    """The launch plan of a new ``axpy`` (or ``aypx``) shape class (the full checks in the
    order a call makes them), kept under ``key``."""
    func = "aypx" if op == AYPX else "axpy"
    _memory.check_array(func, "x", x)
    _memory.check_array(func, "y", y)
    if x.ndim != 1 or x.shape != y.shape or x.dtype != y.dtype or y.dtype not in _FLOAT_NP:
        raise ValueError(
            f"{func}: x and y must be 1-D of one shape and one floating dtype. "
            f"Received: x.shape={x.shape}, y.shape={y.shape}, x.dtype={x.dtype}, "
            f"y.dtype={y.dtype}"
        )
    n = y.shape[0]
    plan = _NO_AXPY
    if n:
        _memory.queue_of(func, y)
        device = isinstance(alpha, _memory.NATIVE)
        if device:
            _check_alpha(alpha, y)
        knl, wg, _, _ = _kernel(func, y.context, y.dtype,
                                "tessera_axpy_dev" if device else "tessera_axpy")
        size = y.dtype.itemsize
        plan = _AxpyPlan(n, device, knl, (-(-n // wg) * wg,), (wg,), np.int64(n), np.int32(op),
                         np.int64(x.offset // size), np.int64(x.strides[0] // size),
                         np.int64(y.offset // size), np.int64(y.strides[0] // size))
    if key is not None:
        _setup.put(key, plan)
    return plan


def _check_alpha(alpha, y):
    if alpha.dtype != y.dtype or alpha.size != 1:
        raise TypeError(
            f"axpy: a device alpha must be one element of y's dtype. "
            f"Received: alpha.dtype={alpha.dtype}, alpha.shape={alpha.shape}"
        )


def axpy(alpha, x, y, subtract: bool = False) -> None:
    """``y += alpha * x`` (``y -= alpha * x`` when ``subtract``) in place, rounded as NumPy."""
    _axpy(alpha, x, y, AXPY_SUBTRACT if subtract else AXPY_ADD)


def aypx(beta, x, y) -> None:
    """``y = x + beta * y`` in place, rounded as NumPy's ``y *= beta; y += x``."""
    _axpy(beta, x, y, AYPX)


def _axpy(alpha, x, y, op: int) -> None:
    """The launch of ``tessera_axpy``: ``op`` AXPY_ADD ``y += a x``, AXPY_SUBTRACT
    ``y -= a x``, AYPX ``y = a y + x``."""
    key = None
    try:
        key = ("axpy", alpha.__class__, x.__class__, y.__class__, x.dtype, y.dtype, x.shape,
               y.shape, x.strides, y.strides, x.offset, y.offset, y.context, op)
        plan = _setup[key]
    except (KeyError, AttributeError, TypeError):  # a new shape class, or not an array
        plan = None
    if plan is None:  # (outside the except clause: its errors chain no KeyError)
        plan = _axpy_plan(key, alpha, x, y, op)
    if not plan.n:
        return
    queue = y.queue
    if queue is None:
        _memory.queue_of("axpy", y)  # raises
    wait = list(x.events) if x.queue is not queue and x.events else None
    if plan.device_alpha:
        _check_alpha(alpha, y)
        if alpha.queue is not queue and alpha.events:
            wait = (wait or []) + alpha.events
        off = alpha.offset
        evt = plan.kernel(queue, plan.gsize, plan.lsize, plan.n64, alpha.base_data,
                          np.int64(off // alpha.dtype.itemsize) if off else _launch.ZERO64,
                          plan.op, x.base_data, plan.x_offset, plan.x_stride, y.base_data,
                          plan.y_offset, plan.y_stride, wait_for=wait)
    else:
        evt = plan.kernel(queue, plan.gsize, plan.lsize, plan.n64, y.dtype.type(alpha),
                          plan.op, x.base_data, plan.x_offset, plan.x_stride, y.base_data,
                          plan.y_offset, plan.y_stride, wait_for=wait)
    y.add_event(evt)


_BY_VARIANT = {"scalar": dense_matvec_scalar, "warp": dense_matvec_warp}


# The namespace's matrix-vector products (``A @ x``, and ``x @ A`` as ``A^T x`` on the
# transposed view) pick the kernel by shape on GPUs: ``warp`` where the rows the kernel
# sums are long, ``scalar`` (a work-item per row) where they are short and many. On CPU
# devices both names run the row-block kernel. Device ms on the H200 through NVIDIA's
# OpenCL, float32 (float64 alike), CuPy's ``a @ x`` / ``y @ a`` alongside (2026-11-30,
# .devrun-style script: profiling markers, CUDA events, medians of 30):
#
#   A (m x n)          A @ x: scalar   warp   cupy     x @ A: scalar   warp   cupy
#   4096 x 4096               0.264   0.041   0.038           0.201   0.158   0.036
#   65536 x 1024              0.306   0.126   0.082           2.443   0.499   0.090
#   65536 x 256               0.091   0.071   0.045           2.400   0.152   0.045
#   65536 x 64                0.043   0.065   0.035           1.206   0.090   0.034
#   262144 x 16               0.029   0.179   0.029           4.495   0.151   0.025
#   1048576 x 4               0.035   0.674   0.057          17.149   0.464   0.040
#   1024 x 65536              3.924   0.102   0.116           0.123   0.631   0.097
#   256 x 65536               3.860   0.078   0.048           0.073   0.181   0.044
#   16 x 262144               5.806   0.126   0.028           0.044   0.202   0.022
#   512 x 512                 0.045   0.031   0.022           0.046   0.043   0.020
#   128 x 128                 0.027   0.032   0.032           0.057   0.062   0.033
#
# So: rows read contiguously (A @ x) take ``warp`` from WARP_MIN_ROW elements on; rows
# read with a stride (x @ A: a column of A per result) take ``warp`` when there are no
# more results than elements per row (m >= n), else ``scalar``, whose work-items then
# read neighbouring addresses. x @ A stays 2-5x behind cuBLAS where A is tall (few, long
# strided rows): neither kernel splits a row across work-groups.
WARP_MIN_ROW = 128


def dense_matvec(a, x):
    """y = A @ x for the namespace's ``matmul`` of a matrix (any view) and a vector: the
    kernel picked by shape on GPUs (table above), the row-block kernel on CPU devices."""
    m, n = a.shape
    if a.strides[-1] == a.dtype.itemsize:  # contiguous rows
        warp = n >= WARP_MIN_ROW
    else:
        warp = n >= m
    return dense_matvec_warp(a, x) if warp else dense_matvec_scalar(a, x)


def register(registry, backend_name: str) -> None:
    for variant in VARIANTS:
        launcher = _BY_VARIANT[DEFAULT_IS if variant == "default" else variant]
        registry.register("matvec", backend_name, _dtypes.FLOATING, launcher, variant=variant)
    registry.register("axpy", backend_name, _dtypes.FLOATING, axpy)
    registry.register("aypx", backend_name, _dtypes.FLOATING, aypx)
