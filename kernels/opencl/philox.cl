// philox.cl: Philox4x32-10 and the dropout keep decision of attention.
//
// What it computes
//   tessera_philox4x32_10(ctr, key): Random123's Philox4x32 with 10 rounds (Salmon,
//   Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC'11),
//   in the paper's notation: a round maps (x0, x1, x2, x3) under key (k0, k1) to
//   (hi(M1*x2) ^ x1 ^ k0, lo(M1*x2), hi(M0*x0) ^ x3 ^ k1, lo(M0*x0)), and the key
//   is bumped by (W0, W1) between rounds. hi() is OpenCL's mul_hi(uint, uint).
//   tessera_keep(c, ...): the dropout contract (tessera_array.random): element
//   counter c (64-bit), block = c >> 2, lane = c & 3, counter words
//   (block lo, block hi, offset lo, offset hi), key (seed lo, seed hi); kept when
//   lane `lane` of the output is >= threshold (floor(p * 2**32)). Integer-only:
//   the same bits as the NumPy backend and the xp reference on every device.
//   tessera_dropout_mask: mask[t] = keep(c0 + t) for t < n (uchar 0/1, numpy bool).
//
// Layout: the mask is C-contiguous (bh, i, j) with c = (bh*Sq + i)*Sk + j, so the
//   counter of mask element t of a mask that starts at bh0 is c0 + t, c0 = bh0*Sq*Sk.
// Launch geometry: tessera_dropout_mask: one work-item per Philox block touched,
//   global size >= ((c0 + n - 1) >> 2) - (c0 >> 2) + 1, any work-group size.
// Accumulation: none (uint32 words; ulong counters).
// Numerical caveats: none (no floating point).
//
// Included by attention.cl (the host pastes the file in place of its #include line).

#ifndef TESSERA_PHILOX_CL
#define TESSERA_PHILOX_CL

#define TESSERA_PHILOX_M0 0xD2511F53u
#define TESSERA_PHILOX_M1 0xCD9E8D57u
#define TESSERA_PHILOX_W0 0x9E3779B9u
#define TESSERA_PHILOX_W1 0xBB67AE85u

inline uint4 tessera_philox4x32_10(uint4 x, uint2 k)
{
    for (int r = 0; r < 10; ++r) {
        if (r > 0) {
            k.x += TESSERA_PHILOX_W0;
            k.y += TESSERA_PHILOX_W1;
        }
        uint hi0 = mul_hi(TESSERA_PHILOX_M0, x.x);
        uint lo0 = TESSERA_PHILOX_M0 * x.x;
        uint hi1 = mul_hi(TESSERA_PHILOX_M1, x.z);
        uint lo1 = TESSERA_PHILOX_M1 * x.z;
        x = (uint4)(hi1 ^ x.y ^ k.x, lo1, hi0 ^ x.w ^ k.y, lo0);
    }
    return x;
}

// The four Philox words of counter block `block` under (seed, offset).
inline uint4 tessera_philox_block(ulong block, uint2 seed, uint2 offset)
{
    uint4 ctr = (uint4)((uint)block, (uint)(block >> 32), offset.x, offset.y);
    return tessera_philox4x32_10(ctr, seed);
}

inline uint tessera_lane(uint4 u, uint lane)
{
    return lane == 0 ? u.x : lane == 1 ? u.y : lane == 2 ? u.z : u.w;
}

// The keep decision of counter c (1 = keep).
inline int tessera_keep(ulong c, uint2 seed, uint2 offset, uint threshold)
{
    uint4 u = tessera_philox_block(c >> 2, seed, offset);
    return tessera_lane(u, (uint)(c & 3)) >= threshold;
}

__kernel void tessera_dropout_mask(
    const ulong c0, const ulong n, const uint seed_lo, const uint seed_hi,
    const uint off_lo, const uint off_hi, const uint threshold,
    __global uchar *restrict mask)
{
    const ulong block = (c0 >> 2) + get_global_id(0);
    const ulong last = (c0 + n - 1) >> 2;
    if (block > last)
        return;
    const uint4 u = tessera_philox_block(block, (uint2)(seed_lo, seed_hi),
                                         (uint2)(off_lo, off_hi));
    const ulong c = block << 2;
    const uint w[4] = {u.x, u.y, u.z, u.w};
    for (int lane = 0; lane < 4; ++lane) {
        const ulong cc = c + lane;
        if (cc >= c0 && cc - c0 < n)
            mask[cc - c0] = (uchar)(w[lane] >= threshold);
    }
}

#endif  // TESSERA_PHILOX_CL
