"""Core native ops: dtype conversion, copies, indexing, in-place arithmetic.

``getitem``/``setitem`` receive the front end's normalised key (ints already bound
checked; index arrays as native buffers). Where the array module misses one of the
standard's indexing rules (its traits ``index_arrays_checked``, ``scatter_last_wins``,
``stores_negative_zero``; see :class:`~tessera_array.backends._xp.Namespace`), the
namespace binds :meth:`CoreFunctions.getitem_checked` /
:meth:`CoreFunctions.setitem_checked` in their place when it is built.
"""

from __future__ import annotations

import math

from ._dtypes import INDEX, kind_of

__all__ = ["CoreFunctions"]


class CoreFunctions:
    """The ``core`` chapter of the ops contract (a mixin of ``Namespace``)."""

    def astype(self, a, dtype, /, copy=True):
        """``a`` converted to the DType ``dtype``."""
        src, dst = a.dtype, dtype._np
        sk, dk = kind_of(src), kind_of(dst)
        if sk in "fc" and (
            dk in "iu"
            or dst.itemsize // (1 + (dk == "c")) < src.itemsize // (1 + (sk == "c"))
            or (dst.itemsize == src.itemsize == 2 and dst != src)  # float16 <-> bfloat16
        ):
            # NaN/inf to integers and overflow to a narrower float are defined by the
            # standard as implementation-dependent / IEEE; the module's warnings are noise.
            with self.quiet():
                return a.astype(dst, copy=copy)
        return a.astype(dst, copy=copy)

    def copy_into(self, dst, src, /):
        """Write ``src`` (a buffer or a Python scalar, broadcast) into ``dst`` in place."""
        if (src.__class__ is float or src.__class__ is complex) and src == 0 and (
                not self.stores_negative_zero):
            src = self.exact_scalar(src, dst.dtype)
        self.m.copyto(dst, src, casting="unsafe")

    def inplace(self, name, a, b, /):
        """``a <name>= b`` computed straight into ``a``; False (nothing written) if it can't be.

        The front end calls it only when the result has ``a``'s dtype: ``b`` is a buffer
        of ``a``'s dtype or a weak Python scalar of a kind ``a`` holds. The values are
        those of the out-of-place op (the same ufunc loop).
        """
        ufunc = self._inplace_ufuncs.get(name)
        if ufunc is None:
            return False
        try:
            ufunc(a, b, out=a)
        except (RuntimeWarning, FloatingPointError):
            # A module reporting IEEE flags does so after the loop has written every
            # element; the standard defines those values (inf, NaN), so the write
            # stands, as on the out-of-place path, which reruns such an op quietly.
            return True
        except (ValueError, TypeError, OverflowError):
            # Raised before the loop (b does not broadcast to a's shape, a is read-only,
            # a Python int too large for a float): the caller's general path words it.
            return False
        return True

    def getitem(self, a, key, /):
        """``a[key]`` as a native buffer (never a scalar)."""
        return self.m.asarray(a[key])

    def setitem(self, a, key, value, /):
        """``a[key] = value``; ``value`` is a buffer of ``a``'s dtype or a Python scalar."""
        if (value.__class__ is float or value.__class__ is complex) and a.dtype.char in "fF":
            # A Python float beyond float32's range rounds to inf (IEEE 754); no warning.
            with self.quiet():
                a[key] = value
            return
        a[key] = value

    # ---- the checked forms, bound in place of the two above by the traits ------------

    def getitem_checked(self, a, key, /):
        """:meth:`getitem` with the index arrays of ``key`` checked first."""
        self.check_key_bounds(a.shape, key)
        return self.m.asarray(a[key])

    def setitem_checked(self, a, key, value, /):
        """:meth:`setitem` with what the module's own assignment misses done first."""
        if not self.index_arrays_checked:
            self.check_key_bounds(a.shape, key)
        if value.__class__ is float or value.__class__ is complex:
            if not self.stores_negative_zero:
                value = self.exact_scalar(value, a.dtype)
        elif (not self.scatter_last_wins and value.__class__ is self.ndarray and value.ndim
              and _has_index_array(key, self.ndarray)):
            key, value = self.last_wins(a, key, value)
        CoreFunctions.setitem(self, a, key, value)

    def check_key_bounds(self, shape, key):
        """IndexError unless every integer index array of ``key`` is in bounds of its axis."""
        items = key if key.__class__ is tuple else (key,)
        ndarray = self.ndarray
        used = 0
        for item in items:
            if item.__class__ is ndarray:
                used += item.ndim if item.dtype.kind == "b" else 1
            elif item is not None and item is not Ellipsis and item.__class__ is not bool:
                used += 1
        axis = 0
        for item in items:
            if item is Ellipsis:
                axis += len(shape) - used
            elif item.__class__ is ndarray:
                if item.dtype.kind == "b":
                    axis += item.ndim
                    continue
                self.check_index_bounds(item, shape[axis], axis)
                axis += 1
            elif item is not None and item.__class__ is not bool:
                axis += 1

    def exact_scalar(self, value, dtype):
        """What to store for the Python float or complex ``value`` so that its bits
        survive: the value itself, or a 0-d buffer for a negative zero (a module whose
        fill writes zeros with a memset stores +0.0 for -0.0)."""
        if value == 0 and (math.copysign(1.0, value.real) < 0
                           or math.copysign(1.0, complex(value).imag) < 0):
            return self.m.asarray(value, dtype=dtype)
        return value

    def last_wins(self, a, key, value):
        """``(coords, values)`` writing ``a[key] = value`` so that a position the index
        arrays repeat receives the value of its last occurrence (NumPy's rule), whatever
        order the module's scatter writes in: every duplicate carries that one value."""
        m = self.m
        pos = m.arange(a.size, dtype=INDEX).reshape(a.shape)[key]
        if pos.size == 0:
            return key, value
        flat = pos.reshape(-1)
        vals = m.broadcast_to(value, pos.shape).reshape(-1)
        order = m.argsort(flat, kind="stable")
        sorted_pos = flat[order]
        last = m.searchsorted(sorted_pos, sorted_pos, side="right") - 1
        return m.unravel_index(sorted_pos, a.shape), vals[order][last]


def _has_index_array(key, ndarray) -> bool:
    items = key if key.__class__ is tuple else (key,)
    return any(i.__class__ is ndarray and i.dtype.kind != "b" for i in items)
