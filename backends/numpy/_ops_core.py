"""Core native ops: dtype conversion, copying, indexing."""

from __future__ import annotations

import numpy as np

__all__ = ["astype", "copy_into", "getitem", "setitem", "asarray"]


def astype(a: np.ndarray, dtype, copy: bool = True) -> np.ndarray:
    """``a`` converted to the DType ``dtype``."""
    return a.astype(dtype._np, copy=copy)


def copy_into(dst: np.ndarray, src) -> None:
    """Write ``src`` (broadcast) into ``dst`` in place."""
    np.copyto(dst, src, casting="unsafe")


def getitem(a: np.ndarray, key) -> np.ndarray:
    return np.asarray(a[key])


def setitem(a: np.ndarray, key, value) -> None:
    a[key] = value


def asarray(obj, dtype=None, copy=None) -> np.ndarray:
    return np.asarray(obj, dtype=None if dtype is None else dtype._np, copy=copy)
