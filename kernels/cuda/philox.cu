// philox.cu: the dropout keep mask of attention (tessera_array.nn.dropout_mask).
//
// What it computes
//   tessera_dropout_mask: mask[t] = keep(c0 + t) for 0 <= t < n, as bytes 0/1 (NumPy and
//   CuPy bool), keep being the dropout contract of tessera_array.random computed by
//   tessera/philox.cuh: byte c & 15 of Philox4x32-10 (Salmon, Moraes, Dror and Shaw,
//   SC'11) block c >> 4 under (seed, offset) against t8, a tie decided by its refinement
//   word against frac (threshold = floor(p * 2**40) = t8 * 2**32 + frac). Integer-only:
//   bit-identical to the NumPy backend.
// Layout: the mask is C-contiguous (bh, i, j) with counter c = (bh*Sq + i)*Sk + j, so
//   mask element t of a mask that starts at row bh0 has counter c0 + t, c0 = bh0*Sq*Sk.
// Launch geometry: 1-D; one thread per Philox block touched (sixteen elements), blocks
//   (c0 >> 4) + g for g < ((c0 + n - 1) >> 4) - (c0 >> 4) + 1, any block size; a
//   grid-stride loop covers what the grid leaves (the launcher caps the grid).
// Accumulation: none (uint32 words, 64-bit counters and indices).
// Numerical caveats: none (no floating point).

#include "tessera/philox.cuh"

extern "C" __global__ void tessera_dropout_mask(
    const unsigned long long c0, const unsigned long long n, const unsigned int seed_lo,
    const unsigned int seed_hi, const unsigned int off_lo, const unsigned int off_hi,
    const unsigned int t8, const unsigned int frac, unsigned char *__restrict__ mask)
{
    if (n == 0)
        return;
    const tessera::PhiloxKey key = {seed_lo, seed_hi, off_lo, off_hi, t8, frac};
    const unsigned long long first = c0 >> 4;
    const unsigned long long count = ((c0 + n - 1) >> 4) - first + 1;  // blocks touched
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    for (unsigned long long g = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         g < count; g += stride) {
        const unsigned long long block = first + g;
        const unsigned keep = tessera::keep16(block, key);
#pragma unroll
        for (int e = 0; e < 16; ++e) {
            const unsigned long long c = (block << 4) + (unsigned long long)e;
            if (c >= c0 && c - c0 < n)
                mask[c - c0] = (unsigned char)((keep >> e) & 1u);
        }
    }
}
