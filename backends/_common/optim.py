"""The optimizer-step launchers every device backend builds the same way.

A backend writes one Adam core, ``adam(func, params, grads, exp_avgs, exp_avg_sqs,
max_exp_avg_sqs, *, lr, beta1, beta2, eps, weight_decay, amsgrad, maximize, step,
decoupled, check_finite)``; :func:`adam_launchers` makes the two registered launchers
from it (the contract's ``adam_step`` and ``adamw_step`` signatures).
"""

from __future__ import annotations

__all__ = ["adam_launchers"]


def adam_launchers(adam):
    """``(adam_step, adamw_step)`` over the backend's Adam core ``adam``."""

    def adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, *, lr, beta1, beta2,
                  eps, weight_decay, amsgrad, maximize, step, check_finite=False):
        """Adam (L2 weight decay added to the gradient), in place; ``step`` counts from 1."""
        return adam("adam_step", params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, lr=lr,
                    beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay,
                    amsgrad=amsgrad, maximize=maximize, step=step, decoupled=False,
                    check_finite=check_finite)

    def adamw_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, *, lr, beta1, beta2,
                   eps, weight_decay, amsgrad, maximize, step, check_finite=False):
        """AdamW (decoupled weight decay: p *= 1 - lr*weight_decay first), in place."""
        return adam("adamw_step", params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, lr=lr,
                    beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay,
                    amsgrad=amsgrad, maximize=maximize, step=step, decoupled=True,
                    check_finite=check_finite)

    return adam_step, adamw_step
