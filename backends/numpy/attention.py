"""Attention kernels of the NumPy backend: FlashAttention-2, tiled, on BLAS.

``attention_fwd`` and ``attention_bwd`` are the launchers of the ``attention`` family
(the contract: :mod:`tessera_array.nn._attention`). Both walk ``S = scale * Q K^T`` of
each (batch, head) in tiles, so memory grows as O(S*D), never O(S^2).

Forward (Dao 2023, Algorithm 1): an item is a block of query rows ``Q_i`` of one head,
with the running row max ``m``, sum ``l`` and unnormalised ``O``; per key block::

    S  = (scale Q_i) K_j^T  (+ additive mask; -inf where masked)
    m' = max(m, rowmax(S));  P = exp(S - m');  a = exp(m - m')
    l  = a l + rowsum(P)                              (the undropped sum)
    O  = a O + (P * keep / (1 - p)) V_j               (dropout: keep from Philox)

then ``O / l`` and ``lse = m + log(l)``. Backward (Algorithm 2), an item a head, ``P``
rebuilt from lse, ``delta = rowsum(dO * O)``::

    dV_j += Pd^T dO_i;  dP = (dO_i V_j^T) * keep / (1 - p);  dS = P * (dP - delta)
    dQ_i += dS K_j;  dK_j += dS^T (scale Q_i);  dQ *= scale at the end

Each item owns its buffers (no atomics) and sums in a fixed order: the same bits whatever
the thread count. float32 tiles for 16- and 32-bit inputs, float64 for float64; fully
masked rows give output 0, lse -inf, zero gradients (torch's CPU SDPA). Key tiles outside
a block's causal/window band are skipped. Dropout keeps are ``philox.keep_block``'s, a
pure function of (seed, offset, bh, i, j).

Two implementations, chosen per call:

- The compiled kernels (``_attention_c``, backends/numpy/_attention_c.c), where the
  extension is built and NumPy's OpenBLAS hands over its ``cblas_?gemm``, for calls
  without a user mask: the forward per (head, query block) item in tiles of
  ``C_BLOCK_M`` x ``C_BLOCK_K``, the backward per head, GIL released, the two products
  per tile at the BLAS's peak and everything between them in one fused pass.
- The NumPy tile loops otherwise (a boolean or additive mask, another BLAS,
  ``KernelPaths(compiled=False)``): the folded shift and lazy rescaling
  (:class:`KernelPaths`, ``RESCALE_SLACK``), tiles sized to the L2 cache.

Threads: items run on a pool of one thread per usable core (at most ``MAX_THREADS``), and
OpenBLAS is held at one thread for the call (``_threads.blas_one_thread``: its own
threads fighting the pool measured 5-10x slower); without the hold (another BLAS) the
loops cut products to ``GEMM_MAX`` multiply-adds. Tests compare both paths with each
other and with the float64 reference.

Why the compiled path: the loops cost ~10 NumPy calls per tile and NumPy's exp on top of
products already at the BLAS's peak. fp32 B=4 H=8 S=1024 D=64, 2-core EPYC (Zen 4),
tessera / torch SDPA, ``python -m benchmarks --suite attention`` (history, tile sweeps and
thread counts: benchmarks/NOTES.md)::

                       full        causal      full p=0.1  causal p=0.1
    forward  loops     1.31        1.17        0.50        0.35
             compiled  1.00-1.02   0.82-0.84   0.13-0.16   0.09-0.10
    backward loops     1.09        0.92        1.48        0.98
             compiled  0.82-0.84   0.66-0.67   0.53-0.55   0.32-0.34
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided

from tessera_array import _dtypes

from . import _threads as _blas

__all__ = ["KernelPaths", "attention_bwd", "attention_fwd", "register"]

BLOCK_Q = 1024  # forward: query rows per work item
# Forward keys per tile: None picks by the threads that share the work
# (BLOCK_K_BY_THREADS); an int (the tests' small tiles) is used as it is.
BLOCK_K = None
# (fewest threads, keys per tile), first match: the module docstring's table. Every tile
# costs ~10 NumPy calls, each taking the GIL back, so with many threads the calls set the
# pace and larger tiles win; at few threads larger tiles also lose on the causal diagonal
# (a tile crossing it computes its hidden half).
BLOCK_K_BY_THREADS = ((5, 512), (3, 256), (1, 128))
# The compiled forward's tiles: C_BLOCK_M query rows (of the item's BLOCK_Q) by C_BLOCK_K
# keys (BLOCK_K when set). One head S=1024 D=64, one thread of the 2-core EPYC, ms (torch
# SDPA 3.29-3.49): 256 x 256 3.41-3.42, 256 x 512 3.30-3.31, 128 x 512 3.40-3.47, 512 x 512
# 3.38-3.42 (wider tiles: fewer BLAS calls, and the per-row costs of a tile spread thinner).
C_BLOCK_M = 256
C_BLOCK_K = 512
# The compiled backward's tiles (query rows x keys): 128 keys waste less on the causal
# diagonal (2-core EPYC, tessera / torch, causal: 256 x 256 0.66-0.69, 256 x 128 0.61-0.63;
# full the same within 1%).
C_BLOCK_Q_BWD = 256
C_BLOCK_K_BWD = 128
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
# The most pool threads. The tile loops make ~10 NumPy calls per tile, each taking the
# GIL back; past about 8 threads the GIL, not the cores, sets the pace. 16-CPU Xeon,
# fp32 B=4 H=8 S=1024 D=64, ms, medians:
#   threads                 4      8      16
#   forward full / causal   47/39  31/29  35/33  (torch SDPA: 28/26  19/14  12/8)
#   backward full / causal  154/90 145/94 277/158 (torch: 71/55  49/40  35/27)
MAX_THREADS = 8
_POOL = None

# Test hook: every output buffer is allocated here (tests poison it with NaN to
# prove that the kernels write every element).
_alloc = np.empty


@dataclass(frozen=True)
class KernelPaths:
    """Which of two equivalent code paths the launchers take, for tests and benchmarks.

    The defaults are the product's choices (the front end never passes ``paths``);
    ``attention_fwd(..., paths=KernelPaths(fold=False))`` takes the alternative, so a
    test can check that both give the same results and a benchmark can time the two.
    """

    # Forward: fold the shift by the running max into the first product (the module
    # docstring); False: a separate subtraction pass.
    fold: bool = True
    # Hold OpenBLAS at one thread for the call when some product exceeds GEMM_MAX;
    # False: never hold it (products are then cut to GEMM_MAX, as with another BLAS).
    pin_blas: bool = True
    # Under the hold, make each product one BLAS call; False: cut to GEMM_MAX anyway.
    big_gemm: bool = True
    # The compiled kernel (_attention_c) where it covers the call (:func:`_compiled`);
    # False: the NumPy tile loops.
    compiled: bool = True


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


def _run_items(fn, items, pooled: bool, big: bool = True,
               paths: KernelPaths = KernelPaths()) -> None:
    """``fn(item, gmax)`` for every item; on the pool when ``pooled``.

    OpenBLAS is held to one thread for the call (:func:`_blas_one_thread`) and each
    product is then one BLAS call (``gmax`` 0); where it cannot be held, products
    are cut to ``GEMM_MAX`` (see :func:`_mm`). The hold is wanted (``big``) only when
    some product exceeds ``GEMM_MAX``. Even on the calling thread alone the hold
    matters: letting OpenBLAS thread the 1024x128x64 products on the busy 2-core
    machine measured 4-12x slower than the held pool.
    """
    with _blas_one_thread(big and paths.pin_blas) as one:
        gmax = 0 if one and paths.big_gemm else None
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
    taken only when ``wanted``."""
    return _blas.blas_one_thread(wanted)


_C = {}  # "mod": the _attention_c module with its BLAS set, or None (see _compiled)


def _compiled(paths: KernelPaths, dtype, *arrays):
    """The compiled kernel module where it can run this call, else None.

    It needs: ``paths.compiled`` and ``paths.pin_blas``; the extension built; NumPy's
    OpenBLAS with its thread hold and its ``cblas_?gemm`` (``_threads.blas_gemm``); every
    array of ``dtype`` (float32 or float64), aligned, its strides whole elements.
    Additive and boolean masks stay on the NumPy path (the caller checks).
    """
    if not (paths.compiled and paths.pin_blas):
        return None
    mod = _C.get("mod", False)
    if mod is False:
        mod = None
        try:
            from . import _attention_c
        except ImportError:
            _attention_c = None
        gemm = _blas.blas_gemm() if _attention_c is not None else None
        if gemm is not None:
            _attention_c.set_blas(*gemm)
            mod = _attention_c
        _C["mod"] = mod
    if mod is None or dtype not in (np.float32, np.float64):
        return None
    size = np.dtype(dtype).itemsize
    for a in arrays:
        if a.dtype != dtype or not a.flags.aligned or any(t % size for t in a.strides):
            return None
    return mod


_FAR = 1 << 62  # an unbounded side of the band, for the compiled kernel


def _c_band_dropout(dtype, band, dropout) -> tuple:
    """The compiled kernels' band and dropout arguments: ``(lo, hi, (on, threshold, seed,
    offset), keep_scale)``; ``threshold = floor(p * 2**40)`` (the 40-bit int of the keep
    contract, ``tessera_array.random.dropout_keep_threshold``: the C side takes it as a
    64-bit unsigned int and splits it into the byte's threshold and the refinement word's);
    keep_scale is 1 / (1 - p) rounded to ``dtype``."""
    lo = -_FAR if band.lo is None else band.lo
    hi = _FAR if band.hi is None else band.hi
    if dropout is None:
        return lo, hi, (False, 0, 0, 0), 1.0
    p, seed, offset, threshold = dropout
    return lo, hi, (True, threshold, seed, offset), float(dtype.type(1.0 / (1.0 - p)))


def _fwd_compiled(mod, q, k, v, out, lse, heads, band, items, bq, scale, dropout, pooled,
                  paths):
    """The forward on the compiled kernel: one C call per (head, query block) item, with
    the GIL released; tiles of ``C_BLOCK_M`` rows x ``BLOCK_K`` (else ``C_BLOCK_K``) keys."""
    sq, d = q.shape[-2:]
    sk, dv = v.shape[-2:]
    size = q.dtype.itemsize
    f64 = q.dtype == np.float64
    lo, hi, drop, keep_scale = _c_band_dropout(q.dtype, band, dropout)
    bm = max(1, min(C_BLOCK_M, bq))
    bk = BLOCK_K or C_BLOCK_K
    # The rows of the outputs are C-contiguous: item (bh, i0) writes out[bh, i0:i1].
    out_ptr = out.__array_interface__["data"][0]
    lse_ptr = lse.__array_interface__["data"][0] if lse is not None else 0

    def ptr(a):
        return a.__array_interface__["data"][0]

    def run(item):
        bh, i0 = item
        idx = heads[bh]
        qh, kh, vh = q[idx], k[idx], v[idx]
        i1 = min(i0 + bq, sq)
        mod.fwd(f64, ptr(qh), qh.strides[0] // size, qh.strides[1] // size,
                ptr(kh), kh.strides[0] // size, kh.strides[1] // size,
                ptr(vh), vh.strides[0] // size, vh.strides[1] // size,
                out_ptr + (bh * sq + i0) * dv * size,
                lse_ptr + (bh * sq + i0) * size if lse_ptr else 0,
                sq, sk, d, dv, i0, i1, float(scale), lo, hi, bm, bk,
                drop[0], drop[1], drop[2], drop[3], bh, keep_scale)

    _run_compiled(run, items, pooled, paths)


def _run_compiled(run, items, pooled: bool, paths: KernelPaths) -> None:
    """``run(item)`` for every item, under OpenBLAS's hold; when ``pooled``, the calling
    thread and ``_threads() - 1`` pool threads take the items one at a time from a shared
    queue (each C call releases the GIL; the caller, already awake, saves a pool
    hand-off, and an uneven item, a causal block, does not hold the others back)."""
    with _blas_one_thread(paths.pin_blas):
        parts = min(_threads(), len(items)) if pooled else 1
        if parts < 2:
            for it in items:
                run(it)
            return
        todo = iter(items)
        lock = threading.Lock()

        def worker():
            while True:
                with lock:
                    it = next(todo, None)
                if it is None:
                    return
                run(it)

        futures = [_pool().submit(worker) for _ in range(parts - 1)]
        try:
            worker()
        finally:
            for f in futures:
                f.result()


def _bwd_compiled(mod, q, k, v, out, dout, lse, dq, dk, dv, heads, band, scale, dropout,
                  pooled, paths):
    """The backward on the compiled kernel: one C call per head, with the GIL released;
    tiles of ``C_BLOCK_Q_BWD`` x ``C_BLOCK_K_BWD``."""
    sq, d = q.shape[-2:]
    sk, dv_ = v.shape[-2:]
    size = q.dtype.itemsize
    f64 = q.dtype == np.float64
    lo, hi, drop, keep_scale = _c_band_dropout(q.dtype, band, dropout)

    def view(a):
        return (a.__array_interface__["data"][0],) + tuple(t // size for t in a.strides)

    def run(bh):
        idx = heads[bh]
        mod.bwd(f64, *view(q[idx]), *view(k[idx]), *view(v[idx]), *view(out[idx]),
                *view(dout[idx]), *view(lse[idx]), view(dq[idx])[0], view(dk[idx])[0],
                view(dv[idx])[0], sq, sk, d, dv_, float(scale), lo, hi,
                max(1, C_BLOCK_Q_BWD), max(1, C_BLOCK_K_BWD),
                drop[0], drop[1], drop[2], drop[3], bh, keep_scale)

    _run_compiled(run, list(range(len(heads))), pooled, paths)


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
                  want_lse=True, paths: KernelPaths = KernelPaths()):
    """Tiled attention forward; ``(out, lse)`` (``lse`` None unless ``want_lse``).

    ``q (*L, Sq, D)``, ``k (*L, Sk, D)``, ``v (*L, Sk, Dv)``, ``mask`` None or
    ``(*L, Sq, Sk)`` (bool, True = take part, or additive of q's dtype); any
    strides, stride-0 (broadcast) views included. ``dropout`` is None or
    ``(p, seed, offset, threshold)``. Returns ``out (*L, Sq, Dv)`` of q's dtype and ``lse
    (*L, Sq)`` of the accumulation dtype, both C-contiguous. ``paths``: the code paths
    taken (:class:`KernelPaths`; the front end leaves the product's).
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
    mod = None
    if mask is None and min(sq, sk, d, dv) > 0:
        mod = _compiled(paths, q.dtype, q, k, v)
    if mod is not None:
        _fwd_compiled(mod, q, k, v, out, lse, heads, band, items, bq, scale, dropout, pooled,
                      paths)
        return out, lse
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
        fold = paths.fold and nk > bk  # (one tile: its step is the exact one anyway)
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
    _run_items(rows, items, pooled, bq * min(bk, sk) * d > GEMM_MAX, paths)
    return out, lse


def attention_bwd(q, k, v, out, dout, lse, mask=None, *, scale, causal=None, window=None,
                  dropout=None, paths: KernelPaths = KernelPaths()):
    """Tiled attention backward: ``(dq, dk, dv)``, each of its input's shape and dtype.

    Arguments as :func:`attention_fwd`, plus the forward's ``out`` and ``lse`` and
    the output gradient ``dout``, all ``(*L, ...)``. ``dk``/``dv`` are per query
    head (shape ``(*L, Sk, D)``); the front end sums them over broadcast heads.
    ``paths``: as for :func:`attention_fwd` (``fold`` does not apply).
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
    mod = None
    if mask is None and min(sq, sk, d, dv_) > 0:
        mod = _compiled(paths, q.dtype, q, k, v, out, dout, lse)
    if mod is not None:
        _bwd_compiled(mod, q, k, v, out, dout, lse, dq_out, dk_out, dv_out, heads, band, scale,
                      dropout, _pooled(heads, len(heads) * sq * sk), paths)
        return dq_out, dk_out, dv_out

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
    _run_items(head, items, _pooled(items, len(heads) * sq * sk), big, paths)
    return dq_out, dk_out, dv_out


def register(registry, backend: str) -> None:
    dts = (_dtypes.float32, _dtypes.float64)
    registry.register("attention_fwd", backend, dts, attention_fwd)
    registry.register("attention_bwd", backend, dts, attention_bwd)
