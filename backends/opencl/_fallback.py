"""The host fallback: the one way an OpenCL op without a native kernel runs.

A fallback copies its native (``pyopencl.array.Array``) arguments to the host,
calls the NumPy backend's function of the same name, and copies the result back
to the queue of the first native argument (or of ``device=``). Buffers an op writes
in place (``copy_into``, ``setitem``, the optimizer steps) are written back.

Every name that runs this way is recorded: :func:`host_fallbacks` lists them
(``python -m tessera_array info`` shows the list), and the mode, from
``TESSERA_HOST_FALLBACK`` or :func:`set_mode`, says what a call does: ``"allow"``
(run on the host), ``"warn"`` (run, with a :class:`HostFallbackWarning`), or
``"error"`` (raise :class:`~tessera_array._errors.HostFallbackError` naming the
function and the device).
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pyopencl.array as cla

from tessera_array._errors import HostFallbackError, HostFallbackWarning

from . import _kernels

__all__ = [
    "MODES",
    "call_quietly",
    "host_fallback",
    "host_fallbacks",
    "make_fallbacks",
    "mode",
    "register_kernel_fallbacks",
    "set_mode",
]

MODES = ("allow", "warn", "error")
ENV = "TESSERA_HOST_FALLBACK"
_NATIVE = cla.Array
_names: set = set()


def _initial_mode() -> str:
    value = os.environ.get(ENV, "allow").strip().lower() or "allow"
    if value not in MODES:
        raise ValueError(
            f"{ENV}: expected one of {', '.join(MODES)}. Received: {ENV}={value!r}"
        )
    return value


_mode = _initial_mode()


def set_mode(value: str) -> None:
    """Set the fallback mode: ``"allow"``, ``"warn"`` or ``"error"``."""
    global _mode
    if value not in MODES:
        raise ValueError(
            f"set_host_fallback: mode must be one of {', '.join(map(repr, MODES))}. "
            f"Received: mode={value!r}"
        )
    _mode = value


def mode() -> str:
    """The current fallback mode."""
    return _mode


def host_fallbacks() -> tuple:
    """The sorted names of every op and kernel that runs through the host fallback."""
    return tuple(sorted(_names))


def _find_queue(obj):
    cls = obj.__class__
    if cls is _NATIVE:
        return obj.queue
    if cls is list or cls is tuple:
        for item in obj:
            q = _find_queue(item)
            if q is not None:
                return q
    return None


def _to_host(obj, written):
    cls = obj.__class__
    if cls is _NATIVE:
        host = _kernels.to_host(obj)
        if written is not None:
            written.append((obj, host))
        return host
    if cls is list or cls is tuple:
        return cls(_to_host(item, written) for item in obj)
    if cls is dict:
        return {k: _to_host(v, written) for k, v in obj.items()}
    return obj


def _to_device(obj, queue):
    if isinstance(obj, np.ndarray):
        return _kernels.to_device(queue, obj)
    if isinstance(obj, np.generic):
        return _kernels.to_device(queue, np.asarray(obj))
    if isinstance(obj, (list, tuple)):
        items = [_to_device(item, queue) for item in obj]
        if hasattr(obj, "_fields"):  # a named tuple (svd, slogdet, unique_all, ...)
            return obj.__class__(*items)
        return obj.__class__(items)
    return obj


def _refuse(name: str, queue) -> None:
    device = _kernels.QUEUE_DEVICE.get(queue, "an opencl device")
    text = (
        f"{name}: no native OpenCL kernel; the call would run on the host (copying its "
        f"arrays from and back to {device}). Received: {ENV}={_mode!r}. Allow it with "
        f"tessera_array.backends.opencl.set_host_fallback('allow')."
    )
    if _mode == "error":
        raise HostFallbackError(text)
    warnings.warn(HostFallbackWarning(text), stacklevel=4)


def host_fallback(name: str, host_fn, *, writes: bool = False, record: bool = True):
    """The OpenCL op ``name`` run through ``host_fn`` (the NumPy backend's op).

    With ``writes`` True, the native arguments are written back from their host
    copies after the call (the op updates them in place); with ``"changed"``, those
    whose host copies the call changed.
    """
    if record:
        _names.add(name)

    def fallback(*args, **kwargs):
        queue = _find_queue(args)
        if queue is None:
            queue = _find_queue(tuple(kwargs.values()))
        if queue is None:
            device = kwargs.get("device")
            if device is None:
                raise RuntimeError(
                    f"{name}: the opencl host fallback found no opencl array and no "
                    f"device= among its arguments"
                )
            queue = device._backend.queue(device)
        if _mode != "allow":
            _refuse(name, queue)
        written = [] if writes is True else None
        snap = [] if writes == "changed" else None
        hargs = _to_host(args, written if snap is None else snap)
        hkwargs = _to_host(kwargs, written if snap is None else snap) if kwargs else kwargs
        snapshots = None if snap is None else [host.copy() for _, host in snap]
        if kwargs.get("device") is not None:
            hkwargs = dict(hkwargs, device=None)
        with np.errstate(all="ignore"):
            result = host_fn(*hargs, **hkwargs)
        if written:
            for native, host in written:
                _kernels.write(native, host)
        elif snapshots is not None:
            for (native, host), before in zip(snap, snapshots):
                if not _same_bytes(host, before):
                    _kernels.write(native, host)
        return _to_device(result, queue)

    fallback.__name__ = fallback.__qualname__ = name
    fallback.__doc__ = f"``{name}`` on the host (see :mod:`{__name__}`)."
    fallback.host_fallback = True
    return fallback


_WRITES = frozenset({"copy_into", "inplace", "setitem"})


def make_fallbacks(native_names) -> dict:
    """A host fallback for every NumPy-backend op not in ``native_names``."""
    from tessera_array.backends.numpy import _ops as host_ops

    out = {}
    for mod in _host_chapters(host_ops):
        for name in mod.__all__:
            if name in native_names or name in out or name == "call_quietly":
                continue
            out[name] = host_fallback(name, getattr(host_ops, name), writes=name in _WRITES)
    return out


def _host_chapters(host_ops):
    return (host_ops,)


def _same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.tobytes() == b.tobytes()


def call_quietly(fn, *args):
    """``fn(*args)`` with floating-point reporting off (OpenCL kernels report nothing)."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args)


_LAUNCHER_ATTRS = ("plan_cache",)


def register_kernel_fallbacks(registry, backend_name: str) -> None:
    """Register the NumPy backend's kernels, through the host fallback, for every
    ``(op, dtype, variant)`` that ``backend_name`` has no native kernel for."""
    from tessera_array.backends.numpy import backend as numpy_backend

    from tessera_array._dispatch import KernelRegistry

    host = KernelRegistry()
    numpy_backend.register(host)
    have = {(k.op, k.dtype, k.variant) for k in registry.keys() if k.backend == backend_name}
    wrapped = {}
    for key in host.keys():
        if (key.op, key.dtype, key.variant) in have:
            continue
        launcher = host.lookup(key.op, key.backend, key.dtype, key.variant)
        tag = f"kernel {key.op}"
        fn = wrapped.get((tag, launcher))
        if fn is None:
            # Kernels may update their operands in place (optimizer steps, axpy):
            # whatever the host call changed is written back.
            fn = wrapped[tag, launcher] = host_fallback(tag, launcher, writes="changed")
            for attr in _LAUNCHER_ATTRS:  # the family's optional launcher attributes
                if hasattr(launcher, attr):
                    setattr(fn, attr, getattr(launcher, attr))
        registry.register(key.op, backend_name, key.dtype, fn, variant=key.variant)
