"""The optim suite: one optimizer step of tessera_array against torch.optim on the CPU.

Adam, AdamW and Adafactor (torch's decay rule, so both sides compute the same
update), float32, default hyperparameters, timed side by side with
``torch.optim.<Name>(params, foreach=True)`` in the same process:

=========  =====================================  ===============================
variant    parameters                             tessera / torch
=========  =====================================  ===============================
10x1M      10 tensors of 1,000,000 (10M)          ``opt.step(grads)`` / ``topt.step()``
6x2048sq   6 matrices of 2048 x 2048 (25.2M)      ``opt.step(grads)`` / ``topt.step()``
=========  =====================================  ===============================

The tessera side is the tree optimizer with its defaults, including the
finiteness check of the gradients (torch has none). Target: ratio <= 1.2 for Adam
on 10M parameters. Without torch every benchmark reports ``unavailable`` (torch
is not a dependency: ``pip install torch`` to measure). The suite needs a host
device (torch's peer here is its CPU implementation).
"""

from __future__ import annotations

__all__ = ["benchmarks"]

OPTIMIZERS = ("Adam", "AdamW", "Adafactor")
LAYOUTS = {
    "10x1M": [(1_000_000,)] * 10,
    "6x2048sq": [(2048, 2048)] * 6,
}
QUICK_LAYOUTS = {"10x1M": [(100_000,)] * 10, "6x2048sq": [(256, 256)] * 6}
TARGETS = {("Adam", "10x1M"): 1.2}
SOURCES = (
    "tessera_array/optim/*.py",
    "backends/numpy/optim.py",
    "tessera_array/_dispatch.py",
    "tessera_array/_array.py",
    "tessera_array/_elementwise_functions.py",
    "tessera_array/_utility_functions.py",
)


def _make_setup(xp, device, name, shapes):
    def setup() -> dict:
        import numpy as np

        from benchmarks._core import Unavailable

        try:
            import torch
        except ImportError as err:
            raise Unavailable(f"torch is missing (the peer): {err}") from err
        from tessera_array import optim

        rng = np.random.default_rng(20261130)
        p0 = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
        g0 = [rng.standard_normal(s, dtype=np.float32) for s in shapes]
        params = [xp.asarray(p.copy(), device=device) for p in p0]
        grads = [xp.asarray(g, device=device) for g in g0]
        kwargs = {"decay": "pytorch"} if name == "Adafactor" else {}
        opt = getattr(optim, name)(params, **kwargs)
        tparams = [torch.tensor(p.copy(), requires_grad=True) for p in p0]
        for tp, g in zip(tparams, g0):
            tp.grad = torch.from_numpy(g)
        topt = getattr(torch.optim, name)(tparams, foreach=True)
        return {"opt": opt, "grads": grads, "topt": topt, "params": params,
                "tparams": tparams, "np": np}

    return setup


def _check(t, p, ns):
    """After one step each, from the same start, the parameters agree (float32).

    atol 2e-5 against updates of up to ~5e-2: torch's float32 Adafactor on 2048 x 2048
    is itself 4e-6 away from the float64 update (tessera's 5e-7).
    """
    np = ns["np"]
    for a, b in zip(ns["params"], ns["tparams"]):
        np.testing.assert_allclose(np.asarray(a), b.detach().numpy(), rtol=1e-4, atol=2e-5)


def benchmarks(ctx) -> list:
    """The optim benchmarks for ``ctx.device`` (a host device: the peer is torch on the CPU)."""
    from benchmarks._core import Benchmark, Unavailable

    xp, device = ctx.xp, ctx.device
    layouts = QUICK_LAYOUTS if ctx.quick else LAYOUTS
    out = []
    for name in OPTIMIZERS:
        for variant, shapes in layouts.items():
            if device._backend.is_host:
                setup = _make_setup(xp, device, name, shapes)
            else:
                def setup(_dev=device):
                    raise Unavailable(f"the optim suite's peer is torch on the CPU; {_dev} is "
                                      f"not a host device (a torch-CUDA peer comes later)")
            size = sum(int(np_prod(s)) for s in shapes)
            out.append(Benchmark(
                suite="optim",
                name=name.lower(),
                variant=variant,
                tessera="opt.step(grads)",
                peer="topt.step()",
                setup=setup,
                sources=SOURCES,
                params={"layout": f"{len(shapes)} x {shapes[0]}", "size": size,
                        "dtype": "float32"},
                peer_name="torch",
                target=TARGETS.get((name, variant)),
                check=_check,
            ))
    return out


def np_prod(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n
