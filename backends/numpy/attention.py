"""Attention kernels of the NumPy backend: FlashAttention-2, tiled, on BLAS.

``attention_fwd`` and ``attention_bwd`` are the launchers of the ``attention``
family (the contract every backend implements is in
:mod:`tessera_array.nn._attention`). Both walk the score matrix
``S = scale * Q K^T`` of each (batch, head) in tiles and hold at most a few tiles
per thread, so memory grows as O(S*D), never O(S^2).

Forward (Dao 2023, FlashAttention-2, Algorithm 1, in the paper's notation): a work
item is a block of ``BLOCK_Q`` query rows ``Q_i`` of one head; it keeps the running
row maximum ``m``, the running sum ``l`` of ``exp(S - m)`` and the unnormalised
output ``O``, and for each key block ``K_j, V_j`` of ``BLOCK_K`` keys::

    S  = (scale Q_i) K_j^T  (+ additive mask; -inf where masked)
    m' = max(m, rowmax(S));  P = exp(S - m');  a = exp(m - m')
    l  = a l + rowsum(P)                              (the undropped sum)
    O  = a O + (P * keep / (1 - p)) V_j               (dropout: keep from Philox)

then ``O / l`` and ``lse = m + log(l)``. Folded shift (``FOLD``, items with more than
one key tile): Q carries an extra column ``-c`` and K^T an extra row of ones, so the
first product yields ``S - c`` directly, ``c`` being the row's running max once finite
(0 before); a lazy tile then goes product -> exp in place -> product, with no
subtraction pass. Lazy rescaling: after a row's first tile,
``m`` is kept (no rowmax pass, ``a = 1``, no rescaling of ``l`` and ``O``) for any
tile whose scores cannot exceed it by more than ``RESCALE_SLACK``, by the bound
``|s_ij| <= |scale q_i| |k_j|``; ``exp(S - m)`` then stays below ``e**20``. The
result is the same softmax (``lse = m + log(l)`` holds for any shift ``m``); an
additive mask turns it off (it could raise scores past the bound). Backward (Algorithm 2): a work item is a
head; for each key block (outer loop) and query block (inner), ``P = exp(S -
lse)`` is rebuilt from the saved log-sum-exp, with ``delta = rowsum(dO * O)``::

    dV_j += Pd^T dO_i;  dP = (dO_i V_j^T) * keep / (1 - p);  dS = P * (dP - delta)
    dQ_i += dS K_j;  dK_j += dS^T (scale Q_i);  dQ *= scale at the end

dQ of a head accumulates in one O(S*D) buffer owned by its item, so no two threads
write the same element (no atomics) and every sum runs in a fixed order: the same
inputs give the same bits on every run, whatever the thread count or timing.

Precision: tiles are float32 for float16/bfloat16/float32 inputs and float64 for
float64 (inputs upcast per item: K^T and V once, Q per block); the output has the
input dtype, the log-sum-exp the accumulation dtype. Fully masked rows give
output 0, lse -inf and zero gradients (torch 2.13's CPU SDPA does the same).

Masking: key tiles outside a query block's causal/window band are skipped, and
within a tile only the rows that see some of its keys are computed; a tile that
crosses the band's edge gets a cached bool tile (``_hidden_tile``). Dropout keep
decisions come per tile from :func:`tessera_array.backends.numpy.philox.keep_block`,
a pure function of (seed, offset, bh, i, j): independent of tiling and threads.

Threads: items run on a pool of one thread per usable core (at most ``MAX_THREADS``); NumPy
releases the GIL in matmul and in the ufuncs. OpenBLAS's own thread pool must not
fight this one (letting it thread a 512x1024x64 product from two pool threads on a
busy 2-core machine measured 5-10x slower; threading the forward's 1024x128x64
products from the calling thread alone, 4-12x slower). The forward and the backward
hold OpenBLAS to one thread for the call (:class:`_blas_one_thread`: NumPy's bundled
pthreads OpenBLAS, found by ctypes; process-wide, restored when the last holder
exits) and then make each product one BLAS call. Without the hold (another BLAS)
every product goes through :func:`_mm` cut into batched calls of at most
``GEMM_MAX`` multiply-adds, which OpenBLAS runs on the calling thread. The backward
with the hold against its cut products, 2-core EPYC, two threads, medians of 5 in
one process: full 521 -> 337 ms, causal 315 -> 217 (torch SDPA's backward: 262 / 176).

Measurements (fp32, B=4 H=8 S=1024 D=64, ms, 2026-11-30). The 2-core EPYC (512 KiB
L2 per core) is shared and was busy: single-thread CPU time, best of 4, against torch
SDPA on one thread (162 ms full, 122 ms causal); the Xeon of the device host, quiet,
2 cores by taskset, wall time, median of 7, before lazy rescaling and the choice of
the rows a tile computes (torch SDPA: 55.4 / 42.2 ms)::

    forward BLOCK_Q x BLOCK_K   1024x128 1024x64 1024x256 512x128 512x64 2048x64 256x256
    EPYC  full                   226-263 247-254  235-360 258-297 290-308 243-256   363
          causal                 153-159 161-171  172-175 164-171 190-193 164-179   190
    Xeon  full                       138     175      113     161       -       -   162
          causal                     105     133       86     111       -       -   118

The tile that wins is the largest whose score block (BLOCK_Q x BLOCK_K float32) fits
the L2 cache: 512 KiB on the EPYC (1024x256, 1 MiB, loses there; it wins on the
Xeon's larger L2). Where a tile spills, every pass over it (max, subtract, exp,
sum) runs at L3 speed.

    backward BLOCK_Q_BWD x BLOCK_K_BWD    256x256 128x256 256x128 512x256 128x128
    EPYC  full (torch 1 thread: 422)          571     670     705     623     699
          causal (285)                        353     370     354     380     386
    Xeon  full (torch: 141)                   236     267     274     215     418
          causal (112)                        167     185     176     154     249

``PARALLEL_MIN``: on the busy EPYC the pool paid off from about 1M scores
(4 heads x 512^2: 10.6 ms pooled against 11.6 ms on the calling thread; 8 x 256^2:
7.3 against 6.3).

Forward speed work for issue 5's target (tessera / torch SDPA <= 1.5, fp32 B=4 H=8
S=1024 D=64), 2026-11-30, on the shared 2-core EPYC (load 1-3.5 from other users).
Ratios: medians of paired rounds (each version and torch timed back to back in one
process, /tmp scripts calling attention_fwd and F.scaled_dot_product_attention);
``1c`` = ``taskset -c 0`` (torch on 1 thread), CPU time, 11 rounds; ``2c`` = both
cores, wall time, 9 rounds. One column = one run; runs of the same code spread by
about +-0.1 with the load. Predictions were written before measuring::

    version                                  predicted   full 1c  2c   causal 1c  2c
    v0  as committed (products cut to GEMM_MAX)  -          2.06  2.21      1.80  1.98
    v1  v0 + folded shift (-m column in Q)    -5%        1.98  2.09      1.77  1.96
        (with 31-row cuts, k = 65: 2.37 full 1c against 2.06: cuts now whole 8 rows)
    v2  v0 + one BLAS call per product,       -13% (GEMM  1.62  1.83      1.53  1.68
        OpenBLAS held to one thread           time -25%)
    v3  v2 + folded shift (shipped)           -5%        1.68  1.70      1.42  1.68
        (three more 1c runs of v2 -> v3: 1.71 -> 1.64 / 1.50 -> 1.45,
        1.81 -> 1.74 / 1.52 -> 1.49; 2c 1.83 -> 1.70 / 1.68 -> 1.68)
    last run, same process: v0                           1.86  2.03      1.69  1.82
                            v3                           1.47  1.77      1.37  1.55

The suite (``python -m benchmarks --suite attention --filter "fwd_vs_torch[full]"``,
and ``[causal]``; ``taskset -c 0`` for 1c), v3, six 2c and two 1c runs: full 2c
1.61-1.95, 1c 1.56-1.67; causal 2c 1.46-1.86, 1c 1.45-1.50 (v0: 2.33 full 2c, one run).

v2 beat its prediction: cut products ran at 45-55 GFLOP/s against 68-74 in one
call (OpenBLAS's per-call cost, about 3 us, on 7 us of work) and each cut product
also allocated its output. v3 missed its: the subtract pass it removes is 34 us of a
700-900 us tile (4-5%), but the first product gets an odd depth (65) and each item
builds Q' and K'^T with the extra column; the net, about 3%, is below the noise.
With the machine this loaded one pool thread does as well as two (calling thread
only: 292 ms, pool: 319 ms; torch on 2 threads 180 ms, on 1: 171).

What each cost (1 thread, one 1024x128 tile, D=64): each product 225-240 us
(68-74 GFLOP/s; cut into 32-row calls 45-55 GFLOP/s: OpenBLAS's per-call cost,
about 3 us, on 7 us of work), exp 190-340 us (float32 np.exp, AVX2 loop: 1.5-2.6
ns/element here), subtract 34 us, row sum 16 us, O += 10 us. So the 8.6 GFLOP of
the two products take >= 116 ms and exp >= 84 ms of a forward that torch does in
150-175 ms on one thread: a floor of about 1.2 for this design. Tried and dropped:
np.exp2 with log2(e) folded into the scale (2x slower: NumPy has no SIMD float32
exp2 loop); tiles of 256-512 rows (slower) and of 256 keys (no clear difference);
Q padded to 72 columns or the products transposed (no gain); the ones column of V
for l (0-4%, within noise, and with dropout l must be the undropped sum while the
product sums the dropped P: lse would then round differently with and without
dropout, which tests/test_attention.py forbids).
"""

from __future__ import annotations

import os

import numpy as np
from numpy.lib.stride_tricks import as_strided

from tessera_array import _dtypes

from . import _threads as _blas

__all__ = ["attention_bwd", "attention_fwd", "register"]

BLOCK_Q = 1024  # forward: query rows per work item
# Forward keys per tile: None picks by the threads that share the work
# (BLOCK_K_BY_THREADS); an int (the tests' small tiles) is used as it is.
BLOCK_K = None
# (fewest threads, keys per tile), first match. Every tile costs ~10 NumPy calls, each
# taking the GIL back, so with many threads the calls, not the arithmetic, set the pace
# and larger tiles win; with one or two threads the tile whose scores fit the L2 cache
# wins. Forward fp32 B=4 H=8 S=1024 D=64, ms, medians of 7, 2026-11-30 (.devrun-style
# A/B in one process: keys per tile 128 / 256 / 512; torch SDPA alongside):
#
#   threads                   1            2            4           8           16
#   Xeon full   128/256/512   119/116/125  85/94/79     47/42/41    40/32/29    50/41/31
#               torch         79           54           39          13          16
#   Xeon causal 128/256/512   81/87/107    52/52/61     36/31/34    40/28/24    58/40/29
#               torch         59           34           18          12          8
#   EPYC 2-core full          -            166/155/169  (causal 112/119/142)
#
# (Xeon: the H200 host's 16 logical CPUs; EPYC: the shared 2-core VM.) Larger tiles lose
# on the causal diagonal at few threads: a tile that crosses it computes its hidden half.
BLOCK_K_BY_THREADS = ((5, 512), (3, 256), (1, 128))
BLOCK_Q_BWD = 256  # backward: query rows per tile
BLOCK_K_BWD = 256  # backward: keys per tile
# Problems with fewer score elements (Sq*Sk summed over heads) run on the calling
# thread: below it a pool hand-off costs more than it saves.
PARALLEL_MIN = 1 << 20
# The most multiply-adds (M*N*K) of one BLAS call where OpenBLAS is not held to one
# thread (the backward; a BLAS other than NumPy's OpenBLAS): OpenBLAS runs a GEMM this
# small on the calling thread (its GEMM_MULTITHREAD_THRESHOLD, 4 * 65536; 64x64x64
# measured single-threaded, 64x128x64 not). See _mm and _run_items.
GEMM_MAX = 1 << 18
# Lazy rescaling (forward): the running max is raised only when a tile's scores could
# exceed it by more than this (natural-log units; e**20 = 4.9e8, far from overflow).
RESCALE_SLACK = 20.0
# Forward: fold the shift by the running max into the first product (see the module
# docstring); False: a separate subtraction pass (kept for the tests' comparison).
FOLD = True
# Forward: hold OpenBLAS to one thread for the call (PIN_BLAS) and then make each
# product one BLAS call (BIG_GEMM) instead of cuts of GEMM_MAX.
PIN_BLAS = True
BIG_GEMM = True
# The most pool threads. The tile loops make ~10 NumPy calls per tile, each taking the
# GIL back; past about 8 threads the GIL, not the cores, sets the pace. H200 host Xeon
# (16 logical CPUs), fp32 B=4 H=8 S=1024 D=64, ms, medians, 2026-11-30:
#   threads                 4      8      16
#   forward full / causal   47/39  31/29  35/33  (torch SDPA: 28/26  19/14  12/8)
#   backward full / causal  154/90 145/94 277/158 (torch: 71/55  49/40  35/27)
MAX_THREADS = 8
_POOL = None

# Test hook: every output buffer is allocated here (tests poison it with NaN to
# prove that the kernels write every element).
_alloc = np.empty


def _threads() -> int:
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count() or 1
    return max(1, min(usable, MAX_THREADS))


def _pool():
    global _POOL
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        _POOL = ThreadPoolExecutor(_threads(), thread_name_prefix="tessera-attention")
    return _POOL


def _mm(a, b, gmax=None, buf=None):
    """``a @ b`` (2-D) in BLAS calls of at most ``gmax`` multiply-adds each.

    ``gmax`` None: ``GEMM_MAX``; 0: one call. The rows of ``a`` are cut into chunks
    of ``r`` rows and multiplied in one batched ``np.matmul`` (a strided view of
    ``a``, no copy; any strides). ``buf``: a flat scratch array the result may
    occupy (its first ``m * n`` elements), instead of a new one.
    """
    m, k = a.shape
    n = b.shape[1]
    if gmax is None:
        gmax = GEMM_MAX
    if buf is None:
        if not gmax or m * n * k <= gmax:
            return a @ b
        out = np.empty((m, n), dtype=np.result_type(a.dtype, b.dtype))
    else:
        out = buf[: m * n].reshape(m, n)
        if not gmax or m * n * k <= gmax:
            return np.matmul(a, b, out=out)
    r = max(1, gmax // (n * k))
    if r > 8:
        r -= r % 8  # whole 8-row blocks (k = 65 would give 31 rows and a ragged block)
    c = m // r
    if c:
        s0, s1 = a.strides
        a3 = as_strided(a, (c, r, k), (r * s0, s0, s1), writeable=False)
        np.matmul(a3, b, out=out[: c * r].reshape(c, r, n))
    if c * r < m:
        np.matmul(a[c * r:], b, out=out[c * r:])
    return out


def _run(fn, items, work: int) -> None:
    """``fn(item)`` for every item, on the pool when ``work`` is large; errors propagate."""
    if work < PARALLEL_MIN or len(items) < 2 or _threads() < 2:
        for it in items:
            fn(it)
        return
    for _ in _pool().map(fn, items):
        pass


def _pooled(items, work: int) -> bool:
    return work >= PARALLEL_MIN and len(items) >= 2 and _threads() >= 2


def _run_items(fn, items, pooled: bool, big: bool = True) -> None:
    """``fn(item, gmax)`` for every item; on the pool when ``pooled``.

    OpenBLAS is held to one thread for the call (:func:`_blas_one_thread`) and each
    product is then one BLAS call (``gmax`` 0); where it cannot be held, products
    are cut to ``GEMM_MAX`` (see :func:`_mm`). The hold is wanted (``big``) only when
    some product exceeds ``GEMM_MAX``. Even on the calling thread alone the hold
    matters: letting OpenBLAS thread the 1024x128x64 products on the busy 2-core
    machine measured 4-12x slower than the held pool.
    """
    with _blas_one_thread(big) as one:
        gmax = 0 if one and BIG_GEMM else None
        if not pooled:
            for it in items:
                fn(it, gmax)
            return
        for _ in _pool().map(fn, items, [gmax] * len(items)):
            pass


# OpenBLAS's thread count, held at 1 while a forward runs: backends/numpy/_threads.py.
_blas_api = _blas.blas_api


def _blas_one_thread(wanted: bool = True):
    """The process-wide hold of OpenBLAS at one thread (``_threads.blas_one_thread``),
    taken only when ``wanted`` and :data:`PIN_BLAS`."""
    return _blas.blas_one_thread(PIN_BLAS and wanted)


def _block_k(threads: int) -> int:
    """Keys per forward tile for ``threads`` threads sharing the work (:data:`BLOCK_K`)."""
    if BLOCK_K:
        return BLOCK_K
    return next(b for t, b in BLOCK_K_BY_THREADS if threads >= t)


def _acc_dtype(dt: np.dtype) -> np.dtype:
    return np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)


class _Band:
    """Which keys each query sees under causal/window masking.

    Query ``i`` sees key ``j`` when ``lo <= j - i <= hi`` (``None``: unbounded).
    """

    __slots__ = ("hi", "lo")

    def __init__(self, causal, window, sq: int, sk: int):
        shift = sk - sq if causal == "bottom_right" else 0
        left, right = window if window is not None else (None, None)
        if causal is not None:
            right = 0 if right is None else min(right, 0)
        self.lo = None if left is None else shift - left
        self.hi = None if right is None else shift + right

    def keys(self, i0: int, i1: int, sk: int):
        """The key range ``[j0, j1)`` any of the queries ``[i0, i1)`` can see."""
        j0 = 0 if self.lo is None else max(0, i0 + self.lo)
        j1 = sk if self.hi is None else min(sk, i1 - 1 + self.hi + 1)
        return j0, j1

    def queries(self, j0: int, j1: int, sq: int):
        """The query range ``[i0, i1)`` that can see any of the keys ``[j0, j1)``."""
        i0 = 0 if self.hi is None else max(0, j0 - self.hi)
        i1 = sq if self.lo is None else min(sq, j1 - 1 - self.lo + 1)
        return i0, i1

    def hidden(self, i0: int, i1: int, j0: int, j1: int):
        """None when every (i, j) of the tile is visible, else ``(r0, t)``: the tile's rows
        from ``r0`` on that hold hidden entries and the bool tile ``t`` of those rows
        (True = hidden). A causal tile crossing the diagonal has them only in its first
        ``j1 - j0`` rows: only those are masked."""
        lo, hi = self.lo, self.hi
        if (hi is None or j1 - 1 - i0 <= hi) and (lo is None or j0 - (i1 - 1) >= lo):
            return None
        # In tile coordinates (r, c) = (i - i0, j - j0): hidden when c - r > hi - (j0 - i0)
        # or c - r < lo - (j0 - i0). Row r holds some when r < m - 1 - (hi - shift) (the
        # upper side) or r > -(lo - shift) (the lower side).
        n, m, shift = i1 - i0, j1 - j0, j0 - i0
        hi_t = None if hi is None else hi - shift
        lo_t = None if lo is None else lo - shift
        r0, r1 = n, 0
        if hi_t is not None and m - 1 - hi_t > 0:
            r0, r1 = 0, min(n, m - 1 - hi_t)
        if lo_t is not None and -lo_t + 1 < n:
            r0, r1 = min(r0, max(0, -lo_t + 1)), n
        return r0, _hidden_tile(r1 - r0, m, None if hi_t is None else hi_t + r0,
                                None if lo_t is None else lo_t + r0)


_TILES: dict = {}


def _hidden_tile(n: int, m: int, hi, lo):
    """Cached read-only bool (n, m) tile: True where ``c - r > hi`` or ``c - r < lo``."""
    key = (n, m, hi, lo)
    t = _TILES.get(key)
    if t is None:
        t = ~np.tri(n, m, hi, dtype=bool) if hi is not None else np.zeros((n, m), dtype=bool)
        if lo is not None:
            t |= np.tri(n, m, lo - 1, dtype=bool)
        t.flags.writeable = False
        if len(_TILES) >= 64:
            _TILES.clear()
        _TILES[key] = t
    return t


def _keep_scaled(dropout, sq, sk, bh, i0, i1, j0, j1, acc):
    """The dropout factor tile: ``keep / (1 - p)`` in ``acc`` (0 where dropped)."""
    from .philox import keep_block

    p, seed, offset, threshold = dropout
    keep = keep_block(seed, offset, threshold, sq, sk, bh, i0, i1, j0, j1)
    return np.where(keep, acc.type(1.0 / (1.0 - p)), acc.type(0.0))


def _mask_tile(s, mask, i0, i1, j0, j1, hidden):
    """Apply the user mask and the band's hidden tile to the score tile ``s`` in place."""
    if mask is not None:
        mt = mask[i0:i1, j0:j1]
        if mt.dtype == np.bool_:
            np.copyto(s, -np.inf, where=~mt)
        else:
            s += mt
    if hidden is not None:
        r0, t = hidden
        np.copyto(s[r0:r0 + t.shape[0]], -np.inf, where=t)


def attention_fwd(q, k, v, mask=None, *, scale, causal=None, window=None, dropout=None,
                  want_lse=True):
    """Tiled attention forward; ``(out, lse)`` (``lse`` None unless ``want_lse``).

    ``q (*L, Sq, D)``, ``k (*L, Sk, D)``, ``v (*L, Sk, Dv)``, ``mask`` None or
    ``(*L, Sq, Sk)`` (bool, True = take part, or additive of q's dtype); any
    strides, stride-0 (broadcast) views included. ``dropout`` is None or
    ``(p, seed, offset, threshold)``. Returns ``out (*L, Sq, Dv)`` of q's dtype and ``lse
    (*L, Sq)`` of the accumulation dtype, both C-contiguous.
    """
    lead = q.shape[:-2]
    sq, d = q.shape[-2:]
    sk, dv = v.shape[-2:]
    acc = _acc_dtype(q.dtype)
    out = _alloc(lead + (sq, dv), dtype=q.dtype)
    lse = _alloc(lead + (sq,), dtype=acc) if want_lse else None
    band = _Band(causal, window, sq, sk)
    scale = acc.type(scale)
    heads = list(np.ndindex(lead))
    bq = min(BLOCK_Q, max(sq, 1))
    # An additive mask may raise scores above the norm bound: always the exact step then.
    lazy = mask is None or mask.dtype == np.bool_
    items = [(bh, i0) for bh in range(len(heads)) for i0 in range(0, sq, bq)]
    work = len(heads) * sq * sk
    pooled = _pooled(items, work)
    bk = _block_k(min(len(items), _threads()) if pooled else 1)

    def rows(item, gmax):
        bh, i0 = item
        idx = heads[bh]
        i1 = min(i0 + bq, sq)
        n = i1 - i0
        kk, vv = k[idx], v[idx]
        mk = None if mask is None else mask[idx]
        ja, jb = band.keys(i0, i1, sk)
        jb = max(ja, jb)  # (jb < 0 when no query of the block sees a key)
        nk = jb - ja
        fold = FOLD and nk > bk  # (one tile: its step is the exact one anyway)
        # Folded: Q' = [scale Q, -c] and K'^T = [K^T; 1], so Q' K'^T = S - c with c the
        # shift of each row (its running max once finite, 0 before): on a lazy tile the
        # scores come out of the product already shifted (no subtraction pass).
        # K^T of the keys this block sees, contiguous (a transposed operand measured 20-30%
        # slower in OpenBLAS's GEMM here), in the accumulation dtype: one copy per item.
        if fold:
            qs = np.empty((n, d + 1), dtype=acc)
            np.multiply(q[idx][i0:i1], scale, out=qs[:, :d])
            qs[:, d] = 0
            kt = np.empty((d + 1, nk), dtype=acc)
            kt[:d] = kk[ja:jb].T
            kt[d] = 1
            c = np.zeros(n, dtype=acc)  # the shift in Q's last column (finite)
        else:
            qs = np.multiply(q[idx][i0:i1], scale, dtype=acc)
            kt = np.ascontiguousarray(kk[ja:jb].T, dtype=acc)
        vs = vv[ja:jb] if vv.dtype == acc else vv[ja:jb].astype(acc)
        m = np.full(n, -np.inf, dtype=acc)
        l = np.zeros(n, dtype=acc)
        o = np.zeros((n, dv), dtype=acc)
        if lazy:
            qd, kd = (qs[:, :d], kt[:d]) if fold else (qs, kt)
            q_norm = np.sqrt(np.einsum("ij,ij->i", qd, qd))  # |scale * q_i|
            k_norm = np.sqrt(np.einsum("ij,ij->j", kd, kd))  # |k_j|
            # Per key tile, max |k_j| as a Python float; per row, the largest max |k_j|
            # its running max allows, (m_i + RESCALE_SLACK) / |scale q_i| (-inf while m_i
            # is -inf, NaN for NaN: both fail the test), refreshed after each exact step.
            kmax = np.maximum.reduceat(k_norm, np.arange(0, nk, bk)).tolist() if nk else []
            thr = np.full(n, -np.inf, dtype=acc)
            thr_min = {}  # (a, b) -> min(thr[a:b]), cleared when thr changes
        # Scratch for the two products of every tile (fresh 512 KiB arrays each tile
        # would go back to the allocator each time).
        sbuf = np.empty(n * bk, dtype=acc) if nk > bk else None
        pbuf = np.empty(n * dv, dtype=acc) if nk > bk else None
        for j0 in range(ja, jb, bk):
            j1 = min(j0 + bk, jb)
            # Only the rows of this block that see some key of this tile.
            ra, rb = band.queries(j0, j1, sq)
            ra, rb = max(ra, i0), min(rb, i1)
            if ra >= rb:
                continue
            a, b = ra - i0, rb - i0
            vj = vs[j0 - ja:j1 - ja]
            s = _mm(qs[a:b], kt[:, j0 - ja:j1 - ja], gmax, sbuf)  # S - c (folded) or S
            _mask_tile(s, mk, ra, rb, j0, j1, band.hidden(ra, rb, j0, j1))
            mb = m[a:b]
            ob = o[a:b]
            # Lazy rescaling: when no score of the tile can exceed the running max by more
            # than RESCALE_SLACK (|s_ij| <= |scale q_i| |k_j|), keep the max: no rowmax
            # pass, no rescaling of l and O; exp(S - m) <= e**RESCALE_SLACK stays finite.
            # (m = -inf, NaN or inf fail the test and take the exact step.) Folded, the
            # product already subtracted c = m.
            if lazy:
                t_min = thr_min.get((a, b))
                if t_min is None:
                    t_min = thr_min[(a, b)] = float(thr[a:b].min())
            if lazy and kmax[(j0 - ja) // bk] <= t_min:
                if not fold:
                    s -= mb[:, None]
                np.exp(s, out=s)
                alpha = None
            else:
                cb = c[a:b] if fold else None
                m_new = np.maximum(mb, s.max(axis=1) + cb if fold else s.max(axis=1))
                # Rows that saw only masked keys so far keep m = -inf; shift them by 0.
                m_safe = np.where(m_new == -np.inf, acc.type(0.0), m_new)
                s -= (m_safe - cb)[:, None] if fold else m_safe[:, None]
                np.exp(s, out=s)
                alpha = np.exp(mb - m_safe)
                ob *= alpha[:, None]
                m[a:b] = m_new
                if fold:
                    c[a:b] = m_safe
                    qs[a:b, d] = -m_safe
                if lazy:
                    with np.errstate(divide="ignore", invalid="ignore"):
                        np.divide(m_new + RESCALE_SLACK, q_norm[a:b], out=thr[a:b])
                    thr_min.clear()
            lb = l[a:b]
            if alpha is not None:
                lb *= alpha
            lb += np.einsum("ij->i", s)
            if dropout is not None:
                s *= _keep_scaled(dropout, sq, sk, bh, ra, rb, j0, j1, acc)
            ob += _mm(s, vj, gmax, pbuf)
        seen = l > 0
        if seen.all():  # (no row saw only masked keys: no masked division)
            np.divide(o, l[:, None], out=o)
            out[idx][i0:i1] = o
            if want_lse:
                np.add(m, np.log(l), out=lse[idx][i0:i1])
            return
        with np.errstate(divide="ignore"):
            np.divide(o, l[:, None], out=o, where=seen[:, None])
            o[~seen] = 0
            out[idx][i0:i1] = o
            if want_lse:
                lse[idx][i0:i1] = np.where(seen, m + np.log(l), -np.inf)

    # Products small enough for one BLAS call on the calling thread need no hold.
    _run_items(rows, items, pooled, bq * min(bk, sk) * d > GEMM_MAX)
    return out, lse


def attention_bwd(q, k, v, out, dout, lse, mask=None, *, scale, causal=None, window=None,
                  dropout=None):
    """Tiled attention backward: ``(dq, dk, dv)``, each of its input's shape and dtype.

    Arguments as :func:`attention_fwd`, plus the forward's ``out`` and ``lse`` and
    the output gradient ``dout``, all ``(*L, ...)``. ``dk``/``dv`` are per query
    head (shape ``(*L, Sk, D)``); the front end sums them over broadcast heads.
    """
    lead = q.shape[:-2]
    sq, d = q.shape[-2:]
    sk, dv_ = v.shape[-2:]
    acc = _acc_dtype(q.dtype)
    dq_out = _alloc(lead + (sq, d), dtype=q.dtype)
    dk_out = _alloc(lead + (sk, d), dtype=q.dtype)
    dv_out = _alloc(lead + (sk, dv_), dtype=q.dtype)
    band = _Band(causal, window, sq, sk)
    scale = acc.type(scale)
    heads = list(np.ndindex(lead))

    def head(bh, gmax=None):
        idx = heads[bh]
        qs = np.multiply(q[idx], scale, dtype=acc)
        do = np.asarray(dout[idx], dtype=acc)
        delta = np.einsum("ij,ij->i", do, np.asarray(out[idx], dtype=acc))
        ls = np.asarray(lse[idx], dtype=acc)
        ls = np.where(ls == -np.inf, acc.type(np.inf), ls)  # fully masked rows: P = 0
        kk, vv = k[idx], v[idx]
        mk = None if mask is None else mask[idx]
        dq = np.zeros((sq, d), dtype=acc)
        dk_h, dv_h = dk_out[idx], dv_out[idx]
        for j0 in range(0, sk, BLOCK_K_BWD):
            j1 = min(j0 + BLOCK_K_BWD, sk)
            kj = np.asarray(kk[j0:j1], dtype=acc)
            vj = np.asarray(vv[j0:j1], dtype=acc)
            kjt, vjt = np.ascontiguousarray(kj.T), np.ascontiguousarray(vj.T)
            dkj = np.zeros((j1 - j0, d), dtype=acc)
            dvj = np.zeros((j1 - j0, dv_), dtype=acc)
            ia, ib = band.queries(j0, j1, sq)
            for i0 in range(ia, ib, BLOCK_Q_BWD):
                i1 = min(i0 + BLOCK_Q_BWD, ib)
                qi = qs[i0:i1]
                doi = do[i0:i1]
                s = _mm(qi, kjt, gmax)
                _mask_tile(s, mk, i0, i1, j0, j1, band.hidden(i0, i1, j0, j1))
                s -= ls[i0:i1, None]
                p = np.exp(s, out=s)
                dp = _mm(doi, vjt, gmax)
                if dropout is not None:
                    z = _keep_scaled(dropout, sq, sk, bh, i0, i1, j0, j1, acc)
                    dvj += _mm((p * z).T, doi, gmax)
                    dp *= z
                else:
                    dvj += _mm(p.T, doi, gmax)
                dp -= delta[i0:i1, None]
                dp *= p
                dq[i0:i1] += _mm(dp, kj, gmax)
                dkj += _mm(dp.T, qi, gmax)
            dk_h[j0:j1] = dkj
            dv_h[j0:j1] = dvj
        dq *= scale
        dq_out[idx] = dq

    items = list(range(len(heads)))
    big = min(BLOCK_Q_BWD, sq) * min(BLOCK_K_BWD, sk) * max(d, dv_) > GEMM_MAX
    _run_items(head, items, _pooled(items, len(heads) * sq * sk), big)
    return dq_out, dk_out, dv_out


def register(registry, backend: str) -> None:
    dts = (_dtypes.float32, _dtypes.float64)
    registry.register("attention_fwd", backend, dts, attention_fwd)
    registry.register("attention_bwd", backend, dts, attention_bwd)
