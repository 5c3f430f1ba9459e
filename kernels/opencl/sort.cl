// sort.cl: stable sort / argsort of independent lines by a bitonic network on (key, index)
// pairs.
//
// Built with -DT=<element type> and -DTESSERA_FLOAT / -DTESSERA_COMPLEX / -DTESSERA_FP64 as
// the dtype needs. Each of the L lines holds n elements padded to P = 2**p slots
// (keys[line * P + s], idx[...]); slots s >= n are padding, ordered after every element.
// Pairs compare by key (NaNs last; complex lexicographically on (re, im) with NaN parts
// last, NumPy's order), ties by original index: a total order, so the (unstable) bitonic
// network gives the stable order. With desc, keys compare reversed (NaNs first) and ties
// still by index: NumPy's stable descending order.
//
// tessera_sort_init     slot s of line l: (src[l * n + s], s), or padding for s >= n.
// tessera_bitonic_pass  one (k, j) step of the network over all lines: pair (i, i ^ j)
//                       is put in ascending order where i & k == 0, descending elsewhere.
// tessera_bitonic_local the steps j < w of the stages k_lo .. k_hi (powers of two) for
//                       blocks of w slots in local memory (one work-group of w/2
//                       work-items per block): the first log2(w) stages in one launch,
//                       then the last log2(w) steps of each later stage in one.

#ifdef TESSERA_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#include "tessera_order.h"

// (ka, ia) before (kb, ib)?
inline int before(T ka, long ia, T kb, long ib, long n, int desc)
{
    if (ib >= n)
        return ia < n || ia < ib;
    if (ia >= n)
        return 0;
    const int lt = desc ? tessera_lt(kb, ka) : tessera_lt(ka, kb);
    if (lt)
        return 1;
    const int gt = desc ? tessera_lt(ka, kb) : tessera_lt(kb, ka);
    return !gt && ia < ib;
}

__kernel void tessera_sort_init(const long total, const long n, const long P,
                                __global T *keys, __global long *idx,
                                __global const T *src)
{
    const long g = get_global_id(0);
    if (g >= total)
        return;
    const long line = g / P, s = g % P;
    if (s < n)
        keys[g] = src[line * n + s];
    idx[g] = s;
}

__kernel void tessera_bitonic_pass(const long pairs, const long P, const long k,
                                   const long j, const long n, const int desc,
                                   __global T *keys, __global long *idx)
{
    const long g = get_global_id(0);
    if (g >= pairs)
        return;
    const long hp = P / 2;
    const long line = g / hp, p = g % hp;
    const long i = 2 * j * (p / j) + (p % j);
    const long a = line * P + i, b = a + j;
    const T ka = keys[a], kb = keys[b];
    const long ia = idx[a], ib = idx[b];
    const int up = (i & k) == 0;
    const int swap = up ? before(kb, ib, ka, ia, n, desc) : before(ka, ia, kb, ib, n, desc);
    if (swap) {
        keys[a] = kb; keys[b] = ka;
        idx[a] = ib; idx[b] = ia;
    }
}

__kernel void tessera_bitonic_local(const long P, const long k_lo, const long k_hi,
                                    const long w, const long n, const int desc,
                                    __global T *keys, __global long *idx,
                                    __local T *lk, __local long *li)
{
    const long grp = get_group_id(0);
    const int t = get_local_id(0);
    const long blocks = P / w;
    const long line = grp / blocks, blk = grp % blocks;
    const long base = line * P + blk * w;
    lk[t] = keys[base + t]; li[t] = idx[base + t];
    lk[t + w / 2] = keys[base + t + w / 2]; li[t + w / 2] = idx[base + t + w / 2];
    barrier(CLK_LOCAL_MEM_FENCE);
    for (long k = k_lo; k <= k_hi; k *= 2) {
        for (long j = min(k, w) / 2; j >= 1; j /= 2) {
            const long i = 2 * j * (t / j) + (t % j);
            const long gi = blk * w + i;  // the slot within the line: the direction
            const T ka = lk[i], kb = lk[i + j];
            const long ia = li[i], ib = li[i + j];
            const int up = (gi & k) == 0;
            const int swap = up ? before(kb, ib, ka, ia, n, desc)
                                : before(ka, ia, kb, ib, n, desc);
            if (swap) {
                lk[i] = kb; lk[i + j] = ka;
                li[i] = ib; li[i + j] = ia;
            }
            barrier(CLK_LOCAL_MEM_FENCE);
        }
    }
    keys[base + t] = lk[t]; idx[base + t] = li[t];
    keys[base + t + w / 2] = lk[t + w / 2]; idx[base + t + w / 2] = li[t + w / 2];
}

// tessera_merge_pass (CPU devices): one merge-sort pass over lines of n elements: work-item
// g merges the sorted runs [lo, lo + width) and [lo + width, lo + 2 width) of its line from
// (ks, is) into (kd, id), by the same (key, index) order. log2(n) passes from width 1 sort
// each line; no padding, no barriers.
__kernel void tessera_merge_pass(const long total, const long n, const long width,
                                 const int desc, __global const T *ks,
                                 __global const long *is, __global T *kd, __global long *id)
{
    const long g = get_global_id(0);
    if (g >= total)
        return;
    const long per = (n + 2 * width - 1) / (2 * width);
    const long line = g / per, p = g % per;
    const long base = line * n;
    const long lo = p * 2 * width;
    const long mid = min(lo + width, n), hi = min(lo + 2 * width, n);
    long i = lo, j = mid, o = lo;
    while (i < mid && j < hi) {
        if (before(ks[base + j], is[base + j], ks[base + i], is[base + i], n, desc)) {
            kd[base + o] = ks[base + j]; id[base + o] = is[base + j]; ++j;
        } else {
            kd[base + o] = ks[base + i]; id[base + o] = is[base + i]; ++i;
        }
        ++o;
    }
    for (; i < mid; ++i, ++o) {
        kd[base + o] = ks[base + i]; id[base + o] = is[base + i];
    }
    for (; j < hi; ++j, ++o) {
        kd[base + o] = ks[base + j]; id[base + o] = is[base + j];
    }
}
