"""Compiled kernels of the CuPy backend: ``function(file, name, device)`` and output buffers.

``function("matvec.cu", "tessera_matvec_scalar<float, float>", device)`` compiles
``kernels/cuda/matvec.cu`` (``kernels/include`` on the include path; on ROCm
``kernels/hip`` first, the loaded backend's ``kernel_dirs``) for the CuPy device
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

from ._compile import NAME

__all__ = ["build_count", "device_label", "empty", "function", "include_dir",
           "multiprocessors", "use_build", "warp_size"]

_warp = memo("cuda.warp_size")  # device id -> warp size
_sms = memo("cuda.multiprocessors")  # device id -> multiprocessor count
_stacks: dict = {}  # backend -> (BuildStack, SourceTree), made once (their memos are registered)
_build = None  # the loaded CuPy backend (its name, kernel_dirs and dialect), use_build()


def include_dir() -> str:
    """The folder of the shared headers (``#include "tessera/types.cuh"``)."""
    return str(KERNELS_DIR / "include")


def use_build(backend) -> None:
    """Compile for ``backend`` (a loaded CuPy backend: the cuda or the rocm one; one CuPy
    build is installed per environment): its ``kernel_dirs`` and ``dialect``."""
    global _build
    _build = backend


def device_label(index: int) -> str:
    """``cuda:<index>`` or ``rocm:<index>``, as the loaded backend names its devices (for
    messages)."""
    return f"{getattr(_build, 'device_kind', 'cuda')}:{index}"


def _stack():
    """The build stack and source tree of the loaded CuPy backend (cuda or rocm)."""
    build = _build
    if build is None:
        raise RuntimeError("CuPy kernels: no CuPy backend (cuda, rocm) has loaded, so there "
                           "is no device to compile for")
    hit = _stacks.get(build.name)
    if hit is None:
        folders = [KERNELS_DIR / d for d in build.kernel_dirs]
        stack = BuildStack(build.dialect(build.name, folders))
        hit = _stacks[build.name] = (stack, SourceTree(build.name, folders, paste=False,
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
    """The device's warp (wavefront) width, from its properties (``warpSize``, which both
    CuPy builds report): 32 on NVIDIA GPUs, 64 on AMD CDNA (gfx9xx), 32 on RDNA."""
    hit = _warp.get(device.id)
    if hit is None:
        import cupy

        props = cupy.cuda.runtime.getDeviceProperties(device.id)
        hit = _warp[device.id] = int(props["warpSize"])
    return hit


def multiprocessors(device) -> int:
    """The device's multiprocessor (compute unit) count, read once (CuPy's
    ``getDeviceProperties`` costs about a millisecond a call)."""
    hit = _sms.get(device.id)
    if hit is None:
        import cupy

        rt = cupy.cuda.runtime
        hit = _sms[device.id] = int(rt.deviceGetAttribute(rt.cudaDevAttrMultiProcessorCount,
                                                          device.id))
    return hit


def empty(shape, dtype):
    """A new C-contiguous output buffer on the current device (uninitialised)."""
    import cupy

    return cupy.empty(shape, dtype)
