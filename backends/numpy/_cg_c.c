/* tessera_array.backends.numpy._cg_c: cg's iterations on a dense matrix in one C loop, for
 * the NumPy backend's fused CG (backends/numpy/cg.py, HostCG) on a real, unpreconditioned
 * system with a C-contiguous float32 or float64 matrix.
 *
 * What it computes. ``steps`` takes up to k iterations of HostCG's loop (the same tests in
 * the same order, the same status codes and iteration counts) with the GIL released:
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
 * dtype divide; the vector updates round the product, then the sum, as NumPy's two
 * ufuncs do (``y *= beta; y += z`` and ``y += alpha * x``): no fused multiply-adds
 * (-ffp-contract=off, set by setup.py and by the pragma below).
 *
 * Why. On a dense system of 513 the gemv is ~30 us of an iteration and the rest of
 * HostCG's Python iteration (five NumPy calls, the tests, the scalars) 10-15 us more;
 * here the rest is under a microsecond (benchmarks/NOTES.md, "cg on a dense matrix in
 * C").
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#endif

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

/* The loop for one dtype T and one BLAS integer I (32-bit, or 64-bit for an ILP64 build). */
#define STEPS(NAME, T, I)                                                                  \
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
                const T beta = rho / rho_prev;                                             \
                for (int64_t j = 0; j < n; ++j) {                                          \
                    const T t = p[j] * beta;                                               \
                    p[j] = t + r[j];                                                       \
                }                                                                          \
            } else {                                                                       \
                memcpy(p, r, (size_t)n * sizeof(T));                                       \
            }                                                                              \
            memset(q, 0, (size_t)n * sizeof(T)); /* (beta 0 never reads it) */            \
            gemv(COL_MAJOR, TRANS, m, m, (T)1, a, m, p, 1, (T)0, q, 1);                   \
            const T pq = dot(m, p, 1, q, 1);                                               \
            const T alpha = rho / pq;                                                      \
            pqf = (double)pq;                                                              \
            have_pq = 1;                                                                   \
            if (pqf > 0) {                                                                 \
                for (int64_t j = 0; j < n; ++j) {                                          \
                    const T t = alpha * p[j];                                              \
                    x[j] = x[j] + t;                                                       \
                }                                                                          \
            }                                                                              \
            for (int64_t j = 0; j < n; ++j) {                                              \
                const T t = alpha * q[j];                                                  \
                r[j] = r[j] - t;                                                           \
            }                                                                              \
            rho_prev = rho;                                                                \
            s->done = i + 1;                                                               \
        }                                                                                  \
        s->have_pq = have_pq;                                                              \
        s->pq = pqf;                                                                       \
        s->rho_prev = (double)rho_prev;                                                    \
    }

STEPS(steps_f64_i32, double, int32_t)
STEPS(steps_f64_i64, double, int64_t)
STEPS(steps_f32_i32, float, int32_t)
STEPS(steps_f32_i64, float, int64_t)

/* buf of at least need items of the dtype's size, C-contiguous (writable where asked) */
static int
take(Py_buffer *b, PyObject *o, Py_ssize_t need, Py_ssize_t size, int writable, const char *what)
{
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    if (b->itemsize != size || b->len < need * size) {
        PyBuffer_Release(b);
        PyErr_Format(PyExc_ValueError,
                     "_cg_c.steps: %s must hold %zd contiguous elements of %zd bytes", what,
                     need, size);
        return -1;
    }
    return 0;
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
                        "_cg_c.steps: BLAS addresses, n >= 1 (in the BLAS's integers) and "
                        "k, done >= 0 expected");
        return NULL;
    }
    const Py_ssize_t size = f64 ? 8 : 4;
    static const char *names[4] = {"x", "r", "p", "q"};
    Py_buffer ab, vb[4];
    if (take(&ab, ao, n * n, size, 0, "A") < 0)
        return NULL;
    int got = 0;
    for (; got < 4; ++got)
        if (take(&vb[got], vo[got], n, size, 1, names[got]) < 0)
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
        PyObject *list = PyList_New(s.count);
        for (Py_ssize_t j = 0; list != NULL && j < s.count; ++j) {
            PyObject *v = PyFloat_FromDouble(norms[j]);
            if (v == NULL)
                Py_CLEAR(list);
            else
                PyList_SET_ITEM(list, j, v);
        }
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
    {"steps", py_steps, METH_VARARGS,
     "steps(real64, blas64, gemv, dot, n, A, x, r, p, q, k, atol, done, have_pq, pq, "
     "rho_prev) -> (stopped, status, its, done, norms, pq, rho_prev): up to k of HostCG's "
     "iterations (see the C source's header); pq and rho_prev None before a step."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cg_c",
    "cg's iterations on a dense matrix in one C loop (see the C source's header).", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__cg_c(void)
{
    return PyModule_Create(&module);
}
