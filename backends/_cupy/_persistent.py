"""What the row-owning persistent solvers of the CuPy backend share (``gmres.py``,
``bicgstab.py``; their kernels stand on ``kernels/include/tessera/persistent.cuh``'s
RowGrid): the grid size, the kernel's arguments kept as ctypes values, the cooperative
launch through the driver, and the read of the state words through pinned memory.

Geometry (:func:`geometry`): each block owns a contiguous run of rows (their products,
updates and partial dot products), as many blocks as one pass of their warps over the
rows fills, at most ``per_sm`` per multiprocessor (fewer blocks: each reduction reads
fewer partial sums) and never more than stay resident
(``cuOccupancyMaxActiveBlocksPerMultiprocessor``: CuPy's cooperative launch would trim
the grid otherwise). The grid depends on n and the device only, so the bits of a solve
do not depend on how its iterations are split over launches.
"""

from __future__ import annotations

import ctypes

import numpy as np

__all__ = ["BLOCK", "Launch", "check_vectors", "geometry", "kernel_name", "lanes_of",
           "pinned_words", "stored_pair"]

BLOCK = 256  # threads per block (a multiple of the warp)


def _cupy():
    import cupy

    return cupy


def kernel_name(kernel: str, dtype, itype, ptype, warp: int, block: int = BLOCK) -> str:
    """The template instance ``kernel<T, I, P, WARP, BLOCK>`` of a row-owning solver for a
    solve of ``dtype`` whose CSR indices and row starts are ``itype`` / ``ptype``, with
    blocks of ``block`` threads."""
    from .cg import _INDEX
    from .matvec import CTYPE

    return (f"{kernel}<{CTYPE[np.dtype(dtype)]}, {_INDEX[np.dtype(itype)]}, "
            f"{_INDEX[np.dtype(ptype)]}, {warp}, {block}>")


def geometry(n: int, lanes: int, warp: int, sms: int, resident: int, per_sm: int,
             block: int = BLOCK) -> int:
    """Blocks of one solve: one per pass of a block's warps over rows (``block / warp``
    warps, ``warp / lanes`` rows each), at least 1, at most ``per_sm`` (and no more than
    ``resident``) per multiprocessor on ``sms`` of them."""
    rows_per_pass = (block // warp) * (warp // lanes)
    need = -(-max(n, 1) // rows_per_pass)
    return max(1, min(need, sms * min(per_sm, resident)))


class Launch:
    """One solve's kernel, grid, threads a block and arguments (ctypes values, rebound by
    index between launches), and its state words ``st`` (float64 on the device) read
    through a pinned host copy of ``words`` doubles."""

    def __init__(self, kernel, blocks: int, args: list, st, words: int, block: int = BLOCK,
                 shared: int = 0, host=None):
        self.kernel, self.blocks, self.args, self.st = kernel, blocks, args, st
        self.block = block  # threads a block
        self.shared = shared  # dynamic shared memory a block, bytes
        self.params = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
        # (host: a kept pinned copy of at least `words` doubles, from pinned_words)
        self._host = pinned_words(words) if host is None else host

    def __call__(self) -> None:
        """One cooperative launch on the current stream, through the driver (CuPy's own
        cooperative path reads every device attribute on each launch)."""
        cupy = _cupy()
        cupy.cuda.driver.launchCooperativeKernel(
            self.kernel.ptr, self.blocks, 1, 1, self.block, 1, 1, self.shared,
            cupy.cuda.get_current_stream().ptr, ctypes.addressof(self.params))

    def read(self, count: int):
        """A copy of the first ``count`` state words (``# sync``)."""
        cupy = _cupy()
        stream = cupy.cuda.get_current_stream()
        cupy.cuda.runtime.memcpyAsync(self._host.ctypes.data, self.st.data.ptr, count * 8,
                                      cupy.cuda.runtime.memcpyDeviceToHost, stream.ptr)
        stream.synchronize()
        return self._host[:count].copy()


def pinned_words(words: int):
    """A float64 array of ``words`` elements in pinned host memory (the buffer lives
    with the array)."""
    return np.frombuffer(_cupy().cuda.alloc_pinned_memory(words * 8), dtype=np.float64,
                         count=words)


def check_vectors(func: str, named: tuple, dtypes) -> None:
    """The two vectors of a fused solve (``named``: ``((name, array), (name, array))``)
    must be 1-D contiguous ``cupy.ndarray`` of one shape, one dtype of ``dtypes`` and one
    device; else TypeError / ValueError naming ``func`` and the argument."""
    cupy = _cupy()
    for name, a in named:
        if not isinstance(a, cupy.ndarray):
            raise TypeError(f"{func}: {name} must be a cupy.ndarray. Received: {name} of "
                            f"type {type(a).__name__}")
        if a.ndim != 1 or not a.flags.c_contiguous:
            raise ValueError(f"{func}: {name} must be 1-D and contiguous. Received: {name} "
                             f"of shape {a.shape}, strides {a.strides}")
    (n1, a1), (n2, a2) = named
    if a1.shape != a2.shape or a1.dtype != a2.dtype or a1.dtype not in dtypes:
        raise TypeError(f"{func}: {n1} and {n2} must share one shape and one floating dtype. "
                        f"Received: {n1} {a1.dtype}{a1.shape}, {n2} {a2.dtype}{a2.shape}")
    if a1.device.id != a2.device.id:
        raise ValueError(f"{func}: {n1} and {n2} must be on one device. Received: "
                         f"{a1.device}, {a2.device}")


def stored_pair(A, M, n, dtype, warp):
    """``(a, m, index)``: cg.py's stored forms of ``A`` and ``M`` (M's CSR indices in A's
    index types where both are CSR), and the (indices, indptr) dtypes the kernel instance
    takes; None for ``a`` where either operator is not a stored matrix of the solve's dtype
    (the caller declines)."""
    from .cg import _INT32, OP_CSR, OP_DENSE, OP_HOST, _stored

    a = _stored(A, n, dtype, warp, None)
    index = (a.idx.dtype, a.ptr.dtype) if a.kind == OP_CSR else None
    m = _stored(M, n, dtype, warp, index)
    if a.kind not in (OP_DENSE, OP_CSR) or m.kind == OP_HOST:
        return None, m, None
    if index is None and m.kind == OP_CSR:
        index = (m.idx.dtype, m.ptr.dtype)
    return a, m, index if index is not None else (_INT32, _INT32)


def lanes_of(a, m) -> int:
    """The most lanes a row of either stored operator takes (sets a pass's rows)."""
    from .cg import OP_CSR, OP_DENSE

    return max(op.lanes for op in (a, m) if op.kind in (OP_DENSE, OP_CSR))
