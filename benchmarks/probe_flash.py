"""Probe: the tensor-core attention kernels (``backends/_cupy/flash.py``) against torch's
SDPA (flash backend) on a CUDA device, B=8 H=16 S=2048, D 128 and 64, bf16 and fp16.

The forward (default): causal and not, dropout 0 and 0.1, for each variant (the mma.sync
kernel's tiles: the launcher's table and alternatives; the wgmma kernel's keys a tile,
on compute capability 9.0), TFLOP/s by CUDA events: medians of 15 after 3 warm-up
calls, torch and the variants alternating call by call (drift hits every side alike).
FLOPs: 4 B H S^2 D, half of that causal (torch's count). Before timing, each (dtype, D,
tile) is checked against torch's float32 math SDPA on B=2 H=4 S=512 (causal, no
dropout): relative error max |ours - ref| / max |ref|.

``--backward``: the backward's kernels one by one (delta, dq, dkdv: each launch between
two events), non-causal, dropout 0 and 0.1, for the launcher's tiles and each pair of
``--bwd-tiles`` (dq / dkdv tiles as mt.bn.nb, e.g. ``1.64.3/1.64.2``), with torch's
forward+backward beside them and the largest difference from the launcher's tiles'
gradients (the kernels sum in a fixed order per tile; the tiles may differ in it).

    PYTHONPATH=<installed>:<repo> python3 -P -m benchmarks.probe_flash [--quick]
        [--backward [--bwd-tiles 1.64.3/1.64.2 ...]]

Prints one line per row; the figures go to benchmarks/NOTES.md. Not a suite: the tables
it informs are ``flash.TILES``, ``DQ_TILES``, ``DKDV_TILES``, ``DKDV_DROP_TILES`` and
``flash.SM90_BN``.
"""

from __future__ import annotations

import argparse
import math
import statistics

ALTERNATIVES = {128: [(2, 32, 1), (1, 64, 2), (2, 64, 1)],
                64: [(2, 64, 1), (2, 128, 1), (1, 64, 2)]}
WGMMA_BN = (128,)  # keys a tile of the wgmma kernel (64: benchmarks/NOTES.md)


def _forward(variant):
    """The forward of a variant: a Tile (mma.sync) or ("wgmma", bn)."""
    from tessera_array.backends._cupy import flash

    if isinstance(variant, flash.Tile):
        return lambda *a, **kw: flash.forward_tiled(variant, *a, **kw)
    return lambda *a, **kw: flash.forward_sm90(variant[1], *a, **kw)


def _label(variant) -> str:
    if isinstance(variant[0], str):
        return f"{variant[0]} BN {variant[1]}"
    return str(tuple(variant))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="benchmarks.probe_flash")
    ap.add_argument("--quick", action="store_true", help="the launcher's tiles only")
    ap.add_argument("--dims", default="128,64")
    ap.add_argument("--wgmma-only", action="store_true",
                    help="the wgmma kernel's variants alone (compute capability 9.0)")
    ap.add_argument("--backward", action="store_true",
                    help="the backward's kernels, each timed alone")
    ap.add_argument("--bwd-tiles", nargs="*", default=[],
                    help="dq/dkdv tile pairs besides the launcher's, as mt.bn.nb/mt.bn.nb")
    args = ap.parse_args(argv)
    import cupy
    import torch
    from tessera_array.backends._cupy import flash

    import tessera_array as xp
    from tessera_array import _dispatch

    # a kernel lookup registers the cuda backend's kernels (and so its build stack)
    _dispatch.lookup("attention_fwd", xp.zeros(1, device="cuda:0").device, xp.bfloat16)
    for d in (int(x) for x in args.dims.split(",")):
        if args.backward:
            pairs = [tuple(flash.Tile(*map(int, t.split("."))) for t in pair.split("/"))
                     for pair in args.bwd_tiles]
            for tname in ("bfloat16", "float16"):
                _backward_rows(d, getattr(torch, tname), pairs)
                torch.cuda.empty_cache()
            continue
        tiles = [flash.TILES[d]] if args.quick else [flash.Tile(*t) for t in ALTERNATIVES[d]]
        if args.wgmma_only:
            tiles = []
        if int(cupy.cuda.Device(0).compute_capability) == flash.SM90_CC:
            tiles += [("wgmma", flash.SM90_BN[d])] if args.quick else [
                ("wgmma", bn) for bn in WGMMA_BN]
        for tname in ("bfloat16", "float16"):
            _check(d, getattr(torch, tname), tiles)
            _rows(d, getattr(torch, tname), tiles)
            torch.cuda.empty_cache()


def _alternating(fns, reps=15, warm=3):
    """Median ms of each of ``fns`` (CuPy or torch work on the current stream), the
    functions called in turn, each call between two CUDA events."""
    import cupy as cp

    for _ in range(warm):
        for fn in fns:
            fn()
    times = [[] for _ in fns]
    for _ in range(reps):
        for i, fn in enumerate(fns):
            a, b = cp.cuda.Event(), cp.cuda.Event()
            a.record()
            fn()
            b.record()
            b.synchronize()
            times[i].append(cp.cuda.get_elapsed_time(a, b))
    return [statistics.median(t) for t in times]


def _check(d, tdt, tiles):
    """Each tile against torch's float32 math SDPA, B=2 H=4 S=512 causal."""
    import cupy as cp
    import torch
    import torch.nn.functional as F

    g = torch.Generator(device="cuda").manual_seed(d)
    qs, ks, vs = (torch.randn((2, 4, 512, d), device="cuda", dtype=tdt, generator=g)
                  for _ in range(3))
    ref = F.scaled_dot_product_attention(qs.float(), ks.float(), vs.float(), is_causal=True)
    for tile in tiles:
        try:
            o, _ = _forward(tile)(*(cp.from_dlpack(t) for t in (qs, ks, vs)),
                                  scale=1 / math.sqrt(d), causal="top_left")
            err = (torch.from_dlpack(o).float() - ref).abs().max() / ref.abs().max()
            print(f"check {tdt} D={d} {_label(tile)}: rel err {err.item():.2e}", flush=True)
        except (RuntimeError, ValueError) as e:  # a variant that fails to build or launch
            print(f"check {tdt} D={d} {_label(tile)}: FAILED {e!r}", flush=True)


def _rows(d, tdt, tiles, B=8, H=16, S=2048):
    import cupy as cp
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from tessera_array.random import dropout_keep_threshold

    g = torch.Generator(device="cuda").manual_seed(d + 1)
    q, k, v = (torch.randn((B, H, S, d), device="cuda", dtype=tdt, generator=g)
               for _ in range(3))
    qc, kc, vc = (cp.from_dlpack(t) for t in (q, k, v))
    for causal in (False, True):
        flops = 4 * B * H * S * S * d / (2 if causal else 1)
        for p in (0.0, 0.1):
            drop = None if p == 0 else (p, 1234, 0, dropout_keep_threshold(p))

            def theirs(causal=causal, p=p):
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                          dropout_p=p)
            fns, labels, failed = [theirs], [], ""
            for tile in tiles:
                def ours(tile=tile, causal=causal, drop=drop):
                    return _forward(tile)(qc, kc, vc, scale=1 / math.sqrt(d),
                                          causal="top_left" if causal else None,
                                          dropout=drop)
                try:
                    ours()
                except (RuntimeError, ValueError) as e:  # a variant that fails to build
                    failed += f"; ours {_label(tile)} FAILED {type(e).__name__}"
                    continue
                fns.append(ours)
                labels.append(_label(tile))
            t_torch, *t_ours = (t * 1e-3 for t in _alternating(fns))  # s
            row = (f"{tdt} D={d} causal={int(causal)} p={p}: torch "
                   f"{flops / t_torch / 1e12:.0f} TFLOP/s ({t_torch * 1e3:.3f} ms)")
            for label, t in zip(labels, t_ours):
                row += f"; ours {label} {flops / t / 1e12:.0f} ({t_torch / t:.2f}x torch)"
            row += failed
            print(row, flush=True)


def _backward_rows(d, tdt, pairs, B=8, H=16, S=2048):
    """The backward of the launcher's tiles and of each (dq tile, dkdv tile) pair, kernel
    by kernel, p 0 and 0.1."""
    import cupy as cp
    import torch
    import torch.nn.functional as F
    from tessera_array.backends._cupy import flash
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from tessera_array.random import dropout_keep_threshold

    g = torch.Generator(device="cuda").manual_seed(d + 2)
    q, k, v, do = (torch.randn((B, H, S, d), device="cuda", dtype=tdt, generator=g)
                   for _ in range(4))
    qc, kc, vc, doc = (cp.from_dlpack(t) for t in (q, k, v, do))
    scale = 1 / math.sqrt(d)
    tq, tk, tv = (t.clone().requires_grad_() for t in (q, k, v))
    for p in (0.0, 0.1):
        drop = None if p == 0 else (p, 1234, 0, dropout_keep_threshold(p))
        out, lse = flash.attention_fwd(qc, kc, vc, scale=scale, dropout=drop)

        def theirs(p=p):
            for t in (tq, tk, tv):
                t.grad = None  # no accumulation kernel on torch's side
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                o = F.scaled_dot_product_attention(tq, tk, tv, dropout_p=p)
            o.backward(do)
        t_torch = _alternating([theirs])[0]
        ref = None
        for dq_tile, dkdv_tile in [flash.bwd_tiles(d, drop is not None)] + pairs:
            def ours(dq_tile=dq_tile, dkdv_tile=dkdv_tile, drop=drop, out=out, lse=lse):
                return flash.backward_tiled(dq_tile, dkdv_tile, qc, kc, vc, out, doc, lse,
                                            scale=scale, dropout=drop)
            label = f"{tdt} D={d} p={p} dq {tuple(dq_tile)} dkdv {tuple(dkdv_tile)}"
            try:
                grads = ours()
            except (RuntimeError, ValueError) as e:  # a tile that fails to build
                print(f"{label}: FAILED {e!r}", flush=True)
                continue
            ref = grads if ref is None else ref
            diff = max(float(cp.abs(a.astype(cp.float32) - b.astype(cp.float32)).max())
                       for a, b in zip(grads, ref))
            print(f"{label}: {_per_kernel(ours)}; torch fwd+bwd {t_torch:.3f} ms; "
                  f"max diff from the first pair {diff:.2e}", flush=True)


def _per_kernel(fn, reps=15, warm=3):
    """Each launch of ``fn``'s backward timed alone: median ms by kernel name."""
    import cupy as cp
    from tessera_array.backends._cupy import flash

    for _ in range(warm):
        fn()
    events = {}
    launch = flash._launch

    def timed(device, name, *args, **kwargs):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        launch(device, name, *args, **kwargs)
        b.record()
        events.setdefault(name.split("<")[0].removeprefix("tessera_flash_"), []).append((a, b))
    flash._launch = timed
    try:
        for _ in range(reps):
            fn()
    finally:
        flash._launch = launch
    cp.cuda.Device().synchronize()
    return ", ".join(
        f"{name} {statistics.median(cp.cuda.get_elapsed_time(a, b) for a, b in ev):.3f} ms"
        for name, ev in events.items())


if __name__ == "__main__":
    main()
