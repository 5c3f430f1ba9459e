/* tessera_array._arrayobject: the hot half of the Array object, in C.
 *
 * What it is. ``ArrayBase``, the base class of ``tessera_array.Array``: the three fields
 * of an array (the backend's native buffer, its DType, its Device) as C members, and the
 * short paths of the operators (+ - * / // % & | ^ << >>, the six comparisons) and of
 * ``x[i]`` / ``x[a:b]``, and of the unary - + abs ~. ``Function``, a callable holding the
 * same short path for a namespace function of one or two arrays (``tessera_array.add``,
 * ``exp``, ``sum`` and the other elementwise functions).
 *
 * The short path is the one the Python methods take (tessera_array/_array.py): two
 * arrays of the very class Array, of one DType (the same object) on one Device (the
 * same object), of a DType the op computes in itself: the Device's native op
 * (``device.ops.<name>``) is called on the two buffers, a result of another class than
 * the first buffer's is passed through ``device._backend.coerce_native``, and the result
 * is a new Array of the operands' DType (or the op's result DType: bool for the
 * comparisons). Everything else -- a Python scalar, promotion, another device, a native
 * error (one of the classes given as ``native_errors``: a floating-point warning made an
 * error, a bad value) -- calls the Python function the op was installed with, which
 * decides as before: this module adds no semantics, it only skips the Python frames
 * of the common case. The native op runs with floating-point reporting off where the
 * ops ask for it (``ops.quiet_context``: read_quiet below says why and how).
 *
 * Why. A Python ``__add__`` called from the binary-op slot costs CPython 3.11 about as
 * many instructions as NumPy's whole ``a + b`` of one element (benchmarks/NOTES.md: 6,509
 * against 3,312 per call under callgrind); the slot in C leaves the native op, two
 * attribute reads and one allocation. Size 1, float64, tessera / NumPy, the range of three
 * runs of ``python -m benchmarks --suite overhead --quick`` (a 2-core Xeon Sapphire
 * Rapids VM, NumPy 2.4.6, SIMD baseline X86_V2, found up to AVX512_SPR):
 *
 *                 Python methods   this module   the target
 *     x + y           1.81           1.35-1.39      <= 1.5
 *     xp.add          1.98           1.41-1.44      <= 1.5
 *     xp.sum          1.35           1.21-1.24      <= 1.3
 *     x[i]            6.6-7.1        2.60-2.67      <= 3
 *     x[a:b]          4.0-4.2        1.56-1.60      <= 2.5
 *
 * Since then device.ops is read from its slot and the last thread's quiet context is
 * kept (device_ops, thread_quiet_context): xp.add 1.49-1.51 -> 1.34-1.40, x + y 1.43 ->
 * 1.32-1.35, xp.sum 1.20 -> 1.14-1.15 (the 2-core EPYC VM, found up to AVX512_ICL; three
 * runs; callgrind: ~5,470 -> ~5,150 instructions an xp.add).
 *
 * The front end is otherwise pure Python (STYLE.md's layout); this is its one compiled
 * part, because no Python method reaches those targets on this interpreter.
 *
 * Built by setup.py as an optional extension: where no C compiler (or no Python.h) is
 * found, Array is the pure Python class and everything behaves the same, slower.
 * TESSERA_PURE_PYTHON=1 makes Array the pure Python class although this module is built.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <descrobject.h>

typedef struct {
    PyObject_HEAD
    PyObject *data;   /* the backend's native buffer */
    PyObject *dtype;  /* a tessera_array DType */
    PyObject *device; /* a tessera_array Device */
    PyObject *weakrefs;
} ArrayObject;

/* One op's short path: what the Python method checks, and what it falls back to. */
typedef struct {
    PyObject *name;     /* the native op's attribute name on device.ops */
    PyObject *allowed;  /* tuple of the DTypes computed in themselves; NULL: every DType */
    PyObject *result;   /* the result's DType; NULL: the operands' */
    PyObject *fallback; /* the Python function: fallback(x1, x2) */
    PyObject *reflected; /* reflected(self, other) for ``other <op> self``; NULL: none */
    PyObject *ops;      /* cache: the last device.ops seen, and its op */
    PyObject *fn;
    PyObject *qvar;     /* cache: ops.quiet_context, a (ContextVar, value) pair: the */
    PyObject *qval;     /* op runs with qvar set to qval; NULL: the op runs as it is */
    int qoff;           /* cache: ops.quiet_context is False: no short path on these ops */
} Spec;

enum {
    OP_ADD, OP_SUB, OP_MUL, OP_TRUEDIV, OP_FLOORDIV, OP_MOD,
    OP_AND, OP_OR, OP_XOR, OP_LSHIFT, OP_RSHIFT,
    OP_LT, OP_LE, OP_EQ, OP_NE, OP_GT, OP_GE, /* in the order of Py_LT .. Py_GE */
    OP_NEG, OP_POS, OP_ABS, OP_INVERT, /* unary */
    N_OPS
};

static PyTypeObject ArrayBase_Type;
static PyTypeObject Function_Type;

static PyTypeObject *array_cls;  /* tessera_array.Array, once installed */
static PyObject *native_errors;  /* tuple of exception classes */
static PyObject *getitem_fallback;
static PyObject *views_device; /* the last Device seen whose views trait is True */
static Spec operators[N_OPS];
static PyObject *str_ops, *str_views, *str_backend, *str_coerce, *str_quiet;

/* ---- the short path ------------------------------------------------------------ */

static PyObject *
wrap(PyObject *data, PyObject *dtype, PyObject *device)
{
    /* A new Array holding ``data`` (a new reference, stolen). */
    ArrayObject *obj = (ArrayObject *)array_cls->tp_alloc(array_cls, 0);
    if (obj == NULL) {
        Py_DECREF(data);
        return NULL;
    }
    obj->data = data;
    Py_INCREF(dtype);
    obj->dtype = dtype;
    Py_INCREF(device);
    obj->device = device;
    return (PyObject *)obj;
}

static int
allowed(const Spec *s, PyObject *dtype)
{
    if (s->allowed == NULL) {
        return 1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(s->allowed);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (PyTuple_GET_ITEM(s->allowed, i) == dtype) {
            return 1;
        }
    }
    return 0;
}

/* Read ops.quiet_context into the cache of s: a (ContextVar, value) pair under which
 * the ops report no floating-point flags (NumPy's errstate(all="ignore"): the warning
 * filter that silences them on the Python path matches only warnings issued from
 * tessera_array's own frames, and on this path the issuing frame is the caller's);
 * None or absent: the ops issue none; False: they do and cannot be silenced here, so
 * every call takes the Python path. */
static int
read_quiet(Spec *s, PyObject *ops)
{
    Py_CLEAR(s->qvar);
    Py_CLEAR(s->qval);
    s->qoff = 0;
    PyObject *q = PyObject_GetAttr(ops, str_quiet);
    if (q == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return -1;
        }
        PyErr_Clear();
    }
    if (q == NULL || q == Py_None) {
        Py_XDECREF(q);
        return 0;
    }
    if (q == Py_False) {
        Py_DECREF(q);
        s->qoff = 1;
        return 0;
    }
    if (!PyTuple_Check(q) || PyTuple_GET_SIZE(q) != 2
        || !PyContextVar_CheckExact(PyTuple_GET_ITEM(q, 0))) {
        Py_DECREF(q);
        PyErr_SetString(PyExc_TypeError,
                        "_arrayobject: ops.quiet_context must be None, False or a "
                        "(ContextVar, value) pair");
        return -1;
    }
    s->qvar = Py_NewRef(PyTuple_GET_ITEM(q, 0));
    s->qval = Py_NewRef(PyTuple_GET_ITEM(q, 1));
    Py_DECREF(q);
    return 0;
}

/* This thread's quiet context: a Context in which s->qvar is s->qval and nothing else
 * is set, kept in the thread's state dict (so it goes with the thread). Borrowed.
 * The op runs inside it (PyContext_Enter/Exit swap a pointer: 35 ns a call more than
 * no context at all on x + y, where PyContextVar_Set/Reset, which allocate, cost 107 ns;
 * Xeon SPR, CPython 3.11). The op sees no other context variable of the caller's: a
 * ufunc on two ndarrays reads none but NumPy's own. */
static PyObject *
thread_quiet_lookup(Spec *s)
{
    PyObject *d = PyThreadState_GetDict();
    if (d == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "_arrayobject: no thread state dict");
        return NULL;
    }
    PyObject *ctx = PyDict_GetItemWithError(d, s->qval);
    if (ctx != NULL || PyErr_Occurred()) {
        return ctx;
    }
    ctx = PyContext_New();
    if (ctx == NULL) {
        return NULL;
    }
    if (PyContext_Enter(ctx) < 0) {
        Py_DECREF(ctx);
        return NULL;
    }
    PyObject *token = PyContextVar_Set(s->qvar, s->qval);
    int exited = PyContext_Exit(ctx);
    if (token == NULL || exited < 0 || PyDict_SetItem(d, s->qval, ctx) < 0) {
        Py_XDECREF(token);
        Py_DECREF(ctx);
        return NULL;
    }
    Py_DECREF(token);
    Py_DECREF(ctx); /* the dict holds it */
    return ctx;
}

/* The last thread's quiet context, looked up again only when the thread (or the
 * ops' value) changes: one compare instead of the thread-state dict's lookup. A
 * reference is held, so a new thread whose state reuses a dead one's address enters
 * that (idle) context, which sets the same variable to the same value. */
static PyThreadState *quiet_ts;
static PyObject *quiet_ctx, *quiet_key;

static PyObject *
thread_quiet_context(Spec *s)
{
    PyThreadState *ts = PyThreadState_Get();
    if (ts == quiet_ts && s->qval == quiet_key) {
        return quiet_ctx;
    }
    PyObject *ctx = thread_quiet_lookup(s);
    if (ctx != NULL) {
        quiet_ts = ts;
        Py_XSETREF(quiet_key, Py_NewRef(s->qval)); /* (held: its address is the key) */
        Py_XSETREF(quiet_ctx, Py_NewRef(ctx));
    }
    return ctx;
}

/* fn(args) with s->qvar set to s->qval around the call where the ops ask for it.
 * NULL without an exception: the quiet context is entered already (a call from inside
 * the op itself), the Python path takes it. */
static PyObject *
call_quiet(Spec *s, PyObject *fn, PyObject *const *args, Py_ssize_t nargs)
{
    if (s->qvar == NULL) {
        return PyObject_Vectorcall(fn, args, nargs, NULL);
    }
    PyObject *ctx = thread_quiet_context(s);
    if (ctx == NULL) {
        return NULL;
    }
    if (PyContext_Enter(ctx) < 0) {
        PyErr_Clear(); /* "already entered" */
        return NULL;
    }
    PyObject *r = PyObject_Vectorcall(fn, args, nargs, NULL);
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb); /* the op's error, if any, outlives the exit */
    if (PyContext_Exit(ctx) < 0) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        Py_XDECREF(r);
        return NULL;
    }
    PyErr_Restore(type, value, tb);
    return r;
}

/* device.ops, a new reference (NULL with an exception: what getattr raises). Device
 * keeps ops in a __slots__ member: for a device of the class whose member was found
 * (ops_type, the exact class: a subclass may define ops otherwise) the slot is read at
 * its offset, what the member descriptor's own get does, without the attribute lookup
 * (about 60 of the ~5,600 instructions of xp.add(x, y) on one element). */
static PyTypeObject *ops_type;
static Py_ssize_t ops_offset = -1;

static PyObject *
device_ops(PyObject *device)
{
    PyTypeObject *t = Py_TYPE(device);
    if (t != ops_type) {
        PyObject *d = _PyType_Lookup(t, str_ops); /* borrowed */
        if (d == NULL || !Py_IS_TYPE(d, &PyMemberDescr_Type)
            || ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
            return PyObject_GetAttr(device, str_ops);
        }
        Py_INCREF(t);
        Py_XSETREF(ops_type, t);
        ops_offset = ((PyMemberDescrObject *)d)->d_member->offset;
    }
    PyObject *ops = *(PyObject **)((char *)device + ops_offset);
    if (ops == NULL) {
        return PyObject_GetAttr(device, str_ops); /* unset: its AttributeError */
    }
    return Py_NewRef(ops);
}

/* The native op on one array, or on two known to share DType and Device (y NULL: a
 * unary op). NULL with an exception set: a native error (the caller tells which) or
 * a real failure; NULL without one: the Python path's turn (qoff, or call_quiet's). */
static PyObject *
run_native(Spec *s, ArrayObject *x, ArrayObject *y)
{
    PyObject *ops = device_ops(x->device);
    if (ops == NULL) {
        return NULL;
    }
    PyObject *fn;
    if (ops == s->ops) {
        Py_DECREF(ops);
    }
    else {
        fn = PyObject_GetAttr(ops, s->name);
        if (fn == NULL) {
            Py_DECREF(ops);
            return NULL;
        }
        if (read_quiet(s, ops) < 0) {
            Py_DECREF(fn);
            Py_DECREF(ops);
            Py_CLEAR(s->ops); /* read again next time */
            return NULL;
        }
        Py_XSETREF(s->ops, ops); /* the reference taken above */
        Py_XSETREF(s->fn, fn);
    }
    if (s->qoff) {
        return NULL;
    }
    fn = Py_NewRef(s->fn);
    PyObject *args[2] = {x->data, y != NULL ? y->data : NULL};
    PyObject *r = call_quiet(s, fn, args, y != NULL ? 2 : 1);
    Py_DECREF(fn);
    if (r == NULL) {
        if (PyErr_ExceptionMatches(native_errors)) {
            PyErr_Clear(); /* the op's own refusal: the Python path words or reruns it */
        }
        return NULL; /* an error, or (none set) the Python path's turn */
    }
    if (Py_TYPE(r) != Py_TYPE(x->data)) {
        /* A NumPy scalar from two 0-d arrays, say: the backend makes it a buffer. */
        PyObject *backend = PyObject_GetAttr(x->device, str_backend);
        if (backend == NULL) {
            Py_DECREF(r);
            return NULL;
        }
        PyObject *c = PyObject_CallMethodOneArg(backend, str_coerce, r);
        Py_DECREF(backend);
        Py_DECREF(r);
        if (c == NULL) {
            return NULL;
        }
        r = c;
    }
    return wrap(r, s->result != NULL ? s->result : x->dtype, x->device);
}

/* The short path where it applies; NULL without an exception where it does not (or
 * where the native op itself raised one of native_errors: the fallback then decides;
 * an error anywhere else, a broken ops or backend, propagates). */
static PyObject *
try_fast(Spec *s, PyObject *a, PyObject *b)
{
    /* b NULL: a unary op of a. */
    if (array_cls == NULL || Py_TYPE(a) != array_cls
        || (b != NULL && Py_TYPE(b) != array_cls)) {
        return NULL;
    }
    ArrayObject *x = (ArrayObject *)a, *y = (ArrayObject *)b;
    if (x->dtype == NULL || x->device == NULL || x->data == NULL || !allowed(s, x->dtype)) {
        return NULL;
    }
    if (y != NULL && (y->data == NULL || x->dtype != y->dtype || x->device != y->device)) {
        return NULL;
    }
    return run_native(s, x, y);
}

static PyObject *
call2(PyObject *fn, PyObject *a, PyObject *b)
{
    PyObject *args[2] = {a, b};
    return PyObject_Vectorcall(fn, args, 2, NULL);
}

/* ---- ArrayBase: the operators ---------------------------------------------------- */

static PyObject *
binary_slot(int k, PyObject *a, PyObject *b)
{
    Spec *s = &operators[k];
    if (s->fallback == NULL) {
        Py_RETURN_NOTIMPLEMENTED; /* not installed: ArrayBase alone */
    }
    PyObject *r = try_fast(s, a, b);
    if (r != NULL || PyErr_Occurred()) {
        return r;
    }
    if (PyObject_TypeCheck(a, &ArrayBase_Type)) {
        return call2(s->fallback, a, b);
    }
    if (s->reflected != NULL) {
        return call2(s->reflected, b, a);
    }
    Py_RETURN_NOTIMPLEMENTED;
}

#define BINARY_SLOT(fname, k) \
    static PyObject *fname(PyObject *a, PyObject *b) { return binary_slot(k, a, b); }

BINARY_SLOT(array_add, OP_ADD)
BINARY_SLOT(array_sub, OP_SUB)
BINARY_SLOT(array_mul, OP_MUL)
BINARY_SLOT(array_truediv, OP_TRUEDIV)
BINARY_SLOT(array_floordiv, OP_FLOORDIV)
BINARY_SLOT(array_mod, OP_MOD)
BINARY_SLOT(array_and, OP_AND)
BINARY_SLOT(array_or, OP_OR)
BINARY_SLOT(array_xor, OP_XOR)
BINARY_SLOT(array_lshift, OP_LSHIFT)
BINARY_SLOT(array_rshift, OP_RSHIFT)

static PyObject *
array_richcompare(PyObject *self, PyObject *other, int op)
{
    /* CPython has already swapped op for a reflected comparison: self is ours. */
    Spec *s = &operators[OP_LT + op];
    if (s->fallback == NULL) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyObject *r = try_fast(s, self, other);
    if (r != NULL || PyErr_Occurred()) {
        return r;
    }
    return call2(s->fallback, self, other);
}

static PyObject *
unary_slot(int k, PyObject *a)
{
    Spec *s = &operators[k];
    if (s->fallback == NULL) {
        PyErr_SetString(PyExc_TypeError, "ArrayBase: not installed");
        return NULL;
    }
    PyObject *r = try_fast(s, a, NULL);
    if (r != NULL || PyErr_Occurred()) {
        return r;
    }
    PyObject *args[1] = {a};
    return PyObject_Vectorcall(s->fallback, args, 1, NULL);
}

#define UNARY_SLOT(fname, k) \
    static PyObject *fname(PyObject *a) { return unary_slot(k, a); }

UNARY_SLOT(array_neg, OP_NEG)
UNARY_SLOT(array_pos, OP_POS)
UNARY_SLOT(array_abs, OP_ABS)
UNARY_SLOT(array_invert, OP_INVERT)

static PyNumberMethods array_as_number = {
    .nb_negative = array_neg,
    .nb_positive = array_pos,
    .nb_absolute = array_abs,
    .nb_invert = array_invert,
    .nb_add = array_add,
    .nb_subtract = array_sub,
    .nb_multiply = array_mul,
    .nb_true_divide = array_truediv,
    .nb_floor_divide = array_floordiv,
    .nb_remainder = array_mod,
    .nb_and = array_and,
    .nb_or = array_or,
    .nb_xor = array_xor,
    .nb_lshift = array_lshift,
    .nb_rshift = array_rshift,
};

/* ---- ArrayBase: x[i] and x[a:b] -------------------------------------------------- */

static PyObject *
array_subscript(PyObject *self, PyObject *key)
{
    /* The Python method's short path: an in-bounds int or a slice on an array of one
     * or more dimensions, on a device whose buffers give the standard's result as a
     * view (device.views): data[i, ...] (a 0-d view, not NumPy's scalar) or data[s]. */
    PyTypeObject *kt = Py_TYPE(key);
    if (array_cls != NULL && Py_TYPE(self) == array_cls
        && (kt == &PyLong_Type || kt == &PySlice_Type)) {
        ArrayObject *x = (ArrayObject *)self;
        if (x->data == NULL || x->dtype == NULL || x->device == NULL) {
            goto general;
        }
        if (x->device != views_device) {
            /* device.views is False until the device's ops are loaded, then fixed:
             * only a True is remembered (the last such device). */
            PyObject *views = PyObject_GetAttr(x->device, str_views);
            if (views == NULL) {
                return NULL;
            }
            int native = PyObject_IsTrue(views);
            Py_DECREF(views);
            if (native < 0) {
                return NULL;
            }
            if (!native) {
                goto general;
            }
            Py_INCREF(x->device);
            Py_XSETREF(views_device, x->device);
        }
        Py_ssize_t n = PyObject_Length(x->data); /* shape[0]; a 0-d buffer raises */
        if (n < 0) {
            PyErr_Clear();
            goto general;
        }
        PyObject *out;
        if (kt == &PyLong_Type) {
            int overflow;
            long long i = PyLong_AsLongLongAndOverflow(key, &overflow);
            if (overflow || (i == -1 && PyErr_Occurred()) || i < -(long long)n
                || i >= (long long)n) {
                PyErr_Clear();
                goto general; /* the general path words the IndexError */
            }
            PyObject *index = PyTuple_Pack(2, key, Py_Ellipsis);
            if (index == NULL) {
                return NULL;
            }
            out = PyObject_GetItem(x->data, index);
            Py_DECREF(index);
        }
        else {
            out = PyObject_GetItem(x->data, key);
        }
        if (out == NULL) {
            return NULL;
        }
        return wrap(out, x->dtype, x->device);
    }
general:
    if (getitem_fallback == NULL) {
        PyErr_SetString(PyExc_TypeError, "ArrayBase: not installed");
        return NULL;
    }
    return call2(getitem_fallback, self, key);
}

static PyMappingMethods array_as_mapping = {
    .mp_subscript = array_subscript,
};

/* ---- ArrayBase: the type ---------------------------------------------------------- */

static void
array_dealloc(ArrayObject *self)
{
    if (self->weakrefs != NULL) {
        PyObject_ClearWeakRefs((PyObject *)self);
    }
    Py_CLEAR(self->data);
    Py_CLEAR(self->dtype);
    Py_CLEAR(self->device);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef array_members[] = {
    {"_data", T_OBJECT_EX, offsetof(ArrayObject, data), 0, "the backend's native buffer"},
    {"_dtype", T_OBJECT_EX, offsetof(ArrayObject, dtype), 0, "the array's DType"},
    {"_device", T_OBJECT_EX, offsetof(ArrayObject, device), 0, "the array's Device"},
    {NULL},
};

static PyTypeObject ArrayBase_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tessera_array._arrayobject.ArrayBase",
    .tp_basicsize = sizeof(ArrayObject),
    .tp_dealloc = (destructor)array_dealloc,
    .tp_as_number = &array_as_number,
    .tp_as_mapping = &array_as_mapping,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The C base of tessera_array.Array: its fields and its operators' short paths.",
    .tp_richcompare = array_richcompare,
    .tp_weaklistoffset = offsetof(ArrayObject, weakrefs),
    .tp_members = array_members,
};

/* ---- Function: a namespace function's short path ---------------------------------- */

typedef struct {
    PyObject_HEAD
    Spec spec;
    Py_ssize_t arity; /* 1 or 2 arrays */
    PyObject *dict; /* functools.update_wrapper writes __name__, __doc__, __wrapped__ */
    vectorcallfunc vectorcall;
} FunctionObject;

static PyObject *
function_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                  PyObject *kwnames)
{
    FunctionObject *self = (FunctionObject *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs == self->arity && kwnames == NULL) {
        PyObject *r = try_fast(&self->spec, args[0], nargs == 2 ? args[1] : NULL);
        if (r != NULL || PyErr_Occurred()) {
            return r;
        }
    }
    return PyObject_Vectorcall(self->spec.fallback, args, nargsf, kwnames);
}

static int
spec_init(Spec *s, PyObject *name, PyObject *allowed_, PyObject *result, PyObject *fallback,
          PyObject *reflected)
{
    if (!PyUnicode_Check(name)) {
        PyErr_SetString(PyExc_TypeError, "_arrayobject: an op's name must be a str");
        return -1;
    }
    if (allowed_ != Py_None && !PyTuple_Check(allowed_)) {
        PyErr_SetString(PyExc_TypeError, "_arrayobject: allowed must be a tuple of DTypes or None");
        return -1;
    }
    if (!PyCallable_Check(fallback) || (reflected != Py_None && !PyCallable_Check(reflected))) {
        PyErr_SetString(PyExc_TypeError, "_arrayobject: the fallbacks must be callables");
        return -1;
    }
    Py_INCREF(name);
    Py_XSETREF(s->name, name);
    Py_XSETREF(s->allowed, allowed_ == Py_None ? NULL : (Py_INCREF(allowed_), allowed_));
    Py_XSETREF(s->result, result == Py_None ? NULL : (Py_INCREF(result), result));
    Py_INCREF(fallback);
    Py_XSETREF(s->fallback, fallback);
    Py_XSETREF(s->reflected, reflected == Py_None ? NULL : (Py_INCREF(reflected), reflected));
    Py_CLEAR(s->ops);
    Py_CLEAR(s->fn);
    Py_CLEAR(s->qvar);
    Py_CLEAR(s->qval);
    s->qoff = 0;
    return 0;
}

static void
spec_clear(Spec *s)
{
    Py_CLEAR(s->name);
    Py_CLEAR(s->allowed);
    Py_CLEAR(s->result);
    Py_CLEAR(s->fallback);
    Py_CLEAR(s->reflected);
    Py_CLEAR(s->ops);
    Py_CLEAR(s->fn);
    Py_CLEAR(s->qvar);
    Py_CLEAR(s->qval);
}

static PyObject *
function_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"name", "arity", "allowed", "result", "fallback", NULL};
    PyObject *name, *allowed_, *result, *fallback;
    Py_ssize_t arity;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OnOOO:Function", kwlist, &name, &arity,
                                     &allowed_, &result, &fallback)) {
        return NULL;
    }
    if (arity != 1 && arity != 2) {
        PyErr_SetString(PyExc_ValueError, "Function: arity must be 1 or 2");
        return NULL;
    }
    FunctionObject *self = (FunctionObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->vectorcall = function_vectorcall;
    self->arity = arity;
    if (spec_init(&self->spec, name, allowed_, result, fallback, Py_None) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static int
function_traverse(FunctionObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->spec.fallback);
    Py_VISIT(self->spec.fn);
    Py_VISIT(self->spec.ops);
    Py_VISIT(self->spec.qval);
    Py_VISIT(self->dict);
    return 0;
}

static int
function_clear_refs(FunctionObject *self)
{
    spec_clear(&self->spec);
    Py_CLEAR(self->dict);
    return 0;
}

static void
function_dealloc(FunctionObject *self)
{
    PyObject_GC_UnTrack(self);
    function_clear_refs(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef function_members[] = {
    {"fallback", T_OBJECT, offsetof(FunctionObject, spec) + offsetof(Spec, fallback), READONLY,
     "the Python function every call off the short path goes to"},
    {NULL},
};

static PyObject *
function_reduce(PyObject *self, PyObject *unused)
{
    /* Pickled by reference, as a function is: its module's attribute of that name. */
    return PyObject_GetAttrString(self, "__qualname__");
}

static PyMethodDef function_methods[] = {
    {"__reduce__", function_reduce, METH_NOARGS, "Pickle by reference (module, name)."},
    {NULL},
};

static PyGetSetDef function_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict},
    {NULL},
};

static PyTypeObject Function_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tessera_array._arrayobject.Function",
    .tp_basicsize = sizeof(FunctionObject),
    .tp_dealloc = (destructor)function_dealloc,
    .tp_vectorcall_offset = offsetof(FunctionObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Function(name, arity, allowed, result, fallback): a namespace function of "
              "one or two arrays whose common case (arity Arrays, positional, of one "
              "allowed DType on one Device) calls device.ops.<name> on their buffers; "
              "every other call goes to fallback.",
    .tp_traverse = (traverseproc)function_traverse,
    .tp_clear = (inquiry)function_clear_refs,
    .tp_methods = function_methods,
    .tp_members = function_members,
    .tp_getset = function_getset,
    .tp_dictoffset = offsetof(FunctionObject, dict),
    .tp_new = function_new,
};

/* ---- install ---------------------------------------------------------------------- */

static PyObject *
install(PyObject *module, PyObject *args)
{
    PyObject *cls, *table, *errors, *getitem;
    if (!PyArg_ParseTuple(args, "O!O!O!O:install", &PyType_Type, &cls, &PyTuple_Type, &table,
                          &PyTuple_Type, &errors, &getitem)) {
        return NULL;
    }
    if (!PyType_IsSubtype((PyTypeObject *)cls, &ArrayBase_Type)) {
        PyErr_SetString(PyExc_TypeError, "install: cls must be a subclass of ArrayBase");
        return NULL;
    }
    if (PyTuple_GET_SIZE(table) != N_OPS) {
        PyErr_Format(PyExc_ValueError, "install: the table must have %d entries, one per op",
                     (int)N_OPS);
        return NULL;
    }
    for (int k = 0; k < N_OPS; k++) {
        PyObject *name, *allowed_, *result, *fallback, *reflected;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(table, k), "OOOOO:install", &name, &allowed_,
                              &result, &fallback, &reflected)) {
            return NULL;
        }
        if (spec_init(&operators[k], name, allowed_, result, fallback, reflected) < 0) {
            return NULL;
        }
    }
    Py_INCREF(cls);
    Py_XSETREF(array_cls, (PyTypeObject *)cls);
    Py_INCREF(errors);
    Py_XSETREF(native_errors, errors);
    Py_INCREF(getitem);
    Py_XSETREF(getitem_fallback, getitem);
    Py_RETURN_NONE;
}

static PyMethodDef module_methods[] = {
    {"install", install, METH_VARARGS,
     "install(cls, table, native_errors, getitem): make cls (a subclass of ArrayBase: "
     "tessera_array.Array) the class of the short paths' results. table: one "
     "(name, allowed, result, fallback, reflected) per op, in the order of OPS."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "tessera_array._arrayobject",
    .m_doc = "The hot half of tessera_array.Array, in C (see the source's opening).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC
PyInit__arrayobject(void)
{
    str_ops = PyUnicode_InternFromString("ops");
    str_views = PyUnicode_InternFromString("views");
    str_backend = PyUnicode_InternFromString("_backend");
    str_coerce = PyUnicode_InternFromString("coerce_native");
    str_quiet = PyUnicode_InternFromString("quiet_context");
    if (!str_ops || !str_views || !str_backend || !str_coerce || !str_quiet) {
        return NULL;
    }
    /* object.__new__(Array) must stay allowed (the front end makes arrays with it). */
    ArrayBase_Type.tp_new = PyBaseObject_Type.tp_new;
    if (PyType_Ready(&ArrayBase_Type) < 0 || PyType_Ready(&Function_Type) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) {
        return NULL;
    }
    PyObject *ops = Py_BuildValue(
        "(sssssssssssssssssssss)", "add", "subtract", "multiply", "divide", "floor_divide",
        "remainder", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift",
        "bitwise_right_shift", "less", "less_equal", "equal", "not_equal", "greater",
        "greater_equal", "negative", "positive", "abs", "bitwise_invert");
    if (ops == NULL || PyModule_AddObject(m, "OPS", ops) < 0) {
        Py_XDECREF(ops);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&ArrayBase_Type);
    if (PyModule_AddObject(m, "ArrayBase", (PyObject *)&ArrayBase_Type) < 0) {
        Py_DECREF(&ArrayBase_Type);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&Function_Type);
    if (PyModule_AddObject(m, "Function", (PyObject *)&Function_Type) < 0) {
        Py_DECREF(&Function_Type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
