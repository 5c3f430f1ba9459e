// tessera/warp.cuh: reductions across the lanes of a warp (CUDA) or wavefront (HIP).
//
// What it defines
//   tessera::shfl_down<WARP>(v, delta): lane i reads lane i + delta of its WARP-wide
//     group (float, double, int, unsigned, long long and the complex types of types.cuh).
//   tessera::warp_sum<WARP>(v): the sum over the WARP lanes, in lane 0 (a tree: lanes
//     i and i + WARP/2, then i + WARP/4, ...; the order is fixed, so results repeat
//     bit for bit on one device).
//   tessera::warp_max<WARP>(v): the maximum, in lane 0.
//   tessera::segment_sum<WARP>(v, width): the sum over each aligned group of width lanes
//     (width a power of two <= WARP, the same in every lane; a run-time value), in the
//     group's first lane (the tree of warp_sum within the group; width 1: v itself).
//   tessera::shfl<WARP>(v, src): every lane reads lane src of its WARP-wide group (a
//     broadcast when src is the same for all).
//   tessera::warp_sync(): the lanes of a warp meet, and each one's shared and global
//     writes before it are seen by the others after it (CUDA's __syncwarp; on AMD a
//     wavefront barrier between two wavefront-scope fences).
//   tessera::block_sum<WARP, BLOCK>(v, scratch): the sum over the BLOCK threads of a
//     one-dimensional block, in thread 0: each warp's warp_sum, then warp 0 adds the
//     warps' sums (a tree again, in warp order). scratch is __shared__ T[BLOCK / WARP];
//     every thread of the block calls it (it holds two __syncthreads()), so calls sit
//     in block-uniform control flow only.
// WARP is a template parameter everywhere, never a literal: 32 on NVIDIA GPUs and on
//   AMD RDNA (gfx10xx/gfx11xx in wave32), 64 on AMD CDNA (gfx90a, gfx942); the launcher
//   reads it from the device (CuPy's device attribute warpSize) and names it in the
//   kernel's template arguments.
// Layout: none. Launch geometry: the block size is a multiple of WARP; every lane of the
//   group calls the function (full-mask shuffles).
// Accumulation: in the argument's type.
// Numerical caveats: a tree sum, not a sequential one: results differ from a sequential
//   sum by rounding (a few ulps times log2(WARP)).
// Reference: CUDA C++ Programming Guide, "Warp Shuffle Functions"; HIP Programming
//   Guide, "Warp cross-lane functions" (__shfl_down without a mask, width up to 64).

#ifndef TESSERA_WARP_CUH
#define TESSERA_WARP_CUH

#include "tessera/types.cuh"

namespace tessera {

__device__ __forceinline__ void warp_sync()
{
#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
    __builtin_amdgcn_wave_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
#else
    __syncwarp();
#endif
}

template <int WARP, typename T> __device__ __forceinline__ T shfl_down(T v, int delta)
{
#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
    return __shfl_down(v, delta, WARP);
#else
    static_assert(WARP <= 32, "CUDA warps are 32 lanes wide");
    return __shfl_down_sync(0xffffffffu, v, delta, WARP);
#endif
}

template <int WARP> __device__ __forceinline__ cfloat shfl_down(cfloat v, int delta)
{
    return cfloat{shfl_down<WARP>(v.re, delta), shfl_down<WARP>(v.im, delta)};
}
template <int WARP> __device__ __forceinline__ cdouble shfl_down(cdouble v, int delta)
{
    return cdouble{shfl_down<WARP>(v.re, delta), shfl_down<WARP>(v.im, delta)};
}

template <int WARP, typename T> __device__ __forceinline__ T shfl(T v, int src)
{
#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
    return __shfl(v, src, WARP);
#else
    static_assert(WARP <= 32, "CUDA warps are 32 lanes wide");
    return __shfl_sync(0xffffffffu, v, src, WARP);
#endif
}

template <int WARP> __device__ __forceinline__ cfloat shfl(cfloat v, int src)
{
    return cfloat{shfl<WARP>(v.re, src), shfl<WARP>(v.im, src)};
}
template <int WARP> __device__ __forceinline__ cdouble shfl(cdouble v, int src)
{
    return cdouble{shfl<WARP>(v.re, src), shfl<WARP>(v.im, src)};
}

template <int WARP, typename T> __device__ __forceinline__ T warp_sum(T v)
{
#pragma unroll
    for (int delta = WARP / 2; delta > 0; delta >>= 1)
        v = add(v, shfl_down<WARP>(v, delta));
    return v;
}

template <int WARP, typename T> __device__ __forceinline__ T shfl_down_w(T v, int delta, int width)
{
#if defined(__HIP_PLATFORM_AMD__) || defined(__HIPCC__)
    return __shfl_down(v, delta, width);
#else
    static_assert(WARP <= 32, "CUDA warps are 32 lanes wide");
    return __shfl_down_sync(0xffffffffu, v, delta, width);
#endif
}
template <int WARP> __device__ __forceinline__ cfloat shfl_down_w(cfloat v, int delta, int width)
{
    return cfloat{shfl_down_w<WARP>(v.re, delta, width), shfl_down_w<WARP>(v.im, delta, width)};
}
template <int WARP> __device__ __forceinline__ cdouble shfl_down_w(cdouble v, int delta, int width)
{
    return cdouble{shfl_down_w<WARP>(v.re, delta, width), shfl_down_w<WARP>(v.im, delta, width)};
}

template <int WARP, typename T> __device__ __forceinline__ T segment_sum(T v, int width)
{
    for (int delta = width / 2; delta > 0; delta >>= 1)
        v = add(v, shfl_down_w<WARP>(v, delta, width));
    return v;
}

template <int WARP, typename T> __device__ __forceinline__ T warp_max(T v)
{
#pragma unroll
    for (int delta = WARP / 2; delta > 0; delta >>= 1) {
        T o = shfl_down<WARP>(v, delta);
        v = (o > v || o != o) ? o : v;  // NaN propagates
    }
    return v;
}

template <int WARP, int BLOCK, typename T>
__device__ __forceinline__ T block_sum(T v, T *scratch)
{
    static_assert(BLOCK % WARP == 0 && BLOCK / WARP <= WARP,
                  "block_sum: BLOCK must be a multiple of WARP, at most WARP warps");
    const int lane = threadIdx.x % WARP, w = threadIdx.x / WARP;
    v = warp_sum<WARP>(v);
    __syncthreads();  // a previous call's readers are done with scratch
    if (lane == 0) scratch[w] = v;
    __syncthreads();
    if (w == 0) v = warp_sum<WARP>(lane < BLOCK / WARP ? scratch[lane] : zero<T>());
    return v;
}

}  // namespace tessera

#endif  // TESSERA_WARP_CUH
