"""The OpenCL backend's host fallback: the one way a function without a native kernel runs.

:data:`FALLBACK` is the generic mechanism of :mod:`tessera_array.backends._common.fallback`
over ``pyopencl.array.Array`` buffers: arguments are copied to the host, the NumPy
backend's function runs, results come back to the queue of the first native argument
(or of ``device=``), and the buffers the function writes in place are written back.
What runs this way is listed by ``backend.host_fallbacks()`` (``python -m tessera_array
info``); the mode (``TESSERA_HOST_FALLBACK`` or ``set_host_fallback``: ``"warn"``, the
default, warns once per function and device; ``"allow"``; ``"error"``) is described
there.
"""

from __future__ import annotations

import pyopencl.array as cla
from tessera_array.backends._common import fallback as _generic
from tessera_array.backends.numpy import backend as _numpy_backend

from . import _kernels

__all__ = [
    "FALLBACK",
    "MODES",
    "host_fallback",
    "host_fallbacks",
    "mode",
    "op",
    "register_kernel_fallbacks",
    "set_mode",
]

MODES = _generic.MODES
_NATIVE = cla.Array


def _is_native(obj) -> bool:
    return obj.__class__ is _NATIVE


def _from_host(host, like):
    queue = like.queue if like.__class__ is _NATIVE else like.backend.queue(like)
    return _kernels.to_device(queue, host)


def _device_of(native):
    return _kernels.QUEUE_DEVICE.get(native.queue, "an opencl device")


FALLBACK = _generic.HostFallback(
    "opencl", label="OpenCL", is_native=_is_native, to_host=_kernels.to_host,
    from_host=_from_host, write_back=_kernels.write, device_of=_device_of,
    host=_numpy_backend,
)
"""The OpenCL instance of the host fallback."""

_initial_mode = _generic.initial_mode  # the mode TESSERA_HOST_FALLBACK sets (tests restore it)


def set_mode(value: str) -> None:
    """Set the fallback mode: ``"allow"``, ``"warn"`` or ``"error"``."""
    FALLBACK.set_mode(value)


def mode() -> str:
    """The current fallback mode."""
    return FALLBACK.mode


def host_fallbacks() -> tuple:
    """The sorted names of every function and kernel that runs through the host fallback."""
    return FALLBACK.names()


def host_fallback(name: str, host_fn, *, writes=(), record: bool = True):
    """The OpenCL function ``name`` run through ``host_fn`` (a NumPy-backend function):
    a native function's dtypes or keys handed to the host (``name[detail]``), or a
    kernel variant (``kernel vecdot[blas]``). ``writes``: the positions and keyword
    names of the arguments it writes in place."""
    return FALLBACK.wrap(name, host_fn, writes=writes, record=record)


def op(name: str):
    """The fallback of the contract's ``ops`` function ``name`` (no native kernel yet)."""
    return FALLBACK.op(name)


def register_kernel_fallbacks(registry) -> tuple:
    """Register the NumPy backend's kernels, through the host fallback, for the kernel ops
    of the contract that the OpenCL families do not cover (listed as ``kernel <op>``).

    The host's float16/bfloat16 kernels (``linear``) are left out: an OpenCL device holds
    no 16-bit arrays (``OpenclBackend.missing_capability``), so their lookups keep
    refusing with a KernelDTypeError rather than naming a host path."""
    from tessera_array import _dtypes

    return FALLBACK.register_kernels(registry, skip_dtypes=_dtypes.HALF_FLOATING)
