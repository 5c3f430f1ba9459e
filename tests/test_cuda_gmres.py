"""gmres on CUDA as one persistent cooperative kernel (``backends/_cupy/gmres.py``,
``kernels/cuda/gmres.cu``; the contract ``tessera_array/sparse/linalg/_fused_gmres.py``).

The generic loop (``_gmres(native=False)``: Arrays, modified Gram-Schmidt, the small
problem on the host) is the reference: the fused solve's x, info, inner iterations and
residual history agree with it to rounding after 1, 3 and 50 restart cycles (float64;
float32 and complex too), with and without a preconditioner, from zero and nonzero x0;
converged runs take SciPy's iteration counts within one (2-D Poisson, dense SPD,
convection-diffusion, complex Hermitian); the callbacks see what the generic loop's see;
NaN/inf stop with -20; every workspace buffer starts poisoned; the bits repeat, also
when the cycles are split over launches differently.

Without a CUDA backend the module is skipped with the reason; with
``TESSERA_REQUIRE_BACKENDS`` naming ``cuda`` that skip is a failure instead.
"""

from __future__ import annotations

import _gate
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as sla
from _poison import poisoned_empty
from _problems import COMPARED, CONVERGED, assert_reports_close, convection_diffusion
from _problems import nonsymmetric as _nonsym
from _problems import rhs as _rhs

import tessera_array as xp
from tessera_array.sparse import csr_array
from tessera_array.sparse import linalg as tla
from tessera_array.sparse.linalg import _gmres as gm

BACKEND = _gate.require_backend("cuda")

import cupy
from tessera_array.backends._cupy import _kernels
from tessera_array.backends._cupy import gmres as cu_gmres

DEV = "cuda:0"


@pytest.fixture(autouse=True)
def poisoned(monkeypatch):
    """Every buffer the launchers allocate starts as 0xFF bytes (NaN in floats); the
    launcher's kept plans and workspaces are dropped before and after each test (a test
    that sets a launcher's knob gets plans made with it)."""
    monkeypatch.setattr(_kernels, "empty", poisoned_empty(cupy))
    cu_gmres._plans.clear()
    yield
    cu_gmres._plans.clear()


@pytest.fixture
def launches(monkeypatch):
    """The fused solves' runs, as (cycles, presids, solve) triples."""
    seen = []
    real = cu_gmres.FusedGMRES.run

    def run(self, cycles, presids=False):
        seen.append((cycles, presids, self))
        return real(self, cycles, presids)

    monkeypatch.setattr(cu_gmres.FusedGMRES, "run", run)
    return seen


def _np(a):
    return np.asarray(a.to_device("cpu"))


def _on_device(a):
    return csr_array(a, device=DEV) if sp.issparse(a) else xp.asarray(a, device=DEV)


def _close(one, two, rtol):
    assert_reports_close(one, two, _np, rtol)


def _both(A, b, **kw):
    """(fused, generic) results of gmres with report=True."""
    fused = gm._gmres(A, b, report=True, **kw)
    generic = gm._gmres(A, b, report=True, native=False, **kw)
    return fused, generic


@pytest.mark.parametrize("case", list(COMPARED))
@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-9), (np.float32, 2e-3),
                                        (np.complex128, 1e-9)])
def test_fused_equals_the_generic_loop(case, dtype, rtol, launches):
    A = _on_device(COMPARED[case](dtype))
    b = xp.asarray(_rhs(A.shape[0], dtype=dtype), device=DEV)
    for cycles in (1, 3, 50):
        launches.clear()
        fused, generic = _both(A, b, rtol=0.0, atol=0.0, restart=7, maxiter=cycles)
        assert launches, "the fused solve did not run"
        assert fused[1] == cycles and fused[2].iterations == 7 * cycles
        _close(fused, generic, rtol if cycles < 50 else max(rtol, 1e-7))


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_preconditioned_and_nonzero_start(dtype, launches):
    a = convection_diffusion(8).astype(dtype)
    n = a.shape[0]
    A = csr_array(sp.csr_array(a), device=DEV)
    Ms = {"jacobi csr": csr_array(sp.diags_array(1.0 / a.diagonal()).tocsr(), device=DEV),
          "dense": xp.asarray(np.diag(1.0 / a.diagonal()) + 1e-3 * _nonsym(n, 9, dtype),
                              device=DEV)}
    b = xp.asarray(_rhs(n, dtype=dtype), device=DEV)
    x0 = xp.asarray(_rhs(n, seed=8, dtype=dtype), device=DEV)
    for name, M in Ms.items():
        for start in (None, x0):
            launches.clear()
            fused, generic = _both(A, b, x0=start, M=M, rtol=0.0, atol=0.0, restart=6,
                                   maxiter=4)
            assert launches, name
            _close(fused, generic, 1e-9)
            launches.clear()
            fused, generic = _both(A, b, x0=start, M=M, rtol=1e-8, restart=6)
            assert fused[1] == 0 and abs(fused[2].iterations - generic[2].iterations) <= 1
            np.testing.assert_allclose(_np(fused[0]), _np(generic[0]), rtol=1e-6,
                                       atol=1e-6 * np.abs(_np(generic[0])).max())


@pytest.mark.parametrize("form", ["one reduction", "two barriers", "three barriers"])
def test_every_column_form_equals_the_generic_loop(form, monkeypatch, launches):
    """The launcher takes the two-barrier column (and blocks of BLOCK threads) where the
    basis is at most PIPELINE_BYTES, with one reduction a column where its rows also fit
    the row cache (ONE_REDUCTION_RMAX), and the three-barrier one (STREAM_BLOCK) above:
    each, on every compared system (fixed cycles), with M, and converging (the stop on
    presid <= ptol)."""
    monkeypatch.setattr(cu_gmres, "PIPELINE_BYTES", 0 if form == "three barriers" else 1 << 40)
    monkeypatch.setattr(cu_gmres, "ONE_REDUCTION_RMAX", 32 if form == "one reduction" else 0)
    for case in COMPARED:
        A = _on_device(COMPARED[case](np.float64))
        b = xp.asarray(_rhs(A.shape[0]), device=DEV)
        fused, generic = _both(A, b, rtol=0.0, atol=0.0, restart=7, maxiter=3)
        _close(fused, generic, 1e-9)
    a = convection_diffusion(8)
    M = csr_array(sp.diags_array(1.0 / a.diagonal()).tocsr(), device=DEV)
    b = xp.asarray(_rhs(a.shape[0]), device=DEV)
    for A, m in ((csr_array(sp.csr_array(a), device=DEV), None),
                 (csr_array(sp.csr_array(a), device=DEV), M), (_on_device(a), None),
                 (_on_device(a), _on_device(np.diag(1.0 / a.diagonal())))):
        fused, generic = _both(A, b, M=m, rtol=0.0, atol=0.0, restart=6, maxiter=4)
        _close(fused, generic, 1e-9)
        fused, generic = _both(A, b, M=m, rtol=1e-8, restart=6)
        assert fused[1] == 0 and abs(fused[2].iterations - generic[2].iterations) <= 1
        np.testing.assert_allclose(_np(fused[0]), _np(generic[0]), rtol=1e-6,
                                   atol=1e-6 * np.abs(_np(generic[0])).max())
    forms = []
    for _, _, solve in launches:
        # (one reduction takes the row cache: at most a row a warp of each block)
        cache = -(-solve.n // solve.blocks) <= solve._launch.block // 32
        want = "two barriers" if form == "one reduction" and not cache else form
        forms.append((solve.form, want, solve._launch.block))
    block = cu_gmres.STREAM_BLOCK if form == "three barriers" else cu_gmres.BLOCK
    assert forms and all(got == want and b == block for got, want, b in forms), set(forms)
    assert (form, form, block) in forms  # (the dense systems take it)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_the_staged_vector_leaves_the_bits(dtype, monkeypatch, launches):
    """The two-barrier column's product reads U from each block's shared memory where it
    fits (stage_v): x and the residual history are bit for bit those of the product
    reading U from L2 (STAGE_BYTES 0), on a dense system; a CSR A (float64) is never
    staged."""
    a = _nonsym(300, dtype=dtype)
    A, b = _on_device(a), xp.asarray(_rhs(300, dtype=dtype), device=DEV)
    got = []
    for limit in (cu_gmres.STAGE_BYTES, 0):
        monkeypatch.setattr(cu_gmres, "STAGE_BYTES", limit)
        cu_gmres._plans.clear()
        x, info, report = gm._gmres(A, b, rtol=0.0, atol=0.0, restart=12, maxiter=3,
                                    report=True)
        got.append((_np(x), info, report.residual_norms))
    np.testing.assert_array_equal(got[0][0], got[1][0])
    assert got[0][1:] == got[1][1:]
    assert [solve.staged for _, _, solve in launches] == [True, False]
    if dtype == np.float64:
        launches.clear()
        monkeypatch.setattr(cu_gmres, "STAGE_BYTES", 1 << 30)
        cu_gmres._plans.clear()
        tla.gmres(_on_device(sp.csr_array(a)), b, rtol=0.0, atol=0.0, restart=12, maxiter=1)
        assert [solve.staged for _, _, solve in launches] == [False]


def _cache_runs(monkeypatch, launches, solve, limits):
    """``solve()``'s (x, info, residual norms) and its solves' a_cols for each
    A_CACHE_BYTES of ``limits`` (fresh plans each)."""
    got, cols = [], []
    for limit in limits:
        monkeypatch.setattr(cu_gmres, "A_CACHE_BYTES", limit)
        cu_gmres._plans.clear()
        launches.clear()
        x, info, report = solve()
        got.append((_np(x), info, report.residual_norms))
        cols.append({s.a_cols for _, _, s in launches})
    return got, cols


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_cached_rows_of_a_leave_the_bits(dtype, monkeypatch, launches):
    """A dense A's rows kept in each block's shared memory (gmres.cu's a_cols: whole
    rows, their first columns, none): x and the residual history bit for bit the same,
    at fixed cycles from zero and from a nonzero x0 (the first launch's product)."""
    n = 300
    A = _on_device(_nonsym(n, dtype=dtype))
    b = xp.asarray(_rhs(n, dtype=dtype), device=DEV)
    x0 = xp.asarray(_rhs(n, seed=8, dtype=dtype), device=DEV)
    for start in (None, x0):
        got, cols = _cache_runs(
            monkeypatch, launches,
            lambda start=start: gm._gmres(A, b, x0=start, rtol=0.0, atol=0.0, restart=12, maxiter=3,
                              report=True), (1 << 30, 8192, 0))
        part = 8192 // (16 * np.dtype(dtype).itemsize) // 32 * 32
        assert cols == [{n}, {part}, {0}], cols
        for other in got[1:]:
            np.testing.assert_array_equal(got[0][0], other[0])
            assert got[0][1:] == other[1:]


@pytest.mark.parametrize("form", ["one reduction", "two barriers", "three barriers"])
def test_cached_rows_of_a_in_every_column_form(form, monkeypatch, launches):
    """The cached rows in each column form, with a dense M (A's product, then M's): the
    same bits with whole rows, part of each row and none (float64)."""
    monkeypatch.setattr(cu_gmres, "PIPELINE_BYTES", 0 if form == "three barriers" else 1 << 40)
    monkeypatch.setattr(cu_gmres, "ONE_REDUCTION_RMAX", 32 if form == "one reduction" else 0)
    a = convection_diffusion(12).toarray()  # (dense: the cache is a dense A's)
    A, M = _on_device(a), _on_device(np.diag(1.0 / a.diagonal()))
    b = xp.asarray(_rhs(a.shape[0]), device=DEV)
    got, cols = _cache_runs(
        monkeypatch, launches,
        lambda: gm._gmres(A, b, M=M, rtol=0.0, atol=0.0, restart=6, maxiter=4, report=True),
        (1 << 30, 4096, 0))
    assert cols[0] == {a.shape[0]} and 0 < min(cols[1]) < a.shape[0] and cols[2] == {0}, cols
    assert {s.form for _, _, s in launches} == {form}
    for other in got[1:]:
        np.testing.assert_array_equal(got[0][0], other[0])
        assert got[0][1:] == other[1:]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64, np.complex128])
def test_the_plain_solve_takes_b_norm_on_the_device(dtype, monkeypatch):
    """``gmres(A, b)`` without x0, M or callback is ``gmres_fused.plain``'s solve, whose
    first launch takes ||b||, the threshold and the first inner tolerance: at fixed
    cycles its x and report are bit for bit the general fused path's (x0 = zeros given,
    ||b|| read by the host before the launch); converged, the same info and iterations
    within one; dense and CSR; a kept workspace leaves the bits; b = 0 gives zeros."""
    made = []
    real = cu_gmres.gmres_plain

    def plain(*a, **k):
        made.append(real(*a, **k))
        return made[-1]

    monkeypatch.setattr(cu_gmres.gmres_fused, "plain", plain)
    tol = 1e-4 if dtype in (np.float32, np.complex64) else 1e-9
    a = convection_diffusion(9).astype(dtype)
    for A in (_on_device(a), _on_device(sp.csr_array(a))):
        b = xp.asarray(_rhs(a.shape[0], dtype=dtype), device=DEV)
        zero = xp.zeros_like(b)
        for kw in ({"rtol": 0.0, "atol": 0.0, "restart": 7, "maxiter": 3},
                   {"rtol": tol, "restart": 10}):
            made.clear()
            runs = [tla.gmres(A, b, report=True, **kw) for _ in range(2)]
            assert len(made) == 2 and None not in made
            general = tla.gmres(A, b, x0=zero, report=True, **kw)
            assert len(made) == 2  # (x0 given: not the plain solve)
            assert _np(runs[0][0]).tobytes() == _np(runs[1][0]).tobytes()
            if kw["rtol"] == 0:
                assert _np(runs[0][0]).tobytes() == _np(general[0]).tobytes()
                assert runs[0][1:] == general[1:] and runs[0][1] == 3
            else:
                assert runs[0][1] == general[1] == 0
                assert abs(runs[0][2].iterations - general[2].iterations) <= 1
                np.testing.assert_allclose(_np(runs[0][0]), _np(general[0]), rtol=10 * tol,
                                           atol=10 * tol * np.abs(_np(general[0])).max())
        made.clear()
        x, info, rep = tla.gmres(A, zero, report=True)
        assert len(made) == 1 and info == 0 and rep.iterations == 0
        assert rep.residual_norms == (0.0,) and not _np(x).any()


def _scipy_count(a, b, **kw):
    seen = []
    x, info = sla.gmres(a, b, callback=seen.append, callback_type="pr_norm", **kw)
    return x, info, len(seen)


@pytest.mark.parametrize("system", list(CONVERGED))
@pytest.mark.parametrize("restart", [10, 30])
def test_iteration_counts_equal_scipys_within_one(system, restart, launches):
    a = CONVERGED[system]()
    b = _rhs(a.shape[0], dtype=a.dtype)
    xs, infos, count = _scipy_count(a, b, rtol=1e-8, restart=restart)
    A = _on_device(a)
    x, info, rep = tla.gmres(A, xp.asarray(b, device=DEV), rtol=1e-8, restart=restart,
                             report=True)
    assert launches and info == infos == 0
    assert abs(rep.iterations - count) <= 1, (rep.iterations, count)
    np.testing.assert_allclose(_np(x), xs, rtol=1e-6, atol=1e-6 * np.abs(xs).max())


def test_callbacks_see_the_generic_loops_values(launches):
    a = convection_diffusion(7)
    A = csr_array(a, device=DEV)
    b = xp.asarray(_rhs(a.shape[0]), device=DEV)
    for ctype, kw in (("pr_norm", {"restart": 5, "maxiter": 6}),
                      ("legacy", {"restart": 5, "maxiter": 13}),
                      ("x", {"restart": 4, "maxiter": 5})):
        got, want = [], []
        launches.clear()
        x1, i1 = tla.gmres(A, b, callback=got.append, callback_type=ctype, **kw)
        assert launches and all(p == (ctype != "x") for _, p, _ in launches)
        if ctype == "x":
            assert all(c == 1 for c, _, _ in launches)  # a cycle a launch
        x2, i2 = gm._gmres(A, b, callback=want.append, callback_type=ctype, native=False,
                           **kw)
        assert i1 == i2 and len(got) == len(want), (ctype, i1, i2, len(got), len(want))
        if ctype == "x":
            assert len({id(v) for v in got}) == len(got)  # each a copy of its own
            for u, v in zip(got, want):
                np.testing.assert_allclose(_np(u), _np(v), rtol=1e-9, atol=1e-12)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-9)
        np.testing.assert_allclose(_np(x1), _np(x2), rtol=1e-9, atol=1e-12)


def test_bits_repeat_and_do_not_depend_on_the_launches():
    a = _nonsym(200, seed=6)
    A = xp.asarray(a, device=DEV)
    b = xp.asarray(_rhs(200), device=DEV)
    runs = [tla.gmres(A, b, rtol=0.0, atol=0.0, restart=9, maxiter=11) for _ in range(2)]
    # one cycle a launch (a callback of type 'x') against the whole solve in one launch
    runs.append(tla.gmres(A, b, rtol=0.0, atol=0.0, restart=9, maxiter=11,
                          callback=lambda x: None, callback_type="x"))
    bits = {_np(x).tobytes() for x, _ in runs}
    assert len(bits) == 1


def test_nonfinite_and_breakdown(launches):
    a = _nonsym(40)
    a[3, 5] = np.nan
    b = _rhs(40)
    x, info = tla.gmres(xp.asarray(a, device=DEV), xp.asarray(b, device=DEV), restart=5)
    _, infog = gm._gmres(xp.asarray(a, device=DEV), xp.asarray(b, device=DEV), restart=5,
                          native=False)
    assert launches and info == infog == -20
    # A = I: w = v is V[0] itself, so the first column breaks down and converges
    eye = xp.asarray(np.eye(30), device=DEV)
    bb = xp.asarray(_rhs(30), device=DEV)
    x, info, rep = tla.gmres(eye, bb, report=True)
    assert info == 0 and rep.iterations == 1
    np.testing.assert_allclose(_np(x), _rhs(30), rtol=1e-14)
    # a non-finite b is refused, as on every device (the plain solve's first launch
    # stops on ||b||, and the general path words the error)
    with pytest.raises(ValueError, match="gmres"):
        tla.gmres(eye, xp.asarray(np.full(30, np.inf), device=DEV))
    # never a hang: a solve that cannot converge ends at maxiter
    x, info = tla.gmres(xp.asarray(_nonsym(50), device=DEV),
                        xp.asarray(_rhs(50), device=DEV), rtol=0.0, atol=0.0, restart=3,
                        maxiter=200)
    assert info == 200


def test_declines_what_it_cannot_take(launches):
    a = convection_diffusion(12)  # (144 unknowns: a restart of 129 stays 129)
    A = csr_array(a, device=DEV)
    b = xp.asarray(_rhs(144), device=DEV)
    op = tla.LinearOperator((144, 144), matvec=lambda v: A @ v, dtype=xp.float64)
    for kw in ({"restart": 129}, {"products": "blas"}):
        launches.clear()
        tla.gmres(A, b, maxiter=2, **kw)
        assert not launches
    x1, _ = tla.gmres(op, b, maxiter=2)
    assert not launches
    x2, _ = gm._gmres(op, b, maxiter=2, native=False)
    np.testing.assert_array_equal(_np(x1), _np(x2))


def test_geometry_stays_resident():
    assert cu_gmres.geometry(2049, 32, 32, 132, 2, block=256) == 132
    assert cu_gmres.geometry(60, 32, 32, 132, 2, block=256) == 8
    assert cu_gmres.geometry(1 << 20, 1, 32, 132, 2, block=256) == 132
    assert cu_gmres.geometry(2049, 32, 32, 132, 2, per_sm=2, block=256) == 257
    assert cu_gmres.geometry(2049, 32, 32, 132, 1, per_sm=2, block=256) == 132
    assert cu_gmres.geometry(2049, 32, 32, 132, 1, block=512) == 129  # 16 rows a pass
    assert cu_gmres.geometry(60, 32, 32, 132, 1, block=512) == 4


def test_run_refuses_bad_arguments():
    A = xp.asarray(_nonsym(20), device=DEV)
    b = cupy.asarray(_rhs(20))
    x = cupy.zeros(20)
    from tessera_array.sparse.linalg._fused import FusedOperand

    op = FusedOperand(lambda v: v, "dense", (A._data,), "warp")
    with pytest.raises(ValueError, match="gmres_fused: restart"):
        cu_gmres.gmres_fused(x, b, op, None, restart=0, maxiter=1, inner_limit=-1, atol=0,
                             ptol=0, eps=1e-16, nonzero=False)
    with pytest.raises(TypeError, match="gmres_fused: x"):
        cu_gmres.gmres_fused(np.zeros(20), b, op, None, restart=3, maxiter=1,
                             inner_limit=-1, atol=0, ptol=0, eps=1e-16, nonzero=False)
    solve = cu_gmres.gmres_fused(x, b, op, None, restart=3, maxiter=1, inner_limit=-1,
                                 atol=0.0, ptol=0.0, eps=1e-16, nonzero=False)
    with pytest.raises(ValueError, match="gmres_fused: run takes"):
        solve.run(0)
    out = solve.run(1)
    assert out.status.name == "MAXITER" and out.iterations == 3 and out.cycles == 1
    with pytest.raises(ValueError, match="has finished"):
        solve.run(1)
