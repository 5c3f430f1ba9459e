// cg.cl: the fused steps of the conjugate gradient method, stopping test included
//        (tessera_array.sparse.linalg.cg on an OpenCL device; launchers in
//        backends/opencl/cg.py, the contract in tessera_array/sparse/linalg/_fused.py).
//
// One CG iteration is four launches (five with a preconditioner M, whose z = M r the host
// enqueues first, then one more dot launch for rho = r . z), with every scalar and the
// stopping test on the device, so the host enqueues k iterations and reads once:
//   tessera_cg_direction  the stopping test of r_i (below), then, unless it stopped,
//                         p = s (first) or p = beta p + s, beta = rho / rho_prev, where
//                         s is r (rho = r . r) or z = M r (rho = r . z)
//   (the operator's own matvec or spmv kernel: q = A p)
//   tessera_cg_dot        partial sums of p . q
//   tessera_cg_update     alpha = rho / (p . q); x += alpha p (only when p . q > 0);
//                         r -= alpha q; partial sums of the new r . r; the flag of p . q
// OpenCL has no grid-wide barrier, so a dot product is two steps: each work-group writes
// one partial sum, and the next launch sums the partial sums. Every work-group of that
// launch sums them itself, in index order (np <= WG partial sums: the work-items load them
// into local memory, the first one adds them), so all agree on the value, and on every
// decision taken from it.
//
// The stopping test of iteration i (SciPy's cg, in its order), on rr = r_i . r_i: the last
// step's p . q not > 0 -> INDEFINITE when rr is finite and p . q <= 0, else NONFINITE;
// rr < thr -> CONVERGED (thr: the host's, so that this is ||r_i|| < atol rounded as the
// host's float64 sqrt; tessera_array/sparse/linalg/_fused.py stop_threshold); rr not
// finite -> NONFINITE. A stop freezes the solve: every later launch returns at once
// (x, r, p and the partial sums stay as they were). The final check (mode 2, after the
// maxiter-th step) tests only the last p . q: MAXITER, or INDEFINITE / NONFINITE.
//
// State buffer st (T; offsets: the host's): [0, PMAX) and [PMAX, 2 PMAX) the partial sums
// of rho for this and the previous iteration (swapped by the host each iteration),
// [2 PMAX, 3 PMAX) those of p . q, [3 PMAX, 4 PMAX) those of r . r when rho is r . z, then
// (at FLAG = 4 PMAX) the words below, then the run's history: rr of its test j at HIST + j.
// Each status word is written by one kernel and read only by others (no launch reads a
// word it writes), so no work-group reads what another writes in the same launch.
//
// Numerics: the recurrence and the rounding of each update are SciPy's cg (each product
// rounded, then the sum; no FMA); only the dot products sum in another order (per
// work-item, then a tree in the work-group, then the groups in order), so iterates agree
// with SciPy's to rounding, not bit for bit. Results are the same run to run, and for any
// number k of iterations per read: the geometry is a function of n and the device.
// Geometry: GPUs: work-groups of WG (a power of two) over a grid-stride loop; CPU devices
// (WG == 1): one contiguous chunk of `chunk` elements per work-item (vectorized sums).

#include "tessera_types.h"
#include "tessera_group.h"

#if WG > 1
#define MINE(i) for (long i = get_global_id(0); i < n; i += get_global_size(0))
#else
#define MINE(i) for (long i = get_global_id(0) * chunk, e_ = min(n, i + chunk); i < e_; ++i)
#endif

// The words at st + FLAG (offsets from FLAG), and the status values (the host's CGStatus).
#define W_OK 0        // 1: the last step's p . q > 0 (or no step yet), else 0
#define W_PQ 1        // that p . q
#define W_STATUS_D 2  // the status after the last direction launch (written there only)
#define W_STATUS_U 3  // the status after the last update launch (written there only)
#define W_STOP_AT 4   // the run's test index of the stop; -1: the final check
#define W_CAUSE 5     // 1: the stop came from the last step's p . q (one step fewer)
#define HIST 8        // rr of the run's test j at st[FLAG + HIST + j]

#define S_RUNNING ((T)1)
#define S_MAXITER ((T)2)
#define S_CONVERGED ((T)0)
#define S_NONFINITE ((T)-20)
#define S_INDEFINITE ((T)-30)

// part[0] + part[1] + ... + part[np - 1] in that order, in every work-item (np <= WG).
inline T partial_sum(__global const T *part, const int np, __local T *sh)
{
#if WG > 1
    const int lid = get_local_id(0);
    if (lid < np) sh[lid] = part[lid];
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid == 0) {
        T s = ZERO;
        for (int k = 0; k < np; ++k) s += sh[k];
        sh[WG] = s;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    const T s = sh[WG];
    barrier(CLK_LOCAL_MEM_FENCE);  // (sh is reused by the next call)
    return s;
#else
    T s = ZERO;
    for (int k = 0; k < np; ++k) s += part[k];
    return s;
#endif
}

// Partial sums of a . b into st[part_at ...], unless the solve has stopped (status_at:
// the direction launches' status word; every work-item reads the same value).
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void tessera_cg_dot(const long n, const long chunk, __global const T *a,
                    __global const T *b, __global T *st, const long part_at,
                    const long status_at)
{
    if (st[status_at] != S_RUNNING) return;
    __local T red[WG];
    T acc = ZERO;
    {
        REASSOC
        MINE(i) acc += a[i] * b[i];
    }
    group_store(acc, red, st + part_at);
}

// mode 0: test, then p = s; 1: test, then p = beta p + s; 2: the final check only.
// rr_at: the partial sums of r_i . r_i (cur without M); test: the run's test index.
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void tessera_cg_direction(const long n, const long chunk, const int mode,
                          __global const T *s, __global T *p, __global T *st,
                          const int np, const long cur, const long prev, const long flag_at,
                          const long rr_at, const int test, const T thr)
{
    __local T sh[WG + 1];
    __global T *w = st + flag_at;
    if (w[W_STATUS_U] != S_RUNNING) return;  // stopped earlier (W_STATUS_D says so too)
    const int ok = w[W_OK] != ZERO;
    const T pq = w[W_PQ];
    T status = S_RUNNING;
    T rr = ZERO;
    if (mode == 2) {
        status = ok ? S_MAXITER : (pq <= ZERO ? S_INDEFINITE : S_NONFINITE);
    } else {
        rr = partial_sum(st + rr_at, np, sh);
        if (!ok) status = (isfinite(rr) && pq <= ZERO) ? S_INDEFINITE : S_NONFINITE;
        else if (rr < thr) status = S_CONVERGED;
        else if (!isfinite(rr)) status = S_NONFINITE;
    }
    if (get_global_id(0) == 0) {
        if (mode != 2) w[HIST + test] = rr;
        w[W_STATUS_D] = status;
        if (status != S_RUNNING) {
            w[W_STOP_AT] = mode == 2 ? (T)-1 : (T)test;
            w[W_CAUSE] = ok ? ZERO : (T)1;
        }
    }
    if (status != S_RUNNING) return;
    if (mode == 0) {
        MINE(i) p[i] = s[i];
        return;
    }
    const T rho = rr_at == cur ? rr : partial_sum(st + cur, np, sh);
    const T beta = rho / partial_sum(st + prev, np, sh);
    MINE(i) p[i] = beta * p[i] + s[i];
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void tessera_cg_update(const long n, const long chunk, __global const T *p,
                       __global const T *q, __global T *x, __global T *r, __global T *st,
                       const int np, const long pq_at, const long cur, const long nxt,
                       const long flag_at)
{
    __global T *w = st + flag_at;
    const T status = w[W_STATUS_D];
    if (status != S_RUNNING) {
        if (get_global_id(0) == 0) w[W_STATUS_U] = status;
        return;
    }
    __local T sh[WG + 1];
    __local T red[WG];
    const T pq = partial_sum(st + pq_at, np, sh);
    const T alpha = partial_sum(st + cur, np, sh) / pq;
    const int ok = pq > ZERO;  // (false for NaN)
    T acc = ZERO;
    if (ok) {
        REASSOC
        MINE(i) {
            x[i] = x[i] + alpha * p[i];
            const T ri = r[i] - alpha * q[i];
            r[i] = ri;
            acc += ri * ri;
        }
    } else {  // x keeps the last good iterate; r moves on, as in the generic path
        REASSOC
        MINE(i) {
            const T ri = r[i] - alpha * q[i];
            r[i] = ri;
            acc += ri * ri;
        }
    }
    group_store(acc, red, st + nxt);
    if (get_global_id(0) == 0) {
        w[W_OK] = ok ? (T)1 : ZERO;
        w[W_PQ] = pq;
        w[W_STATUS_U] = S_RUNNING;
    }
}
