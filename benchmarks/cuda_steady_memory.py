"""GPU memory stays steady over repeated optimizer steps and solves on a CUDA device.

``python3 -P -m benchmarks.cuda_steady_memory [--device cuda:0] [--reps 1000]
[--bound-bytes 262144]``, from the repository root. Four workloads, each repeated
``--reps`` times on the device:

=========  ==================================================================
adam       ``tessera_array.optim.Adam(params).step(grads)`` on five float32
           parameters of mixed shapes (a 0-d, a vector, a matrix, a 3-D)
cg         ``tessera_array.sparse.linalg.cg`` on a ``csr_array`` 2-D Poisson
           64^2 (float64, rtol 1e-8), a new right-hand side each solve
gmres      the same with ``gmres`` (its fused kernel on CUDA)
bicgstab   the same with ``bicgstab`` (its fused kernel on CUDA)
=========  ==================================================================

After repetitions 10, 100 and ``--reps`` (the device synchronized, Python's garbage
collected) it prints CuPy's memory pool's used and total bytes. Whatever a workload keeps
(kernel plans, address tables, compiled modules) is allocated by its first repetitions;
used bytes that grow after the 100th by more than ``--bound-bytes`` are a leak: exit 1.
The first solve is checked against SciPy's (a leak check of a wrong solver proves
nothing). Exit 0 when every workload stays steady; 2 (with the reason, no traceback) where there is
no CuPy or no such CUDA device.
"""

from __future__ import annotations

import argparse
import gc
import sys

import numpy as np

__all__ = ["main"]

PROG = "cuda_steady_memory"
CHECKPOINTS = (10, 100)
SHAPES = ((), (1000,), (256, 256), (64, 32, 8), (4097,))
SEED = 20261202


def _say_no(why: str) -> int:
    print(f"{PROG}: {why}", file=sys.stderr)
    return 2


def _adam(xp, device):
    from tessera_array import optim

    rng = np.random.default_rng(SEED)
    params = [xp.asarray(rng.standard_normal(s).astype(np.float32), device=device)
              for s in SHAPES]
    grads = [xp.asarray(rng.standard_normal(s).astype(np.float32), device=device)
             for s in SHAPES]
    opt = optim.Adam(params, lr=1e-3, weight_decay=0.01)
    return lambda i: opt.step(grads)


def _krylov(name):
    """The workload of solver ``name`` (cg, gmres or bicgstab of
    ``tessera_array.sparse.linalg``): Poisson 64^2 solves, the first checked against
    SciPy's."""

    def make(xp, device):
        import scipy.sparse.linalg as spla

        from tessera_array import launchers
        from tessera_array.sparse import csr_array
        from tessera_array.sparse import linalg as tla

        from ._opencl import poisson

        ours, theirs = getattr(tla, name), getattr(spla, name)
        host = poisson(64, np.float64)
        a = csr_array(host, device=device)
        rng = np.random.default_rng(SEED)
        rhs = [rng.standard_normal(host.shape[0]) for _ in range(4)]
        bs = [xp.asarray(b, device=device) for b in rhs]
        x, info = ours(a, bs[0], rtol=1e-8, maxiter=2000)
        want, winfo = theirs(host, rhs[0], rtol=1e-8, maxiter=2000)
        got = launchers.to_host(launchers.native(x), device)
        err = float(np.abs(got - want).max() / np.abs(want).max())
        if info != 0 or winfo != 0 or err > 1e-6:
            raise AssertionError(f"{name} on {device} disagrees with SciPy's: info={info} "
                                 f"(SciPy {winfo}), max rel. difference {err:.3g} > 1e-6")

        def solve(i):
            ours(a, bs[i % len(bs)], rtol=1e-8, maxiter=2000)

        return solve

    return make


def _pool_bytes(cupy):
    # sync: every launch finished, every dropped buffer back in the pool.
    cupy.cuda.Device().synchronize()
    gc.collect()
    pool = cupy.get_default_memory_pool()
    return pool.used_bytes(), pool.total_bytes()


def _run(name, work, reps, cupy, bound, out) -> bool:
    """Repeat ``work`` ``reps`` times; print the pool at each checkpoint; True if steady."""
    marks = sorted({*(c for c in CHECKPOINTS if c < reps), reps})
    seen = {}
    done = 0
    for mark in marks:
        while done < mark:
            work(done)
            done += 1
        seen[mark] = _pool_bytes(cupy)
        used, total = seen[mark]
        print(f"{name:>8}  after {mark:>5}: used {used:>12,d} B  total {total:>12,d} B",
              file=out)
    base = seen.get(100)
    if base is None:
        print(f"{name:>8}  fewer than 100 repetitions: growth after the 100th not judged",
              file=out)
        return True
    growth = seen[reps][0] - base[0]
    steady = growth <= bound
    verdict = "steady" if steady else "GROWS"
    print(f"{name:>8}  {verdict}: used bytes {growth:+,d} B after the 100th repetition "
          f"(bound {bound:,d} B)", file=out)
    return steady


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m benchmarks.{PROG}", description=__doc__
                                .splitlines()[0])
    p.add_argument("--device", default="cuda:0", help="a cuda device (default cuda:0)")
    p.add_argument("--reps", type=int, default=1000, help="repetitions of each workload")
    p.add_argument("--bound-bytes", type=int, default=256 * 1024,
                   help="used-bytes growth allowed after the 100th repetition")
    args = p.parse_args(argv)
    if args.reps < 1 or args.bound_bytes < 0:
        return _say_no(f"--reps must be >= 1 and --bound-bytes >= 0. Received: "
                       f"--reps {args.reps} --bound-bytes {args.bound_bytes}")
    try:
        import cupy
    except ImportError as err:
        return _say_no(f"needs CuPy's CUDA build (pip install cupy-cuda13x): {err}")
    import tessera_array as xp
    from tessera_array._devices import as_device

    try:
        device = as_device(args.device, PROG)
    except (ValueError, RuntimeError, TypeError) as err:
        return _say_no(f"no device {args.device}: {err}")
    if device.kind != "cuda":
        return _say_no(f"--device must be a cuda device. Received: {device}")
    out = sys.stdout
    print(f"{PROG}: {args.reps} repetitions per workload on {device}, CuPy "
          f"{cupy.__version__}", file=out)
    steady = True
    with cupy.cuda.Device(device.index):
        for name, make in (("adam", _adam), ("cg", _krylov("cg")), ("gmres", _krylov("gmres")),
                           ("bicgstab", _krylov("bicgstab"))):
            steady &= _run(name, make(xp, device), args.reps, cupy, args.bound_bytes, out)
    print(f"{PROG}: {'PASS' if steady else 'FAIL'}", file=out)
    return 0 if steady else 1


if __name__ == "__main__":
    sys.exit(main())
