// matvec.cl: dense matrix-vector product y = A x.
//
// Computes   y[i] = sum_j A[i, j] x[j]   for i < m, j < n.
// Layout     A[i, j] at a[a_off + i*a_s0 + j*a_s1], x[j] at x[x_off + j*x_s] (element
//            offsets and strides, any sign-free layout: row-major, column-major, views);
//            y is a fresh contiguous vector of m elements.
// Variants   tessera_matvec_scalar: one work-item per row (GPUs), or per block of rper
//              contiguous rows (CPU devices, built with -DTESSERA_CPU: 8 rows at a time
//              sharing each load of x for row-major A, or column by column into the
//              block's slice of y for column-major A); global size >= m / rper, extra
//              work-items return at once.
//            tessera_matvec_warp: one work-group of WG work-items per row (WG a power of
//              two, a -D macro), global size m*WG; each work-item sums a strided slice of
//              the row (4 consecutive elements per step for a contiguous real row), then a
//              local-memory tree reduction (log2 WG barriers). It is the
//              "warp per row" variant in portable form: OpenCL has no warp, and a true
//              sub-group form needs cl_khr_subgroups, which neither PoCL nor NVIDIA's
//              OpenCL driver reports (see backends/opencl/matvec.py).
// Accumulates in T (float32 sums in float, as BLAS sgemv does); complex via T = float2 /
//            double2 with (re, im) products.
// Numerics   The summation order differs from BLAS (sequential per work-item, then a
//            tree across work-items), so results agree with NumPy to a few ulp times
//            sqrt(n), not bitwise. No FMA contraction (FP_CONTRACT OFF).
// CPU path   No OpenCL library call in the loops: PoCL 3.0 compiles vload8 and min() as
//            out-of-line calls (its remarks: "not inlined ... should never be inlined"),
//            which made the row loop a call per 8 elements and the kernel compute bound
//            at half of BLAS's speed. Loads go through an unaligned vector type instead
//            (TESSERA_CPU; clang's aligned() on a typedef), minima through ?:.
// Reference  The row-per-thread vs warp-per-row trade-off: Bell & Garland, "Efficient
//            Sparse Matrix-Vector Multiplication on CUDA", NVIDIA TR NVR-2008-004.

#include "tessera_types.h"

// LOADW(p): VW contiguous elements of the real type from p (any alignment of RT).
#ifdef TESSERA_CPU
typedef RT tessera_vecw_u __attribute__((ext_vector_type(VW), aligned(sizeof(RT))));
#define LOADW(p) (*(__global const tessera_vecw_u *)(p))
#else
#define LOADW(p) VLOADW(0, p)
#endif

// One row, contiguous: two SIMD-wide partial sums (VW lanes each, 8 floats or 4 doubles)
// for real types, four scalar ones for complex; no add waits on the previous one.
inline T row_dot(__global const T *row, __global const T *xv, const int n)
{
    T acc = ZERO;
    int j = 0;
#ifdef TESSERA_COMPLEX
    T c0 = ZERO, c1 = ZERO, c2 = ZERO, c3 = ZERO;
    for (; j + 4 <= n; j += 4) {
        c0 += MUL(row[j], xv[j]);
        c1 += MUL(row[j + 1], xv[j + 1]);
        c2 += MUL(row[j + 2], xv[j + 2]);
        c3 += MUL(row[j + 3], xv[j + 3]);
    }
    for (; j < n; ++j) acc += MUL(row[j], xv[j]);
    return acc + ((c0 + c1) + (c2 + c3));
#else
    VECW c0 = (VECW)(0), c1 = (VECW)(0);
    for (; j + 2 * VW <= n; j += 2 * VW) {
        c0 += LOADW(row + j) * LOADW(xv + j);
        c1 += LOADW(row + j + VW) * LOADW(xv + j + VW);
    }
    for (; j < n; ++j) acc += MUL(row[j], xv[j]);
    return acc + HSUMW(c0 + c1);
#endif
}

// Work-item g computes rows [g*rper, min(m, (g+1)*rper)): rper = 1 on GPUs (one row
// per work-item); on CPU devices a block of rows (a multiple of 8), so each thread
// streams through contiguous memory (measured on PoCL: see backends/opencl/matvec.py).
__kernel void tessera_matvec_scalar(const int m, const int n, const int rper,
                                    __global const T *a, const long a_off,
                                    const long a_s0, const long a_s1,
                                    __global const T *x, const long x_off, const long x_s,
                                    __global T *y)
{
    const int lo = get_global_id(0) * rper;
    const int hi = lo + rper < m ? lo + rper : m;
    __global const T *xv = x + x_off;
    if (a_s1 == 1 && x_s == 1) {
        int i = lo;
#ifndef TESSERA_COMPLEX
        // Eight rows at once share each load of x (eight VW-wide accumulators in
        // registers); the last rows of a block, one at a time.
        for (; i + 8 <= hi; i += 8) {
            __global const T *r0 = a + a_off + (long)i * a_s0;
            __global const T *r1 = r0 + a_s0, *r2 = r1 + a_s0, *r3 = r2 + a_s0;
            __global const T *r4 = r3 + a_s0, *r5 = r4 + a_s0, *r6 = r5 + a_s0;
            __global const T *r7 = r6 + a_s0;
            VECW c0 = (VECW)(0), c1 = (VECW)(0), c2 = (VECW)(0), c3 = (VECW)(0);
            VECW c4 = (VECW)(0), c5 = (VECW)(0), c6 = (VECW)(0), c7 = (VECW)(0);
            int j = 0;
            for (; j + VW <= n; j += VW) {
                const VECW xj = LOADW(xv + j);
                c0 += LOADW(r0 + j) * xj;
                c1 += LOADW(r1 + j) * xj;
                c2 += LOADW(r2 + j) * xj;
                c3 += LOADW(r3 + j) * xj;
                c4 += LOADW(r4 + j) * xj;
                c5 += LOADW(r5 + j) * xj;
                c6 += LOADW(r6 + j) * xj;
                c7 += LOADW(r7 + j) * xj;
            }
            T t0 = ZERO, t1 = ZERO, t2 = ZERO, t3 = ZERO;
            T t4 = ZERO, t5 = ZERO, t6 = ZERO, t7 = ZERO;
            for (; j < n; ++j) {
                const T xj = xv[j];
                t0 += r0[j] * xj;
                t1 += r1[j] * xj;
                t2 += r2[j] * xj;
                t3 += r3[j] * xj;
                t4 += r4[j] * xj;
                t5 += r5[j] * xj;
                t6 += r6[j] * xj;
                t7 += r7[j] * xj;
            }
            y[i] = t0 + HSUMW(c0);
            y[i + 1] = t1 + HSUMW(c1);
            y[i + 2] = t2 + HSUMW(c2);
            y[i + 3] = t3 + HSUMW(c3);
            y[i + 4] = t4 + HSUMW(c4);
            y[i + 5] = t5 + HSUMW(c5);
            y[i + 6] = t6 + HSUMW(c6);
            y[i + 7] = t7 + HSUMW(c7);
        }
#endif
        for (; i < hi; ++i) y[i] = row_dot(a + a_off + (long)i * a_s0, xv, n);
#ifdef TESSERA_CPU
    } else if (a_s0 == 1) {
        // Column-major A: y[lo:hi] += A[lo:hi, j] x[j] for j = 0, 1, ... (each row still
        // sums in order of j); the inner loop is contiguous and has no reduction.
        for (int i = lo; i < hi; ++i) y[i] = ZERO;
        for (int j = 0; j < n; ++j) {
            __global const T *colj = a + a_off + (long)j * a_s1;
            const T xj = xv[(long)j * x_s];
            for (int i = lo; i < hi; ++i) y[i] += MUL(colj[i], xj);
        }
#endif
    } else {
        for (int i = lo; i < hi; ++i) {
            __global const T *row = a + a_off + (long)i * a_s0;
            T acc = ZERO;
            for (int j = 0; j < n; ++j) acc += MUL(row[(long)j * a_s1], xv[(long)j * x_s]);
            y[i] = acc;
        }
    }
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void tessera_matvec_warp(const int m, const int n,
                         __global const T *a, const long a_off,
                         const long a_s0, const long a_s1,
                         __global const T *x, const long x_off, const long x_s,
                         __global T *y)
{
    __local T part[WG];
    const int i = get_group_id(0);
    const int lid = get_local_id(0);
    __global const T *row = a + a_off + (long)i * a_s0;
    __global const T *xv = x + x_off;
    T acc = ZERO;
#ifndef TESSERA_COMPLEX
    if (a_s1 == 1 && x_s == 1) {
        // Contiguous row and x: four consecutive elements per work-item and step
        // (vload4; measured on an H200, see backends/opencl/matvec.py).
        const int n4 = n >> 2;
        for (int j = lid; j < n4; j += WG) {
            const VEC4 av = vload4(j, row), xj = vload4(j, xv);
            acc += (av.x * xj.x + av.y * xj.y) + (av.z * xj.z + av.w * xj.w);
        }
        for (int j = (n4 << 2) + lid; j < n; j += WG) acc += row[j] * xv[j];
    } else
#endif
    for (int j = lid; j < n; j += WG) acc += MUL(row[(long)j * a_s1], xv[(long)j * x_s]);
    part[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) part[lid] += part[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) y[i] = part[0];
}

// tessera_axpy: y <- y + alpha*x (mode 0), y - alpha*x (mode 1) or alpha*y + x (mode 2,
// "aypx": CG's p = z + beta p), in place (the Krylov solvers' updates). The product is
// rounded, then the sum (no FMA between them), exactly as NumPy's `y -= alpha * x` or
// `y *= beta; y += x` (complex products as NumPy's SIMD loops round them: MUL_NP), so
// the solvers' iterates stay SciPy's and equal the namespace's expression.
// x and y are 1-D with element offsets and strides; one work-item per element, global
// >= n. tessera_axpy_dev reads alpha from device memory (a 0-d array: no host sync),
// tessera_axpy a host value.
__kernel void tessera_axpy(const long n, const T alpha, const int sub,
                           __global const T *x, const long x_off, const long x_s,
                           __global T *y, const long y_off, const long y_s)
{
    const long i = get_global_id(0);
    if (i >= n) return;
    __global T *yi = y + y_off + i * y_s;
    if (sub == 2) { *yi = MUL_NP(alpha, *yi) + x[x_off + i * x_s]; return; }
    const T t = MUL_NP(alpha, x[x_off + i * x_s]);
    *yi = sub ? *yi - t : *yi + t;
}

__kernel void tessera_axpy_dev(const long n, __global const T *alpha, const long a_off,
                               const int sub,
                               __global const T *x, const long x_off, const long x_s,
                               __global T *y, const long y_off, const long y_s)
{
    const long i = get_global_id(0);
    if (i >= n) return;
    __global T *yi = y + y_off + i * y_s;
    if (sub == 2) { *yi = MUL_NP(alpha[a_off], *yi) + x[x_off + i * x_s]; return; }
    const T t = MUL_NP(alpha[a_off], x[x_off + i * x_s]);
    *yi = sub ? *yi - t : *yi + t;
}
