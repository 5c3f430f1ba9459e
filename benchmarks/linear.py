"""The linear suite: ``nn.linear`` with bias and residual against torch on the CPU.

``nn.linear(x, w, b, r)`` (``x @ w.T + b + r``) against
``torch.addmm(tb, tx, tw.T) + tr``, the same float32 operands, timed side by side in
one process:

=========  ===================================  ===========================================
variant    shapes (x, w, b, r)                  tessera / torch
=========  ===================================  ===========================================
4096       (4096, 4096) (4096, 4096) (4096,)    ``nn.linear(x, w, b, r)`` /
           (4096, 4096)                         ``torch.addmm(tb, tx, tw.T) + tr``
1024       (1024, 1024) ... (1024, 1024)        the same
=========  ===================================  ===========================================

The NumPy backend's launcher is one BLAS sgemm (SciPy's OpenBLAS) over the output
pre-filled with ``b + r`` (beta = 1); torch's addmm pre-fills with ``b`` and its ``+ tr``
is another pass and allocation. Target: ratio <= 1.0 at 4096. Each batch is one call
(batch=1) after a pause and an untimed call of the side's own (``settle_s``, ``prime``),
so neither BLAS's threads run into the other's batch. Without torch every benchmark
reports ``unavailable`` (``pip install torch``). The suite needs a host device.
"""

from __future__ import annotations

__all__ = ["benchmarks"]

SIZES = {"4096": 4096, "1024": 1024}
QUICK_SIZES = {"4096": 512, "1024": 256}
TARGETS = {"4096": 1.0}
SETTLE_S = 0.05
SOURCES = (
    "tessera_array/nn/_linear.py",
    "backends/numpy/matvec.py",
    "tessera_array/_dispatch.py",
    "tessera_array/_array.py",
)


def _make_setup(xp, device, n):
    def setup() -> dict:
        import numpy as np

        from benchmarks._core import Unavailable

        try:
            import torch
        except ImportError as err:
            raise Unavailable(f"torch is missing (the peer): {err}") from err
        from tessera_array import nn

        rng = np.random.default_rng(20261202)
        x, w, r = (rng.standard_normal((n, n), dtype=np.float32) for _ in range(3))
        b = rng.standard_normal(n, dtype=np.float32)
        arrs = [xp.asarray(a, device=device) for a in (x, w, b, r)]
        tx, tw, tb, tr = (torch.from_numpy(a) for a in (x, w, b, r))
        return {"nn": nn, "torch": torch, "np": np, "x": arrs[0], "w": arrs[1],
                "b": arrs[2], "r": arrs[3], "tx": tx, "tw": tw, "tb": tb, "tr": tr}

    return setup


def _check(t, p, ns):
    """Both sides within float32 rounding of each other (K = n terms per dot product)."""
    np = ns["np"]
    a, b = np.asarray(t), p.numpy()
    assert np.abs(a - b).max() <= 1e-5 * np.abs(b).max(), np.abs(a - b).max()


def benchmarks(ctx) -> list:
    """The linear benchmarks for ``ctx.device`` (a host device: the peer is torch's CPU)."""
    from benchmarks._core import Benchmark, Unavailable

    xp, device = ctx.xp, ctx.device
    out = []
    for variant, n in (QUICK_SIZES if ctx.quick else SIZES).items():
        if device._backend.is_host:
            setup = _make_setup(xp, device, n)
        else:
            def setup(_dev=device):
                raise Unavailable(f"the linear suite's peer is torch on the CPU; {_dev} is "
                                  f"not a host device")
        out.append(Benchmark(
            suite="linear",
            name="linear_bias_residual",
            variant=variant,
            tessera="nn.linear(x, w, b, r)",
            peer="torch.addmm(tb, tx, tw.T) + tr",
            setup=setup,
            sources=SOURCES,
            params={"m x k x n": f"{n} x {n} x {n}", "dtype": "float32"},
            peer_name="torch",
            target=TARGETS.get(variant),
            check=_check,
            settle_s=SETTLE_S, prime=True, batch=1,
        ))
    return out
