"""Shared host-side pieces of the OpenCL family launchers.

Each launcher (matvec, spmv, axpy, optimizer steps) keeps, per context, dtype,
variant and shape class, everything a call would otherwise recompute: the kernel,
its work-group and global sizes, the device's properties, and the NumPy scalar
arguments (measured on PoCL 3.0, shared 2-core EPYC: ``np.int64(5)`` 0.4-0.6 us,
``context.devices[0]`` 0.5 us, ``a.ndim`` 0.14 us, an attribute 0.02 us). A repeated
call validates its arguments by attribute tests (or by its plan key, which holds every
attribute the checks read) and goes straight to the kernel; only a new shape class
takes the full checks. The tables are in each launcher module's docstring. The caches
are :class:`~tessera_array.backends._common.Memo` objects (emptied at
:data:`PLANS_MAX` entries, and by ``clear_all()``).

The host cost per call is measured by ``python -m benchmarks --device opencl:N --suite
opencl_launch``.
"""

from __future__ import annotations

import enum
from typing import NamedTuple

import numpy as np

__all__ = ["PLANS_MAX", "ZERO64", "KernelSetup", "Work"]

PLANS_MAX = 1024  # entries a launcher module's cache holds before it starts again
ZERO64 = np.int64(0)  # the element offset of nearly every buffer


class Work(enum.Enum):
    """What a kept launch plan does for a call."""

    NOTHING = "nothing"  # the result has no element: only allocated
    ZEROS = "zeros"  # every element is 0 (an empty sum): filled, no kernel
    KERNEL = "kernel"  # the plan's kernel computes the result


class KernelSetup(NamedTuple):
    """A launcher's kernel with what its launches need to know of the device."""

    kernel: object  # the pyopencl.Kernel (its scalar argument types declared)
    wg: int  # work-group size of its launches (1 on CPU devices for chunked kernels)
    cpu: bool  # a CPU device: launches give each work-item a contiguous chunk
    units: int  # the device's compute units (at least 1)
