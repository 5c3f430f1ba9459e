"""Build and cache the OpenCL programs of ``kernels/opencl/*.cl``.

A program is one ``.cl`` file built for one context with ``-D`` macros naming the
dtype (``-DT=float -DRT=float -DACC=float``; complex types add ``-DTESSERA_COMPLEX``, float64
types ``-DTESSERA_FP64``). :func:`program` builds it on first use and keeps it per
``(context, file, options)``: a second call compiles nothing (:func:`build_count`
counts real builds, for the tests). :func:`kernel` also keeps one
``pyopencl.Kernel`` per program and name, so a launch creates no kernel object
(a kept kernel is not safe to launch from two threads at once).

On disk, PyOpenCL's binary cache serves repeated runs; ``TESSERA_CACHE_DIR`` moves
it to ``$TESSERA_CACHE_DIR/opencl`` and ``PYOPENCL_NO_CACHE=1`` turns it off.

float64 and complex128 programs are built only for devices that report
``cl_khr_fp64``; elsewhere :func:`dtype_options` raises
:class:`~tessera_array._errors.MissingCapabilityError` naming the extension.
A build failure raises :class:`~tessera_array._errors.KernelCompileError` with the
options, the compiler log and the source with line numbers.
"""

from __future__ import annotations

import os
import re
import threading
import warnings

import numpy as np
from tessera_array.kernels import source_path

from tessera_array._errors import KernelCompileError, MissingCapabilityError

__all__ = [
    "array_type",
    "build_count",
    "ceil_div",
    "check_array",
    "clear_cache",
    "dtype_options",
    "is_cpu",
    "kernel",
    "probe_options",
    "program",
    "queue_of",
    "rows_per_item",
    "zero_fill",
]

# numpy dtype -> (T, R, ACC, flags): the OpenCL type, its real component type, the
# accumulator type (integers accumulate unsigned, so sums wrap as NumPy's do without
# signed overflow), extra macros
_I = ("TESSERA_INTEGER",)
_CL_TYPES = {
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

_programs: dict = {}  # (context, file, options) -> pyopencl.Program
_kernels: dict = {}  # (context, file, options, name) -> pyopencl.Kernel
_sources: dict = {}  # file -> source text
_cpu: dict = {}  # pyopencl.Device -> is it a CPU device
_lock = threading.Lock()
_builds = 0


def build_count() -> int:
    """How many programs this process has built (cache hits do not count)."""
    return _builds


def clear_cache() -> None:
    """Forget every built program and kernel (the next call builds again)."""
    with _lock:
        _programs.clear()
        _kernels.clear()
        _sources.clear()


def _fp64(device) -> bool:
    return "cl_khr_fp64" in device.extensions.split()


def dtype_options(func: str, dtype, device, *, extra: tuple = ()) -> tuple:
    """The ``-D`` options that build a program for ``dtype`` on ``device``.

    Raises MissingCapabilityError for float64/complex128 on a device without
    ``cl_khr_fp64``, TypeError for a dtype with no OpenCL type here.
    """
    try:
        t, r, acc, flags = _CL_TYPES[np.dtype(dtype)]
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
    if "TESSERA_INTEGER" not in flags:
        import pyopencl as cl

        # Divide and sqrt rounded as NumPy rounds them, where the device can.
        if device.single_fp_config & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT:
            opts.append("-cl-fp32-correctly-rounded-divide-sqrt")
    return tuple(opts)


def _source(file: str) -> str:
    """The text of ``file`` with each ``#include "name.h"`` line replaced by that header."""
    text = _sources.get(file)
    if text is None:
        lines = []
        for line in source_path("opencl", file).read_text().splitlines():
            hit = re.match(r'\s*#include\s+"([\w.]+)"\s*$', line)
            lines.append(source_path("opencl", hit.group(1)).read_text() if hit else line)
        text = _sources[file] = "\n".join(lines) + "\n"
    return text


def _cache_dir():
    root = os.environ.get("TESSERA_CACHE_DIR")
    return None if not root else os.path.join(root, "opencl")


def _numbered(source: str) -> str:
    return "\n".join(f"{i:4d} | {line}" for i, line in enumerate(source.splitlines(), 1))


def program(context, file: str, options: tuple):
    """The built program of ``kernels/opencl/<file>`` for ``context`` and ``options``."""
    global _builds
    key = (context, file, options)
    prg = _programs.get(key)
    if prg is not None:
        return prg
    import pyopencl as cl

    with _lock:
        prg = _programs.get(key)
        if prg is not None:
            return prg
        source = _source(file)
        try:
            with warnings.catch_warnings():
                # A build log with remarks is not a failure; it stays on the program.
                warnings.simplefilter("ignore", cl.CompilerWarning)
                prg = cl.Program(context, source).build(
                    options=list(options) + ["-cl-kernel-arg-info"], cache_dir=_cache_dir())
        except cl.RuntimeError as err:
            raise KernelCompileError(
                f"opencl: building kernels/opencl/{file} failed. Received: "
                f"options={' '.join(options)}\n{err}\n--- source ---\n{_numbered(source)}",
                backend="opencl", options=options, log=str(err), source=source,
            ) from err
        _builds += 1
        _programs[key] = prg
    return prg


_SCALAR_TYPES = {
    "char": np.int8, "uchar": np.uint8, "short": np.int16, "ushort": np.uint16,
    "int": np.int32, "uint": np.uint32, "long": np.int64, "ulong": np.uint64,
    "float": np.float32, "double": np.float64, "float2": np.complex64,
    "double2": np.complex128,
}


def _typed(k) -> None:
    """Declare ``k``'s scalar argument types to PyOpenCL (read from the kernel's argument
    info), so a launch converts them on its fast path: measured on PoCL, a 15-argument
    launch took 150 us through PyOpenCL's generic per-argument path and 50 us typed.
    Left generic if the driver does not report the types."""
    import pyopencl as cl

    try:
        dtypes = []
        for i in range(k.num_args):
            name = k.get_arg_info(i, cl.kernel_arg_info.TYPE_NAME).strip().rstrip("\x00")
            if name.endswith("*"):
                dtypes.append(None)
            else:
                dtypes.append(_SCALAR_TYPES[name.removeprefix("const ").strip()])
    except (cl.Error, KeyError):
        return
    k.set_scalar_arg_dtypes(dtypes)


def kernel(context, file: str, options: tuple, name: str):
    """The kept ``pyopencl.Kernel`` ``name`` of the program (built on first use), with its
    scalar argument types declared."""
    key = (context, file, options, name)
    k = _kernels.get(key)
    if k is None:
        import pyopencl as cl

        k = cl.Kernel(program(context, file, options), name)
        _typed(k)
        _kernels[key] = k
    return k


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def is_cpu(device) -> bool:
    """True for a CPU device (PoCL's pthread device): its launchers give each work-item a
    contiguous chunk instead of one element."""
    hit = _cpu.get(device)
    if hit is None:
        import pyopencl as cl

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
_probed: dict = {}  # (context, macro) -> bool


def group_kernels(func: str, context, dtype, file: str, names: tuple, wg_max: int = 256):
    """``(kernels, work-group size, CPU device?, compute units)`` of ``file``'s kernels
    ``names`` that sum in work-groups (``-DWG``, see tessera_group.h): WG is 1 on CPU
    devices (a work-item per contiguous chunk), else the largest power of two up to
    ``wg_max`` the device allows. Callers keep the result per context and dtype."""
    dev = context.devices[0]
    cpu = is_cpu(dev)
    wg = 1 if cpu else 1 << (min(wg_max, dev.max_work_group_size).bit_length() - 1)
    opts = dtype_options(func, dtype, dev, extra=(f"-DWG={wg}",) + probe_options(context))
    kernels = tuple(kernel(context, file, opts, name) for name in names)
    return kernels, wg, cpu, max(1, dev.max_compute_units)


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
    import pyopencl as cl

    out = []
    for macro, src in _PROBES.items():
        ok = _probed.get((context, macro))
        if ok is None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", cl.CompilerWarning)
                    cl.Program(context, src).build()
                ok = True
            except cl.Error:
                ok = False
            _probed[(context, macro)] = ok
        if ok:
            out.append(f"-D{macro}")
    return tuple(out)


def zero_fill(queue, a) -> None:
    """Set every byte of contiguous pyopencl array ``a`` to 0 (no kernel is compiled)."""
    import pyopencl as cl

    if a.nbytes:
        evt = cl.enqueue_fill_buffer(queue, a.base_data, np.uint8(0), a.offset, a.nbytes)
        a.add_event(evt)


def queue_of(func: str, a):
    """The queue of pyopencl array ``a``; ValueError when it has none."""
    q = a.queue
    if q is None:
        raise ValueError(
            f"{func}: the pyopencl array has no queue; give it one (a.with_queue(q)). "
            f"Received: a.queue=None"
        )
    return q


def check_array(func: str, name: str, a, cla_array):
    """TypeError unless ``a`` is a pyopencl array."""
    if not isinstance(a, cla_array):
        raise TypeError(
            f"{func}: {name} must be a pyopencl.array.Array. "
            f"Received: {name} of type {type(a).__name__}"
        )


_cla = None


def array_type():
    """``pyopencl.array``, imported on first use (the launchers' buffer type)."""
    global _cla
    if _cla is None:
        import pyopencl.array as cla

        _cla = cla
    return _cla
