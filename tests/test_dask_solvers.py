"""The Krylov solvers on dask arrays of tessera chunks.

``b`` a dask array whose chunks are tessera arrays, ``A`` a dask array of row blocks or
:func:`tessera_array.sparse.linalg.row_block_operator` (one task a CSR row block): the
solvers run through array_api_compat's namespace for dask, one persisted graph an
iteration, and must give SciPy's info and iteration counts (the NumPy backend's report)
and SciPy's solution to 1e-10 (relative, float64; cgs 1e-8). Every solver runs on the synchronous
scheduler here; cg on 2-D Poisson 256^2 and gmres on a convection-diffusion system run on
a ``distributed.LocalCluster`` of two worker processes, the products on the workers.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import tessera_array as xp
from tessera_array.sparse import csr_array
from tessera_array.sparse import linalg as tla

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
pytest.importorskip("array_api_compat")
sp = pytest.importorskip("scipy.sparse")
sla = pytest.importorskip("scipy.sparse.linalg")
from _problems import convection_diffusion, poisson2d


def _chunks(n, parts=4):
    base = n // parts
    return (base,) * (parts - 1) + (n - base * (parts - 1),)


def _system(a, form, seed=3, parts=4):
    """``(A, b, b_host)``: the operator in ``form`` and a random dask b of tessera chunks
    (``parts`` of them)."""
    n = a.shape[0]
    b = np.random.default_rng(seed).standard_normal(n)
    chunks = _chunks(n, parts)
    if form == "operator":
        A = tla.row_block_operator(csr_array(a), chunks)
    else:  # a dense dask matrix of row blocks
        A = da.from_array(xp.asarray(a.toarray()), chunks=(chunks, n))
    return A, da.from_array(xp.asarray(b), chunks=chunks), b


def _check(solver, a, b_host, x, info, rep, **kw):
    """SciPy's info and the NumPy backend's report (iteration count: SciPy's), and
    SciPy's solution to 1e-10 relative; x a dask array of tessera chunks."""
    extra = {"callback_type": "pr_norm"} if solver == "gmres" else {}  # (inner steps)
    count = [0]
    xs, ins = getattr(sla, solver)(a, b_host, callback=lambda _: count.__setitem__(
        0, count[0] + 1), **extra, **kw)
    _, info_t, rep_t = getattr(tla, solver)(csr_array(a), xp.asarray(b_host), report=True,
                                            **kw)
    assert info == ins == info_t == 0
    assert rep.iterations == rep_t.iterations
    if solver != "bicgstab":  # (its report counts the test after the last step: SciPy + 1)
        assert rep.iterations == count[0]
    assert type(x).__module__.startswith("dask.")
    got = x.compute()
    assert isinstance(got, xp.Array)
    # (CGS squares BiCG's residual polynomial, so dask's summation order moves its x
    # further: 2.5e-10 here; the others stay within 3e-15)
    tol = 1e-8 if solver == "cgs" else 1e-10
    assert np.abs(np.asarray(got) - xs).max() <= tol * np.abs(xs).max()


CASES = [("cg", "poisson", 12), ("minres", "poisson", 12), ("bicgstab", "convdiff", 8),
         ("gmres", "convdiff", 8), ("cgs", "convdiff", 8), ("bicg", "convdiff", 8)]


@pytest.mark.parametrize("form", ["operator", "dense"])
@pytest.mark.parametrize("solver,problem,k", CASES)
def test_solvers_on_dask_arrays(solver, problem, k, form):
    a = poisson2d(k) if problem == "poisson" else convection_diffusion(k)
    A, b, b_host = _system(a, form)
    with dask.config.set(scheduler="synchronous"):
        x, info, rep = getattr(tla, solver)(A, b, report=True)
        _check(solver, a, b_host, x, info, rep)


def test_cg_on_dask_callback_and_x0():
    """A callback sees each iterate (a dask array); x0 (a dask array) is read, not
    written; maxiter gives info = maxiter as SciPy's."""
    a = poisson2d(10)
    A, b, b_host = _system(a, "operator")
    x0_host = np.full(a.shape[0], 0.5)
    x0 = da.from_array(xp.asarray(x0_host), chunks=b.chunks)
    seen = []
    with dask.config.set(scheduler="synchronous"):
        x, info = tla.cg(A, b, x0=x0, maxiter=7, callback=seen.append)
        xs, ins = sla.cg(a, b_host, x0=x0_host, maxiter=7)
        assert info == ins == 7 and len(seen) == 7
        assert all(type(v).__module__.startswith("dask.") for v in seen)
        np.testing.assert_allclose(np.asarray(x.compute()), xs, rtol=1e-10,
                                   atol=1e-10 * np.abs(xs).max())
        np.testing.assert_array_equal(np.asarray(x0.compute()), x0_host)


def test_row_block_operator_products_and_errors():
    a = convection_diffusion(6)
    n = a.shape[0]
    op = tla.row_block_operator(a, (10, 10, 16))
    v_host = np.random.default_rng(1).standard_normal(n)
    v = da.from_array(xp.asarray(v_host), chunks=12)  # other chunks than the blocks
    with dask.config.set(scheduler="synchronous"):
        y = op.matvec(v)
        assert y.chunks == ((10, 10, 16),)
        np.testing.assert_allclose(np.asarray(y.compute()), a @ v_host, rtol=1e-13)
        np.testing.assert_allclose(np.asarray(op.rmatvec(v).compute()), a.T @ v_host,
                                   rtol=1e-13)
    with pytest.raises(ValueError, match=r"row_block_operator: chunks must be positive "
                                         r"row-block sizes summing to A.shape\[0\]=36"):
        tla.row_block_operator(a, (10, 10))
    with pytest.raises(ValueError, match=r"row_block_operator: A must be square"):
        tla.row_block_operator(sp.csr_array(np.ones((3, 4))), (3,))
    with pytest.raises(TypeError, match=r"row_block_operator: A must be a csr_array"):
        tla.row_block_operator(np.eye(3), (3,))


# ---- a real cluster: two worker processes --------------------------------------------


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=":0")
    try:
        with distributed.Client(cluster) as c:
            yield c
    finally:
        cluster.close()


def _worker_pids(client):
    return set(client.run(os.getpid).values())


def test_cg_poisson_256_on_a_cluster(client):
    """cg on 2-D Poisson 256^2 (65536 unknowns, 567 iterations), the vectors in 2 chunks
    on 2 workers (a chunk a worker: some 20% fewer hops an iteration than 4 chunks; the
    benchmark has 4): SciPy's info, iteration count and solution; the block products ran
    on both workers."""
    from distributed import get_task_stream

    a = poisson2d(256)
    A, b, b_host = _system(a, "operator", parts=2)
    with get_task_stream(client) as ts:
        x, info, rep = tla.cg(A, b, report=True)
    _check("cg", a, b_host, x, info, rep)
    workers = {r["worker"] for r in ts.data if "block_product" in str(r["key"])}
    assert len(workers) == 2, workers
    assert os.getpid() not in _worker_pids(client)


def test_gmres_convection_diffusion_on_a_cluster(client):
    a = convection_diffusion(10)
    A, b, b_host = _system(a, "operator", parts=2)
    x, info, rep = tla.gmres(A, b, report=True)
    _check("gmres", a, b_host, x, info, rep)
