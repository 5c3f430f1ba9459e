// spmv.cu: compressed-sparse-row (CSR) matrix times a dense vector or block of vectors
//          (the scalar and warp variants of the spmv op; backends/_cupy/sparse.py).
//
// Computes   y[i, c] = sum_{p = indptr[i]}^{indptr[i+1]-1} data[p] * x[indices[p], c]
//            for i < m, c < k (k = 1 for a vector x), duplicates summed, columns in any
//            order.
// Layout     data[p], indices[p], indptr[i] contiguous; I and P are the index types of
//            indices and indptr (int or long long, each on its own); x[j, c] at
//            x[j*xs0 + c*xs1] (element strides of any sign); y is a fresh contiguous
//            (m, k) block, y[i, c] at y[i*k + c].
// Variants   tessera_spmv_scalar<T, I, P>: one thread per (row, column), 1-D blocks of
//              any size; grid (ceil(m / block), min(k, 65535)), columns past the grid's
//              y extent in a loop. Each row is summed in storage order from zero, as
//              SciPy's csr_matvec / csr_matvecs do.
//            tessera_spmv_warp<T, I, P, WARP, LANES>: LANES lanes per row (a power of two
//              dividing WARP), blockDim.x / LANES rows per block, grid (ceil(m /
//              (blockDim.x / LANES)), min(k, 65535)). In each step the lanes of a row load
//              LANES consecutive entries (coalesced loads of data and indices) and form
//              their products; the row's first lane then adds them in storage order,
//              reading them from the other lanes with shuffles. So each row is summed
//              exactly as the scalar kernel sums it. The step count is the longest row
//              of the warp (warp_max, then a broadcast), so every lane of a warp meets
//              every shuffle, full warps throughout.
// Accumulates in ACC: T for floating types; for integers the unsigned type of at least
//            32 bits, so products and sums wrap modulo 2^bits as NumPy's do (no signed
//            overflow, which C++ leaves undefined), then converted back to T.
// Numerics   Both variants sum each row from zero in storage order, each product and
//            sum rounded on its own (no fused multiply-add: types.cuh): real results are
//            bitwise SciPy's.
// Reference  N. Bell and M. Garland, "Efficient Sparse Matrix-Vector Multiplication on
//            CUDA", NVIDIA Technical Report NVR-2008-004 (2008): CSR-scalar, CSR-vector.

#include "tessera/types.cuh"
#include "tessera/warp.cuh"

namespace tessera {

template <typename T> struct acc_of { typedef T type; };
template <> struct acc_of<signed char> { typedef unsigned int type; };
template <> struct acc_of<unsigned char> { typedef unsigned int type; };
template <> struct acc_of<short> { typedef unsigned int type; };
template <> struct acc_of<unsigned short> { typedef unsigned int type; };
template <> struct acc_of<int> { typedef unsigned int type; };
template <> struct acc_of<unsigned int> { typedef unsigned int type; };
template <> struct acc_of<long long> { typedef unsigned long long type; };
template <> struct acc_of<unsigned long long> { typedef unsigned long long type; };

// data[p] * x[j] in the accumulation type (integers converted modulo 2^bits first).
template <typename A, typename T> __device__ __forceinline__ A mul_acc(T a, T b)
{
    return mul(static_cast<A>(a), static_cast<A>(b));
}

}  // namespace tessera

template <typename T, typename I, typename P>
__global__ void tessera_spmv_scalar(const long long m, const long long k,
                                    const T *__restrict__ data, const I *__restrict__ indices,
                                    const P *__restrict__ indptr, const T *__restrict__ x,
                                    const long long xs0, const long long xs1,
                                    T *__restrict__ y)
{
    typedef typename tessera::acc_of<T>::type A;
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    const long long start = indptr[i], stop = indptr[i + 1];
    for (long long c = blockIdx.y; c < k; c += gridDim.y) {
        const T *xc = x + c * xs1;
        A acc = tessera::zero<A>();
        for (long long p = start; p < stop; ++p)
            acc = tessera::add(acc, tessera::mul_acc<A>(data[p], xc[(long long)indices[p] * xs0]));
        y[i * k + c] = static_cast<T>(acc);
    }
}

template <typename T, typename I, typename P, int WARP, int LANES>
__global__ void tessera_spmv_warp(const long long m, const long long k,
                                  const T *__restrict__ data, const I *__restrict__ indices,
                                  const P *__restrict__ indptr, const T *__restrict__ x,
                                  const long long xs0, const long long xs1, T *__restrict__ y)
{
    static_assert(LANES >= 1 && LANES <= WARP && WARP % LANES == 0, "LANES divides WARP");
    typedef typename tessera::acc_of<T>::type A;
    const int lane = threadIdx.x % WARP;
    const int sub = lane % LANES;   // lane within the row's group
    const int first = lane - sub;   // the row's first lane in the warp
    const long long i = (long long)blockIdx.x * (blockDim.x / LANES) + threadIdx.x / LANES;
    long long start = 0, len = 0;
    if (i < m) {
        start = indptr[i];
        len = (long long)indptr[i + 1] - start;
    }
    // Every lane of the warp loops to the warp's longest row (rows past m have length 0).
    const long long steps = tessera::shfl<WARP>(tessera::warp_max<WARP>(len), 0);
    for (long long c = blockIdx.y; c < k; c += gridDim.y) {
        const T *xc = x + c * xs1;
        A acc = tessera::zero<A>();
        for (long long base = 0; base < steps; base += LANES) {
            const long long q = base + sub;
            const A prod = q < len ? tessera::mul_acc<A>(data[start + q],
                                                         xc[(long long)indices[start + q] * xs0])
                                   : tessera::zero<A>();
#pragma unroll
            for (int t = 0; t < LANES; ++t) {
                const A v = tessera::shfl<WARP>(prod, first + t);
                if (sub == 0 && base + t < len) acc = tessera::add(acc, v);
            }
        }
        if (sub == 0 && i < m) y[i * k + c] = static_cast<T>(acc);
    }
}
