"""The attention suite: tessera_array.nn.attention against torch's CPU SDPA and naive NumPy.

float32, B=4 H=8 S=1024 D=64 (``--quick``: B=1 H=4 S=512), causal and not, with
and without dropout (p = 0.1), timed side by side (see :mod:`benchmarks._core`):

==================  ==================================================  ===================
benchmark           tessera / peer                                      variants
==================  ==================================================  ===================
fwd_vs_torch        ``attn(q, k, v)`` / ``F.scaled_dot_product_attention(  full, causal,
                    tq, tk, tv)`` (torch's CPU flash kernel)            full-p0.1, causal-p0.1
fwd_vs_numpy        ``attn(q, k, v)`` / ``naive(a, b, c)``: the whole   same
                    ``softmax(QK^T/sqrt(D) + mask) V`` in NumPy
bwd_vs_torch        ``attn_bwd(q, k, v, out, dout, lse)`` /             same
                    ``tout.backward(tg, retain_graph=True)``
==================  ==================================================  ===================

``attn``/``attn_bwd`` are ``nn.attention``/``nn.attention_backward`` with the
variant's keywords bound (``is_causal``, ``dropout_p``, ``seed``). The naive peer
builds the ``B x H x S x S`` scores (128 MiB at full size); with dropout it multiplies
by the mask of ``nn.dropout_mask`` (computed in setup), so it agrees with tessera
to float32 rounding. torch's dropout draws its own mask (torch's CPU SDPA with
dropout takes its math path), so with dropout the torch pair is checked for shape
only. Targets (reported, not enforced; ``TARGETS``): tessera/torch <= 1.0 for the forward
and the backward without dropout at the full shape, <= 1.3 for the forward at the quick
one. The torch pairs are timed after a pause with a primed call (``TORCH_SETTLE_S``:
torch's OpenMP workers spin after each call). Without torch the torch benchmarks report ``unavailable``
(torch is not a dependency). The suite needs a host device (both peers run on the CPU).
"""

from __future__ import annotations

__all__ = ["benchmarks"]

SOURCES = (
    "tessera_array/nn/*.py",
    "tessera_array/random.py",
    "backends/numpy/attention.py",
    "backends/numpy/_attention_c.c",
    "backends/numpy/_attention_c.h",
    "backends/numpy/_threads.py",
    "backends/numpy/philox.py",
    "backends/numpy/__init__.py",
    "backends/numpy/_ops.py",
    "backends/numpy/_namespace.py",
    "backends/_xp/*.py",
    "tessera_array/_dispatch.py",
    "tessera_array/_array.py",
    "tessera_array/_helpers.py",
)
FULL, QUICK = (4, 8, 1024, 64), (1, 4, 512, 64)
DROPOUT_P, SEED = 0.1, 20261130
VARIANTS = {
    "full": {},
    "causal": {"is_causal": True},
    "full-p0.1": {"dropout_p": DROPOUT_P, "seed": SEED},
    "causal-p0.1": {"is_causal": True, "dropout_p": DROPOUT_P, "seed": SEED},
}
# Targets (reported, not enforced): at the full shape the forward and the backward at most
# torch's time, causal or not; at the --quick shape (one batch item, four heads) the
# forward within 1.3 of torch's.
TARGETS = {("fwd_vs_torch", "full"): 1.0, ("fwd_vs_torch", "causal"): 1.0,
           ("bwd_vs_torch", "full"): 1.0, ("bwd_vs_torch", "causal"): 1.0}
QUICK_TARGETS = {("fwd_vs_torch", "full"): 1.3, ("fwd_vs_torch", "causal"): 1.3}
# Each side's batch against torch starts after a short pause, with one untimed call of
# its own first (Benchmark.settle_s, prime): torch's OpenMP workers keep spinning on both
# cores after a call, and a tessera call right after one ran with them. The pause is
# short because a long one costs both sides on a VM: B=1 H=4 S=512 forward, 2-core EPYC,
# batches of 30 after each pause (mean ms a call, tessera / torch): no pause 1.96 / 2.18
# (a batch's first call 2.2-3.5), 5 ms 1.87 / 2.02 (first 1.8-2.1), 0.15 s 2.49 / 2.00
# (p90 3.77: the vCPUs idle that long come back slow).
TORCH_SETTLE_S = 0.005


def _make_setup(xp, device, shape, kw, needs_torch: bool):
    def setup() -> dict:
        import numpy as np

        from benchmarks._core import Unavailable
        from tessera_array import nn

        if not device._backend.is_host:
            raise Unavailable(f"the attention suite's peers run on the CPU; {device} is not "
                              f"a host device (a torch-CUDA peer comes with the GPU backends)")
        ns = {"np": np, "nn": nn, "xp": xp}
        if needs_torch:
            try:
                import torch
                import torch.nn.functional as F
            except ImportError as err:
                raise Unavailable(f"torch is missing (the peer): {err}") from err
            ns["torch"], ns["F"] = torch, F
        b, h, s, d = shape
        rng = np.random.default_rng(20261130)
        a, bb, c, g = (rng.standard_normal((b, h, s, d), dtype=np.float32) for _ in range(4))
        ns.update(a=a, b=bb, c=c)
        q, k, v = (xp.asarray(t, device=device) for t in (a, bb, c))
        ns.update(q=q, k=k, v=v)

        def attn(q, k, v):
            return nn.attention(q, k, v, **kw)

        out, lse = nn.attention(q, k, v, return_lse=True, **kw)
        dout = xp.asarray(g, device=device)

        def attn_bwd(q, k, v, out, dout, lse):
            return nn.attention_backward(q, k, v, out, dout, lse, **kw)

        ns.update(attn=attn, attn_bwd=attn_bwd, out=out, dout=dout, lse=lse)
        causal = bool(kw.get("is_causal"))
        p = kw.get("dropout_p", 0.0)
        keep = None
        if p:
            keep = np.asarray(nn.dropout_mask((b, h, s, s), p, seed=kw["seed"], device=device))
            keep = keep / np.float32(1 - p)
        tri = np.tril(np.ones((s, s), dtype=bool)) if causal else None

        def naive(a, b, c):
            """The whole formula in NumPy: scores, softmax, (dropout), product."""
            sc = (a @ np.swapaxes(b, -1, -2)) * np.float32(1 / np.sqrt(d))
            if tri is not None:
                sc = np.where(tri, sc, np.float32(-np.inf))
            sc -= sc.max(axis=-1, keepdims=True)
            np.exp(sc, out=sc)
            sc /= sc.sum(axis=-1, keepdims=True)
            if keep is not None:
                sc *= keep
            return sc @ c

        ns["naive"] = naive
        if needs_torch:
            tq, tk, tv = (torch.from_numpy(t.copy()).requires_grad_() for t in (a, bb, c))
            ns.update(tq=tq, tk=tk, tv=tv)
            tkw = {"is_causal": causal, "dropout_p": p}
            ns["tkw"] = tkw
            tout = F.scaled_dot_product_attention(tq, tk, tv, **tkw)
            ns.update(tout=tout, tg=torch.from_numpy(g))
        return ns

    return setup


def _check_fwd(t, p, ns):
    """Same shape; without dropout (or against the naive peer) the same values (float32)."""
    np = ns["np"]
    ta = np.asarray(t)
    pa = p.detach().numpy() if hasattr(p, "detach") else np.asarray(p)
    if ta.shape != tuple(pa.shape):
        raise AssertionError(f"shapes differ: tessera {ta.shape}, peer {tuple(pa.shape)}")
    if "tkw" in ns and ns["tkw"]["dropout_p"]:
        return  # torch drew its own dropout mask
    err = np.abs(ta - pa).max() / np.abs(pa).max()
    if not err <= 1e-5:
        raise AssertionError(f"relative error {err:.3g} > 1e-5")


def _check_bwd(t, p, ns):
    """tessera's dq against torch's (the peer only accumulates; it returns None)."""
    np = ns["np"]
    if ns["tkw"]["dropout_p"]:
        return
    dq = np.asarray(t[0])
    ns["tq"].grad = None
    ns["tout"].backward(ns["tg"], retain_graph=True)
    ref = ns["tq"].grad.numpy()
    err = np.abs(dq - ref).max() / np.abs(ref).max()
    if not err <= 1e-4:
        raise AssertionError(f"dq: relative error {err:.3g} > 1e-4")


def benchmarks(ctx) -> list:
    """The attention benchmarks for ``ctx.device`` (a host device: the peers run on the CPU)."""
    from benchmarks._core import Benchmark

    xp, device = ctx.xp, ctx.device
    shape = QUICK if ctx.quick else FULL
    if ctx.quick:
        print(f"attention suite (--quick): B, H, S, D = {QUICK} instead of {FULL}")
    out = []
    specs = (
        ("fwd_vs_torch", "attn(q, k, v)", "F.scaled_dot_product_attention(tq, tk, tv, **tkw)",
         "torch SDPA (CPU)", True, _check_fwd),
        ("fwd_vs_numpy", "attn(q, k, v)", "naive(a, b, c)", "naive numpy", False, _check_fwd),
        ("bwd_vs_torch", "attn_bwd(q, k, v, out, dout, lse)",
         "tout.backward(tg, retain_graph=True)", "torch SDPA backward (CPU)", True, _check_bwd),
    )
    for name, tessera, peer, peer_name, needs_torch, check in specs:
        for variant, kw in VARIANTS.items():
            b, h, s, d = shape
            out.append(Benchmark(
                suite="attention",
                name=name,
                variant=variant,
                tessera=tessera,
                peer=peer,
                setup=_make_setup(xp, device, shape, kw, needs_torch),
                sources=SOURCES,
                params={"B": b, "H": h, "S": s, "D": d, "dtype": "float32",
                        "is_causal": bool(kw.get("is_causal")),
                        "dropout_p": kw.get("dropout_p", 0.0),
                        "reduced_for_quick": bool(ctx.quick)},
                peer_name=peer_name,
                target=(QUICK_TARGETS if ctx.quick else TARGETS).get((name, variant)),
                check=check,
                settle_s=TORCH_SETTLE_S if needs_torch else 0.0,
                prime=needs_torch,
            ))
    return out
