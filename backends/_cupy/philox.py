"""The dropout keep mask on the CuPy backend (``kernels/cuda/philox.cu``).

:func:`dropout_mask` is the ``dropout_mask`` launcher, with the NumPy backend's call
signature (:func:`tessera_array.backends.numpy.philox.dropout_mask`): the whole keep
mask of a score shape ``(..., Sq, Sk)`` as a C-contiguous bool ``cupy.ndarray`` on
``device``. The keep decision is the integer-only contract of
:mod:`tessera_array.random` (Philox4x32-10 with ``__umulhi``, ``kernels/include/tessera/
philox.cuh``), so the mask is bit-identical to the CPU's. :func:`keep_range` computes the
mask of the rows ``bh0 .. bh0 + nbh - 1`` alone (counters far beyond 2**32 blocks are
tested through it). The kernel runs on the current stream of the device; nothing here
synchronizes with the host.
"""

from __future__ import annotations

import numpy as np
from tessera_array.backends._common.checks import dropout_counters

from tessera_array import _dtypes

from . import _kernels

__all__ = ["BLOCK", "dropout_mask", "keep_range", "register"]

FILE = "philox.cu"
KERNEL = "tessera_dropout_mask"
BLOCK = 256  # threads per block, one Philox block (sixteen mask elements) each
GRID_MAX = 1 << 20  # blocks at most; the kernel's grid-stride loop covers the rest
_MASK32 = 0xFFFFFFFF


def keep_range(device, seed: int, offset: int, threshold: int, Sq: int, Sk: int,
               bh0: int, nbh: int):
    """The keep mask (bool ``cupy.ndarray``, ``(nbh, Sq, Sk)``) of score rows ``bh0 ..``.

    ``device`` is a ``cupy.cuda.Device``; ``threshold`` is ``floor(dropout_p * 2**40)``
    (0 keeps everything).
    """
    with device:
        out = _kernels.empty((nbh, Sq, Sk), np.bool_)
        n = nbh * Sq * Sk
        if n == 0:
            return out
        if threshold <= 0:
            out.fill(True)
            return out
        c0, n, blocks = dropout_counters(bh0, nbh, Sq, Sk)
        grid = min(-(-blocks // BLOCK), GRID_MAX)
        kernel = _kernels.function(FILE, KERNEL, device)
        kernel((grid,), (BLOCK,), (
            np.uint64(c0), np.uint64(n), np.uint32(seed & _MASK32), np.uint32(seed >> 32),
            np.uint32(offset & _MASK32), np.uint32(offset >> 32), np.uint32(threshold >> 32),
            np.uint32(threshold & _MASK32), out))
        return out


def dropout_mask(shape: tuple, seed: int, offset: int, threshold: int, device=None):
    """The ``dropout_mask`` launcher: the whole keep mask of ``shape`` (..., Sq, Sk), bool.

    ``device`` is the target Device (the call has no array to take it from): a tessera
    ``cuda:N`` / ``rocm:N`` Device or a ``cupy.cuda.Device``.
    """
    dev = _cupy_device(device)
    *lead, Sq, Sk = shape
    bh = 1
    for d in lead:
        bh *= d
    return keep_range(dev, seed, offset, threshold, Sq, Sk, 0, bh).reshape(tuple(shape))


def _cupy_device(device):
    """The ``cupy.cuda.Device`` of a tessera Device (its index) or of a CuPy one."""
    import cupy

    if device is None:
        raise ValueError("dropout_mask: the CuPy launcher needs device=. Received: device=None")
    if isinstance(device, cupy.cuda.Device):
        return device
    return cupy.cuda.Device(device.index)


def instances(warp: int) -> list:
    """``(file, name)`` of the kernel this launcher asks for (``.ci/compile-kernels``)."""
    return [(FILE, KERNEL)]


def register(registry, backend_name: str) -> None:
    """Register the ``dropout_mask`` launcher (keyed on bool, the mask's dtype)."""
    registry.register("dropout_mask", backend_name, _dtypes.bool, dropout_mask)
