"""Registered kernels below the namespace: the seam for benchmarks and tests.

The namespace's functions reach every kernel through the registry, keyed by
``(op, backend, dtype, variant)`` (:mod:`tessera_array._dispatch`). This module hands
benchmarks and tests the same launchers, and the native buffers they take, without
reaching into a backend's private modules::

    import tessera_array as xp
    from tessera_array import launchers

    dev = "opencl:0"
    mv = launchers.launcher("matvec", dev, xp.float32, variant="warp")
    a = launchers.native(xp.asarray(a_host, device=dev))  # pyopencl.array.Array here
    x = launchers.native(xp.asarray(x_host, device=dev))
    y = launchers.to_host(mv(a, x), dev)                  # numpy.ndarray

A launcher's arguments and result are its family's contract, written once per family
(``attention`` in :mod:`tessera_array.nn._attention`, ``fft`` in :mod:`tessera_array.fft`,
``matvec`` and ``optimizer`` as the NumPy backend's launchers in
``tessera_array.backends.numpy``): native buffers in, native buffers out, no checks
beyond the launcher's own. Native buffers made from the namespace's arrays come from
the backend's own allocator (its memory pool), as the namespace's results do.

This is not part of the Array API standard and not for applications: it is the
documented seam that ``python -m benchmarks`` (benchmarks/README.md) and the tests
use to time and check one registered kernel; its names follow the registry's.
"""

from __future__ import annotations

from collections.abc import Callable

from ._array import Array
from ._devices import as_device
from ._dispatch import DEFAULT_VARIANT, OPS, registry
from ._dtypes import DType

__all__ = ["launcher", "native", "to_host", "variants"]


def _check_dtype(func: str, dtype) -> None:
    if not isinstance(dtype, DType):
        raise TypeError(
            f"{func}: dtype must be a tessera_array dtype such as xp.float32. "
            f"Received: dtype={dtype!r}"
        )


def launcher(op: str, device, dtype: DType, variant: str = DEFAULT_VARIANT) -> Callable:
    """The launcher registered for ``op`` on ``device``'s backend for ``dtype``.

    Parameters
    ----------
    op : str
        An op of :data:`tessera_array._dispatch.OPS` (``"matvec"``, ``"spmv"``,
        ``"sgd_step"``, ``"fft_c2c"``, ...).
    device : Device or str
        The device whose backend's kernel is wanted (``"opencl:0"``).
    dtype : DType
        The dtype the kernel is registered for.
    variant : str
        The registered variant (``"default"``; ``"scalar"``/``"warp"`` for matvec and
        spmv); :func:`variants` lists them.

    Raises
    ------
    KernelNotFoundError
        Nothing is registered under that key (the message lists what is).
    """
    _check_dtype("launcher", dtype)
    dev = as_device(device, "launcher")
    return registry.lookup(op, dev.backend.name, dtype, variant)


def variants(op: str, device, dtype: DType) -> tuple:
    """The variants registered for ``op`` on ``device``'s backend for ``dtype``, sorted."""
    _check_dtype("variants", dtype)
    if op not in OPS:
        raise ValueError(f"variants: unknown op. Expected one of {sorted(OPS)}. Received: "
                         f"op={op!r}")
    backend = as_device(device, "variants").backend.name
    keys = registry.keys()  # (a method of KernelRegistry: every key, sorted)
    return tuple(sorted({k.variant for k in keys
                         if k.op == op and k.backend == backend and k.dtype == dtype}))


def native(x: Array):
    """The device's native buffer behind ``x`` (``numpy.ndarray`` on the CPU,
    ``pyopencl.array.Array`` on OpenCL devices), shared, not copied."""
    if not isinstance(x, Array):
        raise TypeError(f"native: expected a tessera_array Array. Received: {type(x).__name__}")
    return x._data


def to_host(buffer, device):
    """A ``numpy.ndarray`` copy of a native ``buffer`` of ``device`` (a launcher's result)."""
    return as_device(device, "to_host").backend.to_host(buffer)
