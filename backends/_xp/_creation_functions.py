"""Native creation ops (the front end's :mod:`tessera_array._creation_functions`).

The front end has already validated shapes, resolved the DType and checked it
against the device; these functions allocate. ``dtype`` is a tessera DType,
``device`` the target Device: the namespace allocates on the module's current
device (a backend with several devices makes the right one current around the
call). Each returns a native buffer, never a scalar.
"""

from __future__ import annotations

import numpy as np

from ._dtypes import UINT64

__all__ = ["CreationFunctions"]


class CreationFunctions:
    """The ``creation`` chapter of the ops contract (a mixin of ``Namespace``)."""

    def empty(self, shape, /, *, dtype, device=None):
        return self.m.empty(shape, dtype=dtype._np)

    def zeros(self, shape, /, *, dtype, device=None):
        return self.m.zeros(shape, dtype=dtype._np)

    def ones(self, shape, /, *, dtype, device=None):
        return self.m.ones(shape, dtype=dtype._np)

    def full(self, shape, fill_value, /, *, dtype, device=None):
        """``fill_value`` is a Python scalar the front end checked against ``dtype``."""
        npdt = dtype._np
        out = self.m.empty(shape, dtype=npdt)
        if fill_value.__class__ is float or fill_value.__class__ is complex:
            if fill_value == 0 and not self.stores_negative_zero:
                fill_value = self.exact_scalar(fill_value, npdt)
            if npdt.char in "fF":
                # A float too large for float32 rounds to inf, as IEEE 754 says; no warning.
                with self.quiet():
                    out.fill(fill_value)
                return out
        out.fill(fill_value)
        return out

    def arange(self, start, stop, step, /, *, dtype, device=None):
        """``start``, ``stop``, ``step`` are Python ints or floats (``step != 0``)."""
        m = self.m
        npdt = dtype._np
        if npdt.kind in "iu":
            # Note: integer ranges in exact arithmetic; NumPy computes the length in
            # float64, which is off by one for large bounds. The front end passes ints.
            n = len(range(start, stop, step))
            if n == 0:
                return m.empty(0, dtype=npdt)
            last = start + (n - 1) * step
            info = np.iinfo(npdt)
            if not (info.min <= start <= info.max and info.min <= last <= info.max):
                raise OverflowError(
                    f"arange: the values {start} .. {last} do not fit dtype {dtype}."
                )
            # Offsets fit uint64 (|last - start| < 2**64); modular uint64 arithmetic
            # then a wrapping cast gives the exact values, which fit the dtype.
            offsets = m.arange(n, dtype=UINT64)
            m.multiply(offsets, np.uint64(abs(step)), out=offsets)
            base = np.uint64(start % 2**64)
            vals = m.add(base, offsets) if step > 0 else m.subtract(base, offsets)
            return vals.astype(npdt, copy=False)
        with self.quiet():
            return m.arange(start, stop, step, dtype=npdt)

    def linspace(self, start, stop, num, /, *, dtype, device=None, endpoint=True):
        with self.quiet():
            return self.m.linspace(start, stop, num, endpoint=endpoint, dtype=dtype._np)

    def eye(self, n_rows, n_cols, /, *, k=0, dtype, device=None):
        out = self.m.zeros((n_rows, n_cols), dtype=dtype._np)
        if -n_rows < k < n_cols:
            # The k-th diagonal in the flattened row-major buffer: every n_cols+1 items.
            if k >= 0:
                start, stop = k, min(n_rows, n_cols - k) * n_cols
            else:
                start, stop = -k * n_cols, (min(n_rows + k, n_cols) - k) * n_cols
            out.reshape(-1)[start:stop:n_cols + 1] = 1
        return out

    def meshgrid(self, *arrays, indexing="xy"):
        return tuple(self.m.meshgrid(*arrays, indexing=indexing))

    def tril(self, a, /, *, k=0):
        return self.m.tril(a, k=_clamp_k(a, k))

    def triu(self, a, /, *, k=0):
        return self.m.triu(a, k=_clamp_k(a, k))


def _clamp_k(a, k: int) -> int:
    # Beyond the matrix both functions saturate; clamping keeps the module's arange small.
    rows, cols = a.shape[-2:]
    return max(-rows - 1, min(cols + 1, k))
