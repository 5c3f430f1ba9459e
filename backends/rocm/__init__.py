"""The ROCm backend: AMD GPUs through CuPy's ROCm build (``cupy-rocm-7-0``, ``cupy-rocm-*``).

Devices are ``rocm:0``, ``rocm:1``, ...; native buffers are ``cupy.ndarray``; the ops
namespace, the device guard, DLPack and the kernel families are the shared CuPy
backend's (backends/_cupy), the kernels the CUDA C++ sources of kernels/cuda (HIP
compiles them; kernels/hip, searched first, holds only what must differ). What is
ROCm's own is class data, below:

=========================  =====================================================
the build                  a ``cupy-rocm-*`` distribution (a source build, ``cupy``:
                           if CuPy says it is HIP); ``/dev/kfd`` (the amdgpu kernel
                           driver's compute node) as evidence of a driver
devices, DLPack            ``rocm:N``; device type 10 (kDLROCM)
warp (wavefront) width     the device's ``warpSize``: 64 on CDNA (gfx90a, gfx942),
                           32 on RDNA (gfx10xx, gfx11xx); every kernel takes it as
                           a template argument (never a literal)
compile                    hiprtc through CuPy's RTC wrapper (:class:`HiprtcDialect`):
                           code objects for the device's ``gcnArchName``
cooperative launch         none through CuPy on HIP: a fused solver runs as
                           multi-launch device steps, never a persistent kernel
linalg                     hipSOLVER; no ``eig``/``eigvals`` (CuPy's HIP build has
                           no geev): they raise, naming ``eigh`` and ``to_device``
=========================  =====================================================

Status: compile-checked (CI compiles every kernel instance for gfx90a and gfx1030) and
CPU-tested (selection, instances, the wave-width arithmetic of every warp-level kernel
emulated at 32 and 64 lanes), not yet run on AMD hardware. Never the default device
unless asked (``device="rocm:0"``, ``TESSERA_DEVICE``).
"""

from __future__ import annotations

from tessera_array.backends._cupy._backend import CupyBackend

from ._compile import HiprtcDialect
from ._namespace import RocmNamespace

__all__ = ["RocmBackend", "backend", "set_host_fallback"]


class RocmBackend(CupyBackend):
    name = "rocm"
    device_kind = "rocm"
    dlpack_device_type = 10  # kDLROCM
    # The first names the install hint; the pattern matches every ROCm build on PyPI; a
    # source build ("cupy", either platform) is decided by load(), which checks is_hip.
    distributions = ("cupy-rocm-7-0", "cupy-rocm-*", "cupy")
    is_hip = True
    driver_evidence = ("/dev/kfd",)
    library = "ROCm"
    fix_hint = ("install CuPy's ROCm build matching the driver (pip install cupy-rocm-7-0) "
                "and make the amdgpu driver visible (/dev/kfd and /dev/dri must be present "
                "and readable; rocminfo must list the GPU).")

    kernel_dirs = ("hip", "cuda", "include")
    dialect = HiprtcDialect
    namespace_class = RocmNamespace
    cooperative_launch = False
    blas_lt = False  # (hipBLASLt differs: nn.linear takes the pre-filled gemm)
    mma_sync = False  # (AMD's matrix cores take other instructions: no 16-bit attention)
    libraries = {"blas": "hipBLAS", "fft": "hipFFT", "sparse": "hipSPARSE",
                 "solver": "hipSOLVER", "rtc": "hiprtc"}


backend = RocmBackend()


def set_host_fallback(mode: str) -> None:
    """``"warn"`` (the default), ``"allow"`` or ``"error"``: what an explicit host request
    (``products="blas"``) does on a rocm device; see
    :func:`tessera_array.backends.opencl.set_host_fallback`."""
    backend.set_host_fallback(mode)
