// fft.cl: batched complex FFTs (Stockham radix-2, Bluestein) and the copies around them.
//
// Computes   y[b, k] = sum_j x[b, j] exp(dir * 2 pi i j k / N) (unnormalized; dir = -1
//            forward, +1 inverse) over the rows of a contiguous (batch, N) complex block;
//            backends/opencl/fft.py composes n-D, real and Hermitian transforms from it.
// Layout     T is float2/double2 (re, im), RT its real type; rows contiguous, row b at
//            b*N. tessera_fft_gather copies any strided view (complex, or real with
//            -DIN_REAL) into a contiguous block, zero-filling past the input's extent.
// Launch     tessera_fft_radix2: global (N/2, batch), one butterfly per work-item, one
//            launch per pass (log2 N passes, ping-pong buffers: OpenCL has no grid-wide
//            barrier). Bluestein (any N): chirp-multiply, a radix-2 FFT of length
//            M = 2^ceil(log2(2N - 1)), pointwise product with the FFT of the chirp
//            filter (made on the host in double), inverse FFT, chirp-multiply.
//            Elementwise kernels: global >= elements.
// Accumulates in T; twiddles and chirps are computed on the host in double and
//            rounded once to T.
// Numerics   radix-2 error grows as O(eps log N); Bluestein as O(eps log M) with a
//            larger constant (the chirp products), still within a few ulp times log N.
// Reference  Stockham autosort radix-2 as in Govindaraju et al., "High Performance
//            Discrete Fourier Transforms on Graphics Processors" (SC 2008), FftIteration
//            with R = 2; Bluestein, "A linear filtering approach to the computation of
//            the discrete Fourier transform" (1970).

#include "tessera_types.h"

// One Stockham radix-2 pass with span Ns (1, 2, ..., N/2): tw[t] = exp(-2 pi i t / N).
__kernel void tessera_fft_radix2(const int N, const int Ns, const int dir,
                                 __global const T *tw, __global const T *x, __global T *y)
{
    const int j = get_global_id(0);
    const long base = (long)get_global_id(1) * N;
    if (j >= N / 2) return;
    const int k = j & (Ns - 1);
    const T a0 = x[base + j];
    T w = tw[(long)k * (N / (2 * Ns))];
    if (dir > 0) w.y = -w.y;
    const T a1 = MUL(x[base + j + N / 2], w);
    const int out = (j - k) * 2 + k;
    y[base + out] = a0 + a1;
    y[base + out + Ns] = a0 - a1;
}

// out[i] for the contiguous block of shape meta[0:nd] (C order): the input element at
// in_off + sum_d c_d * meta[nd + d] when every c_d < meta[2 nd + d], else 0; conjugated
// when conj_in, times scale.
__kernel void tessera_fft_gather(const long total, const int nd, __global const long *meta,
#ifdef IN_REAL
                                 __global const RT *x,
#else
                                 __global const T *x,
#endif
                                 const long in_off, const RT scale, const int conj_in,
                                 __global T *out)
{
    const long i = get_global_id(0);
    if (i >= total) return;
    long rem = i, off = in_off;
    int inside = 1;
    for (int d = nd - 1; d >= 0; --d) {
        const long c = rem % meta[d];
        rem /= meta[d];
        inside &= c < meta[2 * nd + d];
        off += c * meta[nd + d];
    }
#ifdef IN_REAL
    const T v = inside ? (T)(x[off], 0) : ZERO;
#else
    T v = inside ? x[off] : ZERO;
    if (conj_in) v.y = -v.y;
#endif
    out[i] = v * scale;
}

// Bluestein, before: a[b, k] = x[b, k] * chirp[k] for k < n, 0 for n <= k < m.
__kernel void tessera_fft_chirp_in(const int n, const int m, __global const T *x,
                                   __global const T *chirp, const int dir, __global T *a)
{
    const int k = get_global_id(0);
    const long b = get_global_id(1);
    if (k >= m) return;
    T c = k < n ? chirp[k] : ZERO;
    if (dir > 0) c.y = -c.y;
    a[b * m + k] = k < n ? MUL(x[b * n + k], c) : ZERO;
}

// Bluestein, between: a[b, k] *= filt[k] (the filter's FFT, conjugated for dir > 0).
__kernel void tessera_fft_pointwise(const int m, __global T *a, __global const T *filt,
                                    const int dir)
{
    const int k = get_global_id(0);
    const long b = get_global_id(1);
    if (k >= m) return;
    T f = filt[k];
    if (dir > 0) f.y = -f.y;
    a[b * m + k] = MUL(a[b * m + k], f);
}

// Bluestein, after: y[b, k] = a[b, k] * chirp[k] / m for k < n.
__kernel void tessera_fft_chirp_out(const int n, const int m, __global const T *a,
                                    __global const T *chirp, const int dir, __global T *y)
{
    const int k = get_global_id(0);
    const long b = get_global_id(1);
    if (k >= n) return;
    T c = chirp[k];
    if (dir > 0) c.y = -c.y;
    y[b * n + k] = MUL(a[b * m + k], c) / (RT)m;
}

// The Hermitian extension of rows of h = m_in points to n points:
// full[b, k] = h[b, k] for k <= n/2, conj(h[b, n - k]) above (h read as 0 past m_in;
// each h conjugated first when conj_in).
__kernel void tessera_fft_hermitian(const int n, const int m_in, __global const T *h,
                                    const int conj_in, __global T *full)
{
    const int k = get_global_id(0);
    const long b = get_global_id(1);
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
