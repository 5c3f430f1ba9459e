"""Native creation ops of the NumPy backend.

The front end (:mod:`tessera_array._creation_functions`) has already validated
shapes, resolved the DType and checked it against the device; these functions only
allocate. ``dtype`` is a tessera DType, ``device`` the target Device (the host CPU
here, so it is not needed). Each returns a ``numpy.ndarray``, never a NumPy scalar.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "arange",
    "empty",
    "eye",
    "full",
    "linspace",
    "meshgrid",
    "ones",
    "tril",
    "triu",
    "zeros",
]


def empty(shape: tuple, *, dtype, device=None) -> np.ndarray:
    return np.empty(shape, dtype=dtype._np)


def zeros(shape: tuple, *, dtype, device=None) -> np.ndarray:
    return np.zeros(shape, dtype=dtype._np)


def ones(shape: tuple, *, dtype, device=None) -> np.ndarray:
    return np.ones(shape, dtype=dtype._np)


def full(shape: tuple, fill_value, *, dtype, device=None) -> np.ndarray:
    """``fill_value`` is a Python scalar the front end checked against ``dtype``."""
    npdt = dtype._np
    out = np.empty(shape, dtype=npdt)
    if npdt.char in "fF" and fill_value.__class__ is not int:
        # A float too large for float32 rounds to inf, as IEEE 754 says; no warning.
        with np.errstate(over="ignore"):
            out.fill(fill_value)
    else:
        out.fill(fill_value)
    return out


def arange(start, /, stop, step, *, dtype, device=None) -> np.ndarray:
    """``start``, ``stop``, ``step`` are Python ints or floats (``step != 0``)."""
    npdt = dtype._np
    if npdt.kind in "iu":
        # Integer ranges in exact arithmetic: NumPy computes the length in float64,
        # which is off by one for large bounds. The front end passes ints here.
        n = len(range(start, stop, step))
        if n == 0:
            return np.empty(0, dtype=npdt)
        last = start + (n - 1) * step
        info = np.iinfo(npdt)
        if not (info.min <= start <= info.max and info.min <= last <= info.max):
            raise OverflowError(
                f"arange: the values {start} .. {last} do not fit dtype {dtype}."
            )
        # Offsets fit uint64 (|last - start| < 2**64); modular uint64 arithmetic
        # then a wrapping cast gives the exact values, which fit the dtype.
        offsets = np.arange(n, dtype=np.uint64)
        offsets *= np.uint64(abs(step))
        base = np.uint64(start % 2**64)
        vals = np.add(base, offsets) if step > 0 else np.subtract(base, offsets)
        return vals.astype(npdt, copy=False)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.arange(start, stop, step, dtype=npdt)


def linspace(start, stop, /, num: int, *, dtype, device=None, endpoint: bool = True) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.linspace(start, stop, num, endpoint=endpoint, dtype=dtype._np)


def eye(n_rows: int, n_cols: int, /, *, k: int = 0, dtype, device=None) -> np.ndarray:
    out = np.zeros((n_rows, n_cols), dtype=dtype._np)
    if -n_rows < k < n_cols:
        # The k-th diagonal in the flattened row-major buffer: every n_cols+1 items.
        if k >= 0:
            start, stop = k, min(n_rows, n_cols - k) * n_cols
        else:
            start, stop = -k * n_cols, (min(n_rows + k, n_cols) - k) * n_cols
        out.reshape(-1)[start:stop:n_cols + 1] = 1
    return out


def meshgrid(*arrays: np.ndarray, indexing: str = "xy") -> tuple:
    return tuple(np.meshgrid(*arrays, indexing=indexing))


def _clamp_k(a: np.ndarray, k: int) -> int:
    # Beyond the matrix both functions saturate; clamping keeps NumPy's arange small.
    rows, cols = a.shape[-2:]
    return max(-rows - 1, min(cols + 1, k))


def tril(x: np.ndarray, /, *, k: int = 0) -> np.ndarray:
    return np.tril(x, k=_clamp_k(x, k))


def triu(x: np.ndarray, /, *, k: int = 0) -> np.ndarray:
    return np.triu(x, k=_clamp_k(x, k))
