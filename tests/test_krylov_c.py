"""The Krylov solvers' vector updates and cg on a dense matrix in C
(``backends/numpy/_krylov_c.c``; taken by ``axpy``/``aypx`` in ``backends/numpy/matvec.py``
and by HostCG in ``backends/numpy/cg.py``): NumPy's and SciPy's bits.

Checked here: the updates round as NumPy's two ufuncs (any length, cut over the pool or
not, NaN, inf and -0.0 included), and a scalar NumPy would compute in another dtype goes to
NumPy; the loop is the path ``cg(A, b)`` takes for a dense float32/float64 system on
the NumPy backend; x, info and the residual norms equal SciPy's cg and the Python loop's
bit for bit (sizes NumPy's OpenBLAS threads and sizes it does not; maxiter 1 to a whole
solve); runs of any k give the same bits; the stopping codes (converged, indefinite,
non-finite) are the Python loop's; the builds for x86-64-v3 and the baseline give the same
bits; a loop whose first solve differs from the Python loop's is not taken; what the loop
does not take (an F-ordered matrix, M, complex) goes to the Python loop; bad buffers are
refused with the function's name.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse.linalg as sla
from _cbuild import ISAS, REQUIRED, build_variant
from tessera_array.backends.numpy import cg as hcg
from tessera_array.backends.numpy import matvec

import tessera_array as xp
from tessera_array.sparse import linalg as tla
from tessera_array.sparse.linalg._fused import CGStatus, FusedOperand

DTYPES = (np.float64, np.float32)


def _loop_or_skip(dtype):
    """The C loop's arguments for ``dtype``: a skip where the extension or NumPy's OpenBLAS
    is missing, a failure under TESSERA_REQUIRE_COMPILED=1 where the extension is."""
    if hcg._mv.krylov_c() is None:
        why = "the _krylov_c extension is not built (no C compiler at install)"
        if REQUIRED:
            pytest.fail(f"TESSERA_REQUIRE_COMPILED=1: {why}")
        pytest.skip(why)
    loop = hcg._dense_loop(np.dtype(dtype), 100)
    if loop is None:
        if not hcg._threads._openblas_paths():  # (NumPy built on another BLAS: absent)
            pytest.skip("NumPy bundles no OpenBLAS here (another BLAS): the C loops need "
                        "its CBLAS")
        pytest.fail(f"NumPy's OpenBLAS is there, but the C loop is not taken ({dtype}): "
                    f"its CBLAS symbols not found, or its first solve differed")
    return loop


def _module_or_skip():
    mod = matvec.krylov_c()
    if mod is None:
        why = "the _krylov_c extension is not built (no C compiler at install)"
        if REQUIRED:
            pytest.fail(f"TESSERA_REQUIRE_COMPILED=1: {why}")
        pytest.skip(why)
    return mod


def _numpy_update(kind, alpha, x, y):
    """NumPy's own two ufuncs, the reference."""
    out = y.copy()
    with np.errstate(all="ignore"):
        if kind == 2:
            out *= alpha
            out += x
        elif kind == 1:
            out -= alpha * x
        else:
            out += alpha * x
    return out


def _check_updates():
    for dtype in DTYPES:
        for n in (3, 7, 4096, 65537):
            rng = np.random.default_rng(n)
            x = rng.standard_normal(n).astype(dtype)
            y = rng.standard_normal(n).astype(dtype)
            x[:3] = (np.nan, np.inf, -0.0)
            y[-1:] = np.inf
            for alpha in (dtype(0.37), np.asarray(-1.5e-3, dtype=dtype)):
                for kind in (0, 1, 2):
                    got = y.copy()
                    (matvec.aypx(alpha, x, got) if kind == 2
                     else matvec.axpy(alpha, x, got, kind == 1))
                    assert got.tobytes() == _numpy_update(kind, alpha, x, y).tobytes()


@pytest.mark.parametrize("threaded", [False, True])
def test_updates_round_as_numpy(monkeypatch, threaded):
    mod = _module_or_skip()
    calls = []
    monkeypatch.setattr(matvec, "_KRYLOV_C", [type("Spy", (), {
        "update": staticmethod(lambda *a: calls.append(a[0]) or mod.update(*a))})])
    if threaded:
        monkeypatch.setattr(matvec, "AXPY_PARALLEL_MIN_BYTES", 1)
        monkeypatch.setattr(matvec._threads, "threads", lambda: 2)
    _check_updates()
    assert sorted(set(calls)) == [0, 1, 2]


def test_what_the_update_does_not_take_is_numpys(monkeypatch):
    """A float64 scalar against float32 vectors (NumPy computes in float64, then rounds),
    a Python float against float32, strided or complex vectors: NumPy's ufuncs, its bits."""
    mod = _module_or_skip()
    monkeypatch.setattr(matvec, "_KRYLOV_C", [type("Refuse", (), {
        "update": staticmethod(lambda *a: pytest.fail("the C update was taken"))})])
    rng = np.random.default_rng(9)
    x32, y32 = rng.standard_normal((2, 999)).astype(np.float32)
    for alpha in (np.float64(1 / 3), 1 / 3):
        for kind in (0, 1, 2):
            got = y32.copy()
            matvec.aypx(alpha, x32, got) if kind == 2 else matvec.axpy(alpha, x32, got, kind)
            assert got.tobytes() == _numpy_update(kind, alpha, x32, y32).tobytes()
    x, y = rng.standard_normal((2, 2000))
    got = y[::2].copy()
    matvec.axpy(0.5, x[::2], got)
    assert got.tobytes() == _numpy_update(0, 0.5, x[::2], y[::2]).tobytes()
    xc = (x + 1j * y).astype(np.complex128)
    got = xc.copy()
    matvec.axpy(np.complex128(0.5 + 1j), xc, got)
    assert got.tobytes() == _numpy_update(0, np.complex128(0.5 + 1j), xc, xc).tobytes()
    monkeypatch.setattr(matvec, "_KRYLOV_C", [mod])
    assert matvec._in_c(0.5, x, y.copy()) == 0.5  # a Python float against float64: taken


def _spd(n, dtype, seed=0):
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((n, n))
    a = g @ g.T / n
    a[range(n), range(n)] += 1e-2
    return a.astype(dtype), rng.standard_normal(n).astype(dtype)


def _solve(a, b, loop, runs, atol=0.0, maxiter=None):
    """HostCG over ``a`` with the given loop (None: Python), run in pieces of ``runs``
    (cycled) until it finishes: (x, r, statuses, its, norms)."""
    n = b.shape[0]
    x, r = np.zeros(n, a.dtype), b.copy()
    op = FusedOperand(lambda v: a @ v, "dense", (a,), None)
    solve = hcg.HostCG(x, r, np.full(n, np.nan, a.dtype), op, None, atol,
                       10 * n if maxiter is None else maxiter, loop=loop)
    norms, statuses, i = [], [], 0
    while True:
        rep = solve.run(runs[i % len(runs)])
        i += 1
        norms.extend(rep.residual_norms)
        statuses.append(rep.status)
        if rep.status is not CGStatus.RUNNING:
            return x, r, statuses, rep.iterations, norms


def _same(c, p):
    """Two :func:`_solve` results hold the same bits (NaN norms included)."""
    assert c[0].tobytes() == p[0].tobytes() and c[1].tobytes() == p[1].tobytes()
    assert c[2:4] == p[2:4]
    assert np.array(c[4]).tobytes() == np.array(p[4]).tobytes()


@pytest.mark.parametrize("dtype", DTYPES)
def test_cg_takes_the_loop_and_gives_scipys_bits(dtype, monkeypatch):
    loop = _loop_or_skip(dtype)
    taken = []
    real = hcg.HostCG._c_steps

    def spy(self, steps):
        taken.append(steps)
        return real(self, steps)

    monkeypatch.setattr(hcg.HostCG, "_c_steps", spy)
    for n in (1, 2, 37, 300, 700):  # (NumPy's OpenBLAS threads the gemv of 300 and 700)
        a, b = _spd(n, dtype, seed=n)
        A, B = xp.asarray(a), xp.asarray(b)
        for maxiter in (1, 3, 10, 50, None):
            taken.clear()
            want = sla.cg(a, b, rtol=1e-6, maxiter=maxiter)
            got = tla.cg(A, B, rtol=1e-6, maxiter=maxiter)
            assert taken, (n, maxiter)
            assert got[1] == want[1], (n, maxiter)
            assert np.asarray(got[0]).tobytes() == want[0].tobytes(), (n, maxiter)
    assert loop[1][0] == (dtype == np.float64)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("runs", [(1,), (4,), (3, 1, 7), (1000,)])
def test_runs_of_any_k_are_the_python_loops_bits(dtype, runs):
    loop = _loop_or_skip(dtype)
    a, b = _spd(150, dtype, seed=1)
    for maxiter, atol in ((1, 0.0), (13, 0.0), (None, 1e-4 * float(np.linalg.norm(b)))):
        c = _solve(a, b, loop, runs, atol, maxiter)
        _same(c, _solve(a, b, None, runs, atol, maxiter))
        assert c[2][-1] is (CGStatus.CONVERGED if atol else CGStatus.MAXITER)


@pytest.mark.parametrize("dtype", DTYPES)
def test_stopping_codes_are_the_python_loops(dtype):
    loop = _loop_or_skip(dtype)
    n = 40
    rng = np.random.default_rng(5)
    indefinite = np.diag(np.linspace(-1, 2, n)).astype(dtype)
    nan = _spd(n, dtype)[0]
    nan[3, 7] = np.nan
    b = rng.standard_normal(n).astype(dtype)
    for a, code in ((indefinite, CGStatus.INDEFINITE), (nan, CGStatus.NONFINITE)):
        for runs in ((1,), (50,)):
            c = _solve(a, b, loop, runs)
            _same(c, _solve(a, b, None, runs))
            assert c[2][-1] is code
    zero = np.zeros(n, dtype)  # (r = 0 at the first test: converged at 0 iterations)
    c = _solve(_spd(n, dtype)[0], zero, loop, (5,), atol=1e-30)
    assert c[2] == [CGStatus.CONVERGED] and c[3] == 0 and c[4] == [0.0]


@pytest.mark.parametrize("arch", sorted(ISAS))
def test_each_instruction_set_gives_the_same_bits(monkeypatch, tmp_path, arch):
    """The loop built for x86-64-v3 and for the baseline: no contraction into FMAs, so the
    same bits as the Python loop."""
    _loop_or_skip(np.float64)
    mod = build_variant("_krylov_c", arch, tmp_path, extra=("-ffp-contract=off",))
    monkeypatch.setattr(hcg._mv, "_KRYLOV_C", [mod])
    monkeypatch.setattr(hcg, "_DENSE_LOOP", {})
    _check_updates()
    for dtype in DTYPES:
        loop = hcg._dense_loop(np.dtype(dtype), 100)
        assert loop is not None and loop[0] is mod
        a, b = _spd(120, dtype, seed=2)
        _same(_solve(a, b, loop, (6,), maxiter=30), _solve(a, b, None, (6,), maxiter=30))


def test_a_loop_that_differs_is_not_taken(monkeypatch):
    """A build whose first solve differs from the Python loop's (here, one that nudges r)
    is never taken: cg then runs the Python loop and keeps SciPy's bits."""
    _loop_or_skip(np.float64)
    real = hcg._mv.krylov_c()

    class Nudged:
        update = staticmethod(real.update)

        @staticmethod
        def steps(*args):
            out = real.steps(*args)
            r = args[7]
            r[0] = np.nextafter(r[0], np.inf)
            return out

    monkeypatch.setattr(hcg._mv, "_KRYLOV_C", [Nudged])
    monkeypatch.setattr(hcg, "_DENSE_LOOP", {})
    assert hcg._dense_loop(np.dtype(np.float64), 100) is None
    a, b = _spd(60, np.float64, seed=3)
    want = sla.cg(a, b, maxiter=20)
    got = tla.cg(xp.asarray(a), xp.asarray(b), maxiter=20)
    assert np.asarray(got[0]).tobytes() == want[0].tobytes() and got[1] == want[1]


def test_what_the_loop_does_not_take_runs_in_python():
    _loop_or_skip(np.float64)
    a, b = _spd(30, np.float64, seed=4)
    n = b.shape[0]

    def solve(a, M=None, dtype=np.float64):
        v = [np.zeros(n, dtype), b.astype(dtype), np.empty(n, dtype)]
        return hcg.HostCG(*v, FusedOperand(lambda u: a @ u, "dense", (a,), None), M, 0.0, 5)

    assert solve(a).loop is not None
    assert solve(np.asfortranarray(a)).loop is None
    eye = np.eye(n)
    assert solve(a, FusedOperand(lambda u: eye @ u, "dense", (eye,), None)).loop is None
    ac = a.astype(np.complex128)
    assert solve(ac, dtype=np.complex128).loop is None
    a32 = a.astype(np.float32)  # (a matrix of another dtype than the vectors)
    assert solve(a32).loop is None


def test_bad_buffers_are_refused():
    mod, args = _loop_or_skip(np.float64)
    x, y = np.zeros(8), np.zeros(8)
    for bad in ((3, 1.0, x, y, 0, 8), (0, 1.0, x.astype(np.float32), y, 0, 8),
                (0, 1.0, x, y, 0, 9), (0, 1.0, x, y, 5, 4), (0, 1.0, x.astype(int), y, 0, 8)):
        with pytest.raises(ValueError, match=r"_krylov_c\.update: kind 0-2, x and y"):
            mod.update(*bad)
    n = 8
    a = np.eye(n)
    v = [np.zeros(n) for _ in range(4)]
    with pytest.raises(ValueError, match=r"_krylov_c\.steps: A must hold 64 contiguous"):
        mod.steps(*args, n, a[:4], *v, 1, 0.0, 0, False, 0.0, 0.0)
    with pytest.raises(ValueError, match=r"_krylov_c\.steps: q must hold 8 contiguous"):
        mod.steps(*args, n, a, *v[:3], np.zeros(n, np.float32), 1, 0.0, 0, False, 0.0, 0.0)
    with pytest.raises(ValueError, match=r"_krylov_c\.steps: BLAS addresses, n >= 1"):
        mod.steps(*args, 0, a, *v, 1, 0.0, 0, False, 0.0, 0.0)
    with pytest.raises(ValueError, match=r"writable|read-only"):
        ro = np.zeros(n)
        ro.flags.writeable = False
        mod.steps(*args, n, a, ro, *v[1:], 1, 0.0, 0, False, 0.0, 0.0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gmres_takes_mgs_and_keeps_its_bits(monkeypatch, dtype):
    """gmres on the NumPy backend runs a column's modified Gram-Schmidt in one C call:
    x, info and the residual norms equal the loop without it bit for bit (and SciPy's
    x in float64), dense and CSR; a w the loop does not own is copied, not written."""
    import scipy.sparse as sp
    from tessera_array.backends.numpy import krylov as hkr

    from tessera_array.sparse import csr_array

    _loop_or_skip(dtype)
    calls = []
    real_init = hkr.HostVectors.__init__

    def spy_init(self, *a):
        real_init(self, *a)
        inner = self.mgs

        def mgs(V, w, count, owned):
            calls.append(count)
            return inner(V, w, count, owned)

        self.mgs = mgs

    a, b = _spd(90, dtype, seed=6)
    for A, peer in ((xp.asarray(a), a), (csr_array(sp.csr_array(a)), sp.csr_array(a))):
        runs = []
        for spy in (True, False):
            calls.clear()
            with monkeypatch.context() as m:
                if spy:
                    m.setattr(hkr.HostVectors, "__init__", spy_init)
                else:
                    m.setattr(hkr, "_dense_loop", lambda dt, n: None)
                runs.append(tla.gmres(A, xp.asarray(b), restart=7, maxiter=3, rtol=1e-30))
                assert bool(calls) == spy
        (x1, i1), (x2, i2) = runs
        assert i1 == i2 and np.asarray(x1).tobytes() == np.asarray(x2).tobytes()
        if dtype == np.float64:
            xs, _ = sla.gmres(peer, b, restart=7, maxiter=3, rtol=1e-30)
            assert np.asarray(x1).tobytes() == xs.tobytes()
    vec = hkr.HostVectors(b, FusedOperand(lambda v: a @ v, "dense", (a,), None), None)
    V = vec.basis(3)
    for k in range(3):
        V.set(k, np.linspace(1, 2, b.shape[0]).astype(dtype) * (k + 1))
    w = b.copy()
    h, w2 = vec.mgs(V, w, 3, False)
    assert w2 is not w and w.tobytes() == b.tobytes() and len(h) == 3
    ref = b.copy()
    for k in range(3):
        t = V.row(k).dot(ref)
        assert float(t) == h[k]
        matvec.axpy(t, V.row(k), ref, True)
    assert ref.tobytes() == w2.tobytes()
    h3, w3 = vec.mgs(V, w, 3, True)
    assert w3 is w and h3 == h and w.tobytes() == w2.tobytes()
