// cg.cl: the fused steps of the conjugate gradient method (tessera_array.sparse.linalg.cg
//            on an OpenCL device; launchers in backends/opencl/cg.py).
//
// One CG iteration is four launches and one small read, with every scalar on the device
// (with a preconditioner M, one more dot launch after the host's z = M r):
//   tessera_cg_direction  p = s (first) or p = beta p + s, beta = rho / rho_prev, where s is
//                         r (rho = r . r) or z = M r (rho = r . z)
//   (the operator's own matvec or spmv kernel: q = A p)
//   tessera_cg_dot        partial sums of p . q
//   tessera_cg_update     alpha = rho / (p . q); x += alpha p (only when p . q > 0);
//                         r -= alpha q; partial sums of the new r . r; the flag of p . q
// and the host reads the state buffer (the partial sums of r . r and the flag) for the
// stopping test. OpenCL has no grid-wide barrier, so a dot product is two steps: each
// work-group writes one partial sum, and the next launch sums the partial sums. Every
// work-group of that launch sums them itself, in index order (np <= WG partial sums: the
// work-items load them into local memory, the first one adds them), so all agree on the
// value, and the host's sum of the same partial sums (numpy.add.accumulate, in T) is the
// device's bit for bit.
//
// State buffer st (T): [0, PMAX) and [PMAX, 2 PMAX) the partial sums of rho for this and
// the previous iteration (swapped by the host each iteration), [2 PMAX, 3 PMAX) those of
// p . q, [3 PMAX, 4 PMAX) those of r . r when rho is r . z, then the flag (1: p . q > 0)
// and p . q itself. PMAX is the host's; the kernels take offsets into st.
//
// Numerics: the recurrence and the rounding of each update are SciPy's cg (each product
// rounded, then the sum; no FMA); only the dot products sum in another order (per
// work-item, then a tree in the work-group, then the groups in order), so iterates agree
// with SciPy's to rounding, not bit for bit (the solver's generic path, whose dot products
// run on the host's BLAS, does that). Results are the same run to run: the geometry is a
// function of n and the device.
// Geometry: GPUs: work-groups of WG (a power of two) over a grid-stride loop; CPU devices
// (WG == 1): one contiguous chunk of `chunk` elements per work-item (vectorized sums).

#include "tessera_types.h"
#include "tessera_group.h"

#if WG > 1
#define MINE(i) for (long i = get_global_id(0); i < n; i += get_global_size(0))
#else
#define MINE(i) for (long i = get_global_id(0) * chunk, e_ = min(n, i + chunk); i < e_; ++i)
#endif

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

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void tessera_cg_dot(const long n, const long chunk, __global const T *a,
                    __global const T *b, __global T *st, const long part_at)
{
    __local T red[WG];
    T acc = ZERO;
    {
        REASSOC
        MINE(i) acc += a[i] * b[i];
    }
    group_store(acc, red, st + part_at);
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void tessera_cg_direction(const long n, const long chunk, const int first,
                          __global const T *r, __global T *p, __global const T *st,
                          const int np, const long cur, const long prev)
{
    __local T sh[WG + 1];
    if (first) {
        MINE(i) p[i] = r[i];
        return;
    }
    const T rho = partial_sum(st + cur, np, sh);
    const T beta = rho / partial_sum(st + prev, np, sh);
    MINE(i) p[i] = beta * p[i] + r[i];
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void tessera_cg_update(const long n, const long chunk, __global const T *p,
                       __global const T *q, __global T *x, __global T *r, __global T *st,
                       const int np, const long pq_at, const long cur, const long nxt,
                       const long flag_at)
{
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
        st[flag_at] = ok ? (T)1 : ZERO;
        st[flag_at + 1] = pq;
    }
}
