"""NumPy's protocols: ``__array_ufunc__`` (NEP 13) and ``__array_function__`` (NEP 18).

``np.exp(x)``, ``np.add(x, 1)``, ``np.sum(x)``, ``np.mean(x, axis=0)``,
``np.concatenate([x, y])`` or ``np.where(c, x, y)`` on tessera arrays stay in
tessera_array and return tessera arrays on the operands' device:

- a ufunc maps by name to the namespace (``arcsin`` -> ``asin``, ``power`` ->
  ``pow``, ``absolute`` -> ``abs`` ...); ``reduce`` of add, multiply, maximum,
  minimum, logical_and, logical_or maps to sum, prod, max, min, all, any (axis 0
  by default, as ``ufunc.reduce`` has it); ``accumulate`` of add and multiply to
  ``cumulative_sum`` and ``cumulative_prod``;
- a NumPy function maps to the namespace with NumPy's signature
  (``concatenate`` -> ``concat``, ``transpose`` -> ``permute_dims``, ``ddof`` ->
  ``correction`` ...). ``np.shape``, ``np.ndim``, ``np.size``, ``np.result_type``
  and ``np.can_cast`` read metadata only, on any device;
- NumPy arrays and NumPy scalars among the operands become tessera arrays on the
  operands' (host) device; NumPy scalars keep their dtype, as NumPy 2 does;
- ``out=`` may be a tessera array (or, on a host device, a NumPy array) of a shape
  the result broadcasts to and a dtype the result casts to under ``same_kind``;
  the result is written into it and ``out`` is returned.

Note: anything without a translation (a NumPy function the standard lacks, such
as ``np.unique`` or ``np.histogram``; a ufunc method such as ``outer``; an argument
such as ``where=`` or ``order='F'``) runs through NumPy itself when the arrays
live on a host backend (``is_host``): the buffers are handed to NumPy without a
copy and the results are wrapped back as tessera arrays, so the answer is
NumPy's. Results of a dtype tessera lacks (object, longdouble) stay NumPy
arrays. On a non-host device the same call raises
:class:`~tessera_array.ImplicitHostCopyError`, which says how to copy explicitly.
"""

from __future__ import annotations

import inspect

import numpy as np

from . import _dtypes
from ._array import Array
from ._errors import DeviceMismatchError, ImplicitHostCopyError

__all__ = ["FUNCTION_NAMES", "REDUCE_NAMES", "UFUNC_NAMES", "array_function", "array_ufunc"]

_ns_module = None


def _ns():
    global _ns_module
    if _ns_module is None:
        import tessera_array

        _ns_module = tessera_array
    return _ns_module


class _Unmapped(Exception):
    """This call has no namespace translation; the message says why."""


# ---- ufuncs -------------------------------------------------------------------------

# NumPy ufunc name -> namespace name (identical names are listed too: the table is
# the record of what is translated).
UFUNC_NAMES = {
    "absolute": "abs", "add": "add", "arccos": "acos", "arccosh": "acosh", "arcsin": "asin",
    "arcsinh": "asinh", "arctan": "atan", "arctan2": "atan2", "arctanh": "atanh",
    "bitwise_and": "bitwise_and", "bitwise_or": "bitwise_or", "bitwise_xor": "bitwise_xor",
    "invert": "bitwise_invert", "left_shift": "bitwise_left_shift",
    "right_shift": "bitwise_right_shift", "ceil": "ceil", "conjugate": "conj",
    "copysign": "copysign", "cos": "cos", "cosh": "cosh", "divide": "divide",
    "true_divide": "divide", "equal": "equal", "exp": "exp", "expm1": "expm1",
    "floor": "floor", "floor_divide": "floor_divide", "greater": "greater",
    "greater_equal": "greater_equal", "hypot": "hypot", "isfinite": "isfinite",
    "isinf": "isinf", "isnan": "isnan", "less": "less", "less_equal": "less_equal",
    "log": "log", "log1p": "log1p", "log2": "log2", "log10": "log10",
    "logaddexp": "logaddexp", "logical_and": "logical_and", "logical_not": "logical_not",
    "logical_or": "logical_or", "logical_xor": "logical_xor", "matmul": "matmul",
    "maximum": "maximum", "minimum": "minimum", "multiply": "multiply",
    "negative": "negative", "nextafter": "nextafter", "not_equal": "not_equal",
    "positive": "positive", "power": "pow", "reciprocal": "reciprocal",
    "remainder": "remainder", "rint": "round", "sign": "sign", "signbit": "signbit",
    "sin": "sin", "sinh": "sinh", "sqrt": "sqrt", "square": "square",
    "subtract": "subtract", "tan": "tan", "tanh": "tanh", "trunc": "trunc",
    "vecdot": "vecdot",
}
REDUCE_NAMES = {
    "add": "sum", "multiply": "prod", "maximum": "max", "minimum": "min",
    "logical_and": "all", "logical_or": "any",
}
ACCUMULATE_NAMES = {"add": "cumulative_sum", "multiply": "cumulative_prod"}

# Keyword arguments of a ufunc call that change nothing at these values.
_UFUNC_NEUTRAL = {"where": True, "casting": "same_kind", "order": "K", "dtype": None,
                  "subok": True, "signature": None}
_NO_VALUE = getattr(np, "_NoValue", object())


def _neutral(name, value, neutral) -> bool:
    """True when the ufunc keyword ``name=value`` changes nothing."""
    if value is _NO_VALUE:
        return True
    if name not in neutral:
        return False
    want = neutral[name]
    return value is want or (type(value) is type(want) and value == want)


def array_ufunc(ufunc, method, inputs, kwargs):
    """``Array.__array_ufunc__``: run ``ufunc.method`` through the namespace."""
    out = kwargs.get("out")
    if not _known(inputs) or (out is not None and not _known(out)):
        return NotImplemented
    dev = _first_device((inputs, out))
    if dev is None:
        return NotImplemented
    name = ufunc.__name__
    label = name if method == "__call__" else f"{name}.{method}"
    try:
        result = _ufunc_translated(ufunc, method, inputs, kwargs, dev, label)
    except _Unmapped as why:
        return _through_numpy(getattr(ufunc, method), label, inputs, kwargs, dev, why)
    if out is not None:
        outs = out if isinstance(out, tuple) else (out,)
        if len(outs) == 1 and outs[0] is not None:
            return _write_out(label, result, outs[0])
    return result


def _ufunc_translated(ufunc, method, inputs, kwargs, dev, label):
    ns = _ns()
    name = ufunc.__name__
    kw = {k: v for k, v in kwargs.items() if k != "out"}
    out = kwargs.get("out")
    if out is not None and len(out) != 1:
        raise _Unmapped(f"{len(out)} outputs")
    if method == "__call__":
        target = UFUNC_NAMES.get(name)
        extra = {}
        if name == "vecdot" and "axis" in kw:
            extra["axis"] = kw.pop("axis")
        if ufunc.nout != 1:
            raise _Unmapped(f"the ufunc {name} has {ufunc.nout} outputs")
    elif method == "reduce":
        target = REDUCE_NAMES.get(name)
        extra = {"axis": kw.pop("axis", 0), "keepdims": kw.pop("keepdims", False)}
        if target in ("sum", "prod") and kw.get("dtype") is not None:
            extra["dtype"] = _dtypes.coerce_dtype(kw.pop("dtype"), "dtype", f"numpy.{label}")
        if "initial" in kw:
            raise _Unmapped("initial= has no namespace equivalent")
    elif method == "accumulate":
        target = ACCUMULATE_NAMES.get(name)
        extra = {"axis": kw.pop("axis", 0)}
        if kw.get("dtype") is not None:
            extra["dtype"] = _dtypes.coerce_dtype(kw.pop("dtype"), "dtype", f"numpy.{label}")
    else:
        raise _Unmapped(f"the ufunc method {method!r} is not translated")
    fn = getattr(ns, target, None) if target is not None else None
    if fn is None:
        raise _Unmapped(f"{label} has no tessera_array equivalent")
    want = None
    if method == "__call__" and kw.get("dtype") is not None:
        # NumPy's dtype=: the operands cast to it, the result of that dtype
        try:
            want = _dtypes.coerce_dtype(kw["dtype"], "dtype", f"numpy.{label}")
        except TypeError:  # object and the like: NumPy's own business
            raise _Unmapped(f"dtype={kw['dtype']!r}") from None
        del kw["dtype"]
    for key, value in kw.items():
        if not _neutral(key, value, _UFUNC_NEUTRAL):
            raise _Unmapped(f"the argument {key}={value!r} is not translated")
    args = [_operand(v, dev, label) for v in inputs]
    if want is None:
        return fn(*args, **extra)
    args = [ns.astype(a, want) if a.__class__ is Array and a.dtype != want else a
            for a in args]
    result = fn(*args, **extra)
    if result.__class__ is Array and result.dtype != want:
        raise _Unmapped(f"dtype={want} for {label}, whose result is {result.dtype}")
    return result


# ---- functions ----------------------------------------------------------------------


class _Fn:
    """How one NumPy function maps to the namespace.

    ``run(passed, dev)`` gets NumPy's arguments by name (only those the caller
    passed, operands already tessera arrays) and returns the result; arguments it
    does not consume must be at NumPy's defaults, or the call goes to NumPy.
    """

    __slots__ = ("arrays", "metadata", "run", "sequences", "uses")

    def __init__(self, run, arrays=("a",), sequences=(), uses=(), metadata=False):
        self.run = run
        self.arrays = arrays
        self.sequences = sequences
        self.uses = frozenset(arrays) | frozenset(sequences) | frozenset(uses) | {"out"}
        self.metadata = metadata


def _get(passed, name, default=None):
    return passed.get(name, default)


def _ns_call(target, *args, **kwargs):
    fn = _ns()
    for part in target.split("."):
        fn = getattr(fn, part, None)
        if fn is None:
            raise _Unmapped(f"tessera_array has no {target}")
    return fn(*args, **kwargs)


def _kw(passed, mapping):
    """NumPy keyword names -> namespace keyword names, for those passed."""
    return {ns_name: passed[np_name] for np_name, ns_name in mapping.items() if np_name in passed}


def _simple(target, kw=(), arrays=("a",), pos=(), seq=None, star=None):
    """The namespace function ``target`` called as
    ``target(*arrays, [seq list], *star, *pos, **kw)``.

    ``arrays`` name NumPy's array operands, ``seq`` a sequence of arrays passed as one
    list, ``star`` NumPy's ``*args`` of arrays, ``pos`` arguments passed positionally
    after them, and ``kw`` keywords (NumPy name -> namespace name, or a tuple of names
    kept as they are).
    """
    mapping = dict(kw) if isinstance(kw, dict) else {k: k for k in kw}

    def run(passed, dev):
        args = [passed[a] for a in arrays if a in passed]
        if seq is not None:
            args.append(list(passed[seq]))
        if star is not None:
            args.extend(passed.get(star, ()))
        args.extend(passed[p] for p in pos if p in passed)
        kwargs = _kw(passed, mapping)
        if kwargs.get("dtype") is not None:
            kwargs["dtype"] = _dtypes.coerce_dtype(kwargs["dtype"], "dtype", f"numpy.{target}")
        return _ns_call(target, *args, **kwargs)

    seqs = tuple(n for n in (seq, star) if n is not None)
    return _Fn(run, arrays=arrays, sequences=seqs, uses=tuple(mapping) + tuple(pos))


def _to_float(x, passed, label):
    """Statistics of integers compute in the default float dtype, as NumPy does;
    an explicit ``dtype=`` casts first."""
    dt = passed.get("dtype")
    if dt is not None:
        return _ns().astype(x, _dtypes.coerce_dtype(dt, "dtype", label))
    if x._dtype.kind in "biu":
        from ._helpers import default_float

        return _ns().astype(x, default_float(x._device))
    return x


def _stat(target):
    def run(passed, dev):
        x = _to_float(passed["a"], passed, f"numpy.{target}")
        kw = _kw(passed, {"axis": "axis", "keepdims": "keepdims"})
        if target in ("std", "var"):
            if "correction" in passed and "ddof" in passed:
                raise _Unmapped("both ddof and correction")
            if "ddof" in passed or "correction" in passed:
                kw["correction"] = passed.get("correction", passed.get("ddof"))
        return _ns_call(target, x, **kw)

    return _Fn(run, uses=("axis", "keepdims", "dtype", "ddof", "correction"))


def _flat_if_no_axis(x, axis):
    """NumPy's ``axis=None`` on an n-d array: work on the flattened array."""
    if axis is None:
        return _ns().reshape(x, (-1,)), 0
    return x, axis


def _cumulative(target):
    def run(passed, dev):
        x, axis = _flat_if_no_axis(passed["a"], passed.get("axis"))
        kw = {"axis": axis}
        if passed.get("dtype") is not None:
            kw["dtype"] = _dtypes.coerce_dtype(passed["dtype"], "dtype", f"numpy.{target}")
        return _ns_call(target, x, **kw)

    return _Fn(run, uses=("axis", "dtype"))


def _transpose(passed, dev):
    x = passed["a"]
    axes = passed.get("axes")
    if axes is None:
        axes = tuple(range(x.ndim - 1, -1, -1))
    return _ns_call("permute_dims", x, tuple(axes))


def _reshape(passed, dev):
    if passed.get("order", "C") != "C":
        raise _Unmapped(f"order={passed['order']!r}")
    shape = passed.get("shape", passed.get("newshape"))
    if isinstance(shape, int):
        shape = (shape,)
    kw = {"copy": passed["copy"]} if passed.get("copy") is not None else {}
    return _ns_call("reshape", passed["a"], tuple(shape), **kw)


def _ravel(passed, dev):
    if passed.get("order", "C") != "C":
        raise _Unmapped(f"order={passed['order']!r}")
    return _ns_call("reshape", passed["a"], (-1,))


def _squeeze(passed, dev):
    x = passed["a"]
    axis = passed.get("axis")
    if axis is None:
        axis = tuple(i for i, n in enumerate(x.shape) if n == 1)
    return _ns_call("squeeze", x, axis)


def _swapaxes(passed, dev):
    x = passed["a"]
    perm = list(range(x.ndim))
    i, j = passed["axis1"], passed["axis2"]
    perm[i], perm[j] = perm[j], perm[i]
    return _ns_call("permute_dims", x, tuple(perm))


def _tile(passed, dev):
    reps = passed["reps"]
    return _ns_call("tile", passed["A"], (reps,) if isinstance(reps, int) else tuple(reps))


def _sort(target):
    def run(passed, dev):
        if passed.get("order") is not None:
            raise _Unmapped("order= (structured arrays)")
        x = passed["a"]
        axis = passed.get("axis", -1)
        if axis is None:
            x, axis = _ns().reshape(x, (-1,)), -1
        stable = passed.get("stable")
        return _ns_call(target, x, axis=axis, stable=True if stable is None else stable)

    return _Fn(run, uses=("axis", "kind", "order", "stable"))


def _where(passed, dev):
    cond = passed["condition"]
    if "x" not in passed and "y" not in passed:
        return _ns_call("nonzero", cond)
    if "x" not in passed or "y" not in passed:
        raise _Unmapped("where() needs both x and y, or neither")
    return _ns_call("where", cond, passed["x"], passed["y"])


def _take(passed, dev):
    if passed.get("mode", "raise") != "raise":
        raise _Unmapped(f"mode={passed['mode']!r}")
    idx = passed["indices"]
    if idx.__class__ is not Array:
        raise _Unmapped("indices that are not an array")
    x, axis = _flat_if_no_axis(passed["a"], passed.get("axis"))
    return _ns_call("take", x, idx, axis=axis)


def _clip(passed, dev):
    lo = passed.get("min", passed.get("a_min"))
    hi = passed.get("max", passed.get("a_max"))
    return _ns_call("clip", passed["a"], min=lo, max=hi)


def _round(passed, dev):
    if passed.get("decimals", 0) != 0:
        raise _Unmapped(f"decimals={passed['decimals']!r}")
    return _ns_call("round", passed["a"])


def _like(target):
    def run(passed, dev):
        if passed.get("device") is not None:
            raise _Unmapped("device=")
        kw = {}
        if passed.get("dtype") is not None:
            kw["dtype"] = _dtypes.coerce_dtype(passed["dtype"], "dtype", f"numpy.{target}")
        fill = (passed["fill_value"],) if target == "full_like" else ()
        shape = passed.get("shape")
        if shape is not None:  # NumPy's shape=: a new array of that shape on a's device
            a = passed["a"]
            kw.setdefault("dtype", a.dtype if a.__class__ is Array else
                          _dtypes.from_native_numpy(np.asarray(a).dtype))
            shape = (shape,) if isinstance(shape, int) else tuple(shape)
            return _ns_call(target[:-len("_like")], shape, *fill, device=dev, **kw)
        return _ns_call(target, passed["a"], *fill, **kw)

    return _Fn(run, uses=("dtype", "shape", "device", "fill_value"))


def _copy(passed, dev):
    return _ns_call("asarray", passed["a"], copy=True)


def _astype(passed, dev):
    if passed.get("device") is not None:
        raise _Unmapped("device=")
    dt = _dtypes.coerce_dtype(passed["dtype"], "dtype", "numpy.astype")
    return _ns_call("astype", passed["x"], dt, copy=passed.get("copy", True))


def _axes_last(x, axis1, axis2):
    nd = x.ndim
    a1, a2 = axis1 % nd if nd else axis1, axis2 % nd if nd else axis2
    if (a1, a2) == (nd - 2, nd - 1):
        return x
    return _ns_call("moveaxis", x, (a1, a2), (-2, -1))


def _trace(passed, dev):
    x = _axes_last(passed["a"], passed.get("axis1", 0), passed.get("axis2", 1))
    kw = {"offset": passed.get("offset", 0)}
    if passed.get("dtype") is not None:
        kw["dtype"] = _dtypes.coerce_dtype(passed["dtype"], "dtype", "numpy.trace")
    return _ns_call("linalg.trace", x, **kw)


def _diagonal(passed, dev):
    x = _axes_last(passed["a"], passed.get("axis1", 0), passed.get("axis2", 1))
    return _ns_call("linalg.diagonal", x, offset=passed.get("offset", 0))


def _outer(passed, dev):
    a, b = passed["a"], passed["b"]
    return _ns_call("linalg.outer", _ns().reshape(a, (-1,)), _ns().reshape(b, (-1,)))


def _searchsorted(passed, dev):
    kw = {"side": passed.get("side", "left")}
    if passed.get("sorter") is not None:
        kw["sorter"] = passed["sorter"]
    return _ns_call("searchsorted", passed["a"], passed["v"], **kw)


def _isin(passed, dev):
    return _ns_call("isin", passed["element"], passed["test_elements"],
                    invert=passed.get("invert", False))


def _eigh(target):
    def run(passed, dev):
        if passed.get("UPLO", "L") != "L":
            raise _Unmapped("UPLO='U'")
        return _ns_call(target, passed["a"])

    return _Fn(run, uses=("UPLO",))


def _svd(passed, dev):
    if passed.get("hermitian", False):
        raise _Unmapped("hermitian=True")
    if not passed.get("compute_uv", True):
        return _ns_call("linalg.svdvals", passed["a"])
    return _ns_call("linalg.svd", passed["a"], full_matrices=passed.get("full_matrices", True))


def _qr(passed, dev):
    mode = passed.get("mode", "reduced")
    if mode not in ("reduced", "complete"):
        raise _Unmapped(f"mode={mode!r}")
    return _ns_call("linalg.qr", passed["a"], mode=mode)


def _rtol_fn(target, old):
    def run(passed, dev):
        if passed.get(old) is not None or passed.get("hermitian", False):
            raise _Unmapped(f"{old}= or hermitian=True")
        arr = passed.get("a", passed.get("A"))
        kw = {"rtol": passed["rtol"]} if passed.get("rtol") is not None else {}
        return _ns_call(target, arr, **kw)

    return _Fn(run, arrays=("a", "A"), uses=(old, "hermitian", "rtol"))


# Metadata-only functions: they read shapes and dtypes, never the data, so they work on
# every device without a transfer.
def _shape(passed, dev):
    return passed["a"].shape


def _ndim(passed, dev):
    return passed["a"].ndim


def _size(passed, dev):
    x = passed["a"]
    axis = passed.get("axis")
    return x.size if axis is None else x.shape[axis]


def _np_dtype_of(obj):
    """A tessera Array or DType as the NumPy dtype NumPy's metadata functions read."""
    if obj.__class__ is Array:
        return obj._dtype._np
    if obj.__class__ is _dtypes.DType:
        return obj._np
    return obj


def _result_type(passed, dev):
    return np.result_type(*[_np_dtype_of(a) for a in passed["arrays_and_dtypes"]])


def _can_cast(passed, dev):
    return np.can_cast(_np_dtype_of(passed["from_"]), _np_dtype_of(passed["to"]),
                       casting=passed.get("casting", "safe"))


_STAT_KW = ("axis", "keepdims")

# NumPy function name (in the numpy namespace, or "linalg.<name>") -> how it maps.
_FUNCTION_SPECS = {
    "sum": _simple("sum", ("axis", "keepdims", "dtype")),
    "prod": _simple("prod", ("axis", "keepdims", "dtype")),
    "mean": _stat("mean"),
    "std": _stat("std"),
    "var": _stat("var"),
    "max": _simple("max", _STAT_KW),
    "amax": _simple("max", _STAT_KW),
    "min": _simple("min", _STAT_KW),
    "amin": _simple("min", _STAT_KW),
    "all": _simple("all", _STAT_KW),
    "any": _simple("any", _STAT_KW),
    "argmax": _simple("argmax", _STAT_KW),
    "argmin": _simple("argmin", _STAT_KW),
    "count_nonzero": _simple("count_nonzero", _STAT_KW),
    "cumsum": _cumulative("cumulative_sum"),
    "cumprod": _cumulative("cumulative_prod"),
    "cumulative_sum": _simple("cumulative_sum", ("axis", "dtype", "include_initial"), ("x",)),
    "cumulative_prod": _simple("cumulative_prod", ("axis", "dtype", "include_initial"), ("x",)),
    "diff": _simple("diff", ("n", "axis", "prepend", "append")),
    "concatenate": _simple("concat", ("axis",), (), seq="arrays"),
    "stack": _simple("stack", ("axis",), (), seq="arrays"),
    "transpose": _Fn(_transpose, uses=("axes",)),
    "matrix_transpose": _simple("matrix_transpose", arrays=("x",)),
    "reshape": _Fn(_reshape, uses=("shape", "newshape", "order", "copy")),
    "ravel": _Fn(_ravel, uses=("order",)),
    "expand_dims": _simple("expand_dims", pos=("axis",)),
    "squeeze": _Fn(_squeeze, uses=("axis",)),
    "swapaxes": _Fn(_swapaxes, uses=("axis1", "axis2")),
    "flip": _simple("flip", ("axis",), arrays=("m",)),
    "roll": _simple("roll", ("axis",), pos=("shift",)),
    "moveaxis": _simple("moveaxis", pos=("source", "destination")),
    "tile": _Fn(_tile, arrays=("A",), uses=("reps",)),
    "repeat": _simple("repeat", ("axis",), pos=("repeats",)),
    "broadcast_to": _simple("broadcast_to", pos=("shape",), arrays=("array",)),
    "broadcast_arrays": _simple("broadcast_arrays", arrays=(), star="args"),
    "meshgrid": _simple("meshgrid", ("indexing",), arrays=(), star="xi"),
    "unstack": _simple("unstack", ("axis",), arrays=("x",)),
    "tril": _simple("tril", ("k",), arrays=("m",)),
    "triu": _simple("triu", ("k",), arrays=("m",)),
    "zeros_like": _like("zeros_like"),
    "ones_like": _like("ones_like"),
    "empty_like": _like("empty_like"),
    "full_like": _like("full_like"),
    "copy": _Fn(_copy),
    "astype": _Fn(_astype, arrays=("x",), uses=("dtype", "copy", "device")),
    "where": _Fn(_where, arrays=("condition", "x", "y")),
    "nonzero": _simple("nonzero"),
    "searchsorted": _Fn(_searchsorted, arrays=("a", "v", "sorter"), uses=("side",)),
    "isin": _Fn(_isin, arrays=("element", "test_elements"), uses=("invert",)),
    "sort": _sort("sort"),
    "argsort": _sort("argsort"),
    "take": _Fn(_take, arrays=("a", "indices"), uses=("axis", "mode")),
    "take_along_axis": _simple("take_along_axis", ("axis",), arrays=("arr", "indices")),
    "clip": _Fn(_clip, uses=("a_min", "a_max", "min", "max")),
    "round": _Fn(_round, uses=("decimals",)),
    "around": _Fn(_round, uses=("decimals",)),
    "real": _simple("real", arrays=("val",)),
    "imag": _simple("imag", arrays=("val",)),
    "unique_values": _simple("unique_values", arrays=("x",)),
    "unique_counts": _simple("unique_counts", arrays=("x",)),
    "unique_inverse": _simple("unique_inverse", arrays=("x",)),
    "unique_all": _simple("unique_all", arrays=("x",)),
    "tensordot": _simple("tensordot", ("axes",), arrays=("a", "b")),
    "outer": _Fn(_outer, arrays=("a", "b")),
    "trace": _Fn(_trace, uses=("offset", "axis1", "axis2", "dtype")),
    "diagonal": _Fn(_diagonal, uses=("offset", "axis1", "axis2")),
    "shape": _Fn(_shape, metadata=True),
    "ndim": _Fn(_ndim, metadata=True),
    "size": _Fn(_size, uses=("axis",), metadata=True),
    "result_type": _Fn(_result_type, arrays=(), sequences=("arrays_and_dtypes",),
                       metadata=True),
    "can_cast": _Fn(_can_cast, arrays=("from_",), uses=("to", "casting"), metadata=True),
    "linalg.inv": _simple("linalg.inv"),
    "linalg.det": _simple("linalg.det"),
    "linalg.slogdet": _simple("linalg.slogdet"),
    "linalg.solve": _simple("linalg.solve", arrays=("a", "b")),
    "linalg.cholesky": _simple("linalg.cholesky", ("upper",)),
    "linalg.qr": _Fn(_qr, uses=("mode",)),
    "linalg.eigh": _eigh("linalg.eigh"),
    "linalg.eigvalsh": _eigh("linalg.eigvalsh"),
    "linalg.svd": _Fn(_svd, uses=("full_matrices", "compute_uv", "hermitian")),
    "linalg.svdvals": _simple("linalg.svdvals", arrays=("x",)),
    "linalg.pinv": _rtol_fn("linalg.pinv", "rcond"),
    "linalg.matrix_rank": _rtol_fn("linalg.matrix_rank", "tol"),
    "linalg.matrix_power": _simple("linalg.matrix_power", pos=("n",)),
    "linalg.matrix_norm": _simple("linalg.matrix_norm", ("keepdims", "ord"), arrays=("x",)),
    "linalg.vector_norm": _simple("linalg.vector_norm", ("axis", "keepdims", "ord"),
                                  arrays=("x",)),
    "linalg.vecdot": _simple("linalg.vecdot", ("axis",), arrays=("x1", "x2")),
    "linalg.cross": _simple("linalg.cross", ("axis",), arrays=("x1", "x2")),
    "linalg.outer": _simple("linalg.outer", arrays=("x1", "x2")),
    "linalg.diagonal": _simple("linalg.diagonal", ("offset",), arrays=("x",)),
    "linalg.trace": _simple("linalg.trace", ("offset", "dtype"), arrays=("x",)),
    "linalg.matmul": _simple("matmul", arrays=("x1", "x2")),
    "linalg.matrix_transpose": _simple("matrix_transpose", arrays=("x",)),
    "linalg.tensordot": _simple("tensordot", ("axes",), arrays=("x1", "x2")),
}
FUNCTION_NAMES = tuple(_FUNCTION_SPECS)

_by_function = None  # NumPy function object -> (label, _Fn, inspect.Signature or None)


def _function_table() -> dict:
    global _by_function
    if _by_function is None:
        table = {}
        for label, spec in _FUNCTION_SPECS.items():
            obj = np
            for part in label.split("."):
                obj = getattr(obj, part, None)
                if obj is None:
                    break
            if obj is None or isinstance(obj, np.ufunc):
                continue  # not in this NumPy, or a ufunc (handled by array_ufunc)
            try:
                sig = inspect.signature(obj)
            except (TypeError, ValueError):
                continue  # no signature to bind NumPy's arguments with: goes to NumPy
            table.setdefault(obj, (label, spec, sig))
        _by_function = table
    return _by_function


def array_function(func, types, args, kwargs):
    """``Array.__array_function__``: run ``func`` through the namespace."""
    for t in types:
        if t is not Array and t is not np.ndarray:
            return NotImplemented
    dev = _first_device((args, kwargs))
    if dev is None:
        return NotImplemented
    entry = _function_table().get(func)
    label = entry[0] if entry is not None else getattr(func, "__name__", repr(func))
    try:
        if entry is None:
            raise _Unmapped(f"numpy.{label} has no tessera_array equivalent")
        label, spec, sig = entry
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as err:
            raise TypeError(f"numpy.{label}: {err}") from err
        passed = dict(bound.arguments)
        for name, value in passed.items():
            if name not in spec.uses and not _at_default(sig, name, value):
                raise _Unmapped(f"the argument {name}={value!r} is not translated")
        out = passed.pop("out", None)
        if spec.metadata:
            return spec.run(passed, dev)
        for name in spec.arrays:
            if name in passed:
                passed[name] = _operand(passed[name], dev, label)
        for name in spec.sequences:
            if name in passed:
                passed[name] = [_operand(v, dev, label) for v in passed[name]]
        result = spec.run(passed, dev)
    except _Unmapped as why:
        return _through_numpy(func, label, args, kwargs, dev, why)
    if out is not None:
        return _write_out(label, result, out)
    return result


def _at_default(sig, name, value) -> bool:
    param = sig.parameters.get(name)
    if param is None or param.kind is inspect.Parameter.VAR_KEYWORD:
        return not value  # **kwargs: only an empty one is neutral
    default = param.default
    if value is default or value is _NO_VALUE:
        return True
    if name == "where" and value is True:
        return True
    return (default is not inspect.Parameter.empty and type(value) is type(default)
            and isinstance(value, (bool, int, str)) and value == default)


# ---- operands, outputs and the way through NumPy ------------------------------------------

_PY_SCALARS = (bool, int, float, complex)


def _known(objs) -> bool:
    """True when every array-like in ``objs`` is one this module can translate."""
    for obj in objs:
        cls = obj.__class__
        if cls is Array or cls is np.ndarray or cls in _PY_SCALARS or obj is None:
            continue
        if isinstance(obj, np.generic):
            continue
        if hasattr(obj, "__array_ufunc__") or hasattr(obj, "__array_function__"):
            return False
    return True


def _first_device(obj):
    """The device of the first tessera array found in nested tuples/lists/dicts."""
    if obj.__class__ is Array:
        return obj._device
    if isinstance(obj, (tuple, list)):
        for item in obj:
            dev = _first_device(item)
            if dev is not None:
                return dev
    elif isinstance(obj, dict):
        return _first_device(tuple(obj.values()))
    return None


def _operand(obj, dev, label):
    """A NumPy array or scalar (or nested list) operand as a tessera array on ``dev``."""
    cls = obj.__class__
    if cls is Array or cls in _PY_SCALARS or obj is None:
        return obj
    if isinstance(obj, np.generic):
        if _dtypes.lookup_numpy(obj.dtype) is None:
            raise _Unmapped(f"an operand of dtype {obj.dtype}")
        return _ns().asarray(np.asarray(obj), device=dev)
    if isinstance(obj, np.ndarray):
        if _dtypes.lookup_numpy(obj.dtype) is None:
            raise _Unmapped(f"an operand of dtype {obj.dtype}")
        # A 0-d array is what NumPy makes of a NumPy scalar inside its own scalar
        # operators (``np.float64(1.5) < x``): taken as that scalar, as above.
        if not dev._backend.is_host and obj.ndim != 0:
            raise DeviceMismatchError(
                f"numpy.{label}: a NumPy array and an array on device {dev} were combined; "
                f"tessera_array moves nothing between devices implicitly. Move the NumPy "
                f"array with tessera_array.asarray(a, device='{dev}'). Received: a NumPy "
                f"array of shape {obj.shape}"
            )
        return _ns().asarray(obj, device=dev)
    if isinstance(obj, (list, tuple)):
        if any(item.__class__ is Array for item in obj):
            raise _Unmapped("a list mixing tessera arrays and other values")
        return _ns().asarray(obj, device=dev)
    return obj


def _can_cast_same_kind(src, dst) -> bool:
    return src is dst or bool(np.can_cast(src._np, dst._np, casting="same_kind"))


def _broadcasts_to(shape, target) -> bool:
    if len(shape) > len(target):
        return False
    for a, b in zip(reversed(shape), reversed(target)):
        if a != b and a != 1:
            return False
    return True


def _write_out(label, result, out):
    """Write ``result`` into ``out`` (NumPy's ``out=``) and return ``out``."""
    if result.__class__ is not Array:
        raise TypeError(f"numpy.{label}: out= is supported for single-array results only. "
                        f"Received: out of type {type(out).__name__}")
    if out.__class__ is Array:
        if out._device is not result._device:
            raise DeviceMismatchError(
                f"numpy.{label}: out is on device {out._device}, the result on "
                f"{result._device}. Received: out.device={out._device}"
            )
        if not _can_cast_same_kind(result._dtype, out._dtype):
            raise TypeError(
                f"numpy.{label}: cannot cast the result from {result._dtype} to out's dtype "
                f"under the 'same_kind' rule. Received: out.dtype={out._dtype}"
            )
        if not _broadcasts_to(result.shape, out.shape):
            raise ValueError(
                f"numpy.{label}: the result of shape {result.shape} does not broadcast to "
                f"out. Received: out.shape={out.shape}"
            )
        native = result._data
        if result._dtype is not out._dtype:
            native = result._device.ops.astype(native, out._dtype)
        out._device.ops.copy_into(out._data, native)
        return out
    if out.__class__ is np.ndarray:
        backend = result._device._backend
        if not backend.is_host:
            raise ImplicitHostCopyError(
                f"numpy.{label}: out is a NumPy array, but the result is on device "
                f"{result._device}; tessera_array does not copy device arrays to the host "
                f"implicitly. Pass a tessera array as out, or copy explicitly with "
                f"numpy.asarray(result.to_device('cpu'))."
            )
        np.copyto(out, backend.to_host(result._data), casting="same_kind")
        return out
    raise TypeError(
        f"numpy.{label}: out must be a tessera_array Array or a NumPy array. "
        f"Received: out of type {type(out).__name__}"
    )


def _through_numpy(call, label, args, kwargs, dev, why):
    """Run a call NumPy itself handles, on a host device; refuse on any other."""
    if dev is None:
        return NotImplemented
    backend = dev._backend
    if not backend.is_host:
        raise ImplicitHostCopyError(
            f"numpy.{label}: {why}, so it would run in NumPy, but the array is on device "
            f"{dev} and tessera_array does not copy device arrays to the host implicitly. "
            f"Use a tessera_array function, or copy explicitly: "
            f"numpy.{label}(numpy.asarray(x.to_device('cpu')), ...)."
        )
    owners = {}
    host_args = _to_host(args, owners)
    host_kwargs = _to_host(kwargs, owners)
    return _from_host(call(*host_args, **host_kwargs), dev, owners)


def _to_host(obj, owners):
    cls = obj.__class__
    if cls is Array:
        native = obj._device._backend.to_host(obj._data)
        owners[id(native)] = obj
        return native
    if cls is _dtypes.DType:
        return obj._np
    if cls is tuple or cls is list:
        return cls(_to_host(item, owners) for item in obj)
    if cls is dict:
        return {k: _to_host(v, owners) for k, v in obj.items()}
    return obj


def _from_host(obj, dev, owners):
    if isinstance(obj, np.ndarray) and obj.__class__ is np.ndarray:
        owner = owners.get(id(obj))
        if owner is not None and owner._data is obj:
            return owner  # an out= array written in place
        dt = _dtypes.lookup_numpy(obj.dtype)
        if dt is None:
            return obj
        return Array._new(dev._backend.from_host(obj, dev), dt, dev)
    if isinstance(obj, np.generic):
        dt = _dtypes.lookup_numpy(obj.dtype)
        if dt is None:
            return obj
        return Array._new(dev._backend.from_host(np.asarray(obj), dev), dt, dev)
    if isinstance(obj, tuple):
        items = [_from_host(item, dev, owners) for item in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    if isinstance(obj, list):
        return [_from_host(item, dev, owners) for item in obj]
    return obj
