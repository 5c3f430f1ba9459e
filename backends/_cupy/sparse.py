"""Sparse matvec (spmv) launchers of the CuPy backend (``kernels/cuda/spmv.cu``).

``spmv*(data, indices, indptr, shape, x) -> y`` computes ``y = A @ x`` for a CSR matrix
``A`` of ``shape = (m, n)`` and a dense ``x`` of shape ``(n,)`` or ``(n, k)``, with the
NumPy backend's signature and semantics (:func:`tessera_array.backends.numpy.sparse.spmv`):
every buffer a ``cupy.ndarray`` of one device, ``data`` and ``x`` of one dtype,
``indices``/``indptr`` int32 or int64 (each on its own), ``data``/``indices``/``indptr``
contiguous, duplicates summed, columns in any order; ``x`` is read with its own strides.
``y`` is a new C-contiguous array.

Variants (the keys of :mod:`tessera_array.sparse._routing`):

``default``
    cuSPARSE, through ``cupyx.scipy.sparse.csr_matrix((data, indices, indptr)) @ x``; the
    matrix is built around the caller's buffers (no copy) where ``indices`` and ``indptr``
    are both int32. Elsewhere (int64 or mixed index types, which CuPy's constructor would
    convert, and the integer dtypes, which cuSPARSE lacks) it is the ``scalar`` kernel.
``scalar``
    CSR-scalar, one thread per row and column: each row summed in storage order from
    zero, as SciPy's ``csr_matvec`` does, so real results equal the NumPy backend's bit
    for bit.
``warp``
    CSR-vector: :func:`lanes_for` lanes per row load consecutive entries (coalesced); the
    row's first lane adds their products in storage order, so the sum is the scalar
    kernel's, bit for bit.

Floating dtypes are registered for all three variants; integer dtypes (sums wrapping as
NumPy's) for ``default`` only, as on the NumPy backend.
"""

from __future__ import annotations

import numpy as np
from tessera_array.backends._common.checks import csr_operands

from tessera_array import _dtypes

from . import _kernels
from .matvec import check_array, check_device, elem_strides, grid_blocks

__all__ = ["BLOCK", "VARIANTS", "lanes_for", "register", "spmv", "spmv_scalar", "spmv_warp"]

FILE = "spmv.cu"
VARIANTS = ("default", "scalar", "warp")
BLOCK = 128  # threads per block of both kernels
GRID_Y_MAX = 65535  # columns of x in the grid's y extent; more columns loop
MAX_LANES = 32  # at most this many lanes share one row (and at most the warp)

_INT32, _INT64 = np.dtype(np.int32), np.dtype(np.int64)
_INDEX_CTYPE = {_INT32: "int", _INT64: "long long"}
_FLOAT_NP = frozenset(np.dtype(d._np) for d in _dtypes.FLOATING)
_NUMERIC_NP = frozenset(np.dtype(d._np) for d in _dtypes.FLOATING + _dtypes.INTEGER)
CTYPE = {
    np.dtype(np.float32): "float", np.dtype(np.float64): "double",
    np.dtype(np.complex64): "tessera::cfloat", np.dtype(np.complex128): "tessera::cdouble",
    np.dtype(np.int8): "signed char", np.dtype(np.uint8): "unsigned char",
    np.dtype(np.int16): "short", np.dtype(np.uint16): "unsigned short",
    np.dtype(np.int32): "int", np.dtype(np.uint32): "unsigned int",
    np.dtype(np.int64): "long long", np.dtype(np.uint64): "unsigned long long",
}


def _check(func, data, indices, indptr, shape, x):
    for name, a in (("data", data), ("indices", indices), ("indptr", indptr), ("x", x)):
        check_array(func, name, a)
    m, n = csr_operands(func, data, indices, indptr, shape, x, numeric=_NUMERIC_NP,
                        index=_INDEX_CTYPE)
    check_device(func, {"indices": indices, "indptr": indptr, "x": x}, data.device)
    return m, n


def lanes_for(m: int, nnz: int, warp: int) -> int:
    """Lanes per row of the warp kernel: a power of two near an eighth of the mean row
    length, from 2 to ``min(MAX_LANES, warp)`` (the OpenCL vector kernel's rule, measured
    on an H200 through NVIDIA's OpenCL: backends/opencl/sparse.py)."""
    eighth = -(-nnz // (8 * max(m, 1)))
    return min(MAX_LANES, warp, max(2, 1 << max(0, eighth - 1).bit_length()))


def _result(m, x, dtype):
    """``(y, k)``: the fresh C-contiguous result (m,) or (m, k) from :func:`._kernels.empty`,
    and the number of columns k (1 for a vector x)."""
    k = 1 if x.ndim == 1 else x.shape[1]
    return _kernels.empty((m,) + x.shape[1:], dtype), k


def _launch(variant, data, indices, indptr, shape, x):
    func = "spmv"
    m, n = _check(func, data, indices, indptr, shape, x)
    device = data.device
    with device:
        y, k = _result(m, x, data.dtype)
        if m == 0 or k == 0:
            return y
        if data.size == 0 or n == 0:
            y.fill(0)
            return y
        xst = elem_strides(x)
        if xst is None:
            import cupy

            x = cupy.ascontiguousarray(x)
            xst = elem_strides(x)
        xs0, xs1 = xst[0], (xst[1] if x.ndim == 2 else 0)
        types = f"{CTYPE[data.dtype]}, {_INDEX_CTYPE[indices.dtype]}, {_INDEX_CTYPE[indptr.dtype]}"
        if variant == "warp":
            warp = _kernels.warp_size(device)
            lanes = lanes_for(m, data.size, warp)
            knl = _kernels.function(FILE, f"tessera_spmv_warp<{types}, {warp}, {lanes}>",
                                    device)
            rows = BLOCK // lanes
        else:
            knl = _kernels.function(FILE, f"tessera_spmv_scalar<{types}>", device)
            rows = BLOCK
        grid = (grid_blocks(func, m, rows), min(k, GRID_Y_MAX))
        knl(grid, (BLOCK,), (np.int64(m), np.int64(k), data, indices, indptr, x,
                             np.int64(xs0), np.int64(xs1), y))
        return y


def spmv_scalar(data, indices, indptr, shape, x):
    """y = A @ x for CSR ``A``: one thread per row (CSR-scalar)."""
    return _launch("scalar", data, indices, indptr, shape, x)


def spmv_warp(data, indices, indptr, shape, x):
    """y = A @ x for CSR ``A``: several lanes of a warp per row (CSR-vector)."""
    return _launch("warp", data, indices, indptr, shape, x)


def spmv(data, indices, indptr, shape, x):
    """y = A @ x for CSR ``A`` through cuSPARSE (``cupyx.scipy.sparse``), where it takes the
    buffers as they are; else the ``scalar`` kernel (see the module docstring)."""
    m, n = _check("spmv", data, indices, indptr, shape, x)
    if data.dtype not in _FLOAT_NP or indices.dtype != _INT32 or indptr.dtype != _INT32:
        return _launch("scalar", data, indices, indptr, shape, x)
    import cupy
    from cupyx.scipy import sparse as cusparse

    with data.device:
        k = 1 if x.ndim == 1 else x.shape[1]
        if m == 0 or k == 0 or data.size == 0 or n == 0:
            y, _ = _result(m, x, data.dtype)
            y.fill(0)
            return y
        # copy=False and int32 indices: the matrix holds the caller's buffers. A matrix out
        # of canonical order (duplicates, unsorted columns) is summed into a canonical copy
        # by CuPy, leaving the caller's buffers as they are.
        a = cusparse.csr_matrix((data, indices, indptr), shape=(m, n), copy=False)
        # sync: CuPy's product first checks the canonical format (a kernel and a host read
        # of its flag, once per call: the matrix object is not kept between calls).
        y = a @ x
        return cupy.ascontiguousarray(y)


def instances(warp: int) -> list:
    """``(file, name)`` of every kernel template instance these launchers may ask for at
    warp width ``warp`` (``.ci/compile-kernels`` compiles each)."""
    out = []
    cap = min(MAX_LANES, warp)  # lanes_for's range: the powers of two from 2 to cap
    lanes = [1 << b for b in range(1, cap.bit_length()) if 1 << b <= cap]
    for ct in CTYPE.values():
        for it in _INDEX_CTYPE.values():
            for pt in _INDEX_CTYPE.values():
                types = f"{ct}, {it}, {pt}"
                out.append((FILE, f"tessera_spmv_scalar<{types}>"))
                out += [(FILE, f"tessera_spmv_warp<{types}, {warp}, {n}>") for n in lanes]
    return out


# A csr_array's own products (``A @ x``, ``aslinearoperator(A)``) take ``warp``: cuSPARSE
# through CuPy rebuilds its matrix and checks its format on the host at every call. H200,
# ``python3 -P -m benchmarks --device cuda:0 --suite cuda_vs_peers``, Poisson float32, us:
#
#   ===========  =====================  ======  ====  =================================
#   side         default (per call)     scalar  warp  cupyx, its matrix kept (cuSPARSE)
#   ===========  =====================  ======  ====  =================================
#   1024^2       223                    20.7    27.1  37.7-45.5
#   2048^2       276                    68.8    95.1  105-114
#   ===========  =====================  ======  ====  =================================
#
# ``scalar`` is faster on these five-entry rows but takes a row per thread: ``warp``'s
# lanes grow with the mean row length (lanes_for), so it stays near the memory bound on
# long rows too.
MATMUL_ROW = {"dense": "default", "csr": "warp"}
MATMUL_MEASURED = ("H200, cuda_vs_peers, Poisson 1024^2 float32: warp 27.1 us, scalar 20.7, "
                   "default (cuSPARSE, its matrix rebuilt each call) 223")


def register(registry, backend_name: str) -> None:
    from tessera_array.sparse._routing import register_routing

    register_routing(backend_name, "matmul", MATMUL_ROW, measured=MATMUL_MEASURED,
                     replace=True)
    launchers = {"default": spmv, "scalar": spmv_scalar, "warp": spmv_warp}
    for variant in VARIANTS:
        registry.register("spmv", backend_name, _dtypes.FLOATING, launchers[variant],
                          variant=variant)
    registry.register("spmv", backend_name, _dtypes.INTEGER, spmv)
