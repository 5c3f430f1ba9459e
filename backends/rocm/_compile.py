"""The ROCm build's compile dialect: hiprtc, through CuPy's RTC wrapper.

CuPy's ROCm build binds ``cupy_backends.cuda.libs.nvrtc`` to hiprtc (name expressions
and lowered names included), so the CUDA dialect's program handling serves unchanged;
what differs is below. hiprtc compiles for the current device (no architecture option:
the compile makes the device current), and the image is the code object that
``getPTX`` returns on HIP (``getCUBIN`` raises there). No ``-fcuda-flush-denormals-to-zero``
(CuPy's own HIP compiles add it, as they add ``-ftz=true`` on CUDA): float32 subnormals
are kept, as NumPy keeps them. The fingerprint names the device's ``gcnArchName``
(``gfx90a:sramecc+:xnack-``), so a code object is never loaded on another target.
"""

from __future__ import annotations

from tessera_array.backends._cupy._compile import NvrtcDialect

__all__ = ["HiprtcDialect", "arch_name"]


def arch_name(props: dict) -> str:
    """The target of a device from its CuPy properties: ``gcnArchName`` (bytes or str),
    or ``gfx<gcnArch>`` where an old runtime lacks the name."""
    name = props.get("gcnArchName")
    if name:
        return name.decode() if isinstance(name, bytes) else str(name)
    return f"gfx{props.get('gcnArch', 'unknown')}"


class HiprtcDialect(NvrtcDialect):
    """hiprtc for AMD devices; the context of a program is the CuPy device id."""

    def fingerprint(self, device_id) -> str:
        import cupy

        rt = cupy.cuda.runtime
        props = rt.getDeviceProperties(device_id)
        name = props["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        return (f"hiprtc {self._nvrtc().getVersion()} runtime {rt.runtimeGetVersion()} "
                f"driver {rt.driverGetVersion()} {arch_name(props)} "
                f"wave{props['warpSize']} {name}")

    def arch_options(self, device_id) -> list:
        return []  # hiprtc targets the current device (compile() makes it current)

    def image(self, prog):
        return self._nvrtc().getPTX(prog)  # the code object (hiprtcGetCode)
