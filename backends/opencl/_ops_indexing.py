"""Native advanced indexing of the OpenCL backend (kernels/opencl/gather.cl).

``getitem``/``setitem`` with integer-array and boolean-mask keys, ``take``,
``take_along_axis``, ``nonzero`` and ``searchsorted``.

An advanced key becomes a *plan* (NumPy's rules, worked out on the host from the
shapes alone): the output shape, the source strides of its basic (slice, newaxis)
dimensions, and for each index array its axis, broadcast strides and source stride.
``tessera_offsets`` turns the plan into one source offset per output element and
sets a device flag for an index out of range; the flag is read back once (the one
synchronisation of a gather), and an IndexError is raised with the message the cpu
device gives (NumPy's, reproduced on a host stand-in of the same shape). Then
``tessera_take`` gathers or ``tessera_put`` scatters through the offsets. A boolean
mask is first turned into index arrays by :func:`nonzero` (a count scan, one read
back of the total, and a compaction), as NumPy does.
"""

from __future__ import annotations

import numpy as np
import pyopencl as cl
from tessera_array.backends._common import broadcast_shape as _broadcast_shape
from tessera_array.backends._common import c_strides

from . import _generate, _kernels, _memory, _programs

__all__ = ["nonzero", "searchsorted", "take", "take_along_axis"]

_NATIVE = _memory.NATIVE
_I64 = np.dtype(np.int64)
_MOVE_T = {1: "uchar", 2: "ushort", 4: "uint", 8: "ulong", 16: "ulong2"}
_SEARCH_FLAGS = {"f": ("-DTESSERA_FLOAT",), "c": ("-DTESSERA_COMPLEX",)}


def _move_kernel(queue, itemsize: int, name: str):
    return _programs.kernel(queue.context, "gather.cl", (f"-DT={_MOVE_T[itemsize]}",), name)


def _plan_buffer(queue, plan):
    return _memory.to_device(queue, np.asarray(plan, dtype=np.int64))


def _as_index(a):
    """``a`` as an int64 buffer (a view where it already is one)."""
    if a.dtype == _I64:
        return a
    out = _memory.empty(a.queue, a.shape, _I64)
    _cast_into(out, a)
    return out


def _cast_into(dst, b) -> None:
    """``dst[...] = b`` (broadcast) as int64; uint64 values past int64's range become
    out-of-range indices, never wrapped ones."""
    expr = "(a0 > (ulong)LONG_MAX ? LONG_MIN : (long)a0)" if b.dtype.char in "LQ" else \
        "(long)a0"
    _kernels.launch_map(dst.queue, expr, dst, [b], "long")


# ---- plans ---------------------------------------------------------------------------------


class _Plan:
    """Output shape, basic source strides, and index arrays of an advanced index."""

    __slots__ = ("base", "idx", "index", "shape", "sstrides")

    def __init__(self, shape, base, sstrides, index, idx):
        self.shape = tuple(shape)
        self.base = base
        self.sstrides = list(sstrides)
        # [(axis size, source stride, element offset in idx, strides over shape)]
        self.index = index
        self.idx = idx  # the int64 buffer holding every index array


def _expand(a, key):
    """The key as a list: the ellipsis expanded to slices, every boolean mask (Python
    bools and 0-d masks included, which index no axis) replaced by ``("mask", k,
    index arrays)``: its :func:`nonzero` index arrays over the ``k`` axes it covers."""
    items = list(key) if key.__class__ is tuple else [key]
    used = 0
    for it in items:
        if it is None or it is Ellipsis or it.__class__ is bool:
            continue
        if it.__class__ is _NATIVE and it.dtype.char == "?":
            used += len(it.shape)
        else:
            used += 1
    out = []
    axis = 0
    seen = False
    for it in items:
        if it is Ellipsis:
            if not seen:
                seen = True
                n = len(a.shape) - used
                out.extend([slice(None)] * n)
                axis += n
            continue
        if it.__class__ is bool:
            idx = _memory.to_device(a.queue, np.zeros(1 if it else 0, np.int64))
            out.append(("mask", 0, (idx,)))
            continue
        if it.__class__ is _NATIVE and it.dtype.char == "?":
            k = len(it.shape)
            if tuple(it.shape) != tuple(a.shape[axis:axis + k]):
                _host_raise(a, key)  # returns for a size-0 mask, as NumPy allows
            if k == 0:
                out.append(("mask", 0, nonzero(it.reshape((1,)))))
            else:
                out.append(("mask", k, nonzero(it)))
            axis += k
            continue
        out.append(it)
        if it is not None:
            axis += 1
    return out


def make_plan(a, key):
    """The plan of ``a[key]`` for a key holding index arrays, masks or Python bools."""
    items = _expand(a, key)
    off, st = _memory.layout(a)
    # Basic output dims and advanced items (ints count as 0-d index arrays for
    # NumPy's adjacency rule); advanced: (key position, buffer or int, size, stride).
    basic = []  # (key position, dim, source stride)
    adv = []
    axis = 0
    pos = 0
    for it in items:
        if it is None:
            basic.append((pos, 1, 0))
        elif it.__class__ is slice:
            n = a.shape[axis]
            start, stop, step = it.indices(n)
            m = len(range(start, stop, step))
            if m:
                off += start * st[axis]
            basic.append((pos, m, st[axis] * step))
            axis += 1
        elif it.__class__ is tuple:  # ("mask", axes covered, index arrays)
            if it[1] == 0:
                adv.append((pos, it[2][0], 1, 0))
            for arr in it[2][:it[1]]:
                adv.append((pos, arr, a.shape[axis], st[axis]))
                axis += 1
        elif it.__class__ is _NATIVE:
            adv.append((pos, it, a.shape[axis], st[axis]))
            axis += 1
        else:  # an int, already checked against its axis by the front end
            i = int(it)
            off += (i + a.shape[axis] if i < 0 else i) * st[axis]
            adv.append((pos, None, 0, 0))
            axis += 1
        pos += 1
    for d in range(axis, len(a.shape)):
        basic.append((pos, a.shape[d], st[d]))
        pos += 1
    bufs = [(b, size, stride) for _, b, size, stride in adv if b is not None]
    try:
        bshape = _broadcast_shape([b.shape for b, _, _ in bufs])
    except ValueError as err:
        _host_raise(a, key)
        raise IndexError(f"the index arrays do not broadcast: {err}") from err
    positions = sorted({p for p, _, _, _ in adv})
    adjacent = positions == list(range(positions[0], positions[-1] + 1))
    nb = len(bshape)
    if adjacent:
        first = positions[0]
        before = [(d, s) for p, d, s in basic if p < first]
        after = [(d, s) for p, d, s in basic if p > first]
    else:
        before, after = [], [(d, s) for _, d, s in basic]
    shape = [d for d, _ in before] + list(bshape) + [d for d, _ in after]
    sstrides = [s for _, s in before] + [0] * nb + [s for _, s in after]
    lo = len(before)
    pad = [0] * len(after)
    index = []
    if len(bufs) == 1:
        b = _as_index(bufs[0][0])
        strides = [0] * lo + (_memory.strides_for(b, bshape) if nb else []) + pad
        index.append((bufs[0][1], bufs[0][2], _memory.layout(b)[0], strides))
        idx = b
    else:
        # Every index array cast to int64 and broadcast into one (J,) + bshape buffer.
        m = 1
        for d in bshape:
            m *= d
        idx = _memory.empty(a.queue, (len(bufs),) + bshape, _I64)
        cst = c_strides(bshape)
        for j, (b, size, stride) in enumerate(bufs):
            if m:
                _cast_into(_memory.view(idx, bshape, cst, j * m), b)
            index.append((size, stride, j * m, [0] * lo + cst + pad))
    return _Plan(shape, off, sstrides, index, idx)


def _host_raise(a, key):
    """Raise the IndexError NumPy gives for ``key`` on an array of ``a``'s shape (index
    values copied to the host; only on an error path). Returns when NumPy accepts the
    key (a size-0 mask matches any axis length)."""
    stand_in = np.broadcast_to(np.zeros((), a.dtype), a.shape)
    stand_in[_host_key(key)]  # raises NumPy's IndexError


def _host_key(key):
    if key.__class__ is tuple:
        return tuple(_host_key(k) for k in key)
    if key.__class__ is _NATIVE:
        return _memory.to_host(key)
    return key


def offsets(queue, plan, *, on_error):
    """The int64 source offsets (a buffer of ``plan.shape``) of the plan's elements;
    ``on_error()`` raises when an index is out of range (a device flag read back once)."""
    out = _memory.empty(queue, plan.shape, _I64)
    n = out.size
    if n == 0:
        return out
    plan_l = [len(plan.shape), len(plan.index), plan.base] + list(plan.shape) + plan.sstrides
    for size, sstride, ioff, strides in plan.index:
        plan_l += [size, sstride, ioff] + list(strides)
    bad = _memory.empty(queue, (1,), np.dtype(np.int32))
    _programs.zero_fill(queue, bad)
    knl = _programs.kernel(queue.context, "gather.cl", ("-DT=ulong",), "tessera_offsets")
    pbuf = _plan_buffer(queue, plan_l)
    _kernels.launch_1d(knl, queue, n, [np.int64(n), pbuf.base_data, plan.idx.base_data,
                                       out.base_data, bad.base_data])
    flag = np.empty(1, np.int32)
    cl.enqueue_copy(queue, flag, bad.base_data)
    if flag[0]:
        on_error()
    return out


def getitem_advanced(a, key):
    """``a[key]`` for a key with index arrays or masks (a new buffer)."""
    plan = make_plan(a, key)
    offs = offsets(a.queue, plan, on_error=lambda: _host_raise(a, key))
    out = _memory.empty(a.queue, plan.shape, a.dtype)
    n = out.size
    if n:
        knl = _move_kernel(a.queue, a.dtype.itemsize, "tessera_take")
        _kernels.launch_1d(knl, a.queue, n, [np.int64(n), out.base_data, a.base_data,
                                             np.int64(0), offs.base_data])
    return out


def setitem_advanced(a, key, value) -> bool:
    """``a[key] = value`` for a key with index arrays or masks."""
    plan = make_plan(a, key)
    offs = offsets(a.queue, plan, on_error=lambda: _host_raise(a, key))
    n = offs.size
    if not n:
        return True
    val = _memory.empty(a.queue, plan.shape, a.dtype)
    if value.__class__ is _NATIVE:
        while len(value.shape) > len(plan.shape) and value.shape[0] == 1:
            value = value.reshape(value.shape[1:])  # NumPy drops leading length-1 axes
        try:
            fits = _broadcast_shape((plan.shape, value.shape)) == plan.shape
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(
                f"shape mismatch: value array of shape {_np_shape(value.shape)} could not be "
                f"broadcast to indexing result of shape {_np_shape(plan.shape)}"
            )
        _memory.copy_into(val, value)
    else:
        from ._ops_elementwise import _scalar

        with np.errstate(over="ignore"):
            _kernels.launch_map(a.queue, "a0", val, [_scalar(value, a.dtype)],
                                _ct(a.dtype))
    knl = _move_kernel(a.queue, a.dtype.itemsize, "tessera_put")
    _kernels.launch_1d(knl, a.queue, n, [np.int64(n), a.base_data, np.int64(0),
                                         offs.base_data, val.base_data, np.int64(0)])
    return True


def _np_shape(shape) -> str:
    """A shape as NumPy's indexing messages write it: ``(2,3)``, ``(3,)``."""
    return "(" + ",".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _ct(dt) -> str:
    return "bool" if dt.char == "?" else _generate.CTYPE[dt.char]


# ---- take, take_along_axis ----------------------------------------------------------------


def _take_error(name, a, indices, axis):
    def raise_():
        from tessera_array.backends.numpy import _ops as host

        stand_in = np.broadcast_to(np.zeros((), a.dtype), a.shape)
        getattr(host, name)(stand_in, _memory.to_host(indices), axis=axis)
        raise AssertionError(f"{name}: expected an IndexError")

    return raise_


def take(a, indices, axis=None):
    """Elements of ``a`` at ``indices`` along ``axis`` (None: of the flattened ``a``)."""
    src = a
    if axis is None:
        from ._ops_manipulation import reshape

        src = reshape(a, (a.size,))
        axis = 0
    key = (slice(None),) * axis + (indices,)
    plan = make_plan(src, key)
    return _gather(src, plan, _take_error("take", a, indices, None if a is not src else axis))


def take_along_axis(a, indices, axis=-1):
    """Elements of ``a`` at ``indices`` along ``axis``, the other axes broadcast."""
    src = a
    if axis is None:
        from ._ops_manipulation import reshape

        src = reshape(a, (a.size,))
        axis = 0
    nd = len(src.shape)
    axis %= nd
    shape = list(_broadcast_shape((src.shape[:axis] + (1,) + src.shape[axis + 1:],
                                           indices.shape[:axis] + (1,)
                                           + indices.shape[axis + 1:])))
    shape[axis] = indices.shape[axis]
    off, st = _memory.layout(src)
    sstrides = [0 if d == axis or src.shape[d] == 1 else st[d] for d in range(nd)]
    idx = _as_index(indices)
    istr = _memory.strides_for(idx, tuple(shape))
    plan = _Plan(shape, off, sstrides,
                 [(src.shape[axis], st[axis], _memory.layout(idx)[0], istr)], idx)
    return _gather(src, plan, _take_error("take_along_axis", a, indices,
                                          None if a is not src else axis))


def _gather(a, plan, on_error):
    offs = offsets(a.queue, plan, on_error=on_error)
    out = _memory.empty(a.queue, plan.shape, a.dtype)
    n = out.size
    if n:
        knl = _move_kernel(a.queue, a.dtype.itemsize, "tessera_take")
        _kernels.launch_1d(knl, a.queue, n, [np.int64(n), out.base_data, a.base_data,
                                             np.int64(0), offs.base_data])
    return out


# ---- nonzero ---------------------------------------------------------------------------------

# Elements per row of the two-level count scan: rows scan in parallel, then the row totals.
_SCAN_ROW = 4096


def nonzero(a):
    """One int64 index buffer per axis of ``a`` (``a.ndim >= 1``), in C order: a
    two-level inclusive count scan, one read back of the total, then a compaction."""
    from ._ops_elementwise import _truth

    q = a.queue
    n = a.size
    R = len(a.shape)
    if n == 0:
        out = _memory.empty(q, (R, 0), _I64)
        return tuple(_row(out, d, 0) for d in range(R))
    flags = _memory.empty(q, a.shape, _I64)
    t = "bool" if a.dtype.char == "?" else _generate.CTYPE[a.dtype.char]
    _kernels.launch_map(q, f"(long){_truth(t, 'a0')}", flags, [a], "long")
    flat = flags.reshape((n,))
    scan = _count_scan(flat)
    total = np.empty(1, np.int64)
    cl.enqueue_copy(q, total, scan.base_data, src_offset=scan.offset + (n - 1) * 8)
    total = int(total[0])
    out = _memory.empty(q, (R, total), _I64)
    if total:
        dims = _memory.to_device(q, np.asarray(a.shape, np.int64))
        knl = _programs.kernel(q.context, "gather.cl", ("-DT=ulong",), "tessera_nonzero")
        _kernels.launch_1d(knl, q, n, [np.int64(n), np.int32(R), dims.base_data,
                                       scan.base_data, np.int64(total), out.base_data])
    return tuple(_row(out, d, total) for d in range(R))


def _row(out, d, total):
    return _memory.view(out, (total,), (1,), d * total)


def _count_scan(flat):
    """The inclusive running sum of the 1-D int64 ``flat`` (a new contiguous buffer)."""
    n = flat.size
    if n <= _SCAN_ROW:
        return _kernels.launch_scan(flat, 0, "long", "0", "acc += v;", False)
    rows = -(-n // _SCAN_ROW)
    pad = _memory.empty(flat.queue, (rows * _SCAN_ROW,), _I64)
    _programs.zero_fill(flat.queue, pad)
    _memory.copy_into(_memory.view(pad, (n,), (1,), 0), flat)
    part = _kernels.launch_scan(pad.reshape((rows, _SCAN_ROW)), 1, "long", "0", "acc += v;",
                                False)
    last = _memory.view(part, (rows,), (_SCAN_ROW,), _SCAN_ROW - 1)
    tot = _kernels.launch_scan(last, 0, "long", "0", "acc += v;", True)  # exclusive in front
    # part[r, :] += tot[r] (the sum of the rows before r).
    before = _memory.view(tot, (rows, _SCAN_ROW), (1, 0), 0)
    _kernels.launch_map(flat.queue, "a0 + a1", part, [part, before], "long")
    return _memory.view(part, (n,), (1,), 0)


# ---- searchsorted -------------------------------------------------------------------------


def searchsorted(a, v, side="left", sorter=None):
    """Insertion indices (int64) of ``v`` (a buffer or weak scalar) into the sorted 1-D
    ``a``: one binary search per element, NaNs last."""
    q = a.queue
    if v.__class__ is not _NATIVE:
        from ._ops_elementwise import _scalar

        v = _kernels.launch_map(q, "a0", None, [_scalar(v, a.dtype)], _ct(a.dtype),
                                shape=())
    out = _memory.empty(q, v.shape, _I64)
    n = out.size
    if not n:
        return out
    t = _ct(a.dtype)
    t = "uchar" if t == "bool" else t
    opts = [f"-DT={t}", "-DSEARCH"] + list(_SEARCH_FLAGS.get(a.dtype.kind, ()))
    if a.dtype.char in "dD":
        opts.append("-DTESSERA_FP64")
    knl = _programs.kernel(q.context, "gather.cl", tuple(opts), "tessera_search")
    ao, ast = _memory.layout(a)
    vo, vst = _memory.layout(v)
    vplan = _memory.to_device(q, np.asarray(list(v.shape) + list(vst) or [0], np.int64))
    if sorter is not None:
        s = _as_index(sorter)
        _check_sorter(a, v, side, sorter, s)
        so, sst = _memory.layout(s)
        sbuf, use = s.base_data, 1
    else:
        sbuf, so, sst, use = out.base_data, 0, (0,), 0
    _kernels.launch_1d(knl, q, n, [np.int64(n), out.base_data, a.base_data, np.int64(ao),
                                   np.int64(ast[0]), np.int64(a.shape[0]), v.base_data,
                                   np.int64(vo), np.int32(len(v.shape)), vplan.base_data,
                                   np.int32(side == "right"), sbuf, np.int64(so),
                                   np.int64(sst[0]), np.int32(use)])
    return out


def _check_sorter(a, v, side, sorter, s) -> None:
    """NumPy's ValueError for a sorter entry outside ``[0, len(a))`` (one flag read back;
    the message from the NumPy backend on host copies, on the error path only)."""
    from ._ops_reductions import any as _any

    bad = _kernels.launch_map(a.queue, "a0 < 0 || a0 >= a1", None, [s, np.int64(a.shape[0])],
                              "bool", shape=s.shape)
    if bool(_memory.to_host(_any(bad))[()]):
        from tessera_array.backends.numpy import _ops as host

        hv = _memory.to_host(v)
        host.searchsorted(_memory.to_host(a), hv, side=side, sorter=_memory.to_host(sorter))
        raise AssertionError("searchsorted: expected a ValueError for the sorter")
