// attention.cu: attention forward and backward, FlashAttention-2's tiled recurrence.
//
// What it computes (Dao 2023, "FlashAttention-2", Algorithms 1 and 2, the paper's
// notation): per (bh, query row i), S_ij = (scale q_i) . k_j (+ the additive mask; -inf
// where the bool mask or the causal/window band hides key j), the online softmax with
// the running max m_i and the running sum l_i of exp(S_ij - m_i):
//     m' = max(m, rowmax(S));  P = exp(S - m');  a = exp(m - m')
//     l  = a l + rowsum(P)                      (the undropped sum)
//     O  = a O + (P * Z) V                      (Z = keep / (1 - p): dropout, else 1)
// then out_i = O_i / l_i and lse_i = m_i + log(l_i). Backward, from the forward's lse
// (P = exp(S - lse), no softmax statistics kept) and delta_i = dO_i . O_i:
//     dP = (dO V^T) * Z;  dS = P * (dP - delta)
//     tessera_attention_bwd_dq:   dQ_i = scale * sum_j dS_ij k_j   (and delta, for the next)
//     tessera_attention_bwd_dkdv: dV_j = sum_i P_ij Z_ij dO_i,  dK_j = sum_i dS_ij (scale q_i)
// Dropout keep decisions come from tessera/philox.cuh with the element counter
// c = (bh*Sq + i)*Sk + j: bit-identical to the CPU's masks, and the backward rebuilds the
// forward's mask. A row that sees no key (fully masked) gives out 0, lse -inf and zero
// gradients, as the NumPy backend does. dK/dV are per QUERY head (shape (BH, Sk, D)):
// under GQA the launcher's front end sums the G query heads of each KV head.
//
// Layout and strides: q (.., Sq, D), k (.., Sk, D), v (.., Sk, Dv), mask (.., Sq, Sk)
//   and, in the backward pass, out/dout (.., Sq, Dv) and lse (.., Sq) are read through a
//   per-bh table of element offsets (offs, int64 (BH, 8): q, k, v, mask, out, dout, lse,
//   unused; any leading layout, GQA's stride-0 broadcast KV heads and negative strides
//   included) plus a row stride and a column stride each (elements, int64). The results
//   out (BH, Sq, Dv), lse (BH, Sq), dq (BH, Sq, D), dk (BH, Sk, D), dv (BH, Sk, Dv) and
//   the scratch delta (BH, Sq) are C-contiguous. Row and column indices are 32-bit (the
//   launcher keeps Sq, Sk, D, Dv below 2**31 - 4096); element offsets are 64-bit.
// Launch geometry: blocks of NWARPS warps (NWARPS * WARP threads), 1-D grid; a block
//   serves items (bh, row block) in a grid-stride loop, items = BH * ceil(rows / ROWS)
//   with ROWS = NWARPS * RPW rows per block, RPW per warp (fwd, dq: query rows; dkdv: key
//   rows). Within a tile of WARP columns (keys for fwd/dq, queries for dkdv) lane l owns
//   column l for the scores (each lane a whole dot product, over chunks of DC staged in
//   shared memory), and lane l owns the output dims d = d0 + u*WARP + l (u < N) of the
//   accumulators (registers); head dims beyond N*WARP take further passes over the
//   keys (the scores are recomputed, the same bits each pass). Tiles outside the
//   causal/window band of a block are skipped. Shared memory is static: a staging buffer
//   of max(ROWS*DC + WARP*(DC+1), WARP*WARP) ACCs (the dot-product chunks and, in turn,
//   the column tiles) plus the warps' probability tiles, ROWS*WARP ACCs (dkdv: two);
//   at WARP 32: fwd, dq 8320 B (float) / 16640 B (double), dkdv 10368 / 20736 B; at
//   WARP 64 (HIP wave64) at most 48 KiB (dkdv, double).
// Accumulation: ACC (float for float32 storage, double for float64); inputs are
//   converted to ACC on load, scale*q is rounded in ACC (as the NumPy backend's qs).
// Numerical caveats: dot products sum in chunk order (not BLAS's), warp sums are a fixed
//   tree (tessera::warp_sum): run to run the same bits (no atomics anywhere, every output
//   element summed by one lane in a fixed order), differences from the CPU of rounding
//   size. exp/log are CUDA's (float: expf, logf, <= 2 ulp); float32 subnormals follow
//   the compile's -ftz (CuPy forces -ftz=true).
//
// Template parameters: T (storage: float, double), ACC (accumulation: float, double),
//   WARP (the device's warp width, from the launcher), N (output dims per lane per pass
//   over the keys: 1, 2, 4 or 8; the launcher picks the smallest N with N*WARP >= D, Dv).
// Run-time switches: mask_kind (0 none, 1 bool in bmask, 2 additive of T in amask),
//   dropout (0 or 1).

#include "tessera/philox.cuh"
#include "tessera/types.cuh"
#include "tessera/warp.cuh"

namespace tessera {
namespace attn {

constexpr int NWARPS = 4;             // warps per block
constexpr int RPW = 4;                // rows per warp
constexpr int ROWS = NWARPS * RPW;    // rows per block
constexpr int DC = 32;                // columns per staged dot-product chunk

// The staging buffer of a block: the dot-product chunks (as: ROWS x DC, bs: WARP x (DC+1))
// and, at other times, the column tile (cs: WARP x WARP) share it; every phase that writes
// it starts with a barrier after the previous phase's reads.
__host__ __device__ constexpr int stage_size(int warp)
{
    return ROWS * DC + warp * (DC + 1) > warp * warp ? ROWS * DC + warp * (DC + 1)
                                                      : warp * warp;
}

// The views of the staging buffer.
template <typename ACC, int WARP> struct Stage {
    ACC (*as)[DC];
    ACC (*bs)[DC + 1];
    ACC (*cs)[WARP];
    __device__ explicit Stage(ACC *buf)
        : as(reinterpret_cast<ACC (*)[DC]>(buf)),
          bs(reinterpret_cast<ACC (*)[DC + 1]>(buf + ROWS * DC)),
          cs(reinterpret_cast<ACC (*)[WARP]>(buf))
    {
    }
};

template <typename A> __device__ __forceinline__ A neg_inf();
template <> __device__ __forceinline__ float neg_inf<float>()
{
    return __int_as_float((int)0xff800000u);
}
template <> __device__ __forceinline__ double neg_inf<double>()
{
    return __longlong_as_double((long long)0xfff0000000000000ull);
}
template <typename A> __device__ __forceinline__ A pos_inf() { return -neg_inf<A>(); }

__device__ __forceinline__ float exp_(float x) { return expf(x); }
__device__ __forceinline__ double exp_(double x) { return exp(x); }
__device__ __forceinline__ float log_(float x) { return logf(x); }
__device__ __forceinline__ double log_(double x) { return log(x); }

// Every lane gets lane 0's v (the warp reductions of warp.cuh leave their result there).
template <int WARP, typename T> __device__ __forceinline__ T from_lane0(T v)
{
    return tessera::shfl<WARP>(v, 0);
}

// max(a, b), NaN propagating (as NumPy's maximum).
template <typename A> __device__ __forceinline__ A max_nan(A a, A b)
{
    return (b > a || b != b) ? b : a;
}

// A strided matrix of one bh: element (r, c) at p[r * sr + c * sc].
template <typename T> struct Mat {
    const T *p;
    long long sr, sc;
};

// sm[r][c] = ACC(M[r0 + r][c0 + c]) * mul for r < R, c < C; 0 where r0 + r >= nrows or
// c0 + c >= ncols. Called by every thread of the block (no barrier inside).
template <typename T, typename ACC, int R, int C, int LD>
__device__ __forceinline__ void stage(ACC (*sm)[LD], Mat<T> m, int r0, int nrows, int c0,
                                      int ncols, ACC mul)
{
    for (int t = threadIdx.x; t < R * C; t += blockDim.x) {
        const int r = t / C, c = t - r * C;
        const int row = r0 + r, col = c0 + c;
        ACC x = ACC(0);
        if (row < nrows && col < ncols)
            x = ACC(m.p[(long long)row * m.sr + (long long)col * m.sc]) * mul;
        sm[r][c] = x;
    }
}

// acc[r] += sum_{c < len} (a_mul A[a0 + w*RPW + r][c]) * (b_mul B[b0 + lane][c]) for the
// RPW rows of warp w and the row of B of each lane, through shared memory in chunks of DC
// columns (as: ROWS x DC, bs: WARP x (DC + 1), padded against bank conflicts). Rows
// >= a_end / b_end read as 0. Block-wide: every thread calls it with the same len.
template <typename T, typename ACC, int WARP>
__device__ __forceinline__ void dot_rows(ACC (&acc)[RPW], ACC (*as)[DC], ACC (*bs)[DC + 1],
                                         Mat<T> a, int a0, int a_end, ACC a_mul, Mat<T> b,
                                         int b0, int b_end, ACC b_mul, int len, int warp,
                                         int lane)
{
    for (int c0 = 0; c0 < len; c0 += DC) {
        __syncthreads();  // the previous readers of as/bs are done
        stage<T, ACC, ROWS, DC, DC>(as, a, a0, a_end, c0, len, a_mul);
        stage<T, ACC, WARP, DC, DC + 1>(bs, b, b0, b_end, c0, len, b_mul);
        __syncthreads();
        const ACC *arow = &as[warp * RPW][0];
        const ACC *brow = &bs[lane][0];
        if (len - c0 >= DC) {
#pragma unroll 8
            for (int c = 0; c < DC; ++c) {
                const ACC y = brow[c];
#pragma unroll
                for (int r = 0; r < RPW; ++r)
                    acc[r] += arow[r * DC + c] * y;
            }
        } else {
            const int dc = len - c0;
            for (int c = 0; c < dc; ++c) {
                const ACC y = brow[c];
#pragma unroll
                for (int r = 0; r < RPW; ++r)
                    acc[r] += arow[r * DC + c] * y;
            }
        }
    }
}

// acc[r][u] += sum_{t < n} w[w*RPW + r][t] * M[m0 + t][col0 + u*WARP + lane] for the
// column blocks u < N that start below ncols: each block of WARP columns of the n rows is
// staged in cs (WARP x WARP). w is the warp's probability (or dS) tile in shared memory,
// written by the warp's lanes before the call. Block-wide (uniform n, col0, ncols).
template <typename T, typename ACC, int WARP, int N>
__device__ __forceinline__ void accumulate_cols(ACC (&acc)[RPW][N], ACC (*cs)[WARP],
                                                const ACC (*w)[WARP], Mat<T> m, int m0,
                                                int n, int col0, int ncols, ACC mul,
                                                int warp, int lane)
{
#pragma unroll
    for (int u = 0; u < N; ++u) {
        const int c0 = col0 + u * WARP;
        if (c0 >= ncols)
            break;  // uniform across the block
        __syncthreads();  // the previous readers of cs are done; w is written
        stage<T, ACC, WARP, WARP, WARP>(cs, m, m0, m0 + n, c0, ncols, mul);
        __syncthreads();
        for (int t = 0; t < n; ++t) {
            const ACC y = cs[t][lane];
#pragma unroll
            for (int r = 0; r < RPW; ++r)
                acc[r][u] += w[warp * RPW + r][t] * y;
        }
    }
}

// The score of (i, j) from the dot product x: -inf outside [0, Sq) x [0, Sk), outside
// the band (band_lo <= j - i <= band_hi) or where the bool mask is False; plus the
// additive mask.
template <typename T, typename ACC>
__device__ __forceinline__ ACC masked(ACC x, int i, int j, int Sq, int Sk, long long band_lo,
                                      long long band_hi, int mask_kind,
                                      const unsigned char *bmask, const T *amask,
                                      long long mbase, long long m_sr, long long m_sc)
{
    if (i >= Sq || j >= Sk)
        return neg_inf<ACC>();
    const long long d = (long long)j - (long long)i;
    if (d < band_lo || d > band_hi)
        return neg_inf<ACC>();
    const long long at = mbase + (long long)i * m_sr + (long long)j * m_sc;
    if (mask_kind == 1) {
        if (!bmask[at])
            return neg_inf<ACC>();
    } else if (mask_kind == 2) {
        x += ACC(amask[at]);
    }
    return x;
}

__device__ __forceinline__ unsigned long long counter(long long bh, int Sq, int Sk, int i,
                                                      int j)
{
    return ((unsigned long long)bh * (unsigned long long)Sq + (unsigned long long)i) *
               (unsigned long long)Sk +
           (unsigned long long)j;
}

// Bit r set when element (i_r, j_r) of the RPW rows (query rows i0 + r, key j, or key rows
// j0 + r, query i: `rows_are_queries`) is kept by the dropout; entries outside the band or
// past the tile are left 0 (their probability is 0). One loop, not unrolled: one copy of
// the Philox rounds per kernel.
__device__ __forceinline__ unsigned int keep_bits(long long bh, int Sq, int Sk, int r0, int col,
                                                  bool col_valid, bool rows_are_queries,
                                                  long long band_lo, long long band_hi,
                                                  const PhiloxKey &key)
{
    unsigned int bits = 0;
#pragma unroll 1
    for (int r = 0; r < RPW; ++r) {
        const int i = rows_are_queries ? r0 + r : col;
        const int j = rows_are_queries ? col : r0 + r;
        const long long d = (long long)j - (long long)i;
        if (col_valid && i < Sq && j < Sk && d >= band_lo && d <= band_hi &&
            dropout_keep(counter(bh, Sq, Sk, i, j), key))
            bits |= 1u << r;
    }
    return bits;
}

// The keys [ja, jb) any of the queries [i0, i1) sees (the band's; may be empty).
__device__ __forceinline__ void key_range(int i0, int i1, int Sk, long long lo, long long hi,
                                          int &ja, int &jb)
{
    const long long a = (long long)i0 + lo, b = (long long)(i1 - 1) + hi + 1;
    ja = (int)(a < 0 ? 0 : (a > Sk ? Sk : a));
    jb = (int)(b < 0 ? 0 : (b > Sk ? Sk : b));
}

// The queries [ia, ib) that see any of the keys [j0, j1).
__device__ __forceinline__ void query_range(int j0, int j1, int Sq, long long lo,
                                            long long hi, int &ia, int &ib)
{
    const long long a = (long long)j0 - hi, b = (long long)(j1 - 1) - lo + 1;
    ia = (int)(a < 0 ? 0 : (a > Sq ? Sq : a));
    ib = (int)(b < 0 ? 0 : (b > Sq ? Sq : b));
}

}  // namespace attn
}  // namespace tessera

// The arguments every kernel takes.
#define TESSERA_ATTENTION_ARGS                                                             \
    const long long BH, const int Sq, const int Sk, const int D, const int Dv,             \
        const long long *__restrict__ offs, const T *__restrict__ q, const long long q_sr, \
        const long long q_sd, const T *__restrict__ k, const long long k_sr,               \
        const long long k_sd, const T *__restrict__ v, const long long v_sr,               \
        const long long v_sd, const int mask_kind, const unsigned char *__restrict__ bmask, \
        const T *__restrict__ amask, const long long m_sr, const long long m_sc,           \
        const long long band_lo, const long long band_hi, const ACC scale,                 \
        const int dropout, const unsigned int seed_lo, const unsigned int seed_hi,         \
        const unsigned int off_lo, const unsigned int off_hi, const unsigned int t8,       \
        const unsigned int frac, const ACC keep_scale

// The backward kernels' extra inputs: dout (.., Sq, Dv) and the forward's lse (.., Sq).
#define TESSERA_ATTENTION_GRAD_ARGS                                                        \
    const T *__restrict__ dout, const long long do_sr, const long long do_sd,              \
        const ACC *__restrict__ lse, const long long l_s

template <typename T, typename ACC, int WARP, int N>
__global__ void __launch_bounds__(tessera::attn::NWARPS *WARP)
    tessera_attention_fwd(TESSERA_ATTENTION_ARGS, T *__restrict__ out, ACC *__restrict__ lse_out)
{
    using namespace tessera::attn;
    __shared__ ACC stage_buf[stage_size(WARP)];
    const Stage<ACC, WARP> sm(stage_buf);
    __shared__ ACC ps[ROWS][WARP];
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const tessera::PhiloxKey key = {seed_lo, seed_hi, off_lo, off_hi, t8, frac};
    const int nblk = (Sq + ROWS - 1) / ROWS;
    const long long items = BH * nblk;
    const int passes = Dv > N * WARP ? (Dv + N * WARP - 1) / (N * WARP) : 1;

    for (long long item = blockIdx.x; item < items; item += gridDim.x) {
        const long long bh = item / nblk;
        const int i0 = (int)(item - bh * nblk) * ROWS;
        const int i1 = min(i0 + ROWS, Sq);
        const long long *ob = offs + 8 * bh;
        const Mat<T> qm = {q + ob[0], q_sr, q_sd}, km = {k + ob[1], k_sr, k_sd};
        const Mat<T> vm = {v + ob[2], v_sr, v_sd};
        const long long mbase = ob[3];
        int ja, jb;
        key_range(i0, i1, Sk, band_lo, band_hi, ja, jb);

        for (int pass = 0; pass < passes; ++pass) {
            const int dv0 = pass * N * WARP;
            ACC m[RPW], l[RPW], o[RPW][N];
#pragma unroll
            for (int r = 0; r < RPW; ++r) {
                m[r] = neg_inf<ACC>();
                l[r] = ACC(0);
#pragma unroll
                for (int u = 0; u < N; ++u)
                    o[r][u] = ACC(0);
            }
            for (int jt = ja; jt < jb; jt += WARP) {
                const int n = min(WARP, jb - jt);
                ACC s[RPW];
#pragma unroll
                for (int r = 0; r < RPW; ++r)
                    s[r] = ACC(0);
                dot_rows<T, ACC, WARP>(s, sm.as, sm.bs, qm, i0, i1, scale, km, jt, jt + n, ACC(1),
                                       D, warp, lane);
                const int j = jt + lane;
                const unsigned int kept =
                    dropout ? keep_bits(bh, Sq, Sk, i0 + warp * RPW, j, lane < n, true, band_lo,
                                        band_hi, key)
                            : 0u;
#pragma unroll
                for (int r = 0; r < RPW; ++r) {
                    const int i = i0 + warp * RPW + r;
                    const ACC x = lane < n ? masked<T, ACC>(s[r], i, j, Sq, Sk, band_lo,
                                                            band_hi, mask_kind, bmask, amask,
                                                            mbase, m_sr, m_sc)
                                           : neg_inf<ACC>();
                    const ACC mx = from_lane0<WARP>(tessera::warp_max<WARP>(x));
                    const ACC m_new = max_nan(m[r], mx);
                    // Rows that saw only masked keys so far keep m = -inf; shift them by 0.
                    const ACC m_safe = m_new == neg_inf<ACC>() ? ACC(0) : m_new;
                    const ACC p = exp_(x - m_safe);
                    const ACC alpha = exp_(m[r] - m_safe);
                    l[r] = alpha * l[r] + from_lane0<WARP>(tessera::warp_sum<WARP>(p));
                    m[r] = m_new;
#pragma unroll
                    for (int u = 0; u < N; ++u)
                        o[r][u] *= alpha;
                    ACC pz = p;
                    if (dropout)
                        pz = (kept >> r) & 1u ? p * keep_scale : ACC(0);
                    ps[warp * RPW + r][lane] = pz;
                }
                accumulate_cols<T, ACC, WARP, N>(o, sm.cs, ps, vm, jt, n, dv0, Dv, ACC(1), warp,
                                                 lane);
            }
#pragma unroll
            for (int r = 0; r < RPW; ++r) {
                const int i = i0 + warp * RPW + r;
                if (i >= Sq)
                    continue;
                const long long row = bh * Sq + i;
                const bool seen = l[r] > ACC(0);
#pragma unroll
                for (int u = 0; u < N; ++u) {
                    const int col = dv0 + u * WARP + lane;
                    if (col < Dv)
                        out[row * Dv + col] = seen ? T(o[r][u] / l[r]) : T(0);
                }
                if (pass == 0 && lane == 0)
                    lse_out[row] = seen ? m[r] + log_(l[r]) : neg_inf<ACC>();
            }
        }
    }
}

template <typename T, typename ACC, int WARP, int N>
__global__ void __launch_bounds__(tessera::attn::NWARPS *WARP)
    tessera_attention_bwd_dq(TESSERA_ATTENTION_ARGS, TESSERA_ATTENTION_GRAD_ARGS,
                             const T *__restrict__ o_in, const long long o_sr,
                             const long long o_sd, ACC *__restrict__ delta,
                             T *__restrict__ dq)
{
    using namespace tessera::attn;
    __shared__ ACC stage_buf[stage_size(WARP)];
    const Stage<ACC, WARP> sm(stage_buf);
    __shared__ ACC ps[ROWS][WARP];
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const tessera::PhiloxKey key = {seed_lo, seed_hi, off_lo, off_hi, t8, frac};
    const int nblk = (Sq + ROWS - 1) / ROWS;
    const long long items = BH * nblk;
    const int passes = D > N * WARP ? (D + N * WARP - 1) / (N * WARP) : 1;

    for (long long item = blockIdx.x; item < items; item += gridDim.x) {
        const long long bh = item / nblk;
        const int i0 = (int)(item - bh * nblk) * ROWS;
        const int i1 = min(i0 + ROWS, Sq);
        const long long *ob = offs + 8 * bh;
        const Mat<T> qm = {q + ob[0], q_sr, q_sd}, km = {k + ob[1], k_sr, k_sd};
        const Mat<T> vm = {v + ob[2], v_sr, v_sd};
        const long long mbase = ob[3];
        const Mat<T> om = {o_in + ob[4], o_sr, o_sd}, dom = {dout + ob[5], do_sr, do_sd};
        const ACC *lse_bh = lse + ob[6];
        int ja, jb;
        key_range(i0, i1, Sk, band_lo, band_hi, ja, jb);

        // delta_i = dO_i . O_i and the row's lse (+inf for a fully masked row: P = 0).
        ACC dl[RPW], ls[RPW];
#pragma unroll
        for (int r = 0; r < RPW; ++r) {
            const int i = i0 + warp * RPW + r;
            ACC part = ACC(0);
            if (i < Sq)
                for (int d = lane; d < Dv; d += WARP)
                    part += ACC(dom.p[(long long)i * dom.sr + (long long)d * dom.sc]) *
                            ACC(om.p[(long long)i * om.sr + (long long)d * om.sc]);
            dl[r] = from_lane0<WARP>(tessera::warp_sum<WARP>(part));
            ACC x = pos_inf<ACC>();
            if (i < Sq) {
                x = lse_bh[(long long)i * l_s];
                if (x == neg_inf<ACC>())
                    x = pos_inf<ACC>();
                if (lane == 0)
                    delta[bh * Sq + i] = dl[r];
            }
            ls[r] = x;
        }

        for (int pass = 0; pass < passes; ++pass) {
            const int d0 = pass * N * WARP;
            ACC g[RPW][N];
#pragma unroll
            for (int r = 0; r < RPW; ++r)
#pragma unroll
                for (int u = 0; u < N; ++u)
                    g[r][u] = ACC(0);
            for (int jt = ja; jt < jb; jt += WARP) {
                const int n = min(WARP, jb - jt);
                ACC s[RPW], dp[RPW];
#pragma unroll
                for (int r = 0; r < RPW; ++r) {
                    s[r] = ACC(0);
                    dp[r] = ACC(0);
                }
                dot_rows<T, ACC, WARP>(s, sm.as, sm.bs, qm, i0, i1, scale, km, jt, jt + n, ACC(1),
                                       D, warp, lane);
                dot_rows<T, ACC, WARP>(dp, sm.as, sm.bs, dom, i0, i1, ACC(1), vm, jt, jt + n,
                                       ACC(1), Dv, warp, lane);
                const int j = jt + lane;
                const unsigned int kept =
                    dropout ? keep_bits(bh, Sq, Sk, i0 + warp * RPW, j, lane < n, true, band_lo,
                                        band_hi, key)
                            : 0u;
#pragma unroll
                for (int r = 0; r < RPW; ++r) {
                    const int i = i0 + warp * RPW + r;
                    const ACC x = lane < n ? masked<T, ACC>(s[r], i, j, Sq, Sk, band_lo,
                                                            band_hi, mask_kind, bmask, amask,
                                                            mbase, m_sr, m_sc)
                                           : neg_inf<ACC>();
                    const ACC p = exp_(x - ls[r]);
                    ACC dpz = dp[r];
                    if (dropout)
                        dpz = (kept >> r) & 1u ? dpz * keep_scale : ACC(0);
                    ps[warp * RPW + r][lane] = p * (dpz - dl[r]);
                }
                accumulate_cols<T, ACC, WARP, N>(g, sm.cs, ps, km, jt, n, d0, D, ACC(1), warp,
                                                 lane);
            }
#pragma unroll
            for (int r = 0; r < RPW; ++r) {
                const int i = i0 + warp * RPW + r;
                if (i >= Sq)
                    continue;
                const long long row = bh * Sq + i;
#pragma unroll
                for (int u = 0; u < N; ++u) {
                    const int col = d0 + u * WARP + lane;
                    if (col < D)
                        dq[row * D + col] = T(g[r][u] * scale);
                }
            }
        }
    }
}

template <typename T, typename ACC, int WARP, int N>
__global__ void __launch_bounds__(tessera::attn::NWARPS *WARP)
    tessera_attention_bwd_dkdv(TESSERA_ATTENTION_ARGS, TESSERA_ATTENTION_GRAD_ARGS,
                               const ACC *__restrict__ delta, T *__restrict__ dk,
                               T *__restrict__ dv)
{
    using namespace tessera::attn;
    __shared__ ACC stage_buf[stage_size(WARP)];
    const Stage<ACC, WARP> sm(stage_buf);
    __shared__ ACC pt[ROWS][WARP];
    __shared__ ACC st[ROWS][WARP];
    const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
    const tessera::PhiloxKey key = {seed_lo, seed_hi, off_lo, off_hi, t8, frac};
    const int nblk = (Sk + ROWS - 1) / ROWS;
    const long long items = BH * nblk;
    const int widest = D > Dv ? D : Dv;
    const int passes = widest > N * WARP ? (widest + N * WARP - 1) / (N * WARP) : 1;

    for (long long item = blockIdx.x; item < items; item += gridDim.x) {
        const long long bh = item / nblk;
        const int j0 = (int)(item - bh * nblk) * ROWS;
        const int j1 = min(j0 + ROWS, Sk);
        const long long *ob = offs + 8 * bh;
        const Mat<T> qm = {q + ob[0], q_sr, q_sd}, km = {k + ob[1], k_sr, k_sd};
        const Mat<T> vm = {v + ob[2], v_sr, v_sd};
        const long long mbase = ob[3];
        const Mat<T> dom = {dout + ob[5], do_sr, do_sd};
        const ACC *lse_bh = lse + ob[6];
        const ACC *delta_bh = delta + bh * Sq;
        int ia, ib;
        query_range(j0, j1, Sq, band_lo, band_hi, ia, ib);

        for (int pass = 0; pass < passes; ++pass) {
            const int c0 = pass * N * WARP;
            ACC gk[RPW][N], gv[RPW][N];
#pragma unroll
            for (int r = 0; r < RPW; ++r)
#pragma unroll
                for (int u = 0; u < N; ++u) {
                    gk[r][u] = ACC(0);
                    gv[r][u] = ACC(0);
                }
            for (int it = ia; it < ib; it += WARP) {
                const int n = min(WARP, ib - it);
                ACC s[RPW], dp[RPW];
#pragma unroll
                for (int r = 0; r < RPW; ++r) {
                    s[r] = ACC(0);
                    dp[r] = ACC(0);
                }
                // s = k_j . (scale q_i), dp = v_j . dO_i: key rows per warp, a query per lane.
                dot_rows<T, ACC, WARP>(s, sm.as, sm.bs, km, j0, j1, ACC(1), qm, it, it + n, scale,
                                       D, warp, lane);
                dot_rows<T, ACC, WARP>(dp, sm.as, sm.bs, vm, j0, j1, ACC(1), dom, it, it + n,
                                       ACC(1), Dv, warp, lane);
                const int i = it + lane;
                ACC li = pos_inf<ACC>(), di = ACC(0);
                if (lane < n) {
                    li = lse_bh[(long long)i * l_s];
                    if (li == neg_inf<ACC>())
                        li = pos_inf<ACC>();  // a fully masked row: P = 0
                    di = delta_bh[i];
                }
                const unsigned int kept =
                    dropout ? keep_bits(bh, Sq, Sk, j0 + warp * RPW, i, lane < n, false, band_lo,
                                        band_hi, key)
                            : 0u;
#pragma unroll
                for (int r = 0; r < RPW; ++r) {
                    const int j = j0 + warp * RPW + r;
                    const ACC x = lane < n ? masked<T, ACC>(s[r], i, j, Sq, Sk, band_lo,
                                                            band_hi, mask_kind, bmask, amask,
                                                            mbase, m_sr, m_sc)
                                           : neg_inf<ACC>();
                    const ACC p = exp_(x - li);
                    ACC pz = p, dpz = dp[r];
                    if (dropout) {
                        const bool keep = (kept >> r) & 1u;
                        pz = keep ? p * keep_scale : ACC(0);
                        dpz = keep ? dpz * keep_scale : ACC(0);
                    }
                    pt[warp * RPW + r][lane] = pz;
                    st[warp * RPW + r][lane] = p * (dpz - di);
                }
                accumulate_cols<T, ACC, WARP, N>(gv, sm.cs, pt, dom, it, n, c0, Dv, ACC(1), warp,
                                                 lane);
                accumulate_cols<T, ACC, WARP, N>(gk, sm.cs, st, qm, it, n, c0, D, scale, warp,
                                                 lane);
            }
#pragma unroll
            for (int r = 0; r < RPW; ++r) {
                const int j = j0 + warp * RPW + r;
                if (j >= Sk)
                    continue;
                const long long row = bh * Sk + j;
#pragma unroll
                for (int u = 0; u < N; ++u) {
                    const int col = c0 + u * WARP + lane;
                    if (col < D)
                        dk[row * D + col] = T(gk[r][u]);
                    if (col < Dv)
                        dv[row * Dv + col] = T(gv[r][u]);
                }
            }
        }
    }
}
