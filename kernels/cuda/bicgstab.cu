// bicgstab.cu: BiCGSTAB as one persistent cooperative kernel, every scalar and every
//              breakdown test on the device (tessera_array.sparse.linalg.bicgstab on a
//              CUDA device; the launcher is backends/_cupy/bicgstab.py, the contract
//              tessera_array/sparse/linalg/_fused_bicgstab.py).
//
// Computes   SciPy's bicgstab (right preconditioning by a stored M, optional), real or
//            complex T, on x and r (r = b - A x, given), as the generic loop of
//            tessera_array/sparse/linalg/_isolve.py (bicgstab) computes it. Entry E_INIT
//            (the solve's first launch): rt = r (the shadow residual, kept). Iteration i:
//              test     rnorm = ||r||: < atol CONVERGED (i iterations), not finite
//                       NONFINITE (i)
//              rho      = rt^H r: |rho| < rhotol RHO (-10, i)
//              i > 0    |omega| < omegatol OMEGA (-11, i); beta = (rho / rho_prev)
//                       (alpha / omega); p = (p - omega v) beta + r
//              i = 0    p = r
//              v        = A M p (phat = M p); rv = rt^H v: rv = 0 OMEGA (-11, i);
//                       alpha = rho / rv
//              r        -= alpha v (s); snorm = ||s|| < atol: x += alpha phat,
//                       CONVERGED (i + 1 iterations)
//              t        = A M s (shat = M s); omega = (t^H s) / (t^H t)
//              update   x += alpha phat; x += omega shat; r -= omega t
//            until the budget (MAXITER after maxiter iterations) or the launch's target.
//            The scalars (rho, alpha, omega, beta) are T values rounded as the generic
//            loop's 0-d device arrays; the tests compare magnitudes in double as the host
//            does (abs(complex(rho))).
// Layout     x, r, rt, p, v, t (and phat, shat with M): contiguous vectors of n elements
//            (the launcher's workspace). A dense operand: row i at val + i * ld, its n
//            columns contiguous; a CSR one: data val, column indices idx (I), row starts
//            ptr (P). part (T): 2 * SLOTS * gridDim.x partial sums, 16-byte aligned (the
//            workspace's start). st (double): the state words W_* (T scalars as two
//            doubles: real and imaginary parts), then this launch's norm history (a
//            test's ||r||, a converged snorm). bar: the grid barrier's counter, zero when
//            the solve starts.
// Launch     cooperative, every block resident (sized from the occupancy), 1-D blocks of
//            BLOCK threads; block k owns a contiguous run of rows (persistent.cuh's
//            RowGrid): products, updates and partial dot products of its rows. Five grid
//            barriers an iteration (seven with M): the opening sums, p whole before its
//            product, rt^H v, ||s||, the two sums of omega.
// Accumulates in T (float32 systems sum in float, as BLAS and SciPy do); norms are the
//            root in T's real type.
// Numerics   Every product and sum rounded on its own (types.cuh: no fused multiply-
//            add); complex quotients by Smith's algorithm. The dot products sum in this
//            kernel's order: iterates agree with SciPy's to rounding, not bit for bit.
// Reference  H. A. van der Vorst, "Bi-CGSTAB: A Fast and Smoothly Converging Variant of
//            Bi-CG for the Solution of Nonsymmetric Linear Systems", SIAM J. Sci. Stat.
//            Comput. 13(2), 1992; SciPy's scipy/sparse/linalg/_isolve/iterative.py.

#include "tessera/types.cuh"
#include "tessera/warp.cuh"
#include "tessera/persistent.cuh"

namespace tessera {
namespace bsk {

// Entry points, state words, status values: the launcher's (backends/_cupy/bicgstab.py).
constexpr int E_INIT = 0, E_RESUME = 1;
constexpr int W_STATUS = 0, W_ITER = 1, W_NHIST = 2, W_RHO_PREV = 3, W_ALPHA = 5,
              W_OMEGA = 7, WORDS = 9;  // (a T scalar takes two words: re, im)
constexpr int S_RUNNING = 1, S_MAXITER = 2, S_CONVERGED = 0, S_NONFINITE = -20,
              S_RHO = -10, S_OMEGA = -11;
constexpr int SLOTS = 4;  // sums a reduction may take (2; 4: a 16-byte load's, RowGrid)

__device__ __forceinline__ double mag(float v) { return fabs((double)v); }
__device__ __forceinline__ double mag(double v) { return fabs(v); }
__device__ __forceinline__ double mag(cfloat v) { return hypot((double)v.re, (double)v.im); }
__device__ __forceinline__ double mag(cdouble v) { return hypot(v.re, v.im); }
__device__ __forceinline__ bool is_zero(float v) { return v == 0.0f; }
__device__ __forceinline__ bool is_zero(double v) { return v == 0.0; }
__device__ __forceinline__ bool is_zero(cfloat v) { return v.re == 0.0f && v.im == 0.0f; }
__device__ __forceinline__ bool is_zero(cdouble v) { return v.re == 0.0 && v.im == 0.0; }
__device__ __forceinline__ void put(double *w, float v) { w[0] = v, w[1] = 0.0; }
__device__ __forceinline__ void put(double *w, double v) { w[0] = v, w[1] = 0.0; }
__device__ __forceinline__ void put(double *w, cfloat v) { w[0] = v.re, w[1] = v.im; }
__device__ __forceinline__ void put(double *w, cdouble v) { w[0] = v.re, w[1] = v.im; }
template <typename T> __device__ __forceinline__ T get(const double *w) { return T(w[0]); }
template <> __device__ __forceinline__ cfloat get<cfloat>(const double *w)
{
    return cfloat{(float)w[0], (float)w[1]};
}
template <> __device__ __forceinline__ cdouble get<cdouble>(const double *w)
{
    return cdouble{w[0], w[1]};
}

}  // namespace bsk
}  // namespace tessera

template <typename T, typename I, typename P, int WARP, int BLOCK>
__global__ void __launch_bounds__(BLOCK)
tessera_bicgstab_run(const long long n, const int entry, const long long target,
                     const long long maxiter, const double atol, const double rhotol,
                     const double omegatol,
                     const int a_kind, const int a_lanes, const T *__restrict__ a_val,
                     const I *__restrict__ a_idx, const P *__restrict__ a_ptr,
                     const long long a_ld,
                     const int m_kind, const int m_lanes, const T *__restrict__ m_val,
                     const I *__restrict__ m_idx, const P *__restrict__ m_ptr,
                     const long long m_ld,
                     T *x, T *r, T *rt, T *p, T *v, T *t, T *phat, T *shat, T *part,
                     double *st, unsigned long long *bar)
{
    using namespace tessera;
    using namespace tessera::bsk;
    typedef typename real_of<T>::type R;
    __shared__ T sums[SLOTS];
    if (entry != E_INIT && st[W_STATUS] != double(S_RUNNING)) return;  // finished
    const long long chunk = (n + gridDim.x - 1) / gridDim.x;
    const long long row0 = min(n, (long long)blockIdx.x * chunk), row1 = min(n, row0 + chunk);
    RowGrid<T, WARP, BLOCK> g{bar, part, sums, n, row0, row1, (int)gridDim.x, SLOTS, 0};
    const StoredOp<T, I, P> A{a_kind, a_lanes, a_val, a_idx, a_ptr, a_ld};
    const StoredOp<T, I, P> M{m_kind, m_lanes, m_val, m_idx, m_ptr, m_ld};
    const bool lead = blockIdx.x == 0 && threadIdx.x == 0;
    const bool pre = m_kind != OP_NONE;
    T *ph = pre ? phat : p, *sh = pre ? shat : r;  // M p and M s (p and s without M)
    long long iter = 0;
    T rho_prev = zero<T>(), alpha = zero<T>(), omega = zero<T>();
    if (entry != E_INIT) {
        iter = (long long)st[W_ITER];
        rho_prev = get<T>(st + W_RHO_PREV);
        alpha = get<T>(st + W_ALPHA);
        omega = get<T>(st + W_OMEGA);
    } else {
        for (long long i = row0 + threadIdx.x; i < row1; i += BLOCK) rt[i] = r[i];
        __syncthreads();
    }
    g.sync();  // every block has read st: block 0 may write it from here on
    double *hist = st + WORDS;
    int nhist = 0, status = S_RUNNING;
    while (iter < target) {
        // The opening test and rho = rt^H r, in one reduction.
        g.partials(2, [&](int k, long long i) {
            return k == 0 ? from_real<T>(abs2(r[i])) : conj_mul(rt[i], r[i]);
        });
        g.reduce(2);
        const double rnorm = (double)root(real_part(sums[0]));
        const T rho = sums[1];
        if (lead) hist[nhist] = rnorm;
        ++nhist;
        if (rnorm < atol) {
            status = S_CONVERGED;
            break;
        }
        if (!isfinite(rnorm)) {
            status = S_NONFINITE;
            break;
        }
        if (mag(rho) < rhotol) {
            status = S_RHO;
            break;
        }
        if (iter > 0) {
            if (mag(omega) < omegatol) {
                status = S_OMEGA;
                break;
            }
            const T beta = mul(div(rho, rho_prev), div(alpha, omega));
            for (long long i = row0 + threadIdx.x; i < row1; i += BLOCK)
                p[i] = add(mul(sub(p[i], mul(omega, v[i])), beta), r[i]);
        } else {
            for (long long i = row0 + threadIdx.x; i < row1; i += BLOCK) p[i] = r[i];
        }
        g.sync();  // p whole before its product
        if (pre) {
            g.product(M, p, phat);
            g.sync();
        }
        g.product(A, ph, v);
        g.partials(1, [&](int, long long i) { return conj_mul(rt[i], v[i]); });
        g.reduce(1);
        const T rv = sums[0];
        if (is_zero(rv)) {
            status = S_OMEGA;
            break;
        }
        alpha = div(rho, rv);
        for (long long i = row0 + threadIdx.x; i < row1; i += BLOCK)
            r[i] = sub(r[i], mul(alpha, v[i]));
        __syncthreads();
        const double snorm = g.norm(r);  // (s = r; whole after this barrier)
        if (snorm < atol) {
            for (long long i = row0 + threadIdx.x; i < row1; i += BLOCK)
                x[i] = add(x[i], mul(alpha, ph[i]));
            if (lead) hist[nhist] = snorm;
            ++nhist;
            ++iter;
            status = S_CONVERGED;
            break;
        }
        if (pre) {
            g.product(M, r, shat);
            g.sync();
        }
        g.product(A, sh, t);
        g.partials(2, [&](int k, long long i) {
            return k == 0 ? conj_mul(t[i], r[i]) : conj_mul(t[i], t[i]);
        });
        g.reduce(2);
        omega = div(sums[0], sums[1]);
        for (long long i = row0 + threadIdx.x; i < row1; i += BLOCK) {
            const T xi = add(x[i], mul(alpha, ph[i]));
            x[i] = add(xi, mul(omega, sh[i]));
            r[i] = sub(r[i], mul(omega, t[i]));
        }
        __syncthreads();
        rho_prev = rho;
        ++iter;
    }
    if (status == S_RUNNING && iter == maxiter) status = S_MAXITER;
    if (lead) {
        st[W_STATUS] = double(status);
        st[W_ITER] = double(iter);
        st[W_NHIST] = double(nhist);
        put(st + W_RHO_PREV, rho_prev);
        put(st + W_ALPHA, alpha);
        put(st + W_OMEGA, omega);
    }
}
