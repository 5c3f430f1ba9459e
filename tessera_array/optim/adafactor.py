"""Adafactor: the flat op ``adafactor``, its reference, ``Adafactor``, and its decay.

Update rule (torch.optim.Adafactor's, Shazeer & Stern 2018), step :math:`t`:

.. math::

    \\rho_t &= \\min(\\gamma, 1/\\sqrt t), \\quad
    \\alpha_t = \\max(\\epsilon_2, \\mathrm{RMS}(p)) \\rho_t
    \\quad (\\gamma = \\text{lr}; \\epsilon_1, \\epsilon_2 = \\text{eps}) \\\\
    p &\\leftarrow p (1 - \\gamma \\lambda) \\quad (\\lambda = \\text{weight\\_decay}) \\\\
    R_t &= \\hat\\beta_{2,t} R_{t-1} + (1 - \\hat\\beta_{2,t}) \\mathrm{mean}_{-1}(g^2), \\quad
    C_t = \\hat\\beta_{2,t} C_{t-1} + (1 - \\hat\\beta_{2,t}) \\mathrm{mean}_{-2}(g^2) \\\\
    \\hat V &= R_t C_t / \\max(\\mathrm{mean}(R_t), \\epsilon_1)
        \\quad \\text{(2+ dims; 0-d and 1-d keep } V_t \\text{ unfactored)} \\\\
    U &= g / \\sqrt{\\max(\\hat V, \\epsilon_1^2)}, \\quad
    p \\leftarrow p - \\frac{\\alpha_t}{\\max(1, \\mathrm{RMS}(U)/d)} U

The decay :math:`\\hat\\beta_{2,t}` is, with ``decay="debiased"`` (the default unless
``beta2_decay`` is given),
:func:`adafactor_decay` ``(beta2, t)`` :math:`= \\beta_2 (1 - \\beta_2^{t-1})/(1 - \\beta_2^t)`,
which keeps the caller's ``beta2`` and makes :math:`V_t` the bias-corrected EMA
:math:`\\tilde V_t/(1 - \\beta_2^t)`; with ``decay="pytorch"`` it is PyTorch's
:math:`1 - t^{\\text{beta2\\_decay}}`. Both give :math:`V_1 = g^2`. The flat op
called without ``step`` keeps the legacy uncorrected decay :math:`\\beta_2`, whose
state is the raw EMA :math:`\\tilde V_t` (it never resets state silently).
An explicit ``beta2_decay`` without ``decay`` selects ``"pytorch"`` (the rule that reads
it); ``decay="debiased"`` with an explicit ``beta2_decay`` raises ValueError.

The state records which of the two the second moment holds in ``v_representation``
(``"debiased"`` or ``"raw_ema"``). Loading an unmarked state at step > 0 warns with
:class:`AdafactorStateWarning`; :func:`migrate_adafactor_state` converts explicitly.
"""

from __future__ import annotations

import math
import warnings
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

__all__ = [
    "Adafactor",
    "AdafactorStateWarning",
    "adafactor",
    "adafactor_decay",
    "adafactor_reference",
    "adafactor_state_shapes",
    "migrate_adafactor_state",
]

DECAY_RULES = ("debiased", "pytorch")
REPRESENTATIONS = ("debiased", "raw_ema")


class AdafactorStateWarning(UserWarning):
    """An Adafactor state without ``v_representation`` was loaded at step > 0."""


def adafactor_decay(beta2: float, step: int) -> float:
    """The step-dependent decay ``beta2*(1 - beta2**(step-1))/(1 - beta2**step)``.

    The one decay function of every Adafactor implementation (tree form, flat op,
    each backend's kernel receives ``1 - adafactor_decay(...)`` as its rate).
    Equal to 0 at step 1 (the first moment is ``g**2``) and tending to ``beta2``.
    """
    return beta2 * (1.0 - beta2 ** (step - 1)) / (1.0 - beta2**step)


BETA2_DECAY = -0.8  # torch.optim.Adafactor's default


def resolve_decay(func: str, beta2_decay, decay) -> tuple:
    """``(beta2_decay, decay)`` with the caller's keys kept: ``beta2_decay`` given without
    ``decay`` selects the rule that reads it (``"pytorch"``, torch's own arguments give
    torch's trajectory); neither given: ``"debiased"``; ``decay="debiased"`` with an
    explicit ``beta2_decay`` is a conflict (that rule would ignore it)."""
    if decay is None:
        decay = "debiased" if beta2_decay is None else "pytorch"
    elif decay not in DECAY_RULES:
        raise ValueError(f"{func}: decay must be one of {DECAY_RULES}. Received: decay={decay!r}")
    elif decay == "debiased" and beta2_decay is not None:
        raise ValueError(
            f"{func}: decay='debiased' uses beta2 and would ignore beta2_decay; pass "
            f"decay='pytorch' to use beta2_decay, or leave beta2_decay out. Received: "
            f"decay={decay!r}, beta2_decay={beta2_decay!r}"
        )
    return (BETA2_DECAY if beta2_decay is None else beta2_decay), decay


def decay_rate(func: str, step, beta2: float, beta2_decay: float, decay: str):
    """``(1 - beta2_t, v_representation)`` for this step, on the host."""
    if decay not in DECAY_RULES:
        raise ValueError(f"{func}: decay must be one of {DECAY_RULES}. Received: decay={decay!r}")
    if step is None:
        if decay == "pytorch":
            raise ValueError(
                f"{func}: decay='pytorch' needs the step number. Received: step=None"
            )
        return 1.0 - beta2, "raw_ema"  # legacy: uncorrected, state kept
    if decay == "pytorch":
        return float(step) ** beta2_decay, "debiased"
    return 1.0 - adafactor_decay(beta2, step), "debiased"


def adafactor_state_shapes(shape: tuple):
    """``(row_shape, col_shape)`` for 2+ dims, else None (an unfactored ``variance``)."""
    if len(shape) < 2:
        return None
    return shape[:-1] + (1,), shape[:-2] + (1, shape[-1])


def _check_hyper(func, lr, beta2, beta2_decay, eps, d, weight_decay):
    check_nonneg(func, "lr", lr)
    check_beta(func, "beta2", beta2)
    if isinstance(beta2_decay, bool) or not isinstance(beta2_decay, (int, float)) \
            or not beta2_decay <= 0:
        raise ValueError(f"{func}: beta2_decay must be <= 0. Received: beta2_decay={beta2_decay!r}")
    if not isinstance(eps, (tuple, list)) or len(eps) != 2:
        raise TypeError(f"{func}: eps must be a pair (eps1, eps2). Received: eps={eps!r}")
    if eps[0] is not None:
        check_nonneg(func, "eps[0]", eps[0])
    check_nonneg(func, "eps[1]", eps[1])
    check_nonneg(func, "d", d)
    if d == 0:
        raise ValueError(f"{func}: d must be > 0. Received: d={d!r}")
    check_nonneg(func, "weight_decay", weight_decay)


def adafactor(params: list, grads: list, row_vars: list, col_vars: list, variances: list, *,
              step: int | None = None, lr: float = 1e-2, beta2: float = 0.999,
              beta2_decay: float | None = None, decay: str | None = None,
              eps: tuple = (None, 1e-3), d: float = 1.0, weight_decay: float = 0.0,
              maximize: bool = False, check_finite: bool = False) -> str:
    """One Adafactor step on every tensor of ``params``, in place (``adafactor_step``).

    ``row_vars``/``col_vars`` hold the factored moments of 2+-dim parameters (None
    for the others), ``variances`` the moments of 0-d/1-d ones (None for the others).
    Without ``step`` the legacy uncorrected decay ``beta2`` is used and the relative
    step size is ``lr``. ``beta2_decay``/``decay`` as in :class:`Adafactor`. Returns the
    ``v_representation`` of the state written. With ``check_finite``, a NaN/inf gradient
    raises ValueError and nothing is updated.
    """
    func = "adafactor"
    beta2_decay, decay = resolve_decay(func, beta2_decay, decay)
    _check_hyper(func, lr, beta2, beta2_decay, eps, d, weight_decay)
    step = check_step(func, step, optional=True)
    rate, rep = decay_rate(func, step, beta2, beta2_decay, decay)
    check_lists(func, params, grads,
                {"row_vars": row_vars, "col_vars": col_vars, "variances": variances})
    for i, p in enumerate(params):
        shapes = adafactor_state_shapes(p.shape)
        want = (("row_vars", shapes[0]), ("col_vars", shapes[1])) if shapes else \
            (("variances", p.shape),)
        for name, shape in want:
            s = {"row_vars": row_vars, "col_vars": col_vars, "variances": variances}[name][i]
            if s is None or s.shape != shape:
                raise ValueError(
                    f"{func}: {name}[{i}] must have shape {shape} for params[{i}].shape={p.shape}. "
                    f"Received: {name}[{i}]={'None' if s is None else s.shape}"
                )
    rho = lr if step is None else min(lr, 1.0 / math.sqrt(step))
    run_groups(func, "adafactor_step", params, grads, check_finite,
               lambda kernel, idx, check: kernel(
                   natives(params, idx), natives(grads, idx), natives(row_vars, idx),
                   natives(col_vars, idx), natives(variances, idx),
                   lr=float(lr), rho=float(rho), rate=float(rate),
                   eps1=None if eps[0] is None else float(eps[0]), eps2=float(eps[1]),
                   d=float(d), weight_decay=float(weight_decay), maximize=bool(maximize),
                   check_finite=check,
               ))
    return rep


def _lerp(a, b, w):
    return a + w * (b - a) if w < 0.5 else b - (b - a) * (1.0 - w)


def adafactor_reference(param: Array, grad: Array, row: Array | None, col: Array | None,
                        var: Array | None, *, step: int | None = None, lr: float = 1e-2,
                        beta2: float = 0.999, beta2_decay: float | None = None,
                        decay: str | None = None, eps: tuple = (None, 1e-3), d: float = 1.0,
                        weight_decay: float = 0.0, maximize: bool = False):
    """The plain ``xp`` form of one Adafactor step: ``(param, row, col, var)``, new arrays
    (``beta2_decay``/``decay`` as in :class:`Adafactor`)."""
    import tessera_array as xp

    beta2_decay, decay = resolve_decay("adafactor_reference", beta2_decay, decay)
    rate, _ = decay_rate("adafactor_reference", step, beta2, beta2_decay, decay)
    rho = lr if step is None else min(lr, 1.0 / math.sqrt(step))
    e1 = float(xp.finfo(param.dtype).eps) if eps[0] is None else eps[0]
    n = math.sqrt(max(param.size, 1))
    alpha = max(eps[1], float(xp.linalg.vector_norm(param)) / n) * rho  # sync
    if weight_decay != 0:
        param = param * (1.0 - lr * weight_decay)
    g = -grad if maximize else grad
    g2 = g * g
    if param.ndim > 1:
        row = _lerp(row, xp.mean(g2, axis=-1, keepdims=True), rate)
        col = _lerp(col, xp.mean(g2, axis=-2, keepdims=True), rate)
        vhat = row * col / xp.maximum(xp.mean(row, axis=-2, keepdims=True), e1)
    else:
        var = _lerp(var, g2, rate)
        vhat = var
    u = g / xp.sqrt(xp.maximum(vhat, e1 * e1))
    denom = max(1.0, float(xp.linalg.vector_norm(u)) / n / d)  # sync
    return param - (alpha / denom) * u, row, col, var


def migrate_adafactor_state(state_dict: dict, *, beta2: float | None = None,
                            to: str = "debiased") -> dict:
    """Convert an Adafactor ``state_dict()`` to the ``to`` representation of ``v``.

    An unmarked state is taken as the legacy ``"raw_ema"``. ``"raw_ema" -> "debiased"``
    divides the moments by ``1 - beta2**step``; the reverse multiplies. A state already
    in ``to`` is returned unchanged (a no-op). ``beta2`` defaults to the state's own.
    Returns a new dict; the input is not modified.
    """
    func = "migrate_adafactor_state"
    if to not in REPRESENTATIONS:
        raise ValueError(f"{func}: to must be one of {REPRESENTATIONS}. Received: to={to!r}")
    if not isinstance(state_dict, dict) or "state" not in state_dict:
        raise TypeError(f"{func}: expected an Adafactor state_dict(). Received: {state_dict!r}")
    if beta2 is None:
        beta2 = state_dict.get("param_groups", [{}])[0].get("beta2")
        if beta2 is None:
            raise ValueError(f"{func}: the state has no beta2; pass it. Received: beta2=None")
    check_beta(func, "beta2", beta2)
    step = state_dict.get("step", 0)
    out = dict(state_dict)
    out["state"] = {}
    for i, st in state_dict["state"].items():
        st = dict(st)
        rep = st.get("v_representation", "raw_ema")
        if rep not in REPRESENTATIONS:
            raise ValueError(
                f"{func}: unknown v_representation. Received: state[{i}]"
                f"['v_representation']={rep!r}"
            )
        if rep != to and step > 0:
            c = 1.0 - beta2**step
            scale = 1.0 / c if to == "debiased" else c
            for k in ("row_var", "col_var", "variance"):
                if k in st:
                    st[k] = st[k] * scale
        st["v_representation"] = to
        out["state"][i] = st
    return out


class Adafactor(Optimizer):
    """Adafactor over a tree of parameters (torch.optim.Adafactor's names and defaults).

    Parameters
    ----------
    params : Array or nested dict/list/tuple of Arrays
        Updated in place by :meth:`step`.
    lr, eps, d, weight_decay, maximize
        As in torch.optim.Adafactor (see the module's update rule).
    beta2_decay : float or None
        PyTorch's decay exponent (``1 - t**beta2_decay``; torch's default -0.8). Given
        without ``decay``, it selects ``decay="pytorch"``: torch's arguments give
        torch.optim.Adafactor's trajectory.
    foreach : bool or None
        Accepted for torch compatibility; every kernel is multi-tensor, so the result
        does not depend on it.
    beta2 : float
        The decay of the second moment for ``decay="debiased"``.
    decay : {"debiased", "pytorch"} or None
        ``"debiased"``: :func:`adafactor_decay` ``(beta2, t)``; ``"pytorch"``:
        ``1 - t**beta2_decay``, which reproduces torch.optim.Adafactor. None (default):
        ``"pytorch"`` when ``beta2_decay`` is given, else ``"debiased"``.

    Raises
    ------
    ValueError
        ``decay="debiased"`` with an explicit ``beta2_decay`` (the rule would ignore
        it), naming both; a hyperparameter out of range.
    check_finite : bool
        Raise ValueError naming the parameter on a NaN/inf gradient (default).
    """

    _name = "Adafactor"
    _torch_state_keys: ClassVar[dict] = {"row_var": "row_var", "col_var": "col_var", "variance": "variance"}

    def __init__(self, params, lr: float = 1e-2, beta2_decay: float | None = None,
                 eps: tuple = (None, 1e-3), d: float = 1.0, weight_decay: float = 0.0,
                 *, foreach: bool | None = None, maximize: bool = False, beta2: float = 0.999,
                 decay: str | None = None, check_finite: bool = True):
        beta2_decay, decay = resolve_decay("Adafactor", beta2_decay, decay)
        _check_hyper("Adafactor", lr, beta2, beta2_decay, eps, d, weight_decay)
        hyper = {"lr": lr, "beta2_decay": beta2_decay, "eps": tuple(eps), "d": d,
                 "weight_decay": weight_decay, "foreach": foreach, "maximize": maximize,
                 "beta2": beta2, "decay": decay}
        super().__init__(params, hyper, check_finite=check_finite)

    def _init_state(self, p):
        import tessera_array as xp

        shapes = adafactor_state_shapes(p.shape)
        if shapes is None:
            st = {"variance": xp.zeros_like(p)}
        else:
            st = {"row_var": xp.zeros(shapes[0], dtype=p.dtype, device=p.device),
                  "col_var": xp.zeros(shapes[1], dtype=p.dtype, device=p.device)}
        st["v_representation"] = "debiased"
        return st

    def _validate_hyper(self):
        h = self.hyper
        h["eps"] = tuple(h["eps"])
        _check_hyper("Adafactor.load_state_dict", h["lr"], h["beta2"], h["beta2_decay"],
                     h["eps"], h["d"], h["weight_decay"])

    def _load_extra(self, fresh, src, step, func):
        rep = src.get("v_representation")
        if rep is None:
            if step > 0:
                warnings.warn(
                    f"{func}: the Adafactor state has no v_representation marker at step "
                    f"{step}; it is loaded as 'debiased'. If it comes from the legacy "
                    f"uncorrected decay, convert it first with migrate_adafactor_state().",
                    AdafactorStateWarning, stacklevel=3,
                )
        elif rep != "debiased":
            raise ValueError(
                f"{func}: the tree optimizer keeps v debiased. Received: "
                f"v_representation={rep!r}; convert with migrate_adafactor_state(state, "
                f"to='debiased')"
            )
        fresh["v_representation"] = "debiased"
        return fresh

    def _update(self, grads):
        st = self.state
        h = self.hyper
        adafactor(self._params, grads, [s.get("row_var") for s in st],
                  [s.get("col_var") for s in st], [s.get("variance") for s in st],
                  step=self.step_count, lr=h["lr"], beta2=h["beta2"],
                  beta2_decay=h["beta2_decay"] if h["decay"] == "pytorch" else None,
                  decay=h["decay"], eps=h["eps"], d=h["d"],
                  weight_decay=h["weight_decay"], maximize=h["maximize"],
                  check_finite=self.check_finite)

    def _torch_group(self):
        h = self.hyper
        return {k: h[k] for k in ("lr", "beta2_decay", "eps", "d", "weight_decay", "foreach",
                                  "maximize")}

    def _from_torch_marks(self):
        return {"v_representation": "debiased"}
