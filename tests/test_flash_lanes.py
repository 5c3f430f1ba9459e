"""The lane arithmetic of ``kernels/cuda/flash_attention.cu`` (and of the header it shares
with ``flash_attention_sm90.cu``, ``kernels/include/tessera/flash.cuh``), emulated on the
CPU.

The tensor-core kernels run only on NVIDIA GPUs (``tests/test_cuda_flash.py`` checks their
results there); CI has none. What can be checked without one is the index arithmetic the
results depend on, in the kernel's own expressions (pinned below, as
``tests/test_wave_emulation.py`` pins the warp kernels):

- the shared dropout blocks: each lane's share of its quad's Philox blocks and the
  shuffles that hand every lane the keep bits of its own elements of mma.sync's C
  layout (rows g and g + 8, columns 2tq and 2tq + 1 of each n-tile), in the row layout
  (forward, dq) and in dkdv's transposed one, against the CPU's Philox masks;
- the shared-memory swizzle: the eight row addresses of every ldmatrix phase and of
  every cp.async quarter-warp fall in eight different 16-byte bank groups;
- the tile ranges of the band: the key tiles of a query block (and the query tiles of a
  key block) hold every visible pair and skip only tiles with none.
"""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest
from tessera_array.backends._common.layout import band
from tessera_array.backends.numpy import philox as np_philox

from tessera_array.random import dropout_keep_threshold

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCES = (ROOT / "kernels" / "cuda" / "flash_attention.cu",
           ROOT / "kernels" / "include" / "tessera" / "flash.cuh")
WARP = 32

PINS = [
    # row layout (forward, dq): this lane's blocks (its first, then offsets), and the
    # reading of its bits
    ("((((unsigned long long)bh * sq + (unsigned long long)(r0 + g + 8 * (tq >> 1))) * "
     "(unsigned long long)sk + (unsigned long long)j0) >> 4) + (unsigned long long)(tq & 1);"),
    ("return n0 + (unsigned long long)a * (unsigned long long)sk + "
     "(unsigned long long)(2 * k);"),
    "const int p = b >> 1, tq = lane & 3;",
    "const unsigned m = __shfl_sync(FULL, kbits[p >> 1], (lane & ~3) | (2 * h + (p & 1)));",
    "const int sh = 8 * (b & 1) + 2 * tq;",
    "k0 = (m >> sh) & 1u;",
    "k1 = (m >> (sh + 1)) & 1u;",
    # dkdv's transposed layout
    "(unsigned long long)(i0 + (g >> 1) * 8 + 2 * tq + (g & 1))) *",
    "(unsigned long long)sk + (unsigned long long)(j0 + wrow)) >> 4;",
    "return n0 + 2ull * (unsigned long long)k * (unsigned long long)sk + (unsigned long long)a;",
    "const int ce = 2 * b + e;",
    "const unsigned mb = __shfl_sync(FULL, kbits[a][ce >> 3], (lane & 3) | ((ce & 7) << 2));",
    "z = (mb >> (g + 8 * h)) & 1u ? keep_scale : 0.0f;",
    # the swizzle and the ldmatrix / cp.async addresses
    "return (unsigned)((r * (D / 8) + (c ^ (r & 7))) * 16);",
    "ldmatrix_x4(af[a], sA + swz<D>(r0 + a * 16 + (lane & 15), 2 * kk + (lane >> 4)));",
    ("ldmatrix_x4(bf, sB + swz<D>(np * 16 + (lane & 7) + ((lane >> 4) << 3), "
     "2 * kk + ((lane >> 3) & 1)));"),
    ("ldmatrix_x4_trans(bf, sB + swz<D>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3), "
     "2 * dp + (lane >> 4)));"),
    "const int t = threadIdx.x + it * NW * WARP;",
    "const int r = t / CH, c = t - r * CH;",
    # the band's tile ranges
    "long long a = (long long)i0 + lo, b = (long long)i0 + ni - 1 + hi + 1;",
    "long long a = (long long)j0 - hi, b = (long long)j0 + nj - 1 - lo + 1;",
    "begin = (int)(a / tile);",
    "end = b > a ? (int)((b + tile - 1) / tile) : begin;",
]


def _normal(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    text = "\n".join(re.sub(r"//.*", "", ln) for ln in text.splitlines())
    return re.sub(r"\s+", " ", text)


def test_the_mirrored_source_lines_are_there():
    text = _normal("\n".join(s.read_text() for s in SOURCES))
    missing = [line for line in PINS if _normal(line) not in text]
    assert not missing, f"flash_attention.cu and flash.cuh no longer have: {missing}"


LANES = np.arange(WARP)
G, TQ = LANES >> 2, LANES & 3


def keep16(n, seed, offset, thr):
    """keep16 of blocks ``n`` (uint64 array): bit e keeps element 16 n + e (the CPU's
    keep_block over the sixteen counters, one row of Sk = 16)."""
    n = np.asarray(n, dtype=np.uint64)
    flat = n.reshape(-1)
    keep = np_philox.keep_block(seed, offset, thr, 1, 16, flat, 0, 1, 0, 16)[:, 0, :]
    return (keep * (1 << np.arange(16))).sum(axis=-1).astype(np.int64).reshape(n.shape)


def shfl(v, src):
    """``__shfl_sync(FULL, v, src)``: lane i reads lane src[i] (the last axis)."""
    return np.take_along_axis(v, np.broadcast_to(src, v.shape), axis=-1)


# (bh, Sq, Sk, first row of the 16-row tile, first key of the n-tiles): Sk % 16 == 0,
# main blocks past 2**32 included
GEOMETRY = [(0, 64, 64, 0, 0), (3, 100, 128, 48, 64), (2**22 + 5, 4096, 4112, 4080, 4096),
            (7, 33, 16, 16, 0)]
KEYS = [(1234, 5, 0.1), (2**64 - 1, 2**63 + 3, 0.5), (77, 2**33, 0.3), (9, 1, 0.5 + 2**-8),
        (10, 2, 1e-3)]


@pytest.mark.parametrize("seed, offset, p", KEYS)
@pytest.mark.parametrize("bh, sq, sk, r16, j0", GEOMETRY)
def test_row_layout_lanes_get_their_elements_keep_bits(bh, sq, sk, r16, j0, seed, offset, p):
    """Forward and dq: every lane's two elements of every n-tile, both rows, get the CPU
    mask's keep bits through the quad's shared blocks."""
    thr = dropout_keep_threshold(p)
    nt = 8  # n-tiles of the emulated tile (BN 64)
    u = np.uint64
    n0 = ((((u(bh) * u(sq) + (r16 + G + 8 * (TQ >> 1)).astype(u)) * u(sk) + u(j0))
           >> u(4)) + (TQ & 1).astype(u))  # the lane's first block (a = 0)
    ks = np.arange(nt // 4)[:, None]
    kbits = keep16(n0 + (2 * ks).astype(u), seed, offset, thr)  # (nt / 4, 32): the shares
    # the CPU's mask of the tile (rows past Sq follow the same counter formula, as in
    # the kernel, whose results there are never used)
    mask = np_philox.keep_block(seed, offset, thr, sq, sk, bh, r16, r16 + 16, j0,
                                j0 + 8 * nt)
    for h in (0, 1):
        for b in range(nt):
            pp = b >> 1
            m = shfl(kbits[pp >> 1], (LANES & ~3) | (2 * h + (pp & 1)))
            sh = 8 * (b & 1) + 2 * TQ
            k0, k1 = (m >> sh) & 1, (m >> (sh + 1)) & 1
            want0 = mask[G + 8 * h, 8 * b + 2 * TQ]
            want1 = mask[G + 8 * h, 8 * b + 2 * TQ + 1]
            assert np.array_equal(k0.astype(bool), want0), (h, b)
            assert np.array_equal(k1.astype(bool), want1), (h, b)


@pytest.mark.parametrize("seed, offset, p", KEYS)
@pytest.mark.parametrize("bh, sq, sk, j16, i0", GEOMETRY)
def test_dkdv_lanes_get_their_elements_keep_bits(bh, sq, sk, j16, i0, seed, offset, p):
    """dkdv (rows are keys j, columns queries i): every lane's elements get the keep bits
    of counter (bh Sq + i) Sk + j through the eight lanes of one tq that share the
    blocks."""
    if j16 + 16 > sk:
        j16 = sk - 16
    if i0 + 64 > sq:
        i0 = max(0, sq - 64)
    thr = dropout_keep_threshold(p)
    nt = 8  # query n-tiles (BQ 64)
    u = np.uint64  # a = 0, j0 + wrow = j16: the tile's first key
    n0 = ((u(bh) * u(sq) + (i0 + (G >> 1) * 8 + 2 * TQ + (G & 1)).astype(u)) * u(sk)
          + u(j16)) >> u(4)
    kbits = np.stack([keep16(n0 + u(2 * k) * u(sk), seed, offset, thr)
                      for k in range(nt // 4)])
    rows = min(sq, i0 + 8 * nt + 8)
    mask = np_philox.keep_block(seed, offset, thr, sq, sk, bh, 0, rows, 0, sk)
    for h in (0, 1):
        j = j16 + G + 8 * h
        for e in (0, 1):
            for b in range(nt):
                ce = 2 * b + e
                mb = shfl(kbits[ce >> 3], (LANES & 3) | ((ce & 7) << 2))
                got = (mb >> (G + 8 * h)) & 1
                i = i0 + b * 8 + 2 * TQ + e
                ok = i < sq
                want = mask[np.minimum(i, rows - 1), j]
                assert np.array_equal(got[ok].astype(bool), want[ok]), (h, e, b)


@pytest.mark.parametrize("bh, sq, sk, r0, j0", GEOMETRY)
def test_block_offsets_are_the_counter_layouts_blocks(bh, sq, sk, r0, j0):
    """The kernels name block [a][k] (for its bytes and its ties) as the lane's first
    block plus an offset: a sk + 2 k in the row layout, 2 k sk + a in dkdv's. Those are
    the blocks of the counter layout: of tile a's rows and share k's columns (two 16-row
    tiles, two shares)."""
    u = np.uint64
    rows = (u(bh) * u(sq) + (r0 + G + 8 * (TQ >> 1)).astype(u)) * u(sk) + u(j0)
    n0 = (rows >> u(4)) + (TQ & 1).astype(u)
    for a in range(2):
        rc = (u(bh) * u(sq) + (r0 + 16 * a + G + 8 * (TQ >> 1)).astype(u)) * u(sk) + u(j0)
        for k in range(2):
            want = (rc >> u(4)) + (2 * k + (TQ & 1)).astype(u)
            assert np.array_equal(n0 + u(a) * u(sk) + u(2 * k), want), (a, k)
    i0, wrow = j0, 16  # dkdv: queries from i0, the warp's keys from j0 + wrow
    n0 = ((u(bh) * u(sq) + (i0 + (G >> 1) * 8 + 2 * TQ + (G & 1)).astype(u)) * u(sk)
          + u(r0 + wrow)) >> u(4)
    for a in range(2):
        jc = u(r0 + wrow + a * 16)
        for k in range(2):
            ic = (i0 + ((8 * k + G) >> 1) * 8 + 2 * TQ + (G & 1)).astype(u)
            want = ((u(bh) * u(sq) + ic) * u(sk) + jc) >> u(4)
            assert np.array_equal(n0 + u(2 * k) * u(sk) + u(a), want), (a, k)


def swz(r, c, d):
    return (r * (d // 8) + (c ^ (r & 7))) * 16


@pytest.mark.parametrize("d", [64, 128])
def test_swizzle_spreads_every_phase_over_eight_bank_groups(d):
    """ldmatrix reads eight 16-byte rows a phase (lanes 8q..8q+7) and cp.async stores
    eight 16-byte chunks a quarter-warp: each set lands in eight different 16-byte bank
    groups (byte address / 16 mod 8), i.e. without bank conflicts."""
    lane = LANES
    for kk in range(d // 16):
        for r0 in (0, 16, 48):
            a = swz(r0 + (lane & 15), 2 * kk + (lane >> 4), d)  # A fragments
            b = swz(r0 + (lane & 7) + ((lane >> 4) << 3), 2 * kk + ((lane >> 3) & 1), d)
            t = swz(r0 + (lane & 7) + (((lane >> 3) & 1) << 3), 2 * kk + (lane >> 4),
                    d)  # the transposed loads of the P V products
            for addr in (a, b, t):
                for q in range(4):
                    groups = (addr[8 * q:8 * q + 8] // 16) % 8
                    assert len(set(groups.tolist())) == 8, (kk, r0, q)
    ch = d // 8
    for it in range(4):  # load_tile: thread t writes chunk (t / CH, t % CH)
        t = np.arange(128) + it * 128
        addr = swz(t // ch, t % ch, d)
        for q in range(0, 128, 8):
            assert len(set(((addr[q:q + 8] // 16) % 8).tolist())) == 8


def key_tiles(i0, ni, tile, lo, hi, sk):
    a, b = max(i0 + lo, 0), min(i0 + ni - 1 + hi + 1, sk)
    begin = a // tile
    return begin, ((b + tile - 1) // tile if b > a else begin)


def query_tiles(j0, nj, tile, lo, hi, sq):
    a, b = max(j0 - hi, 0), min(j0 + nj - 1 - lo + 1, sq)
    begin = a // tile
    return begin, ((b + tile - 1) // tile if b > a else begin)


@pytest.mark.parametrize("causal, window", [(None, None), ("top_left", None),
                                            ("bottom_right", None), (None, (40, 7)),
                                            ("bottom_right", (70, None)), (None, (0, 0))])
@pytest.mark.parametrize("sq, sk", [(200, 333), (2048, 2048), (70, 260), (200, 64), (9, 1)])
def test_band_tile_ranges_hold_every_visible_pair(causal, window, sq, sk):
    """The key tiles a query block visits hold every key any of its queries sees, and
    every visited tile holds a pair of the band for the block's rows (the last block's
    rows past Sq counted: the kernel bounds the range by the block, and masks those rows
    element by element); likewise the query tiles of a key block."""
    lo, hi = band(causal, window, sq, sk)
    rows, tile = 64, 64
    i = np.arange(sq + rows)[:, None]
    j = np.arange(sk + rows)[None, :]
    band_ = (j - i >= lo) & (j - i <= hi)  # rows and columns past the ends included
    vis = band_[:sq, :sk]
    for i0 in range(0, sq, rows):
        begin, end = key_tiles(i0, rows, tile, lo, hi, sk)
        seen = vis[i0:i0 + rows].any(axis=0)
        cols = np.nonzero(seen)[0]
        if cols.size:
            assert begin <= cols[0] // tile and cols[-1] // tile < end
        for t in range(begin, end):  # none visited in vain
            assert band_[i0:i0 + rows, t * tile:min((t + 1) * tile, sk)].any(), (i0, t)
    for j0 in range(0, sk, 64):
        begin, end = query_tiles(j0, 64, 32, lo, hi, sq)
        seen = vis[:, j0:j0 + 64].any(axis=1)
        qs = np.nonzero(seen)[0]
        if qs.size:
            assert begin <= qs[0] // 32 and qs[-1] // 32 < end
        for t in range(begin, end):
            assert band_[t * 32:min((t + 1) * 32, sq), j0:j0 + 64].any(), (j0, t)
