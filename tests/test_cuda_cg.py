"""cg(A, b) in one launch on CUDA (``backends/_cupy/cg.py``: PlainCG, ``cg_fused.plain``).

The fused kernel's first launch starts the system itself: x = 0, r = b, ||b|| summed in
the vecdot kernels' order, its root and the threshold. Checked here: the short solve is
one launch and one read; x, info and the report equal the general path's bit for bit
(the path that reads ||b|| on the host first), dense and CSR, float32 and float64, at
the edges too (b zero, b . b subnormal in float32, b . b overflowing, a non-finite b,
maxiter 0, a threshold met at the first test); the solution buffer is poisoned before
the kernel writes it; the bits repeat.

Without a CUDA backend the module is skipped with the reason; with
``TESSERA_REQUIRE_BACKENDS`` naming ``cuda`` that skip is a failure instead.
"""

from __future__ import annotations

import _gate
import numpy as np
import pytest
from _poison import poisoned_empty
import scipy.sparse as sp
from _problems import assert_reports_close, poisson2d

import tessera_array as xp
from tessera_array.sparse import csr_array
from tessera_array.sparse import linalg as tla

BACKEND = _gate.require_backend("cuda")

import cupy
from tessera_array.backends._cupy import _kernels
from tessera_array.backends._cupy import cg as cu_cg

DEV = "cuda:0"


@pytest.fixture(autouse=True)
def poisoned(monkeypatch):
    """Every buffer the launchers allocate starts as 0xFF bytes (NaN in floats)."""
    monkeypatch.setattr(_kernels, "empty", poisoned_empty(cupy))


def _spd(n, seed=1):
    g = np.random.default_rng(seed).standard_normal((n, n))
    return g @ g.T / n + 0.05 * np.eye(n)


def _systems(dtype):
    rng = np.random.default_rng(4)
    p = poisson2d(9)
    return [(xp.asarray(_spd(70).astype(dtype), device=DEV), rng.standard_normal(70)),
            (csr_array(sp.csr_array(p.astype(dtype)), device=DEV), rng.standard_normal(81))]


def _general(monkeypatch, A, b, **kw):
    """cg through the path that reads ||b|| on the host (the one-launch path refused)."""
    with monkeypatch.context() as m:
        m.setattr(cu_cg.cg_fused, "plain", lambda *a: None)
        return tla.cg(A, b, report=True, **kw)


def _same(one, two):
    (x1, i1, r1), (x2, i2, r2) = one, two
    assert i1 == i2 and r1 == r2, (i1, i2, r1, r2)
    h1, h2 = np.asarray(x1.to_device("cpu")), np.asarray(x2.to_device("cpu"))
    assert h1.dtype == h2.dtype and h1.tobytes() == h2.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_short_solve_is_one_launch_and_one_read(dtype, monkeypatch):
    launches, runs, reads = [], [], []
    for cls in (cu_cg.FusedCG, cu_cg.PlainCG):  # (PlainCG has a launch and a read of its own)
        for name, log in (("_launch", launches), ("_read", reads)):
            real = cls.__dict__[name]
            monkeypatch.setattr(cls, name, lambda self, *a, real=real, log=log, cls=cls:
                                log.append(cls.__name__) or real(self, *a))
    for cls in (cu_cg.FusedCG, cu_cg.PlainCG):  # (each has a run of its own)
        real = cls.__dict__["run"]
        monkeypatch.setattr(cls, "run", lambda self, k, real=real: runs.append(k) or real(self, k))
    for A, b in _systems(dtype):
        launches.clear(), runs.clear(), reads.clear()
        x, info = tla.cg(A, xp.asarray(b.astype(dtype), device=DEV), maxiter=1)
        assert launches == ["PlainCG"] and reads == ["PlainCG"] and len(runs) == 1
        assert info == 1 and np.isfinite(np.asarray(x.to_device("cpu"))).all()


def test_short_solve_reads_the_published_words(monkeypatch):
    """The kernel copies its state words to pinned host memory and then sets the launch's
    flag (cg.cu, publish): a short solve's read polls that flag, with no stream
    synchronization and no copy; the poll stays on after the solves (had the device not
    reached the pinned memory, the read would have copied and turned it off). A read
    that does not poll synchronizes, and finds the published words too."""
    syncs = []
    real_sync = cupy.cuda.Stream.synchronize
    monkeypatch.setattr(cupy.cuda.Stream, "synchronize",
                        lambda self: syncs.append(1) or real_sync(self))
    monkeypatch.setattr(cupy.cuda.runtime, "memcpyAsync",
                        lambda *a: pytest.fail("the state words were copied"))
    assert cu_cg.PlainCG.polling
    # (a poll long enough for any launch: this worker's GPU may be shared with others)
    monkeypatch.setattr(cu_cg, "POLL_S", 30.0)
    for A, b in _systems(np.float64):
        bd = xp.asarray(b, device=DEV)
        cupy.cuda.get_current_stream().synchronize()
        syncs.clear()
        one = tla.cg(A, bd, maxiter=3, report=True)
        assert syncs == [] and cu_cg.PlainCG.polling
        with monkeypatch.context() as m:  # (no poll: the read synchronizes first)
            m.setattr(cu_cg.PlainCG, "polling", False)
            two = tla.cg(A, bd, maxiter=3, report=True)
        assert cu_cg.PlainCG.polling
        _same(one, two)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_launch_equals_the_general_path(dtype, monkeypatch):
    for A, b in _systems(dtype):
        bd = xp.asarray(b.astype(dtype), device=DEV)
        for kw in ({}, {"maxiter": 0}, {"maxiter": 1}, {"maxiter": 7},
                   {"rtol": 0.0, "atol": 1e-3}, {"rtol": 1e-3, "atol": 1e-9},
                   {"atol": 1e9}, {"rtol": 0.0, "maxiter": 90}):
            one = tla.cg(A, bd, report=True, **kw)
            _same(one, _general(monkeypatch, A, bd, **kw))
            _same(one, tla.cg(A, bd, report=True, **kw))  # (the bits repeat)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_first_step_over_the_first_barrier(dtype, monkeypatch):
    """The one-launch solve takes the first step's q = A b and p^H q over r . r's grid
    sync (cg.cu, Grid::sum2), and the update's sum follows with no barrier between, so
    each sum needs a region of partial sums of its own: blocks without rows (70 rows,
    a grid of hundreds of blocks) reach the update's sum while others still read. Many
    short solves, each equal to the general path's bit for bit."""
    A, b = _systems(dtype)[0]
    bd = xp.asarray(b.astype(dtype), device=DEV)
    for maxiter in (1, 2):
        kw = {"rtol": 0.0, "atol": 0.0, "maxiter": maxiter}
        ref = _general(monkeypatch, A, bd, **kw)
        for _ in range(150):
            _same(tla.cg(A, bd, report=True, **kw), ref)


@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-10), (np.float32, 1e-3)])
def test_long_dense_rows(dtype, rtol, monkeypatch):
    """Rows of 600 columns: each lane of a row's warp sums several runs of loads in flight
    (persistent.cuh, row_part), which the 70-column systems never reach. The one-launch
    solve equals the general path bit for bit and agrees with the generic loop (the
    registered matvec) to rounding."""
    A = xp.asarray(_spd(600, seed=3).astype(dtype), device=DEV)
    bd = xp.asarray(np.random.default_rng(5).standard_normal(600).astype(dtype), device=DEV)
    for maxiter in (1, 3, 10):
        kw = {"rtol": 0.0, "atol": 0.0, "maxiter": maxiter}
        one = tla.cg(A, bd, report=True, **kw)
        _same(one, _general(monkeypatch, A, bd, **kw))
        generic = tla._isolve._cg(A, bd, report=True, fused=False, **kw)
        assert_reports_close(one, generic, lambda x: np.asarray(x.to_device("cpu")), rtol)


def test_edges_answer_as_the_general_path(monkeypatch):
    a32 = xp.asarray(_spd(40).astype(np.float32), device=DEV)
    for b in (np.zeros(40), np.full(40, 1e-21), np.full(40, 3e-20)):
        # zero; b . b subnormal in float32 (flushed: ||b|| = 0, x = 0); just normal
        bd = xp.asarray(b.astype(np.float32), device=DEV)
        got = tla.cg(a32, bd, report=True)
        _same(got, _general(monkeypatch, a32, bd))
    x, info, rep = tla.cg(a32, xp.zeros(40, dtype=xp.float32, device=DEV), report=True)
    assert info == 0 and rep.iterations == 0 and not np.asarray(x.to_device("cpu")).any()
    huge = xp.asarray(np.full(40, 1e30, dtype=np.float32), device=DEV)  # b . b overflows
    outcomes = []
    for run in (lambda: tla.cg(a32, huge, report=True), lambda: _general(monkeypatch, a32, huge)):
        try:
            x, info, rep = run()
            outcomes.append((info, rep, np.asarray(x.to_device("cpu")).tobytes()))
        except Exception as err:  # (the general path's error, worded the same both ways)
            outcomes.append((type(err), str(err)))
    assert outcomes[0] == outcomes[1], outcomes
    bad = np.ones(40, dtype=np.float32)
    bad[3] = np.nan
    with pytest.raises(ValueError, match=r"cg: b must be finite"):
        tla.cg(a32, xp.asarray(bad, device=DEV))


def test_plan_kept_and_declines(monkeypatch):
    """The kernel and grid of one (device, n, dtype, layout) are kept; complex b, an
    empty b and a callable operator are not this path's."""
    A, b = _systems(np.float64)[0]
    cu_cg._plans.clear()
    tla.cg(A, xp.asarray(b, device=DEV), maxiter=2)
    assert len(cu_cg._plans) == 1
    tla.cg(A, xp.asarray(b * 2, device=DEV), maxiter=2)
    assert len(cu_cg._plans) == 1
    assert cu_cg.cg_plain(cupy.zeros(0), None, 1e-5, 0.0, 1) is None
    assert cu_cg.cg_plain(cupy.ones(3, dtype=cupy.complex128), None, 1e-5, 0.0, 1) is None


def test_live_solves_hold_their_own_workspaces():
    """Two solves alive at once, their runs interleaved, each take a workspace of their
    own (a finished one gives its back): each ends with the x its solve alone gives."""
    from tessera_array.sparse.linalg import _isolve
    from tessera_array.sparse.linalg._interface import _CSROperator

    A, b = _systems(np.float64)[1]
    bs = [xp.asarray(b, device=DEV), xp.asarray(2 * b[::-1], device=DEV)]
    op = _CSROperator(A, "scalar")
    solves = [cu_cg.cg_plain(v._data, _isolve._operand(xp, op, op._mv, v, "A"), 1e-10, 0.0,
                             60) for v in bs]
    assert solves[0]._w is not solves[1]._w
    live = list(solves)
    while live:
        for s in list(live):
            if s.run(3).status != _isolve.CGStatus.RUNNING:
                live.remove(s)
    plan = solves[0]._plan
    assert plan is solves[1]._plan and len(plan.free) == 2
    for s, v in zip(solves, bs):
        want, info = tla.cg(A, v, rtol=1e-10, maxiter=60)
        assert info == 0
        assert s.x.get().tobytes() == np.asarray(want.to_device("cpu")).tobytes()
