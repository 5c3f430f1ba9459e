"""The cuda_attention suite: ``xp.nn.attention`` (and ``attention_backward``) in float16
and bfloat16 on a CUDA GPU against torch's ``scaled_dot_product_attention`` (its flash
backend) on the same GPU, TFLOP/s side by side.

Needs a ``cuda:N`` device (``--device cuda:N``) and a CUDA build of torch on the same GPU.

=================  ==============================================  ====================
benchmark          tessera (``--quick``: S 1024, D 128 only)        peer
=================  ==============================================  ====================
attention_fwd      ``nn.attention(q, k, v, ...)`` B=8 H=16 S=2048,  ``sdpa(q, k, v, ...)``
                   D 128 and 64, bf16 and fp16, causal and not,
                   dropout 0 and 0.1
attention_fwd_bwd  the forward, then ``nn.attention_backward``      ``sdpa(...)`` then
                   (dropout 0 and 0.1, not causal)                  ``out.backward(g)``
=================  ==============================================  ====================

Targets (ratio = tessera time / torch time; the issue's): forward without dropout
<= 1/0.6, with dropout 0.1 <= 1.0, forward+backward <= 1/0.5. FLOPs as torch and
FlashAttention count them: forward 4 B H S^2 D, forward+backward 3.5x that (2x: the
backward's five products against the forward's two), half of each when causal; the
report gives each side's TFLOP/s. The dropout masks differ between the sides (torch's
Philox layout is not tessera's); the check compares the two without dropout only.

Timing: CUDA events on CuPy's stream for tessera, torch's events on its stream, medians
over rounds after warm-up (:class:`~benchmarks._core.CudaEventTimer`).
"""

from __future__ import annotations

import math

from .cuda_vs_peers import _torch, _torch_timers

__all__ = ["benchmarks"]

SUITE = "cuda_attention"
SEED = 20261206
_SOURCES = (
    "backends/_cupy/flash.py",
    "backends/_cupy/attention.py",
    "kernels/cuda/flash_attention.cu",
    "kernels/cuda/flash_attention_sm90.cu",
    "kernels/cuda/attention.cu",
    "kernels/include/tessera/flash.cuh",
    "kernels/include/tessera/philox.cuh",
    "tessera_array/nn/_attention.py",
)


def _setup(ctx, shape, dtype, causal, p, backward):
    def setup():
        torch = _torch(ctx.device)
        import tessera_array as xp

        tdt = getattr(torch, dtype)
        g = torch.Generator(device=f"cuda:{ctx.device.index}").manual_seed(SEED)
        tq, tk, tv, tg = (torch.randn(shape, device=f"cuda:{ctx.device.index}", dtype=tdt,
                                      generator=g) for _ in range(4))
        q, k, v, dout = (xp.from_dlpack(t) for t in (tq, tk, tv, tg))
        kw = {"is_causal": causal}
        if p:
            kw.update(dropout_p=p, seed=SEED)
        for t in (tq, tk, tv):
            t.requires_grad_(backward)

        def ours():
            if backward:
                out, lse = xp.nn.attention(q, k, v, return_lse=True, **kw)
                return xp.nn.attention_backward(q, k, v, out, dout, lse, **kw)
            return xp.nn.attention(q, k, v, **kw)

        def theirs():
            from torch.nn.attention import SDPBackend, sdpa_kernel

            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                out = torch.nn.functional.scaled_dot_product_attention(
                    tq, tk, tv, is_causal=causal, dropout_p=p)
            if backward:
                tq.grad = tk.grad = tv.grad = None
                out.backward(tg)
                return tq.grad, tk.grad, tv.grad
            return out

        return {"ours": ours, "theirs": theirs, "torch": torch, "p": p, "dtype": dtype}

    return setup


def _check(t, p, ns):
    """Without dropout, each output within the dtype's tolerance of torch's (relative to
    its largest element); with dropout nothing (the masks differ by design)."""
    if ns["p"]:
        return
    torch = ns["torch"]
    tol = {"bfloat16": 3e-2, "float16": 5e-3}[ns["dtype"]]
    ts = t if isinstance(t, tuple) else (t,)
    ps = p if isinstance(p, tuple) else (p,)
    for a, b in zip(ts, ps):
        a = torch.from_dlpack(a).float()
        b = b.float()
        err = float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))
        if not err <= tol:
            raise AssertionError(f"attention: tessera and torch differ by {err:.3g} "
                                 f"(relative), above {tol}")


def benchmarks(ctx) -> list:
    from ._core import Benchmark

    s = 1024 if ctx.quick else 2048
    dims = (128,) if ctx.quick else (128, 64)
    out = []
    for d in dims:
        for dtype in ("bfloat16", "float16"):
            for backward in (False, True):
                for causal in ((False,) if backward else (False, True)):
                    for p in (0.0, 0.1):
                        shape = (8, 16, s, d)
                        flops = 4 * 8 * 16 * s * s * d * (3.5 if backward else 1.0)
                        flops /= 2 if causal else 1
                        if backward:
                            target = 1 / 0.5
                        else:
                            target = 1.0 if p else 1 / 0.6
                        name = "attention_fwd_bwd" if backward else "attention_fwd"
                        label = (f"{name} D={d} {dtype}{' causal' if causal else ''}"
                                 f" p={p}")
                        out.append(Benchmark(
                            suite=SUITE, name=name,
                            variant=f"S{s} D{d} {dtype} causal={int(causal)} p={p}",
                            tessera="ours()", peer="theirs()",
                            setup=_setup(ctx, shape, dtype, causal, p, backward),
                            sources=_SOURCES,
                            params={"label": label, "shape": shape,
                                    "dtype": dtype, "causal": causal, "dropout_p": p,
                                    "flops": math.floor(flops)},
                            peer_name="torch", check=_check, timers=_torch_timers,
                            target=target))
    return out
