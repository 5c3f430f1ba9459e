"""The NumPy backend's threaded Krylov kernels: spmv, axpy, aypx and long dot products
cut over its thread pool, with OpenBLAS held at one thread.

Every threaded path must give the bits of the one-call path (SciPy's ``A @ x``,
NumPy's two-ufunc expressions, ``np.dot``), so the solvers' iterates stay SciPy's.
The size thresholds are lowered here so that small inputs take the threaded paths.
"""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest
from tessera_array.backends.numpy import _ops, _threads, matvec, sparse

import tessera_array as xp
from tessera_array.sparse import csr_array
from tessera_array.sparse import linalg as tla

sp = pytest.importorskip("scipy.sparse")
sla = pytest.importorskip("scipy.sparse.linalg")


def _two_threads(monkeypatch):
    """At least two pool threads, even on a one-core machine (results must not change)."""
    monkeypatch.setattr(_threads, "_THREADS", max(2, _threads.threads()))


def test_blas_parts_cover_the_range_in_openblas_widths():
    for n in (1, 2, 7, 10001, 65537, 1 << 20):
        for t in (1, 2, 3, 4, 16):
            parts = _threads.blas_parts(n, t)
            assert parts[0][0] == 0 and parts[-1][1] == n
            assert all(a[1] == b[0] for a, b in pairwise(parts))
            left = n
            for k, (lo, hi) in enumerate(parts):  # ceil(left / threads_left) each
                assert hi - lo == -(-left // (t - k))
                left -= hi - lo
    assert _threads.blas_parts(10, 4) == [(0, 3), (3, 6), (6, 8), (8, 10)]


def test_split_and_run_parts_keep_order_and_errors(monkeypatch):
    _two_threads(monkeypatch)
    assert _threads.split(10, 3) == [(0, 3), (3, 6), (6, 10)]
    assert _threads.split(2, 8) == [(0, 1), (1, 2)]
    assert _threads.run_parts(lambda lo, hi: (lo, hi), [(0, 1), (1, 5), (5, 6)]) == [
        (0, 1), (1, 5), (5, 6)]

    def boom(lo, hi):
        if lo:
            raise ValueError(f"part {lo}")
        return lo

    with pytest.raises(ValueError, match="part 1"):
        _threads.run_parts(boom, [(0, 1), (1, 2)])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("n", [10000, 10001, 65537, 250007])
def test_blas_dot_equals_np_dot_bit_for_bit(monkeypatch, dtype, n):
    """Where the split is used it reproduces OpenBLAS's own threaded dot exactly; where
    it cannot be (another BLAS), blas_dot says so (None) and vecdot stays np.vecdot."""
    _two_threads(monkeypatch)
    monkeypatch.setattr(_threads, "DOT_MIN_BYTES", 1)
    rng = np.random.default_rng(n)
    a = rng.standard_normal(n).astype(dtype)
    b = rng.standard_normal(n).astype(dtype)
    a[5] = -0.0
    ref = np.dot(a, b)
    api = _threads.blas_api()
    before = api[0]() if api else None
    got = _threads.blas_dot(a, b)
    if api:
        assert api[0]() == before  # the hold is released
    if got is None:
        assert not api or not _threads._DOT_PLANS.get((a.dtype.char, before))
    else:
        assert got.dtype == a.dtype and got.shape == ()
        assert got.tobytes() == ref.tobytes()
    v = _ops.vecdot(a, b)
    assert v.dtype == a.dtype and v.tobytes() == ref.tobytes()


def test_blas_dot_under_a_hold_uses_openblas_own_count(monkeypatch):
    """Inside another holder's hold (OpenBLAS at one thread) the split still follows the
    count the holder saved, so the value is what np.dot gives outside any hold."""
    api = _threads.blas_api()
    if not api:
        pytest.skip("NumPy's BLAS is not a pthreads OpenBLAS")
    _two_threads(monkeypatch)
    monkeypatch.setattr(_threads, "DOT_MIN_BYTES", 1)
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal(300001), rng.standard_normal(300001)
    ref = np.dot(a, b)
    assert _threads.blas_dot(a, b) is not None or not _threads._DOT_PLANS.get(
        ("d", api[0]()))
    with _threads.blas_one_thread():
        got = _threads.blas_dot(a, b)
        assert api[0]() == 1
    if got is not None:
        assert got.tobytes() == ref.tobytes()


def _csr_cases():
    rng = np.random.default_rng(11)
    m = sp.random_array((2000, 1500), density=0.01, random_state=rng, format="csr")
    m = m.tolil()
    m[10:40, :] = 0  # empty rows, some at a cut
    m[-1, :] = 0
    return [m.tocsr(), sp.csr_array(sp.kron(sp.eye_array(40), sp.diags_array(
        [-np.ones(49), 2 * np.ones(50), -np.ones(49)], offsets=[-1, 0, 1])))]


@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128"])
@pytest.mark.parametrize("index", ["int32", "int64"])
def test_threaded_spmv_equals_scipy_bit_for_bit(monkeypatch, dtype, index):
    _two_threads(monkeypatch)
    monkeypatch.setattr(sparse, "SPMV_PARALLEL_MIN", 1)
    for a in _csr_cases():
        a = a.astype(dtype)
        rng = np.random.default_rng(a.nnz)
        x = rng.standard_normal(a.shape[1]).astype(dtype)
        ref = a @ x
        got = sparse.spmv(a.data, a.indices.astype(index), a.indptr.astype(index), a.shape, x)
        assert got.dtype == ref.dtype
        assert got.tobytes() == ref.tobytes()


@pytest.mark.parametrize("threaded", [False, True])
@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128"])
def test_spmv_into_a_poisoned_vector_equals_spmv(monkeypatch, dtype, threaded):
    """cg's product into its kept vector: every entry written (the vector is NaN before,
    and holds the last product's values the second time), bit for bit spmv's."""
    _two_threads(monkeypatch)
    monkeypatch.setattr(sparse, "SPMV_PARALLEL_MIN", 1 if threaded else 1 << 40)
    for a in _csr_cases():
        a = a.astype(dtype)
        rng = np.random.default_rng(a.nnz + 1)
        y = np.full(a.shape[0], np.nan, dtype=dtype)
        for _ in range(2):
            x = rng.standard_normal(a.shape[1]).astype(dtype)
            got = sparse.spmv_into(a.data, a.indices, a.indptr, a.shape, x, y)
            assert got is y
            assert y.tobytes() == sparse.spmv(a.data, a.indices, a.indptr, a.shape, x).tobytes()
            assert y.tobytes() == (a @ x).tobytes()


@pytest.mark.parametrize("dtype", ["float64", "float32", "complex64"])
@pytest.mark.parametrize("n", [1 << 16, (1 << 17) + 3])
@pytest.mark.parametrize("threaded", [True, False])
@pytest.mark.parametrize("block", [None, 1000])
def test_threaded_axpy_and_aypx_round_as_numpy(monkeypatch, dtype, n, threaded, block):
    """Cut over the pool or not, in blocks (the default's, or 1000 elements: many, the
    last one short), y += a*x, y -= a*x and y = x + b*y give NumPy's two-step values bit
    for bit (NaN, inf and -0.0 included)."""
    _two_threads(monkeypatch)
    if threaded:
        monkeypatch.setattr(matvec, "AXPY_PARALLEL_MIN_BYTES", 1)
    if block is not None:
        monkeypatch.setattr(matvec, "AXPY_BLOCK", block)
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(dtype)
    y = rng.standard_normal(n).astype(dtype)
    x[3], y[5], x[7] = np.nan, np.inf, -0.0
    alpha = np.asarray(0.37, dtype=dtype)
    with np.errstate(all="ignore"):  # complex inf * 0.37 warns in both, as NumPy does
        for subtract in (False, True):
            ref = y - alpha * x if subtract else y + alpha * x
            got = y.copy()
            matvec.axpy(alpha, x, got, subtract)
            assert got.tobytes() == ref.tobytes()
        ref = y * alpha
        ref += x
        got = y.copy()
        matvec.aypx(alpha, x, got)
    assert got.tobytes() == ref.tobytes()


def test_aypx_is_registered_for_every_floating_dtype():
    from tessera_array import _dispatch

    dev = xp.Device("cpu") if hasattr(xp, "Device") else xp.asarray(0.0).device
    for dt in (xp.float32, xp.float64, xp.complex64, xp.complex128):
        assert callable(_dispatch.lookup("aypx", dev, dt))


@pytest.mark.parametrize("solver", ["cg", "gmres"])
@pytest.mark.parametrize("maxiter", [1, 3, 12])
def test_solvers_on_the_threaded_paths_keep_scipy_iterates(monkeypatch, solver, maxiter):
    """cg and gmres with every threaded path taken (small thresholds) give SciPy's
    iterates bit for bit, and its info: the kernels are bit-identical to the one-call
    path, and the solvers make SciPy's operations in SciPy's order."""
    _two_threads(monkeypatch)
    monkeypatch.setattr(sparse, "SPMV_PARALLEL_MIN", 1)
    monkeypatch.setattr(matvec, "AXPY_PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(_threads, "DOT_MIN_BYTES", 1)
    k = 120  # n = 14400 > OpenBLAS's 10000: its dots are threaded
    t = sp.diags_array([-np.ones(k - 1), 2 * np.ones(k), -np.ones(k - 1)], offsets=[-1, 0, 1])
    a = (sp.kron(sp.eye_array(k), t) + sp.kron(t, sp.eye_array(k))).tocsr()
    b = np.random.default_rng(5).standard_normal(a.shape[0])
    kw = {"maxiter": maxiter} if solver == "cg" else {"restart": 8, "maxiter": maxiter}
    x_ref, info_ref = getattr(sla, solver)(a, b, rtol=1e-30, **kw)
    x, info = getattr(tla, solver)(csr_array(a), xp.asarray(b), rtol=1e-30, **kw)
    assert info == info_ref
    got = np.asarray(x)
    assert got.dtype == x_ref.dtype
    np.testing.assert_array_equal(got, x_ref)
