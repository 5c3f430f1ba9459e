"""tessera's cg on an OpenCL GPU against CuPy's, same run: whole solves, per iteration.

``python -m benchmarks.krylov_vs_cupy [--repeat N] [--iters M] [--json PATH]``

Cases: 2-D Poisson 256² and 1024² (CSR), the latter also with a Jacobi preconditioner
(``M = D^-1`` as a CSR diagonal on both sides), and a dense SPD matrix of 2049.

Needs CuPy and a tessera ``opencl:N`` device on the same GPU (NVIDIA's OpenCL driver;
``--device`` picks it, default ``opencl:0``). Each row solves one system with
``tessera_array.sparse.linalg.cg`` on that device two ways, the fused device steps
(the default path there, ``backends/opencl/cg.py``) and the generic path (dot products
on the device, as the solver core's ``_isolve._cg(..., fused=False)`` selects), and with
``cupyx.scipy.sparse.linalg.cg`` on the same matrix. ``rtol=atol=0`` makes every solve
run exactly ``--iters`` iterations; the time is host wall clock from the call to the
returned solution (both solvers read a norm back every iteration), divided by the
iterations; medians over reps that alternate the three. ``speed = cupy / tessera``
(1.0: as fast as CuPy). The solutions of the three are compared after timing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

__all__ = ["main", "run"]


def _poisson(k):
    import scipy.sparse as sp

    t = sp.diags_array([-np.ones(k - 1), 2 * np.ones(k), -np.ones(k - 1)], offsets=[-1, 0, 1])
    eye = sp.eye_array(k)
    return (sp.kron(eye, t) + sp.kron(t, eye)).tocsr()


def _spd(n, seed=1):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n, n))
    return q @ q.T / n + np.eye(n)


def _cupy_cg(A, b, iters, M=None):
    import cupyx.scipy.sparse.linalg as csla

    try:
        return csla.cg(A, b, rtol=0.0, atol=0.0, maxiter=iters, M=M)[0]
    except TypeError:  # an older CuPy: tol instead of rtol
        return csla.cg(A, b, tol=0.0, atol=0.0, maxiter=iters, M=M)[0]


def run(device="opencl:0", repeat=5, iters=50, quick=False):
    import cupy as cp
    import cupyx.scipy.sparse as csp

    import tessera_array as xp
    from tessera_array.sparse import csr_array
    from tessera_array.sparse.linalg import _isolve

    cases = [("poisson", 256), ("poisson", 1024), ("poisson+jacobi", 1024), ("dense spd", 2049)]
    if quick:
        cases = [("poisson", 128), ("poisson+jacobi", 128), ("dense spd", 513)]
    rows = []
    for kind, size in cases:
        host = _poisson(size) if kind.startswith("poisson") else _spd(size)
        jacobi = kind.endswith("jacobi")
        n = host.shape[0]
        b_h = np.random.default_rng(3).standard_normal(n)
        for dtype in (np.float32, np.float64):
            hm = host.astype(dtype)
            if kind.startswith("poisson"):
                A_t, A_c = csr_array(hm, device=device), csp.csr_matrix(hm)
            else:
                A_t, A_c = xp.asarray(hm, device=device), cp.asarray(hm)
            M_t = M_c = None
            if jacobi:  # M = D^-1 as a CSR diagonal on both sides
                import scipy.sparse as sp

                dinv = sp.diags_array(1.0 / hm.diagonal()).tocsr().astype(dtype)
                M_t, M_c = csr_array(dinv, device=device), csp.csr_matrix(dinv)
            b_t, b_c = xp.asarray(b_h.astype(dtype), device=device), cp.asarray(b_h.astype(dtype))

            def tessera(fused):
                x, _ = _isolve._cg(A_t, b_t, rtol=0.0, atol=0.0, maxiter=iters, M=M_t,
                                   fused=fused)
                return np.asarray(x.to_device("cpu"))

            def cupy():
                x = _cupy_cg(A_c, b_c, iters, M_c)
                return cp.asnumpy(x)

            calls = {"fused": lambda: tessera(True), "generic": lambda: tessera(False),
                     "cupy": cupy}
            out = {k: f() for k, f in calls.items()}  # warm-up (compiles), and the results
            times = {k: [] for k in calls}
            for _ in range(repeat):
                for k, f in calls.items():
                    t = time.perf_counter()
                    f()
                    times[k].append((time.perf_counter() - t) / iters)
            med = {k: statistics.median(v) for k, v in times.items()}
            scale = np.abs(out["cupy"]).max()
            diff = {k: float(np.abs(out[k] - out["cupy"]).max() / scale) for k in ("fused", "generic")}
            row = {"case": f"cg {kind} {size}{'^2' if kind.startswith('poisson') else ''} "
                           f"{np.dtype(dtype).name}", "n": n, "iters": iters,
                   **{f"{k}_ms_per_iter": v * 1e3 for k, v in med.items()},
                   "speed_fused": med["cupy"] / med["fused"],
                   "speed_generic": med["cupy"] / med["generic"],
                   "rel_diff_vs_cupy": diff}
            rows.append(row)
            print(f"{row['case']:<28} ms/iter: fused {row['fused_ms_per_iter']:7.3f}  generic "
                  f"{row['generic_ms_per_iter']:7.3f}  cupy {row['cupy_ms_per_iter']:7.3f}  "
                  f"speed fused {row['speed_fused']:5.2f}  generic {row['speed_generic']:5.2f}  "
                  f"|x - x_cupy| / max|x_cupy|: {diff['fused']:.1e} / {diff['generic']:.1e}",
                  flush=True)
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m benchmarks.krylov_vs_cupy")
    p.add_argument("--device", default="opencl:0")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    rows = run(args.device, args.repeat, args.iters, args.quick)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
