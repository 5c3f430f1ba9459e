"""Native manipulation and indexing ops (the front end's
:mod:`tessera_array._manipulation_functions` and :mod:`tessera_array._indexing_functions`).

Axes arrive normalised to non-negative ints (tuples where the standard allows
several), shapes are checked, joined arrays are cast to their result dtype. These
functions only move data; views versus copies follow the module. ``take`` and
``take_along_axis`` check their indices first where the module does not
(``index_arrays_checked`` False: the namespace's ``check_index_bounds`` hook).
"""

from __future__ import annotations

import numpy as np

__all__ = ["ManipulationFunctions"]

_REVERSE = slice(None, None, -1)
_ALL = slice(None)
_INTP = np.dtype(np.intp)


class ManipulationFunctions:
    """The ``manipulation`` chapter of the ops contract (a mixin of ``Namespace``)."""

    def broadcast_to(self, a, shape, /):
        """A read-only broadcast view of ``a`` with ``shape`` (NumPy's semantics)."""
        if a.shape == shape:
            return a
        return self.m.broadcast_to(a, shape)

    def concat(self, arrays, /, *, axis=0):
        """Join same-dtype ``arrays`` along ``axis`` (``None``: flattened first)."""
        return self.m.concatenate(arrays, axis=axis)

    def expand_dims(self, a, axis, /):
        """``a`` with singleton axes at the (sorted, non-negative) positions ``axis``."""
        shape = list(a.shape)
        for ax in axis:
            shape.insert(ax, 1)
        return a.reshape(shape)

    def flip(self, a, /, *, axis=None):
        """A reversed view of ``a`` along ``axis`` (a tuple of axes, or ``None`` for all)."""
        # The trailing Ellipsis keeps a 0-d result an array (a[()] would give a scalar).
        if axis is None:
            return a[(_REVERSE,) * a.ndim + (Ellipsis,)]
        key = [_ALL] * a.ndim
        for ax in axis:
            key[ax] = _REVERSE
        key.append(Ellipsis)
        return a[tuple(key)]

    def moveaxis(self, a, source, destination, /):
        """A view of ``a`` with the axes ``source`` moved to ``destination``."""
        return self.m.moveaxis(a, source, destination)

    def permute_dims(self, a, axes, /):
        """A view of ``a`` with its axes permuted."""
        return a.transpose(axes)

    def repeat(self, a, repeats, /, *, axis=None):
        """Repeat elements of ``a``; ``repeats`` is an int or a native integer array."""
        if repeats.__class__ is self.ndarray:
            if repeats.size:
                # sync: the output shape depends on the values of ``repeats``.
                lo = int(repeats.min())
                if lo < 0:
                    raise ValueError(
                        f"repeat: repeats must not contain negative values. "
                        f"Received: min(repeats)={lo}"
                    )
                if repeats.dtype.kind == "u" and repeats.dtype.itemsize == 8:
                    hi = int(repeats.max())  # sync: as above
                    if hi > np.iinfo(_INTP).max:
                        raise ValueError(
                            f"repeat: repeats has a value too large to index with. "
                            f"Received: max(repeats)={hi}"
                        )
            if repeats.dtype != _INTP:
                repeats = repeats.astype(_INTP)
        return self.m.asarray(self.m.repeat(a, repeats, axis=axis))

    def reshape(self, a, shape, /, copy=None):
        """``a`` with a new ``shape``; ``copy=False`` raises ValueError if a copy is needed."""
        if copy is None:
            return a.reshape(shape)
        if copy:
            return a.reshape(shape).copy()
        try:
            return self.m.reshape(a, shape, copy=False)
        except TypeError:  # a module whose reshape has no copy keyword (NumPy < 2.1)
            view = a.view()
            try:
                view.shape = shape
            except AttributeError as err:
                raise ValueError(_no_copy_message(a, shape)) from err
            return view
        except ValueError as err:
            raise ValueError(_no_copy_message(a, shape)) from err

    def roll(self, a, shift, /, *, axis=None):
        """``a`` rolled by ``shift`` (an int, or a tuple matching the tuple ``axis``)."""
        return self.m.roll(a, shift, axis=axis)

    def squeeze(self, a, axis, /):
        """A view of ``a`` without the singleton axes ``axis``."""
        if not axis:
            return a[...]
        return a.reshape([s for i, s in enumerate(a.shape) if i not in axis])

    def stack(self, arrays, /, *, axis=0):
        """Join same-shape, same-dtype ``arrays`` along a new axis ``axis``."""
        return self.m.stack(arrays, axis=axis)

    def tile(self, a, repetitions, /):
        """``a`` tiled ``repetitions`` times along each axis."""
        return self.m.asarray(self.m.tile(a, repetitions))

    def unstack(self, a, /, *, axis=0):
        """Views of ``a`` sliced along ``axis``."""
        lead = (_ALL,) * axis
        # The trailing Ellipsis keeps 0-d results as arrays (a[i] on 1-D gives a scalar).
        return tuple(a[lead + (i, Ellipsis)] for i in range(a.shape[axis]))

    def take(self, a, indices, /, *, axis=None):
        """Elements of ``a`` at ``indices`` along ``axis`` (``None``: of the flattened
        ``a``)."""
        try:
            if not self.index_arrays_checked:
                n = a.size if axis is None else a.shape[axis]
                self.check_index_bounds(indices, n, 0 if axis is None else axis)
            return self.m.asarray(self.m.take(a, indices, axis=axis))
        except IndexError as err:
            where = "the flattened x" if axis is None else f"axis {axis}"
            raise IndexError(
                f"take: indices must be in [-n, n) where n is the size of {where}. "
                f"Received: x.shape={a.shape}, {err}"
            ) from err

    def take_along_axis(self, a, indices, /, *, axis=-1):
        """Elements of ``a`` at ``indices`` along ``axis``, broadcasting the rest;
        ``axis=None``: of the flattened ``a``."""
        if axis is None:  # NumPy's meaning; CuPy has none
            a, axis = a.reshape(-1), 0
        try:
            if not self.index_arrays_checked:
                self.check_index_bounds(indices, a.shape[axis], axis)
            return self.m.asarray(self.m.take_along_axis(a, indices, axis=axis))
        except IndexError as err:
            raise IndexError(
                f"take_along_axis: indices must be in [-n, n) where n is the size of axis "
                f"{axis}. Received: x.shape={a.shape}, {err}"
            ) from err


def _no_copy_message(a, shape) -> str:
    return (f"reshape: a copy is needed to give this array the shape {shape}, and "
            f"copy=False forbids one. Received: x.shape={a.shape}, x.strides={a.strides}")
