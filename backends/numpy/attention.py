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

then ``O / l`` and ``lse = m + log(l)``. Lazy rescaling: after a row's first tile,
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

Threads: items run on a pool of one thread per usable core (at most 16); NumPy
releases the GIL in matmul and in the ufuncs. Every matrix product goes through
:func:`_mm`, which cuts it into batched BLAS calls of at most ``GEMM_MAX``
multiply-adds: OpenBLAS runs those on the calling thread, so its own thread pool
never fights this one (letting it thread a 512x1024x64 product from two pool
threads on a busy 2-core machine measured 5-10x slower).

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
"""

from __future__ import annotations

import os

import numpy as np
from numpy.lib.stride_tricks import as_strided

from tessera_array import _dtypes

__all__ = ["attention_bwd", "attention_fwd", "register"]

BLOCK_Q = 1024  # forward: query rows per work item
BLOCK_K = 128  # forward: keys per tile
BLOCK_Q_BWD = 256  # backward: query rows per tile
BLOCK_K_BWD = 256  # backward: keys per tile
# Problems with fewer score elements (Sq*Sk summed over heads) run on the calling
# thread: below it a pool hand-off costs more than it saves.
PARALLEL_MIN = 1 << 20
# The most multiply-adds (M*N*K) of one BLAS call: OpenBLAS runs a GEMM this small on
# the calling thread (its GEMM_MULTITHREAD_THRESHOLD, 4 * 65536; 64x64x64 measured
# single-threaded, 64x128x64 not). See _mm.
GEMM_MAX = 1 << 18
# Lazy rescaling (forward): the running max is raised only when a tile's scores could
# exceed it by more than this (natural-log units; e**20 = 4.9e8, far from overflow).
RESCALE_SLACK = 20.0
_POOL = None

# Test hook: every output buffer is allocated here (tests poison it with NaN to
# prove that the kernels write every element).
_alloc = np.empty


def _threads() -> int:
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count() or 1
    return max(1, min(usable, 16))


def _pool():
    global _POOL
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        _POOL = ThreadPoolExecutor(_threads(), thread_name_prefix="tessera-attention")
    return _POOL


def _mm(a, b):
    """``a @ b`` (2-D) in BLAS calls of at most ``GEMM_MAX`` multiply-adds each.

    The rows of ``a`` are cut into chunks of ``r`` rows and multiplied in one
    batched ``np.matmul`` (a strided view of ``a``, no copy; any strides).
    """
    m, k = a.shape
    n = b.shape[1]
    if m * n * k <= GEMM_MAX:
        return a @ b
    r = max(1, GEMM_MAX // (n * k))
    out = np.empty((m, n), dtype=np.result_type(a.dtype, b.dtype))
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
        """None when every (i, j) of the tile is visible, else the bool tile of hidden ones."""
        lo, hi = self.lo, self.hi
        if (hi is None or j1 - 1 - i0 <= hi) and (lo is None or j0 - (i1 - 1) >= lo):
            return None
        # In tile coordinates (r, c) = (i - i0, j - j0): hidden when c - r > hi - (j0 - i0)
        # or c - r < lo - (j0 - i0).
        n, m, shift = i1 - i0, j1 - j0, j0 - i0
        return _hidden_tile(n, m, None if hi is None else hi - shift,
                            None if lo is None else lo - shift)


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
        np.copyto(s, -np.inf, where=hidden)


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
    sq, _d = q.shape[-2:]
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

    def rows(item):
        bh, i0 = item
        idx = heads[bh]
        i1 = min(i0 + bq, sq)
        n = i1 - i0
        qs = np.multiply(q[idx][i0:i1], scale, dtype=acc)
        kk, vv = k[idx], v[idx]
        mk = None if mask is None else mask[idx]
        m = np.full(n, -np.inf, dtype=acc)
        l = np.zeros(n, dtype=acc)
        o = np.zeros((n, dv), dtype=acc)
        ja, jb = band.keys(i0, i1, sk)
        # K^T of the keys this block sees, contiguous (a transposed operand measured 20-30%
        # slower in OpenBLAS's GEMM here), in the accumulation dtype: one copy per item.
        kt = np.ascontiguousarray(kk[ja:jb].T, dtype=acc)
        vs = vv[ja:jb] if vv.dtype == acc else vv[ja:jb].astype(acc)
        if lazy:
            q_norm = np.sqrt(np.einsum("ij,ij->i", qs, qs))  # |scale * q_i|
            k_norm = np.sqrt(np.einsum("ij,ij->j", kt, kt))  # |k_j|
        for j0 in range(ja, jb, BLOCK_K):
            j1 = min(j0 + BLOCK_K, jb)
            # Only the rows of this block that see some key of this tile.
            ra, rb = band.queries(j0, j1, sq)
            ra, rb = max(ra, i0), min(rb, i1)
            if ra >= rb:
                continue
            a, b = ra - i0, rb - i0
            vj = vs[j0 - ja:j1 - ja]
            s = _mm(qs[a:b], kt[:, j0 - ja:j1 - ja])
            _mask_tile(s, mk, ra, rb, j0, j1, band.hidden(ra, rb, j0, j1))
            mb = m[a:b]
            lb = l[a:b]
            ob = o[a:b]
            # Lazy rescaling: when no score of the tile can exceed the running max by more
            # than RESCALE_SLACK (|s_ij| <= |scale q_i| |k_j|), keep the max: no rowmax
            # pass, no rescaling of l and O; exp(S - m) <= e**RESCALE_SLACK stays finite.
            # (m = -inf, NaN or inf fail the test and take the exact step.)
            if lazy and bool(np.all(q_norm[a:b] * k_norm[j0 - ja:j1 - ja].max()
                                    <= mb + RESCALE_SLACK)):
                s -= mb[:, None]
                np.exp(s, out=s)
                lb += np.einsum("ij->i", s)
                if dropout is not None:
                    s *= _keep_scaled(dropout, sq, sk, bh, ra, rb, j0, j1, acc)
                ob += _mm(s, vj)
                continue
            m_new = np.maximum(mb, s.max(axis=1))
            # Rows that saw only masked keys so far keep m = -inf; shift them by 0.
            m_safe = np.where(m_new == -np.inf, acc.type(0.0), m_new)
            s -= m_safe[:, None]
            np.exp(s, out=s)
            alpha = np.exp(mb - m_safe)
            lb *= alpha
            lb += np.einsum("ij->i", s)
            if dropout is not None:
                s *= _keep_scaled(dropout, sq, sk, bh, ra, rb, j0, j1, acc)
            ob *= alpha[:, None]
            ob += _mm(s, vj)
            m[a:b] = m_new
        seen = l > 0
        with np.errstate(divide="ignore"):
            np.divide(o, l[:, None], out=o, where=seen[:, None])
            o[~seen] = 0
            out[idx][i0:i1] = o
            if want_lse:
                lse[idx][i0:i1] = np.where(seen, m + np.log(l), -np.inf)

    items = [(bh, i0) for bh in range(len(heads)) for i0 in range(0, sq, bq)]
    _run(rows, items, len(heads) * sq * sk)
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

    def head(bh):
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
                s = _mm(qi, kjt)
                _mask_tile(s, mk, i0, i1, j0, j1, band.hidden(i0, i1, j0, j1))
                s -= ls[i0:i1, None]
                p = np.exp(s, out=s)
                dp = _mm(doi, vjt)
                if dropout is not None:
                    z = _keep_scaled(dropout, sq, sk, bh, i0, i1, j0, j1, acc)
                    dvj += _mm((p * z).T, doi)
                    dp *= z
                else:
                    dvj += _mm(p.T, doi)
                dp -= delta[i0:i1, None]
                dp *= p
                dq[i0:i1] += _mm(dp, kj)
                dkj += _mm(dp.T, qi)
            dk_h[j0:j1] = dkj
            dv_h[j0:j1] = dvj
        dq *= scale
        dq_out[idx] = dq

    _run(head, list(range(len(heads))), len(heads) * sq * sk)
    return dq_out, dk_out, dv_out


def register(registry, backend: str) -> None:
    dts = (_dtypes.float32, _dtypes.float64)
    registry.register("attention_fwd", backend, dts, attention_fwd)
    registry.register("attention_bwd", backend, dts, attention_bwd)
