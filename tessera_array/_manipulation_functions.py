"""Manipulation functions of the standard.

The front end checks every argument here (axes, shapes, dtypes, devices) so that
each backend's native ``ops`` receives normalized axes (non-negative ints) and
shapes without ``-1``, and every backend raises the same errors.

Specification: https://data-apis.org/array-api/2025.12/API_specification/manipulation_functions.html
"""

from __future__ import annotations

from math import prod as _prod
from operator import index as _index

from . import _dtypes
from ._array import Array, check_same_device
from ._errors import AxisError
from ._helpers import check_array

__all__ = [
    "broadcast_arrays",
    "broadcast_shapes",
    "broadcast_to",
    "concat",
    "expand_dims",
    "flip",
    "moveaxis",
    "permute_dims",
    "repeat",
    "reshape",
    "roll",
    "squeeze",
    "stack",
    "tile",
    "unstack",
]

_builtin_bool = bool
# ops return native buffers (the ops contract), so results are wrapped directly.
_new = Array._new


# ---- argument checks shared with the indexing functions -------------------------


def _as_int(func: str, value, name: str) -> int:
    """``value`` as a Python int; TypeError for bools, floats and other non-integers."""
    if value.__class__ is int:
        return value
    if isinstance(value, _builtin_bool):
        raise TypeError(f"{func}: {name} must be an int, not a bool. Received: {name}={value!r}")
    try:
        return _index(value)
    except TypeError as err:
        raise TypeError(
            f"{func}: {name} must be an int. Received: {name} of type {type(value).__name__}"
        ) from err


def normalize_axis(func: str, axis, ndim: int, name: str = "axis") -> int:
    """``axis`` as an int in ``[0, ndim)``; AxisError when outside ``[-ndim, ndim)``."""
    if axis.__class__ is not int:
        axis = _as_int(func, axis, name)
    if -ndim <= axis < ndim:
        return axis + ndim if axis < 0 else axis
    raise AxisError(
        f"{func}: {name} must be in [{-ndim}, {ndim}) for an array with {ndim} "
        f"dimension{'' if ndim == 1 else 's'}. Received: {name}={axis}"
    )


def normalize_axes(func: str, axis, ndim: int, name: str = "axis") -> tuple:
    """An int or a tuple of ints as a tuple of unique ints in ``[0, ndim)``."""
    if axis.__class__ is not tuple and not isinstance(axis, (tuple, list)):
        return (normalize_axis(func, axis, ndim, name),)
    out = []
    for a in axis:
        if a.__class__ is int and -ndim <= a < ndim:
            out.append(a + ndim if a < 0 else a)
        else:
            out.append(normalize_axis(func, a, ndim, name))
    out = tuple(out)
    if len(out) > 1 and len(set(out)) != len(out):
        raise ValueError(
            f"{func}: {name} must not repeat an axis. Received: {name}={tuple(axis)!r} "
            f"(normalized: {out}) for an array with {ndim} dimensions"
        )
    return out


def _shape_tuple(func: str, shape, name: str = "shape", allow_minus_one: bool = False) -> tuple:
    """``shape`` (a tuple/list of ints, or one int) as a tuple of ints >= 0 (or -1)."""
    if shape.__class__ is tuple:
        for s in shape:
            if s.__class__ is not int or s < 0:
                break
        else:
            return shape  # the common case: a tuple of ints >= 0
    if isinstance(shape, (tuple, list)):
        out = tuple(s if s.__class__ is int else _as_int(func, s, name) for s in shape)
    elif hasattr(shape, "__index__") and not isinstance(shape, _builtin_bool):
        # Note: NumPy accepts a bare int for a 1-D shape; so does tessera.
        out = (_index(shape),)
    else:
        raise TypeError(
            f"{func}: {name} must be a tuple of ints. Received: {name} of type "
            f"{type(shape).__name__}"
        )
    for s in out:
        if s < 0 and not (allow_minus_one and s == -1):
            allowed = "ints >= 0 (one may be -1)" if allow_minus_one else "ints >= 0"
            raise ValueError(f"{func}: {name} must hold {allowed}. Received: {name}={out}")
    return out


def _array_sequence(func: str, arrays) -> list:
    """``arrays`` (a tuple or list of Arrays on one device) as a non-empty list."""
    if not isinstance(arrays, (tuple, list)):
        raise TypeError(
            f"{func}: arrays must be a tuple or list of Arrays. Received: arrays of type "
            f"{type(arrays).__name__}"
        )
    if not arrays:
        raise ValueError(f"{func}: arrays must hold at least one array. Received: arrays=[]")
    for i, a in enumerate(arrays):
        check_array(a, func, f"arrays[{i}]")
    check_same_device(func, *arrays)
    return list(arrays)


def _result_dtype(arrays) -> _dtypes.DType:
    dt = arrays[0]._dtype
    for a in arrays[1:]:
        if a._dtype is not dt:
            dt = _dtypes.PROMOTION_TABLE[dt, a._dtype]
    return dt


def _broadcast(func: str, shapes) -> tuple:
    """The broadcast of ``shapes`` (tuples of ints); ValueError naming the clash."""
    ndim = max(map(len, shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        offset = ndim - len(shape)
        for i, s in enumerate(shape):
            o = out[offset + i]
            if s == o or s == 1:
                continue
            if o == 1:
                out[offset + i] = s
                continue
            raise ValueError(
                f"{func}: shapes are not broadcast-compatible: axis {offset + i - ndim} has "
                f"sizes {o} and {s}. Received: shapes "
                f"{', '.join(str(tuple(sh)) for sh in shapes)}"
            )
    return tuple(out)


# ---- broadcasting ---------------------------------------------------------------


def broadcast_shapes(*shapes: tuple) -> tuple:
    """Broadcast shapes against one another.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.broadcast_shapes.html
    """
    if not shapes:
        return ()
    shapes = [_shape_tuple("broadcast_shapes", s, f"shapes[{i}]") for i, s in enumerate(shapes)]
    return _broadcast("broadcast_shapes", shapes)


def broadcast_arrays(*arrays: Array) -> tuple[Array, ...]:
    """Broadcast arrays against one another; returns a tuple.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.broadcast_arrays.html
    """
    for i, a in enumerate(arrays):
        check_array(a, "broadcast_arrays", f"arrays[{i}]")
    if not arrays:
        return ()
    check_same_device("broadcast_arrays", *arrays)
    shape = _broadcast("broadcast_arrays", [a.shape for a in arrays])
    dev = arrays[0]._device
    to = dev.ops.broadcast_to
    return tuple(_new(to(a._data, shape), a._dtype, dev) for a in arrays)


def broadcast_to(x: Array, /, shape: tuple[int, ...]) -> Array:
    """Broadcast an array to ``shape`` (a read-only view on the NumPy backend).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.broadcast_to.html
    """
    check_array(x, "broadcast_to")
    shape = _shape_tuple("broadcast_to", shape)
    xs = x.shape
    if len(xs) > len(shape):
        raise ValueError(
            f"broadcast_to: x cannot be broadcast to a shape with fewer dimensions. "
            f"Received: x.shape={xs}, shape={shape}"
        )
    offset = len(shape) - len(xs)
    for i, s in enumerate(xs):
        if s != 1 and s != shape[offset + i]:
            raise ValueError(
                f"broadcast_to: x cannot be broadcast to shape {shape}: axis {i} of x has "
                f"size {s}, the target {shape[offset + i]}. Received: x.shape={xs}, "
                f"shape={shape}"
            )
    return _new(x._device.ops.broadcast_to(x._data, shape), x._dtype, x._device)


# ---- joining and splitting -------------------------------------------------------


def concat(arrays: tuple[Array, ...] | list[Array], /, *, axis: int | None = 0) -> Array:
    """Join arrays along an existing axis (``axis=None`` flattens them first).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.concat.html

    Notes
    -----
    Arrays of different kinds (integer with floating, ...) promote as in NumPy.
    """
    arrays = _array_sequence("concat", arrays)
    first = arrays[0]
    if axis is not None:
        ndim = first.ndim
        if ndim == 0:
            raise ValueError(
                "concat: 0-d arrays cannot be joined along an axis; use axis=None or stack(). "
                f"Received: arrays[0].shape=(), axis={axis!r}"
            )
        axis = normalize_axis("concat", axis, ndim)
        s0 = first.shape
        for i, a in enumerate(arrays[1:], 1):
            s = a.shape
            if len(s) != ndim:
                raise ValueError(
                    f"concat: every array must have the same number of dimensions. "
                    f"Received: arrays[0].shape={s0}, arrays[{i}].shape={s}"
                )
            if s[:axis] != s0[:axis] or s[axis + 1 :] != s0[axis + 1 :]:
                raise ValueError(
                    f"concat: the shapes must match except along axis {axis}. "
                    f"Received: arrays[0].shape={s0}, arrays[{i}].shape={s}, axis={axis}"
                )
    dt = _result_dtype(arrays)
    dev = first._device
    natives = [a._data if a._dtype is dt else dev.ops.astype(a._data, dt) for a in arrays]
    return _new(dev.ops.concat(natives, axis=axis), dt, dev)


def stack(arrays: tuple[Array, ...] | list[Array], /, *, axis: int = 0) -> Array:
    """Join same-shape arrays along a new axis.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.stack.html

    Notes
    -----
    ``axis`` indexes the result, so it lies in ``[-N-1, N]`` for N-d inputs (as in NumPy).
    """
    arrays = _array_sequence("stack", arrays)
    s0 = arrays[0].shape
    for i, a in enumerate(arrays[1:], 1):
        if a.shape != s0:
            raise ValueError(
                f"stack: every array must have the same shape. Received: "
                f"arrays[0].shape={s0}, arrays[{i}].shape={a.shape}"
            )
    axis = normalize_axis("stack", axis, len(s0) + 1)
    dt = _result_dtype(arrays)
    dev = arrays[0]._device
    natives = [a._data if a._dtype is dt else dev.ops.astype(a._data, dt) for a in arrays]
    return _new(dev.ops.stack(natives, axis=axis), dt, dev)


def unstack(x: Array, /, *, axis: int = 0) -> tuple[Array, ...]:
    """Split an array into a tuple of arrays along ``axis``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.unstack.html
    """
    check_array(x, "unstack")
    axis = normalize_axis("unstack", axis, x.ndim)
    dt, dev = x._dtype, x._device
    return tuple(_new(r, dt, dev) for r in dev.ops.unstack(x._data, axis=axis))


# ---- shape changes ---------------------------------------------------------------


def expand_dims(x: Array, /, axis: int | tuple[int, ...]) -> Array:
    """Insert singleton axes at the positions ``axis`` (an int or a tuple).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.expand_dims.html
    """
    check_array(x, "expand_dims")
    n = len(axis) if isinstance(axis, (tuple, list)) else 1
    axes = normalize_axes("expand_dims", axis, x.ndim + n)
    if n > 1:
        axes = tuple(sorted(axes))
    return _new(x._device.ops.expand_dims(x._data, axes), x._dtype, x._device)


def squeeze(x: Array, /, axis: int | tuple[int, ...]) -> Array:
    """Remove the singleton axes ``axis``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.squeeze.html
    """
    check_array(x, "squeeze")
    axes = normalize_axes("squeeze", axis, x.ndim)
    shape = x.shape
    for ax in axes:
        if shape[ax] != 1:
            raise ValueError(
                f"squeeze: only axes of size 1 can be removed, but axis {ax} has size "
                f"{shape[ax]}. Received: x.shape={shape}, axis={axis!r}"
            )
    return _new(x._device.ops.squeeze(x._data, axes), x._dtype, x._device)


def reshape(x: Array, /, shape: tuple[int, ...], *, copy: bool | None = None) -> Array:
    """Give an array a new shape without changing its data.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.reshape.html
    """
    check_array(x, "reshape")
    if copy is not None and copy is not True and copy is not False:
        raise TypeError(f"reshape: copy must be True, False or None. Received: copy={copy!r}")
    shape = _shape_tuple("reshape", shape, allow_minus_one=True)
    size = _prod(x.shape)
    if -1 in shape:
        if shape.count(-1) > 1:
            raise ValueError(
                f"reshape: at most one dimension of shape may be -1. Received: shape={shape}"
            )
        unknown = shape.index(-1)
        known = -_prod(shape)
        if known == 0 or size % known:
            raise ValueError(
                f"reshape: cannot infer the -1 dimension: an array of size {size} does not "
                f"split into shape {shape}. Received: x.shape={x.shape}, shape={shape}"
            )
        shape = shape[:unknown] + (size // known,) + shape[unknown + 1 :]
    elif _prod(shape) != size:
        raise ValueError(
            f"reshape: an array of size {size} cannot take a shape of size {_prod(shape)}. "
            f"Received: x.shape={x.shape}, shape={shape}"
        )
    return _new(x._device.ops.reshape(x._data, shape, copy=copy), x._dtype, x._device)


def tile(x: Array, repetitions: tuple[int, ...], /) -> Array:
    """Tile an array ``repetitions`` times along each axis.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.tile.html
    """
    check_array(x, "tile")
    reps = _shape_tuple("tile", repetitions, "repetitions")
    return _new(x._device.ops.tile(x._data, reps), x._dtype, x._device)


def repeat(x: Array, repeats: int | Array, /, *, axis: int | None = None) -> Array:
    """Repeat each element of an array ``repeats`` times.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.repeat.html

    Notes
    -----
    An Array ``repeats`` makes the output shape depend on its values: on an
    accelerator the call waits for the device to read them back.
    """
    check_array(x, "repeat")
    if axis is None:
        n = x.size
    else:
        axis = normalize_axis("repeat", axis, x.ndim)
        n = x.shape[axis]
    if isinstance(repeats, Array):
        if repeats._dtype.kind not in "iu":
            raise TypeError(
                f"repeat: an array repeats must have an integer dtype. "
                f"Received: repeats.dtype={repeats._dtype}"
            )
        check_same_device("repeat", x, repeats)
        rs = repeats.shape
        if len(rs) > 1 or (len(rs) == 1 and rs[0] != 1 and rs[0] != n):
            where = "the flattened x" if axis is None else f"axis {axis} of x"
            raise ValueError(
                f"repeat: repeats must have shape (1,) or ({n},), the size of {where}. "
                f"Received: repeats.shape={rs}, x.shape={x.shape}, axis={axis}"
            )
        native = repeats._data
    else:
        native = _as_int("repeat", repeats, "repeats")
        if native < 0:
            raise ValueError(f"repeat: repeats must be >= 0. Received: repeats={native}")
    return _new(x._device.ops.repeat(x._data, native, axis=axis), x._dtype, x._device)


# ---- reordering ------------------------------------------------------------------


def flip(x: Array, /, *, axis: int | tuple[int, ...] | None = None) -> Array:
    """Reverse the order of elements along ``axis`` (all axes when None).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.flip.html
    """
    check_array(x, "flip")
    if axis is not None:
        axis = normalize_axes("flip", axis, x.ndim)
    return _new(x._device.ops.flip(x._data, axis=axis), x._dtype, x._device)


def permute_dims(x: Array, /, axes: tuple[int, ...]) -> Array:
    """Permute the axes of an array (negative axes allowed).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.permute_dims.html
    """
    check_array(x, "permute_dims")
    ndim = x.ndim
    if not isinstance(axes, (tuple, list)):
        raise TypeError(
            f"permute_dims: axes must be a tuple of ints. Received: axes of type "
            f"{type(axes).__name__}"
        )
    if len(axes) != ndim:
        raise ValueError(
            f"permute_dims: axes must be a permutation of the {ndim} axes of x. "
            f"Received: axes={tuple(axes)!r}, x.shape={x.shape}"
        )
    axes = normalize_axes("permute_dims", axes, ndim, "axes")
    return _new(x._device.ops.permute_dims(x._data, axes), x._dtype, x._device)


def moveaxis(
    x: Array, source: int | tuple[int, ...], destination: int | tuple[int, ...], /
) -> Array:
    """Move axes of an array to new positions.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.moveaxis.html
    """
    check_array(x, "moveaxis")
    src = normalize_axes("moveaxis", source, x.ndim, "source")
    dst = normalize_axes("moveaxis", destination, x.ndim, "destination")
    if len(src) != len(dst):
        raise ValueError(
            f"moveaxis: source and destination must name the same number of axes. "
            f"Received: source={source!r}, destination={destination!r}"
        )
    return _new(x._device.ops.moveaxis(x._data, src, dst), x._dtype, x._device)


def roll(
    x: Array,
    /,
    shift: int | tuple[int, ...],
    *,
    axis: int | tuple[int, ...] | None = None,
) -> Array:
    """Roll array elements along ``axis`` (the flattened array when None).

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.roll.html
    """
    check_array(x, "roll")
    shape = x.shape
    if isinstance(shift, (tuple, list)):
        shifts = tuple(_as_int("roll", s, "shift") for s in shift)
        if axis is None or not isinstance(axis, (tuple, list)) or len(axis) != len(shifts):
            raise ValueError(
                f"roll: when shift is a tuple, axis must be a tuple of the same length. "
                f"Received: shift={tuple(shift)!r}, axis={axis!r}"
            )
    else:
        shifts = _as_int("roll", shift, "shift")
    if axis is None:
        n = x.size
        return _new(
            x._device.ops.roll(x._data, shifts % n if n else 0, axis=None), x._dtype, x._device
        )
    if isinstance(axis, (tuple, list)):
        # Note: a repeated axis adds its shifts, as in NumPy.
        axes = tuple(normalize_axis("roll", a, x.ndim) for a in axis)
    else:
        axes = (normalize_axis("roll", axis, x.ndim),)
    if shifts.__class__ is int:
        shifts = (shifts,) * len(axes)
    # Reduce the shifts modulo the axis lengths so any Python int is accepted.
    shifts = tuple(s % shape[a] if shape[a] else 0 for s, a in zip(shifts, axes))
    return _new(x._device.ops.roll(x._data, shifts, axis=axes), x._dtype, x._device)
