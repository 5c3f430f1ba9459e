// tessera/types.cuh: element types and correctly rounded arithmetic for the CUDA and HIP
// kernels of kernels/cuda (HIP compiles the same sources; kernels/hip holds only what
// must differ).
//
// What it defines
//   tessera::cfloat, tessera::cdouble: complex64 / complex128 elements, laid out as NumPy
//     and CuPy store them ({re, im}, aligned to their size).
//   tessera::real_of<T>::type: the real type of T (float for cfloat).
//   add/sub/mul(a, b): each rounded on its own (the _rn intrinsics: never contracted
//     into a fused multiply-add, whatever the compiler's -fmad setting), for float,
//     double and the complex types (complex mul: (ar*br - ai*bi, ar*bi + ai*br), each
//     product and sum rounded, as NumPy's complex multiply rounds them).
//   conj_mul(a, b): conj(a) * b (a vector dot product's term).
//   zero<T>(), from_real<T>(r), real_part(a), abs2(a) (|a|^2 as a real), scale(a, r)
//     (a * real r).
//   div(a, b): a / b, correctly rounded for float and double; for the complex types
//     Smith's algorithm (NumPy's: the larger of |re b|, |im b| divides first).
//   strided_dot<U>(a, b, j, step, n, acc): acc + the terms a[j] b[j] for j, j + step, ...
//     below n, added in that order, U loads of each in flight before they are summed.
//   vec16<T>: the 16 / sizeof(T) consecutive elements of one 16-byte load or store;
//     aligned16(p): whether p may be read as vec16 (its address a multiple of 16).
// Layout: none (element arithmetic only).
// Launch geometry: none.
// Accumulation: the callers choose (each kernel file says).
// Numerical caveats: float32 subnormals follow the compile's -ftz setting; CuPy's own
//   compiler forces -ftz=true, so tessera compiles its kernels without it (see
//   backends/_cupy), and these intrinsics keep subnormals there, as NumPy does.
// Reference: IEEE 754-2019 (each operation correctly rounded).

#ifndef TESSERA_TYPES_CUH
#define TESSERA_TYPES_CUH

// hipcc (offline, for AMD targets) needs the HIP runtime header that NVRTC, nvcc and
// hiprtc provide implicitly (__device__, __forceinline__, the intrinsics).
#if defined(__HIPCC__) && !defined(__HIPCC_RTC__)
#include <hip/hip_runtime.h>
#endif

namespace tessera {

struct __align__(8) cfloat {
    float re, im;
};
struct __align__(16) cdouble {
    double re, im;
};

template <typename T> struct __align__(16) vec16 {
    T v[16 / sizeof(T)];
};

__device__ __forceinline__ bool aligned16(const void *p)
{
    return (reinterpret_cast<unsigned long long>(p) & 15ULL) == 0;
}

template <typename T> struct real_of { typedef T type; };
template <> struct real_of<cfloat> { typedef float type; };
template <> struct real_of<cdouble> { typedef double type; };

template <typename T> __device__ __forceinline__ T zero() { return T(0); }
template <> __device__ __forceinline__ cfloat zero<cfloat>() { return cfloat{0.0f, 0.0f}; }
template <> __device__ __forceinline__ cdouble zero<cdouble>() { return cdouble{0.0, 0.0}; }

template <typename T> __device__ __forceinline__ T from_real(typename real_of<T>::type r)
{
    return T(r);
}
template <> __device__ __forceinline__ cfloat from_real<cfloat>(float r)
{
    return cfloat{r, 0.0f};
}
template <> __device__ __forceinline__ cdouble from_real<cdouble>(double r)
{
    return cdouble{r, 0.0};
}

// ---- real arithmetic, each operation rounded on its own ---------------------------------

__device__ __forceinline__ float add(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float sub(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ float mul(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double add(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ double sub(double a, double b) { return __dsub_rn(a, b); }
__device__ __forceinline__ double mul(double a, double b) { return __dmul_rn(a, b); }

// Integers wrap modulo 2^bits as NumPy's do (the kernels pass unsigned accumulators).
#define TESSERA_INT_OPS(I)                                                                 \
    __device__ __forceinline__ I add(I a, I b) { return a + b; }                           \
    __device__ __forceinline__ I sub(I a, I b) { return a - b; }                           \
    __device__ __forceinline__ I mul(I a, I b) { return a * b; }
TESSERA_INT_OPS(unsigned int)
TESSERA_INT_OPS(unsigned long long)
#undef TESSERA_INT_OPS

// ---- complex arithmetic -----------------------------------------------------------------

template <typename C> __device__ __forceinline__ C cadd(C a, C b)
{
    return C{add(a.re, b.re), add(a.im, b.im)};
}
template <typename C> __device__ __forceinline__ C csub(C a, C b)
{
    return C{sub(a.re, b.re), sub(a.im, b.im)};
}
template <typename C> __device__ __forceinline__ C cmul(C a, C b)
{
    return C{sub(mul(a.re, b.re), mul(a.im, b.im)), add(mul(a.re, b.im), mul(a.im, b.re))};
}

__device__ __forceinline__ cfloat add(cfloat a, cfloat b) { return cadd(a, b); }
__device__ __forceinline__ cfloat sub(cfloat a, cfloat b) { return csub(a, b); }
__device__ __forceinline__ cfloat mul(cfloat a, cfloat b) { return cmul(a, b); }
__device__ __forceinline__ cdouble add(cdouble a, cdouble b) { return cadd(a, b); }
__device__ __forceinline__ cdouble sub(cdouble a, cdouble b) { return csub(a, b); }
__device__ __forceinline__ cdouble mul(cdouble a, cdouble b) { return cmul(a, b); }

__device__ __forceinline__ float conj_mul(float a, float b) { return mul(a, b); }
__device__ __forceinline__ double conj_mul(double a, double b) { return mul(a, b); }
__device__ __forceinline__ cfloat conj_mul(cfloat a, cfloat b)
{
    return cmul(cfloat{a.re, -a.im}, b);
}
__device__ __forceinline__ cdouble conj_mul(cdouble a, cdouble b)
{
    return cmul(cdouble{a.re, -a.im}, b);
}

__device__ __forceinline__ float scale(float a, float r) { return mul(a, r); }
__device__ __forceinline__ double scale(double a, double r) { return mul(a, r); }
__device__ __forceinline__ cfloat scale(cfloat a, float r)
{
    return cfloat{mul(a.re, r), mul(a.im, r)};
}
__device__ __forceinline__ cdouble scale(cdouble a, double r)
{
    return cdouble{mul(a.re, r), mul(a.im, r)};
}

__device__ __forceinline__ float abs2(float a) { return mul(a, a); }
__device__ __forceinline__ double abs2(double a) { return mul(a, a); }
__device__ __forceinline__ float abs2(cfloat a) { return add(mul(a.re, a.re), mul(a.im, a.im)); }
__device__ __forceinline__ double abs2(cdouble a)
{
    return add(mul(a.re, a.re), mul(a.im, a.im));
}

__device__ __forceinline__ float real_part(float a) { return a; }
__device__ __forceinline__ double real_part(double a) { return a; }
__device__ __forceinline__ float real_part(cfloat a) { return a.re; }
__device__ __forceinline__ double real_part(cdouble a) { return a.re; }

__device__ __forceinline__ float div(float a, float b) { return __fdiv_rn(a, b); }
__device__ __forceinline__ double div(double a, double b) { return __ddiv_rn(a, b); }

template <typename C> __device__ __forceinline__ C cdiv(C a, C b)
{
    typedef decltype(a.re) R;
    const R abr = b.re < R(0) ? -b.re : b.re, abi = b.im < R(0) ? -b.im : b.im;
    if (abr >= abi) {
        if (abr == R(0) && abi == R(0))  // (NumPy: a / |b| part by part: inf or nan)
            return C{div(a.re, abr), div(a.im, abi)};
        const R rat = div(b.im, b.re);
        const R scl = div(R(1), add(b.re, mul(b.im, rat)));
        return C{mul(add(a.re, mul(a.im, rat)), scl), mul(sub(a.im, mul(a.re, rat)), scl)};
    }
    const R rat = div(b.re, b.im);
    const R scl = div(R(1), add(b.im, mul(b.re, rat)));
    return C{mul(add(mul(a.re, rat), a.im), scl), mul(sub(mul(a.im, rat), a.re), scl)};
}
__device__ __forceinline__ cfloat div(cfloat a, cfloat b) { return cdiv(a, b); }
__device__ __forceinline__ cdouble div(cdouble a, cdouble b) { return cdiv(a, b); }

template <int U, typename T>
__device__ __forceinline__ T strided_dot(const T *a, const T *b, long long j, long long step,
                                         long long n, T acc)
{
    for (; j + (U - 1) * step < n; j += U * step) {
        T av[U], bv[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            av[u] = a[j + u * step];
            bv[u] = b[j + u * step];
        }
#pragma unroll
        for (int u = 0; u < U; ++u) acc = add(acc, mul(av[u], bv[u]));
    }
    for (; j < n; j += step) acc = add(acc, mul(a[j], b[j]));
    return acc;
}

}  // namespace tessera

#endif  // TESSERA_TYPES_CUH
