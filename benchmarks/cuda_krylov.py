"""The cuda_krylov suite: tessera's cg and gmres on a CUDA device against cupyx's, same GPU.

Needs a ``cuda:N`` device (run with ``--device cuda:N``) and CuPy on that GPU. Each row
solves one system with ``tessera_array.sparse.linalg.cg`` and with
``cupyx.scipy.sparse.linalg.cg`` on the same matrix, a fixed number of iterations
(``rtol=atol=0``: neither stops early), the solution left on the device:

=============  ======================================================================
benchmark      tessera
=============  ======================================================================
cg_fused       the persistent cooperative kernel (the default there: one launch and
               one host read per run of iterations; backends/_cupy/cg.py)
cg_generic     the generic path (registered kernels, the scalars read on the host each
               iteration), chosen through :func:`benchmarks.krylov_vs_cupy.cg_path`
cg_latency     a 1-iteration solve (``maxiter=1``) of the dense system, front end
               included, against cupyx's 1-iteration solve
cg_batched     ``cg(A, B)`` with B of 32 columns (Poisson 256^2; ``--quick``: 128^2):
               the k systems together (one product of the (n, k) block an iteration,
               each column stopping on its own test), against 32 cupyx solves in a loop
gmres_fused    ``gmres(A, b, restart=30)``, the persistent cooperative kernel (one launch
               and one read per run of restart cycles; backends/_cupy/gmres.py), 4
               restart cycles (120 inner iterations; ``--quick``: 2), against cupyx's
               gmres with the same restart and inner iterations (cupyx's ``maxiter``
               counts inner iterations, ``restart`` a cycle: it is given cycles x
               restart; SciPy's and tessera's count cycles)
gmres_generic  the generic loop (Arrays; each Hessenberg entry read on the host)
bicgstab       ``bicgstab(A, b)``, the persistent cooperative kernel (one launch and one
               read per run), 200 iterations (``--quick``: 50), against tessera's own
               generic loop on the same GPU (cupyx has no bicgstab): five host reads an
               iteration there
=============  ======================================================================

Systems: a dense SPD matrix of 2049 (``q q^T / n + 0.01 I``; the acceptance case: <= 15 us
an iteration in float32), 2-D Poisson 1024^2 (CSR), the same with a Jacobi preconditioner (``M = D^-1``
as a CSR diagonal on both sides); float32 and float64; 200 iterations (``--quick``:
dense 513 and Poisson 256^2, 50 iterations). Timed by CUDA events around whole solves
(each ends in a host read on both sides, so this is the solve's wall time on the device);
the ratio is tessera time / cupyx time, and ``params["iterations_per_call"]`` turns a
time into a per-iteration figure. The solutions must agree (max |x - x_cupy| /
max |x_cupy| within 1e-6 in float64, 5e-2 in float32) before timing; bicgstab's Poisson
rows compare relative residuals instead (:func:`_bicgstab_check`).
"""

from __future__ import annotations

import numpy as np

from ._opencl import needs_dtype
from .krylov_vs_cupy import _check, _poisson, cg_path, system_pair

__all__ = ["benchmarks"]

SUITE = "cuda_krylov"
_SOURCES = (
    "backends/cuda/__init__.py",
    "backends/_cupy/_*.py",
    "backends/_cupy/cg.py",
    "backends/_cupy/matvec.py",
    "backends/_cupy/sparse.py",
    "backends/_common/cg.py",
    "kernels/include/tessera/*.cuh",
    "kernels/cuda/cg.cu",
    "kernels/cuda/gmres.cu",
    "kernels/cuda/bicgstab.cu",
    "backends/_cupy/gmres.py",
    "backends/_cupy/bicgstab.py",
    "backends/_cupy/_persistent.py",
    "kernels/cuda/blas1.cu",
    "kernels/cuda/matvec.cu",
    "kernels/cuda/spmv.cu",
    "tessera_array/sparse/*.py",
    "tessera_array/sparse/linalg/*.py",
    "tessera_array/_array.py",
)
FULL_CASES = (("dense spd", 2049), ("poisson", 1024), ("poisson+jacobi", 1024))
QUICK_CASES = (("dense spd", 513), ("poisson", 256))


def _spd(n, seed=1, shift=1e-2):
    """A dense SPD matrix ``q q^T / n + shift I`` (condition number about 400): 200 CG
    iterations in float32 stay finite (the better conditioned ``+ I`` of krylov_vs_cupy
    converges so fast that its recurrence underflows to 0 / 0 within 200 steps, on
    either side)."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n, n))
    return q @ q.T / n + shift * np.eye(n)


def _peer(ctx):
    """``(cupy, cupyx.scipy.sparse, cupyx.scipy.sparse.linalg)``, or Unavailable (no CuPy,
    or the run's device is not a cuda one)."""
    from ._core import Unavailable

    try:
        import cupy as cp
        import cupyx.scipy.sparse as csp
        import cupyx.scipy.sparse.linalg as csla
    except ImportError as err:
        raise Unavailable(f"CuPy (the peer) is not installed: {err}") from err
    if ctx.device.backend_name != "cuda":
        raise Unavailable(f"cuda_krylov runs on a cuda device. Received: {ctx.device}")
    return cp, csp, csla


def _setup(ctx, kind, size, dtype, fused, iters):
    def setup():
        cp, _, csla = _peer(ctx)
        import tessera_array as xp
        from tessera_array import launchers

        dev = ctx.device
        needs_dtype(dev, dtype)
        path = cg_path(fused)
        host = (_poisson(size) if kind.startswith("poisson") else _spd(size)).astype(dtype)
        a_t, a_c, m_t, m_c, b_t, b_c = system_pair(kind, host, dtype, dev)

        def solve():
            x, _ = path(a_t, b_t, rtol=0.0, atol=0.0, maxiter=iters, M=m_t)
            return x

        def cupy_solve():
            return csla.cg(a_c, b_c, rtol=0.0, atol=0.0, maxiter=iters, M=m_c)[0]

        def host_of(v):
            return launchers.to_host(launchers.native(v), dev) if isinstance(v, xp.Array) \
                else cp.asnumpy(v)

        return {"solve": solve, "cupy_solve": cupy_solve, "host_of": host_of}

    return setup


def _batched_setup(ctx, size, k, iters):
    def setup():
        cp, csp, csla = _peer(ctx)

        import tessera_array as xp
        from tessera_array import launchers
        from tessera_array.sparse import csr_array

        dev = ctx.device
        host = _poisson(size).astype("float32")
        a_t, a_c = csr_array(host, device=dev), csp.csr_matrix(host)
        B = np.random.default_rng(4).standard_normal((host.shape[0], k)).astype("float32")
        B_t = xp.asarray(B, device=dev)
        cols = [cp.asarray(B[:, j]) for j in range(k)]

        def solve():
            return xp.sparse.linalg.cg(a_t, B_t, rtol=0.0, atol=0.0, maxiter=iters)[0]

        def cupy_solve():
            return cp.stack([csla.cg(a_c, c, rtol=0.0, atol=0.0, maxiter=iters)[0]
                             for c in cols], axis=1)

        def host_of(v):
            return launchers.to_host(launchers.native(v), dev) if isinstance(v, xp.Array) \
                else cp.asnumpy(v)

        return {"solve": solve, "cupy_solve": cupy_solve, "host_of": host_of}

    return setup


def _gmres_setup(ctx, kind, size, dtype, fused, cycles, restart=30):
    def setup():
        cp, _, csla = _peer(ctx)
        import tessera_array as xp
        from tessera_array import launchers
        from tessera_array.sparse.linalg import _gmres as gm

        dev = ctx.device
        needs_dtype(dev, dtype)
        host = (_poisson(size) if kind.startswith("poisson") else _spd(size)).astype(dtype)
        a_t, a_c, m_t, m_c, b_t, b_c = system_pair(kind, host, dtype, dev)

        def solve():
            return gm._gmres(a_t, b_t, rtol=0.0, atol=0.0, restart=restart, maxiter=cycles,
                             M=m_t, native=fused)[0]

        def cupy_solve():  # (its maxiter: inner iterations, whole cycles of restart)
            return csla.gmres(a_c, b_c, rtol=0.0, atol=0.0, restart=restart,
                              maxiter=cycles * restart, M=m_c)[0]

        def host_of(v):
            return launchers.to_host(launchers.native(v), dev) if isinstance(v, xp.Array) \
                else cp.asnumpy(v)

        return {"solve": solve, "cupy_solve": cupy_solve, "host_of": host_of}

    return setup


def _bicgstab_setup(ctx, kind, size, dtype, iters):
    def setup():
        _peer(ctx)
        import tessera_array as xp
        from tessera_array import launchers
        from tessera_array.sparse.linalg import _isolve

        dev = ctx.device
        needs_dtype(dev, dtype)
        host = (_poisson(size) if kind.startswith("poisson") else _spd(size)).astype(dtype)
        a_t, _, m_t, _, b_t, _ = system_pair(kind, host, dtype, dev)
        fused = _isolve._bicgstab_fused

        def solve():
            return xp.sparse.linalg.bicgstab(a_t, b_t, rtol=0.0, atol=0.0, maxiter=iters,
                                             M=m_t)[0]

        def cupy_solve():  # (the peer: tessera's generic loop; cupyx has no bicgstab)
            _isolve._bicgstab_fused = lambda *a: None
            try:
                return xp.sparse.linalg.bicgstab(a_t, b_t, rtol=0.0, atol=0.0,
                                                 maxiter=iters, M=m_t)[0]
            finally:
                _isolve._bicgstab_fused = fused

        def host_of(v):
            return launchers.to_host(launchers.native(v), dev)

        residual = None
        if kind.startswith("poisson"):  # (_bicgstab_check: float64 on the host)
            a64 = host.astype(np.float64)
            b64 = np.asarray(host_of(b_t), dtype=np.float64)
            bnrm = float(np.linalg.norm(b64))

            def residual(x):
                return float(np.linalg.norm(b64 - a64 @ np.asarray(x, dtype=np.float64)) / bnrm)

        return {"solve": solve, "cupy_solve": cupy_solve, "host_of": host_of,
                "residual": residual}

    return setup


def _device_check(t, p, ns):
    _check(ns["host_of"](t), ns["host_of"](p), ns)


def _bicgstab_check(t, p, ns):
    """The bicgstab rows' check. On the Poisson systems 200 unconverged BiCGSTAB steps
    amplify the order of a dot product's sums into x (on the CPU, float64: another order
    moved x by 2.8-3.7%, float32 by 4.5-10%, with relative residuals within 1.35x;
    benchmarks/NOTES.md), so there the two relative residuals ||b - A x|| / ||b|| (float64,
    on the host) must be finite and within a factor of 2; the dense rows compare x."""
    residual = ns["residual"]
    if residual is None:
        return _device_check(t, p, ns)
    rt, rp = residual(ns["host_of"](t)), residual(ns["host_of"](p))
    if not (np.isfinite(rt) and np.isfinite(rp) and 0.5 * rp <= rt <= 2.0 * rp):
        raise AssertionError(f"the relative residuals differ by more than a factor of 2: "
                             f"{rt:.3g} (fused) against {rp:.3g} (the generic loop)")


def _timers(ns):
    from ._core import CudaEventTimer

    return CudaEventTimer(), CudaEventTimer()


def benchmarks(ctx) -> list:
    from ._core import Benchmark

    cases = QUICK_CASES if ctx.quick else FULL_CASES
    iters = 50 if ctx.quick else 200
    out = []

    def add(name, kind, size, dtype, fused, n_iter, target=None):
        label = f"{kind} {size}{'^2' if kind.startswith('poisson') else ''}"
        out.append(Benchmark(
            suite=SUITE, name=name, variant=f"{label} {dtype}", tessera="solve()",
            peer="cupy_solve()", setup=_setup(ctx, kind, size, dtype, fused, n_iter),
            sources=_SOURCES, params={"label": f"{name} {label} {dtype}", "system": kind,
                                      "size": size, "dtype": dtype,
                                      "iterations_per_call": n_iter},
            peer_name="cupyx", check=_device_check, timers=_timers, target=target))

    for fused in (True, False):
        for kind, size in cases:
            for dtype in ("float32", "float64"):
                # targets (issue figures): dense 2049 float32 >= 24x cupyx (15 us an
                # iteration against 366); Poisson 1024^2 float32 >= 3x
                target = None
                if fused and dtype == "float32" and (kind, size) == ("dense spd", 2049):
                    target = 1 / 24
                elif fused and dtype == "float32" and (kind, size) == ("poisson", 1024):
                    target = 1 / 3
                add("cg_fused" if fused else "cg_generic", kind, size, dtype, fused, iters,
                    target)
    kind, size = cases[0]
    add("cg_latency", kind, size, "float32", True, 1)
    size, k = (128 if ctx.quick else 256), 32
    out.append(Benchmark(
        suite=SUITE, name="cg_batched", variant=f"poisson {size}^2 x{k} float32",
        tessera="solve()", peer="cupy_solve()", setup=_batched_setup(ctx, size, k, 50),
        sources=_SOURCES, params={"label": f"cg_batched poisson {size}^2 x{k} float32",
                                  "system": "poisson", "size": size, "columns": k,
                                  "dtype": "float32", "iterations_per_call": 50},
        peer_name="cupyx (a loop of solves)", check=_device_check, timers=_timers,
        target=1 / 8))
    cycles, restart = (2 if ctx.quick else 4), 30
    for fused in (True, False):
        for kind, size in cases:
            for dtype in ("float32", "float64"):
                if not fused and kind.startswith("poisson") and dtype == "float64":
                    continue  # (the generic loop's host reads: one row of it is enough)
                label = f"{kind} {size}{'^2' if kind.startswith('poisson') else ''}"
                name = "gmres_fused" if fused else "gmres_generic"
                # target (issue figure): dense 2049 restart 30 >= 10x cupyx an iteration
                target = 1 / 10 if (fused and (kind, size) == ("dense spd", 2049)) else None
                out.append(Benchmark(
                    suite=SUITE, name=name, variant=f"{label} {dtype}", tessera="solve()",
                    peer="cupy_solve()",
                    setup=_gmres_setup(ctx, kind, size, dtype, fused, cycles, restart),
                    sources=_SOURCES,
                    params={"label": f"{name} {label} {dtype}", "system": kind,
                            "size": size, "dtype": dtype, "restart": restart,
                            "iterations_per_call": cycles * restart},
                    peer_name="cupyx", check=_device_check, timers=_timers, target=target))
    for kind, size in cases:
        for dtype in ("float32", "float64"):
            label = f"{kind} {size}{'^2' if kind.startswith('poisson') else ''}"
            out.append(Benchmark(
                suite=SUITE, name="bicgstab", variant=f"{label} {dtype}", tessera="solve()",
                peer="cupy_solve()", setup=_bicgstab_setup(ctx, kind, size, dtype, iters),
                sources=_SOURCES,
                params={"label": f"bicgstab {label} {dtype}", "system": kind, "size": size,
                        "dtype": dtype, "iterations_per_call": iters},
                peer_name="tessera generic loop", check=_bicgstab_check, timers=_timers))
    return out
