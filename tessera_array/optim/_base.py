"""What every optimizer shares: parameter trees, checks, kernel dispatch, state I/O.

A tree optimizer holds its parameters as the leaves of a nested dict/list/tuple
(leaves are :class:`~tessera_array.Array`), updates them in place through the flat
multi-tensor op of its family, and keeps one integer step counter. Its state lives
on the parameters' device and is saved with :meth:`Optimizer.state_dict`.
"""

from __future__ import annotations

from typing import ClassVar

from .. import _dtypes
from .._array import Array
from .._dispatch import lookup

__all__ = ["NonFiniteGradientError", "Optimizer", "flatten_tree", "optimizer_kernel"]

STATE_FORMAT = "tessera_array.optim/1"
_FLOATS = (_dtypes.float32, _dtypes.float64)


# ---- trees -------------------------------------------------------------------


def _path_str(root: str, path: tuple) -> str:
    return root + "".join(f"[{k!r}]" for k in path)


def flatten_tree(tree, func: str, root: str = "params"):
    """``(leaves, paths)`` of a nested dict/list/tuple of Arrays, in traversal order.

    Dict keys are visited in insertion order; ``paths`` are key tuples.
    """
    leaves, paths = [], []

    def walk(node, path):
        if isinstance(node, Array):
            leaves.append(node)
            paths.append(path)
        elif isinstance(node, dict):
            for k, v in node.items():
                walk(v, path + (k,))
        elif isinstance(node, (list, tuple)):
            for i, v in enumerate(node):
                walk(v, path + (i,))
        else:
            raise TypeError(
                f"{func}: {root} must be an Array or a nested dict/list/tuple of Arrays. "
                f"Received: {_path_str(root, path)} of type {type(node).__name__}"
            )

    walk(tree, ())
    return leaves, paths


def _match_grads(tree, paths, func: str) -> list:
    """The gradient leaves of ``tree`` in the order of ``paths``; errors name what differs."""
    leaves, gpaths = flatten_tree(tree, func, "grads")
    index = dict(zip(gpaths, leaves))
    missing = [p for p in paths if p not in index]
    if missing:
        raise ValueError(
            f"{func}: grads must have one gradient for every parameter. "
            f"Received: no gradient for {', '.join(_path_str('params', p) for p in missing)}"
        )
    if len(index) != len(paths):
        known = set(paths)
        extra = [p for p in gpaths if p not in known]
        raise ValueError(
            f"{func}: grads has entries that are not parameters. "
            f"Received: {', '.join(_path_str('grads', p) for p in extra)}"
        )
    return [index[p] for p in paths]


# ---- checks ------------------------------------------------------------------


def check_nonneg(func: str, name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{func}: {name} must be a real number. Received: {name}={value!r}")
    if not value >= 0:  # also rejects NaN
        raise ValueError(f"{func}: {name} must be >= 0. Received: {name}={value!r}")
    return float(value)


def check_beta(func: str, name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{func}: {name} must be a real number. Received: {name}={value!r}")
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{func}: {name} must be in [0, 1). Received: {name}={value!r}")
    return float(value)


def check_step(func: str, step, *, optional: bool = False):
    if step is None and optional:
        return None
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise ValueError(
            f"{func}: step must be an integer >= 1 (the number of this update). "
            f"Received: step={step!r}"
        )
    return step


def check_lists(func: str, params, grads, states: dict) -> None:
    """Flat-op argument checks: equal-length lists, Arrays, matching shape/dtype/device."""
    if not isinstance(params, (list, tuple)) or not isinstance(grads, (list, tuple)):
        raise TypeError(
            f"{func}: params and grads must be lists of Arrays. "
            f"Received: params of type {type(params).__name__}, "
            f"grads of type {type(grads).__name__}"
        )
    n = len(params)
    if len(grads) != n:
        raise ValueError(
            f"{func}: grads must have one entry per parameter. "
            f"Received: len(params)={n}, len(grads)={len(grads)}"
        )
    for name, lst in states.items():
        if lst is not None and len(lst) != n:
            raise ValueError(
                f"{func}: {name} must have one entry per parameter. "
                f"Received: len(params)={n}, len({name})={len(lst)}"
            )
    for i in range(n):
        p, g = params[i], grads[i]
        for nm, a in (("params", p), ("grads", g)):
            if not isinstance(a, Array):
                raise TypeError(
                    f"{func}: {nm}[{i}] must be a tessera_array Array. "
                    f"Received: {nm}[{i}] of type {type(a).__name__}"
                )
        if p._dtype not in _FLOATS:
            raise TypeError(
                f"{func}: parameters must be float32 or float64. "
                f"Received: params[{i}].dtype={p._dtype}"
            )
        _check_like(func, p, g, f"grads[{i}]", i)
        for name, lst in states.items():
            if lst is not None and lst[i] is not None:
                s = lst[i]
                if not isinstance(s, Array):
                    raise TypeError(
                        f"{func}: {name}[{i}] must be a tessera_array Array. "
                        f"Received: {name}[{i}] of type {type(s).__name__}"
                    )
                if s._dtype is not p._dtype or s._device is not p._device:
                    raise _mismatch(func, p, s, f"{name}[{i}]", i)


def _mismatch(func, p, a, name, i):
    from .._errors import DeviceMismatchError

    if a._device is not p._device:
        return DeviceMismatchError(
            f"{func}: {name} must be on its parameter's device. "
            f"Received: params[{i}].device={p._device}, {name}.device={a._device}"
        )
    return TypeError(
        f"{func}: {name} must have its parameter's dtype. "
        f"Received: params[{i}].dtype={p._dtype}, {name}.dtype={a._dtype}"
    )


def _check_like(func, p, g, name, i):
    if g._dtype is not p._dtype or g._device is not p._device:
        raise _mismatch(func, p, g, name, i)
    if g.shape != p.shape:
        raise ValueError(
            f"{func}: {name} must have its parameter's shape. "
            f"Received: params[{i}].shape={p.shape}, {name}.shape={g.shape}"
        )


def groups(params) -> dict:
    """Indices of ``params`` grouped by (device, dtype): one kernel call per group."""
    out: dict = {}
    for i, p in enumerate(params):
        out.setdefault((p._device, p._dtype), []).append(i)
    return out


def optimizer_kernel(op: str, device, dtype):
    """The registered launcher of ``op`` (``sgd_step`` ...) for ``dtype`` on ``device``."""
    return lookup(op, device, dtype)


class NonFiniteGradientError(ValueError):
    """A gradient holds NaN or inf (``check_finite=True``); nothing was updated.

    ``index`` is the position of the first such gradient in the flat list.
    """

    def __init__(self, message: str, index: int):
        super().__init__(message)
        self.index = index


def nonfinite_error(func: str, index: int, name: str | None = None) -> NonFiniteGradientError:
    name = f"grads[{index}]" if name is None else name
    return NonFiniteGradientError(
        f"{func}: gradient is not finite (NaN or inf). Received: non-finite values in {name}. "
        f"Pass check_finite=False to apply it anyway.", index)


def run_groups(func: str, op: str, params, grads, check_finite: bool, call) -> None:
    """``call(kernel, idx, check)`` for each (device, dtype) group of ``params``.

    With one group the kernel checks the gradients itself (one parallel read before
    any update); with several, they are all checked here first, so that a NaN in a
    later group cannot leave an earlier one updated.
    """
    grp = groups(params)
    fused = check_finite and len(grp) == 1
    if check_finite and not fused:
        import tessera_array as xp

        for i, g in enumerate(grads):
            if not bool(xp.all(xp.isfinite(g))):  # sync
                raise nonfinite_error(func, i)
    for (dev, dt), idx in grp.items():
        bad = call(optimizer_kernel(op, dev, dt), idx, fused)
        if bad:
            raise nonfinite_error(func, idx[bad[0]])


def natives(lst, idx):
    if lst is None:
        return None
    return [None if lst[i] is None else lst[i]._data for i in idx]


# ---- tree optimizers ---------------------------------------------------------


class Optimizer:
    """Base class of the tree optimizers (one parameter group).

    Subclasses define ``_name``, ``_torch_state_keys`` (our state key -> torch's),
    ``_init_state(p)`` and ``_update(grads)``.
    """

    _name = "Optimizer"
    _torch_state_keys: ClassVar[dict] = {}
    _torch_has_step = True

    def __init__(self, params, hyper: dict, *, check_finite: bool = True):
        leaves, paths = flatten_tree(params, self._name)
        if not leaves:
            raise ValueError(f"{self._name}: params is empty. Received: params={params!r}")
        for path, p in zip(paths, leaves):
            if p._dtype not in _FLOATS:
                raise TypeError(
                    f"{self._name}: parameters must be float32 or float64. "
                    f"Received: {_path_str('params', path)}.dtype={p._dtype}"
                )
        self._params = leaves
        self._paths = paths
        self.hyper = hyper
        self.check_finite = bool(check_finite)
        self.step_count = 0  # exact integer, whatever the parameter dtype
        self.state = [self._init_state(p) for p in leaves]

    @property
    def params(self) -> list:
        """The parameters, flattened in traversal order (updated in place by step)."""
        return list(self._params)

    def __repr__(self):
        hp = ", ".join(f"{k}={v!r}" for k, v in self.hyper.items())
        return f"{self._name}({len(self._params)} parameters, step={self.step_count}, {hp})"

    def step(self, grads) -> None:
        """Update every parameter in place with ``grads`` (same structure as params).

        Raises ValueError for missing or extra gradients, a shape mismatch, or (with
        ``check_finite``, the default) a NaN/inf gradient, naming the parameter; the
        parameters and state are then left untouched.
        """
        func = f"{self._name}.step"
        flat = _match_grads(grads, self._paths, func)
        for i, (p, g) in enumerate(zip(self._params, flat)):
            if not isinstance(g, Array):
                raise TypeError(f"{func}: gradients must be Arrays. Received: {type(g).__name__}")
            try:
                _check_like(func, p, g, _path_str("grads", self._paths[i]), i)
            except (TypeError, ValueError) as err:
                msg = str(err).replace(f"params[{i}]", _path_str("params", self._paths[i]))
                raise type(err)(msg) from err
        self.step_count += 1
        try:
            self._update(flat)
        except NonFiniteGradientError as err:
            self.step_count -= 1
            raise nonfinite_error(func, err.index,
                                  _path_str("grads", self._paths[err.index])) from err
        except BaseException:
            self.step_count -= 1
            raise

    # ---- state I/O ------------------------------------------------------------

    def state_dict(self) -> dict:
        """A copy of the state: ``{"format", "step", "state": {i: {...}}, "param_groups"}``."""
        import tessera_array as xp

        return {
            "format": STATE_FORMAT,
            "optimizer": self._name,
            "step": self.step_count,
            "state": {
                i: {k: (xp.asarray(v, copy=True) if isinstance(v, Array) else v)
                    for k, v in st.items()}
                for i, st in enumerate(self.state)
            },
            "param_groups": [dict(self.hyper, params=list(range(len(self._params))))],
        }

    def load_state_dict(self, state_dict: dict) -> None:
        """Load a :meth:`state_dict` (copied onto each parameter's device).

        Its hyperparameters replace the optimizer's, as in torch; on any error
        nothing changes.
        """
        func = f"{self._name}.load_state_dict"
        if not isinstance(state_dict, dict) or "state" not in state_dict:
            raise TypeError(f"{func}: expected a dict from state_dict(). Received: {state_dict!r}")
        if state_dict.get("optimizer", self._name) != self._name:
            raise ValueError(
                f"{func}: the state belongs to another optimizer. "
                f"Received: optimizer={state_dict.get('optimizer')!r}"
            )
        step = state_dict.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"{func}: step must be an integer >= 0. Received: step={step!r}")
        states = state_dict["state"]
        if len(states) != len(self._params):
            raise ValueError(
                f"{func}: the state has {len(states)} parameters, this optimizer "
                f"{len(self._params)}. Received: len(state)={len(states)}"
            )
        # Hyperparameters come from the saved group (as in torch); the state is built
        # for them. Nothing changes unless everything loads.
        old_hyper = self.hyper
        groups_ = state_dict.get("param_groups")
        self.hyper = dict(old_hyper)
        if groups_:
            self.hyper.update({k: v for k, v in groups_[0].items() if k in self.hyper})
        try:
            self._validate_hyper()
            new = self._load_states(states, step, func)
        except BaseException:
            self.hyper = old_hyper
            raise
        self.state = new
        self.step_count = step

    def _load_states(self, states, step, func):
        import tessera_array as xp

        new = []
        for i, p in enumerate(self._params):
            fresh = self._init_state(p)
            src = states[i]
            for k, v in fresh.items():
                if not isinstance(v, Array):
                    continue
                if k not in src:
                    raise ValueError(f"{func}: state[{i}] lacks {k!r}. Received: {sorted(src)}")
                a = xp.asarray(src[k], dtype=p.dtype, device=p.device, copy=True)
                if a.shape != v.shape:
                    raise ValueError(
                        f"{func}: state[{i}][{k!r}] must have shape {v.shape}. "
                        f"Received: shape={a.shape}"
                    )
                fresh[k] = a
            new.append(self._load_extra(fresh, src, step, func))
        return new

    def _load_extra(self, fresh, src, step, func):
        return fresh

    def _validate_hyper(self):
        pass

    # ---- PyTorch layout ---------------------------------------------------------

    def _torch_group(self) -> dict:
        raise NotImplementedError

    def to_torch_state_dict(self) -> dict:
        """The state in ``torch.optim``'s ``state_dict()`` layout, with NumPy arrays.

        Feed it to torch with ``torch.from_numpy`` on each array (no torch import here).
        """
        import numpy as np

        state = {}
        if self.step_count > 0:
            for i, st in enumerate(self.state):
                entry = {}
                if self._torch_has_step:
                    entry["step"] = np.asarray(float(self.step_count), dtype=np.float32)
                for ours, theirs in self._torch_state_keys.items():
                    if isinstance(st.get(ours), Array):
                        entry[theirs] = to_numpy(st[ours])
                state[i] = entry
        group = self._torch_group()
        group["params"] = list(range(len(self._params)))
        return {"state": state, "param_groups": [group]}

    def from_torch_state_dict(self, torch_state: dict) -> None:
        """Load a ``torch.optim`` ``state_dict()`` whose tensors were turned into NumPy arrays."""
        import numpy as np

        func = f"{self._name}.from_torch_state_dict"
        st = torch_state.get("state", {})
        steps = set()
        ours = []
        for i, p in enumerate(self._params):
            src = st.get(i, {})
            entry = {}
            for mine, theirs in self._torch_state_keys.items():
                if src.get(theirs) is not None:
                    entry[mine] = np.asarray(src[theirs])
            if "step" in src:
                s = float(np.asarray(src["step"]))
                if s != int(s):
                    raise ValueError(f"{func}: step must be integral. Received: step={s}")
                steps.add(int(s))
            ours.append(entry)
        if len(steps) > 1:
            raise ValueError(
                f"{func}: every parameter must be at the same step. Received: steps={sorted(steps)}"
            )
        step = steps.pop() if steps else (self._torch_implicit_step(st))
        fresh = self.state_dict()
        for i, entry in enumerate(ours):
            fresh["state"][i].update(entry)
            fresh["state"][i].update(self._from_torch_marks())
        fresh["step"] = step
        fresh["param_groups"] = [self._group_from_torch(torch_state["param_groups"][0])]
        self.load_state_dict(fresh)

    def _torch_implicit_step(self, st):
        return 0

    def _from_torch_marks(self) -> dict:
        return {}

    def _group_from_torch(self, group: dict) -> dict:
        return {k: v for k, v in group.items() if k in self.hyper}


def to_numpy(a: Array):
    """A NumPy copy of ``a`` (from any device)."""
    import numpy as np

    return np.array(a._device._backend.to_host(a._data), copy=True)
