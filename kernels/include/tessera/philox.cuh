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
//   tessera::dropout_keep(c, seed, offset, threshold): the dropout contract of
//     tessera_array.random: element counter c (64-bit), block = c >> 2, lane = c & 3; kept
//     (true) when the lane's word is >= threshold = floor(p * 2**32).
//   tessera::PhiloxKey: (seed, offset, threshold) as the kernels receive them.
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
// and the keep threshold floor(p * 2**32).
struct PhiloxKey {
    unsigned int seed_lo, seed_hi, off_lo, off_hi, threshold;
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

// The keep decision of element counter c (true = keep).
__device__ __forceinline__ bool dropout_keep(unsigned long long c, const PhiloxKey &key)
{
    const uint4 u = philox_block(c >> 2, key);
    return philox_lane(u, (unsigned int)(c & 3)) >= key.threshold;
}

}  // namespace tessera

#endif  // TESSERA_PHILOX_CUH
