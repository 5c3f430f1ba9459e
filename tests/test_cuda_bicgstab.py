"""bicgstab on CUDA as one persistent cooperative kernel (``backends/_cupy/bicgstab.py``,
``kernels/cuda/bicgstab.cu``; the contract
``tessera_array/sparse/linalg/_fused_bicgstab.py``).

The generic loop (the solver with its fused path refused) is the reference: x, info,
iterations and residual history agree with it to rounding after 1, 3 and 50 iterations
(float64 and complex; float32 after 1 and 3), with and without a preconditioner, from
zero and nonzero x0; converged runs take SciPy's iteration counts, within one of what
SciPy takes on one-ulp perturbations of the system (2-D Poisson, dense SPD,
convection-diffusion, complex Hermitian); the callback sees what the generic loop's
sees; the breakdowns and NaN answer with the generic loop's codes; every workspace
buffer starts poisoned; the bits repeat, also when the iterations are split over
launches differently.

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
from _problems import (
    COMPARED,
    CONVERGED,
    assert_reports_close,
    convection_diffusion,
    perturbed,
)
from _problems import nonsymmetric as _nonsym
from _problems import rhs as _rhs

import tessera_array as xp
from tessera_array.sparse import csr_array
from tessera_array.sparse import linalg as tla
from tessera_array.sparse.linalg import _isolve

BACKEND = _gate.require_backend("cuda")

import cupy
from tessera_array.backends._cupy import _kernels
from tessera_array.backends._cupy import bicgstab as cu_bicgstab

DEV = "cuda:0"


@pytest.fixture(autouse=True)
def poisoned(monkeypatch):
    """Every buffer the launchers allocate starts as 0xFF bytes (NaN in floats)."""
    monkeypatch.setattr(_kernels, "empty", poisoned_empty(cupy))


@pytest.fixture
def runs(monkeypatch):
    """The fused solves' runs (their k)."""
    seen = []
    real = cu_bicgstab.FusedBiCGSTAB.run
    monkeypatch.setattr(cu_bicgstab.FusedBiCGSTAB, "run",
                        lambda self, k: seen.append(k) or real(self, k))
    return seen


def _np(a):
    return np.asarray(a.to_device("cpu"))


def _on_device(a):
    return csr_array(a, device=DEV) if sp.issparse(a) else xp.asarray(a, device=DEV)


def _close(one, two, rtol):
    assert_reports_close(one, two, _np, rtol)


def _generic(monkeypatch, A, b, **kw):
    with monkeypatch.context() as m:
        m.setattr(_isolve, "_bicgstab_fused", lambda *a: None)
        return tla.bicgstab(A, b, report=True, **kw)


@pytest.mark.parametrize("case", list(COMPARED))
@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-9), (np.float32, 2e-3),
                                        (np.complex128, 1e-9)])
def test_fused_equals_the_generic_loop(case, dtype, rtol, runs, monkeypatch):
    A = _on_device(COMPARED[case](dtype))
    b = xp.asarray(_rhs(A.shape[0], dtype=dtype), device=DEV)
    # BiCGSTAB amplifies rounding on the nonsymmetric system: after 50 iterations two
    # summation orders differ by ~1e-6 in float64 (measured on the H200) and by O(1) in
    # float32, where the 50-iteration comparison is left out.
    for maxiter in (1, 3) if dtype == np.float32 else (1, 3, 50):
        runs.clear()
        fused = tla.bicgstab(A, b, rtol=0.0, atol=0.0, maxiter=maxiter, report=True)
        assert runs, "the fused solve did not run"
        generic = _generic(monkeypatch, A, b, rtol=0.0, atol=0.0, maxiter=maxiter)
        _close(fused, generic, rtol if maxiter < 50 else max(rtol, 1e-5))


@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_preconditioned_and_nonzero_start(dtype, runs, monkeypatch):
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
            runs.clear()
            fused = tla.bicgstab(A, b, x0=start, M=M, rtol=0.0, atol=0.0, maxiter=4,
                                 report=True)
            assert runs, name
            _close(fused, _generic(monkeypatch, A, b, x0=start, M=M, rtol=0.0, atol=0.0,
                                   maxiter=4), 1e-9)
            fused = tla.bicgstab(A, b, x0=start, M=M, rtol=1e-8, report=True)
            generic = _generic(monkeypatch, A, b, x0=start, M=M, rtol=1e-8)
            assert fused[1] == generic[1] == 0
            assert abs(fused[2].iterations - generic[2].iterations) <= 1
            np.testing.assert_allclose(_np(fused[0]), _np(generic[0]), rtol=1e-5,
                                       atol=1e-5 * np.abs(_np(generic[0])).max())


@pytest.mark.parametrize("system", list(CONVERGED))
def test_iteration_counts_within_scipys_spread(system, runs):
    a = CONVERGED[system]()
    b = _rhs(a.shape[0], dtype=a.dtype)
    def count(a, b):
        seen = []
        x, info = sla.bicgstab(a, b, rtol=1e-8, callback=seen.append)
        # (SciPy's callback runs once an iteration, but not in one that converges on s)
        return x, info, len(seen)

    xs, infos, n = count(a, b)
    A = _on_device(a)
    x, info, rep = tla.bicgstab(A, xp.asarray(b, device=DEV), rtol=1e-8, report=True)
    assert runs and info == infos == 0
    # SciPy's own count under one-ulp perturbations of the system: one value on Poisson,
    # convection-diffusion and the Hermitian system; 41-49 on the dense SPD one (46 as
    # given), where BiCGSTAB's path depends on rounding
    spread = [n] + [count(*perturbed(a, b, seed))[2] for seed in range(8)]
    assert min(spread) - 1 <= rep.iterations <= max(spread) + 1, (rep.iterations, spread)
    np.testing.assert_allclose(_np(x), xs, rtol=1e-5, atol=1e-5 * np.abs(xs).max())


def test_callback_sees_the_generic_loops_values(runs, monkeypatch):
    a = convection_diffusion(7)
    A = csr_array(a, device=DEV)
    b = xp.asarray(_rhs(a.shape[0]), device=DEV)
    for kw in ({"maxiter": 6}, {"rtol": 1e-6}):
        got, want = [], []
        runs.clear()
        x1, i1 = tla.bicgstab(A, b, callback=got.append, **kw)
        assert runs and all(k == 1 for k in runs)  # an iteration a launch
        with monkeypatch.context() as m:
            m.setattr(_isolve, "_bicgstab_fused", lambda *a: None)
            x2, i2 = tla.bicgstab(A, b, callback=want.append, **kw)
        assert i1 == i2 and len(got) == len(want), (i1, i2, len(got), len(want))
        assert len({id(v) for v in got}) == len(got)  # each a copy of its own
        for u, v in zip(got, want):
            np.testing.assert_allclose(_np(u), _np(v), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(_np(x1), _np(x2), rtol=1e-9, atol=1e-12)


def test_bits_repeat_and_do_not_depend_on_the_launches():
    A = xp.asarray(_nonsym(300, seed=6), device=DEV)
    b = xp.asarray(_rhs(300), device=DEV)
    xs = [tla.bicgstab(A, b, rtol=0.0, atol=0.0, maxiter=9)[0] for _ in range(2)]
    xs.append(tla.bicgstab(A, b, rtol=0.0, atol=0.0, maxiter=9, callback=lambda x: None)[0])
    assert len({_np(x).tobytes() for x in xs}) == 1


def test_breakdowns_and_nonfinite(runs, monkeypatch):
    # A swaps neighbours and b = e_0: rtilde^T A r = e_0 . e_1 = 0 exactly (-11)
    swap = np.kron(np.eye(15), np.array([[0.0, 1.0], [1.0, 0.0]]))
    skew = xp.asarray(swap, device=DEV)
    b = xp.asarray(np.eye(30)[0], device=DEV)
    _, info = tla.bicgstab(skew, b)
    assert runs and info == _generic(monkeypatch, skew, b)[1] == -11
    a = _nonsym(40)
    a[3, 5] = np.nan
    A = xp.asarray(a, device=DEV)
    b = xp.asarray(_rhs(40), device=DEV)
    _, info, rep = tla.bicgstab(A, b, report=True)
    _, infog, repg = _generic(monkeypatch, A, b)
    assert info == infog and rep.iterations == repg.iterations
    # never a hang: the budget ends a solve that cannot converge
    _, info = tla.bicgstab(xp.asarray(_nonsym(50), device=DEV),
                           xp.asarray(_rhs(50), device=DEV), rtol=0.0, atol=0.0, maxiter=700)
    assert info in (700, -10, -11)


def test_declines_what_it_cannot_take(runs):
    a = convection_diffusion(5)
    A = csr_array(a, device=DEV)
    b = xp.asarray(_rhs(25), device=DEV)
    op = tla.LinearOperator((25, 25), matvec=lambda v: A @ v, dtype=xp.float64)
    tla.bicgstab(A, b, maxiter=2, products="blas")
    tla.bicgstab(op, b, maxiter=2)
    assert not runs


def test_run_refuses_bad_arguments():
    A = xp.asarray(_nonsym(20), device=DEV)
    r = cupy.asarray(_rhs(20))
    x = cupy.zeros(20)
    from tessera_array.sparse.linalg._fused import FusedOperand

    op = FusedOperand(lambda v: v, "dense", (A._data,), "warp")
    with pytest.raises(ValueError, match="bicgstab_fused: maxiter"):
        cu_bicgstab.bicgstab_fused(x, r, op, None, atol=0.0, rhotol=0.0, omegatol=0.0,
                                   maxiter=0)
    with pytest.raises(TypeError, match="bicgstab_fused: r"):
        cu_bicgstab.bicgstab_fused(x, np.zeros(20), op, None, atol=0.0, rhotol=0.0,
                                   omegatol=0.0, maxiter=3)
    solve = cu_bicgstab.bicgstab_fused(x, r, op, None, atol=0.0, rhotol=0.0, omegatol=0.0,
                                       maxiter=3)
    with pytest.raises(ValueError, match="bicgstab_fused: run takes"):
        solve.run(0)
    out = solve.run(2)
    assert out.status.name == "RUNNING" and out.iterations == 2
    out = solve.run(5)
    assert out.status.name == "MAXITER" and out.iterations == 3
    with pytest.raises(ValueError, match="has finished"):
        solve.run(1)
