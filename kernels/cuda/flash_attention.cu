// flash_attention.cu: attention forward on tensor cores for float16 and bfloat16 (NVIDIA
// sm_80 and later: mma.sync, ldmatrix, cp.async).
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
//   64 or 128, of q, k and v alike), MT (16-row tiles per warp), BN (keys per tile), NB
//   (__launch_bounds__' minimum blocks a multiprocessor), DROP (dropout on).
// Run-time switch: mask_kind (0 none, 1 bool, 2 additive).
// NVIDIA only (PTX); the whole file is empty under hipcc.

#if !defined(__HIPCC__)

#include "tessera/philox.cuh"

namespace tessera {
namespace flash {

constexpr int NW = 4;  // warps per block
// mma.sync's fragments are laid out over NVIDIA's 32-lane warp: the width is the
// instruction set's, not a device property (this file is CUDA's alone).
constexpr int WARP = 32;
constexpr unsigned FULL = 0xffffffffu;  // every lane of the warp, for the *_sync shuffles
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

struct f16 {
    __device__ static __forceinline__ unsigned pack(float lo, float hi)
    {
        unsigned r;
        asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
        return r;
    }
    __device__ static __forceinline__ float to_float(unsigned short h)
    {
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
        return f;
    }
    __device__ static __forceinline__ void mma(float (&c)[4], const unsigned (&a)[4],
                                               unsigned b0, unsigned b1)
    {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};

struct bf16 {
    __device__ static __forceinline__ unsigned pack(float lo, float hi)
    {
        unsigned r;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
        return r;
    }
    __device__ static __forceinline__ float to_float(unsigned short h)
    {
        return __uint_as_float((unsigned)h << 16);
    }
    __device__ static __forceinline__ void mma(float (&c)[4], const unsigned (&a)[4],
                                               unsigned b0, unsigned b1)
    {
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
};

__device__ __forceinline__ unsigned smem_addr(const void *p)
{
    unsigned a;
    asm("{\n .reg .u64 t;\n cvta.to.shared.u64 t, %1;\n cvt.u32.u64 %0, t;\n}"
        : "=r"(a)
        : "l"(p));
    return a;
}

// 16 bytes from global src to shared dst; bytes = 0 fills dst with zeros (nothing read).
__device__ __forceinline__ void cp_async16(unsigned dst, const void *src, int bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
                 "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
__device__ __forceinline__ void cp_async_wait_all()
{
    asm volatile("cp.async.wait_group 0;" ::: "memory");
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ float exp2_(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

__device__ __forceinline__ float neg_inf() { return __int_as_float((int)0xff800000u); }

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

// The keep decisions of elements c and c + 1 of the dropout stream.
__device__ __forceinline__ void keep2(unsigned long long c, const PhiloxKey &key, bool &k0,
                                      bool &k1)
{
    const uint4 u = philox_block(c >> 2, key);
    const unsigned r = (unsigned)(c & 3);
    const unsigned w0 = philox_lane(u, r);
    const unsigned w1 = r == 3 ? philox_block((c >> 2) + 1, key).x : philox_lane(u, r + 1);
    k0 = w0 >= key.threshold;
    k1 = w1 >= key.threshold;
}

}  // namespace flash
}  // namespace tessera

template <typename E, int D, int MT, int BN, int NB, bool DROP>
__global__ void __launch_bounds__(tessera::flash::NW * tessera::flash::WARP, NB)
tessera_flash_fwd(int mblocks, int sq, int sk, const long long *__restrict__ offs,
                  const unsigned short *__restrict__ q, long long q_sr,
                  const unsigned short *__restrict__ k, long long k_sr,
                  const unsigned short *__restrict__ v, long long v_sr, int mask_kind,
                  const unsigned char *__restrict__ bmask,
                  const unsigned short *__restrict__ amask, long long m_sr, long long m_sc,
                  long long lo, long long hi, float scale, unsigned seed_lo,
                  unsigned seed_hi, unsigned off_lo, unsigned off_hi, unsigned threshold,
                  float keep_scale, unsigned short *__restrict__ out, float *__restrict__ lse)
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
    const long long bh = blockIdx.x / mblocks;
    const int mb = mblocks - 1 - (int)(blockIdx.x - bh * mblocks);
    const int i0 = mb * BM;
    const long long *o = offs + bh * 8;
    const unsigned short *qb = q + o[0];
    const unsigned short *kb = k + o[1];
    const unsigned short *vb = v + o[2];
    const long long moff = o[3];
    const tessera::PhiloxKey key{seed_lo, seed_hi, off_lo, off_hi, threshold};

    // The key tiles the band leaves visible to rows [i0, i0 + BM).
    long long jlo = (long long)i0 + lo, jhi = (long long)i0 + BM - 1 + hi + 1;
    jlo = jlo < 0 ? 0 : jlo;
    jhi = jhi > sk ? sk : jhi;
    const int t_begin = (int)(jlo / BN);
    const int t_end = jhi > jlo ? (int)((jhi + BN - 1) / BN) : t_begin;

    load_tile<D, BM>(sQ, qb, q_sr, i0, sq);
    if (t_begin < t_end)
        load_tile<D, BN>(sK, kb, k_sr, t_begin * BN, sk);
    cp_async_commit();

    float acc[MT][DT][4];
#pragma unroll
    for (int a = 0; a < MT; ++a)
#pragma unroll
        for (int b = 0; b < DT; ++b)
#pragma unroll
            for (int c = 0; c < 4; ++c) acc[a][b][c] = 0.0f;
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

        // S = Q K_t^T
        float s[MT][NT][4];
#pragma unroll
        for (int a = 0; a < MT; ++a)
#pragma unroll
            for (int b = 0; b < NT; ++b)
#pragma unroll
                for (int c = 0; c < 4; ++c) s[a][b][c] = 0.0f;
#pragma unroll 1
        for (int kk = 0; kk < D / 16; ++kk) {
            unsigned af[MT][4];
#pragma unroll
            for (int a = 0; a < MT; ++a)
                ldmatrix_x4(af[a], sQ + swz<D>(wrow + a * 16 + (lane & 15), 2 * kk + (lane >> 4)));
#pragma unroll
            for (int np = 0; np < NT / 2; ++np) {
                unsigned bf[4];
                ldmatrix_x4(bf, sK + swz<D>(np * 16 + (lane & 7) + ((lane >> 4) << 3),
                                            2 * kk + ((lane >> 3) & 1)));
#pragma unroll
                for (int a = 0; a < MT; ++a) {
                    E::mma(s[a][2 * np], af[a], bf[0], bf[1]);
                    E::mma(s[a][2 * np + 1], af[a], bf[2], bf[3]);
                }
            }
        }

        // Scores in base 2, the band and the masks, the online softmax, dropout.
        const bool inside = mask_kind == 0 && j0 + BN <= sk &&
                            (long long)j0 - (i0 + BM - 1) >= lo &&
                            (long long)j0 + BN - 1 - i0 <= hi;
        unsigned pf[MT][NT][2];  // P (dropped where not kept) in the input type
#pragma unroll
        for (int a = 0; a < MT; ++a) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int i = i0 + wrow + a * 16 + g + 8 * h;
                float mx = m[a][h];
#pragma unroll
                for (int b = 0; b < NT; ++b) {
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        float x = s[a][b][2 * h + e] * scale2;
                        if (!inside) {
                            const int j = j0 + b * 8 + 2 * tq + e;
                            const long long d = (long long)j - i;
                            bool vis = j < sk && d >= lo && d <= hi;
                            if (vis && mask_kind != 0 && i < sq) {
                                const long long mi = moff + (long long)i * m_sr + (long long)j * m_sc;
                                if (mask_kind == 1)
                                    vis = bmask[mi] != 0;
                                else
                                    x += E::to_float(amask[mi]) * LOG2E;
                            }
                            if (!vis)
                                x = neg_inf();
                        }
                        s[a][b][2 * h + e] = x;
                        mx = fmaxf(mx, x);
                    }
                }
                mx = fmaxf(mx, __shfl_xor_sync(FULL, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(FULL, mx, 2));
                const float mu = mx == neg_inf() ? 0.0f : mx;
                const float alpha = exp2_(m[a][h] - mu);
                m[a][h] = mx;
                float rs = 0.0f;
                const unsigned long long rowc =
                    ((unsigned long long)bh * sq + (unsigned long long)i) * (unsigned long long)sk;
#pragma unroll
                for (int b = 0; b < NT; ++b) {
                    float p0 = exp2_(s[a][b][2 * h] - mu);
                    float p1 = exp2_(s[a][b][2 * h + 1] - mu);
                    rs += p0 + p1;
                    if (DROP) {
                        bool k0, k1;
                        keep2(rowc + (unsigned long long)(j0 + b * 8 + 2 * tq), key, k0, k1);
                        p0 = k0 ? p0 : 0.0f;
                        p1 = k1 ? p1 : 0.0f;
                    }
                    pf[a][b][h] = E::pack(p0, p1);
                }
                l[a][h] = l[a][h] * alpha + rs;
#pragma unroll
                for (int b = 0; b < DT; ++b) {
                    acc[a][b][2 * h] *= alpha;
                    acc[a][b][2 * h + 1] *= alpha;
                }
            }
        }

        cp_async_wait_all();
        __syncthreads();  // V_t in place; every warp done with K_t
        if (t + 1 < t_end)
            load_tile<D, BN>(sK, kb, k_sr, j0 + BN, sk);
        cp_async_commit();

        // O += P V_t
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
            unsigned af[MT][4];
#pragma unroll
            for (int a = 0; a < MT; ++a) {
                af[a][0] = pf[a][2 * kk][0];
                af[a][1] = pf[a][2 * kk][1];
                af[a][2] = pf[a][2 * kk + 1][0];
                af[a][3] = pf[a][2 * kk + 1][1];
            }
#pragma unroll
            for (int dp = 0; dp < DT / 2; ++dp) {
                unsigned bf[4];
                ldmatrix_x4_trans(bf, sV + swz<D>(kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3),
                                                  2 * dp + (lane >> 4)));
#pragma unroll
                for (int a = 0; a < MT; ++a) {
                    E::mma(acc[a][2 * dp], af[a], bf[0], bf[1]);
                    E::mma(acc[a][2 * dp + 1], af[a], bf[2], bf[3]);
                }
            }
        }
    }
    cp_async_wait_all();

    // out = O * keep_scale / l, rounded once; lse = (m + log2 l) ln 2.
#pragma unroll
    for (int a = 0; a < MT; ++a) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float ls = l[a][h];
            ls += __shfl_xor_sync(FULL, ls, 1);
            ls += __shfl_xor_sync(FULL, ls, 2);
            const int i = i0 + wrow + a * 16 + g + 8 * h;
            if (i >= sq)
                continue;
            const float f = ls > 0.0f ? keep_scale / ls : 0.0f;
            unsigned *orow = reinterpret_cast<unsigned *>(out + ((long long)bh * sq + i) * D);
#pragma unroll
            for (int b = 0; b < DT; ++b)
                orow[b * 4 + tq] = E::pack(acc[a][b][2 * h] * f, acc[a][b][2 * h + 1] * f);
            if (tq == 0)
                lse[(long long)bh * sq + i] =
                    ls > 0.0f ? (m[a][h] + log2f(ls)) * LN2 : neg_inf();
        }
    }
}

#endif  // !defined(__HIPCC__)
