// philox.cu: the dropout keep mask of attention (tessera_array.nn.dropout_mask).
//
// What it computes
//   tessera_dropout_mask: mask[t] = keep(c0 + t) for 0 <= t < n, as bytes 0/1 (NumPy and
//   CuPy bool), keep being the dropout contract of tessera_array.random computed by
//   tessera/philox.cuh: Philox4x32-10 (Salmon, Moraes, Dror and Shaw, SC'11) of the
//   counter block c >> 2 under (seed, offset), lane c & 3, kept when the lane's word is
//   >= threshold = floor(p * 2**32). Integer-only: bit-identical to the NumPy backend.
// Layout: the mask is C-contiguous (bh, i, j) with counter c = (bh*Sq + i)*Sk + j, so
//   mask element t of a mask that starts at row bh0 has counter c0 + t, c0 = bh0*Sq*Sk.
// Launch geometry: 1-D; one thread per Philox block touched, blocks (c0 >> 2) + g for
//   g < ((c0 + n - 1) >> 2) - (c0 >> 2) + 1, any block size; a grid-stride loop covers
//   what the grid leaves (the launcher caps the grid).
// Accumulation: none (uint32 words, 64-bit counters and indices).
// Numerical caveats: none (no floating point).

#include "tessera/philox.cuh"

extern "C" __global__ void tessera_dropout_mask(
    const unsigned long long c0, const unsigned long long n, const unsigned int seed_lo,
    const unsigned int seed_hi, const unsigned int off_lo, const unsigned int off_hi,
    const unsigned int threshold, unsigned char *__restrict__ mask)
{
    if (n == 0)
        return;
    const tessera::PhiloxKey key = {seed_lo, seed_hi, off_lo, off_hi, threshold};
    const unsigned long long first = c0 >> 2;
    const unsigned long long count = ((c0 + n - 1) >> 2) - first + 1;  // blocks touched
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long g = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         g < count; g += stride) {
        const unsigned long long block = first + g;
        const uint4 u = tessera::philox_block(block, key);
        const unsigned int w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
        for (int lane = 0; lane < 4; ++lane) {
            const unsigned long long c = (block << 2) + (unsigned long long)lane;
            if (c >= c0 && c - c0 < n)
                mask[c - c0] = (unsigned char)(w[lane] >= threshold);
        }
    }
}
