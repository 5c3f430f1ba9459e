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
    ``y`` (column-major ``A``, e.g. a transposed view), built with ``-DTESSERA_CPU``
    (loads through an unaligned vector typedef: PoCL 3.0 calls ``vload8`` and
    ``min`` out of line, which made the first CPU kernel run at half of BLAS).
``warp``
    One work-group of :data:`WARP_WG` work-items per row with a local-memory tree
    reduction (``tessera_matvec_warp``): the portable form of a warp per row, since
    OpenCL has no warp. A sub-group form needs ``cl_khr_subgroups``, which NVIDIA's
    OpenCL driver and PoCL 3.0 lack, so it is not written.
``default``
    The ``scalar`` kernel (see :data:`DEFAULT_IS`).

On CPU devices ``warp`` runs the ``scalar`` row-block kernel, as the NumPy backend
maps every variant name to one BLAS call: a work-group per row measured 0.1-0.3x of
the row-block kernel on PoCL 3.0, so the per-solver routing keeps its meaning on GPUs
and costs nothing on CPUs. The tests force the GPU geometry on PoCL too, so both
kernels run in CI.

Against NumPy's ``a @ x`` (OpenBLAS sgemv on both cores; NumPy time / ours, float32,
PoCL 3.0 on a shared 2-core EPYC, each side timed in its own steady state)::

    513^2   0.24-0.44   launch bound: the kernel runs in 27-30 us of a 58-120 us call
    2049^2  0.35-1.27   A in L3: OpenBLAS reaches 73 GB/s on two cores, PoCL ~1 ms
    4097^2  1.16-1.25   A streamed from DRAM by both sides (float64: 1.03-1.44)

On the NVIDIA H200 (NVIDIA OpenCL), 4097^2 runs in 0.24 ms (scalar) and 0.09 ms (warp).

``axpy(alpha, x, y, subtract=False)`` updates ``y += alpha * x`` (``-=``) in place,
the product rounded and then the sum, as NumPy's expression (and the NumPy
backend's ``axpy``) rounds them; ``alpha`` is a Python scalar or a 0-d array of
``y``'s dtype, read on the device (no host sync).

Host cost per call: a call looks up its launch plan under a key of every attribute the
checks read (classes, contexts, dtypes, shapes, strides, offsets; ``subtract`` and
alpha's class for ``axpy``): kernel, geometry, the NumPy scalar arguments and the
result's layout. A new key runs the full checks (same errors, same order) and builds
the plan (:func:`_plan`, :func:`_axpy_plan`); ``_setup`` holds both, cleared at
:data:`~._launch.PLANS_MAX` entries. The plans cut the launcher's own Python to
0.31-0.44x of the checked call on PoCL (the ``opencl_launch`` suite times a call now);
what is left is the result's allocation (2.3 us) and the plan key (0.6 us).

Registered for float32, complex64, float64 and complex128 (the last two only with
``cl_khr_fp64``). The runs behind these choices and the variants tried: benchmarks/NOTES.md.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from tessera_array.backends._common import memo

from tessera_array import _dtypes

from . import _launch, _memory, _programs
from ._launch import KernelSetup, Work

__all__ = ["AXPY_ADD", "AXPY_SUBTRACT", "AYPX", "DEFAULT_IS", "VARIANTS", "WARP_WG", "axpy",
           "aypx", "dense_matvec", "dense_matvec_scalar", "dense_matvec_warp", "linear",
           "register"]

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
# it, the opencl_vs_cupy suite gave 0.58-0.66 (f32) / 0.60-0.67 (f64) at 4096^2.
WARP_WG = 128
SCALAR_WG = 64  # work-group size of the scalar variant (global size rounded up to it)
CPU_BLOCKS = 16  # row blocks (work-items, work-groups of one) per compute unit on CPUs
_FLOAT_NP = frozenset(np.dtype(d._np) for d in _dtypes.FLOATING)
# The operations of tessera_axpy (its `sub` argument, see matvec.cl).
AXPY_ADD, AXPY_SUBTRACT, AYPX = 0, 1, 2  # y += alpha x, y -= alpha x, y = alpha y + x
# (context, dtype, variant) -> KernelSetup; (context, dtype, "axpy", device alpha?) ->
# KernelSetup; the plan keys of _launch_matvec and axpy (a shape class each) -> their
# launch plans (_Plan, _AxpyPlan)
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
        else:  # scalar; on CPU devices warp too (see the module docstring)
            wg = min(SCALAR_WG, dev.max_work_group_size)
            extra, name = ("-DWG=1",), "tessera_matvec_scalar"
            if cpu:
                extra += ("-DTESSERA_CPU",)  # library-call-free loads (see matvec.cl)
        opts = _programs.dtype_options(func, dtype, dev, extra=extra)
        hit = _setup[key] = KernelSetup(_programs.kernel(context, FILE, opts, name), wg, cpu,
                                        max(1, dev.max_compute_units))
    return hit


def _axpy_kernel(func, context, dtype, device_alpha: bool):
    """``(kernel, work-group size)`` of ``tessera_axpy`` (alpha a host scalar) or, with
    ``device_alpha``, ``tessera_axpy_dev`` (alpha read on the device), kept per context
    and dtype."""
    key = (context, dtype, "axpy", device_alpha)
    hit = _setup.get(key)
    if hit is None:
        dev = context.devices[0]
        name = "tessera_axpy_dev" if device_alpha else "tessera_axpy"
        opts = _programs.dtype_options(func, dtype, dev, extra=("-DWG=1",))
        hit = _setup[key] = (_programs.kernel(context, FILE, opts, name),
                             min(SCALAR_WG, dev.max_work_group_size))
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
        knl, wg = _axpy_kernel(func, y.context, y.dtype, device)
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
# OpenCL, float32 (float64 alike), CuPy's ``a @ x`` / ``y @ a`` alongside (profiling
# markers, CUDA events, medians of 30):
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


def linear(x, weight, bias=None, residual=None):
    """``x @ weight.T + bias + residual`` (the ``linear`` op): the output pre-filled with
    ``bias + residual`` (one elementwise kernel, or a copy for one of them), then gemm.cl
    with its accumulate epilogue adds the product to it; shapes checked by nn.linear."""
    from . import _ops_core, _ops_elementwise, _ops_linalg, _ops_manipulation

    n, k = weight.shape
    shape = tuple(x.shape[:-1]) + (n,)
    wt = weight.transpose()  # (K, N), a view
    if bias is None and residual is None:
        return _ops_linalg.matmul(x, wt)
    if bias is not None and residual is not None:
        out = _ops_elementwise.add(_ops_manipulation.broadcast_to(residual, shape), bias)
        if out.offset or not out.flags.c_contiguous:  # gemm.cl writes from the buffer's start
            fresh = _memory.empty(x.queue, shape, x.dtype)
            _ops_core.copy_into(fresh, out)
            out = fresh
    else:
        out = _memory.empty(x.queue, shape, x.dtype)
        _ops_core.copy_into(out, bias if residual is None else residual)
    rows = out.size // n if n else 0
    if rows and n and k:
        x2 = _ops_manipulation.reshape(x, (rows, k))
        _ops_linalg.gemm_into(out.reshape((rows, n)), x2, wt, accumulate=True)
    return out


def register(registry, backend_name: str) -> None:
    registry.register("linear", backend_name, _dtypes.REAL_FLOATING, linear)
    for variant in VARIANTS:
        launcher = _BY_VARIANT[DEFAULT_IS if variant == "default" else variant]
        registry.register("matvec", backend_name, _dtypes.FLOATING, launcher, variant=variant)
    registry.register("axpy", backend_name, _dtypes.FLOATING, axpy)
    registry.register("aypx", backend_name, _dtypes.FLOATING, aypx)
