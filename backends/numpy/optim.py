"""Optimizer-step kernels of the NumPy backend: in-place multi-tensor updates.

Each launcher takes lists of native buffers (``numpy.ndarray``: parameters,
gradients, state) and Python-float hyperparameters already resolved on the host
by the front end (bias corrections, Adafactor's decay rate from
``tessera_array.optim.adafactor_decay``, the relative step size). It updates the
parameters and state in place and returns ``()``; with ``check_finite=True`` it
first reads the gradients and, if any holds NaN/inf, updates nothing and returns
their indices.

Vectorised: every update is a fixed sequence of ufuncs with ``out=`` (no
per-element Python). SGD and Adam/AdamW walk contiguous tensors in blocks of
``BLOCK_BYTES`` per array, so the several passes of one update run on data still
in cache (one Python iteration per block); each thread allocates two scratch
blocks once per call and reuses them for every tensor, so no other temporaries
are made. Calls of ``PARALLEL_MIN`` elements or more share their blocks among up
to 16 threads, one per usable core (NumPy's ufuncs release the GIL). Non-contiguous
tensors are updated whole. Adafactor, whose update needs per-tensor reductions,
works a tensor at a time (tensors shared among threads) with one full-size
scratch per tensor. Accumulation is in the parameter's dtype, as in torch.optim
on the CPU.
"""

from __future__ import annotations

import math

import numpy as np

from tessera_array import _dtypes

from ._threads import pool as _pool
from ._threads import threads as _threads

__all__ = ["adafactor_step", "adam_step", "adamw_step", "register", "sgd_step"]

# Per array. Measured best of 32 KiB..64 MiB on a 2-core EPYC (L3 32 MiB) and a 16-core
# host: smaller blocks lose to thread hand-offs of the GIL, larger ones to the cache.
BLOCK_BYTES = 1 << 20
PARALLEL_MIN = 1 << 20  # elements in one call before the blocks are shared among threads
def _work(tensors, block: int) -> list:
    """Same-position views of each tensor's arrays, one tuple per block (Nones kept).

    Contiguous tensors are cut into blocks of ``block`` elements; others stay whole.
    """
    items = []
    for arrays in tensors:
        first = arrays[0]
        if all(a is None or a.flags.c_contiguous for a in arrays):
            flat = [None if a is None else a.reshape(-1) for a in arrays]
            n = first.size
            if n <= block:
                items.append(tuple(flat))
                continue
            for lo in range(0, n, block):
                hi = lo + block
                items.append(tuple(None if a is None else a[lo:hi] for a in flat))
        else:
            items.append(tuple(arrays))
    return items


def _run(items, body, total: int) -> None:
    """Apply ``body(views, scratch1, scratch2)`` to every item; threads share large calls.

    NumPy's ufuncs release the GIL, so the threads' blocks run in parallel. Each
    thread allocates its two scratch buffers once.
    """
    def chunk(part):
        size = max(v[0].size for v in part)
        dtype = part[0][0].dtype
        s1, s2 = np.empty(size, dtype), np.empty(size, dtype)
        with np.errstate(all="ignore"):  # IEEE results (inf, NaN) are the update's own
            for views in part:
                n = views[0].size
                shape = views[0].shape
                body(views, s1[:n].reshape(shape), s2[:n].reshape(shape))

    nt = _threads()
    if total < PARALLEL_MIN or nt == 1 or len(items) == 1:
        chunk(items)
        return
    k = -(-len(items) // nt)
    parts = [items[i:i + k] for i in range(0, len(items), k)]
    for f in [_pool().submit(chunk, part) for part in parts]:
        f.result()


def nonfinite(grads) -> tuple:
    """Indices of the gradients holding a NaN or an inf: one read-only parallel pass.

    A block whose sum is finite holds only finite values; a block whose sum is not
    is checked exactly (a sum can overflow), so the answer is exact.
    """
    block = BLOCK_BYTES // grads[0].itemsize
    items = []
    for i, g in enumerate(grads):
        if g.flags.c_contiguous and g.size > block:
            flat = g.reshape(-1)
            items.extend((i, flat[lo:lo + block]) for lo in range(0, g.size, block))
        else:
            items.append((i, g))

    def bad(item):
        i, b = item
        with np.errstate(over="ignore", invalid="ignore"):
            s = float(np.add.reduce(b, axis=None))
        return None if math.isfinite(s) or np.isfinite(b).all() else i

    total = sum(g.size for g in grads)
    if total < PARALLEL_MIN or _threads() == 1 or len(items) == 1:
        found = map(bad, items)
    else:
        found = _pool().map(bad, items)
    return tuple(sorted({i for i in found if i is not None}))


def sgd_step(params, grads, momentum_buffers, *, lr, momentum, dampening, weight_decay,
             nesterov, maximize, first, check_finite=False):
    """SGD with momentum, dampening, Nesterov, weight decay and maximize, in place.

    ``first`` says the momentum buffers are uninitialised (the first step): they
    are set to the gradient, as in torch.optim.SGD. With ``check_finite``, nothing
    is updated when a gradient holds NaN/inf; returns the indices of those (every
    launcher returns this tuple, empty after an update).
    """
    if not params:
        return ()
    if check_finite:
        bad = nonfinite(grads)
        if bad:
            return bad
    bufs = momentum_buffers if momentum != 0 else [None] * len(params)
    keep = 1.0 - dampening

    def body(views, a, b):
        p, g, buf = views
        d = g
        if maximize:
            np.negative(g, out=a)
            d = a
        if weight_decay != 0:
            np.multiply(p, weight_decay, out=b)
            np.add(d, b, out=a)
            d = a
        if momentum != 0:
            if first:
                np.copyto(buf, d)
            else:
                buf *= momentum
                np.multiply(d, keep, out=b)
                buf += b
            if nesterov:
                np.multiply(buf, momentum, out=b)
                np.add(d, b, out=a)
                d = a
            else:
                d = buf
        np.multiply(d, lr, out=b)
        p -= b

    block = BLOCK_BYTES // params[0].itemsize
    _run(_work(zip(params, grads, bufs), block), body, sum(p.size for p in params))
    return ()


def _adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, *, lr, beta1, beta2, eps,
          weight_decay, amsgrad, maximize, step, decoupled, check_finite):
    if not params:
        return ()
    if check_finite:
        bad = nonfinite(grads)
        if bad:
            return bad
    bc2_sqrt = math.sqrt(1.0 - beta2**step)
    step_size = lr / (1.0 - beta1**step)
    one_b1, one_b2 = 1.0 - beta1, 1.0 - beta2
    keep = 1.0 - lr * weight_decay
    maxes = max_exp_avg_sqs if amsgrad else [None] * len(params)

    def body(views, a, b):
        p, g, m, v, vmax = views
        d = g
        if maximize:
            np.negative(g, out=a)
            d = a
        if weight_decay != 0:
            if decoupled:
                p *= keep
            else:
                np.multiply(p, weight_decay, out=b)
                np.add(d, b, out=a)
                d = a
        # m <- lerp(m, g, 1 - beta1); v <- beta2 v + (1 - beta2) g^2
        np.subtract(d, m, out=b)
        b *= one_b1
        m += b
        v *= beta2
        np.multiply(d, d, out=b)
        b *= one_b2
        v += b
        # p <- p - step_size m / (sqrt(v_hat)/sqrt(bc2) + eps)
        if amsgrad:
            np.maximum(vmax, v, out=vmax)
            np.sqrt(vmax, out=b)
        else:
            np.sqrt(v, out=b)
        b /= bc2_sqrt
        b += eps
        np.divide(m, b, out=b)
        b *= step_size
        p -= b

    block = BLOCK_BYTES // params[0].itemsize
    _run(_work(zip(params, grads, exp_avgs, exp_avg_sqs, maxes), block), body,
         sum(p.size for p in params))
    return ()


def adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, *, lr, beta1, beta2, eps,
              weight_decay, amsgrad, maximize, step, check_finite=False):
    """Adam (L2 weight decay added to the gradient), in place; ``step`` counts from 1."""
    return _adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, lr=lr, beta1=beta1,
                 beta2=beta2, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                 maximize=maximize, step=step, decoupled=False, check_finite=check_finite)


def adamw_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, *, lr, beta1, beta2, eps,
               weight_decay, amsgrad, maximize, step, check_finite=False):
    """AdamW (decoupled weight decay: p *= 1 - lr*weight_decay first), in place."""
    return _adam(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, lr=lr, beta1=beta1,
                 beta2=beta2, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                 maximize=maximize, step=step, decoupled=True, check_finite=check_finite)


def _lerp_(a, b, w, tmp):
    """a <- lerp(a, b, w) in place, with torch's two-sided formula (exact at w = 1)."""
    np.subtract(b, a, out=tmp)
    if w < 0.5:
        tmp *= w
        a += tmp
    else:
        tmp *= 1.0 - w
        np.subtract(b, tmp, out=a)


def _rms(x) -> float:
    flat = x.reshape(-1)
    with np.errstate(over="ignore"):  # overflows to inf, as the update would
        return math.sqrt(float(np.dot(flat, flat)) / max(flat.size, 1))


def adafactor_step(params, grads, row_vars, col_vars, variances, *, lr, rho, rate, eps1, eps2,
                   d, weight_decay, maximize, check_finite=False):
    """Adafactor, in place.

    ``rate`` is ``1 - beta2_t`` for this step, computed by the front end (one shared
    decay function); ``rho`` the step size; ``eps1`` None means the dtype's epsilon.
    Parameters with 2 or more dims use ``row_vars``/``col_vars`` (last two dims);
    others use ``variances``.
    """
    if check_finite and params:
        bad = nonfinite(grads)
        if bad:
            return bad
    def one(i):
        with np.errstate(all="ignore"):  # IEEE results (inf, NaN) are the update's own
            _one(i)

    def _one(i):
        p, g = params[i], grads[i]
        e1 = float(np.finfo(p.dtype).eps) if eps1 is None else eps1
        alpha = max(eps2, _rms(p)) * rho
        if weight_decay != 0:
            p *= 1.0 - lr * weight_decay
        s = np.empty_like(p)
        if maximize:
            g = np.negative(g)
        if p.ndim > 1:
            row, col = row_vars[i], col_vars[i]
            np.multiply(g, g, out=s)
            mean = np.sum(s, axis=-1, keepdims=True)
            mean /= p.shape[-1]
            _lerp_(row, mean, rate, np.empty_like(row))
            mean = np.sum(s, axis=-2, keepdims=True)
            mean /= p.shape[-2]
            _lerp_(col, mean, rate, np.empty_like(col))
            np.multiply(row, col, out=s)
            rmean = np.mean(row, axis=-2, keepdims=True)
            np.maximum(rmean, e1, out=rmean)
            s /= rmean
        else:
            var = variances[i]
            np.multiply(g, g, out=s)
            _lerp_(var, s, rate, np.empty_like(var))
            np.copyto(s, var)
        np.maximum(s, e1 * e1, out=s)
        np.sqrt(s, out=s)
        np.divide(g, s, out=s)
        denom = max(1.0, _rms(s) / d)
        s *= alpha / denom
        p -= s

    # Tensors are independent: large calls share them among threads.
    if sum(p.size for p in params) < PARALLEL_MIN or len(params) == 1 or _threads() == 1:
        for i in range(len(params)):
            one(i)
    else:
        for _ in _pool().map(one, range(len(params))):
            pass
    return ()


def register(registry, backend_name: str) -> None:
    registry.register_family("optimizer", backend_name, _dtypes.REAL_FLOATING, globals())
