"""The OpenCL dialect of the build stack, and the backend's one :data:`STACK`.

Every program of the backend is built here: the ``.cl`` files of ``kernels/opencl``
(:mod:`._programs`, read with their headers by :data:`SOURCES`) and the generated map,
reduction and scan kernels (:mod:`._families`). The dialect-free rest (memory and disk
caches, their keys, :class:`~tessera_array._errors.KernelCompileError`) is
:class:`~tessera_array.backends._common.BuildStack`'s; this module says how PyOpenCL
compiles a text, saves and loads a program binary, and types a kernel's arguments.

Every program is built with ``-cl-kernel-arg-info``, so a kernel's scalar argument
types can be read back and declared to PyOpenCL once (its fast launch path: measured
on PoCL, a 15-argument launch took 150 us through PyOpenCL's generic per-argument path
and 50 us typed; the option's build cost was not measurable, 23-kernel families 0.6-0.8 s
with it and 0.75-1.0 s without).

On disk: drivers that cache their builds themselves (PoCL, under ``POCL_CACHE_DIR``, and
NVIDIA's, as ``pyopencl.characterize.has_src_build_cache`` knows them) keep doing so, and
the stack stores nothing for them: a program's binary costs more than it saves there
(PoCL compiles every kernel of a program to hand out its binary: 5.4-7.4 s for a family
of 5 kernels that built in 1.1-4.9 s, PoCL 3.0 on the shared 2-core EPYC). For other
drivers the stack keeps binaries under ``$TESSERA_CACHE_DIR/opencl``
(``TESSERA_DISK_CACHE=0`` turns it off), keyed with the platform, device and driver
versions (:meth:`OpenclDialect.fingerprint`). PyOpenCL's own binary cache is bypassed
(``cache_dir=False``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pyopencl as cl
from tessera_array.backends._common import BuildFailure, BuildStack, Dialect, SourceTree, memo
from tessera_array.kernels import KERNELS_DIR

__all__ = ["GENERATED_OPTIONS", "SOURCES", "STACK", "OpenclDialect", "build_count",
           "generated_kernel"]

# The options of the generated programs: divide and sqrt rounded as NumPy rounds them.
GENERATED_OPTIONS = ("-cl-fp32-correctly-rounded-divide-sqrt",)
_ARG_INFO = ["-cl-kernel-arg-info"]

_on_disk = memo("opencl.disk_cache")  # context -> does the stack keep its programs on disk

# OpenCL C scalar type names (as argument info reports them) -> numpy scalar types
_SCALAR_TYPES = {
    "char": np.int8, "uchar": np.uint8, "short": np.int16, "ushort": np.uint16,
    "int": np.int32, "uint": np.uint32, "long": np.int64, "ulong": np.uint64,
    "float": np.float32, "double": np.float64, "float2": np.complex64,
    "double2": np.complex128,
}


def _create(context, payload):
    """The backend's one ``pyopencl.Program``: of source text (a str) or of the binary
    (bytes) of ``context``'s one device."""
    args = (payload,) if isinstance(payload, str) else (context.devices, [payload])
    return cl.Program(context, *args)


class OpenclDialect(Dialect):
    """How PyOpenCL builds a program (see the module docstring)."""

    backend = "opencl"

    def fingerprint(self, context) -> str:
        parts = []
        for dev in context.devices:
            parts += [dev.platform.name, dev.platform.version, dev.name, dev.vendor,
                      dev.version, dev.driver_version]
        return "\x1f".join(p.strip() for p in parts)

    def compile(self, context, text: str, options: tuple):
        try:
            with warnings.catch_warnings():
                # A build log with remarks is not a failure; it stays on the program.
                warnings.simplefilter("ignore", cl.CompilerWarning)
                return _create(context, text).build(options=list(options) + _ARG_INFO,
                                                    cache_dir=False)
        except cl.Error as err:
            raise BuildFailure(str(err)) from err

    def disk_cache(self, context) -> bool:
        hit = _on_disk.get(context)
        if hit is None:
            from pyopencl.characterize import has_src_build_cache

            hit = _on_disk[context] = not any(has_src_build_cache(d) for d in context.devices)
        return hit

    def binary(self, program):
        binaries = program.get_info(cl.program_info.BINARIES)
        return binaries[0] if len(binaries) == 1 else None

    def load(self, context, binary: bytes, options: tuple):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cl.CompilerWarning)
            return _create(context, binary).build(options=list(options) + _ARG_INFO)

    def kernel(self, program, name: str, signature=None):
        """``pyopencl.Kernel`` ``name``, its scalar argument types declared: ``signature``
        (a numpy dtype per scalar argument, None per buffer or struct), else read from the
        argument info (left generic where the driver does not report it)."""
        knl = cl.Kernel(program, name)
        if signature is None:
            signature = _signature(knl)
        if signature is not None:
            knl.set_scalar_arg_dtypes(signature)
        return knl


def _signature(knl):
    """The argument types of ``knl`` from its argument info, or None."""
    try:
        dtypes = []
        for i in range(knl.num_args):
            name = knl.get_arg_info(i, cl.kernel_arg_info.TYPE_NAME).strip().rstrip("\x00")
            if name.endswith("*"):
                dtypes.append(None)
            else:
                dtypes.append(_SCALAR_TYPES[name.removeprefix("const ").strip()])
    except (cl.Error, KeyError):
        return None
    return tuple(dtypes)


STACK = BuildStack(OpenclDialect())
SOURCES = SourceTree("opencl", [KERNELS_DIR / "opencl", KERNELS_DIR / "include"], paste=True,
                     root=KERNELS_DIR)


def build_count() -> int:
    """How many programs this process has built or loaded (memory misses)."""
    return STACK.build_count()


def generated_kernel(context, source, name: str, signature=None):
    """Kernel ``name`` of the generated program ``source`` (a
    :class:`~tessera_array.backends._common.KernelSource`), built with
    :data:`GENERATED_OPTIONS` for ``context``."""
    return STACK.kernel(context, source, name, GENERATED_OPTIONS, signature)
