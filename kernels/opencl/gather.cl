// gather.cl: integer-array indexing (gather, scatter), nonzero compaction, searchsorted.
//
// Built with -DT=<type of the element's bytes> (uchar, ushort, uint, ulong, ulong2: the
// gather and scatter only move elements) or, for searchsorted, -DT=<element type>
// -DSEARCH (and -DTESSERA_FP64 / -DTESSERA_COMPLEX / -DTESSERA_FLOAT as the dtype needs).
//
// tessera_offsets  offs[i] = the source element offset of output element i of an
//   advanced index, from a plan of longs (host-built, see backends/opencl/_ops_indexing.py):
//     plan[0] = R (output rank), plan[1] = J (index arrays), plan[2] = base offset,
//     plan[3 + d] = output dim d, plan[3 + R + d] = source stride along output dim d
//     (0 on the broadcast index dims), then per index array j a record of 3 + R longs:
//     (axis size, source stride, element offset in idx, its strides along the R output
//     dims (0 where it broadcasts)).
//   idx holds every index array (int64). An index v < -size or >= size sets *bad = 1
//   (the host reads it back once and raises IndexError) and contributes nothing.
// tessera_take     out[i] = src[offs[i]]          (out contiguous)
// tessera_put      dst[offs[i]] = val[i]          (val contiguous; duplicate offsets: one
//                                                   of the values wins, unspecified which)
// tessera_nonzero  for a C-order inclusive count scan s of a mask of n elements with
//   shape dims[0..R): element i (with s[i] > s[i-1]) writes its R coordinates to
//   out[d * total + s[i] - 1] (one row per axis of the (R, total) result).
// tessera_search   out[i] = the insertion index of v[i] into the sorted a[0..m) (strided
//   by as; through sorter when use_sorter), side left (right = 0) or right (= 1), NaNs
//   last (complex: lexicographic on (re, im), NaN components last, as NumPy's sort).

#ifdef TESSERA_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#ifndef SEARCH

__kernel void tessera_offsets(const long n, __global const long *plan,
                              __global const long *idx, __global long *offs,
                              __global int *bad)
{
    const long i = get_global_id(0);
    if (i >= n)
        return;
    const int R = (int)plan[0];
    const int J = (int)plan[1];
    long off = plan[2];
    long r = i;
    long rec = 3 + 2 * R;
    // Each index array's element position, built along with the coordinates.
    long pos[8];
    for (int j = 0; j < J && j < 8; ++j)
        pos[j] = plan[rec + j * (3 + R) + 2];
    for (int d = R - 1; d >= 0; --d) {
        const long dim = plan[3 + d];
        const long c = r % dim;
        r /= dim;
        off += c * plan[3 + R + d];
        for (int j = 0; j < J && j < 8; ++j)
            pos[j] += c * plan[rec + j * (3 + R) + 3 + d];
    }
    for (int j = 0; j < J && j < 8; ++j) {
        const long size = plan[rec + j * (3 + R)];
        long v = idx[pos[j]];
        if (v < 0)
            v += size;
        if (v < 0 || v >= size) {
            *bad = 1;
            v = 0;
        }
        off += v * plan[rec + j * (3 + R) + 1];
    }
    offs[i] = off;
}

__kernel void tessera_take(const long n, __global T *out, __global const T *src,
                           const long so, __global const long *offs)
{
    const long i = get_global_id(0);
    if (i < n)
        out[i] = src[so + offs[i]];
}

__kernel void tessera_put(const long n, __global T *dst, const long dso,
                          __global const long *offs, __global const T *val, const long vo)
{
    const long i = get_global_id(0);
    if (i < n)
        dst[dso + offs[i]] = val[vo + i];
}

__kernel void tessera_nonzero(const long n, const int R, __global const long *dims,
                              __global const long *s, const long total,
                              __global long *out)
{
    const long i = get_global_id(0);
    if (i >= n)
        return;
    const long k = s[i];
    if (k == (i ? s[i - 1] : 0))
        return;
    long r = i;
    for (int d = R - 1; d >= 0; --d) {
        out[d * total + k - 1] = r % dims[d];
        r /= dims[d];
    }
}

#else

#include "tessera_order.h"

__kernel void tessera_search(const long n, __global long *out, __global const T *a,
                             const long ao, const long as, const long m,
                             __global const T *v, const long vo, const int R,
                             __global const long *vplan, const int right,
                             __global const long *sorter, const long so, const long ss,
                             const int use_sorter)
{
    const long i = get_global_id(0);
    if (i >= n)
        return;
    long r = i, p = vo;
    for (int d = R - 1; d >= 0; --d) {
        p += (r % vplan[d]) * vplan[R + d];
        r /= vplan[d];
    }
    const T x = v[p];
    long lo = 0, hi = m;
    while (lo < hi) {
        const long mid = lo + (hi - lo) / 2;
        const long q = use_sorter ? sorter[so + mid * ss] : mid;
        const T y = a[ao + q * as];
        // left: first position with x <= a[q]; right: first position with x < a[q].
        if (right ? !tessera_lt(x, y) : tessera_lt(y, x))
            lo = mid + 1;
        else
            hi = mid;
    }
    out[i] = lo;
}

#endif
