"""Shared host-side helpers of the OpenCL family launchers.

Each launcher (matvec, spmv, axpy, optimizer steps) keeps, per context, dtype,
variant and shape class, everything a call would otherwise recompute: the kernel,
its work-group and global sizes, the device's properties, and the NumPy scalar
arguments (measured on PoCL 3.0, shared 2-core EPYC: ``np.int64(5)`` 0.4-0.6 us,
``context.devices[0]`` 0.5 us, ``a.ndim`` 0.14 us, an attribute 0.02 us). A repeated
call validates its arguments by attribute tests (or by its plan key, which holds every
attribute the checks read) and goes straight to the kernel; only a new shape class
takes the full checks. The tables are in each launcher module's docstring.

The host cost per call is measured by ``python -m benchmarks --device opencl:N --suite
opencl_launch``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PLANS_MAX", "ZERO64", "array_class", "c_layout", "empty", "fresh"]

PLANS_MAX = 1024  # entries a launcher module's cache holds before it starts again
ZERO64 = np.int64(0)  # the element offset of nearly every buffer

_cla = None
_cla_array = None  # pyopencl.array.Array once array_class() has run (a class test's target)


def array_class():
    """``pyopencl.array.Array`` (imported on first use)."""
    global _cla, _cla_array
    if _cla is None:
        import pyopencl.array as cla

        _cla, _cla_array = cla, cla.Array
    return _cla_array


def c_layout(shape: tuple, itemsize: int) -> tuple:
    """``(strides, size)`` of a C-contiguous array of ``shape``, as ``cla.empty`` sets them."""
    strides, stride, size = [], itemsize, 1
    for n in reversed(shape):
        strides.append(stride)
        stride *= max(1, n)
        size *= n
    return tuple(reversed(strides)), size


def fresh(queue, context, shape: tuple, strides: tuple, size: int, dtype, allocator):
    """A new C-contiguous ``pyopencl.array.Array`` (uninitialised) through PyOpenCL's fast
    constructor: ``cla.empty`` spends 20-30 us in NumPy shape checks, this 2-3 us."""
    cla = _cla
    if cla is None:
        array_class()
        cla = _cla
    try:
        return cla.Array(None, shape, dtype, allocator=allocator, strides=strides, _fast=True,
                         _size=size, _context=context, _queue=queue)
    except TypeError:  # a PyOpenCL without the fast constructor
        return cla.empty(queue, shape, dtype, allocator=allocator)


def empty(queue, shape, dtype):
    """A new C-contiguous array of ``shape`` on ``queue`` through :func:`fresh`."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    strides, size = c_layout(shape, dtype.itemsize)
    return fresh(queue, queue.context, shape, strides, size, dtype, None)
