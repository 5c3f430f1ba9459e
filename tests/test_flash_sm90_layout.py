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
- the dropout warpgroup: the keep words it makes (``keep_words``, from the Philox blocks
  of the NumPy backend), decoded as a softmax thread decodes them (``WordKeeps``), are
  the CPU's mask at every element of the thread's C layout, Sk % 4 zero or not; and its
  ring of keep stages, run against both softmax warpgroups, neither deadlocks nor lets
  a word be overwritten before both read it.
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from tessera_array.backends.numpy import philox
from test_flash_lanes import _normal  # comments dropped, whitespace folded

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
    # the keep words: the dropout warpgroup's rows, runs and bits, a softmax thread's read
    "const int r0 = i0 + 16 * (x >> 4) + ((x >> 1) & 7), hq = x & 1;",
    "unsigned *dst = kwords + 2 * x * NW;",
    "(unsigned long long)(j0 + 64 * v + 4 * hq);",
    "const unsigned k4 = keep_run4<AL4>(c0 + 8 * b, key);",
    "const int sh = 4 * b + 2 * hr;",
    "w[0][v] |= (k4 & 3u) << sh;",
    "w[1][v] |= ((k4 >> 2) & 3u) << sh;",
    "return ((lo | keep_bits4(c + 4, key) << 4) >> r) & 0xFu;",
    "for (int v = 0; v < NW; ++v) dst[st * NW * THREADS + e * NW + v] = w[e][v];",
    "keep.w[v] = kwords[st * NW * THREADS + threadIdx.x * NW + v];",
    "const unsigned x = w[b >> 3] >> (4 * (b & 7));",
    "for (int v = 0; v < NT / 8; ++v) r.w[v] = w[v] >> (2 * h);",
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


def _bits4(c, seed, offset, threshold):
    """keep_bits4: bit w set where word w of Philox block c >> 2 is >= threshold."""
    u = philox._blocks(np.array([c >> 2], dtype=np.uint64), 1, offset, seed)[0]
    return sum(1 << w for w in range(4) if int(u[w]) >= threshold)


def _run4(c, seed, offset, threshold):
    """keep_run4<false>: the keep bits of counters c .. c + 3, for any c."""
    lo = _bits4(c, seed, offset, threshold)
    r = c & 3
    if r == 0:
        return lo
    return ((lo | _bits4(c + 4, seed, offset, threshold) << 4) >> r) & 0xF


def _keep_words(x, bh, sq, sk, i0, j0, nt, seed, offset, threshold):
    """keep_words of dropout thread x: {softmax thread: its NT / 8 words}."""
    r0 = i0 + 16 * (x >> 4) + ((x >> 1) & 7)
    hq = x & 1
    w = [[0] * (nt // 8) for _ in range(2)]
    for v in range(nt // 8):
        for hr in range(2):
            c0 = (bh * sq + r0 + 8 * hr) * sk + j0 + 64 * v + 4 * hq
            for b in range(8):
                k4 = _run4(c0 + 8 * b, seed, offset, threshold)
                sh = 4 * b + 2 * hr
                w[0][v] |= (k4 & 3) << sh
                w[1][v] |= ((k4 >> 2) & 3) << sh
    return {2 * x: w[0], 2 * x + 1: w[1]}


@pytest.mark.parametrize("sk", [256, 250])  # Sk % 4 == 0 and not (keep_run4's two paths)
def test_keep_words_decode_to_the_cpu_mask(sk):
    seed, offset, threshold = 0x9E3779B97F4A7C15, 12345, int(0.3 * 2**32)
    bh, sq, i0, j0, nt = 1, 300, 128, 128, 16  # the second row block, the second key tile
    mask = philox.dropout_mask((2, sq, sk), seed, offset, threshold)[bh]
    words = {}
    for x in range(KEEP_THREADS):
        words.update(_keep_words(x, bh, sq, sk, i0, j0, nt, seed, offset, threshold))
    assert sorted(words) == list(range(THREADS))  # each softmax thread's words, once
    checked = 0
    for t, w in words.items():  # WordKeeps, as softmax thread t reads its elements
        warp, lane = t // 32, t % 32
        g, tq = lane >> 2, lane & 3
        for h in range(2):
            row = [v >> (2 * h) for v in w]
            for b in range(nt):
                bits = row[b >> 3] >> (4 * (b & 7))
                for e in range(2):
                    i, j = i0 + 16 * warp + g + 8 * h, j0 + 8 * b + 2 * tq + e
                    if j < sk:
                        assert bool(bits >> e & 1) == mask[i, j], (t, h, b, e)
                        checked += 1
    assert checked == 128 * min(128, sk - j0)


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
