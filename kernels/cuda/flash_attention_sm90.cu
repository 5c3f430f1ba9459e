// flash_attention_sm90.cu: the attention forward on Hopper's warpgroup tensor cores
// (wgmma) for float16 and bfloat16 (NVIDIA sm_90a: compiled for sm_90a alone; the body is
// empty for any other target and the launcher routes only compute capability 9.0 here).
//
// What it computes: exactly what tessera_flash_fwd of flash_attention.cu computes
// (FlashAttention-2's forward, Dao 2023, Algorithm 1: S = scale Q K^T with the band and
// the masks, the online softmax in base 2, O += (P * keep) V with P rounded to the input
// type, out = O * keep_scale / l, lse = (m + log2 l) ln 2), with the same arguments
// (TESSERA_FLASH_ARGS), the same Visibility, the same dropout keep bits
// (tessera/flash.cuh) and the same softmax step (softmax_exp), which here takes the scale
// inside the exponent's FFMA (a multiply an element fewer; on an H100 D 128 +2-7%, D 64
// +12-16% without dropout and +2-4% with it), for a scale in [2**-120, 2**120] alone
// (the launcher routes the others to tessera_flash_fwd): the two kernels differ in how
// the products run and in that rounding; their dropout masks are the CPU's bit for bit.
//
// Layout and strides: as tessera_flash_fwd (q, k, v rows 16-byte aligned, unit column
//   stride, per-bh offsets from the launcher's table; out (BH, Sq, D), lse (BH, Sq)
//   float32, C-contiguous).
// Launch geometry: blocks of WG = 2 warpgroups (256 threads; with dropout a third, the
//   keep bytes': DROP_THREADS); warpgroup w owns the 64
//   query rows [i0 + 64 w, + 64) of the block's BM = 128; 1-D grid of BH * ceil(Sq / BM)
//   blocks, a block's row block counted from the end (the longest causal rows first).
//   Dynamic shared memory 1024 + (BM + 4 BN) D 2 bytes: the Q tile and two K and two V
//   tiles (double-buffered), each stored as D / 64 column blocks of 128-byte rows with
//   the 128-byte swizzle (16-byte chunk c of row r at c ^ (r & 7)), which the wgmma
//   descriptors name (mode 1): Q and K K-major (the 64 x 16 and 16 x BN operands of
//   S = Q K^T), V N-major (imm-trans-b: the 16 x D operand of P V, keys as K).
//   Static shared memory: eight mbarriers, a full and an empty one for each K and V
//   stage (full: every thread's copies into it landed; empty: every thread's products
//   reading it done), so no block-wide barrier runs inside the loop. With dropout, 32 KB
//   more (BN 128): KEEP_STAGES stages of keep bytes (keep_bytes, a byte an element), each
//   with a full and an empty mbarrier.
//   Pipeline: iteration t fetches K_{t+1} and V_t (cp.async), issues S_t = Q K_t^T and
//   then O += P_{t-1} V_{t-1}, reads tile t's keep words while both run, waits for S_t
//   and takes the softmax's exponentials while P_{t-1} V_{t-1} runs, then waits for it,
//   rescales O and packs P_t. The dropout warpgroup computes the keep bytes (Philox, one
//   block for sixteen elements) up to KEEP_STAGES tiles ahead, at KEEP_REGS registers a
//   thread: setmaxnreg gives the rest to the softmax warpgroups (SOFTMAX_REGS), which
//   compare each byte as they apply it. The generator's work and the softmax's add
//   rather than overlap (benchmarks/NOTES.md, "Philox4x32-10's rate"), so the generator
//   is kept to the Philox rounds and the ties.
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
// With dropout a third warpgroup computes the keep bytes (keep_bytes) into KEEP_STAGES
// shared stages ahead of the softmax, so its Philox work runs beside the two softmax
// warpgroups instead of in their loop; setmaxnreg moves the registers to them. Two stages
// of a byte an element (16 KB each at BN 128) stay under the 48 KB of static shared memory.
constexpr int KEEP_THREADS = 4 * WARP;
constexpr int KEEP_STAGES = 2;
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

// The keep bytes. The dropout warpgroup hands the softmax the bytes of the dropout
// contract (tessera/philox.cuh) themselves: a softmax thread keeps an element whose byte
// is >= keep_byte(key) (one shift and one compare, as a keep bit would cost), and the
// generator does no comparing beyond finding the ties (byte == t8, one element in 256),
// which it decides by their refinement words and rewrites to a byte on the right side
// (t8 - 1 for a dropped tie; 1 for a kept one where t8 is 0). Word v = NP hr + p of
// softmax thread (g, tq) holds its elements of row g + 8 hr, n-tiles 2p and 2p + 1:
// byte 2 s + x is column 16 p + 8 s + 2 tq + x (s, x in 0, 1), the bytes of words tq / 2
// and 2 + tq / 2 of the row's Philox block for those sixteen columns.
__device__ __forceinline__ unsigned keep_byte(const PhiloxKey &key)
{
    return key.t8 ? key.t8 : 1u;
}

// The dropout warpgroup's work for one row (counters from c0, c0 % 16 == 0) of a tile:
// the NT / 2 blocks' bytes, as the words of the four softmax threads of the row's quad
// (d: their words, word v at d + v THREADS), then the ties.
template <int NT>
__device__ __forceinline__ void keep_bytes(unsigned *d, unsigned long long c0, const PhiloxKey &key)
{
    static_assert(NT / 2 * 4 <= int(sizeof(unsigned) * 8),
                  "keep_bytes: a bit for each word of the row's blocks");
    const unsigned tb = key.t8 * 0x01010101u;
    unsigned runs = 0;  // bit 4 p + q: word q of block p holds a tie
#pragma unroll
    for (int p = 0; p < NT / 2; ++p) {
        const uint4 u = philox_block((c0 >> 4) + (unsigned long long)p, key);
        runs |= ((bytes_equal(u.x, tb) ? 1u : 0u) | (bytes_equal(u.y, tb) ? 2u : 0u) |
                 (bytes_equal(u.z, tb) ? 4u : 0u) | (bytes_equal(u.w, tb) ? 8u : 0u))
                << (4 * p);
        uint4 o;
        o.x = __byte_perm(u.x, u.z, 0x5410);  // tq 0: bytes 0, 1 of words 0 and 2
        o.y = __byte_perm(u.x, u.z, 0x7632);  // tq 1: bytes 2, 3
        o.z = __byte_perm(u.y, u.w, 0x5410);  // tq 2: bytes 0, 1 of words 1 and 3
        o.w = __byte_perm(u.y, u.w, 0x7632);  // tq 3
        *reinterpret_cast<uint4 *>(d + p * THREADS) = o;
    }
    if (key.frac == 0u && key.t8 != 0u)
        return;  // every tie keeps, and its byte (t8 >= 1) already says so
    // One refinement block for each word with a tie, the lanes in step: the warp runs as
    // many as its lane with the most such words (two or three a tile at p = 0.1).
    while (runs) {
        const int r = __ffs(runs) - 1;
        runs &= runs - 1u;
        const int p = r >> 2, q = r & 3;
        const uint4 w = philox_block((1ull << 63) | ((c0 >> 2) + (unsigned long long)r), key);
#pragma unroll
        for (int k = 0; k < 4; ++k) {  // column 4 q + k of block p
            unsigned char *a = reinterpret_cast<unsigned char *>(
                                   d + p * THREADS + 2 * (q & 1) + (k >> 1)) +
                               2 * (q >> 1) + (k & 1);
            if (*a == key.t8) {
                const bool keep = philox_lane(w, (unsigned)k) >= key.frac;
                if (key.t8 ? !keep : keep)
                    *a = (unsigned char)(key.t8 ? key.t8 - 1u : 1u);
            }
        }
    }
}

// As keep_bytes for a row whose counters from c0 start anywhere in a block (Sk % 16 !=
// 0): the keep decisions (keep16, ties resolved there) written as bytes 0xFF and 0.
template <int NT>
__device__ __forceinline__ void keep_bytes_any(unsigned *d, unsigned long long c0,
                                               const PhiloxKey &key)
{
    const unsigned o = (unsigned)(c0 & 15);
    unsigned lo = keep16(c0 >> 4, key);
#pragma unroll 1
    for (int p = 0; p < NT / 2; ++p) {
        // the next block: this run's tail where o != 0, the next run's head after it
        const unsigned hi =
            o || p + 1 < NT / 2 ? keep16((c0 >> 4) + (unsigned long long)(p + 1), key) : 0u;
        const unsigned bits = ((lo | hi << 16) >> o) & 0xFFFFu;  // columns 16 p + 0 .. 15
        lo = hi;
#pragma unroll
        for (int tq = 0; tq < 4; ++tq) {
            unsigned word = 0u;
#pragma unroll
            for (int y = 0; y < 4; ++y)  // byte y = 2 s + x: column 8 s + 2 tq + x
                word |= ((bits >> (8 * (y >> 1) + 2 * tq + (y & 1))) & 1u) * (0xFFu << (8 * y));
            d[p * THREADS + tq] = word;
        }
    }
}

// A softmax thread's keep decisions from its keep words (keep_bytes' layout), the
// interface of QuadKeeps (tessera/flash.cuh).
template <int NT> struct ByteKeeps {
    unsigned w[2][NT / 2];
    unsigned kb;  // keep_byte

    struct Row {
        unsigned w[NT / 2];
        unsigned kb24;
        __device__ __forceinline__ void operator()(int b, bool &k0, bool &k1) const
        {
            const unsigned x = w[b >> 1];
            const int s = b & 1;
            k0 = (x << (24 - 16 * s)) >= kb24;  // byte 2 s
            k1 = (x << (16 - 16 * s)) >= kb24;  // byte 2 s + 1
        }
    };
    __device__ __forceinline__ Row row(int h) const
    {
        Row r;
#pragma unroll
        for (int p = 0; p < NT / 2; ++p) r.w[p] = w[h][p];
        r.kb24 = kb << 24;
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
    constexpr int NP = NT / 2, NV = NT;  // keep words a softmax thread a tile: NP a row half
    __shared__ __align__(16) unsigned kwords[DROP ? KEEP_STAGES * NV * THREADS : 4];
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
            // thread x = 16 w + 2 g + hr makes row half hr's words of softmax threads
            // 32 w + 4 g + 0 .. 3: row i0 + 16 w + g + 8 hr
            const int x = threadIdx.x - THREADS, hr = x & 1;
            const unsigned long long rowc =
                ((unsigned long long)bh * sq +
                 (unsigned long long)(i0 + 16 * (x >> 4) + ((x >> 1) & 7) + 8 * hr)) *
                (unsigned long long)sk;
            unsigned *dst = kwords + hr * NP * THREADS + 2 * (x & ~1);
            for (int t = t_begin; t < t_end; ++t) {
                const unsigned n = (unsigned)(t - t_begin), st = n % KEEP_STAGES;
                if (n >= KEEP_STAGES)
                    mbar_wait(keepEmpty + 8 * st, (n / KEEP_STAGES - 1) & 1u);
                unsigned *d = dst + st * NV * THREADS;
                const unsigned long long c0 = rowc + (unsigned long long)(t * BN);
                if ((sk & 15) == 0)
                    keep_bytes<NT>(d, c0, key);
                else
                    keep_bytes_any<NT>(d, c0, key);
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
        ByteKeeps<NT> keep;  // while they run: this thread's keep words of tile t
        if (DROP) {
            const unsigned st = n % KEEP_STAGES;
            mbar_wait(keepFull + 8 * st, (n / KEEP_STAGES) & 1u);
#pragma unroll
            for (int h = 0; h < 2; ++h)
#pragma unroll
                for (int p = 0; p < NP; ++p)
                    keep.w[h][p] = kwords[(st * NV + h * NP + p) * THREADS + threadIdx.x];
            keep.kb = keep_byte(key);
            mbar_arrive(keepEmpty + 8 * st);
        }
        wgmma_wait_one();  // S_t
        keep_live(s_[0]);
        mbar_arrive(emptyK + 8 * s);

        // The scale goes into the exponent's FFMA (softmax_exp); a tile a mask reaches is
        // scaled for the masks (base 2) and back (the launcher's routing: a scale in
        // [2**-120, 2**120], whose reciprocal is a normal float). Masking the unscaled
        // scores instead (the additive mask times 1 / scale) spills 8 bytes at D 128 with
        // dropout, as did a per-tile scale of 1 on masked tiles.
        if (!vis.all(i0, BM, j0, BN)) {
            scale_scores(s_, scale2);
            mask_scores<E, false>(s_, vis, i0 + wrow, j0, lane);
            scale_scores(s_, __frcp_rn(scale2));
        }
        float alpha[2];
#pragma unroll
        for (int h = 0; h < 2; ++h)
            alpha[h] = softmax_exp<DROP, NT>(s_[0], h, m[0], l[0], keep, scale2);
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
