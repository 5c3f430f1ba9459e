"""Probe: where nn.linear's float32 time goes on a CUDA device against torch's
``addmm(b, x, w.T) + r`` at 4096^3: each of cuBLASLt's heuristic algorithms for our call
(bias in the epilogue, the residual as C with beta = 1), the same call without the
residual (beta = 0), and torch's addmm alone, by CUDA events (medians of 20 after 3
warm-up calls, the variants interleaved round by round).

    PYTHONPATH=<installed>:<repo> python3 -P -m benchmarks.probe_linear_lt [--n 4096]

Prints one line per variant; the figures go to benchmarks/NOTES.md. Not a suite: the
choice it informs is the plan's algorithm rule in ``backends/_cupy/_cublaslt.py``.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics


def main(argv=None):
    ap = argparse.ArgumentParser(prog="benchmarks.probe_linear_lt")
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--algos", type=int, default=8)
    args = ap.parse_args(argv)
    for dtype in args.dtypes.split(","):
        _probe(dtype, args.n, args.algos)


def _probe(dtype, n, algos):
    import cupy as cp
    import torch
    from tessera_array.backends._cupy import _cublaslt as lt

    lib = lt._library()
    tdt = getattr(torch, dtype)
    g = torch.Generator(device="cuda").manual_seed(0)
    tx, tw = (torch.randn(n, n, device="cuda", generator=g, dtype=tdt) for _ in range(2))
    tb = torch.randn(n, device="cuda", generator=g, dtype=tdt)
    tr = torch.randn(n, n, device="cuda", generator=g, dtype=tdt)
    tout = torch.empty(n, n, device="cuda", dtype=tdt)
    x, w, b, r, out = (cp.from_dlpack(t) for t in (tx, tw, tb, tr, tout))
    dev = out.device.id
    handle, work = lt._handle(dev)
    plan = lt._plan(dev, dtype, n, n, n, True)
    found = (lt._Heuristic * algos)()
    count = ctypes.c_int(0)
    pref = ctypes.c_void_p()
    lt._ok(lib.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)), "pref")
    lt._set(lib.cublasLtMatmulPreferenceSetAttribute, pref,
            "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES", ctypes.c_uint64(lt.WORKSPACE_BYTES))
    lt._ok(lib.cublasLtMatmulAlgoGetHeuristic(handle, plan.desc, plan.a, plan.b, plan.c,
                                               plan.c, pref, algos, found,
                                               ctypes.byref(count)), "heuristic")
    lt._set(lib.cublasLtMatmulDescSetAttribute, plan.desc,
            "CUBLASLT_MATMUL_DESC_BIAS_POINTER", ctypes.c_void_p(b.data.ptr))
    stream = cp.cuda.get_current_stream().ptr

    def lt_call(i, residual=True):
        alpha, beta = plan.scalar(1.0), plan.scalar(1.0 if residual else 0.0)
        c = r if residual else out

        def run():
            lt._ok(lib.cublasLtMatmul(handle, plan.desc, ctypes.byref(alpha), w.data.ptr,
                                      plan.a, x.data.ptr, plan.b, ctypes.byref(beta),
                                      c.data.ptr, plan.c, out.data.ptr, plan.c,
                                      ctypes.byref(found[i].algo), work.data.ptr,
                                      lt.WORKSPACE_BYTES, stream), "matmul")
        return run

    variants = {f"lt algo {i} (waves {found[i].wavesCount:.2f}, ws "
                f"{found[i].workspaceSize >> 10} KiB)": lt_call(i)
                for i in range(count.value)}
    variants["lt algo 0, no residual (beta 0)"] = lt_call(0, residual=False)
    variants["torch addmm(b, x, w.T) + r"] = lambda: torch.addmm(tb, tx, tw.T).add_(tr)
    variants["torch addmm(b, x, w.T)"] = lambda: torch.addmm(tb, tx, tw.T)
    times = {k: [] for k in variants}
    for f in variants.values():
        for _ in range(3):
            f()
    torch.cuda.synchronize()
    for _ in range(20):
        for k, f in variants.items():
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            f()
            e1.record()
            e1.synchronize()
            times[k].append(cp.cuda.get_elapsed_time(e0, e1) * 1e3)
    ref = (tx.double() @ tw.double().T + tb.double() + tr.double())
    for i in range(count.value):
        lt_call(i)()
        err = (torch.from_dlpack(out).double() - ref).abs().max().item()
        print(f"{dtype} {n}^3 lt algo {i}: max |out - float64| = {err:.3g}")
    for k, v in times.items():
        print(f"{dtype} {n}^3 {k}: {statistics.median(v):.1f} us "
              f"(min {min(v):.1f})", flush=True)


if __name__ == "__main__":
    main()
