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
    (PoCL) one work-item per block of contiguous rows (about 8 blocks per compute
    unit), four rows at a time sharing each load of ``x``, so that each thread
    streams through memory; one row per work-item in work-groups of 64 measured
    about half as fast there.
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

Measured (``python -m benchmarks.opencl_kernels``, float32, medians of 15, NumPy
launcher time / ours, so above 1 is faster; 2026-11-30): PoCL 5.0 on 2 pinned cores
of the H200 host's Xeon (``POCL_CPU_MAX_CU_COUNT=2``): 513^2 0.27, 2049^2 0.73-0.75,
4097^2 0.64-0.77; PoCL 3.0 on CI's kind of shared 2-core EPYC: 513^2 0.20, 4097^2
0.52-0.54. Below the issue's 1.0: BLAS sgemv streams faster than this kernel, and
PoCL's launch and sync cost 0.05-0.3 ms a call, which small sizes never recover.
NVIDIA H200 OpenCL: 4097^2 in 0.24 ms (scalar) and 0.09 ms (warp).

``axpy(alpha, x, y, subtract=False)`` updates ``y += alpha * x`` (``-=``) in place,
the product rounded and then the sum, as NumPy's expression (and the NumPy
backend's ``axpy``) rounds them; ``alpha`` is a Python scalar or a 0-d array of
``y``'s dtype, read on the device (no host sync).

Registered for float32, complex64, float64 and complex128; the last two build only
on devices with ``cl_khr_fp64`` (MissingCapabilityError otherwise).
"""

from __future__ import annotations

import numpy as np

from tessera_array import _dtypes

from . import _programs
from ._programs import array_type as _array_type

__all__ = ["DEFAULT_IS", "VARIANTS", "WARP_WG", "axpy", "dense_matvec_scalar",
           "dense_matvec_warp", "register"]

FILE = "matvec.cl"
VARIANTS = ("default", "scalar", "warp")
DEFAULT_IS = "scalar"
WARP_WG = 64  # work-items per row in the warp variant (clamped to the device's limit)
SCALAR_WG = 64  # work-group size of the scalar variant (global size rounded up to it)
_FLOAT_NP = frozenset(np.dtype(d._np) for d in _dtypes.FLOATING)
_setup: dict = {}  # (context, dtype, variant) -> (kernel, local size, CPU device?)


def _check(func, a, x):
    cla = _array_type()
    _programs.check_array(func, "a", a, cla.Array)
    _programs.check_array(func, "x", x, cla.Array)
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


def _kernel(func, context, dtype, variant):
    key = (context, dtype, variant)
    hit = _setup.get(key)
    if hit is None:
        dev = context.devices[0]
        if variant == "warp":
            wg = min(WARP_WG, dev.max_work_group_size)
            wg = 1 << (wg.bit_length() - 1)  # a power of two
            extra, name = (f"-DWG={wg}",), "tessera_matvec_warp"
        elif variant in ("tessera_axpy", "tessera_axpy_dev"):
            wg = min(SCALAR_WG, dev.max_work_group_size)
            extra, name = ("-DWG=1",), variant
        else:
            wg = min(SCALAR_WG, dev.max_work_group_size)
            extra, name = ("-DWG=1",), "tessera_matvec_scalar"
        opts = _programs.dtype_options(func, dtype, dev, extra=extra)
        hit = _setup[key] = (_programs.kernel(context, FILE, opts, name), wg,
                             _programs.is_cpu(dev))
    return hit


def _launch(func, variant, a, x):
    _check(func, a, x)
    if variant == "warp" and _programs.is_cpu(a.context.devices[0]):
        variant = "scalar"  # see the module docstring: on CPU devices both names run it
    queue = _programs.queue_of(func, a)
    cla = _array_type()
    m, n = a.shape
    y = cla.empty(queue, (m,), a.dtype, allocator=a.allocator)
    if m == 0:
        return y
    if n == 0:
        _programs.zero_fill(queue, y)
        return y
    knl, wg, cpu = _kernel(func, a.context, a.dtype, variant)
    size = a.dtype.itemsize
    s0, s1 = a.strides
    if variant == "warp":
        gsize = m * wg
        head = (np.int32(m), np.int32(n))
    else:
        rper, wg = _programs.rows_per_item(m, a.context.devices[0]) if cpu else (1, wg)
        gsize = _programs.ceil_div(_programs.ceil_div(m, rper), wg) * wg
        head = (np.int32(m), np.int32(n), np.int32(rper))
    wait = None
    if x.queue is not queue and x.events:
        wait = list(x.events)
    evt = knl(queue, (gsize,), (wg,), *head,
              a.base_data, np.int64(a.offset // size), np.int64(s0 // size), np.int64(s1 // size),
              x.base_data, np.int64(x.offset // size), np.int64(x.strides[0] // size),
              y.base_data, wait_for=wait)
    y.add_event(evt)
    return y


def dense_matvec_scalar(a, x):
    """y = A @ x, one work-item per row."""
    return _launch("matvec", "scalar", a, x)


def dense_matvec_warp(a, x):
    """y = A @ x, one work-group per row with a local-memory reduction."""
    return _launch("matvec", "warp", a, x)


def axpy(alpha, x, y, subtract: bool = False) -> None:
    """``y += alpha * x`` (``y -= alpha * x`` when ``subtract``) in place, rounded as NumPy."""
    func = "axpy"
    cla = _array_type()
    _programs.check_array(func, "x", x, cla.Array)
    _programs.check_array(func, "y", y, cla.Array)
    if x.ndim != 1 or x.shape != y.shape or x.dtype != y.dtype or y.dtype not in _FLOAT_NP:
        raise ValueError(
            f"{func}: x and y must be 1-D of one shape and one floating dtype. "
            f"Received: x.shape={x.shape}, y.shape={y.shape}, x.dtype={x.dtype}, "
            f"y.dtype={y.dtype}"
        )
    n = y.shape[0]
    if n == 0:
        return
    queue = _programs.queue_of(func, y)
    size = y.dtype.itemsize
    tail = (np.int32(bool(subtract)), x.base_data, np.int64(x.offset // size),
            np.int64(x.strides[0] // size), y.base_data, np.int64(y.offset // size),
            np.int64(y.strides[0] // size))
    if isinstance(alpha, cla.Array):
        if alpha.dtype != y.dtype or alpha.size != 1:
            raise TypeError(
                f"{func}: a device alpha must be one element of y's dtype. "
                f"Received: alpha.dtype={alpha.dtype}, alpha.shape={alpha.shape}"
            )
        knl, wg, _ = _kernel(func, y.context, y.dtype, "tessera_axpy_dev")
        args = (np.int64(n), alpha.base_data, np.int64(alpha.offset // size)) + tail
    else:
        knl, wg, _ = _kernel(func, y.context, y.dtype, "tessera_axpy")
        args = (np.int64(n), y.dtype.type(alpha)) + tail
    evt = knl(queue, (-(-n // wg) * wg,), (wg,), *args)
    y.add_event(evt)


_BY_VARIANT = {"scalar": dense_matvec_scalar, "warp": dense_matvec_warp}


def register(registry, backend_name: str) -> None:
    for variant in VARIANTS:
        launcher = _BY_VARIANT[DEFAULT_IS if variant == "default" else variant]
        registry.register("matvec", backend_name, _dtypes.FLOATING, launcher, variant=variant)
    registry.register("axpy", backend_name, _dtypes.FLOATING, axpy)
