"""Buffers of the OpenCL backend: allocation, views, layout and host transfers.

Native buffers are ``pyopencl.array.Array`` (:data:`NATIVE`, the one name of that
class here): fresh results are C-contiguous, views (basic indexing, ``permute_dims``)
share their base's buffer with an element offset and strides. Results come from one
memory pool per device queue (:func:`allocator`), as CuPy's pool serves its arrays.

State kept here (not caches, so :func:`~tessera_array.backends._common.clear_all`
leaves them): :data:`QUEUE_DEVICE`, the tessera device of each device queue (the queue
alone names only a ``pyopencl.Device``), written by the backend when it makes a queue;
and the backend object itself (:func:`attach`), for :func:`device_queue`.
"""

from __future__ import annotations

import numpy as np
import pyopencl as cl
import pyopencl.array as cla
from tessera_array.backends._common import c_strides, memo

__all__ = [
    "NATIVE",
    "QUEUE_DEVICE",
    "allocator",
    "attach",
    "check_array",
    "contiguous",
    "copy_into",
    "device_queue",
    "empty",
    "fresh",
    "layout",
    "new",
    "queue_of",
    "strides_for",
    "to_device",
    "to_host",
    "upload",
    "view",
    "write",
]

NATIVE = cla.Array  # the native buffer class (a class test's target: `a.__class__ is NATIVE`)
QUEUE_DEVICE: dict = {}  # pyopencl.CommandQueue -> tessera Device (state, see the docstring)
_backend = None  # the OpenclBackend (state, see the docstring)
_pools = memo("opencl.pools")  # pyopencl.CommandQueue -> pyopencl.tools.MemoryPool


def attach(backend) -> None:
    """Remember the backend object (for :func:`device_queue`)."""
    global _backend
    _backend = backend


def device_queue(device):
    """The in-order queue of tessera ``device`` (made by the backend on first use)."""
    return _backend.queue(device)


def queue_of(func: str, a):
    """The queue of pyopencl array ``a``; ValueError when it has none."""
    q = a.queue
    if q is None:
        raise ValueError(
            f"{func}: the pyopencl array has no queue; give it one (a.with_queue(q)). "
            f"Received: a.queue=None"
        )
    return q


def check_array(func: str, name: str, a) -> None:
    """TypeError unless ``a`` is a pyopencl array."""
    if not isinstance(a, NATIVE):
        raise TypeError(
            f"{func}: {name} must be a pyopencl.array.Array. "
            f"Received: {name} of type {type(a).__name__}"
        )


def allocator(queue):
    """The memory pool of ``queue`` (one per device queue): freed buffers are kept and
    reused, as CuPy's pool does, instead of a driver allocation per result. Reuse is
    safe because each device has one in-order queue: a new owner's commands run after
    every command of the old one. Measured, ``a + b`` of 10 float32 on opencl:0 (PoCL
    3.0, shared 2-core EPYC), call to finished result: 265 us without, 130-150 us with."""
    pool = _pools.get(queue)
    if pool is None:
        import pyopencl.tools as clt

        pool = _pools.setdefault(queue, clt.MemoryPool(clt.ImmediateAllocator(queue)))
    return pool


def fresh(queue, context, shape: tuple, strides: tuple, size: int, dtype, alloc):
    """A new C-contiguous array (uninitialised) of ``shape``, byte ``strides`` and
    ``size`` elements from ``alloc`` (None: a driver allocation), through PyOpenCL's
    fast constructor: ``cla.empty`` spends 20-30 us in NumPy shape checks per call (PoCL
    3.0, 2-core EPYC), as much as a tiny kernel's launch; this 2-3 us."""
    try:
        return cla.Array(None, shape, dtype, allocator=alloc, strides=strides, _fast=True,
                         _size=size, _context=context, _queue=queue)
    except TypeError:  # a PyOpenCL without the fast constructor
        return cla.empty(queue, shape, dtype, allocator=alloc)


def new(queue, shape, dtype, alloc=None) -> cla.Array:
    """A new C-contiguous array (uninitialised) of ``shape`` from ``alloc`` (None: a
    driver allocation; :func:`allocator` gives the queue's pool), through :func:`fresh`."""
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    size = 1
    for n in shape:
        size *= n
    return fresh(queue, queue.context, shape, tuple(c_strides(shape, dtype.itemsize)), size,
                 dtype, alloc)


def empty(queue, shape: tuple, dtype) -> cla.Array:
    """A new C-contiguous buffer (uninitialised), from the queue's memory pool."""
    return new(queue, shape, dtype, allocator(queue))


def upload(queue, host: np.ndarray, alloc=None) -> cla.Array:
    """A new C-contiguous array from ``alloc`` (as :func:`new`) holding ``host``."""
    host = np.asarray(host)
    if not host.flags.c_contiguous:
        host = host.copy(order="C")  # (np.ascontiguousarray makes 0-d arrays 1-d)
    out = new(queue, host.shape, host.dtype, alloc)
    if host.size:
        cl.enqueue_copy(queue, out.base_data, host, dst_offset=out.offset)
    return out


def view(a, shape: tuple, strides: tuple, offset: int) -> cla.Array:
    """A view of ``a``'s buffer: ``offset`` and ``strides`` in elements."""
    isz = a.dtype.itemsize
    return cla.Array(a.queue, shape, a.dtype, data=a.base_data, offset=offset * isz,
                     strides=tuple(s * isz for s in strides))


def layout(a) -> tuple:
    """(element offset, element strides) of ``a``."""
    isz = a.dtype.itemsize
    return a.offset // isz, tuple(s // isz for s in a.strides)


def strides_for(a, shape) -> list:
    """Element strides of ``a`` broadcast to ``shape`` (0 along broadcast axes)."""
    isz = a.dtype.itemsize
    pad = len(shape) - len(a.shape)
    return [0] * pad + [
        0 if d == 1 else s // isz for s, d in zip(a.strides, a.shape)
    ]


def to_device(queue, host: np.ndarray):
    """A new C-contiguous device buffer (from the queue's pool) holding ``host``."""
    if not host.flags.c_contiguous:
        host = host.copy(order="C")  # (np.ascontiguousarray makes 0-d arrays 1-d)
    out = empty(queue, host.shape, host.dtype)
    if host.size:
        cl.enqueue_copy(queue, out.base_data, host, dst_offset=out.offset)
    return out


def contiguous(a):
    """``a`` itself when C-contiguous, else a C-contiguous copy."""
    if a.flags.c_contiguous:
        return a
    out = empty(a.queue, a.shape, a.dtype)
    copy_into(out, a)
    return out


def to_host(a) -> np.ndarray:
    """The values of ``a`` as a new host array."""
    a = contiguous(a)
    out = np.empty(a.shape, a.dtype)
    if a.size:
        cl.enqueue_copy(a.queue, out, a.base_data, src_offset=a.offset)
    return out


def write(native, host: np.ndarray) -> None:
    """Overwrite ``native`` (C-contiguous or a view) with ``host`` (same shape)."""
    if not native.size:
        return
    host = np.asarray(host, dtype=native.dtype)
    if not host.flags.c_contiguous:
        host = host.copy(order="C")
    if native.flags.c_contiguous:
        cl.enqueue_copy(native.queue, native.base_data, host, dst_offset=native.offset)
    else:
        copy_into(native, to_device(native.queue, host))


def copy_into(dst, src) -> None:
    """``dst[...] = src`` for a buffer ``src`` of ``dst``'s dtype, broadcast."""
    # (a copy is a generated map kernel; _kernels imports this module)
    from ._generate import CTYPE
    from ._kernels import launch_map

    launch_map(dst.queue, "a0", dst, [src], CTYPE[dst.dtype.char])
