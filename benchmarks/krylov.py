"""The krylov suite: tessera_array.sparse.linalg against scipy.sparse.linalg.

Each benchmark runs a fixed number of iterations of one solver on one system,
tessera (``csr_array`` / dense Array on the device) against SciPy (``csr_array`` /
``ndarray``) in the same process, timed side by side (see :mod:`benchmarks._core`).
The tolerance is set so neither side converges early (``rtol=1e-30``), and the two
sides must agree (same ``info``, iterates within 1e-8 relative, checked once before
timing), so the time ratio is the ratio of time per iteration.

==============  ============================================  ===================
benchmark       system                                        iterations per call
==============  ============================================  ===================
cg              2-D Poisson (5-point) CSR, 64^2, 256^2,      10
                512^2 and 1024^2; dense SPD n = 513 and 2049
                (G G^T / n + 1e-3 I)
gmres           the same systems                              restart=10, maxiter=1
                                                              (10 inner iterations)
==============  ============================================  ===================

dtypes float64 and float32. Target (reported, never enforced): ratio <= 1.0 for cg
and gmres on every system and dtype. ``--quick`` uses Poisson 64^2 and 256^2 and
dense n = 513 instead (stated in each benchmark's params). The suite needs a host
device (its peer is SciPy on the CPU); on another device each benchmark reports
``unavailable`` (a cupyx peer comes with the GPU backends).
"""

from __future__ import annotations

__all__ = ["benchmarks"]

_SOURCES = (
    "tessera_array/sparse/*.py",
    "tessera_array/sparse/linalg/*.py",
    "backends/numpy/sparse.py",
    "backends/numpy/matvec.py",
    "backends/numpy/cg.py",
    "backends/numpy/_krylov_c.c",
    "backends/numpy/_stencil_c.c",
    "backends/numpy/krylov.py",
    "backends/numpy/__init__.py",
    "backends/numpy/_ops*.py",
    "backends/numpy/_namespace.py",
    "backends/_xp/*.py",
    "tessera_array/_array.py",
    "tessera_array/_dispatch.py",
    "tessera_array/_linear_algebra_functions.py",
    "tessera_array/_elementwise_functions.py",
)

# Each side's batch starts after this long idle (Benchmark.settle_s). SciPy's dots run on
# OpenBLAS's threads, which then spin for ~0.1 s (2^28 TSC ticks, its default
# OPENBLAS_THREAD_TIMEOUT) before they sleep; tessera's solvers hold OpenBLAS at one
# thread and share their spmv/axpy/dot parts among their own threads
# (backends/numpy/_threads.py), which a spinning worker slows. Back to back, a tessera
# batch right after SciPy's ran with that worker on the second core.
BLAS_SETTLE_S = 0.15
# OpenBLAS runs ?dot on one thread up to this length (backends/numpy/_threads.py) and a
# gemv of m * n < 9216 too: a Poisson system this small threads nowhere, and its
# 0.3-0.5 ms calls timed one a batch right after a pause measure a cold start (after
# 0.15 s idle the first six calls of cg on Poisson 64^2 took 1.1-1.5 ms, 0.5-0.66, ...
# against 0.30 steady; NOTES.md), so its rows run without the pause. Where there is a
# pause, each side makes one untimed call after it (``prime``): its own steady state.
BLAS_SERIAL_MAX = 10000
FULL_SYSTEMS = (("poisson", 64), ("poisson", 256), ("poisson", 512), ("poisson", 1024),
                ("dense_spd", 513), ("dense_spd", 2049))
QUICK_SYSTEMS = (("poisson", 64), ("poisson", 256), ("dense_spd", 513))
DTYPES = ("float64", "float32")
CALLS = {
    "cg": ("cg(A, b, rtol=1e-30, maxiter=10)", 10),
    "gmres": ("gmres(A, b, rtol=1e-30, restart=10, maxiter=1)", 10),
}


def _poisson(k: int, dtype):
    import numpy as np
    import scipy.sparse as sp

    t = sp.diags_array([-np.ones(k - 1), 2 * np.ones(k), -np.ones(k - 1)], offsets=[-1, 0, 1])
    eye = sp.eye_array(k)
    return (sp.kron(eye, t) + sp.kron(t, eye)).tocsr().astype(dtype)


def _dense_spd(n: int, dtype, rng):
    g = rng.standard_normal((n, n))
    a = g @ g.T / n
    a[range(n), range(n)] += 1e-3
    return a.astype(dtype)


def _make_setup(xp, device, solver, kind, size, dtype):
    def setup() -> dict:
        import numpy as np

        from benchmarks._core import Unavailable

        try:
            import scipy.sparse.linalg as sla
        except ImportError as err:
            raise Unavailable(f"the peer needs SciPy ({err})") from err
        try:
            from tessera_array.sparse import csr_array
            from tessera_array.sparse import linalg as tla
        except ImportError as err:
            raise Unavailable(f"tessera_array.sparse does not exist yet ({err})") from err
        rng = np.random.default_rng(20261130)
        if kind == "poisson":
            a = _poisson(size, dtype)
            at = csr_array(a, device=device)
        else:
            a = _dense_spd(size, dtype, rng)
            at = xp.asarray(a, device=device)
        b = rng.standard_normal(a.shape[0]).astype(dtype)
        return {
            "sla": sla, "tla": tla, "A_peer": a, "b_peer": b,
            "A": at, "b": xp.asarray(b, device=device), "xp": xp, "np": np,
            "cg": tla.cg,
            "gmres": tla.gmres,
        }

    return setup


def _check(t, p, ns):
    import numpy as np

    xt, it = t
    xs, ins = p
    if it != ins:
        raise AssertionError(f"info differs: tessera {it}, scipy {ins}")
    xt = np.asarray(xt)
    if xt.dtype != xs.dtype or xt.shape != xs.shape:
        raise AssertionError(f"x differs in dtype/shape: {xt.dtype}{xt.shape} vs "
                             f"{xs.dtype}{xs.shape}")
    tol = 1e-8 if xs.dtype == np.float64 else 1e-3
    err = np.max(np.abs(xt - xs)) / max(np.max(np.abs(xs)), 1e-300)
    if err > tol:
        raise AssertionError(f"iterates differ: max relative difference {err:.3g} > {tol}")


def benchmarks(ctx) -> list:
    """The krylov benchmarks for ``ctx.device`` (a host device: the peer is SciPy)."""
    from benchmarks._core import Benchmark, Unavailable

    xp, device = ctx.xp, ctx.device
    host = device._backend.is_host
    systems = QUICK_SYSTEMS if ctx.quick else FULL_SYSTEMS
    out = []
    for solver, (call, iters) in CALLS.items():
        for kind, size in systems:
            for dtype in DTYPES:
                if host:
                    setup = _make_setup(xp, device, solver, kind, size, dtype)
                else:
                    def setup(_dev=device):
                        raise Unavailable(
                            f"the krylov suite compares with SciPy and needs a host device; "
                            f"{_dev} is not one (a cupyx peer comes with the GPU backends)")
                n = size * size if kind == "poisson" else size
                label = f"{kind}{size}^2" if kind == "poisson" else f"{kind}{size}"
                target = 1.0
                # (the pause only where OpenBLAS threads: a dense gemv, or dots past its
                # serial length; a 0.5 ms batch right after it times a cold call)
                settle = BLAS_SETTLE_S if kind != "poisson" or n > BLAS_SERIAL_MAX else 0.0
                out.append(Benchmark(
                    suite="krylov",
                    name=solver,
                    variant=f"{label},{dtype}",
                    tessera=call,
                    peer=call.replace(f"{solver}(A, b", f"sla.{solver}(A_peer, b_peer"),
                    setup=setup,
                    sources=_SOURCES,
                    params={"system": kind, "size": size, "n": n, "dtype": dtype,
                            "iterations_per_call": iters, "quick_sizes": ctx.quick,
                            "label": f"{solver} {label} {dtype}"},
                    peer_name="scipy",
                    target=target,
                    check=_check,
                    settle_s=settle,
                    prime=settle > 0,
                ))
    return out
