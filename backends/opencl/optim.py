"""Optimizer-step launchers of the OpenCL backend (``kernels/opencl/optim.cl``).

The NumPy backend's launchers (:mod:`tessera_array.backends.numpy.optim`), same
signatures and semantics, on ``pyopencl.array.Array`` buffers: lists of parameters,
gradients and state (contiguous, one context), Python-float hyperparameters resolved
on the host by the front end; the parameters and state are updated in place and
``()`` is returned. With ``check_finite=True`` the gradients are read first (one
kernel per gradient, one read-back: ``# sync``) and, if any holds NaN/inf, nothing
is updated and their indices are returned.

SGD and Adam/AdamW run one fused kernel per tensor (every pass of the NumPy update in
one read and one write of each buffer), in the NumPy launcher's order of operations,
with the hyperparameters rounded to the parameters' dtype on the host as NumPy
rounds them: float32 results equal the NumPy backend's to the bit where the device
has correctly rounded divide/sqrt (PoCL does; see :mod:`._programs`), else within a
few ulp. Adafactor needs two whole-tensor sums (RMS of ``p`` and of the update
``U``) before it can update, and OpenCL has no grid-wide barrier: it launches the
moment updates and partial sums for every tensor, reads the partial sums back once
(``# sync``), computes each tensor's ``alpha / max(1, RMS(U)/d)`` on the host in
double as the NumPy launcher does, then launches one update kernel per tensor.

On CPU devices each work-item takes a contiguous chunk (see ``_geom``), and each
combination of the update's switches is its own program (``-DFLAGS``), so the element
loops vectorize; the kernels call no library function inside a loop (PoCL 3.0 calls
``min`` out of line). NumPy launcher time / ours, 10 tensors of 1M float32 (Adafactor:
10 x 1000^2), PoCL 3.0 on a shared 2-core EPYC, four runs:

    SGD 1.64-1.92, Adam 2.92-3.31, AdamW 2.83-3.28, Adafactor 1.57-1.96
    with check_finite: SGD 1.63-1.90, Adam 2.67-3.14, AdamW 2.41-3.11

Host cost per call: the kernels are kept per (context, dtype, name, flags) and the
elementwise geometry per element count (``_setup``), so a call makes no device query
and builds no option tuple; buffers whose offset is 0 pass one kept ``np.int64(0)``.
The checks first run as attribute tests (:func:`_plain`: the class itself, the same
dtype object, the context, ``flags.c_contiguous``, the gradients' shapes); only a call
that fails them runs the itemized checks, which raise the same errors. That cut the
launchers' own Python to 0.15-0.19x (SGD/Adam/AdamW over 10 tensors: 18-45 us a call).
The front end reaches them through ``_kernels.contiguous_operands`` (the registry's
adapter for in-place launchers), which adds about 25 us per 10-tensor call.

Registered for float32 and float64 (float64 only with ``cl_khr_fp64``). The runs behind
these figures: benchmarks/NOTES.md.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from tessera_array.backends._common import memo
from tessera_array.backends._common.optim import adam_launchers

from tessera_array import _dtypes

from . import _launch, _memory, _programs

__all__ = ["adafactor_step", "adam_step", "adamw_step", "nonfinite", "register", "sgd_step"]

FILE = "optim.cl"
# Work-group size of the elementwise and partial-sum kernels on GPUs (CPU devices use
# groups of one). NVIDIA H200, NVIDIA OpenCL 580.159.04, an SGD-momentum kernel over 16M
# float32 (profiling events, median of 30): groups of 64 0.158 ms (2.0 TB/s), 256 0.100 ms
# (3.2 TB/s), 1024 0.110 ms; float4 loads 0.081 ms at any size (3.9 TB/s).
WG = 256
SUM_GROUPS = 32  # partial sums per tensor in Adafactor's reductions

# Launch flags; the same bits as in optim.cl.
F_MAXIMIZE, F_WEIGHT_DECAY, F_MOMENTUM, F_FIRST = 1, 2, 4, 8
F_NESTEROV, F_DECOUPLED, F_AMSGRAD, F_FACTORED, F_LERP_HIGH = 16, 32, 64, 128, 256

_FLOAT_NP = frozenset((np.dtype(np.float32), np.dtype(np.float64)))
_INT32 = np.dtype(np.int32)
# (context, dtype) -> _Setup; (context, dtype, kernel name, flags) -> _StepKernel
_setup = memo("opencl.optim.setup")


class _StepKernel(NamedTuple):
    """An optimizer kernel and its launch facts."""

    kernel: object  # the pyopencl.Kernel (built for one F_* mask, or for any)
    wg: int  # work-group size: 1 on CPU devices
    cpu: bool  # a CPU device: each work-item takes a contiguous chunk


class _Setup:
    """What the launches of one (context, dtype) reuse: program options, work-group
    size, CPU device?, and the elementwise geometry per element count."""

    __slots__ = ("cpu", "geoms", "opts", "wg")

    def __init__(self, opts, wg, cpu):
        self.opts, self.wg, self.cpu, self.geoms = opts, wg, cpu, {}


def _setup_of(func, context, dtype):
    st = _setup.get((context, dtype))
    if st is None:
        dev = context.devices[0]
        cpu = _programs.is_cpu(dev)
        wg = 1 if cpu else min(WG, dev.max_work_group_size)
        wg = 1 << (wg.bit_length() - 1)
        opts = _programs.dtype_options(func, dtype, dev, extra=(f"-DWG={wg}",)
                                       + _programs.probe_options(context))
        st = _setup[(context, dtype)] = _Setup(opts, wg, cpu)
    return st


def _kernel(func, context, dtype, name, flags=None) -> _StepKernel:
    """The kernel ``name`` and its launch facts; CPU devices get work-groups of one.

    ``flags`` (the launch's F_* mask) builds the program with ``-DFLAGS=<mask>``, so
    the kernel's branches on it are resolved at compile time (one program per mask
    in use; see optim.cl).
    """
    key = (context, dtype, name, flags)
    hit = _setup.get(key)
    if hit is None:
        st = _setup_of(func, context, dtype)
        opts = st.opts if flags is None else st.opts + (f"-DFLAGS={flags}",)
        hit = _setup[key] = _StepKernel(_programs.kernel(context, FILE, opts, name), st.wg,
                                        st.cpu)
    return hit


def _geoms(func, context, dtype):
    """The ``{n: (global, local, n, bmul, step, cnt)}`` cache of (context, dtype): the
    leading arguments of an elementwise launch over ``n`` elements (:func:`_geom_of`)."""
    return _setup_of(func, context, dtype).geoms


def _geom_of(geoms, n, wg, cpu, context):
    geo = geoms.get(n)
    if geo is None:
        if len(geoms) >= _launch.PLANS_MAX:
            geoms.clear()
        gs, ls, *chunk = _geom(n, wg, cpu, context)
        geo = geoms[n] = (gs, ls, np.int64(n), *chunk)
    return geo


def _geom(n, wg, cpu, context):
    """``(global, local, bmul, step, cnt)`` of an elementwise launch over ``n`` elements.

    GPUs: one element per work-item. CPU devices: a contiguous chunk per work-item
    (measured on PoCL 3.0, 2-core EPYC, SGD over 4 x 1M float32, NumPy launcher / ours:
    one element per work-item 0.58-0.62x for work-groups of 64 to 4096, a grid-stride
    loop 0.08-0.33x, a contiguous chunk per work-item 1.6-2.0x).
    """
    if cpu:
        per = _programs.rows_per_item(n, context.devices[0])[0]
        return (-(-n // per),), (1,), np.int64(per), np.int64(1), np.int64(per)
    one = np.int64(1)
    return (-(-n // wg) * wg,), (wg,), one, one, one


def _rgeom(n, wg, cpu, context):
    """``(global, local, bmul, step, cnt)`` of a partial-sum launch: at most SUM_GROUPS
    partial sums (work-groups on GPUs, chunks of work-groups of one on CPU devices)."""
    if cpu:
        per = max(_programs.rows_per_item(n, context.devices[0])[0], -(-n // SUM_GROUPS))
        return (-(-n // per),), (1,), np.int64(per), np.int64(1), np.int64(per)
    groups = min(SUM_GROUPS, max(1, -(-n // wg)))
    gsize = groups * wg
    return (gsize,), (wg,), np.int64(1), np.int64(gsize), np.int64(-(-n // gsize))


def _off(a):
    return np.int64(a.offset // a.dtype.itemsize)


def _check(func, params, grads, states):
    """TypeError/ValueError for buffers the kernels cannot take; returns (queue, dtype).

    A call whose buffers all pass the cheap attribute test of :func:`_plain` (pyopencl
    arrays of one dtype and context, contiguous, grads shaped as their parameters) skips
    the itemized checks, which then run only to name what is wrong."""
    p0 = params[0]
    if p0.__class__ is _memory.NATIVE and _plain(params, grads, states, p0):
        q = p0.queue
        return (q if q is not None else _memory.queue_of(func, p0)), p0.dtype
    _memory.check_array(func, "params[0]", p0)
    dtype, ctx = p0.dtype, p0.context
    if dtype not in _FLOAT_NP:
        raise TypeError(f"{func}: parameters must be float32 or float64. "
                        f"Received: params[0].dtype={dtype}")
    lists = (("params", params), ("grads", grads)) + tuple(states)
    for name, lst in lists:
        if lst is None:
            continue
        if len(lst) != len(params):
            raise ValueError(f"{func}: {name} must have one entry per parameter. "
                             f"Received: len(params)={len(params)}, len({name})={len(lst)}")
        for i, a in enumerate(lst):
            if a is None:
                continue
            _memory.check_array(func, f"{name}[{i}]", a)
            if a.dtype != dtype:
                raise TypeError(f"{func}: {name}[{i}] must have the parameters' dtype. "
                                f"Received: params[0].dtype={dtype}, {name}[{i}].dtype={a.dtype}")
            if a.context != ctx:
                raise ValueError(f"{func}: every buffer must be in one OpenCL context. "
                                 f"Received: {name}[{i}] in another context")
            if not a.flags.c_contiguous:
                raise ValueError(f"{func}: {name}[{i}] must be contiguous. "
                                 f"Received: {name}[{i}].strides={a.strides}")
    for i, (p, g) in enumerate(zip(params, grads)):
        if g.shape != p.shape:
            raise ValueError(f"{func}: grads[{i}] must have its parameter's shape. "
                             f"Received: params[{i}].shape={p.shape}, grads[{i}].shape={g.shape}")
    return _memory.queue_of(func, p0), dtype


def _plain(params, grads, states, p0) -> bool:
    """True when every buffer is a ``pyopencl.array.Array`` (the class itself) of
    ``p0``'s dtype (the same dtype object) and context, C-contiguous, every list as long
    as ``params`` and each gradient of its parameter's shape: what :func:`_check`
    itemizes, by attribute tests only. False sends the call to the itemized checks."""
    cls, dtype, ctx = p0.__class__, p0.dtype, p0.context
    if dtype not in _FLOAT_NP:
        return False
    n = len(params)
    if len(grads) != n:
        return False
    for p, g in zip(params, grads):
        if p.__class__ is not cls or g.__class__ is not cls or p.dtype is not dtype \
                or g.dtype is not dtype or p.shape != g.shape \
                or (p.context is not ctx and p.context != ctx) \
                or (g.context is not ctx and g.context != ctx) \
                or not p.flags.c_contiguous or not g.flags.c_contiguous:
            return False
    for _, lst in states:
        if lst is None:
            continue
        if len(lst) != n:
            return False
        for a in lst:
            if a is not None and (a.__class__ is not cls or a.dtype is not dtype
                                  or (a.context is not ctx and a.context != ctx)
                                  or not a.flags.c_contiguous):
                return False
    return True


def _gsize(n, wg):
    return (-(-n // wg) * wg,)


def nonfinite(grads) -> tuple:
    """Indices of the gradients holding a NaN or an inf (one read-back, ``# sync``)."""
    g0 = grads[0]
    queue = _memory.queue_of("nonfinite", g0)
    ctx = g0.context
    knl, wg, cpu = _kernel("nonfinite", ctx, g0.dtype, "tessera_nonfinite")
    geoms = _geoms("nonfinite", ctx, g0.dtype)
    nt = len(grads)
    flags = _memory.fresh(queue, ctx, (nt,), (4,), nt, _INT32, g0.allocator)
    _programs.zero_fill(queue, flags)
    fbuf, ZERO = flags.base_data, _launch.ZERO64
    for i, g in enumerate(grads):
        n = g.size
        if n:
            off = g.offset
            knl(queue, *_geom_of(geoms, n, wg, cpu, ctx), g.base_data,
                np.int64(off // g.dtype.itemsize) if off else ZERO, fbuf, np.int32(i))
    found = flags.get(queue)  # sync
    return tuple(int(i) for i in np.flatnonzero(found))


def sgd_step(params, grads, momentum_buffers, *, lr, momentum, dampening, weight_decay,
             nesterov, maximize, first, check_finite=False):
    """SGD with momentum, dampening, Nesterov, weight decay and maximize, in place.

    ``first`` says the momentum buffers are uninitialised (they are set to the
    gradient). Returns the indices of non-finite gradients (``check_finite``), else ().
    """
    if not params:
        return ()
    func = "sgd_step"
    bufs = momentum_buffers if momentum != 0 else None
    queue, dtype = _check(func, params, grads, (("momentum_buffers", bufs),))
    if check_finite:
        bad = nonfinite(grads)
        if bad:
            return bad
    ctx = params[0].context
    t = dtype.type
    flags = (F_MAXIMIZE if maximize else 0) | (F_WEIGHT_DECAY if weight_decay != 0 else 0)
    if momentum != 0:
        flags |= F_MOMENTUM | (F_FIRST if first else 0) | (F_NESTEROV if nesterov else 0)
    knl, wg, cpu = _kernel(func, ctx, dtype, "tessera_sgd", flags)
    geoms = _geoms(func, ctx, dtype)
    scalars = (t(lr), t(momentum), t(1.0 - dampening), t(weight_decay))
    flags32, isz, ZERO = np.int32(flags), dtype.itemsize, _launch.ZERO64
    for p, g, b in zip(params, grads, bufs if bufs is not None else grads):
        n = p.size
        if not n:
            continue
        # (b is g without momentum: never read)
        po, go, bo = p.offset, g.offset, b.offset
        knl(queue, *_geom_of(geoms, n, wg, cpu, ctx), flags32,
            p.base_data, np.int64(po // isz) if po else ZERO,
            g.base_data, np.int64(go // isz) if go else ZERO,
            b.base_data, np.int64(bo // isz) if bo else ZERO, *scalars)
    return ()


def _adam(func, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, *, lr, beta1, beta2,
          eps, weight_decay, amsgrad, maximize, step, decoupled, check_finite):
    if not params:
        return ()
    maxes = max_exp_avg_sqs if amsgrad else None
    queue, dtype = _check(func, params, grads, (("exp_avgs", exp_avgs),
                                                ("exp_avg_sqs", exp_avg_sqs),
                                                ("max_exp_avg_sqs", maxes)))
    if check_finite:
        bad = nonfinite(grads)
        if bad:
            return bad
    ctx = params[0].context
    t = dtype.type
    bc2_sqrt = math.sqrt(1.0 - beta2**step)
    step_size = lr / (1.0 - beta1**step)
    flags = (F_MAXIMIZE if maximize else 0) | (F_AMSGRAD if amsgrad else 0)
    if weight_decay != 0:
        flags |= F_WEIGHT_DECAY | (F_DECOUPLED if decoupled else 0)
    knl, wg, cpu = _kernel(func, ctx, dtype, "tessera_adam", flags)
    geoms = _geoms(func, ctx, dtype)
    scalars = (t(weight_decay), t(1.0 - lr * weight_decay), t(1.0 - beta1), t(beta2),
               t(1.0 - beta2), t(bc2_sqrt), t(eps), t(step_size))
    flags32, isz, ZERO = np.int32(flags), dtype.itemsize, _launch.ZERO64
    for p, g, m, v, vm in zip(params, grads, exp_avgs, exp_avg_sqs,
                              maxes if maxes is not None else exp_avg_sqs):
        n = p.size
        if not n:
            continue
        # (vm is v without amsgrad: never read)
        po, go, mo, vo, vmo = p.offset, g.offset, m.offset, v.offset, vm.offset
        knl(queue, *_geom_of(geoms, n, wg, cpu, ctx), flags32,
            p.base_data, np.int64(po // isz) if po else ZERO,
            g.base_data, np.int64(go // isz) if go else ZERO,
            m.base_data, np.int64(mo // isz) if mo else ZERO,
            v.base_data, np.int64(vo // isz) if vo else ZERO,
            vm.base_data, np.int64(vmo // isz) if vmo else ZERO, *scalars)
    return ()


adam_step, adamw_step = adam_launchers(_adam)


def adafactor_step(params, grads, row_vars, col_vars, variances, *, lr, rho, rate, eps1, eps2,
                   d, weight_decay, maximize, check_finite=False):
    """Adafactor, in place (the NumPy launcher's contract).

    ``rate`` is ``1 - beta2_t`` for this step (from the front end's one decay
    function), ``rho`` the relative step size, ``eps1`` None for the dtype's epsilon.
    Parameters of 2+ dims use ``row_vars``/``col_vars``, others ``variances``.
    """
    if not params:
        return ()
    func = "adafactor_step"
    queue, dtype = _check(func, params, grads, (("row_vars", row_vars), ("col_vars", col_vars),
                                                ("variances", variances)))
    for i, p in enumerate(params):
        need = (("row_vars", row_vars), ("col_vars", col_vars)) if p.ndim > 1 else \
            (("variances", variances),)
        for name, lst in need:
            if lst is None or lst[i] is None:
                raise ValueError(f"{func}: {name}[{i}] is needed for params[{i}].shape="
                                 f"{p.shape}. Received: {name}[{i}]=None")
    if check_finite:
        bad = nonfinite(grads)
        if bad:
            return bad
    ctx = params[0].context
    t = dtype.type
    e1 = float(np.finfo(dtype).eps) if eps1 is None else eps1
    e1_sq = t(e1 * e1)
    high = rate >= 0.5
    wt = t(1.0 - rate if high else rate)
    flags0 = (F_MAXIMIZE if maximize else 0) | (F_LERP_HIGH if high else 0) | \
        (F_WEIGHT_DECAY if weight_decay != 0 else 0)
    sumsq, wg, cpu = _kernel(func, ctx, dtype, "tessera_sumsq")
    names = ("rows", "cols", "rmean", "var", "usq", "apply", "usq_rows", "apply_rows")
    kernels = {f: dict(zip(names, (_kernel(func, ctx, dtype, f"tessera_adafactor_{nm}", f)[0]
                                   for nm in names)))
               for f in {flags0, flags0 | F_FACTORED}}
    alloc = params[0].allocator
    n_t = len(params)
    partial = _memory.new(queue, (2 * n_t * SUM_GROUPS,), dtype, alloc)
    _programs.zero_fill(queue, partial)
    launched = []  # per tensor: (flags, row, col, rmean, var, R, C) for the update
    # Pass 1: the moments, and partial sums of p^2 and U^2 for every tensor.
    for i, (p, g) in enumerate(zip(params, grads)):
        n = p.size
        if p.ndim > 1:
            row, col = row_vars[i], col_vars[i]
            R, C = p.shape[-2], p.shape[-1]
            B = row.size // R if R else math.prod(p.shape[:-2])
            flags = flags0 | F_FACTORED
            k = kernels[flags]
            if row.size:
                rper = _programs.rows_per_item(row.size, ctx.devices[0])[0] if cpu else 1
                k["rows"](queue, _gsize(-(-row.size // rper), wg), (wg,), np.int32(row.size),
                          np.int32(C), np.int32(rper), g.base_data, _off(g), row.base_data,
                          _off(row), wt, np.int32(flags))
            if col.size:
                if cpu:  # runs of columns, summed row by row into scratch
                    cper = max(16, -(-col.size // (8 * ctx.devices[0].max_compute_units)))
                    cper = min(C, cper)
                    scratch = _memory.new(queue, (col.size,), dtype, alloc)
                else:
                    cper, scratch = 1, col  # one column per work-item; scratch unused
                items = B * -(-C // cper)
                k["cols"](queue, _gsize(items, wg), (wg,), np.int32(B), np.int32(R),
                       np.int32(C), np.int32(cper), g.base_data, _off(g), col.base_data,
                       _off(col), scratch.base_data, wt, np.int32(flags))
            rmean = _memory.new(queue, (max(B, 1),), dtype, alloc)
            if B:
                k["rmean"](queue, _gsize(B, wg), (wg,), np.int32(B), np.int32(R),
                        row.base_data, _off(row), rmean.base_data, t(e1))
            var = g  # never read
        else:
            flags = flags0
            k = kernels[flags]
            var = variances[i]
            R, C = 1, 1
            row = col = rmean = g  # never read
            if n:
                gs, ls, *chunk = _geom(n, wg, cpu, ctx)
                k["var"](queue, gs, ls, np.int64(n), *chunk, g.base_data, _off(g),
                      var.base_data, _off(var), wt, np.int32(flags))
        if n:
            gs, ls, *chunk = _rgeom(n, wg, cpu, ctx)
            sumsq(queue, gs, ls, np.int64(n), *chunk, p.base_data, _off(p),
                  partial.base_data, np.int64(2 * i * SUM_GROUPS))
        if n and cpu and flags & F_FACTORED:  # row by row: no index division per element
            nrows = n // C
            rper = -(-nrows // min(SUM_GROUPS, 8 * ctx.devices[0].max_compute_units))
            k["usq_rows"](queue, (-(-nrows // rper),), (1,), np.int32(nrows), np.int32(R),
                          np.int32(C), np.int32(rper), np.int32(flags), g.base_data, _off(g),
                          row.base_data, _off(row), col.base_data, _off(col), rmean.base_data,
                          e1_sq, partial.base_data, np.int64((2 * i + 1) * SUM_GROUPS))
        elif n:
            k["usq"](queue, gs, ls, np.int64(n), *chunk, np.int32(flags),
                  g.base_data, _off(g), row.base_data, _off(row), col.base_data, _off(col),
                  rmean.base_data, var.base_data, _off(var), np.int32(R), np.int32(C), e1_sq,
                  partial.base_data, np.int64((2 * i + 1) * SUM_GROUPS))
        launched.append((flags, row, col, rmean, var, R, C))
    sums = partial.get(queue).astype(np.float64).reshape(n_t, 2, SUM_GROUPS).sum(axis=2)  # sync
    # Pass 2: the update, with alpha / max(1, RMS(U)/d) from the host, in double.
    keep = t(1.0 - lr * weight_decay)
    for i, (p, g) in enumerate(zip(params, grads)):
        n = p.size
        if not n:
            continue
        flags, row, col, rmean, var, R, C = launched[i]
        size = max(n, 1)
        alpha = max(eps2, math.sqrt(sums[i, 0] / size)) * rho
        denom = max(1.0, math.sqrt(sums[i, 1] / size) / d)
        if cpu and flags & F_FACTORED:
            nrows = n // C
            rper = -(-nrows // (8 * ctx.devices[0].max_compute_units))
            kernels[flags]["apply_rows"](
                queue, (-(-nrows // rper),), (1,), np.int32(nrows), np.int32(R), np.int32(C),
                np.int32(rper), np.int32(flags), p.base_data, _off(p), g.base_data, _off(g),
                row.base_data, _off(row), col.base_data, _off(col), rmean.base_data, e1_sq,
                keep, t(alpha / denom))
            continue
        gs, ls, *chunk = _geom(n, wg, cpu, ctx)
        kernels[flags]["apply"](queue, gs, ls, np.int64(n), *chunk, np.int32(flags),
                p.base_data, _off(p), g.base_data, _off(g), row.base_data, _off(row),
                col.base_data, _off(col), rmean.base_data, var.base_data, _off(var),
                np.int32(R), np.int32(C), e1_sq, keep, t(alpha / denom))
    return ()


def register(registry, backend_name: str) -> None:
    registry.register_family("optimizer", backend_name, _dtypes.REAL_FLOATING, globals())
