"""Attention kernels of the CuPy backend (``kernels/cuda/attention.cu``).

``attention_fwd`` and ``attention_bwd`` are the ``attention`` family's launchers, with
exactly the NumPy backend's arguments and results
(:mod:`tessera_array.backends.numpy.attention`; the contract is in
:mod:`tessera_array.nn._attention`), on ``cupy.ndarray`` buffers. Inputs are read in
place through their strides (GQA's stride-0 broadcast K/V heads cost no copy): the host
builds a table of each (batch, head)'s element offsets into q, k, v and the mask (and
out, dout and lse in the backward pass), kept per leading shape and strides, and the
kernels add row and column strides. Results are fresh C-contiguous buffers from
:func:`_kernels.empty`.
Operand dtypes are checked (a TypeError, never a silently misread buffer); shapes are
trusted (the front end validates them).

The kernels are FlashAttention-2's tiled recurrence without tensor cores: a block of
four warps serves 16 query rows (4 per warp) of one (batch, head), K/V tiles of one warp
width of keys are staged in shared memory, lane ``l`` computes the score of key ``l``
(a whole dot product) and owns dims ``l, l + WARP, ...`` of the output accumulator; the
online softmax runs in the accumulation dtype (float for float32, double for float64).
Memory is O(S*D): no score matrix leaves the block. Head dims beyond ``8 * WARP`` take
further passes over the keys (the scores are recomputed).

Determinism: the backward pass runs one kernel over query blocks (dq, and
``delta = rowsum(dO * O)`` into a scratch buffer) and one over key blocks (dk, dv, per
query head), so every output element is summed by one lane in a fixed order, with no
atomics: the same inputs give the same bits run to run (on one device and one CuPy
version). GQA's sums of dk/dv over the query heads of a group are the front end's
(``ops.sum`` over the group axis). Dropout keep decisions are the Philox
contract computed in the kernels (``kernels/include/tessera/philox.cuh``), bit-identical
to the CPU's masks.

Every launch runs on the current stream of q's device (made current here); nothing
synchronizes with the host except the first upload of an offset table (a small
host-to-device copy, once per leading shape and strides; the upload and the kernels run
on the current stream, the backend's one stream per device).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict

import numpy as np
from tessera_array.backends._common.checks import attention_dtypes
from tessera_array.backends._common.layout import band

from tessera_array import _dtypes

from . import _kernels

__all__ = ["attention_bwd", "attention_fwd", "instances", "register"]

FILE = "attention.cu"
NWARPS = 4  # warps per block (attention.cu's NWARPS)
ROWS = 16  # rows per block (attention.cu's NWARPS * RPW)
WIDTHS = (1, 2, 4, 8)  # output dims per lane per pass (the template parameter N)
GRID_MAX = 1 << 20  # blocks at most; the kernels' grid-stride loops cover the rest
# Sequence lengths and head dims below this: the kernels' 32-bit row and column indices
# (a tile's last index, one warp past the end) cannot overflow.
SIZE_LIMIT = 2**31 - 4096
_CTYPE = {"float32": "float", "float64": "double"}
_ACC = {np.dtype(d): np.dtype(d) for d in _CTYPE}  # accumulation dtype of each input
_TABLES_KEPT = 64
_tables: OrderedDict = OrderedDict()  # (device id, offsets bytes) -> cupy int64 (BH, 8)
_tables_lock = threading.Lock()


def _per_lane(width: int, warp: int) -> int:
    """The template ``N`` for head dim ``width``: the smallest of WIDTHS covering it."""
    for n in WIDTHS:
        if n * warp >= width:
            return n
    return WIDTHS[-1]


def _name(kernel: str, dtype, warp: int, n: int) -> str:
    t = _CTYPE[str(dtype)]
    return f"tessera_attention_{kernel}<{t}, {t}, {warp}, {n}>"


def instances(warp: int) -> list:
    """``(file, name)`` of every kernel template instance the launchers may ask for at
    warp width ``warp`` (``.ci/compile-kernels`` compiles each)."""
    return [(FILE, _name(kernel, dt, warp, n)) for kernel in ("fwd", "bwd_dq", "bwd_dkdv")
            for dt in _CTYPE for n in WIDTHS]


def _check(func, q, k, v, mask, grads=()):
    """TypeError unless the operands' dtypes are what the kernels read them as (the front
    end guarantees it; a raw call must not get a silently wrong answer)."""
    return attention_dtypes(func, q, k, v, mask, grads, accumulators=_ACC)


def _lead_offsets(a, lead: tuple):
    """Element offset of each flattened leading index of ``a`` from its first element
    (int64, ``prod(lead)``; strides may be 0 or negative)."""
    isz = a.dtype.itemsize
    if not lead:
        return np.zeros(1, dtype=np.int64)
    strides = np.array([s // isz for s in a.strides[:len(lead)]], dtype=np.int64)
    idx = np.indices(lead, dtype=np.int64).reshape(len(lead), -1)
    return strides @ idx


def _table(device, arrays, lead: tuple):
    """The device table of (q, k, v, mask, out, dout, lse) offsets per bh, int64 (BH, 8)
    (absent arrays give 0). The offsets are a function of the leading shape and each
    array's leading strides alone (the kernels get each array's first element), so the
    table is kept per (device, lead, strides): a repeated call builds and uploads nothing."""
    import cupy
    key = (device.id, lead) + tuple(
        None if a is None else tuple(s // a.dtype.itemsize for s in a.strides[:len(lead)])
        for a in arrays)
    with _tables_lock:
        buf = _tables.get(key)
        if buf is not None:
            _tables.move_to_end(key)
            return buf
    tab = np.zeros((math.prod(lead), 8), dtype=np.int64)
    for col, a in enumerate(arrays):
        if a is not None:
            tab[:, col] = _lead_offsets(a, lead)
    buf = cupy.asarray(tab)  # sync: a host-to-device copy, once per key
    with _tables_lock:
        _tables[key] = buf
        if len(_tables) > _TABLES_KEPT:
            _tables.popitem(last=False)
    return buf


def _strides(a, row: int, col: int):
    """(row stride, column stride) of ``a`` in elements, int64."""
    isz = a.dtype.itemsize
    return np.int64(a.strides[row] // isz), np.int64(a.strides[col] // isz)


def mask_args(mask) -> tuple:
    """``(kind, bool mask or None, additive mask or None, row stride, column stride)`` of
    the kernels' mask arguments: kind 0 none, 1 bool, 2 additive."""
    if mask is None:
        return 0, None, None, np.int64(0), np.int64(0)
    m_sr, m_sc = _strides(mask, -2, -1)
    if mask.dtype == np.bool_:
        return 1, mask, None, m_sr, m_sc
    return 2, None, mask, m_sr, m_sc


def dropout_args(dropout) -> tuple:
    """``(seed, offset, threshold, keep scale)`` of a launcher's ``dropout``
    (``(p, seed, offset, threshold)`` or None: all zero, scale 1)."""
    if dropout is None:
        return 0, 0, 0, 1.0
    p, seed, offset, threshold = dropout
    return seed, offset, threshold, 1.0 / (1.0 - p)


def _common_args(device, q, k, v, mask, lead, scale, causal, window, dropout, acc,
                 grads=()):
    """The kernel arguments every kernel takes (TESSERA_ATTENTION_ARGS); ``grads`` is
    ``(out, dout, lse)`` in the backward pass (for the offset table)."""
    sq, d = q.shape[-2:]
    sk, dv = v.shape[-2:]
    if max(sq, sk, d, dv) >= SIZE_LIMIT:
        raise ValueError(f"attention: the CUDA/HIP kernels take Sq, Sk, D, Dv < {SIZE_LIMIT}. "
                         f"Received: Sq={sq}, Sk={sk}, D={d}, Dv={dv}")
    kind, bmask, amask, m_sr, m_sc = mask_args(mask)
    lo, hi = (np.int64(b) for b in band(causal, window, sq, sk))
    seed, offset, threshold, keep_scale = dropout_args(dropout)
    drop = int(dropout is not None)
    tab = _table(device, (q, k, v, mask) + tuple(grads), lead)
    return (np.int64(math.prod(lead)), np.int32(sq), np.int32(sk), np.int32(d), np.int32(dv),
            tab, q, *_strides(q, -2, -1), k, *_strides(k, -2, -1), v, *_strides(v, -2, -1),
            np.int32(kind), bmask, amask, m_sr, m_sc, lo, hi, acc.type(scale),
            np.int32(drop), np.uint32(seed & 0xFFFFFFFF), np.uint32(seed >> 32),
            np.uint32(offset & 0xFFFFFFFF), np.uint32(offset >> 32),
            np.uint32(threshold >> 32), np.uint32(threshold & 0xFFFFFFFF),
            acc.type(keep_scale))


def _launch(device, kernel: str, dtype, width: int, items: int, args) -> None:
    """Launch ``tessera_attention_<kernel>`` over ``items`` (bh, row block) work items."""
    if items == 0:
        return
    warp = _kernels.warp_size(device)
    fn = _kernels.function(FILE, _name(kernel, dtype, warp, _per_lane(width, warp)), device)
    fn((min(items, GRID_MAX),), (NWARPS * warp,), args)


def attention_fwd(q, k, v, mask=None, *, scale, causal=None, window=None, dropout=None,
                  want_lse=True):
    """Tiled attention forward; ``(out, lse)`` (``lse`` None unless ``want_lse``).

    Arguments and results as the NumPy backend's ``attention_fwd``, on cupy arrays:
    ``q (*L, Sq, D)``, ``k (*L, Sk, D)``, ``v (*L, Sk, Dv)``, ``mask`` None or
    ``(*L, Sq, Sk)`` (bool, True = take part, or additive of q's dtype), any strides;
    ``dropout`` None or ``(p, seed, offset, threshold)``. Returns ``out (*L, Sq, Dv)``
    of q's dtype and ``lse (*L, Sq)`` of the accumulation dtype, C-contiguous.
    """
    device = q.device
    lead = q.shape[:-2]
    sq = q.shape[-2]
    dv = v.shape[-1]
    acc = _check("attention_fwd", q, k, v, mask)
    with device:
        out = _kernels.empty(lead + (sq, dv), q.dtype)
        lse = _kernels.empty(lead + (sq,), acc)
        bh = math.prod(lead)
        if bh and sq:
            args = _common_args(device, q, k, v, mask, lead, scale, causal, window, dropout,
                                acc)
            _launch(device, "fwd", q.dtype, dv, bh * -(-sq // ROWS), args + (out, lse))
    return out, (lse if want_lse else None)


def attention_bwd(q, k, v, out, dout, lse, mask=None, *, scale, causal=None, window=None,
                  dropout=None):
    """Tiled attention backward: ``(dq, dk, dv)``, each of its input's shape and dtype.

    Arguments and results as the NumPy backend's ``attention_bwd``: ``out``/``dout``
    ``(*L, Sq, Dv)`` and ``lse (*L, Sq)`` (the forward's, of the undropped scores);
    ``dk``/``dv`` are per query head (``(*L, Sk, D)``, ``(*L, Sk, Dv)``): the front end
    sums them over broadcast heads. The dropout mask is rebuilt from ``(seed, offset)``.

    Deterministic: ``dq`` is summed over the keys by one lane per element in a fixed
    order (one kernel over query blocks), ``dk``/``dv`` over the queries likewise (one
    kernel over key blocks); no atomics, so the same inputs give the same bits on every
    run.
    """
    import cupy

    device = q.device
    lead = q.shape[:-2]
    sq, d = q.shape[-2:]
    sk, dv_ = v.shape[-2:]
    acc = _check("attention_bwd", q, k, v, mask, (out, dout, lse))
    with device:
        dq = _kernels.empty(lead + (sq, d), q.dtype)
        dk = _kernels.empty(lead + (sk, d), q.dtype)
        dv = _kernels.empty(lead + (sk, dv_), q.dtype)
        bh = math.prod(lead)
        if not bh or not (sq or sk):
            return dq, dk, dv
        args = _common_args(device, q, k, v, mask, lead, scale, causal, window, dropout, acc,
                            (out, dout, lse))
        grad = (dout, *_strides(dout, -2, -1), lse, np.int64(lse.strides[-1] // acc.itemsize))
        # Scratch: delta = rowsum(dO * O) per query row, written by bwd_dq for bwd_dkdv.
        delta = cupy.empty(max(bh * sq, 1), dtype=acc)
        _launch(device, "bwd_dq", q.dtype, d, bh * -(-sq // ROWS),
                args + grad + (out, *_strides(out, -2, -1), delta, dq))
        # (the stream runs bwd_dkdv after bwd_dq: it reads delta)
        _launch(device, "bwd_dkdv", q.dtype, max(d, dv_), bh * -(-sk // ROWS),
                args + grad + (delta, dk, dv))
    return dq, dk, dv


def register(registry, backend: str) -> None:
    """Register ``attention_fwd`` / ``attention_bwd`` for float32 and float64."""
    dts = (_dtypes.float32, _dtypes.float64)
    registry.register("attention_fwd", backend, dts, attention_fwd)
    registry.register("attention_bwd", backend, dts, attention_bwd)
