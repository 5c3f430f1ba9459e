"""Attention on tensor cores for float16 and bfloat16 (``kernels/cuda/flash_attention.cu``).

``attention_fwd`` and ``attention_bwd`` take exactly the arguments of the ``attention``
family's launchers (:mod:`.attention`, the NumPy backend's contract in
:mod:`tessera_array.nn._attention`) for float16 and bfloat16 ``cupy.ndarray`` buffers; lse
is float32.

The forward runs FlashAttention-2's recurrence on ``mma.sync`` tensor cores where the
head dims of q, k and v are one value of :data:`TILES` on a device of compute capability
8.0 or later (other layouts of those operands are copied to C order first). Every other
forward, and the backward for now, is the general path: the operands converted to
float32, the float32 tiled kernels of :mod:`.attention`, the results rounded back once.

Routing (head dim -> tile), chosen on the H200 by ``benchmarks/probe_flash.py``; the
table is pinned by ``tests/test_cuda_flash.py``:

======  ==========================================  ===========================
D       tile (MT 16-row tiles a warp, BN keys, NB)  why
======  ==========================================  ===========================
64      MT 2 (128 query rows a block), BN 64, NB 1  no spills (226 registers)
128     MT 1 (64 query rows a block), BN 64, NB 2   MT 2 spills at 255 registers
======  ==========================================  ===========================

NB is the kernel's ``__launch_bounds__`` minimum of blocks a multiprocessor.
Every launch runs on the current stream of q's device; nothing synchronizes with the host
except the first upload of an offset table (:func:`.attention._table`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from tessera_array.backends._common.checks import attention_dtypes
from tessera_array.backends._common.layout import band

from tessera_array import _dtypes

from . import _kernels
from .attention import SIZE_LIMIT, _strides, _table
from .attention import attention_bwd as _bwd_tiled
from .attention import attention_fwd as _fwd_tiled

__all__ = ["TILES", "Tile", "attention_bwd", "attention_fwd", "forward_tiled", "instances",
           "register"]

FILE = "flash_attention.cu"
COMPILERS = ("nvcc",)  # PTX mma.sync / ldmatrix / cp.async: NVIDIA only (.ci/compile-kernels)
NW = 4  # warps a block (flash_attention.cu's NW)
MMA_WARP = 32  # the lanes of mma.sync's fragments (flash_attention.cu's WARP): NVIDIA's ISA
MIN_CC = 80  # mma.sync with bf16, cp.async, ldmatrix: sm_80 and later
_ELEMENT = {"float16": "tessera::flash::f16", "bfloat16": "tessera::flash::bf16"}
_HALF_NP = {np.dtype(d._np): np.dtype(np.float32) for d in _dtypes.HALF_FLOATING}
_F32 = np.dtype(np.float32)
_MAX_DYNAMIC_SHARED = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
_STATIC_SHARED_LIMIT = 48 * 1024  # beyond this a launch must opt in (the attribute)


class Tile(NamedTuple):
    mt: int  # 16-row tiles a warp: BM = 16 * mt * NW query rows a block
    bn: int  # keys a tile
    nb: int  # __launch_bounds__' minimum blocks a multiprocessor

    @property
    def rows(self) -> int:
        return 16 * self.mt * NW

    def shared_bytes(self, d: int) -> int:
        """The Q tile, one K and one V tile of 16-bit elements."""
        return (self.rows + 2 * self.bn) * d * 2


TILES = {64: Tile(2, 64, 1), 128: Tile(1, 64, 2)}


def kernel_name(dtype_name: str, d: int, tile: Tile, dropout: bool) -> str:
    return (f"tessera_flash_fwd<{_ELEMENT[dtype_name]}, {d}, {tile.mt}, {tile.bn}, "
            f"{tile.nb}, {'true' if dropout else 'false'}>")


def instances(warp: int) -> list:
    """``(file, name)`` of every instance the launcher may ask for (at NVIDIA's warp
    width only: the file is CUDA's alone)."""
    if warp != MMA_WARP:
        return []
    return [(FILE, kernel_name(dt, d, tile, drop)) for dt in _ELEMENT
            for d, tile in TILES.items() for drop in (False, True)]


def _aligned(a) -> bool:
    """Whether the kernel may read ``a`` as it is: unit column stride, 16-byte aligned
    start, rows and every leading index 16 bytes apart (stride 0 included)."""
    isz = a.dtype.itemsize
    return (a.strides[-1] == isz and a.data.ptr % 16 == 0
            and all(s % 16 == 0 for s in a.strides[:-1]))


def _fast_tile(q, k, v):
    d = q.shape[-1]
    if k.shape[-1] != d or v.shape[-1] != d or d not in TILES:
        return None
    if int(q.device.compute_capability) < MIN_CC:
        return None
    return TILES[d]


_opted_in: set = set()  # id of the kernels whose dynamic shared memory limit is raised


def _launch(device, name: str, tile: Tile, d: int, blocks: int, args) -> None:
    import cupy

    fn = _kernels.function(FILE, name, device)
    smem = tile.shared_bytes(d)
    if smem > _STATIC_SHARED_LIMIT and id(fn) not in _opted_in:
        cupy.cuda.driver.funcSetAttribute(fn.ptr, _MAX_DYNAMIC_SHARED, smem)
        _opted_in.add(id(fn))
    fn((blocks,), (NW * MMA_WARP,), args, shared_mem=smem)


def _to_f32(a):
    return a if a is None or a.dtype not in _HALF_NP else a.astype(_F32)


def attention_fwd(q, k, v, mask=None, *, scale, causal=None, window=None, dropout=None,
                  want_lse=True):
    """Attention forward, ``(out, lse)``: on tensor cores where :data:`TILES` has the
    head dim (see the module docstring), else through float32. Arguments and results as
    :func:`.attention.attention_fwd`; lse is float32."""
    attention_dtypes("attention_fwd", q, k, v, mask, accumulators=_HALF_NP)
    tile = _fast_tile(q, k, v)
    if tile is None:
        with q.device:
            out, lse = _fwd_tiled(_to_f32(q), _to_f32(k), _to_f32(v), _to_f32(mask),
                                  scale=scale, causal=causal, window=window,
                                  dropout=dropout, want_lse=want_lse)
            return out.astype(q.dtype), lse
    return forward_tiled(tile, q, k, v, mask, scale=scale, causal=causal, window=window,
                         dropout=dropout, want_lse=want_lse)


def forward_tiled(tile: Tile, q, k, v, mask=None, *, scale, causal=None, window=None,
                  dropout=None, want_lse=True):
    """The tensor-core forward with ``tile`` (head dims of q, k, v equal, 64 or 128;
    ``benchmarks/probe_flash.py`` times tiles other than :data:`TILES` through it)."""
    import cupy

    device = q.device
    lead = q.shape[:-2]
    sq, d = q.shape[-2:]
    sk = k.shape[-2]
    if max(sq, sk) >= SIZE_LIMIT:
        raise ValueError(f"attention: the CUDA kernels take Sq, Sk < {SIZE_LIMIT}. "
                         f"Received: Sq={sq}, Sk={sk}")
    with device:
        q, k, v = (a if _aligned(a) else cupy.ascontiguousarray(a) for a in (q, k, v))
        out = _kernels.empty(lead + (sq, d), q.dtype)
        lse = _kernels.empty(lead + (sq,), _F32)
        bh = math.prod(lead)
        if bh and sq:
            kind, bmask, amask = 0, None, None
            m_sr = m_sc = np.int64(0)
            if mask is not None:
                m_sr, m_sc = _strides(mask, -2, -1)
                if mask.dtype == np.bool_:
                    kind, bmask = 1, mask
                else:
                    kind, amask = 2, mask
            lo, hi = (np.int64(b) for b in band(causal, window, sq, sk))
            if dropout is None:
                seed = offset = threshold = 0
                keep_scale = 1.0
            else:
                p, seed, offset, threshold = dropout
                keep_scale = 1.0 / (1.0 - p)
            mblocks = -(-sq // tile.rows)
            args = (np.int32(mblocks), np.int32(sq), np.int32(sk),
                    _table(device, (q, k, v, mask), lead),
                    q, _strides(q, -2, -1)[0], k, _strides(k, -2, -1)[0],
                    v, _strides(v, -2, -1)[0], np.int32(kind), bmask, amask, m_sr, m_sc,
                    lo, hi, np.float32(scale), np.uint32(seed & 0xFFFFFFFF), np.uint32(seed >> 32),
                    np.uint32(offset & 0xFFFFFFFF), np.uint32(offset >> 32),
                    np.uint32(threshold), np.float32(keep_scale), out, lse)
            name = kernel_name(q.dtype.name, d, tile, dropout is not None)
            _launch(device, name, tile, d, bh * mblocks, args)
    return out, (lse if want_lse else None)


def attention_bwd(q, k, v, out, dout, lse, mask=None, *, scale, causal=None, window=None,
                  dropout=None):
    """Attention backward through float32 (the tiled kernels of :mod:`.attention`),
    ``(dq, dk, dv)`` rounded back to q's dtype once. Arguments as
    :func:`.attention.attention_bwd`; lse float32."""
    attention_dtypes("attention_bwd", q, k, v, mask, (out, dout, lse), accumulators=_HALF_NP)
    with q.device:
        grads = _bwd_tiled(_to_f32(q), _to_f32(k), _to_f32(v), _to_f32(out), _to_f32(dout),
                           lse, _to_f32(mask), scale=scale, causal=causal, window=window,
                           dropout=dropout)
        return tuple(g.astype(q.dtype) for g in grads)


def register(registry, backend: str) -> None:
    """Register ``attention_fwd`` / ``attention_bwd`` for float16 and bfloat16."""
    registry.register("attention_fwd", backend, _dtypes.HALF_FLOATING, attention_fwd)
    registry.register("attention_bwd", backend, _dtypes.HALF_FLOATING, attention_bwd)
