// optim.cl: fused optimizer steps (SGD, Adam/AdamW, Adafactor) over flat buffers, in place.
//
// Computes   one update of one tensor per launch, PyTorch's formulas with the NumPy
//            backend's exact order of operations (backends/numpy/optim.py): every
//            product, sum, quotient and square root is rounded once in T, in the same
//            sequence, and the hyperparameters arrive already rounded to T by the host
//            (as NumPy rounds a Python float against a float32 array). With FMA
//            contraction off and correctly rounded divide/sqrt, SGD and Adam/AdamW match
//            the NumPy backend bit for bit where the device honours both.
// Layout     each tensor contiguous, element i at buf[buf_off + i]; Adafactor's factored
//            moments as the NumPy backend keeps them: p of shape (B, R, C) (leading axes
//            flattened into B), row[b, r] at row[b*R + r], col[b, c] at col[b*C + c].
// Launch     every kernel that walks elements takes (bmul, step, cnt): work-item g visits
//            i = g*bmul + k*step for k < cnt (and i < n). GPUs: one element per work-item
//            (bmul = 1, cnt = 1) for the elementwise kernels, a grid-stride loop (bmul = 1,
//            step = global size) for the sums, work-groups of WG; CPU devices: work-groups
//            of one, a contiguous chunk per work-item (bmul = cnt = chunk, step = 1), which
//            PoCL ran 1.6-2x faster than one element per work-item. tessera_sumsq and
//            tessera_adafactor_usq: one partial sum per work-group. Adafactor's row,
//            column and rmean kernels: one row / column / leading index per work-item on
//            GPUs, blocks of rows / runs of columns on CPU devices; the *_rows kernels
//            are the CPU form of usq/apply for factored tensors (row by row, no index
//            division per element).
// Accumulates in T. Adafactor's reductions (RMS of p and of U, row and column means)
//            sum in another order than NumPy (its pairwise sums and BLAS dot): a few ulp.
// Numerics   NaN propagates through maxima as np.maximum's does (OpenCL's max would drop
//            it). Step-dependent scalars (bias corrections, Adafactor's decay rate and
//            its alpha / max(1, RMS(U)/d)) are computed on the host in double.
// Reference  SGD: torch.optim.SGD; Adam: Kingma & Ba, "Adam: A Method for Stochastic
//            Optimization" (2015); AdamW: Loshchilov & Hutter, "Decoupled Weight Decay
//            Regularization" (2019); Adafactor: Shazeer & Stern, "Adafactor: Adaptive
//            Learning Rates with Sublinear Memory Cost" (2018), as torch.optim.Adafactor.

#include "tessera_types.h"

// np.maximum: NaN if either is NaN (x != x tests NaN with a plain compare, which
// vectorizes; PoCL's isnan did not).
#define NMAX(a, b) ((a) != (a) ? (a) : ((b) != (b) ? (b) : ((a) < (b) ? (b) : (a))))

// Sums of squares may be reassociated (REASSOC, tessera_types.h: the compiler vectorizes
// them with several partial sums): their order is not NumPy's in any case (see
// Accumulates above).

// The element loop of a work-item (see Launch above).
// ELEMENTS walks a contiguous run (unit stride known to the compiler, so the loop
// vectorizes; step is ignored); STRIDED also serves the GPUs' grid-stride sums.
#define ELEMENTS(i, n) \
    const long lo_ = get_global_id(0) * bmul; \
    const long hi_ = min((long)(n), lo_ + cnt); \
    for (long i = lo_; i < hi_; ++i)
#define STRIDED(i, n) \
    const long lo_ = get_global_id(0) * bmul; \
    const long hi_ = min((long)(n), lo_ + cnt * step); \
    for (long i = lo_; i < hi_; i += step)
#define CHUNK_ARGS const long bmul, const long step, const long cnt

// Flags of the launches (bit masks). The launcher also builds each combination it uses
// as -DFLAGS=<mask>, so HAS() is a compile-time constant: the element loops then hold no
// branch and no conditional store, and vectorize (with the mask read at run time, PoCL
// ran Adam at 0.6x of NumPy, unvectorized). Without -DFLAGS the run-time argument
// serves.
#ifdef FLAGS
#define HAS(f) ((FLAGS) & (f))
#else
#define HAS(f) (flags & (f))
#endif
#define F_MAXIMIZE 1
#define F_WEIGHT_DECAY 2
#define F_MOMENTUM 4
#define F_FIRST 8
#define F_NESTEROV 16
#define F_DECOUPLED 32
#define F_AMSGRAD 64
#define F_FACTORED 128
#define F_LERP_HIGH 256

// a <- lerp(a, b, w) as torch (and the NumPy backend) compute it: w < 0.5 gives
// a + (b - a)*w, else b - (b - a)*(1 - w); the host passes w or 1 - w as wt.
inline T lerp_t(const T a, const T b, const T wt, const int high)
{
    T tmp = b - a;
    tmp = tmp * wt;
    return high ? b - tmp : a + tmp;
}

__kernel void tessera_nonfinite(const long n, CHUNK_ARGS, __global const T *g,
                                const long g_off, __global int *found, const int slot)
{
    // x - x is 0 for finite x, NaN for inf and NaN (a plain compare: vectorizes, where
    // PoCL's isfinite did not).
    int bad = 0;
    ELEMENTS(i, n) {
        const T x = g[g_off + i];
        bad |= !((x - x) == (T)0);
    }
    if (bad) found[slot] = 1;
}

__kernel void tessera_sgd(const long n, CHUNK_ARGS, const int flags,
                          __global T *p, const long p_off,
                          __global const T *g, const long g_off,
                          __global T *buf, const long buf_off,
                          const T lr, const T momentum, const T keep, const T weight_decay)
{
  ELEMENTS(i, n) {
    const T pi = p[p_off + i];
    T d = g[g_off + i];
    if HAS(F_MAXIMIZE) d = -d;
    if HAS(F_WEIGHT_DECAY) d = d + pi * weight_decay;
    if HAS(F_MOMENTUM) {
        T b;
        if HAS(F_FIRST) {
            b = d;
        } else {
            b = buf[buf_off + i] * momentum;
            b = b + d * keep;
        }
        buf[buf_off + i] = b;
        d = HAS(F_NESTEROV) ? d + b * momentum : b;
    }
    p[p_off + i] = pi - d * lr;
  }
}

__kernel void tessera_adam(const long n, CHUNK_ARGS, const int flags,
                           __global T *p, const long p_off,
                           __global const T *g, const long g_off,
                           __global T *m, const long m_off,
                           __global T *v, const long v_off,
                           __global T *vmax, const long vmax_off,
                           const T weight_decay, const T keep, const T one_b1,
                           const T beta2, const T one_b2, const T bc2_sqrt, const T eps,
                           const T step_size)
{
  ELEMENTS(i, n) {
    T pi = p[p_off + i];
    T d = g[g_off + i];
    if HAS(F_MAXIMIZE) d = -d;
    if HAS(F_WEIGHT_DECAY) {
        if HAS(F_DECOUPLED) pi = pi * keep;
        else d = d + pi * weight_decay;
    }
    // m <- m + (d - m)(1 - beta1); v <- beta2 v + (1 - beta2) d^2
    T mi = m[m_off + i];
    mi = mi + (d - mi) * one_b1;
    T vi = v[v_off + i] * beta2;
    vi = vi + (d * d) * one_b2;
    m[m_off + i] = mi;
    v[v_off + i] = vi;
    T den;
    if HAS(F_AMSGRAD) {
        const T top = NMAX(vmax[vmax_off + i], vi);
        vmax[vmax_off + i] = top;
        den = SQRT(top);
    } else {
        den = SQRT(vi);
    }
    den = den / bc2_sqrt;
    den = den + eps;
    p[p_off + i] = pi - (mi / den) * step_size;
  }
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void tessera_sumsq(const long n, CHUNK_ARGS, __global const T *x, const long x_off,
                   __global T *partial, const long part_off)
{
    __local T part[WG];
    const int lid = get_local_id(0);
    T acc = 0;
    if (step == 1) {
        REASSOC
        ELEMENTS(i, n) {
            const T xi = x[x_off + i];
            acc += xi * xi;
        }
    } else {
        STRIDED(i, n) {
            const T xi = x[x_off + i];
            acc += xi * xi;
        }
    }
    part[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) part[lid] += part[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) partial[part_off + get_group_id(0)] = part[0];
}

// row[b, r] <- lerp(row[b, r], mean_c g[b, r, c]^2, rate)
__kernel void tessera_adafactor_rows(const int nrows, const int C, const int rper,
                                     __global const T *g, const long g_off,
                                     __global T *row, const long row_off,
                                     const T wt, const int flags)
{
    // rows i = b*R + r in [g*rper, (g+1)*rper): one row per work-item on GPUs, a block
    // of rows on CPU devices
    const int lo = get_global_id(0) * rper, hi = min(nrows, lo + rper);
    for (int i = lo; i < hi; ++i) {
        __global const T *gr = g + g_off + (long)i * C;
        T s = 0;
        {
            REASSOC
            for (int c = 0; c < C; ++c) s += gr[c] * gr[c];
        }
        s = s / (T)C;
        row[row_off + i] = lerp_t(row[row_off + i], s, wt, HAS(F_LERP_HIGH));
    }
}

// col[b, c] <- lerp(col[b, c], mean_r g[b, r, c]^2, rate). Work-item i takes columns
// [c_lo, c_lo + cper) of one b: one column on GPUs (summed in a register, neighbouring
// work-items reading neighbouring addresses); a run of columns on CPU devices, summed
// row by row into scratch so that every read is contiguous. Both sum r in order 0..R-1,
// as NumPy's sum over axis -2 does.
__kernel void tessera_adafactor_cols(const int B, const int R, const int C, const int cper,
                                     __global const T *g, const long g_off,
                                     __global T *col, const long col_off,
                                     __global T *scratch, const T wt, const int flags)
{
    const int chunks = (C + cper - 1) / cper;
    const int i = get_global_id(0);
    const int b = i / chunks;
    if (b >= B) return;
    const int c_lo = (i - b * chunks) * cper;
    const int c_hi = min(C, c_lo + cper);
    __global const T *gb = g + g_off + (long)b * R * C;
    const long cb = (long)b * C;
    if (c_hi - c_lo == 1) {
        T s = 0;
        for (int r = 0; r < R; ++r) {
            const T v = gb[(long)r * C + c_lo];
            s += v * v;
        }
        s = s / (T)R;
        col[col_off + cb + c_lo] = lerp_t(col[col_off + cb + c_lo], s, wt, HAS(F_LERP_HIGH));
        return;
    }
    __global T *acc = scratch + cb;
    for (int c = c_lo; c < c_hi; ++c) acc[c] = 0;
    for (int r = 0; r < R; ++r) {
        __global const T *gr = gb + (long)r * C;
        for (int c = c_lo; c < c_hi; ++c) acc[c] += gr[c] * gr[c];
    }
    for (int c = c_lo; c < c_hi; ++c) {
        const T s = acc[c] / (T)R;
        col[col_off + cb + c] = lerp_t(col[col_off + cb + c], s, wt, HAS(F_LERP_HIGH));
    }
}

// rmean[b] <- max(mean_r row[b, r], eps1)
__kernel void tessera_adafactor_rmean(const int B, const int R,
                                      __global const T *row, const long row_off,
                                      __global T *rmean, const T eps1)
{
    const int b = get_global_id(0);
    if (b >= B) return;
    T s = 0;
    for (int r = 0; r < R; ++r) s += row[row_off + (long)b * R + r];
    s = s / (T)R;
    rmean[b] = NMAX(s, eps1);
}

// var <- lerp(var, g^2, rate), elementwise (0-d and 1-d parameters)
__kernel void tessera_adafactor_var(const long n, CHUNK_ARGS,
                                    __global const T *g, const long g_off,
                                    __global T *var, const long var_off,
                                    const T wt, const int flags)
{
    ELEMENTS(i, n) {
        const T gi = g[g_off + i];
        var[var_off + i] = lerp_t(var[var_off + i], gi * gi, wt, HAS(F_LERP_HIGH));
    }
}

// U = g / sqrt(max(Vhat, eps1^2)), Vhat = row*col/rmean (factored) or var.
inline T adafactor_u(const long i, const int flags, __global const T *g, const long g_off,
                     __global const T *row, const long row_off,
                     __global const T *col, const long col_off,
                     __global const T *rmean, __global const T *var, const long var_off,
                     const int R, const int C, const T eps1_sq)
{
    T gi = g[g_off + i];
    if HAS(F_MAXIMIZE) gi = -gi;
    T s;
    if HAS(F_FACTORED) {
        const long rc = (long)R * C;
        const long b = i / rc;
        const long rem = i - b * rc;
        const long r = rem / C, c = rem - r * C;
        s = row[row_off + b * R + r] * col[col_off + b * C + c];
        s = s / rmean[b];
    } else {
        s = var[var_off + i];
    }
    s = NMAX(s, eps1_sq);
    s = SQRT(s);
    return gi / s;
}

// partial sums of U^2 (one per work-group), as tessera_sumsq
__kernel __attribute__((reqd_work_group_size(WG, 1, 1)))
void tessera_adafactor_usq(const long n, CHUNK_ARGS, const int flags,
                           __global const T *g, const long g_off,
                           __global const T *row, const long row_off,
                           __global const T *col, const long col_off,
                           __global const T *rmean, __global const T *var, const long var_off,
                           const int R, const int C, const T eps1_sq,
                           __global T *partial, const long part_off)
{
    __local T part[WG];
    const int lid = get_local_id(0);
    T acc = 0;
    if (step == 1) {
        REASSOC
        ELEMENTS(i, n) {
            const T u = adafactor_u(i, flags, g, g_off, row, row_off, col, col_off, rmean, var,
                                    var_off, R, C, eps1_sq);
            acc += u * u;
        }
    } else {
        STRIDED(i, n) {
            const T u = adafactor_u(i, flags, g, g_off, row, row_off, col, col_off, rmean, var,
                                    var_off, R, C, eps1_sq);
            acc += u * u;
        }
    }
    part[lid] = acc;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = WG / 2; s > 0; s >>= 1) {
        if (lid < s) part[lid] += part[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (lid == 0) partial[part_off + get_group_id(0)] = part[0];
}

// p <- p*keep (weight decay) - U * scale, scale = alpha / max(1, RMS(U)/d)
__kernel void tessera_adafactor_apply(const long n, CHUNK_ARGS, const int flags,
                                      __global T *p, const long p_off,
                                      __global const T *g, const long g_off,
                                      __global const T *row, const long row_off,
                                      __global const T *col, const long col_off,
                                      __global const T *rmean,
                                      __global const T *var, const long var_off,
                                      const int R, const int C, const T eps1_sq,
                                      const T keep, const T scale)
{
    ELEMENTS(i, n) {
        T pi = p[p_off + i];
        if HAS(F_WEIGHT_DECAY) pi = pi * keep;
        const T u = adafactor_u(i, flags, g, g_off, row, row_off, col, col_off, rmean, var,
                                var_off, R, C, eps1_sq);
        p[p_off + i] = pi - u * scale;
    }
}

// CPU devices, factored tensors: tessera_adafactor_usq and tessera_adafactor_apply walked
// row by row of the (B*R, C) view, work-item g taking rows [g*rper, (g+1)*rper): no
// index division per element, and the inner loop runs over contiguous memory.
inline T adafactor_u_rc(T gi, const T rr, const T cc, const T rm, const T eps1_sq,
                        const int flags)
{
    if HAS(F_MAXIMIZE) gi = -gi;
    T s = rr * cc;
    s = s / rm;
    s = NMAX(s, eps1_sq);
    s = SQRT(s);
    return gi / s;
}

__kernel void tessera_adafactor_usq_rows(const int nrows, const int R, const int C,
                                         const int rper, const int flags,
                                         __global const T *g, const long g_off,
                                         __global const T *row, const long row_off,
                                         __global const T *col, const long col_off,
                                         __global const T *rmean, const T eps1_sq,
                                         __global T *partial, const long part_off)
{
    const int lo = get_global_id(0) * rper, hi = min(nrows, lo + rper);
    T acc = 0;
    for (int br = lo; br < hi; ++br) {
        const int b = br / R;
        const T rr = row[row_off + br], rm = rmean[b];
        __global const T *gr = g + g_off + (long)br * C;
        __global const T *cb = col + col_off + (long)b * C;
        T racc = 0;
        {
            REASSOC
            for (int c = 0; c < C; ++c) {
                const T u = adafactor_u_rc(gr[c], rr, cb[c], rm, eps1_sq, flags);
                racc += u * u;
            }
        }
        acc += racc;
    }
    partial[part_off + get_global_id(0)] = acc;
}

__kernel void tessera_adafactor_apply_rows(const int nrows, const int R, const int C,
                                           const int rper, const int flags,
                                           __global T *p, const long p_off,
                                           __global const T *g, const long g_off,
                                           __global const T *row, const long row_off,
                                           __global const T *col, const long col_off,
                                           __global const T *rmean, const T eps1_sq,
                                           const T keep, const T scale)
{
    const int lo = get_global_id(0) * rper, hi = min(nrows, lo + rper);
    for (int br = lo; br < hi; ++br) {
        const int b = br / R;
        const T rr = row[row_off + br], rm = rmean[b];
        __global const T *gr = g + g_off + (long)br * C;
        __global const T *cb = col + col_off + (long)b * C;
        __global T *pr = p + p_off + (long)br * C;
        for (int c = 0; c < C; ++c) {
            T pi = pr[c];
            if HAS(F_WEIGHT_DECAY) pi = pi * keep;
            pr[c] = pi - adafactor_u_rc(gr[c], rr, cb[c], rm, eps1_sq, flags) * scale;
        }
    }
}
