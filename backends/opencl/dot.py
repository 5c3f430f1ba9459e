"""Dot products of the OpenCL backend (``kernels/opencl/dot.cl``), and the registered
``vecdot`` / ``vecmat`` ops of the ``matvec`` family.

``dot(x, y, conj=False)`` returns a new 0-d ``pyopencl.array.Array`` holding
``sum(c(x) * y)`` (``c`` = conj when ``conj``) for 1-D ``x`` and ``y`` of one floating
dtype, length and context, any strides and offsets: two launches (partial sums, then
their sum in index order; see ``dot.cl``), no host sync. The namespace's ``vecdot`` of two
vectors and ``matmul`` of two vectors are this kernel.

Registered ops (what the Krylov solvers' generic path calls, through the registry):

``vecdot(x, y)``
    ``conj(x) . y`` of two vectors (0-d result).
``vecmat(x, a)``
    ``conj(x) @ a`` for a vector ``x`` (k,) and a matrix ``a`` (k, n) (NumPy's
    ``vecmat``): the matvec kernel on ``a``'s transposed view (no copy).

Each in two variants: ``default``, the device's kernels above, and ``blas``, which runs
on the host in the order of the host's BLAS (``ddot``/``zdotc``/``dgemv``, through the
NumPy backend's ``vecdot`` and ``matmul``), listed as the host fallbacks ``kernel
vecdot[blas]`` and ``kernel vecmat[blas]``, which copy the operands in and the result
back and nothing else. The solvers' generic path takes ``default`` (dot products on the
device, in its order); ``products="blas"`` takes ``blas``, so that iterates equal SciPy's
bit for bit, which a device kernel cannot promise (OpenBLAS picks its summation order per
CPU, and near an exhausted Krylov space one ulp grows to 1e-6:
``tests/test_krylov.py::test_gmres_default_restart_iterates``). Where host fallbacks are
refused (``TESSERA_HOST_FALLBACK=error``) that request raises HostFallbackError.
"""

from __future__ import annotations

import numpy as np
from tessera_array.backends._common import memo
from tessera_array.backends._common.checks import vector_pair
from tessera_array.backends.numpy import matvec as _host_matvec

from tessera_array import _dtypes

from . import _memory, _programs
from ._fallback import host_fallback

__all__ = ["PMAX", "WG_MAX", "dot", "register", "vecmat"]

FILE = "dot.cl"
PMAX = 256  # the most partial sums of one dot product
WG_MAX = 256  # work-group size on GPUs (a power of two, clamped to the device's)
_FLOAT_NP = frozenset(np.dtype(d._np) for d in _dtypes.FLOATING)
_setup = memo("opencl.dot.setup")  # (context, dtype) -> GroupSetup of (part, sum kernels)


def _kernels_for(context, dtype):
    hit = _setup.get((context, dtype))
    if hit is None:
        hit = _setup[(context, dtype)] = _programs.group_kernels(
            "vecdot", context, dtype, FILE, ("tessera_dot_part", "tessera_dot_sum"), WG_MAX)
    return hit


def _check(func, x, y):
    _memory.check_array(func, "x", x)
    _memory.check_array(func, "y", y)
    vector_pair(func, x, y, floating=_FLOAT_NP)
    if x.context != y.context:
        raise ValueError(f"{func}: x and y must be in one OpenCL context. Received: two "
                         "contexts")


def dot(x, y, conj=False):
    """``sum(conj(x) * y)`` (``conj``) or ``sum(x * y)`` of two vectors: a new 0-d array
    on ``x``'s queue (see the module docstring)."""
    _check("vecdot", x, y)
    queue = _memory.queue_of("vecdot", x)
    out = _memory.empty(queue, (), x.dtype)
    n = x.shape[0]
    if n == 0:
        _programs.zero_fill(queue, out)
        return out
    (part_k, sum_k), wg, cpu, units = _kernels_for(x.context, x.dtype)
    chunk, parts, gsize = _programs.group_geometry(n, wg, cpu, units, PMAX)
    part = _memory.empty(queue, (parts,), x.dtype)
    xo, (xs,) = _memory.layout(x)
    yo, (ys,) = _memory.layout(y)
    wait = [e for v in (x, y) if v.queue is not queue for e in v.events] or None
    evt = part_k(queue, (gsize,), (wg,), np.int64(n), np.int64(chunk),
                 np.int32(1 if conj and x.dtype.kind == "c" else 0), x.base_data,
                 np.int64(xo), np.int64(xs), y.base_data, np.int64(yo), np.int64(ys),
                 part.base_data, wait_for=wait)
    part.add_event(evt)
    evt = sum_k(queue, (1,), (1,), np.int32(parts), part.base_data, out.base_data,
                np.int64(out.offset // out.dtype.itemsize), wait_for=[evt])
    out.add_event(evt)
    return out


def vecmat(x, a):
    """``conj(x) @ a`` for a vector ``x`` (k,) and a matrix ``a`` (k, n): the matvec
    kernel on ``a``'s transposed view."""
    from . import matvec
    from ._ops_elementwise import conj as _conj

    _memory.check_array("vecmat", "x", x)
    _memory.check_array("vecmat", "a", a)
    if x.ndim != 1 or a.ndim != 2 or a.shape[0] != x.shape[0]:
        raise ValueError(f"vecmat: x must be 1-D (k,) and a 2-D (k, n). Received: "
                         f"x.shape={x.shape}, a.shape={a.shape}")
    if x.dtype.kind == "c":
        x = _conj(x)
    return matvec.dense_matvec(a.transpose(), x)


def _vecdot_op(x, y):
    return dot(x, y, conj=True)


# The "blas" variants: the NumPy backend's products through the host fallback, listed.
# They write no operand, so the fallback copies the operands in and the result back and
# nothing else (the generic registration of host kernels snapshots and compares every
# operand for writes: 2-3x the cost of a Krylov iteration's dot products on a GPU).
_vecdot_blas = host_fallback("kernel vecdot[blas]", _host_matvec.vecdot)
_vecmat_blas = host_fallback("kernel vecmat[blas]", _host_matvec.vecmat)


def register(registry, backend_name: str) -> None:
    registry.register("vecdot", backend_name, _dtypes.FLOATING, _vecdot_op)
    registry.register("vecmat", backend_name, _dtypes.FLOATING, vecmat)
    registry.register("vecdot", backend_name, _dtypes.FLOATING, _vecdot_blas, variant="blas")
    registry.register("vecmat", backend_name, _dtypes.FLOATING, _vecmat_blas, variant="blas")
