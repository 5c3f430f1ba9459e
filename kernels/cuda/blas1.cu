// blas1.cu: the vector ops of the matvec family: axpy / aypx in place, and the dot
//           product vecdot (launchers in backends/_cupy/matvec.py).
//
// Computes   tessera_axpy<T>, mode 0:  y[i] = y[i] + alpha * x[i]      (axpy)
//                             mode 1:  y[i] = y[i] - alpha * x[i]      (axpy, subtract)
//                             mode 2:  y[i] = y[i] * alpha + x[i]      (aypx, alpha = beta)
//            tessera_vecdot_part / tessera_vecdot_final<T, WARP, BLOCK>:
//                        s = sum_i conj(x[i]) y[i]   (plain x[i] y[i] for real T)
// Layout     x[i] at x[i*xs], y[i] at y[i*ys] (element strides of any sign; the pointers
//            address element 0). alpha: the value alpha_val, or *alpha_ptr when alpha_ptr
//            is not null (a 0-d device array: read on the device, no host sync). x may be
//            y itself (each element is read before it is written by the same thread).
// Launches   axpy: 1-D blocks over a grid-stride loop (any geometry gives the same bits).
//            vecdot: tessera_vecdot_part with P <= PMAX blocks of BLOCK threads over a
//            grid-stride loop, each block's sum (block_sum) to part[block]; then, when
//            P > 1, tessera_vecdot_final, one block of BLOCK threads: thread t adds
//            part[t], part[t + BLOCK], ... in order, then block_sum, to out[0]. With P = 1
//            the launcher passes out as part and launches the first kernel alone. The
//            0-d result stays on the device.
// Accumulates in T (as BLAS's ?dot / ?dotc do).
// Numerics   axpy/aypx round the product, then the sum, each on its own (the _rn
//            intrinsics of types.cuh: never a fused multiply-add), exactly as NumPy's
//            two-step expressions (t = alpha*x; y += t) and (y *= beta; y += x) round
//            them: real results equal NumPy's bit for bit; complex products are
//            (ar*xr - ai*xi, ar*xi + ai*xr), NumPy's formula (NumPy's SIMD loops may fuse
//            them, so complex results agree to rounding). vecdot sums in its own order
//            (per thread, then trees), not BLAS's: a few ulp times sqrt(n); P depends on
//            n only, so a result repeats bit for bit on one device.
// Reference  C. L. Lawson, R. J. Hanson, D. R. Kincaid and F. T. Krogh, "Basic Linear
//            Algebra Subprograms for Fortran Usage", ACM TOMS 5(3), 1979 (axpy, dot).

#include "tessera/types.cuh"
#include "tessera/warp.cuh"

template <typename T>
__global__ void tessera_axpy(const long long n, const int mode, const T *alpha_ptr,
                             const T alpha_val, const T *x, const long long xs, T *y,
                             const long long ys)
{
    const T alpha = alpha_ptr != nullptr ? *alpha_ptr : alpha_val;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        const T xi = x[i * xs];
        T *yi = y + i * ys;
        if (mode == 0)
            *yi = tessera::add(*yi, tessera::mul(alpha, xi));
        else if (mode == 1)
            *yi = tessera::sub(*yi, tessera::mul(alpha, xi));
        else
            *yi = tessera::add(tessera::mul(*yi, alpha), xi);
    }
}

template <typename T, int WARP, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
tessera_vecdot_part(const long long n, const T *__restrict__ x, const long long xs,
                    const T *__restrict__ y, const long long ys, T *__restrict__ part)
{
    __shared__ T scratch[BLOCK / WARP];
    const long long step = (long long)gridDim.x * BLOCK;
    long long i = (long long)blockIdx.x * BLOCK + threadIdx.x;
    T acc = tessera::zero<T>();
    if (xs == 1 && ys == 1) {
        for (; i < n; i += step) acc = tessera::add(acc, tessera::conj_mul(x[i], y[i]));
    } else {
        for (; i < n; i += step) acc = tessera::add(acc, tessera::conj_mul(x[i * xs], y[i * ys]));
    }
    acc = tessera::block_sum<WARP, BLOCK>(acc, scratch);
    if (threadIdx.x == 0) part[blockIdx.x] = acc;
}

template <typename T, int WARP, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
tessera_vecdot_final(const int parts, const T *__restrict__ part, T *__restrict__ out)
{
    __shared__ T scratch[BLOCK / WARP];
    T acc = tessera::zero<T>();
    for (int k = threadIdx.x; k < parts; k += BLOCK) acc = tessera::add(acc, part[k]);
    acc = tessera::block_sum<WARP, BLOCK>(acc, scratch);
    if (threadIdx.x == 0) out[0] = acc;
}
