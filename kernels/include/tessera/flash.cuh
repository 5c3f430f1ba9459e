// tessera/flash.cuh: the pieces the tensor-core attention kernels share
// (kernels/cuda/flash_attention.cu, mma.sync, and kernels/cuda/flash_attention_sm90.cu,
// wgmma): the 16-bit element types, shared-memory addresses and cp.async, ex2, the
// dropout keep bits in the C layout of a 16-row tile, the band and masks
// (Visibility), the score passes, the stores, and the kernels' common arguments
// (TESSERA_FLASH_ARGS).
// Layout: the C (accumulator) layout of mma.sync m16n8k16, which is also each warp's
//   16 rows of a wgmma m64nNk16 accumulator: lane (g = lane / 4, tq = lane % 4) holds
//   element 2h + e of n-tile b at row g + 8h, column 8b + 2tq + e.
// Launch geometry: none (device functions). Accumulation: float32 throughout.
// Numerical caveats: ex2.approx (relative error ~2^-22); see the kernel files.
// NVIDIA only (PTX): the including files are empty under hipcc.

#ifndef TESSERA_FLASH_CUH
#define TESSERA_FLASH_CUH

#include "tessera/philox.cuh"

namespace tessera {
namespace flash {

// mma.sync's fragments are laid out over NVIDIA's 32-lane warp: the width is the
// instruction set's, not a device property (this file is CUDA's alone).
constexpr int WARP = 32;
constexpr unsigned FULL = 0xffffffffu;  // every lane of the warp, for the *_sync shuffles
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

// pack (two floats rounded to a packed pair, lo in the low half) and mma (m16n8k16, f32
// accumulators) of the element type T, named as PTX names it.
#define TESSERA_FLASH_ELEMENT_OPS(T)                                                      \
    __device__ static __forceinline__ unsigned pack(float lo, float hi)                   \
    {                                                                                     \
        unsigned r;                                                                       \
        asm("cvt.rn." #T "x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));              \
        return r;                                                                         \
    }                                                                                     \
    __device__ static __forceinline__ void mma(float(&c)[4], const unsigned(&a)[4],      \
                                               unsigned b0, unsigned b1)                  \
    {                                                                                     \
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." #T "." #T ".f32 "           \
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"    \
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                     \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));    \
    }

struct f16 {
    TESSERA_FLASH_ELEMENT_OPS(f16)
    __device__ static __forceinline__ float to_float(unsigned short h)
    {
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
        return f;
    }
};

struct bf16 {
    TESSERA_FLASH_ELEMENT_OPS(bf16)
    __device__ static __forceinline__ float to_float(unsigned short h)
    {
        return __uint_as_float((unsigned)h << 16);
    }
};

#undef TESSERA_FLASH_ELEMENT_OPS

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

// The keep decisions of elements c and c + 1 of the dropout stream (one Philox block, two
// where c + 1 starts the next). keep2 and keep1 serve the kernels' other path (Sk % 16 !=
// 0) and are called, not inlined: inlined beside the shared blocks' path they made the
// dropout forward's SASS 6,352 instructions against 4,944 called (D 128, bf16, sm_90; D 64
// 9,960 against 7,112), in the loop every launch runs (benchmarks/NOTES.md).
__device__ __noinline__ void keep2(unsigned long long c, const PhiloxKey &key, bool &k0,
                                   bool &k1)
{
    const unsigned o = (unsigned)(c & 15);
    const uint4 u = philox_block(c >> 4, key);
    const unsigned b0 = block_byte(u, o);
    const unsigned b1 = o == 15u ? philox_block((c >> 4) + 1, key).x & 0xFFu
                                 : block_byte(u, o + 1);
    k0 = b0 > key.t8;
    k1 = b1 > key.t8;
    // the ties (one element in 256), one refinement block at a time
#pragma unroll 1
    for (unsigned e = 0; e < 2; ++e)
        if ((e ? b1 : b0) == key.t8) {
            const bool k = refine4((c + e) >> 2, 1u << ((c + e) & 3), key) != 0u;
            if (e)
                k1 = k;
            else
                k0 = k;
        }
}

// Shared dropout blocks. When Sk % 16 == 0 every score row's counters start at a multiple
// of 16, so the columns of n-tiles 2p and 2p + 1 of a row (from a tile start j0, a
// multiple of 16) are one Philox block: the 2 NT blocks a quad of lanes needs for its rows
// g and g + 8 (C layout: columns 2tq, 2tq + 1 of each n-tile) are NT / 4 a lane (their
// ties settled before the bits are read), and the others read a block's sixteen bits by
// a shuffle: a sixteenth of the Philox work of keep2 per element pair. In the transposed
// layout (dkdv: rows are keys, consecutive counters) the eight lanes of one tq hold the
// sixteen keys of a query column pair's two blocks and share them likewise.

// The ties of a lane's blocks settled into their keep bits, the warp's lanes in step
// (tessera::settle_round; every lane calls it).
template <int A, int K, typename Block>
__device__ __forceinline__ void settle_ties(unsigned (&gt)[A][K], const unsigned (&eq)[A][K],
                                            const Block &block, const PhiloxKey &key)
{
    unsigned words = tie_words(eq);
    while (__any_sync(FULL, words != 0u))
        words = settle_round(gt, eq, block, words, key);
}

// Row layout (the forward, dq): this lane's share of its quad's blocks of each of the MT
// 16-row tiles from row r0 (tile a from r0 + 16 a) and the keys from j0: row r0 + 16 a +
// g + 8 (tq >> 1), n-tile pairs p = 2 k + (tq & 1), k < NT / 4. Sk % 16 == 0, j0 % 16 == 0.
// IN_STEP: the ties settled by the warp's lanes in step (settle_ties: dq), else each
// block's by its lane (keep16: the forward, whose D 128 instance spills 36 bytes with the
// former's state live beside its O).
template <int NT, int MT, bool IN_STEP>
__device__ __forceinline__ void row_blocks(unsigned (&kbits)[MT][NT / 4], long long bh, int sq,
                                           int sk, int r0, int j0, int lane,
                                           const PhiloxKey &key)
{
    static_assert(NT % 4 == 0, "row_blocks: a lane's share is NT / 4 blocks");
    const int g = lane >> 2, tq = lane & 3;
    // block [a][k]: the lane's first, then tile a's rows a sk blocks on, pair k 2 k
    const unsigned long long n0 =
        ((((unsigned long long)bh * sq + (unsigned long long)(r0 + g + 8 * (tq >> 1))) *
              (unsigned long long)sk + (unsigned long long)j0) >> 4) +
        (unsigned long long)(tq & 1);
    const auto block = [&](int a, int k) {
        return n0 + (unsigned long long)a * (unsigned long long)sk + (unsigned long long)(2 * k);
    };
    unsigned eq[MT][NT / 4];
#pragma unroll
    for (int a = 0; a < MT; ++a)
#pragma unroll
        for (int k = 0; k < NT / 4; ++k) {
            if (IN_STEP)
                bytes16(block(a, k), key, kbits[a][k], eq[a][k]);
            else
                kbits[a][k] = keep16(block(a, k), key);
        }
    if (IN_STEP)
        settle_ties(kbits, eq, block, key);
}

// The keep bits of this lane's two elements (row g + 8h, columns 2tq, + 1) of n-tile b,
// from the quad's row_blocks shares kbits.
template <int NT>
__device__ __forceinline__ void row_keep(const unsigned (&kbits)[NT / 4], int b, int h,
                                         int lane, bool &k0, bool &k1)
{
    const int p = b >> 1, tq = lane & 3;
    const unsigned m = __shfl_sync(FULL, kbits[p >> 1], (lane & ~3) | (2 * h + (p & 1)));
    const int sh = 8 * (b & 1) + 2 * tq;
    k0 = (m >> sh) & 1u;
    k1 = (m >> (sh + 1)) & 1u;
}

// The keep decision of element c of the dropout stream (called, not inlined: see keep2).
__device__ __noinline__ bool keep1(unsigned long long c, const PhiloxKey &key)
{
    return dropout_keep(c, key);
}

// What hides or shifts a score: the band lo <= j - i <= hi, the bounds i < Sq and
// j < Sk, the bool mask (kind 1: False hides) or the additive one (kind 2).
struct Visibility {
    int sq, sk, kind;
    const unsigned char *bmask;
    const unsigned short *amask;
    long long moff, m_sr, m_sc, lo, hi;

    // Whether every (i, j) of queries [i0, i0 + ni) and keys [j0, j0 + nj) is visible
    // with nothing to add (no per-element test needed).
    __device__ __forceinline__ bool all(int i0, int ni, int j0, int nj) const
    {
        return kind == 0 && i0 + ni <= sq && j0 + nj <= sk &&
               (long long)j0 - (i0 + ni - 1) >= lo && (long long)j0 + nj - 1 - i0 <= hi;
    }

    // The tiles of `tile` keys holding a key that some query of [i0, i0 + ni) sees:
    // [begin, end), empty when the band leaves the queries no key.
    __device__ __forceinline__ void key_tiles(int i0, int ni, int tile, int &begin,
                                              int &end) const
    {
        long long a = (long long)i0 + lo, b = (long long)i0 + ni - 1 + hi + 1;
        a = a < 0 ? 0 : a;
        b = b > sk ? sk : b;
        begin = (int)(a / tile);
        end = b > a ? (int)((b + tile - 1) / tile) : begin;
    }

    // The tiles of `tile` queries holding a query that sees some key of [j0, j0 + nj).
    __device__ __forceinline__ void query_tiles(int j0, int nj, int tile, int &begin,
                                                int &end) const
    {
        long long a = (long long)j0 - hi, b = (long long)j0 + nj - 1 - lo + 1;
        a = a < 0 ? 0 : a;
        b = b > sq ? sq : b;
        begin = (int)(a / tile);
        end = b > a ? (int)((b + tile - 1) / tile) : begin;
    }

    // x, the base-2 score of (i, j), with the additive mask added; -inf where hidden.
    template <typename E> __device__ __forceinline__ float apply(float x, int i, int j) const
    {
        const long long d = (long long)j - i;
        bool vis = i < sq && j < sk && d >= lo && d <= hi;
        if (vis && kind != 0) {
            const long long mi = moff + (long long)i * m_sr + (long long)j * m_sc;
            if (kind == 1)
                vis = bmask[mi] != 0;
            else
                x += E::to_float(amask[mi]) * LOG2E;
        }
        return vis ? x : neg_inf();
    }
};

// Scores into base 2: s *= scale2 (scale log2 e).
template <int MT, int NT>
__device__ __forceinline__ void scale_scores(float (&s)[MT][NT][4], float scale2)
{
#pragma unroll
    for (int a = 0; a < MT; ++a)
#pragma unroll
        for (int b = 0; b < NT; ++b)
#pragma unroll
            for (int c = 0; c < 4; ++c) s[a][b][c] *= scale2;
}

// The band and the masks applied to base-2 scores in the C layout (Visibility::apply):
// rows r0 + 16 a + g + 8 h, columns c0 + 8 b + 2 tq + e; T: rows are keys and columns
// queries (the transposed scores of dkdv). A pass of its own, taken only on tiles the
// band or a mask reaches: with these tests inlined in the softmax's loop, the loop's hot
// path was spread over ~75 KB of code and stalled on instruction fetch (ncu, bf16 forward
// MT 2, D 128: no_instruction 1.16 cycles an issue, 0.04 once apart; 192 -> 229-250
// TFLOP/s on the H100).
template <typename E, bool T, int MT, int NT>
__device__ __forceinline__ void mask_scores(float (&s)[MT][NT][4], const Visibility &vis,
                                            int r0, int c0, int lane)
{
    const int g = lane >> 2, tq = lane & 3;
#pragma unroll
    for (int a = 0; a < MT; ++a)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int b = 0; b < NT; ++b)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int r = r0 + a * 16 + g + 8 * h, c = c0 + b * 8 + 2 * tq + e;
                    float &x = s[a][b][2 * h + e];
                    x = T ? vis.apply<E>(x, c, r) : vis.apply<E>(x, r, c);
                }
}

template <int MT, int N> __device__ __forceinline__ void zero(float (&x)[MT][N][4])
{
#pragma unroll
    for (int a = 0; a < MT; ++a)
#pragma unroll
        for (int b = 0; b < N; ++b)
#pragma unroll
            for (int c = 0; c < 4; ++c) x[a][b][c] = 0.0f;
}

// The dropout keep decisions of a warp's elements (rows r16 + g + 8h, columns j0 + 8b +
// 2tq, + 1) where the mma.sync kernels compute them: from the quad's shared blocks
// (row_blocks) when al16 (Sk % 16 == 0), otherwise by keep2. row(h) gives row half h's
// decisions, rk(b, k0, k1) those of n-tile b.
template <int NT> struct QuadKeeps {
    const unsigned (&kbits)[NT / 4];
    bool al16;
    long long bh;
    int sq, sk, r16, j0, lane;
    const PhiloxKey &key;

    struct Row {
        const QuadKeeps &q;
        int h;
        unsigned long long rowc;
        __device__ __forceinline__ void operator()(int b, bool &k0, bool &k1) const
        {
            if (q.al16)
                row_keep<NT>(q.kbits, b, h, q.lane, k0, k1);
            else
                keep2(rowc + (unsigned long long)(q.j0 + b * 8 + 2 * (q.lane & 3)), q.key, k0,
                      k1);
        }
    };
    __device__ __forceinline__ Row row(int h) const
    {
        const int i = r16 + (lane >> 2) + 8 * h;
        return Row{*this, h,
                   ((unsigned long long)bh * sq + (unsigned long long)i) *
                       (unsigned long long)sk};
    }
};

// One step of the online softmax for a warp's 16 rows r16 + g + 8h and the BN = 8 NT
// keys from j0 of base-2 scores s (C layout), row half h by row half, in two parts.
// softmax_exp: the running max m and sum l (the undropped sum) of rows g + 8h updated,
// their s replaced by P = 2^(sc s - m') (zero where dropout does not keep it: keep.row(h)(b,
// k0, k1) gives the decisions of the lane's two elements of n-tile b, read when DROP) and
// 2^(m - m') returned; it does not touch acc, so a P V product still running on acc may
// overlap it. sc > 0 scales the scores into base 2 inside the exponent's FFMA (the max
// taken on the unscaled scores, which sc > 0 keeps in order): 1 for scores already scaled
// (the mma.sync kernels' scale_scores). softmax_pack: those rows of acc (D = 8 DT
// columns) rescaled by that factor and their P rounded to the input type into pf, the
// packed A fragments of P V.
template <bool DROP, int NT, typename Keep>
__device__ __forceinline__ float softmax_exp(float (&s)[NT][4], int h, float (&m)[2],
                                             float (&l)[2], const Keep &keep, float sc = 1.0f)
{
    float mx = neg_inf();
#pragma unroll
    for (int b = 0; b < NT; ++b) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
            mx = fmaxf(mx, s[b][2 * h + e]);
        }
    }
    mx = fmaxf(mx, __shfl_xor_sync(FULL, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(FULL, mx, 2));
    mx = fmaxf(m[h], mx * sc);
    const float mu = mx == neg_inf() ? 0.0f : mx;
    const float alpha = exp2_(m[h] - mu);
    m[h] = mx;
    float rs = 0.0f;
    const auto rk = keep.row(h);
#pragma unroll
    for (int b = 0; b < NT; ++b) {
        float p0 = exp2_(fmaf(s[b][2 * h], sc, -mu));
        float p1 = exp2_(fmaf(s[b][2 * h + 1], sc, -mu));
        rs += p0 + p1;
        if (DROP) {
            bool k0, k1;
            rk(b, k0, k1);
            p0 = k0 ? p0 : 0.0f;
            p1 = k1 ? p1 : 0.0f;
        }
        s[b][2 * h] = p0;
        s[b][2 * h + 1] = p1;
    }
    l[h] = l[h] * alpha + rs;
    return alpha;
}

template <typename E, int NT, int DT>
__device__ __forceinline__ void softmax_pack(const float (&s)[NT][4], int h,
                                             float (&acc)[DT][4], float alpha,
                                             unsigned (&pf)[NT][2])
{
#pragma unroll
    for (int b = 0; b < NT; ++b) pf[b][h] = E::pack(s[b][2 * h], s[b][2 * h + 1]);
#pragma unroll
    for (int b = 0; b < DT; ++b) {
        acc[b][2 * h] *= alpha;
        acc[b][2 * h + 1] *= alpha;
    }
}

// Both parts, row half by row half (s is left holding P).
template <typename E, bool DROP, int NT, int DT>
__device__ __forceinline__ void softmax_tile(float (&s)[NT][4], float (&acc)[DT][4],
                                             float (&m)[2], float (&l)[2],
                                             unsigned (&pf)[NT][2],
                                             const unsigned (&kbits)[NT / 4], bool al16,
                                             long long bh, int sq, int sk, int r16,
                                             int j0, int lane, const PhiloxKey &key)
{
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const float alpha = softmax_exp<DROP, NT>(
            s, h, m, l, QuadKeeps<NT>{kbits, al16, bh, sq, sk, r16, j0, lane, key});
        softmax_pack<E, NT, DT>(s, h, acc, alpha, pf);
    }
}

// Rows r0 + 16a + g + 8h (< nrows) of acc * f, rounded to 16 bits, into dst (row stride
// D elements, C-contiguous).
template <typename E, int D, int MT>
__device__ __forceinline__ void store_rows(unsigned short *dst, const float (&acc)[MT][D / 8][4],
                                           int r0, int nrows, float f, int lane)
{
    const int g = lane >> 2, tq = lane & 3;
#pragma unroll
    for (int a = 0; a < MT; ++a)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = r0 + a * 16 + g + 8 * h;
            if (r >= nrows)
                continue;
            unsigned *row = reinterpret_cast<unsigned *>(dst + (long long)r * D);
#pragma unroll
            for (int b = 0; b < D / 8; ++b)
                row[b * 4 + tq] = E::pack(acc[a][b][2 * h] * f, acc[a][b][2 * h + 1] * f);
        }
}


}  // namespace flash
}  // namespace tessera

// The arguments every kernel of the file takes first (the forward's, TESSERA_FLASH_ARGS).
#define TESSERA_FLASH_ARGS                                                                  \
    int blocks_per_bh, int sq, int sk, const long long *__restrict__ offs,                 \
        const unsigned short *__restrict__ q, long long q_sr,                               \
        const unsigned short *__restrict__ k, long long k_sr,                               \
        const unsigned short *__restrict__ v, long long v_sr, int mask_kind,                \
        const unsigned char *__restrict__ bmask, const unsigned short *__restrict__ amask,  \
        long long m_sr, long long m_sc, long long lo, long long hi, float scale,           \
        unsigned seed_lo, unsigned seed_hi, unsigned off_lo, unsigned off_hi,              \
        unsigned t8, unsigned frac, float keep_scale

// A forward kernel's block, declared from TESSERA_FLASH_ARGS for blocks of BM query rows
// and key tiles of BN: bh and the first row i0 (row blocks counted from the end: the
// longest causal rows first), the bh's q, k, v (qb, kb, vb), its Visibility vis and the
// dropout key, and the key tiles [t_begin, t_end) the band leaves visible to the rows.
#define TESSERA_FLASH_FWD_BLOCK(BM, BN)                                                     \
    const long long bh = blockIdx.x / blocks_per_bh;                                         \
    const int mb = blocks_per_bh - 1 - (int)(blockIdx.x - bh * blocks_per_bh);              \
    const int i0 = mb * (BM);                                                                \
    const long long *o = offs + bh * 8;                                                      \
    const unsigned short *qb = q + o[0];                                                     \
    const unsigned short *kb = k + o[1];                                                     \
    const unsigned short *vb = v + o[2];                                                     \
    const tessera::flash::Visibility vis{sq, sk, mask_kind, bmask, amask, o[3],              \
                                         m_sr, m_sc, lo, hi};                                \
    const tessera::PhiloxKey key{seed_lo, seed_hi, off_lo, off_hi, t8, frac};              \
    int t_begin, t_end;                                                                      \
    vis.key_tiles(i0, (BM), (BN), t_begin, t_end)

#endif  // TESSERA_FLASH_CUH
