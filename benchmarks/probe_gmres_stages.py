"""Probe: where an inner iteration of the fused gmres kernel spends its time on CUDA.

Times ``gmres(A, b, rtol=0, atol=0, restart=30, maxiter=4)`` (120 inner iterations) by
CUDA events over whole solves (medians of 15 after 3 warm-up solves) beside cupyx's
gmres given the same 120 inner iterations (its ``maxiter`` counts them), then runs the
kernel built with ``-DTESSERA_GMRES_STAGES``: each block's thread 0 sums the clock64
cycles of the column's stages (kernels/cuda/gmres.cu's ``STAGE(k)`` stamps) and this
probe prints them an inner iteration, for block 0 (which also does the rotations), the
median block and the slowest, in us at the device's clock rate. A barrier's stage is the
wait for the slowest block; the stamps inside a stage that ends in a block's own
``__syncthreads`` are exact, the others see the loads they issued but not their returns.
In the two-barrier column (``PIPELINE_BYTES``) stage "product" is the next column's
product and "Z correction" its correction after it, "gather 2 + ..." the second
reduction with V[j+1], and the third barrier's stages stay 0.

    PYTHONPATH=<installed>:<repo> python3 -P -m benchmarks.probe_gmres_stages [--device cuda:0] [--no-stages]
        [--pipeline-bytes N] [--blocks-per-sm N] [--block THREADS]
        [--one-reduction-rmax N] [--a-cache-bytes N] [--define NAME=VALUE ...] [--only dense]
"""

from __future__ import annotations

import argparse

import numpy as np

from .probe_krylov_grid import _events

# (the one-reduction column: 0 the product, 1 the reduction's partial sums, 2 its barrier,
# 3 its gather, 4 the column's completion with V and Z, 5 the next column's t, 6 its
# candidate, 7 the barrier that makes the candidate whole)
# (with --define TESSERA_GMRES_PRODUCT_PROBE=1, two-barrier column: stage 7 is the wait
# for the last combination's warps, 8 the product, and 0 the same product made again)
STAGES = ("product", "partials 1", "barrier 1", "gather 1", "project 1 + partials 2",
          "barrier 2", "gather 2 + project 2 + partials 3", "barrier 3 | probe: tail",
          "gather 3 | probe: product", "rotations (block 0)", "back substitution (block 0)",
          "the rest of a cycle", "Z correction (two barriers)")


def _stages(solve_once, gm, khz: float):
    """The stage sums of the last launch, an inner iteration, in us: block 0's, the
    median block's and the slowest block's of each stage."""
    seen = []
    run = gm.FusedGMRES.run
    function = gm._kernels.function

    def staged(file, name, device, *, options=()):
        return function(file, name, device, options=tuple(options) +
                        ("-DTESSERA_GMRES_STAGES",))

    def keep(self, *a, **k):
        seen.append(self._w)  # (the workspace: given back to the plan when it finishes)
        return run(self, *a, **k)

    gm._kernels.function, gm.FusedGMRES.run = staged, keep
    gm._plans.clear()  # (the launcher keeps its kernel per shape: fetched again, staged)
    try:
        solve_once()
        solve_once()
    finally:
        gm._kernels.function, gm.FusedGMRES.run = function, run
        gm._plans.clear()
    work = seen[-1]
    blocks, slots = work.launch.blocks, gm.SLOTS
    part = work.work[:2 * slots * blocks].get()
    raw = part[slots * blocks:].reshape(blocks, slots)[:, slots - 16:]
    words = np.ascontiguousarray(raw).view(np.uint32).reshape(blocks, -1)
    per = raw.dtype.itemsize // 4  # (4-byte words an element)
    words = words[:, :16 * per][:, :len(STAGES) + 1].astype(np.float64)
    columns = words[:, len(STAGES)]
    us = words[:, :len(STAGES)] / columns[:, None] / khz * 1e3
    return us, int(columns[0])


def main(argv=None):
    ap = argparse.ArgumentParser(prog="benchmarks.probe_gmres_stages")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--no-stages", action="store_true",
                    help="the timings only (a tree whose kernel has no stamps)")
    ap.add_argument("--pipeline-bytes", type=int, default=None,
                    help="the launcher's PIPELINE_BYTES (0: the three-barrier column "
                         "everywhere; a large value: the two-barrier one)")
    ap.add_argument("--blocks-per-sm", type=int, default=None,
                    help="the launcher's BLOCKS_PER_SM")
    ap.add_argument("--block", type=int, default=None,
                    help="the launcher's BLOCK (threads a block)")
    ap.add_argument("--one-reduction-rmax", type=int, default=None,
                    help="the launcher's ONE_REDUCTION_RMAX (0: the two-barrier column "
                         "with two reductions)")
    ap.add_argument("--a-cache-bytes", type=int, default=None,
                    help="the launcher's A_CACHE_BYTES (0: A's rows streamed from L2)")
    ap.add_argument("--define", action="append", default=[],
                    help="NAME=VALUE: a -D option to every compile of gmres.cu (repeatable)")
    ap.add_argument("--only", default=None,
                    help="only the systems whose label contains this (e.g. dense)")
    args = ap.parse_args(argv)
    import cupy as cp
    import cupyx.scipy.sparse.linalg as csla
    from tessera_array.backends._cupy import gmres as gm

    from tessera_array.sparse import linalg as tla

    from .cuda_krylov import _poisson, _spd
    from .krylov_vs_cupy import system_pair

    dev = args.device
    if args.pipeline_bytes is not None:
        gm.PIPELINE_BYTES = args.pipeline_bytes
    if args.one_reduction_rmax is not None:
        gm.ONE_REDUCTION_RMAX = args.one_reduction_rmax
    if args.a_cache_bytes is not None:
        gm.A_CACHE_BYTES = args.a_cache_bytes
    if args.define:
        defines = tuple(f"-D{d}" for d in args.define)
        compile_ = gm._kernels.function

        def function(file, name, device, *, options=()):
            return compile_(file, name, device, options=tuple(options) + defines)

        gm._kernels.function = function
    if args.blocks_per_sm is not None:
        gm.BLOCKS_PER_SM = args.blocks_per_sm
    if args.block is not None:
        gm.BLOCK = args.block
    index = int(dev.split(":")[1]) if ":" in dev else 0
    rt = cp.cuda.runtime
    khz = rt.deviceGetAttribute(rt.cudaDevAttrClockRate, index)
    print(f"{rt.getDeviceProperties(index)['name'].decode()}, SM clock {khz / 1e3:.0f} MHz")
    cycles, restart = 4, 30
    its = cycles * restart
    for kind, host, dtypes in (("dense spd 2049", _spd(2049), ("float32", "float64")),
                               ("poisson 1024^2", _poisson(1024), ("float32",))):
        if args.only and args.only not in kind:
            continue
        for dtype in dtypes:
            a_t, a_c, _, _, b_t, b_c = system_pair(kind, host.astype(dtype), dtype, dev)

            def ours(a=a_t, v=b_t):
                return tla.gmres(a, v, rtol=0.0, atol=0.0, restart=restart, maxiter=cycles)

            peer = _events(lambda a=a_c, v=b_c: csla.gmres(a, v, rtol=0.0, atol=0.0,
                                                           restart=restart, maxiter=its))
            t = _events(ours)
            print(f"{kind} {dtype}: fused {t / its:7.2f} us/it, cupyx {peer / its:7.2f} "
                  f"us/it ({peer / t:5.2f}x)")
            if args.no_stages:
                continue
            us, columns = _stages(ours, gm, khz)
            print(f"  stages an inner iteration ({columns} columns, {us.shape[0]} blocks), "
                  f"us: block 0 / median / slowest")
            for k, name in enumerate(STAGES):
                col = us[:, k]
                print(f"    {name:36s} {col[0]:7.2f} {np.median(col):7.2f} {col.max():7.2f}")
            print(f"    {'sum':36s} {us[0].sum():7.2f} {np.median(us.sum(1)):7.2f} "
                  f"{us.sum(1).max():7.2f}")


if __name__ == "__main__":
    main()
