/* tessera_array.backends.numpy._attention_c: the NumPy backend's attention, in C.
 *
 * What it computes. FlashAttention-2 (Dao 2023, Algorithms 1 and 2, in the paper's
 * notation) for one work item at a time, with the GIL released: ``fwd`` one block of query
 * rows of one (batch, head), ``bwd`` one whole (batch, head). The products go to the BLAS
 * NumPy bundles (its ``cblas_?gemm``, whose address the caller hands over once through
 * ``set_blas``; OpenBLAS held at one thread by the caller); everything between them -- row
 * max, shift, exp, row sums, the rescaling of ``l`` and ``O``, the causal/window band, the
 * dropout keep mask (Philox4x32-10, bit for bit the mask of backends/numpy/philox.py), and
 * in the backward ``P = exp(S - lse)`` and ``dS = P * (dP - delta)`` -- is one pass per
 * tile here, on data the product has just left in the L2 cache. backends/numpy/attention.py
 * says when this path is taken and keeps the NumPy path it must agree with.
 *
 * Layout. Inputs are 2-D views of one head with any element strides (they are copied
 * into packed tiles: Q scaled, K^T); outputs are C-contiguous rows. The accumulation
 * dtype is the input dtype (float32 or float64): _attention_c.h is the body, included
 * once per dtype.
 *
 * Numerics. exp is a polynomial here (Cody-Waite reduction by ln 2, Taylor degree 7 for
 * float32 and 13 for float64: relative error within 2 ulp); arguments below -86 (float32)
 * or -708 (float64) give 0 instead of a subnormal. Sums run in a fixed order (vector
 * lanes, then the lanes in order), so the same inputs give the same bits whatever the
 * thread count, on one instruction set. The row loops are compiled three times (x86-64-v4
 * with AVX-512, v3 with AVX2 and FMA, and the baseline) and the best the CPU has is picked
 * when the module loads (GCC's target_clones); elsewhere they are compiled once.
 * Scratch comes from PyMem_RawMalloc (thread-safe without the GIL, and traced by
 * tracemalloc, so the tests' peak-memory bounds cover these kernels too).
 * -DTESSERA_NO_CLONES compiles them once, for the -march given (tests/test_attention.py
 * builds the v3 and baseline instruction sets so, which an AVX-512 machine never picks).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(TESSERA_NO_CLONES)
#define TESSERA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", \
                                                    "default")))
#else
#define TESSERA_CLONES
#endif

/* ---- the BLAS: cblas_?gemm through a pointer, 32- or 64-bit integers ----------------- */

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };

typedef void (*sgemm64_fn)(int, int, int, int64_t, int64_t, int64_t, float, const float *,
                           int64_t, const float *, int64_t, float, float *, int64_t);
typedef void (*dgemm64_fn)(int, int, int, int64_t, int64_t, int64_t, double, const double *,
                           int64_t, const double *, int64_t, double, double *, int64_t);
typedef void (*sgemm32_fn)(int, int, int, int32_t, int32_t, int32_t, float, const float *,
                           int32_t, const float *, int32_t, float, float *, int32_t);
typedef void (*dgemm32_fn)(int, int, int, int32_t, int32_t, int32_t, double, const double *,
                           int32_t, const double *, int32_t, double, double *, int32_t);

static void *blas_sgemm = NULL;
static void *blas_dgemm = NULL;
static int blas_int64 = 1;

/* C = alpha op(A) op(B) + beta C, row-major. */
static void
gemm_f32(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float *a,
         int64_t lda, const float *b, int64_t ldb, float beta, float *c, int64_t ldc)
{
    if (blas_int64)
        ((sgemm64_fn)blas_sgemm)(ROW_MAJOR, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        ((sgemm32_fn)blas_sgemm)(ROW_MAJOR, ta, tb, (int32_t)m, (int32_t)n, (int32_t)k, alpha,
                                 a, (int32_t)lda, b, (int32_t)ldb, beta, c, (int32_t)ldc);
}

static void
gemm_f64(int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, const double *a,
         int64_t lda, const double *b, int64_t ldb, double beta, double *c, int64_t ldc)
{
    if (blas_int64)
        ((dgemm64_fn)blas_dgemm)(ROW_MAJOR, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        ((dgemm32_fn)blas_dgemm)(ROW_MAJOR, ta, tb, (int32_t)m, (int32_t)n, (int32_t)k, alpha,
                                 a, (int32_t)lda, b, (int32_t)ldb, beta, c, (int32_t)ldc);
}

/* ---- vectors (GCC/Clang vector extensions: one zmm, two ymm or four xmm) ------------ */

#if defined(__GNUC__) && !defined(__clang__)
/* 64-byte vectors are passed between inlined helpers only: no ABI crosses a call. */
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

typedef float vf32 __attribute__((vector_size(64)));
typedef int32_t vi32 __attribute__((vector_size(64)));
typedef double vf64 __attribute__((vector_size(64)));
typedef int64_t vi64 __attribute__((vector_size(64)));

#define SPLAT(V, x) ((V){0} + (x))

static inline vf32 sel_f32(vi32 m, vf32 a, vf32 b) { return (vf32)((m & (vi32)a) | (~m & (vi32)b)); }
static inline vf64 sel_f64(vi64 m, vf64 a, vf64 b) { return (vf64)((m & (vi64)a) | (~m & (vi64)b)); }

/* exp(x), float32 lanes: x = n ln2 + r, |r| <= ln2/2, n read off the round-to-nearest
 * shifter; exp(r) by a degree-6 polynomial fitted to exp's relative error on that range
 * (7.3e-8 with float32 rounding: within an ulp); 2^n added to the exponent bits. No clamp:
 * lanes below -86 (where 2^n would leave the normal range) are replaced at the end by 0,
 * NaN lanes by x. expneg: for x <= 88 only (the softmax's x = s - max s <= 0); exp: any x
 * (above 88: inf). */
static inline vf32
expneg_f32(vf32 x)
{
    const float shifter = 12582912.0f; /* 0x1.8p23 */
    vf32 kd = x * 1.44269504088896341f + shifter;
    vf32 n = kd - shifter;
    vf32 r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    vf32 p = SPLAT(vf32, 0x1.6ab98p-10f);
    p = p * r + 0x1.126d0cp-7f;
    p = p * r + 0x1.55589ap-5f;
    p = p * r + 0x1.55540ap-3f;
    p = p * r + 0x1.fffffap-2f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    vf32 y = (vf32)((vi32)p + ((vi32)kd << 23));
    y = sel_f32(x < -86.0f, SPLAT(vf32, 0.0f), y);
    return sel_f32(x != x, x, y);
}

static inline vf32
exp_f32(vf32 x)
{
    return sel_f32(x > 88.0f, SPLAT(vf32, INFINITY), expneg_f32(x));
}

/* exp(x), float64 lanes: the same with Taylor to r^13 (truncation 4e-18); the range
 * [-708, 709]. */
static inline vf64
expneg_f64(vf64 x)
{
    const double shifter = 6755399441055744.0; /* 0x1.8p52 */
    vf64 kd = x * 1.4426950408889634074 + shifter;
    vf64 n = kd - shifter;
    vf64 r = x - n * 6.93147180369123816490e-01;
    r = r - n * 1.90821492927058770002e-10;
    vf64 p = SPLAT(vf64, 1.0 / 6227020800.0);
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    vf64 y = (vf64)((vi64)p + ((vi64)kd << 52));
    y = sel_f64(x < -708.0, SPLAT(vf64, 0.0), y);
    return sel_f64(x != x, x, y);
}

static inline vf64
exp_f64(vf64 x)
{
    return sel_f64(x > 709.0, SPLAT(vf64, INFINITY), expneg_f64(x));
}

/* The lanes of x reduced pairwise (halves, then quarters, ...): a fixed order. */
#if defined(__clang__)
#define SHUF_F32(x, ...) __builtin_shufflevector(x, x, __VA_ARGS__)
#define SHUF_F64(x, ...) __builtin_shufflevector(x, x, __VA_ARGS__)
#else
#define SHUF_F32(x, ...) __builtin_shuffle(x, (vi32){__VA_ARGS__})
#define SHUF_F64(x, ...) __builtin_shuffle(x, (vi64){__VA_ARGS__})
#endif

static inline float
hsum_f32(vf32 x)
{
    x += SHUF_F32(x, 8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15);
    x += SHUF_F32(x, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7);
    x += SHUF_F32(x, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    x += SHUF_F32(x, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1);
    return x[0];
}

/* The largest lane (lanes hold no NaN here). */
static inline float
hmax_f32(vf32 x)
{
    vf32 y = SHUF_F32(x, 8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15);
    x = sel_f32(y > x, y, x);
    y = SHUF_F32(x, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7, 4, 5, 6, 7);
    x = sel_f32(y > x, y, x);
    y = SHUF_F32(x, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    x = sel_f32(y > x, y, x);
    y = SHUF_F32(x, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1);
    x = sel_f32(y > x, y, x);
    return x[0];
}

static inline double
hsum_f64(vf64 x)
{
    x += SHUF_F64(x, 4, 5, 6, 7, 4, 5, 6, 7);
    x += SHUF_F64(x, 2, 3, 2, 3, 2, 3, 2, 3);
    x += SHUF_F64(x, 1, 1, 1, 1, 1, 1, 1, 1);
    return x[0];
}

static inline double
hmax_f64(vf64 x)
{
    vf64 y = SHUF_F64(x, 4, 5, 6, 7, 4, 5, 6, 7);
    x = sel_f64(y > x, y, x);
    y = SHUF_F64(x, 2, 3, 2, 3, 2, 3, 2, 3);
    x = sel_f64(y > x, y, x);
    y = SHUF_F64(x, 1, 1, 1, 1, 1, 1, 1, 1);
    x = sel_f64(y > x, y, x);
    return x[0];
}

/* ---- Philox4x32-10 (Salmon et al., SC'11): the dropout keep mask -------------------- */

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

/* The keep contract (tessera_array/random.py's module docstring): element counter
 * c = (bh*Sq + i)*Sk + j keeps when b * 2**32 + r >= threshold = floor(p * 2**40), b byte
 * c & 15 of block c >> 4 (byte e of word l is byte 4 l + e), r the refinement word (word
 * c & 3 of block 2**63 | c >> 2), needed only when b == threshold >> 32. */
typedef struct {
    int on;             /* dropout applies (else the keep mask is all ones, scale 1) */
    uint32_t t8;        /* threshold >> 32: a byte above it keeps, below it drops */
    uint32_t frac;      /* threshold & 0xFFFFFFFF: a tie keeps when its refinement word >= frac */
    uint64_t seed, offset, bh;
    int64_t sq, sk;
} Dropout;

/* The Philox words of blocks b0 .. b0 + nb - 1 (counter (block lo, block hi, offset lo,
 * offset hi), key (seed lo, seed hi)) into u[4 t + lane]. */
static inline void
philox_blocks(uint64_t b0, int64_t nb, uint64_t offset, uint64_t seed, uint32_t *u)
{
    for (int64_t t = 0; t < nb; t++) {
        uint64_t b = b0 + (uint64_t)t;
        uint32_t x0 = (uint32_t)b, x1 = (uint32_t)(b >> 32);
        uint32_t x2 = (uint32_t)offset, x3 = (uint32_t)(offset >> 32);
        uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
        for (int r = 0; r < 10; r++) {
            uint64_t p0 = (uint64_t)PHILOX_M0 * x0;
            uint64_t p1 = (uint64_t)PHILOX_M1 * x2;
            uint32_t y0 = (uint32_t)(p1 >> 32) ^ x1 ^ k0;
            uint32_t y2 = (uint32_t)(p0 >> 32) ^ x3 ^ k1;
            x1 = (uint32_t)p1;
            x3 = (uint32_t)p0;
            x0 = y0;
            x2 = y2;
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        u[4 * t] = x0;
        u[4 * t + 1] = x1;
        u[4 * t + 2] = x2;
        u[4 * t + 3] = x3;
    }
}

/* The keep decisions of row i, keys [j0, j0 + w) into keep[0 .. w) (1 keep, 0 drop): one
 * Philox block per 16 keys (byte c & 15 of block c >> 4 against t8), then, for the ties
 * only (one key in 256), the refinement word (word c & 3 of block 2**63 | c >> 2) against
 * frac; u: scratch of 4 * ((w + 15) / 16 + 1) words (the row's main blocks: it may start
 * at any byte of the first; the callers' 4 * (bk / 4 + 3) words for w <= bk cover it). */
static void TESSERA_CLONES
keep_row(const Dropout *dr, int64_t i, int64_t j0, int64_t w, uint32_t *u, uint8_t *keep)
{
    uint64_t c = ((dr->bh * (uint64_t)dr->sq) + (uint64_t)i) * (uint64_t)dr->sk + (uint64_t)j0;
    uint64_t first = c >> 4, last = (c + (uint64_t)w - 1) >> 4;
    philox_blocks(first, (int64_t)(last - first + 1), dr->offset, dr->seed, u);
    const uint32_t t8 = dr->t8, frac = dr->frac;
    const int64_t e0 = (int64_t)(c & 15); /* key j0's byte in the first block */
    if (frac == 0) {
        /* b * 2**32 + r >= t8 * 2**32 exactly when b >= t8: no refinement word. */
        for (int64_t t = 0; t < w; t++) {
            int64_t e = e0 + t;
            keep[t] = ((u[e >> 2] >> (8 * (e & 3))) & 0xFFu) >= t8;
        }
        return;
    }
    /* 1 keep, 0 drop, 2 a tie (decided below). */
    int ties = 0;
    for (int64_t t = 0; t < w; t++) {
        int64_t e = e0 + t;
        uint32_t b = (u[e >> 2] >> (8 * (e & 3))) & 0xFFu;
        keep[t] = (uint8_t)((b > t8) | ((b == t8) << 1));
        ties |= b == t8;
    }
    if (!ties)
        return;
    for (int64_t t = 0; t < w; t++) {
        if (keep[t] != 2)
            continue;
        uint64_t ct = c + (uint64_t)t;
        uint32_t r4[4];
        philox_blocks(((uint64_t)1 << 63) | (ct >> 2), 1, dr->offset, dr->seed, r4);
        keep[t] = r4[ct & 3] >= frac;
    }
}

/* One forward work item: query rows [i0, i1) of one head. */
typedef struct {
    const void *q, *k, *v;      /* the head's 2-D views; strides in elements */
    Py_ssize_t qs0, qs1, ks0, ks1, vs0, vs1;
    void *out;                  /* rows i0.. of the head's output, C-contiguous (dv a row) */
    void *lse;                  /* rows i0.. of the head's log-sum-exp, or NULL */
    Py_ssize_t sq, sk, d, dv, i0, i1;
    double scale;
    long long lo, hi;           /* the band: query i sees key j when lo <= j - i <= hi */
    Py_ssize_t bm, bk;          /* query rows and keys of a tile */
    Dropout dr;
    double keep_scale;          /* 1 / (1 - p) */
} FwdArgs;

/* One backward work item: one head. */
typedef struct {
    const void *q, *k, *v, *o, *g, *lse;  /* the head's views (g: dO); strides in elements */
    Py_ssize_t qs0, qs1, ks0, ks1, vs0, vs1, os0, os1, gs0, gs1, ls0;
    void *dq, *dk, *dv_;                 /* the head's gradients, C-contiguous */
    Py_ssize_t sq, sk, d, dv;
    double scale;
    long long lo, hi;
    Py_ssize_t bq, bk;                   /* query rows and keys of a tile */
    Dropout dr;
    double keep_scale;
} BwdArgs;

/* ---- the two dtypes ------------------------------------------------------------------ */

#define T float
#define SUF(name) name##_f32
#define VT vf32
#define VI vi32
#define VL 16
#define EXPV exp_f32
#define EXPNEG expneg_f32
#define HSUM hsum_f32
#define HMAX hmax_f32
#define SELV sel_f32
#define GEMM gemm_f32
#define LOG logf
#include "_attention_c.h"
#undef T
#undef SUF
#undef VT
#undef VI
#undef VL
#undef EXPV
#undef EXPNEG
#undef HSUM
#undef HMAX
#undef SELV
#undef GEMM
#undef LOG

#define T double
#define SUF(name) name##_f64
#define VT vf64
#define VI vi64
#define VL 8
#define EXPV exp_f64
#define EXPNEG expneg_f64
#define HSUM hsum_f64
#define HMAX hmax_f64
#define SELV sel_f64
#define GEMM gemm_f64
#define LOG log
#include "_attention_c.h"

/* ---- Python entry points --------------------------------------------------------------- */

static PyObject *
py_set_blas(PyObject *self, PyObject *args)
{
    Py_ssize_t s, d;
    int int64;
    if (!PyArg_ParseTuple(args, "nnp", &s, &d, &int64))
        return NULL;
    blas_sgemm = (void *)s;
    blas_dgemm = (void *)d;
    blas_int64 = int64;
    Py_RETURN_NONE;
}

/* The dropout state of one call (the Python side's threshold = floor(p * 2**40), seed,
 * offset and head). Returns 0, with a ValueError set, for a threshold off [0, 2**40). */
static int
dropout_set(Dropout *dr, unsigned long long threshold, unsigned long long seed,
            unsigned long long offset, unsigned long long bh, Py_ssize_t sq, Py_ssize_t sk)
{
    if (dr->on && threshold >> 40) {
        PyErr_Format(PyExc_ValueError,
                     "_attention_c: the dropout threshold must be in [0, 2**40). Received: %llu",
                     threshold);
        return 0;
    }
    dr->t8 = (uint32_t)(threshold >> 32);
    dr->frac = (uint32_t)threshold;
    dr->seed = seed;
    dr->offset = offset;
    dr->bh = bh;
    dr->sq = sq;
    dr->sk = sk;
    return 1;
}

/* Whether set_blas gave the GEMM of this dtype (else a RuntimeError naming `what`). */
static int
blas_ready(int f64, const char *what)
{
    if (f64 ? blas_dgemm != NULL : blas_sgemm != NULL)
        return 1;
    PyErr_Format(PyExc_RuntimeError, "_attention_c.%s: set_blas was not called", what);
    return 0;
}

static PyObject *
py_fwd(PyObject *self, PyObject *args)
{
    FwdArgs a;
    int f64;
    Py_ssize_t q, k, v, out, lse;
    unsigned long long seed, offset, bh;
    unsigned long long threshold;
    memset(&a, 0, sizeof a);
    if (!PyArg_ParseTuple(args, "innnnnnnnnnn" "nnnnnn" "dLL" "nn" "pKKKKd",
                          &f64, &q, &a.qs0, &a.qs1, &k, &a.ks0, &a.ks1, &v, &a.vs0, &a.vs1,
                          &out, &lse, &a.sq, &a.sk, &a.d, &a.dv, &a.i0, &a.i1, &a.scale,
                          &a.lo, &a.hi, &a.bm, &a.bk, &a.dr.on, &threshold, &seed, &offset, &bh,
                          &a.keep_scale))
        return NULL;
    if (!blas_ready(f64, "fwd") ||
        !dropout_set(&a.dr, threshold, seed, offset, bh, a.sq, a.sk))
        return NULL;
    a.q = (const void *)q;
    a.k = (const void *)k;
    a.v = (const void *)v;
    a.out = (void *)out;
    a.lse = (void *)lse;
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = f64 ? fwd_item_f64(&a) : fwd_item_f32(&a);
    Py_END_ALLOW_THREADS
    if (!ok)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyObject *
py_bwd(PyObject *self, PyObject *args)
{
    BwdArgs a;
    int f64;
    Py_ssize_t q, k, v, o, g, lse, dq, dk, dv;
    unsigned long long seed, offset, bh;
    unsigned long long threshold;
    memset(&a, 0, sizeof a);
    if (!PyArg_ParseTuple(args, "innnnnnnnnnnnnnnnn" "nnn" "nnnn" "dLL" "nn" "pKKKKd",
                          &f64, &q, &a.qs0, &a.qs1, &k, &a.ks0, &a.ks1, &v, &a.vs0, &a.vs1,
                          &o, &a.os0, &a.os1, &g, &a.gs0, &a.gs1, &lse, &a.ls0, &dq, &dk, &dv,
                          &a.sq, &a.sk, &a.d, &a.dv, &a.scale, &a.lo, &a.hi, &a.bq, &a.bk,
                          &a.dr.on, &threshold, &seed, &offset, &bh, &a.keep_scale))
        return NULL;
    if (!blas_ready(f64, "bwd") ||
        !dropout_set(&a.dr, threshold, seed, offset, bh, a.sq, a.sk))
        return NULL;
    a.q = (const void *)q;
    a.k = (const void *)k;
    a.v = (const void *)v;
    a.o = (const void *)o;
    a.g = (const void *)g;
    a.lse = (const void *)lse;
    a.dq = (void *)dq;
    a.dk = (void *)dk;
    a.dv_ = (void *)dv;
    int ok;
    Py_BEGIN_ALLOW_THREADS
    ok = f64 ? bwd_head_f64(&a) : bwd_head_f32(&a);
    Py_END_ALLOW_THREADS
    if (!ok)
        return PyErr_NoMemory();
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"set_blas", py_set_blas, METH_VARARGS,
     "set_blas(sgemm, dgemm, int64): the addresses of cblas_sgemm and cblas_dgemm, and\n"
     "whether their integers are 64-bit."},
    {"fwd", py_fwd, METH_VARARGS,
     "fwd(f64, q, qs0, qs1, k, ks0, ks1, v, vs0, vs1, out, lse, sq, sk, d, dv, i0, i1,\n"
     "scale, lo, hi, bm, bk, dropout, threshold, seed, offset, bh, keep_scale): the forward of\n"
     "query rows [i0, i1) of one head (backends/numpy/attention.py, _fwd_compiled);\n"
     "threshold = floor(dropout_p * 2**40)."},
    {"bwd", py_bwd, METH_VARARGS,
     "bwd(f64, q, qs0, qs1, k, ks0, ks1, v, vs0, vs1, o, os0, os1, g, gs0, gs1, lse, ls0,\n"
     "dq, dk, dv, sq, sk, d, dv, scale, lo, hi, bq, bk, dropout, threshold, seed, offset,\n"
     "bh, keep_scale): the backward of one head (backends/numpy/attention.py,\n"
     "_bwd_compiled); threshold = floor(dropout_p * 2**40)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_attention_c",
    "The NumPy backend's attention in C (backends/numpy/_attention_c.c).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC
PyInit__attention_c(void)
{
    return PyModule_Create(&module);
}
