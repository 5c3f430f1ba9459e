// attention.cl: attention forward and backward, FlashAttention-2 per query row.
//
// What it computes (Dao 2023, "FlashAttention-2", Algorithms 1 and 2; the paper's
// notation): per (bh, query row i), S = scale * q_i K^T (+ additive mask; -inf where
// the bool mask, the causal/window band or the user excludes a key), online softmax
// with running max m and running sum l, O = sum_j P_ij * Z_ij * V_j / l with the
// dropout factor Z = keep / (1 - p) from the Philox contract (philox.cl), and
// lse = m + log(l) (of the undropped scores). Backward recomputes P = exp(S - lse):
//   tessera_attention_bwd_dq:   delta_i = dO_i . O_i (written for the next kernel),
//                               dQ_i = scale * sum_j P_ij (Z_ij dO_i . V_j - delta_i) K_j
//   tessera_attention_bwd_dkdv: dV_j = sum_i P_ij Z_ij dO_i,
//                               dK_j = sum_i P_ij (Z_ij dO_i . V_j - delta_i) scale q_i
// Each output element is written by one work-item that sums in a fixed order: no
// atomics, the same bits run to run. dK/dV are per QUERY head (GQA reduced by the host).
//
// Layout and strides: q (.., Sq, DQK), k (.., Sk, DQK), v (.., Sk, DV), mask (.., Sq, Sk)
//   and, in the backward pass, out and dout (.., Sq, DV) and lse (.., Sq) are read
//   through a per-bh table of element offsets (8 longs per bh: q, k, v, mask, out,
//   dout, lse, unused; any leading layout, stride-0 broadcast heads of GQA included)
//   plus a row stride and a column stride each. The results out (BH, Sq, DV),
//   lse (BH, Sq), dq (BH, Sq, DQK), dk (BH, Sk, DQK), dv (BH, Sk, DV) and the scratch
//   delta (BH, Sq) are C-contiguous.
// Launch geometry (1-D, so BH is not bounded by a device's limit on dimension 1):
//   fwd and bwd_dq: global BH * ceil(Sq / WG) * WG, local WG, work-group g serving
//   bh = g / ceil(Sq / WG), one work-item per query row; K/V tiles of BK keys are
//   staged in local memory by the whole work-group. bwd_dkdv: global
//   BH * ceil(Sk / WG) * WG, local WG, one work-item per key row; tiles of BQ query
//   rows (scaled q, dO, lse, delta) in local memory, with the tile's dropout keep bits
//   (each main Philox block, sixteen keys of a row, computed once; refinement blocks
//   only for ties). Tiles outside the causal/window band of the
//   work-group are skipped.
// Accumulation: ACC (float for float32 storage, double for float64); inputs are
//   converted to ACC on load.
// Numerical caveats: exp/log are OpenCL's (float: <= 3 ulp); a fully masked row gives
//   out 0, lse -inf and zero gradients, as the NumPy backend does.
//
// Macros (backends/opencl/attention.py): T, ACC (tessera_types.h's dtype macros),
//   DQK, DV (head dims, may be 0), BK (keys per tile, fwd/dq), BQ (queries per tile,
//   dkdv), WG_MAX (the largest work-group size the host launches). Masks (mask_kind
//   0 none, 1 bool in bmask, 2 additive of T in amask) and dropout (0 or 1) are
//   run-time arguments, so one program serves every variant.

#include "tessera_types.h"
#include "philox.cl"

// Array sizes (a head dim may be 0: the loops then run 0 times).
#define DQK_N (DQK > 0 ? DQK : 1)
#define DV_N (DV > 0 ? DV : 1)

// The score of (i, j) from the dot product x: -inf outside the band or the bool mask,
// plus the additive mask. mask_kind: 0 none, 1 bool (bmask), 2 additive (amask).
inline ACC tessera_masked(ACC x, long i, long j, long band_lo, long band_hi, int mask_kind,
                          __global const uchar *bmask, __global const T *amask,
                          long mbase, long m_sr, long m_sc)
{
    const long d = j - i;
    if (d < band_lo || d > band_hi)
        return -INFINITY;
    if (mask_kind == 1) {
        if (!bmask[mbase + i * m_sr + j * m_sc])
            return -INFINITY;
    } else if (mask_kind == 2) {
        x += (ACC)amask[mbase + i * m_sr + j * m_sc];
    }
    return x;
}

#define TESSERA_ATTENTION_ARGS                                                         \
    const int Sq, const int Sk, __global const long *restrict offs,                  \
    __global const T *restrict q, const long q_sr, const long q_sd,                  \
    __global const T *restrict k, const long k_sr, const long k_sd,                  \
    __global const T *restrict v, const long v_sr, const long v_sd,                  \
    const int mask_kind, __global const uchar *restrict bmask,                       \
    __global const T *restrict amask, const long m_sr, const long m_sc,              \
    const long band_lo, const long band_hi, const ACC scale, const int dropout,      \
    const uint seed_lo, const uint seed_hi, const uint off_lo, const uint off_hi,    \
    const uint t8, const uint frac, const ACC keep_scale

// Dot products of a private row and a local-memory row: four partial sums, so the
// sum is not one serial chain of dependent adds (FP_CONTRACT is off and the compiler
// may not reassociate; four chains let it pipeline or vectorize the products).
#define TESSERA_DOT(name, N)                                                           \
    inline ACC name(__private const ACC *a, __local const ACC *b)                    \
    {                                                                                \
        ACC s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                          \
        int d = 0;                                                                   \
        for (; d + 4 <= (N); d += 4) {                                               \
            s0 += a[d] * b[d];                                                       \
            s1 += a[d + 1] * b[d + 1];                                               \
            s2 += a[d + 2] * b[d + 2];                                               \
            s3 += a[d + 3] * b[d + 3];                                               \
        }                                                                            \
        for (; d < (N); ++d)                                                         \
            s0 += a[d] * b[d];                                                       \
        return (s0 + s1) + (s2 + s3);                                                \
    }
TESSERA_DOT(tessera_dot_qk, DQK)
TESSERA_DOT(tessera_dot_v, DV)

// The backward kernels' extra inputs: dout (.., Sq, DV) and the forward's lse (.., Sq).
#define TESSERA_ATTENTION_GRAD_ARGS                                                    \
    __global const T *restrict dout, const long do_sr, const long do_sd,             \
    __global const ACC *restrict lse, const long l_s

// Stage keys [jt, jt + n) of K (and V) into local memory, converted to ACC.
inline void tessera_stage_kv(__local ACC *kt, __local ACC *vt, int jt, int n,
                             __global const T *k, long kbase, long k_sr, long k_sd,
                             __global const T *v, long vbase, long v_sr, long v_sd)
{
    const int lid = get_local_id(0);
    const int lsz = get_local_size(0);
    for (int t = lid; t < n * DQK; t += lsz) {
        const int r = t / DQK_N, c = t - r * DQK_N;
        kt[t] = (ACC)k[kbase + (long)(jt + r) * k_sr + (long)c * k_sd];
    }
    for (int t = lid; t < n * DV; t += lsz) {
        const int r = t / DV_N, c = t - r * DV_N;
        vt[t] = (ACC)v[vbase + (long)(jt + r) * v_sr + (long)c * v_sd];
    }
}

__kernel void tessera_attention_fwd(TESSERA_ATTENTION_ARGS,
                                    __global T *restrict out, __global ACC *restrict lse)
{
    __local ACC kt[BK * DQK_N];
    __local ACC vt[BK * DV_N];
    const int gpb = (Sq + (int)get_local_size(0) - 1) / (int)get_local_size(0);
    const int bh = (int)(get_group_id(0) / gpb);  // work-groups are (bh, row block)
    const int i0 = (int)(get_group_id(0) - (size_t)bh * gpb) * (int)get_local_size(0);
    const int i = i0 + (int)get_local_id(0);
    const int i1 = min(i0 + (int)get_local_size(0), Sq);
    const bool active = i < Sq;
    const long qbase = offs[8 * bh], kbase = offs[8 * bh + 1];
    const long vbase = offs[8 * bh + 2], mbase = offs[8 * bh + 3];
    const uint2 seed = (uint2)(seed_lo, seed_hi), offset = (uint2)(off_lo, off_hi);

    ACC qr[DQK_N];
    ACC o[DV_N];
    ACC s[BK];
    for (int d = 0; d < DQK; ++d)
        qr[d] = active ? (ACC)q[qbase + (long)i * q_sr + (long)d * q_sd] * scale : (ACC)0;
    for (int d = 0; d < DV; ++d)
        o[d] = 0;
    ACC m = -INFINITY, l = 0;
    ulong cur = ~(ulong)0;  // the main Philox block (sixteen counters) held in u
    uint4 u = (uint4)(0);

    // The keys any row of this work-group can see (uniform across the group).
    const int ja = (int)max((long)0, (long)i0 + band_lo);
    const int jb = (int)min((long)Sk, (long)(i1 - 1) + band_hi + 1);
    for (int jt = ja; jt < jb; jt += BK) {
        const int n = min(BK, jb - jt);
        barrier(CLK_LOCAL_MEM_FENCE);
        tessera_stage_kv(kt, vt, jt, n, k, kbase, k_sr, k_sd, v, vbase, v_sr, v_sd);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (!active)
            continue;
        ACC mx = -INFINITY;
        for (int jj = 0; jj < n; ++jj) {
            ACC x = tessera_dot_qk(qr, kt + jj * DQK);
            x = tessera_masked(x, i, jt + jj, band_lo, band_hi, mask_kind, bmask, amask,
                               mbase, m_sr, m_sc);
            s[jj] = x;
            mx = fmax(mx, x);
        }
        const ACC m_new = fmax(m, mx);
        if (m_new == -INFINITY)
            continue;  // every key so far is masked
        const ACC alpha = exp(m - m_new);
        l *= alpha;
        for (int d = 0; d < DV; ++d)
            o[d] *= alpha;
        for (int jj = 0; jj < n; ++jj) {
            if (s[jj] == -INFINITY)
                continue;
            ACC p = exp(s[jj] - m_new);
            l += p;
            if (dropout) {
                const ulong c = ((ulong)bh * Sq + i) * Sk + (ulong)(jt + jj);
                if ((c >> 4) != cur) {
                    cur = c >> 4;
                    u = tessera_philox_block(cur, seed, offset);
                }
                p = tessera_keep_byte(tessera_byte(u, (uint)(c & 15)), c, seed, offset, t8,
                                      frac) ? p * keep_scale : (ACC)0;
            }
            for (int d = 0; d < DV; ++d)
                o[d] += p * vt[jj * DV + d];
        }
        m = m_new;
    }
    if (!active)
        return;
    const long row = (long)bh * Sq + i;
    const bool seen = l > 0;
    for (int d = 0; d < DV; ++d)
        out[row * DV + d] = seen ? (T)(o[d] / l) : (T)0;
    lse[row] = seen ? m + log(l) : -INFINITY;
}

__kernel void tessera_attention_bwd_dq(TESSERA_ATTENTION_ARGS, TESSERA_ATTENTION_GRAD_ARGS,
                                       __global const T *restrict out,
                                       const long o_sr, const long o_sd,
                                       __global ACC *restrict delta,
                                       __global T *restrict dq)
{
    __local ACC kt[BK * DQK_N];
    __local ACC vt[BK * DV_N];
    const int gpb = (Sq + (int)get_local_size(0) - 1) / (int)get_local_size(0);
    const int bh = (int)(get_group_id(0) / gpb);  // work-groups are (bh, row block)
    const int i0 = (int)(get_group_id(0) - (size_t)bh * gpb) * (int)get_local_size(0);
    const int i = i0 + (int)get_local_id(0);
    const int i1 = min(i0 + (int)get_local_size(0), Sq);
    const bool active = i < Sq;
    const long qbase = offs[8 * bh], kbase = offs[8 * bh + 1];
    const long vbase = offs[8 * bh + 2], mbase = offs[8 * bh + 3];
    const long obase = offs[8 * bh + 4], dobase = offs[8 * bh + 5], lbase = offs[8 * bh + 6];
    const long row = (long)bh * Sq + i;
    const uint2 seed = (uint2)(seed_lo, seed_hi), offset = (uint2)(off_lo, off_hi);

    ACC qr[DQK_N];
    ACC dor[DV_N];
    ACC acc[DQK_N];
    ACC dl = 0, ls = INFINITY;
    for (int d = 0; d < DQK; ++d) {
        qr[d] = active ? (ACC)q[qbase + (long)i * q_sr + (long)d * q_sd] * scale : (ACC)0;
        acc[d] = 0;
    }
    for (int d = 0; d < DV; ++d) {
        dor[d] = active ? (ACC)dout[dobase + (long)i * do_sr + (long)d * do_sd] : (ACC)0;
        if (active)
            dl += dor[d] * (ACC)out[obase + (long)i * o_sr + (long)d * o_sd];
    }
    if (active) {
        delta[row] = dl;
        ls = lse[lbase + (long)i * l_s];
        if (ls == -INFINITY)
            ls = INFINITY;  // a fully masked row: P = 0
    }
    ulong cur = ~(ulong)0;
    uint4 u = (uint4)(0);

    const int ja = (int)max((long)0, (long)i0 + band_lo);
    const int jb = (int)min((long)Sk, (long)(i1 - 1) + band_hi + 1);
    for (int jt = ja; jt < jb; jt += BK) {
        const int n = min(BK, jb - jt);
        barrier(CLK_LOCAL_MEM_FENCE);
        tessera_stage_kv(kt, vt, jt, n, k, kbase, k_sr, k_sd, v, vbase, v_sr, v_sd);
        barrier(CLK_LOCAL_MEM_FENCE);
        if (!active)
            continue;
        for (int jj = 0; jj < n; ++jj) {
            ACC x = tessera_dot_qk(qr, kt + jj * DQK);
            x = tessera_masked(x, i, jt + jj, band_lo, band_hi, mask_kind, bmask, amask,
                               mbase, m_sr, m_sc);
            if (x == -INFINITY)
                continue;
            const ACC p = exp(x - ls);
            ACC dp = tessera_dot_v(dor, vt + jj * DV);
            if (dropout) {
                const ulong c = ((ulong)bh * Sq + i) * Sk + (ulong)(jt + jj);
                if ((c >> 4) != cur) {
                    cur = c >> 4;
                    u = tessera_philox_block(cur, seed, offset);
                }
                dp = tessera_keep_byte(tessera_byte(u, (uint)(c & 15)), c, seed, offset, t8,
                                       frac) ? dp * keep_scale : (ACC)0;
            }
            const ACC ds = p * (dp - dl);
            for (int d = 0; d < DQK; ++d)
                acc[d] += ds * kt[jj * DQK + d];
        }
    }
    if (!active)
        return;
    for (int d = 0; d < DQK; ++d)
        dq[row * DQK + d] = (T)(acc[d] * scale);
}

__kernel void tessera_attention_bwd_dkdv(TESSERA_ATTENTION_ARGS, TESSERA_ATTENTION_GRAD_ARGS,
                                         __global const ACC *restrict delta,
                                         __global T *restrict dk, __global T *restrict dv)
{
    __local ACC qt[BQ * DQK_N];
    __local ACC dot_[BQ * DV_N];
    __local ACC lt[BQ];
    __local ACC dt[BQ];
    __local uchar kp[BQ * WG_MAX];
    const int gpb = (Sk + (int)get_local_size(0) - 1) / (int)get_local_size(0);
    const int bh = (int)(get_group_id(0) / gpb);  // work-groups are (bh, row block)
    const int j0 = (int)(get_group_id(0) - (size_t)bh * gpb) * (int)get_local_size(0);
    const int j = j0 + (int)get_local_id(0);
    const int j1 = min(j0 + (int)get_local_size(0), Sk);
    const bool active = j < Sk;
    const int lid = get_local_id(0);
    const int lsz = get_local_size(0);
    const long qbase = offs[8 * bh], kbase = offs[8 * bh + 1];
    const long vbase = offs[8 * bh + 2], mbase = offs[8 * bh + 3];
    const long dobase = offs[8 * bh + 5], lbase = offs[8 * bh + 6];
    const uint2 seed = (uint2)(seed_lo, seed_hi), offset = (uint2)(off_lo, off_hi);

    ACC kr[DQK_N];
    ACC vr[DV_N];
    ACC gk[DQK_N];
    ACC gv[DV_N];
    for (int d = 0; d < DQK; ++d) {
        kr[d] = active ? (ACC)k[kbase + (long)j * k_sr + (long)d * k_sd] : (ACC)0;
        gk[d] = 0;
    }
    for (int d = 0; d < DV; ++d) {
        vr[d] = active ? (ACC)v[vbase + (long)j * v_sr + (long)d * v_sd] : (ACC)0;
        gv[d] = 0;
    }

    // The query rows that can see any key of this work-group.
    const int ia = (int)max((long)0, (long)j0 - band_hi);
    const int ib = (int)min((long)Sq, (long)(j1 - 1) - band_lo + 1);
    for (int it = ia; it < ib; it += BQ) {
        const int n = min(BQ, ib - it);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int t = lid; t < n * DQK; t += lsz) {
            const int r = t / DQK_N, c = t - r * DQK_N;
            qt[t] = (ACC)q[qbase + (long)(it + r) * q_sr + (long)c * q_sd] * scale;
        }
        for (int t = lid; t < n * DV; t += lsz) {
            const int r = t / DV_N, c = t - r * DV_N;
            dot_[t] = (ACC)dout[dobase + (long)(it + r) * do_sr + (long)c * do_sd];
        }
        for (int t = lid; t < n; t += lsz) {
            const ACC x = lse[lbase + (long)(it + t) * l_s];
            lt[t] = x == -INFINITY ? (ACC)INFINITY : x;
            dt[t] = delta[(long)bh * Sq + it + t];
        }
        if (dropout) {
            // The keep bits of the tile (query rows it.., keys j0..j1-1) in local memory:
            // one main Philox block per step serves sixteen neighbouring keys of a row
            // (a tie computes its refinement block there and then).
            const int w = j1 - j0;
            const int nb = (15 + w + 15) >> 4;
            for (int t = lid; t < n * nb; t += lsz) {
                const int r = t / nb, b = t - r * nb;
                const ulong first = ((ulong)bh * Sq + (ulong)(it + r)) * Sk + (ulong)j0;
                const ulong blk = (first >> 4) + (ulong)b;
                const uint4 u = tessera_philox_block(blk, seed, offset);
                for (uint e = 0; e < 16; ++e) {
                    const ulong c = (blk << 4) + e;
                    if (c >= first && c - first < (ulong)w)
                        kp[r * WG_MAX + (int)(c - first)] =
                            tessera_keep_byte(tessera_byte(u, e), c, seed, offset, t8, frac);
                }
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        if (!active)
            continue;
        for (int ii = 0; ii < n; ++ii) {
            const int i = it + ii;
            ACC x = tessera_dot_qk(kr, qt + ii * DQK);
            x = tessera_masked(x, i, j, band_lo, band_hi, mask_kind, bmask, amask,
                               mbase, m_sr, m_sc);
            if (x == -INFINITY)
                continue;
            const ACC p = exp(x - lt[ii]);
            ACC dp = tessera_dot_v(vr, dot_ + ii * DV);
            ACC pz = p;
            if (dropout) {
                if (kp[ii * WG_MAX + lid]) {
                    pz = p * keep_scale;
                    dp = dp * keep_scale;
                } else {
                    pz = 0;
                    dp = 0;
                }
            }
            for (int d = 0; d < DV; ++d)
                gv[d] += pz * dot_[ii * DV + d];
            const ACC ds = p * (dp - dt[ii]);
            for (int d = 0; d < DQK; ++d)
                gk[d] += ds * qt[ii * DQK + d];
        }
    }
    if (!active)
        return;
    const long row = (long)bh * Sk + j;
    for (int d = 0; d < DQK; ++d)
        dk[row * DQK + d] = (T)gk[d];
    for (int d = 0; d < DV; ++d)
        dv[row * DV + d] = (T)gv[d];
}
