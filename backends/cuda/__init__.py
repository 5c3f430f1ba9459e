"""The CUDA backend: NVIDIA GPUs through CuPy's CUDA build (``cupy-cuda13x``).

Devices are ``cuda:0``, ``cuda:1``, ...; native buffers are ``cupy.ndarray``; the ops
namespace, the device guard, DLPack and the kernel families are the shared CuPy
backend's (backends/_cupy). What is CUDA's own is below: the distributions of the CUDA
build, the evidence of a driver (a device node, the driver's proc file, or WSL2's
GPU shim), DLPack device type 2 (kDLCUDA) and the kernel sources of kernels/cuda.
Never the default device unless asked (``device="cuda:0"``, ``TESSERA_DEVICE``).
"""

from __future__ import annotations

from tessera_array.backends._cupy._backend import CupyBackend

__all__ = ["CudaBackend", "backend", "set_host_fallback"]


class CudaBackend(CupyBackend):
    name = "cuda"
    device_kind = "cuda"
    dlpack_device_type = 2  # kDLCUDA
    distributions = ("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy")
    is_hip = False
    driver_evidence = ("/dev/nvidiactl", "/dev/nvidia[0-9]*", "/proc/driver/nvidia/version",
                       "/dev/dxg")
    library = "CUDA"
    fix_hint = ("install CuPy's CUDA build matching the driver (pip install cupy-cuda13x) and "
                "make the NVIDIA driver visible (nvidia-smi must work in this environment).")


backend = CudaBackend()


def set_host_fallback(mode: str) -> None:
    """``"warn"`` (the default), ``"allow"`` or ``"error"``: what an explicit host request
    (``products="blas"``) does on a cuda device; see
    :func:`tessera_array.backends.opencl.set_host_fallback`."""
    backend.set_host_fallback(mode)
