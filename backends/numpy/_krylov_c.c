/* tessera_array.backends.numpy._krylov_c: the NumPy backend's Krylov solvers' vector
 * updates, gmres's modified Gram-Schmidt, and cg's iterations on a dense matrix in one C
 * loop.
 *
 * ``update`` (backends/numpy/matvec.py: axpy, aypx): y += a x, y -= a x or y = a y + x over
 * [lo, hi) of two float32/float64 vectors, with the GIL released, rounded as NumPy's two
 * ufuncs round them (the product, then the sum): one pass over the vectors where NumPy
 * makes two (and a temporary or a scratch block).
 *
 * ``mgs`` (backends/numpy/krylov.py): gmres's modified Gram-Schmidt of w against the
 * basis rows, h_k = v_k . w then w -= h_k v_k in turn: the loop's dots and updates.
 *
 * ``steps`` (backends/numpy/cg.py, HostCG): up to k iterations of HostCG's loop on a real,
 * unpreconditioned system with a C-contiguous float32 or float64 matrix (the same tests in
 * the same order, the same status codes and iteration counts), with the GIL released:
 *
 *     rho = r . r; ||r|| = sqrt(rho) in double; the stopping tests;
 *     p = r + (rho / rho_prev) p;  q = A p;  pq = p . q;  alpha = rho / pq;
 *     x += alpha p (where pq > 0);  r -= alpha q.
 *
 * Numerics: SciPy's cg bit for bit, as HostCG's NumPy calls are. The products and dots are
 * the calls NumPy makes, into the same library: ``cblas_?gemv`` as NumPy's matmul of a
 * C-contiguous matrix by a vector calls it (column-major, transposed, alpha 1, beta 0)
 * and ``cblas_?dot`` as ``ndarray.dot`` of two contiguous vectors does (float32's own
 * sum, then widened and narrowed again by NumPy: the same value), at addresses the caller
 * reads from NumPy's OpenBLAS and checks against NumPy on random data before using them
 * (cg.py). The scalars are divided in the vectors' dtype, as NumPy's scalars of that
 * dtype divide; every update rounds the product, then the sum, as NumPy's two ufuncs do
 * (``y *= beta; y += z`` and ``y += alpha * x``): no fused multiply-adds
 * (-ffp-contract=off, set by setup.py and by the pragma below), so the bits are the same
 * on each instruction set the update loops are compiled for (x86-64-v4, v3 and the
 * baseline, picked when the module loads; -DTESSERA_NO_CLONES compiles one, for the
 * -march given: tests/test_krylov_c.py builds v3 and the baseline so).
 *
 * Why. On a dense system of 513 the gemv is ~30 us of an iteration and the rest of
 * HostCG's Python iteration (five NumPy calls, the tests, the scalars) 10-15 us more;
 * here the rest is under a microsecond. gmres's modified Gram-Schmidt is an axpy per
 * basis vector (benchmarks/NOTES.md, "The Krylov updates in C").
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(TESSERA_NO_CLONES)
#define TESSERA_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", \
                                                    "default")))
#else
#define TESSERA_CLONES
#endif

/* ---- the updates ------------------------------------------------------------------------ */

enum { AXPY = 0, AXMY = 1, AYPX = 2 }; /* y += a x; y -= a x; y = a y + x */

#define UPDATE(NAME, T)                                                                    \
    static void TESSERA_CLONES NAME(int kind, T a, const T *x, T *y, int64_t lo, int64_t hi) \
    {                                                                                      \
        if (kind == AXPY) {                                                                \
            for (int64_t i = lo; i < hi; ++i) {                                            \
                const T t = a * x[i];                                                      \
                y[i] = y[i] + t;                                                           \
            }                                                                              \
        } else if (kind == AXMY) {                                                         \
            for (int64_t i = lo; i < hi; ++i) {                                            \
                const T t = a * x[i];                                                      \
                y[i] = y[i] - t;                                                           \
            }                                                                              \
        } else {                                                                           \
            for (int64_t i = lo; i < hi; ++i) {                                            \
                const T t = y[i] * a;                                                      \
                y[i] = t + x[i];                                                           \
            }                                                                              \
        }                                                                                  \
    }

UPDATE(update_f64, double)
UPDATE(update_f32, float)

/* ---- cg's loop on a dense matrix ---------------------------------------------------------- */

#define COL_MAJOR 102 /* CBLAS_ORDER's CblasColMajor */
#define TRANS 112     /* CBLAS_TRANSPOSE's CblasTrans */

/* HostCG's CGStatus values (tessera_array/sparse/linalg/_fused.py) */
#define CONVERGED 0
#define NONFINITE (-20)
#define INDEFINITE (-30)

typedef struct {
    int64_t done;     /* steps taken before the call, then after it */
    int have_pq;      /* a step was taken: pq and rho_prev hold its values */
    double pq;        /* the last step's p . q (its dtype's value, widened) */
    double rho_prev;  /* the last step's r . r (likewise) */
    int broke;        /* a test stopped the loop: status and its are set */
    int status;
    int64_t its;
    int64_t count;    /* norms written */
} State;

/* The loop for one dtype T and one BLAS integer I (32-bit, or 64-bit for an ILP64 build);
 * UPD the dtype's update. */
#define STEPS(NAME, T, I, UPD)                                                                \
    typedef void (*NAME##_gemv_t)(int, int, I, I, T, const T *, I, const T *, I, T, T *,  \
                                  I);                                                      \
    typedef T (*NAME##_dot_t)(I, const T *, I, const T *, I);                              \
    static void NAME(void *gemv_p, void *dot_p, int64_t n, const T *a, T *x, T *r, T *p,   \
                     T *q, int64_t k, double atol, State *s, double *norms)                \
    {                                                                                      \
        NAME##_gemv_t gemv = (NAME##_gemv_t)gemv_p;                                        \
        NAME##_dot_t dot = (NAME##_dot_t)dot_p;                                            \
        const I m = (I)n;                                                                  \
        T rho_prev = (T)s->rho_prev;                                                       \
        double pqf = s->pq;                                                                \
        int have_pq = s->have_pq;                                                          \
        for (int64_t step = 0; step < k; ++step) {                                         \
            const int64_t i = s->done;                                                     \
            const T rho = dot(m, r, 1, r, 1);                                              \
            const double rnorm = sqrt((double)rho);                                        \
            norms[s->count++] = rnorm;                                                     \
            if (have_pq && !(pqf > 0)) { /* the last step's p . A p <= 0, or NaN */        \
                s->status = isfinite(rnorm) && pqf <= 0 ? INDEFINITE : NONFINITE;         \
                s->its = i - 1;                                                            \
                s->broke = 1;                                                              \
                break;                                                                     \
            }                                                                              \
            if (rnorm < atol) {                                                            \
                s->status = CONVERGED;                                                     \
                s->its = i;                                                                \
                s->broke = 1;                                                              \
                break;                                                                     \
            }                                                                              \
            if (!isfinite(rnorm)) {                                                        \
                s->status = NONFINITE;                                                     \
                s->its = i;                                                                \
                s->broke = 1;                                                              \
                break;                                                                     \
            }                                                                              \
            if (i > 0) {                                                                   \
                UPD(AYPX, rho / rho_prev, r, p, 0, n);                                     \
            } else {                                                                       \
                memcpy(p, r, (size_t)n * sizeof(T));                                       \
            }                                                                              \
            /* (beta 0: q is not read, as NumPy's fresh output is not) */                 \
            gemv(COL_MAJOR, TRANS, m, m, (T)1, a, m, p, 1, (T)0, q, 1);                   \
            const T pq = dot(m, p, 1, q, 1);                                               \
            const T alpha = rho / pq;                                                      \
            pqf = (double)pq;                                                              \
            have_pq = 1;                                                                   \
            if (pqf > 0)                                                                   \
                UPD(AXPY, alpha, p, x, 0, n);                                              \
            UPD(AXMY, alpha, q, r, 0, n);                                                  \
            rho_prev = rho;                                                                \
            s->done = i + 1;                                                               \
        }                                                                                  \
        s->have_pq = have_pq;                                                              \
        s->pq = pqf;                                                                       \
        s->rho_prev = (double)rho_prev;                                                    \
    }

STEPS(steps_f64_i32, double, int32_t, update_f64)
STEPS(steps_f64_i64, double, int64_t, update_f64)
STEPS(steps_f32_i32, float, int32_t, update_f32)
STEPS(steps_f32_i64, float, int64_t, update_f32)

/* Modified Gram-Schmidt of w against the count rows of V (n apart), as gmres's loop takes
 * it: t = v_k . w (the BLAS dot), h[k] = t, w -= t v_k (the update), for k = 0, 1, ... */
#define MGS(NAME, T, I, UPD)                                                               \
    static void NAME(void *dot_p, int64_t n, const T *V, T *w, int64_t count, double *h)  \
    {                                                                                      \
        T (*dot)(I, const T *, I, const T *, I) = (T(*)(I, const T *, I, const T *, I))dot_p; \
        for (int64_t k = 0; k < count; ++k) {                                              \
            const T *v = V + k * n;                                                        \
            const T t = dot((I)n, v, 1, w, 1);                                             \
            h[k] = (double)t;                                                              \
            UPD(AXMY, t, v, w, 0, n);                                                      \
        }                                                                                  \
    }

MGS(mgs_f64_i32, double, int32_t, update_f64)
MGS(mgs_f64_i64, double, int64_t, update_f64)
MGS(mgs_f32_i32, float, int32_t, update_f32)
MGS(mgs_f32_i64, float, int64_t, update_f32)

/* A new list of the n doubles at v, as Python floats (NULL with an error set on failure). */
static PyObject *
floats(const double *v, Py_ssize_t n)
{
    PyObject *list = PyList_New(n);
    for (Py_ssize_t j = 0; list != NULL && j < n; ++j) {
        PyObject *f = PyFloat_FromDouble(v[j]);
        if (f == NULL)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, j, f);
    }
    return list;
}

/* buf of at least need items of the dtype's size, C-contiguous (writable where asked) */
static int
take(Py_buffer *b, PyObject *o, Py_ssize_t need, Py_ssize_t size, int writable, const char *fn,
     const char *what)
{
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (b->itemsize != size || b->len < need * size) {
        PyBuffer_Release(b);
        PyErr_Format(PyExc_ValueError,
                     "_krylov_c.%s: %s must hold %zd contiguous elements of %zd bytes", fn,
                     what, need, size);
        return -1;
    }
    return 0;
}

static PyObject *
py_update(PyObject *self, PyObject *args)
{
    int kind;
    double a;
    Py_ssize_t lo, hi;
    PyObject *xo, *yo;
    if (!PyArg_ParseTuple(args, "idOOnn", &kind, &a, &xo, &yo, &lo, &hi))
        return NULL;
    Py_buffer xb, yb;
    if (PyObject_GetBuffer(xo, &xb, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return NULL;
    if (PyObject_GetBuffer(yo, &yb, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&xb);
        return NULL;
    }
    const char fx = xb.format ? xb.format[0] : 0, fy = yb.format ? yb.format[0] : 0;
    const int f64 = fy == 'd';
    const Py_ssize_t size = f64 ? 8 : 4;
    if (kind < AXPY || kind > AYPX || fx != fy || (fy != 'd' && fy != 'f')
        || xb.itemsize != size || yb.itemsize != size || lo < 0 || hi < lo
        || xb.len < hi * size || yb.len < hi * size) {
        PyBuffer_Release(&xb);
        PyBuffer_Release(&yb);
        PyErr_SetString(PyExc_ValueError,
                        "_krylov_c.update: kind 0-2, x and y contiguous float32 or float64 of "
                        "one dtype, holding [lo, hi) with 0 <= lo <= hi");
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    if (f64)
        update_f64(kind, a, (const double *)xb.buf, (double *)yb.buf, lo, hi);
    else
        update_f32(kind, (float)a, (const float *)xb.buf, (float *)yb.buf, lo, hi);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&xb);
    PyBuffer_Release(&yb);
    Py_RETURN_NONE;
}

static PyObject *
py_mgs(PyObject *self, PyObject *args)
{
    int f64, i64;
    Py_ssize_t dot, n, count;
    PyObject *vo, *wo;
    if (!PyArg_ParseTuple(args, "ppnnOOn", &f64, &i64, &dot, &n, &vo, &wo, &count))
        return NULL;
    if (!dot || n < 1 || count < 0 || (!i64 && n > INT32_MAX)) {
        PyErr_SetString(PyExc_ValueError,
                        "_krylov_c.mgs: a BLAS address, n >= 1 (in the BLAS's integers) and "
                        "count >= 0 expected");
        return NULL;
    }
    const Py_ssize_t size = f64 ? 8 : 4;
    Py_buffer vb, wb;
    if (take(&vb, vo, count * n, size, 0, "mgs", "V") < 0)
        return NULL;
    if (take(&wb, wo, n, size, 1, "mgs", "w") < 0) {
        PyBuffer_Release(&vb);
        return NULL;
    }
    double *h = PyMem_RawMalloc((size_t)(count ? count : 1) * sizeof(double));
    PyObject *list = NULL;
    if (h == NULL) {
        PyErr_NoMemory();
    } else {
        void *d = (void *)dot;
        Py_BEGIN_ALLOW_THREADS
        if (f64 && i64)
            mgs_f64_i64(d, n, vb.buf, wb.buf, count, h);
        else if (f64)
            mgs_f64_i32(d, n, vb.buf, wb.buf, count, h);
        else if (i64)
            mgs_f32_i64(d, n, vb.buf, wb.buf, count, h);
        else
            mgs_f32_i32(d, n, vb.buf, wb.buf, count, h);
        Py_END_ALLOW_THREADS
        list = floats(h, count);
        PyMem_RawFree(h);
    }
    PyBuffer_Release(&vb);
    PyBuffer_Release(&wb);
    return list;
}

static PyObject *
py_steps(PyObject *self, PyObject *args)
{
    int f64, i64, have_pq;
    Py_ssize_t gemv, dot, n, k, done;
    double atol, pq, rho_prev;
    PyObject *ao, *vo[4];
    if (!PyArg_ParseTuple(args, "ppnnnOOOOOndnpdd", &f64, &i64, &gemv, &dot, &n, &ao, &vo[0],
                          &vo[1], &vo[2], &vo[3], &k, &atol, &done, &have_pq, &pq, &rho_prev))
        return NULL;
    if (!gemv || !dot || n < 1 || k < 0 || done < 0 || (!i64 && n > INT32_MAX)) {
        PyErr_SetString(PyExc_ValueError,
                        "_krylov_c.steps: BLAS addresses, n >= 1 (in the BLAS's integers) and "
                        "k, done >= 0 expected");
        return NULL;
    }
    const Py_ssize_t size = f64 ? 8 : 4;
    static const char *names[4] = {"x", "r", "p", "q"};
    Py_buffer ab, vb[4];
    if (take(&ab, ao, n * n, size, 0, "steps", "A") < 0)
        return NULL;
    int got = 0;
    for (; got < 4; ++got)
        if (take(&vb[got], vo[got], n, size, 1, "steps", names[got]) < 0)
            break;
    double *norms = got == 4 ? PyMem_RawMalloc((size_t)(k ? k : 1) * sizeof(double)) : NULL;
    if (got == 4 && norms == NULL)
        PyErr_NoMemory();
    if (norms != NULL) {
        State s = {done, have_pq, pq, rho_prev, 0, 0, 0, 0};
        void *g = (void *)gemv, *d = (void *)dot;
        Py_BEGIN_ALLOW_THREADS
        if (f64 && i64)
            steps_f64_i64(g, d, n, ab.buf, vb[0].buf, vb[1].buf, vb[2].buf, vb[3].buf, k,
                          atol, &s, norms);
        else if (f64)
            steps_f64_i32(g, d, n, ab.buf, vb[0].buf, vb[1].buf, vb[2].buf, vb[3].buf, k,
                          atol, &s, norms);
        else if (i64)
            steps_f32_i64(g, d, n, ab.buf, vb[0].buf, vb[1].buf, vb[2].buf, vb[3].buf, k,
                          atol, &s, norms);
        else
            steps_f32_i32(g, d, n, ab.buf, vb[0].buf, vb[1].buf, vb[2].buf, vb[3].buf, k,
                          atol, &s, norms);
        Py_END_ALLOW_THREADS
        PyObject *list = floats(norms, s.count);
        PyMem_RawFree(norms);
        norms = NULL;
        PyObject *pqo = NULL, *rho = NULL, *out = NULL;
        if (s.have_pq) {
            pqo = PyFloat_FromDouble(s.pq);
            rho = PyFloat_FromDouble(s.rho_prev);
        } else { /* (no step yet: pq and rho_prev unset) */
            Py_INCREF(Py_None);
            Py_INCREF(Py_None);
            pqo = rho = Py_None;
        }
        if (list != NULL && pqo != NULL && rho != NULL)
            out = Py_BuildValue("(OiLLOOO)", s.broke ? Py_True : Py_False, s.status,
                                (long long)s.its, (long long)s.done, list, pqo, rho);
        Py_XDECREF(list);
        Py_XDECREF(pqo);
        Py_XDECREF(rho);
        for (int j = 0; j < 4; ++j)
            PyBuffer_Release(&vb[j]);
        PyBuffer_Release(&ab);
        return out;
    }
    for (int j = 0; j < got; ++j)
        PyBuffer_Release(&vb[j]);
    PyBuffer_Release(&ab);
    return NULL;
}

static PyMethodDef methods[] = {
    {"update", py_update, METH_VARARGS,
     "update(kind, a, x, y, lo, hi): y[lo:hi] += a x (kind 0), -= a x (1) or = a y + x (2), "
     "rounded as NumPy's two ufuncs; a is rounded to the vectors' dtype first."},
    {"mgs", py_mgs, METH_VARARGS,
     "mgs(real64, blas64, dot, n, V, w, count) -> h: modified Gram-Schmidt of w (in place) "
     "against V's first count rows, h[k] = v_k . w before v_k's update."},
    {"steps", py_steps, METH_VARARGS,
     "steps(real64, blas64, gemv, dot, n, A, x, r, p, q, k, atol, done, have_pq, pq, "
     "rho_prev) -> (stopped, status, its, done, norms, pq, rho_prev): up to k of HostCG's "
     "iterations (see the C source's header); pq and rho_prev None before a step."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_krylov_c",
    "The Krylov solvers' vector updates, and cg's iterations on a dense matrix in C (see "
    "the C source's header).", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__krylov_c(void)
{
    return PyModule_Create(&module);
}
