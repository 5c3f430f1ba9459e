"""The shared-memory layout and the stage hand-over of ``kernels/cuda/flash_attention_sm90.cu``
(the wgmma forward), emulated on the CPU.

The kernel runs only on compute capability 9.0 (``tests/test_cuda_flash.py`` checks its
results there); CI has no GPU. What can be checked without one, in the kernel's own
expressions (pinned below, as ``tests/test_flash_lanes.py`` pins the mma.sync kernel's):

- the layout: every element a wgmma descriptor names (the PTX ISA's canonical 128-byte
  swizzled layouts: K-major for Q and K, N-major for V; the swizzle XORs address bits
  4-6 with bits 7-9 inside 1024-byte atoms) is the element the cp.async loads put there
  (``sw128``), for every k-step of S = Q K^T and of P V, both head dims and tile widths;
- the stage hand-over: the two warpgroups, run in every interleaving a random scheduler
  draws, by the kernel's waits and arrivals on the full and empty mbarriers (the
  parities it names), never deadlock, never read a stage before its copies landed and
  never refill one a warpgroup still reads;
- the dropout warpgroup: the keep bytes it writes into a keep stage (``keep_bytes``: the
  Philox bytes, spread over the words of the row's four softmax threads by
  ``__byte_perm``, its ties rewritten by their refinement words; ``keep_bytes_any``:
  0xFF / 0x00 where Sk % 16 != 0), read and compared as a softmax thread does
  (``ByteKeeps``, against ``keep_byte``), are the contract's keep decisions
  (``philox.keep_block``) at every element of every thread's C layout; and its ring of
  keep stages, run against both softmax warpgroups, neither deadlocks nor lets a word
  be overwritten before both read it.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from tessera_array.backends.numpy import philox
from test_flash_lanes import _normal  # comments dropped, whitespace folded

from tessera_array.random import dropout_keep_threshold

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCE = ROOT / "kernels" / "cuda" / "flash_attention_sm90.cu"

PINS = [
    # sw128: chunk c of row r in a tile of R rows, D / 64 column blocks of 128-byte rows
    "return (unsigned)((c >> 3) * (R * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4));",
    # the descriptors of S = Q K^T (K-major) and of P V (V N-major)
    "const unsigned qa = sQ + wg * 64 * 128;",
    "wgmma_ss(s_[0], E{}, desc(qa + (kk >> 2) * (BM * 128) + (kk & 3) * KSTEP, 16, 1024),",
    "desc(ka + (kk >> 2) * (BN * 128) + (kk & 3) * KSTEP, 16, 1024), kk > 0);",
    "constexpr unsigned KSTEP = 16 * 2;",
    "wgmma_rs(acc[0], E{}, a, desc(va + kk * 16 * 128, NT * 8 * 128, 1024));",
    # the hand-over: refills, data waits, releases
    "mbar_wait(emptyK + 8 * (s ^ 1u), ((n - 1) >> 1) & 1u);",
    "mbar_arrive_copies(fullK + 8 * (s ^ 1u));",
    "mbar_wait(emptyV + 8 * s, ((n - 2) >> 1) & 1u);",
    "mbar_arrive_copies(fullV + 8 * s);",
    "mbar_wait(fullK + 8 * s, (n >> 1) & 1u);",
    "mbar_wait(fullV + 8 * (s ^ 1u), ((n - 1) >> 1) & 1u);",
    "mbar_arrive(emptyK + 8 * s);",
    "mbar_arrive(emptyV + 8 * (s ^ 1u));",
    "mbar_wait(fullV + 8 * (n & 1u), (n >> 1) & 1u);",
    # the keep bytes: keep_byte, keep_bytes (the bytes and the ties)
    "return key.t8 ? key.t8 : 1u;",
    "const unsigned tb = key.t8 * 0x01010101u;",
    "const uint4 u = philox_block((c0 >> 4) + (unsigned long long)p, key);",
    ("runs |= ((bytes_equal(u.x, tb) ? 1u : 0u) | (bytes_equal(u.y, tb) ? 2u : 0u) |"
     " (bytes_equal(u.z, tb) ? 4u : 0u) | (bytes_equal(u.w, tb) ? 8u : 0u)) << (4 * p);"),
    "o.x = __byte_perm(u.x, u.z, 0x5410);",
    "o.y = __byte_perm(u.x, u.z, 0x7632);",
    "o.z = __byte_perm(u.y, u.w, 0x5410);",
    "o.w = __byte_perm(u.y, u.w, 0x7632);",
    "*reinterpret_cast<uint4 *>(d + p * THREADS) = o;",
    "if (key.frac == 0u && key.t8 != 0u) return;",
    "const int r = __ffs(runs) - 1;",
    "runs &= runs - 1u;",
    "const int p = r >> 2, q = r & 3;",
    "const uint4 w = philox_block((1ull << 63) | ((c0 >> 2) + (unsigned long long)r), key);",
    "for (int k = 0; k < 4; ++k) {",
    "d + p * THREADS + 2 * (q & 1) + (k >> 1)) + 2 * (q >> 1) + (k & 1);",
    "if (*a == key.t8) {",
    "const bool keep = philox_lane(w, (unsigned)k) >= key.frac;",
    "if (key.t8 ? !keep : keep) *a = (unsigned char)(key.t8 ? key.t8 - 1u : 1u);",
    # keep_bytes_any (Sk % 16 != 0)
    "const unsigned o = (unsigned)(c0 & 15);",
    "unsigned lo = keep16(c0 >> 4, key);",
    ("const unsigned hi = o || p + 1 < NT / 2 ? "
     "keep16((c0 >> 4) + (unsigned long long)(p + 1), key) : 0u;"),
    "const unsigned bits = ((lo | hi << 16) >> o) & 0xFFFFu;",
    "lo = hi;",
    "word |= ((bits >> (8 * (y >> 1) + 2 * tq + (y & 1))) & 1u) * (0xFFu << (8 * y));",
    "d[p * THREADS + tq] = word;",
    # ByteKeeps: a softmax thread's compares
    "const unsigned x = w[b >> 1];",
    "const int s = b & 1;",
    "k0 = (x << (24 - 16 * s)) >= kb24;",
    "k1 = (x << (16 - 16 * s)) >= kb24;",
    "for (int p = 0; p < NT / 2; ++p) r.w[p] = w[h][p];",
    "r.kb24 = kb << 24;",
    # the kernel: the dropout warpgroup's rows and words, a softmax thread's reads
    "constexpr int KEEP_STAGES = 2;",
    "constexpr int NP = NT / 2, NV = NT;",
    "const int x = threadIdx.x - THREADS, hr = x & 1;",
    ("const unsigned long long rowc = ((unsigned long long)bh * sq +"
     " (unsigned long long)(i0 + 16 * (x >> 4) + ((x >> 1) & 7) + 8 * hr)) *"
     " (unsigned long long)sk;"),
    "unsigned *dst = kwords + hr * NP * THREADS + 2 * (x & ~1);",
    "const unsigned n = (unsigned)(t - t_begin), st = n % KEEP_STAGES;",
    "unsigned *d = dst + st * NV * THREADS;",
    "const unsigned long long c0 = rowc + (unsigned long long)(t * BN);",
    "if ((sk & 15) == 0) keep_bytes<NT>(d, c0, key); else keep_bytes_any<NT>(d, c0, key);",
    "keep.w[h][p] = kwords[(st * NV + h * NP + p) * THREADS + threadIdx.x];",
    "keep.kb = keep_byte(key);",
    # the keep ring's hand-over
    "mbar_wait(keepEmpty + 8 * st, (n / KEEP_STAGES - 1) & 1u);",
    "mbar_arrive(keepFull + 8 * st);",
    "mbar_wait(keepFull + 8 * st, (n / KEEP_STAGES) & 1u);",
    "mbar_arrive(keepEmpty + 8 * st);",
]


def test_the_mirrored_source_lines_are_there():
    text = _normal(SOURCE.read_text())
    missing = [line for line in PINS if _normal(line) not in text]
    assert not missing, f"flash_attention_sm90.cu no longer has: {missing}"


# ---- the layout ---------------------------------------------------------------------------

def sw128(rows: int, r, c):
    """Byte offset of 16-byte chunk c of row r (the kernel's sw128<R>)."""
    return (c >> 3) * (rows * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4)


def stored(rows: int, r, col):
    """Where the loads put element (r, col) of a 16-bit tile: its chunk, then 2 bytes an
    element inside it."""
    return sw128(rows, r, col // 8) + (col % 8) * 2


def swizzle(addr):
    """The 128-byte swizzle on a byte address (1024-byte atoms): bits 4-6 ^= bits 7-9."""
    return addr ^ (((addr >> 7) & 7) << 4)


def read_k_major(start, sbo, rows, k):
    """Byte address the hardware reads for element (row, k) of a K-major operand (rows
    along M or N, 16 k-elements) from a 128-byte swizzled descriptor: 8-row groups SBO
    apart, rows 128 bytes apart, k contiguous (PTX ISA: ((8, m), (T, 2k)) : ((8T, SBO),
    (1, T)), T = 8 16-bit elements)."""
    return swizzle(start + (rows // 8) * sbo + (rows % 8) * 128 + k * 2)


def read_mn_major(start, lbo, sbo, k, n):
    """Byte address of element (k, n) of an N-major operand (16 k-rows, n contiguous) from
    a 128-byte swizzled descriptor: 64-element column blocks LBO apart, 8-row k groups SBO
    apart, k-rows 128 bytes apart (((T, 8, m), (8, k)) : ((1, T, LBO), (8T, SBO)))."""
    return swizzle(start + (n // 64) * lbo + (k // 8) * sbo + (k % 8) * 128 + (n % 64) * 2)


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("bn", [64, 128])
def test_s_operands_are_where_the_loads_put_them(d, bn):
    """S = Q K^T: each warpgroup's 64 rows of Q (A) and the BN rows of K (B), K-major, at
    every k-step kk (the kernel's start addresses, SBO 1024)."""
    bm = 128
    for wg in (0, 1):
        qa = wg * 64 * 128
        rows, k = np.meshgrid(np.arange(64), np.arange(16), indexing="ij")
        for kk in range(d // 16):
            start = qa + (kk >> 2) * (bm * 128) + (kk & 3) * 32
            got = read_k_major(start, 1024, rows, k)
            want = stored(bm, wg * 64 + rows, 16 * kk + k)
            assert np.array_equal(got, want), (wg, kk)
    rows, k = np.meshgrid(np.arange(bn), np.arange(16), indexing="ij")
    for kk in range(d // 16):
        start = (kk >> 2) * (bn * 128) + (kk & 3) * 32
        assert np.array_equal(read_k_major(start, 1024, rows, k), stored(bn, rows, 16 * kk + k))


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("bn", [64, 128])
def test_v_operand_is_where_the_loads_put_it(d, bn):
    """P V: the 16 keys of k-step kk by the D columns of V, N-major (imm-trans-b), LBO one
    column block of the tile (BN * 128 bytes), SBO 1024."""
    k, n = np.meshgrid(np.arange(16), np.arange(d), indexing="ij")
    for kk in range(bn // 16):
        got = read_mn_major(kk * 16 * 128, bn * 128, 1024, k, n)
        assert np.array_equal(got, stored(bn, 16 * kk + k, n)), kk


@pytest.mark.parametrize("d, bn", [(64, 64), (64, 128), (128, 64), (128, 128)])
def test_a_tile_is_one_to_one(d, bn):
    """Every element of a tile has its own two bytes inside the tile's bytes, and each
    1024-byte atom starts aligned (the swizzle's premise)."""
    r, c = np.meshgrid(np.arange(bn), np.arange(d), indexing="ij")
    addr = stored(bn, r, c).ravel()
    assert len(np.unique(addr)) == addr.size and addr.max() < bn * d * 2
    assert (bn * 128) % 1024 == 0 and (128 * 128) % 1024 == 0  # column blocks, Q's rows


# ---- the stage hand-over ------------------------------------------------------------------

class Barrier:
    """An mbarrier: a phase completes after `count` arrivals. try_wait.parity(q) succeeds
    while the current (incomplete) phase's parity differs from q, so it cannot tell a
    phase from the one two later: the protocol must keep every waiter within a phase."""

    def __init__(self, count):
        self.count, self.arrived, self.completed = count, 0, 0

    def arrive(self):
        self.arrived += 1
        if self.arrived == self.count:
            self.arrived, self.completed = 0, self.completed + 1

    def done(self, parity):
        return (self.completed & 1) != parity


def _program(t_count):
    """One warpgroup's steps in the kernel's order: (op, barrier or stage kind, stage,
    parity or tile). Each warpgroup is one agent: its threads act together (the barriers'
    count is then 2, one arrival a warpgroup)."""
    steps = [("load", "K", 0, 0)] if t_count else []
    for n in range(t_count):
        s = n & 1
        if n + 1 < t_count:
            if n >= 1:
                steps.append(("wait", "emptyK", s ^ 1, ((n - 1) >> 1) & 1))
            steps.append(("load", "K", s ^ 1, n + 1))
        if n >= 2:
            steps.append(("wait", "emptyV", s, ((n - 2) >> 1) & 1))
        steps.append(("load", "V", s, n))
        steps.append(("wait", "fullK", s, (n >> 1) & 1))
        if n >= 1:
            steps.append(("wait", "fullV", s ^ 1, ((n - 1) >> 1) & 1))
        steps.append(("read", "K", s, n))
        if n >= 1:
            steps.append(("read", "V", s ^ 1, n - 1))
        steps.append(("release", "K", s, n))
        if n >= 1:
            steps.append(("release", "V", s ^ 1, n - 1))
    if t_count:
        n = t_count - 1
        steps.append(("wait", "fullV", n & 1, (n >> 1) & 1))
        steps.append(("read", "V", n & 1, n))
    return steps


def _run(prog, rng):
    """Both warpgroups through ``prog`` under a random scheduler; a load's copies land at
    a random later step (their arrival on the full barrier). Asserts, at each step, what
    the hand-over promises."""
    bars = {name: [Barrier(2), Barrier(2)] for name in ("fullK", "fullV", "emptyK", "emptyV")}
    tile = {}  # (kind, stage) -> the tile its copies are for
    landed, released = {}, {}  # (kind, stage) -> warpgroups whose copies landed / released
    in_flight = []  # (kind, stage, tile): issued copies, not landed
    pcs = [0, 0]
    while any(pc < len(prog) for pc in pcs) or in_flight:
        ready = []
        for wg in (0, 1):
            if pcs[wg] < len(prog):
                op, kind, s, x = prog[pcs[wg]]
                if op != "wait" or bars[kind][s].done(x):
                    ready.append(("step", wg))
        ready += [("land", i) for i in range(len(in_flight))]
        assert ready, f"deadlock at {[prog[p] if p < len(prog) else None for p in pcs]}"
        what, i = ready[int(rng.integers(len(ready)))]
        if what == "land":
            kind, s, x = in_flight.pop(i)
            landed[kind, s] = landed.get((kind, s), 0) + 1
            bars["full" + kind][s].arrive()
            continue
        wg = i
        op, kind, s, x = prog[pcs[wg]]
        key = (kind, s)
        if op == "load":
            if tile.get(key) != x:  # the first warpgroup to refill the stage
                # the tile it held was released by both warpgroups (or none was there)
                assert key not in tile or released.get(key, 0) == 2, (key, tile[key], x)
                tile[key], landed[key], released[key] = x, 0, 0
            in_flight.append((kind, s, x))
        elif op == "read":
            assert tile.get(key) == x and landed[key] == 2, (key, tile.get(key), x)
        elif op == "release":
            assert tile.get(key) == x
            released[key] += 1
            bars["empty" + kind][s].arrive()
        pcs[wg] += 1


@pytest.mark.parametrize("t_count", [1, 2, 3, 4, 7, 16])
def test_hand_over_never_deadlocks_nor_races(t_count):
    """Random interleavings of the two warpgroups and of the copies' landings."""
    rng = np.random.default_rng(t_count)
    prog = _program(t_count)
    for _ in range(300):
        _run(prog, rng)


def test_the_model_catches_a_wrong_parity():
    """The emulation fails the protocol with an off-by-one parity on the empty barriers
    (a refill that does not wait for the stage's release)."""
    prog = [(op, kind, s, (x ^ 1) if op == "wait" and kind.startswith("empty") else x)
            for op, kind, s, x in _program(8)]
    rng = np.random.default_rng(0)
    with pytest.raises(AssertionError):
        for _ in range(300):
            _run(prog, rng)


# ---- the dropout warpgroup's keep words ---------------------------------------------------

THREADS, KEEP_THREADS = 256, 128  # the kernel's (pinned), the launcher's threads


def test_the_launcher_launches_the_dropout_warpgroup():
    from tessera_array.backends._cupy import flash

    text = _normal(SOURCE.read_text())
    for line in ("constexpr int THREADS = WG * 4 * WARP;", "constexpr int WG = 2;",
                 "constexpr int KEEP_THREADS = 4 * WARP;",
                 "constexpr int DROP_THREADS = THREADS + KEEP_THREADS;"):
        assert _normal(line) in text, line
    assert flash.sm90_threads(False) == THREADS == flash.SM90_THREADS
    assert flash.sm90_threads(True) == THREADS + KEEP_THREADS


KEEP_STAGES = 2  # the kernel's (pinned below)
U32 = 0xFFFFFFFF


def _philox(blocks, seed, offset):
    """philox_block of each block index (uint64 array): uint32 (..., 4), the words x, y, z, w."""
    blocks = np.asarray(blocks, dtype=np.uint64)
    ctr = np.empty(blocks.shape + (4,), np.uint32)
    ctr[..., 0] = blocks & np.uint64(U32)
    ctr[..., 1] = blocks >> np.uint64(32)
    ctr[..., 2] = offset & U32
    ctr[..., 3] = offset >> 32
    return philox.philox4x32_10(ctr, (seed & U32, seed >> 32))


def _byte_perm(a, b, sel):
    """__byte_perm(a, b, sel): byte i of the result is byte (sel >> 4 i) & 7 of b:a."""
    ab = (b.astype(np.uint64) << np.uint64(32)) | a.astype(np.uint64)
    out = np.zeros(a.shape, np.uint64)
    for i in range(4):
        n = (sel >> (4 * i)) & 7
        out |= ((ab >> np.uint64(8 * n)) & np.uint64(0xFF)) << np.uint64(8 * i)
    return out.astype(np.uint32)


def _has_byte(w, tb):
    """bytes_equal(w, tb) != 0 (philox.cuh): 1 where some byte of w equals t8 (uint32
    arithmetic, wrapping)."""
    x = w ^ np.uint32(tb)
    eq = ~(((x & np.uint32(0x7F7F7F7F)) + np.uint32(0x7F7F7F7F)) | x) & np.uint32(0x80808080)
    return (eq != 0).astype(np.uint32)


def _keep16(n, seed, offset, t8, frac):
    """philox.cuh's keep16 of blocks n (uint64 array): the 16 keep bits (bit e: counter
    16 n + e) as uint32, the ties decided by refine4's blocks 2**63 | 4 n + q."""
    u = _philox(n, seed, offset)  # (..., 4)
    b = u[..., :, None] >> (8 * np.arange(4, dtype=np.uint32)) & np.uint32(0xFF)  # (..., 4 q, 4 e)
    keep = b > t8
    if frac:
        r = _philox((np.uint64(1 << 63) | (n[..., None] << np.uint64(2))) + np.arange(4, dtype=np.uint64),
                    seed, offset)  # (..., 4 q, 4 k): word k of block 2**63 | 4 n + q
        keep |= (b == t8) & (r >= np.uint32(frac))
    else:
        keep |= b == t8
    return (keep.reshape(keep.shape[:-2] + (16,)).astype(np.uint32)
            << np.arange(16, dtype=np.uint32)).sum(axis=-1, dtype=np.uint32)


SEL = (0x5410, 0x7632)  # keep_bytes' __byte_perm selectors (pinned)


def _dropout_warpgroup(kwords, t, t_begin, bh, sq, sk, i0, bn, seed, offset, threshold,
                       sel=SEL, tie_addr=None):
    """The dropout warpgroup's tile t into its keep stage of ``kwords`` (uint32, KEEP_STAGES
    NV THREADS words, little-endian as shared memory): every thread x at once for the
    Philox bytes, keep_bytes' refinement loop thread by thread. Returns the ties met (by
    keep_bytes: kept, dropped) and the words written (each once: asserted)."""
    nt = bn // 8
    np_, nv = nt // 2, nt
    t8, frac = threshold >> 32, threshold & U32
    kbytes = kwords.view(np.uint8)
    written = np.zeros(kwords.shape, np.int64)
    x = np.arange(KEEP_THREADS)
    hr = x & 1
    rowc = (np.uint64(bh * sq) + (i0 + 16 * (x >> 4) + ((x >> 1) & 7) + 8 * hr).astype(
        np.uint64)) * np.uint64(sk)
    dst = hr * np_ * THREADS + 2 * (x & ~1)
    n = t - t_begin
    st = n % KEEP_STAGES
    d = dst + st * nv * THREADS
    c0 = rowc + np.uint64(t * bn)
    kept = dropped = 0
    if sk & 15 == 0:  # keep_bytes<NT>
        assert not (c0 & np.uint64(15)).any()
        tb = t8 * 0x01010101
        runs = np.zeros(KEEP_THREADS, np.uint32)
        for p in range(np_):
            u = _philox((c0 >> np.uint64(4)) + np.uint64(p), seed, offset)
            ux, uy, uz, uw = u.T
            runs |= (_has_byte(ux, tb) | _has_byte(uy, tb) << 1 | _has_byte(uz, tb) << 2
                     | _has_byte(uw, tb) << 3) << np.uint32(4 * p)
            o = (_byte_perm(ux, uz, sel[0]), _byte_perm(ux, uz, sel[1]),
                 _byte_perm(uy, uw, sel[0]), _byte_perm(uy, uw, sel[1]))
            for e in range(4):  # the uint4 store at d + p THREADS
                kwords[d + p * THREADS + e] = o[e]
                written[d + p * THREADS + e] += 1
        if frac != 0 or t8 == 0:
            for xi in range(KEEP_THREADS):  # the refinement loop, a thread at a time
                rr = int(runs[xi])
                while rr:
                    r = (rr & -rr).bit_length() - 1  # __ffs(runs) - 1
                    rr &= rr - 1
                    p, q = r >> 2, r & 3
                    w = _philox(np.uint64((1 << 63) | ((int(c0[xi]) >> 2) + r)), seed, offset)
                    for k in range(4):
                        word = int(d[xi]) + p * THREADS + 2 * (q & 1) + (k >> 1)
                        a = 4 * word + 2 * (q >> 1) + (k & 1)
                        if tie_addr is not None:
                            a = tie_addr(int(d[xi]), p, q, k)
                        if kbytes[a] == t8:
                            keep = int(w[k]) >= frac
                            kept, dropped = kept + keep, dropped + (not keep)
                            if (not keep) if t8 else keep:
                                kbytes[a] = t8 - 1 if t8 else 1
        else:  # every tie keeps, its byte untouched: count them for the callers
            for p in range(np_):
                wd = kwords[d[:, None] + p * THREADS + np.arange(4)]
                kept += int((wd[..., None] >> (8 * np.arange(4, dtype=np.uint32)) & 0xFF
                             == t8).sum())
    else:  # keep_bytes_any<NT>
        o = (c0 & np.uint64(15)).astype(np.uint32)
        blk = c0 >> np.uint64(4)
        k16 = [_keep16(blk + np.uint64(p), seed, offset, t8, frac) for p in range(np_ + 1)]
        lo = k16[0]
        for p in range(np_):
            hi = k16[p + 1] if p + 1 < np_ else np.where(o != 0, k16[p + 1], np.uint32(0))
            bits = ((lo.astype(np.uint64) | hi.astype(np.uint64) << np.uint64(16))
                    >> o.astype(np.uint64)) & np.uint64(0xFFFF)
            lo = hi
            for tq in range(4):
                word = np.zeros(KEEP_THREADS, np.uint64)
                for y in range(4):  # byte y = 2 s + x: column 8 s + 2 tq + x
                    word |= ((bits >> np.uint64(8 * (y >> 1) + 2 * tq + (y & 1))) & np.uint64(1)) \
                        * np.uint64(0xFF << (8 * y))
                kwords[d + p * THREADS + tq] = word.astype(np.uint32)
                written[d + p * THREADS + tq] += 1
    # each word of the stage once, no word of another stage
    stage = np.zeros(kwords.shape, bool)
    stage[st * nv * THREADS:(st + 1) * nv * THREADS] = True
    assert (written[stage] == 1).all() and (written[~stage] == 0).all()
    return kept, dropped


def _softmax_warpgroups(kwords, t, t_begin, bn, threshold):
    """Every softmax thread's ByteKeeps of tile t from its keep stage: the decisions at
    each (row, column) of the 128 x BN tile (each element decided by one thread, once)."""
    nt = bn // 8
    np_, nv = nt // 2, nt
    st = (t - t_begin) % KEEP_STAGES
    t8 = threshold >> 32
    kb = t8 if t8 else 1  # keep_byte
    kb24 = np.uint32(kb << 24)
    th = np.arange(THREADS)
    warp, lane = th // 32, th % 32
    g, tq = lane >> 2, lane & 3
    dec = np.full((128, bn), -1, np.int64)
    for h in range(2):
        row = [kwords[(st * nv + h * np_ + p) * THREADS + th] for p in range(np_)]  # Row
        for b in range(nt):
            x = row[b >> 1]
            s = b & 1
            k0 = (x << np.uint32(24 - 16 * s)) >= kb24  # uint32: the high bits fall off
            k1 = (x << np.uint32(16 - 16 * s)) >= kb24
            for e, k in enumerate((k0, k1)):
                i, j = 16 * warp + g + 8 * h, 8 * b + 2 * tq + e
                assert (dec[i, j] == -1).all()
                dec[i, j] = k
    assert (dec >= 0).all()
    return dec.astype(bool)


def _tile_check(bh, sq, sk, i0, t, bn, dropout_p, t_begin=0, seed=0x9E3779B97F4A7C15,
                offset=0x0123456789ABCDEF, **mutant):
    """The consumer's decisions of tile (i0, t) against keep_block: every element of the
    128 x BN tile (rows or columns past Sq or Sk too: their counters are the contract's
    all the same). Returns (mismatches, kept ties, dropped ties)."""
    threshold = dropout_keep_threshold(dropout_p)
    kwords = np.full(KEEP_STAGES * bn // 8 * THREADS, 0xA5A5A5A5, dtype="<u4")
    kept, dropped = _dropout_warpgroup(kwords, t, t_begin, bh, sq, sk, i0, bn, seed, offset,
                                       threshold, **mutant)
    got = _softmax_warpgroups(kwords, t, t_begin, bn, threshold)
    want = philox.keep_block(seed, offset, threshold, sq, sk, bh, i0, i0 + 128, t * bn,
                             (t + 1) * bn)
    return int((got != want).sum()), kept, dropped


P_CASES = [1e-3, 0.1, 0.5, 0.999]  # t8 0; t8 25, frac != 0; frac 0; t8 255


@pytest.mark.parametrize("p", P_CASES)
@pytest.mark.parametrize("bn", [64, 128])
@pytest.mark.parametrize("sk, t", [(512, 1), (1024, 6), (16 * 37, 3)])  # Sk % 16 == 0
def test_keep_bytes_are_the_contracts_decisions(sk, t, bn, p):
    """keep_bytes (aligned rows: the Philox bytes, ties rewritten) and ByteKeeps: the
    second row block, a later key tile (j0 > 0), t_begin 0 (both keep stages)."""
    bad, kept, dropped = _tile_check(3, 300, sk, 128, t, bn, p)
    assert bad == 0
    assert kept + dropped > 0  # ties met
    if p == 0.1:
        assert kept > 0 and dropped > 0  # decided both ways by their refinement words


@pytest.mark.parametrize("p", P_CASES)
@pytest.mark.parametrize("bn", [64, 128])
@pytest.mark.parametrize("sk, t", [(250, 1), (1000, 2), (77, 0), (4104, 5), (136, 1)])
def test_keep_bytes_any_are_the_contracts_decisions(sk, t, bn, p):
    """keep_bytes_any (Sk % 16 != 0: rows start anywhere in a block; 0xFF / 0x00)."""
    bad, _, _ = _tile_check(2, 200, sk, 64, t, bn, p, t_begin=t % 2)
    assert bad == 0


@pytest.mark.parametrize("p", P_CASES)
@pytest.mark.parametrize("sk", [4096, 4100])
def test_keep_bytes_past_2_to_the_36(sk, p):
    """Counters across 2**36 (block indices across 2**32, the counter's high word): the
    tile's rows straddle it (Sk 4096), or one row does inside the tile (Sk 4100)."""
    bn = 128
    i0 = (1 << 36) // sk - 60
    row, col = divmod(1 << 36, sk)  # counter 2**36 is element (row, col)
    t = col // bn if sk % 16 else 3
    bad, _, _ = _tile_check(0, i0 + 1000, sk, i0, t, bn, p, t_begin=1)
    assert i0 <= row < i0 + 128
    assert bad == 0


def test_keep_bytes_ties_occur():
    """The ties at p = 0.1 (t8 25, frac != 0): about one element in 256, the refinement
    loop's work, met and decided both ways in a 128 x 128 tile."""
    bad, kept, dropped = _tile_check(1, 1000, 1024, 256, 2, 128, 0.1)
    assert bad == 0 and kept + dropped >= 20 and kept > 0 and dropped > 0


@pytest.mark.parametrize("p", [1e-13])  # 0 < p < 2**-40: threshold 0 (t8 0, frac 0)
def test_keep_bytes_at_threshold_zero(p):
    """Every element keeps (the contract: b 2**32 + r >= 0; keep_block gives all True):
    keep_bytes' early return for frac == 0 is for t8 >= 1 alone, so a byte 0 (one element
    in 256) is rewritten to keep_byte(key) = 1 by the refinement loop."""
    assert dropout_keep_threshold(p) == 0
    assert _tile_check(3, 300, 500, 128, 1, 128, p)[0] == 0  # Sk % 16 != 0: fine
    assert _tile_check(3, 300, 512, 128, 1, 128, p)[0] == 0  # Sk % 16 == 0


@pytest.mark.parametrize("mutant", [
    {"sel": (0x7632, 0x5410)},  # tq 0 and 1 swapped
    {"sel": (0x5140, 0x7362)},  # s and x swapped in a word
    {"tie_addr": lambda d, p, q, k: 4 * (d + p * THREADS + 2 * (q & 1) + (k & 1))
     + 2 * (q >> 1) + (k >> 1)},  # the tie's column misplaced
])
def test_the_keep_bytes_model_catches_a_wrong_layout(mutant):
    """The check fails a kernel whose bytes land at other columns than ByteKeeps reads."""
    bad, _, _ = _tile_check(1, 1000, 1024, 256, 2, 128, 0.1, **mutant)
    assert bad > 0


def _keep_ring(t_count, stages, wrong=False):
    """The keep ring's steps: the dropout warpgroup's (agent 2) and each softmax
    warpgroup's (agents 0, 1), in the kernel's order."""
    producer, consumer = [], []
    for n in range(t_count):
        st = n % stages
        if n >= stages:
            producer.append(("wait", "empty", st, (n // stages - 1 + wrong) & 1))
        producer += [("write", None, st, n), ("arrive", "full", st, n)]
        consumer += [("wait", "full", st, (n // stages) & 1), ("read", None, st, n),
                     ("arrive", "empty", st, n)]
    return [consumer, consumer, producer]


def _run_ring(progs, stages, rng):
    full = [Barrier(1) for _ in range(stages)]  # one arrival an agent (a warpgroup)
    empty = [Barrier(2) for _ in range(stages)]
    bars = {"full": full, "empty": empty}
    held, reads = {}, {}  # stage -> the tile its words are for, softmax reads of them
    pcs = [0] * len(progs)
    while any(pc < len(p) for pc, p in zip(pcs, progs)):
        ready = [a for a, p in enumerate(progs) if pcs[a] < len(p)
                 and (p[pcs[a]][0] != "wait" or bars[p[pcs[a]][1]][p[pcs[a]][2]].done(
                     p[pcs[a]][3]))]
        assert ready, "deadlock"
        a = ready[int(rng.integers(len(ready)))]
        op, kind, st, x = progs[a][pcs[a]]
        if op == "write":
            assert st not in held or reads[st] == 2, (st, held.get(st), x)
            held[st], reads[st] = x, 0
        elif op == "read":
            assert held.get(st) == x, (st, held.get(st), x)
            reads[st] += 1
        elif op == "arrive":
            bars[kind][st].arrive()
        pcs[a] += 1


@pytest.mark.parametrize("t_count", [1, 3, 4, 5, 9, 16])
def test_keep_ring_never_deadlocks_nor_races(t_count):
    rng = np.random.default_rng(t_count)
    for _ in range(300):
        _run_ring(_keep_ring(t_count, 4), 4, rng)


def test_the_keep_ring_model_catches_a_wrong_parity():
    rng = np.random.default_rng(0)
    with pytest.raises(AssertionError):
        for _ in range(300):
            _run_ring(_keep_ring(12, 4, wrong=True), 4, rng)
