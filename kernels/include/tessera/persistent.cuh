// tessera/persistent.cuh: what the persistent cooperative solvers share (cg.cu, gmres.cu).
//
// What it defines (namespace tessera)
//   OP_NONE, OP_DENSE, OP_CSR, OP_HOST: the kinds of an operator (A, M) a solver kernel
//     takes; the launchers (backends/_cupy/cg.py, gmres.py) keep the same numbers.
//   StoredOp<T, I, P>: a stored operator, dense (val, ld: row i at val + i * ld, its n
//     columns contiguous) or CSR (data val, column indices idx, row starts ptr), with the
//     lanes that sum one row (1: a row per thread; WARP: a row per warp).
//   row_part(op, i, n, sub, v): lane sub's share of row i of op times v (dense: four
//     loads in flight; CSR: the row's entries in storage order, every lanes-th).
//   grid_sync(bar, blocks): the grid-wide barrier of a cooperative launch, on a 64-bit
//     arrival counter that only grows (each launch of one solve starts it at a multiple
//     of the block count, which is fixed per solve).
//   root(v): the correctly rounded square root in v's precision.
// Layout and launch: as each kernel file says; every block of the grid is resident (a
//   cooperative launch sized from the occupancy), so a block waiting at grid_sync is
//   never waiting on one that has not started.
// Accumulation: in T; every product and sum rounded on its own (types.cuh).
// Reference: CUDA C++ Programming Guide, "Cooperative Groups" (grid synchronization; the
//   barrier here is the kernels' own, so that the same source compiles under NVRTC and
//   hipcc without the cooperative-groups headers).

#ifndef TESSERA_PERSISTENT_CUH
#define TESSERA_PERSISTENT_CUH

#include "tessera/types.cuh"

namespace tessera {

constexpr int OP_NONE = 0, OP_DENSE = 1, OP_CSR = 2, OP_HOST = 3;

__device__ __forceinline__ float root(float v) { return sqrtf(v); }  // (correctly rounded)
__device__ __forceinline__ double root(double v) { return sqrt(v); }

// A stored operator: dense (val, ld) or CSR (val, idx, ptr).
template <typename T, typename I, typename P> struct StoredOp {
    int kind, lanes;
    const T *__restrict__ val;
    const I *__restrict__ idx;
    const P *__restrict__ ptr;
    long long ld;
};

// Row i of op times v: this lane's share (lanes `lanes`, this lane `sub` of them).
template <typename T, typename I, typename P>
__device__ __forceinline__ T row_part(const StoredOp<T, I, P> &op, long long i, long long n,
                                      int sub, const T *v)
{
    T acc = zero<T>();
    const int L = op.lanes;
    if (op.kind == OP_DENSE) {
        const T *row = op.val + i * op.ld;
        long long j = sub;
        for (; j + 3 * L < n; j += 4 * L) {  // four loads in flight before summing them
            const T a0 = row[j], a1 = row[j + L], a2 = row[j + 2 * L], a3 = row[j + 3 * L];
            const T v0 = v[j], v1 = v[j + L], v2 = v[j + 2 * L], v3 = v[j + 3 * L];
            acc = add(acc, mul(a0, v0));
            acc = add(acc, mul(a1, v1));
            acc = add(acc, mul(a2, v2));
            acc = add(acc, mul(a3, v3));
        }
        for (; j < n; j += L) acc = add(acc, mul(row[j], v[j]));
    } else {
        const long long stop = op.ptr[i + 1];
        for (long long e = (long long)op.ptr[i] + sub; e < stop; e += L)
            acc = add(acc, mul(op.val[e], v[(long long)op.idx[e]]));
    }
    return acc;
}

// The grid-wide barrier: a 64-bit arrival counter bar that only grows (over every
// launch of one solve, whose grid size is fixed: each launch starts it at a multiple of
// the block count). A block's thread 0 arrives (atomicAdd) and waits for the count that
// closes its round; the fences order every thread's writes before the arrival and the
// reads after it (the block's __syncthreads on either side). The launch is cooperative,
// so every block is resident and the wait ends.
__device__ __forceinline__ void grid_sync(unsigned long long *bar, unsigned long long blocks)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        const unsigned long long ticket = atomicAdd(bar, 1ULL);
        const unsigned long long goal = (ticket / blocks + 1) * blocks;
        while (*reinterpret_cast<volatile unsigned long long *>(bar) < goal) {
        }
        __threadfence();
    }
    __syncthreads();
}

}  // namespace tessera

#endif  // TESSERA_PERSISTENT_CUH
