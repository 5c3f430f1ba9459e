"""The CuPy backend class, shared by ``cuda`` and ``rocm``: devices, the device guard,
buffers, DLPack, and the kernel families.

Devices are ``cuda:0``, ``cuda:1``, ... in CuPy's order. Each device has one stream,
CuPy's default (null) stream of that device, so CuPy's memory pool (one per stream) is
one per device and an op's result is ready for the next op without an event. CuPy
runs an op on the *current* device: where more than one device exists, every device
gets its own ops namespace whose functions make their device current first (the
guard); with one device there is nothing to guard and the namespace's functions are
CuPy's own (``ops.add is cupy.add``).

What differs between the CUDA and the ROCm build is class data of the thin subclasses
(backends/cuda, backends/rocm): the name and device kind, the DLPack device type, the
distributions that provide the build, the evidence of a driver, and (the block "what
differs between the builds" below) the kernel folders, the compile dialect, the
namespace class, whether CuPy can make a cooperative launch, and the vendor libraries'
names. Generic code reads these; it never asks which build it runs on. The warp
(wavefront) width is not class data: it is the device's (``_kernels.warp_size``).
Nothing here imports CuPy before :meth:`CupyBackend.load`.
"""

from __future__ import annotations

import fnmatch
import functools
import glob
import importlib.metadata
import importlib.util
import re

from tessera_array.backends._xp import export_dlpack

from tessera_array import _dtypes
from tessera_array._devices import Device

from . import _kernels
from ._compile import NvrtcDialect
from ._namespace import CupyNamespace

__all__ = ["CupyBackend"]


class CupyBackend:
    """A CuPy build (CUDA or ROCm) as a tessera backend; see the module docstring."""

    # ---- what the subclasses set -----------------------------------------------------
    name = "cupy"
    device_kind = "cupy"
    dlpack_device_type = 2  # kDLCUDA (10: kDLROCM)
    distributions: tuple = ()  # the PyPI distributions of this build ("cupy-cuda13x", ...)
    other_builds: tuple = ()  # distribution prefixes of the other build ("cupy-rocm")
    is_hip = False  # the build this backend expects (cupy.cuda.runtime.is_hip)
    driver_evidence: tuple = ()  # glob patterns whose match shows a driver
    library = "CUDA"
    fix_hint = ""

    # ---- what differs between the builds (CUDA's values; backends/rocm sets ROCm's) ----
    kernel_dirs: tuple = ("cuda", "include")  # folders of kernels/ searched, first wins
    dialect = NvrtcDialect  # the build stack's compile dialect (backends/_cupy/_compile.py)
    namespace_class = CupyNamespace  # the ops namespace over this build's CuPy
    # CuPy launches a cooperative (grid-synchronising) kernel on this build. Where it
    # cannot, a fused solver runs as multi-launch device steps, never a persistent kernel.
    cooperative_launch = True
    # cuBLASLt ships beside cuBLAS: nn.linear's one call with the bias in its epilogue.
    blas_lt = True
    # NVIDIA's warp-level tensor-core PTX (mma.sync, ldmatrix, cp.async; the launcher
    # checks sm_80 per device): attention for float16/bfloat16 (backends/_cupy/flash.py).
    mma_sync = True
    # The vendor libraries behind CuPy's calls, as messages and ``info`` name them.
    libraries = {"blas": "cuBLAS", "fft": "cuFFT", "sparse": "cuSPARSE",
                 "solver": "cuSOLVER", "rtc": "NVRTC"}

    priority = -5  # never the default by itself (PyTorch's rule): ask for cuda:N
    is_host = False

    def __init__(self):
        self._devices = ()
        self._ops = {}  # Device -> its guarded namespace (several devices only)
        self.ops = None
        self.native_type = None
        self._cupy = None
        self._dist = None
        self._bfloat16 = False  # whether the loaded CuPy takes bfloat16 (load())

    # ---- discovery -----------------------------------------------------------------

    def _distribution(self):
        """The installed distribution of this build, or None (reads metadata only). An
        entry of :attr:`distributions` with a wildcard (``cupy-rocm-*``) matches any
        installed distribution whose normalised name fits it."""
        for dist in self.distributions:
            if not any(c in dist for c in "*?["):
                try:
                    importlib.metadata.distribution(dist)
                except importlib.metadata.PackageNotFoundError:
                    continue
                return dist
            for found in importlib.metadata.distributions():
                name = re.sub(r"[-_.]+", "-", found.metadata["Name"] or "").lower()
                if fnmatch.fnmatchcase(name, dist):
                    return name
        return None

    def _driver(self):
        for pattern in self.driver_evidence:
            found = sorted(glob.glob(pattern))
            if found:
                return found[0]
        return None

    def is_available(self) -> bool:
        return self.unavailable_reason() is None

    def unavailable_reason(self):
        if importlib.util.find_spec("cupy") is None:
            return f"cupy not installed (pip install {self.distributions[0]})"
        if self._distribution() is None:
            return (f"the installed CuPy is not a {self.library} build (none of "
                    f"{', '.join(self.distributions)} is installed)")
        if self._driver() is None:
            return (f"no {self.library} driver found (looked for "
                    f"{', '.join(self.driver_evidence)})")
        return None

    def plausibly_present(self):
        return self._driver()

    def load(self) -> None:
        import cupy

        if bool(cupy.cuda.runtime.is_hip) != self.is_hip:
            raise RuntimeError(
                f"the installed CuPy is a {'ROCm' if cupy.cuda.runtime.is_hip else 'CUDA'} "
                f"build; the {self.name} backend needs a {self.library} one")
        count = cupy.cuda.runtime.getDeviceCount()  # raises CUDARuntimeError without a driver
        if count < 1:
            raise RuntimeError(f"CuPy sees no {self.library} device")
        self._cupy = cupy
        self._dist = self._distribution()
        self._bfloat16 = takes_bfloat16(getattr(cupy, "__version__", ""))
        self.native_type = cupy.ndarray
        self._devices = tuple(
            Device(self.device_kind, i, backend_name=self.name) for i in range(count))
        self.ops = self.namespace_class(cupy)
        _kernels.use_build(self)
        from . import _fallback

        self._fallback = _fallback.make(self, cupy)
        if count > 1:
            self._ops = {dev: _Guarded(self.ops, dev.index, cupy) for dev in self._devices}

    def devices(self) -> tuple:
        return self._devices

    def ops_for(self, device):
        """The ops namespace of ``device``: the shared one on a single device, else one
        whose functions make ``device`` current first."""
        return self._ops.get(device, self.ops)

    def dtypes(self, device) -> tuple:
        # float16 is CuPy's own; bfloat16 is ml_dtypes' dtype, which CuPy takes from 14.
        if self._bfloat16:
            return _dtypes.EVERY_DTYPE
        return (*_dtypes.ALL_DTYPES, _dtypes.float16)

    def capabilities(self, device) -> dict:
        return {"float64": True, "complex128": True, "float16": True,
                "bfloat16": self._bfloat16}

    def missing_capability(self, device, dtype):
        """What ``dtype`` needs that this CuPy lacks (bfloat16 before CuPy 14), or None."""
        if dtype is _dtypes.bfloat16 and not self._bfloat16:
            cupy = self._cupy
            found = getattr(cupy, "__version__", "unknown") if cupy is not None else "none"
            return f"bfloat16 arrays: they need CuPy >= 14 (installed: {found})"
        return None

    def versions(self) -> dict:
        out = {}
        try:
            import cupy

            out["cupy"] = f"{cupy.__version__} ({self._distribution() or 'unknown build'})"
            rt = cupy.cuda.runtime
            out["runtime"] = str(rt.runtimeGetVersion())
            out["driver"] = str(rt.driverGetVersion())
            for i in range(rt.getDeviceCount()):
                name = rt.getDeviceProperties(i)["name"]
                out[f"device {i}"] = name.decode() if isinstance(name, bytes) else str(name)
        except ImportError:
            out["cupy"] = "not installed"
        except Exception as err:  # noqa: BLE001 - a broken driver must not break the report
            out["devices"] = f"failed: {type(err).__name__}: {err}"
        return out

    # ---- buffers -------------------------------------------------------------------

    def native_dtype(self, a):
        try:
            return _dtypes.FROM_NUMPY[a.dtype]
        except KeyError:
            found = _dtypes.lookup_numpy(a.dtype)  # bfloat16 before its first use
            if found is not None:
                return found
            raise TypeError(f"{self.name} backend: dtype {a.dtype} is not an Array API "
                            f"dtype") from None

    def coerce_native(self, r):
        if r.__class__ is self.native_type:
            return r
        cupy = self._cupy
        if isinstance(r, cupy.ndarray):
            return r
        # A host scalar some CuPy function returned (or a NumPy 0-d result).
        return cupy.asarray(r)

    def from_host(self, array, device):
        import numpy as np

        cupy = self._cupy
        host = np.asarray(array, order="C")
        with cupy.cuda.Device(device.index):
            # A copy of the bytes: cupy.array of a one-element array fills, and its fill
            # stores -0.0 as +0.0.
            out = cupy.empty(host.shape, dtype=host.dtype)
            if host.size:
                out.set(host)
            return out

    def to_host(self, native):
        # sync: the copy to the host waits for the device.
        with native.device:
            return native.get()

    def dlpack(self, native, *, stream=None, max_version=None, dl_device=None, copy=None):
        with native.device:
            return export_dlpack(native, stream=stream, max_version=max_version,
                                 dl_device=dl_device, copy=copy)

    def dlpack_device(self, native):
        return (self.dlpack_device_type, native.device.id)

    def from_dlpack(self, obj, *, device=None, copy=None):
        """Import a DLPack producer onto ``device``: zero-copy for this device's memory,
        a copy otherwise (host producers, other devices, ``copy=True``)."""
        import numpy as np

        cupy = self._cupy
        kind, index = obj.__dlpack_device__()
        target = index if device is None or device.kind != self.device_kind else device.index
        if int(kind) == self.dlpack_device_type and index == target and copy is not True:
            with cupy.cuda.Device(target):
                return cupy.from_dlpack(obj)
        if copy is False:
            raise BufferError(f"from_dlpack: the producer lives on DLPack device "
                              f"({int(kind)}, {index}); {self.name}:{target} needs a copy, "
                              f"and copy=False forbids one")
        if int(kind) == self.dlpack_device_type:
            with cupy.cuda.Device(target):
                return cupy.array(cupy.from_dlpack(obj), copy=True)
        host = np.from_dlpack(obj, device="cpu", copy=copy)
        with cupy.cuda.Device(target):
            return cupy.array(host, copy=True)

    # ---- kernels -------------------------------------------------------------------

    def register(self, registry) -> None:
        # Imported unguarded: a broken family module fails the load loudly.
        from . import attention, bicgstab, cg, fft, flash, gmres, matvec, optim, philox, sparse

        for family in (matvec, sparse, fft, optim, philox, attention):
            family.register(registry, self.name)
        if self.cooperative_launch:  # (the persistent solvers need every block resident)
            cg.register(registry, self.name)
            gmres.register(registry, self.name)
            bicgstab.register(registry, self.name)
        if self.blas_lt:
            matvec.register_cublaslt(registry, self.name)
        if self.mma_sync:
            flash.register(registry, self.name)
        from ._fallback import register_blas_products

        register_blas_products(self._fallback, registry, self.name)

    # ---- the host fallback ---------------------------------------------------------

    def host_fallbacks(self) -> tuple:
        """The sorted names of the kernels that run on the host (asked for explicitly)."""
        return self._fallback.names()

    def set_host_fallback(self, mode: str) -> None:
        """``"warn"`` (the default), ``"allow"`` or ``"error"``: see
        :func:`tessera_array.backends.opencl.set_host_fallback`."""
        self._fallback.set_mode(mode)


class _Guarded:
    """An ops namespace whose every function runs with device ``index`` current."""

    def __init__(self, ops, index, cupy):
        self._ops = ops
        self._device = cupy.cuda.Device(index)

    def __getattr__(self, name):
        fn = getattr(self._ops, name)
        if not callable(fn):
            return fn
        device = self._device

        @functools.wraps(fn)
        def guarded(*args, **kwargs):
            with device:
                return fn(*args, **kwargs)

        setattr(self, name, guarded)  # made once per name
        return guarded


def takes_bfloat16(version: str) -> bool:
    """Whether a CuPy of ``version`` takes ml_dtypes' bfloat16 arrays.

    Note: CuPy 14 added bfloat16 through ml_dtypes (cupy PR #9494); older releases
    refuse the dtype, and the backend then lists float16 alone of the 16-bit dtypes.
    """
    head = version.split(".", 1)[0]
    return head.isdigit() and int(head) >= 14
