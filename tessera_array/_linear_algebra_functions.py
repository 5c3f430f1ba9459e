"""Linear algebra functions of the standard.

Specification: https://data-apis.org/array-api/2025.12/API_specification/linear_algebra_functions.html
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import index as _index

from ._array import Array, check_same_device
from ._dtypes import COMPUTE_IN, PROMOTION_TABLE
from ._errors import AxisError
from ._helpers import check_array

__all__ = ["matmul", "matrix_transpose", "tensordot", "vecdot"]

_new = Array._new


# ---- helpers shared with tessera_array.linalg -------------------------------------


def two_arrays(func: str, x1, x2):
    """``(device, dtype, a, b)``: both Arrays checked, on one device, cast to their promoted dtype."""
    if x1.__class__ is not Array or x2.__class__ is not Array:
        check_array(x1, func, "x1")
        check_array(x2, func, "x2")
    dev = x1._device
    if x2._device is not dev:
        check_same_device(func, x1, x2)
    dt1 = x1._dtype
    dt2 = x2._dtype
    a = x1._data
    b = x2._data
    if dt1 is dt2:
        return dev, dt1, a, b
    dt = PROMOTION_TABLE[dt1, dt2]
    if dt1 is not dt:
        a = dev.ops.astype(a, dt)
    if dt2 is not dt:
        b = dev.ops.astype(b, dt)
    return dev, dt, a, b


def as_int(func: str, value, name: str) -> int:
    """``value`` as a Python int (``operator.index``); TypeError naming ``name`` otherwise."""
    if isinstance(value, bool):
        raise TypeError(f"{func}: {name} must be an int, not a bool. Received: {name}={value!r}")
    try:
        return _index(value)
    except TypeError as err:
        raise TypeError(
            f"{func}: {name} must be an int. Received: {name}={value!r} of type "
            f"{type(value).__name__}"
        ) from err


def broadcast_shapes(func: str, s1: tuple, s2: tuple, what: str) -> tuple:
    """The broadcast of two shapes; ValueError naming ``what`` when they are incompatible."""
    n = max(len(s1), len(s2))
    p1 = (1,) * (n - len(s1)) + tuple(s1)
    p2 = (1,) * (n - len(s2)) + tuple(s2)
    out = []
    for d1, d2 in zip(p1, p2):
        if d1 == d2 or d2 == 1:
            out.append(d1)
        elif d1 == 1:
            out.append(d2)
        else:
            raise ValueError(
                f"{func}: {what} cannot be broadcast together. Received: {s1} and {s2}"
            )
    return tuple(out)


def negative_axis(func: str, axis, s1: tuple, s2: tuple) -> int:
    """``axis`` of a two-operand vector op as a negative int in ``[-min(ndim), -1]``.

    A non-negative ``axis`` counts in the broadcast shape (rank ``max(ndim)``).
    """
    axis = as_int(func, axis, "axis")
    n1, n2 = len(s1), len(s2)
    neg = axis - max(n1, n2) if axis >= 0 else axis
    lo = -min(n1, n2)
    if not lo <= neg <= -1:
        raise AxisError(
            f"{func}: axis must be in [{lo}, -1] (counted from the last axis of both "
            f"arrays). Received: axis={axis}, x1.shape={s1}, x2.shape={s2}"
        )
    return neg


def in_compute_dtype(dev, dt, native_op, a, b, *args):
    """``native_op(a, b, *args)`` for operands of dtype ``dt``; float16 and bfloat16
    operands are computed in float32 and the result rounded back to ``dt``.

    Note: PyTorch on the CPU does the same for its 16-bit matmul; NumPy's float16
    matmul has no BLAS and ml_dtypes' bfloat16 matmul answers in float32.
    """
    acc = COMPUTE_IN.get(dt)
    if acc is None:
        return native_op(a, b, *args)
    ops = dev.ops
    r = native_op(ops.astype(a, acc), ops.astype(b, acc), *args)
    return ops.astype(r, dt)


# ---- the standard's functions -------------------------------------------------------


def matmul(x1: Array, x2: Array, /) -> Array:
    """Matrix product (``x1 @ x2``), with NumPy's/PEP 465's promotion of 1-D operands.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.matmul.html

    float16 and bfloat16 operands are multiplied in float32 and the result is rounded
    back to the 16-bit dtype (as PyTorch does on the CPU).
    """
    if x1.__class__ is not Array or x2.__class__ is not Array:
        check_array(x1, "matmul", "x1")
        check_array(x2, "matmul", "x2")
    dev = x1._device
    if x2._device is not dev:
        check_same_device("matmul", x1, x2)
    a = x1._data
    b = x2._data
    s1 = a.shape
    s2 = b.shape
    if not s1 or not s2:
        raise ValueError(
            f"matmul: x1 and x2 must have at least one dimension (use multiply() for "
            f"scalars). Received: x1.shape={s1}, x2.shape={s2}"
        )
    k2 = s2[-2] if len(s2) > 1 else s2[0]
    if s1[-1] != k2:
        raise ValueError(
            f"matmul: the last axis of x1 must match the "
            f"{'second-to-last' if len(s2) > 1 else 'only'} axis of x2. Received: "
            f"x1.shape={s1}, x2.shape={s2}"
        )
    dt = x1._dtype
    dt2 = x2._dtype
    if dt is not dt2:
        dt1 = dt
        dt = PROMOTION_TABLE[dt1, dt2]
        if dt1 is not dt:
            a = dev.ops.astype(a, dt)
        if dt2 is not dt:
            b = dev.ops.astype(b, dt)
    if len(s1) > 2 or len(s2) > 2:
        broadcast_shapes("matmul", s1[:-2], s2[:-2], "the stack dimensions of x1 and x2")
    if dt in COMPUTE_IN:
        return _new(in_compute_dtype(dev, dt, dev.ops.matmul, a, b), dt, dev)
    return _new(dev.ops.matmul(a, b), dt, dev)


def matrix_transpose(x: Array, /) -> Array:
    """Swap the last two axes of ``x`` (a view on the NumPy backend, as NumPy's ``mT``).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.matrix_transpose.html
    """
    if x.__class__ is not Array:
        check_array(x, "matrix_transpose")
    if len(x._data.shape) < 2:
        raise ValueError(
            f"matrix_transpose: x must have at least 2 dimensions (a matrix or a stack of "
            f"matrices). Received: x.shape={x.shape}"
        )
    return _new(x._device.ops.matrix_transpose(x._data), x._dtype, x._device)


def _tensordot_axes(axes, s1: tuple, s2: tuple) -> tuple:
    n1, n2 = len(s1), len(s2)
    if isinstance(axes, Sequence) and not isinstance(axes, str):
        if len(axes) != 2:
            raise ValueError(
                f"tensordot: axes must be an int or a pair (x1_axes, x2_axes) of sequences. "
                f"Received: axes={axes!r}"
            )
        pair = []
        for name, seq, nd in (("x1", axes[0], n1), ("x2", axes[1], n2)):
            if isinstance(seq, Sequence) and not isinstance(seq, str):
                items = [as_int("tensordot", ax, f"axes for {name}") for ax in seq]
            else:  # NumPy also takes one int per array
                items = [as_int("tensordot", seq, f"axes for {name}")]
            norm = []
            for ax in items:
                if not -nd <= ax < nd:
                    raise AxisError(
                        f"tensordot: every axis for {name} must be in [{-nd}, {nd}). Received: "
                        f"axes={axes!r}, {name}.shape={s1 if name == 'x1' else s2}"
                    )
                norm.append(ax % nd)
            if len(set(norm)) != len(norm):
                raise ValueError(
                    f"tensordot: the axes for {name} must be unique. Received: axes={axes!r}"
                )
            pair.append(tuple(norm))
        if len(pair[0]) != len(pair[1]):
            raise ValueError(
                f"tensordot: x1_axes and x2_axes must have the same length. Received: "
                f"axes={axes!r}"
            )
        return pair[0], pair[1]
    n = as_int("tensordot", axes, "axes")
    if n < 0 or n > n1 or n > n2:
        raise ValueError(
            f"tensordot: an int axes must be in [0, min(x1.ndim, x2.ndim)]. Received: "
            f"axes={n}, x1.shape={s1}, x2.shape={s2}"
        )
    return tuple(range(n1 - n, n1)), tuple(range(n))


def tensordot(
    x1: Array,
    x2: Array,
    /,
    *,
    axes: int | tuple[Sequence[int], Sequence[int]] = 2,
) -> Array:
    """Tensor contraction of ``x1`` and ``x2`` over ``axes``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.tensordot.html

    float16 and bfloat16 operands are contracted in float32 (see :func:`matmul`).
    """
    dev, dt, a, b = two_arrays("tensordot", x1, x2)
    s1, s2 = a.shape, b.shape
    ax1, ax2 = _tensordot_axes(axes, s1, s2)
    for i, j in zip(ax1, ax2):
        if s1[i] != s2[j]:
            raise ValueError(
                f"tensordot: contracted axes must have equal sizes (they are not broadcast). "
                f"Received: x1.shape[{i}]={s1[i]}, x2.shape[{j}]={s2[j]} (x1.shape={s1}, "
                f"x2.shape={s2})"
            )
    return _new(in_compute_dtype(dev, dt, dev.ops.tensordot, a, b, (ax1, ax2)), dt, dev)


def vecdot(x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
    """Dot products of vectors along ``axis``, conjugating ``x1`` when complex.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.vecdot.html

    float16 and bfloat16 operands are reduced in float32 (see :func:`matmul`).
    """
    dev, dt, a, b = two_arrays("vecdot", x1, x2)
    s1, s2 = a.shape, b.shape
    if not s1 or not s2:
        raise ValueError(
            f"vecdot: x1 and x2 must have at least one dimension. Received: x1.shape={s1}, "
            f"x2.shape={s2}"
        )
    ax = negative_axis("vecdot", axis, s1, s2)
    if s1[ax] != s2[ax]:
        raise ValueError(
            f"vecdot: x1 and x2 must have the same size along axis (it is not broadcast). "
            f"Received: axis={axis}, x1.shape={s1}, x2.shape={s2}"
        )
    broadcast_shapes(
        "vecdot", s1[:ax] + s1[len(s1) + ax + 1:], s2[:ax] + s2[len(s2) + ax + 1:],
        "the non-contracted axes of x1 and x2",
    )
    return _new(in_compute_dtype(dev, dt, dev.ops.vecdot, a, b, ax), dt, dev)
