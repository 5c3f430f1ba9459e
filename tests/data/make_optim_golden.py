"""Write tests/data/optim_golden.npz: 100-step torch.optim trajectories (float64).

Run from the repository root with torch installed (it is not a dependency):

    python tests/data/make_optim_golden.py

Each case runs one torch.optim optimizer for STEPS steps on three float64
parameters, with the gradient ``grad(p, t) = c*(p - target) + 0.05*cos(0.3*t + phase)``
computed in NumPy from the current parameters, so tests/test_optim.py can feed
tessera_array's optimizers the same gradients. Stored per case: the torch
constructor kwargs (JSON), and the parameters after every step.
"""

from __future__ import annotations

import json
import os

import numpy as np

STEPS = 100
SHAPES = {"w": (4, 3), "b": (5,), "k": (2, 3, 4)}

CASES = {
    "sgd_plain": ("SGD", {"lr": 0.05}),
    "sgd_momentum": ("SGD", {"lr": 0.05, "momentum": 0.9, "dampening": 0.1,
                             "weight_decay": 0.01}),
    "sgd_nesterov": ("SGD", {"lr": 0.05, "momentum": 0.9, "nesterov": True,
                             "weight_decay": 0.01}),
    "sgd_maximize": ("SGD", {"lr": 0.01, "momentum": 0.5, "maximize": True}),
    "adam_default": ("Adam", {"lr": 0.01}),
    "adam_amsgrad_wd": ("Adam", {"lr": 0.01, "betas": [0.8, 0.99], "eps": 1e-6,
                                 "weight_decay": 0.05, "amsgrad": True}),
    "adam_maximize": ("Adam", {"lr": 0.01, "maximize": True}),
    "adamw_default": ("AdamW", {"lr": 0.01}),
    "adamw_amsgrad": ("AdamW", {"lr": 0.01, "weight_decay": 0.1, "amsgrad": True}),
    "adafactor_default": ("Adafactor", {"lr": 0.01}),
    "adafactor_options": ("Adafactor", {"lr": 0.05, "beta2_decay": -0.5, "eps": [1e-20, 1e-3],
                                        "d": 1.5, "weight_decay": 0.01, "maximize": True}),
}


def problem():
    """Initial parameters and the gradient's coefficients (fixed seed)."""
    rng = np.random.default_rng(20261130)
    out = {}
    for name, shape in SHAPES.items():
        out[f"init/{name}"] = rng.standard_normal(shape)
        out[f"c/{name}"] = rng.uniform(0.5, 2.0, shape)
        out[f"target/{name}"] = rng.standard_normal(shape)
        out[f"phase/{name}"] = rng.uniform(0, 2 * np.pi, shape)
    return out


def grad(prob, name, p, t):
    """The gradient of parameter ``name`` (a NumPy float64 array) at step ``t``."""
    return prob[f"c/{name}"] * (p - prob[f"target/{name}"]) + 0.05 * np.cos(
        0.3 * t + prob[f"phase/{name}"])


def torch_kwargs(kwargs):
    out = dict(kwargs)
    for k in ("betas", "eps"):
        if isinstance(out.get(k), list):
            out[k] = tuple(out[k])
    return out


def run_torch(prob, cls_name, kwargs, steps=STEPS):
    import torch

    params = [torch.tensor(prob[f"init/{n}"], dtype=torch.float64, requires_grad=True)
              for n in SHAPES]
    opt = getattr(torch.optim, cls_name)(params, **torch_kwargs(kwargs))
    traj = {n: np.empty((steps,) + SHAPES[n]) for n in SHAPES}
    for t in range(1, steps + 1):
        for n, p in zip(SHAPES, params):
            p.grad = torch.from_numpy(grad(prob, n, p.detach().numpy(), t))
        opt.step()
        for n, p in zip(SHAPES, params):
            traj[n][t - 1] = p.detach().numpy()
    return traj


def main():
    import torch

    prob = problem()
    data = dict(prob)
    for case, (cls_name, kwargs) in CASES.items():
        data[f"{case}/spec"] = np.array(json.dumps({"optimizer": cls_name, "kwargs": kwargs}))
        for n, arr in run_torch(prob, cls_name, kwargs).items():
            data[f"{case}/traj/{n}"] = arr
    data["torch_version"] = np.array(torch.__version__)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "optim_golden.npz")
    np.savez_compressed(path, **data)
    print(f"wrote {path} ({os.path.getsize(path)} bytes, {len(CASES)} cases)")


if __name__ == "__main__":
    main()
