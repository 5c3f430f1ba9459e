"""The OpenCL backend: any OpenCL device through PyOpenCL (PoCL on a plain CPU).

Devices are ``opencl:0``, ``opencl:1``, ... over every platform, then every device
of each platform, in enumeration order. Each device gets one context and one
in-order queue, made on first use and kept. Native buffers are
``pyopencl.array.Array`` (always C-contiguous) on that queue; the ``ops`` namespace
is :mod:`tessera_array.backends.opencl._ops` (generated OpenCL C kernels, and the
host fallback of :mod:`._fallback` for what has no kernel yet).

A function without a native kernel runs on the host (its arrays copied there and
back): ``backend.host_fallbacks()`` and ``python -m tessera_array info`` list them. By
default the first such call of each function on each device warns
(HostFallbackWarning); ``TESSERA_HOST_FALLBACK=allow`` (or
``set_host_fallback("allow")``) silences it, ``error`` forbids host fallbacks
(HostFallbackError).

float64 and complex128 exist only on devices that report ``cl_khr_fp64``; asking
for them elsewhere is a MissingCapabilityError naming the extension, never a silent
downcast. The backend's priority is -10: it never becomes the default device by
itself (ask for ``opencl:N`` or set ``TESSERA_DEVICE``).

Nothing here imports PyOpenCL before :meth:`OpenclBackend.load`.
"""

from __future__ import annotations

import glob
import importlib.util
import os

from tessera_array import _dtypes
from tessera_array._devices import Device

__all__ = ["OpenclBackend", "backend", "set_host_fallback"]


def set_host_fallback(mode: str) -> None:
    """Choose what a call of a function without a native kernel does.

    Parameters
    ----------
    mode : {"warn", "allow", "error"}
        ``"warn"`` (the default): run it on the host, with a HostFallbackWarning the
        first time each (function, device) pair does so (setting the mode starts that
        record afresh); ``"allow"``: run it on the host silently; ``"error"``: raise
        HostFallbackError naming the function and the device. The environment variable
        ``TESSERA_HOST_FALLBACK`` sets the initial mode.
    """
    from . import _fallback

    _fallback.set_mode(mode)


class OpenclBackend:
    name = "opencl"
    device_kind = "opencl"
    priority = -10  # never the default by itself: users ask for opencl:N
    is_host = False
    fix_hint = (
        "install pyopencl and an OpenCL driver (pip install pyopencl "
        "pocl-binary-distribution gives PoCL on the CPU), or register the vendor's ICD "
        "file under /etc/OpenCL/vendors or OCL_ICD_VENDORS."
    )

    def __init__(self):
        self._cl_devices = ()  # pyopencl.Device per tessera Device, in index order
        self._devices = ()
        self._ctx = {}  # Device -> (context, queue), made lazily
        self._dtypes = {}
        self.ops = None
        self.native_type = None
        self._cl = None

    # ---- discovery -----------------------------------------------------------

    def is_available(self) -> bool:
        return importlib.util.find_spec("pyopencl") is not None

    def unavailable_reason(self):
        if importlib.util.find_spec("pyopencl") is None:
            return "pyopencl not installed (pip install pyopencl pocl-binary-distribution)"
        return None

    def plausibly_present(self):
        vendors = os.environ.get("OCL_ICD_VENDORS")
        folders = [vendors] if vendors else []
        folders.append("/etc/OpenCL/vendors")
        for folder in folders:
            if os.path.isfile(folder) and folder.endswith(".icd"):
                return f"OpenCL ICD file {folder}"
            icds = sorted(glob.glob(os.path.join(folder, "*.icd")))
            if icds:
                return f"OpenCL ICD file {icds[0]}"
        if importlib.util.find_spec("pocl_binary_distribution") is not None:
            return "the pocl-binary-distribution package"
        return None

    def load(self) -> None:
        import pyopencl as cl
        import pyopencl.array as cla

        cl_devices = []
        for platform in cl.get_platforms():
            try:
                cl_devices.extend(platform.get_devices())
            except cl.Error:  # a platform with no devices of any type
                continue
        if not cl_devices:
            raise RuntimeError("pyopencl lists no OpenCL device on any platform")
        self._cl = cl
        self._cl_devices = tuple(cl_devices)
        self._devices = tuple(
            Device(self.device_kind, i, backend_name=self.name) for i in range(len(cl_devices))
        )
        self.native_type = cla.Array
        from . import _kernels, _ops

        _kernels.attach(self)
        self.ops = _ops

    def devices(self) -> tuple:
        return self._devices

    def cl_device(self, device):
        """The ``pyopencl.Device`` behind ``device``."""
        return self._cl_devices[device.index]

    def extensions(self, device) -> frozenset:
        """The device's OpenCL extension names (tests monkeypatch this)."""
        return frozenset(self.cl_device(device).extensions.split())

    def capabilities(self, device) -> dict:
        ext = self.extensions(device)
        # float16/bfloat16: no OpenCL kernels take them yet (see missing_capability).
        return {"float64": "cl_khr_fp64" in ext, "complex128": "cl_khr_fp64" in ext,
                "float16": False, "bfloat16": False}

    def dtypes(self, device) -> tuple:
        hit = self._dtypes.get(device)
        if hit is None:
            drop = () if "cl_khr_fp64" in self.extensions(device) else (
                _dtypes.float64, _dtypes.complex128)
            hit = tuple(d for d in _dtypes.ALL_DTYPES if d not in drop)
            self._dtypes[device] = hit
        return hit

    def missing_capability(self, device, dtype):
        """The extension ``dtype`` needs that ``device`` lacks, or None.

        The 16-bit extension dtypes are refused on every OpenCL device: bfloat16 because
        OpenCL C has no bfloat16 type, float16 because a device needs ``cl_khr_fp16``
        for it and the backend's kernels are not built for ``half`` yet.
        """
        if dtype in (_dtypes.float64, _dtypes.complex128) and (
            "cl_khr_fp64" not in self.extensions(device)
        ):
            return "cl_khr_fp64"
        if dtype is _dtypes.float16:
            if "cl_khr_fp16" not in self.extensions(device):
                return "cl_khr_fp16"
            return ("float16 kernels: it has cl_khr_fp16, but tessera's OpenCL kernels "
                    "are not built for half yet")
        if dtype is _dtypes.bfloat16:
            return "bfloat16 support: OpenCL C has no bfloat16 type"
        return None

    def versions(self) -> dict:
        out = {}
        try:
            import pyopencl as cl

            out["pyopencl"] = cl.VERSION_TEXT
            for i, platform in enumerate(cl.get_platforms()):
                out[f"platform {i}"] = f"{platform.name} ({platform.version})"
                for dev in platform.get_devices():
                    out.setdefault(f"driver {i}", f"{dev.name}: {dev.driver_version}")
        except ImportError:
            out["pyopencl"] = "not installed"
        except Exception as err:  # noqa: BLE001 - a broken driver must not break the report
            out["platforms"] = f"failed: {type(err).__name__}: {err}"
        return out

    def host_fallbacks(self) -> tuple:
        """The sorted names of the ops (and registry kernels) that run on the host."""
        from . import _fallback

        return _fallback.host_fallbacks()

    # ---- contexts and buffers ----------------------------------------------------

    def queue(self, device):
        """The in-order queue of ``device`` (its context made on first use)."""
        hit = self._ctx.get(device)
        if hit is None:
            cl = self._cl
            ctx = cl.Context([self.cl_device(device)])
            hit = self._ctx[device] = (ctx, cl.CommandQueue(ctx))
            from . import _kernels

            _kernels.QUEUE_DEVICE[hit[1]] = device
        return hit[1]

    def native_dtype(self, a):
        try:
            return _dtypes.FROM_NUMPY[a.dtype]
        except KeyError:
            found = _dtypes.lookup_numpy(a.dtype)  # bfloat16 before its first use
            if found is not None:
                return found
            raise TypeError(
                f"opencl backend: dtype {a.dtype} is not an Array API dtype"
            ) from None

    def coerce_native(self, r):
        if r.__class__ is self.native_type:
            return r
        raise TypeError(
            f"opencl backend: an op returned {type(r).__name__}, not a pyopencl array"
        )

    def from_host(self, array, device):
        import numpy as np

        host = np.asarray(array)
        dt = _dtypes.lookup_numpy(host.dtype)
        if dt is not None:
            need = self.missing_capability(device, dt)
            if need is not None:
                from tessera_array._errors import MissingCapabilityError

                raise MissingCapabilityError(
                    f"from_host: device {device} lacks {need}, which dtype {dt} needs; "
                    f"cast to {'float32' if dt.kind == 'f' else 'complex64'} explicitly first."
                )
        from . import _kernels

        return _kernels.to_device(self.queue(device), host)

    @staticmethod
    def to_host(native):
        from . import _kernels

        return _kernels.to_host(native)

    def dlpack(self, native, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Only a host copy is exported: ``dl_device=(1, 0)`` (kDLCPU) with ``copy`` not
        False. PyOpenCL has no DLPack export of device memory: BufferError otherwise."""
        if dl_device is not None and tuple(dl_device) == (1, 0) and copy is not False:
            host = self.to_host(native)
            kwargs = {} if max_version is None else {"max_version": max_version}
            return host.__dlpack__(**kwargs)
        raise BufferError(
            f"__dlpack__: opencl buffers export DLPack only as a host copy "
            f"(dl_device=(1, 0) with copy=True or None). Received: dl_device={dl_device!r}, "
            f"copy={copy!r}. Or copy explicitly first with x.to_device('cpu')."
        )

    def dlpack_device(self, native):
        from . import _kernels

        dev = _kernels.QUEUE_DEVICE.get(native.queue)
        return (4, 0 if dev is None else dev.index)  # kDLOpenCL

    def from_dlpack(self, obj, *, device=None, copy=None):
        import numpy as np

        return self.from_host(np.from_dlpack(obj, device="cpu", copy=copy), device)

    # ---- kernels -----------------------------------------------------------------

    def register(self, registry) -> None:
        # The kernel families, imported unguarded: a broken kernel module must fail
        # the load loudly, not be skipped.
        from . import _kernels, attention, cg, dot, fft, matvec, optim, philox, sparse

        # Their launchers index C-contiguous buffers: the in-place ones (optimizer
        # steps, axpy) get views copied in and back; the rest are registered as they are.
        adapting = _kernels.AdaptingRegistry(registry)
        matvec.register(adapting, self.name)
        cg.register(adapting, self.name)
        dot.register(adapting, self.name)
        sparse.register(adapting, self.name)
        optim.register(adapting, self.name)
        attention.register(adapting, self.name)
        philox.register(adapting, self.name)
        fft.register(adapting, self.name)
        # Any kernel op of the contract the NumPy backend registers and the modules above
        # do not runs through the host fallback, listed as "kernel <op>".
        from . import _fallback

        _fallback.register_kernel_fallbacks(registry)


backend = OpenclBackend()
