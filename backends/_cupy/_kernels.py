"""Compiled kernels of the CuPy backend: ``function(file, name, device)`` and output buffers.

``function("matvec.cu", "tessera_matvec_scalar<float, float>", device)`` compiles
``kernels/cuda/matvec.cu`` (``kernels/include`` on the include path) for the CuPy device
``device`` through the one build stack (:mod:`tessera_array.backends._common.build`, its
NVRTC dialect in :mod:`._compile`: no ``-ftz``, memory and disk caches, a
``KernelCompileError`` with the log and the numbered source on failure) and returns the
kernel ``name`` (a template instance, as NVRTC name expressions write it), kept per
(file, name, options, device). The returned object is called as CuPy's ``RawKernel``:
``kernel(grid, block, args, shared_mem=0)``, on the current stream of the current
device; launchers make ``device`` current first.

:func:`empty` allocates every output a launcher returns (tests poison outputs through it:
a NaN-filled or 0xFF-filled buffer shows any element a kernel failed to write).
"""

from __future__ import annotations

from tessera_array.backends._common import BuildStack, SourceTree, memo
from tessera_array.kernels import KERNELS_DIR

from ._compile import NAME, NvrtcDialect

__all__ = ["build_count", "empty", "function", "include_dir", "warp_size"]

_warp = memo("cuda.warp_size")  # device id -> warp size
_stacks: dict = {}  # backend -> (BuildStack, SourceTree), made once (their memos are registered)


def include_dir() -> str:
    """The folder of the shared headers (``#include "tessera/types.cuh"``)."""
    return str(KERNELS_DIR / "include")


def _stack():
    """The build stack and source tree of the installed CuPy build (cuda or rocm)."""
    import cupy

    backend = "rocm" if cupy.cuda.runtime.is_hip else "cuda"
    hit = _stacks.get(backend)
    if hit is None:
        folders = [KERNELS_DIR / "cuda", KERNELS_DIR / "include"]
        if backend == "rocm":
            folders.insert(0, KERNELS_DIR / "hip")
        stack = BuildStack(NvrtcDialect(backend, folders))
        hit = _stacks[backend] = (stack, SourceTree(backend, folders, paste=False,
                                                    root=KERNELS_DIR))
    return hit


def function(file: str, name: str, device, *, options: tuple = ()):
    """The kernel ``name`` of ``kernels/cuda/<file>`` compiled for CuPy device ``device``."""
    stack, tree = _stack()
    opts = tuple(options) + (NAME + name,)
    return stack.kernel(device.id, tree.load(file), name, opts)


def build_count() -> int:
    """Programs this process has compiled or loaded from disk (tests)."""
    return sum(stack.build_count() for stack, _ in _stacks.values())


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
