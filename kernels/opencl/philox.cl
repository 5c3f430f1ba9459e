// philox.cl: Philox4x32-10 and the dropout keep decision of attention.
//
// What it computes
//   tessera_philox4x32_10(ctr, key): Random123's Philox4x32 with 10 rounds (Salmon,
//   Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC'11),
//   in the paper's notation: a round maps (x0, x1, x2, x3) under key (k0, k1) to
//   (hi(M1*x2) ^ x1 ^ k0, lo(M1*x2), hi(M0*x0) ^ x3 ^ k1, lo(M0*x0)), and the key
//   is bumped by (W0, W1) between rounds. hi() is OpenCL's mul_hi(uint, uint).
//   tessera_keep(c, ...): the dropout contract (tessera_array.random): element
//   counter c (64-bit), P(n) = Philox of counter words (n lo, n hi, offset lo,
//   offset hi) under key (seed lo, seed hi); the element's byte b is byte c & 15 of
//   P(c >> 4) (byte e of word l is byte 4 l + e, bits 8 e .. 8 e + 7 of the word), its
//   refinement word r is word c & 3 of P(2**63 | (c >> 2)); kept when
//   b * 2**32 + r >= threshold = floor(p * 2**40), passed as t8 = threshold >> 32 and
//   frac = threshold & 0xFFFFFFFF: b > t8 keeps, b < t8 drops, and only a tie
//   (b == t8, one element in 256) computes r (a tie keeps outright when frac == 0).
//   Integer-only: the same bits as the NumPy backend and the xp reference on every
//   device.
//   tessera_dropout_mask: mask[t] = keep(c0 + t) for t < n (uchar 0/1, numpy bool).
//
// Layout: the mask is C-contiguous (bh, i, j) with c = (bh*Sq + i)*Sk + j, so the
//   counter of mask element t of a mask that starts at bh0 is c0 + t, c0 = bh0*Sq*Sk.
// Launch geometry: tessera_dropout_mask: one work-item per main Philox block touched
//   (sixteen elements each), global size >= ((c0 + n - 1) >> 4) - (c0 >> 4) + 1, any
//   work-group size.
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

// Byte e (0..15) of the four words u: byte e & 3 of word e >> 2.
inline uint tessera_byte(uint4 u, uint e)
{
    return (tessera_lane(u, e >> 2) >> (8 * (e & 3))) & 0xFFu;
}

// The keep decision of counter c whose byte is b (that of block c >> 4): the
// refinement block 2**63 | (c >> 2) is computed only on a tie with frac != 0.
inline int tessera_keep_byte(uint b, ulong c, uint2 seed, uint2 offset, uint t8, uint frac)
{
    if (b != t8)
        return b > t8;
    if (frac == 0)
        return 1;
    const uint4 r = tessera_philox_block(((ulong)1 << 63) | (c >> 2), seed, offset);
    return tessera_lane(r, (uint)(c & 3)) >= frac;
}

// The keep decision of counter c (1 = keep).
inline int tessera_keep(ulong c, uint2 seed, uint2 offset, uint t8, uint frac)
{
    const uint4 u = tessera_philox_block(c >> 4, seed, offset);
    return tessera_keep_byte(tessera_byte(u, (uint)(c & 15)), c, seed, offset, t8, frac);
}

__kernel void tessera_dropout_mask(
    const ulong c0, const ulong n, const uint seed_lo, const uint seed_hi,
    const uint off_lo, const uint off_hi, const uint t8, const uint frac,
    __global uchar *restrict mask)
{
    const ulong block = (c0 >> 4) + get_global_id(0);
    const ulong last = (c0 + n - 1) >> 4;
    if (block > last)
        return;
    const uint2 seed = (uint2)(seed_lo, seed_hi), offset = (uint2)(off_lo, off_hi);
    const uint4 u = tessera_philox_block(block, seed, offset);
    const ulong c = block << 4;
    for (uint e = 0; e < 16; ++e) {
        const ulong cc = c + e;
        if (cc >= c0 && cc - c0 < n)
            mask[cc - c0] = (uchar)tessera_keep_byte(tessera_byte(u, e), cc, seed, offset,
                                                     t8, frac);
    }
}

#endif  // TESSERA_PHILOX_CL
