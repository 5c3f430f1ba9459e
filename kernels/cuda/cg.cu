// cg.cu: the conjugate gradient method as one persistent cooperative kernel, stopping
//        test included (tessera_array.sparse.linalg.cg on a CUDA device; the launcher is
//        backends/_cupy/cg.py, the contract tessera_array/sparse/linalg/_fused.py).
//
// Computes   SciPy's cg iterations (real or complex T) on x, r (= b - A x) and p, with
//            the products A p and z = M r (a preconditioner, optional) computed inside the
//            kernel from a stored matrix (dense or CSR), or by the host between launches
//            (a callable operator, kind OP_HOST: the kernel stops before the product and
//            a later launch resumes after it). Iteration i (done = i, over the solve):
//              test      on rr = r^H r (real): the last step's real(p^H q) not > 0 ->
//                        INDEFINITE (rr finite, real(p^H q) <= 0) or NONFINITE; rr < thr
//                        -> CONVERGED; rr not finite -> NONFINITE (thr: the host's
//                        stop_threshold, so that this is the host's float64
//                        sqrt(rr) < atol). A stop freezes the solve.
//              z = M r   and rho = r^H z (rho = rr without M)
//              p         = s (i = 0) or beta * p + s, beta = rho / rho_prev, s = z or r
//              q = A p   and pq = p^H q
//              update    alpha = rho / pq; x += alpha p where real(pq) > 0; r -= alpha q;
//                        the new rr
//            until done = target; then, when the launch is the solve's last (final), the
//            final check of the last p^H q: MAXITER, or INDEFINITE / NONFINITE.
//            With b (cg(A, b) alone, real T; null otherwise) the first launch also starts
//            the system itself: x = 0, r = b, ||b|| summed in the vecdot kernels' order
//            and rooted (float32: a subnormal b . b flushed to zero, as CuPy's root that
//            the general path takes), then the threshold from max(atol, rtol ||b||) (the
//            host's stop_threshold, step for step), kept in st for later launches; a
//            zero ||b|| is CONVERGED at test 0, a non-finite one BAD_B (the host's
//            general path answers it). Without M, that launch also takes the first
//            step's q = A p (p = b, whole before the launch) and p^H q before test 0, so
//            they share r . r's grid sync, and writes p = b where its thread's update
//            reads it: two grid syncs fewer (a test 0 that stops leaves q unused).
//            One launch and one read for a short solve.
//            With host_st (mapped pinned host memory; null otherwise) the launch's last
//            act copies st's words and the run's history there and then writes seq to
//            *host_flag (publish): the host polls that word instead of copying and
//            synchronizing.
// Layout     x, r, p, q, z: contiguous vectors of n elements (q and z the launcher's work
//            vectors, or the host's products). A dense operand: row i at val + i * ld,
//            its n columns contiguous. A CSR operand: data val, column indices idx (I),
//            row starts ptr (P). With b, part holds dparts more partial sums (b . b
//            in the vecdot kernels' blocks) after its 3 * gridDim.x. st (T): the state words W_* below, then the run's
//            history (rr of test j at st[HIST + j]); the first launch (entry E_INIT)
//            writes the words without reading them. part (T): 3 * gridDim.x partial sums.
//            bar: the grid barrier's counter (grid_sync), zero when the solve starts.
// Launch     cooperative (every block resident: the launcher sizes the grid from the
//            occupancy), 1-D blocks of BLOCK threads. Elementwise phases are grid-stride
//            loops over threads; a product gives each row `lanes` consecutive lanes of a
//            warp (lanes 1: a row per thread, the scalar variant; lanes WARP: a row per
//            warp, the warp variant), WARP / lanes rows per warp, the warps striding
//            over the rows (a row per thread on a CSR matrix: four rows in flight, each
//            summed in storage order; elementwise updates: four elements in flight).
//            A grid-wide sync follows each phase whose result other blocks
//            read: 3 per iteration (4 with a stored M), and one after the launch reads st
//            (so no block writes st while another still reads it).
// Reductions Each block sums its threads' terms (block_sum, a fixed tree) into part[];
//            after the grid sync every block adds all the blocks' partial sums itself, in
//            the same order, so every thread holds the same rr, rho and pq and takes the
//            same decisions (the whole grid leaves a loop together, never stranding a
//            block at a sync). Each sum has a region of part[] (SLOT_*), written again
//            only past a grid sync that follows every block's read of it (so E_INIT's
//            r . r beside the first p^H q takes SLOT_RHO's). The grid size depends on n
//            and the device only, so the results repeat bit for bit, and do not depend
//            on how many iterations one launch runs.
// Accumulates in T (float32 systems sum in float, as BLAS's sdot and SciPy do; r^H r
//            as a complex sum whose imaginary part stays 0). The state words are T too
//            (real values in the real part).
// Numerics   Every product and sum is rounded on its own (types.cuh; no fused multiply-
//            add; complex products as types.cuh forms them, complex quotients by Smith's
//            algorithm): p = beta * p + s and x + alpha * p round as the two-step
//            expressions of SciPy's cg. The dot products and the products' rows sum in this kernel's own
//            order: iterates agree with SciPy's to rounding, not bit for bit.
// Memory     x, r, p, q and z are read and written within one launch, so they are never
//            read through the non-coherent (read-only) path: no __restrict__ on them.
// Reference  M. R. Hestenes and E. Stiefel, "Methods of Conjugate Gradients for Solving
//            Linear Systems", J. Res. NBS 49(6), 1952; the persistent-kernel form: CUDA
//            C++ Programming Guide, "Cooperative Groups" (cooperative launch, grid
//            synchronization; the barrier here is the kernel's own, so that the same
//            source compiles under NVRTC and hipcc without the cooperative-groups headers).

#include "tessera/types.cuh"
#include "tessera/warp.cuh"
#include "tessera/persistent.cuh"

namespace tessera {
namespace cgk {

// Entry points and the words of st: the launcher's values (backends/_cupy/cg.py keeps
// the same numbers; the operator kinds OP_* are persistent.cuh's).
constexpr int E_INIT = 0, E_START = 1, E_ZDOT = 2, E_QDOT = 3;
constexpr int W_STATUS = 0, W_STOP_AT = 1, W_CAUSE = 2, W_OK = 3, W_RR = 4, W_RHO = 5,
              W_RHO_PREV = 6, W_PQ = 7, W_BNRM = 8, W_THR = 9, HIST = 10;
constexpr int SLOT_RR = 0, SLOT_RHO = 1, SLOT_PQ = 2;  // the partial sums' regions

// Status values (cg's info codes; RUNNING 1, MAXITER 2), kept as reals.
constexpr int S_RUNNING = 1, S_MAXITER = 2, S_CONVERGED = 0, S_NONFINITE = -20,
              S_INDEFINITE = -30;
constexpr int S_BAD_B = 3;  // b given and ||b|| not finite: the host's general path answers

// The least t of R with sqrt(double(t)) < atol false: rr < t exactly when the host's
// float64 test sqrt(rr) < atol holds (stop_threshold of tessera_array/sparse/linalg/
// _fused.py, step for step: atol^2 rounded to R, then an ulp at a time).
__device__ __forceinline__ float next_to(float t, float to) { return nextafterf(t, to); }
__device__ __forceinline__ double next_to(double t, double to) { return nextafter(t, to); }
template <typename R> __device__ R stop_threshold(const double atol)
{
    const R inf = R(1) / R(0);
    R t = mul(R(atol), R(atol));
    while (t < inf && sqrt((double)t) < atol) t = next_to(t, inf);
    while (t > R(0) && !(sqrt((double)next_to(t, R(0))) < atol)) t = next_to(t, R(0));
    return t;
}

template <typename T, typename I, typename P> using Op = StoredOp<T, I, P>;

template <typename T, int WARP, int BLOCK> struct Grid {
    unsigned long long *bar;  // the barrier's counter
    T *part;      // 3 * blocks partial sums
    T *scratch;   // __shared__ T[BLOCK / WARP]
    T *bcast;     // __shared__ T
    long long tid, threads;
    int blocks;

    __device__ __forceinline__ void sync() { grid_sync(bar, (unsigned long long)blocks); }

    // The sum over the grid of every thread's acc, in every thread (a grid sync inside).
    __device__ __forceinline__ T sum(T acc, int slot)
    {
        const T *mine = put(acc, slot);
        sync();
        return gather(mine);
    }

    // sum(a, slot_a) and sum(b, slot_b), the same values, over one grid sync.
    __device__ __forceinline__ void sum2(T a, int slot_a, T b, int slot_b, T &sa, T &sb)
    {
        const T *pa = put(a, slot_a), *pb = put(b, slot_b);
        sync();
        sa = gather(pa);
        sb = gather(pb);
    }

    // This block's share of a grid sum (its threads' acc, block-summed) into part[slot].
    __device__ __forceinline__ const T *put(T acc, int slot)
    {
        acc = block_sum<WARP, BLOCK>(acc, scratch);
        T *mine = part + (long long)slot * blocks;
        if (threadIdx.x == 0) mine[blockIdx.x] = acc;
        return mine;
    }

    // After the grid sync: every block's share added in block order, in every thread.
    __device__ __forceinline__ T gather(const T *shares)
    {
        T s = zero<T>();
        for (int k = threadIdx.x; k < blocks; k += BLOCK) s = add(s, shares[k]);
        s = block_sum<WARP, BLOCK>(s, scratch);
        if (threadIdx.x == 0) *bcast = s;
        __syncthreads();
        return *bcast;  // (the next block_sum syncs before thread 0 writes it again)
    }

    // out = op v for the rows (written by each row's first lane), and the grid's sum of
    // conj(w[i]) * out[i] over them, in every thread.
    template <typename I, typename P>
    __device__ __forceinline__ T product(const Op<T, I, P> &op, long long n, const T *v,
                                         T *out, const T *w, int slot)
    {
        return sum(product_terms(op, n, v, out, w), slot);
    }

    // product's rows, and this thread's terms of its sum (not yet summed over the grid).
    template <typename I, typename P>
    __device__ __forceinline__ T product_terms(const Op<T, I, P> &op, long long n,
                                               const T *v, T *out, const T *w)
    {
        const int L = op.lanes, lane = threadIdx.x % WARP, sub = lane % L;
        const long long rpw = WARP / L;  // rows per warp
        const long long warps = threads / WARP;
        T acc = zero<T>();
        if (op.kind == OP_CSR && L == 1) {  // a row per thread, four rows in flight
            for (long long i0 = tid; i0 < n; i0 += 4 * threads) {
                long long e[4], stop[4], len = 0;
                T s[4];
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    const long long i = i0 + u * threads;
                    e[u] = i < n ? (long long)op.ptr[i] : 0;
                    stop[u] = i < n ? (long long)op.ptr[i + 1] : 0;
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
                for (int u = 0; u < 4; ++u) {
                    const long long i = i0 + u * threads;
                    if (i < n) {
                        out[i] = s[u];
                        acc = add(acc, conj_mul(w[i], s[u]));
                    }
                }
            }
            return acc;
        }
        // r0 is the same in every lane of a warp: whole warps meet each shuffle.
        for (long long r0 = (tid / WARP) * rpw; r0 < n; r0 += warps * rpw) {
            const long long i = r0 + lane / L;
            T s = i < n ? row_part(op, i, n, sub, v) : zero<T>();
            s = segment_sum<WARP>(s, L);
            if (sub == 0 && i < n) {
                out[i] = s;
                acc = add(acc, conj_mul(w[i], s));
            }
        }
        return acc;
    }
};

// The run's state words and history copied to host memory the host polls (pinned,
// mapped: the launcher's; null: none), then seq in *host_flag once they are visible to
// the host, so a short solve's read needs no copy and no stream synchronization.
template <typename T>
__device__ __forceinline__ void publish(const T *st, T *host_st,
                                        volatile unsigned long long *host_flag,
                                        unsigned long long seq, int count)
{
    if (host_st == nullptr) return;
    for (int k = 0; k < count; ++k) host_st[k] = st[k];
    __threadfence_system();
    *host_flag = seq;
}

}  // namespace cgk
}  // namespace tessera

template <typename T, typename I, typename P, int WARP, int BLOCK>
// (at least 3 blocks a multiprocessor: 80 registers, none spilled, in float64)
__global__ void __launch_bounds__(BLOCK, 3)
tessera_cg_run(const long long n, const int entry, const long long done0,
               const long long target, const int final_, const long long run_base,
               const typename tessera::real_of<T>::type thr_in, const int a_kind,
               const int a_lanes, const T *__restrict__ a_val, const I *__restrict__ a_idx,
               const P *__restrict__ a_ptr, const long long a_ld,
               const int m_kind, const int m_lanes, const T *__restrict__ m_val,
               const I *__restrict__ m_idx, const P *__restrict__ m_ptr, const long long m_ld,
               const T *__restrict__ b, const double rtol, const double atol,
               const int dparts, T *x, T *r, T *p, T *q, T *z, T *part, T *st,
               unsigned long long *bar, T *host_st,
               volatile unsigned long long *host_flag, const unsigned long long seq)
{
    using namespace tessera;
    using namespace tessera::cgk;
    typedef typename real_of<T>::type R;
    __shared__ T scratch[BLOCK / WARP];
    __shared__ T bcast;
    // The first launch of a solve (E_INIT) starts the state itself: st is not read.
    if (entry != E_INIT && real_part(st[W_STATUS]) != R(S_RUNNING)) {  // frozen
        if (blockIdx.x == 0 && threadIdx.x == 0)
            publish(st, host_st, host_flag, seq, HIST + (int)(target - run_base));
        return;
    }
    Grid<T, WARP, BLOCK> g{bar, part, scratch, &bcast,
                           (long long)blockIdx.x * BLOCK + threadIdx.x,
                           (long long)gridDim.x * BLOCK, (int)gridDim.x};
    const Op<T, I, P> A{a_kind, a_lanes, a_val, a_idx, a_ptr, a_ld};
    const Op<T, I, P> M{m_kind, m_lanes, m_val, m_idx, m_ptr, m_ld};
    int status = S_RUNNING, stop_at = -2, cause = 0;
    R thr = thr_in;  // b given: set from ||b|| at E_INIT
    R bnrm = R(0);
    bool ok = true;  // the last step's real(p^H A p) > 0 (no step yet: true)
    R rr = R(0);     // r^H r of the current r
    T rho = zero<T>(), rho_prev = zero<T>(), pq = zero<T>();
    if (entry != E_INIT) {
        ok = real_part(st[W_OK]) != R(0);
        rr = real_part(st[W_RR]);
        rho = st[W_RHO];
        rho_prev = st[W_RHO_PREV];
        pq = st[W_PQ];
        if (b != nullptr) thr = real_part(st[W_THR]);  // (the first launch's, from ||b||)
    }
    if (entry != E_INIT) g.sync();  // every block has read st: block 0 may write it now
    long long done = done0;
    const T *s = m_kind == OP_NONE ? r : z;  // what p takes from
    int phase = entry;
    bool first_q = false;  // the first step's q = A p and p^H q already taken
    for (;;) {
        if (phase == E_INIT && b != nullptr) {
            // cg(A, b) from x = 0 (real T): x = 0, r = b, and ||b|| summed as the vecdot
            // kernels sum b . b (blas1.cu: dparts blocks of BLOCK threads over a grid-
            // stride loop, each block's block_sum, then thread t of one block adds parts
            // t, t + BLOCK, ... and a block_sum), here with dparts virtual blocks over
            // the grid's; then the root and the threshold, as the host would take them.
            T acc_rr = zero<T>();  // (r . r as E_INIT's loop below sums it, r being b)
            for (long long i = g.tid; i < n; i += g.threads) {
                const T bi = b[i];
                x[i] = zero<T>();
                r[i] = bi;
                acc_rr = add(acc_rr, from_real<T>(abs2(bi)));
            }
            T *dpart = part + 3 * (long long)g.blocks;
            for (int vb = blockIdx.x; vb < dparts; vb += gridDim.x) {  // (block-uniform)
                T acc = zero<T>();
                for (long long i = (long long)vb * BLOCK + threadIdx.x; i < n;
                     i += (long long)dparts * BLOCK)
                    acc = add(acc, conj_mul(b[i], b[i]));
                acc = block_sum<WARP, BLOCK>(acc, scratch);
                if (threadIdx.x == 0) dpart[vb] = acc;
            }
            // The first step's product, q = A p with p = r = b, and its p^H q need no
            // barrier before them (b is whole before the launch), so they share r . r's
            // (which also publishes dpart); a first test that stops leaves them unused.
            // r . r goes through SLOT_RHO's region (unused without M): the update's sum
            // writes SLOT_RR's with no barrier after this gather, while another block may
            // still be reading it.
            first_q = sizeof(T) == sizeof(R)  // (b is real T's alone: none of this for complex)
                      && m_kind == OP_NONE && a_kind != OP_HOST && done < target;
            if (first_q) {
                T rr_t;
                g.sum2(acc_rr, SLOT_RHO, g.product_terms(A, n, b, q, b), SLOT_PQ, rr_t, pq);
                rr = real_part(rr_t);
            } else {
                rr = real_part(g.sum(acc_rr, SLOT_RR));
            }
            T acc = zero<T>();
            for (int k = threadIdx.x; k < dparts; k += BLOCK) acc = add(acc, dpart[k]);
            acc = block_sum<WARP, BLOCK>(acc, scratch);
            if (threadIdx.x == 0) bcast = acc;
            __syncthreads();
            const R bb = real_part(bcast);  // (the next block_sum syncs before a write)
            // The general path's root is CuPy's, whose float32 kernels flush a subnormal
            // argument to zero (-ftz): so is this one, in float32 only.
            bnrm = (sizeof(R) == 4 && bb < R(1.17549435e-38f)) ? R(0) : root(bb);
            if (!isfinite(bnrm)) {
                status = S_BAD_B;
                break;
            }
            if (bnrm == R(0)) {  // SciPy's early return: x = 0, converged at test 0
                if (g.tid == 0) st[HIST] = zero<T>();
                status = S_CONVERGED;
                stop_at = 0;
                break;
            }
            thr = stop_threshold<R>(fmax(atol, rtol * (double)bnrm));
            phase = E_START;
        }
        if (phase == E_INIT) {
            T acc = zero<T>();
#pragma unroll 4
            for (long long i = g.tid; i < n; i += g.threads)
                acc = add(acc, from_real<T>(abs2(r[i])));
            rr = real_part(g.sum(acc, SLOT_RR));
            phase = E_START;
        }
        if (phase == E_START) {
            const R pqr = real_part(pq);
            if (done == target) {
                if (final_) {
                    status = ok ? S_MAXITER : (pqr <= R(0) ? S_INDEFINITE : S_NONFINITE);
                    stop_at = -1;
                    cause = ok ? 0 : 1;
                }
                break;
            }
            const long long j = done - run_base;
            if (g.tid == 0) st[HIST + j] = from_real<T>(rr);
            if (!ok)
                status = (isfinite(rr) && pqr <= R(0)) ? S_INDEFINITE : S_NONFINITE;
            else if (rr < thr)
                status = S_CONVERGED;
            else if (!isfinite(rr))
                status = S_NONFINITE;
            if (status != S_RUNNING) {
                stop_at = (int)j;
                cause = ok ? 0 : 1;
                break;
            }
            if (m_kind == OP_NONE) {
                rho = from_real<T>(rr);
            } else if (m_kind == OP_HOST) {
                phase = E_ZDOT;  // the host computes z = M r, then resumes here
                break;
            } else {
                rho = g.product(M, n, r, z, r, SLOT_RHO);  // z = M r; rho = r^H z
            }
            phase = -1;  // (the direction)
        }
        if (phase == E_ZDOT) {
            T acc = zero<T>();
#pragma unroll 4
            for (long long i = g.tid; i < n; i += g.threads) acc = add(acc, conj_mul(r[i], z[i]));
            rho = g.sum(acc, SLOT_RHO);
            phase = -1;
        }
        if (phase == -1 && first_q) {  // q and pq are the first barrier's (E_INIT with b)
            for (long long i = g.tid; i < n; i += g.threads) p[i] = s[i];  // (the update
            first_q = false;  // reads p where this thread wrote it: no barrier either)
            phase = -2;
        }
        if (phase == -1) {
            if (done == 0) {
                for (long long i = g.tid; i < n; i += g.threads) p[i] = s[i];
            } else {
                const T beta = div(rho, rho_prev);
                long long i = g.tid;
                for (; i + 3 * g.threads < n; i += 4 * g.threads) {  // four elements in flight
                    T pv[4], sv[4];
#pragma unroll
                    for (int u = 0; u < 4; ++u) {
                        pv[u] = p[i + u * g.threads];
                        sv[u] = s[i + u * g.threads];
                    }
#pragma unroll
                    for (int u = 0; u < 4; ++u) p[i + u * g.threads] = add(mul(beta, pv[u]), sv[u]);
                }
                for (; i < n; i += g.threads) p[i] = add(mul(beta, p[i]), s[i]);
            }
            g.sync();  // p is whole before any row reads it
            if (a_kind == OP_HOST) {
                phase = E_QDOT;  // the host computes q = A p, then resumes here
                break;
            }
            pq = g.product(A, n, p, q, p, SLOT_PQ);  // q = A p; pq = p^H q
            phase = -2;  // (the update)
        }
        if (phase == E_QDOT) {
            T acc = zero<T>();
#pragma unroll 4
            for (long long i = g.tid; i < n; i += g.threads) acc = add(acc, conj_mul(p[i], q[i]));
            pq = g.sum(acc, SLOT_PQ);
            phase = -2;
        }
        // the update (phase -2)
        const T alpha = div(rho, pq);
        const bool good = real_part(pq) > R(0);  // (false for NaN)
        T acc = zero<T>();
        long long i = g.tid;
        for (; i + 3 * g.threads < n; i += 4 * g.threads) {  // four elements in flight
            T xv[4], pv[4], rv[4], qv[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const long long k = i + u * g.threads;
                if (good) {
                    xv[u] = x[k];
                    pv[u] = p[k];
                }
                rv[u] = r[k];
                qv[u] = q[k];
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const long long k = i + u * g.threads;
                if (good) x[k] = add(xv[u], mul(alpha, pv[u]));
                const T ri = sub(rv[u], mul(alpha, qv[u]));
                r[k] = ri;
                acc = add(acc, from_real<T>(abs2(ri)));
            }
        }
        for (; i < n; i += g.threads) {
            if (good) x[i] = add(x[i], mul(alpha, p[i]));
            const T ri = sub(r[i], mul(alpha, q[i]));
            r[i] = ri;
            acc = add(acc, from_real<T>(abs2(ri)));
        }
        rr = real_part(g.sum(acc, SLOT_RR));  // (also orders the update before the next reads)
        ok = good;
        rho_prev = rho;
        ++done;
        phase = E_START;
    }
    if (g.tid == 0) {
        st[W_STATUS] = from_real<T>(R(status));
        if (status != S_RUNNING) {
            st[W_STOP_AT] = from_real<T>(R(stop_at));
            st[W_CAUSE] = from_real<T>(R(cause));
        }
        st[W_OK] = from_real<T>(ok ? R(1) : R(0));
        st[W_RR] = from_real<T>(rr);
        st[W_RHO] = rho;
        st[W_RHO_PREV] = rho_prev;
        st[W_PQ] = pq;
        if (b != nullptr) {
            st[W_THR] = from_real<T>(thr);
            if (entry == E_INIT) st[W_BNRM] = from_real<T>(bnrm);
        }
        // (every word above and the history were written by this thread)
        publish(st, host_st, host_flag, seq, HIST + (int)(target - run_base));
    }
}
