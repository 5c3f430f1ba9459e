"""Buffers and generated kernels of the OpenCL backend.

Native buffers are ``pyopencl.array.Array``: fresh results are C-contiguous, views
(basic indexing, ``permute_dims``) share their base's buffer with an element offset
and strides. Every kernel here reads and writes through (offset, strides), so views
need no copies.

Kernels are OpenCL C generated from two templates, an elementwise map (``map``)
and a reduction (``reduce``), and built once per ``(context, source)``: the source
holds the expression, the C types and the rank, so the cache key is the dtype
signature. :func:`build_count` counts builds (a second call builds nothing).
Every program is built with ``FP_CONTRACT OFF`` (no fused multiply-add) and
correctly rounded float32 division and square root, as NumPy computes.
"""

from __future__ import annotations

import threading
import warnings

import numpy as np
import pyopencl as cl
import pyopencl.array as cla

__all__ = [
    "CTYPE",
    "QUEUE_DEVICE",
    "attach",
    "build_count",
    "contiguous",
    "empty",
    "launch_map",
    "launch_reduce",
    "to_device",
    "to_host",
    "view",
    "write",
]

QUEUE_DEVICE: dict = {}  # pyopencl.CommandQueue -> tessera Device
_backend = None
_NATIVE = cla.Array

# numpy dtype char -> OpenCL C type of one element (bool is stored as 0/1 bytes).
CTYPE = {
    "?": "uchar", "b": "char", "B": "uchar", "h": "short", "H": "ushort", "i": "int",
    "I": "uint", "l": "long", "L": "ulong", "q": "long", "Q": "ulong", "f": "float",
    "d": "double", "F": "float2", "D": "double2",
}
_FP64 = frozenset({"double", "double2"})
OPTIONS = ["-cl-fp32-correctly-rounded-divide-sqrt"]


def attach(backend) -> None:
    """Remember the backend object (for queues of devices)."""
    global _backend
    _backend = backend


def queue_of(device):
    return _backend.queue(device)


# ---- buffers ---------------------------------------------------------------------------


_pools: dict = {}  # CommandQueue -> pyopencl.tools.MemoryPool


def allocator(queue):
    """The memory pool of ``queue`` (one per device queue): freed buffers are kept and
    reused, as CuPy's pool does, instead of a driver allocation per result. Reuse is
    safe because each device has one in-order queue: a new owner's commands run after
    every command of the old one. Measured, ``a + b`` of 10 float32 on opencl:0 (PoCL
    3.0, shared 2-core EPYC), call to finished result: 265 us without, 130-150 us with."""
    pool = _pools.get(queue)
    if pool is None:
        import pyopencl.tools as clt

        pool = _pools.setdefault(queue, clt.MemoryPool(clt.ImmediateAllocator(queue)))
    return pool


def empty(queue, shape: tuple, dtype) -> cla.Array:
    """A new C-contiguous buffer (uninitialised), from the queue's memory pool.

    Built through pyopencl's fast constructor: ``cla.empty`` spends tens of us in NumPy
    shape checks per call (PoCL 3.0, 2-core EPYC), as much as a tiny kernel's launch.
    """
    dtype = np.dtype(dtype)
    shape = tuple(shape)
    size, stride, strides = 1, dtype.itemsize, []
    for n in reversed(shape):
        strides.append(stride)
        stride *= n
        size *= n
    try:
        return cla.Array(None, shape, dtype, allocator=allocator(queue),
                         strides=tuple(reversed(strides)), _fast=True, _size=size,
                         _context=queue.context, _queue=queue)
    except TypeError:  # a PyOpenCL without the fast constructor
        return cla.empty(queue, shape, dtype, allocator=allocator(queue))


def is_contiguous(a) -> bool:
    return a.flags.c_contiguous


def view(a, shape: tuple, strides: tuple, offset: int) -> cla.Array:
    """A view of ``a``'s buffer: ``offset`` and ``strides`` in elements."""
    isz = a.dtype.itemsize
    return cla.Array(a.queue, shape, a.dtype, data=a.base_data, offset=offset * isz,
                     strides=tuple(s * isz for s in strides))


def layout(a) -> tuple:
    """(element offset, element strides) of ``a``."""
    isz = a.dtype.itemsize
    return a.offset // isz, tuple(s // isz for s in a.strides)


def to_device(queue, host: np.ndarray):
    """A new C-contiguous device buffer holding ``host``."""
    if not host.flags.c_contiguous:
        host = host.copy(order="C")  # (np.ascontiguousarray makes 0-d arrays 1-d)
    out = empty(queue, host.shape, host.dtype)
    if host.size:
        cl.enqueue_copy(queue, out.base_data, host, dst_offset=out.offset)
    return out


def contiguous(a):
    """``a`` itself when C-contiguous, else a C-contiguous copy."""
    if a.flags.c_contiguous:
        return a
    out = empty(a.queue, a.shape, a.dtype)
    copy_into(out, a)
    return out


def to_host(a) -> np.ndarray:
    """The values of ``a`` as a new host array."""
    a = contiguous(a)
    out = np.empty(a.shape, a.dtype)
    if a.size:
        cl.enqueue_copy(a.queue, out, a.base_data, src_offset=a.offset)
    return out


def write(native, host: np.ndarray) -> None:
    """Overwrite ``native`` (C-contiguous or a view) with ``host`` (same shape)."""
    if not native.size:
        return
    host = np.asarray(host, dtype=native.dtype)
    if not host.flags.c_contiguous:
        host = host.copy(order="C")
    if native.flags.c_contiguous:
        cl.enqueue_copy(native.queue, native.base_data, host, dst_offset=native.offset)
    else:
        copy_into(native, to_device(native.queue, host))


def copy_into(dst, src) -> None:
    """``dst[...] = src`` for a buffer ``src`` of ``dst``'s dtype, broadcast."""
    ct = CTYPE[dst.dtype.char]
    launch_map(dst.queue, "a0", dst, [src], ct)


# ---- programs ----------------------------------------------------------------------------

_programs: dict = {}
_lock = threading.Lock()
_builds = [0]


def build_count() -> int:
    """How many programs this process has built (cache misses)."""
    return _builds[0]


def kernel(ctx, src: str, name: str):
    """The kernel ``name`` of ``src`` built for ``ctx`` (cached)."""
    key = (ctx.int_ptr, src)
    knl = _programs.get(key)
    if knl is None:
        with _lock:
            knl = _programs.get(key)
            if knl is None:
                with warnings.catch_warnings():
                    # A build log with remarks is not a failure (NVIDIA's driver remarks
                    # "Function tmap is a kernel, so overriding noinline attribute").
                    warnings.simplefilter("ignore", cl.CompilerWarning)
                    prg = cl.Program(ctx, src).build(options=OPTIONS)
                _builds[0] += 1
                knl = _programs[key] = getattr(prg, name)
    return knl


def _head(types) -> str:
    lines = []
    if any(t in _FP64 for t in types):
        lines.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
    lines.append("#pragma OPENCL FP_CONTRACT OFF")
    return "\n".join(lines) + "\n"


def broadcast_shape(shapes) -> tuple:
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for i, d in enumerate(s, nd - len(s)):
            if d != 1:
                if out[i] != 1 and out[i] != d:
                    raise ValueError(
                        f"operands could not be broadcast together with shapes "
                        f"{' '.join(str(tuple(x)) for x in shapes)}"
                    )
                out[i] = d
    return tuple(out)


def _strides_for(a, shape):
    """Element strides of ``a`` broadcast to ``shape`` (0 along broadcast axes)."""
    isz = a.dtype.itemsize
    pad = len(shape) - len(a.shape)
    return [0] * pad + [
        0 if d == 1 else s // isz for s, d in zip(a.strides, a.shape)
    ]


# Work-items per work-group of the generated kernels: fixed, with the global size rounded
# up to a multiple (every generated kernel returns early for i >= n). Left to the driver
# (local size None), PoCL builds one work-group function per local size it picks, and it
# picks one per problem size: the test suite compiled up to 24 variants of one kernel,
# and a cold run of it spent most of its time in the compiler.
WG = 64


def launch_1d(knl, queue, n: int, args) -> None:
    """Run ``knl`` over ``n`` work-items in work-groups of :data:`WG`."""
    knl(queue, (-(-n // WG) * WG,), (WG,), *args)


_MAP_CACHE: dict = {}


def launch_map(queue, expr: str, out, operands, out_ct: str, *, preamble: str = "",
               shape=None, strided: bool = False):
    """``out[...] = expr`` elementwise; returns ``out``.

    ``operands`` are native buffers (broadcast to ``out``'s shape) or numpy scalars
    (kernel arguments), named ``a0``, ``a1``, ... in ``expr``; ``out`` is a native
    buffer or None (a new C-contiguous one of ``shape`` and the numpy dtype
    ``out_ct`` names is made). ``expr`` must give a value of C type ``out_ct``; it
    may use ``i`` (the flat C-order index) and, with ``strided``, ``x0``, ``x1``, ...
    (the element's coordinates).
    """
    if out is None:
        out = empty(queue, shape, _NP_OF[out_ct])
    shape = out.shape
    n = out.size
    if n == 0:
        return out
    kinds = []
    flat = out.flags.c_contiguous and not strided
    for op in operands:
        if op.__class__ is _NATIVE:
            if flat and (op.shape != shape or not op.flags.c_contiguous):
                flat = False
            kinds.append(CTYPE[op.dtype.char])
        else:
            kinds.append("$" + CTYPE[op.dtype.char])  # a scalar argument
    nd = 0 if flat else len(shape)
    key = (expr, out_ct, tuple(kinds), nd, preamble)
    src = _MAP_CACHE.get(key)
    if src is None:
        src = _MAP_CACHE[key] = _map_source(expr, out_ct, kinds, nd, preamble)
    knl = kernel(queue.context, src, "tmap")
    isz = out.dtype.itemsize
    args = [np.int64(n), out.base_data, np.int64(out.offset // isz)]
    if nd:
        args.extend(np.int64(d) for d in shape)
        args.extend(np.int64(s) for s in _strides_for(out, shape))
    for op in operands:
        if op.__class__ is _NATIVE:
            isz = op.dtype.itemsize
            args.append(op.base_data)
            args.append(np.int64(op.offset // isz))
            if nd:
                args.extend(np.int64(s) for s in _strides_for(op, shape))
        else:
            args.append(op)
    launch_1d(knl, queue, n, args)
    return out


_NP_OF = {
    "uchar": np.dtype(np.uint8), "char": np.dtype(np.int8), "short": np.dtype(np.int16),
    "ushort": np.dtype(np.uint16), "int": np.dtype(np.int32), "uint": np.dtype(np.uint32),
    "long": np.dtype(np.int64), "ulong": np.dtype(np.uint64), "float": np.dtype(np.float32),
    "double": np.dtype(np.float64), "float2": np.dtype(np.complex64),
    "double2": np.dtype(np.complex128), "bool": np.dtype(np.bool_),
}


def _map_source(expr, out_ct, kinds, nd, preamble) -> str:
    out_t = "uchar" if out_ct == "bool" else out_ct
    params = ["long n", f"__global {out_t} *out", "long oo"]
    body = ["  long i = get_global_id(0);", "  if (i >= n) return;"]
    if nd:
        params += [f"long d{k}" for k in range(nd)] + [f"long os{k}" for k in range(nd)]
        body.append("  long r = i, c;")
        body.append("  long io = oo;")
        for k in range(nd):
            body.append(f"  long x{k};")
        for k in reversed(range(nd)):
            body.append(f"  c = r % d{k}; r = r / d{k}; x{k} = c; io += c * os{k};")
    else:
        body.append("  long io = oo + i;")
    for j, kind in enumerate(kinds):
        if kind[0] == "$":
            params.append(f"{kind[1:]} a{j}")
            continue
        params += [f"__global const {kind} *p{j}", f"long o{j}"]
        if nd:
            params += [f"long s{j}_{k}" for k in range(nd)]
            idx = " + ".join([f"o{j}"] + [f"x{k} * s{j}_{k}" for k in range(nd)])
        else:
            idx = f"o{j} + i"
        body.append(f"  {kind} a{j} = p{j}[{idx}];")
    value = f"({expr})"
    if out_ct == "bool":
        value = f"(uchar)({value} != 0)"
    body.append(f"  out[io] = {value};")
    types = [out_t] + [k.lstrip("$") for k in kinds]
    return (_head(types) + preamble + "\n__kernel void tmap(" + ", ".join(params)
            + ")\n{\n" + "\n".join(body) + "\n}\n")


# ---- reductions --------------------------------------------------------------------------

_RED_CACHE: dict = {}


def launch_reduce(a, axes: tuple, out_ct: str, acc_ct: str, init: str, step: str,
                  final: str = "acc", *, preamble: str = "", decl: str = ""):
    """Reduce ``a`` over ``axes`` (sorted, non-empty); a new C-contiguous result of
    the kept axes' shape.

    One work-item per output element walks its reduced elements in C order:
    ``acc`` (C type ``acc_ct``) starts at ``init``; ``step`` is a statement using
    ``acc``, ``v`` (the element) and ``j`` (its position in the walk, a long);
    ``final`` is the stored value (it may use ``m``, the reduced count); ``decl``
    declares more accumulators.
    """
    shape = a.shape
    kept = tuple(d for d in range(len(shape)) if d not in axes)
    oshape = tuple(shape[d] for d in kept)
    out = empty(a.queue, oshape, _NP_OF[out_ct])
    n = out.size
    if n == 0:
        return out
    m = 1
    for d in axes:
        m *= shape[d]
    in_ct = CTYPE[a.dtype.char]
    key = (in_ct, out_ct, acc_ct, init, step, final, len(kept), len(axes), preamble, decl)
    src = _RED_CACHE.get(key)
    if src is None:
        src = _RED_CACHE[key] = _reduce_source(in_ct, out_ct, acc_ct, init, step, final,
                                               len(kept), len(axes), preamble, decl)
    knl = kernel(a.queue.context, src, "tred")
    off, strides = layout(a)
    args = [np.int64(n), np.int64(m), out.base_data, a.base_data, np.int64(off)]
    args += [np.int64(shape[d]) for d in kept] + [np.int64(strides[d]) for d in kept]
    args += [np.int64(shape[d]) for d in axes] + [np.int64(strides[d]) for d in axes]
    launch_1d(knl, a.queue, n, args)
    return out


def _reduce_source(in_ct, out_ct, acc_ct, init, step, final, nk, nr, preamble, decl) -> str:
    out_t = "uchar" if out_ct == "bool" else out_ct
    params = ["long n", "long m", f"__global {out_t} *out", f"__global const {in_ct} *p",
              "long po"]
    params += [f"long kd{k}" for k in range(nk)] + [f"long ks{k}" for k in range(nk)]
    params += [f"long rd{k}" for k in range(nr)] + [f"long rs{k}" for k in range(nr)]
    body = ["  long i = get_global_id(0);", "  if (i >= n) return;", "  long r = i, c;",
            "  long base = po;"]
    for k in reversed(range(nk)):
        body.append(f"  c = r % kd{k}; r = r / kd{k}; base += c * ks{k};")
    body.append(f"  {acc_ct} acc = {init};")
    if decl:
        body.append(f"  {decl}")
    body.append("  for (long j = 0; j < m; ++j) {")
    body.append("    long q = j, off = base;")
    for k in reversed(range(nr)):
        body.append(f"    c = q % rd{k}; q = q / rd{k}; off += c * rs{k};")
    body.append(f"    {in_ct} v = p[off];")
    body.append(f"    {step}")
    body.append("  }")
    value = f"({final})"
    if out_ct == "bool":
        value = f"(uchar)({value} != 0)"
    body.append(f"  out[i] = {value};")
    return (_head([in_ct, out_t, acc_ct]) + preamble + "\n__kernel void tred("
            + ", ".join(params) + ")\n{\n" + "\n".join(body) + "\n}\n")


# ---- launchers of the kernel families ----------------------------------------------------


def contiguous_operands(launcher, writes: bool):
    """``launcher`` taking any buffer layout: non-contiguous buffers among its
    arguments (or in list arguments) are handed over as C-contiguous copies, and with
    ``writes`` copied back after the call (the launcher updates them in place). The
    family kernels index their buffers as C-contiguous; basic indexing gives views."""
    import functools

    def swap(obj, moved):
        if obj.__class__ is _NATIVE:
            if obj.flags.c_contiguous:
                return obj
            tmp = contiguous(obj)
            moved.append((obj, tmp))
            return tmp
        if obj.__class__ is list or obj.__class__ is tuple:
            return obj.__class__(swap(item, moved) for item in obj)
        return obj

    def adapted(*args, **kwargs):
        moved = []
        args = tuple(swap(a, moved) for a in args)
        if moved or kwargs:
            kwargs = {k: swap(v, moved) for k, v in kwargs.items()}
        result = launcher(*args, **kwargs)
        if writes:
            for orig, tmp in moved:
                copy_into(orig, tmp)
        return result

    return functools.wraps(launcher)(adapted)


class AdaptingRegistry:
    """A registry front for the family modules: the launchers that update operands in
    place (optimizer steps, axpy), which the front end may hand views (a parameter
    ``base[:, ::2]``), go through :func:`contiguous_operands`; every other launcher
    is registered as it is."""

    WRITES = frozenset({"sgd_step", "adam_step", "adamw_step", "adafactor_step", "axpy"})

    def __init__(self, registry):
        self._registry = registry

    def register(self, op, backend, dtypes, launcher, **kwargs):
        if op in self.WRITES:
            launcher = contiguous_operands(launcher, True)
        self._registry.register(op, backend, dtypes, launcher, **kwargs)


# ---- scans -----------------------------------------------------------------------------------

_SCAN_CACHE: dict = {}


def launch_scan(a, axis: int, out_ct: str, init: str, step: str, include_initial: bool):
    """Inclusive scan of ``a`` along ``axis`` into a new C-contiguous buffer (one more
    element along ``axis`` with ``include_initial``, holding ``init``): one work-item
    per line walks it in order: ``acc`` takes the first element, then ``step`` updates
    ``acc`` (of type ``out_ct``) with each next ``v``."""
    shape = a.shape
    nd = len(shape)
    oshape = list(shape)
    oshape[axis] += 1 if include_initial else 0
    out = empty(a.queue, tuple(oshape), _NP_OF[out_ct])
    if out.size == 0:
        return out
    kept = [d for d in range(nd) if d != axis]
    n = 1
    for d in kept:
        n *= shape[d]
    in_ct = CTYPE[a.dtype.char]
    key = (in_ct, out_ct, init, step, len(kept))
    src = _SCAN_CACHE.get(key)
    if src is None:
        src = _SCAN_CACHE[key] = _scan_source(in_ct, out_ct, init, step, len(kept))
    knl = kernel(a.queue.context, src, "tscan")
    off, strides = layout(a)
    ost = [0] * nd
    acc = 1
    for d in reversed(range(nd)):
        ost[d] = acc
        acc *= oshape[d]
    args = [np.int64(n), np.int64(shape[axis]), out.base_data, a.base_data, np.int64(off)]
    args += [np.int64(shape[d]) for d in kept] + [np.int64(strides[d]) for d in kept]
    args += [np.int64(ost[d]) for d in kept]
    args += [np.int64(strides[axis]), np.int64(ost[axis]), np.int64(include_initial)]
    launch_1d(knl, a.queue, n, args)
    return out


def _scan_source(in_ct, out_ct, init, step, nk) -> str:
    params = ["long n", "long m", f"__global {out_ct} *out", f"__global const {in_ct} *p",
              "long po"]
    params += [f"long kd{k}" for k in range(nk)] + [f"long ks{k}" for k in range(nk)]
    params += [f"long kos{k}" for k in range(nk)] + ["long rs", "long ros", "long inc"]
    body = ["  long i = get_global_id(0);", "  if (i >= n) return;", "  long r = i, c;",
            "  long base = po, obase = 0;"]
    for k in reversed(range(nk)):
        body.append(f"  c = r % kd{k}; r = r / kd{k}; base += c * ks{k}; obase += c * kos{k};")
    body.append(f"  {out_ct} acc = {init};")
    body.append("  if (inc) { out[obase] = acc; obase += ros; }")
    body.append("  for (long j = 0; j < m; ++j) {")
    body.append(f"    {in_ct} v = p[base + j * rs];")
    # The first element is copied, not combined with init (NumPy's accumulate: -0.0 stays).
    body.append(f"    if (j == 0) acc = v; else {{ {step} }}")
    body.append("    out[obase + j * ros] = acc;")
    body.append("  }")
    return (_head([in_ct, out_ct]) + "\n__kernel void tscan(" + ", ".join(params)
            + ")\n{\n" + "\n".join(body) + "\n}\n")
