"""Core native ops of the OpenCL backend: dtype conversion, copying, indexing.

Basic indexing (ints, slices, ``...``, ``None``) gives views of the base buffer, as
NumPy does; other keys (integer arrays, boolean masks) gather and scatter through
:mod:`._ops_indexing`.
"""

from __future__ import annotations

import numpy as np
from tessera_array.backends._common import broadcast_shape as _broadcast_shape
from tessera_array.backends.numpy import _ops as _host_ops

from . import _generate, _kernels, _memory
from ._fallback import host_fallback
from ._ops_elementwise import _scalar, _truth, expression
from ._ops_indexing import getitem_advanced, setitem_advanced

__all__ = ["astype", "copy_into", "getitem", "inplace", "setitem"]

_NATIVE = _memory.NATIVE
_CT = _generate.CTYPE
_SIGNED = {"char": "uchar", "short": "ushort", "int": "uint", "long": "ulong"}
_REAL_OF = {"float2": "float", "double2": "double"}


def _ct(dt) -> str:
    return "bool" if dt.char == "?" else _CT[dt.char]


def cast_expression(src: str, dst: str, x: str = "a0"):
    """The C expression converting ``x`` of C type ``src`` to ``dst`` as NumPy's
    ``astype`` does (None where it runs on the host)."""
    if src == dst:
        return x
    if dst == "bool":
        return _truth(src, x)
    if dst in ("float2", "double2"):
        r = _REAL_OF[dst]
        if src in ("float2", "double2"):
            return f"convert_{dst}({x})"
        return f"({dst})(({r}){x}, ({r})0)"
    if src in ("float2", "double2"):
        return None  # complex to real: the front end decides; NumPy warns
    if src == "bool":
        return f"({dst}){x}"
    if dst in ("float", "double"):
        return f"({dst}){x}"
    if src in ("float", "double"):
        return _float_to_int(src, dst, x)
    u = _SIGNED.get(dst)
    return f"as_{dst}(({u}){x})" if u else f"({dst}){x}"


def _float_to_int(src, dst, x):
    """Float to integer as NumPy on x86-64 (the standard leaves out-of-range values
    to the implementation): truncate through a 32-bit int (64-bit for int64); NaN
    and values out of that range give its minimum."""
    if dst == "ulong":
        return None
    f = "f" if src == "float" else ""
    if dst == "long":
        lim = f"9223372036854775808.0{f}"
        return f"(isnan({x}) || {x} >= {lim} || {x} < -{lim} ? (long)LONG_MIN : (long){x})"
    lim = f"2147483648.0{f}"

    def wide(y):
        return f"(isnan({y}) || {y} >= {lim} || {y} < -{lim} ? (int)INT_MIN : (int)({y}))"

    if dst == "uint":
        # NumPy's SIMD loop: values from 2**31 up convert after subtracting 2**31.
        return (f"({x} >= {lim} ? (uint){wide(f'{x} - {lim}')} ^ 0x80000000u : "
                f"(uint){wide(x)})")
    wide = wide(x)
    u = _SIGNED.get(dst)
    return f"as_{dst}(({u})(uint){wide})" if u else f"({dst})(uint){wide}"


_astype_host = host_fallback("astype[float to uint64, complex to real]", _host_ops.astype)


def astype(a, dtype, copy: bool = True):
    """``a`` converted to the DType ``dtype`` (a new C-contiguous buffer)."""
    dst = dtype._np
    if a.dtype == dst and not copy:
        return a
    expr = cast_expression(_ct(a.dtype), _ct(dst))
    if expr is None:
        return _astype_host(a, dtype, copy)
    return _kernels.launch_map(a.queue, expr, None, [a], _ct(dst), shape=a.shape)


def copy_into(dst, src) -> None:
    """Write ``src`` (broadcast, cast) into ``dst`` in place."""
    if dst.__dict__.get(_RO):
        raise ValueError(_READONLY)
    if src.__class__ is not _NATIVE:
        src = _scalar(src, dst.dtype)
        expr = "a0"
    else:
        if src.shape != dst.shape and \
                _broadcast_shape((dst.shape, src.shape)) != dst.shape:
            raise ValueError(
                f"could not broadcast input array from shape {src.shape} into shape "
                f"{dst.shape}"
            )
        expr = cast_expression(_ct(src.dtype), _ct(dst.dtype))
        if expr is None:
            src = _host_ops_astype_native(src, dst.dtype)
            expr = "a0"
        src = _unaliased(dst, src)
    _kernels.launch_map(dst.queue, expr, dst, [src], _ct(dst.dtype))


def _host_ops_astype_native(src, npdt):
    from tessera_array import _dtypes

    return _astype_host(src, _dtypes.FROM_NUMPY[npdt], True)


def _unaliased(dst, src):
    """``src``, or a copy of it where it shares ``dst``'s buffer in another layout
    (``x[1:] = x[:-1]`` must read before it writes, as NumPy does)."""
    if src.base_data is not None and dst.base_data is not None and \
            src.base_data.int_ptr == dst.base_data.int_ptr and (
            src.offset != dst.offset or src.strides != dst.strides or src.shape != dst.shape):
        return _memory.contiguous(_copy(src))
    return src


def _copy(a):
    out = _memory.empty(a.queue, a.shape, a.dtype)
    _memory.copy_into(out, a)
    return out


# ---- read-only views -------------------------------------------------------------------------

# NumPy's broadcast_to gives read-only views, and views of those are read-only too: the
# flag lives in the pyopencl array's __dict__, set by broadcast_to and carried by every
# view this backend makes (basic_view here, _strided in _ops_manipulation); writes
# through setitem, copy_into and inplace refuse it with NumPy's ValueError.
_RO = "_tessera_readonly"
_READONLY = "assignment destination is read-only"


def mark_readonly(v):
    """Flag ``v`` (a view) read-only; returns it."""
    v.__dict__[_RO] = True
    return v


def carry_readonly(src, v):
    """``v`` (a view of ``src``), flagged read-only when ``src`` is."""
    if src.__dict__.get(_RO):
        v.__dict__[_RO] = True
    return v


# ---- indexing ------------------------------------------------------------------------------


def basic_view(a, key):
    """The view ``a[key]`` for a basic key (ints, slices, ``...``, ``None``), or None."""
    if key.__class__ is not tuple:
        key = (key,)
    explicit = 0
    for k in key:
        if k is None or k is Ellipsis:
            continue
        if k.__class__ is slice:
            explicit += 1
            continue
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
            return None
        explicit += 1
    off, strides = _memory.layout(a)
    shape = a.shape
    out_shape, out_strides = [], []
    dim = 0
    seen_ellipsis = False
    for k in key:
        if k is None:
            out_shape.append(1)
            out_strides.append(0)
        elif k is Ellipsis:
            if seen_ellipsis:
                return None
            seen_ellipsis = True
            for _ in range(len(shape) - explicit):
                out_shape.append(shape[dim])
                out_strides.append(strides[dim])
                dim += 1
        elif k.__class__ is slice:
            if dim >= len(shape):
                return None
            start, stop, step = k.indices(shape[dim])
            n = len(range(start, stop, step))
            if n:
                off += start * strides[dim]
            out_shape.append(n)
            out_strides.append(strides[dim] * step)
            dim += 1
        else:
            if dim >= len(shape):
                return None
            i = int(k)
            if i < 0:
                i += shape[dim]
            if not 0 <= i < shape[dim]:
                return None  # the fallback raises NumPy's IndexError
            off += i * strides[dim]
            dim += 1
    while dim < len(shape):
        out_shape.append(shape[dim])
        out_strides.append(strides[dim])
        dim += 1
    return carry_readonly(a, _memory.view(a, tuple(out_shape), tuple(out_strides), off))


def getitem(a, key):
    """``a[key]``: a view for basic keys; a gather (kernels/opencl/gather.cl) for keys
    with integer arrays, boolean masks or Python bools."""
    v = basic_view(a, key)
    if v is None:
        return getitem_advanced(a, key)
    return v


def setitem(a, key, value) -> None:
    """``a[key] = value`` in place; ``value`` is a buffer or a weak Python scalar."""
    if a.__dict__.get(_RO):
        raise ValueError(_READONLY)
    v = basic_view(a, key)
    if v is None:
        if value.__class__ is _NATIVE and value.dtype != a.dtype:
            value = astype(value, _dtypes_of(a.dtype))
        if _mask_fill(a, key, value):
            return
        setitem_advanced(a, key, value)
        return
    if value.__class__ is not _NATIVE:
        with np.errstate(over="ignore"):  # a float beyond float32 rounds to inf
            value = _scalar(value, a.dtype)
        _kernels.launch_map(a.queue, "a0", v, [value], _ct(a.dtype))
        return
    copy_into(v, value)


def _dtypes_of(npdt):
    from tessera_array import _dtypes

    return _dtypes.FROM_NUMPY[npdt]


def _mask_fill(a, key, value) -> bool:
    """``a[mask] = scalar`` for a mask of ``a``'s whole shape: one in-place select, no
    count or read back. False (nothing written) for other keys."""
    if key.__class__ is not _NATIVE or key.dtype.char != "?" or key.shape != a.shape or \
            value.__class__ is _NATIVE:
        return False
    with np.errstate(over="ignore"):
        value = _scalar(value, a.dtype)
    _kernels.launch_map(a.queue, "a0 ? a1 : a2", a, [key, value, a], _ct(a.dtype))
    return True


_INPLACE = ("add", "subtract", "multiply", "divide")


def inplace(name: str, a, b) -> bool:
    """``a <name>= b`` computed straight into ``a``; False (nothing written) if it can't be."""
    if name not in _INPLACE or a.__dict__.get(_RO):
        return False
    t = _ct(a.dtype)
    spec = expression(name, t)
    if spec is None or spec[1] != t:
        return False
    if b.__class__ is _NATIVE:
        if b.dtype != a.dtype:
            return False
        try:
            if _broadcast_shape((a.shape, b.shape)) != a.shape:
                return False
        except ValueError:
            return False
        b = _unaliased(a, b)
    else:
        try:
            with np.errstate(over="ignore"):
                b = _scalar(b, a.dtype)
        except (OverflowError, TypeError, ValueError):
            return False
    _kernels.launch_map(a.queue, spec[0], a, [a, b], t, preamble=spec[2])
    return True
