"""Buffers and generated kernels of the OpenCL backend.

Native buffers are ``pyopencl.array.Array``: fresh results are C-contiguous, views
(basic indexing, ``permute_dims``) share their base's buffer with an element offset
and strides. Every kernel here reads and writes through (offset, strides), so views
need no copies.

Kernels are OpenCL C generated from three templates, an elementwise map
(:func:`launch_map`), a reduction (:func:`launch_reduce`) and a scan
(:func:`launch_scan`). One kernel serves an expression and its C types at every
rank, shape and layout: the axes are coalesced on the host (:func:`coalesce`: a
contiguous or transposed operand of any rank becomes one or two axes) and passed in
one struct argument, with a branch-free path for C-contiguous operands of one shape;
a map operand is a buffer or a scalar as a bit of that struct says. Only
expressions using the coordinates ``x0, x1, ...`` and layouts beyond :data:`MAXD`
axes or :data:`MAXOPS` operands get a kernel generated for their rank.

Cold builds are what a fresh CI machine pays for (PoCL compiles every program, then
each kernel again at its first launch), and a PoCL build costs about the same for
one kernel as for a hundred. So kernels come in families, one program each
(:func:`add_families`): per dtype, its unary ops, its binary ops with ``where``, its
casts, its reductions. :func:`build_count` counts builds (a second call builds
nothing); :func:`family_failures` lists families whose program did not build (their
members then build alone).

Every program is built with ``FP_CONTRACT OFF`` (no fused multiply-add) and
correctly rounded float32 division and square root, as NumPy computes.

Measured (2-core EPYC shared with other jobs, load average 4-7; PoCL 3.0, LLVM 14;
``XDG_CACHE_HOME=$(mktemp -d) POCL_CACHE_DIR=$(mktemp -d) python -m pytest -q
-p no:cacheprovider FILES``, builds and compile seconds logged by a pytest plugin, kept
out of the repository, wrapping ``Program.build`` and each kernel's first enqueue):

=========================================  ======  =======  ======  =======  ========
cold run (one pytest process)              builds  build s  first   launch   wall s
                                                            launch  s
=========================================  ======  =======  ======  =======  ========
tests/test_opencl_backend.py, before         1327    917.8    1327    434.3    1376.0
tests/test_opencl_backend.py, after            78     48.3     603    356.5     423.6
test_creation + test_data_type, before        166    126.8     166     61.9     201.2
test_creation + test_data_type, after          46     44.7     160     89.5     145.2
=========================================  ======  =======  ======  =======  ========

"before" is HEAD 659ce0d's generators (one program per expression, C types, rank and
scalar/buffer operand kinds); "first launch" is the kernel's first enqueue, where
PoCL compiles its work-group function (0.1-0.6 s each here, by load). The five files
``test_opencl_backend``, ``test_elementwise_functions``, ``test_statistical_functions``,
``test_manipulation_functions``, ``test_indexing`` together, after: 3032 passed, 131
builds (89 s), 689 first launches (406 s), 562.6 s wall. Run time (raw kernels, medians
of 40-60 alternating reps, same process, old HEAD kernel / new kernel): contiguous
1e6 float32 add 3.4-8.7 ms / 0.66-0.95 of it; transposed 1000x1000 add 15.9, 38.6,
19.8 ms / 13.8, 36.6, 18.3 ms. Through ``launch_map`` (new/old per-rep ratio medians,
six runs of 40-60 reps, the load swinging between them): contiguous 1e6 add 0.68-1.39,
no consistent sign (the raw kernels above are no slower); transposed add 0.92-1.27;
a 10-element add 0.39-0.60 (typed kernel arguments); ``sum(axis=0)`` of 1000x1000
0.44-0.78; a full sum 0.14-0.27 (one coalesced axis walked without division). Build
cost (median of 3 cold builds, same process): one kernel alone 0.44 s, the binary
float32 family (24 kernels) 0.74 s, the unary one (35) 0.68 s; a kernel's first launch
costs the same in a program of 1 or of 120 kernels (0.83 / 0.74 s at that load).

The whole suite cold, after (``TESSERA_REQUIRE_BACKENDS=opencl python -m pytest -q``,
15224 tests, load average 1.3-4.7): 822 s (13 min 42 s); 445 programs built (140 s,
204 of them here: 71 s) and 1752 first launches (454 s; 801 of them kernels from here:
156 s, the FFT kernels 394 launches: 147 s, attention 69: 75 s). The run before this
change, aborted at 12% after 18 min (load 5-7), had built 585 programs here alone
(605 s).
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
    "add_families",
    "attach",
    "build_count",
    "coalesce",
    "contiguous",
    "empty",
    "family_failures",
    "launch_map",
    "launch_reduce",
    "launch_scan",
    "map_member",
    "reduce_member",
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

_programs: dict = {}  # (context pointer, source) -> pyopencl.Program
_kernel_objs: dict = {}  # (context pointer, source, name) -> pyopencl.Kernel
_lock = threading.Lock()
_builds = [0]


def build_count() -> int:
    """How many programs this process has built (cache misses)."""
    return _builds[0]


def kernel(ctx, src: str, name: str, arg_types=None):
    """The kernel ``name`` of ``src`` built for ``ctx`` (program and kernel cached).

    ``arg_types`` (a tuple: a numpy dtype per scalar argument, None per buffer or
    struct argument) declares the argument types to PyOpenCL once, for its fast
    launch path; then every scalar argument may be a Python int or float.
    """
    key = (ctx.int_ptr, src, name)
    knl = _kernel_objs.get(key)
    if knl is None:
        with _lock:
            knl = _kernel_objs.get(key)
            if knl is None:
                pkey = key[:2]
                prg = _programs.get(pkey)
                if prg is None:
                    with warnings.catch_warnings():
                        # A build log with remarks is not a failure.
                        warnings.simplefilter("ignore", cl.CompilerWarning)
                        prg = cl.Program(ctx, src).build(options=OPTIONS)
                    _builds[0] += 1
                    _programs[pkey] = prg
                knl = cl.Kernel(prg, name)
                if arg_types is not None:
                    knl.set_scalar_arg_dtypes(arg_types)
                _kernel_objs[key] = knl
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


def coalesce(shape, strides) -> tuple:
    """``(dims, strides)`` walking the same elements in the same C order with fewer
    axes: length-1 axes dropped, and an axis merged into the one before it wherever
    every operand's strides chain (``outer == inner * len(inner)``). ``strides`` is
    a list of per-operand element stride lists; so a contiguous or transposed
    operand of any rank comes out as one or two axes."""
    dims = []
    out = [[] for _ in strides]
    for k, d in enumerate(shape):
        if d == 1:
            continue
        if dims and all(o[-1] == s[k] * d for o, s in zip(out, strides)):
            dims[-1] *= d
            for o, s in zip(out, strides):
                o[-1] = s[k]
            continue
        dims.append(d)
        for o, s in zip(out, strides):
            o.append(s[k])
    return dims, out


# Work-items per work-group of the generated kernels: fixed, with the global size rounded
# up to a multiple (every generated kernel returns early for i >= n). Left to the driver
# (local size None), PoCL builds one work-group function per local size it picks, and it
# picks one per problem size: the test suite compiled up to 24 variants of one kernel,
# and a cold run of it spent most of its time in the compiler.
WG = 64

# Axes a generated kernel takes in its layout argument (after :func:`coalesce`); more
# take a kernel generated for that rank.
MAXD = 8


def launch_1d(knl, queue, n: int, args) -> None:
    """Run ``knl`` over ``n`` work-items in work-groups of :data:`WG`."""
    knl(queue, (-(-n // WG) * WG,), (WG,), *args)


_I64 = np.dtype(np.int64)

# Operands the layout argument of a generated map kernel holds (more take a kernel
# generated for the rank).
MAXOPS = 4

# The layout arguments (structs passed by value: the bytes of an int64 array).
_TYPEDEFS = (
    f"typedef struct {{ long nd, sc; long d[{MAXD}]; long s[{MAXOPS + 1}][{MAXD}]; }} tlayout;\n"
    f"typedef struct {{ long nk, nr; long kd[{MAXD}], ks[{MAXD}], rd[{MAXD}], rs[{MAXD}]; }} "
    "tredlayout;\n"
    f"typedef struct {{ long nk; long kd[{MAXD}], ks[{MAXD}], kos[{MAXD}]; }} tscanlayout;\n"
)

# ---- program families ------------------------------------------------------------------
#
# A member is one generated kernel (with its layout and operand variants):
# ("map", expr, out_ct, types, preamble), ("red", in_ct, out_ct, acc_ct, init, step,
# final, preamble, decl) or ("scan", in_ct, out_ct, init, step). A member alone is one
# program; a family (the unary ops of one dtype, the casts from one dtype, ...) is one
# program holding all its members: PoCL's cost of a build is mostly fixed (about as
# much for 100 kernels as for one), and each kernel is compiled further only at its
# first launch.

_FAMILY: dict = {}  # member -> the tuple of members of its program
_PROVIDERS: list = []  # callables giving lists of families, run at the first miss
_SOURCE: dict = {}  # member -> (program source, kernel name prefix)
_KNL: dict = {}  # (context pointer, member, kernel name) -> pyopencl.Kernel
_split: list = []  # families whose program failed to build (their members build alone)


def add_families(provider) -> None:
    """Register ``provider``: a callable returning an iterable of families (lists of
    member tuples), called once, at the first kernel a launcher asks for."""
    _PROVIDERS.append(provider)


def _load_families() -> None:
    while _PROVIDERS:
        for fam in _PROVIDERS.pop(0)():
            fam = tuple(dict.fromkeys(fam))
            if len(fam) > 1:
                for m in fam:
                    _FAMILY.setdefault(m, fam)


def _source(member) -> tuple:
    hit = _SOURCE.get(member)
    if hit is None:
        if _PROVIDERS:
            _load_families()
        fam = _FAMILY.get(member)
        if fam is None:
            hit = _SOURCE[member] = (_program_source((member,), False), "")
        else:
            src = _program_source(fam, True)
            for idx, m in enumerate(fam):
                if _FAMILY.get(m) is fam:
                    _SOURCE[m] = (src, str(idx))
            hit = _SOURCE[member]
    return hit


def _kernel_of(ctx, member, name: str, arg_types):
    """The kernel ``name`` (``{}`` standing for the member's prefix) of ``member``'s
    program for ``ctx``."""
    key = (ctx.int_ptr, member, name)
    knl = _KNL.get(key)
    if knl is None:
        src, prefix = _source(member)
        try:
            knl = kernel(ctx, src, name.format(prefix), arg_types)
        except cl.Error:
            fam = _FAMILY.get(member)
            if fam is None:
                raise
            # Its members build alone (and one that does not build raises then).
            _split.append(fam)
            for m in fam:
                if _FAMILY.get(m) is fam:
                    del _FAMILY[m]
                    _SOURCE.pop(m, None)
            src, prefix = _source(member)
            knl = kernel(ctx, src, name.format(prefix), arg_types)
        _KNL[key] = knl
    return knl


def family_failures() -> list:
    """The families whose program failed to build (each member then built alone)."""
    return list(_split)


def _program_source(members, family: bool) -> str:
    types = []
    preambles = []
    for m in members:
        if m[0] == "map":
            types += [m[2]] + list(m[3])
            pre = m[4]
        elif m[0] == "red":
            types += [m[1], m[2], m[3]]
            pre = m[7]
        elif m[0] == "redpart":
            types += [m[1], m[2]]
            pre = m[5]
        else:
            types += [m[1], m[2]]
            pre = ""
        if pre and pre not in preambles:
            preambles.append(pre)
    parts = [_head(["uchar" if t == "bool" else t for t in types]), _TYPEDEFS] + preambles
    for idx, m in enumerate(members):
        prefix = str(idx) if family else ""
        if m[0] == "map":
            parts.append(_map_kernel(m, prefix))
        elif m[0] == "red":
            parts.append(_reduce_kernel(m, prefix))
        elif m[0] == "redpart":
            parts.append(_reduce_part_kernel(m, prefix))
        else:
            parts.append(_scan_kernel(m, prefix))
    return "\n".join(parts)


# ---- maps ---------------------------------------------------------------------------------

_ARG_TYPES: dict = {}


def launch_map(queue, expr: str, out, operands, out_ct: str, *, preamble: str = "",
               shape=None, strided: bool = False):
    """``out[...] = expr`` elementwise; returns ``out``.

    ``operands`` are native buffers (broadcast to ``out``'s shape) or numpy scalars
    (kernel arguments), named ``a0``, ``a1``, ... in ``expr``; ``out`` is a native
    buffer or None (a new C-contiguous one of ``shape`` and the numpy dtype
    ``out_ct`` names is made). ``expr`` must give a value of C type ``out_ct``; it
    may use ``i`` (the flat C-order index) and, with ``strided``, ``x0``, ``x1``, ...
    (the element's coordinates; such kernels are generated per rank).

    One kernel serves an expression and its operand types at every rank, shape and
    layout, whichever operands are buffers or scalars: each operand comes as a
    pointer, an offset and a scalar, and one struct argument says which of the two
    to read and gives the (coalesced) axes, or ``nd = -1`` for C-contiguous operands
    of one shape, read with no index arithmetic.
    """
    if out is None:
        out = empty(queue, shape, _NP_OF[out_ct])
    shape = out.shape
    n = out.size
    if n == 0:
        return out
    types = []
    sc = 0
    flat = out.flags.c_contiguous
    for j, op in enumerate(operands):
        types.append(CTYPE[op.dtype.char])
        if op.__class__ is _NATIVE:
            if flat and (op.shape != shape or not op.flags.c_contiguous):
                flat = False
        else:
            sc |= 1 << j
    if strided or len(types) > MAXOPS:
        return _launch_map_ranked(queue, expr, out, operands, out_ct, types, preamble)
    types = tuple(types)
    args = [n, out.base_data, out.offset // out.dtype.itemsize]
    for op, t in zip(operands, types):
        if op.__class__ is _NATIVE:
            args += (op.base_data, op.offset // op.dtype.itemsize, _ZERO[t])
        else:
            args += (None, 0, op)
    if flat:
        lay = _FLAT.get(sc)
        if lay is None:
            lay = _FLAT[sc] = np.array([-1, sc] + [0] * (MAXD * (MAXOPS + 2)), _I64)
    else:
        bufs = [out]
        cols = [0]
        for j, op in enumerate(operands):
            if op.__class__ is _NATIVE:
                bufs.append(op)
                cols.append(j + 1)
        dims, strides = coalesce(shape, [_strides_for(b, shape) for b in bufs])
        nd = len(dims)
        if nd > MAXD:
            return _launch_map_ranked(queue, expr, out, operands, out_ct, types, preamble)
        lay = np.zeros(2 + MAXD * (MAXOPS + 2), _I64)
        lay[0] = nd
        lay[1] = sc
        lay[2:2 + nd] = dims
        for col, st in zip(cols, strides):
            base = 2 + MAXD * (col + 1)
            lay[base:base + nd] = st
    args.append(lay)
    member = ("map", expr, out_ct, types, preamble)
    knl = _KNL.get((queue.context.int_ptr, member, "m{}"))
    if knl is None:
        knl = _kernel_of(queue.context, member, "m{}", _map_arg_types(types))
    launch_1d(knl, queue, n, args)
    return out


_NP_OF = {
    "uchar": np.dtype(np.uint8), "char": np.dtype(np.int8), "short": np.dtype(np.int16),
    "ushort": np.dtype(np.uint16), "int": np.dtype(np.int32), "uint": np.dtype(np.uint32),
    "long": np.dtype(np.int64), "ulong": np.dtype(np.uint64), "float": np.dtype(np.float32),
    "double": np.dtype(np.float64), "float2": np.dtype(np.complex64),
    "double2": np.dtype(np.complex128), "bool": np.dtype(np.bool_),
}
_ZERO = {t: dt.type(0) for t, dt in _NP_OF.items()}
_FLAT: dict = {}  # scalar bits -> the layout argument of C-contiguous operands


def _map_arg_types(types) -> tuple:
    hit = _ARG_TYPES.get(types)
    if hit is None:
        hit = [_I64, None, _I64]
        for t in types:
            hit += [None, _I64, _NP_OF[t]]
        hit.append(None)  # the layout struct
        hit = _ARG_TYPES[types] = tuple(hit)
    return hit


def map_member(expr: str, out_ct: str, types, preamble: str = "") -> tuple:
    """The member tuple :func:`launch_map` looks up for these arguments (operand C
    types as :data:`CTYPE` gives them), for families."""
    return ("map", expr, out_ct, tuple(types), preamble)


def _map_kernel(member, prefix: str) -> str:
    """The kernel of a map member: operand ``j`` is ``p<j>[...]`` or the scalar
    ``s<j>`` as bit ``j`` of ``L.sc`` says (a branch on an argument, the same for
    every work-item: measured on PoCL, a 1e6-element float32 add runs as fast as in a
    kernel with no choice)."""
    _, expr, out_ct, types, _pre = member
    out_t = "uchar" if out_ct == "bool" else out_ct
    value = f"({expr})"
    if out_ct == "bool":
        value = f"(uchar)({value} != 0)"
    params = ["long n", f"__global {out_t} *out", "long oo"]
    for j, t in enumerate(types):
        params += [f"__global const {t} *p{j}", f"long o{j}", f"{t} s{j}"]
    params.append("tlayout L_")
    k = len(types)
    body = ["  const tlayout *L = &L_;", "  long i = get_global_id(0);", "  if (i >= n) return;",
            "  long sc = L->sc;", "  if (L->nd < 0) {"]
    # C-contiguous operands of one shape: no index arithmetic.
    body += [f"    {t} a{j} = (sc & {1 << j}) ? s{j} : p{j}[o{j} + i];"
             for j, t in enumerate(types)]
    body += [f"    out[oo + i] = {value};", "    return;", "  }"]
    # Any layout: the coordinates of i over the coalesced axes, innermost first; the
    # outermost is what is left (no division).
    body.append("  long r = i, c, io = oo;")
    body += [f"  long x{j} = o{j};" for j in range(k)]
    # Two axes (a transpose, a broadcast row) without the loop: measured 5-8% faster on
    # a transposed 1000x1000 float32 add.
    body += ["  if (L->nd == 2) {", "    long d = L->d[1];", "    c = r % d; r = r / d;",
             "    io += c * L->s[0][1];"]
    body += [f"    x{j} += c * L->s[{j + 1}][1];" for j in range(k)]
    body += ["  } else {"]
    body += ["  for (int k = (int)L->nd - 1; k > 0; --k) {",
             "    long d = L->d[k];", "    c = r % d; r = r / d;",
             "    io += c * L->s[0][k];"]
    body += [f"    x{j} += c * L->s[{j + 1}][k];" for j in range(k)]
    body += ["  }", "  }", "  io += r * L->s[0][0];"]
    body += [f"  x{j} += r * L->s[{j + 1}][0];" for j in range(k)]
    body += [f"  {t} a{j} = (sc & {1 << j}) ? s{j} : p{j}[x{j}];" for j, t in enumerate(types)]
    body.append(f"  out[io] = {value};")
    return (f"__kernel void m{prefix}({', '.join(params)})\n{{\n" + "\n".join(body)
            + "\n}\n")


def _launch_map_ranked(queue, expr, out, operands, out_ct, types, preamble):
    """``launch_map`` by a kernel generated for ``out``'s rank: for expressions that use
    the coordinates ``x0``, ``x1``, ..., more than :data:`MAXD` axes after coalescing or
    more than :data:`MAXOPS` operands."""
    shape = out.shape
    n = out.size
    kinds = [t if op.__class__ is _NATIVE else "$" + t for t, op in zip(types, operands)]
    nd = len(shape)
    key = (expr, out_ct, tuple(kinds), nd, preamble)
    src = _RANKED.get(key)
    if src is None:
        src = _RANKED[key] = _map_source(expr, out_ct, kinds, nd, preamble)
    knl = kernel(queue.context, src, "tmap")
    isz = out.dtype.itemsize
    args = [np.int64(n), out.base_data, np.int64(out.offset // isz)]
    args.extend(np.int64(d) for d in shape)
    args.extend(np.int64(s) for s in _strides_for(out, shape))
    for op in operands:
        if op.__class__ is _NATIVE:
            isz = op.dtype.itemsize
            args.append(op.base_data)
            args.append(np.int64(op.offset // isz))
            args.extend(np.int64(s) for s in _strides_for(op, shape))
        else:
            args.append(op)
    launch_1d(knl, queue, n, args)
    return out


_RANKED: dict = {}


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

_RED_TYPES = (_I64, _I64, _I64, None, None, _I64, None)


def reduce_member(in_ct, out_ct, acc_ct, init, step, final="acc", preamble="", decl="") -> tuple:
    """The member tuple :func:`launch_reduce` looks up for these arguments, for families."""
    return ("red", in_ct, out_ct, acc_ct, init, step, final, preamble, decl)


def launch_reduce(a, axes: tuple, out_ct: str, acc_ct: str, init: str, step: str,
                  final: str = "acc", *, preamble: str = "", decl: str = "", merge=None,
                  count=None):
    """Reduce ``a`` over ``axes`` (sorted, non-empty); a new C-contiguous result of
    the kept axes' shape.

    One work-item per output element walks its reduced elements in C order:
    ``acc`` (C type ``acc_ct``) starts at ``init``; ``step`` is a statement using
    ``acc``, ``v`` (the element) and ``j`` (its position in the walk, a long);
    ``final`` is the stored value (it may use ``m``, the reduced count, or ``count``
    where given); ``decl`` declares more accumulators. One kernel serves every rank and
    choice of axes (the kept and the reduced axes each coalesced, passed in one struct
    argument).

    Split walks (GPUs): with ``merge`` (a statement folding ``v``, another walk's
    ``acc``, into ``acc``; only for a single accumulator whose ``step`` reads ``j`` at
    most as "the first element of the walk") and few outputs with long walks
    (:func:`split_parts`), each output's walk is cut into interleaved parts (part ``k``
    takes elements ``k, k + P, k + 2P, ...``, so neighbouring work-items read
    neighbouring elements), each part reduced by its own work-item, and the parts'
    accumulators are then reduced by ``merge``, split again where still long: a full
    reduction of 2**24 elements is then 32768 work-items, not one.
    """
    shape = a.shape
    kept = tuple(d for d in range(len(shape)) if d not in axes)
    oshape = tuple(shape[d] for d in kept)
    n = 1
    for d in oshape:
        n *= d
    m = 1
    for d in axes:
        m *= shape[d]
    count = m if count is None else count
    in_ct = CTYPE[a.dtype.char]
    off, strides = layout(a)
    kd, (ks,) = coalesce(oshape, [[strides[d] for d in kept]])
    rd, (rs,) = coalesce([shape[d] for d in axes], [[strides[d] for d in axes]])
    small = len(kd) <= MAXD and len(rd) <= MAXD
    lay = None
    if small:
        lay = np.zeros(2 + 4 * MAXD, _I64)
        lay[0] = len(kd)
        lay[1] = len(rd)
        lay[2:2 + len(kd)] = kd
        lay[2 + MAXD:2 + MAXD + len(ks)] = ks
        lay[2 + 2 * MAXD:2 + 2 * MAXD + len(rd)] = rd
        lay[2 + 3 * MAXD:2 + 3 * MAXD + len(rs)] = rs
    if merge is not None and not decl and small and n:
        parts = split_parts(a.queue, n, m)
        if parts > 1:
            tmp = empty(a.queue, (n, parts), _NP_OF[acc_ct])
            member = ("redpart", in_ct, acc_ct, init, step, preamble)
            knl = _kernel_of(a.queue.context, member, "q{}", _PART_TYPES)
            launch_1d(knl, a.queue, n * parts,
                      [n * parts, m, parts, tmp.base_data, a.base_data, off, lay])
            out = launch_reduce(tmp, (1,), out_ct, acc_ct, init, merge, final,
                                preamble=preamble, merge=merge, count=count)
            return out.reshape(oshape)
    out = empty(a.queue, oshape, _NP_OF[out_ct])
    if n == 0:
        return out
    if not small:
        return _launch_reduce_ranked(a, axes, out, in_ct, out_ct, acc_ct, init, step, final,
                                     preamble, decl)
    member = ("red", in_ct, out_ct, acc_ct, init, step, final, preamble, decl)
    knl = _kernel_of(a.queue.context, member, "r{}", _RED_TYPES)
    launch_1d(knl, a.queue, n, [n, m, count, out.base_data, a.base_data, off, lay])
    return out


# Split walks (launch_reduce, GPUs only): the work-items a split reduction aims at, and
# the fewest elements one part walks. H200 through NVIDIA's OpenCL, float32, one vector of
# n elements, wall ms per call (call + finish; CuPy's call + synchronize alongside),
# 2026-11-30, before (one work-item per output) -> after:
#
#   n = 2**24          sum            max             mean           vector_norm
#   tessera      (not kept) -> 0.34  775 -> 0.37    502 -> 0.37    563 -> 0.41
#   cupy                      0.042       0.050           0.057          0.132
#   and a (65536, 256) array summed over axis 0: 4.35 -> 0.31 ms (CuPy 1.66).
#
# What is left is mostly launches (a part pass, then one or two passes over the parts).
# CPU devices do not split: PoCL 3.0 runs the few work-groups of a split pass on one of
# its threads anyway (a full float32 sum of 2**24 on the 2-core EPYC: 18.8 ms unsplit,
# 20.2 split; NumPy 7.4).
SPLIT_GPU_ITEMS = 1 << 15
SPLIT_MIN = 64
_CPU_DEV: dict = {}


def split_parts(queue, n: int, m: int) -> int:
    """Parts per output for ``n`` outputs of ``m`` elements each: 1 (no split) on CPU
    devices, or where the outputs alone occupy the device or the walks are short."""
    dev = queue.device
    cpu = _CPU_DEV.get(dev)
    if cpu is None:
        cpu = _CPU_DEV[dev] = bool(dev.type & cl.device_type.CPU)
    if cpu or 2 * n > SPLIT_GPU_ITEMS or m < 2 * SPLIT_MIN:
        return 1
    return max(1, min(-(-SPLIT_GPU_ITEMS // n), m // SPLIT_MIN))


_PART_TYPES = (_I64, _I64, _I64, None, None, _I64, None)


def _reduce_part_kernel(member, prefix: str) -> str:
    """The first step of a split reduction: work-item ``i`` reduces part ``i % P`` of
    output ``i / P``'s walk into ``out[i]`` (the accumulator, no final)."""
    _, in_ct, acc_ct, init, step, _pre = member
    body = _output_base("i / P") + ["  long part = i % P;"]
    # element part + j * P of the output's walk, j counting this part's elements
    body += ["  long cnt = part < m ? (m - 1 - part) / P + 1 : 0;", f"  {acc_ct} acc = {init};"]
    body += _walk(in_ct, step, "cnt", "part + j * P")
    body.append("  out[i] = acc;")
    return (f"__kernel void q{prefix}(long n, long m, long P, "
            f"__global {acc_ct} *out, __global const {in_ct} *p, long po, tredlayout L_)\n{{\n"
            + "\n".join(body) + "\n}\n")


def _output_base(index: str) -> list:
    """Kernel lines: work-item ``i`` (none past ``n``) and ``base``, the offset of output
    ``index``'s first reduced element (from the kept axes' coordinates of that output; the
    outermost is what is left)."""
    return [
        "  const tredlayout *L = &L_;", "  long i = get_global_id(0);", "  if (i >= n) return;",
        f"  long r = {index}, c;", "  long base = po;",
        "  for (int k = (int)L->nk - 1; k > 0; --k) {",
        "    c = r % L->kd[k]; r = r / L->kd[k]; base += c * L->ks[k];",
        "  }",
        "  base += r * L->ks[0];",
    ]


def _walk(in_ct: str, step: str, count: str, index: str) -> list:
    """Kernel lines: ``step`` on ``v``, element ``index`` (a C expression of ``j``) of the
    output's reduced walk, for ``j`` from 0 below ``count``."""
    return [
        "  if (L->nr <= 1) {",  # one reduced axis (after coalescing): a strided walk
        "    long rs = L->rs[0];",
        f"    for (long j = 0; j < {count}; ++j) {{",
        f"      {in_ct} v = p[base + ({index}) * rs];",
        f"      {step}",
        "    }",
        "  } else {",
        f"    for (long j = 0; j < {count}; ++j) {{",
        f"      long q = {index}, off = base;",
        "      for (int k = (int)L->nr - 1; k > 0; --k) {",
        "        c = q % L->rd[k]; q = q / L->rd[k]; off += c * L->rs[k];",
        "      }",
        "      off += q * L->rs[0];",
        f"      {in_ct} v = p[off];",
        f"      {step}",
        "    }",
        "  }",
    ]


def _reduce_kernel(member, prefix: str) -> str:
    _, in_ct, out_ct, acc_ct, init, step, final, _pre, decl = member
    out_t = "uchar" if out_ct == "bool" else out_ct
    value = f"({final})"
    if out_ct == "bool":
        value = f"(uchar)({value} != 0)"
    body = _output_base("i")
    body.append(f"  {acc_ct} acc = {init};")
    if decl:
        body.append(f"  {decl}")
    body += _walk(in_ct, step, "mw", "j")
    body.append(f"  out[i] = {value};")
    return (f"__kernel void r{prefix}(long n, long mw, long m, __global {out_t} *out, "
            f"__global const {in_ct} *p, long po, tredlayout L_)\n{{\n"
            + "\n".join(body) + "\n}\n")


def _launch_reduce_ranked(a, axes, out, in_ct, out_ct, acc_ct, init, step, final, preamble,
                          decl):
    """``launch_reduce`` by a kernel generated for the ranks (more than :data:`MAXD`
    kept or reduced axes after coalescing)."""
    shape = a.shape
    kept = tuple(d for d in range(len(shape)) if d not in axes)
    n = out.size
    m = 1
    for d in axes:
        m *= shape[d]
    key = (in_ct, out_ct, acc_ct, init, step, final, len(kept), len(axes), preamble, decl)
    src = _RANKED.get(key)
    if src is None:
        src = _RANKED[key] = _reduce_source(in_ct, out_ct, acc_ct, init, step, final,
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
    place (optimizer steps, axpy, aypx), which the front end may hand views (a parameter
    ``base[:, ::2]``), go through :func:`contiguous_operands`; every other launcher
    is registered as it is."""

    WRITES = frozenset({"sgd_step", "adam_step", "adamw_step", "adafactor_step", "axpy",
                        "aypx"})

    def __init__(self, registry):
        self._registry = registry

    def register(self, op, backend, dtypes, launcher, **kwargs):
        if op in self.WRITES:
            launcher = contiguous_operands(launcher, True)
        self._registry.register(op, backend, dtypes, launcher, **kwargs)


# ---- scans -----------------------------------------------------------------------------------

_SCAN_TYPES = (_I64, _I64, None, None, _I64, _I64, _I64, _I64, None)


def launch_scan(a, axis: int, out_ct: str, init: str, step: str, include_initial: bool):
    """Inclusive scan of ``a`` along ``axis`` into a new C-contiguous buffer (one more
    element along ``axis`` with ``include_initial``, holding ``init``): one work-item
    per line walks it in order: ``acc`` takes the first element, then ``step`` updates
    ``acc`` (of type ``out_ct``) with each next ``v``. One kernel serves every rank
    (the other axes coalesced, passed in a layout argument)."""
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
    off, strides = layout(a)
    ost = [0] * nd
    acc = 1
    for d in reversed(range(nd)):
        ost[d] = acc
        acc *= oshape[d]
    kd, (ks, kos) = coalesce([shape[d] for d in kept],
                             [[strides[d] for d in kept], [ost[d] for d in kept]])
    if len(kd) > MAXD:
        return _launch_scan_ranked(a, axis, out, in_ct, out_ct, init, step, include_initial)
    knl = _kernel_of(a.queue.context, ("scan", in_ct, out_ct, init, step), "s{}", _SCAN_TYPES)
    lay = np.zeros(1 + 3 * MAXD, _I64)
    lay[0] = len(kd)
    lay[1:1 + len(kd)] = kd
    lay[1 + MAXD:1 + MAXD + len(ks)] = ks
    lay[1 + 2 * MAXD:1 + 2 * MAXD + len(kos)] = kos
    launch_1d(knl, a.queue, n, [n, shape[axis], out.base_data, a.base_data, off,
                                strides[axis], ost[axis], int(include_initial), lay])
    return out


def _scan_kernel(member, prefix: str) -> str:
    _, in_ct, out_ct, init, step = member
    body = ["  const tscanlayout *L = &L_;",
            "  long i = get_global_id(0);", "  if (i >= n) return;", "  long r = i, c;",
            "  long base = po, obase = 0;",
            "  for (int k = (int)L->nk - 1; k > 0; --k) {",
            ("    c = r % L->kd[k]; r = r / L->kd[k]; base += c * L->ks[k]; "
             "obase += c * L->kos[k];"),
            "  }",
            "  base += r * L->ks[0]; obase += r * L->kos[0];",
            f"  {out_ct} acc = {init};",
            "  if (inc) { out[obase] = acc; obase += ros; }",
            "  for (long j = 0; j < m; ++j) {",
            f"    {in_ct} v = p[base + j * rs];",
            # The first element is copied, not combined with init (NumPy's accumulate:
            # -0.0 stays).
            f"    if (j == 0) acc = v; else {{ {step} }}",
            "    out[obase + j * ros] = acc;",
            "  }"]
    return (f"__kernel void s{prefix}(long n, long m, __global {out_ct} *out, "
            f"__global const {in_ct} *p, long po, long rs, long ros, long inc, "
            f"tscanlayout L_)\n{{\n" + "\n".join(body) + "\n}\n")


def _launch_scan_ranked(a, axis, out, in_ct, out_ct, init, step, include_initial):
    """``launch_scan`` by a kernel generated for the rank (more than :data:`MAXD` other
    axes after coalescing)."""
    shape = a.shape
    nd = len(shape)
    oshape = out.shape
    kept = [d for d in range(nd) if d != axis]
    n = 1
    for d in kept:
        n *= shape[d]
    key = (in_ct, out_ct, init, step, len(kept))
    src = _RANKED.get(key)
    if src is None:
        src = _RANKED[key] = _scan_source(in_ct, out_ct, init, step, len(kept))
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
