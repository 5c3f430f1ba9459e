// optim.cu: multi-tensor optimizer steps (SGD, Adam/AdamW, Adafactor), in place, each
//           phase one launch over every tensor of a call (backends/_cupy/optim.py).
//
// Computes   PyTorch's updates in the NumPy backend's exact order of operations
//            (backends/numpy/optim.py): every product, sum, quotient and square root is
//            rounded once in T, in the same sequence, with the hyperparameters already
//            rounded to T by the host as NumPy rounds a Python float against a float32
//            array. SGD and Adam/AdamW therefore match the NumPy backend bit for bit
//            (subnormal float32 values aside, where the compile flushes them).
//            tessera_nonfinite: flags the gradients holding a NaN or an inf.
// Layout     Each call passes a table of work items (int64 quadruples, one block per
//            item) and a pointer table: ptrs[k*ntensors + t] is the address of array k of
//            tensor t (SGD: p, g, momentum buffer; Adam: p, g, m, v, max v; Adafactor: p,
//            g, row, col, variance; 0 where absent). Tensors are contiguous. Elementwise
//            items are (t, lo, cnt, slot): elements [lo, lo + cnt) of tensor t, cnt <=
//            the launcher's chunk. Adafactor's item word 0 also holds the item's kind in
//            its upper 32 bits; its factored moments are kept as the NumPy backend keeps
//            them: p of shape (B, R, C) (leading axes flattened into B), row[b, r] at
//            row[b*R + r], col[b, c] at col[b*C + c]; tinfo[TI*t + ...] holds each
//            tensor's sizes and its slots in the call's scratch (TI_* below).
// Launch     1-D blocks of BLOCK threads (a multiple of WARP, at most WARP warps), one
//            block per item, grid = the item count. Every kernel first reads *skip when
//            skip is not null (the flag tessera_nonfinite raised) and then does nothing,
//            so check_finite costs no host round trip before the update.
//            Adafactor runs four launches: stats (row and column means of g^2 and the
//            moments' decay, the unfactored moments, partial sums of p^2), rmean (the mean
//            of each batch's row moments), usq (partial sums of U^2) and apply. The
//            partial sums of a tensor are added by its last block to finish (a
//            __threadfence() and an atomic count per tensor, the count zeroed by the
//            launcher), in slot order, so the result does not depend on which block
//            finishes last.
// Accumulates in T: float32 math for float32, double for float64. The row, batch and RMS
//            sums: each thread adds a strided run in order, then the threads' sums meet in
//            a tree (group_sum, warp_sum, block_sum; the RMS partial sums of a tensor once
//            more so in its last block); the column sums: each thread a strided run of
//            rows, then the BLOCK / tile_cols(C) runs of a column in thread order. The RMS
//            values, alpha and alpha / max(1, RMS(U)/d) are then computed in double from
//            those sums, as the NumPy backend computes them from its float32 dot.
// Numerics   NaN propagates through maxima as np.maximum's does. Adafactor's sums run in
//            another order than NumPy's pairwise sums and BLAS dot: a few ulp.
// Reference  SGD: torch.optim.SGD; Adam: D. P. Kingma and J. Ba, "Adam: A Method for
//            Stochastic Optimization", ICLR 2015; AdamW: I. Loshchilov and F. Hutter,
//            "Decoupled Weight Decay Regularization", ICLR 2019; Adafactor: N. Shazeer
//            and M. Stern, "Adafactor: Adaptive Learning Rates with Sublinear Memory
//            Cost", ICML 2018 (R_t, C_t, V_t = R_t C_t / mean(R_t), U = g / sqrt(V),
//            alpha_t = max(eps2, RMS(p)) rho_t, p -= alpha_t U / max(1, RMS(U)/d)), as
//            torch.optim.Adafactor.

#include "tessera/types.cuh"
#include "tessera/warp.cuh"

namespace tessera {

// Launch flags (bit masks); the same bits as backends/_cupy/optim.py.
enum {
    F_MAXIMIZE = 1,
    F_WEIGHT_DECAY = 2,
    F_MOMENTUM = 4,
    F_FIRST = 8,
    F_NESTEROV = 16,
    F_DECOUPLED = 32,
    F_AMSGRAD = 64,
    F_LERP_HIGH = 128,
};

// Adafactor's item kinds (upper 32 bits of an item's first word).
// Phase 1: K_ROWS, K_COLS, K_VAR, K_PSQ, K_TILE; phase 2: K_RMEAN, K_CFIN.
enum { K_RMEAN = 0, K_ROWS = 1, K_COLS = 2, K_VAR = 3, K_PSQ = 4, K_CFIN = 5, K_TILE = 6 };

// Rows per K_TILE item: one pass over them gives their row sums and their partial column
// sums (the launcher's TILE_ROWS).
constexpr int TILE_ROWS = 16;

// 16-byte loads a thread issues before using them in the p^2 and U^2 sums: one at a time
// kept ~16 KB in flight an SM and ran the U^2 phase at 2.4 TB/s on the H200 (NOTES.md).
constexpr int IN_FLIGHT = 4;

// Adafactor's per-tensor table: tinfo[TI*t + field].
enum {
    TI_N = 0,       // elements
    TI_B = 1,       // leading batch (product of the axes before the last two)
    TI_R = 2,       // rows (axis -2)
    TI_C = 3,       // columns (axis -1)
    TI_PS_BASE = 4, // first slot of the partial sums of p^2
    TI_PS_N = 5,    // their count
    TI_US_BASE = 6, // first slot of the partial sums of U^2
    TI_US_N = 7,    // their count
    TI_RM_BASE = 8, // first entry of the batch means of the row moments
    TI_FACTORED = 9,
    TI_CP_BASE = 10, // first element of the K_TILE column partial sums (0: none)
    TI_TPB = 11,     // K_TILE items (row tiles) per batch (0: K_ROWS and K_COLS items)
    TI = 12,
};

__device__ __forceinline__ float div_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double div_rn(double a, double b) { return __ddiv_rn(a, b); }
__device__ __forceinline__ float sqrt_rn(float a) { return __fsqrt_rn(a); }
__device__ __forceinline__ double sqrt_rn(double a) { return __dsqrt_rn(a); }

// np.maximum(a, b): NaN when either is; a when they compare equal.
template <typename T> __device__ __forceinline__ T nan_max(T a, T b)
{
    return (a >= b || a != a) ? a : b;
}

__device__ __forceinline__ bool is_finite(float v)
{
    return (__float_as_uint(v) & 0x7f800000u) != 0x7f800000u;
}
__device__ __forceinline__ bool is_finite(double v)
{
    return (__double_as_longlong(v) & 0x7ff0000000000000LL) != 0x7ff0000000000000LL;
}

template <typename T>
__device__ __forceinline__ T *table_ptr(const long long *ptrs, long long ntensors, int k,
                                        long long t)
{
    return reinterpret_cast<T *>(ptrs[k * ntensors + t]);
}

// a <- lerp(a, b, w) with torch's two-sided formula, w rounded to T by the host: a +
// (b - a) w for w < 0.5, else b - (b - a) (1 - w) (wt is then 1 - w).
template <typename T> __device__ __forceinline__ T lerp(T a, T b, T wt, bool high)
{
    const T d = sub(b, a);
    return high ? sub(b, mul(d, wt)) : add(a, mul(d, wt));
}

// The sum over the first `lanes` lanes of each group of `lanes` (a power of two <= WARP),
// in the group's first lane; every lane of the warp calls it with the same lanes.
template <int WARP, typename T> __device__ __forceinline__ T group_sum(T v, int lanes)
{
    for (int delta = lanes / 2; delta > 0; delta >>= 1) v = add(v, shfl_down<WARP>(v, delta));
    return v;
}

// Columns per tile of the column sums at most: a tile's consecutive columns are read by
// consecutive threads (coalesced rows of g); a tile width, not a warp width (the block's
// BLOCK / tile_cols(C) threads per column are whole warps of any width).
constexpr int COL_TILE = 32;

// Lanes per row of the row sums (the power of two >= C, at most WARP), and columns per
// tile of the column sums (the power of two >= C, at most COL_TILE). The launcher mirrors
// both: row_lanes to size its row items, tile_cols to cut the columns into tiles.
template <int WARP> __device__ __forceinline__ int row_lanes(long long C)
{
    int g = 1;
    while (g < WARP && g < C) g <<= 1;
    return g;
}
__device__ __forceinline__ int tile_cols(long long C)
{
    int g = 1;
    while (g < COL_TILE && g < C) g <<= 1;
    return g;
}

// Stores this block's partial sum in part[slot] and counts the block in *count; true
// (in every thread) in the block that finishes the tensor's `total` partial sums.
template <typename T>
__device__ __forceinline__ bool finish_part(T s, T *part, long long slot, int *count,
                                            long long total, int *last)
{
    if (threadIdx.x == 0) {
        part[slot] = s;
        __threadfence();  // the partial sum is visible device-wide before the count
        *last = atomicAdd(count, 1) == (int)(total - 1);
    }
    __syncthreads();
    const bool done = *last != 0;
    if (done) __threadfence();
    return done;
}

// The sum of part[0 .. total) in a fixed order (thread t: parts t, t + BLOCK, ..., then
// block_sum), in thread 0. Volatile loads: the parts were written by other blocks.
template <int WARP, int BLOCK, typename T>
__device__ __forceinline__ T sum_parts(const T *part, long long total, T *scratch)
{
    const volatile T *vp = part;
    T acc = zero<T>();
    for (long long j = threadIdx.x; j < total; j += BLOCK) acc = add(acc, vp[j]);
    return block_sum<WARP, BLOCK>(acc, scratch);
}

// The elements of an Adafactor update item of a factored tensor: the item lies in one
// batch b; a thread walks its elements (r, c) of that batch BLOCK apart, carrying the
// row/column position instead of dividing per element.
struct Walker {
    long long r, c, dr, dc, C;
    __device__ __forceinline__ Walker(long long local, long long C_, int block) : C(C_)
    {
        r = local / C;
        c = local - r * C;
        dr = block / C;
        dc = block - dr * C;
    }
    __device__ __forceinline__ void next()
    {
        c += dc;
        r += dr;
        if (c >= C) {
            c -= C;
            r += 1;
        }
    }
};

}  // namespace tessera

// ---- SGD ------------------------------------------------------------------------------

template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
tessera_sgd_step(const long long *items, const long long *ptrs, const long long ntensors,
                 const int flags, const T lr, const T momentum, const T keep, const T wd,
                 const int *skip)
{
    using namespace tessera;
    if (skip != nullptr && *skip != 0) return;
    const long long *it = items + 4 * (long long)blockIdx.x;
    const long long t = it[0], lo = it[1], cnt = it[2];
    T *p = table_ptr<T>(ptrs, ntensors, 0, t) + lo;
    const T *g = table_ptr<const T>(ptrs, ntensors, 1, t) + lo;
    T *buf = (flags & F_MOMENTUM) ? table_ptr<T>(ptrs, ntensors, 2, t) + lo : nullptr;
    for (long long i = threadIdx.x; i < cnt; i += BLOCK) {
        T d = g[i];
        if (flags & F_MAXIMIZE) d = -d;
        if (flags & F_WEIGHT_DECAY) d = add(d, mul(p[i], wd));
        if (flags & F_MOMENTUM) {
            // first step: buf = d; then buf = buf*momentum + d*(1 - dampening)
            const T b = (flags & F_FIRST) ? d : add(mul(buf[i], momentum), mul(d, keep));
            buf[i] = b;
            d = (flags & F_NESTEROV) ? add(d, mul(b, momentum)) : b;
        }
        p[i] = sub(p[i], mul(d, lr));
    }
}

// ---- Adam / AdamW ---------------------------------------------------------------------

template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
tessera_adam_step(const long long *items, const long long *ptrs, const long long ntensors,
                  const int flags, const T wd, const T keep, const T one_b1, const T beta2,
                  const T one_b2, const T bc2_sqrt, const T eps, const T step_size,
                  const int *skip)
{
    using namespace tessera;
    if (skip != nullptr && *skip != 0) return;
    const long long *it = items + 4 * (long long)blockIdx.x;
    const long long t = it[0], lo = it[1], cnt = it[2];
    T *p = table_ptr<T>(ptrs, ntensors, 0, t) + lo;
    const T *g = table_ptr<const T>(ptrs, ntensors, 1, t) + lo;
    T *m = table_ptr<T>(ptrs, ntensors, 2, t) + lo;
    T *v = table_ptr<T>(ptrs, ntensors, 3, t) + lo;
    T *vmax = (flags & F_AMSGRAD) ? table_ptr<T>(ptrs, ntensors, 4, t) + lo : nullptr;
    for (long long i = threadIdx.x; i < cnt; i += BLOCK) {
        T d = g[i];
        if (flags & F_MAXIMIZE) d = -d;
        T pi = p[i];
        if (flags & F_WEIGHT_DECAY) {
            if (flags & F_DECOUPLED)
                pi = mul(pi, keep);  // AdamW: p *= 1 - lr*weight_decay
            else
                d = add(d, mul(pi, wd));  // Adam: g + weight_decay*p
        }
        const T mi = add(m[i], mul(sub(d, m[i]), one_b1));    // lerp(m, d, 1 - beta1)
        const T vi = add(mul(v[i], beta2), mul(mul(d, d), one_b2));
        m[i] = mi;
        v[i] = vi;
        T den;
        if (flags & F_AMSGRAD) {
            const T vm = nan_max(vmax[i], vi);
            vmax[i] = vm;
            den = sqrt_rn(vm);
        } else {
            den = sqrt_rn(vi);
        }
        den = add(div_rn(den, bc2_sqrt), eps);
        p[i] = sub(pi, mul(div_rn(mi, den), step_size));
    }
}

// ---- check_finite ---------------------------------------------------------------------

// flags[0] = 1 when any gradient holds a NaN or an inf, flags[1 + t] = 1 for each such t
// (flags zeroed by the launcher; every writer stores the same 1).
template <typename T, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
tessera_nonfinite(const long long *items, const long long *gptrs, int *flags)
{
    const long long *it = items + 4 * (long long)blockIdx.x;
    const long long t = it[0], lo = it[1], cnt = it[2];
    const T *g = reinterpret_cast<const T *>(gptrs[t]) + lo;
    bool bad = false;
    for (long long i = threadIdx.x; i < cnt; i += BLOCK) bad |= !tessera::is_finite(g[i]);
    if (bad) {
        flags[0] = 1;
        flags[1 + t] = 1;
    }
}

// ---- Adafactor ------------------------------------------------------------------------

// Phase 1. Items: K_TILE (t, first row, rows, column-sum slot) for wide factored tensors
// (C >= the launcher's TILE_MIN_C: g read once for both moments), see below; otherwise
// K_ROWS (t, first row, rows): the row means of g^2 over the last axis
// (row_lanes(C) lanes per row) and row <- lerp(row, mean, rate); K_COLS (t, b, first
// column, columns): column means over the rows of batch b for up to tile_cols(C) columns
// (BLOCK / tile_cols(C) threads per column, then their sums in thread order) and col <-
// lerp(col, mean, rate); K_VAR (t, lo, cnt): var <- lerp(var, g^2, rate); K_PSQ (t, lo,
// cnt, slot): the partial sum of p^2, and in the tensor's last block alpha[t] =
// max(eps2, RMS(p)) * rho in double.
template <typename T, int WARP, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
tessera_adafactor_stats(const long long *items, const long long *tinfo, const long long *ptrs,
                        const long long ntensors, const int flags, const T wt,
                        const double eps2, const double rho, T *psum, int *counts,
                        double *alpha, T *colpart, const int *skip)
{
    using namespace tessera;
    __shared__ T red[BLOCK];
    __shared__ int last;
    if (skip != nullptr && *skip != 0) return;
    const long long *it = items + 4 * (long long)blockIdx.x;
    const int kind = (int)(it[0] >> 32);
    const long long t = it[0] & 0xffffffffLL;
    const long long *ti = tinfo + TI * t;
    const long long R = ti[TI_R], C = ti[TI_C];
    const bool high = (flags & F_LERP_HIGH) != 0;
    const T *g = table_ptr<const T>(ptrs, ntensors, 1, t);
    if (kind == K_ROWS) {
        T *row = table_ptr<T>(ptrs, ntensors, 2, t);
        const int G = row_lanes<WARP>(C);
        const int sub_lane = threadIdx.x % G;
        const long long r0 = it[1], nr = it[2];
        for (long long base = 0; base < nr; base += BLOCK / G) {  // block-uniform
            const long long r = base + threadIdx.x / G;
            T s = zero<T>();
            if (r < nr) {
                const T *gr = g + (r0 + r) * C;
                for (long long c = sub_lane; c < C; c += G) s = add(s, mul(gr[c], gr[c]));
            }
            s = group_sum<WARP>(s, G);
            if (sub_lane == 0 && r < nr)
                row[r0 + r] = lerp(row[r0 + r], div_rn(s, (T)C), wt, high);
        }
    } else if (kind == K_COLS) {
        T *col = table_ptr<T>(ptrs, ntensors, 3, t);
        const int TC = tile_cols(C), RL = BLOCK / TC;
        const int cx = threadIdx.x % TC, ry = threadIdx.x / TC;
        const long long b = it[1], c = it[2] + cx, nc = it[3];
        T s = zero<T>();
        if (cx < nc) {
            const T *gb = g + b * R * C + c;
            for (long long r = ry; r < R; r += RL) s = add(s, mul(gb[r * C], gb[r * C]));
        }
        red[threadIdx.x] = s;
        __syncthreads();
        if (ry == 0 && cx < nc) {
            T tot = red[cx];
            for (int j = 1; j < RL; ++j) tot = add(tot, red[j * TC + cx]);
            col[b * C + c] = lerp(col[b * C + c], div_rn(tot, (T)R), wt, high);
        }
    } else if (kind == K_TILE) {
        // rows [r0, r0 + nr) of one batch (nr <= TILE_ROWS), every column: a thread takes
        // the columns (or 16-byte groups of them) tid, tid + BLOCK, ..., reading its
        // column of each row in row order; its column sums go to colpart[it[3] + c] (the
        // tile's slot), its share of each row sum meets the other threads' in block_sum.
        constexpr int VEC = 16 / sizeof(T);
        T *row = table_ptr<T>(ptrs, ntensors, 2, t);
        const long long r0 = it[1], nr = it[2];
        const T *gt = g + r0 * C;
        T *cp = colpart + it[3];
        T rs[TILE_ROWS];
#pragma unroll
        for (int r = 0; r < TILE_ROWS; ++r) rs[r] = zero<T>();
        if (C % VEC == 0 && aligned16(g) && aligned16(cp)) {
            for (long long q = threadIdx.x; q < C / VEC; q += BLOCK) {
                vec16<T> cs;
#pragma unroll
                for (int e = 0; e < VEC; ++e) cs.v[e] = zero<T>();
#pragma unroll
                for (int r = 0; r < TILE_ROWS; ++r) {
                    if (r < nr) {
                        const vec16<T> v = reinterpret_cast<const vec16<T> *>(gt + r * C)[q];
#pragma unroll
                        for (int e = 0; e < VEC; ++e) {
                            const T sq = mul(v.v[e], v.v[e]);
                            rs[r] = add(rs[r], sq);
                            cs.v[e] = add(cs.v[e], sq);
                        }
                    }
                }
                reinterpret_cast<vec16<T> *>(cp)[q] = cs;
            }
        } else {
            for (long long c = threadIdx.x; c < C; c += BLOCK) {
                T cs = zero<T>();
#pragma unroll
                for (int r = 0; r < TILE_ROWS; ++r) {
                    if (r < nr) {
                        const T v = gt[r * C + c];
                        const T sq = mul(v, v);
                        rs[r] = add(rs[r], sq);
                        cs = add(cs, sq);
                    }
                }
                cp[c] = cs;
            }
        }
        // each warp's share of each row (warp_sum), then thread r < nr adds the warps'
        // shares of row r in warp order: one barrier for the tile's rows
        static_assert(TILE_ROWS * (BLOCK / WARP) <= BLOCK, "the row shares fit red");
        const int lane = threadIdx.x % WARP, w = threadIdx.x / WARP;
#pragma unroll
        for (int r = 0; r < TILE_ROWS; ++r) {
            const T v = warp_sum<WARP>(rs[r]);
            if (lane == 0) red[r * (BLOCK / WARP) + w] = v;
        }
        __syncthreads();
        if (threadIdx.x < nr) {
            const int r = threadIdx.x;
            T tot = red[r * (BLOCK / WARP)];
            for (int j = 1; j < BLOCK / WARP; ++j) tot = add(tot, red[r * (BLOCK / WARP) + j]);
            row[r0 + r] = lerp(row[r0 + r], div_rn(tot, (T)C), wt, high);
        }
    } else if (kind == K_VAR) {
        T *var = table_ptr<T>(ptrs, ntensors, 4, t);
        const long long lo = it[1], cnt = it[2];
        for (long long i = threadIdx.x; i < cnt; i += BLOCK) {
            const T gv = g[lo + i];
            var[lo + i] = lerp(var[lo + i], mul(gv, gv), wt, high);
        }
    } else if (kind == K_PSQ) {
        const T *p = table_ptr<const T>(ptrs, ntensors, 0, t);
        const long long lo = it[1], cnt = it[2], slot = it[3];
        T s = zero<T>();
        constexpr int VEC = 16 / sizeof(T);
        long long i0 = 0;  // the elements past the 16-byte groups, one at a time
        if (aligned16(p + lo)) {
            const vec16<T> *pv = reinterpret_cast<const vec16<T> *>(p + lo);
            const long long nq = cnt / VEC;
            long long q = threadIdx.x;
            for (; q + (IN_FLIGHT - 1) * BLOCK < nq; q += IN_FLIGHT * BLOCK) {
                vec16<T> v[IN_FLIGHT];  // the loads first, then the sums in q order
#pragma unroll
                for (int k = 0; k < IN_FLIGHT; ++k) v[k] = pv[q + k * BLOCK];
#pragma unroll
                for (int k = 0; k < IN_FLIGHT; ++k)
#pragma unroll
                    for (int e = 0; e < VEC; ++e) s = add(s, mul(v[k].v[e], v[k].v[e]));
            }
            for (; q < nq; q += BLOCK) {
                const vec16<T> v = pv[q];
#pragma unroll
                for (int e = 0; e < VEC; ++e) s = add(s, mul(v.v[e], v.v[e]));
            }
            i0 = cnt / VEC * VEC;
        }
        for (long long i = i0 + threadIdx.x; i < cnt; i += BLOCK)
            s = add(s, mul(p[lo + i], p[lo + i]));
        s = block_sum<WARP, BLOCK>(s, red);
        if (finish_part(s, psum, slot, counts + t, ti[TI_PS_N], &last)) {
            const T tot = sum_parts<WARP, BLOCK>(psum + ti[TI_PS_BASE], ti[TI_PS_N], red);
            if (threadIdx.x == 0) {
                const long long n = ti[TI_N] > 1 ? ti[TI_N] : 1;
                const double rms = __dsqrt_rn(__ddiv_rn((double)tot, (double)n));
                alpha[t] = __dmul_rn(rms > eps2 ? rms : eps2, rho);  // Python's max(eps2, rms)
            }
        }
    }
}

// Phase 2. K_RMEAN items (t, first batch, batches): one warp per batch b of a factored
// tensor: rmean[rm_base + b] = max(mean_r row[b, r], eps1) (np.maximum). K_CFIN items
// (t, b, first column, columns <= COL_TILE) of a tensor with K_TILE items: its column
// moments from the tiles' partial sums, BLOCK / COL_TILE threads per column each adding
// the tiles k = ry, ry + BLOCK / COL_TILE, ... in order, then their sums in thread order,
// col <- lerp(col, sum / R, rate).
template <typename T, int WARP, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
tessera_adafactor_rmean(const long long *items, const long long *tinfo, const long long *ptrs,
                        const long long ntensors, const int flags, const T wt, const T e1,
                        T *rmean, const T *colpart, const int *skip)
{
    using namespace tessera;
    __shared__ T red[BLOCK];
    if (skip != nullptr && *skip != 0) return;
    const long long *it = items + 4 * (long long)blockIdx.x;
    const int kind = (int)(it[0] >> 32);
    const long long t = it[0] & 0xffffffffLL;
    const long long *ti = tinfo + TI * t;
    const long long R = ti[TI_R];
    if (kind == K_CFIN) {
        const long long C = ti[TI_C], tpb = ti[TI_TPB];
        T *col = table_ptr<T>(ptrs, ntensors, 3, t);
        constexpr int RL = BLOCK / COL_TILE;
        const int cx = threadIdx.x % COL_TILE, ry = threadIdx.x / COL_TILE;
        const long long b = it[1], c = it[2] + cx, nc = it[3];
        const T *cp = colpart + ti[TI_CP_BASE] + b * tpb * C + c;
        T s = zero<T>();
        if (cx < nc)
            for (long long k = ry; k < tpb; k += RL) s = add(s, cp[k * C]);
        red[threadIdx.x] = s;
        __syncthreads();
        if (ry == 0 && cx < nc) {
            T tot = red[cx];
            for (int j = 1; j < RL; ++j) tot = add(tot, red[j * COL_TILE + cx]);
            col[b * C + c] = lerp(col[b * C + c], div_rn(tot, (T)R), wt,
                                  (flags & F_LERP_HIGH) != 0);
        }
        return;
    }
    const long long b0 = it[1], nb = it[2];
    const T *row = table_ptr<const T>(ptrs, ntensors, 2, t);
    const int lane = threadIdx.x % WARP, w = threadIdx.x / WARP;
    for (long long base = 0; base < nb; base += BLOCK / WARP) {  // block-uniform
        const long long b = base + w;
        T s = zero<T>();
        if (b < nb)
            for (long long r = lane; r < R; r += WARP) s = add(s, row[(b0 + b) * R + r]);
        s = warp_sum<WARP>(s);
        if (lane == 0 && b < nb) rmean[ti[TI_RM_BASE] + b0 + b] = nan_max(div_rn(s, (T)R), e1);
    }
}

namespace tessera {

// U at one element: g / sqrt(max(V, eps1^2)), V = row*col/rmean (factored) or var.
template <typename T>
__device__ __forceinline__ T adafactor_u(T gv, T v, T e1sq, bool maximize)
{
    if (maximize) gv = -gv;
    return div_rn(gv, sqrt_rn(nan_max(v, e1sq)));
}

// U^2 at one element, for the RMS sum only: g^2 * w with w = 1/max(V, eps1^2), given as
// 1/V (`inv_v`) and clamped to 1/eps1^2 (NaN kept): one division an element where U itself
// (apply) takes two and a square root; the sum differs from the sum of apply's U*U by a
// few ulp a term, as its order does (NOTES.md).
template <typename T>
__device__ __forceinline__ T adafactor_usq_term(T gv, T inv_v, T inv_e1sq)
{
    const T w = inv_v > inv_e1sq ? inv_e1sq : inv_v;
    return mul(mul(gv, gv), w);
}

}  // namespace tessera

// Phase 3. Items (t, lo, cnt, slot), lying in one batch for factored tensors: the partial
// sum of U^2; the tensor's last block sets scale[t] = alpha[t] / max(1, RMS(U)/d). Where
// a factored tensor's C is a multiple of VEC (16 bytes of T) and g (apply: p too) and its
// columns are 16-byte aligned, a thread takes groups q = tid, tid + BLOCK, ... of VEC
// elements (one row each: one row moment, one 16-byte load of g, col and p); else single
// elements tid, tid + BLOCK, ... (the single-element loops were bound by their
// instruction count on the H200, not by memory: NOTES.md).
template <typename T, int WARP, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
tessera_adafactor_usq(const long long *items, const long long *tinfo, const long long *ptrs,
                      const long long ntensors, const int flags, const T e1sq,
                      const T *rmean, T *usum, int *counts, const double d,
                      const double *alpha, double *scale, const int *skip)
{
    using namespace tessera;
    constexpr int VEC = 16 / sizeof(T);
    __shared__ T red[BLOCK / WARP];
    __shared__ int last;
    if (skip != nullptr && *skip != 0) return;
    const long long *it = items + 4 * (long long)blockIdx.x;
    const long long t = it[0] & 0xffffffffLL, lo = it[1], cnt = it[2], slot = it[3];
    const long long *ti = tinfo + TI * t;
    const T *g = table_ptr<const T>(ptrs, ntensors, 1, t);
    const T one = T(1), ie1sq = div_rn(one, e1sq);
    T s = zero<T>();
    if (ti[TI_FACTORED]) {
        const long long R = ti[TI_R], C = ti[TI_C], RC = R * C;
        const long long b = lo / RC;
        const T *row = table_ptr<const T>(ptrs, ntensors, 2, t) + b * R;
        const T *col = table_ptr<const T>(ptrs, ntensors, 3, t) + b * C;
        const T rm = rmean[ti[TI_RM_BASE] + b];
        if (C % VEC == 0 && aligned16(g + lo) && aligned16(col)) {
            // groups of VEC elements, each in one row (C and lo are multiples of VEC)
            const vec16<T> *gv = reinterpret_cast<const vec16<T> *>(g + lo);
            Walker w(lo - b * RC + threadIdx.x * VEC, C, BLOCK * VEC);
            const long long nq = cnt / VEC;
            long long q = threadIdx.x;
            for (; q + (IN_FLIGHT - 1) * BLOCK < nq; q += IN_FLIGHT * BLOCK) {
                vec16<T> gq[IN_FLIGHT];  // the loads of g first, then the terms in q order
#pragma unroll
                for (int k = 0; k < IN_FLIGHT; ++k) gq[k] = gv[q + k * BLOCK];
#pragma unroll
                for (int k = 0; k < IN_FLIGHT; ++k, w.next()) {
                    const vec16<T> cq = *reinterpret_cast<const vec16<T> *>(col + w.c);
                    const T rr = div_rn(rm, row[w.r]);  // 1/V = (rmean / row) / col
#pragma unroll
                    for (int e = 0; e < VEC; ++e)
                        s = add(s, adafactor_usq_term(gq[k].v[e], div_rn(rr, cq.v[e]), ie1sq));
                }
            }
            for (; q < nq; q += BLOCK, w.next()) {
                const vec16<T> gq = gv[q], cq = *reinterpret_cast<const vec16<T> *>(col + w.c);
                const T rr = div_rn(rm, row[w.r]);
#pragma unroll
                for (int e = 0; e < VEC; ++e)
                    s = add(s, adafactor_usq_term(gq.v[e], div_rn(rr, cq.v[e]), ie1sq));
            }
        } else {
            Walker w(lo - b * RC + threadIdx.x, C, BLOCK);
            for (long long i = threadIdx.x; i < cnt; i += BLOCK, w.next())
                s = add(s, adafactor_usq_term(g[lo + i], div_rn(div_rn(rm, row[w.r]), col[w.c]),
                                              ie1sq));
        }
    } else {
        const T *var = table_ptr<const T>(ptrs, ntensors, 4, t);
        for (long long i = threadIdx.x; i < cnt; i += BLOCK)
            s = add(s, adafactor_usq_term(g[lo + i], div_rn(one, var[lo + i]), ie1sq));
    }
    s = block_sum<WARP, BLOCK>(s, red);
    if (finish_part(s, usum, slot, counts + t, ti[TI_US_N], &last)) {
        const T tot = sum_parts<WARP, BLOCK>(usum + ti[TI_US_BASE], ti[TI_US_N], red);
        if (threadIdx.x == 0) {
            const long long n = ti[TI_N] > 1 ? ti[TI_N] : 1;
            const double q = __ddiv_rn(__dsqrt_rn(__ddiv_rn((double)tot, (double)n)), d);
            scale[t] = __ddiv_rn(alpha[t], q > 1.0 ? q : 1.0);  // Python's max(1.0, q)
        }
    }
}

// Phase 4. Items (t, lo, cnt, 0) as phase 3's, shorter for a factored tensor (optim.py's
// APPLY_CHUNK against USQ_CHUNK): p <- p * (1 - lr*weight_decay) - U * T(scale[t]).
template <typename T, int WARP, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
tessera_adafactor_apply(const long long *items, const long long *tinfo, const long long *ptrs,
                        const long long ntensors, const int flags, const T e1sq, const T keep,
                        const T *rmean, const double *scale, const int *skip)
{
    using namespace tessera;
    constexpr int VEC = 16 / sizeof(T);
    if (skip != nullptr && *skip != 0) return;
    const long long *it = items + 4 * (long long)blockIdx.x;
    const long long t = it[0] & 0xffffffffLL, lo = it[1], cnt = it[2];
    const long long *ti = tinfo + TI * t;
    const bool maximize = (flags & F_MAXIMIZE) != 0, decay = (flags & F_WEIGHT_DECAY) != 0;
    T *p = table_ptr<T>(ptrs, ntensors, 0, t);
    const T *g = table_ptr<const T>(ptrs, ntensors, 1, t);
    const T sc = (T)scale[t];
    if (ti[TI_FACTORED]) {
        const long long R = ti[TI_R], C = ti[TI_C], RC = R * C;
        const long long b = lo / RC;
        const T *row = table_ptr<const T>(ptrs, ntensors, 2, t) + b * R;
        const T *col = table_ptr<const T>(ptrs, ntensors, 3, t) + b * C;
        const T rm = rmean[ti[TI_RM_BASE] + b];
        if (C % VEC == 0 && aligned16(g + lo) && aligned16(p + lo) && aligned16(col)) {
            const vec16<T> *gv = reinterpret_cast<const vec16<T> *>(g + lo);
            vec16<T> *pv = reinterpret_cast<vec16<T> *>(p + lo);
            Walker w(lo - b * RC + threadIdx.x * VEC, C, BLOCK * VEC);
            for (long long q = threadIdx.x; q < cnt / VEC; q += BLOCK, w.next()) {
                const vec16<T> gq = gv[q], cq = *reinterpret_cast<const vec16<T> *>(col + w.c);
                vec16<T> pq = pv[q];
                const T rq = row[w.r];
#pragma unroll
                for (int e = 0; e < VEC; ++e) {
                    const T u = adafactor_u(gq.v[e], div_rn(mul(rq, cq.v[e]), rm), e1sq,
                                            maximize);
                    const T pe = decay ? mul(pq.v[e], keep) : pq.v[e];
                    pq.v[e] = sub(pe, mul(u, sc));
                }
                pv[q] = pq;
            }
        } else {
            Walker w(lo - b * RC + threadIdx.x, C, BLOCK);
            for (long long i = threadIdx.x; i < cnt; i += BLOCK, w.next()) {
                const T u = adafactor_u(g[lo + i], div_rn(mul(row[w.r], col[w.c]), rm), e1sq,
                                        maximize);
                const T pv = decay ? mul(p[lo + i], keep) : p[lo + i];
                p[lo + i] = sub(pv, mul(u, sc));
            }
        }
    } else {
        const T *var = table_ptr<const T>(ptrs, ntensors, 4, t);
        for (long long i = threadIdx.x; i < cnt; i += BLOCK) {
            const T u = adafactor_u(g[lo + i], var[lo + i], e1sq, maximize);
            const T pv = decay ? mul(p[lo + i], keep) : p[lo + i];
            p[lo + i] = sub(pv, mul(u, sc));
        }
    }
}
