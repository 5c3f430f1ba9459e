"""Compiled kernels of the CuPy backend: ``function(file, name, device)`` and output buffers.

``function("matvec.cu", "tessera_matvec_scalar<float, float>", device)`` compiles
``kernels/cuda/matvec.cu`` (with ``kernels/include`` on the include path) for the CuPy
device ``device`` and returns the kernel ``name`` (a template instance, as CuPy's
``name_expressions`` take it), cached per (file, name, options, device). The returned
object is called as CuPy's ``RawKernel``: ``kernel(grid, block, args, shared_mem=0)``,
on the current stream of the current device; launchers make ``device`` current first.

:func:`empty` allocates every output a launcher returns (tests poison outputs through it:
a NaN-filled or 0xFF-filled buffer shows any element a kernel failed to write).
"""

from __future__ import annotations

import threading

from tessera_array.kernels import KERNELS_DIR, source_path

__all__ = ["empty", "function", "include_dir", "warp_size"]

_lock = threading.Lock()
_modules: dict = {}  # (file, name, options, device id) -> cupy.RawModule
_warp: dict = {}  # device id -> warp size
OPTIONS = ("-std=c++17",)


def include_dir() -> str:
    """The folder of the shared headers (``#include "tessera/types.cuh"``)."""
    return str(KERNELS_DIR / "include")


def function(file: str, name: str, device, *, options: tuple = ()):
    """The kernel ``name`` of ``kernels/cuda/<file>`` compiled for CuPy device ``device``."""
    import cupy

    key = (file, name, tuple(options), device.id)
    hit = _modules.get(key)
    if hit is None:
        with _lock:
            hit = _modules.get(key)
            if hit is None:
                source = source_path("cuda", file).read_text()
                opts = OPTIONS + (f"-I{include_dir()}",) + tuple(options)
                with device:
                    module = cupy.RawModule(code=source, options=opts, name_expressions=[name])
                    hit = module.get_function(name)
                _modules[key] = hit
    return hit


def warp_size(device) -> int:
    """The device's warp (wavefront) width: 32 on NVIDIA GPUs, 32 or 64 on AMD ones."""
    hit = _warp.get(device.id)
    if hit is None:
        hit = _warp[device.id] = int(device.attributes["WarpSize"])
    return hit


def empty(shape, dtype):
    """A new C-contiguous output buffer on the current device (uninitialised)."""
    import cupy

    return cupy.empty(shape, dtype)
