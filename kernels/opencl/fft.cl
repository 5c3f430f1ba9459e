// fft.cl: batched complex FFTs (Stockham radix-8/4/2, Bluestein) and the copies around them.
//
// Computes   y[b, k] = sum_j x[b, j] exp(dir * 2 pi i j k / N) (unnormalized; dir = -1
//            forward, +1 inverse) over the rows of a contiguous (batch, N) complex block;
//            backends/opencl/fft.py composes n-D, real and Hermitian transforms from it.
// Layout     T is float2/double2 (re, im), RT its real type; rows contiguous, row b at
//            b*N. tessera_fft_gather copies any strided view (complex, or real with
//            -DIN_REAL) into a contiguous block, zero-filling past the input's extent.
// Passes     N = 2^k runs ceil(k/3) Stockham passes: radix 8 while more than 8 points
//            remain, then one pass of the remaining radix (8, 4 or 2); pass p has span Ns
//            (1, 8, 64, ...) and reads the twiddles tw[off_p + (R-1) k + r-1] =
//            exp(-2 pi i r k / (Ns R)), k < Ns, 1 <= r < R (conjugated for dir > 0),
//            off_p = sum of (R-1) Ns over the earlier passes (fft.py builds the table).
// Launch     tessera_fft_local (N <= 8 * work-group size, the row fits in local memory):
//            one launch for all passes; L = max(1, N/8) work-items a row, P rows a
//            work-group: local size L P, global L P ceil(batch/P); each work-item holds 8
//            values per pass (one radix-8, two radix-4 or four radix-2 butterflies); the
//            first pass reads global memory, the last writes it, the others run in local
//            memory (P N elements) between barriers; y has ceil(batch/P) P rows.
//            tessera_fft_radix{2,4,8}: one global pass, global (N/R, batch), one butterfly
//            per work-item, one launch per pass (ping-pong buffers: OpenCL has no
//            grid-wide barrier). Bluestein (any N): chirp-multiply, an FFT of length
//            M = 2^ceil(log2(2N - 1)), pointwise product with the FFT of the chirp filter
//            (made on the host in double), inverse FFT, chirp-multiply.
//            Elementwise kernels: global >= elements.
// Accumulates in T; twiddles and chirps are computed on the host in double and rounded
//            once to T; the radix-8 butterfly's constant 1/sqrt(2) is rounded once.
// Numerics   error grows as O(eps log N); Bluestein as O(eps log M) with a larger
//            constant (the chirp products), still within a few ulp times log N.
// Reference  Stockham autosort formulation as in Govindaraju et al., "High Performance
//            Discrete Fourier Transforms on Graphics Processors" (SC 2008), FftIteration
//            with R = 2, 4, 8 (j, Ns, R as there); Bluestein, "A linear filtering approach
//            to the computation of the discrete Fourier transform" (1970).

#include "tessera_types.h"

#ifdef TESSERA_FP64
#define FFT_SQRT1_2 0.70710678118654752440
#else
#define FFT_SQRT1_2 0.70710678118654752440f
#endif

// a * (s i), s = +-1 (exact)
inline T fft_rot(const T a, const RT s) { return (T)(-s * a.y, s * a.x); }

// The butterflies work on named scalars, not private arrays: PoCL 3.0 ran the same
// radix-8 pass 3-4x slower with its values in an array (measured, 64 x 4096 complex64).
// Each DFT is in place with exponent sign s: X[q] = sum_r v[r] exp(s 2 pi i r q / R).
#define FFT_TW(v, t, i)                                                                   \
    {                                                                                     \
        T w_ = (t)[i];                                                                    \
        w_.y *= -s;                                                                       \
        v = MUL(v, w_);                                                                   \
    }
// (a, b) -> (X0, X1)
#define FFT_DFT2(a, b)                                                                    \
    {                                                                                     \
        const T t_ = a;                                                                   \
        a = t_ + b;                                                                       \
        b = t_ - b;                                                                       \
    }
// (a, b, c, d) -> (X0, X1, X2, X3)
#define FFT_DFT4(a, b, c, d)                                                              \
    {                                                                                     \
        const T p_ = a + c, q_ = a - c, r_ = b + d, u_ = fft_rot(b - d, s);               \
        a = p_ + r_;                                                                      \
        b = q_ + u_;                                                                      \
        c = p_ - r_;                                                                      \
        d = q_ - u_;                                                                      \
    }
// (v0, ..., v7) -> X0..X7 left in v0, v2, v4, v6, v1, v3, v5, v7: two DFT4s (evens,
// odds), the odds times exp(s 2 pi i q / 8) = 1, (1 + s i)/sqrt2, s i, (-1 + s i)/sqrt2,
// then four DFT2s.
#define FFT_DFT8(v0, v1, v2, v3, v4, v5, v6, v7)                                          \
    {                                                                                     \
        FFT_DFT4(v0, v2, v4, v6)                                                          \
        FFT_DFT4(v1, v3, v5, v7)                                                          \
        const RT h_ = FFT_SQRT1_2;                                                        \
        v3 = (T)((v3.x - s * v3.y) * h_, (v3.y + s * v3.x) * h_);                         \
        v5 = fft_rot(v5, s);                                                              \
        v7 = (T)((-v7.x - s * v7.y) * h_, (s * v7.x - v7.y) * h_);                        \
        FFT_DFT2(v0, v1)                                                                  \
        FFT_DFT2(v2, v3)                                                                  \
        FFT_DFT2(v4, v5)                                                                  \
        FFT_DFT2(v6, v7)                                                                  \
    }

// Item j of a radix-R Stockham pass of span Ns: read SRC[j + r N/R], twiddle by
// t[(R-1) k + r-1] (k = j mod Ns, none when Ns = 1), butterfly; STORE(i, v) writes the
// R results at (j - k) R + k + r Ns after SYNC.
#define FFT_ITEM8(j, SRC, t, SYNC, STORE)                                                 \
    {                                                                                     \
        const int k_ = (j) & (Ns - 1), st_ = N / 8;                                       \
        T v0 = SRC[(j)], v1 = SRC[(j) + st_], v2 = SRC[(j) + 2 * st_];                    \
        T v3 = SRC[(j) + 3 * st_], v4 = SRC[(j) + 4 * st_], v5 = SRC[(j) + 5 * st_];      \
        T v6 = SRC[(j) + 6 * st_], v7 = SRC[(j) + 7 * st_];                               \
        if (Ns > 1) {                                                                     \
            __global const T *tk_ = (t) + 7 * k_;                                         \
            FFT_TW(v1, tk_, 0) FFT_TW(v2, tk_, 1) FFT_TW(v3, tk_, 2) FFT_TW(v4, tk_, 3)   \
            FFT_TW(v5, tk_, 4) FFT_TW(v6, tk_, 5) FFT_TW(v7, tk_, 6)                      \
        }                                                                                 \
        FFT_DFT8(v0, v1, v2, v3, v4, v5, v6, v7)                                          \
        SYNC;                                                                             \
        const int o_ = ((j) - k_) * 8 + k_;                                               \
        STORE(o_, v0); STORE(o_ + Ns, v2); STORE(o_ + 2 * Ns, v4);                        \
        STORE(o_ + 3 * Ns, v6); STORE(o_ + 4 * Ns, v1); STORE(o_ + 5 * Ns, v3);           \
        STORE(o_ + 6 * Ns, v5); STORE(o_ + 7 * Ns, v7);                                   \
    }

#define FFT_GSTORE(i, v) (y[base + (i)] = (v))
#define FFT_NOSYNC ((void)0)

// One global Stockham pass: item j < N/R of row row0 + get_global_id(1), x -> y (launches
// of at most 65535 rows: CUDA's grid-y limit, see backends/opencl/fft.py).
__kernel void tessera_fft_radix8(const long row0, const int N, const int Ns, const int dir,
                                 __global const T *tw, const int tw_off,
                                 __global const T *x, __global T *y)
{
    const int j = get_global_id(0);
    if (j >= N / 8) return;
    const long base = (row0 + (long)get_global_id(1)) * N;
    const RT s = (RT)dir;
    __global const T *xr = x + base;
    FFT_ITEM8(j, xr, tw + tw_off, FFT_NOSYNC, FFT_GSTORE)
}

__kernel void tessera_fft_radix4(const long row0, const int N, const int Ns, const int dir,
                                 __global const T *tw, const int tw_off,
                                 __global const T *x, __global T *y)
{
    const int j = get_global_id(0);
    if (j >= N / 4) return;
    const long base = (row0 + (long)get_global_id(1)) * N;
    const RT s = (RT)dir;
    const int k = j & (Ns - 1), st = N / 4;
    T v0 = x[base + j], v1 = x[base + j + st], v2 = x[base + j + 2 * st];
    T v3 = x[base + j + 3 * st];
    if (Ns > 1) {
        __global const T *tk = tw + tw_off + 3 * k;
        FFT_TW(v1, tk, 0) FFT_TW(v2, tk, 1) FFT_TW(v3, tk, 2)
    }
    FFT_DFT4(v0, v1, v2, v3)
    const long o = base + (long)(j - k) * 4 + k;
    y[o] = v0;
    y[o + Ns] = v1;
    y[o + 2 * Ns] = v2;
    y[o + 3 * Ns] = v3;
}

__kernel void tessera_fft_radix2(const long row0, const int N, const int Ns, const int dir,
                                 __global const T *tw, const int tw_off,
                                 __global const T *x, __global T *y)
{
    const int j = get_global_id(0);
    if (j >= N / 2) return;
    const long base = (row0 + (long)get_global_id(1)) * N;
    const RT s = (RT)dir;
    const int k = j & (Ns - 1);
    T v0 = x[base + j], v1 = x[base + j + N / 2];
    if (Ns > 1) FFT_TW(v1, tw + tw_off + k, 0)
    FFT_DFT2(v0, v1)
    const long o = base + (long)(j - k) * 2 + k;
    y[o] = v0;
    y[o + Ns] = v1;
}

// The last pass of tessera_fft_local when 4 or 2 points remain: each work-item runs 2
// radix-4 or 4 radix-2 items (j = li + b L), reading row_l and writing STORE.
#define FFT_LOCAL_LAST4(STORE)                                                            \
    {                                                                                     \
        const int st_ = N / 4, ja = li, jb = li + L;                                      \
        const int ka = ja & (Ns - 1), kb = jb & (Ns - 1);                                 \
        T a0 = row_l[ja], a1 = row_l[ja + st_], a2 = row_l[ja + 2 * st_];                 \
        T a3 = row_l[ja + 3 * st_], b0 = row_l[jb], b1 = row_l[jb + st_];                 \
        T b2 = row_l[jb + 2 * st_], b3 = row_l[jb + 3 * st_];                             \
        __global const T *ta = tw + off + 3 * ka, *tb = tw + off + 3 * kb;                \
        FFT_TW(a1, ta, 0) FFT_TW(a2, ta, 1) FFT_TW(a3, ta, 2)                             \
        FFT_TW(b1, tb, 0) FFT_TW(b2, tb, 1) FFT_TW(b3, tb, 2)                             \
        FFT_DFT4(a0, a1, a2, a3)                                                          \
        FFT_DFT4(b0, b1, b2, b3)                                                          \
        const int oa = (ja - ka) * 4 + ka, ob = (jb - kb) * 4 + kb;                       \
        STORE(oa, a0); STORE(oa + Ns, a1); STORE(oa + 2 * Ns, a2); STORE(oa + 3 * Ns, a3); \
        STORE(ob, b0); STORE(ob + Ns, b1); STORE(ob + 2 * Ns, b2); STORE(ob + 3 * Ns, b3); \
    }
#define FFT_LOCAL_LAST2_ONE(j, STORE)                                                     \
    {                                                                                     \
        const int k_ = (j) & (Ns - 1);                                                    \
        T u0 = row_l[(j)], u1 = row_l[(j) + N / 2];                                       \
        FFT_TW(u1, tw + off + k_, 0)                                                      \
        FFT_DFT2(u0, u1)                                                                  \
        const int o_ = ((j) - k_) * 2 + k_;                                               \
        STORE(o_, u0);                                                                    \
        STORE(o_ + Ns, u1);                                                               \
    }
#define FFT_TO_LOCAL(i, val) (row_l[i] = (val))
#define FFT_TO_GLOBAL(i, val) (row_y[i] = (val))
#define FFT_SYNC barrier(CLK_LOCAL_MEM_FENCE)

// All passes of P rows of N = 2^k points (2 <= N <= 8 * local size) in one launch.
__kernel void tessera_fft_local(const int N, const int dir, __global const T *tw,
                                __global const T *x, __global T *y, const int batch,
                                __local T *buf)
{
    // The padding rows of the last work-group (row >= batch) read row batch - 1 and write
    // y's padding rows (y has ceil(batch/P) P rows): PoCL 3.0 ignored an `if (row <
    // batch)` around the stores after the barriers and wrote past the output.
    const int L = N < 8 ? 1 : N / 8, li = get_local_id(0) % L;
    const int pi = get_local_id(0) / L;
    const long row = (long)get_group_id(0) * (get_local_size(0) / L) + pi;
    __global const T *row_x = x + min(row, (long)batch - 1) * N;
    __global T *row_y = y + row * N;
    __local T *row_l = buf + pi * N;
    const RT s = (RT)dir;
    int Ns = 1, off = 0;
    if (N < 8) {  // one pass, global to global (one work-item)
        T v0 = row_x[0], v1 = row_x[N / 2];
        if (N == 2) {
            FFT_DFT2(v0, v1)
            FFT_TO_GLOBAL(0, v0);
            FFT_TO_GLOBAL(1, v1);
        } else {
            T v2 = row_x[1], v3 = row_x[3];
            v1 = row_x[2];
            v0 = row_x[0];
            FFT_DFT4(v0, v2, v1, v3)
            FFT_TO_GLOBAL(0, v0);
            FFT_TO_GLOBAL(1, v2);
            FFT_TO_GLOBAL(2, v1);
            FFT_TO_GLOBAL(3, v3);
        }
        return;
    }
    if (N == 8) {
        FFT_ITEM8(li, row_x, tw, FFT_NOSYNC, FFT_TO_GLOBAL)
        return;
    }
    FFT_ITEM8(li, row_x, tw, FFT_NOSYNC, FFT_TO_LOCAL)
    off += 7;
    Ns = 8;
    barrier(CLK_LOCAL_MEM_FENCE);
    while (Ns * 8 < N) {
        FFT_ITEM8(li, row_l, tw + off, FFT_SYNC, FFT_TO_LOCAL)
        off += 7 * Ns;
        Ns *= 8;
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    const int rem = N / Ns;
    if (rem == 8) {
        FFT_ITEM8(li, row_l, tw + off, FFT_NOSYNC, FFT_TO_GLOBAL)
    } else if (rem == 4) {
        FFT_LOCAL_LAST4(FFT_TO_GLOBAL)
    } else {
        FFT_LOCAL_LAST2_ONE(li, FFT_TO_GLOBAL)
        FFT_LOCAL_LAST2_ONE(li + L, FFT_TO_GLOBAL)
        FFT_LOCAL_LAST2_ONE(li + 2 * L, FFT_TO_GLOBAL)
        FFT_LOCAL_LAST2_ONE(li + 3 * L, FFT_TO_GLOBAL)
    }
}

// out[i] for the contiguous block of shape meta[0:nd] (C order): the input element at
// in_off + sum_d c_d * meta[nd + d] when every c_d < meta[2 nd + d], else 0; conjugated
// when conj_in, times scale. Global (last extent rounded up, rows): work-item (c, row0 +
// r) writes element c of output row row0 + r; the row's coordinates depend on
// get_global_id(1) only, so a CPU driver's work-item loop over dimension 0 computes
// them once a row (PoCL 3.0, shared 2-core EPYC: 1.3-1.7x faster than one flat index
// divided down per element, 64 x 4096 and 16 x 65536). rows <= 65535 a launch (fft.py
// splits).
__kernel void tessera_fft_gather(const long row0, const int nd, __global const long *meta,
#ifdef IN_REAL
                                 __global const RT *x,
#else
                                 __global const T *x,
#endif
                                 const long in_off, const RT scale, const int conj_in,
                                 __global T *out)
{
    const long row = row0 + get_global_id(1);
    long rem = row, off = in_off;
    int inside = 1;
    for (int d = nd - 2; d >= 0; --d) {
        const long c = rem % meta[d];
        rem /= meta[d];
        inside &= c < meta[2 * nd + d];
        off += c * meta[nd + d];
    }
    const long last = meta[nd - 1];
    const long c = get_global_id(0);
    if (c >= last) return;
    inside &= c < meta[3 * nd - 1];
    off += c * meta[2 * nd - 1];
#ifdef IN_REAL
    const T v = inside ? (T)(x[off], 0) : ZERO;
#else
    T v = inside ? x[off] : ZERO;
    if (conj_in) v.y = -v.y;
#endif
    out[row * last + c] = v * scale;
}

// Bluestein, before: a[b, k] = x[b, k] * chirp[k] for k < n, 0 for n <= k < m.
__kernel void tessera_fft_chirp_in(const long row0, const int n, const int m, __global const T *x,
                                   __global const T *chirp, const int dir, __global T *a)
{
    const int k = get_global_id(0);
    const long b = row0 + get_global_id(1);
    if (k >= m) return;
    T c = k < n ? chirp[k] : ZERO;
    if (dir > 0) c.y = -c.y;
    a[b * m + k] = k < n ? MUL(x[b * n + k], c) : ZERO;
}

// Bluestein, between: a[b, k] *= filt[k] (the filter's FFT, conjugated for dir > 0).
__kernel void tessera_fft_pointwise(const long row0, const int m, __global T *a, __global const T *filt,
                                    const int dir)
{
    const int k = get_global_id(0);
    const long b = row0 + get_global_id(1);
    if (k >= m) return;
    T f = filt[k];
    if (dir > 0) f.y = -f.y;
    a[b * m + k] = MUL(a[b * m + k], f);
}

// Bluestein, after: y[b, k] = a[b, k] * chirp[k] / m for k < n.
__kernel void tessera_fft_chirp_out(const long row0, const int n, const int m, __global const T *a,
                                    __global const T *chirp, const int dir, __global T *y)
{
    const int k = get_global_id(0);
    const long b = row0 + get_global_id(1);
    if (k >= n) return;
    T c = chirp[k];
    if (dir > 0) c.y = -c.y;
    y[b * n + k] = MUL(a[b * m + k], c) / (RT)m;
}

// The Hermitian extension of rows of h = m_in points to n points:
// full[b, k] = h[b, k] for k <= n/2, conj(h[b, n - k]) above (h read as 0 past m_in;
// each h conjugated first when conj_in).
__kernel void tessera_fft_hermitian(const long row0, const int n, const int m_in, __global const T *h,
                                    const int conj_in, __global T *full)
{
    const int k = get_global_id(0);
    const long b = row0 + get_global_id(1);
    if (k >= n) return;
    const int src = k <= n / 2 ? k : n - k;
    T v = src < m_in ? h[b * m_in + src] : ZERO;
    if (conj_in) v.y = -v.y;
    if (k > n / 2) v.y = -v.y;
    full[b * n + k] = v;
}

// out[i] = re(x[i]) * scale
__kernel void tessera_fft_real(const long total, __global const T *x, const RT scale,
                               __global RT *out)
{
    const long i = get_global_id(0);
    if (i >= total) return;
    out[i] = x[i].x * scale;
}
