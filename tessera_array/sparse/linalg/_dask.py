"""A sparse operator over dask vectors: the rows of a ``csr_array`` in blocks, one task a
block.

The solvers of :mod:`tessera_array.sparse.linalg` take a dask ``b`` (its namespace comes
from array_api_compat) and an operator whose products are dask graphs.
:func:`row_block_operator` makes that operator from one sparse matrix: its rows cut into
the blocks of the vectors' chunks, each block a tessera ``csr_array`` (on the matrix's
device) that the product of that block reads. ``A @ v`` is then one task per block, each
taking every chunk of ``v`` at once (so an iteration's graph is shallow: every hop costs
a round trip on a distributed cluster), with the blocks computed once and kept where the
scheduler puts them (``persist``: on the workers of a distributed client).
"""

from __future__ import annotations

import numpy as np

from .._csr import _is_scipy_sparse, csr_array
from ._interface import LinearOperator

__all__ = ["row_block_operator"]


def _block_product(blocks, v):
    """The task of one row block: its csr_array (a one-element object chunk) times the
    whole vector (every chunk of ``v``, concatenated by dask)."""
    return blocks[0] @ v


def row_block_operator(A, chunks) -> LinearOperator:
    """``A`` as a LinearOperator on dask vectors chunked by ``chunks`` (row-block sizes
    summing to ``A.shape[0]``), whose ``matvec`` is one dask task per row block.

    ``A``: a square tessera ``csr_array`` (its blocks stay on its device) or a SciPy
    sparse array (its blocks go to the default device). ``matvec(v)`` takes a 1-D dask
    array of ``A.shape[1]`` elements and returns one chunked as ``chunks``, its chunks
    tessera arrays; ``rmatvec`` is the product with ``A^H`` in the same layout.
    """
    import dask.array as da

    func = "row_block_operator"
    if _is_scipy_sparse(A):
        A = csr_array(A)
    if not isinstance(A, csr_array):
        raise TypeError(f"{func}: A must be a csr_array or a SciPy sparse array. Received: "
                        f"type(A)={type(A).__name__}")
    m, n = A.shape
    if m != n:
        raise ValueError(f"{func}: A must be square. Received: A.shape={A.shape}")
    chunks = tuple(int(c) for c in chunks)
    if not chunks or any(c <= 0 for c in chunks) or sum(chunks) != m:
        raise ValueError(f"{func}: chunks must be positive row-block sizes summing to "
                         f"A.shape[0]={m}. Received: chunks={chunks}")
    bounds = np.cumsum((0,) + chunks)
    ops = {}
    for name, mat in (("A", A), ("AH", None)):
        if mat is None:
            mat = A.H
        blocks = np.empty(len(chunks), dtype=object)
        for i in range(len(chunks)):
            blocks[i] = _row_block(mat, int(bounds[i]), int(bounds[i + 1]))
        ops[name] = da.from_array(blocks, chunks=1).persist()

    def product(held, v):
        if v.ndim != 1 or v.shape[0] != n:
            raise ValueError(f"{func}: the vector must be 1-D with {n} elements. Received: "
                             f"shape {v.shape}")
        return da.blockwise(_block_product, "i", held, "i", v, "j", concatenate=True,
                            adjust_chunks={"i": chunks}, dtype=v.dtype, meta=v._meta)

    return LinearOperator((m, n), matvec=lambda v: product(ops["A"], v),
                          rmatvec=lambda v: product(ops["AH"], v), dtype=A.dtype)


def _row_block(A, lo, hi):
    """Rows ``lo:hi`` of csr_array ``A`` as a csr_array on its device."""
    start, stop = int(A.indptr[lo]), int(A.indptr[hi])  # sync: two row starts, once
    return csr_array((A.data[start:stop], A.indices[start:stop], A.indptr[lo:hi + 1] - start),
                     shape=(hi - lo, A.shape[1]), device=A.device)
