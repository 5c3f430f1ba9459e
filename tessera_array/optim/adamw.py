"""AdamW: Adam with decoupled weight decay (the flat op ``adamw`` and ``AdamW``).

The update is :mod:`.adam`'s, with weight decay applied to the parameter before
the step, :math:`p \\leftarrow p (1 - \\gamma \\lambda)` (:math:`\\gamma` = lr,
:math:`\\lambda` = weight_decay), instead of being added to the gradient.
"""

from __future__ import annotations

from .adam import Adam, adam_family

__all__ = ["AdamW", "adamw"]


def adamw(params: list, grads: list, exp_avgs: list, exp_avg_sqs: list,
          max_exp_avg_sqs: list | None = None, *, step: int, lr: float = 1e-3,
          betas: tuple = (0.9, 0.999), eps: float = 1e-8, weight_decay: float = 1e-2,
          amsgrad: bool = False, maximize: bool = False, check_finite: bool = False) -> None:
    """One AdamW step on every tensor of ``params``, in place (the ``adamw_step`` kernel)."""
    adam_family("adamw_step", "adamw", params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs,
                step=step, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                amsgrad=amsgrad, maximize=maximize, check_finite=check_finite)


class AdamW(Adam):
    """AdamW over a tree of parameters (torch.optim.AdamW's names and defaults).

    As :class:`~tessera_array.optim.Adam`, with ``weight_decay=1e-2`` decoupled.
    """

    _name = "AdamW"
    _op = "adamw_step"
    _decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas: tuple = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 check_finite: bool = True):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         check_finite=check_finite)
