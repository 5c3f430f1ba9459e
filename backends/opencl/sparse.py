"""Sparse matvec (spmv) launchers of the OpenCL backend (``kernels/opencl/spmv.cl``).

``spmv_<variant>(data, indices, indptr, shape, x) -> y`` computes ``y = A @ x`` for a
CSR matrix ``A`` of ``shape = (m, n)`` and a dense ``x`` of shape ``(n,)`` or
``(n, k)``, with the NumPy backend's call signature and semantics
(:func:`tessera_array.backends.numpy.sparse.spmv`): every buffer a
``pyopencl.array.Array`` of one context, ``data`` and ``x`` of one dtype,
``indices``/``indptr`` int32 or int64 (each on its own), duplicates summed. ``y``
is a fresh contiguous array on ``data``'s queue and allocator; ``x`` is read with
its own strides (a transposed view costs no copy).

Variants (the keys of :mod:`tessera_array.sparse._routing`):

``scalar``
    CSR-scalar, one work-item per row and column (on CPU devices per block of
    contiguous rows and column, as the dense ``scalar`` matvec): sums each row in
    storage order from zero, as SciPy's ``csr_matvec`` does, so float results equal
    the NumPy backend's bit for bit.
``warp``
    CSR-vector: :func:`lanes_for` work-items per row load consecutive entries (coalesced),
    the row's first work-item adds their products in storage order, so the sum is the
    scalar kernel's, bit for bit (the solvers' iterates stay SciPy's on every variant).
``default``
    The ``scalar`` kernel.

On CPU devices (PoCL) ``warp`` runs the ``scalar`` row-block kernel, as the NumPy
backend maps every variant name to one SciPy routine: a work-group per row measured
0.01-0.05x of it there (2-D Poisson 512^2, float32, PoCL 3.0 on a shared 2-core
EPYC), where most work-items idle. The tests force the GPU geometry on PoCL too, so
both kernels run in CI.

Measured on an NVIDIA H200 through NVIDIA's OpenCL driver (580.159.04), device time
from profiling markers, cuSPARSE (``cupyx.scipy.sparse.csr_matrix @ x``, CuPy 14.2)
timed back to back in the same process; speed = cuSPARSE time / ours:

=========================  =========  ============  =====================================
matrix (float32)           cuSPARSE   scalar        vector (work-group 128), lanes 2..32
=========================  =========  ============  =====================================
Poisson 1024^2, 5/row      0.112 ms   0.48x         0.47 0.44 0.41 0.32 0.24
Poisson 2048^2, 5/row      0.173 ms   0.60x         0.51 0.43 0.35 0.23 0.14
random 100k^2, 64/row      0.105 ms   0.84x         0.83 0.91 0.92 0.90 0.85
dense 4096^2 as CSR        0.092 ms   0.16x         0.09 0.12 0.16 0.24 0.39
=========================  =========  ============  =====================================

(scalar: the same with work-groups of 64 and 256; float64 Poisson 1024^2 as float32.)
With the opencl_vs_cupy suite (alternating reps), scalar: Poisson 1024^2 0.60x
(float32) / 0.67x (float64), 2048^2 0.87x / 0.89x. Short rows are latency
bound on the index -> x gather chain; neither kernel reaches cuSPARSE there (kernel
text variants tried, all 10-35% slower: spmv.cl).

Host cost per call: a call looks up its launch plan (kernel, geometry, NumPy scalar
arguments, the result's layout) under a key of every attribute the checks read: the
variant, ``shape`` and each buffer's class, context, dtype, shape, strides and offset.
A new key runs the full checks (same errors, same order) and builds the plan
(:func:`_plan`); an unhashable ``shape`` (a list) is checked and launched, not kept.
The plans cut a tiny call's own Python from 53-112 us to 4-8 us on PoCL.

Floating dtypes are registered for all three variants, integer dtypes (wrap-around
sums) for ``default`` only, as on the NumPy backend. History: benchmarks/NOTES.md.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from tessera_array.backends._common import c_strides, memo
from tessera_array.backends._common.checks import csr_operands

from tessera_array import _dtypes

from . import _launch, _memory, _programs
from ._launch import Work

__all__ = ["DEFAULT_IS", "VARIANTS", "VECTOR_WG", "lanes_for", "register", "spmv_scalar",
           "spmv_warp"]

FILE = "spmv.cl"
VARIANTS = ("default", "scalar", "warp")
DEFAULT_IS = "scalar"
VECTOR_WG = 128  # work-items per work-group of the warp (CSR-vector) variant
MAX_LANES = 32  # at most this many work-items share one row
SCALAR_WG = 64
_NUMERIC_NP = frozenset(np.dtype(d._np) for d in _dtypes.FLOATING + _dtypes.INTEGER)
# (context, dtype, index dtype, indptr dtype, variant, lanes) -> _SpmvKernel; the plan keys
# of _launch_spmv (a shape class each) -> their launch plans (_Plan)
_setup = memo("opencl.sparse.setup", limit=_launch.PLANS_MAX)


class _SpmvKernel(NamedTuple):
    """A spmv kernel and its launch facts."""

    kernel: object  # the pyopencl.Kernel
    wg: int  # work-group size (a power of two; the scalar kernel's rows on GPUs)
    cpu: bool  # a CPU device: the scalar kernel takes a block of rows per work-item
    lanes: int  # work-items per row of the vector kernel (1 for the scalar kernel)


class _Plan(NamedTuple):
    """What a call of one spmv shape class reuses (see :func:`_plan`)."""

    work: Work  # Work.KERNEL, or y only allocated (m or k is 0) / zeroed (no entries)
    kernel: object  # the pyopencl.Kernel (None unless work is Work.KERNEL)
    gsize: tuple  # global size, (rows' work-items, k)
    lsize: tuple  # work-group size, (wg, 1)
    head: tuple  # leading int32 arguments: (m, k, rows per work-item); vector: (m, k)
    data_offset: np.int64  # data's offset, in elements
    indices_offset: np.int64  # indices' offset, in elements
    indptr_offset: np.int64  # indptr's offset, in elements
    x_offset: np.int64  # x's offset, in elements
    x_row: np.int64  # x's stride along n, in elements
    x_col: np.int64  # x's stride along k, in elements (0 for a vector)
    y_shape: tuple  # the result's shape, (m,) or (m, k)
    y_strides: tuple  # the result's strides, in bytes
    y_size: int  # the result's element count


def _check(func, data, indices, indptr, shape, x):
    for name, a in (("data", data), ("indices", indices), ("indptr", indptr), ("x", x)):
        _memory.check_array(func, name, a)
    m, n = csr_operands(func, data, indices, indptr, shape, x, numeric=_NUMERIC_NP,
                        index=_programs.INDEX_TYPES)
    ctx = data.context
    if any(a.context != ctx for a in (indices, indptr, x)):
        raise ValueError(f"{func}: every buffer must be in one OpenCL context. "
                         "Received: buffers from several contexts")
    return m, n


def lanes_for(m: int, nnz: int) -> int:
    """Work-items per row of the vector kernel: a power of two near an eighth of the
    mean row length, from 2 to :data:`MAX_LANES` (the best of 2..32 in the table of the
    module docstring for 5, 64 and 4096 entries per row)."""
    eighth = -(-nnz // (8 * max(m, 1)))
    return min(MAX_LANES, max(2, 1 << max(0, eighth - 1).bit_length()))


def _kernel(func, context, dtype, idx_dtype, ptr_dtype, variant, lanes=1):
    key = (context, dtype, idx_dtype, ptr_dtype, variant, lanes)
    hit = _setup.get(key)
    if hit is None:
        dev = context.devices[0]
        wg = min(VECTOR_WG if variant == "warp" else SCALAR_WG, dev.max_work_group_size)
        wg = 1 << (wg.bit_length() - 1)
        lanes = min(lanes, wg)
        name = "tessera_spmv_vector" if variant == "warp" else "tessera_spmv_scalar"
        extra = (f"-DWG={wg if variant == 'warp' else 1}", f"-DLANES={lanes}",
                 f"-DIDX={_programs.INDEX_TYPES[idx_dtype]}",
                 f"-DPTR={_programs.INDEX_TYPES[ptr_dtype]}")
        opts = _programs.dtype_options(func, dtype, dev, extra=extra)
        hit = _setup[key] = _SpmvKernel(_programs.kernel(context, FILE, opts, name), wg,
                                        _programs.is_cpu(dev), lanes)
    return hit


def _elem_offset(a):
    return np.int64(a.offset // a.dtype.itemsize)


def _plan(func, variant, key, data, indices, indptr, shape, x):
    """The launch plan of a new shape class: the full checks, then everything a call of
    this class reuses (kernel, geometry, NumPy scalar arguments, the result's layout),
    kept under ``key`` (every attribute the checks read)."""
    m, n = _check(func, data, indices, indptr, shape, x)
    if variant == "warp" and _programs.is_cpu(data.context.devices[0]):
        variant = "scalar"  # see the module docstring: on CPU devices both names run it
    k = 1 if x.ndim == 1 else x.shape[1]
    yshape = (m,) + x.shape[1:]
    ystrides, ysize = tuple(c_strides(yshape, data.dtype.itemsize)), math.prod(yshape)
    work = Work.NOTHING if m == 0 or k == 0 else \
        Work.ZEROS if data.size == 0 or n == 0 else Work.KERNEL
    knl = gs = ls = head = None
    offsets = (None,) * 6
    if work is Work.KERNEL:
        lanes = lanes_for(m, data.size) if variant == "warp" else 1
        knl, wg, cpu, lanes = _kernel(func, data.context, data.dtype, indices.dtype,
                                      indptr.dtype, variant, lanes)
        if variant == "warp":
            gs = (_programs.ceil_div(m, wg // lanes) * wg, k)
            head = (np.int32(m), np.int32(k))
        else:
            rper, wg = _programs.rows_per_item(m, data.context.devices[0]) if cpu else (1, wg)
            gs = (_programs.ceil_div(_programs.ceil_div(m, rper), wg) * wg, k)
            head = (np.int32(m), np.int32(k), np.int32(rper))
        ls = (wg, 1)
        size = x.dtype.itemsize
        offsets = (_elem_offset(data), _elem_offset(indices), _elem_offset(indptr),
                   _elem_offset(x), np.int64(x.strides[0] // size),
                   np.int64(x.strides[1] // size if x.ndim == 2 else 0))
    plan = _Plan(work, knl, gs, ls, head, *offsets, yshape, ystrides, ysize)
    if key is not None:
        try:
            _setup.put(key, plan)
        except TypeError:  # an unhashable shape (a list): not kept
            pass
    return plan


def _launch_spmv(func, variant, data, indices, indptr, shape, x):
    key = None
    try:
        key = (variant, shape, data.__class__, indices.__class__, indptr.__class__, x.__class__,
               data.context, indices.context, indptr.context, x.context, data.dtype,
               indices.dtype, indptr.dtype, x.dtype, data.shape, indices.shape, indptr.shape,
               x.shape, data.strides, indices.strides, indptr.strides, x.strides, data.offset,
               indices.offset, indptr.offset, x.offset)
        plan = _setup[key]
    except (KeyError, AttributeError, TypeError):  # a new shape class, or not an array
        plan = None
    if plan is None:  # (outside the except clause: its errors chain no KeyError)
        plan = _plan(func, variant, key, data, indices, indptr, shape, x)
    queue = data.queue
    if queue is None:
        _memory.queue_of(func, data)  # raises
    y = _memory.fresh(queue, data.context, plan.y_shape, plan.y_strides, plan.y_size,
                      data.dtype, data.allocator)
    if plan.work is not Work.KERNEL:
        if plan.work is Work.ZEROS:  # no entries or no columns
            _programs.zero_fill(queue, y)
        return y
    wait = None
    if indices.queue is not queue or indptr.queue is not queue or x.queue is not queue:
        wait = [e for a in (indices, indptr, x) if a.queue is not queue for e in a.events] or None
    y.events.append(plan.kernel(queue, plan.gsize, plan.lsize, *plan.head, data.base_data,
                                plan.data_offset, indices.base_data, plan.indices_offset,
                                indptr.base_data, plan.indptr_offset, x.base_data, plan.x_offset,
                                plan.x_row, plan.x_col, y.base_data, wait_for=wait))
    return y


def spmv_scalar(data, indices, indptr, shape, x):
    """y = A @ x for CSR ``A``: one work-item per row (CSR-scalar)."""
    return _launch_spmv("spmv", "scalar", data, indices, indptr, shape, x)


def spmv_warp(data, indices, indptr, shape, x):
    """y = A @ x for CSR ``A``: several work-items per row (CSR-vector)."""
    return _launch_spmv("spmv", "warp", data, indices, indptr, shape, x)


_BY_VARIANT = {"scalar": spmv_scalar, "warp": spmv_warp}


def register(registry, backend_name: str) -> None:
    for variant in VARIANTS:
        launcher = _BY_VARIANT[DEFAULT_IS if variant == "default" else variant]
        registry.register("spmv", backend_name, _dtypes.FLOATING, launcher, variant=variant)
    registry.register("spmv", backend_name, _dtypes.INTEGER, _BY_VARIANT[DEFAULT_IS])
