// spmv.cl: compressed-sparse-row (CSR) matrix times a dense vector or block of vectors.
//
// Computes   y[i, c] = sum_{p = indptr[i]}^{indptr[i+1]-1} data[p] * x[indices[p], c]
//            for i < m, c < k (k = 1 for a vector x).
// Layout     data[p], indices[p], indptr[i] at element offsets data_off, idx_off, ptr_off
//            (contiguous); x[j, c] at x[x_off + j*x_s0 + c*x_s1] (any strides); y is a
//            fresh contiguous (m, k) block, y[i, c] at y[i*k + c]. IDX and PTR are the
//            index types of indices and indptr (int or long, -D macros).
// Variants   tessera_spmv_scalar: one work-item per (row, column), global (>= m, k): the
//              CSR-scalar kernel; on CPU devices one work-item per (block of rper
//              contiguous rows, column), so each thread streams through memory. It
//              sums each row in storage order from zero, exactly as SciPy's csr_matvec
//              does, so real results are bitwise SciPy's.
//            tessera_spmv_vector: LANES work-items per (row, column), WG/LANES rows per
//              work-group, global (ceil(m / (WG/LANES)) * WG, k): the CSR-vector kernel's
//              coalesced loads, with each row still summed in storage order (below).
// Accumulates in ACC: T for floating types; for integers the unsigned type of at least
//            32 bits, so products and sums wrap modulo 2^bits as NumPy's do (no signed
//            overflow, which OpenCL C leaves undefined), then cast back to T.
// Numerics   Both variants sum each row in SciPy's order: real results are bitwise SciPy's.
// Reference  N. Bell and M. Garland, "Efficient Sparse Matrix-Vector Multiplication on
//            CUDA", NVIDIA Technical Report NVR-2008-004 (2008): CSR-scalar, CSR-vector.

#include "tessera_types.h"

#define MULACC(a, b) MUL((ACC)(a), (ACC)(b))

// Plain pointers and 64-bit offsets on purpose: on an H200 (NVIDIA OpenCL 580.159.04,
// 2-D Poisson 1024^2 and 2048^2, float32/float64, reps interleaved) variants with
// restrict pointers, pointers offset once, 32-bit loop indices or a contiguous-x branch
// each ran 10-35% slower than this text.

__kernel void tessera_spmv_scalar(const int m, const int k, const int rper,
                                  __global const T *data, const long data_off,
                                  __global const IDX *indices, const long idx_off,
                                  __global const PTR *indptr, const long ptr_off,
                                  __global const T *x, const long x_off,
                                  const long x_s0, const long x_s1,
                                  __global T *y)
{
    const int lo = get_global_id(0) * rper, hi = min(m, lo + rper);
    const int c = get_global_id(1);
    __global const T *xc = x + x_off + (long)c * x_s1;
    for (int i = lo; i < hi; ++i) {
        const long start = indptr[ptr_off + i], stop = indptr[ptr_off + i + 1];
        ACC acc = (ACC)ZERO;
        for (long p = start; p < stop; ++p)
            acc += MULACC(data[data_off + p], xc[(long)indices[idx_off + p] * x_s0]);
        y[(long)i * k + c] = (T)acc;
    }
}

// The vector kernel: LANES work-items per row (a power of two dividing WG), WG/LANES rows
// per work-group. In each step the lanes of a row load LANES consecutive entries of it
// (coalesced loads of data and indices) and store their products in local memory; the
// row's first lane then adds them in storage order. Every row is summed as the scalar
// kernel sums it (from zero, in storage order, each product and sum rounded), so real
// results equal SciPy's bit for bit here too. The step count is the longest row of the
// work-group (found with a local atomic_max), so every work-item meets every barrier.
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void tessera_spmv_vector(const int m, const int k,
                         __global const T *data, const long data_off,
                         __global const IDX *indices, const long idx_off,
                         __global const PTR *indptr, const long ptr_off,
                         __global const T *x, const long x_off,
                         const long x_s0, const long x_s1,
                         __global T *y)
{
    __local ACC prod[WG];
    __local int longest;
    const int lid = get_local_id(0);
    const int lane = lid & (LANES - 1);
    const int i = get_group_id(0) * (WG / LANES) + lid / LANES;
    const int c = get_global_id(1);
    long start = 0, stop = 0;
    if (i < m) {
        start = indptr[ptr_off + i];
        stop = indptr[ptr_off + i + 1];
    }
    if (lid == 0) longest = 0;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lane == 0) atomic_max(&longest, (int)(stop - start));
    barrier(CLK_LOCAL_MEM_FENCE);
    const int steps = longest;
    __global const T *xc = x + x_off + (long)c * x_s1;
    ACC acc = (ACC)ZERO;
    for (int base = 0; base < steps; base += LANES) {
        const long p = start + base + lane;
        prod[lid] = p < stop ? MULACC(data[data_off + p], xc[(long)indices[idx_off + p] * x_s0])
                             : (ACC)ZERO;
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lane == 0) {
            const int cnt = (int)min((long)LANES, stop - start - base);
            for (int t = 0; t < cnt; ++t) acc += prod[lid + t];
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lane == 0 && i < m) y[(long)i * k + c] = (T)acc;
}
