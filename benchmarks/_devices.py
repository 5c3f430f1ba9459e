"""Device suites: what a suite needs of the run's device, and what a device is.

A device suite measures one kind of device (an OpenCL GPU, a CUDA GPU) against a peer
that runs there too (CuPy, torch). Its row in ``_suites.py`` carries a :class:`Needs`;
before the suite is loaded, the runner asks :meth:`Needs.unavailable_reason` about the
run's device (``--device``), and a suite whose device or peer is absent is reported
``unavailable`` with the reason, never run and never a crash. A new device suite is a
row with its ``Needs`` and a module; a new device kind (say ``cuda``) reports its
name and driver through its backend's ``versions()``, or adds a probe to ``_PROBES``
(OpenCL's reads the ``pyopencl.Device``; CUDA's and ROCm's CuPy's device properties).

:func:`facts` describes a device (name, vendor, driver, GPU or not) through the
public namespace and the ``tessera_array.launchers`` seam: for OpenCL, the
``pyopencl.Device`` behind a one-element array. :attr:`DeviceFacts.label` names the
device's baseline and results files (``opencl-nvidia-h200.json``): a model, not an
index, so a CPU driver's baseline and a GPU's never share a file.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["DeviceFacts", "Needs", "cupy_on_same_gpu", "facts", "opencl_profiling_queue"]

# Device kinds whose every device is a GPU (an OpenCL device may be a CPU, as PoCL's).
GPU_KINDS = frozenset({"cuda", "rocm", "metal"})


@dataclass(frozen=True)
class DeviceFacts:
    """What a benchmark run needs to know of a device."""

    device: str  # "opencl:0"
    backend: str  # "opencl"
    name: str  # "NVIDIA H200", "pthread-AMD EPYC"
    vendor: str | None  # "NVIDIA Corporation"; None where the backend does not say
    platform: str | None  # the OpenCL platform, the CUDA runtime, ...
    driver: str | None
    is_gpu: bool | None  # None where it cannot be told
    is_host: bool

    @property
    def label(self) -> str:
        """``cpu`` for a host device, else the device's model as a file-name slug."""
        if self.is_host:
            return "cpu"
        slug = re.sub(r"[^a-z0-9]+", "-", self.name.lower()).strip("-")
        return slug or self.device.replace(":", "")

    def describe(self) -> str:
        """``opencl:0 (pthread-AMD EPYC; not a GPU; Portable Computing Language)``."""
        kind = "a GPU" if self.is_gpu else "not a GPU" if self.is_gpu is False else "GPU?"
        where = f"; {self.platform}" if self.platform else ""
        return f"{self.device} ({self.name}; {kind}{where})"


def _opencl_facts(device) -> dict:
    import pyopencl as cl

    import tessera_array as xp
    from tessera_array import launchers

    dev = launchers.native(xp.zeros(1, device=device)).queue.device
    return {
        "name": dev.name.strip(),
        "vendor": dev.vendor.strip(),
        "platform": dev.platform.name.strip(),
        "driver": dev.driver_version.strip(),
        "is_gpu": bool(dev.type & cl.device_type.GPU),
    }


def _cupy_facts(device) -> dict:
    """A CuPy device (``cuda:N``, ``rocm:N``): its name from the runtime's properties of
    device N (the backend's ``versions()`` names every device as ``device N``)."""
    import cupy

    rt = cupy.cuda.runtime
    name = rt.getDeviceProperties(device.index)["name"]
    name = (name.decode() if isinstance(name, bytes) else str(name)).strip()
    hip = bool(getattr(rt, "is_hip", False))
    return {
        "name": name,
        "vendor": "AMD" if hip else "NVIDIA Corporation",
        "platform": f"{'HIP' if hip else 'CUDA'} runtime {rt.runtimeGetVersion()}",
        "driver": str(rt.driverGetVersion()),
        "is_gpu": True,
    }


# backend name -> probe(device) -> the fields of DeviceFacts it knows. Backends without a
# probe are described from their versions() ("device", "driver ..." keys) and their kind.
_PROBES: dict[str, Callable] = {"opencl": _opencl_facts, "cuda": _cupy_facts,
                                "rocm": _cupy_facts}


@functools.cache
def facts(device) -> DeviceFacts:
    """The :class:`DeviceFacts` of a tessera ``Device`` (cached per device)."""
    backend = device.backend
    fields = {"name": str(device), "vendor": None, "platform": None, "driver": None,
              "is_gpu": device.kind in GPU_KINDS}
    if backend.is_host:
        from ._machine import cpu_model

        fields.update(name=cpu_model(), is_gpu=False)
    else:
        try:
            versions = dict(backend.versions())
        except Exception:  # a backend that cannot say is still described
            versions = {}
        fields["name"] = versions.get("device", fields["name"])
        fields["driver"] = next((v for k, v in versions.items() if "driver" in k.lower()), None)
        probe = _PROBES.get(backend.name)
        if probe is not None:
            fields.update(probe(device))
    return DeviceFacts(device=str(device), backend=backend.name, is_host=bool(backend.is_host),
                       **fields)


def _loaded_devices(backend_name: str) -> list:
    from tessera_array import _discovery

    loaded = _discovery.loaded_backends()
    if backend_name not in loaded:
        return []
    return list(loaded[backend_name].devices())


def _backend_reason(backend_name: str) -> str:
    from tessera_array import _discovery

    for name, _obj, reason in _discovery.backend_status():
        if name == backend_name:
            return reason or "loaded, with no devices"
    return "no such backend"


@dataclass(frozen=True)
class Needs:
    """What a device suite needs: a device of ``backend`` (a GPU when ``gpu``, of a
    vendor whose name contains ``vendor``), the importable ``peers`` modules, and
    whatever ``peer_check(facts) -> reason or None`` asks of the peer (say, CuPy on
    the same GPU)."""

    backend: str
    gpu: bool = False
    vendor: str | None = None
    peers: tuple = ()
    peer_check: Callable[[DeviceFacts], str | None] | None = None

    def wanted(self, plural: bool = False) -> str:
        """``opencl GPU from NVIDIA`` (``opencl GPUs from NVIDIA`` when ``plural``)."""
        kind = ("GPU" if self.gpu else "device") + ("s" if plural else "")
        return f"{self.backend} {kind}" + (f" from {self.vendor}" if self.vendor else "")

    def _misfit(self, f: DeviceFacts) -> str | None:
        """None when ``f`` is a device these needs accept, else what it is instead."""
        if f.backend != self.backend:
            return f"is a {f.backend} device"
        if self.gpu and not f.is_gpu:
            return "is not a GPU" if f.is_gpu is False else "is not known to be a GPU"
        if self.vendor and self.vendor.lower() not in f"{f.vendor} {f.name}".lower():
            return f"is not an {self.vendor} device"
        return None

    def unavailable_reason(self, device) -> str | None:
        """None when a suite with these needs can run on ``device``; else why not, with
        the devices that would do where some are loaded here."""
        reasons = []
        here = facts(device)
        misfit = self._misfit(here)
        if misfit is not None:
            fitting, seen = [], []
            for d in _loaded_devices(self.backend):
                try:
                    f = facts(d)
                except Exception as err:  # a device that cannot be described does not fit
                    seen.append(f"{d} (not described: {type(err).__name__}: {err})")
                    continue
                if self._misfit(f) is None:
                    fitting.append(f)
                else:
                    seen.append(f.describe())
            text = (f"runs on {self.wanted(plural=True)}; this run's device, "
                    f"{here.describe()}, {misfit}")
            if fitting:
                text += f": run it with --device {fitting[0].describe()}"
            elif seen:
                text += f"; no {self.wanted()} is loaded here (only {', '.join(seen)})"
            else:
                text += (f"; no {self.backend} device is loaded here "
                         f"({_backend_reason(self.backend)})")
            reasons.append(text)
        for module in self.peers:
            try:
                importlib.import_module(module)
            except Exception as err:  # ImportError, or a library that fails on import
                reasons.append(f"its peer needs {module}, which does not import here "
                               f"({type(err).__name__}: {err})")
        if not reasons and self.peer_check is not None:
            why = self.peer_check(here)
            if why:
                reasons.append(why)
        return "; ".join(reasons) or None


def cupy_on_same_gpu(f: DeviceFacts) -> str | None:
    """None when CuPy's current CUDA device is the GPU ``f`` describes (same name),
    else why not: the two sides of a comparison must share one GPU."""
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    except Exception as err:
        return f"CuPy sees no CUDA device ({type(err).__name__}: {err})"
    if not count:
        return "CuPy sees no CUDA device"
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    if name.strip().lower() != f.name.strip().lower():
        return (f"CuPy's device {cupy.cuda.Device().id} is {name!r}, not the measured "
                f"{f.name!r}: both sides must run on one GPU (set CUDA_VISIBLE_DEVICES)")
    return None


@functools.cache
def _profiling_queue(context, device):
    import pyopencl as cl

    return cl.CommandQueue(context, device,
                           properties=cl.command_queue_properties.PROFILING_ENABLE)


def opencl_profiling_queue(buffer):
    """A profiling-enabled queue on the context and device of a native OpenCL
    ``buffer`` (one per context, kept): move buffers onto it with
    ``buffer.with_queue(queue)`` (same memory, the backend's allocator kept) so that
    the launchers, which launch on their inputs' queue, can be timed by markers."""
    return _profiling_queue(buffer.context, buffer.queue.device)
