"""Launchers of the generated kernels: elementwise maps, reductions and scans.

:func:`launch_map`, :func:`launch_reduce` and :func:`launch_scan` take native
buffers of any layout (views read in place through their offset and strides), coalesce
their axes on the host (:func:`~tessera_array.backends._common.coalesce`) and launch
the one kernel of :mod:`._generate` that serves the expression and its C types at every
rank, shape and layout; its program is its family's (:mod:`._families`), built by the
backend's build stack (:mod:`._compile`). Layouts beyond the kernels' layout struct take
a kernel generated for their rank. :func:`build_count` counts the programs built.

Every launch runs work-groups of :data:`WG` work-items (PoCL compiles a work-group
function per local size; left to the driver it picked one per problem size). On GPUs a
reduction with few outputs and long walks splits its walks (:func:`split_parts`).

The buffer functions (:mod:`._memory`) that the backend object, the host fallback and the
benchmarks reach through this module are re-exported here.
"""

from __future__ import annotations

import functools

import numpy as np
from tessera_array.backends._common import c_strides, coalesce, from_text, memo

from tessera_array._backend_api import KERNELS
from tessera_array._dispatch import KernelRegistry

from . import _memory
from ._compile import build_count, generated_kernel
from ._families import add_families, family_failures
from ._families import kernel_of as _kernel_of  # (a module global: tests spy on it)
from ._generate import (
    CTYPE,
    MAXD,
    MAXOPS,
    NP_OF,
    PART_TYPES,
    RED_TYPES,
    SCAN_TYPES,
    ZERO,
    map_arg_types,
    map_member,
    map_source,
    part_member,
    reduce_member,
    reduce_source,
    scan_member,
    scan_source,
)
from ._memory import QUEUE_DEVICE, allocator, attach, to_device, to_host, write  # noqa: F401
from ._programs import is_cpu

__all__ = [
    "CTYPE",
    "SPLIT_GPU_ITEMS",
    "SPLIT_MIN",
    "WG",
    "AdaptingRegistry",
    "add_families",
    "build_count",
    "contiguous_operands",
    "family_failures",
    "launch_1d",
    "launch_map",
    "launch_reduce",
    "launch_scan",
    "map_member",
    "reduce_member",
    "split_parts",
]

_I64 = np.dtype(np.int64)
_NATIVE = _memory.NATIVE

# Work-items per work-group of the generated kernels: fixed, with the global size rounded
# up to a multiple (every generated kernel returns early for i >= n). Left to the driver
# (local size None), PoCL builds one work-group function per local size it picks, and it
# picks one per problem size: the test suite compiled up to 24 variants of one kernel,
# and a cold run of it spent most of its time in the compiler.
WG = 64

# A map's kernel by its plain key (context, expr, out_ct, types, preamble): the per-call
# lookup, which makes no member tuple (misses go through the member's family).
_map_kernels = memo("opencl.map_kernels")
_flat = memo("opencl.flat_layouts")  # scalar bits -> layout argument of C-contiguous maps
_ranked = memo("opencl.ranked_sources")  # (generator arguments, ranks) -> KernelSource


def launch_1d(knl, queue, n: int, args) -> None:
    """Run ``knl`` over ``n`` work-items in work-groups of :data:`WG`."""
    knl(queue, (-(-n // WG) * WG,), (WG,), *args)


def _ranked_source(key, make, *args):
    """The KernelSource of a kernel generated for its ranks, kept under ``key``."""
    hit = _ranked.get(key)
    if hit is None:
        hit = _ranked[key] = from_text(make(*args))
    return hit


# ---- maps -----------------------------------------------------------------------------


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
        out = _memory.empty(queue, shape, NP_OF[out_ct])
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
            args += (op.base_data, op.offset // op.dtype.itemsize, ZERO[t])
        else:
            args += (None, 0, op)
    if flat:
        lay = _flat.get(sc)
        if lay is None:
            lay = _flat[sc] = np.array([-1, sc] + [0] * (MAXD * (MAXOPS + 2)), _I64)
    else:
        bufs = [out]
        cols = [0]
        for j, op in enumerate(operands):
            if op.__class__ is _NATIVE:
                bufs.append(op)
                cols.append(j + 1)
        dims, strides = coalesce(shape, [_memory.strides_for(b, shape) for b in bufs])
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
    ctx = queue.context
    key = (ctx, expr, out_ct, types, preamble)
    knl = _map_kernels.get(key)
    if knl is None:
        knl = _map_kernels[key] = _kernel_of(ctx, map_member(expr, out_ct, types, preamble),
                                             "m{}", map_arg_types(types))
    launch_1d(knl, queue, n, args)
    return out


def _launch_map_ranked(queue, expr, out, operands, out_ct, types, preamble):
    """``launch_map`` by a kernel generated for ``out``'s rank: for expressions that use
    the coordinates ``x0``, ``x1``, ..., more than :data:`MAXD` axes after coalescing or
    more than :data:`MAXOPS` operands."""
    shape = out.shape
    n = out.size
    kinds = [t if op.__class__ is _NATIVE else "$" + t for t, op in zip(types, operands)]
    nd = len(shape)
    src = _ranked_source((expr, out_ct, tuple(kinds), nd, preamble), map_source, expr, out_ct,
                         kinds, nd, preamble)
    knl = generated_kernel(queue.context, src, "tmap")
    isz = out.dtype.itemsize
    args = [np.int64(n), out.base_data, np.int64(out.offset // isz)]
    args.extend(np.int64(d) for d in shape)
    args.extend(np.int64(s) for s in _memory.strides_for(out, shape))
    for op in operands:
        if op.__class__ is _NATIVE:
            isz = op.dtype.itemsize
            args.append(op.base_data)
            args.append(np.int64(op.offset // isz))
            args.extend(np.int64(s) for s in _memory.strides_for(op, shape))
        else:
            args.append(op)
    launch_1d(knl, queue, n, args)
    return out


# ---- reductions ---------------------------------------------------------------------------


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
    off, strides = _memory.layout(a)
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
            tmp = _memory.empty(a.queue, (n, parts), NP_OF[acc_ct])
            member = part_member(in_ct, acc_ct, init, step, preamble)
            knl = _kernel_of(a.queue.context, member, "q{}", PART_TYPES)
            launch_1d(knl, a.queue, n * parts,
                      [n * parts, m, parts, tmp.base_data, a.base_data, off, lay])
            out = launch_reduce(tmp, (1,), out_ct, acc_ct, init, merge, final,
                                preamble=preamble, merge=merge, count=count)
            return out.reshape(oshape)
    out = _memory.empty(a.queue, oshape, NP_OF[out_ct])
    if n == 0:
        return out
    if not small:
        return _launch_reduce_ranked(a, axes, out, in_ct, out_ct, acc_ct, init, step, final,
                                     preamble, decl)
    member = reduce_member(in_ct, out_ct, acc_ct, init, step, final, preamble, decl)
    knl = _kernel_of(a.queue.context, member, "r{}", RED_TYPES)
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


def split_parts(queue, n: int, m: int) -> int:
    """Parts per output for ``n`` outputs of ``m`` elements each: 1 (no split) on CPU
    devices, or where the outputs alone occupy the device or the walks are short."""
    if is_cpu(queue.device) or 2 * n > SPLIT_GPU_ITEMS or m < 2 * SPLIT_MIN:
        return 1
    return max(1, min(-(-SPLIT_GPU_ITEMS // n), m // SPLIT_MIN))


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
    src = _ranked_source(key, reduce_source, in_ct, out_ct, acc_ct, init, step, final,
                         len(kept), len(axes), preamble, decl)
    knl = generated_kernel(a.queue.context, src, "tred")
    off, strides = _memory.layout(a)
    args = [np.int64(n), np.int64(m), out.base_data, a.base_data, np.int64(off)]
    args += [np.int64(shape[d]) for d in kept] + [np.int64(strides[d]) for d in kept]
    args += [np.int64(shape[d]) for d in axes] + [np.int64(strides[d]) for d in axes]
    launch_1d(knl, a.queue, n, args)
    return out


# ---- scans ------------------------------------------------------------------------------


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
    out = _memory.empty(a.queue, tuple(oshape), NP_OF[out_ct])
    if out.size == 0:
        return out
    kept = [d for d in range(nd) if d != axis]
    n = 1
    for d in kept:
        n *= shape[d]
    in_ct = CTYPE[a.dtype.char]
    off, strides = _memory.layout(a)
    ost = c_strides(oshape)
    kd, (ks, kos) = coalesce([shape[d] for d in kept],
                             [[strides[d] for d in kept], [ost[d] for d in kept]])
    if len(kd) > MAXD:
        return _launch_scan_ranked(a, axis, out, in_ct, out_ct, init, step, include_initial)
    knl = _kernel_of(a.queue.context, scan_member(in_ct, out_ct, init, step), "s{}",
                     SCAN_TYPES)
    lay = np.zeros(1 + 3 * MAXD, _I64)
    lay[0] = len(kd)
    lay[1:1 + len(kd)] = kd
    lay[1 + MAXD:1 + MAXD + len(ks)] = ks
    lay[1 + 2 * MAXD:1 + 2 * MAXD + len(kos)] = kos
    launch_1d(knl, a.queue, n, [n, shape[axis], out.base_data, a.base_data, off,
                                strides[axis], ost[axis], int(include_initial), lay])
    return out


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
    src = _ranked_source((in_ct, out_ct, init, step, len(kept)), scan_source, in_ct, out_ct,
                         init, step, len(kept))
    knl = generated_kernel(a.queue.context, src, "tscan")
    off, strides = _memory.layout(a)
    ost = c_strides(oshape)
    args = [np.int64(n), np.int64(shape[axis]), out.base_data, a.base_data, np.int64(off)]
    args += [np.int64(shape[d]) for d in kept] + [np.int64(strides[d]) for d in kept]
    args += [np.int64(ost[d]) for d in kept]
    args += [np.int64(strides[axis]), np.int64(ost[axis]), np.int64(include_initial)]
    launch_1d(knl, a.queue, n, args)
    return out


# ---- launchers of the kernel families ----------------------------------------------------


def contiguous_operands(launcher, writes: bool):
    """``launcher`` taking any buffer layout: non-contiguous buffers among its
    arguments (or in list arguments) are handed over as C-contiguous copies, and with
    ``writes`` copied back after the call (the launcher updates them in place). The
    family kernels index their buffers as C-contiguous; basic indexing gives views."""

    def swap(obj, moved):
        if obj.__class__ is _NATIVE:
            if obj.flags.c_contiguous:
                return obj
            tmp = _memory.contiguous(obj)
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
                _memory.copy_into(orig, tmp)
        return result

    return functools.wraps(launcher)(adapted)


class AdaptingRegistry:
    """A registry front for the family modules: the launchers that update operands in
    place (optimizer steps, axpy, aypx), which the front end may hand views (a parameter
    ``base[:, ::2]``), go through :func:`contiguous_operands`; every other launcher
    is registered as it is."""

    # The ops whose launchers write their operands (the contract's KernelSpec.writes),
    # but cg_fused, whose solve state is made of contiguous vectors it checks itself.
    WRITES = frozenset(op for op, spec in KERNELS.items()
                       if spec.writes and spec.returns != "object")

    def __init__(self, registry):
        self._registry = registry

    def register(self, op, backend, dtypes, launcher, **kwargs):
        if op in self.WRITES:
            launcher = contiguous_operands(launcher, True)
        self._registry.register(op, backend, dtypes, launcher, **kwargs)

    register_family = KernelRegistry.register_family  # (through register, above)
