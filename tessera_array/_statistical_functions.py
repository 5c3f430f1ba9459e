"""Statistical functions of the standard.

Specification: https://data-apis.org/array-api/2025.12/API_specification/statistical_functions.html

This module also holds the argument checks shared by the reduction-like chapters
(searching, sorting, set, utility): ``_normalize_axes``, ``_normalize_axis`` and
``_check_flag``.
"""

from __future__ import annotations

import functools
import operator

from . import _dtypes
from ._array import _C, Array
from ._dtypes import DType, coerce_dtype
from ._errors import AxisError
from ._helpers import (
    _QUIET_RERUN,
    _rerun_quietly,
    check_array,
    check_dtype_on_device,
    default_float,
    wrap_as,
)

__all__ = [
    "cumulative_prod",
    "cumulative_sum",
    "max",
    "mean",
    "min",
    "prod",
    "std",
    "sum",
    "var",
]

_builtin_bool = bool
_builtin_any = any
_new = Array._new
_object_new = object.__new__

# The default result dtype of sum/prod/cumulative_* (dtype=None): integers of a
# smaller range than the default integer widen to int64 (signed) or uint64
# (unsigned); bool counts as a signed integer, as NumPy does; floats stay.
_ACCUMULATE_DEFAULT = {
    _dtypes.bool: _dtypes.int64,
    **{d: _dtypes.int64 for d in _dtypes.SIGNED_INTEGER},
    **{d: _dtypes.uint64 for d in _dtypes.UNSIGNED_INTEGER},
    **{d: d for d in _dtypes.FLOATING},
    **{d: d for d in _dtypes.HALF_FLOATING},
}
# Note: float16 and bfloat16 sums, products, means and moments accumulate in
# float32 and round the result back to the 16-bit dtype, as PyTorch does (NumPy
# accumulates a bfloat16 sum in bfloat16).
_COMPUTE_IN = _dtypes.COMPUTE_IN


# ---- shared argument checks --------------------------------------------------------


def _axis_index(func: str, ax, ndim: int, expected: str = "an int, a tuple of ints or None") -> int:
    """One axis as a non-negative int in [0, ndim); TypeError/AxisError otherwise."""
    name = "axis"
    if ax.__class__ is not int:
        if isinstance(ax, _builtin_bool) or not hasattr(ax, "__index__"):
            raise TypeError(f"{func}: {name} must be {expected}. Received: {name}={ax!r}")
        ax = operator.index(ax)
    if ax < -ndim or ax >= ndim:
        if ndim == 0:
            raise AxisError(
                f"{func}: {name} is out of range: x is 0-d and has no axes. "
                f"Received: {name}={ax}"
            )
        raise AxisError(
            f"{func}: {name} must be in [-{ndim}, {ndim}) for an array with {ndim} "
            f"dimension{'' if ndim == 1 else 's'}. Received: {name}={ax}"
        )
    return ax + ndim if ax < 0 else ax


def _normalize_axes(func: str, axis, ndim: int):
    """``axis`` (None, an int or a tuple of ints) as None or a tuple of distinct
    non-negative ints."""
    if axis is None:
        return None
    if axis.__class__ is tuple:
        axes = tuple(_axis_index(func, ax, ndim) for ax in axis)
        if len(set(axes)) != len(axes):
            raise ValueError(
                f"{func}: axis must not repeat an axis. Received: axis={axis!r}"
            )
        return axes
    if isinstance(axis, list):
        raise TypeError(
            f"{func}: axis must be an int, a tuple of ints or None (not a list). "
            f"Received: axis={axis!r}"
        )
    return (_axis_index(func, axis, ndim),)


def _normalize_axis(func: str, axis, ndim: int) -> int:
    """A single int ``axis`` as a non-negative int."""
    return _axis_index(func, axis, ndim, "an int")


def _check_flag(func: str, name: str, value) -> _builtin_bool:
    if value is True or value is False:
        return value
    raise TypeError(f"{func}: {name} must be a bool. Received: {name}={value!r}")


def _reduced_empty(shape: tuple, axes) -> _builtin_bool:
    """True when a reduction over ``axes`` has an empty input but a non-empty output
    (no identity: max, min, argmax, argmin raise)."""
    if axes is None:
        return 0 in shape
    if not _builtin_any(shape[a] == 0 for a in axes):
        return False
    return _all_nonzero(shape[i] for i in range(len(shape)) if i not in axes)


def _all_nonzero(sizes) -> _builtin_bool:
    for s in sizes:
        if s == 0:
            return False
    return True


def _accumulate_dtype(func: str, x: Array, dtype) -> DType:
    """The result dtype of sum/prod/cumulative_* for ``x`` and the ``dtype`` argument."""
    if dtype is None:
        return _ACCUMULATE_DEFAULT[x._dtype]
    dt = coerce_dtype(dtype, "dtype", func)
    if x._dtype.kind == "c" and dt.kind != "c":
        raise TypeError(
            f"{func}: dtype={dt} would discard the imaginary part of a complex array; "
            f"take real() or abs() first. Received: x.dtype={x._dtype}, dtype={dt}"
        )
    if dt is not x._dtype:
        check_dtype_on_device(dt, x._device, func)
    return dt


# ---- reductions --------------------------------------------------------------------


def _accumulate(func: str, x, axis, dtype, keepdims) -> Array:
    check_array(x, func)
    _check_flag(func, "keepdims", keepdims)
    axes = _normalize_axes(func, axis, len(x._data.shape))
    dt = _accumulate_dtype(func, x, dtype)
    dev = x._device
    native = dev.ops.sum if func == "sum" else dev.ops.prod
    data = x._data
    acc = _COMPUTE_IN.get(dt, dt)
    if acc is not dt:  # a 16-bit result: accumulate in float32
        data = dev.ops.astype(data, acc)
    try:
        r = native(data, axis=axes, dtype=acc, keepdims=keepdims)
    except _QUIET_RERUN:  # an overflow to inf, made an error by -W error
        r = _rerun_quietly(dev, functools.partial(native, axis=axes, dtype=acc,
                                                  keepdims=keepdims), data)
    if acc is not dt:
        r = _round_back(dev, r, dt)
    return wrap_as(r, dt, dev)


def _round_back(dev, r, dt: DType):
    """A float32 result rounded to the 16-bit ``dt`` (overflow to inf is the answer)."""
    try:
        return dev.ops.astype(r, dt)
    except _QUIET_RERUN:
        return _rerun_quietly(dev, dev.ops.astype, r, dt)


def sum(
    x: Array,
    /,
    *,
    axis: int | tuple[int, ...] | None = None,
    dtype: DType | None = None,
    keepdims: bool = False,
) -> Array:
    """Sum of the elements of ``x`` over ``axis``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.sum.html

    Booleans sum to int64, as in NumPy. float16 and bfloat16 accumulate in float32
    and the result is rounded back to the 16-bit dtype.
    """
    if x.__class__ is Array and axis is None and dtype is None and keepdims is False:
        dt = x._dtype
        if dt.kind in "fc" and dt not in _COMPUTE_IN:
            # The hot path: a whole-array float sum, one native call.
            dev = x._device
            try:
                r = dev.ops.sum(x._data)
            except _QUIET_RERUN:
                r = _rerun_quietly(dev, dev.ops.sum, x._data)
            obj = _object_new(Array)
            obj._data = r
            obj._dtype = dt
            obj._device = dev
            return obj
    return _accumulate("sum", x, axis, dtype, keepdims)


if _C is not None:
    # xp.sum(x) alone on a float or complex x (the first branch above) in C
    # (tessera_array/_arrayobject.c); every other call goes to the def.
    sum = functools.update_wrapper(_C.Function("sum", 1, _dtypes.FLOATING, None, sum), sum)


def prod(
    x: Array,
    /,
    *,
    axis: int | tuple[int, ...] | None = None,
    dtype: DType | None = None,
    keepdims: bool = False,
) -> Array:
    """Product of the elements of ``x`` over ``axis``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.prod.html
    """
    return _accumulate("prod", x, axis, dtype, keepdims)


def _extreme(func: str, x, axis, keepdims) -> Array:
    check_array(x, func)
    _check_flag(func, "keepdims", keepdims)
    shape = x._data.shape
    axes = _normalize_axes(func, axis, len(shape))
    if 0 in shape and _reduced_empty(shape, axes):
        raise ValueError(
            f"{func}: cannot reduce over an axis of length 0 ({func} has no identity). "
            f"Received: x.shape={shape}, axis={axis!r}"
        )
    dev = x._device
    native = dev.ops.max if func == "max" else dev.ops.min
    return wrap_as(native(x._data, axis=axes, keepdims=keepdims), x._dtype, dev)


def max(
    x: Array, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False
) -> Array:
    """Maximum of ``x`` over ``axis`` (NaNs propagate).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.max.html

    An empty reduction raises ValueError. Complex arrays are ordered
    lexicographically (real part, then imaginary part), as in NumPy.
    """
    return _extreme("max", x, axis, keepdims)


def min(
    x: Array, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False
) -> Array:
    """Minimum of ``x`` over ``axis`` (NaNs propagate).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.min.html

    An empty reduction raises ValueError. Complex arrays are ordered
    lexicographically (real part, then imaginary part), as in NumPy.
    """
    return _extreme("min", x, axis, keepdims)


def _float_input(func: str, x: Array):
    """The native buffer of ``x`` in its floating compute dtype (ints/bool -> default
    float, float16/bfloat16 -> float32) and the result dtype."""
    dt = x._dtype
    if dt.kind in "fc":
        acc = _COMPUTE_IN.get(dt)
        if acc is not None:
            return x._device.ops.astype(x._data, acc), dt
        return x._data, dt
    fdt = default_float(x._device)
    return x._device.ops.astype(x._data, fdt), fdt


def mean(
    x: Array, /, *, axis: int | tuple[int, ...] | None = None, keepdims: bool = False
) -> Array:
    """Arithmetic mean of ``x`` over ``axis``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.mean.html

    Integer and boolean arrays give the default floating dtype, as in NumPy.
    """
    check_array(x, "mean")
    _check_flag("mean", "keepdims", keepdims)
    axes = _normalize_axes("mean", axis, len(x._data.shape))
    data, dt = _float_input("mean", x)
    dev = x._device
    r = dev.ops.mean(data, axis=axes, keepdims=keepdims)
    if dt in _COMPUTE_IN:
        r = _round_back(dev, r, dt)
    return wrap_as(r, dt, dev)


def _moment(func: str, x, axis, correction, keepdims) -> Array:
    check_array(x, func)
    _check_flag(func, "keepdims", keepdims)
    if isinstance(correction, _builtin_bool) or not isinstance(correction, (int, float)):
        raise TypeError(
            f"{func}: correction must be a real number (int or float). "
            f"Received: correction={correction!r}"
        )
    axes = _normalize_axes(func, axis, len(x._data.shape))
    data, dt = _float_input(func, x)
    dev = x._device
    native = dev.ops.var if func == "var" else dev.ops.std
    r = native(data, axis=axes, correction=correction, keepdims=keepdims)
    if dt in _COMPUTE_IN:
        r = _round_back(dev, r, dt)
    return wrap_as(r, _dtypes.REAL_OF.get(dt, dt), dev)


def std(
    x: Array,
    /,
    *,
    axis: int | tuple[int, ...] | None = None,
    correction: float = 0.0,
    keepdims: bool = False,
) -> Array:
    """Standard deviation of ``x`` over ``axis``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.std.html

    Integer and boolean arrays give the default floating dtype; complex arrays give
    the matching real dtype (the result is real), as in NumPy.
    """
    return _moment("std", x, axis, correction, keepdims)


def var(
    x: Array,
    /,
    *,
    axis: int | tuple[int, ...] | None = None,
    correction: float = 0.0,
    keepdims: bool = False,
) -> Array:
    """Variance of ``x`` over ``axis``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.var.html

    Integer and boolean arrays give the default floating dtype; complex arrays give
    the matching real dtype (the result is real), as in NumPy.
    """
    return _moment("var", x, axis, correction, keepdims)


# ---- cumulative --------------------------------------------------------------------


def _cumulative(func: str, x, axis, dtype, include_initial) -> Array:
    check_array(x, func)
    _check_flag(func, "include_initial", include_initial)
    ndim = len(x._data.shape)
    if axis is None:
        if ndim > 1:
            raise ValueError(
                f"{func}: axis must be given for an array with more than one dimension. "
                f"Received: x.ndim={ndim}, axis=None"
            )
        ax = 0
    else:
        # Note: a 0-d x with axis=None is treated as one element (NumPy); an explicit
        # axis must be valid for x's own rank.
        ax = _axis_index(func, axis, ndim, "an int or None")
    dt = _accumulate_dtype(func, x, dtype)
    dev = x._device
    native = dev.ops.cumulative_sum if func == "cumulative_sum" else dev.ops.cumulative_prod
    data = x._data
    acc = _COMPUTE_IN.get(dt, dt)
    if acc is not dt:  # a 16-bit result: accumulate in float32
        data = dev.ops.astype(data, acc)
    r = native(data, axis=ax, dtype=acc, include_initial=include_initial)
    if acc is not dt:
        r = _round_back(dev, r, dt)
    return wrap_as(r, dt, dev)


def cumulative_sum(
    x: Array,
    /,
    *,
    axis: int | None = None,
    dtype: DType | None = None,
    include_initial: bool = False,
) -> Array:
    """Cumulative sum of ``x`` along ``axis``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.cumulative_sum.html

    A 0-d ``x`` counts as a 1-element vector (the result is 1-D), as in NumPy.
    """
    return _cumulative("cumulative_sum", x, axis, dtype, include_initial)


def cumulative_prod(
    x: Array,
    /,
    *,
    axis: int | None = None,
    dtype: DType | None = None,
    include_initial: bool = False,
) -> Array:
    """Cumulative product of ``x`` along ``axis``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.cumulative_prod.html

    A 0-d ``x`` counts as a 1-element vector (the result is 1-D), as in NumPy.
    """
    return _cumulative("cumulative_prod", x, axis, dtype, include_initial)
