"""Native ``sort`` and ``argsort`` of the OpenCL backend (kernels/opencl/sort.cl).

Every line along ``axis`` is sorted by (key, original index) pairs: ties break on the
index, so the order is the stable one for ``stable=True`` and ``stable=False`` alike;
NaNs go last ascending and first descending, and equal elements keep their original
order in both directions, as on the NumPy backend. GPUs run a bitonic network over
``P = 2**p`` padded slots (the first stages and the short steps of later ones in local
memory, one launch each; the long steps one launch per step over every line); CPU
devices run log2(n) merge passes instead (no padding, no barriers).

Measured (2-core AMD EPYC, PoCL 3.0, one core, medians of 15, alternating; load average
~3.5 from other users), float64; ``python -m benchmarks --device opencl:0 --suite
opencl_ops`` times the native sort against the host path:

    ========  =========  ===========  ================
    n         merge ms   bitonic ms   host path ms
    ========  =========  ===========  ================
    1000      1.336      1.329        0.339
    100000    29.63      197.2        11.40
    ========  =========  ===========  ================

Expected the bitonic network to lose on a CPU (n log^2 n work, and PoCL serialises
256-item work-groups around each of the local kernel's barriers): it did, by 6.7x at
1e5, hence the merge path there. The host path (copy out, NumPy's sort, copy back) is
still faster on PoCL, whose "device" is the host's own CPU.
"""

from __future__ import annotations

import numpy as np
import pyopencl as cl
from tessera_array.backends._common import c_strides

from . import _generate, _kernels, _memory, _programs
from ._ops_manipulation import moveaxis

__all__ = ["argsort", "sort"]

_I64 = np.dtype(np.int64)
_W = 512  # slots per local-memory block (work-groups of _W / 2)
# CPU devices merge-sort each line (no barriers; see the measurements above); False forces
# the bitonic network there too (the tests run both).
MERGE_ON_CPU = True


def _options(dt) -> tuple:
    t = "uchar" if dt.char == "?" else _generate.CTYPE[dt.char]
    opts = [f"-DT={t}"]
    if dt.kind == "f":
        opts.append("-DTESSERA_FLOAT")
    elif dt.kind == "c":
        opts.append("-DTESSERA_COMPLEX")
    if dt.char in "dD":
        opts.append("-DTESSERA_FP64")
    return tuple(opts)


def _sorted_slab(a, axis, descending):
    """(keys, idx, lines, n, P): every line of ``a`` along ``axis`` sorted in a
    (lines, P) slab."""
    q = a.queue
    nd = len(a.shape)
    axis %= nd
    moved = moveaxis(a, (axis,), (nd - 1,))
    n = a.shape[axis]
    lines = a.size // n
    src = _memory.empty(q, moved.shape, a.dtype)
    _memory.copy_into(src, moved)
    if MERGE_ON_CPU and _programs.is_cpu(q.device):
        return _merge_sorted(src, lines, n, descending)
    P = 1
    while P < n:
        P *= 2
    keys = _memory.empty(q, (lines, P), a.dtype)
    idx = _memory.empty(q, (lines, P), _I64)
    opts = _options(a.dtype)
    ctx = q.context
    init = _programs.kernel(ctx, "sort.cl", opts, "tessera_sort_init")
    total = lines * P
    _kernels.launch_1d(init, q, total, [np.int64(total), np.int64(n), np.int64(P),
                                        keys.base_data, idx.base_data, src.base_data])
    if P < 2:
        return keys, idx, lines, n, P
    desc = np.int32(bool(descending))
    w = min(P, _W)
    loc = _programs.kernel(ctx, "sort.cl", opts, "tessera_bitonic_local")
    glb = _programs.kernel(ctx, "sort.cl", opts, "tessera_bitonic_pass")
    isz = a.dtype.itemsize
    groups = lines * (P // w)

    def local(k_lo, k_hi):
        loc(q, (groups * (w // 2),), (w // 2,), np.int64(P), np.int64(k_lo),
            np.int64(k_hi), np.int64(w), np.int64(n), desc, keys.base_data, idx.base_data,
            cl.LocalMemory(w * isz), cl.LocalMemory(w * 8))

    local(2, w)
    pairs = lines * (P // 2)
    k = 2 * w
    while k <= P:
        j = k // 2
        while j >= w:
            _kernels.launch_1d(glb, q, pairs, [np.int64(pairs), np.int64(P), np.int64(k),
                                               np.int64(j), np.int64(n), desc,
                                               keys.base_data, idx.base_data])
            j //= 2
        local(k, k)
        k *= 2
    return keys, idx, lines, n, P


def _merge_sorted(src, lines, n, descending):
    """The CPU path of :func:`_sorted_slab`: (lines, n) slabs sorted by merge passes
    (P = n: no padding)."""
    q = src.queue
    opts = _options(src.dtype)
    ctx = q.context
    keys = _memory.empty(q, (lines, n), src.dtype)
    idx = _memory.empty(q, (lines, n), _I64)
    init = _programs.kernel(ctx, "sort.cl", opts, "tessera_sort_init")
    total = lines * n
    _kernels.launch_1d(init, q, total, [np.int64(total), np.int64(n), np.int64(n),
                                        keys.base_data, idx.base_data, src.base_data])
    knl = _programs.kernel(ctx, "sort.cl", opts, "tessera_merge_pass")
    other_k = _memory.empty(q, (lines, n), src.dtype)
    other_i = _memory.empty(q, (lines, n), _I64)
    desc = np.int32(bool(descending))
    width = 1
    while width < n:
        per = -(-n // (2 * width))
        work = lines * per
        _kernels.launch_1d(knl, q, work, [np.int64(work), np.int64(n), np.int64(width), desc,
                                          keys.base_data, idx.base_data, other_k.base_data,
                                          other_i.base_data])
        keys, other_k = other_k, keys
        idx, other_i = other_i, idx
        width *= 2
    return keys, idx, lines, n, n


def _unslab(a, axis, slab, n, P):
    """The first ``n`` slots of each line of ``slab``, back in ``a``'s axis order (a new
    C-contiguous buffer of ``a``'s shape)."""
    nd = len(a.shape)
    axis %= nd
    out = _memory.empty(a.queue, a.shape, slab.dtype)
    moved = moveaxis(out, (axis,), (nd - 1,))
    lead = moved.shape[:-1]
    view = _memory.view(slab, moved.shape, tuple(c_strides(lead, P)) + (1,), 0)
    _memory.copy_into(moved, view)
    return out


def argsort(a, /, *, axis=-1, descending=False, stable=True):
    """Indices (int64) sorting ``a`` along the int ``axis`` (the stable order)."""
    if a.size == 0 or not a.shape:
        out = _memory.empty(a.queue, a.shape, _I64)
        _programs.zero_fill(a.queue, out)
        return out
    _, idx, _, n, P = _sorted_slab(a, axis, descending)
    return _unslab(a, axis, idx, n, P)


def sort(a, /, *, axis=-1, descending=False, stable=True):
    """A sorted copy of ``a`` along the int ``axis`` (order as in :func:`argsort`)."""
    if a.size == 0 or not a.shape:
        return _memory.contiguous(a) if a.size == 0 else _copy(a)
    keys, _, _, n, P = _sorted_slab(a, axis, descending)
    return _unslab(a, axis, keys, n, P)


def _copy(a):
    out = _memory.empty(a.queue, a.shape, a.dtype)
    _memory.copy_into(out, a)
    return out
