"""Adam: the flat op ``adam``, its reference, and ``Adam``.

Update rule (torch.optim.Adam), step :math:`t` counting from 1:

.. math::

    g &\\leftarrow \\pm g + \\lambda p \\quad (- \\text{ if maximize}; \\lambda = \\text{weight\\_decay}) \\\\
    m_t &= \\beta_1 m_{t-1} + (1 - \\beta_1) g, \\quad
    v_t = \\beta_2 v_{t-1} + (1 - \\beta_2) g^2 \\quad (\\beta_1, \\beta_2 = \\text{betas}) \\\\
    \\hat v &= \\max(\\hat v_{t-1}, v_t) \\text{ if amsgrad else } v_t \\\\
    p &\\leftarrow p - \\frac{\\gamma}{1 - \\beta_1^t}
        \\frac{m_t}{\\sqrt{\\hat v} / \\sqrt{1 - \\beta_2^t} + \\epsilon}
    \\quad (\\gamma = \\text{lr}, \\epsilon = \\text{eps})

AdamW (:mod:`.adamw`) differs only in the weight decay: ``p *= 1 - lr*weight_decay``
before the update instead of adding ``weight_decay*p`` to the gradient.
"""

from __future__ import annotations

from typing import ClassVar

from .._array import Array
from ._base import (
    Optimizer,
    check_beta,
    check_lists,
    check_nonneg,
    check_step,
    natives,
    run_groups,
)

__all__ = ["Adam", "adam", "adam_reference"]


def check_adam_hyper(func, lr, betas, eps, weight_decay):
    check_nonneg(func, "lr", lr)
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise TypeError(f"{func}: betas must be a pair (beta1, beta2). Received: betas={betas!r}")
    check_beta(func, "betas[0]", betas[0])
    check_beta(func, "betas[1]", betas[1])
    check_nonneg(func, "eps", eps)
    check_nonneg(func, "weight_decay", weight_decay)


def adam_family(op, func, params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, *, step, lr,
                betas, eps, weight_decay, amsgrad, maximize, check_finite=False):
    check_adam_hyper(func, lr, betas, eps, weight_decay)
    check_step(func, step)
    if amsgrad and max_exp_avg_sqs is None:
        raise ValueError(f"{func}: amsgrad=True needs max_exp_avg_sqs. Received: None")
    maxes = max_exp_avg_sqs if amsgrad else None
    check_lists(func, params, grads,
                {"exp_avgs": exp_avgs, "exp_avg_sqs": exp_avg_sqs, "max_exp_avg_sqs": maxes})
    for name, lst in (("exp_avgs", exp_avgs), ("exp_avg_sqs", exp_avg_sqs),
                      ("max_exp_avg_sqs", maxes)):
        if lst is None:
            continue
        for i, (p, s) in enumerate(zip(params, lst)):
            if s is None or s.shape != p.shape:
                raise ValueError(
                    f"{func}: {name}[{i}] must have its parameter's shape. "
                    f"Received: params[{i}].shape={p.shape}, "
                    f"{name}[{i}].shape={None if s is None else s.shape}"
                )
    run_groups(func, op, params, grads, check_finite, lambda kernel, idx, check: kernel(
        natives(params, idx), natives(grads, idx), natives(exp_avgs, idx),
        natives(exp_avg_sqs, idx), natives(maxes, idx),
        lr=float(lr), beta1=float(betas[0]), beta2=float(betas[1]), eps=float(eps),
        weight_decay=float(weight_decay), amsgrad=bool(amsgrad), maximize=bool(maximize),
        step=step, check_finite=check,
    ))


def adam(params: list, grads: list, exp_avgs: list, exp_avg_sqs: list,
         max_exp_avg_sqs: list | None = None, *, step: int, lr: float = 1e-3,
         betas: tuple = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0,
         amsgrad: bool = False, maximize: bool = False, check_finite: bool = False) -> None:
    """One Adam step on every tensor of ``params``, in place (the ``adam_step`` kernel).

    ``step`` is the number of this update (1 for the first); moments are updated in
    place. With ``check_finite``, a NaN/inf gradient raises ValueError and nothing is
    updated.
    """
    adam_family("adam_step", "adam", params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs,
                step=step, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                amsgrad=amsgrad, maximize=maximize, check_finite=check_finite)


def adam_reference(param: Array, grad: Array, m: Array, v: Array, vmax: Array | None = None, *,
                   step: int, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                   weight_decay: float = 0.0, amsgrad: bool = False, maximize: bool = False,
                   decoupled: bool = False):
    """The plain ``xp`` form of one Adam/AdamW step: ``(param, m, v, vmax)``, new arrays."""
    import tessera_array as xp

    b1, b2 = betas
    g = -grad if maximize else grad
    if weight_decay != 0:
        if decoupled:
            param = param * (1.0 - lr * weight_decay)
        else:
            g = g + weight_decay * param
    m = m + (1.0 - b1) * (g - m)
    v = b2 * v + (1.0 - b2) * (g * g)
    if amsgrad:
        vmax = xp.maximum(vmax, v)
        vhat = vmax
    else:
        vhat = v
    denom = xp.sqrt(vhat) / (1.0 - b2**step) ** 0.5 + eps
    return param - (lr / (1.0 - b1**step)) * (m / denom), m, v, vmax


class Adam(Optimizer):
    """Adam over a tree of parameters (torch.optim.Adam's names and defaults).

    Parameters
    ----------
    params : Array or nested dict/list/tuple of Arrays
        Updated in place by :meth:`step`.
    lr, betas, eps, weight_decay, amsgrad, maximize
        As in torch.optim.Adam (see the module's update rule).
    check_finite : bool
        Raise ValueError naming the parameter on a NaN/inf gradient (default).
    """

    _name = "Adam"
    _op = "adam_step"
    _decoupled = False
    _torch_state_keys: ClassVar[dict] = {"exp_avg": "exp_avg", "exp_avg_sq": "exp_avg_sq",
                         "max_exp_avg_sq": "max_exp_avg_sq"}

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, *, maximize: bool = False,
                 check_finite: bool = True):
        check_adam_hyper(self._name, lr, betas, eps, weight_decay)
        hyper = {"lr": lr, "betas": tuple(betas), "eps": eps, "weight_decay": weight_decay,
                 "amsgrad": amsgrad, "maximize": maximize}
        super().__init__(params, hyper, check_finite=check_finite)

    def _init_state(self, p):
        import tessera_array as xp

        st = {"exp_avg": xp.zeros_like(p), "exp_avg_sq": xp.zeros_like(p)}
        if self.hyper["amsgrad"]:
            st["max_exp_avg_sq"] = xp.zeros_like(p)
        return st

    def _validate_hyper(self):
        h = self.hyper
        h["betas"] = tuple(h["betas"])
        check_adam_hyper(f"{self._name}.load_state_dict", h["lr"], h["betas"], h["eps"],
                         h["weight_decay"])

    def _update(self, grads):
        st = self.state
        adam_family(self._op, self._name.lower(), self._params, grads,
                    [s["exp_avg"] for s in st], [s["exp_avg_sq"] for s in st],
                    [s.get("max_exp_avg_sq") for s in st] if self.hyper["amsgrad"] else None,
                    step=self.step_count, check_finite=self.check_finite, **self.hyper)

    def _torch_group(self):
        return dict(self.hyper, foreach=None, capturable=False, differentiable=False,
                    fused=None, decoupled_weight_decay=self._decoupled)
