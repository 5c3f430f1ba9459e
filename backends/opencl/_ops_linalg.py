"""Native linear algebra of the OpenCL backend: ``matmul`` and ``vecdot``.

The kernel runs one work-item per output element over a broadcast stack: a plain
loop over the contracted axis (integers wrap, exactly as NumPy's loop; floating
types accumulate with fused multiply-add). For floating dtypes that order differs
from NumPy's BLAS in the last bits, and the Krylov solvers, which reproduce SciPy's
iterates bit for bit, amplify those bits near the end of a Krylov space
(tests/test_krylov.py::test_gmres_default_restart_iterates): so floating ``matmul``
and ``vecdot`` run on the host, listed, until a kernel reproduces BLAS's order.
The factorizations, solvers and norms run through the host fallback too.
"""

from __future__ import annotations

import numpy as np

from tessera_array.backends.numpy import _ops as _host_ops

from . import _kernels
from ._fallback import host_fallback
from ._ops_manipulation import expand_dims, squeeze

__all__ = ["matmul", "vecdot"]

_CT = _kernels.CTYPE
_SIGNED = {"char": "uchar", "short": "ushort", "int": "uint", "long": "ulong"}
_UNSIGNED = ("uchar", "ushort", "uint", "ulong")
_CACHE: dict = {}


def _step(t: str):
    """(accumulator type, init, step, final) of a dot product of C type ``t``."""
    if t == "bool":
        return "uchar", "0", "acc = acc | (x & y);", "acc"
    if t in _SIGNED or t in _UNSIGNED:
        u = _SIGNED.get(t, t)
        back = f"as_{t}(acc)" if t in _SIGNED else "acc"
        return u, "0", f"acc = ({u})(acc + ({u})(({u})x * ({u})y));", back
    if t in ("float2", "double2"):
        step = ("acc.x = fma(x.x, y.x, fma(-x.y, y.y, acc.x)); "
                "acc.y = fma(x.x, y.y, fma(x.y, y.x, acc.y));")
        return t, f"({t})(0, 0)", step, "acc"
    return t, "0", "acc = fma(x, y, acc);", "acc"


def _source(t: str, nb: int) -> str:
    acc_t, init, step, final = _step(t)
    ct = "uchar" if t == "bool" else t
    params = ["long n", "long M", "long N", "long K", f"__global {ct} *out",
              f"__global const {ct} *pa", "long ao", "long am", "long ak",
              f"__global const {ct} *pb", "long bo", "long bk", "long bn"]
    params += [f"long bd{k}" for k in range(nb)] + [f"long as{k}" for k in range(nb)]
    params += [f"long bs{k}" for k in range(nb)]
    body = ["  long i = get_global_id(0);", "  if (i >= n) return;",
            "  long j = i % N, r = i / N, c;", "  long row = r % M; r = r / M;",
            "  long oa = ao + row * am, ob = bo + j * bn;"]
    for k in reversed(range(nb)):
        body.append(f"  c = r % bd{k}; r = r / bd{k}; oa += c * as{k}; ob += c * bs{k};")
    body += [f"  {acc_t} acc = {init};", "  for (long q = 0; q < K; ++q) {",
             f"    {ct} x = pa[oa + q * ak];", f"    {ct} y = pb[ob + q * bk];",
             f"    {step}", "  }", f"  out[i] = {final};"]
    return (_kernels._head([ct]) + "\n__kernel void tmatmul(" + ", ".join(params)
            + ")\n{\n" + "\n".join(body) + "\n}\n")


_matmul_host = host_fallback(
    "matmul[float32, float64, complex64, complex128]", _host_ops.matmul
)


def matmul(a, b):
    """``a @ b`` for operands of one dtype (shapes already checked by the front end).

    Floating dtypes run on the host for now (see :func:`vecdot`); the kernel below
    serves booleans and integers (and floats, through :func:`matmul_native`).
    """
    if a.dtype.kind in "fc":
        return _matmul_host(a, b)
    return matmul_native(a, b)


def matmul_native(a, b):
    """``a @ b`` by the generated kernel, for every dtype."""
    drop = []
    if len(a.shape) == 1:
        a = expand_dims(a, (0,))
        drop.append(-2)
    if len(b.shape) == 1:
        b = expand_dims(b, (1,))
        drop.append(-1)
    M, K = a.shape[-2:]
    N = b.shape[-1]
    batch = _kernels.broadcast_shape((a.shape[:-2], b.shape[:-2]))
    out = _kernels.empty(a.queue, batch + (M, N), a.dtype)
    n = out.size
    if n:
        t = "bool" if a.dtype.char == "?" else _CT[a.dtype.char]
        nb = len(batch)
        key = (t, nb)
        src = _CACHE.get(key)
        if src is None:
            src = _CACHE[key] = _source(t, nb)
        knl = _kernels.kernel(a.queue.context, src, "tmatmul")
        ao, ast = _kernels.layout(a)
        bo, bst = _kernels.layout(b)
        sa = _kernels._strides_for(_batch_view(a), batch) if nb else []
        sb = _kernels._strides_for(_batch_view(b), batch) if nb else []
        args = [np.int64(v) for v in (n, M, N, K)] + [out.base_data, a.base_data]
        args += [np.int64(v) for v in (ao, ast[-2], ast[-1])] + [b.base_data]
        args += [np.int64(v) for v in (bo, bst[-2], bst[-1])]
        args += [np.int64(d) for d in batch] + [np.int64(s) for s in sa + sb]
        _kernels.launch_1d(knl, a.queue, n, args)
    if drop:
        nd = len(out.shape)
        out = squeeze(out, tuple(sorted(d % nd for d in drop)))
    return out


def _batch_view(a):
    """``a``'s leading (stack) axes as a view, for their broadcast strides."""
    off, st = _kernels.layout(a)
    return _kernels.view(a, a.shape[:-2], st[:-2], off)


_vecdot_host = host_fallback(
    "vecdot[float32, float64, complex64, complex128]", _host_ops.vecdot
)


def vecdot(a, b, axis: int = -1):
    """``sum(conj(a) * b)`` along the negative ``axis``, other axes broadcast: the
    contracted axis moved last, then a stack of (1, K) @ (K, 1) products.

    Floating dtypes run on the host: the Krylov solvers reproduce SciPy's iterates
    bit for bit only with NumPy's (BLAS) summation order, which no kernel here
    reproduces yet.
    """
    from ._ops_elementwise import conj
    from ._ops_manipulation import moveaxis

    if a.dtype.kind in "fc":
        return _vecdot_host(a, b, axis)

    if a.dtype.kind == "c":
        a = conj(a)
    a = moveaxis(a, (len(a.shape) + axis,), (len(a.shape) - 1,))
    b = moveaxis(b, (len(b.shape) + axis,), (len(b.shape) - 1,))
    r = matmul_native(expand_dims(a, (len(a.shape) - 1,)), expand_dims(b, (len(b.shape),)))
    nd = len(r.shape)
    return squeeze(r, (nd - 2, nd - 1))
