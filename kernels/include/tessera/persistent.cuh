// tessera/persistent.cuh: what the persistent cooperative solvers share (cg.cu, gmres.cu).
//
// What it defines (namespace tessera)
//   OP_NONE, OP_DENSE, OP_CSR, OP_HOST: the kinds of an operator (A, M) a solver kernel
//     takes; the launchers (backends/_cupy/cg.py, gmres.py) keep the same numbers.
//   StoredOp<T, I, P>: a stored operator, dense (val, ld: row i at val + i * ld, its n
//     columns contiguous) or CSR (data val, column indices idx, row starts ptr), with the
//     lanes that sum one row (1: a row per thread; WARP: a row per warp).
//   row_part(op, i, n, sub, v): lane sub's share of row i of op times v (dense: 32
//     bytes of loads in flight; CSR: the row's entries in storage order, every lanes-th).
//   grid_sync(bar, blocks): the grid-wide barrier of a cooperative launch, on a 64-bit
//     arrival counter that only grows (each launch of one solve starts it at a multiple
//     of the block count, which is fixed per solve); grid_sync_with(bar, blocks, worker,
//     work): the same, one other thread of the block running work() during the wait.
//   root(v): the correctly rounded square root in v's precision.
//   RowGrid<T, WARP, BLOCK>: a grid whose blocks own contiguous runs of rows (gmres.cu,
//     bicgstab.cu): partial sums, their reduction in every block, norms, products; its
//     partial sums want part 16-byte aligned and slots a multiple of 16 / sizeof(T).
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
#include "tessera/warp.cuh"

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
        // loads of the row (and of v) in flight a lane before summing: 32 bytes of each
        acc = strided_dot<(sizeof(T) <= 4 ? 8 : 4)>(row, v, sub, L, n, acc);
    } else {
        const long long stop = op.ptr[i + 1];
        for (long long e = (long long)op.ptr[i] + sub; e < stop; e += L)
            acc = add(acc, mul(op.val[e], v[(long long)op.idx[e]]));
    }
    return acc;
}

// The grid-wide barrier: a 64-bit arrival counter bar that only grows (over every
// launch of one solve, whose grid size is fixed: each launch starts it at a multiple of
// the block count). A block's thread 0 arrives (an add with release semantics; on HIP a
// fence, then atomicAdd) and waits for the count that closes its round (loads with
// acquire semantics; on HIP volatile loads, then a fence), which orders every thread's
// writes before the arrival and the reads after it (the block's __syncthreads on either
// side). The launch is cooperative, so every block is resident and the wait ends.
// Release/acquire against the fences, gmres on the dense 2049 system (float32, H100,
// benchmarks/probe_gmres_stages.py, two runs on two machines): 18.38 against 19.32 and
// 22.16 against 21.31 us an inner iteration: within those runs' noise (kept: the
// release/acquire pair is the ordering the barrier needs, without full fences).
__device__ __forceinline__ void arrive_and_wait(unsigned long long *bar,
                                                unsigned long long blocks)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700 && !defined(TESSERA_BARRIER_FENCES)
    // The arrival a release, the wait acquire loads: no full fences (the fenced form
    // below is HIP's, and CUDA's with -DTESSERA_BARRIER_FENCES).
    unsigned long long ticket, seen;
    asm volatile("atom.add.release.gpu.u64 %0, [%1], 1;" : "=l"(ticket) : "l"(bar) : "memory");
    const unsigned long long goal = (ticket / blocks + 1) * blocks;
    do {
        asm volatile("ld.acquire.gpu.u64 %0, [%1];" : "=l"(seen) : "l"(bar) : "memory");
    } while (seen < goal);
#else
    __threadfence();
    const unsigned long long ticket = atomicAdd(bar, 1ULL);
    const unsigned long long goal = (ticket / blocks + 1) * blocks;
    while (*reinterpret_cast<volatile unsigned long long *>(bar) < goal) {
    }
    __threadfence();
#endif
}

__device__ __forceinline__ void grid_sync(unsigned long long *bar, unsigned long long blocks)
{
    __syncthreads();
    if (threadIdx.x == 0) arrive_and_wait(bar, blocks);
    __syncthreads();
}

// grid_sync, with thread `worker` (not 0) running work() while thread 0 waits: work for
// this block alone, whose writes the others may read past the next barrier.
template <typename F>
__device__ __forceinline__ void grid_sync_with(unsigned long long *bar,
                                               unsigned long long blocks, int worker, F work)
{
    __syncthreads();
    if (threadIdx.x == 0)
        arrive_and_wait(bar, blocks);
    else if (threadIdx.x == worker)
        work();
    __syncthreads();
}

// A grid whose block k owns the rows [row0, row1) = [k c, (k + 1) c), c = ceil(n / blocks):
// their products, their elementwise updates and their shares of every dot product, so
// only what another block reads needs a grid barrier. Partial sums are block-major: block
// j's `slots` sums lie together at part + region * slots * blocks + j * slots (part 16-byte
// aligned and slots a multiple of 16 / sizeof(T): the launchers place the partial sums at
// the start of their workspace). A dot product's partial sum: warp q of a block takes
// the sums q, q + WARPS, ..., its lanes over the block's rows (a warp_sum). Their
// reduction, after the barrier: each thread adds every g-th block's E = 16 / sizeof(T)
// consecutive sums (one 16-byte load a block, four of them issued together), then a
// warp a sum adds the g groups' totals; the order depends on count, blocks and
// BLOCK only, so every block holds the same values and takes the same decisions.
template <typename T, int WARP, int BLOCK> struct RowGrid {
    static constexpr int WARPS = BLOCK / WARP;
    static constexpr int E = 16 / (int)sizeof(T);  // sums a 16-byte load (vec16<T>)
    unsigned long long *bar;
    T *part;   // 2 * slots * blocks partial sums: two regions, used in turn
    T *sums;   // __shared__ T[slots]: the last reduction's sums
    long long n, row0, row1;  // this block's rows
    int blocks, slots, region;

    __device__ __forceinline__ void sync() { grid_sync(bar, (unsigned long long)blocks); }
    template <typename F> __device__ __forceinline__ void sync_with(int worker, F work)
    {
        grid_sync_with(bar, (unsigned long long)blocks, worker, work);
    }

    // part[region][this block][k] = the sum over this block's rows i of term_of(k)(i),
    // for k < count <= slots: warp q takes k = q, q + WARPS, ..., its lanes over the rows
    // (term_of(k) made once a sum, outside the loop over rows).
    template <typename F> __device__ __forceinline__ void sweep(int count, F term_of)
    {
        const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
        T *mine = part + (long long)region * slots * blocks + (long long)blockIdx.x * slots;
        for (int k = warp; k < count; k += WARPS) {
            const auto term = term_of(k);
            T acc = zero<T>();
#pragma unroll 4
            for (long long i = row0 + lane; i < row1; i += WARP) acc = add(acc, term(i));
            acc = warp_sum<WARP>(acc);
            if (lane == 0) mine[k] = acc;
        }
    }

    // sweep with the terms term(k, i).
    template <typename F> __device__ __forceinline__ void partials(int count, F term)
    {
        sweep(count, [&](int k) { return [&term, k](long long i) { return term(k, i); }; });
    }

    // sweep with the terms conj(a_k[i] s_k) b[i], a_k = a_of(k) and s_k = s_of(k) (s_k = 1
    // leaves a_k's bits): a term choosing its operands row by row inside the unrolled
    // loop (partials) made these sweeps ~2x slower on Poisson 1024^2.
    template <typename A, typename S>
    __device__ __forceinline__ void dots(int count, A a_of, S s_of, const T *b)
    {
        sweep(count, [&](int k) {
            const T *a = a_of(k);
            const typename real_of<T>::type s = s_of(k);
            return [a, s, b](long long i) { return conj_mul(scale(a[i], s), b[i]); };
        });
    }

    // sums[k] = the sum of every block's part[region][.][k], for k < count (past a grid
    // barrier: reduce); the next reduction takes the other region.
    __device__ __forceinline__ void gather(int count)
    {
        __shared__ T totals[BLOCK * E];  // group g's total of sum k at g * quads * E + k
        const int quads = (count + E - 1) / E, groups = BLOCK / quads, width = quads * E;
        const int q = threadIdx.x % quads, grp = threadIdx.x / quads;
        const T *all = part + (long long)region * slots * blocks;
        if (grp < groups) {
            T acc[E];
#pragma unroll
            for (int e = 0; e < E; ++e) acc[e] = zero<T>();
#pragma unroll 4
            for (int j = grp; j < blocks; j += groups) {
                const vec16<T> v =
                    *reinterpret_cast<const vec16<T> *>(all + (long long)j * slots + q * E);
#pragma unroll
                for (int e = 0; e < E; ++e) acc[e] = add(acc[e], v.v[e]);
            }
#pragma unroll
            for (int e = 0; e < E; ++e) totals[grp * width + q * E + e] = acc[e];
        }
        __syncthreads();
        const int warp = threadIdx.x / WARP, lane = threadIdx.x % WARP;
        for (int k = warp; k < count; k += WARPS) {
            T acc = zero<T>();
            for (int j = lane; j < groups; j += WARP) acc = add(acc, totals[j * width + k]);
            acc = warp_sum<WARP>(acc);
            if (lane == 0) sums[k] = acc;
        }
        region ^= 1;
        __syncthreads();
    }

    // A grid barrier, then gather(count).
    __device__ __forceinline__ void reduce(int count)
    {
        sync();
        gather(count);
    }

    // ||v|| over the grid: the root in T's real type of v^H v, as a double (a barrier).
    __device__ __forceinline__ double norm(const T *v)
    {
        partials(1, [&](int, long long i) { return from_real<T>(abs2(v[i])); });
        reduce(1);
        return (double)root(real_part(sums[0]));
    }

    // out = (op v) sc on this block's rows (then a __syncthreads: the block may read
    // them); sc = 1 leaves the products' bits.
    template <typename I, typename P>
    __device__ __forceinline__ void product(const StoredOp<T, I, P> &op, const T *v, T *out,
                                            typename real_of<T>::type sc = 1)
    {
        const int L = op.lanes, lane = threadIdx.x % WARP, sub = lane % L;
        if (op.kind == OP_CSR && L == 1) {  // a row per thread, four rows in flight
            for (long long i0 = row0 + threadIdx.x; i0 < row1; i0 += 4 * BLOCK) {
                long long e[4], stop[4], len = 0;
                T s[4];
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    const long long i = i0 + u * BLOCK;
                    e[u] = i < row1 ? (long long)op.ptr[i] : 0;
                    stop[u] = i < row1 ? (long long)op.ptr[i + 1] : 0;
                    len = max(len, stop[u] - e[u]);
                    s[u] = zero<T>();
                }
                for (long long k = 0; k < len; ++k) {  // each row in storage order
#pragma unroll
                    for (int u = 0; u < 4; ++u)
                        if (e[u] + k < stop[u])
                            s[u] = add(s[u], mul(op.val[e[u] + k], v[(long long)op.idx[e[u] + k]]));
                }
#pragma unroll
                for (int u = 0; u < 4; ++u)
                    if (i0 + u * BLOCK < row1) out[i0 + u * BLOCK] = scale(s[u], sc);
            }
        } else {
            // r0 is the same in every lane of a warp: whole warps meet each shuffle.
            const long long rpw = WARP / L;
            for (long long r0 = row0 + (threadIdx.x / WARP) * rpw; r0 < row1; r0 += WARPS * rpw) {
                const long long i = r0 + lane / L;
                T s = i < row1 ? row_part(op, i, n, sub, v) : zero<T>();
                s = segment_sum<WARP>(s, L);
                if (sub == 0 && i < row1) out[i] = scale(s, sc);
            }
        }
        __syncthreads();
    }
};

}  // namespace tessera

#endif  // TESSERA_PERSISTENT_CUH
