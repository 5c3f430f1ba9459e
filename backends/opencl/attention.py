"""Attention kernels of the OpenCL backend (``kernels/opencl/attention.cl``).

``attention_fwd`` and ``attention_bwd`` are the ``attention`` family's launchers,
with exactly the NumPy backend's arguments and results
(:mod:`tessera_array.backends.numpy.attention`; the contract is in
:mod:`tessera_array.nn._attention`), on ``pyopencl.array.Array`` buffers: the
context and queue come from ``q``. Inputs are read in place through their offsets
and strides (GQA's stride-0 broadcast heads cost no copy): the host builds a table
of each (batch, head)'s element offsets into q, k, v and the mask (and out, dout and
lse in the backward pass), kept per content, and the kernels add row and column
strides. Results are fresh C-contiguous buffers. Operand dtypes are checked (a
TypeError, never a silently misread buffer); shapes are trusted (the front end
validates them).

The kernels are FlashAttention-2 per query row (one work-item per row, K/V tiles
staged in local memory by the work-group, online softmax in the accumulation dtype:
float for float32, double for float64); the backward pass runs one kernel over query
rows (dq, and ``delta = rowsum(dO * O)`` for the next) and one over key rows (dk, dv),
so every output element is summed by one work-item in a fixed order: no atomics, the
same bits run to run. Dropout keep decisions are the Philox contract computed in the
kernel (``kernels/opencl/philox.cl``; ``threshold = floor(p * 2**40)`` passed as its
byte ``threshold >> 32`` and its refinement part ``threshold & 0xFFFFFFFF``),
bit-identical to the CPU's masks.

One program is built per (dtype, D, Dv) (masks and dropout are run-time arguments);
float64 only on devices with ``cl_khr_fp64`` (MissingCapabilityError otherwise).
"""

from __future__ import annotations

import math

import numpy as np
from tessera_array.backends._common import memo
from tessera_array.backends._common.checks import attention_dtypes
from tessera_array.backends._common.layout import band

from tessera_array import _dtypes

from . import _memory, _programs

__all__ = ["WG", "attention_bwd", "attention_fwd", "register"]

FILE = "attention.cl"
WG = 64  # query (key) rows per work-group, fewer for short sequences on GPUs
_CPU = 2  # CL_DEVICE_TYPE_CPU
TILE_MAX = 64  # keys (queries) per local-memory tile at most
LOCAL_BUDGET = 16384  # bytes of local memory the tiles of one work-group may use
_ACC = {np.dtype(np.float32): np.dtype(np.float32), np.dtype(np.float64): np.dtype(np.float64)}
# (context, offsets bytes) -> pyopencl.Buffer, least recently used first
_tables = memo("opencl.attention.offset_tables")
_TABLES_KEPT = 64
_setup = memo("opencl.attention.options")  # (context, dtype, D, Dv) -> program options
_limits = memo("opencl.attention.wg_limits")  # pyopencl.Kernel -> its largest work-group size


def _alloc(queue, shape, dtype):
    """Every output buffer is allocated here (tests poison it to prove full writes), through
    PyOpenCL's fast constructor: ``cla.empty`` of (2, 3, 16, 16) float32 / (2, 3, 16) bool
    took 69 / 89 us, this 7 / 9 us (NumPy shape checks skipped; PoCL 3.0, shared 2-core
    EPYC at load 5-6, the driver's allocation included, medians of 9 x 3000 calls)."""
    return _memory.new(queue, shape, dtype)


def _options(context, dtype, d, dv):
    key = (context, dtype, d, dv)
    hit = _setup.get(key)
    if hit is None:
        dev = context.devices[0]
        isz = dtype.itemsize
        budget = min(LOCAL_BUDGET, dev.local_mem_size // 2)
        dn, dvn = max(d, 1), max(dv, 1)
        bk = max(1, min(TILE_MAX, budget // ((dn + dvn) * isz)))
        bq = max(1, min(TILE_MAX, budget // ((dn + dvn + 2) * isz + WG)))  # + keep bits
        opts = _programs.dtype_options("attention", dtype, dev, extra=(
            f"-DDQK={d}", f"-DDV={dv}", f"-DBK={bk}", f"-DBQ={bq}", f"-DWG_MAX={WG}"))
        hit = _setup[key] = opts
    return hit


def _kernel(context, opts, name):
    return _programs.kernel(context, FILE, opts, name)


def _group(knl, device, rows: int) -> int:
    """The work-group size for ``rows`` rows: <= WG, a power of two, what the kernel allows.

    GPUs get the smallest power of two covering ``rows`` (no idle work-items on short
    sequences); CPU devices always get the largest, because PoCL compiles a kernel's
    work-group function again for every new local size (1.5-3 s each on a cold cache,
    measured on PoCL 3.0, 2-core EPYC), and the extra work-items only return.
    """
    limit = _limits.get(knl)
    if limit is None:
        import pyopencl as cl

        limit = _limits[knl] = knl.get_work_group_info(
            cl.kernel_work_group_info.WORK_GROUP_SIZE, device)
    cover = WG if device.type & _CPU else 1 << max(0, rows - 1).bit_length()
    wg = min(WG, limit, cover)
    return 1 << (wg.bit_length() - 1)


def _lead_offsets(a, lead: tuple) -> np.ndarray:
    """Element offset of each flattened leading index of ``a`` (int64, ``prod(lead)``)."""
    isz = a.dtype.itemsize
    base = a.offset // isz
    if not lead:
        return np.array([base], dtype=np.int64)
    strides = np.array([s // isz for s in a.strides[:len(lead)]], dtype=np.int64)
    idx = np.indices(lead, dtype=np.int64).reshape(len(lead), -1)
    return base + strides @ idx


def _table(context, arrays, lead: tuple):
    """A device buffer of (q, k, v, mask, out, dout, lse) offsets per bh, int64 (bh, 8)
    (absent arrays give 0); kept per content, so a repeated call uploads nothing."""
    import pyopencl as cl

    bh = math.prod(lead)
    tab = np.zeros((bh, 8), dtype=np.int64)
    for col, a in enumerate(arrays):
        if a is not None:
            tab[:, col] = _lead_offsets(a, lead)
    key = (context, tab.tobytes())
    buf = _tables.pop(key, None)
    if buf is None:
        mf = cl.mem_flags
        buf = cl.Buffer(context, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=tab)
        if len(_tables) >= _TABLES_KEPT:
            del _tables[next(iter(_tables))]  # the least recently used
    _tables[key] = buf  # (inserted last: the most recently used)
    return buf


def _rs(a, axis_row: int, axis_col: int):
    """(buffer, row stride, column stride) in elements; None buffer for an empty array."""
    isz = a.dtype.itemsize
    data = a.base_data if a.size else None
    return data, np.int64(a.strides[axis_row] // isz), np.int64(a.strides[axis_col] // isz)


def _check(func, q, k, v, mask, grads=()):
    """TypeError unless the operands' dtypes are what the kernels read them as (the
    front end guarantees it; a raw call must not get a silently wrong answer)."""
    return attention_dtypes(func, q, k, v, mask, grads, accumulators=_ACC)


def _common_args(q, k, v, mask, lead, scale, causal, window, dropout, acc, grads=()):
    """The kernel arguments shared by the three kernels (TESSERA_ATTENTION_ARGS);
    ``grads`` is ``(out, dout, lse)`` in the backward pass (for the offset table)."""
    sq = q.shape[-2]
    sk = k.shape[-2]
    if max(sq, sk) >= 2**31:
        raise ValueError(f"attention: the OpenCL kernels take Sq, Sk < 2**31. "
                         f"Received: Sq={sq}, Sk={sk}")
    qd, q_sr, q_sd = _rs(q, -2, -1)
    kd, k_sr, k_sd = _rs(k, -2, -1)
    vd, v_sr, v_sd = _rs(v, -2, -1)
    kind, bmask, amask, m_sr, m_sc = 0, None, None, np.int64(0), np.int64(0)
    if mask is not None:
        md, m_sr, m_sc = _rs(mask, -2, -1)
        if mask.dtype == np.bool_:
            kind, bmask = 1, md
        else:
            kind, amask = 2, md
    lo, hi = (np.int64(b) for b in band(causal, window, sq, sk))
    if dropout is None:
        drop, seed, offset, threshold, keep_scale = 0, 0, 0, 0, 1.0
    else:
        p, seed, offset, threshold = dropout
        drop, keep_scale = 1, 1.0 / (1.0 - p)
    tab = _table(q.context, (q, k, v, mask) + tuple(grads), lead)
    return (np.int32(sq), np.int32(sk), tab, qd, q_sr, q_sd, kd, k_sr, k_sd, vd, v_sr, v_sd,
            np.int32(kind), bmask, amask, m_sr, m_sc, lo, hi, acc.type(scale), np.int32(drop),
            np.uint32(seed & 0xFFFFFFFF), np.uint32(seed >> 32),
            np.uint32(offset & 0xFFFFFFFF), np.uint32(offset >> 32),
            np.uint32(threshold >> 32), np.uint32(threshold & 0xFFFFFFFF),  # t8, frac
            acc.type(keep_scale))


def _data(a):
    return a.base_data if a.size else None


def _waits(queue, arrays):
    evts = []
    for a in arrays:
        if a is not None and a.queue is not queue:
            evts.extend(a.events)
    return evts or None


def attention_fwd(q, k, v, mask=None, *, scale, causal=None, window=None, dropout=None,
                  want_lse=True):
    """Tiled attention forward; ``(out, lse)`` (``lse`` None unless ``want_lse``).

    Arguments and results as the NumPy backend's ``attention_fwd``, on pyopencl arrays.
    """
    queue = _memory.queue_of("attention", q)
    lead = q.shape[:-2]
    sq, d = q.shape[-2:]
    dv = v.shape[-1]
    acc = _check("attention_fwd", q, k, v, mask)
    out = _alloc(queue, lead + (sq, dv), q.dtype)
    lse = _alloc(queue, lead + (sq,), acc)
    bh = math.prod(lead)
    if bh and sq:
        opts = _options(q.context, q.dtype, d, dv)
        knl = _kernel(q.context, opts, "tessera_attention_fwd")
        wg = _group(knl, queue.device, sq)
        args = _common_args(q, k, v, mask, lead, scale, causal, window, dropout, acc)
        evt = knl(queue, (bh * -(-sq // wg) * wg,), (wg,), *args, _data(out), lse.base_data,
                  wait_for=_waits(queue, (q, k, v, mask)))
        out.add_event(evt)
        lse.add_event(evt)
    return out, (lse if want_lse else None)


def attention_bwd(q, k, v, out, dout, lse, mask=None, *, scale, causal=None, window=None,
                  dropout=None):
    """Tiled attention backward: ``(dq, dk, dv)``, each of its input's shape and dtype.

    Arguments and results as the NumPy backend's ``attention_bwd``: ``dk``/``dv`` are
    per query head (``(*L, Sk, D)``); the front end sums them over broadcast heads.
    """
    queue = _memory.queue_of("attention", q)
    lead = q.shape[:-2]
    sq, d = q.shape[-2:]
    sk, dv_ = v.shape[-2:]
    acc = _check("attention_bwd", q, k, v, mask, (out, dout, lse))
    dq = _alloc(queue, lead + (sq, d), q.dtype)
    dk = _alloc(queue, lead + (sk, d), q.dtype)
    dv = _alloc(queue, lead + (sk, dv_), q.dtype)
    bh = math.prod(lead)
    if not bh or not (sq or sk):
        return dq, dk, dv
    opts = _options(q.context, q.dtype, d, dv_)
    args = _common_args(q, k, v, mask, lead, scale, causal, window, dropout, acc,
                        (out, dout, lse))
    do_data, do_sr, do_sd = _rs(dout, -2, -1)
    grad_args = (do_data, do_sr, do_sd, _data(lse),
                 np.int64(lse.strides[-1] // lse.dtype.itemsize))
    waits = _waits(queue, (q, k, v, mask, out, dout, lse))
    nd = max(bh * sq, 1)  # scratch: delta = rowsum(dO * O) per query row
    delta = _memory.fresh(queue, queue.context, (nd,), (acc.itemsize,), nd, acc, None)
    if sq:
        o_data, o_sr, o_sd = _rs(out, -2, -1)
        knl = _kernel(q.context, opts, "tessera_attention_bwd_dq")
        wg = _group(knl, queue.device, sq)
        evt = knl(queue, (bh * -(-sq // wg) * wg,), (wg,), *args, *grad_args,
                  o_data, o_sr, o_sd, delta.base_data, _data(dq), wait_for=waits)
        dq.add_event(evt)
        waits = None  # the in-order queue runs dkdv after dq (it reads delta)
    if sk:
        knl = _kernel(q.context, opts, "tessera_attention_bwd_dkdv")
        wg = _group(knl, queue.device, sk)
        evt = knl(queue, (bh * -(-sk // wg) * wg,), (wg,), *args, *grad_args,
                  delta.base_data, _data(dk), _data(dv), wait_for=waits)
        dk.add_event(evt)
        dv.add_event(evt)
    return dq, dk, dv


def register(registry, backend: str) -> None:
    """Register ``attention_fwd`` / ``attention_bwd`` for float32 and float64."""
    dts = (_dtypes.float32, _dtypes.float64)
    registry.register("attention_fwd", backend, dts, attention_fwd)
    registry.register("attention_bwd", backend, dts, attention_bwd)
