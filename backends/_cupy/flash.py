"""Attention on tensor cores for float16 and bfloat16 (``kernels/cuda/flash_attention.cu``).

``attention_fwd`` and ``attention_bwd`` take exactly the arguments of the ``attention``
family's launchers (:mod:`.attention`, the NumPy backend's contract in
:mod:`tessera_array.nn._attention`) for float16 and bfloat16 ``cupy.ndarray`` buffers; lse
is float32.

The forward and the backward run FlashAttention-2's recurrences on ``mma.sync`` tensor
cores where the head dims of q, k and v are one value of :data:`TILES` on a device of
compute capability 8.0 or later (other layouts of those operands are copied to C order
first); on compute capability 9.0 (Hopper) the forward for a scale in [2**-120, 2**120]
runs on warpgroup tensor cores instead (``wgmma``, ``flash_attention_sm90.cu``: the same
masks and dropout bits, 128 query rows and :data:`SM90_BN` keys a tile). Every other call is
the general path: the operands converted to float32, the float32 tiled kernels of
:mod:`.attention`, the results rounded back once. The backward
is three kernels and deterministic: delta = rowsum(dO * O), dQ over query blocks, dK and
dV over key blocks (the scores computed twice, no atomics).

Routing (head dim -> tile of each kernel: MT 16-row tiles a warp, BN columns a tile, NB
the kernel's ``__launch_bounds__`` minimum blocks a multiprocessor), chosen by register
use without spills (``nvcc -Xptxas -v``, sm_90; CI fails a spill) and by
``benchmarks/probe_flash.py`` (figures: benchmarks/NOTES.md); pinned by
``tests/test_cuda_flash.py``:

===  ====================  ======================  ===============================
D    forward (query rows)  dq (query rows)         dkdv (key rows)
===  ====================  ======================  ===============================
64   MT 2 (128), BN 64     MT 1 (64), BN 64, NB 3  MT 1 (64), BN 64
128  MT 2 (128), BN 32     MT 1 (64), BN 64        MT 1 (64), BN 64; dropout BN 32
===  ====================  ======================  ===============================

The forward's tiles on an H100 (TFLOP/s, B=8 H=16 S=2048, CUDA events, medians of 10;
torch's SDPA in other runs: D 128 bf16 326, fp16 311; D 64 234, 232), once the masks' tests
left the softmax's loop (``mask_scores``); (2, 32, 1) takes D 128 (no spills):

=================  ====  ==========  ==========  ====================
D, tile            bf16  fp16        bf16, p 0.1  registers (sm_90)
=================  ====  ==========  ==========  ====================
128, (1, 64, 2)    207   206         118          220 (p 0.1: 230)
128, (2, 64, 1)    238   237         -            255, spills 816 B
128, (2, 32, 1)    233   235         121          246 (p 0.1: 242)
64, (2, 64, 1)     218   217         79           250
=================  ====  ==========  ==========  ====================

The wgmma forward (capability 9.0), one H100, ``probe_flash --wgmma-only --quick``
(TFLOP/s bf16, non-causal, without / with dropout 0.1, torch's SDPA in the same run, three
runs; no spills). BN 128 (:data:`SM90_BN`): 4-11% over 64 without dropout. Dropout's keep
bytes come from a third warpgroup (:data:`SM90_KEEP_THREADS`); the scale goes into the
exponent's FFMA (0.95x -> 0.99-1.04x torch at D 128 with dropout; benchmarks/NOTES.md).

========  ==================  ==================  ======================
D, BN     tessera             torch               registers
========  ==================  ==================  ======================
128, 128  310-356 / 240-256   298-326 / 241-251   254 / 168 (224 + 56)
64, 128   202-227 / 142-160   227-251 / 176-200   210 / 168 (224 + 56)
========  ==================  ==================  ======================

Launches run on q's device's current stream; only an offset table's first upload syncs.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
from tessera_array.backends._common.checks import attention_dtypes
from tessera_array.backends._common.layout import band
from tessera_array.backends._xp._dtypes import bfloat16, is_half

from tessera_array import _dtypes

from . import _kernels
from .attention import SIZE_LIMIT, _strides, _table, dropout_args, mask_args
from .attention import attention_bwd as _bwd_tiled
from .attention import attention_fwd as _fwd_tiled

__all__ = ["DKDV_DROP_TILES", "DKDV_TILES", "DQ_TILES", "SM90_BN", "TILES", "Tile",
           "attention_bwd", "attention_fwd", "backward_tiled", "bwd_tiles", "forward_sm90",
           "forward_tiled",
           "instances", "register", "shared_bytes", "sm90_name", "sm90_shared_bytes",
           "sm90_threads"]

FILE = "flash_attention.cu"
COMPILERS = ("nvcc",)  # PTX mma.sync / ldmatrix / cp.async: NVIDIA only (.ci/compile-kernels)
NW = 4  # warps a block (flash_attention.cu's NW)
MMA_WARP = 32  # the lanes of mma.sync's fragments (flash_attention.cu's WARP): NVIDIA's ISA
MIN_CC = 80  # mma.sync with bf16, cp.async, ldmatrix: sm_80 and later
_ELEMENT = {"float16": "tessera::flash::f16", "bfloat16": "tessera::flash::bf16"}
_F32 = np.dtype(np.float32)
SM90_FILE = "flash_attention_sm90.cu"
FILES = (FILE, SM90_FILE)  # the family's sources (.ci/compile-kernels' no-spill check)
SM90_CC = 90  # wgmma: compiled for sm_90a, which runs on compute capability 9.0 alone
SM90_THREADS = 256  # two warpgroups a block (flash_attention_sm90.cu's THREADS)
SM90_KEEP_THREADS = 128  # with dropout, a third: the keep bits (its KEEP_THREADS)
SM90_ROWS = 128  # query rows a block (its BM)
# head dim -> keys a tile of the wgmma forward (the module docstring's table)
SM90_BN = {64: 128, 128: 128}
_MAX_DYNAMIC_SHARED = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
_STATIC_SHARED_LIMIT = 48 * 1024  # beyond this a launch must opt in (the attribute)


class Tile(NamedTuple):
    mt: int  # 16-row tiles a warp: 16 * mt * NW rows a block (queries; dkdv: keys)
    bn: int  # columns a tile (keys; dkdv: queries)
    nb: int  # __launch_bounds__' minimum blocks a multiprocessor

    @property
    def rows(self) -> int:
        return 16 * self.mt * NW


# head dim -> tile of each kernel (the module docstring's table)
TILES = {64: Tile(2, 64, 1), 128: Tile(2, 32, 1)}
DQ_TILES = {64: Tile(1, 64, 3), 128: Tile(1, 64, 2)}
DKDV_TILES = {64: Tile(1, 64, 2), 128: Tile(1, 64, 2)}
# dkdv with dropout: at D 128 the (1, 64, 2) instance spills (136 bytes unrolled, 16 not)
DKDV_DROP_TILES = {64: Tile(1, 64, 2), 128: Tile(1, 32, 2)}
# kernel -> its tables without and with dropout
_KERNEL_TILES = {"fwd": (TILES, TILES), "bwd_dq": (DQ_TILES, DQ_TILES),
                 "bwd_dkdv": (DKDV_TILES, DKDV_DROP_TILES)}


def shared_bytes(kernel: str, d: int, tile: Tile) -> int:
    """Dynamic shared memory of ``tessera_flash_<kernel>``: 16-bit tiles of d columns (the
    forward: Q, K, V; dq: Q, dO and two K, V pairs; dkdv: K, V and two Q, dO pairs with
    their rows' lse and delta)."""
    if kernel == "fwd":
        return (tile.rows + 2 * tile.bn) * d * 2
    if kernel == "bwd_dq":
        return (2 * tile.rows + 4 * tile.bn) * d * 2
    return (2 * tile.rows + 4 * tile.bn) * d * 2 + 4 * tile.bn * 4


def kernel_name(kernel: str, dtype_name: str, d: int, tile: Tile, dropout: bool) -> str:
    return (f"tessera_flash_{kernel}<{_ELEMENT[dtype_name]}, {d}, {tile.mt}, {tile.bn}, "
            f"{tile.nb}, {'true' if dropout else 'false'}>")


def sm90_name(dtype_name: str, d: int, bn: int, dropout: bool) -> str:
    return (f"tessera_flash_fwd_sm90<{_ELEMENT[dtype_name]}, {d}, {bn}, "
            f"{'true' if dropout else 'false'}>")


def sm90_shared_bytes(d: int, bn: int) -> int:
    """Dynamic shared memory of the wgmma forward: Q, two K and two V tiles of d 16-bit
    columns, and 1024 bytes to align them to the swizzle's 1024-byte atoms."""
    return 1024 + (SM90_ROWS + 4 * bn) * d * 2


def sm90_threads(dropout: bool) -> int:
    """Threads a block of the wgmma forward: two softmax warpgroups, and with dropout the
    warpgroup that computes the keep bits beside them."""
    return SM90_THREADS + (SM90_KEEP_THREADS if dropout else 0)


def delta_name(dtype_name: str, d: int) -> str:
    return f"tessera_flash_bwd_delta<{_ELEMENT[dtype_name]}, {d}>"


def instances(warp: int) -> list:
    """``(file, name)`` of every instance the launchers may ask for (at NVIDIA's warp
    width only: the file is CUDA's alone)."""
    if warp != MMA_WARP:
        return []
    return ([(FILE, kernel_name(kernel, dt, d, tile, drop)) for kernel, tables in
             _KERNEL_TILES.items() for dt in _ELEMENT
             for drop, table in zip((False, True), tables) for d, tile in table.items()]
            + [(FILE, delta_name(dt, d)) for dt in _ELEMENT for d in TILES]
            + [(SM90_FILE, sm90_name(dt, d, bn, drop)) for dt in _ELEMENT
               for d, bn in SM90_BN.items() for drop in (False, True)])


def _aligned(a) -> bool:
    """Whether the kernel may read ``a`` as it is: unit column stride, 16-byte aligned
    start, rows and every leading index 16 bytes apart (stride 0 included)."""
    isz = a.dtype.itemsize
    return (a.strides[-1] == isz and a.data.ptr % 16 == 0
            and all(s % 16 == 0 for s in a.strides[:-1]))


def _fast(q, k, v) -> bool:
    """Whether the tensor-core kernels take these operands (one head dim of TILES, a
    device of compute capability 8.0 or later)."""
    d = q.shape[-1]
    return (k.shape[-1] == d and v.shape[-1] == d and d in TILES
            and int(q.device.compute_capability) >= MIN_CC)


def _wgmma(q) -> bool:
    """Whether the forward takes the wgmma kernel: a device of compute capability 9.0."""
    return int(q.device.compute_capability) == SM90_CC


def _sm90_scale(scale) -> bool:
    """Whether the wgmma kernel takes ``scale``: it scales inside the exponent (the max of
    the unscaled scores, and masked tiles scaled and back by the reciprocal), so a scale
    > 0 whose reciprocal is a normal float32."""
    return 2.0**-120 <= scale <= 2.0**120


# id -> kernel whose dynamic shared memory limit is raised (held, so no id is reused)
_opted_in: dict = {}


def _launch(device, name: str, smem: int, blocks: int, args, *, file: str = FILE,
            threads: int = NW * MMA_WARP) -> None:
    import cupy

    fn = _kernels.function(file, name, device)
    if smem > _STATIC_SHARED_LIMIT and _opted_in.get(id(fn)) is not fn:
        cupy.cuda.driver.funcSetAttribute(fn.ptr, _MAX_DYNAMIC_SHARED, smem)
        _opted_in[id(fn)] = fn
    fn((blocks,), (threads,), args, shared_mem=smem)


def _args(device, blocks_per_bh, q, k, v, mask, lead, scale, causal, window, dropout,
          grads=()):
    """The arguments every kernel takes first (flash_attention.cu's TESSERA_FLASH_ARGS);
    ``grads`` is ``(out, dout)`` in the backward pass (for the offset table)."""
    sq, sk = q.shape[-2], k.shape[-2]
    kind, bmask, amask, m_sr, m_sc = mask_args(mask)
    lo, hi = (np.int64(b) for b in band(causal, window, sq, sk))
    seed, offset, threshold, keep_scale = dropout_args(dropout)
    return (np.int32(blocks_per_bh), np.int32(sq), np.int32(sk),
            _table(device, (q, k, v, mask) + tuple(grads), lead),
            q, _strides(q, -2, -1)[0], k, _strides(k, -2, -1)[0], v, _strides(v, -2, -1)[0],
            np.int32(kind), bmask, amask, m_sr, m_sc, lo, hi, np.float32(scale),
            np.uint32(seed & 0xFFFFFFFF), np.uint32(seed >> 32),
            np.uint32(offset & 0xFFFFFFFF), np.uint32(offset >> 32),
            np.uint32(threshold >> 32), np.uint32(threshold & 0xFFFFFFFF),
            np.float32(keep_scale))


def _dims(q, k) -> tuple:
    """``(lead, sq, d, sk)`` of a call; ValueError past the kernels' 32-bit indices."""
    sq, d = q.shape[-2:]
    sk = k.shape[-2]
    if max(sq, sk) >= SIZE_LIMIT:
        raise ValueError(f"attention: the CUDA kernels take Sq, Sk < {SIZE_LIMIT}. "
                         f"Received: Sq={sq}, Sk={sk}")
    return q.shape[:-2], sq, d, sk


def _readable(*arrays) -> tuple:
    """Each array as it is where the kernels may read it so (:func:`_aligned`), else a
    C-ordered copy (a contiguous view at an odd address is copied too)."""
    return tuple(a if _aligned(a) else a.copy(order="C") for a in arrays)


def _to_f32(a):
    return a if a is None or not is_half(a.dtype) else a.astype(_F32)


@functools.cache
def _accumulators() -> dict:
    """float32 for each 16-bit dtype (attention_dtypes's table; bfloat16's NumPy dtype is
    read on the first call, not at import)."""
    return {np.dtype(np.float16): _F32, bfloat16(): _F32}


def attention_fwd(q, k, v, mask=None, *, scale, causal=None, window=None, dropout=None,
                  want_lse=True):
    """Attention forward, ``(out, lse)``: on tensor cores where :data:`TILES` has the
    head dim (see the module docstring), else through float32. Arguments and results as
    :func:`.attention.attention_fwd`; lse is float32."""
    attention_dtypes("attention_fwd", q, k, v, mask, accumulators=_accumulators())
    if not _fast(q, k, v):
        with q.device:
            out, lse = _fwd_tiled(_to_f32(q), _to_f32(k), _to_f32(v), _to_f32(mask),
                                  scale=scale, causal=causal, window=window,
                                  dropout=dropout, want_lse=want_lse)
            return out.astype(q.dtype), lse
    d = q.shape[-1]
    if _wgmma(q) and _sm90_scale(scale):
        return forward_sm90(SM90_BN[d], q, k, v, mask, scale=scale, causal=causal,
                            window=window, dropout=dropout, want_lse=want_lse)
    return forward_tiled(TILES[d], q, k, v, mask, scale=scale, causal=causal, window=window,
                         dropout=dropout, want_lse=want_lse)


def forward_tiled(tile: Tile, q, k, v, mask=None, *, scale, causal=None, window=None,
                  dropout=None, want_lse=True):
    """The tensor-core forward with ``tile`` (head dims of q, k, v equal, 64 or 128;
    ``benchmarks/probe_flash.py`` times tiles other than :data:`TILES` through it)."""
    return _forward(q, k, v, mask, tile.rows,
                    lambda dt, d, drop: (kernel_name("fwd", dt, d, tile, drop),
                                         shared_bytes("fwd", d, tile), NW * MMA_WARP),
                    scale=scale, causal=causal, window=window, dropout=dropout,
                    want_lse=want_lse)


def forward_sm90(bn: int, q, k, v, mask=None, *, scale, causal=None, window=None,
                 dropout=None, want_lse=True):
    """The wgmma forward (compute capability 9.0) with ``bn`` keys a tile (head dims of q,
    k, v equal, 64 or 128); the same arguments and results as :func:`forward_tiled`."""
    if not _wgmma(q):
        raise ValueError(f"attention_fwd: the wgmma kernel needs a device of compute "
                         f"capability 9.0. Received: {q.device.compute_capability}")
    if not _sm90_scale(scale):
        raise ValueError(f"attention_fwd: the wgmma kernel needs 2**-120 <= scale <= "
                         f"2**120 (the other kernels take any scale). Received: "
                         f"scale={scale!r}")
    return _forward(q, k, v, mask, SM90_ROWS,
                    lambda dt, d, drop: (sm90_name(dt, d, bn, drop), sm90_shared_bytes(d, bn),
                                         sm90_threads(drop)),
                    scale=scale, causal=causal, window=window, dropout=dropout,
                    want_lse=want_lse, file=SM90_FILE)


def _forward(q, k, v, mask, rows, kernel, *, scale, causal, window, dropout, want_lse,
             file=FILE):
    """Either forward kernel's launch from ``file``: ``rows`` query rows a block,
    ``kernel(dtype name, d, dropout on) -> (instance name, dynamic shared bytes, threads)``."""
    device = q.device
    lead, sq, d, _ = _dims(q, k)
    with device:
        q, k, v = _readable(q, k, v)
        out = _kernels.empty(lead + (sq, d), q.dtype)
        lse = _kernels.empty(lead + (sq,), _F32)
        bh = math.prod(lead)
        if bh and sq:
            blocks = -(-sq // rows)
            args = _args(device, blocks, q, k, v, mask, lead, scale, causal, window, dropout)
            name, smem, threads = kernel(q.dtype.name, d, dropout is not None)
            _launch(device, name, smem, bh * blocks, args + (out, lse), file=file,
                    threads=threads)
    return out, (lse if want_lse else None)


def attention_bwd(q, k, v, out, dout, lse, mask=None, *, scale, causal=None, window=None,
                  dropout=None):
    """Attention backward, ``(dq, dk, dv)`` of q's dtype (dk, dv per query head): on
    tensor cores where :data:`TILES` has the head dim, else through float32 (the tiled
    kernels of :mod:`.attention`, rounded back once). Arguments as
    :func:`.attention.attention_bwd`; lse float32.

    Deterministic: delta = rowsum(dO * O) by one kernel, dQ by one over query blocks, dK
    and dV by one over key blocks; every element is summed by one thread in a fixed
    order (no atomics), so the same inputs give the same bits on every run.
    """
    attention_dtypes("attention_bwd", q, k, v, mask, (out, dout, lse),
                     accumulators=_accumulators())
    if not _fast(q, k, v):
        with q.device:
            grads = _bwd_tiled(_to_f32(q), _to_f32(k), _to_f32(v), _to_f32(out),
                               _to_f32(dout), lse, _to_f32(mask), scale=scale, causal=causal,
                               window=window, dropout=dropout)
            return tuple(g.astype(q.dtype) for g in grads)
    return backward_tiled(*bwd_tiles(q.shape[-1], dropout is not None), q, k, v, out, dout,
                          lse, mask, scale=scale, causal=causal, window=window,
                          dropout=dropout)


def bwd_tiles(d: int, dropout: bool) -> tuple:
    """The launcher's (dq tile, dkdv tile) for head dim ``d``, with or without dropout."""
    return DQ_TILES[d], (DKDV_DROP_TILES if dropout else DKDV_TILES)[d]


def backward_tiled(dq_tile: Tile, dkdv_tile: Tile, q, k, v, out, dout, lse, mask=None, *,
                   scale, causal=None, window=None, dropout=None):
    """The tensor-core backward with the given tiles (``benchmarks/probe_flash.py`` times
    others than the tables' through it)."""
    import cupy

    device = q.device
    lead, sq, d, sk = _dims(q, k)
    with device:
        q, k, v, out, dout = _readable(q, k, v, out, dout)
        dq = _kernels.empty(lead + (sq, d), q.dtype)
        dk = _kernels.empty(lead + (sk, d), q.dtype)
        dv = _kernels.empty(lead + (sk, d), q.dtype)
        bh = math.prod(lead)
        if not bh or not (sq or sk):
            return dq, dk, dv
        rows = bh * sq
        lse_c = cupy.ascontiguousarray(lse.reshape(rows))
        delta = cupy.empty(max(rows, 1), dtype=_F32)
        drop = dropout is not None
        name = q.dtype.name
        if rows:
            tab = _table(device, (q, k, v, mask, out, dout), lead)
            _launch(device, delta_name(name, d), 0, -(-rows // NW),
                    (np.int64(rows), np.int32(sq), tab, out, _strides(out, -2, -1)[0], dout,
                     _strides(dout, -2, -1)[0], delta))
        grad = (dout, _strides(dout, -2, -1)[0], lse_c, delta)
        if sq:
            blocks = -(-sq // dq_tile.rows)
            args = _args(device, blocks, q, k, v, mask, lead, scale, causal, window, dropout,
                         (out, dout))
            _launch(device, kernel_name("bwd_dq", name, d, dq_tile, drop),
                    shared_bytes("bwd_dq", d, dq_tile), bh * blocks, args + grad + (dq,))
        if sk:
            blocks = -(-sk // dkdv_tile.rows)
            args = _args(device, blocks, q, k, v, mask, lead, scale, causal, window, dropout,
                         (out, dout))
            _launch(device, kernel_name("bwd_dkdv", name, d, dkdv_tile, drop),
                    shared_bytes("bwd_dkdv", d, dkdv_tile), bh * blocks,
                    args + grad + (dk, dv))
    return dq, dk, dv


def register(registry, backend: str) -> None:
    """Register ``attention_fwd`` / ``attention_bwd`` for float16 and bfloat16."""
    registry.register("attention_fwd", backend, _dtypes.HALF_FLOATING, attention_fwd)
    registry.register("attention_bwd", backend, _dtypes.HALF_FLOATING, attention_bwd)
