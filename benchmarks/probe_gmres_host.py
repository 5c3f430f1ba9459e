"""Probe: where the time of a whole fused ``gmres`` solve goes on CUDA, host against device.

The per-iteration figures of benchmarks/probe_gmres_stages.py are whole solves (restart
30, maxiter 4: 120 inner iterations) timed by CUDA events, so the host's work of a solve
counts in them: on one H100 host its stamped stages were 17.4 of 19.3 us an iteration,
on another 15.3 of 21.6 (benchmarks/NOTES.md, "Fused GMRES on CUDA: 512-thread blocks").
This probe times the same solve of the dense SPD 2049 system by ``perf_counter_ns``
stamps around the calls ``tla.gmres`` makes on its fused path, medians of ``N`` solves
after 5 warm-up ones: before the fused solve (the front end: the system's checks, ||b||
and its read), FusedGMRES's construction, the launch call, from the launch to the read's return (the kernel, by CUDA events around the launch,
and the wait), and after the read; then a cProfile of the solves (``--profile``: the 25
largest own times).

    PYTHONPATH=<installed>:<repo> python3 -P -m benchmarks.probe_gmres_host [N]
        [--dtype float32] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time

PC = time.perf_counter_ns


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="benchmarks.probe_gmres_host")
    p.add_argument("n", nargs="?", type=int, default=50, help="solves a median (50)")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--profile", action="store_true", help="and a cProfile of the solves")
    p.add_argument("--split", action="store_true",
                   help="and the inclusive time of each of the front end's and the "
                        "launcher's calls (SPLIT), medians over the solves")
    args = p.parse_args(argv)
    import cupy as cp
    from tessera_array.backends._cupy import _persistent
    from tessera_array.backends._cupy import gmres as cu_gmres

    from tessera_array.sparse import linalg as tla

    from .cuda_krylov import _spd
    from .krylov_vs_cupy import system_pair

    a_t, _, _, _, b_t, _ = system_pair("dense spd 2049", _spd(2049).astype(args.dtype),
                                       args.dtype, args.device)

    def solve():
        return tla.gmres(a_t, b_t, rtol=0.0, atol=0.0, restart=30, maxiter=4)

    marks = {}
    init, launch, read = cu_gmres.FusedGMRES.__init__, _persistent.Launch.__call__, \
        _persistent.Launch.read

    def timed_init(self, *a, **k):
        marks["f0"] = PC()
        init(self, *a, **k)
        marks["f1"] = PC()

    def timed_launch(self):
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        marks["l0"] = PC()
        e0.record()
        launch(self)
        e1.record()
        marks["l1"] = PC()
        marks["events"] = (e0, e1)

    def timed_read(self, count):
        out = read(self, count)
        marks["r1"] = PC()
        return out

    names = ("front end", "construction", "to the launch", "launch call",
             "launch to read (kernel and wait)", "kernel (events)", "after the read", "whole")
    got = {k: [] for k in names}
    cu_gmres.FusedGMRES.__init__ = timed_init
    _persistent.Launch.__call__, _persistent.Launch.read = timed_launch, timed_read
    try:
        for i in range(args.n + 5):
            marks.clear()
            t0 = PC()
            solve()
            t1 = PC()
            e0, e1 = marks["events"]
            e1.synchronize()
            kernel = cp.cuda.get_elapsed_time(e0, e1) * 1e6  # ns
            parts = (marks["f0"] - t0, marks["f1"] - marks["f0"], marks["l0"] - marks["f1"],
                     marks["l1"] - marks["l0"], marks["r1"] - marks["l1"], kernel,
                     t1 - marks["r1"], t1 - t0)
            if i >= 5:
                for k, v in zip(names, parts):
                    got[k].append(v)
    finally:
        cu_gmres.FusedGMRES.__init__ = init
        _persistent.Launch.__call__, _persistent.Launch.read = launch, read
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}: gmres(dense SPD 2049 "
          f"{args.dtype}, restart 30, maxiter 4), medians of {args.n} solves, us")
    for k in names:
        print(f"  {k:34s} {statistics.median(got[k]) / 1e3:9.1f}")
    if args.split:
        _split(solve, args.n)
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.n):
            solve()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
        pstats.Stats(prof).sort_stats("cumulative").print_stats(40)


# The calls of a fused gmres solve timed by --split: (module path, attribute path).
SPLIT = (
    ("tessera_array.sparse.linalg._isolve", "_make_system"),
    ("tessera_array.sparse.linalg._isolve", "_as_operator"),
    ("tessera_array.sparse.linalg._isolve", "_cast_operator"),
    ("tessera_array.sparse.linalg._isolve", "_get_atol"),
    ("tessera_array.sparse.linalg._isolve", "_operand"),
    ("tessera_array.sparse.linalg._isolve", "_finish"),
    ("tessera_array.sparse.linalg._isolve", "_fast_matvec"),
    ("tessera_array.sparse.linalg._gmres", "_native_vectors"),
    ("tessera_array.sparse.linalg._gmres", "_gmres_fused"),
    ("tessera_array.sparse.linalg._gmres", "_gmres_plain"),
    ("tessera_array._dispatch", "find"),
    ("tessera_array.sparse.linalg._gmres", "_ArrayVectors.__init__"),
    ("tessera_array.sparse.linalg._gmres", "_ArrayVectors.norm"),
    ("tessera_array._dispatch", "lookup"),
    ("tessera_array.backends._cupy.gmres", "_check"),
    ("tessera_array.backends._cupy.gmres", "stored_pair"),
    ("tessera_array.backends._cupy.gmres", "_resident_blocks"),
    ("tessera_array.backends._cupy.gmres", "FusedGMRES.__init__"),
    ("tessera_array.backends._cupy.gmres", "FusedGMRES.run"),
    ("tessera_array.backends._cupy._kernels", "function"),
    ("tessera_array.backends._cupy._kernels", "empty"),
    ("tessera_array.backends._cupy._persistent", "Launch.__init__"),
    ("tessera_array.backends._cupy._persistent", "Launch.__call__"),
    ("tessera_array.backends._cupy._persistent", "Launch.read"),
)


def _split(solve, n):
    """Medians over ``n`` solves of each SPLIT call's inclusive time a solve, and its
    calls a solve."""
    import importlib

    spent, calls, saved = {}, {}, []

    def wrap(key, fn):
        def timed(*a, **k):
            t0 = PC()
            try:
                return fn(*a, **k)
            finally:
                spent[key] = spent.get(key, 0) + PC() - t0
                calls[key] = calls.get(key, 0) + 1
        return timed

    for mod, attr in SPLIT:
        owner = importlib.import_module(mod)
        *path, name = attr.split(".")
        for part in path:
            owner = getattr(owner, part)
        fn = owner.__dict__[name] if path else getattr(owner, name)
        saved.append((owner, name, fn))
        setattr(owner, name, wrap(attr, fn))
    rows = {}
    try:
        for i in range(n + 5):
            spent.clear()
            calls.clear()
            t0 = PC()
            solve()
            whole = PC() - t0
            if i >= 5:
                rows.setdefault("whole solve", []).append((whole, 1))
                for k, v in spent.items():
                    rows.setdefault(k, []).append((v, calls[k]))
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)
    print(f"inclusive us a solve (medians of {n}; nested calls counted in each):")
    for k, v in rows.items():
        print(f"  {k:40s} {statistics.median(t for t, _ in v) / 1e3:9.1f}  "
              f"x{statistics.median(c for _, c in v):g}")


if __name__ == "__main__":
    main()
