"""Core native ops: dtype conversion, copying, indexing."""

from __future__ import annotations

import numpy as np

__all__ = ["asarray", "astype", "copy_into", "getitem", "inplace", "setitem"]


def astype(a: np.ndarray, dtype, copy: bool = True) -> np.ndarray:
    """``a`` converted to the DType ``dtype``."""
    src, dst = a.dtype, dtype._np
    if src.kind in "fc" and (
        dst.kind in "iu"
        or dst.itemsize // (1 + (dst.kind == "c")) < src.itemsize // (1 + (src.kind == "c"))
    ):
        # NaN/inf to integers and overflow to a narrower float are defined by the
        # standard as implementation-dependent / IEEE; NumPy's warnings are noise.
        with np.errstate(invalid="ignore", over="ignore"):
            return a.astype(dst, copy=copy)
    return a.astype(dst, copy=copy)


def copy_into(dst: np.ndarray, src) -> None:
    """Write ``src`` (broadcast) into ``dst`` in place."""
    np.copyto(dst, src, casting="unsafe")


_INPLACE_UFUNCS = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
}


def inplace(name: str, a: np.ndarray, b) -> bool:
    """``a <name>= b`` computed straight into ``a``; False (nothing written) if it can't be.

    The front end calls it only when the result has ``a``'s dtype: ``b`` is a
    buffer of ``a``'s dtype or a weak Python scalar of a kind ``a`` holds. The values
    are those of the out-of-place op (the same ufunc loop).
    """
    ufunc = _INPLACE_UFUNCS.get(name)
    if ufunc is None:
        return False
    try:
        ufunc(a, b, out=a)
    except (RuntimeWarning, FloatingPointError):
        # NumPy reports IEEE flags after the loop has written every element; the
        # standard defines those values (inf, NaN), so the write stands, as on the
        # out-of-place path, which reruns such an op quietly.
        return True
    except (ValueError, TypeError, OverflowError):
        # Raised before the loop (b does not broadcast to a's shape, a is read-only, a
        # Python int too large for a float): the caller's general path words it.
        return False
    return True


def getitem(a: np.ndarray, key) -> np.ndarray:
    return np.asarray(a[key])


def setitem(a: np.ndarray, key, value) -> None:
    if (value.__class__ is float or value.__class__ is complex) and a.dtype.char in "fF":
        # A Python float beyond float32's range rounds to inf (IEEE 754); no warning.
        with np.errstate(over="ignore"):
            a[key] = value
        return
    a[key] = value


def asarray(obj, dtype=None, copy=None) -> np.ndarray:
    return np.asarray(obj, dtype=None if dtype is None else dtype._np, copy=copy)
