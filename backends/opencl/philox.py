"""The dropout keep mask on the OpenCL backend (``kernels/opencl/philox.cl``).

:func:`dropout_mask` is the ``dropout_mask`` launcher, with the NumPy backend's call
signature (:func:`tessera_array.backends.numpy.philox.dropout_mask`): the whole keep
mask of a score shape ``(..., Sq, Sk)`` as a C-contiguous bool ``pyopencl.array.Array``
on ``device``'s queue. The keep decision is the integer-only contract of
:mod:`tessera_array.random` (Philox4x32-10 in OpenCL C with ``mul_hi``: a byte of one
block per sixteen elements, a refinement word on a tie; ``threshold = floor(p * 2**40)``
reaches the kernel as ``threshold >> 32`` and ``threshold & 0xFFFFFFFF``), so the mask
is bit-identical to the CPU's. :func:`keep_range` computes the mask of the rows
``bh0 .. bh0 + nbh - 1`` alone (the attention kernels' counters far beyond 2**32
blocks are tested through it).
"""

from __future__ import annotations

import numpy as np
from tessera_array.backends._common.checks import dropout_counters

from tessera_array import _dtypes

from . import _memory, _programs

__all__ = ["dropout_mask", "keep_range", "register"]

FILE = "philox.cl"
WG = 64  # work-group size of tessera_dropout_mask
_MASK32 = 0xFFFFFFFF


def _alloc(queue, shape, dtype):
    """Every mask buffer is allocated here (tests poison it to prove full writes), through
    PyOpenCL's fast constructor: ``cla.empty`` of (2, 3, 16, 16) float32 / (2, 3, 16) bool
    took 69 / 89 us, this 7 / 9 us (NumPy shape checks skipped; PoCL 3.0, shared 2-core
    EPYC at load 5-6, the driver's allocation included, medians of 9 x 3000 calls)."""
    return _memory.new(queue, shape, dtype)


def keep_range(queue, seed: int, offset: int, threshold: int, Sq: int, Sk: int,
               bh0: int, nbh: int):
    """The keep mask (bool, ``(nbh, Sq, Sk)``) of the score rows ``bh0 .. bh0+nbh-1``."""
    out = _alloc(queue, (nbh, Sq, Sk), np.bool_)
    n = nbh * Sq * Sk
    if n == 0:
        return out
    if threshold <= 0:  # keep everything: bytes of 1 (no pyopencl fill kernel to build)
        import pyopencl as cl

        out.add_event(cl.enqueue_fill_buffer(queue, out.base_data, np.uint8(1), out.offset,
                                             out.nbytes))
        return out
    c0, n, blocks = dropout_counters(bh0, nbh, Sq, Sk)
    knl = _programs.kernel(queue.context, FILE, (), "tessera_dropout_mask")
    wg = min(WG, queue.device.max_work_group_size)
    evt = knl(queue, (-(-blocks // wg) * wg,), (wg,), np.uint64(c0), np.uint64(n),
              np.uint32(seed & _MASK32), np.uint32(seed >> 32),
              np.uint32(offset & _MASK32), np.uint32(offset >> 32),
              np.uint32(threshold >> 32), np.uint32(threshold & _MASK32), out.base_data)
    out.add_event(evt)
    return out


def dropout_mask(shape: tuple, seed: int, offset: int, threshold: int, device=None):
    """The ``dropout_mask`` launcher: the whole keep mask of ``shape`` (..., Sq, Sk), bool.

    ``device`` is the target opencl Device (the call has no array to take it from).
    """
    if device is None:
        raise ValueError("dropout_mask: the opencl launcher needs device=. Received: device=None")
    queue = device.backend.queue(device)
    *lead, Sq, Sk = shape
    bh = 1
    for d in lead:
        bh *= d
    return keep_range(queue, seed, offset, threshold, Sq, Sk, 0, bh).reshape(tuple(shape))


def register(registry, backend_name: str) -> None:
    """Register the ``dropout_mask`` launcher (keyed on bool, the mask's dtype)."""
    registry.register("dropout_mask", backend_name, _dtypes.bool, dropout_mask)
