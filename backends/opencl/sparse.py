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
    CSR-vector, one work-group of :data:`VECTOR_WG` work-items per row and column,
    with a local-memory tree reduction (the portable "warp per row"; see
    :mod:`.matvec` on sub-groups).
``default``
    The ``scalar`` kernel.

On CPU devices (PoCL) ``warp`` runs the ``scalar`` row-block kernel, as the NumPy
backend maps every variant name to one SciPy routine: CSR-vector measured 0.01-0.05x
of it there (2-D Poisson 512^2, float32, PoCL 3.0 on a shared 2-core EPYC), where a
work-group per row of 5 nonzeros is mostly idle. The tests force the GPU geometry on
PoCL too, so both kernels run in CI.

Measured (``python -m benchmarks.opencl_kernels``, 2-D Poisson 512^2 float32, NumPy
launcher time / ours, 2026-11-30): PoCL 5.0 on 2 pinned Xeon cores 0.48-1.02 (the
same kernel under both names: run-to-run spread), PoCL 3.0 on a shared 2-core EPYC
0.46-0.71; NVIDIA H200 OpenCL 0.10 ms (scalar) and 0.26 ms (warp).

Floating dtypes are registered for all three variants; integer dtypes (wrap-around
sums, as NumPy's) for ``default`` only, as on the NumPy backend.
"""

from __future__ import annotations

import numpy as np

from tessera_array import _dtypes

from . import _programs
from ._programs import array_type as _array_type

__all__ = ["DEFAULT_IS", "VARIANTS", "VECTOR_WG", "register", "spmv_scalar", "spmv_warp"]

FILE = "spmv.cl"
VARIANTS = ("default", "scalar", "warp")
DEFAULT_IS = "scalar"
VECTOR_WG = 32  # work-items per row in the warp (CSR-vector) variant
SCALAR_WG = 64
_NUMERIC_NP = frozenset(np.dtype(d._np) for d in _dtypes.FLOATING + _dtypes.INTEGER)
_setup: dict = {}  # (context, dtype, index dtype, indptr dtype, variant) -> (kernel, wg)


def _check(func, data, indices, indptr, shape, x):
    cla = _array_type()
    for name, a in (("data", data), ("indices", indices), ("indptr", indptr), ("x", x)):
        _programs.check_array(func, name, a, cla.Array)
    try:
        m, n = (int(s) for s in shape)
    except (TypeError, ValueError):
        raise ValueError(
            f"{func}: shape must be a pair (m, n). Received: shape={shape!r}"
        ) from None
    if data.ndim != 1 or indices.ndim != 1 or indptr.ndim != 1 \
            or data.shape != indices.shape or indptr.shape != (m + 1,):
        raise ValueError(
            f"{func}: data and indices must be 1-D of one length, indptr 1-D of m + 1. "
            f"Received: shape={shape}, data.shape={data.shape}, indices.shape={indices.shape}, "
            f"indptr.shape={indptr.shape}"
        )
    if x.ndim not in (1, 2) or x.shape[0] != n:
        raise ValueError(
            f"{func}: x must have shape ({n},) or ({n}, k). Received: shape={shape}, "
            f"x.shape={x.shape}"
        )
    if data.dtype != x.dtype or data.dtype not in _NUMERIC_NP:
        raise TypeError(
            f"{func}: data and x must share one numeric dtype. "
            f"Received: data.dtype={data.dtype}, x.dtype={x.dtype}"
        )
    for name, a in (("indices", indices), ("indptr", indptr)):
        if a.dtype not in _programs.INDEX_TYPES:
            raise TypeError(
                f"{func}: {name} must be int32 or int64. Received: {name}.dtype={a.dtype}"
            )
    ctx = data.context
    if any(a.context != ctx for a in (indices, indptr, x)):
        raise ValueError(f"{func}: every buffer must be in one OpenCL context. "
                         "Received: buffers from several contexts")
    for name, a in (("data", data), ("indices", indices), ("indptr", indptr)):
        if a.size > 1 and a.strides[0] != a.dtype.itemsize:
            raise ValueError(
                f"{func}: {name} must be contiguous. Received: {name}.strides={a.strides}"
            )
    return m, n


def _kernel(func, context, dtype, idx_dtype, ptr_dtype, variant):
    key = (context, dtype, idx_dtype, ptr_dtype, variant)
    hit = _setup.get(key)
    if hit is None:
        dev = context.devices[0]
        if variant == "warp":
            wg = min(VECTOR_WG, dev.max_work_group_size)
            wg = 1 << (wg.bit_length() - 1)
            name = "tessera_spmv_vector"
        else:
            wg = min(SCALAR_WG, dev.max_work_group_size)
            name = "tessera_spmv_scalar"
        extra = (f"-DWG={wg if variant == 'warp' else 1}",
                 f"-DIDX={_programs.INDEX_TYPES[idx_dtype]}",
                 f"-DPTR={_programs.INDEX_TYPES[ptr_dtype]}")
        opts = _programs.dtype_options(func, dtype, dev, extra=extra)
        hit = _setup[key] = (_programs.kernel(context, FILE, opts, name), wg,
                             _programs.is_cpu(dev))
    return hit


def _elem_offset(a):
    return np.int64(a.offset // a.dtype.itemsize)


def _launch(func, variant, data, indices, indptr, shape, x):
    m, n = _check(func, data, indices, indptr, shape, x)
    if variant == "warp" and _programs.is_cpu(data.context.devices[0]):
        variant = "scalar"  # see the module docstring: on CPU devices both names run it
    queue = _programs.queue_of(func, data)
    cla = _array_type()
    k = 1 if x.ndim == 1 else x.shape[1]
    y = cla.empty(queue, (m,) + x.shape[1:], data.dtype, allocator=data.allocator)
    if m == 0 or k == 0:
        return y
    if data.size == 0 or n == 0:
        _programs.zero_fill(queue, y)
        return y
    knl, wg, cpu = _kernel(func, data.context, data.dtype, indices.dtype, indptr.dtype,
                           variant)
    size = x.dtype.itemsize
    xs0 = x.strides[0] // size
    xs1 = x.strides[1] // size if x.ndim == 2 else 0
    if variant == "warp":
        gsize, head = (m * wg, k), (np.int32(m), np.int32(k))
    else:
        rper, wg = _programs.rows_per_item(m, data.context.devices[0]) if cpu else (1, wg)
        gsize = (_programs.ceil_div(_programs.ceil_div(m, rper), wg) * wg, k)
        head = (np.int32(m), np.int32(k), np.int32(rper))
    wait = [e for a in (indices, indptr, x) if a.queue is not queue for e in a.events] or None
    evt = knl(queue, gsize, (wg, 1), *head,
              data.base_data, _elem_offset(data), indices.base_data, _elem_offset(indices),
              indptr.base_data, _elem_offset(indptr), x.base_data, _elem_offset(x),
              np.int64(xs0), np.int64(xs1), y.base_data, wait_for=wait)
    y.add_event(evt)
    return y


def spmv_scalar(data, indices, indptr, shape, x):
    """y = A @ x for CSR ``A``: one work-item per row (CSR-scalar)."""
    return _launch("spmv", "scalar", data, indices, indptr, shape, x)


def spmv_warp(data, indices, indptr, shape, x):
    """y = A @ x for CSR ``A``: one work-group per row (CSR-vector)."""
    return _launch("spmv", "warp", data, indices, indptr, shape, x)


_BY_VARIANT = {"scalar": spmv_scalar, "warp": spmv_warp}


def register(registry, backend_name: str) -> None:
    for variant in VARIANTS:
        launcher = _BY_VARIANT[DEFAULT_IS if variant == "default" else variant]
        registry.register("spmv", backend_name, _dtypes.FLOATING, launcher, variant=variant)
    registry.register("spmv", backend_name, _dtypes.INTEGER, _BY_VARIANT[DEFAULT_IS])
