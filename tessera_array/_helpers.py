"""Shared front-end helpers: argument checks, wrapping, scalar promotion.

Every namespace function validates its arguments here, then calls the native
``ops`` namespace of its operands' device. Error messages start with the public
function's name, say what was expected, then ``Received:`` (see STYLE).
"""

from __future__ import annotations

import math

from . import _dtypes
from ._array import _C, Array, _dtypes_of, check_same_device
from ._dtypes import DType
from ._errors import MissingCapabilityError, ScalarOutOfRangeError

__all__ = [
    "Array",
    "astype_native",
    "binary_function",
    "check_array",
    "check_dtype_on_device",
    "check_same_device",
    "check_scalar_range",
    "default_complex",
    "default_float",
    "default_int",
    "elementwise_unary",
    "refuse_half",
    "scalar_dtype_for",
    "supports_dtype",
    "unary_function",
    "wrap",
]

_builtin_bool = bool
_PY_SCALARS = (bool, int, float, complex)


def check_array(x, func: str, name: str = "x") -> Array:
    """``x`` itself when it is an Array; TypeError naming ``func`` and ``name`` otherwise."""
    if x.__class__ is Array or isinstance(x, Array):
        return x
    raise TypeError(
        f"{func}: {name} must be a tessera_array Array. "
        f"Received: {name} of type {type(x).__name__}"
    )


def wrap(native, device) -> Array:
    """Wrap a native buffer produced on ``device`` (reads its dtype from the buffer)."""
    be = device._backend
    if native.__class__ is not be.native_type:
        native = be.coerce_native(native)
    return Array._new(native, be.native_dtype(native), device)


def wrap_as(native, dtype: DType, device) -> Array:
    """Wrap a native buffer whose dtype the caller already knows."""
    be = device._backend
    if native.__class__ is not be.native_type:
        native = be.coerce_native(native)
    return Array._new(native, dtype, device)


def default_int(device=None) -> DType:
    return _dtypes.int64


_SUPPORTED: dict = {}  # id(device) -> (backend object, frozenset of id(dtype))


def supports_dtype(device, dtype: DType) -> bool:
    """Whether ``device`` holds ``dtype`` (cached; Devices and DTypes are singletons)."""
    hit = _SUPPORTED.get(id(device))
    be = device._backend
    if hit is None or hit[0] is not be:
        hit = _SUPPORTED[id(device)] = (be, frozenset(map(id, be.dtypes(device))))
    return id(dtype) in hit[1]


def default_float(device=None) -> DType:
    if device is not None and not supports_dtype(device, _dtypes.float64):
        return _dtypes.float32
    return _dtypes.float64


def default_complex(device=None) -> DType:
    return _dtypes.COMPLEX_OF[default_float(device)]


def check_dtype_on_device(dtype: DType, device, func: str) -> None:
    """MissingCapabilityError when ``device`` cannot hold ``dtype``."""
    if not supports_dtype(device, dtype):
        # A backend may name the capability the dtype needs (OpenCL: cl_khr_fp64).
        probe = getattr(device._backend, "missing_capability", None)
        need = probe(device, dtype) if probe is not None else None
        lacks = f" (the device lacks {need})" if need else ""
        raise MissingCapabilityError(
            f"{func}: device {device} does not support dtype {dtype}{lacks}. Supported on "
            f"{device}: {', '.join(d.name for d in device._backend.dtypes(device))}."
        )


def scalar_dtype_for(
    func: str, array_dtype: DType, scalar, device=None, name: str = "scalar",
    check_range: bool = True,
) -> DType:
    """The dtype an operation computes in when an array meets a Python scalar.

    The scalar is *weak* (NEP 50 / the standard): it takes the array's dtype when the
    kinds fit. Across kinds NumPy's rules apply: a float scalar with a bool/integer
    array computes in the default float dtype, a complex scalar in the complex dtype
    matching the array's precision.
    """
    kind = array_dtype.kind
    if isinstance(scalar, _builtin_bool):
        return array_dtype
    if isinstance(scalar, int):
        if kind == "b":
            dt = default_int(device)
            if check_range:
                check_scalar_range(func, dt, scalar, name)
            return dt
        if kind in "iu" and check_range:
            check_scalar_range(func, array_dtype, scalar, name)
        return array_dtype
    if isinstance(scalar, float):
        if kind in "biu":
            return default_float(device)
        return array_dtype
    if isinstance(scalar, complex):
        if kind in "biu":
            return default_complex(device)
        if kind == "f":
            return _dtypes.COMPLEX_OF[array_dtype]
        return array_dtype
    raise TypeError(
        f"{func}: expected an array or a Python scalar (bool, int, float, complex). "
        f"Received: {name} of type {type(scalar).__name__}"
    )


_INT_RANGES = {}


def _int_range(dtype: DType):
    rng = _INT_RANGES.get(dtype)
    if rng is None:
        if dtype.kind == "u":
            rng = (0, 2**dtype.bits - 1)
        else:
            rng = (-(2 ** (dtype.bits - 1)), 2 ** (dtype.bits - 1) - 1)
        _INT_RANGES[dtype] = rng
    return rng


def check_scalar_range(func: str, dtype: DType, value: int, name: str = "scalar") -> None:
    lo, hi = _int_range(dtype)
    if value < lo or value > hi:
        raise ScalarOutOfRangeError(
            f"{func}: the Python int {name}={value} is out of range for the array's dtype "
            f"{dtype} ([{lo}, {hi}]). Cast the array first, e.g. astype(x, int64)."
        )


def refuse_half(func: str, dtype: DType, name: str = "x", why: str = "") -> None:
    """TypeError when ``dtype`` is float16 or bfloat16, for functions that have no
    16-bit path (kernels registered for float32/float64, LAPACK, FFT libraries).

    ``why`` says what lacks the 16-bit path; the message tells the user to cast.
    """
    if dtype in _dtypes.HALF_FLOATING:
        because = f" ({why})" if why else ""
        raise TypeError(
            f"{func}: float16 and bfloat16 are not supported{because}; cast with "
            f"astype({name}, float32) first. Received: {name}.dtype={dtype}"
        )


def astype_native(x: Array, dtype: DType):
    """The native buffer of ``x`` converted to ``dtype`` (no copy when it already is)."""
    if x._dtype is dtype:
        return x._data
    return x._device.ops.astype(x._data, dtype)


_object_new = object.__new__
# A floating-point warning raised as an error (``-W error``), or NumPy's
# ``seterr(all="raise")``: the standard defines those results, so the op is rerun
# with the backend's floating-point reporting off.
_QUIET_RERUN = (Warning, FloatingPointError)

# Kind strings of DType.kind, as the elementwise helpers take them, and how an
# error message words them.
_KIND_WORDS = {
    "biufc": "numeric or boolean",
    "iufc": "numeric",
    "biuf": "real-valued or boolean",
    "iuf": "real-valued",
    "biu": "integer or boolean",
    "iu": "integer",
    "fc": "floating-point",
    "f": "real floating-point",
    "b": "boolean",
}


def binary_function(func: str, kinds: str, fast: str, compute=None, result_dtype=None):
    """Build the namespace function ``func(x1, x2, /)``: a native binary op applied
    with the standard's promotion and device rules.

    Parameters (positional: keyword passing costs measurably on the hot path)
    ----------
    func : str
        The public name; also the name of the native op (``device.ops.<func>``).
    kinds : str
        The ``DType.kind`` letters the promoted dtype may have (TypeError otherwise).
    fast : str
        The kinds computed in the promoted dtype itself, without ``compute``.
    compute : callable, optional
        ``compute(dt, dt1, dt2, device) -> DType`` picks the computation dtype for
        kinds not in ``fast`` (for example integers to float for ``atan2``).
    result_dtype : DType, optional
        The result's dtype when the op always returns one (comparisons: bool);
        otherwise the computation dtype.

    The first branches are the hot paths (two arrays of one dtype on one device; an
    array and a Python scalar that keeps its dtype), inlined here: keep them free of
    extra calls.

    The elementwise chapter declares each function with a ``def`` carrying its
    signature and docstring and decorates it (see ``_elementwise_functions``).
    """

    cache = (None, None)  # (ops namespace, its native op): one read, thread-safe

    def op(x1, x2, /):
        nonlocal cache
        if x1.__class__ is Array:
            if x2.__class__ is Array:
                dt = x1._dtype
                dev = x1._device
                if x2._dtype is dt and x2._device is dev and dt.kind in fast:
                    a = x1._data
                    ops = dev.ops
                    c = cache
                    if c[0] is ops:
                        fn = c[1]
                    else:
                        fn = getattr(ops, func)
                        cache = (ops, fn)
                    try:
                        r = fn(a, x2._data)
                    except _QUIET_RERUN:
                        r = _rerun_quietly(dev, fn, a, x2._data)
                    except ValueError as err:
                        raise _native_value_error(func, x1, x2, err) from err
                    if r.__class__ is not a.__class__:
                        r = dev._backend.coerce_native(r)
                    obj = _object_new(Array)
                    obj._data = r
                    obj._dtype = result_dtype or dt
                    obj._device = dev
                    return obj
                return _binary_general(func, x1, x2, None, kinds, fast, compute, result_dtype)
            if x2.__class__ not in _SCALAR_TYPES or not _weak_keeps(x1._dtype, x2, fast):
                return _binary_general(func, x1, x2, None, kinds, fast, compute, result_dtype)
            arr = x1
            a = x1._data
            b = x2
        elif x2.__class__ is Array and x1.__class__ in _SCALAR_TYPES and _weak_keeps(
            x2._dtype, x1, fast
        ):
            arr = x2
            a = x1
            b = x2._data
        else:
            return _binary_general(func, x1, x2, None, kinds, fast, compute, result_dtype)
        # An array and a weak Python scalar that keeps the array's dtype.
        dev = arr._device
        ops = dev.ops
        c = cache
        if c[0] is ops:
            fn = c[1]
        else:
            fn = getattr(ops, func)
            cache = (ops, fn)
        try:
            r = fn(a, b)
        except _QUIET_RERUN:
            r = _rerun_quietly(dev, fn, a, b)
        except (OverflowError, ValueError, TypeError):
            # A native refusal (a Python int too large for a float, a negative
            # integer power): the general path words it.
            return _binary_general(func, x1, x2, None, kinds, fast, compute, result_dtype)
        if r.__class__ is not arr._data.__class__:
            r = dev._backend.coerce_native(r)
        obj = _object_new(Array)
        obj._data = r
        obj._dtype = result_dtype or arr._dtype
        obj._device = dev
        return obj

    op.__name__ = op.__qualname__ = func
    if _C is not None:
        # The first branch above, in C (tessera_array/_arrayobject.c); op does the rest.
        return _C.Function(func, 2, _dtypes_of(fast), result_dtype, op)
    return op


def unary_function(func: str, kinds: str, fast: str, compute=None, result_dtype=None):
    """Build the namespace function ``func(x, /)``: :func:`elementwise_unary` with
    the arguments bound and its hot path inlined."""

    cache = (None, None)  # (ops namespace, its native op)

    def op(x, /):
        nonlocal cache
        if x.__class__ is Array:
            dt = x._dtype
            if dt.kind in fast:
                dev = x._device
                a = x._data
                ops = dev.ops
                c = cache
                if c[0] is ops:
                    fn = c[1]
                else:
                    fn = getattr(ops, func)
                    cache = (ops, fn)
                try:
                    r = fn(a)
                except _QUIET_RERUN:
                    r = _rerun_quietly(dev, fn, a)
                if r.__class__ is not a.__class__:
                    r = dev._backend.coerce_native(r)
                obj = _object_new(Array)
                obj._data = r
                obj._dtype = result_dtype or dt
                obj._device = dev
                return obj
        return elementwise_unary(func, x, kinds, fast, compute, result_dtype)

    op.__name__ = op.__qualname__ = func
    if _C is not None:
        # The first branch above, in C (tessera_array/_arrayobject.c); op does the rest.
        return _C.Function(func, 1, _dtypes_of(fast), result_dtype, op)
    return op


def _weak_keeps(dt: DType, s, fast: str) -> bool:
    """True when the Python scalar ``s`` computes in ``dt`` itself, a ``fast`` kind."""
    k = dt.kind
    if k not in fast:
        return False
    cls = s.__class__
    if cls is float:
        return k == "f" or k == "c"
    if cls is int:
        if k == "i" or k == "u":
            lo, hi = _INT_LIMITS[dt.name]
            return lo <= s <= hi
        return k == "f" or k == "c"
    if cls is bool:
        return True
    return k == "c"


def _with_weak_scalar(func: str, x: Array, s, reflected: bool, result_dtype, native):
    """``x <op> s`` (or ``s <op> x``) for a scalar that keeps x's dtype."""
    dev = x._device
    a = x._data
    fn = native or getattr(dev.ops, func)
    args = (s, a) if reflected else (a, s)
    try:
        r = fn(*args)
    except _QUIET_RERUN:
        r = _rerun_quietly(dev, fn, *args)
    except (OverflowError, ValueError, TypeError):
        # A native refusal (a Python int too large for a float, a negative integer
        # power): the general path words it.
        x1, x2 = (s, x) if reflected else (x, s)
        return _binary_general(func, x1, x2, native, "biufc", "biufc", None, result_dtype)
    if r.__class__ is not a.__class__:
        r = dev._backend.coerce_native(r)
    return Array._new(r, result_dtype or x._dtype, dev)


def _binary_general(func, x1, x2, native, kinds, fast, compute, result_dtype):
    """elementwise_binary for everything but the hot path: scalars, promotion, errors."""
    a1 = x1.__class__ is Array
    a2 = x2.__class__ is Array
    if not a1 and not isinstance(x1, Array) and not _is_scalar(x1):
        x1 = _as_operand(func, x1, "x1", x2)
        a1 = x1.__class__ is Array
    if not a2 and not isinstance(x2, Array) and not _is_scalar(x2):
        x2 = _as_operand(func, x2, "x2", x1)
        a2 = x2.__class__ is Array
    if (not a1 and isinstance(x1, Array)) or (not a2 and isinstance(x2, Array)):
        raise TypeError(
            f"{func}: subclasses of Array are not supported. Received: x1 of type "
            f"{type(x1).__name__}, x2 of type {type(x2).__name__}"
        )
    if a1 and a2:
        dev = x1._device
        if x2._device is not dev:
            check_same_device(func, x1, x2)
        dt1, dt2 = x1._dtype, x2._dtype
        dt = dt1 if dt1 is dt2 else _dtypes.PROMOTION_TABLE[dt1, dt2]
    elif a1:
        dev = x1._device
        dt1 = x1._dtype
        # An integer operand that computes in floating point (true division, sin)
        # takes any Python int, as NumPy does: the range check is for the int dtype.
        dt = dt2 = scalar_dtype_for(
            func, dt1, x2, dev, "x2", check_range=compute is None or dt1.kind in fast
        )
    elif a2:
        dev = x2._device
        dt2 = x2._dtype
        dt = dt1 = scalar_dtype_for(
            func, dt2, x1, dev, "x1", check_range=compute is None or dt2.kind in fast
        )
    else:
        raise TypeError(
            f"{func}: at least one of x1, x2 must be a tessera_array Array. Received: "
            f"x1 of type {type(x1).__name__}, x2 of type {type(x2).__name__}"
        )
    if dt.kind not in kinds:
        raise TypeError(
            f"{func}: expected {_KIND_WORDS.get(kinds, kinds)} operands. Received: "
            f"{_describe(x1, 'x1')}, {_describe(x2, 'x2')}"
        )
    if compute is not None and dt.kind not in fast:
        dt = compute(dt, dt1, dt2, dev)
    ops = dev.ops
    if a1:
        a = x1._data if x1._dtype is dt else ops.astype(x1._data, dt)
    else:
        a = _scalar_as(x1, dt)
    if a2:
        b = x2._data if x2._dtype is dt else ops.astype(x2._data, dt)
    else:
        b = _scalar_as(x2, dt)
    fn = native or getattr(ops, func)
    try:
        r = fn(a, b)
    except _QUIET_RERUN:
        r = _rerun_quietly(dev, fn, a, b)
    except ValueError as err:
        raise _native_value_error(func, x1, x2, err) from err
    be = dev._backend
    if r.__class__ is not be.native_type:
        r = be.coerce_native(r)
    if result_dtype is not None:
        return Array._new(r, result_dtype, dev)
    return Array._new(r, be.native_dtype(r), dev)


def elementwise_unary(
    func: str, x, kinds: str, fast: str, compute=None, result_dtype=None, native=None
):
    """Apply a native unary op; see :func:`binary_function` for the arguments.

    ``compute(dt, device) -> DType`` picks the computation dtype for the kinds not
    in ``fast``. Outside the hot path the result's dtype is read from the native
    buffer (``abs`` and ``real`` of complex input give real output).
    """
    if x.__class__ is Array:
        dt = x._dtype
        if dt.kind in fast:
            dev = x._device
            a = x._data
            fn = native or getattr(dev.ops, func)
            try:
                r = fn(a)
            except _QUIET_RERUN:
                r = _rerun_quietly(dev, fn, a)
            if r.__class__ is not a.__class__:
                r = dev._backend.coerce_native(r)
            obj = _object_new(Array)
            obj._data = r
            obj._dtype = result_dtype or dt
            obj._device = dev
            return obj
    else:
        check_array(x, func)
        if x.__class__ is not Array:
            raise TypeError(
                f"{func}: subclasses of Array are not supported. Received: x of type "
                f"{type(x).__name__}"
            )
    dt = x._dtype
    if dt.kind not in kinds:
        raise TypeError(
            f"{func}: expected an array of {_KIND_WORDS.get(kinds, kinds)} dtype. "
            f"Received: x.dtype={dt}"
        )
    dev = x._device
    if compute is not None and dt.kind not in fast:
        dt = compute(dt, dev)
    a = x._data if x._dtype is dt else dev.ops.astype(x._data, dt)
    fn = native or getattr(dev.ops, func)
    try:
        r = fn(a)
    except _QUIET_RERUN:
        r = _rerun_quietly(dev, fn, a)
    if result_dtype is not None:
        return wrap_as(r, result_dtype, dev)
    return wrap(r, dev)


def _native_value_error(func: str, x1, x2, err: ValueError) -> ValueError:
    """The library's wording of a ValueError raised by a native binary op."""
    s1 = x1.shape if x1.__class__ is Array else ()
    s2 = x2.shape if x2.__class__ is Array else ()
    for n1, n2 in zip(reversed(s1), reversed(s2)):
        if n1 != n2 and n1 != 1 and n2 != 1:
            return ValueError(
                f"{func}: the operands' shapes do not broadcast together. "
                f"Received: x1.shape={s1}, x2.shape={s2}"
            )
    hint = ""
    if func == "pow" and "negative" in str(err):
        hint = " Cast x1 to a floating-point dtype to raise integers to negative powers."
    return ValueError(
        f"{func}: {err} Received: {_describe(x1, 'x1')}, {_describe(x2, 'x2')}.{hint}"
    )


def _rerun_quietly(dev, fn, *args):
    """Rerun a native op whose floating-point warning was raised as an error.

    The standard defines those results (``1/0 -> inf``), so the op is rerun with
    the backend's warnings off; a backend without ``call_quietly`` re-raises.
    Call only from an ``except`` block.
    """
    quiet = getattr(dev.ops, "call_quietly", None)
    if quiet is None:
        raise  # noqa: PLE0704 - re-raises the warning being handled
    return quiet(fn, *args)


def _is_scalar(s) -> bool:
    """A Python scalar (or a subclass), not a NumPy scalar (``np.float64`` is a float)."""
    cls = s.__class__
    return cls in _SCALAR_TYPES or (isinstance(s, _PY_SCALARS) and cls.__module__ != "numpy")


_SCALAR_TYPES = frozenset(_PY_SCALARS)
_INT_LIMITS = {
    d.name: ((0, 2**d.bits - 1) if d.kind == "u" else (-(2 ** (d.bits - 1)), 2 ** (d.bits - 1) - 1))
    for d in _dtypes.INTEGER
}


def _as_operand(func: str, s, name: str, other):
    """A non-Python-scalar operand: a NumPy scalar becomes a 0-d Array (strong dtype).

    NumPy scalars keep their dtype, as in NumPy (``float32_array + np.float64(1)``
    is float64); anything else goes through :func:`_coerce_scalar`'s checks.
    """
    import numpy as np

    if isinstance(s, np.generic) and other.__class__ is Array:
        dt = _dtypes.lookup_numpy(s.dtype)
        if dt is not None:
            dev = other._device
            return Array._new(dev._backend.from_host(np.asarray(s), dev), dt, dev)
    return _coerce_scalar(func, s, name)


def _describe(v, name: str) -> str:
    if v.__class__ is Array:
        return f"{name}.dtype={v._dtype}"
    return f"{name}={v!r} ({type(v).__name__})"


def _coerce_scalar(func: str, s, name: str):
    """A Python scalar for ``s`` (NumPy scalars convert), or TypeError naming ``name``."""
    if isinstance(s, _PY_SCALARS):
        return s
    if hasattr(s, "__array_namespace__"):
        raise TypeError(
            f"{func}: {name} is an array of another library ({type(s).__module__}."
            f"{type(s).__name__}); convert it with tessera_array.asarray() first."
        )
    # NumPy scalars and other numbers that convert losslessly.
    import numpy as np

    if isinstance(s, np.generic) and s.ndim == 0:
        return s.item()
    raise TypeError(
        f"{func}: {name} must be a tessera_array Array or a Python scalar (bool, int, "
        f"float, complex). Received: {name} of type {type(s).__name__}"
    )


def _scalar_as(s, dt: DType):
    """A Python scalar adjusted to the computation dtype's kind (weak, not cast)."""
    if dt.kind == "f" and isinstance(s, complex):
        return s  # caller's compute() decides; kept as-is
    if dt.kind in "fc" and isinstance(s, int) and not isinstance(s, _builtin_bool):
        # Huge Python ints do not fit a float weakly in NumPy; convert explicitly.
        try:
            return float(s) if dt.kind == "f" else complex(s)
        except OverflowError:
            return math.inf if s > 0 else -math.inf
    return s
