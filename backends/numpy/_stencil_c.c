/* tessera_array.backends.numpy._stencil_c: the product of a CSR matrix whose rows are a
 * stencil (the same few diagonals), for the Krylov solvers' repeated products on the CPU.
 *
 * What it computes. y = A x for a square real CSR A (float32 or float64 data, int32 or
 * int64 indices and row starts, both of one dtype) and a stencil off[0] < ... < off[D-1]
 * (D <= MAXD): ``scan`` finds the runs of consecutive rows that are exactly the stencil
 * (row i's entries at columns i + off[d], in that order, each once) and lists every other
 * row; ``runs`` computes the runs' rows without reading their column indices (a run's
 * values lie D to a row from its first row's start, its x at i + off[d]: no index loads,
 * no gathers; the loop over d unrolled for D = 3, 5, 7, 9), ``csr`` the listed rows as the
 * CSR loop; each with the GIL released. backends/numpy/sparse.py (Stencil) says when this
 * path is taken.
 *
 * Numerics: the bits of SciPy's csr_matvec. Each row is summed as csr_matvec sums it:
 * from +0, each product rounded, then added, in storage order (which is offset order on
 * a run's rows). Products are never contracted into fused multiply-adds (-ffp-contract=off,
 * set by setup.py and by the pragma below), so the result is the same bits whatever the
 * instruction set the compiler targets (tests/test_stencil.py builds x86-64-v3 and the
 * baseline).
 *
 * Why. csr_matvec reads an index and a value per entry and gathers x. 2-D Poisson, a
 * stencil of 5 (2-core EPYC, us a product, warm / caches flushed): 256^2 float64 203 / 513
 * against 111 / 284 over the runs; 512^2 1595 / 1648 against 1015 / 1188
 * (benchmarks/NOTES.md).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

#define MAXD 32 /* the most diagonals a stencil may have */

/* ---- a run's rows: [a, b) with their values from base, D to a row --------------------- */

/* One run, row by row: the row's D values are contiguous, its x at i + off[d]. ND a
 * constant (the common stencils: the loop over d unrolled) or 0 (D from nd). */
#define RUN(NAME, T, ND)                                                                   \
    static void NAME(int64_t a, int64_t b, int nd, const int64_t *off, const T *v,         \
                     const T *x, T *y)                                                     \
    {                                                                                      \
        const int D = ND ? ND : nd;                                                        \
        int64_t o[MAXD];                                                                   \
        for (int d = 0; d < D; ++d) o[d] = off[d];                                         \
        for (int64_t i = a; i < b; ++i, v += D) {                                          \
            T s = (T)0;                                                                    \
            _Pragma("GCC unroll 16")                                                       \
            for (int d = 0; d < D; ++d) s += v[d] * x[i + o[d]];                           \
            y[i] = s;                                                                      \
        }                                                                                  \
    }

#define RUNS(NAME, T)                                                                      \
    RUN(NAME##_3, T, 3)                                                                    \
    RUN(NAME##_5, T, 5)                                                                    \
    RUN(NAME##_7, T, 7)                                                                    \
    RUN(NAME##_9, T, 9)                                                                    \
    RUN(NAME##_any, T, 0)                                                                  \
    static void NAME(int64_t count, const int64_t *runs, int nd,                           \
                                    const int64_t *off, const T *data, const T *x, T *y)   \
    {                                                                                      \
        for (int64_t r = 0; r < count; ++r) {                                              \
            const int64_t a = runs[3 * r], b = runs[3 * r + 1];                            \
            const T *v = data + runs[3 * r + 2];                                           \
            switch (nd) {                                                                  \
            case 3: NAME##_3(a, b, nd, off, v, x, y); break;                               \
            case 5: NAME##_5(a, b, nd, off, v, x, y); break;                               \
            case 7: NAME##_7(a, b, nd, off, v, x, y); break;                               \
            case 9: NAME##_9(a, b, nd, off, v, x, y); break;                               \
            default: NAME##_any(a, b, nd, off, v, x, y);                                   \
            }                                                                              \
        }                                                                                  \
    }

RUNS(runs_f64, double)
RUNS(runs_f32, float)

/* ---- listed rows from the CSR arrays, as csr_matvec sums them ----------------------- */

#define CSR(NAME, T, I)                                                                    \
    static void NAME(int64_t count, const int64_t *rows, const I *ptr, const I *idx,       \
                     const T *val, const T *x, T *y)                                       \
    {                                                                                      \
        for (int64_t r = 0; r < count; ++r) {                                              \
            const int64_t i = rows[r];                                                     \
            T s = (T)0;                                                                    \
            for (I j = ptr[i]; j < ptr[i + 1]; ++j) s += val[j] * x[idx[j]];               \
            y[i] = s;                                                                      \
        }                                                                                  \
    }

CSR(csr_f64_i32, double, int32_t)
CSR(csr_f64_i64, double, int64_t)
CSR(csr_f32_i32, float, int32_t)
CSR(csr_f32_i64, float, int64_t)

/* ---- the runs of a CSR matrix ------------------------------------------------------- */

/* A growing int64 list (PyMem_RawMalloc: no GIL needed). */
typedef struct {
    int64_t *v;
    int64_t len, cap;
} List;

static int
push(List *l, int64_t x)
{
    if (l->len == l->cap) {
        const int64_t cap = l->cap ? 2 * l->cap : 1024;
        int64_t *v = (int64_t *)PyMem_RawRealloc(l->v, (size_t)cap * sizeof(int64_t));
        if (v == NULL)
            return -1;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->len++] = x;
    return 0;
}

/* Row i is the stencil: nd entries at i + off[d], in order. Runs of such rows into runs
 * (a, b, ptr[a]); every other row into rest. -1: out of memory. */
#define SCAN(NAME, I)                                                                      \
    static int NAME(int64_t n, const I *ptr, const I *idx, int nd, const int64_t *off,     \
                    List *runs, List *rest)                                                \
    {                                                                                      \
        int64_t a = -1;                                                                    \
        for (int64_t i = 0; i <= n; ++i) {                                                 \
            int full = 0;                                                                  \
            if (i < n && (int64_t)(ptr[i + 1] - ptr[i]) == nd) {                           \
                const I *c = idx + ptr[i];                                                 \
                full = 1;                                                                  \
                for (int d = 0; d < nd && full; ++d)                                       \
                    full = (int64_t)c[d] - i == off[d];                                    \
            }                                                                              \
            if (full) {                                                                    \
                if (a < 0) a = i;                                                          \
                continue;                                                                  \
            }                                                                              \
            if (a >= 0) {                                                                  \
                if (push(runs, a) || push(runs, i) || push(runs, (int64_t)ptr[a]))         \
                    return -1;                                                             \
                a = -1;                                                                    \
            }                                                                              \
            if (i < n && push(rest, i))                                                    \
                return -1;                                                                 \
        }                                                                                  \
        return 0;                                                                          \
    }

SCAN(scan_i32, int32_t)
SCAN(scan_i64, int64_t)

/* ---- Python entry points: addresses and sizes, checked by the caller ------------------ */

static PyObject *
list_bytes(List *l)
{
    PyObject *b = PyBytes_FromStringAndSize((const char *)l->v, (Py_ssize_t)(l->len * 8));
    PyMem_RawFree(l->v);
    l->v = NULL;
    return b;
}

static PyObject *
py_scan(PyObject *self, PyObject *args)
{
    Py_ssize_t n, ptr, idx, off;
    int i64, nd;
    if (!PyArg_ParseTuple(args, "nnnpin", &n, &ptr, &idx, &i64, &nd, &off))
        return NULL;
    if (nd < 1 || nd > MAXD) {
        PyErr_Format(PyExc_ValueError, "scan: a stencil of 1 to %d diagonals", MAXD);
        return NULL;
    }
    List runs = {NULL, 0, 0}, rest = {NULL, 0, 0};
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = i64 ? scan_i64(n, (const int64_t *)ptr, (const int64_t *)idx, nd,
                            (const int64_t *)off, &runs, &rest)
                 : scan_i32(n, (const int32_t *)ptr, (const int32_t *)idx, nd,
                            (const int64_t *)off, &runs, &rest);
    Py_END_ALLOW_THREADS
    if (status < 0) {
        PyMem_RawFree(runs.v);
        PyMem_RawFree(rest.v);
        return PyErr_NoMemory();
    }
    PyObject *r = list_bytes(&runs), *f = list_bytes(&rest);
    if (r == NULL || f == NULL) {
        Py_XDECREF(r);
        Py_XDECREF(f);
        return NULL;
    }
    return Py_BuildValue("(NN)", r, f);
}

/* x and y as buffers (contiguous; y writable), each of at least n items of the dtype. */
static int
vectors(Py_buffer *xb, Py_buffer *yb, PyObject *x, PyObject *y, Py_ssize_t n, int f64)
{
    const Py_ssize_t need = n * (f64 ? 8 : 4);
    if (PyObject_GetBuffer(x, xb, PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (PyObject_GetBuffer(y, yb, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(xb);
        return -1;
    }
    if (xb->len < need || yb->len < need || xb->itemsize != (f64 ? 8 : 4)
        || yb->itemsize != (f64 ? 8 : 4)) {
        PyBuffer_Release(xb);
        PyBuffer_Release(yb);
        PyErr_SetString(PyExc_ValueError, "_stencil_c: x and y must hold n elements of the matrix's dtype");
        return -1;
    }
    return 0;
}

static PyObject *
py_runs(PyObject *self, PyObject *args)
{
    Py_ssize_t n, count, runs, off, data;
    int nd, f64;
    PyObject *x, *y;
    if (!PyArg_ParseTuple(args, "nnninnOOp", &n, &count, &runs, &nd, &off, &data, &x, &y,
                          &f64))
        return NULL;
    if (nd < 1 || nd > MAXD) {
        PyErr_Format(PyExc_ValueError, "runs: a stencil of 1 to %d diagonals", MAXD);
        return NULL;
    }
    Py_buffer xb, yb;
    if (vectors(&xb, &yb, x, y, n, f64) < 0)
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    if (f64)
        runs_f64(count, (const int64_t *)runs, nd, (const int64_t *)off, (const double *)data,
                 (const double *)xb.buf, (double *)yb.buf);
    else
        runs_f32(count, (const int64_t *)runs, nd, (const int64_t *)off, (const float *)data,
                 (const float *)xb.buf, (float *)yb.buf);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&xb);
    PyBuffer_Release(&yb);
    Py_RETURN_NONE;
}

static PyObject *
py_csr(PyObject *self, PyObject *args)
{
    Py_ssize_t n, count, rows, ptr, idx, data;
    int i64, f64;
    PyObject *x, *y;
    if (!PyArg_ParseTuple(args, "nnnnnnOOpp", &n, &count, &rows, &ptr, &idx, &data, &x, &y,
                          &i64, &f64))
        return NULL;
    Py_buffer xb, yb;
    if (vectors(&xb, &yb, x, y, n, f64) < 0)
        return NULL;
    const int64_t *r = (const int64_t *)rows;
    void *xv = xb.buf, *yv = yb.buf;
    Py_BEGIN_ALLOW_THREADS
    if (f64 && i64)
        csr_f64_i64(count, r, (const int64_t *)ptr, (const int64_t *)idx, (const double *)data,
                    (const double *)xv, (double *)yv);
    else if (f64)
        csr_f64_i32(count, r, (const int32_t *)ptr, (const int32_t *)idx, (const double *)data,
                    (const double *)xv, (double *)yv);
    else if (i64)
        csr_f32_i64(count, r, (const int64_t *)ptr, (const int64_t *)idx, (const float *)data,
                    (const float *)xv, (float *)yv);
    else
        csr_f32_i32(count, r, (const int32_t *)ptr, (const int32_t *)idx, (const float *)data,
                    (const float *)xv, (float *)yv);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&xb);
    PyBuffer_Release(&yb);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"scan", py_scan, METH_VARARGS,
     "scan(n, indptr, indices, index64, D, offsets) -> (runs, rest): bytes of int64 "
     "triples (a, b, indptr[a]), one per run of rows that are the stencil, and of the "
     "other rows."},
    {"runs", py_runs, METH_VARARGS,
     "runs(n, count, runs, D, offsets, data, x, y, real64): the runs' rows of y (x, y: "
     "contiguous buffers of n elements)."},
    {"csr", py_csr, METH_VARARGS,
     "csr(n, count, rows, indptr, indices, data, x, y, index64, real64): the listed rows of "
     "y as csr_matvec sums them."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_stencil_c",
    "The product of a CSR matrix whose rows are a stencil (see the C source's header).",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__stencil_c(void)
{
    return PyModule_Create(&module);
}
