"""Native reductions of the OpenCL backend: one work-item per output element.

Each work-item walks its reduced elements in C order (:func:`._kernels.launch_reduce`).
Integer sums and products wrap as NumPy's do; ``max``/``min`` propagate NaN;
``argmax``/``argmin`` return the first extreme (the first NaN). Floating sums
accumulate in float64 where the device has it (float32 input is rounded once at
the end), in the input's precision otherwise; NumPy's pairwise summation rounds
differently in the last bits. Searching, sorting, set and cumulative functions run
through the host fallback.
"""

from __future__ import annotations

from . import _generate, _kernels, _memory
from ._families import add_families
from ._ops_core import astype as _astype
from ._ops_elementwise import _truth

__all__ = ["all", "any", "argmax", "argmin", "count_nonzero", "cumulative_prod",
           "cumulative_sum", "diff", "max", "mean", "min", "prod", "std", "sum", "var"]

_CT = _generate.CTYPE
_SIGNED = {"char": "uchar", "short": "ushort", "int": "uint", "long": "ulong"}
_REAL_OF = {"float2": "float", "double2": "double"}


def _ct(npdt) -> str:
    return "bool" if npdt.char == "?" else _CT[npdt.char]


def _axes(a, axis) -> tuple:
    nd = len(a.shape)
    if axis is None:
        return tuple(range(nd))
    if isinstance(axis, int):
        axis = (axis,)
    return tuple(sorted(ax % nd if nd else ax for ax in axis))


def _finish(a, axes, out, keepdims):
    if keepdims:
        shape = tuple(1 if d in axes else s for d, s in enumerate(a.shape))
        return out.reshape(shape)
    return out


def _has_fp64(a) -> bool:
    dev = _memory.QUEUE_DEVICE[a.queue]
    return dev._backend.capabilities(dev)["float64"]


def _reduce(a, axis, keepdims, out_ct, acc_ct, init, step, final="acc", decl="", *,
            merge=None):
    axes = _axes(a, axis)
    if not axes:
        # Nothing reduced: each element is its own reduction.
        axes_shape = a.shape
        out = _kernels.launch_reduce(a.reshape(a.shape + (1,)) if a.flags.c_contiguous
                                     else _memory.contiguous(a).reshape(a.shape + (1,)),
                                     (len(axes_shape),), out_ct, acc_ct, init, step, final,
                                     decl=decl)
        return out
    out = _kernels.launch_reduce(a, axes, out_ct, acc_ct, init, step, final, decl=decl,
                                 merge=merge)
    return _finish(a, axes, out, keepdims)


def _acc_type(t, a):
    if t == "float" and _has_fp64(a):
        return "double"
    if t == "float2" and _has_fp64(a):
        return "double2"
    return t


def _sum_step(t, acc):
    if t in _SIGNED:
        u = _SIGNED[t]
        return f"acc = as_{t}(({u})(({u})acc + ({u})v));"
    if t in ("float2", "double2"):
        return f"acc += convert_{acc}(v);"
    return "acc += v;"


def _widen(a, dtype):
    """``a`` cast to ``dtype``, or for None to NumPy's default: booleans and integers
    narrower than 64 bits accumulate in int64 (unsigned: uint64)."""
    if dtype is None:
        kind = a.dtype.kind
        if kind in "biu" and (kind == "b" or a.dtype.itemsize < 8):
            from tessera_array import _dtypes

            dtype = _dtypes.uint64 if kind == "u" else _dtypes.int64
        else:
            return a
    if dtype._np != a.dtype:
        a = _astype(a, dtype)
    return a


def _spec(op: str, t: str, fp64: bool) -> tuple:
    """``(out_ct, acc_ct, init, step, final, decl)`` of reduction ``op`` over C type ``t``
    (``"bool"`` for booleans), accumulating in float64 where ``fp64``."""
    if op in ("sum", "mean"):
        if t == "bool":
            return "bool", "uchar", "0", "acc |= v;", "acc", ""
        acc = _acc_for(t, fp64)
        if op == "mean":
            final = (f"convert_{t}(acc / ({_REAL_OF[acc]})m)" if t in _REAL_OF
                     else f"({t})(acc / ({acc})m)")
        else:
            final = "acc" if acc == t else f"convert_{t}(acc)" if t in _REAL_OF else f"({t})acc"
        return t, acc, f"({acc})0", _sum_step(t, acc), final, ""
    if op == "prod":
        if t == "bool":
            return "bool", "uchar", "1", "acc &= v;", "acc", ""
        if t in _SIGNED:
            u = _SIGNED[t]
            return t, t, f"({t})1", f"acc = as_{t}(({u})(({u})acc * ({u})v));", "acc", ""
        if t in _REAL_OF:
            step = f"acc = ({t})(fma(acc.x, v.x, -(acc.y * v.y)), fma(acc.x, v.y, acc.y * v.x));"
            return t, t, f"({t})(1, 0)", step, "acc", ""
        return t, t, f"({t})1", "acc *= v;", "acc", ""
    if op in ("max", "min"):
        cmp = ">" if op == "max" else "<"
        if t == "bool":
            return ("bool", "uchar", "0" if cmp == ">" else "1",
                    f"acc {'|=' if cmp == '>' else '&='} v;", "acc", "")
        if t in ("float", "double"):
            step = (f"if (j == 0 || isnan(v) || v {cmp} acc) "
                    f"{{ if (!(j > 0 && isnan(acc))) acc = v; }}")
        else:
            step = f"if (j == 0 || v {cmp} acc) acc = v;"
        return t, t, f"({t})0", step, "acc", ""
    if op in ("any", "all", "count_nonzero"):
        truth = _truth(t, "v")
        if op == "any":
            return "bool", "uchar", "0", f"acc = acc || {truth};", "acc", ""
        if op == "all":
            return "bool", "uchar", "1", f"acc = acc && {truth};", "acc", ""
        return "long", "long", "0", f"acc += {truth};", "acc", ""
    # argmax, argmin
    cmp = ">" if op == "argmax" else "<"
    bt = "uchar" if t == "bool" else t
    if t in ("float", "double"):
        step = (f"if (j == 0 || (!isnan(best) && (isnan(v) || v {cmp} best))) "
                f"{{ best = v; acc = j; }}")
    else:
        step = f"if (j == 0 || v {cmp} best) {{ best = v; acc = j; }}"
    return "long", "long", "0", step, "acc", f"{bt} best = 0;"


def _merge(op: str, t: str, fp64: bool):
    """The statement folding one part's accumulator ``v`` into ``acc`` for a split walk
    (:func:`._kernels.launch_reduce`), or None where the walk must not be split
    (argmax/argmin, whose accumulator is an index). Sums, products and extremes fold
    with their own step (``v`` then has the accumulator's type, which their steps take;
    max/min read ``j`` only as "the first part"); truth tests fold their truth values."""
    if op == "any":
        return "acc = acc || v;"
    if op == "all":
        return "acc = acc && v;"
    if op == "count_nonzero":
        return "acc += v;"
    if op in ("sum", "mean", "prod", "max", "min"):
        return _spec(op, t, fp64)[3]
    return None


def _reduce_op(a, axis, keepdims, op: str, fp64: bool):
    t = _ct(a.dtype)
    return _reduce(a, axis, keepdims, *_spec(op, t, fp64), merge=_merge(op, t, fp64))


def _acc_for(t, fp64):
    if fp64 and t == "float":
        return "double"
    if fp64 and t == "float2":
        return "double2"
    return t


def sum(a, /, *, axis=None, dtype=None, keepdims=False):
    """Sum over ``axis``; ``dtype`` (a DType or None) is the accumulation and result dtype."""
    a = _widen(a, dtype)
    return _reduce_op(a, axis, keepdims, "sum", _has_fp64(a))


def prod(a, /, *, axis=None, dtype=None, keepdims=False):
    """Product over ``axis``; ``dtype`` (a DType or None) is the accumulation and result dtype."""
    a = _widen(a, dtype)
    return _reduce_op(a, axis, keepdims, "prod", False)


def _extreme(a, axis, keepdims, op):
    t = _ct(a.dtype)
    if t in _REAL_OF:  # NumPy orders complex numbers lexicographically
        return _ARG_HOST[op](a, axis=axis, keepdims=keepdims)
    return _reduce_op(a, axis, keepdims, op, False)


def max(a, /, *, axis=None, keepdims=False):
    """Maximum over ``axis`` (NaNs propagate); the front end rejects empty reductions."""
    return _extreme(a, axis, keepdims, "max")


def min(a, /, *, axis=None, keepdims=False):
    """Minimum over ``axis`` (NaNs propagate); the front end rejects empty reductions."""
    return _extreme(a, axis, keepdims, "min")


def mean(a, /, *, axis=None, keepdims=False):
    """Arithmetic mean of a floating array over ``axis`` (NaN for an empty reduction)."""
    return _reduce_op(a, axis, keepdims, "mean", _has_fp64(a))


def var(a, /, *, axis=None, correction=0.0, keepdims=False):
    """Variance over ``axis`` (two passes: the mean, then squared deviations); real for
    complex input; NaN where ``M - correction <= 0``."""
    t = _ct(a.dtype)
    axes = _axes(a, axis)
    m = 1
    for d in axes:
        m *= a.shape[d]
    mu = mean(a, axis=axes, keepdims=True)
    acc = _acc_type(t, a)
    if t in _REAL_OF:
        r = _REAL_OF[t]
        racc = _REAL_OF[acc]
        dev = _kernels.launch_map(a.queue, "a0 - a1", None, [a, mu], t, shape=a.shape)
        step = f"acc += ({racc})v.x * ({racc})v.x + ({racc})v.y * ({racc})v.y;"
        out_t = r
    else:
        racc = acc
        dev = _kernels.launch_map(a.queue, "a0 - a1", None, [a, mu], t, shape=a.shape)
        step = f"acc += ({racc})v * ({racc})v;"
        out_t = t
    dof = m - correction
    final = (f"({out_t})(acc / (({racc})m - ({racc}){float(correction)!r}))" if dof > 0
             else f"({out_t})NAN")
    return _reduce(dev, axes, keepdims, out_t, racc, f"({racc})0", step, final,
                   merge="acc += v;")


def std(a, /, *, axis=None, correction=0.0, keepdims=False):
    """Standard deviation: the square root of :func:`var`."""
    v = var(a, axis=axis, correction=correction, keepdims=keepdims)
    t = _ct(v.dtype)
    return _kernels.launch_map(v.queue, "sqrt(a0)", v, [v], t)


def any(a, /, *, axis=None, keepdims=False):
    return _reduce_op(a, axis, keepdims, "any", False)


def all(a, /, *, axis=None, keepdims=False):
    return _reduce_op(a, axis, keepdims, "all", False)


def count_nonzero(a, /, *, axis=None, keepdims=False):
    return _reduce_op(a, axis, keepdims, "count_nonzero", False)


def _arg(a, axis, keepdims, op):
    t = _ct(a.dtype)
    if t in _REAL_OF:
        return _ARG_HOST[op](a, axis=axis, keepdims=keepdims)
    spec = _spec(op, t, False)
    if axis is None:
        flat = _memory.contiguous(a).reshape((a.size,))
        out = _kernels.launch_reduce(flat, (0,), *spec[:5], decl=spec[5])
        if keepdims:
            out = out.reshape((1,) * len(a.shape))
        return out
    return _reduce(a, (axis % len(a.shape),), keepdims, *spec)


def argmax(a, /, *, axis=None, keepdims=False):
    return _arg(a, axis, keepdims, "argmax")


def argmin(a, /, *, axis=None, keepdims=False):
    return _arg(a, axis, keepdims, "argmin")


def _make_arg_host():
    from tessera_array.backends.numpy import _ops as _host_ops

    from ._fallback import host_fallback

    return {n: host_fallback(f"{n}[complex]", getattr(_host_ops, n))
            for n in ("argmax", "argmin", "max", "min")}


_ARG_HOST = _make_arg_host()


def _scan_spec(t: str, product: bool) -> tuple:
    """``(out_ct, init, step)`` of a cumulative sum or product over C type ``t``."""
    if t == "bool":  # only with dtype=bool: logical or / and, as NumPy's add/multiply
        return "uchar", "1" if product else "0", "acc = acc & v;" if product else "acc = acc | v;"
    if t in _SIGNED:
        u = _SIGNED[t]
        op = "*" if product else "+"
        step = f"acc = as_{t}(({u})(({u})acc {op} ({u})v));"
    elif t in _REAL_OF:
        # NumPy's accumulate runs the scalar (non-SIMD) complex product: no FMA.
        step = (f"acc = ({t})(acc.x * v.x - acc.y * v.y, acc.x * v.y + acc.y * v.x);"
                if product else "acc += v;")
    else:
        step = f"acc = ({t})(acc {'*' if product else '+'} v);"
    init = (f"({t})(1, 0)" if t in _REAL_OF else f"({t})1") if product else f"({t})0"
    return t, init, step


def _scan(a, axis, dtype, include_initial, product):
    if len(a.shape) == 0:
        a = a.reshape((1,))
    a = _widen(a, dtype)
    out_ct, init, step = _scan_spec(_ct(a.dtype), product)
    # Sequential in the result dtype, as NumPy's cumulative loops (bit for bit).
    return _kernels.launch_scan(a, axis % len(a.shape), out_ct, init, step, include_initial)


def cumulative_sum(a, /, *, axis=0, dtype=None, include_initial=False):
    """Cumulative sum along the int ``axis``; a 0-d ``a`` counts as one element."""
    return _scan(a, axis, dtype, include_initial, False)


def cumulative_prod(a, /, *, axis=0, dtype=None, include_initial=False):
    """Cumulative product along the int ``axis``; a 0-d ``a`` counts as one element."""
    return _scan(a, axis, dtype, include_initial, True)


def diff(a, /, *, axis=-1, n=1, prepend=None, append=None):
    """``n``-th forward difference along the int ``axis`` (booleans: ``not_equal``, as
    NumPy); ``prepend``/``append`` are buffers of ``a``'s dtype or weak scalars."""
    from ._ops_core import basic_view
    from ._ops_elementwise import _scalar, not_equal, subtract
    from ._ops_manipulation import _copy, concat

    axis %= len(a.shape)
    if prepend is not None or append is not None:
        parts = []
        for p in (prepend, a, append):
            if p is None:
                continue
            if p.__class__ is not a.__class__:
                shape = list(a.shape)
                shape[axis] = 1
                p = _kernels.launch_map(a.queue, "a0", None, [_scalar(p, a.dtype)],
                                        _ct(a.dtype), shape=tuple(shape))
            parts.append(p)
        a = concat(parts, axis=axis)
    if n == 0:
        return _copy(a)
    op = not_equal if a.dtype.char == "?" else subtract
    for _ in range(n):
        m = a.shape[axis]
        hi = [slice(None)] * len(a.shape)
        lo = list(hi)
        hi[axis] = slice(1, None)
        lo[axis] = slice(None, m - 1 if m else 0)
        a = op(basic_view(a, tuple(hi)), basic_view(a, tuple(lo)))
    return a


def _families():
    """One program per input dtype (see :mod:`._families`) holding its reductions (float
    sums and means accumulating in float64, as on devices with cl_khr_fp64) and its
    cumulative sum and product."""
    out = []
    for t in ("bool", "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong",
              "float", "double", "float2", "double2"):
        in_ct = "uchar" if t == "bool" else t
        fam = []
        for op in ("sum", "prod", "max", "min", "mean", "any", "all", "count_nonzero",
                   "argmax", "argmin"):
            if op in ("max", "min", "argmax", "argmin") and t in _REAL_OF:
                continue  # the host's
            if op == "mean" and t not in ("float", "double", "float2", "double2"):
                continue
            out_ct, acc, init, step, final, decl = _spec(op, t, True)
            fam.append(_generate.reduce_member(in_ct, out_ct, acc, init, step, final, "", decl))
        for product in (False, True):  # the cumulative sum and product
            fam.append(_generate.scan_member(in_ct, *_scan_spec(t, product)))
        out.append(fam)
    return out


add_families(_families)
