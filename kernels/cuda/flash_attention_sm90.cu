// flash_attention_sm90.cu: the attention forward on Hopper's warpgroup tensor cores
// (wgmma) for float16 and bfloat16 (NVIDIA sm_90a: compiled for sm_90a alone; the body is
// empty for any other target and the launcher routes only compute capability 9.0 here).
//
// What it computes: exactly what tessera_flash_fwd of flash_attention.cu computes
// (FlashAttention-2's forward, Dao 2023, Algorithm 1: S = scale Q K^T with the band and
// the masks, the online softmax in base 2, O += (P * keep) V with P rounded to the input
// type, out = O * keep_scale / l, lse = (m + log2 l) ln 2), with the same arguments
// (TESSERA_FLASH_ARGS), the same Visibility, the same dropout keep bits
// (tessera/flash.cuh) and the same softmax step (softmax_tile): the two kernels differ
// only in how the two products run, so their dropout masks are the CPU's bit for bit.
//
// Layout and strides: as tessera_flash_fwd (q, k, v rows 16-byte aligned, unit column
//   stride, per-bh offsets from the launcher's table; out (BH, Sq, D), lse (BH, Sq)
//   float32, C-contiguous).
// Launch geometry: blocks of WG = 2 warpgroups (256 threads; with dropout a third, the
//   keep bits': DROP_THREADS); warpgroup w owns the 64
//   query rows [i0 + 64 w, + 64) of the block's BM = 128; 1-D grid of BH * ceil(Sq / BM)
//   blocks, a block's row block counted from the end (the longest causal rows first).
//   Dynamic shared memory 1024 + (BM + 4 BN) D 2 bytes: the Q tile and two K and two V
//   tiles (double-buffered), each stored as D / 64 column blocks of 128-byte rows with
//   the 128-byte swizzle (16-byte chunk c of row r at c ^ (r & 7)), which the wgmma
//   descriptors name (mode 1): Q and K K-major (the 64 x 16 and 16 x BN operands of
//   S = Q K^T), V N-major (imm-trans-b: the 16 x D operand of P V, keys as K).
//   Static shared memory: eight mbarriers, a full and an empty one for each K and V
//   stage (full: every thread's copies into it landed; empty: every thread's products
//   reading it done), so no block-wide barrier runs inside the loop. With dropout, 8 KB
//   more: KEEP_STAGES stages of keep words (keep_words), each with a full and an empty
//   mbarrier.
//   Pipeline: iteration t fetches K_{t+1} and V_t (cp.async), issues S_t = Q K_t^T and
//   then O += P_{t-1} V_{t-1}, reads tile t's keep words while both run, waits for S_t
//   and takes the softmax's exponentials while P_{t-1} V_{t-1} runs, then waits for it,
//   rescales O and packs P_t. The dropout warpgroup computes the keep words (Philox)
//   up to KEEP_STAGES tiles ahead, at KEEP_REGS registers a thread: setmaxnreg gives the
//   rest to the softmax warpgroups (SOFTMAX_REGS). Measured on an H100 (NOTES,
//   "Philox4x32-10's rate"): the generator alone makes a tile's bits in ~5,700 cycles,
//   the softmax alone takes ~6,400, together ~10,800 (D 128): they add rather than
//   overlap, and neither a second generator warpgroup nor more generator registers
//   moved the tile.
// Accumulation: float32 (wgmma m64nNk16, f32 accumulators); P in registers as the A
//   operand of P V (the accumulator's layout is the A fragment's: no shared round trip).
// Numerical caveats: as tessera_flash_fwd (ex2.approx; the dot products in the tensor
//   cores' order; out rounded once). The same bits run to run.
//
// Template parameters: E (tessera::flash::f16 or bf16), D (64 or 128), BN (keys a tile,
//   64 or 128), DROP (dropout on).
// NVIDIA only (PTX); the whole file is empty under hipcc.

#if !defined(__HIPCC__)

#include "tessera/flash.cuh"

namespace tessera {
namespace flash {
namespace sm90 {

constexpr int WG = 2;               // warpgroups a block (the softmax's)
constexpr int THREADS = WG * 4 * WARP;
constexpr int BM = 64 * WG;         // query rows a block
// With dropout a third warpgroup computes the keep bits (keep_words) into KEEP_STAGES
// shared stages a tile ahead of the softmax, so its Philox work runs beside the two
// softmax warpgroups instead of in their loop; setmaxnreg moves the registers to them.
constexpr int KEEP_THREADS = 4 * WARP;
constexpr int KEEP_STAGES = 4;
constexpr int DROP_THREADS = THREADS + KEEP_THREADS;  // a block with dropout
// setmaxnreg moves registers inside the block's allocation, launched at the register count
// __launch_bounds__ allows (65536 / 384, rounded down to 8: 168): the split may not exceed
// it (an increase past it would wait forever).
constexpr unsigned LAUNCH_REGS = (65536u / DROP_THREADS) & ~7u;
constexpr unsigned SOFTMAX_REGS = 224, KEEP_REGS = 56;
static_assert(THREADS * SOFTMAX_REGS + KEEP_THREADS * KEEP_REGS <= DROP_THREADS * LAUNCH_REGS,
              "setmaxnreg's split of the block's registers");

// Byte offset of 16-byte chunk c of row r in a tile of R rows and D 16-bit columns
// stored as D / 64 column blocks of R 128-byte rows, 128-byte swizzled.
template <int R> __device__ __forceinline__ unsigned sw128(int r, int c)
{
    return (unsigned)((c >> 3) * (R * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4));
}

// Rows [r0, r0 + R) of a (.., D) matrix (row stride sr elements) into such a tile;
// rows at or past nrows are zero-filled.
template <int D, int R>
__device__ __forceinline__ void load_tile(unsigned tile, const unsigned short *p, long long sr,
                                          int r0, int nrows)
{
    constexpr int CH = D / 8;
    static_assert(R * CH % THREADS == 0, "a tile is a whole number of block-wide loads");
#pragma unroll
    for (int it = 0; it < R * CH / THREADS; ++it) {
        const int t = threadIdx.x + it * THREADS;
        const int r = t / CH, c = t - r * CH;
        const bool in = r0 + r < nrows;
        const unsigned short *src = in ? p + (long long)(r0 + r) * sr + c * 8 : p;
        cp_async16(tile + sw128<R>(r, c), src, in ? 16 : 0);
    }
}

// A shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor"): start address,
// leading and stride byte offsets (each >> 4), 128-byte swizzle (mode 1 in bits 62-63).
__device__ __forceinline__ unsigned long long desc(unsigned addr, unsigned lbo, unsigned sbo)
{
    return (unsigned long long)((addr & 0x3FFFFu) >> 4) |
           ((unsigned long long)((lbo >> 4) & 0x3FFFu) << 16) |
           ((unsigned long long)((sbo >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}

template <int N> __device__ __forceinline__ void keep_live(float (&d)[N][4])
{
#pragma unroll
    for (int b = 0; b < N; ++b)
#pragma unroll
        for (int c = 0; c < 4; ++c) asm volatile("" : "+f"(d[b][c])::"memory");
}

__device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_wait_all()
{
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
}
// All but the newest wgmma group complete.
__device__ __forceinline__ void wgmma_wait_one()
{
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
}
// This thread's shared-memory writes made visible to the async proxy (wgmma's reads).
__device__ __forceinline__ void fence_async_shared()
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// mbarriers in shared memory (PTX ISA, "mbarrier"): a phase completes once `count`
// arrivals have come; a waiter names the parity of the phase it waits for.
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar)
{
    asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared::cta.b64 st, [%0];\n}" ::"r"(bar)
                 : "memory");
}
// An arrival once every cp.async this thread has issued so far has landed.
__device__ __forceinline__ void mbar_arrive_copies(unsigned bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity)
{
    asm volatile("{\n .reg .pred done;\n"
                 "WAIT:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 " @!done bra WAIT;\n}" ::"r"(bar), "r"(parity)
                 : "memory");
}

// The keep bits of counters c .. c + 3 of the dropout stream (bit w: counter c + w kept),
// for any c (two Philox blocks where c is not a multiple of 4).
template <bool AL4>
__device__ __forceinline__ unsigned keep_run4(unsigned long long c, const PhiloxKey &key)
{
    const unsigned lo = keep_bits4(c, key);
    const unsigned r = (unsigned)(c & 3);
    if (AL4 || r == 0)
        return lo;
    return ((lo | keep_bits4(c + 4, key) << 4) >> r) & 0xFu;
}

// The dropout warpgroup's work for the tile of keys from j0: its thread x (0 .. 127) makes
// the keep words of softmax threads 32 w + 4 g + 2 hq and + 1 (w = x / 16, g = (x / 2) % 8,
// hq = x % 2): rows r0 = i0 + 16 w + g and r0 + 8 (hr 0, 1), columns j0 + 8 b + 4 hq + 0 .. 3
// (one run of four counters, the first two the first thread's, C layout columns 2 tq, + 1).
// Word v of a softmax thread holds its n-tiles 8 v .. 8 v + 7: bit 4 (b % 8) + 2 hr + e
// keeps element (row g + 8 hr, column 8 b + 2 tq + e), the C layout's register order.
template <int NT, bool AL4>
__device__ __forceinline__ void keep_words(unsigned (&w)[2][NT / 8], long long bh, int sq,
                                           int sk, int r0, int j0, int hq, const PhiloxKey &key)
{
#pragma unroll
    for (int v = 0; v < NT / 8; ++v) {
        w[0][v] = w[1][v] = 0u;
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
            const unsigned long long c0 =
                ((unsigned long long)bh * sq + (unsigned long long)(r0 + 8 * hr)) *
                    (unsigned long long)sk +
                (unsigned long long)(j0 + 64 * v + 4 * hq);
#pragma unroll 4
            for (int b = 0; b < 8; ++b) {
                const unsigned k4 = keep_run4<AL4>(c0 + 8 * b, key);
                const int sh = 4 * b + 2 * hr;
                w[0][v] |= (k4 & 3u) << sh;
                w[1][v] |= ((k4 >> 2) & 3u) << sh;
            }
        }
    }
}

// A softmax thread's keep decisions from its keep words (keep_words' layout), the
// interface of QuadKeeps (tessera/flash.cuh).
template <int NT> struct WordKeeps {
    unsigned w[NT / 8];

    struct Row {
        unsigned w[NT / 8];
        __device__ __forceinline__ void operator()(int b, bool &k0, bool &k1) const
        {
            const unsigned x = w[b >> 3] >> (4 * (b & 7));
            k0 = (x & 1u) != 0u;
            k1 = (x & 2u) != 0u;
        }
    };
    __device__ __forceinline__ Row row(int h) const
    {
        Row r;
#pragma unroll
        for (int v = 0; v < NT / 8; ++v) r.w[v] = w[v] >> (2 * h);
        return r;
    }
};

template <unsigned N> __device__ __forceinline__ void setmaxnreg_inc()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}
template <unsigned N> __device__ __forceinline__ void setmaxnreg_dec()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

// The accumulator of one thread, N / 2 registers, as asm operands %0 .. %(N / 2 - 1)
// (TESSERA_WG_D32 / D64) and their list in the instruction (TESSERA_WG_R32 / R64).
#define TESSERA_WG_D4(d, b) "+f"(d[b][0]), "+f"(d[b][1]), "+f"(d[b][2]), "+f"(d[b][3])
#define TESSERA_WG_D32(d)                                                                  \
    TESSERA_WG_D4(d, 0), TESSERA_WG_D4(d, 1), TESSERA_WG_D4(d, 2), TESSERA_WG_D4(d, 3),    \
        TESSERA_WG_D4(d, 4), TESSERA_WG_D4(d, 5), TESSERA_WG_D4(d, 6), TESSERA_WG_D4(d, 7)
#define TESSERA_WG_D64(d)                                                                  \
    TESSERA_WG_D32(d), TESSERA_WG_D4(d, 8), TESSERA_WG_D4(d, 9), TESSERA_WG_D4(d, 10),     \
        TESSERA_WG_D4(d, 11), TESSERA_WG_D4(d, 12), TESSERA_WG_D4(d, 13),                  \
        TESSERA_WG_D4(d, 14), TESSERA_WG_D4(d, 15)
#define TESSERA_WG_R32 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define TESSERA_WG_R64 \
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}"

// wgmma_ss (d (+)= A B, A 64 x 16 and B 16 x N from shared memory by descriptors; acc = 0:
// d = A B) and wgmma_rs (d += A B, A from registers: the m16n8k16 A fragment of this
// warp's 16 rows; B 16 x N N-major from shared memory, imm-trans-b 1) for the element
// type T (a tessera::flash type, named as PTX names it) and N = 8 NT columns: R and DOPS
// the accumulator's list and operands, then the operand numbers that follow them.
#define TESSERA_WGMMA(T, N, NT, R, DOPS, SS_AB, SS_ACC, RS_AB, RS_ONE)                     \
    __device__ __forceinline__ void wgmma_ss(float(&d)[NT][4], T, unsigned long long a,    \
                                             unsigned long long b, int acc)                \
    {                                                                                      \
        asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, " SS_ACC ", 0;\n"                 \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." #T "." #T " " R     \
                     ", " SS_AB ", p, 1, 1, 0, 0;\n}\n"                                      \
                     : DOPS(d)                                                              \
                     : "l"(a), "l"(b), "r"(acc));                                           \
    }                                                                                      \
    __device__ __forceinline__ void wgmma_rs(float(&d)[NT][4], T, const unsigned(&a)[4],   \
                                             unsigned long long b)                         \
    {                                                                                      \
        asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, " RS_ONE ", 0;\n"                 \
                     "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." #T "." #T " " R     \
                     ", " RS_AB ", p, 1, 1, 1;\n}\n"                                         \
                     : DOPS(d)                                                              \
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(1));        \
    }

TESSERA_WGMMA(bf16, 64, 8, TESSERA_WG_R32, TESSERA_WG_D32, "%32, %33", "%34",
              "{%32, %33, %34, %35}, %36", "%37")
TESSERA_WGMMA(bf16, 128, 16, TESSERA_WG_R64, TESSERA_WG_D64, "%64, %65", "%66",
              "{%64, %65, %66, %67}, %68", "%69")
TESSERA_WGMMA(f16, 64, 8, TESSERA_WG_R32, TESSERA_WG_D32, "%32, %33", "%34",
              "{%32, %33, %34, %35}, %36", "%37")
TESSERA_WGMMA(f16, 128, 16, TESSERA_WG_R64, TESSERA_WG_D64, "%64, %65", "%66",
              "{%64, %65, %66, %67}, %68", "%69")

#undef TESSERA_WGMMA
#undef TESSERA_WG_R64
#undef TESSERA_WG_R32
#undef TESSERA_WG_D64
#undef TESSERA_WG_D32

// acc += P V: P (this warp's 16 rows, BN = 8 NT keys) from registers as packed A
// fragments pf[n][h] (softmax_tile's), V the BN x D tile at va (N-major, 128-byte
// swizzled column blocks of 64): BN / 16 wgmma k-steps, issued, not waited.
template <typename E, int NT, int DT>
__device__ __forceinline__ void pv(float (&acc)[1][DT][4], const unsigned (&pf)[NT][2],
                                   unsigned va)
{
#pragma unroll
    for (int kk = 0; kk < NT / 2; ++kk) {
        const unsigned a[4] = {pf[2 * kk][0], pf[2 * kk][1], pf[2 * kk + 1][0],
                               pf[2 * kk + 1][1]};
        wgmma_rs(acc[0], E{}, a, desc(va + kk * 16 * 128, NT * 8 * 128, 1024));
    }
}

#undef TESSERA_WG_D4

#endif  // __CUDA_ARCH_FEAT_SM90_ALL

}  // namespace sm90
}  // namespace flash
}  // namespace tessera

template <typename E, int D, int BN, bool DROP>
__global__ void __launch_bounds__(DROP ? tessera::flash::sm90::DROP_THREADS : tessera::flash::sm90::THREADS, 1)
tessera_flash_fwd_sm90(TESSERA_FLASH_ARGS, unsigned short *__restrict__ out,
                       float *__restrict__ lse)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using namespace tessera::flash;
    using namespace tessera::flash::sm90;
    constexpr int NT = BN / 8;  // score n-tiles of a warp's 16 rows
    constexpr int DT = D / 8;   // output n-tiles
    constexpr unsigned KV = BN * D * 2;  // bytes of one K or V tile
    constexpr unsigned KSTEP = 16 * 2;   // bytes of a k-step's 16 columns in a 128-byte row
    extern __shared__ __align__(1024) unsigned char smem[];
    const unsigned sQ = (smem_addr(smem) + 1023u) & ~1023u;  // the swizzle's 1024-byte atoms
    const unsigned sK = sQ + BM * D * 2;
    const unsigned sV = sK + 2 * KV;

    const int lane = threadIdx.x % WARP, warp = threadIdx.x / WARP;
    const int wg = warp / 4;
    TESSERA_FLASH_FWD_BLOCK(BM, BN);

    // Stage s of K and of V (s = (t - t_begin) & 1) each have a barrier that completes
    // when every thread's copies into it have landed (full) and one that completes when
    // every thread's products reading it are done (empty). A warpgroup waits for the data
    // it reads and, before refilling a stage, for both warpgroups to be done with it: not
    // for the other warpgroup's softmax, so the two may drift apart by up to a tile and one
    // warpgroup's products run while the other's integer and exponential work does.
    __shared__ __align__(8) unsigned long long bars[8 + 2 * KEEP_STAGES];
    // two 8-byte barriers (stages 0 and 1) for each of full K, full V, empty K, empty V;
    // with dropout, a full and an empty one for each keep stage (full: the dropout
    // warpgroup's words written; empty: every softmax thread's read)
    const unsigned fullK = smem_addr(bars), fullV = fullK + 2 * 8, emptyK = fullK + 4 * 8,
                   emptyV = fullK + 6 * 8, keepFull = fullK + 8 * 8,
                   keepEmpty = keepFull + KEEP_STAGES * 8;
    constexpr int NW = NT / 8;  // keep words a softmax thread a tile
    __shared__ unsigned kwords[DROP ? KEEP_STAGES * NW * THREADS : 1];
    if (threadIdx.x == 0) {
        for (int i = 0; i < 8; ++i) mbar_init(fullK + 8 * i, THREADS);
        if (DROP)
            for (int i = 0; i < KEEP_STAGES; ++i) {
                mbar_init(keepFull + 8 * i, KEEP_THREADS);
                mbar_init(keepEmpty + 8 * i, THREADS);
            }
    }
    __syncthreads();
    if (DROP) {
        if (threadIdx.x >= THREADS) {  // the dropout warpgroup
            setmaxnreg_dec<KEEP_REGS>();
            const int x = threadIdx.x - THREADS;
            const int r0 = i0 + 16 * (x >> 4) + ((x >> 1) & 7), hq = x & 1;
            unsigned *dst = kwords + 2 * x * NW;  // softmax threads 2 x = 32 w + 4 g + 2 hq, + 1
            for (int t = t_begin; t < t_end; ++t) {
                const unsigned n = (unsigned)(t - t_begin), st = n % KEEP_STAGES;
                unsigned w[2][NW];
                if ((sk & 3) == 0)
                    keep_words<NT, true>(w, bh, sq, sk, r0, t * BN, hq, key);
                else
                    keep_words<NT, false>(w, bh, sq, sk, r0, t * BN, hq, key);
                if (n >= KEEP_STAGES)
                    mbar_wait(keepEmpty + 8 * st, (n / KEEP_STAGES - 1) & 1u);
#pragma unroll
                for (int e = 0; e < 2; ++e)
#pragma unroll
                    for (int v = 0; v < NW; ++v) dst[st * NW * THREADS + e * NW + v] = w[e][v];
                mbar_arrive(keepFull + 8 * st);
            }
            return;
        }
        setmaxnreg_inc<SOFTMAX_REGS>();
    }
    if (t_begin < t_end) {
        load_tile<D, BM>(sQ, qb, q_sr, i0, sq);
        load_tile<D, BN>(sK, kb, k_sr, t_begin * BN, sk);
        mbar_arrive_copies(fullK);
    }

    float acc[1][DT][4];
    zero(acc);
    float m[1][2], l[1][2];
    m[0][0] = m[0][1] = neg_inf();
    l[0][0] = l[0][1] = 0.0f;
    const float scale2 = scale * LOG2E;
    const int wrow = warp * 16;  // the warp's first row in the block (its warpgroup's 64)
    const unsigned qa = sQ + wg * 64 * 128;  // the warpgroup's 64 rows of Q
    unsigned pf[NT][2];  // P of the last tile: the A operand of its P V

    // Iteration t issues S_t = Q K_t^T and then P V_{t-1}, reads tile t's keep words
    // while both run, waits for S_t alone and runs the softmax's exponentials
    // while P V_{t-1} still runs, then waits for it and rescales O and packs P_t. Both
    // are waited for in the iteration that issues them (an accumulator in flight over
    // the loop's back edge makes ptxas serialize every wgmma: C7515).
    for (int t = t_begin; t < t_end; ++t) {
        const int j0 = t * BN;
        const unsigned n = (unsigned)(t - t_begin), s = n & 1u;
        if (t + 1 < t_end) {  // K_{t+1} into stage s ^ 1, once K_{t-1} is read
            if (n >= 1)
                mbar_wait(emptyK + 8 * (s ^ 1u), ((n - 1) >> 1) & 1u);
            load_tile<D, BN>(sK + (s ^ 1u) * KV, kb, k_sr, j0 + BN, sk);
            mbar_arrive_copies(fullK + 8 * (s ^ 1u));
        }
        if (n >= 2)  // V_t into stage s, once V_{t-2} is read
            mbar_wait(emptyV + 8 * s, ((n - 2) >> 1) & 1u);
        load_tile<D, BN>(sV + s * KV, vb, v_sr, j0, sk);
        mbar_arrive_copies(fullV + 8 * s);

        mbar_wait(fullK + 8 * s, (n >> 1) & 1u);  // K_t (and Q)
        if (n >= 1)
            mbar_wait(fullV + 8 * (s ^ 1u), ((n - 1) >> 1) & 1u);  // V_{t-1}
        fence_async_shared();

        float s_[1][NT][4];
        zero(s_);
        wgmma_fence();
        const unsigned ka = sK + s * KV;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk)
            wgmma_ss(s_[0], E{}, desc(qa + (kk >> 2) * (BM * 128) + (kk & 3) * KSTEP, 16, 1024),
                     desc(ka + (kk >> 2) * (BN * 128) + (kk & 3) * KSTEP, 16, 1024), kk > 0);
        wgmma_commit();
        if (n >= 1)
            pv<E, NT, DT>(acc, pf, sV + (s ^ 1u) * KV);  // O += P V_{t-1}
        wgmma_commit();
        WordKeeps<NT> keep;  // while they run: this thread's keep words of tile t
        if (DROP) {
            const unsigned st = n % KEEP_STAGES;
            mbar_wait(keepFull + 8 * st, (n / KEEP_STAGES) & 1u);
#pragma unroll
            for (int v = 0; v < NW; ++v)
                keep.w[v] = kwords[st * NW * THREADS + threadIdx.x * NW + v];
            mbar_arrive(keepEmpty + 8 * st);
        }
        wgmma_wait_one();  // S_t
        keep_live(s_[0]);
        mbar_arrive(emptyK + 8 * s);

        scale_scores(s_, scale2);
        if (!vis.all(i0, BM, j0, BN))
            mask_scores<E, false>(s_, vis, i0 + wrow, j0, lane);
        float alpha[2];
#pragma unroll
        for (int h = 0; h < 2; ++h)
            alpha[h] = softmax_exp<DROP, NT>(s_[0], h, m[0], l[0], keep);
        wgmma_wait_all();  // P V_{t-1}: acc and pf free again
        keep_live(acc[0]);
        if (n >= 1)
            mbar_arrive(emptyV + 8 * (s ^ 1u));
#pragma unroll
        for (int h = 0; h < 2; ++h)
            softmax_pack<E, NT, DT>(s_[0], h, acc[0], alpha[h], pf);
    }
    if (t_begin < t_end) {  // O += P V of the last tile
        const unsigned n = (unsigned)(t_end - 1 - t_begin);
        mbar_wait(fullV + 8 * (n & 1u), (n >> 1) & 1u);
        fence_async_shared();
        wgmma_fence();
        pv<E, NT, DT>(acc, pf, sV + (n & 1u) * KV);
        wgmma_commit();
        wgmma_wait_all();
        keep_live(acc[0]);
    }

    // out = O * keep_scale / l, rounded once; lse = (m + log2 l) ln 2.
    const int g = lane >> 2, tq = lane & 3;
    float f[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float ls = l[0][h];
        ls += __shfl_xor_sync(FULL, ls, 1);
        ls += __shfl_xor_sync(FULL, ls, 2);
        f[h] = ls > 0.0f ? keep_scale / ls : 0.0f;
        const int i = i0 + wrow + g + 8 * h;
        if (tq == 0 && i < sq)
            lse[bh * sq + i] = ls > 0.0f ? (m[0][h] + log2f(ls)) * LN2 : neg_inf();
    }
#pragma unroll
    for (int b = 0; b < DT; ++b) {
        acc[0][b][0] *= f[0];
        acc[0][b][1] *= f[0];
        acc[0][b][2] *= f[1];
        acc[0][b][3] *= f[1];
    }
    store_rows<E, D, 1>(out + bh * sq * D, acc, i0 + wrow, sq, 1.0f, lane);
#else
    __trap();  // compiled for another target than sm_90a: never launched (see the header)
#endif
}

#endif  // !defined(__HIPCC__)
