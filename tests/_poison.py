"""Poisoned scratch for the GPU launchers' tests: buffers of 0xFF bytes (NaN in floats,
-1 in signed integers), so a result or partial sum read before a kernel writes it cannot
pass a comparison."""

from __future__ import annotations

import numpy as np


def poisoned_empty(xp):
    """An ``empty(shape, dtype)`` of array module ``xp`` (CuPy, or NumPy in a host test)
    whose buffers start as 0xFF bytes: what the tests put in place of the backend's
    ``_kernels.empty``."""

    def empty(shape, dtype):
        dtype = np.dtype(dtype)
        shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        return xp.full(nbytes, 0xFF, dtype=xp.uint8).view(dtype).reshape(shape)

    return empty
