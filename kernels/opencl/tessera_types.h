// tessera_types.h: the arithmetic every kernels/opencl/*.cl file shares.
//
// Built with -D macros by backends/opencl/_programs.py:
//   T                the element type (float, double, float2, double2, or an integer type)
//   RT               its real component type (float for float2, ...)
//   TESSERA_FP64     T uses double: enables cl_khr_fp64 (the host checks the device has it)
//   TESSERA_COMPLEX  T is a complex number stored as (re, im) in a 2-vector
//   TESSERA_INTEGER  T is an integer type (wrap-around arithmetic, as NumPy's)
// The host pastes this file in place of its #include line (no -I path is needed,
// and the source hash of the disk cache covers it).

#ifdef TESSERA_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

// No silent fused multiply-adds: each product and sum is rounded, as NumPy rounds it.
#pragma OPENCL FP_CONTRACT OFF

// REASSOC, before a block: its floating-point sums may be reassociated (so a sum loop
// vectorizes with several partial sums), for kernels whose summation order is theirs
// anyway. TESSERA_REASSOC is set by the host (_programs.probe_options) where a probe
// build accepted clang's pragma; elsewhere REASSOC is empty.
#if defined(TESSERA_REASSOC)
#define REASSOC _Pragma("clang fp reassociate(on)")
#else
#define REASSOC
#endif

// MUL rounds each product and sum; MUL_NP rounds a complex product as NumPy's SIMD
// loops do on x86-64 with FMA (re = fma(ar, br, -(ai bi)), im = fma(ar, bi, ai br)), the
// rounding of the namespace's multiply, for kernels that must equal `alpha * x` exactly.
#ifdef TESSERA_COMPLEX
#define ZERO ((T)(0, 0))
#define MUL(a, b) ((T)((a).x * (b).x - (a).y * (b).y, (a).x * (b).y + (a).y * (b).x))
#define MUL_NP(a, b) ((T)(fma((a).x, (b).x, -((a).y * (b).y)), fma((a).x, (b).y, (a).y * (b).x)))
#else
#define ZERO ((T)0)
#define MUL(a, b) ((a) * (b))
#define MUL_NP(a, b) ((a) * (b))
#endif

// SIMD vectors of the real type for contiguous loads: VW lanes of 32 bytes in all
// (float8, double4); HSUMW(v) sums the lanes of v pairwise.
#define TESSERA_CAT(a, b) a##b
#define TESSERA_VEC(r, w) TESSERA_CAT(r, w)
#define VEC4 TESSERA_VEC(RT, 4)
#define HSUM4(v) (((v).x + (v).y) + ((v).z + (v).w))
#ifdef TESSERA_FP64
#define VW 4
#define VECW VEC4
#define VLOADW vload4
#define HSUMW(v) HSUM4(v)
#else
#define VW 8
#define VECW TESSERA_VEC(RT, 8)
#define VLOADW vload8
#define HSUMW(v) HSUM4((v).lo + (v).hi)
#endif

// SQRT(x) for a real T: the compiler's builtin where it has one (clang's lowers to the
// IEEE, correctly rounded llvm.sqrt and vectorizes; PoCL's library sqrt did not, and ran
// Adam 5x slower), else OpenCL's sqrt (correctly rounded under
// -cl-fp32-correctly-rounded-divide-sqrt).
#if defined(__has_builtin)
#if __has_builtin(__builtin_sqrtf) && __has_builtin(__builtin_sqrt)
#define TESSERA_BUILTIN_SQRT 1
#endif
#endif
#if defined(TESSERA_BUILTIN_SQRT) && defined(TESSERA_FP64)
#define SQRT(x) __builtin_sqrt(x)
#elif defined(TESSERA_BUILTIN_SQRT)
#define SQRT(x) __builtin_sqrtf(x)
#else
#define SQRT(x) sqrt(x)
#endif
