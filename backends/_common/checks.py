"""Argument checks of the kernel launchers, shared by every device backend.

A launcher is called by the front end with operands it has already validated, but also
directly (tests, benchmarks through :mod:`tessera_array.launchers`): a raw call must get
a clear error naming the launcher and the argument, never a silently wrong answer. The
checks that read only ``ndim``, ``shape``, ``dtype`` and ``strides`` (every native buffer
has them) are written once here; a backend adds what is its own (the buffer's class, one
context or device, its kernels' index types).
"""

from __future__ import annotations

import numpy as np

__all__ = ["attention_dtypes", "csr_operands", "dropout_counters", "vector_pair"]

_BOOL = np.dtype(np.bool_)


def csr_operands(func: str, data, indices, indptr, shape, x, *, numeric, index) -> tuple:
    """``(m, n)`` of a CSR matrix ``(data, indices, indptr)`` of ``shape`` times ``x``.

    ``x`` is a vector (n,) or a block (n, k) of the matrix's dtype, which must be in
    ``numeric``; ``indices``/``indptr`` 1-D of a dtype in ``index``; the three CSR arrays
    contiguous. ValueError for a shape or layout, TypeError for a dtype.
    """
    try:
        m, n = (int(s) for s in shape)
    except (TypeError, ValueError):
        raise ValueError(
            f"{func}: shape must be a pair (m, n). Received: shape={shape!r}"
        ) from None
    if data.ndim != 1 or indices.ndim != 1 or indptr.ndim != 1 \
            or data.shape != indices.shape or indptr.shape != (m + 1,):
        raise ValueError(
            f"{func}: data and indices must be 1-D of one length, indptr 1-D of m + 1. "
            f"Received: shape={shape}, data.shape={data.shape}, indices.shape={indices.shape}, "
            f"indptr.shape={indptr.shape}"
        )
    if x.ndim not in (1, 2) or x.shape[0] != n:
        raise ValueError(
            f"{func}: x must have shape ({n},) or ({n}, k). Received: shape={shape}, "
            f"x.shape={x.shape}"
        )
    if data.dtype != x.dtype or data.dtype not in numeric:
        raise TypeError(
            f"{func}: data and x must share one numeric dtype. "
            f"Received: data.dtype={data.dtype}, x.dtype={x.dtype}"
        )
    for name, a in (("indices", indices), ("indptr", indptr)):
        if a.dtype not in index:
            raise TypeError(
                f"{func}: {name} must be int32 or int64. Received: {name}.dtype={a.dtype}"
            )
    for name, a in (("data", data), ("indices", indices), ("indptr", indptr)):
        if a.size > 1 and a.strides[0] != a.dtype.itemsize:
            raise ValueError(
                f"{func}: {name} must be contiguous. Received: {name}.strides={a.strides}"
            )
    return m, n


def vector_pair(func: str, x, y, *, floating) -> None:
    """ValueError unless ``x`` and ``y`` are 1-D of one length; TypeError unless they share
    one dtype of ``floating``."""
    if x.ndim != 1 or y.ndim != 1 or x.shape != y.shape:
        raise ValueError(f"{func}: x and y must be 1-D of one length. Received: "
                         f"x.shape={x.shape}, y.shape={y.shape}")
    if x.dtype != y.dtype or x.dtype not in floating:
        raise TypeError(f"{func}: x and y must share one floating dtype (float32, float64, "
                        f"complex64, complex128). Received: x.dtype={x.dtype}, "
                        f"y.dtype={y.dtype}")


def attention_dtypes(func: str, q, k, v, mask, grads=(), *, accumulators) -> np.dtype:
    """The accumulation dtype of attention on ``q`` (``accumulators[q.dtype]``); TypeError
    unless k, v (and out, dout) have q's dtype, the mask is bool or q's dtype, and lse is
    the accumulation dtype. ``grads``: ``(out, dout, lse)`` of the backward pass."""
    acc = accumulators.get(q.dtype)
    if acc is None:
        raise TypeError(f"{func}: q must be {' or '.join(str(d) for d in accumulators)}. "
                        f"Received: q.dtype={q.dtype}")
    named = [("k", k), ("v", v)] + list(zip(("out", "dout"), grads[:2]))
    for name, a in named:
        if a.dtype != q.dtype:
            raise TypeError(f"{func}: {name} must have q's dtype. "
                            f"Received: q.dtype={q.dtype}, {name}.dtype={a.dtype}")
    if mask is not None and mask.dtype not in (_BOOL, q.dtype):
        raise TypeError(f"{func}: mask must be bool or of q's dtype. "
                        f"Received: q.dtype={q.dtype}, mask.dtype={mask.dtype}")
    if len(grads) > 2 and grads[2].dtype != acc:
        raise TypeError(f"{func}: lse must be {acc}. Received: lse.dtype={grads[2].dtype}")
    return acc


def dropout_counters(bh0: int, nbh: int, sq: int, sk: int) -> tuple:
    """``(c0, n, blocks)`` of the dropout keep mask of score rows ``bh0 .. bh0+nbh-1``: the
    first element counter, the element count and the main Philox blocks (sixteen
    elements each) they touch (see ``kernels/cuda/philox.cu``); ValueError when the
    counters would pass 2**64."""
    n = nbh * sq * sk
    c0 = bh0 * sq * sk
    if c0 + n > 1 << 64:
        raise ValueError(
            "dropout_mask: the element counters must stay below 2**64. "
            f"Received: bh0={bh0}, nbh={nbh}, Sq={sq}, Sk={sk}"
        )
    blocks = ((c0 + n - 1) >> 4) - (c0 >> 4) + 1 if n else 0
    return c0, n, blocks
