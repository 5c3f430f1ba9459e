// gemm.cl: batched matrix product of one floating dtype.
//
// tessera_gemm  C[z, i, j] = sum_k A[z, i, k] B[z, k, j]   (i < M, j < N, k < K)
//   Layout      A[z, i, k] at a[ao + batch_a(z) + i*am + k*ak], B likewise with (bo, bk, bn):
//               element offsets and strides of any layout (views, transposes, broadcast
//               stride-0 axes). The stack index z runs over up to four broadcast batch
//               axes (d0..d3, outermost first; unused ones are 1 with stride 0). C is a
//               fresh C-contiguous (Z, M, N) buffer.
//   Tiling      work-groups of TS x TS work-items, one output element each; every K-step
//               loads one TS x TS tile of A and of B into local memory (each element read
//               from global memory once per work-group), then each work-item runs TS
//               multiply-adds from the tiles.
//   Numerics    acc starts at 0 and adds the products in k order, each product and sum
//               rounded in T (float32 in float; complex products without fma), as
//               FP_CONTRACT OFF requires. BLAS blocks K differently: results agree with
//               NumPy to a few ulp times sqrt(K), not bitwise.
//
// Epilogue   built with -DTESSERA_GEMM_ACCUMULATE, both kernels store C = acc + C: the
//            caller pre-fills C (nn.linear: bias + residual, beta = 1 in BLAS terms),
//            one rounding more than the plain product, no extra pass over C.
//
// Vector products (a 1-D operand, (1, K) @ (K, 1), vecdot) of floating types run on the
// host in its BLAS order (backends/opencl/_ops_linalg.py says why).

#include "tessera_types.h"

#ifndef TS
#define TS 16
#endif

#ifdef TESSERA_GEMM_ACCUMULATE
#define STORE_C(p, v) ((p) = (v) + (p))
#else
#define STORE_C(p, v) ((p) = (v))
#endif

#ifdef TESSERA_COMPLEX
#define ADD_MUL(acc, a, b) ((acc) + MUL(a, b))
#else
#define ADD_MUL(acc, a, b) ((acc) + (a) * (b))
#endif

__kernel __attribute__((reqd_work_group_size(TS, TS, 1)))
void tessera_gemm(const long M, const long N, const long K, __global T *c,
                  __global const T *a, const long ao, const long am, const long ak,
                  __global const T *b, const long bo, const long bk, const long bn,
                  const long d1, const long d2, const long d3,
                  const long as0, const long as1, const long as2, const long as3,
                  const long bs0, const long bs1, const long bs2, const long bs3)
{
    __local T at[TS][TS];
    __local T bt[TS][TS + 1];
    const int lx = get_local_id(0), ly = get_local_id(1);
    const long j = get_group_id(0) * TS + lx;
    const long i = get_group_id(1) * TS + ly;
    const long z = get_global_id(2);
    long r = z;
    const long c3 = r % d3; r /= d3;
    const long c2 = r % d2; r /= d2;
    const long c1 = r % d1;
    const long c0 = r / d1;
    __global const T *pa = a + ao + c0 * as0 + c1 * as1 + c2 * as2 + c3 * as3;
    __global const T *pb = b + bo + c0 * bs0 + c1 * bs1 + c2 * bs2 + c3 * bs3;
    T acc = ZERO;
    for (long k0 = 0; k0 < K; k0 += TS) {
        const long ka = k0 + lx, kb = k0 + ly;
        at[ly][lx] = (i < M && ka < K) ? pa[i * am + ka * ak] : ZERO;
        bt[ly][lx] = (kb < K && j < N) ? pb[kb * bk + j * bn] : ZERO;
        barrier(CLK_LOCAL_MEM_FENCE);
        const int kn = (int)min((long)TS, K - k0);
        for (int k = 0; k < kn; ++k)
            acc = ADD_MUL(acc, at[ly][k], bt[k][lx]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (i < M && j < N)
        STORE_C(c[(z * M + i) * N + j], acc);
}

// tessera_gemm_block (CPU devices): one work-item per TI x TJ tile of C, kept in private
// memory; K runs in chunks of KC, and within a chunk each RB x CB block of the tile loads
// its accumulators into registers (4 x 16 floats, 4 x 8 doubles or complex64, 4 x 4
// complex128: 8 AVX registers),
// adds the chunk's products (RB values of A and a CB-wide row of B per k; LLVM vectorizes
// the CB loop) and stores them back. A chunk's A and B panels (TI x KC and KC x TJ) stay
// in cache while the tile's blocks reuse them. Each element still sums its products in
// k order with rounded products and sums: the same results as tessera_gemm, bit for bit.
// Edge tiles (or B with a column stride) take a plain loop in the same order. Global size
// (ceil(N / TJ), ceil(M / TI), Z), work-groups of one (PoCL runs them over its threads).
#define RB 4
#if defined(TESSERA_FP64) && defined(TESSERA_COMPLEX)
#define CB 4
#elif defined(TESSERA_FP64) || defined(TESSERA_COMPLEX)
#define CB 8
#else
#define CB 16
#endif
#define TI 32
#define TJ 32
#define KC 128
__kernel void tessera_gemm_block(const long M, const long N, const long K, __global T *c,
                                 __global const T *a, const long ao, const long am,
                                 const long ak,
                                 __global const T *b, const long bo, const long bk,
                                 const long bn,
                                 const long d1, const long d2, const long d3,
                                 const long as0, const long as1, const long as2,
                                 const long as3, const long bs0, const long bs1,
                                 const long bs2, const long bs3)
{
    const long j0 = get_global_id(0) * TJ;
    const long i0 = get_global_id(1) * TI;
    const long z = get_global_id(2);
    long r = z;
    const long c3 = r % d3; r /= d3;
    const long c2 = r % d2; r /= d2;
    const long c1 = r % d1;
    const long c0 = r / d1;
    __global const T *pa = a + ao + c0 * as0 + c1 * as1 + c2 * as2 + c3 * as3;
    __global const T *pb = b + bo + c0 * bs0 + c1 * bs1 + c2 * bs2 + c3 * bs3;
    __global T *pc = c + z * M * N;
    if (i0 + TI > M || j0 + TJ > N || bn != 1) {
        const int mu = (int)min((long)TI, M - i0), mv = (int)min((long)TJ, N - j0);
        for (int u = 0; u < mu; ++u)
            for (int v = 0; v < mv; ++v) {
                T acc = ZERO;
                for (long k = 0; k < K; ++k)
                    acc = ADD_MUL(acc, pa[(i0 + u) * am + k * ak], pb[k * bk + (j0 + v) * bn]);
                STORE_C(pc[(i0 + u) * N + j0 + v], acc);
            }
        return;
    }
    T tile[TI][TJ];
    for (int u = 0; u < TI; ++u)
        for (int v = 0; v < TJ; ++v)
            tile[u][v] = ZERO;
    for (long k0 = 0; k0 < K; k0 += KC) {
        const long k1 = min(K, k0 + KC);
        for (int ib = 0; ib < TI; ib += RB)
            for (int jb = 0; jb < TJ; jb += CB) {
                T acc[RB][CB];
                for (int u = 0; u < RB; ++u)
                    for (int v = 0; v < CB; ++v)
                        acc[u][v] = tile[ib + u][jb + v];
                for (long k = k0; k < k1; ++k) {
                    __global const T *brow = pb + k * bk + j0 + jb;
                    T bv[CB];
                    for (int v = 0; v < CB; ++v)
                        bv[v] = brow[v];
                    for (int u = 0; u < RB; ++u) {
                        const T av = pa[(i0 + ib + u) * am + k * ak];
                        for (int v = 0; v < CB; ++v)
                            acc[u][v] = ADD_MUL(acc[u][v], av, bv[v]);
                    }
                }
                for (int u = 0; u < RB; ++u)
                    for (int v = 0; v < CB; ++v)
                        tile[ib + u][jb + v] = acc[u][v];
            }
    }
    for (int u = 0; u < TI; ++u)
        for (int v = 0; v < TJ; ++v)
            STORE_C(pc[(i0 + u) * N + j0 + v], tile[u][v]);
}
