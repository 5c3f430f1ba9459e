"""gmres's loop on a device's native buffers (op ``krylov_vectors``; the NumPy backend's
ndarrays) against the same loop on Arrays (``_gmres(..., native=False)``, the reference)
and against SciPy.

On the host the native loop must give the Array loop's iterates bit for bit, for every
floating dtype, operator form, restart length, callback and keyword. SciPy's iterates are
matched exactly for real float64 systems; for float32 and complex ones the reference
itself differs from SciPy by rounding (its Hessenberg entries and rotations are Python
floats, SciPy's are in the work dtype; numpy.linalg.norm sums a complex vector's parts
as strided BLAS dots), so there the comparison with SciPy has a tolerance.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import tessera_array as xp
from tessera_array import _dispatch
from tessera_array._errors import KernelNotFoundError
from tessera_array.sparse import csr_array
from tessera_array.sparse import linalg as tla

sp = pytest.importorskip("scipy.sparse")
sla = pytest.importorskip("scipy.sparse.linalg")
from _problems import convection_diffusion, poisson2d

_isolve = tla._isolve
_gmres_mod = tla._gmres  # gmres's module: _gmres, _ArrayVectors, _native_vectors


def dense_spd(n, seed=1):
    g = np.random.default_rng(seed).standard_normal((n, n))
    return g @ g.T / n + 0.05 * np.eye(n)


PROBLEMS = {
    "poisson": lambda: poisson2d(6),  # CSR, symmetric
    "convdiff": lambda: convection_diffusion(6),  # CSR, nonsymmetric
    "spd": lambda: sp.csr_array(dense_spd(30)),  # dense form below
}
FORMS = {"poisson": "csr", "convdiff": "csr", "spd": "dense"}
DTYPES = ("float64", "float32", "complex128", "complex64")
# x against SciPy's, relative to max |x|: exact for real float64 (see the module docstring)
SCIPY_TOL = {"float64": 0.0, "float32": 2e-5, "complex128": 1e-6, "complex64": 2e-5}


def _system(problem, dtype, seed=3):
    a = PROBLEMS[problem]().astype(dtype)
    rng = np.random.default_rng(seed)
    b = rng.standard_normal(a.shape[0])
    if np.dtype(dtype).kind == "c":
        b = b + 1j * rng.standard_normal(a.shape[0])
    return a, b.astype(dtype)


def _tessera(form, a, device=None):
    if form == "csr":
        return csr_array(sp.csr_array(a), device=device)
    return xp.asarray(a.toarray() if sp.issparse(a) else a, device=device)


def _scipy_form(form, a):
    return a if form == "csr" else a.toarray()


def _np(a):
    return np.asarray(a.to_device("cpu") if a.device.kind != "cpu" else a)


def _both(*args, **kw):
    """``(native, reference)``: gmres's native loop and its Array loop on the same call,
    each result with what its callback saw, as NumPy values."""
    out = []
    for native in (True, False):
        seen = []
        kw2 = dict(kw)
        if "callback_type" in kw2:
            kw2["callback"] = seen.append
        res = _gmres_mod._gmres(*args, native=native, **kw2)
        out.append((res, seen))
    return out


def _same_result(got, ref):
    (res_n, seen_n), (res_g, seen_g) = got, ref
    assert isinstance(res_n[0], xp.Array) and res_n[0].dtype == res_g[0].dtype
    assert res_n[0].device == res_g[0].device
    np.testing.assert_array_equal(_np(res_n[0]), _np(res_g[0]))
    assert res_n[1] == res_g[1]  # info
    if len(res_g) == 3:  # the SolveReport, its norms as floats: equal (NaN where NaN)
        rn, rg = res_n[2], res_g[2]
        assert rn[:3] == rg[:3]
        np.testing.assert_array_equal(rn.residual_norms, rg.residual_norms)
        assert all(type(v) is float for v in rn.residual_norms)
    assert len(seen_n) == len(seen_g)
    for a, b in zip(seen_n, seen_g):
        if isinstance(b, xp.Array):
            assert isinstance(a, xp.Array) and a.device == b.device
            np.testing.assert_array_equal(_np(a), _np(b))
        else:
            assert type(a) is float and a == b


# ---- which path runs -------------------------------------------------------------------


def test_native_path_is_taken_on_the_host(monkeypatch):
    """On the NumPy backend gmres never makes the Array-level vector operations (made to
    raise here), and its iterates stay SciPy's; the seam native=False does make them."""
    a, b = _system("convdiff", "float64")

    class Refused:
        def __init__(self, *args, **kw):
            raise AssertionError("the Array-level loop ran")

    monkeypatch.setattr(_gmres_mod, "_ArrayVectors", Refused)
    monkeypatch.setattr(_gmres_mod, "_Basis", Refused)
    x, info = tla.gmres(csr_array(a), xp.asarray(b), restart=5, maxiter=2)
    xs, ins = sla.gmres(a, b, restart=5, maxiter=2)
    assert info == ins
    np.testing.assert_array_equal(np.asarray(x), xs)
    with pytest.raises(AssertionError, match="the Array-level loop ran"):
        _gmres_mod._gmres(csr_array(a), xp.asarray(b), restart=5, maxiter=2, native=False)


def test_native_vectors_where_registered(device):
    """_native_vectors: the backend's krylov_vectors where it registers one (the NumPy
    backend: every floating dtype), None elsewhere (the generic loop, unchanged)."""
    for dt in (xp.float32, xp.float64, xp.complex64, xp.complex128):
        if dt not in device.backend.dtypes(device):
            continue
        b = xp.ones(4, dtype=dt, device=device)
        A, M, _, b, ns, _ = _isolve._make_system("gmres", xp.eye(4, dtype=dt, device=device),
                                                None, None, b)
        vec = _gmres_mod._native_vectors(ns, A, M, b, "device")
        try:
            _dispatch.lookup("krylov_vectors", device, dt)
        except KernelNotFoundError:
            assert vec is None
        else:
            assert vec is not None
        if device.backend.is_host:
            from tessera_array.backends.numpy.krylov import HostVectors

            assert isinstance(vec, HostVectors)


def test_strided_b_takes_the_generic_loop():
    """A b that is not one contiguous vector: the backend declines, the Array loop runs
    (the same iterates: SciPy's)."""
    a, b = _system("convdiff", "float64")
    big = np.zeros(2 * b.shape[0])
    big[::2] = b
    bt = xp.asarray(big)[::2]
    A, _, _, bs, _, _ = _isolve._make_system("gmres", csr_array(a), None, None, bt)
    assert not bs._data.flags.c_contiguous
    assert _gmres_mod._native_vectors(xp, A, None, bs, "device") is None
    x, info = tla.gmres(csr_array(a), bt, restart=5, maxiter=2)
    xs, ins = sla.gmres(a, b, restart=5, maxiter=2)
    assert info == ins
    np.testing.assert_array_equal(np.asarray(x), xs)


# ---- iterates ----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("problem", list(PROBLEMS))
def test_iterates_match_the_array_loop_and_scipy(problem, dtype):
    """Restart 5 and the default (20: nearly the whole Krylov space of these 36 / 30
    unknowns), 1 and 3 restarts: the Array loop's x, info and norms bit for bit; SciPy's x
    and info (exactly in float64)."""
    a, b = _system(problem, dtype)
    form = FORMS[problem]
    A, bt = _tessera(form, a), xp.asarray(b)
    for restart in (5, None):
        for maxiter in (1, 3):
            kw = {"restart": restart, "maxiter": maxiter}
            got, ref = _both(A, bt, report=True, **kw)
            _same_result(got, ref)
            xs, ins = sla.gmres(_scipy_form(form, a), b, **kw)
            x, info, _ = got[0]
            assert info == ins
            tol = SCIPY_TOL[dtype]
            if tol == 0:
                np.testing.assert_array_equal(np.asarray(x), xs)
            else:
                np.testing.assert_allclose(np.asarray(x), xs, rtol=0,
                                           atol=tol * np.abs(xs).max())


@pytest.mark.parametrize("dtype", ["float64", "float32", "complex128"])
def test_iterates_on_long_vectors(dtype):
    """Poisson 256^2 (65536 unknowns: axpy through its scratch buffer) and, in float64,
    1024^2 (the dot products on the backend's pool): still the Array loop's bits, and
    SciPy's in float64."""
    sizes = (256, 1024) if dtype == "float64" else (256,)
    for k in sizes:
        a = poisson2d(k).astype(dtype)
        rng = np.random.default_rng(5)
        b = rng.standard_normal(a.shape[0])
        if dtype.startswith("complex"):
            b = b + 1j * rng.standard_normal(a.shape[0])
        b = b.astype(dtype)
        restart = 3 if k == 256 else 2
        got, ref = _both(csr_array(a), xp.asarray(b), restart=restart, maxiter=1,
                         rtol=1e-30, report=True)
        _same_result(got, ref)
        if dtype == "float64":
            xs, _ = sla.gmres(a, b, restart=restart, maxiter=1, rtol=1e-30)
            np.testing.assert_array_equal(np.asarray(got[0][0]), xs)


# ---- callbacks, report, keywords -------------------------------------------------------


@pytest.mark.parametrize("ctype", ["legacy", "pr_norm", "x"])
@pytest.mark.parametrize("dtype", ["float64", "complex128", "float32"])
def test_callbacks_and_report_as_the_array_loop(ctype, dtype):
    """Each callback type sees what it sees on the Array loop (the legacy one counting
    inner iterations against maxiter); 'x' is given tessera Arrays that later restarts
    leave as they were; report=True the same SolveReport. In float64 the callbacks also
    see SciPy's values."""
    a, b = _system("convdiff", dtype)
    A, bt = csr_array(a), xp.asarray(b)
    for kw in ({"restart": 5, "maxiter": 7}, {"restart": 4}, {"restart": 3, "maxiter": 1}):
        got, ref = _both(A, bt, callback_type=ctype, report=True, **kw)
        _same_result(got, ref)
        if dtype == "float64":
            want = []

            def keep(v, want=want):  # (SciPy updates its x in place after a callback)
                want.append(v.copy() if isinstance(v, np.ndarray) else v)

            xs, ins = sla.gmres(a, b, callback=keep, callback_type=ctype, **kw)
            seen = got[1]
            assert got[0][1] == ins and len(seen) == len(want)
            for g, w in zip(seen, want):
                np.testing.assert_array_equal(np.asarray(g), w)
            np.testing.assert_array_equal(np.asarray(got[0][0]), xs)


def test_callback_type_checks_and_warning():
    a, b = _system("poisson", "float64")
    A, bt = csr_array(a), xp.asarray(b)
    with pytest.warns(DeprecationWarning, match=r"gmres: called with a callback but without"):
        tla.gmres(A, bt, callback=lambda r: None, maxiter=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _gmres_mod._gmres(A, bt, callback=lambda r: None, maxiter=1)  # the core: legacy, quiet
    with pytest.raises(ValueError, match=r"gmres: callback_type must be"):
        tla.gmres(A, bt, callback_type="bad")


@pytest.mark.parametrize("products", ["device", "blas"])
def test_x0_preconditioners_and_products(products):
    """x0 (an Array, and 'Mb'), M as a CSR matrix, a dense matrix and a callable, both
    ``products`` settings: the Array loop's bits, SciPy's in float64."""
    a, b = _system("convdiff", "float64")
    n = a.shape[0]
    d = 1.0 / a.diagonal()
    x0 = np.random.default_rng(9).standard_normal(n)
    dt = xp.asarray(d)
    Ms = {"csr": (csr_array(sp.diags_array(d).tocsr()), sp.diags_array(d).tocsr()),
          "dense": (xp.asarray(np.diag(d)), np.diag(d)),
          "callable": (lambda v: dt * v, sp.diags_array(d).tocsr()),
          "none": (None, None)}
    for name, (M, Ms_) in Ms.items():
        for start in (xp.asarray(x0), "Mb", None):
            if start == "Mb" and M is None:
                continue
            kw = {"restart": 4, "maxiter": 3, "M": M, "x0": start, "products": products}
            got, ref = _both(csr_array(a), xp.asarray(b), report=True, **kw)
            _same_result(got, ref)
            s0 = x0 if isinstance(start, xp.Array) else (
                None if start is None else (Ms_ @ b))
            xs, ins = sla.gmres(a, b, restart=4, maxiter=3, M=Ms_, x0=s0)
            assert got[0][1] == ins, name
            if name != "dense":  # (a dense M @ v sums its zeros: the same, but not
                np.testing.assert_array_equal(np.asarray(got[0][0]), xs)  # SciPy's CSR M)


def test_user_operators_receive_and_return_arrays():
    """A LinearOperator A and a callable M still get tessera Arrays on b's device (views
    of the basis included) and may return their input (M = identity): the loop then
    updates out of place, as on the Array loop; the same bits, SciPy's x."""
    a, b = _system("convdiff", "float64")
    t = csr_array(a)
    kinds = []

    def mv(v):
        kinds.append(type(v))
        return t @ v

    A = tla.LinearOperator(a.shape, matvec=mv, dtype=xp.float64)
    for M in (None, lambda v: v):
        kinds.clear()
        got, ref = _both(A, xp.asarray(b), restart=5, maxiter=2, M=M, report=True)
        _same_result(got, ref)
        assert kinds and set(kinds) == {xp.Array}
        xs, _ = sla.gmres(a, b, restart=5, maxiter=2)
        np.testing.assert_array_equal(np.asarray(got[0][0]), xs)


def test_user_operator_results_are_checked():
    a, b = _system("poisson", "float64")
    t = csr_array(a)
    bad = tla.LinearOperator(a.shape, matvec=lambda v: np.asarray(t @ v), dtype=xp.float64)
    with pytest.raises(TypeError, match=r"gmres: A's matvec must return an array of b's"):
        tla.gmres(bad, xp.asarray(b), restart=3, maxiter=1)
    # a result in another dtype is cast to b's (float32 system, float64 products)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    t32 = csr_array(a32)
    wide = tla.LinearOperator(a.shape, matvec=lambda v: xp.astype(t32 @ v, xp.float64),
                              dtype=xp.float32)
    x, _ = tla.gmres(wide, xp.asarray(b32), restart=3, maxiter=1)
    want, _ = tla.gmres(t32, xp.asarray(b32), restart=3, maxiter=1)
    assert x.dtype == xp.float32
    np.testing.assert_array_equal(np.asarray(x), np.asarray(want))


# ---- edge cases ---------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [np.nan, np.inf, 1e308])
@pytest.mark.parametrize("form", ["csr", "dense"])
def test_nonfinite_operator_gives_info_minus_20(bad, form):
    a = convection_diffusion(5).toarray()
    a[3, 4] = bad
    b = np.random.default_rng(0).standard_normal(25)
    # Note: the NumPy backend's dot products do not yet silence NumPy's overflow/invalid
    # RuntimeWarnings (their results, inf/NaN, are IEEE 754's) on either loop; filtered.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for x0 in (None, xp.ones(25)):
            got, ref = _both(_tessera(form, a), xp.asarray(b), x0=x0, restart=5, maxiter=3,
                             report=True)
            assert got[0][1] == ref[0][1] == -20
            _same_result(got, ref)


def test_zero_rhs_maxiter_zero_and_bad_b():
    a, b = _system("poisson", "float64")
    A = csr_array(a)
    for native in (True, False):
        x, info = _gmres_mod._gmres(A, xp.zeros(a.shape[0]), native=native)
        assert info == 0 and not bool(xp.any(x != 0)) and isinstance(x, xp.Array)
        x, info, rep = _gmres_mod._gmres(A, xp.asarray(b), maxiter=0, report=True,
                                         native=native)
        assert info == 0 and rep.iterations == 0 and not bool(xp.any(x != 0))
        bb = b.copy()
        bb[2] = np.nan
        with pytest.raises(ValueError, match=r"gmres: b must be finite"):
            _gmres_mod._gmres(A, xp.asarray(bb), native=native)
        with warnings.catch_warnings():  # (the dot's overflow warning: see above)
            warnings.simplefilter("ignore", RuntimeWarning)
            with pytest.raises(ValueError, match=r"gmres: \|\|b\|\| overflows"):
                _gmres_mod._gmres(A, xp.asarray(np.full(a.shape[0], 1e300)), native=native)


def test_callers_arrays_untouched():
    """b and x0 are the caller's: neither is written (the loop scales its own copies)."""
    a, b = _system("convdiff", "float64")
    x0 = np.random.default_rng(2).standard_normal(a.shape[0])
    bt, x0t = xp.asarray(b.copy()), xp.asarray(x0.copy())
    for M in (None, csr_array(sp.eye_array(a.shape[0]).tocsr()), lambda v: v):
        for start in (None, x0t):
            tla.gmres(csr_array(a), bt, x0=start, M=M, restart=4, maxiter=2)
            np.testing.assert_array_equal(np.asarray(bt), b)
            np.testing.assert_array_equal(np.asarray(x0t), x0)


def test_generic_and_native_agree_on_every_device(device):
    """On any device gmres (native where registered) and the Array loop give one result:
    the same path off the host, the same bits on it; where a fused gmres kernel is
    registered (CUDA: CGS2 Arnoldi in one launch), the same iterations and x to rounding
    (tests/test_cuda_gmres.py holds it to the generic loop in detail)."""
    a, b = _system("convdiff", "float64")
    if xp.float64 not in device.backend.dtypes(device):
        a, b = a.astype(np.float32), b.astype(np.float32)
    A, bt = csr_array(a, device=device), xp.asarray(b, device=device)
    got, ref = _both(A, bt, restart=5, maxiter=2, callback_type="x", report=True)
    try:
        _dispatch.lookup("gmres_fused", device, bt.dtype)
    except xp.KernelNotFoundError:
        _same_result(got, ref)
        return
    (res_n, seen_n), (res_g, seen_g) = got, ref
    assert res_n[1] == res_g[1] and res_n[2].iterations == res_g[2].iterations
    assert len(seen_n) == len(seen_g)
    tol = 1e-12 if bt.dtype == xp.float64 else 1e-5
    np.testing.assert_allclose(_np(res_n[0]), _np(res_g[0]), rtol=tol,
                               atol=tol * float(np.max(np.abs(_np(res_g[0])))))


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128, np.complex64])
@pytest.mark.parametrize("precond", [False, True])
def test_host_cg_is_the_generic_loop_bit_for_bit(dtype, precond):
    """cg's fused path on the NumPy backend (backends/numpy/cg.py) against the generic
    loop: the same x, info and report (every residual norm) bit for bit, in every
    floating dtype, with and without a preconditioner, after 1, 3 and 20 iterations and
    to convergence (the norms of the complex and preconditioned paths round as the
    generic loop's: single-precision square roots, the parts copied)."""
    rng = np.random.default_rng(11)
    n = 120
    cplx = np.dtype(dtype).kind == "c"
    g = rng.standard_normal((n, n)) + (1j * rng.standard_normal((n, n)) if cplx else 0)
    a = g @ g.conj().T / n + np.eye(n)
    b = rng.standard_normal(n) + (1j * rng.standard_normal(n) if cplx else 0)
    A, B = xp.asarray(a.astype(dtype)), xp.asarray(b.astype(dtype))
    M = xp.asarray(np.diag(1.0 / np.diag(a).real).astype(dtype)) if precond else None
    for maxiter in (1, 3, 20, None):
        xf, infof, rf = tla.cg(A, B, maxiter=maxiter, M=M, report=True)
        xg, infog, rg = tla._isolve._cg(A, B, maxiter=maxiter, M=M, report=True, fused=False)
        assert infof == infog and rf == rg
        np.testing.assert_array_equal(np.asarray(xf), np.asarray(xg))
