// matvec.cu: dense matrix-vector product y = A x (the scalar and warp variants of the
//            matvec op; backends/_cupy/matvec.py launches them).
//
// Computes   y[i] = sum_j A[i, j] x[j]   for i < m, j < n (n >= 1: the launcher writes
//            zeros itself when n = 0, and launches nothing when m = 0).
// Layout     A[i, j] at a[i*s0 + j*s1], x[j] at x[j*xs]: element strides of any sign (row-
//            major, column-major, transposed or offset views; a and x point at element
//            [0, 0] and [0]); y is a fresh contiguous vector of m elements.
// Variants   tessera_matvec_scalar<T>: one thread per row, 1-D blocks of any size, grid
//              ceil(m / block); each thread sums its row in order j = 0, 1, ..., n-1 (a
//              branch without the stride multiplies when s1 = xs = 1).
//            tessera_matvec_warp<T, WARP, VEC>: one warp per row, blockDim.x / WARP rows
//              per block (a multiple of WARP), grid ceil(m / (blockDim.x / WARP)); lane l
//              sums elements j = l, l + WARP, ... (VEC = 1), or with VEC > 1 the 16-byte
//              groups q = l, l + WARP, ... of VEC elements each (4 floats, 2 doubles, 2
//              complex64), then the elements past the last whole group; then warp_sum.
//              VEC > 1 is launched only for s1 = xs = 1 with every row start and x
//              16-byte aligned (the launcher checks a, s0 and x). Contiguous rows load
//              four groups (or elements) a lane before summing them, in the same order.
// Accumulates in T, as BLAS ?gemv does (float32 sums in float); complex products as
//            (ar*br - ai*bi, ar*bi + ai*br), each operation rounded on its own.
// Numerics   No fused multiply-add (types.cuh). The scalar kernel's order is sequential;
//            the warp kernel's is per lane then a tree across lanes, so both agree with
//            BLAS to a few ulp times sqrt(n), not bitwise; each repeats bit for bit.
// Reference  The row-per-thread vs warp-per-row trade-off: N. Bell and M. Garland,
//            "Efficient Sparse Matrix-Vector Multiplication on CUDA", NVIDIA Technical
//            Report NVR-2008-004 (2008), CSR-scalar and CSR-vector, here on dense rows.

#include "tessera/types.cuh"
#include "tessera/warp.cuh"

template <typename T>
__global__ void tessera_matvec_scalar(const long long m, const long long n,
                                      const T *__restrict__ a, const long long s0,
                                      const long long s1, const T *__restrict__ x,
                                      const long long xs, T *__restrict__ y)
{
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= m) return;
    const T *row = a + i * s0;
    T acc = tessera::zero<T>();
    if (s1 == 1 && xs == 1) {
        for (long long j = 0; j < n; ++j) acc = tessera::add(acc, tessera::mul(row[j], x[j]));
    } else {
        for (long long j = 0; j < n; ++j)
            acc = tessera::add(acc, tessera::mul(row[j * s1], x[j * xs]));
    }
    y[i] = acc;
}

template <typename T, int WARP, int VEC>
__global__ void tessera_matvec_warp(const long long m, const long long n,
                                    const T *__restrict__ a, const long long s0,
                                    const long long s1, const T *__restrict__ x,
                                    const long long xs, T *__restrict__ y)
{
    static_assert(VEC == 1 || VEC * sizeof(T) == 16, "VEC elements make 16 bytes");
    constexpr int UNROLL = 4;
    // i is the same for the WARP lanes of a warp (blockDim.x is a multiple of WARP), so a
    // warp past the last row returns whole and the shuffles of warp_sum see full warps.
    const long long i = (long long)blockIdx.x * (blockDim.x / WARP) + threadIdx.x / WARP;
    const int lane = threadIdx.x % WARP;
    if (i >= m) return;
    const T *row = a + i * s0;
    T acc = tessera::zero<T>();
    if (VEC > 1) {
        const long long groups = n / VEC;
        const tessera::vec16<T> *rv = reinterpret_cast<const tessera::vec16<T> *>(row);
        const tessera::vec16<T> *xv = reinterpret_cast<const tessera::vec16<T> *>(x);
        long long q = lane;
        // UNROLL groups of a lane loaded before any is summed (loads in flight: a 4096-
        // column row is 32 groups a lane, and 4096 rows fill only half an H200's warp
        // slots); the sums keep the order q = lane, lane + WARP, ...
        for (; q + (UNROLL - 1) * WARP < groups; q += UNROLL * WARP) {
            tessera::vec16<T> av[UNROLL], bv[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                av[u] = rv[q + u * WARP];
                bv[u] = xv[q + u * WARP];
            }
#pragma unroll
            for (int u = 0; u < UNROLL; ++u)
#pragma unroll
                for (int e = 0; e < VEC; ++e)
                    acc = tessera::add(acc, tessera::mul(av[u].v[e], bv[u].v[e]));
        }
        for (; q < groups; q += WARP) {
            const tessera::vec16<T> av = rv[q], bv = xv[q];
#pragma unroll
            for (int e = 0; e < VEC; ++e) acc = tessera::add(acc, tessera::mul(av.v[e], bv.v[e]));
        }
        for (long long j = groups * VEC + lane; j < n; j += WARP)
            acc = tessera::add(acc, tessera::mul(row[j], x[j]));
    } else if (s1 == 1 && xs == 1) {
        acc = tessera::strided_dot<UNROLL>(row, x, lane, WARP, n, acc);
    } else {
        for (long long j = lane; j < n; j += WARP)
            acc = tessera::add(acc, tessera::mul(row[j * s1], x[j * xs]));
    }
    acc = tessera::warp_sum<WARP>(acc);
    if (lane == 0) y[i] = acc;
}
