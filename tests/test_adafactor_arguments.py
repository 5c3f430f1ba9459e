"""Adafactor's decay rule from the caller's keys: an explicit ``beta2_decay`` (torch's own
argument) without ``decay`` selects torch's rule; ``decay="debiased"`` with an explicit
``beta2_decay`` is refused.

The torch trajectory is checked against the stored golden run (tests/data/optim_golden.npz,
torch.optim.Adafactor with lr=1e-2 and its default beta2_decay=-0.8) always, and against
a live torch run when torch is installed.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import numpy as np
import pytest

import tessera_array as xp
from tessera_array import optim
from tessera_array.optim import adafactor_decay

DATA = os.path.join(os.path.dirname(__file__), "data")
sys.path.insert(0, DATA)
import make_optim_golden as golden

GOLDEN = dict(np.load(os.path.join(DATA, "optim_golden.npz")))


def _have_torch() -> bool:
    try:
        return importlib.util.find_spec("torch") is not None
    except ValueError:
        return False


def _np(a):
    return np.asarray(a._device._backend.to_host(a._data))


def _run(device, steps=golden.STEPS, **kwargs):
    params = {n: xp.asarray(GOLDEN[f"init/{n}"].copy(), device=device) for n in golden.SHAPES}
    opt = optim.Adafactor(params, **kwargs)
    traj = {n: [] for n in golden.SHAPES}
    for t in range(1, steps + 1):
        opt.step({n: xp.asarray(golden.grad(GOLDEN, n, _np(params[n]), t), device=device)
                  for n in golden.SHAPES})
        for n in golden.SHAPES:
            traj[n].append(_np(params[n]).copy())
    return opt, {n: np.stack(v) for n, v in traj.items()}


def test_torch_arguments_follow_the_stored_torch_trajectory(device):
    opt, ours = _run(device, lr=1e-2, beta2_decay=-0.8)
    assert opt.hyper["decay"] == "pytorch"
    for n in golden.SHAPES:
        np.testing.assert_allclose(ours[n], GOLDEN[f"adafactor_default/traj/{n}"],
                                   rtol=1e-10, atol=0, err_msg=n)


@pytest.mark.skipif(not _have_torch(), reason="torch is not installed (the stored "
                    "trajectory is still checked)")
def test_torch_arguments_follow_live_torch(device):
    theirs = golden.run_torch(GOLDEN, "Adafactor", {"lr": 1e-2, "beta2_decay": -0.8})
    _, ours = _run(device, lr=1e-2, beta2_decay=-0.8)
    for n in golden.SHAPES:
        np.testing.assert_allclose(ours[n], theirs[n], rtol=1e-10, atol=0, err_msg=n)


def _one(**kwargs):
    p = xp.asarray(np.linspace(-1.0, 1.0, 12).reshape(4, 3))
    opt = optim.Adafactor({"w": p}, **kwargs)
    opt.step({"w": xp.asarray(np.cos(np.arange(12.0)).reshape(4, 3))})
    opt.step({"w": xp.asarray(np.sin(np.arange(12.0)).reshape(4, 3))})
    return opt, np.asarray(p), np.asarray(opt.state[0]["row_var"])


def test_rule_selection():
    assert _one()[0].hyper["decay"] == "debiased"
    assert _one()[0].hyper["beta2_decay"] == -0.8
    assert _one(beta2_decay=-0.5)[0].hyper["decay"] == "pytorch"
    assert _one(decay="pytorch")[0].hyper["beta2_decay"] == -0.8
    # The rules really differ at step 2, and beta2_decay alone gives the pytorch rule's
    # numbers: row_var = (1 - 2**-0.5) * row_1 + 2**-0.5 * mean(g_2**2) (the debiased rule
    # would weigh them with adafactor_decay(0.999, 2)).
    g1 = np.cos(np.arange(12.0)).reshape(4, 3)
    g2 = np.sin(np.arange(12.0)).reshape(4, 3)
    r1, r2 = (g1**2).mean(-1, keepdims=True), (g2**2).mean(-1, keepdims=True)
    w = 2.0**-0.5
    np.testing.assert_allclose(_one(beta2_decay=-0.5)[2], (1 - w) * r1 + w * r2, rtol=1e-14)
    b = adafactor_decay(0.999, 2)
    np.testing.assert_allclose(_one()[2], b * r1 + (1 - b) * r2, rtol=1e-14)
    a, b = _one(beta2_decay=-0.5)[1], _one(decay="pytorch", beta2_decay=-0.5)[1]
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(_one()[1], _one(beta2_decay=-0.8)[1], rtol=1e-6, atol=0)


def test_conflicting_pair_names_both():
    p = {"w": xp.ones((2, 2))}
    with pytest.raises(ValueError, match=r"^Adafactor: .*decay='debiased', "
                                         r"beta2_decay=-0\.8"):
        optim.Adafactor(p, beta2_decay=-0.8, decay="debiased")
    with pytest.raises(ValueError, match=r"^adafactor: .*decay='debiased', beta2_decay=-0\.5"):
        optim.adafactor([p["w"]], [p["w"]], [None], [None], [xp.zeros((2, 2))], step=1,
                        beta2_decay=-0.5, decay="debiased")
    with pytest.raises(ValueError, match=r"^Adafactor: decay must be one of"):
        optim.Adafactor(p, decay="torch")
