// gemm.cl: batched matrix product and vector dot products (vecdot) of one floating dtype.
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
// tessera_vecmat  out[z, j] = sum_k x[z, k] B[z, k, j]: a 1-D left operand (real T), in
//   OpenBLAS's Haswell dgemv_n order (numpy.matmul's vector @ matrix), so a Krylov
//   solver's update x + y @ V equals SciPy's bit for bit. Columns j < N - N % 4 sum K in
//   groups of four, p = fma(b2, x2, b0 x0) + fma(b3, x3, b1 x1), acc = acc + p; then a
//   pair (b0 x0 + b1 x1) and a single b0 x0 as K % 4 leaves them; the last N % 4 columns
//   sum k by k (rounded products and sums), or with ``pairs`` (N of 2 or 3, B's rows
//   packed, x contiguous: dgemv_n's lda == m loop) two rounded pair sums per four k.
//   One work-item per output element.
//
// tessera_dot   out[z] = sum_k conj(x[z, k]) y[z, k]   (conj only for complex T)
//   One work-item per output element; batch axes as above, contracted-axis strides xk, yk.
//   Order       OpenBLAS's Haswell ddot/zdotc order (the kernels numpy.dot, numpy.vdot,
//               numpy.vecdot and a (1, K) @ (K, 1) numpy.matmul reach for float64 on x86-64), so a Krylov solver's iterates
//               equal SciPy's bit for bit: the first n - n % NL elements go round-robin
//               into NL = 4 registers x RW lanes of partial sums (element k into lane
//               k % NL), each updated with one fused multiply-add (fma(), explicitly: the
//               BLAS kernel's vfmadd231pd, not a contraction); the lanes are folded
//               per register (high half onto low), then the registers ((r0 + r1) +
//               (r2 + r3)), then the remaining lanes pairwise; the tail elements are then
//               added one by one (rounded product, rounded sum). Complex dots keep four
//               real sums (xr yr, xi yi, xr yi, xi yr), RW/2 complex per register, as
//               zdotc does, and combine them last. Checked bit for bit against numpy.dot
//               and numpy.vdot by tests/test_opencl_native.py.

#include "tessera_types.h"

#ifndef TS
#define TS 16
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
        c[(z * M + i) * N + j] = acc;
}

#ifndef TESSERA_COMPLEX
__kernel void tessera_vecmat(const long n, const long N, const long K, __global T *out,
                             __global const T *x, const long xo, const long xk,
                             __global const T *b, const long bo, const long bk,
                             const long bn, const int pairs,
                             const long d1, const long d2, const long d3,
                             const long xs0, const long xs1, const long xs2, const long xs3,
                             const long bs0, const long bs1, const long bs2, const long bs3)
{
    const long g = get_global_id(0);
    if (g >= n)
        return;
    const long j = g % N;
    long r = g / N;
    const long c3 = r % d3; r /= d3;
    const long c2 = r % d2; r /= d2;
    const long c1 = r % d1;
    const long c0 = r / d1;
    __global const T *px = x + xo + c0 * xs0 + c1 * xs1 + c2 * xs2 + c3 * xs3;
    __global const T *pb = b + bo + c0 * bs0 + c1 * bs1 + c2 * bs2 + c3 * bs3 + j * bn;
    T acc = ZERO;
    if (j < N - N % 4) {
        const long k4 = K - K % 4;
        long k = 0;
        for (; k < k4; k += 4) {
            const T p0 = fma(pb[(k + 2) * bk], px[(k + 2) * xk], pb[k * bk] * px[k * xk]);
            const T p1 = fma(pb[(k + 3) * bk], px[(k + 3) * xk],
                             pb[(k + 1) * bk] * px[(k + 1) * xk]);
            acc = acc + (p0 + p1);
        }
        if (K % 4 >= 2) {
            acc = acc + (pb[k * bk] * px[k * xk] + pb[(k + 1) * bk] * px[(k + 1) * xk]);
            k += 2;
        }
        if (K % 2)
            acc = acc + pb[k * bk] * px[k * xk];
    } else if (pairs) {
        const long k4 = K - K % 4;
        long k = 0;
        for (; k < k4; k += 4) {
            acc = acc + (pb[k * bk] * px[k * xk] + pb[(k + 1) * bk] * px[(k + 1) * xk]);
            acc = acc + (pb[(k + 2) * bk] * px[(k + 2) * xk]
                         + pb[(k + 3) * bk] * px[(k + 3) * xk]);
        }
        for (; k < K; ++k)
            acc = acc + pb[k * bk] * px[k * xk];
    } else {
        for (long k = 0; k < K; ++k)
            acc = acc + pb[k * bk] * px[k * xk];
    }
    out[g] = acc;
}
#endif

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
                pc[(i0 + u) * N + j0 + v] = acc;
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
            pc[(i0 + u) * N + j0 + v] = tile[u][v];
}

// Lanes per register: 32 bytes of RT (4 doubles, 8 floats).
#ifdef TESSERA_FP64
#define RW 4
#else
#define RW 8
#endif

#ifdef TESSERA_COMPLEX
#define CW (RW / 2)
#define NC (4 * CW)

// Fold sum s[NC] (4 registers of CW complex slots): registers first, then the slots.
inline RT fold_c(RT *s)
{
    RT t[CW];
    for (int q = 0; q < CW; ++q)
        t[q] = (s[q] + s[CW + q]) + (s[2 * CW + q] + s[3 * CW + q]);
    for (int w = CW / 2; w >= 1; w /= 2)
        for (int q = 0; q < w; ++q)
            t[q] = t[q] + t[q + w];
    return t[0];
}
#else
#define NL (4 * RW)

inline RT fold_r(RT *s)
{
    RT t[RW / 2];
    for (int q = 0; q < RW / 2; ++q) {
        RT h0 = s[q] + s[q + RW / 2];
        RT h1 = s[RW + q] + s[RW + q + RW / 2];
        RT h2 = s[2 * RW + q] + s[2 * RW + q + RW / 2];
        RT h3 = s[3 * RW + q] + s[3 * RW + q + RW / 2];
        t[q] = (h0 + h1) + (h2 + h3);
    }
    for (int w = RW / 4; w >= 1; w /= 2)
        for (int q = 0; q < w; ++q)
            t[q] = t[2 * q] + t[2 * q + 1];
    return t[0];
}
#endif

__kernel void tessera_dot(const long n, const long K, __global T *out,
                          __global const T *x, const long xo, const long xk,
                          __global const T *y, const long yo, const long yk,
                          const long d1, const long d2, const long d3,
                          const long xs0, const long xs1, const long xs2, const long xs3,
                          const long ys0, const long ys1, const long ys2, const long ys3,
                          const int conj)
{
    const long z = get_global_id(0);
    if (z >= n)
        return;
    long r = z;
    const long c3 = r % d3; r /= d3;
    const long c2 = r % d2; r /= d2;
    const long c1 = r % d1;
    const long c0 = r / d1;
    __global const T *px = x + xo + c0 * xs0 + c1 * xs1 + c2 * xs2 + c3 * xs3;
    __global const T *py = y + yo + c0 * ys0 + c1 * ys1 + c2 * ys2 + c3 * ys3;
#ifdef TESSERA_COMPLEX
    RT rr[NC], ii[NC], ri[NC], ir[NC];
    for (int q = 0; q < NC; ++q)
        rr[q] = ii[q] = ri[q] = ir[q] = (RT)0;
    const long k1 = K - K % NC;
    for (long k0 = 0; k0 < k1; k0 += NC) {
        for (int q = 0; q < NC; ++q) {
            const T u = px[(k0 + q) * xk], v = py[(k0 + q) * yk];
            rr[q] = fma(u.x, v.x, rr[q]);
            ii[q] = fma(u.y, v.y, ii[q]);
            ri[q] = fma(u.x, v.y, ri[q]);
            ir[q] = fma(u.y, v.x, ir[q]);
        }
    }
    RT srr = (RT)0, sii = (RT)0, sri = (RT)0, sir = (RT)0;
    if (k1) {
        srr = fold_c(rr);
        sii = fold_c(ii);
        sri = fold_c(ri);
        sir = fold_c(ir);
    }
    for (long k = k1; k < K; ++k) {
        const T u = px[k * xk], v = py[k * yk];
        srr = srr + u.x * v.x;
        sii = sii + u.y * v.y;
        sri = sri + u.x * v.y;
        sir = sir + u.y * v.x;
    }
    out[z] = conj ? (T)(srr + sii, sri - sir) : (T)(srr - sii, sri + sir);
#else
    RT s[NL];
    for (int q = 0; q < NL; ++q)
        s[q] = (RT)0;
    const long k1 = K - K % NL;
    for (long k0 = 0; k0 < k1; k0 += NL)
        for (int q = 0; q < NL; ++q)
            s[q] = fma(px[(k0 + q) * xk], py[(k0 + q) * yk], s[q]);
    RT acc = k1 ? fold_r(s) : (RT)0;
    for (long k = k1; k < K; ++k)
        acc = acc + py[k * yk] * px[k * xk];
    out[z] = acc;
#endif
}
