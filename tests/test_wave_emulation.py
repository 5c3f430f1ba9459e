"""The wave-width arithmetic of every warp-level kernel, emulated on the CPU at 32 and 64
lanes (NVIDIA and AMD RDNA warps; AMD CDNA wavefronts) and checked against NumPy.

Each emulation does what the kernel source does, in the kernel's index arithmetic: a
thread's (row, lane) from ``blockIdx``/``threadIdx``, the lanes' strided runs, the shuffle
trees of tessera/warp.cuh (``shfl_down``: lane i reads lane i + delta, the upper delta
lanes keep their own), the block sums and the partial-sum layouts, with the launch
geometry taken from the launchers' own functions (``grid_blocks``, ``dot_parts``,
``lanes_for``, ``adafactor_layout``, ``_per_lane``). Arithmetic is NumPy's in the
kernel's dtype (each operation rounded, as the kernels' ``_rn`` intrinsics round), so
integer-valued data must sum exactly and random data to the precision's rounding.

The source lines each emulation mirrors are pinned (:data:`PINS`): a change of a kernel's
layout logic fails the pin, and the emulation is then brought up to date with it.
"""

from __future__ import annotations

import math
import pathlib
import re

import numpy as np
import pytest
import scipy.sparse
import scipy.sparse.linalg
from tessera_array.backends._cupy import attention as cu_attention
from tessera_array.backends._cupy import matvec as cu_matvec
from tessera_array.backends._cupy import optim as cu_optim
from tessera_array.backends._cupy import sparse as cu_sparse
from tessera_array.backends._common.layout import band

import tessera_array as xp
from tessera_array import _dispatch
from tessera_array.sparse import csr_array
from tessera_array.sparse import linalg as tla

ROOT = pathlib.Path(__file__).resolve().parents[1]
WIDTHS = (32, 64)
EPS = {np.float32: np.finfo(np.float32).eps, np.float64: np.finfo(np.float64).eps,
       np.complex64: np.finfo(np.float32).eps, np.complex128: np.finfo(np.float64).eps}

# ---- what each emulation mirrors -------------------------------------------------------

PINS = {
    "kernels/include/tessera/types.cuh": [
        # strided_dot: U loads in flight, each term added in the order j, j + step, ...
        "for (; j + (U - 1) * step < n; j += U * step) {",
        "for (int u = 0; u < U; ++u) acc = add(acc, mul(av[u], bv[u]));",
        "for (; j < n; j += step) acc = add(acc, mul(a[j], b[j]));",
    ],
    "kernels/include/tessera/warp.cuh": [
        "return __shfl_down(v, delta, WARP);",
        "return __shfl(v, src, WARP);",
        "for (int delta = WARP / 2; delta > 0; delta >>= 1) v = add(v, shfl_down<WARP>(v, delta));",
        "T o = shfl_down<WARP>(v, delta); v = (o > v || o != o) ? o : v;",
        "const int lane = threadIdx.x % WARP, w = threadIdx.x / WARP;",
        "v = warp_sum<WARP>(v); __syncthreads(); if (lane == 0) scratch[w] = v; __syncthreads();",
        "if (w == 0) v = warp_sum<WARP>(lane < BLOCK / WARP ? scratch[lane] : zero<T>());",
    ],
    "kernels/cuda/matvec.cu": [
        "const long long i = (long long)blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP;",
        "const int lane = threadIdx.x % WARP;",
        "const long long groups = n / VEC;",
        # the unrolled loads keep each lane's order q = lane, lane + WARP, ...
        "for (; q + (UNROLL - 1) * WARP < groups; q += UNROLL * WARP) {",
        "acc = tessera::add(acc, tessera::mul(av[u].v[e], bv[u].v[e]));",
        "for (; q < groups; q += WARP) {",
        "for (int e = 0; e < VEC; ++e) acc = tessera::add(acc, tessera::mul(av.v[e], bv.v[e]));",
        "for (long long j = groups * VEC + lane; j < n; j += WARP)",
        # (no vec16 loads: the lane's run j = lane, lane + WARP, ... of types.cuh's below)
        "acc = tessera::strided_dot<UNROLL>(row, x, lane, WARP, n, acc);",
        "acc = tessera::warp_sum<WARP>(acc); if (lane == 0) y[i] = acc;",
    ],
    "backends/_cupy/matvec.py": [
        'grid, block = grid_blocks("matvec", m, WARP_ROWS), WARP_ROWS * warp',
        "knl((parts,), (DOT_BLOCK,), (np.int64(n), x, np.int64(xs), y, np.int64(ys), part))",
        "fin((1,), (DOT_BLOCK,), (np.int32(parts), part, out))",
    ],
    "kernels/cuda/blas1.cu": [
        "const long long step = (long long)gridDim.x * BLOCK;",
        "long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;",
        "for (; i < n; i += step) acc = tessera::add(acc, tessera::conj_mul(x[i], y[i]));",
        "acc = tessera::block_sum<WARP, BLOCK>(acc, scratch); if (threadIdx.x == 0) "
        "part[blockIdx.x] = acc;",
        "for (int k = threadIdx.x; k < parts; k += BLOCK) acc = tessera::add(acc, part[k]);",
    ],
    "kernels/cuda/spmv.cu": [
        "const int lane = threadIdx.x % WARP;",
        "const int sub = lane % LANES;",
        "const int first = lane - sub;",
        "const long long i = (long long)blockIdx.x * (blockDim.x / LANES) + threadIdx.x / LANES;",
        "const long long steps = tessera::shfl<WARP>(tessera::warp_max<WARP>(len), 0);",
        "for (long long base = 0; base < steps; base += LANES) { const long long q = base + sub;",
        "const A prod = q < len ? tessera::mul_acc<A>(data[start + q], xc[(long long)indices[start "
        "+ q] * xs0]) : tessera::zero<A>();",
        "const A v = tessera::shfl<WARP>(prod, first + t); if (sub == 0 && base + t < len) acc = "
        "tessera::add(acc, v);",
        "if (sub == 0 && i < m) y[i * k + c] = static_cast<T>(acc);",
    ],
    "backends/_cupy/sparse.py": [
        "lanes = lanes_for(m, data.size, warp)",
        "rows = BLOCK // lanes",
        "grid = (grid_blocks(func, m, rows), min(k, GRID_Y_MAX))",
    ],
    "kernels/cuda/optim.cu": [
        "for (int delta = lanes / 2; delta > 0; delta >>= 1) v = add(v, shfl_down<WARP>(v, "
        "delta));",
        "while (g < WARP && g < C) g <<= 1;",
        "while (g < COL_TILE && g < C) g <<= 1;",
        "const int G = row_lanes<WARP>(C); const int sub_lane = threadIdx.x % G;",
        "for (long long base = 0; base < nr; base += BLOCK / G) { const long long "
        "r = base + threadIdx.x / G;",
        "for (long long c = sub_lane; c < C; c += G) s = add(s, mul(gr[c], gr[c]));",
        "s = group_sum<WARP>(s, G);",
        "const int TC = tile_cols(C), RL = BLOCK / TC; const int cx = threadIdx.x % TC, ry = "
        "threadIdx.x / TC;",
        "for (long long r = ry; r < R; r += RL) s = add(s, mul(gb[r * C], gb[r * C]));",
        "for (int j = 1; j < RL; ++j) tot = add(tot, red[j * TC + cx]);",
        "for (long long j = threadIdx.x; j < total; j += BLOCK) acc = add(acc, vp[j]); return "
        "block_sum<WARP, BLOCK>(acc, scratch);",
        "const int lane = threadIdx.x % WARP, w = threadIdx.x / WARP; for (long long base = 0; "
        "base < nb; base += BLOCK / WARP) { const long long b = base + w;",
        "for (long long r = lane; r < R; r += WARP) s = add(s, row[(b0 + b) * R + r]);",
        "r = local / C; c = local - r * C; dr = block / C; dc = block - dr * C;",
        "c += dc; r += dr; if (c >= C) { c -= C; r += 1; }",
        "Walker w(lo - b * RC + threadIdx.x, C, BLOCK);",
        "if (C % VEC == 0 && aligned16(g + lo) && aligned16(col)) {",
        "for (long long q = threadIdx.x; q < C / VEC; q += BLOCK) {",
        "const vec16<T> v = reinterpret_cast<const vec16<T> *>(gt + r * C)[q];",
        "for (long long c = threadIdx.x; c < C; c += BLOCK) {",
        "const T v = warp_sum<WARP>(rs[r]); if (lane == 0) red[r * (BLOCK / WARP) + w] = v;",
        "for (int j = 1; j < BLOCK / WARP; ++j) tot = add(tot, red[r * (BLOCK / WARP) + j]);",
        "for (int e = 0; e < VEC; ++e) s = add(s, mul(v.v[e], v.v[e]));",
        "for (long long i = i0 + threadIdx.x; i < cnt; i += BLOCK) s = add(s, mul(p[lo + i], "
        "p[lo + i]));",
        "for (long long k = ry; k < tpb; k += RL) s = add(s, cp[k * C]);",
        "for (int j = 1; j < RL; ++j) tot = add(tot, red[j * COL_TILE + cx]);",
        "Walker w(lo - b * RC + threadIdx.x * VEC, C, BLOCK * VEC); for (long long q = "
        "threadIdx.x; q < cnt / VEC; q += BLOCK, w.next()) {",
    ],
    "kernels/cuda/attention.cu": [
        "const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;",
        "const int passes = Dv > N * WARP ? (Dv + N * WARP - 1) / (N * WARP) : 1;",
        "const int dv0 = pass * N * WARP;",
        "for (int jt = ja; jt < jb; jt += WARP) { const int n = min(WARP, jb - jt);",
        "const int j = jt + lane;",
        "const int i = i0 + warp * RPW + r;",
        "const ACC mx = from_lane0<WARP>(tessera::warp_max<WARP>(x));",
        "const ACC m_new = max_nan(m[r], mx);",
        "const ACC m_safe = m_new == neg_inf<ACC>() ? ACC(0) : m_new;",
        "l[r] = alpha * l[r] + from_lane0<WARP>(tessera::warp_sum<WARP>(p));",
        "ps[warp * RPW + r][lane] = pz;",
        "const int c0 = col0 + u * WARP;",
        "acc[r][u] += w[warp * RPW + r][t] * y;",
        "const int col = dv0 + u * WARP + lane;",
        "out[row * Dv + col] = seen ? T(o[r][u] / l[r]) : T(0);",
        "lse_out[row] = seen ? m[r] + log_(l[r]) : neg_inf<ACC>();",
        "constexpr int RPW = 4;",
        "for (int d = lane; d < Dv; d += WARP) part += ACC(dom.p[(long long)i * dom.sr + "
        "(long long)d * dom.sc]) * ACC(om.p[(long long)i * om.sr + (long long)d * om.sc]);",
        "dl[r] = from_lane0<WARP>(tessera::warp_sum<WARP>(part));",
        "const int passes = D > N * WARP ? (D + N * WARP - 1) / (N * WARP) : 1;",
        "const int d0 = pass * N * WARP;",
        "ps[warp * RPW + r][lane] = p * (dpz - dl[r]);",
        "const int col = d0 + u * WARP + lane; if (col < D) dq[row * D + col] = T(g[r][u] * "
        "scale);",
        "const int widest = D > Dv ? D : Dv;",
        "const int passes = widest > N * WARP ? (widest + N * WARP - 1) / (N * WARP) : 1;",
        "for (int it = ia; it < ib; it += WARP) { const int n = min(WARP, ib - it);",
        "const int i = it + lane;",
        "pt[warp * RPW + r][lane] = pz; st[warp * RPW + r][lane] = p * (dpz - di);",
        "const int col = c0 + u * WARP + lane; if (col < D) dk[row * D + col] = T(gk[r][u]); "
        "if (col < Dv) dv[row * Dv + col] = T(gv[r][u]);",
    ],
    "backends/_cupy/attention.py": [
        '_launch(device, "fwd", q.dtype, dv, bh * -(-sq // ROWS), args + (out, lse))',
        '_launch(device, "bwd_dq", q.dtype, d, bh * -(-sq // ROWS),',
        '_launch(device, "bwd_dkdv", q.dtype, max(d, dv_), bh * -(-sk // ROWS),',
        "fn((min(items, GRID_MAX),), (NWARPS * warp,), args)",
    ],
}


def _normal(text: str) -> str:
    """Code without comments, whitespace runs as one space (Python's # comments kept:
    the pinned Python lines carry none)."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = "\n".join(re.sub(r"//.*", "", ln) for ln in text.splitlines())
    return re.sub(r"\s+", " ", text)


@pytest.mark.parametrize("path", sorted(PINS))
def test_the_mirrored_source_lines_are_there(path):
    """Each line the emulations below mirror is in the source as written (whitespace
    aside): a kernel whose layout logic changes fails here first."""
    text = _normal((ROOT / path).read_text())
    missing = [line for line in PINS[path] if _normal(line) not in text]
    assert not missing, f"{path} no longer has: {missing}"


# ---- the warp primitives (tessera/warp.cuh) ----------------------------------------------


def shfl_down(v, delta):
    """``__shfl_down(v, delta, W)`` over the last axis (W lanes): lane i reads lane
    i + delta; the upper delta lanes keep their own value."""
    out = v.copy()
    if delta:
        out[..., :-delta] = v[..., delta:]
    return out


def shfl(v, src):
    """``__shfl(v, src, W)``: lane i reads lane src[i] (``src`` broadcasts)."""
    src = np.broadcast_to(src, v.shape)
    return np.take_along_axis(v, src, axis=-1)


def warp_sum(v):
    """tessera::warp_sum<W>: the tree over the last axis (W lanes); the sum is lane 0's."""
    w = v.shape[-1]
    delta = w // 2
    while delta > 0:
        v = v + shfl_down(v, delta)
        delta >>= 1
    return v


def group_sum(v, lanes):
    """optim.cu's group_sum<W>(v, lanes): the tree with deltas lanes/2 .. 1 over the whole
    warp (lanes read across groups, as the hardware does); each group's sum is its first
    lane's."""
    delta = lanes // 2
    while delta > 0:
        v = v + shfl_down(v, delta)
        delta >>= 1
    return v


def warp_max(v):
    """tessera::warp_max<W>: NaN propagating; the maximum is lane 0's."""
    delta = v.shape[-1] // 2
    while delta > 0:
        o = shfl_down(v, delta)
        v = np.where((o > v) | (o != o), o, v)
        delta >>= 1
    return v


def block_sum(v, warp):
    """tessera::block_sum<W, BLOCK> over the last axis (BLOCK threads): each warp's sum in
    scratch[w], then warp 0 sums scratch[lane] (lane < BLOCK / W, else 0); thread 0's."""
    block = v.shape[-1]
    assert block % warp == 0 and block // warp <= warp
    scratch = warp_sum(v.reshape(v.shape[:-1] + (block // warp, warp)))[..., 0]
    lanes = np.zeros(v.shape[:-1] + (warp,), v.dtype)
    lanes[..., :block // warp] = scratch
    return warp_sum(lanes)[..., 0]


def _tree(v):
    """The same tree written as halving folds (an independent formulation)."""
    while v.shape[-1] > 1:
        h = v.shape[-1] // 2
        v = v[..., :h] + v[..., h:]
    return v[..., 0]


@pytest.mark.parametrize("warp", WIDTHS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_warp_sum_is_the_halving_tree(warp, dtype):
    rng = np.random.default_rng(warp)
    v = rng.standard_normal((500, warp)).astype(dtype)
    got = warp_sum(v)[:, 0]
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, _tree(v))  # bit for bit: the order is the tree's
    ref = v.astype(np.float64).sum(-1)
    bound = math.log2(warp) * EPS[dtype] * np.abs(v).astype(np.float64).sum(-1)
    assert np.all(np.abs(got - ref) <= bound)
    ints = rng.integers(-1000, 1000, (50, warp)).astype(dtype)
    np.testing.assert_array_equal(warp_sum(ints)[:, 0], ints.sum(-1))
    # Only lane 0 holds the sum: a kernel must read it there (or broadcast it).
    assert not np.array_equal(warp_sum(ints)[:, 1], ints.sum(-1))


@pytest.mark.parametrize("warp", WIDTHS)
def test_warp_max_and_broadcast(warp):
    rng = np.random.default_rng(1)
    v = rng.standard_normal((200, warp))
    np.testing.assert_array_equal(warp_max(v)[:, 0], v.max(-1))
    v[7, warp - 1] = np.nan  # the last lane's NaN reaches lane 0
    v[9, warp // 2] = np.nan
    got = warp_max(v)[:, 0]
    assert np.isnan(got[7]) and np.isnan(got[9])
    np.testing.assert_array_equal(np.delete(got, [7, 9]), np.delete(v.max(-1), [7, 9]))
    b = shfl(warp_max(v), 0)
    assert np.array_equal(b, np.repeat(got[:, None], warp, 1), equal_nan=True)


@pytest.mark.parametrize("warp", WIDTHS)
@pytest.mark.parametrize("block", [64, 128, 256])
def test_block_sum(warp, block):
    rng = np.random.default_rng(block)
    v = rng.integers(-10**5, 10**5, (40, block)).astype(np.float64)
    np.testing.assert_array_equal(block_sum(v, warp), v.sum(-1))
    r = rng.standard_normal((40, block)).astype(np.float32)
    np.testing.assert_allclose(block_sum(r, warp), r.astype(np.float64).sum(-1),
                               atol=20 * EPS[np.float32] * np.abs(r).sum(-1).max())


# ---- dense matvec, one warp per row (matvec.cu) ------------------------------------------


def emulate_matvec_warp(a, x, warp, vec):
    """tessera_matvec_warp<T, warp, vec> under the launcher's geometry."""
    m, n = a.shape
    grid = cu_matvec.grid_blocks("matvec", m, cu_matvec.WARP_ROWS)
    block = cu_matvec.WARP_ROWS * warp
    t = np.arange(grid * block)
    bid, tid = t // block, t % block
    i = bid * (block // warp) + tid // warp
    lane = tid % warp
    # Every warp is one row: its lanes agree on i and are lanes 0..W-1 in order.
    i_w, lane_w = i.reshape(-1, warp), lane.reshape(-1, warp)
    assert (i_w == i_w[:, :1]).all() and (lane_w == np.arange(warp)).all()
    rows = i_w[:, 0]
    assert np.array_equal(rows[rows < m], np.arange(m))  # each row once, in order
    live = rows < m  # warps past the last row return whole
    rows, lanes = rows[live][:, None], lane_w[live]
    acc = np.zeros((rows.shape[0], warp), a.dtype)
    if vec > 1:
        groups = n // vec
        for k in range(-(-groups // warp)):
            q = lanes + k * warp
            ok = q < groups
            for e in range(vec):
                j = np.where(ok, q * vec + e, 0)
                acc = np.where(ok, acc + a[rows, j] * x[j], acc)
        start = groups * vec
    else:
        start = 0
    for k in range(-(-(n - start) // warp)):
        j = start + lanes + k * warp
        ok = j < n
        jj = np.where(ok, j, 0)
        acc = np.where(ok, acc + a[rows, jj] * x[jj], acc)
    y = np.empty(m, a.dtype)
    y[rows[:, 0]] = warp_sum(acc)[:, 0]
    return y


@pytest.mark.parametrize("warp", WIDTHS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
@pytest.mark.parametrize("n", [1, 3, 31, 64, 65, 130, 1001])
def test_matvec_warp(warp, dtype, n):
    rng = np.random.default_rng(n)
    m = 37  # not a multiple of the rows per block
    a = rng.standard_normal((m, n)).astype(dtype)
    x = rng.standard_normal(n).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((m, n)).astype(dtype)
    vecs = sorted({1, max(1, 16 // np.dtype(dtype).itemsize)})
    ref = a.astype(np.complex128) @ x.astype(np.complex128)
    for vec in vecs:
        y = emulate_matvec_warp(a, x, warp, vec)
        tol = 4 * EPS[dtype] * (np.abs(a) @ np.abs(x)) * (math.log2(warp) + n / warp)
        assert np.all(np.abs(y - ref) <= tol + 1e-300)
        ints = rng.integers(-8, 9, (m, n)).astype(dtype)
        xi = rng.integers(-8, 9, n).astype(dtype)
        np.testing.assert_array_equal(emulate_matvec_warp(ints, xi, warp, vec),
                                      ints.real.astype(np.int64) @ xi.real.astype(np.int64))


# ---- vecdot: the dot product of the Krylov solvers (blas1.cu) -----------------------------


def emulate_vecdot(x, y, warp):
    """tessera_vecdot_part then tessera_vecdot_final<T, warp, DOT_BLOCK> as the launcher
    runs them (dot_parts(n) blocks; the final pass only when there is more than one)."""
    n = x.shape[0]
    block = cu_matvec.DOT_BLOCK
    parts = cu_matvec.dot_parts(n)
    step = parts * block
    prod = np.conj(x) * y if np.iscomplexobj(x) else x * y
    runs = -(-n // step)
    padded = np.zeros(runs * step, x.dtype)
    padded[:n] = prod
    acc = np.zeros(step, x.dtype)  # thread g = blockIdx * BLOCK + threadIdx
    for r in range(runs):  # i = g, g + step, ... in order
        acc = acc + padded[r * step:(r + 1) * step]
    part = block_sum(acc.reshape(parts, block), warp)
    if parts == 1:
        return part[0], parts
    total = np.zeros(block, x.dtype)
    for k0 in range(0, parts, block):  # thread t: part[t], part[t + BLOCK], ...
        chunk = np.zeros(block, x.dtype)
        chunk[:min(block, parts - k0)] = part[k0:k0 + block]
        total = total + chunk
    return block_sum(total, warp), parts


@pytest.mark.parametrize("warp", WIDTHS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
@pytest.mark.parametrize("n", [1, 255, 2048, 2049, 3 * 2**17 + 7])
def test_vecdot_partial_sums(warp, dtype, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(dtype)
    y = rng.standard_normal(n).astype(dtype)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(n).astype(dtype)
        y = y + 1j * rng.standard_normal(n).astype(dtype)
    got, parts = emulate_vecdot(x, y, warp)
    assert parts == (1 if n <= 2048 else -(-n // 2048))
    ref = np.vdot(x.astype(np.complex128), y.astype(np.complex128))
    scale = np.abs(x).astype(np.float64) @ np.abs(y).astype(np.float64)
    bound = 4 * EPS[dtype] * scale * (n / (parts * cu_matvec.DOT_BLOCK) + 2 * math.log2(warp)
                                      + math.log2(cu_matvec.DOT_BLOCK) + parts / 256)
    assert abs(got - ref) <= bound
    xi = rng.integers(-30, 31, n).astype(dtype)
    yi = rng.integers(-30, 31, n).astype(dtype)
    assert emulate_vecdot(xi, yi, warp)[0] == xi.real.astype(np.int64) @ yi.real.astype(np.int64)


@pytest.mark.parametrize("warp", WIDTHS)
def test_cg_with_the_kernels_dot_products(warp, monkeypatch):
    """cg (the front end's generic loop) with every dot product and norm in the vecdot
    kernel's partial-sum layout at this width: SciPy's iterates, to rounding."""
    n = 40
    main = 4.0 + np.random.default_rng(3).random(n)
    a = scipy.sparse.diags([-np.ones(n - 1), main, -np.ones(n - 1)], [-1, 0, 1], format="csr")
    b = np.random.default_rng(4).standard_normal(n)
    calls = []
    real_lookup = _dispatch.lookup

    def lookup(op, device, dtype, variant="default"):
        if op == "vecdot" and variant == "default":
            def vecdot(x, y):
                calls.append(x.shape[0])
                return np.asarray(emulate_vecdot(np.asarray(x), np.asarray(y), warp)[0])
            return vecdot
        return real_lookup(op, device, dtype, variant)

    monkeypatch.setattr(_dispatch, "lookup", lookup)
    A = csr_array(scipy.sparse.csr_array(a))
    for maxiter in (1, 3, 50):
        # (fused=False: the generic loop, whose every product is the registered vecdot;
        # the NumPy backend's fused steps take NumPy's dot)
        x, info = tla._isolve._cg(A, xp.asarray(b), maxiter=maxiter, rtol=1e-12, fused=False)
        ref, ref_info = scipy.sparse.linalg.cg(a, b, maxiter=maxiter, rtol=1e-12)
        assert info == ref_info
        np.testing.assert_allclose(np.asarray(x), ref, rtol=1e-10, atol=1e-12)
    assert calls and set(calls) == {n}  # the emulated kernel did the products


# ---- CSR spmv, LANES lanes per row (spmv.cu) -----------------------------------------------


def emulate_spmv_warp(a, x, warp, acc_dtype=None):
    """tessera_spmv_warp<T, I, P, warp, lanes_for(...)> for a CSR ``a`` and a vector x."""
    m = a.shape[0]
    data, indices, indptr = a.data, a.indices, a.indptr
    acc_dtype = np.dtype(acc_dtype or data.dtype).type
    lanes = cu_sparse.lanes_for(m, data.size, warp)
    block = cu_sparse.BLOCK
    rows_per_block = block // lanes
    grid = cu_matvec.grid_blocks("spmv", m, rows_per_block)
    t = np.arange(grid * block)
    tid = t % block
    lane = tid % warp
    sub = lane % lanes
    first = lane - sub
    i = (t // block) * rows_per_block + tid // lanes
    live = i < m
    start = np.where(live, indptr[np.minimum(i, m - 1)], 0)
    length = np.where(live, indptr[np.minimum(i, m - 1) + 1] - start, 0)
    shape = (-1, warp)  # thread t is lane t % W of warp t // W (blocks are whole warps)
    sub_w, first_w, len_w, start_w = (v.reshape(shape) for v in (sub, first, length, start))
    steps = shfl(warp_max(len_w), 0)[:, :1]
    assert (steps == len_w.max(1, keepdims=True)).all()
    acc = np.zeros(len_w.shape, acc_dtype)
    for base in range(0, int(steps.max(initial=0)), lanes):
        q = base + sub_w
        ok = (q < len_w) & (base < steps)
        p = np.where(ok, start_w + q, 0)
        prod = np.where(ok, data[p].astype(acc_dtype) * x[indices[p]].astype(acc_dtype),
                        acc_dtype(0))
        for s in range(lanes):
            v = shfl(prod, first_w + s)
            take = (sub_w == 0) & (base + s < len_w) & (base < steps)
            acc = np.where(take, acc + v, acc)
    y = np.full(m, -1, data.dtype)
    keep = (sub_w == 0) & live.reshape(shape)
    y[i.reshape(shape)[keep]] = acc[keep].astype(data.dtype)
    return y, lanes


def _sequential(a, x, acc_dtype):
    """Each row summed from zero in storage order (the scalar kernel's and SciPy's)."""
    y = np.zeros(a.shape[0], acc_dtype)
    for r in range(a.shape[0]):
        s = acc_dtype(0)
        for p in range(a.indptr[r], a.indptr[r + 1]):
            s = acc_dtype(s + acc_dtype(a.data[p]) * acc_dtype(x[a.indices[p]]))
        y[r] = s
    return y


@pytest.mark.parametrize("warp", WIDTHS)
@pytest.mark.parametrize("density", [0.002, 0.05, 0.5])
def test_spmv_warp_sums_rows_in_storage_order(warp, density):
    rng = np.random.default_rng(int(density * 1000))
    m, n = 203, 150
    a = scipy.sparse.random(m, n, density=density, format="csr", random_state=rng,
                            dtype=np.float32, data_rvs=rng.standard_normal)
    a.indices = a.indices.astype(np.int32)
    x = rng.standard_normal(n).astype(np.float32)
    y, lanes = emulate_spmv_warp(a, x, warp)
    assert 2 <= lanes <= min(cu_sparse.MAX_LANES, warp)
    np.testing.assert_array_equal(y, _sequential(a, x, np.float32))  # bit for bit
    np.testing.assert_allclose(y, a.astype(np.float64) @ x.astype(np.float64), rtol=1e-4,
                               atol=1e-5 * np.abs(a).sum(1).max())


@pytest.mark.parametrize("warp", WIDTHS)
def test_spmv_warp_integers_wrap_and_uneven_rows(warp):
    rng = np.random.default_rng(5)
    m, n = 97, 300
    dense = np.zeros((m, n), np.int32)
    for r in range(m):  # row lengths 0 .. 299, so a warp's rows differ in length
        cols = rng.choice(n, size=(r * 37) % n, replace=False)
        dense[r, cols] = rng.integers(-2**30, 2**30, cols.size)
    a = scipy.sparse.csr_array(dense)
    x = rng.integers(-2**20, 2**20, n).astype(np.int32)
    with np.errstate(over="ignore"):
        y, _ = emulate_spmv_warp(a, x, warp, acc_dtype=np.uint32)
        ref = (dense.astype(np.uint32) * x.astype(np.uint32)).sum(1, dtype=np.uint32)
    np.testing.assert_array_equal(y, ref.astype(np.int32))  # modulo 2**32, as NumPy's


# ---- Adafactor's row, column, batch and RMS sums (optim.cu) -------------------------------


def _walk(local, C, block, count):
    """optim.cu's Walker: (r, c) of the elements local, local + block, ... (count of them)."""
    r, c = local // C, local - (local // C) * C
    dr, dc = block // C, block - (block // C) * C
    out = []
    for _ in range(count):
        out.append((r, c))
        c += dc
        r += dr
        if c >= C:
            c -= C
            r += 1
    return out


def _block_partials(values, items, block, warp, vec=lambda t: 1):
    """The partial sums of items (t, lo, cnt, slot) over ``values[t]`` (flat): thread i
    adds the groups of vec(t) elements i, i + BLOCK, ... (each group's in order), then the
    elements past the last whole group, lo + groups*vec + i, ... BLOCK apart; then
    block_sum."""
    parts = {}
    for t, lo, cnt, slot in items:
        v = values[t].ravel()[lo:lo + cnt]
        w = vec(t)
        whole = cnt // w * w
        acc = np.zeros(block, v.dtype)
        per = block * w
        runs = -(-whole // per)
        padded = np.zeros(runs * per, v.dtype)
        padded[:whole] = v[:whole]
        x = padded.reshape(runs, block, w)
        for r in range(runs):
            for e in range(w):
                acc = acc + x[r, :, e]
        tail = v[whole:]
        runs = -(-tail.size // block)
        padded = np.zeros(runs * block, v.dtype)
        padded[:tail.size] = tail
        for r in range(runs):
            acc = acc + padded[r * block:(r + 1) * block]
        parts[slot] = block_sum(acc, warp)
    return parts


def _sum_parts(parts, base, total, block, warp, dtype):
    acc = np.zeros(block, dtype)
    for j0 in range(0, total, block):
        chunk = np.zeros(block, dtype)
        chunk[:min(block, total - j0)] = [parts[base + j] for j in range(j0, min(total,
                                                                                 j0 + block))]
        acc = acc + chunk
    return block_sum(acc, warp)


SHAPES = [(3, 5, 70), (130, 17), (1000,), (2, 40, 3), (9000,), (1, 1), (4, 1, 200),
          (2, 70, 300), (2, 37, 1030), (20, 1024), (70, 1000)]


@pytest.mark.parametrize("warp", WIDTHS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adafactor_sums(warp, dtype):
    rng = np.random.default_rng(warp)
    grads = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    params = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    lay = cu_optim.adafactor_layout(SHAPES, warp)
    block = cu_optim.BLOCK
    tol = 64 * EPS[dtype]
    rows_mean = {t: np.full(math.prod(s[:-1]), np.nan, dtype) for t, s in enumerate(SHAPES)}
    colpart = np.full(max(lay.n_cp, 1), np.nan, dtype)
    cols_mean = {t: np.full(math.prod(s[:-2]) * s[-1], np.nan, dtype) if len(s) > 1 else None
                 for t, s in enumerate(SHAPES)}
    for word, i1, i2, i3 in lay.stats:
        kind, t = int(word) >> 32, int(word) & 0xFFFFFFFF
        shape = SHAPES[t]
        if kind == cu_optim.K_ROWS:
            B, R, C = cu_optim.factored_dims(shape)
            g = grads[t].reshape(B * R, C)
            G = cu_optim._pow2_at_least(C, warp)  # row_lanes<WARP>(C)
            tid = np.arange(block)
            for base in range(0, int(i2), block // G):
                r = base + tid // G
                sub = tid % G
                s = np.zeros(block, dtype)
                for k in range(-(-C // G)):
                    c = sub + k * G
                    ok = (r < i2) & (c < C)
                    gv = g[np.where(ok, i1 + r, 0), np.where(ok, c, 0)]
                    s = np.where(ok, s + gv * gv, s)
                s = group_sum(s.reshape(-1, warp), G).ravel()
                done = (sub == 0) & (r < i2)
                rows_mean[t][i1 + r[done]] = s[done] / dtype(C)
        elif kind == cu_optim.K_TILE:
            # rows i1 .. i1 + i2 of (B*R, C), every column; a thread's columns (16-byte
            # groups where C allows) tid, tid + BLOCK, ... in order, its column sums over
            # the tile's rows in row order into the slot i3, its row shares to block_sum
            B, R, C = cu_optim.factored_dims(shape)
            g = grads[t].reshape(B * R, C)
            vec = 16 // np.dtype(dtype).itemsize
            vec = vec if C % vec == 0 else 1
            sq = g[i1:i1 + i2] * g[i1:i1 + i2]
            cs = np.zeros(C, dtype)
            for r in range(int(i2)):
                cs = cs + sq[r]
            colpart[int(i3):int(i3) + C] = cs
            per = block * vec
            runs = -(-C // per)
            for r in range(int(i2)):
                padded = np.zeros(runs * per, dtype)
                padded[:C] = sq[r]
                x = padded.reshape(runs, block, vec)  # x[k, tid, e]: column (k*BLOCK+tid)*vec+e
                acc = np.zeros(block, dtype)
                for k in range(runs):
                    for e in range(vec):
                        acc = acc + x[k, :, e]
                shares = warp_sum(acc.reshape(block // warp, warp))[:, 0]
                tot = shares[0]
                for j in range(1, block // warp):  # the warps' shares in warp order
                    tot = dtype(tot + shares[j])
                rows_mean[t][i1 + r] = tot / dtype(C)
        elif kind == cu_optim.K_COLS:
            B, R, C = cu_optim.factored_dims(shape)
            g = grads[t].reshape(B, R, C)
            TC = cu_optim._pow2_at_least(C, cu_optim.COL_TILE)  # tile_cols(C)
            RL = block // TC
            tid = np.arange(block)
            cx, ry = tid % TC, tid // TC
            c = i2 + cx
            red = np.zeros(block, dtype)
            for k in range(-(-R // RL)):
                r = ry + k * RL
                ok = (cx < i3) & (r < R)
                gv = g[i1, np.where(ok, r, 0), np.where(ok, c, 0)]
                red = np.where(ok, red + gv * gv, red)
            for x_ in range(int(i3)):
                tot = red[x_]
                for j in range(1, RL):
                    tot = dtype(tot + red[j * TC + x_])
                cols_mean[t][i1 * C + i2 + x_] = tot / dtype(R)
    # The column moments of tiled tensors: K_CFIN items of phase 2 over the tiles' sums,
    # BLOCK / COL_TILE threads per column adding tiles ry, ry + RL, ..., then in thread order.
    RL = block // cu_optim.COL_TILE
    for word, b, c0, nc in lay.rmean:
        if int(word) >> 32 != cu_optim.K_CFIN:
            continue
        t = int(word) & 0xFFFFFFFF
        B, R, C = cu_optim.factored_dims(SHAPES[t])
        base, tpb = lay.tinfo[t, 10], lay.tinfo[t, 11]
        for cx in range(int(nc)):
            c = c0 + cx
            part = [dtype(0)] * RL
            for ry in range(RL):
                for k in range(ry, int(tpb), RL):
                    part[ry] = dtype(part[ry] + colpart[base + (b * tpb + k) * C + c])
            tot = part[0]
            for j in range(1, RL):
                tot = dtype(tot + part[j])
            cols_mean[t][b * C + c] = tot / dtype(R)
    for t, s in enumerate(SHAPES):
        if len(s) < 2:
            continue
        g2 = grads[t].astype(np.float64) ** 2
        np.testing.assert_allclose(rows_mean[t], g2.mean(-1).ravel(), rtol=tol)
        np.testing.assert_allclose(cols_mean[t], g2.mean(-2).ravel(), rtol=tol)
    # The RMS of p: K_PSQ partial sums, then the tensor's sum_parts.
    psq = [(int(w) & 0xFFFFFFFF, lo, cnt, slot) for w, lo, cnt, slot in lay.stats
           if int(w) >> 32 == cu_optim.K_PSQ]
    width = 16 // np.dtype(dtype).itemsize  # K_PSQ: 16-byte groups, then the tail
    parts = _block_partials([p * p for p in params], psq, block, warp, lambda t: width)
    assert sorted(parts) == list(range(lay.n_ps))
    for t, s in enumerate(SHAPES):
        tot = _sum_parts(parts, lay.tinfo[t, 4], lay.tinfo[t, 5], block, warp, dtype)
        ref = (params[t].astype(np.float64) ** 2).sum()
        assert abs(tot - ref) <= tol * ref
    # The batch means of the row moments: one warp per batch.
    rmean = {}
    lane, w = np.arange(block) % warp, np.arange(block) // warp
    for word, b0, nb, _ in lay.rmean:
        if int(word) >> 32 != cu_optim.K_RMEAN:
            continue
        t = int(word)
        B, R, C = cu_optim.factored_dims(SHAPES[t])
        row = rows_mean[t]
        for base in range(0, int(nb), block // warp):
            b = base + w
            s = np.zeros(block, dtype)
            for k in range(-(-R // warp)):
                r = lane + k * warp
                ok = (b < nb) & (r < R)
                s = np.where(ok, s + row[np.where(ok, (b0 + b) * R + r, 0)], s)
            s = warp_sum(s.reshape(-1, warp)).ravel()
            done = (lane == 0) & (b < nb)
            for bb, v in zip(b[done], s[done]):
                rmean[(t, b0 + bb)] = v / dtype(R)
    for t, s in enumerate(SHAPES):
        if len(s) >= 2:
            B, R, C = cu_optim.factored_dims(s)
            ref = rows_mean[t].astype(np.float64).reshape(B, R).mean(1)
            np.testing.assert_allclose([rmean[(t, b)] for b in range(B)], ref, rtol=tol)
    # The U^2 and update items: a factored tensor's lie in one batch, and the Walker visits
    # each element's (r, c); then the partial sums of U^2.
    us = [tuple(item) for item in lay.update]
    for t, lo, cnt, slot in np.concatenate([lay.update, lay.apply]):
        s = SHAPES[t]
        if len(s) >= 2:
            B, R, C = cu_optim.factored_dims(s)
            b = lo // (R * C)
            assert (lo + cnt - 1) // (R * C) == b
            for tid in range(min(block, int(cnt))):
                n_here = len(range(tid, int(cnt), block))
                walked = _walk(lo - b * R * C + tid, C, block, n_here)
                want = [divmod(int(lo - b * R * C + i), C) for i in range(tid, int(cnt), block)]
                assert walked == want
            # the 16-byte groups (C a multiple of the width): group q's first element,
            # and the whole group inside that row
            for vec in (2, 4):
                if C % vec:
                    continue
                assert lo % vec == 0 and cnt % vec == 0
                for tid in range(min(block, int(cnt) // vec)):
                    qs = range(tid, int(cnt) // vec, block)
                    walked = _walk(lo - b * R * C + tid * vec, C, block * vec, len(qs))
                    want = [divmod(int(lo - b * R * C + q * vec), C) for q in qs]
                    assert walked == want and all(c + vec <= C for _, c in walked)
    u = [g / np.sqrt(np.maximum(np.abs(g), 1e-3)).astype(g.dtype) for g in grads]

    def u_width(t):  # usq's groups: factored tensors whose C makes whole 16-byte groups
        s = SHAPES[t]
        return width if len(s) >= 2 and s[-1] % width == 0 else 1

    parts = _block_partials([v * v for v in u], us, block, warp, u_width)
    for t in range(len(SHAPES)):
        tot = _sum_parts(parts, lay.tinfo[t, 6], lay.tinfo[t, 7], block, warp, dtype)
        ref = (u[t].astype(np.float64) ** 2).sum()
        assert abs(tot - ref) <= tol * ref


# ---- attention forward: a tile of W keys, one per lane (attention.cu) ----------------------


def emulate_attention_fwd(q, k, v, scale, causal, warp):
    """tessera_attention_fwd<T, ACC, warp, _per_lane(Dv, warp)> for one (b, h): the rows of
    each block of ROWS, tiles of W keys (lane = key), the online softmax through the
    warp's max and sum, output dims dv0 + u*W + lane over the passes."""
    sq, d = q.shape
    sk, dv = v.shape
    acc = q.dtype.type
    N = cu_attention._per_lane(dv, warp)
    rpw, nwarps = 4, cu_attention.NWARPS
    rows = nwarps * rpw
    assert rows == cu_attention.ROWS
    lo, hi = band(causal, None, sq, sk)
    passes = -(-dv // (N * warp)) if dv > N * warp else 1
    out = np.full((sq, dv), np.nan, q.dtype)
    lse = np.full(sq, np.nan, q.dtype)
    lane = np.arange(warp)
    qs = (q * acc(scale)).astype(acc)
    for i0 in range(0, sq, rows):
        i1 = min(i0 + rows, sq)
        ja = min(max(i0 + lo, 0), sk)
        jb = min(max(i1 - 1 + hi + 1, 0), sk)
        i = i0 + np.arange(nwarps)[:, None] * rpw + np.arange(rpw)[None, :]  # (warp, r)
        for p in range(passes):
            dv0 = p * N * warp
            m = np.full((nwarps, rpw), -np.inf, acc)
            l_ = np.zeros((nwarps, rpw), acc)
            o = np.zeros((nwarps, rpw, N, warp), acc)
            for jt in range(ja, jb, warp):
                n = min(warp, jb - jt)
                j = jt + lane
                qi = qs[np.minimum(i, sq - 1)]  # (warp, r, d); rows past Sq are masked
                kj = k[np.minimum(j, sk - 1)].astype(acc)  # (lane, d)
                s = np.zeros((nwarps, rpw, warp), acc)
                for c in range(d):
                    s = s + qi[..., c:c + 1] * kj[:, c]
                vis = (lane < n) & (i[..., None] < sq) & (j < sk) \
                    & (j - i[..., None] >= lo) & (j - i[..., None] <= hi)
                x = np.where(vis, s, acc(-np.inf))
                mx = shfl(warp_max(x), 0)[..., 0]
                m_new = np.where((mx > m) | np.isnan(mx), mx, m)
                m_safe = np.where(m_new == -np.inf, acc(0), m_new)
                with np.errstate(invalid="ignore"):
                    pr = np.exp(x - m_safe[..., None])
                    alpha = np.exp(m - m_safe)
                l_ = alpha * l_ + shfl(warp_sum(pr), 0)[..., 0]
                m = m_new
                o = o * alpha[..., None, None]
                for u in range(N):
                    c0 = dv0 + u * warp
                    if c0 >= dv:
                        break
                    cols = c0 + lane
                    vt = np.where((cols < dv)[None, :],
                                  v[np.minimum(jt + np.arange(n), sk - 1)][:, np.minimum(cols,
                                                                                         dv - 1)],
                                  0).astype(acc)  # (t, lane)
                    for t in range(n):
                        o[:, :, u, :] = o[:, :, u, :] + pr[:, :, t][..., None] * vt[t]
            for w in range(nwarps):
                for r in range(rpw):
                    row = i[w, r]
                    if row >= sq:
                        continue
                    seen = l_[w, r] > 0
                    for u in range(N):
                        cols = dv0 + u * warp + lane
                        ok = cols < dv
                        out[row, cols[ok]] = o[w, r, u, ok] / l_[w, r] if seen else 0
                    if p == 0:
                        lse[row] = m[w, r] + np.log(l_[w, r]) if seen else -np.inf
    return out, lse, N, passes


def _attention_ref(q, k, v, scale, causal):
    sq, sk = q.shape[0], k.shape[0]
    lo, hi = band(causal, None, sq, sk)
    s = (q.astype(np.float64) * scale) @ k.astype(np.float64).T
    dist = np.arange(sk)[None, :] - np.arange(sq)[:, None]
    s = np.where((dist >= lo) & (dist <= hi), s, -np.inf)
    mx = s.max(1, keepdims=True)
    seen = np.isfinite(mx[:, 0])
    e = np.exp(s - np.where(np.isfinite(mx), mx, 0))
    lsum = e.sum(1, keepdims=True)
    out = np.where(seen[:, None], (e / np.where(lsum > 0, lsum, 1)) @ v, 0)
    lse = np.where(seen, mx[:, 0] + np.log(np.where(lsum[:, 0] > 0, lsum[:, 0], 1)), -np.inf)
    return out, lse


@pytest.mark.parametrize("warp", WIDTHS)
@pytest.mark.parametrize("sq, sk, d, dv, causal", [
    (37, 45, 16, 24, None),          # tiles of W keys, the last one partial
    (21, 70, 8, 80, "top_left"),     # N > 1 at W=32; some keys past every query's band
    (19, 9, 4, 300, "bottom_right"),  # Dv > 8*W at W=32: two passes; rows seeing no key
])
def test_attention_fwd_tiles_and_lanes(warp, sq, sk, d, dv, causal):
    rng = np.random.default_rng(sq * dv)
    q = rng.standard_normal((sq, d)).astype(np.float32)
    k = rng.standard_normal((sk, d)).astype(np.float32)
    v = rng.standard_normal((sk, dv)).astype(np.float32)
    scale = 1 / math.sqrt(d)
    out, lse, N, passes = emulate_attention_fwd(q, k, v, scale, causal, warp)
    assert N == cu_attention._per_lane(dv, warp)
    assert passes == (2 if (warp, dv) == (32, 300) else 1)
    ref, ref_lse = _attention_ref(q, k, v, scale, causal)
    assert not np.isnan(out).any() and not np.isnan(lse).any()  # every element written
    np.testing.assert_allclose(out, ref, rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(lse, ref_lse, rtol=2e-5, atol=2e-5)
    if causal == "bottom_right":  # sq > sk: the first sq - sk rows see no key
        assert (lse[:sq - sk] == -np.inf).all() and (out[:sq - sk] == 0).all()


# ---- attention backward: dq over key tiles, dk/dv over query tiles (attention.cu) ---------

def _block_rows(r0, nwarps=cu_attention.NWARPS, rpw=4):
    """The (warp, r) rows of a block starting at r0: r0 + warp * RPW + r."""
    return r0 + np.arange(nwarps)[:, None] * rpw + np.arange(rpw)[None, :]


def _cols_pass(lane, base, N, warp, width):
    """The (u, lane) output columns base + u*W + lane of one pass, and which exist."""
    cols = base + np.arange(N)[:, None] * warp + lane[None, :]
    return cols, cols < width


def emulate_attention_bwd(q, k, v, o, do, lse, scale, causal, warp):
    """tessera_attention_bwd_dq then tessera_attention_bwd_dkdv for one (b, h): each
    lane one key (dq) or one query (dk/dv) of a tile of W, the delta warp sums, the
    passes over the output columns."""
    sq, d = q.shape
    sk, dv = v.shape
    acc = q.dtype.type
    rows = cu_attention.ROWS
    lo, hi = band(causal, None, sq, sk)
    lane = np.arange(warp)
    qs = (q * acc(scale)).astype(acc)
    dq = np.full((sq, d), np.nan, q.dtype)
    delta = np.full(sq, np.nan, acc)

    def dots(a_rows, b_rows):  # (warp, r, d) . (lane, d) in column order
        s = np.zeros(a_rows.shape[:2] + (b_rows.shape[0],), acc)
        for c in range(a_rows.shape[-1]):
            s = s + a_rows[..., c:c + 1] * b_rows[:, c]
        return s

    N = cu_attention._per_lane(d, warp)
    passes = -(-d // (N * warp)) if d > N * warp else 1
    for i0 in range(0, sq, rows):
        i = _block_rows(i0)
        i1 = min(i0 + rows, sq)
        ja, jb = min(max(i0 + lo, 0), sk), min(max(i1 - 1 + hi + 1, 0), sk)
        ic = np.minimum(i, sq - 1)
        part = np.zeros(i.shape + (warp,), acc)
        for k0 in range(0, dv, warp):  # d = lane, lane + W, ...
            dd = k0 + lane
            ok = (dd < dv) & (i[..., None] < sq)
            ddc = np.minimum(dd, dv - 1)
            part = np.where(ok, part + do[ic][..., ddc].astype(acc) * o[ic][..., ddc].astype(acc),
                            part)
        dl = shfl(warp_sum(part), 0)[..., 0]
        ls = np.where(i < sq, lse[ic], np.inf)
        ls = np.where(ls == -np.inf, np.inf, ls)
        delta[i[i < sq]] = dl[i < sq]
        for p in range(passes):
            d0 = p * N * warp
            g = np.zeros(i.shape + (N, warp), acc)
            for jt in range(ja, jb, warp):
                n = min(warp, jb - jt)
                j = jt + lane
                jc = np.minimum(j, sk - 1)
                s = dots(qs[ic], k[jc].astype(acc))
                dp = dots(do[ic].astype(acc), v[jc].astype(acc))
                vis = (lane < n) & (i[..., None] < sq) & (j < sk) \
                    & (j - i[..., None] >= lo) & (j - i[..., None] <= hi)
                x = np.where(vis, s, -np.inf)
                with np.errstate(invalid="ignore"):
                    pr = np.exp(x - ls[..., None])
                ps = pr * (dp - dl[..., None])
                cols, ok = _cols_pass(lane, d0, N, warp, d)
                kt = np.where(ok[None], k[np.minimum(jt + np.arange(n), sk - 1)][:, np.minimum(
                    cols, d - 1)], 0).astype(acc)  # (t, u, lane)
                for t in range(n):
                    g = g + ps[..., t][..., None, None] * kt[t]
            cols, ok = _cols_pass(lane, d0, N, warp, d)
            for w_, r in zip(*np.nonzero(i < sq)):
                dq[i[w_, r], cols[ok]] = (g[w_, r] * acc(scale))[ok]
    dk = np.full((sk, d), np.nan, q.dtype)
    dvv = np.full((sk, dv), np.nan, q.dtype)
    N = cu_attention._per_lane(max(d, dv), warp)
    widest = max(d, dv)
    passes = -(-widest // (N * warp)) if widest > N * warp else 1
    for j0 in range(0, sk, rows):
        j = _block_rows(j0)
        j1 = min(j0 + rows, sk)
        ia, ib = min(max(j0 - hi, 0), sq), min(max(j1 - 1 - lo + 1, 0), sq)
        jc = np.minimum(j, sk - 1)
        for p in range(passes):
            c0 = p * N * warp
            gk = np.zeros(j.shape + (N, warp), acc)
            gv = np.zeros(j.shape + (N, warp), acc)
            for it in range(ia, ib, warp):
                n = min(warp, ib - it)
                i = it + lane
                ic = np.minimum(i, sq - 1)
                s = dots(k[jc].astype(acc), qs[ic])
                dp = dots(v[jc].astype(acc), do[ic].astype(acc))
                li = np.where(lane < n, lse[ic], np.inf)
                li = np.where(li == -np.inf, np.inf, li)
                di = np.where(lane < n, delta[ic], 0)
                vis = (lane < n) & (i < sq) & (j[..., None] < sk) \
                    & (j[..., None] - i >= lo) & (j[..., None] - i <= hi)
                x = np.where(vis, s, -np.inf)
                with np.errstate(invalid="ignore"):
                    pr = np.exp(x - li)
                st = pr * (dp - di)
                it_rows = np.minimum(it + np.arange(n), sq - 1)
                cols, okv = _cols_pass(lane, c0, N, warp, dv)
                dot_ = np.where(okv[None], do[it_rows][:, np.minimum(cols, dv - 1)], 0).astype(acc)
                cols_k, okk = _cols_pass(lane, c0, N, warp, d)
                qt = np.where(okk[None], qs[it_rows][:, np.minimum(cols_k, d - 1)], 0)
                for t in range(n):
                    gv = gv + pr[..., t][..., None, None] * dot_[t]
                    gk = gk + st[..., t][..., None, None] * qt[t]
            cols_k, okk = _cols_pass(lane, c0, N, warp, d)
            cols_v, okv = _cols_pass(lane, c0, N, warp, dv)
            for w_, r in zip(*np.nonzero(j < sk)):
                dk[j[w_, r], cols_k[okk]] = gk[w_, r][okk]
                dvv[j[w_, r], cols_v[okv]] = gv[w_, r][okv]
    return dq, dk, dvv


def _attention_bwd_ref(q, k, v, do, scale, causal):
    sq, sk = q.shape[0], k.shape[0]
    q, k, v, do = (a.astype(np.float64) for a in (q, k, v, do))
    lo, hi = band(causal, None, sq, sk)
    dist = np.arange(sk)[None, :] - np.arange(sq)[:, None]
    s = np.where((dist >= lo) & (dist <= hi), (q * scale) @ k.T, -np.inf)
    mx = s.max(1, keepdims=True)
    e = np.exp(s - np.where(np.isfinite(mx), mx, 0))
    lsum = e.sum(1, keepdims=True)
    p = e / np.where(lsum > 0, lsum, 1)
    o = p @ v
    dp = do @ v.T
    ds = p * (dp - (do * o).sum(1, keepdims=True))
    return ds @ k * scale, ds.T @ (q * scale), p.T @ do, o


@pytest.mark.parametrize("warp", WIDTHS)
@pytest.mark.parametrize("sq, sk, d, dv, causal", [
    (37, 45, 16, 24, None),
    (21, 70, 80, 8, "top_left"),      # N > 1 at W=32, D > Dv
    (23, 9, 6, 300, "bottom_right"),  # dk/dv passes at W=32; queries that see no key
])
def test_attention_bwd_tiles_and_lanes(warp, sq, sk, d, dv, causal):
    rng = np.random.default_rng(sq * d)
    q = rng.standard_normal((sq, d)).astype(np.float32)
    k = rng.standard_normal((sk, d)).astype(np.float32)
    v = rng.standard_normal((sk, dv)).astype(np.float32)
    do = rng.standard_normal((sq, dv)).astype(np.float32)
    scale = 1 / math.sqrt(d)
    out, lse, _, _ = emulate_attention_fwd(q, k, v, scale, causal, warp)
    dq, dk, dv_ = emulate_attention_bwd(q, k, v, out, do, lse, scale, causal, warp)
    rdq, rdk, rdv, _ = _attention_bwd_ref(q, k, v, do, scale, causal)
    for got, ref in ((dq, rdq), (dk, rdk), (dv_, rdv)):
        assert not np.isnan(got).any()  # every element written
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * max(1, np.abs(ref).max()))
