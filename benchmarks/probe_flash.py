"""Probe: the tensor-core attention forward (``backends/_cupy/flash.py``) against torch's
SDPA (flash backend) on a CUDA device, B=8 H=16 S=2048, D 128 and 64, bf16 and fp16,
causal and not, dropout 0 and 0.1, for each variant (the mma.sync kernel's tiles: the
launcher's table and alternatives; the wgmma kernel's keys a tile, on compute capability
9.0), TFLOP/s by CUDA events (medians of 10 after 3 warm-up calls; torch's calls
first, then each variant's: one side's drift between them is not cancelled). FLOPs: 4 B H S^2 D, half of that causal (torch's count).

    PYTHONPATH=<installed>:<repo> python3 -P -m benchmarks.probe_flash [--quick]

Before timing, each (dtype, D, tile) is checked against torch's float32 math SDPA on
B=2 H=4 S=512 (causal, no dropout): relative error max |ours - ref| / max |ref|.
Prints one line per row; the figures go to benchmarks/NOTES.md. Not a suite: the tables
it informs are ``flash.TILES`` and ``flash.SM90_BN``.
"""

from __future__ import annotations

import argparse
import math

from .probe_krylov_grid import _events  # CUDA events over calls, median, us

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
    args = ap.parse_args(argv)
    import cupy
    import torch
    from tessera_array.backends._cupy import flash

    import tessera_array as xp
    from tessera_array import _dispatch

    # a kernel lookup registers the cuda backend's kernels (and so its build stack)
    _dispatch.lookup("attention_fwd", xp.zeros(1, device="cuda:0").device, xp.bfloat16)
    for d in (int(x) for x in args.dims.split(",")):
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
            t_torch = _events(theirs, reps=10) * 1e-6  # s
            row = (f"{tdt} D={d} causal={int(causal)} p={p}: torch "
                   f"{flops / t_torch / 1e12:.0f} TFLOP/s ({t_torch * 1e3:.3f} ms)")
            for tile in tiles:
                def ours(tile=tile, causal=causal, drop=drop):
                    return _forward(tile)(qc, kc, vc, scale=1 / math.sqrt(d),
                                          causal="top_left" if causal else None,
                                          dropout=drop)
                try:
                    t = _events(ours, reps=10) * 1e-6
                    row += (f"; ours {_label(tile)} {flops / t / 1e12:.0f} "
                            f"({t_torch / t:.2f}x torch)")
                except (RuntimeError, ValueError) as e:
                    row += f"; ours {_label(tile)} FAILED {type(e).__name__}"
            print(row, flush=True)


if __name__ == "__main__":
    main()
