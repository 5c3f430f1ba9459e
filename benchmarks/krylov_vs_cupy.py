"""The krylov_vs_cupy suite: tessera's cg on an OpenCL GPU against CuPy's, same GPU.

Needs CuPy and a tessera ``opencl:N`` device on the same NVIDIA GPU (run with
``--device opencl:N``). Each benchmark solves one system with
``tessera_array.sparse.linalg.cg`` on that device and with
``cupyx.scipy.sparse.linalg.cg`` on the same matrix, a fixed number of iterations
(``rtol=atol=0``: neither stops early), both returning the solution on the host:

=============  ======================================================================
benchmark      tessera
=============  ======================================================================
cg_fused       the fused device steps (the default path there: dot products, scalars
               and the stopping test on the device, one read per run of iterations)
cg_generic     the generic path (dot products through the registered kernels, the
               scalars on the host), chosen through :func:`cg_path`
=============  ======================================================================

Systems: 2-D Poisson 256^2 and 1024^2 (CSR), 1024^2 with a Jacobi preconditioner
(``M = D^-1`` as a CSR diagonal on both sides), a dense SPD matrix of 2049; float32
and float64; 50 iterations (``--quick``: Poisson 128^2 with and without Jacobi, dense
513, 20 iterations). Host wall clock per solve; the ratio is tessera time / CuPy time.
The solutions must agree (max |x - x_cupy| / max |x_cupy| within 1e-6 in float64,
5e-2 in float32) before timing.
"""

from __future__ import annotations

import functools

import numpy as np

from ._opencl import CORE_SOURCES, needs_dtype

__all__ = ["benchmarks", "cg_path"]

_SOURCES = CORE_SOURCES + (
    "tessera_array/sparse/*.py",
    "tessera_array/sparse/linalg/*.py",
    "backends/opencl/cg.py",
    "backends/opencl/dot.py",
    "backends/opencl/matvec.py",
    "backends/opencl/sparse.py",
    "kernels/opencl/cg.cl",
    "kernels/opencl/dot.cl",
    "kernels/opencl/matvec.cl",
    "kernels/opencl/spmv.cl",
)
FULL_CASES = (("poisson", 256), ("poisson", 1024), ("poisson+jacobi", 1024),
              ("dense spd", 2049))
QUICK_CASES = (("poisson", 128), ("poisson+jacobi", 128), ("dense spd", 513))


def cg_path(fused: bool):
    """The cg solver with its fused device steps (``fused=True``) or the generic path.

    The suite's one contact with how cg chooses: the solver core
    ``tessera_array.sparse.linalg._isolve._cg(..., fused=...)``, the seam tests use too;
    it takes ``cg``'s arguments.
    """
    from tessera_array.sparse.linalg import _isolve

    return functools.partial(_isolve._cg, fused=fused)


def _poisson(k):
    import scipy.sparse as sp

    t = sp.diags_array([-np.ones(k - 1), 2 * np.ones(k), -np.ones(k - 1)], offsets=[-1, 0, 1])
    eye = sp.eye_array(k)
    return (sp.kron(eye, t) + sp.kron(t, eye)).tocsr()


def _spd(n, seed=1):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((n, n))
    return q @ q.T / n + np.eye(n)


def system_pair(kind, host, dtype, dev):
    """``(A, A_cupy, M, M_cupy, b, b_cupy)`` of one system on both sides: ``host`` (a
    SciPy CSR matrix for a Poisson ``kind``, else dense) as a tessera matrix on ``dev``
    and a CuPy one; ``M = D^-1`` as a CSR diagonal on both sides for a ``...jacobi``
    kind, else None; a random right-hand side."""
    import cupy as cp
    import cupyx.scipy.sparse as csp
    import scipy.sparse as sp

    import tessera_array as xp
    from tessera_array.sparse import csr_array

    if kind.startswith("poisson"):
        a_t, a_c = csr_array(host, device=dev), csp.csr_matrix(host)
    else:
        a_t, a_c = xp.asarray(host, device=dev), cp.asarray(host)
    m_t = m_c = None
    if kind.endswith("jacobi"):
        dinv = sp.diags_array(1.0 / host.diagonal()).tocsr().astype(dtype)
        m_t, m_c = csr_array(dinv, device=dev), csp.csr_matrix(dinv)
    b = np.random.default_rng(3).standard_normal(host.shape[0]).astype(dtype)
    return a_t, a_c, m_t, m_c, xp.asarray(b, device=dev), cp.asarray(b)


def _setup(ctx, kind, size, dtype, fused, iters):
    def setup():
        from ._core import Unavailable

        try:
            import cupy as cp
            import cupyx.scipy.sparse.linalg as csla
        except ImportError as err:
            raise Unavailable(f"CuPy (the peer) is not installed: {err}") from err
        from tessera_array import launchers

        dev = ctx.device
        needs_dtype(dev, dtype)
        path = cg_path(fused)
        host = (_poisson(size) if kind.startswith("poisson") else _spd(size)).astype(dtype)
        a_t, a_c, m_t, m_c, b_t, b_c = system_pair(kind, host, dtype, dev)

        def solve():
            x, _ = path(a_t, b_t, rtol=0.0, atol=0.0, maxiter=iters, M=m_t)
            return launchers.to_host(launchers.native(x), dev)

        def cupy_solve():
            try:
                x = csla.cg(a_c, b_c, rtol=0.0, atol=0.0, maxiter=iters, M=m_c)[0]
            except TypeError:  # an older CuPy: tol instead of rtol
                x = csla.cg(a_c, b_c, tol=0.0, atol=0.0, maxiter=iters, M=m_c)[0]
            return cp.asnumpy(x)

        return {"solve": solve, "cupy_solve": cupy_solve}

    return setup


def _check(t, p, ns):
    t, p = np.asarray(t), np.asarray(p)
    tol = 1e-6 if p.dtype == np.float64 else 5e-2
    err = float(np.abs(t - p).max() / max(float(np.abs(p).max()), 1e-300))
    if not np.isfinite(err) or err > tol:
        raise AssertionError(f"the solutions differ: max |x - x_cupy| / max |x_cupy| = "
                             f"{err:.3g} > {tol}")


def benchmarks(ctx) -> list:
    from ._core import Benchmark

    cases = QUICK_CASES if ctx.quick else FULL_CASES
    iters = 20 if ctx.quick else 50
    out = []
    for fused in (True, False):
        name = "cg_fused" if fused else "cg_generic"
        for kind, size in cases:
            label = f"{kind} {size}{'^2' if kind.startswith('poisson') else ''}"
            for dtype in ("float32", "float64"):
                out.append(Benchmark(
                    suite="krylov_vs_cupy", name=name, variant=f"{label} {dtype}",
                    tessera="solve()", peer="cupy_solve()",
                    setup=_setup(ctx, kind, size, dtype, fused, iters), sources=_SOURCES,
                    params={"label": f"{name} {label} {dtype}", "system": kind,
                            "size": size, "dtype": dtype, "iterations_per_call": iters},
                    peer_name="cupyx", check=_check,
                ))
    return out
