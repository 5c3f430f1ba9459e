"""Core native ops: dtype conversion, copying, indexing."""

from __future__ import annotations

import numpy as np

__all__ = ["asarray", "astype", "copy_into", "getitem", "setitem"]


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
