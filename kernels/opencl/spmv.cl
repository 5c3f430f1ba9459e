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
//            tessera_spmv_vector: one work-group of WG work-items per (row, column),
//              global (m*WG, k); work-item l sums entries p = start + l, l + WG, ... then a
//              local-memory tree reduction: the CSR-vector kernel.
// Accumulates in ACC: T for floating types; for integers the unsigned type of at least
//            32 bits, so products and sums wrap modulo 2^bits as NumPy's do (no signed
//            overflow, which OpenCL C leaves undefined), then cast back to T.
// Numerics   The vector variant sums in another order (a few ulp times sqrt(nnz/row)).
// Reference  N. Bell and M. Garland, "Efficient Sparse Matrix-Vector Multiplication on
//            CUDA", NVIDIA Technical Report NVR-2008-004 (2008): CSR-scalar, CSR-vector.

#include "tessera_types.h"

#define MULACC(a, b) MUL((ACC)(a), (ACC)(b))

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

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void tessera_spmv_vector(const int m, const int k,
                         __global const T *data, const long data_off,
                         __global const IDX *indices, const long idx_off,
                         __global const PTR *indptr, const long ptr_off,
                         __global const T *x, const long x_off,
                         const long x_s0, const long x_s1,
                         __global T *y)
{
    __local ACC part[WG];
    const int i = get_group_id(0);
    const int c = get_global_id(1);
    const int lid = get_local_id(0);
    const long start = indptr[ptr_off + i], stop = indptr[ptr_off + i + 1];
    __global const T *xc = x + x_off + (long)c * x_s1;
    ACC acc = (ACC)ZERO;
    for (long p = start + lid; p < stop; p += WG)
        acc += MULACC(data[data_off + p], xc[(long)indices[idx_off + p] * x_s0]);
    part[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) part[lid] += part[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) y[(long)i * k + c] = (T)part[0];
}
