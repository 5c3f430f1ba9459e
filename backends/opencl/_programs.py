"""The programs of ``kernels/opencl/*.cl``: their ``-D`` options, and their kernels.

A program is one ``.cl`` file (its ``#include`` lines pasted in, :data:`~._compile.SOURCES`)
built for one context with ``-D`` macros naming the dtype (``-DT=float -DRT=float
-DACC=float``; complex types add ``-DTESSERA_COMPLEX``, float64 types ``-DTESSERA_FP64``):
:func:`dtype_options` gives them, and :func:`program` builds it through the backend's
build stack (:mod:`._compile`: kept per context, source and options in memory, and on
disk where the driver does not cache its builds itself; :func:`build_count` counts real
builds, for the tests). :func:`kernel` keeps one
``pyopencl.Kernel`` per program and name, its scalar argument types declared, so a launch
creates no kernel object (a kept kernel is not safe to launch from two threads at once).

float64 and complex128 programs are built only for devices that report
``cl_khr_fp64``; elsewhere :func:`dtype_options` raises
:class:`~tessera_array._errors.MissingCapabilityError` naming the extension.
A build failure raises :class:`~tessera_array._errors.KernelCompileError` with the
options, the compiler log and the source with line numbers.

The launchers' shared geometry helpers live here too: :func:`is_cpu`,
:func:`rows_per_item`, :func:`group_kernels` / :func:`group_geometry` (the work-group
sums of tessera_group.h) and :func:`zero_fill`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyopencl as cl
from tessera_array.backends._common import clear_all, from_text, memo

from tessera_array._errors import KernelCompileError, MissingCapabilityError

from . import _compile

__all__ = [
    "GroupSetup",
    "build_count",
    "ceil_div",
    "clear_cache",
    "dtype_options",
    "group_geometry",
    "group_kernels",
    "is_cpu",
    "kernel",
    "probe_options",
    "program",
    "rows_per_item",
    "zero_fill",
]

# numpy dtype -> (T, R, ACC, flags): the OpenCL type, its real component type, the
# accumulator type (integers accumulate unsigned, so sums wrap as NumPy's do without
# signed overflow), extra macros
_I = ("TESSERA_INTEGER",)
CL_TYPES = {
    np.dtype(np.float32): ("float", "float", "float", ()),
    np.dtype(np.float64): ("double", "double", "double", ("TESSERA_FP64",)),
    np.dtype(np.complex64): ("float2", "float", "float2", ("TESSERA_COMPLEX",)),
    np.dtype(np.complex128): ("double2", "double", "double2",
                              ("TESSERA_COMPLEX", "TESSERA_FP64")),
    np.dtype(np.int8): ("char", "char", "uint", _I),
    np.dtype(np.uint8): ("uchar", "uchar", "uint", _I),
    np.dtype(np.int16): ("short", "short", "uint", _I),
    np.dtype(np.uint16): ("ushort", "ushort", "uint", _I),
    np.dtype(np.int32): ("int", "int", "uint", _I),
    np.dtype(np.uint32): ("uint", "uint", "uint", _I),
    np.dtype(np.int64): ("long", "long", "ulong", _I),
    np.dtype(np.uint64): ("ulong", "ulong", "ulong", _I),
}
INDEX_TYPES = {np.dtype(np.int32): "int", np.dtype(np.int64): "long"}

_kernels = memo("opencl.file_kernels")  # (context, file, options, name) -> pyopencl.Kernel
_cpu = memo("opencl.cpu_devices")  # pyopencl.Device -> is it a CPU device
_probed = memo("opencl.probes")  # (context, macro) -> does the probe build
build_count = _compile.build_count


def clear_cache() -> None:
    """Forget every built program, kernel and launch plan of the backend (the next call
    builds again): ``clear_all("opencl")``."""
    clear_all("opencl")


def _fp64(device) -> bool:
    return "cl_khr_fp64" in device.extensions.split()


def dtype_options(func: str, dtype, device, *, extra: tuple = ()) -> tuple:
    """The ``-D`` options that build a program for ``dtype`` on ``device``.

    Raises MissingCapabilityError for float64/complex128 on a device without
    ``cl_khr_fp64``, TypeError for a dtype with no OpenCL type here.
    """
    try:
        t, r, acc, flags = CL_TYPES[np.dtype(dtype)]
    except (KeyError, TypeError):
        name = getattr(dtype, "__name__", None) or str(dtype)
        raise TypeError(
            f"{func}: no OpenCL kernel type for this dtype. Received: dtype={name}"
        ) from None
    if "TESSERA_FP64" in flags and not _fp64(device):
        raise MissingCapabilityError(
            f"{func}: device {device.name.strip()!r} lacks cl_khr_fp64, which dtype "
            f"{np.dtype(dtype).name} needs; use float32/complex64 on this device. "
            f"Received: dtype={np.dtype(dtype).name}"
        )
    opts = [f"-DT={t}", f"-DRT={r}", f"-DACC={acc}"] + [f"-D{f}" for f in flags] + list(extra)
    # Divide and sqrt rounded as NumPy rounds them, where the device can.
    if "TESSERA_INTEGER" not in flags and (
            device.single_fp_config & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT):
        opts.append("-cl-fp32-correctly-rounded-divide-sqrt")
    return tuple(opts)


def program(context, file: str, options: tuple):
    """The built program of ``kernels/opencl/<file>`` for ``context`` and ``options``."""
    return _compile.STACK.program(context, _compile.SOURCES.load(file), options)


def kernel(context, file: str, options: tuple, name: str):
    """The kept ``pyopencl.Kernel`` ``name`` of the program (built on first use), with its
    scalar argument types declared."""
    key = (context, file, options, name)
    k = _kernels.get(key)
    if k is None:
        k = _kernels[key] = _compile.STACK.kernel(context, _compile.SOURCES.load(file), name,
                                                  options)
    return k


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def is_cpu(device) -> bool:
    """True for a CPU device (PoCL's pthread device): its launchers give each work-item a
    contiguous chunk instead of one element."""
    hit = _cpu.get(device)
    if hit is None:
        hit = _cpu[device] = bool(device.type & cl.device_type.CPU)
    return hit


def rows_per_item(m: int, device) -> tuple:
    """``(items per work-item, work-group size)`` for ``m`` rows or elements on a CPU device:
    about 8 contiguous chunks per compute unit (a multiple of 16 items each, so loops
    vectorize), work-groups of one."""
    units = max(1, device.max_compute_units)
    per = -(-m // (8 * units))
    per = max(16, -(-per // 16) * 16)
    return per, 1


_PROBES = {
    # clang's per-block reassociation pragma (PoCL's clang has it; NVIDIA's older
    # front end rejects it: "invalid option 'reassociate'").
    "TESSERA_REASSOC": '__kernel void k(__global float *x) '
                       '{ _Pragma("clang fp reassociate(on)") x[0] += x[1]; }',
}


class GroupSetup(NamedTuple):
    """What :func:`group_kernels` gives a launcher that sums in work-groups."""

    kernels: tuple  # the pyopencl.Kernel of each name asked for, in order
    wg: int  # work-group size: 1 on CPU devices, else a power of two up to wg_max
    cpu: bool  # a CPU device (contiguous chunks per work-item)
    units: int  # the device's compute units (at least 1)


def group_kernels(func: str, context, dtype, file: str, names: tuple,
                  wg_max: int = 256) -> GroupSetup:
    """The :class:`GroupSetup` of ``file``'s kernels ``names`` that sum in work-groups
    (``-DWG``, see tessera_group.h): WG is 1 on CPU devices (a work-item per contiguous
    chunk), else the largest power of two up to ``wg_max`` the device allows. Callers
    keep the result per context and dtype."""
    dev = context.devices[0]
    cpu = is_cpu(dev)
    wg = 1 if cpu else 1 << (min(wg_max, dev.max_work_group_size).bit_length() - 1)
    opts = dtype_options(func, dtype, dev, extra=(f"-DWG={wg}",) + probe_options(context))
    kernels = tuple(kernel(context, file, opts, name) for name in names)
    return GroupSetup(kernels, wg, cpu, max(1, dev.max_compute_units))


def group_geometry(n: int, wg: int, cpu: bool, units: int, parts_max: int) -> tuple:
    """``(chunk, partial sums, global size)`` for summing ``n`` elements in work-groups
    (:func:`group_kernels`): on CPU devices contiguous chunks, a multiple of 16 elements,
    about 8 per compute unit; on GPUs at most ``parts_max`` work-groups of ``wg`` over a
    grid-stride loop (chunk 1)."""
    if cpu:
        chunk = max(16, -(-n // min(parts_max, 8 * units)))
        chunk = -(-chunk // 16) * 16
        parts = max(1, -(-n // chunk))
        return chunk, parts, parts
    parts = max(1, min(parts_max, -(-n // wg)))
    return 1, parts, parts * wg


def probe_options(context) -> tuple:
    """``-D`` macros for the optional compiler features ``context``'s device accepts.

    Each is found by building a one-line probe once per context (never by the
    vendor's name); a probe that fails to build leaves its macro out.
    """
    out = []
    for macro, src in _PROBES.items():
        ok = _probed.get((context, macro))
        if ok is None:
            try:
                _compile.STACK.program(context, from_text(src, f"the probe of {macro}"))
                ok = True
            except KernelCompileError:
                ok = False
            _probed[(context, macro)] = ok
        if ok:
            out.append(f"-D{macro}")
    return tuple(out)


def zero_fill(queue, a) -> None:
    """Set every byte of contiguous pyopencl array ``a`` to 0 (no kernel is compiled)."""
    if a.nbytes:
        evt = cl.enqueue_fill_buffer(queue, a.base_data, np.uint8(0), a.offset, a.nbytes)
        a.add_event(evt)
