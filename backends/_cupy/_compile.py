"""The CuPy backend's dialect of the build stack: NVRTC called directly, cubins cached.

tessera compiles its CUDA kernels with NVRTC through ``cupy_backends.cuda.libs.nvrtc``
(the thin wrapper of the NVRTC API) rather than through ``cupy.RawModule``: CuPy's own
compiler appends ``-ftz=true`` to every compile, which flushes float32 subnormals in
every instruction (``__fadd_rn`` included) where NumPy keeps them, and a later
``-ftz=false`` does not override it. The cubin is loaded with ``cupy.cuda.function.Module``
and its kernels are CuPy ``Function`` objects, called as a ``RawKernel`` is:
``kernel(grid, block, args, shared_mem=0)`` on the current stream.

A program is one source file compiled for one device with the template instances it is
asked for (NVRTC name expressions: ``tessera_matvec_warp<float, 32>``). They travel in
the build stack's ``options`` as ``name=<expression>`` entries, which this dialect takes
out before calling NVRTC; so they are part of the memory and disk keys, as they must be
(another set of instances is another binary). The disk cache holds the cubin with its
lowered (mangled) names, under ``$TESSERA_CACHE_DIR/cuda``.
"""

from __future__ import annotations

import json

from tessera_array.backends._common.build import BuildFailure, Dialect

__all__ = ["NAME", "NvrtcDialect", "Program"]

NAME = "name="  # the options entry naming one template instance to instantiate
OPTIONS = ("-std=c++17",)


class Program:
    """A loaded cubin and the lowered names of its instances."""

    __slots__ = ("binary", "lowered", "module")

    def __init__(self, module, lowered: dict, binary: bytes):
        self.module = module  # cupy.cuda.function.Module
        self.lowered = lowered  # name expression -> mangled symbol
        self.binary = binary  # what the disk cache keeps (see NvrtcDialect.binary)


class NvrtcDialect(Dialect):
    """NVRTC for CUDA devices; the context of a program is the CuPy device id."""

    def __init__(self, backend: str, include_dirs):
        self.backend = backend
        self.include_dirs = tuple(str(d) for d in include_dirs)

    @staticmethod
    def _nvrtc():
        from cupy_backends.cuda.libs import nvrtc

        return nvrtc

    def fingerprint(self, device_id) -> str:
        import cupy

        rt = cupy.cuda.runtime
        props = rt.getDeviceProperties(device_id)
        name = props["name"]
        name = name.decode() if isinstance(name, bytes) else str(name)
        return (f"nvrtc {self._nvrtc().getVersion()} driver {rt.driverGetVersion()} "
                f"sm_{self.arch(device_id)} {name}")

    def compile(self, device_id, text: str, options: tuple):
        import cupy

        nvrtc = self._nvrtc()
        names = [o[len(NAME):] for o in options if o.startswith(NAME)]
        flags = list(OPTIONS) + [o for o in options if not o.startswith(NAME)]
        flags += self.arch_options(device_id)
        flags += [f"-I{d}" for d in self.include_dirs]
        prog = nvrtc.createProgram(text, "tessera.cu", [], [])
        add = getattr(nvrtc, "addNameExpression", None) or nvrtc.addAddNameExpression
        try:
            for n in names:
                add(prog, n)
            try:
                with cupy.cuda.Device(device_id):  # hiprtc targets the current device
                    nvrtc.compileProgram(prog, flags)
            except nvrtc.NVRTCError as err:
                log = nvrtc.getProgramLog(prog)
                raise BuildFailure(f"{err}\n{log}".strip()) from err
            lowered = {n: nvrtc.getLoweredName(prog, n) for n in names}
            image = self.image(prog)
        finally:
            nvrtc.destroyProgram(prog)
        if isinstance(image, str):
            image = image.encode("latin-1")
        blob = json.dumps(lowered).encode() + b"\0" + bytes(image)
        return self.load(device_id, blob, options)

    def arch_options(self, device_id) -> list:
        """The target option: a cubin for the device's ``sm_XX`` where this NVRTC makes
        cubins, else PTX for ``compute_XX``; on compute capability 9.0 the
        architecture-specific ``sm_90a`` (Hopper's wgmma, which ``sm_90`` lacks: the
        kernels of ``flash_attention_sm90.cu`` are empty without it)."""
        cubin = hasattr(self._nvrtc(), "getCUBIN")
        return [f"--gpu-architecture={'sm' if cubin else 'compute'}_{self.arch(device_id)}"]

    @staticmethod
    def arch(device_id) -> str:
        """``90a`` on compute capability 9.0, else the capability (``80``, ``89``, ...)."""
        import cupy

        cc = cupy.cuda.Device(device_id).compute_capability
        return f"{cc}a" if cc == "90" else cc

    def image(self, prog):
        """The compiled image of ``prog``: the cubin, or the PTX."""
        nvrtc = self._nvrtc()
        return nvrtc.getCUBIN(prog) if hasattr(nvrtc, "getCUBIN") else nvrtc.getPTX(prog)

    def binary(self, program) -> bytes:
        return program.binary

    def load(self, device_id, binary: bytes, options: tuple):
        import cupy
        from cupy.cuda.function import Module

        head, _, image = binary.partition(b"\0")
        lowered = json.loads(head.decode())
        module = Module()
        with cupy.cuda.Device(device_id):
            module.load(image)
        return Program(module, lowered, binary)

    def kernel(self, program, name: str, signature=None):
        try:
            symbol = program.lowered[name]
        except KeyError:
            raise KeyError(f"no instance {name!r} was compiled into this program (have: "
                           f"{', '.join(program.lowered) or 'none'})") from None
        return program.module.get_function(symbol)
