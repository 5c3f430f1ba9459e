// flash_attention.cu: attention forward and backward on tensor cores for float16 and
// bfloat16 (NVIDIA sm_80 and later: mma.sync, ldmatrix, cp.async).
//
// Kernels: tessera_flash_fwd (below), and the backward's three (Dao 2023, Algorithm 2,
// from the forward's lse: P = 2^(x - lse log2 e), no softmax statistics kept):
//   tessera_flash_bwd_delta: delta_i = dO_i . O_i (float32), one warp a row;
//   tessera_flash_bwd_dq: per (bh, query block), over the visible key tiles,
//     dP = dO V^T, dS = P * (dP * Z - delta), dQ = scale * dS K;
//   tessera_flash_bwd_dkdv: per (bh, key block), over the visible query tiles, the
//     transposed S^T = K Q^T and dP^T = V dO^T, dV = (P Z)^T dO, dK = scale * dS^T Q
//     (per query head; GQA's sums are the launcher's front end's).
//   Z = keep / (1 - p) rebuilt from the same Philox counters as the forward. The
//   backward is deterministic: no atomics, every element summed by one thread in a fixed
//   order (the scores are computed twice, once per kernel, for that).
//
// What it computes (Dao 2023, "FlashAttention-2", Algorithm 1, the paper's notation): per
// (bh, query row i), S_ij = scale * q_i . k_j (+ the additive mask; -inf where the bool
// mask or the causal/window band hides key j, or j >= Sk), and the online softmax kept in
// base 2 (x = S * log2(e)):
//     m' = max(m, rowmax(x));  P = 2^(x - m');  a = 2^(m - m')
//     l  = a l + rowsum(P)                 (the undropped sum)
//     O  = a O + (P * keep) V              (P rounded to the input type for the MMA)
// then out_i = O_i * (1 / (1 - p)) / l_i (1 / l_i without dropout) and
// lse_i = (m_i + log2(l_i)) * ln(2). A row that sees no key gives out 0 and lse -inf
// (the NumPy backend's rule). Dropout keep decisions are tessera/philox.cuh's
// dropout_keep with the element counter c = (bh*Sq + i)*Sk + j: the CPU's masks bit for
// bit.
//
// Layout and strides: q (.., Sq, D), k (.., Sk, D), v (.., Sk, D) with a unit column
//   stride, row strides in elements and per-bh element offsets (the launcher's table,
//   int64 (BH, 8): q, k, v, mask, ...; GQA's broadcast KV heads cost no copy), every row
//   start 16-byte aligned (the launcher checks; other layouts are copied first). mask
//   (.., Sq, Sk) any strides (bool: uint8, or additive of the input type). out (BH, Sq, D)
//   and lse (BH, Sq) float32, C-contiguous.
// Launch geometry: blocks of NW = 4 warps; one block per (bh, BM query rows), BM =
//   16 * MT * NW (each warp MT tiles of 16 rows); 1-D grid of BH * ceil(Sq / BM) blocks,
//   a block's row block counted from the end (the longest causal rows start first).
//   Dynamic shared memory (BM + 2 * BN) * D * 2 bytes: the Q tile, one K tile and one V
//   tile, 16-byte chunks swizzled (chunk c of row r at c ^ (r & 7)) so that ldmatrix and
//   cp.async meet no bank conflicts. Pipeline (FA2's): V_j is fetched while S = Q K_j^T
//   and the softmax run, K_{j+1} while O += P V_j.
// Accumulation: float32 (mma.sync m16n8k16 with f32 accumulators); P is rounded to the
//   input type before P V (as FlashAttention-2); the softmax statistics in float32.
// Numerical caveats: 2^x is ex2.approx (relative error ~2^-22), applied to x - m; the
//   scores' dot products sum in the tensor cores' order; out is rounded once to the input
//   type. Run to run the same bits (no atomics; every element summed by one thread in a
//   fixed order).
//
// Template parameters: E (the element type: tessera::flash::f16 or bf16), D (head dim,
//   64 or 128, of q, k and v alike), MT (16-row tiles per warp), BN (keys per tile; dkdv:
//   BQ queries per tile), NB (__launch_bounds__' minimum blocks a multiprocessor), DROP
//   (dropout on). The backward's shared memory: dq (2 BM + 4 BN) D 2 bytes (Q, dO and
//   two K, V pairs), dkdv (2 BK + 4 BQ) D 2 + 16 BQ bytes (K, V, two Q, dO pairs and
//   their rows' base-2 lse and delta); its inputs dout as q, lse and delta (BH, Sq)
//   float32 C-contiguous, its outputs dq (BH, Sq, D), dk and dv (BH, Sk, D) C-contiguous.
// Run-time switch: mask_kind (0 none, 1 bool, 2 additive).
// NVIDIA only (PTX); the whole file is empty under hipcc.

#if !defined(__HIPCC__)

#include "tessera/flash.cuh"

namespace tessera {
namespace flash {

constexpr int NW = 4;  // warps per block

// Byte offset of 16-byte chunk c of row r in a swizzled tile of D 16-bit columns.
template <int D> __device__ __forceinline__ unsigned swz(int r, int c)
{
    return (unsigned)((r * (D / 8) + (c ^ (r & 7))) * 16);
}

// Rows [r0, r0 + R) of a (.., D) matrix (row stride sr elements, unit column stride)
// into a swizzled shared tile; rows at or past nrows are zero-filled.
template <int D, int R>
__device__ __forceinline__ void load_tile(unsigned tile, const unsigned short *p, long long sr,
                                          int r0, int nrows)
{
    constexpr int CH = D / 8;
    static_assert(R * CH % (NW * WARP) == 0, "a tile is a whole number of block-wide loads");
#pragma unroll
    for (int it = 0; it < R * CH / (NW * WARP); ++it) {
        const int t = threadIdx.x + it * NW * WARP;
        const int r = t / CH, c = t - r * CH;
        const bool in = r0 + r < nrows;
        const unsigned short *src = in ? p + (long long)(r0 + r) * sr + c * 8 : p;
        cp_async16(tile + swz<D>(r, c), src, in ? 16 : 0);
    }
}

// One k-step (columns 16 kk ..) of gemm_abt.
template <typename E, int D, int MT, int NT>
__device__ __forceinline__ void abt_step(float (&s)[MT][NT][4], unsigned sA, int r0, unsigned sB,
                                         int lane, int kk)
{
    unsigned af[MT][4];
#pragma unroll
    for (int a = 0; a < MT; ++a)
        ldmatrix_x4(af[a], sA + swz<D>(r0 + a * 16 + (lane & 15), 2 * kk + (lane >> 4)));
#pragma unroll
    for (int np = 0; np < NT / 2; ++np) {
        unsigned bf[4];
        ldmatrix_x4(bf, sB + swz<D>(np * 16 + (lane & 7) + ((lane >> 4) << 3),
                                    2 * kk + ((lane >> 3) & 1)));
#pragma unroll
        for (int a = 0; a < MT; ++a) {
            E::mma(s[a][2 * np], af[a], bf[0], bf[1]);
            E::mma(s[a][2 * np + 1], af[a], bf[2], bf[3]);
        }
    }
}

// s = A B^T over D: A the 16 * MT rows of a swizzled tile from row r0, B NT * 8 rows
// of another (row n of B is column n of s); accumulator layout of mma.sync's C. UNROLL:
// the k-steps unrolled (the backward's dropout instances, benchmarks/NOTES.md), else a
// loop (fewer registers).
template <typename E, int D, int MT, int NT, bool UNROLL = false>
__device__ __forceinline__ void gemm_abt(float (&s)[MT][NT][4], unsigned sA, int r0, unsigned sB,
                                         int lane)
{
    zero(s);
    if (UNROLL) {
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
            abt_step<E, D, MT, NT>(s, sA, r0, sB, lane, kk);
    } else {
#pragma unroll 1
        for (int kk = 0; kk < D / 16; ++kk)
            abt_step<E, D, MT, NT>(s, sA, r0, sB, lane, kk);
    }
}

// acc += P B: P (16 * MT rows, NT * 8 columns) as packed A fragments pf[a][n][h] (row
// g + 8h, columns 8n + 2tq, + 1: the C layout of gemm_abt's s, rounded to 16 bits), B
// the first NT * 8 rows of a swizzled tile of D columns.
template <typename E, int D, int MT, int NT>
__device__ __forceinline__ void gemm_pb(float (&acc)[MT][D / 8][4],
                                        const unsigned (&pf)[MT][NT][2], unsigned sB, int lane)
{
#pragma unroll
    for (int kk = 0; kk < NT / 2; ++kk) {
        unsigned af[MT][4];
#pragma unroll
        for (int a = 0; a < MT; ++a) {
            af[a][0] = pf[a][2 * kk][0];
            af[a][1] = pf[a][2 * kk][1];
            af[a][2] = pf[a][2 * kk + 1][0];
            af[a][3] = pf[a][2 * kk + 1][1];
        }
#pragma unroll
        for (int dp = 0; dp < D / 16; ++dp) {
            unsigned bf[4];
            ldmatrix_x4_trans(bf, sB + swz<D>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3),
                                              2 * dp + (lane >> 4)));
#pragma unroll
            for (int a = 0; a < MT; ++a) {
                E::mma(acc[a][2 * dp], af[a], bf[0], bf[1]);
                E::mma(acc[a][2 * dp + 1], af[a], bf[2], bf[3]);
            }
        }
    }
}

}  // namespace flash
}  // namespace tessera

template <typename E, int D, int MT, int BN, int NB, bool DROP>
__global__ void __launch_bounds__(tessera::flash::NW * tessera::flash::WARP, NB)
tessera_flash_fwd(TESSERA_FLASH_ARGS, unsigned short *__restrict__ out, float *__restrict__ lse)
{
    using namespace tessera::flash;
    constexpr int BM = 16 * MT * NW;
    constexpr int NT = BN / 8;  // score n-tiles of a warp row tile
    constexpr int DT = D / 8;   // output n-tiles
    extern __shared__ __align__(16) unsigned char smem[];
    const unsigned sQ = smem_addr(smem);
    const unsigned sK = sQ + BM * D * 2;
    const unsigned sV = sK + BN * D * 2;

    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    TESSERA_FLASH_FWD_BLOCK(BM, BN);

    load_tile<D, BM>(sQ, qb, q_sr, i0, sq);
    if (t_begin < t_end)
        load_tile<D, BN>(sK, kb, k_sr, t_begin * BN, sk);
    cp_async_commit();

    float acc[MT][DT][4];
    zero(acc);
    float m[MT][2], l[MT][2];
#pragma unroll
    for (int a = 0; a < MT; ++a) {
        m[a][0] = m[a][1] = neg_inf();
        l[a][0] = l[a][1] = 0.0f;
    }
    const float scale2 = scale * LOG2E;
    const int wrow = warp * 16 * MT;  // the warp's first row in the block
    const int g = lane >> 2, tq = lane & 3;

    for (int t = t_begin; t < t_end; ++t) {
        const int j0 = t * BN;
        cp_async_wait_all();
        __syncthreads();  // K_t (and Q) in place; every warp done with V_{t-1}
        load_tile<D, BN>(sV, vb, v_sr, j0, sk);
        cp_async_commit();

        // this lane's share of the quad's dropout blocks, before S is live
        const bool al16 = (sk & 15) == 0;
        unsigned kbits[MT][NT / 4];
        if (DROP && al16)
            row_blocks<NT, MT, false>(kbits, bh, sq, sk, i0 + wrow, j0, lane, key);

        float s[MT][NT][4];
        gemm_abt<E, D, MT, NT>(s, sQ, wrow, sK, lane);  // S = Q K_t^T

        // Scores in base 2, the band and the masks, the online softmax, dropout.
        scale_scores(s, scale2);
        if (!vis.all(i0, BM, j0, BN))
            mask_scores<E, false>(s, vis, i0 + wrow, j0, lane);
        unsigned pf[MT][NT][2];  // P (dropped where not kept) in the input type
#pragma unroll
        for (int a = 0; a < MT; ++a) {
            softmax_tile<E, DROP, NT, DT>(s[a], acc[a], m[a], l[a], pf[a], kbits[a], al16, bh,
                                          sq, sk, i0 + wrow + a * 16, j0, lane, key);
        }

        cp_async_wait_all();
        __syncthreads();  // V_t in place; every warp done with K_t
        if (t + 1 < t_end)
            load_tile<D, BN>(sK, kb, k_sr, j0 + BN, sk);
        cp_async_commit();

        gemm_pb<E, D, MT, NT>(acc, pf, sV, lane);  // O += P V_t
    }
    cp_async_wait_all();

    // out = O * keep_scale / l, rounded once; lse = (m + log2 l) ln 2.
    float f[MT][2];
#pragma unroll
    for (int a = 0; a < MT; ++a) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float ls = l[a][h];
            ls += __shfl_xor_sync(FULL, ls, 1);
            ls += __shfl_xor_sync(FULL, ls, 2);
            f[a][h] = ls > 0.0f ? keep_scale / ls : 0.0f;
            const int i = i0 + wrow + a * 16 + g + 8 * h;
            if (tq == 0 && i < sq)
                lse[bh * sq + i] = ls > 0.0f ? (m[a][h] + log2f(ls)) * LN2 : neg_inf();
        }
#pragma unroll
        for (int b = 0; b < DT; ++b) {
            acc[a][b][0] *= f[a][0];
            acc[a][b][1] *= f[a][0];
            acc[a][b][2] *= f[a][1];
            acc[a][b][3] *= f[a][1];
        }
    }
    store_rows<E, D, MT>(out + bh * sq * D, acc, i0 + wrow, sq, 1.0f, lane);
}

// delta_i = sum_d dO_id O_id (float32), one warp a row: the backward's row constants.
template <typename E, int D>
__global__ void __launch_bounds__(tessera::flash::NW * tessera::flash::WARP)
tessera_flash_bwd_delta(long long rows, int sq, const long long *__restrict__ offs,
                        const unsigned short *__restrict__ out, long long o_sr,
                        const unsigned short *__restrict__ dout, long long do_sr,
                        float *__restrict__ delta)
{
    using namespace tessera::flash;
    const long long r = (long long)blockIdx.x * NW + threadIdx.x / WARP;
    const int lane = threadIdx.x % WARP;
    if (r >= rows)
        return;
    const long long bh = r / sq;
    const int i = (int)(r - bh * sq);
    const unsigned short *orow = out + offs[bh * 8 + 4] + (long long)i * o_sr;
    const unsigned short *grow = dout + offs[bh * 8 + 5] + (long long)i * do_sr;
    float acc = 0.0f;
    for (int d = lane; d < D; d += WARP)
        acc += E::to_float(orow[d]) * E::to_float(grow[d]);
#pragma unroll
    for (int w = WARP / 2; w > 0; w /= 2)
        acc += __shfl_xor_sync(FULL, acc, w);
    if (lane == 0)
        delta[r] = acc;
}

// dQ = scale * dS K over the visible key tiles, dS = P * (dP * Z - delta), P = 2^(x -
// lse_2), dP = dO V^T: one block per (bh, BM query rows), K and V tiles double-buffered.
template <typename E, int D, int MT, int BN, int NB, bool DROP>
__global__ void __launch_bounds__(tessera::flash::NW * tessera::flash::WARP, NB)
tessera_flash_bwd_dq(TESSERA_FLASH_ARGS, const unsigned short *__restrict__ dout, long long do_sr,
                     const float *__restrict__ lse, const float *__restrict__ delta,
                     unsigned short *__restrict__ dq)
{
    using namespace tessera::flash;
    constexpr int BM = 16 * MT * NW;
    constexpr int NT = BN / 8;
    constexpr int DT = D / 8;
    extern __shared__ __align__(16) unsigned char smem[];
    const unsigned sQ = smem_addr(smem);
    const unsigned sdO = sQ + BM * D * 2;
    const unsigned sKV = sdO + BM * D * 2;  // [2][K tile, V tile]
    constexpr unsigned KV = 2 * BN * D * 2;

    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const long long bh = blockIdx.x / blocks_per_bh;
    const int mb = blocks_per_bh - 1 - (int)(blockIdx.x - bh * blocks_per_bh);
    const int i0 = mb * BM;
    const long long *o = offs + bh * 8;
    const unsigned short *kb = k + o[1];
    const unsigned short *vb = v + o[2];
    const Visibility vis{sq, sk, mask_kind, bmask, amask, o[3], m_sr, m_sc, lo, hi};
    const tessera::PhiloxKey key{seed_lo, seed_hi, off_lo, off_hi, t8, frac};

    int t_begin, t_end;  // the key tiles the band leaves visible to rows [i0, i0 + BM)
    vis.key_tiles(i0, BM, BN, t_begin, t_end);

    load_tile<D, BM>(sQ, q + o[0], q_sr, i0, sq);
    load_tile<D, BM>(sdO, dout + o[5], do_sr, i0, sq);
    if (t_begin < t_end) {
        load_tile<D, BN>(sKV, kb, k_sr, t_begin * BN, sk);
        load_tile<D, BN>(sKV + BN * D * 2, vb, v_sr, t_begin * BN, sk);
    }
    cp_async_commit();

    const int wrow = warp * 16 * MT;
    const int g = lane >> 2, tq = lane & 3;
    float lse2[MT][2], dl[MT][2];
#pragma unroll
    for (int a = 0; a < MT; ++a)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int i = i0 + wrow + a * 16 + g + 8 * h;
            const float L = i < sq ? lse[bh * sq + i] : neg_inf();
            lse2[a][h] = L * LOG2E;
            dl[a][h] = i < sq ? delta[bh * sq + i] : 0.0f;
        }
    float acc[MT][DT][4];
    zero(acc);
    const float scale2 = scale * LOG2E;

    for (int t = t_begin; t < t_end; ++t) {
        const int j0 = t * BN;
        const unsigned sK = sKV + ((t - t_begin) & 1) * KV, sV = sK + BN * D * 2;
        cp_async_wait_all();
        __syncthreads();  // tile t in place; every warp done with tile t - 1's buffer
        if (t + 1 < t_end) {
            const unsigned nK = sKV + ((t + 1 - t_begin) & 1) * KV;
            load_tile<D, BN>(nK, kb, k_sr, j0 + BN, sk);
            load_tile<D, BN>(nK + BN * D * 2, vb, v_sr, j0 + BN, sk);
        }
        cp_async_commit();

        // this lane's share of the quad's dropout blocks, before S and dP are live
        const bool al16 = (sk & 15) == 0;
        unsigned kbits[MT][NT / 4];
        if (DROP && al16)
            row_blocks<NT, MT, true>(kbits, bh, sq, sk, i0 + wrow, j0, lane, key);

        // unrolled with dropout where the registers allow it: at three blocks a
        // multiprocessor (168 registers) the unrolled (1, 64, 3) spills 16 bytes
        constexpr bool UNROLL = DROP && NB < 3;
        float s[MT][NT][4], dp[MT][NT][4];
        gemm_abt<E, D, MT, NT, UNROLL>(s, sQ, wrow, sK, lane);    // S = Q K^T
        gemm_abt<E, D, MT, NT, UNROLL>(dp, sdO, wrow, sV, lane);  // dP = dO V^T
        scale_scores(s, scale2);
        if (!vis.all(i0, BM, j0, BN))
            mask_scores<E, false>(s, vis, i0 + wrow, j0, lane);
        unsigned df[MT][NT][2];
#pragma unroll
        for (int a = 0; a < MT; ++a) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int i = i0 + wrow + a * 16 + g + 8 * h;
                const unsigned long long rowc =
                    ((unsigned long long)bh * sq + (unsigned long long)i) * (unsigned long long)sk;
                const bool dead = lse2[a][h] == neg_inf();
#pragma unroll
                for (int b = 0; b < NT; ++b) {
                    const int j = j0 + b * 8 + 2 * tq;
                    float ds[2];
                    bool kept[2] = {true, true};
                    if (DROP && al16) {
                        row_keep<NT>(kbits[a], b, h, lane, kept[0], kept[1]);
                    } else if (DROP) {
                        keep2(rowc + (unsigned long long)j, key, kept[0], kept[1]);
                    }
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const float p = dead ? 0.0f : exp2_(s[a][b][2 * h + e] - lse2[a][h]);
                        const float z = DROP ? (kept[e] ? keep_scale : 0.0f) : 1.0f;
                        ds[e] = p * (dp[a][b][2 * h + e] * z - dl[a][h]);
                    }
                    df[a][b][h] = E::pack(ds[0], ds[1]);
                }
            }
        }
        gemm_pb<E, D, MT, NT>(acc, df, sK, lane);  // dQ += dS K
    }
    cp_async_wait_all();
    store_rows<E, D, MT>(dq + bh * sq * D, acc, i0 + wrow, sq, scale, lane);
}

// dV = sum_i (P Z)_ij dO_i and dK = scale * sum_i dS_ij q_i over the visible query tiles,
// per query head (GQA's sums are the launcher's): one block per (bh, BK = 16 * MT * NW
// keys), the transposed scores S^T = K Q^T and dP^T = V dO^T, Q and dO tiles (and their
// rows' base-2 lse and delta) double-buffered.
template <typename E, int D, int MT, int BQ, int NB, bool DROP>
__global__ void __launch_bounds__(tessera::flash::NW * tessera::flash::WARP, NB)
tessera_flash_bwd_dkdv(TESSERA_FLASH_ARGS, const unsigned short *__restrict__ dout,
                       long long do_sr, const float *__restrict__ lse,
                       const float *__restrict__ delta, unsigned short *__restrict__ dk,
                       unsigned short *__restrict__ dv)
{
    using namespace tessera::flash;
    constexpr int BK = 16 * MT * NW;
    constexpr int NT = BQ / 8;
    constexpr int DT = D / 8;
    extern __shared__ __align__(16) unsigned char smem[];
    const unsigned sK = smem_addr(smem);
    const unsigned sV = sK + BK * D * 2;
    const unsigned sQO = sV + BK * D * 2;  // [2][Q tile, dO tile]
    constexpr unsigned QO = 2 * BQ * D * 2;
    float *rowc_smem = reinterpret_cast<float *>(smem + 2 * BK * D * 2 + 2 * QO);
    float(*sL)[BQ] = reinterpret_cast<float(*)[BQ]>(rowc_smem);           // [2][BQ]
    float(*sD)[BQ] = reinterpret_cast<float(*)[BQ]>(rowc_smem + 2 * BQ);  // [2][BQ]

    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const long long bh = blockIdx.x / blocks_per_bh;
    const int kblk = (int)(blockIdx.x - bh * blocks_per_bh);
    const int j0 = kblk * BK;
    const long long *o = offs + bh * 8;
    const unsigned short *qb = q + o[0];
    const unsigned short *gb = dout + o[5];
    const Visibility vis{sq, sk, mask_kind, bmask, amask, o[3], m_sr, m_sc, lo, hi};
    const tessera::PhiloxKey key{seed_lo, seed_hi, off_lo, off_hi, t8, frac};

    int u_begin, u_end;  // the query tiles whose rows see some key of [j0, j0 + BK)
    vis.query_tiles(j0, BK, BQ, u_begin, u_end);

    load_tile<D, BK>(sK, k + o[1], k_sr, j0, sk);
    load_tile<D, BK>(sV, v + o[2], v_sr, j0, sk);
    if (u_begin < u_end) {
        load_tile<D, BQ>(sQO, qb, q_sr, u_begin * BQ, sq);
        load_tile<D, BQ>(sQO + BQ * D * 2, gb, do_sr, u_begin * BQ, sq);
        for (int c = threadIdx.x; c < BQ; c += NW * WARP) {
            const int i = u_begin * BQ + c;
            sL[0][c] = i < sq ? lse[bh * sq + i] * LOG2E : neg_inf();
            sD[0][c] = i < sq ? delta[bh * sq + i] : 0.0f;
        }
    }
    cp_async_commit();

    float gk[MT][DT][4], gv[MT][DT][4];
    zero(gk);
    zero(gv);
    const float scale2 = scale * LOG2E;
    const int wrow = warp * 16 * MT;
    const int g = lane >> 2, tq = lane & 3;

    for (int u = u_begin; u < u_end; ++u) {
        const int i0 = u * BQ;
        const int buf = (u - u_begin) & 1;
        const unsigned sQ = sQO + buf * QO, sdO = sQ + BQ * D * 2;
        cp_async_wait_all();
        __syncthreads();  // tile u in place; every warp done with tile u - 1's buffer
        if (u + 1 < u_end) {
            const unsigned nQ = sQO + (buf ^ 1) * QO;
            load_tile<D, BQ>(nQ, qb, q_sr, i0 + BQ, sq);
            load_tile<D, BQ>(nQ + BQ * D * 2, gb, do_sr, i0 + BQ, sq);
            for (int c = threadIdx.x; c < BQ; c += NW * WARP) {
                const int i = i0 + BQ + c;
                sL[buf ^ 1][c] = i < sq ? lse[bh * sq + i] * LOG2E : neg_inf();
                sD[buf ^ 1][c] = i < sq ? delta[bh * sq + i] : 0.0f;
            }
        }
        cp_async_commit();

        // this lane's share of the dropout blocks of its tq's query columns: the sixteen
        // keys j0 + wrow + 16 a .. + 15 of column (b, e) = ((8 k + g) / 2, g % 2); before
        // S^T and dP^T are live
        const bool al16 = (sk & 15) == 0;
        unsigned kbits[MT][NT / 4];
        if (DROP && al16) {
            // block [a][k]: the lane's first (keys j0 + wrow, its query column pair of
            // k = 0), then k's queries 32 k on (2 k sk blocks), a's keys 16 a (a)
            const unsigned long long n0 =
                (((unsigned long long)bh * sq +
                  (unsigned long long)(i0 + (g >> 1) * 8 + 2 * tq + (g & 1))) *
                     (unsigned long long)sk + (unsigned long long)(j0 + wrow)) >> 4;
            const auto block = [&](int a, int k) {
                return n0 + 2ull * (unsigned long long)k * (unsigned long long)sk +
                       (unsigned long long)a;
            };
            unsigned eq[MT][NT / 4];
#pragma unroll
            for (int a = 0; a < MT; ++a)
#pragma unroll
                for (int k = 0; k < NT / 4; ++k)
                    bytes16(block(a, k), key, kbits[a][k], eq[a][k]);
            settle_ties(kbits, eq, block, key);
        }

        float st[MT][NT][4], dpt[MT][NT][4];
        gemm_abt<E, D, MT, NT, DROP>(st, sK, wrow, sQ, lane);    // S^T = K Q^T
        gemm_abt<E, D, MT, NT, DROP>(dpt, sV, wrow, sdO, lane);  // dP^T = V dO^T
        scale_scores(st, scale2);
        if (!vis.all(i0, BQ, j0, BK))
            mask_scores<E, true>(st, vis, j0 + wrow, i0, lane);
        unsigned pf[MT][NT][2], df[MT][NT][2];
#pragma unroll
        for (int a = 0; a < MT; ++a) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int j = j0 + wrow + a * 16 + g + 8 * h;
#pragma unroll
                for (int b = 0; b < NT; ++b) {
                    float pz[2], ds[2];
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int c = b * 8 + 2 * tq + e;
                        const int i = i0 + c;
                        const float L = sL[buf][c];
                        const float p = L == neg_inf() ? 0.0f : exp2_(st[a][b][2 * h + e] - L);
                        float z = 1.0f;
                        if (DROP && al16) {
                            const int ce = 2 * b + e;
                            const unsigned mb = __shfl_sync(FULL, kbits[a][ce >> 3],
                                                            (lane & 3) | ((ce & 7) << 2));
                            z = (mb >> (g + 8 * h)) & 1u ? keep_scale : 0.0f;
                        } else if (DROP) {
                            const unsigned long long cnt =
                                ((unsigned long long)bh * sq + (unsigned long long)i) *
                                    (unsigned long long)sk + (unsigned long long)j;
                            z = keep1(cnt, key) ? keep_scale : 0.0f;
                        }
                        pz[e] = p * z;
                        ds[e] = p * (dpt[a][b][2 * h + e] * z - sD[buf][c]);
                    }
                    pf[a][b][h] = E::pack(pz[0], pz[1]);
                    df[a][b][h] = E::pack(ds[0], ds[1]);
                }
            }
        }
        gemm_pb<E, D, MT, NT>(gv, pf, sdO, lane);  // dV += (P Z)^T dO
        gemm_pb<E, D, MT, NT>(gk, df, sQ, lane);   // dK += dS^T Q
    }
    cp_async_wait_all();
    store_rows<E, D, MT>(dk + bh * sk * D, gk, j0 + wrow, sk, scale, lane);
    store_rows<E, D, MT>(dv + bh * sk * D, gv, j0 + wrow, sk, 1.0f, lane);
}

#endif  // !defined(__HIPCC__)
