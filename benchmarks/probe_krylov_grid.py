"""Probe: the fused gmres and bicgstab kernels' time per iteration on a CUDA device at 1
and 2 blocks a multiprocessor, against cupyx's gmres and tessera's generic loops, by CUDA
events over whole solves (medians of 15 after 3 warm-up solves, the generic loops 5
after 1; ``rtol = atol = 0``, fixed iteration counts).

    PYTHONPATH=<installed>:<repo> python3 -P -m benchmarks.probe_krylov_grid [--device cuda:0]

Prints one line per (solver, system, dtype, blocks a multiprocessor); the figures go to
benchmarks/NOTES.md. Not a suite: the grid choice it informs is a constant of the
launchers (``BLOCKS_PER_SM``).
"""

from __future__ import annotations

import argparse
import statistics

import numpy as np


def _events(fn, reps=15, warm=3):
    import cupy as cp

    for _ in range(warm):
        fn()
    times = []
    for _ in range(reps):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(cp.cuda.get_elapsed_time(a, b) * 1e3)  # us
    return statistics.median(times)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="benchmarks.probe_krylov_grid")
    ap.add_argument("--device", default="cuda:0")
    args = ap.parse_args(argv)
    import cupy as cp
    import cupyx.scipy.sparse as csp
    import cupyx.scipy.sparse.linalg as csla
    import scipy.sparse as sp
    from tessera_array.backends._cupy import bicgstab as cb
    from tessera_array.backends._cupy import gmres as cg

    import tessera_array as xp
    from tessera_array.sparse import csr_array
    from tessera_array.sparse import linalg as tla

    from .cuda_krylov import _poisson, _spd

    dev = args.device
    cycles, restart, iters = 4, 30, 200
    for kind, host in (("dense spd 2049", _spd(2049)), ("poisson 1024^2", _poisson(1024))):
        for dtype in ("float32", "float64"):
            h = host.astype(dtype)
            if sp.issparse(h):
                a_t, a_c = csr_array(h, device=dev), csp.csr_matrix(h)
            else:
                a_t, a_c = xp.asarray(h, device=dev), cp.asarray(h)
            b = np.random.default_rng(3).standard_normal(h.shape[0]).astype(dtype)
            b_t, b_c = xp.asarray(b, device=dev), cp.asarray(b)
            # (cupyx's maxiter counts inner iterations: cycles x restart, the same 120)
            peer = _events(lambda a=a_c, v=b_c: csla.gmres(a, v, rtol=0.0, atol=0.0,
                                                           restart=restart,
                                                           maxiter=cycles * restart))
            its = cycles * restart
            print(f"cupyx gmres  {kind:15s} {dtype}: {peer / its:8.2f} us/it")
            for per in (1, 2):
                cg.BLOCKS_PER_SM = cb.BLOCKS_PER_SM = per
                t = _events(lambda a=a_t, v=b_t: tla.gmres(a, v, rtol=0.0, atol=0.0,
                                                           restart=restart, maxiter=cycles))
                u = _events(lambda a=a_t, v=b_t: tla.bicgstab(a, v, rtol=0.0, atol=0.0,
                                                              maxiter=iters))
                print(f"fused gmres  {kind:15s} {dtype} {per}/SM: {t / its:8.2f} us/it "
                      f"({peer / t:5.1f}x cupyx); bicgstab {u / iters:8.2f} us/it")
            from tessera_array.sparse.linalg import _gmres, _isolve

            fused = _isolve._bicgstab_fused
            _isolve._bicgstab_fused = lambda *a: None
            try:
                t = _events(lambda a=a_t, v=b_t: _gmres._gmres(
                    a, v, rtol=0.0, atol=0.0, restart=restart, maxiter=cycles, native=False),
                    reps=5, warm=1)
                u = _events(lambda a=a_t, v=b_t: tla.bicgstab(a, v, rtol=0.0, atol=0.0,
                                                              maxiter=iters), reps=5, warm=1)
            finally:
                _isolve._bicgstab_fused = fused
            print(f"generic loops {kind:15s} {dtype}: gmres {t / its:8.2f} us/it; "
                  f"bicgstab {u / iters:8.2f} us/it")
            cg.BLOCKS_PER_SM = cb.BLOCKS_PER_SM = 2


if __name__ == "__main__":
    main()
