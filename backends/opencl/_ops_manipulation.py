"""Native manipulation ops of the OpenCL backend.

Views where NumPy gives views (``permute_dims``, ``matrix_transpose``, ``flip``,
``expand_dims``, ``squeeze``, ``broadcast_to``, ``unstack``, ``moveaxis``,
``reshape`` of a C-contiguous buffer); ``concat`` and ``stack`` copy each input into
its slice of the result with one kernel launch per input. ``broadcast_to`` views are
read-only, as NumPy's are, and so is every view of them (see ``_ops_core``).
"""

from __future__ import annotations

from tessera_array.backends._common import broadcast_shape as _broadcast_shape
from tessera_array.backends._common import c_strides

from . import _memory
from ._ops_core import carry_readonly, copy_into, mark_readonly

__all__ = [
    "broadcast_arrays",
    "broadcast_to",
    "concat",
    "diagonal",
    "expand_dims",
    "flip",
    "matrix_transpose",
    "meshgrid",
    "moveaxis",
    "outer",
    "permute_dims",
    "repeat",
    "reshape",
    "roll",
    "squeeze",
    "stack",
    "tensordot",
    "tile",
    "trace",
    "unstack",
]

_NATIVE = _memory.NATIVE


def _strided(a, shape, strides, off=None):
    """A view of ``a``'s buffer (read-only when ``a`` is)."""
    if off is None:
        off = _memory.layout(a)[0]
    return carry_readonly(a, _memory.view(a, tuple(shape), tuple(strides), off))


def permute_dims(a, axes: tuple):
    """A view of ``a`` with its axes permuted."""
    off, st = _memory.layout(a)
    return _strided(a, [a.shape[i] for i in axes], [st[i] for i in axes], off)


def matrix_transpose(a):
    """A view of ``a`` with its last two axes swapped."""
    axes = list(range(len(a.shape)))
    axes[-1], axes[-2] = axes[-2], axes[-1]
    return permute_dims(a, tuple(axes))


def moveaxis(a, source: tuple, destination: tuple):
    """A view of ``a`` with the axes ``source`` moved to ``destination``."""
    order = [n for n in range(len(a.shape)) if n not in source]
    for dest, src in sorted(zip(destination, source)):
        order.insert(dest, src)
    return permute_dims(a, tuple(order))


def flip(a, axis=None):
    """A reversed view of ``a`` along ``axis`` (a tuple of axes, or None for all)."""
    off, st = _memory.layout(a)
    st = list(st)
    axes = range(len(a.shape)) if axis is None else axis
    for ax in axes:
        n = a.shape[ax]
        if n > 1:
            off += (n - 1) * st[ax]
            st[ax] = -st[ax]
    return _strided(a, a.shape, st, off)


def reshape(a, shape: tuple, copy=None):
    """``a`` with a new ``shape``: a view of a C-contiguous buffer; ``copy=False``
    raises ValueError if a copy is needed."""
    if not _is_c_contiguous(a):
        if copy is False:
            raise ValueError(
                f"reshape: a copy is needed to give this array the shape {shape}, and "
                f"copy=False forbids one. Received: x.shape={a.shape}, "
                f"x.strides={_memory.layout(a)[1]}"
            )
        a = _copy(a)
    elif copy:
        a = _copy(a)
    return _strided(a, shape, c_strides(shape))


def _is_c_contiguous(a) -> bool:
    """C-contiguous, ignoring the strides of length-1 axes (NumPy's rule)."""
    if a.flags.c_contiguous:
        return True
    expect = 1
    for n, s in zip(reversed(a.shape), reversed(_memory.layout(a)[1])):
        if n == 0:
            return True
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def _copy(a):
    out = _memory.empty(a.queue, a.shape, a.dtype)
    _memory.copy_into(out, a)
    return out


def expand_dims(a, axis: tuple):
    """``a`` with singleton axes at the (sorted, non-negative) positions ``axis``."""
    off, st = _memory.layout(a)
    shape, strides = list(a.shape), list(st)
    for ax in axis:
        shape.insert(ax, 1)
        strides.insert(ax, 0)
    return _strided(a, shape, strides, off)


def squeeze(a, axis: tuple):
    """A view of ``a`` without the singleton axes ``axis``."""
    off, st = _memory.layout(a)
    keep = [i for i in range(len(a.shape)) if i not in axis]
    return _strided(a, [a.shape[i] for i in keep], [st[i] for i in keep], off)


def broadcast_to(a, shape: tuple):
    """A read-only broadcast view of ``a`` with ``shape`` (stride 0 along broadcast axes),
    or ``a`` itself for its own shape (NumPy's semantics)."""
    shape = tuple(shape)
    if a.shape == shape:
        return a
    _broadcast_shape((a.shape, shape))  # ValueError when they do not broadcast
    if _broadcast_shape((a.shape, shape)) != shape:
        raise ValueError(f"operands could not be broadcast together with shapes "
                         f"{a.shape} {shape}")
    return mark_readonly(_strided(a, shape, _memory.strides_for(a, shape)))


def broadcast_arrays(*arrays):
    shape = _broadcast_shape([a.shape for a in arrays])
    return tuple(broadcast_to(a, shape) for a in arrays)


def unstack(a, axis=0):
    """Views of ``a`` sliced along ``axis``."""
    off, st = _memory.layout(a)
    shape = [n for i, n in enumerate(a.shape) if i != axis]
    strides = [s for i, s in enumerate(st) if i != axis]
    return tuple(_strided(a, shape, strides, off + i * st[axis]) for i in range(a.shape[axis]))


def concat(arrays, axis=0):
    """Join same-dtype ``arrays`` along ``axis`` (``None``: flattened first)."""
    arrays = list(arrays)
    if axis is None:
        arrays = [reshape(a, (a.size,)) for a in arrays]
        axis = 0
    first = arrays[0]
    nd = len(first.shape)
    axis %= nd
    total = 0
    for a in arrays:
        if len(a.shape) != nd or any(
            a.shape[d] != first.shape[d] for d in range(nd) if d != axis
        ):
            raise ValueError(
                f"concat: the arrays' shapes must agree except along axis {axis}. "
                f"Received: shapes {[tuple(x.shape) for x in arrays]}"
            )
        total += a.shape[axis]
    shape = list(first.shape)
    shape[axis] = total
    out = _memory.empty(first.queue, tuple(shape), first.dtype)
    st = c_strides(shape)
    pos = 0
    for a in arrays:
        n = a.shape[axis]
        if n:
            part_shape = list(shape)
            part_shape[axis] = n
            copy_into(_strided(out, part_shape, st, pos * st[axis]), a)
        pos += n
    return out


def stack(arrays, axis=0):
    """Join same-shape, same-dtype ``arrays`` along a new axis ``axis``."""
    arrays = list(arrays)
    nd = len(arrays[0].shape) + 1
    axis %= nd
    return concat([expand_dims(a, (axis,)) for a in arrays], axis=axis)


def _diagonal_view(a, offset: int):
    off, st = _memory.layout(a)
    rows, cols = a.shape[-2], a.shape[-1]
    if offset >= 0:
        n = max(0, min(rows, cols - offset))
        start = off + (offset * st[-1] if n else 0)
    else:
        n = max(0, min(rows + offset, cols))
        start = off + (-offset * st[-2] if n else 0)
    return _strided(a, a.shape[:-2] + (n,), st[:-2] + (st[-2] + st[-1],), start)


def diagonal(a, offset: int = 0):
    """The ``offset`` diagonal of each matrix (a copy, as on the NumPy backend)."""
    return _copy(_diagonal_view(a, offset))


def trace(a, offset: int = 0, dtype=None):
    """The sum of the ``offset`` diagonal of each matrix, accumulated in ``dtype``."""
    from ._ops_reductions import sum as _sum

    d = _diagonal_view(a, offset)
    return _sum(d, axis=(len(d.shape) - 1,), dtype=dtype)


def outer(a, b):
    """The outer product of two 1-D arrays of one dtype."""
    from ._ops_elementwise import multiply

    return multiply(expand_dims(a, (1,)), expand_dims(b, (0,)))


def meshgrid(*arrays, indexing: str = "xy"):
    """Coordinate matrices (C-contiguous copies, as NumPy's ``copy=True``)."""
    n = len(arrays)
    shape = [a.shape[0] for a in arrays]
    if indexing == "xy" and n > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, a in enumerate(arrays):
        axis = i
        if indexing == "xy" and n > 1 and i < 2:
            axis = 1 - i
        view_shape = [1] * n
        view_shape[axis] = a.shape[0]
        v = reshape(a, tuple(view_shape))
        out.append(_copy(broadcast_to(v, tuple(shape))))
    return tuple(out)


_repeat_host = None


def repeat(a, repeats, axis=None):
    """Repeat elements of ``a`` an int number of times (a broadcast copy); integer-array
    ``repeats`` run on the host."""
    global _repeat_host
    if repeats.__class__ is _NATIVE:
        if _repeat_host is None:
            from tessera_array.backends.numpy import _ops as _host_ops

            from ._fallback import host_fallback

            _repeat_host = host_fallback("repeat[array repeats]", _host_ops.repeat)
        return _repeat_host(a, repeats, axis=axis)
    if axis is None:
        a = reshape(a, (a.size,))
        axis = 0
    axis %= len(a.shape)
    v = expand_dims(a, (axis + 1,))
    shape = list(v.shape)
    shape[axis + 1] = repeats
    out = _copy(broadcast_to(v, tuple(shape)))
    final = list(a.shape)
    final[axis] *= repeats
    return reshape(out, tuple(final))


def tile(a, repetitions: tuple):
    """``a`` tiled ``repetitions`` times along each axis (a broadcast copy)."""
    reps = tuple(repetitions)
    nd = max(len(reps), len(a.shape))
    reps = (1,) * (nd - len(reps)) + reps
    a = reshape(a, (1,) * (nd - len(a.shape)) + tuple(a.shape))
    inter = []
    for d in range(nd):
        inter.append(1)
        inter.append(a.shape[d])
    v = reshape(a, tuple(inter))
    big = []
    for d in range(nd):
        big.append(reps[d])
        big.append(a.shape[d])
    out = _copy(broadcast_to(v, tuple(big)))
    return reshape(out, tuple(reps[d] * a.shape[d] for d in range(nd)))


def roll(a, shift, axis=None):
    """``a`` rolled by ``shift`` (an int, or a tuple matching the tuple ``axis``): two
    slices joined per axis."""
    if axis is None:
        return reshape(roll(reshape(a, (a.size,)), shift, 0), a.shape)
    axes = axis if isinstance(axis, tuple) else (axis,)
    shifts = shift if isinstance(shift, tuple) else (shift,) * len(axes)
    if len(shifts) != len(axes):
        raise ValueError("roll: shift and axis must have the same length")
    total = {}
    for sh, ax in zip(shifts, axes):
        ax %= len(a.shape)
        total[ax] = total.get(ax, 0) + sh
    out = a
    for ax, sh in total.items():
        n = out.shape[ax]
        if n == 0 or sh % n == 0:
            continue
        k = sh % n
        head = [slice(None)] * len(out.shape)
        tail = list(head)
        head[ax] = slice(n - k, None)
        tail[ax] = slice(None, n - k)
        from ._ops_core import basic_view

        out = concat([basic_view(out, tuple(head)), basic_view(out, tuple(tail))], axis=ax)
    return out if out is not a else _copy(a)


def tensordot(a, b, axes: tuple):
    """Contract ``a`` over ``axes[0]`` with ``b`` over ``axes[1]``: both permuted and
    reshaped to matrices, then one ``matmul``."""
    from ._ops_linalg import matmul

    ax_a, ax_b = tuple(axes[0]), tuple(axes[1])
    free_a = [d for d in range(len(a.shape)) if d not in ax_a]
    free_b = [d for d in range(len(b.shape)) if d not in ax_b]
    k = 1
    for d in ax_a:
        k *= a.shape[d]
    m = 1
    for d in free_a:
        m *= a.shape[d]
    n = 1
    for d in free_b:
        n *= b.shape[d]
    am = reshape(permute_dims(a, tuple(free_a) + ax_a), (m, k))
    bm = reshape(permute_dims(b, ax_b + tuple(free_b)), (k, n))
    r = matmul(am, bm)
    return reshape(r, tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b))
