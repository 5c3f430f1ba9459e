"""Stochastic gradient descent: the flat op ``sgd``, its reference, and ``SGD``.

Update rule (torch.optim.SGD), for parameter :math:`p`, gradient :math:`g`:

.. math::

    g &\\leftarrow \\pm g + \\lambda p \\quad (- \\text{ if maximize}; \\lambda = \\text{weight\\_decay}) \\\\
    b_t &= \\mu b_{t-1} + (1 - \\tau) g, \\quad b_1 = g
        \\quad (\\mu = \\text{momentum}, \\tau = \\text{dampening}) \\\\
    g &\\leftarrow g + \\mu b_t \\text{ if nesterov else } b_t \\\\
    p &\\leftarrow p - \\gamma g \\quad (\\gamma = \\text{lr})
"""

from __future__ import annotations

from typing import ClassVar

from .._array import Array
from ._base import (
    Optimizer,
    check_lists,
    check_nonneg,
    check_step,
    natives,
    run_groups,
)

__all__ = ["SGD", "sgd", "sgd_reference"]


def _check_hyper(func, lr, momentum, dampening, weight_decay, nesterov):
    check_nonneg(func, "lr", lr)
    check_nonneg(func, "momentum", momentum)
    check_nonneg(func, "dampening", dampening)
    check_nonneg(func, "weight_decay", weight_decay)
    if nesterov and (momentum <= 0 or dampening != 0):
        raise ValueError(
            f"{func}: nesterov needs momentum > 0 and dampening = 0. "
            f"Received: momentum={momentum!r}, dampening={dampening!r}"
        )


def sgd(params: list, grads: list, momentum_buffers: list | None, *, step: int, lr: float,
        momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0,
        nesterov: bool = False, maximize: bool = False, check_finite: bool = False) -> None:
    """One SGD step on every tensor of ``params``, in place (the ``sgd_step`` kernel).

    ``momentum_buffers`` (one per parameter, updated in place) is needed when
    ``momentum != 0``; at ``step == 1`` they are set to the gradient. With
    ``check_finite``, a NaN/inf gradient raises ValueError and nothing is updated.
    """
    func = "sgd"
    _check_hyper(func, lr, momentum, dampening, weight_decay, nesterov)
    check_step(func, step)
    if momentum != 0 and momentum_buffers is None:
        raise ValueError(f"{func}: momentum != 0 needs momentum_buffers. Received: None")
    bufs = momentum_buffers if momentum != 0 else None
    check_lists(func, params, grads, {"momentum_buffers": bufs})
    run_groups(func, "sgd_step", params, grads, check_finite, lambda kernel, idx, check: kernel(
        natives(params, idx), natives(grads, idx), natives(bufs, idx),
        lr=float(lr), momentum=float(momentum), dampening=float(dampening),
        weight_decay=float(weight_decay), nesterov=bool(nesterov),
        maximize=bool(maximize), first=step == 1, check_finite=check,
    ))


def sgd_reference(param: Array, grad: Array, buf: Array | None, *, step: int, lr: float,
                  momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0,
                  nesterov: bool = False, maximize: bool = False):
    """The plain ``xp`` form of one SGD step: returns ``(new_param, new_buf)``."""
    g = -grad if maximize else grad
    if weight_decay != 0:
        g = g + weight_decay * param
    if momentum != 0:
        buf = g if step == 1 else momentum * buf + (1.0 - dampening) * g
        g = g + momentum * buf if nesterov else buf
    return param - lr * g, buf


class SGD(Optimizer):
    """Stochastic gradient descent over a tree of parameters (torch.optim.SGD's names).

    Parameters
    ----------
    params : Array or nested dict/list/tuple of Arrays
        Updated in place by :meth:`step`.
    lr, momentum, dampening, weight_decay, nesterov, maximize
        As in torch.optim.SGD (see the module's update rule).
    check_finite : bool
        Raise ValueError naming the parameter on a NaN/inf gradient (default).
    """

    _name = "SGD"
    _torch_state_keys: ClassVar[dict] = {"momentum_buffer": "momentum_buffer"}
    _torch_has_step = False

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, *, maximize: bool = False,
                 check_finite: bool = True):
        _check_hyper("SGD", lr, momentum, dampening, weight_decay, nesterov)
        hyper = {"lr": lr, "momentum": momentum, "dampening": dampening,
                 "weight_decay": weight_decay, "nesterov": nesterov, "maximize": maximize}
        super().__init__(params, hyper, check_finite=check_finite)

    def _init_state(self, p):
        import tessera_array as xp

        if self.hyper["momentum"] != 0:
            return {"momentum_buffer": xp.zeros_like(p)}
        return {}

    def _validate_hyper(self):
        h = self.hyper
        _check_hyper("SGD.load_state_dict", h["lr"], h["momentum"], h["dampening"],
                     h["weight_decay"], h["nesterov"])

    def _update(self, grads):
        bufs = [st.get("momentum_buffer") for st in self.state]
        sgd(self._params, grads, bufs if self.hyper["momentum"] != 0 else None,
            step=self.step_count, check_finite=self.check_finite, **self.hyper)

    def _torch_group(self):
        return dict(self.hyper, foreach=None, differentiable=False, fused=None)

    def _torch_implicit_step(self, st):
        # torch's SGD keeps no step: a stored momentum buffer means it has stepped.
        return 1 if any(e.get("momentum_buffer") is not None for e in st.values()) else 0
