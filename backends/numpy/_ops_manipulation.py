"""Native manipulation and indexing ops of the NumPy backend.

The front end (:mod:`tessera_array._manipulation_functions`,
:mod:`tessera_array._indexing_functions`) has already validated every argument:
axes arrive normalized to non-negative ints (tuples where the standard allows
several), shapes are checked, and joined arrays are cast to their result dtype.
These functions only move data, and always return ``numpy.ndarray`` (never a
NumPy scalar). Views versus copies follow NumPy.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "broadcast_arrays",
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
    "take",
    "take_along_axis",
    "tile",
    "unstack",
]

_REVERSE = slice(None, None, -1)
_ALL = slice(None)


def broadcast_to(a: np.ndarray, shape: tuple) -> np.ndarray:
    """A read-only broadcast view of ``a`` with ``shape`` (NumPy's semantics)."""
    if a.shape == shape:
        return a
    return np.broadcast_to(a, shape)


def broadcast_arrays(*arrays: np.ndarray) -> tuple:
    """Read-only broadcast views of ``arrays`` against one another."""
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    return tuple(broadcast_to(a, shape) for a in arrays)


def concat(arrays, axis=0) -> np.ndarray:
    """Join same-dtype ``arrays`` along ``axis`` (``None``: flattened first)."""
    return np.concatenate(arrays, axis=axis)


def expand_dims(a: np.ndarray, axis: tuple) -> np.ndarray:
    """``a`` with singleton axes at the (sorted, non-negative) positions ``axis``."""
    shape = list(a.shape)
    for ax in axis:
        shape.insert(ax, 1)
    return a.reshape(shape)


def flip(a: np.ndarray, axis=None) -> np.ndarray:
    """A reversed view of ``a`` along ``axis`` (a tuple of axes, or ``None`` for all)."""
    # The trailing Ellipsis keeps a 0-d result an array (a[()] would give a scalar).
    if axis is None:
        return a[(_REVERSE,) * a.ndim + (Ellipsis,)]
    key = [_ALL] * a.ndim
    for ax in axis:
        key[ax] = _REVERSE
    key.append(Ellipsis)
    return a[tuple(key)]


def moveaxis(a: np.ndarray, source: tuple, destination: tuple) -> np.ndarray:
    """A view of ``a`` with the axes ``source`` moved to ``destination``."""
    return np.moveaxis(a, source, destination)


def permute_dims(a: np.ndarray, axes: tuple) -> np.ndarray:
    """A view of ``a`` with its axes permuted."""
    return a.transpose(axes)


def repeat(a: np.ndarray, repeats, axis=None) -> np.ndarray:
    """Repeat elements of ``a``; ``repeats`` is an int or a native integer array."""
    if repeats.__class__ is np.ndarray:
        if repeats.size:
            # sync: the output shape depends on the values of ``repeats``.
            lo = int(repeats.min())
            if lo < 0:
                raise ValueError(
                    f"repeat: repeats must not contain negative values. Received: min(repeats)={lo}"
                )
            if repeats.dtype == np.uint64 and int(repeats.max()) > np.iinfo(np.intp).max:
                raise ValueError(
                    f"repeat: repeats has a value too large to index with. "
                    f"Received: max(repeats)={int(repeats.max())}"
                )
        if repeats.dtype != np.intp:
            repeats = repeats.astype(np.intp)
    return np.asarray(np.repeat(a, repeats, axis=axis))


def reshape(a: np.ndarray, shape: tuple, copy=None) -> np.ndarray:
    """``a`` with a new ``shape``; ``copy=False`` raises ValueError if a copy is needed."""
    if copy is None:
        return a.reshape(shape)
    if copy:
        return a.reshape(shape).copy()
    try:
        return np.reshape(a, shape, copy=False)
    except TypeError:  # NumPy < 2.1 has no copy keyword
        view = a.view()
        try:
            view.shape = shape
        except AttributeError as err:
            raise ValueError(
                f"reshape: a copy is needed to give this array the shape {shape}, and "
                f"copy=False forbids one. Received: x.shape={a.shape}, x.strides={a.strides}"
            ) from err
        return view
    except ValueError as err:
        raise ValueError(
            f"reshape: a copy is needed to give this array the shape {shape}, and "
            f"copy=False forbids one. Received: x.shape={a.shape}, x.strides={a.strides}"
        ) from err


def roll(a: np.ndarray, shift, axis=None) -> np.ndarray:
    """``a`` rolled by ``shift`` (an int, or a tuple matching the tuple ``axis``)."""
    return np.roll(a, shift, axis=axis)


def squeeze(a: np.ndarray, axis: tuple) -> np.ndarray:
    """A view of ``a`` without the singleton axes ``axis``."""
    if not axis:
        return a[...]
    return a.reshape([s for i, s in enumerate(a.shape) if i not in axis])


def stack(arrays, axis=0) -> np.ndarray:
    """Join same-shape, same-dtype ``arrays`` along a new axis ``axis``."""
    return np.stack(arrays, axis=axis)


def tile(a: np.ndarray, repetitions: tuple) -> np.ndarray:
    """``a`` tiled ``repetitions`` times along each axis."""
    return np.asarray(np.tile(a, repetitions))


def unstack(a: np.ndarray, axis=0) -> tuple:
    """Views of ``a`` sliced along ``axis``."""
    lead = (_ALL,) * axis
    # The trailing Ellipsis keeps 0-d results as arrays (a[i] on 1-D gives a scalar).
    return tuple(a[lead + (i, Ellipsis)] for i in range(a.shape[axis]))


def take(a: np.ndarray, indices: np.ndarray, axis=None) -> np.ndarray:
    """Elements of ``a`` at ``indices`` along ``axis`` (``None``: of the flattened ``a``)."""
    try:
        return np.asarray(np.take(a, indices, axis=axis))
    except IndexError as err:
        where = "the flattened x" if axis is None else f"axis {axis}"
        raise IndexError(
            f"take: indices must be in [-n, n) where n is the size of {where}. "
            f"Received: x.shape={a.shape}, {err}"
        ) from err


def take_along_axis(a: np.ndarray, indices: np.ndarray, axis=-1) -> np.ndarray:
    """Elements of ``a`` at the 1-D ``indices`` along ``axis``, broadcasting the rest."""
    try:
        return np.asarray(np.take_along_axis(a, indices, axis=axis))
    except IndexError as err:
        raise IndexError(
            f"take_along_axis: indices must be in [-n, n) where n is the size of axis "
            f"{axis}. Received: x.shape={a.shape}, {err}"
        ) from err
