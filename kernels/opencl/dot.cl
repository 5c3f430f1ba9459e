// dot.cl: the dot product of two vectors on the device: vecdot of two 1-D arrays, and the
//         (K,) @ (K,) case of matmul (launchers in backends/opencl/dot.py).
//
// Computes   s = sum_i c(x[i]) y[i],  c = conj when cj != 0 (complex T), else identity,
// Layout     x[i] at x[x_off + i*x_s], y[i] at y[y_off + i*y_s] (element offsets and
//            strides, any sign); s is written to out[out_off].
// Launches   OpenCL has no grid-wide barrier, so a dot product is two launches:
//              tessera_dot_part  each work-group writes the sum of its products to
//                                part[group];
//              tessera_dot_sum   one work-item adds part[0], part[1], ... in index order.
// Geometry   GPUs: np work-groups of WG work-items (WG a power of two) over a grid-stride
//            loop, then a tree in local memory; CPU devices (WG == 1): work-item g sums the
//            contiguous chunk [g*chunk, (g+1)*chunk) (a vectorized loop when both strides
//            are 1: the sum may be reassociated, REASSOC).
// Numerics   Sums in T, as BLAS's sdot/ddot/cdotc do, in this kernel's order (per
//            work-item, the work-group's tree, the groups in order), not BLAS's: results
//            agree with NumPy to rounding, and repeat bit for bit run to run (the geometry
//            is a function of n and the device). No FMA contraction (tessera_types.h).

#include "tessera_types.h"
#include "tessera_group.h"

#ifdef TESSERA_COMPLEX
#define CONJ(a) ((T)((a).x, -(a).y))
#else
#define CONJ(a) (a)
#endif

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void tessera_dot_part(const long n, const long chunk, const int cj,
                      __global const T *x, const long x_off, const long x_s,
                      __global const T *y, const long y_off, const long y_s,
                      __global T *part)
{
    __global const T *xv = x + x_off;
    __global const T *yv = y + y_off;
    __local T red[WG];
    T acc = ZERO;
#if WG > 1
    const long step = get_global_size(0);
    if (cj) {
        for (long i = get_global_id(0); i < n; i += step)
            acc += MUL(CONJ(xv[i * x_s]), yv[i * y_s]);
    } else {
        for (long i = get_global_id(0); i < n; i += step) acc += MUL(xv[i * x_s], yv[i * y_s]);
    }
#else
    const long lo = get_global_id(0) * chunk;
    const long hi = lo + chunk < n ? lo + chunk : n;
    if (x_s == 1 && y_s == 1) {
        if (cj) {
            REASSOC
            for (long i = lo; i < hi; ++i) acc += MUL(CONJ(xv[i]), yv[i]);
        } else {
            REASSOC
            for (long i = lo; i < hi; ++i) acc += MUL(xv[i], yv[i]);
        }
    } else if (cj) {
        for (long i = lo; i < hi; ++i) acc += MUL(CONJ(xv[i * x_s]), yv[i * y_s]);
    } else {
        for (long i = lo; i < hi; ++i) acc += MUL(xv[i * x_s], yv[i * y_s]);
    }
#endif
    group_store(acc, red, part);
}

__kernel void tessera_dot_sum(const int np, __global const T *part, __global T *out,
                              const long out_off)
{
    T s = ZERO;
    for (int k = 0; k < np; ++k) s += part[k];
    out[out_off] = s;
}
