"""The dask_krylov suite: cg on dask arrays of tessera chunks over a 2-process cluster.

One system, 2-D Poisson 1024^2 float64 (``--quick``: 256^2), the vectors in 4 chunks,
the operator :func:`tessera_array.sparse.linalg.row_block_operator` (one task a row
block), on a ``distributed.LocalCluster`` of two worker processes (one thread each)
started by the suite and closed at exit. A fixed number of iterations (``rtol = atol =
0``: 10, ``--quick`` 5), host wall time per solve, the solution computed back:

============  ==============================================================  ==========
benchmark     tessera                                                          peer
============  ==============================================================  ==========
cg_dask       ``cg`` on the cluster                                            the same
              (vs_single: against the single-process solve of the same         cg on the
              system on the NumPy backend; vs_scipy: against SciPy's cg)       peer's side
============  ==============================================================  ==========

The ratio against the single-process solve is the cost of the engine: (ratio - 1) /
ratio of the cluster's time is scheduling and transfers (the work itself is the single
process's), the figure the issue asks for; the point is correctness and that figure,
not a speed-up on two cores. The solutions must agree to 1e-12 (relative) before timing.
"""

from __future__ import annotations

import atexit

import numpy as np

__all__ = ["benchmarks"]

SUITE = "dask_krylov"
WORKERS = 2
_SOURCES = (
    "tessera_array/sparse/*.py",
    "tessera_array/sparse/linalg/*.py",
    "tessera_array/_array.py",
    "tessera_array/_numpy_methods.py",
    "tessera_array/_numpy_interop.py",
    "backends/numpy/*.py",
)
_cluster: dict = {}


def _client():
    """The suite's one cluster and client (started on first use, closed at exit)."""
    from ._core import Unavailable

    if "client" not in _cluster:
        try:
            from distributed import Client, LocalCluster
        except ImportError as err:
            raise Unavailable(f"distributed is not installed: {err}") from err
        cluster = LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=True,
                               dashboard_address=":0")
        client = Client(cluster)
        _cluster.update(cluster=cluster, client=client)

        def close():
            client.close()
            cluster.close()

        atexit.register(close)
    return _cluster["client"]


def _setup(ctx, size, iters):
    def setup():
        from ._core import Unavailable

        try:
            import dask.array as da
            import scipy.sparse.linalg as sla
        except ImportError as err:
            raise Unavailable(f"dask or scipy is not installed: {err}") from err
        import tessera_array as xp
        from tessera_array.sparse import csr_array
        from tessera_array.sparse import linalg as tla

        from .krylov_vs_cupy import _poisson

        if ctx.device.backend_name != "numpy":
            raise Unavailable(f"dask_krylov runs its chunks on the cpu. Received: "
                              f"{ctx.device}")
        _client()
        a = _poisson(size)
        n = a.shape[0]
        chunks = (n // 4,) * 3 + (n - 3 * (n // 4),)
        b = np.random.default_rng(3).standard_normal(n)
        op = tla.row_block_operator(csr_array(a), chunks)
        b_d = da.from_array(xp.asarray(b), chunks=chunks).persist()
        a_t, b_t = csr_array(a), xp.asarray(b)

        def solve():
            return np.asarray(tla.cg(op, b_d, rtol=0.0, atol=0.0, maxiter=iters)[0]
                              .compute())

        def single():
            return np.asarray(tla.cg(a_t, b_t, rtol=0.0, atol=0.0, maxiter=iters)[0])

        def scipy_solve():
            return sla.cg(a, b, rtol=0.0, atol=0.0, maxiter=iters)[0]

        return {"solve": solve, "single": single, "scipy_solve": scipy_solve}

    return setup


def _check(t, p, ns):
    err = float(np.abs(t - p).max() / max(float(np.abs(p).max()), 1e-300))
    if not err <= 1e-12:
        raise AssertionError(f"the solutions differ: max rel. error {err:.3g} > 1e-12")


def benchmarks(ctx) -> list:
    from ._core import Benchmark

    size = 256 if ctx.quick else 1024
    iters = 5 if ctx.quick else 10
    label = f"poisson {size}^2 float64, 4 chunks, {WORKERS} workers"
    params = {"label": f"cg_dask {label}", "system": "poisson", "size": size,
              "dtype": "float64", "chunks": 4, "workers": WORKERS,
              "iterations_per_call": iters}
    return [
        Benchmark(suite=SUITE, name="cg_dask", variant=f"vs_single {label}",
                  tessera="solve()", peer="single()", setup=_setup(ctx, size, iters),
                  sources=_SOURCES, params=params, peer_name="tessera (one process)",
                  check=_check, batch=1),
        Benchmark(suite=SUITE, name="cg_dask", variant=f"vs_scipy {label}",
                  tessera="solve()", peer="scipy_solve()", setup=_setup(ctx, size, iters),
                  sources=_SOURCES, params=params, peer_name="scipy", check=_check,
                  batch=1),
    ]
