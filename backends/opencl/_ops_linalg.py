"""Native linear algebra of the OpenCL backend: ``matmul``, ``vecdot`` and the norms.

Floating ``matmul`` runs gemm.cl: on GPUs the local-memory tile kernel, on CPU devices
a kernel that keeps a 32 x 32 tile of the result per work-item with K in cache-sized
chunks (both: broadcast batch axes, any strides, products summed k by k without fused
multiply-add, so the two agree bit for bit and with BLAS to a few ulp). A matrix times
a vector (either side) runs the matvec kernel (matvec.cl; the vector on the left reads
the matrix's transposed view), two vectors the dot kernel (dot.cl), a stack with a
vector the gemm kernel on the vector as a one-row or one-column matrix. Floating
``vecdot`` of two vectors is the dot kernel; of stacks, the conjugated products and then
their sums along the axis (the reduction kernel, one work-item per result). These sum in
the kernels' orders, not BLAS's (agreeing with NumPy to rounding); the Krylov solvers,
whose generic path needs the host BLAS's order, take it explicitly (backends/opencl/
dot.py). Booleans and integers run one generated kernel (a plain loop; integers wrap as
NumPy's do). ``vector_norm`` and ``matrix_norm`` (but its SVD-based ords) are reductions
here; the factorizations and solvers run through the host fallback.

Measured (2-core AMD EPYC, PoCL 3.0, one core: ``taskset -c 0 python -m benchmarks
--device opencl:0 --suite opencl_ops``; medians, alternating, load average ~4 from other
users): native ``matmul`` against the host path it replaced (copy to the host, NumPy's
OpenBLAS, copy back). Expected: within a few times of BLAS (no FMA,
no packing); the first version, the GPU tile kernel on PoCL, took 785 ms for float32
512 x 512 (PoCL serialises its 256-item work-groups around every barrier), which the
CPU tile kernel replaced.

    =========  =======  ==========  =============  =====
    dtype      n x n    native ms   host path ms   ratio
    =========  =======  ==========  =============  =====
    float32    16       0.385       0.334          0.87x
    float32    64       0.416       0.325          0.78x
    float32    256      4.755       1.100          0.23x
    float32    512      32.87       5.575          0.17x
    float64    16       0.305       0.293          0.96x
    float64    64       0.365       0.273          0.75x
    float64    256      8.216       1.927          0.23x
    float64    512      41.80       14.16          0.34x
    =========  =======  ==========  =============  =====

On PoCL the "device" is the host's own CPU, where OpenBLAS (FMA, packed panels) wins;
the point of the native kernel is that on a GPU no product goes through the host.
"""

from __future__ import annotations

import math

import numpy as np
from tessera_array.backends._common import broadcast_shape as _broadcast_shape
from tessera_array.backends._common import from_text, memo
from tessera_array.backends.numpy import _ops as _host_ops

from . import _compile, _generate, _kernels, _memory, _programs
from . import dot as _dot
from . import matvec as _matvec
from ._fallback import host_fallback
from ._ops_manipulation import broadcast_to, expand_dims, moveaxis, squeeze

__all__ = ["matmul", "matrix_norm", "vecdot", "vector_norm"]

_CT = _generate.CTYPE
_SIGNED = {"char": "uchar", "short": "ushort", "int": "uint", "long": "ulong"}
_sources = memo("opencl.linalg.int_matmul_sources")  # (C type, batch axes) -> KernelSource


def _step(t: str):
    """(accumulator type, init, step, final) of a dot product of integer C type ``t``."""
    if t == "bool":
        return "uchar", "0", "acc = acc | (x & y);", "acc"
    u = _SIGNED.get(t, t)
    back = f"as_{t}(acc)" if t in _SIGNED else "acc"
    return u, "0", f"acc = ({u})(acc + ({u})(({u})x * ({u})y));", back


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
    return (_generate.head([ct]) + "\n__kernel void tmatmul(" + ", ".join(params)
            + ")\n{\n" + "\n".join(body) + "\n}\n")


def _options(func, a):
    """(context, ``-D`` options) of gemm.cl for ``a``'s dtype and device."""
    ctx = a.queue.context
    key = (ctx, a.dtype.char)
    hit = _OPTS.get(key)
    if hit is None:
        hit = _OPTS[key] = _programs.dtype_options(func, a.dtype, a.queue.device)
    return ctx, hit


_OPTS = memo("opencl.linalg.gemm_options")  # (context, dtype char) -> gemm.cl's -D options
_MAXB = 4  # batch axes the gemm.cl kernels index (more are collapsed by a copy first)


def _batch_args(batch, views):
    """(the 4 batch dims, each operand's 4 batch strides) for the kernels: up to
    :data:`_MAXB` broadcast batch axes, padded with size-1 axes in front."""
    pad = _MAXB - len(batch)
    dims = [1] * pad + list(batch)
    out = []
    for v in views:
        st = _memory.strides_for(v, batch) if batch else []
        out.append([0] * pad + list(st))
    return dims, out


def _collapse(a, batch, tail: int):
    """``a`` broadcast to ``batch`` + its last ``tail`` axes and copied C-contiguous, as a
    (prod(batch), ...) buffer: for stacks of more than :data:`_MAXB` batch axes."""
    shape = tuple(batch) + tuple(a.shape[len(a.shape) - tail:])
    out = _memory.empty(a.queue, shape, a.dtype)
    _memory.copy_into(out, broadcast_to(a, shape))
    z = 1
    for d in batch:
        z *= d
    return out.reshape((z,) + shape[len(batch):])


def matmul(a, b):
    """``a @ b`` for operands of one dtype (shapes already checked by the front end):
    floating dtypes by gemm.cl's tiled kernel, booleans and integers by a generated one."""
    if a.dtype.kind not in "fc":
        return matmul_native(a, b)
    na, nb = len(a.shape), len(b.shape)
    if na == 1 or nb == 1:
        if na == 1 and nb == 1:
            return _dot.dot(a, b)
        if nb == 1 and na == 2:
            return _matvec.dense_matvec(a, b)
        if na == 1 and nb == 2:
            return _matvec.dense_matvec(b.transpose(), a)
        # a stack with a vector: the vector as a (1, K) or (K, 1) matrix, that axis dropped
        out = matmul(expand_dims(a, (0,)) if na == 1 else a,
                     expand_dims(b, (1,)) if nb == 1 else b)
        nd = len(out.shape)
        return squeeze(out, (nd - 2,) if na == 1 else (nd - 1,))
    batch = _broadcast_shape((a.shape[:-2], b.shape[:-2]))
    out = _memory.empty(a.queue, batch + (a.shape[-2], b.shape[-1]), a.dtype)
    return gemm_into(out, a, b, accumulate=False)


def gemm_into(out, a, b, *, accumulate: bool):
    """``out = a @ b`` (``out += a @ b`` with ``accumulate``: gemm.cl's epilogue adds the
    products to what ``out`` holds) for floating ``a (..., M, K)``, ``b (..., K, N)`` and
    a fresh C-contiguous ``out`` of their broadcast shape; returns ``out``."""
    M, K = a.shape[-2:]
    N = b.shape[-1]
    batch = tuple(out.shape[:-2])
    if out.size:
        if len(batch) > _MAXB:
            a, b = _collapse(a, batch, 2), _collapse(b, batch, 2)
            zb = (a.shape[0],)
        else:
            zb = batch
        ctx, opts = _options("matmul", a)
        if accumulate:
            opts = opts + ("-DTESSERA_GEMM_ACCUMULATE",)
        ao, ast = _memory.layout(a)
        bo, bst = _memory.layout(b)
        dims, (sa, sb) = _batch_args(zb, (_batch_view(a), _batch_view(b)))
        z = out.size // (M * N)
        args = (M, N, K, out.base_data, a.base_data, ao, ast[-2], ast[-1], b.base_data, bo,
                bst[-2], bst[-1], *dims[1:], *sa, *sb)
        if not K:
            if not accumulate:
                _programs.zero_fill(a.queue, out)
        elif _programs.is_cpu(a.queue.device):
            knl = _programs.kernel(ctx, "gemm.cl", opts, "tessera_gemm_block")
            knl(a.queue, (-(-N // _TILE), -(-M // _TILE), z), (1, 1, 1), *args)
        else:
            knl = _programs.kernel(ctx, "gemm.cl", opts, "tessera_gemm")
            knl(a.queue, (-(-N // _TS) * _TS, -(-M // _TS) * _TS, z), (_TS, _TS, 1), *args)
    return out


_TS = 16  # gemm.cl's tile (its default TS)
_TILE = 32  # gemm.cl's tessera_gemm_block: a 32 x 32 tile of C per work-item (TI, TJ)


def matmul_native(a, b):
    """``a @ b`` by the generated kernel, for booleans and integers."""
    drop = []
    if len(a.shape) == 1:
        a = expand_dims(a, (0,))
        drop.append(-2)
    if len(b.shape) == 1:
        b = expand_dims(b, (1,))
        drop.append(-1)
    M, K = a.shape[-2:]
    N = b.shape[-1]
    batch = _broadcast_shape((a.shape[:-2], b.shape[:-2]))
    out = _memory.empty(a.queue, batch + (M, N), a.dtype)
    n = out.size
    if n:
        t = "bool" if a.dtype.char == "?" else _CT[a.dtype.char]
        nb = len(batch)
        key = (t, nb)
        src = _sources.get(key)
        if src is None:
            src = _sources[key] = from_text(_source(t, nb))
        knl = _compile.generated_kernel(a.queue.context, src, "tmatmul")
        ao, ast = _memory.layout(a)
        bo, bst = _memory.layout(b)
        sa = _memory.strides_for(_batch_view(a), batch) if nb else []
        sb = _memory.strides_for(_batch_view(b), batch) if nb else []
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
    off, st = _memory.layout(a)
    return _memory.view(a, a.shape[:-2], st[:-2], off)


def vecdot(a, b, axis: int = -1):
    """``sum(conj(a) * b)`` along the negative ``axis``, other axes broadcast.

    Floating dtypes: the dot kernel for two vectors, else products and sums (see the
    module docstring); booleans and integers as a stack of (1, K) @ (K, 1) products of
    the generated matmul kernel.
    """
    if a.dtype.kind in "fc":
        if len(a.shape) == 1 and len(b.shape) == 1:
            return _dot.dot(a, b, conj=True)
        # A stack: the products, then their sums along the axis (one work-item each).
        from ._ops_elementwise import conj, multiply
        from ._ops_reductions import sum as _sum

        return _sum(multiply(conj(a) if a.dtype.kind == "c" else a, b), axis=axis)
    a = moveaxis(a, (len(a.shape) + axis,), (len(a.shape) - 1,))
    b = moveaxis(b, (len(b.shape) + axis,), (len(b.shape) - 1,))
    r = matmul_native(expand_dims(a, (len(a.shape) - 1,)), expand_dims(b, (len(b.shape),)))
    nd = len(r.shape)
    return squeeze(r, (nd - 2, nd - 1))


# ---- norms ---------------------------------------------------------------------------------

# OpenCL element type -> its real component type (the norms' result type).
_REAL = {t: r for t, r, _, _ in _programs.CL_TYPES.values()}


def _has_fp64(a) -> bool:
    dev = _memory.QUEUE_DEVICE[a.queue]
    return dev._backend.capabilities(dev)["float64"]


def _norm_reduce(a, axes, keepdims, acc, init, step, final="acc", decl="", merge="acc += v;"):
    """A reduction of ``a`` over ``axes`` (None: all) with a real result (``keepdims``
    as NumPy's): ``v`` is the element, ``t`` its magnitude (declared by the step)."""
    nd = len(a.shape)
    axes = tuple(range(nd)) if axes is None else tuple(sorted(axes))
    t = _generate.CTYPE[a.dtype.char]
    r = _REAL[t]
    if not axes:  # nothing reduced: each element is its own reduction
        src = _memory.contiguous(a).reshape(a.shape + (1,))
        return _kernels.launch_reduce(src, (nd,), r, acc, init, step, final, decl=decl)
    out = _kernels.launch_reduce(a, axes, r, acc, init, step, final, decl=decl, merge=merge)
    if keepdims:
        out = out.reshape(tuple(1 if d in axes else n for d, n in enumerate(a.shape)))
    return out


def _mag(a) -> str:
    """The C statement declaring ``t = |v|`` for ``a``'s element type."""
    t = _generate.CTYPE[a.dtype.char]
    r = _REAL[t]
    return f"{r} t = hypot(v.x, v.y);" if t in ("float2", "double2") else f"{r} t = fabs(v);"


def _two_norm(a, axes, keepdims):
    """``sqrt(sum |v|**2)``: float32 data sums squares in float64 where the device has it
    (no overflow or underflow is possible there); float64 data runs LAPACK's scaled
    sum (scale = the largest |v| so far, ssq = sum (|v| / scale)**2), so no square
    overflows or underflows; NaN and inf propagate as in NumPy."""
    t = _generate.CTYPE[a.dtype.char]
    r = _REAL[t]
    if r == "float" and _has_fp64(a):
        if t == "float2":
            step = "acc += (double)v.x * (double)v.x + (double)v.y * (double)v.y;"
        else:
            step = "acc += (double)v * (double)v;"
        return _norm_reduce(a, axes, keepdims, "double", "0", step, "(float)sqrt(acc)")
    red = range(len(a.shape)) if axes is None else axes
    m = math.prod(a.shape[d] for d in red)
    n_out = math.prod(n for d, n in enumerate(a.shape) if d not in red)
    if _kernels.split_parts(a.queue, n_out, m) > 1:
        # Few long walks: LAPACK's scaled sum has two accumulators and no split; the
        # p-norm's (the largest |v| first, then sum (|v| / max)**2) splits both passes.
        return _p_norm(a, axes, keepdims, 2.0, r, r)
    step = (_mag(a) + f" if (t != 0 || isnan(t)) {{ if (scale < t) {{ {r} q = scale / t; "
            f"acc = 1 + acc * (q * q); scale = t; }} else {{ {r} q = t / scale; "
            f"acc += q * q; }} }}")
    return _norm_reduce(a, axes, keepdims, r, "0", step, "scale * sqrt(acc)",
                        decl=f"{r} scale = 0;")


def vector_norm(a, axis=None, keepdims: bool = False, ord=2):
    """The ``ord``-norm over ``axis`` (None or a tuple of non-negative ints); real result."""
    t = _generate.CTYPE[a.dtype.char]
    r = _REAL[t]
    wide = "double" if r == "float" and _has_fp64(a) else r
    if ord == 2:
        return _two_norm(a, axis, keepdims)
    if ord == 1:
        return _norm_reduce(a, axis, keepdims, wide, "0", _mag(a) + " acc += t;",
                            f"({r})acc")
    if ord == math.inf or ord == -math.inf:
        cmp = ">" if ord > 0 else "<"
        init = "0" if ord > 0 else "INFINITY"
        test = f"if (isnan(t) || (t {cmp} acc && !isnan(acc))) acc = t;"
        return _norm_reduce(a, axis, keepdims, r, init, _mag(a) + " " + test,
                            merge=f"{{ {r} t = v; {test} }}")
    if ord == 0:
        test = "(v.x != 0 || v.y != 0)" if t in ("float2", "double2") else "(v != 0)"
        return _norm_reduce(a, axis, keepdims, r, "0", f"acc += {test} ? 1 : 0;")
    return _p_norm(a, axis, keepdims, float(ord), r, wide)


def _p_norm(a, axis, keepdims, p, r, wide):
    """``sum(|v|**p)**(1/p)`` scaled so that no power overflows or underflows: by
    ``max |v|`` for p > 0 (as the NumPy backend does), by ``min |v|`` for p < 0 (every
    scaled power is then at most 1), where that is positive and finite; a max or min,
    a map, a sum and a final map."""
    pw = f"({r}){p!r}"
    ext = vector_norm(a, axis, True, math.inf if p > 0 else -math.inf)
    # scale: the extreme where it is positive and finite, else 1
    scale = _kernels.launch_map(a.queue, "(a0 > 0 && isfinite(a0)) ? a0 : 1", None, [ext], r,
                                shape=ext.shape)
    if a.dtype.kind == "c":
        absa = _kernels.launch_map(a.queue, "hypot(a0.x, a0.y)", None, [a], r, shape=a.shape)
    else:
        absa = _kernels.launch_map(a.queue, "fabs(a0)", None, [a], r, shape=a.shape)
    powed = _kernels.launch_map(a.queue, f"pow(a0 / a1, {pw})", None, [absa, scale], r,
                                shape=a.shape)
    total = _norm_reduce(powed, axis, True, wide, "0", "acc += v;", f"({r})acc")
    # p > 0: an infinite or NaN max is the norm (NumPy backend); p < 0: the unscaled
    # formula already gives 0 for a zero element, NaN for a NaN and inf for all-inf.
    final = f"isfinite(a2) ? pow(a0, 1 / {pw}) * a1 : a2" if p > 0 else \
        f"pow(a0, 1 / {pw}) * a1"
    out = _kernels.launch_map(a.queue, final, None, [total, scale, ext], r, shape=total.shape)
    if not keepdims:
        nd = len(a.shape)
        axes = range(nd) if axis is None else axis
        out = out.reshape(tuple(n for d, n in enumerate(a.shape) if d not in axes))
    return out


_matrix_norm_host = host_fallback("matrix_norm['nuc', 2, -2: SVD]", _host_ops.matrix_norm)


def matrix_norm(a, keepdims: bool = False, ord="fro"):
    """The ``ord`` norm of each matrix; ``'nuc'``, 2 and -2 (singular values) run on
    the host. An empty matrix has norm 0 for every ``ord``."""
    nd = len(a.shape)
    if ord in ("nuc", 2, -2):
        return _matrix_norm_host(a, keepdims, ord)
    m, n = a.shape[-2:]
    r = _REAL[_generate.CTYPE[a.dtype.char]]
    if m == 0 or n == 0:
        out = _memory.empty(a.queue, a.shape[:-2] + ((1, 1) if keepdims else ()),
                             _generate.NP_OF[r])
        _programs.zero_fill(a.queue, out)
        return out
    if ord == "fro":
        out = _two_norm(a, (nd - 2, nd - 1), False)
    else:
        inner = nd - 2 if ord in (1, -1) else nd - 1
        sums = vector_norm(a, (inner,), False, 1)
        out = vector_norm(sums, (nd - 2,), False, math.inf if ord > 0 else -math.inf)
    if keepdims:
        out = out.reshape(out.shape + (1, 1))
    return out
