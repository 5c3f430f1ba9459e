"""The NumPy backend's stencil product (``backends/numpy/sparse.py``: ``stencil``, and its C
part ``backends/numpy/_stencil_c.c``): a CSR matrix whose rows are a few diagonals,
multiplied from its diagonals with the bits of SciPy's ``csr_matvec``.

Checked here: the product equals csr_matvec's bit for bit (into a poisoned output) on
2-D and 3-D Poisson, float32 and float64, int32 and int64 indices; on rows that are not
the full stencil (missing entries, stored zeros, unsorted and repeated columns) and with
inf and NaN in x at the missing entries' columns; on the pool's path; on each
instruction set's build. Matrices that are not stencils are declined. cg and gmres on
the NumPy backend take it and keep SciPy's iterates.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from _cbuild import ISAS, REQUIRED, build_variant

from tessera_array.backends.numpy import sparse as nsp

def _module_or_skip():
    """The extension, and SciPy's csr_matvec (whose sums it repeats; without it the stencil
    declines): a skip where either is absent, a failure under TESSERA_REQUIRE_COMPILED=1."""
    mod = nsp._stencil_c()
    why = ("the _stencil_c extension is not built (no C compiler at install)" if mod is None
           else None if nsp._scipy_routines() else
           "SciPy's csr_matvec (scipy.sparse._sparsetools) does not import")
    if why is not None:
        if REQUIRED:
            pytest.fail(f"TESSERA_REQUIRE_COMPILED=1: {why}")
        pytest.skip(why)
    return mod


def csr_matvec(*args):
    return nsp._scipy_routines()[0](*args)


def _poisson2d(k, dtype):
    t = sp.diags_array([-np.ones(k - 1), 2 * np.ones(k), -np.ones(k - 1)], offsets=[-1, 0, 1])
    e = sp.eye_array(k)
    return (sp.kron(e, t) + sp.kron(t, e)).tocsr().astype(dtype)


def _poisson3d(k, dtype):
    t = sp.diags_array([-np.ones(k - 1), 2 * np.ones(k), -np.ones(k - 1)], offsets=[-1, 0, 1])
    e = sp.eye_array(k)
    return (sp.kron(sp.kron(e, e), t) + sp.kron(sp.kron(e, t), e)
            + sp.kron(sp.kron(t, e), e)).tocsr().astype(dtype)


def _scipy(A, x):
    y = np.zeros(A.shape[0], dtype=A.dtype)
    csr_matvec(A.shape[0], A.shape[1], A.indptr, A.indices, A.data, x, y)
    return y


def _ours(A, x):
    st = nsp.stencil(A.data, A.indices, A.indptr, A.shape)
    assert st is not None, "expected a stencil"
    y = np.full(A.shape[0], np.nan, dtype=A.dtype)  # (poisoned: every row must be written)
    assert st.into(x, y) is y
    return y, st


def _same(a, b):
    assert a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("index", [np.int32, np.int64])
@pytest.mark.parametrize("make,k,nd", [(_poisson2d, 64, 5), (_poisson3d, 16, 7)])
def test_stencil_equals_csr_matvec(make, k, nd, dtype, index):
    _module_or_skip()
    A = make(k, dtype)
    A.indices, A.indptr = A.indices.astype(index), A.indptr.astype(index)
    rng = np.random.default_rng(k)
    x = rng.standard_normal(A.shape[0]).astype(dtype)
    x[::97] = -0.0
    y, st = _ours(A, x)
    _same(y, _scipy(A, x))
    assert st.nd == nd and 0 < st.rest < A.shape[0] // 2


def test_rows_off_the_stencil_take_the_csr_loop():
    """Stored zeros, a missing entry, a row's columns out of order and a repeated column
    (a CSR matrix not in canonical form), and inf / NaN in x at columns that rows do not
    store: each row summed as csr_matvec sums it."""
    _module_or_skip()
    n = 300
    A = sp.diags_array([np.arange(1.0, n), np.full(n, 4.0), np.arange(2.0, n + 1),
                        np.full(n - 3, 0.5)], offsets=[-1, 0, 1, 3]).tocsr()
    A.data[A.indptr[50]] = 0.0  # a stored zero stays an entry
    A = A.tolil()
    A[100, 101] = 0  # (lil drops it: a missing entry, row 100 off the stencil)
    A = A.tocsr()
    A.sort_indices()
    s, e = A.indptr[200], A.indptr[201]
    A.indices[s:e] = A.indices[s:e][::-1].copy()  # row 200 unsorted
    A.data[s:e] = A.data[s:e][::-1].copy()
    s = A.indptr[250]
    A.indices[s + 1] = A.indices[s]  # row 250: a column twice (and one missing)
    A.has_sorted_indices = False
    rng = np.random.default_rng(5)
    for x in (rng.standard_normal(n), np.where(np.arange(n) == 101, np.inf, 1.5),
              np.where(np.arange(n) % 7 == 0, np.nan, -2.0)):
        y, st = _ours(A, x)
        _same(y, _scipy(A, x))
    assert st.nd == 4 and {100, 200, 250} <= set(st.keep[5].tolist())


def test_the_pool_splits_the_rows(monkeypatch):
    _module_or_skip()
    monkeypatch.setattr(nsp, "SPMV_PARALLEL_MIN", 1000)
    A = _poisson2d(40, np.float64)
    x = np.random.default_rng(2).standard_normal(A.shape[0])
    _same(_ours(A, x)[0], _scipy(A, x))


@pytest.mark.parametrize("arch", sorted(ISAS))
def test_each_instruction_set_gives_the_same_bits(monkeypatch, tmp_path, arch):
    """The row loops built for x86-64-v3 and for the baseline (-DTESSERA_NO_CLONES), in
    place of the built module: csr_matvec's bits (no contraction into FMAs anywhere)."""
    _module_or_skip()
    mod = build_variant("_stencil_c", arch, tmp_path, extra=("-ffp-contract=off",))
    monkeypatch.setattr(nsp, "_stencil_mod", [mod])
    for dtype in (np.float64, np.float32):
        A = _poisson3d(16, dtype)
        x = np.random.default_rng(3).standard_normal(A.shape[0]).astype(dtype)
        y, st = _ours(A, x)
        assert st.mod is mod
        _same(y, _scipy(A, x))


def test_what_is_not_a_stencil_is_declined():
    _module_or_skip()
    rng = np.random.default_rng(7)
    R = sp.random_array((400, 400), density=0.05, random_state=rng, format="csr")
    assert nsp.stencil(R.data, R.indices, R.indptr, R.shape) is None  # many diagonals
    P = _poisson2d(3, np.float64)
    assert nsp.stencil(P.data, P.indices, P.indptr, P.shape) is None  # most rows at an edge
    P = _poisson2d(32, np.float64)
    C = P.astype(np.complex128)
    assert nsp.stencil(C.data, C.indices, C.indptr, C.shape) is None
    assert nsp.stencil(P.data, P.indices.astype(np.int64), P.indptr, P.shape) is None
    assert nsp.stencil(P.data, P.indices, P.indptr, (P.shape[0], P.shape[0] + 1)) is None
    assert nsp.stencil(P.data[:0], P.indices[:0], np.zeros(P.shape[0] + 1, np.int32),
                       P.shape) is None
    x = np.ones(P.shape[0])
    st = nsp.stencil(P.data, P.indices, P.indptr, P.shape)
    with pytest.raises(ValueError, match="n elements"):
        st.into(x.astype(np.float32), np.empty(P.shape[0]))
    with pytest.raises(ValueError, match="n elements"):
        st.into(x[:-1], np.empty(P.shape[0]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_solvers_take_it_and_keep_their_iterates(monkeypatch, dtype):
    """cg (maxiter >= 8) and gmres (restart 10, maxiter 2: 22 products) on a Poisson
    csr_array take the stencil's product, and x and info are those of the CSR routine's path bit for bit (and
    SciPy's where that path's are: cg, and gmres in float64)."""
    import scipy.sparse.linalg as sla

    import tessera_array as xp
    from tessera_array.sparse import csr_array
    from tessera_array.sparse import linalg as tla

    _module_or_skip()
    monkeypatch.setattr(nsp, "STENCIL_MIN_WORK", 0)  # (a small system: the rule's size part)
    made = []
    real = nsp.stencil
    P = _poisson2d(48, dtype)
    b = np.random.default_rng(8).standard_normal(P.shape[0]).astype(dtype)
    A, bd = csr_array(P), xp.asarray(b)
    for name, kw in (("cg", {"maxiter": 12}), ("gmres", {"restart": 10, "maxiter": 2})):
        runs = []
        for take in (True, False):
            monkeypatch.setattr(nsp, "stencil", lambda *a, take=take: made.append(take)
                                or (real(*a) if take else None))
            made.clear()
            x, info = getattr(tla, name)(A, bd, rtol=1e-30, **kw)
            assert made and made[0] is take
            runs.append((np.asarray(x), info))
        (x1, i1), (x2, i2) = runs
        assert i1 == i2
        _same(x1, x2)
        if name == "cg" or dtype == np.float64:
            xs, infos = getattr(sla, name)(P, b, rtol=1e-30, **kw)
            assert infos == i1
            _same(x1, xs)


def test_when_a_stencil_pays():
    """From 8 products, and enough products x stored entries to pay the set-up back."""
    n256, n64 = 5 * 256**2, 5 * 64**2
    assert nsp.stencil_pays(10, n256) and not nsp.stencil_pays(7, n256)
    assert not nsp.stencil_pays(10, n64) and nsp.stencil_pays(200, n64)
