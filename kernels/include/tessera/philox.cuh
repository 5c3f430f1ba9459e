// tessera/philox.cuh: Philox4x32-10 and the dropout keep decision of attention, for the
// CUDA and HIP kernels of kernels/cuda.
//
// What it defines
//   tessera::philox4x32_10(ctr, key): Random123's Philox4x32 with 10 rounds (Salmon,
//     Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC'11), in the
//     paper's notation: a round maps (x0, x1, x2, x3) under the key (k0, k1) to
//     (hi(M1*x2) ^ x1 ^ k0, lo(M1*x2), hi(M0*x0) ^ x3 ^ k1, lo(M0*x0)), the key bumped by
//     (W0, W1) between rounds; hi() is __umulhi (the high 32 bits of the 64-bit product),
//     lo() the wrapping 32-bit product.
//   tessera::philox_block(block, seed, offset): the four words of counter block `block`:
//     Philox4x32-10 of (block lo, block hi, offset lo, offset hi) under (seed lo, seed hi).
//   tessera::philox_lane(u, lane): word `lane` (0..3) of a block's output.
//   tessera::dropout_keep(c, key): the dropout contract of tessera_array.random for
//     element counter c (64-bit): byte c & 15 of block c >> 4 (byte e of word l is byte
//     4 l + e), above t8 = threshold >> 32 keeps, below drops, equal is decided by the
//     refinement word (word c & 3 of block 2**63 | c >> 2) against frac = threshold &
//     0xFFFFFFFF, threshold = floor(p * 2**40).
//   tessera::keep16 / bytes16 / refine4: the same decisions sixteen elements (one block)
//     at a time, the ties (one element in 256) resolved at once or later by the caller.
//   tessera::tie_words / settle_round: a lane's ties of several blocks settled a
//     refinement block a round, for kernels whose lanes settle theirs in step.
//   tessera::PhiloxKey: (seed, offset, t8, frac) as the kernels receive them.
// Integer-only: the same bits as the NumPy backend (backends/numpy/philox.py), the OpenCL
//   kernels (kernels/opencl/philox.cl) and the xp reference, on every device.
// Layout: none. Launch geometry: none.
// Accumulation: none (uint32 words, 64-bit counters).
// Numerical caveats: none (no floating point).
// Reference: Random123's philox.h constants PHILOX_M4x32_0/1, PHILOX_W32_0/1.

#ifndef TESSERA_PHILOX_CUH
#define TESSERA_PHILOX_CUH

#include "tessera/types.cuh"

namespace tessera {

constexpr unsigned int PHILOX_M0 = 0xD2511F53u;
constexpr unsigned int PHILOX_M1 = 0xCD9E8D57u;
constexpr unsigned int PHILOX_W0 = 0x9E3779B9u;
constexpr unsigned int PHILOX_W1 = 0xBB67AE85u;

// The dropout stream: key (seed lo, seed hi), counter words 2-3 (offset lo, offset hi),
// and the keep threshold floor(p * 2**40) as its byte t8 (bits 32..39) and its low word
// frac.
struct PhiloxKey {
    unsigned int seed_lo, seed_hi, off_lo, off_hi, t8, frac;
};

// Each round's two products come from one IMAD.WIDE.U32 each (ptxas's choice for a
// product's high and low words together). The split form (IMAD.HI.U32 + IMAD, the same
// bits) measured 0.77x this rate on an H100 with the pipe full, and no faster in one
// warpgroup an SM (benchmarks/probe_philox.py; figures in benchmarks/NOTES.md).
__device__ __forceinline__ uint4 philox4x32_10(uint4 x, uint2 k)
{
#pragma unroll
    for (int r = 0; r < 10; ++r) {
        if (r > 0) {
            k.x += PHILOX_W0;
            k.y += PHILOX_W1;
        }
        const unsigned int hi0 = __umulhi(PHILOX_M0, x.x);
        const unsigned int lo0 = PHILOX_M0 * x.x;
        const unsigned int hi1 = __umulhi(PHILOX_M1, x.z);
        const unsigned int lo1 = PHILOX_M1 * x.z;
        x = make_uint4(hi1 ^ x.y ^ k.x, lo1, hi0 ^ x.w ^ k.y, lo0);
    }
    return x;
}

__device__ __forceinline__ uint4 philox_block(unsigned long long block, const PhiloxKey &key)
{
    const uint4 ctr = make_uint4((unsigned int)block, (unsigned int)(block >> 32), key.off_lo,
                                 key.off_hi);
    return philox4x32_10(ctr, make_uint2(key.seed_lo, key.seed_hi));
}

__device__ __forceinline__ unsigned int philox_lane(uint4 u, unsigned int lane)
{
    return lane == 0 ? u.x : lane == 1 ? u.y : lane == 2 ? u.z : u.w;
}

// Bits 7, 15, 23, 31 of m (one a byte) as bits 0..3.
__device__ __forceinline__ unsigned byte_bits(unsigned m)
{
    return (((m >> 7) & 0x01010101u) * 0x00204081u) >> 21 & 0xFu;
}

// Bit 7 of each byte: whether that byte of w is above t8 (tb: t8 in every byte). SWAR
// (the same bits on CUDA and HIP): t8 >= w's byte is t8's low seven bits against the
// byte's without a borrow across bytes, then the high bits.
__device__ __forceinline__ unsigned bytes_above(unsigned w, unsigned tb)
{
    const unsigned H = 0x80808080u;
    const unsigned z = (tb | H) - (w & ~H);
    return ~((tb & ~w) | (~(tb ^ w) & z)) & H;
}

// Bit 7 of each byte: whether that byte of w equals t8 (tb: t8 in every byte).
__device__ __forceinline__ unsigned bytes_equal(unsigned w, unsigned tb)
{
    const unsigned x = w ^ tb;
    return ~(((x & 0x7F7F7F7Fu) + 0x7F7F7F7Fu) | x) & 0x80808080u;
}

// The sixteen elements of block n (counters 16 n + e, bit e): gt where the byte is above
// t8 (kept), eq where it equals t8 (a tie: refine4 decides).
__device__ __forceinline__ void bytes16(unsigned long long n, const PhiloxKey &key,
                                        unsigned &gt, unsigned &eq)
{
    const uint4 u = philox_block(n, key);
    const unsigned t = key.t8 * 0x01010101u;
    gt = byte_bits(bytes_above(u.x, t)) | byte_bits(bytes_above(u.y, t)) << 4 |
         byte_bits(bytes_above(u.z, t)) << 8 | byte_bits(bytes_above(u.w, t)) << 12;
    eq = byte_bits(bytes_equal(u.x, t)) | byte_bits(bytes_equal(u.y, t)) << 4 |
         byte_bits(bytes_equal(u.z, t)) << 8 | byte_bits(bytes_equal(u.w, t)) << 12;
}

// Which of the ties tie4 (bit e: element 4 run + e) keep: their refinement words, the
// four words of block 2**63 | run, against frac.
__device__ __forceinline__ unsigned refine4(unsigned long long run, unsigned tie4,
                                           const PhiloxKey &key)
{
    if (key.frac == 0u)
        return tie4;
    const uint4 r = philox_block((1ull << 63) | run, key);
    return tie4 & ((r.x >= key.frac ? 1u : 0u) | (r.y >= key.frac ? 2u : 0u) |
                   (r.z >= key.frac ? 4u : 0u) | (r.w >= key.frac ? 8u : 0u));
}

// The ties of block n (bit e: element 16 n + e) that keep (called, not inlined: the rare
// path stays out of the kernels' loops).
__device__ __noinline__ unsigned refine16(unsigned long long n, unsigned eq, const PhiloxKey &key)
{
    unsigned keep = 0u;
    for (int q = 0; q < 4; ++q)
        if ((eq >> (4 * q)) & 0xFu)
            keep |= refine4(4 * n + q, (eq >> (4 * q)) & 0xFu, key) << (4 * q);
    return keep;
}

// The sixteen keep bits of block n (bit e: element 16 n + e), its ties resolved here.
__device__ __forceinline__ unsigned keep16(unsigned long long n, const PhiloxKey &key)
{
    unsigned gt, eq;
    bytes16(n, key, gt, eq);
    return eq ? gt | refine16(n, eq, key) : gt;
}

// The words with a tie of a lane's A x K blocks (bytes16's eq): bit 4 (K a + k) + q when
// word q of block [a][k] holds one.
template <int A, int K>
__device__ __forceinline__ unsigned tie_words(const unsigned (&eq)[A][K])
{
    static_assert(A * K * 4 <= int(sizeof(unsigned) * 8),
                  "tie_words: a bit for each word of the lane's blocks");
    unsigned words = 0u;
#pragma unroll
    for (int a = 0; a < A; ++a)
#pragma unroll
        for (int k = 0; k < K; ++k)
#pragma unroll
            for (int q = 0; q < 4; ++q)
                words |= (((eq[a][k] >> (4 * q)) & 0xFu) != 0u ? 1u : 0u) << (4 * (K * a + k) + q);
    return words;
}

// One round of settling a lane's ties: the lowest of its tie words left (words, from
// tie_words) takes its refinement block (refine4), whose kept ties join that block's keep
// bits gt (bytes16's); the words left are returned. block(a, k) is block [a][k]'s index
// (computed here, where a tie needs it, rather than held), eq[a][k] its ties. A kernel
// whose lanes settle in step runs rounds while any lane has words left: as many as its
// lane with the most tie words (two blocks a lane, 32 lanes: one round in ~80% of tiles,
// two in ~18%, at any p), inline, where a refine16 call a block ran one after another.
template <int A, int K, typename Block>
__device__ __forceinline__ unsigned settle_round(unsigned (&gt)[A][K], const unsigned (&eq)[A][K],
                                                 const Block &block, unsigned words,
                                                 const PhiloxKey &key)
{
    if (words == 0u)
        return 0u;
    const int r = __ffs((int)words) - 1, b = r >> 2, q = r & 3;
    unsigned long long nb = 0;
    unsigned tie = 0u;
#pragma unroll
    for (int a = 0; a < A; ++a)
#pragma unroll
        for (int k = 0; k < K; ++k)
            if (b == K * a + k) {  // compile-time indices: no local memory
                nb = block(a, k);
                tie = (eq[a][k] >> (4 * q)) & 0xFu;
            }
    const unsigned kept = refine4(4 * nb + (unsigned long long)q, tie, key) << (4 * q);
#pragma unroll
    for (int a = 0; a < A; ++a)
#pragma unroll
        for (int k = 0; k < K; ++k)
            if (b == K * a + k)
                gt[a][k] |= kept;
    return words & (words - 1u);
}

// Byte o (0..15) of a block's words.
__device__ __forceinline__ unsigned block_byte(uint4 u, unsigned o)
{
    return (philox_lane(u, o >> 2) >> (8 * (o & 3))) & 0xFFu;
}

// The keep decision of element counter c whose byte is b.
__device__ __forceinline__ bool keep_of_byte(unsigned b, unsigned long long c,
                                             const PhiloxKey &key)
{
    if (b != key.t8)
        return b > key.t8;
    return refine4(c >> 2, 1u << (c & 3), key) != 0u;
}

// The keep decision of element counter c (true = keep).
__device__ __forceinline__ bool dropout_keep(unsigned long long c, const PhiloxKey &key)
{
    return keep_of_byte(block_byte(philox_block(c >> 4, key), (unsigned)(c & 15)), c, key);
}

}  // namespace tessera

#endif  // TESSERA_PHILOX_CUH
