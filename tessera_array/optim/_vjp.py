"""Analytic VJPs of one optimizer update, for hypergradients through a step.

Each ``*_vjp`` takes the arguments of its plain reference (:func:`sgd_reference`,
:func:`adam_reference`, :func:`adafactor_reference`) plus ``cotangents=``, the
cotangents of that reference's outputs, and returns the cotangents of its inputs and
of ``lr`` (what torch's ``differentiable=True`` gives through autograd, in closed form;
``jax.vjp`` of the step):

- :func:`sgd_vjp`: ``cotangents=(param, buf)`` -> ``SGDVJP(param, grad, buf, lr)``;
- :func:`adam_vjp`, :func:`adamw_vjp`: ``(param, m, v, vmax)`` ->
  ``AdamVJP(param, grad, m, v, vmax, lr)``;
- :func:`adafactor_vjp`: ``(param, row, col, var)`` ->
  ``AdafactorVJP(param, grad, row, col, var, lr)`` (``row``/``col`` for 2+ dims).

Conventions:

- One tensor per call (the references' form); a cotangent given as None is zero. A
  state input given as None gets None back; one the step ignores gets zeros (``buf``
  at step 1), or its cotangent passed on where the step returns it unchanged (``buf``
  without momentum, ``vmax`` without AMSGrad, Adafactor's unused moments). ``lr``'s is
  a 0-d array on the parameter's device; for one ``lr`` over many tensors, sum them.
- The step is differentiated exactly as the reference computes it: Adam's ``eps``
  added to ``sqrt(vhat)/sqrt(1 - beta2**t)``, both bias corrections, AdamW's
  ``p*(1 - lr*wd)``; Adafactor through ``alpha = max(eps2, RMS(p))*rho`` (``p``
  before weight decay), ``rho = min(lr, 1/sqrt(t))`` (``lr`` without ``step``), the
  floors ``max(mean(R), eps1)`` and ``max(vhat, eps1**2)`` and the clip
  ``max(1, RMS(U)/d)``. Adafactor's decay is the forward's, from the same function
  (:func:`adafactor_decay` for ``decay="debiased"``, torch's rule for ``"pytorch"``,
  ``beta2`` without ``step``). The step number and the other hyperparameters are
  constants.
- Kinks (a piecewise derivative): ``max(x, c)`` and ``min(lr, c)`` pass the cotangent
  to ``x`` (to ``lr``) where ``x >= c`` (``lr <= c``), ties included, else to ``c`` (a
  constant: dropped); AMSGrad's ``maximum(vmax, v_t)`` passes it to ``v_t`` where
  ``v_t >= vmax``, else to ``vmax``. torch's autograd agrees off ties (its ``maximum``
  splits a tie in halves). ``sqrt`` and the norms at 0 get derivative 0 (Adam's
  ``sqrt(vhat)`` where ``vhat == 0``; ``RMS(p) == 0``), where torch gives inf or NaN.
- torch's SGD detaches its first momentum buffer (``buf = grad.detach().clone()``),
  so its autograd misses that path at step 1; here ``buf = g`` is differentiated.

Written once against the namespace of ``param`` (``param.__array_namespace__()``)
with functions of the standard only, so it runs on every device (and on NumPy or
any Array API namespace), with no host synchronisation.

Examples
--------
>>> import tessera_array as xp
>>> from tessera_array.optim import sgd_vjp
>>> p, g = xp.asarray([1.0, -2.0]), xp.asarray([0.5, 0.25])
>>> r = sgd_vjp(p, g, cotangents=(xp.ones(2), None), step=1, lr=0.1)
>>> r.grad, float(r.lr)     # d(sum p_new)/dg = -lr; d(sum p_new)/dlr = -sum(g)
(Array([-0.1, -0.1], dtype=float64), -0.75)
"""

from __future__ import annotations

import math
from typing import NamedTuple

from ._base import check_step
from .adafactor import _check_hyper as _check_adafactor_hyper
from .adafactor import adafactor_state_shapes, decay_rate, resolve_decay
from .adam import check_adam_hyper
from .sgd import _check_hyper as _check_sgd_hyper

__all__ = [
    "SGDVJP",
    "AdafactorVJP",
    "AdamVJP",
    "adafactor_vjp",
    "adam_vjp",
    "adamw_vjp",
    "sgd_vjp",
]


class SGDVJP(NamedTuple):
    """Cotangents of the inputs of one SGD step (:func:`sgd_vjp`)."""

    param: object  # of the parameter before the step
    grad: object  # of the gradient
    buf: object  # of the momentum buffer before the step (None if it was None)
    lr: object  # of the learning rate: a 0-d array


class AdamVJP(NamedTuple):
    """Cotangents of the inputs of one Adam/AdamW step (:func:`adam_vjp`)."""

    param: object  # of the parameter before the step
    grad: object  # of the gradient
    m: object  # of the first moment before the step
    v: object  # of the second moment before the step
    vmax: object  # of AMSGrad's running maximum before the step (None if it was None)
    lr: object  # of the learning rate: a 0-d array


class AdafactorVJP(NamedTuple):
    """Cotangents of the inputs of one Adafactor step (:func:`adafactor_vjp`)."""

    param: object  # of the parameter before the step
    grad: object  # of the gradient
    row: object  # of the row factor R before the step (2+ dims; else None or passed on)
    col: object  # of the column factor C before the step (2+ dims; else None or passed on)
    var: object  # of the unfactored moment V before the step (0-/1-d; else None or passed on)
    lr: object  # of the learning rate: a 0-d array


# ---- checks ------------------------------------------------------------------------


def _namespace(func: str, param):
    if not hasattr(param, "__array_namespace__"):
        raise TypeError(
            f"{func}: param must be an array of an Array API namespace. "
            f"Received: param of type {type(param).__name__}"
        )
    xp = param.__array_namespace__()
    if not xp.isdtype(param.dtype, "real floating"):
        raise TypeError(
            f"{func}: param must have a real floating dtype. Received: param.dtype={param.dtype}"
        )
    return xp


def _check_like(func: str, name: str, a, shape, *, optional: bool = True, dtype=None):
    if a is None:
        if not optional:
            raise ValueError(f"{func}: {name} is required here. Received: {name}=None")
        return
    if not hasattr(a, "__array_namespace__"):
        raise TypeError(
            f"{func}: {name} must be an array. Received: {name} of type {type(a).__name__}"
        )
    if dtype is not None and a.dtype != dtype:
        raise TypeError(
            f"{func}: {name} must have param's dtype {dtype}. Received: {name}.dtype={a.dtype}"
        )
    if shape is not None and tuple(a.shape) != tuple(shape):
        raise ValueError(
            f"{func}: {name} must have shape {tuple(shape)}. Received: {name}.shape={a.shape}"
        )


def _cotangents(func: str, cotangents, names: tuple, shapes: tuple, dtype) -> list:
    if not isinstance(cotangents, (tuple, list)) or len(cotangents) != len(names):
        raise TypeError(
            f"{func}: cotangents must be a tuple {tuple(names)} (the step's outputs; None "
            f"for zero). Received: cotangents={cotangents!r}"
        )
    for c, n, s in zip(cotangents, names, shapes):
        if s is not None:
            _check_like(func, f"cotangents.{n}", c, s, dtype=dtype)
        elif c is not None:
            raise ValueError(
                f"{func}: cotangents.{n} must be None: the step returns None there. "
                f"Received: cotangents.{n}.shape={c.shape}"
            )
    return list(cotangents)


def _or_zeros(xp, c, like):
    return xp.zeros_like(like) if c is None else c


def _dot(xp, a, b):
    """``sum(a*b)`` as a 0-d array."""
    return xp.sum(a * b)


# ---- SGD ---------------------------------------------------------------------------


def sgd_vjp(param, grad, buf=None, *, cotangents, step: int, lr: float, momentum: float = 0.0,
            dampening: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
            maximize: bool = False) -> SGDVJP:
    """The VJP of :func:`sgd_reference`: cotangents of ``(param, grad, buf)`` and ``lr``.

    ``cotangents`` is ``(param_bar, buf_bar)`` for the step's outputs
    ``(new_param, new_buf)``. With ``momentum == 0`` the step returns ``buf``
    unchanged, so ``buf_bar`` is passed on; at ``step == 1`` the new buffer is the
    gradient and the old one gets zeros.
    """
    func = "sgd_vjp"
    xp = _namespace(func, param)
    _check_sgd_hyper(func, lr, momentum, dampening, weight_decay, nesterov)
    check_step(func, step)
    _check_like(func, "grad", grad, param.shape, optional=False, dtype=param.dtype)
    uses_buf = momentum != 0 and step != 1
    _check_like(func, "buf", buf, param.shape, optional=not uses_buf, dtype=param.dtype)
    buf_out_shape = param.shape if (momentum != 0 or buf is not None) else None
    p_bar, b_bar = _cotangents(func, cotangents, ("param", "buf"), (param.shape, buf_out_shape),
                                 param.dtype)
    p_bar = _or_zeros(xp, p_bar, param)

    # forward: the direction d of p - lr*d
    g = -grad if maximize else grad
    if weight_decay != 0:
        g = g + weight_decay * param
    if momentum != 0:
        new_buf = g if step == 1 else momentum * buf + (1.0 - dampening) * g
        d = g + momentum * new_buf if nesterov else new_buf
    else:
        d = g

    lr_bar = -_dot(xp, p_bar, d)
    d_bar = -lr * p_bar
    if momentum != 0:
        # d = g + mu*new_buf (nesterov) or new_buf; new_buf also leaves the step
        g_bar = d_bar if nesterov else xp.zeros_like(param)
        nb_bar = momentum * d_bar if nesterov else d_bar
        if b_bar is not None:
            nb_bar = nb_bar + b_bar
        if step == 1:
            g_bar = g_bar + nb_bar
            buf_in_bar = None if buf is None else xp.zeros_like(buf)
        else:
            g_bar = g_bar + (1.0 - dampening) * nb_bar
            buf_in_bar = momentum * nb_bar
    else:
        g_bar = d_bar
        buf_in_bar = None if buf is None else _or_zeros(xp, b_bar, buf)
    param_bar = p_bar + weight_decay * g_bar if weight_decay != 0 else p_bar
    grad_bar = -g_bar if maximize else g_bar
    return SGDVJP(param_bar, grad_bar, buf_in_bar, lr_bar)


# ---- Adam / AdamW ------------------------------------------------------------------


def adam_vjp(param, grad, m, v, vmax=None, *, cotangents, step: int, lr: float = 1e-3,
             betas: tuple = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
             amsgrad: bool = False, maximize: bool = False, decoupled: bool = False) -> AdamVJP:
    """The VJP of :func:`adam_reference`: cotangents of ``(param, grad, m, v, vmax)``, ``lr``.

    ``cotangents`` is ``(param_bar, m_bar, v_bar, vmax_bar)`` for the step's outputs
    ``(new_param, m, v, vmax)``; ``decoupled=True`` is AdamW's step. Without
    ``amsgrad`` the step returns ``vmax`` unchanged and ``vmax_bar`` is passed on.
    """
    return _adam_vjp("adam_vjp", param, grad, m, v, vmax, cotangents, step=step, lr=lr,
                     betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                     maximize=maximize, decoupled=decoupled)


def adamw_vjp(param, grad, m, v, vmax=None, *, cotangents, step: int, lr: float = 1e-3,
              betas: tuple = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2,
              amsgrad: bool = False, maximize: bool = False) -> AdamVJP:
    """The VJP of one AdamW step: :func:`adam_vjp` with ``decoupled=True`` (AdamW's defaults)."""
    return _adam_vjp("adamw_vjp", param, grad, m, v, vmax, cotangents, step=step, lr=lr,
                     betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad,
                     maximize=maximize, decoupled=True)


def _adam_vjp(func, param, grad, m, v, vmax, cotangents, *, step, lr, betas, eps, weight_decay,
              amsgrad, maximize, decoupled):
    xp = _namespace(func, param)
    check_adam_hyper(func, lr, betas, eps, weight_decay)
    check_step(func, step)
    shape = param.shape
    _check_like(func, "grad", grad, shape, optional=False, dtype=param.dtype)
    _check_like(func, "m", m, shape, optional=False, dtype=param.dtype)
    _check_like(func, "v", v, shape, optional=False, dtype=param.dtype)
    _check_like(func, "vmax", vmax, shape, optional=not amsgrad, dtype=param.dtype)
    vmax_shape = shape if vmax is not None else None
    p_bar, m_bar, v_bar, vmax_bar = _cotangents(
        func, cotangents, ("param", "m", "v", "vmax"), (shape, shape, shape, vmax_shape), param.dtype)
    p_bar = _or_zeros(xp, p_bar, param)
    b1, b2 = betas
    c1 = 1.0 - b1**step
    c2 = math.sqrt(1.0 - b2**step)

    # forward
    g = -grad if maximize else grad
    if weight_decay != 0 and not decoupled:
        g = g + weight_decay * param
    m_new = m + (1.0 - b1) * (g - m)
    v_new = b2 * v + (1.0 - b2) * (g * g)
    if amsgrad:
        new_active = v_new >= vmax  # ties: to v_new
        vhat = xp.where(new_active, v_new, vmax)
    else:
        vhat = v_new
    root = xp.sqrt(vhat)
    denom = root / c2 + eps
    step_dir = m_new / denom  # p_new = p1 - (lr/c1) * step_dir

    lr_bar = -_dot(xp, p_bar, step_dir) / c1
    k = lr / c1
    mn_bar = -k * p_bar / denom
    if m_bar is not None:
        mn_bar = mn_bar + m_bar
    denom_bar = k * p_bar * step_dir / denom
    safe = xp.where(root > 0, root, xp.ones_like(root))
    vhat_bar = xp.where(root > 0, denom_bar / (2.0 * c2 * safe), xp.zeros_like(root))
    if amsgrad:
        if vmax_bar is not None:
            vhat_bar = vhat_bar + vmax_bar
        zero = xp.zeros_like(vhat_bar)
        vn_bar = xp.where(new_active, vhat_bar, zero)
        vmax_in_bar = xp.where(new_active, zero, vhat_bar)
    else:
        vn_bar = vhat_bar
        vmax_in_bar = None if vmax is None else _or_zeros(xp, vmax_bar, vmax)
    if v_bar is not None:
        vn_bar = vn_bar + v_bar
    g_bar = (1.0 - b1) * mn_bar + (2.0 * (1.0 - b2)) * g * vn_bar
    if weight_decay != 0 and decoupled:
        lr_bar = lr_bar - weight_decay * _dot(xp, p_bar, param)
        param_bar = (1.0 - lr * weight_decay) * p_bar
    elif weight_decay != 0:
        param_bar = p_bar + weight_decay * g_bar
    else:
        param_bar = p_bar
    grad_bar = -g_bar if maximize else g_bar
    return AdamVJP(param_bar, grad_bar, b1 * mn_bar, b2 * vn_bar, vmax_in_bar, lr_bar)


# ---- Adafactor ---------------------------------------------------------------------


def _rms_vjp(xp, x, n, bar):
    """``bar * d RMS(x)/dx`` with ``RMS(x) = ||x||/n``; 0 where ``x == 0`` everywhere."""
    norm = xp.linalg.vector_norm(x)
    safe = xp.where(norm > 0, norm, xp.ones_like(norm))
    return xp.where(norm > 0, bar / (n * safe), xp.zeros_like(norm)) * x


def adafactor_vjp(param, grad, row=None, col=None, var=None, *, cotangents,
                  step: int | None = None, lr: float = 1e-2, beta2: float = 0.999,
                  beta2_decay: float | None = None, decay: str | None = None,
                  eps: tuple = (None, 1e-3), d: float = 1.0, weight_decay: float = 0.0,
                  maximize: bool = False) -> AdafactorVJP:
    """The VJP of :func:`adafactor_reference`: cotangents of ``(param, grad, row, col, var)``, ``lr``.

    ``cotangents`` is ``(param_bar, row_bar, col_bar, var_bar)`` for the step's
    outputs ``(new_param, row, col, var)``. Parameters of 2+ dims use the factors
    ``row`` (shape ``(..., m, 1)``) and ``col`` (``(..., 1, n)``); 0-/1-d ones ``var``.
    The moment the step does not use is returned unchanged by it, so its cotangent is
    passed on. The decay is the forward's, from the shared :func:`adafactor_decay`.
    """
    func = "adafactor_vjp"
    xp = _namespace(func, param)
    beta2_decay, decay = resolve_decay(func, beta2_decay, decay)  # the forward's rule
    _check_adafactor_hyper(func, lr, beta2, beta2_decay, eps, d, weight_decay)
    step = check_step(func, step, optional=True)
    rate, _ = decay_rate(func, step, beta2, beta2_decay, decay)
    shape = tuple(param.shape)
    _check_like(func, "grad", grad, shape, optional=False, dtype=param.dtype)
    factored = len(shape) > 1
    shapes = adafactor_state_shapes(shape)
    wants = (shapes + (None,)) if factored else (None, None, shape)
    for name, a, want in zip(("row", "col", "var"), (row, col, var), wants):
        if want is not None:
            _check_like(func, name, a, want, optional=False, dtype=param.dtype)
        elif a is not None:  # a moment the step does not use: returned unchanged
            _check_like(func, name, a, None)
    out_shapes = tuple(None if a is None else tuple(a.shape) for a in (row, col, var))
    p_bar, row_bar, col_bar, var_bar = _cotangents(
        func, cotangents, ("param", "row", "col", "var"), (shape,) + out_shapes, param.dtype)
    p_bar = _or_zeros(xp, p_bar, param)

    e1 = float(xp.finfo(param.dtype).eps) if eps[0] is None else eps[0]
    e2 = eps[1]
    n = math.sqrt(max(math.prod(shape), 1))
    rho_is_lr = step is None or lr <= 1.0 / math.sqrt(step)  # ties: to lr
    rho = lr if rho_is_lr else 1.0 / math.sqrt(step)

    # forward
    rms_p = xp.linalg.vector_norm(param) / n
    rms_active = rms_p >= e2  # ties: to RMS(p)
    a0 = xp.where(rms_active, rms_p, xp.full_like(rms_p, e2))
    alpha = a0 * rho
    g = -grad if maximize else grad
    g2 = g * g
    if factored:
        r_new = row + rate * (xp.mean(g2, axis=-1, keepdims=True) - row)
        c_new = col + rate * (xp.mean(g2, axis=-2, keepdims=True) - col)
        mr = xp.mean(r_new, axis=-2, keepdims=True)
        mr_active = mr >= e1
        q = xp.where(mr_active, mr, xp.full_like(mr, e1))
        vhat = r_new * c_new / q
    else:
        v_new = var + rate * (g2 - var)
        vhat = v_new
    w_active = vhat >= e1 * e1
    w = xp.where(w_active, vhat, xp.full_like(vhat, e1 * e1))
    inv_root = 1.0 / xp.sqrt(w)
    u = g * inv_root
    rms_u = xp.linalg.vector_norm(u) / n
    clip_active = rms_u / d >= 1.0  # ties: to RMS(U)/d
    den = xp.where(clip_active, rms_u / d, xp.ones_like(rms_u))
    scale = alpha / den  # p_new = p1 - scale * u

    # backward
    scale_bar = -_dot(xp, p_bar, u)
    u_bar = -scale * p_bar
    alpha_bar = scale_bar / den
    den_bar = -scale_bar * alpha / (den * den)
    u_bar = u_bar + _rms_vjp(xp, u, n, xp.where(clip_active, den_bar / d,
                                                  xp.zeros_like(den_bar)))
    g_bar = u_bar * inv_root
    w_bar = -0.5 * u_bar * g * inv_root / w
    vhat_bar = xp.where(w_active, w_bar, xp.zeros_like(w_bar))
    if factored:
        rn_bar = xp.sum(vhat_bar * c_new, axis=-1, keepdims=True) / q
        cn_bar = xp.sum(vhat_bar * r_new, axis=-2, keepdims=True) / q
        q_bar = -xp.sum(vhat_bar * vhat, axis=(-2, -1), keepdims=True) / q
        mr_bar = xp.where(mr_active, q_bar, xp.zeros_like(q_bar))
        rn_bar = rn_bar + mr_bar / shape[-2]
        if row_bar is not None:
            rn_bar = rn_bar + row_bar
        if col_bar is not None:
            cn_bar = cn_bar + col_bar
        g2_bar = rate * (rn_bar / shape[-1] + cn_bar / shape[-2])
        row_in, col_in = (1.0 - rate) * rn_bar, (1.0 - rate) * cn_bar
        var_in = None if var is None else _or_zeros(xp, var_bar, var)
    else:
        vn_bar = vhat_bar if var_bar is None else vhat_bar + var_bar
        g2_bar = rate * vn_bar
        var_in = (1.0 - rate) * vn_bar
        row_in = None if row is None else _or_zeros(xp, row_bar, row)
        col_in = None if col is None else _or_zeros(xp, col_bar, col)
    g_bar = g_bar + 2.0 * g * g2_bar
    grad_bar = -g_bar if maximize else g_bar

    a_bar = xp.where(rms_active, alpha_bar * rho, xp.zeros_like(alpha_bar))
    lr_bar = alpha_bar * a0 if rho_is_lr else xp.zeros_like(alpha_bar)  # d rho / d lr
    if weight_decay != 0:
        lr_bar = lr_bar - weight_decay * _dot(xp, p_bar, param)
        param_bar = (1.0 - lr * weight_decay) * p_bar
    else:
        param_bar = p_bar
    param_bar = param_bar + _rms_vjp(xp, param, n, a_bar)
    return AdafactorVJP(param_bar, grad_bar, row_in, col_in, var_in, lr_bar)
