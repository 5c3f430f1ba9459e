"""tessera_array.sparse.linalg solvers against scipy.sparse.linalg, on every device.

Iterates are compared at maxiter=1 and 3 (1e-10 in float64), then the converged
runs: same info, iteration counts within 1, solutions within 1e-6 relative.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import numpy as np
import pytest
import scipy.sparse

import tessera_array as xp
from tessera_array import _dispatch
from tessera_array._errors import KernelNotFoundError
from tessera_array.sparse import _routing, csr_array
from tessera_array.sparse import linalg as tla
from tessera_array.sparse.linalg import _gmres

sp = pytest.importorskip("scipy.sparse")
sla = pytest.importorskip("scipy.sparse.linalg")
from _problems import convection_diffusion, poisson2d
from _problems import hermitian as _hermitian
from _problems import perturbed as _perturbed
from _problems import spd as dense_spd

# ---- test problems (NumPy / SciPy, float64 or complex128) ---------------------------
# dense_spd (_problems.spd) and, here, a Hermitian one of seed 2 and shift 0.1


def complex_hermitian(n, seed=2):
    return _hermitian(n, seed=seed, shift=0.1)


def _rhs(n, complex_=False, seed=3):
    rng = np.random.default_rng(seed)
    b = rng.standard_normal(n)
    return b + 1j * rng.standard_normal(n) if complex_ else b


PROBLEMS = {
    "poisson": lambda: poisson2d(6),
    "spd": lambda: dense_spd(30),
    "convdiff": lambda: convection_diffusion(6),
    "hermitian": lambda: complex_hermitian(24),
}
SYMMETRIC = ("poisson", "spd", "hermitian")
SOLVERS = {
    "cg": SYMMETRIC,
    "gmres": tuple(PROBLEMS),
    "bicgstab": tuple(PROBLEMS),
    "cgs": ("poisson", "spd", "convdiff"),
    "bicg": tuple(PROBLEMS),
}
CASES = [(s, p) for s, ps in SOLVERS.items() for p in ps]


def _np(a):
    if isinstance(a, xp.Array):
        a = a.to_device("cpu")  # an explicit copy: device arrays refuse implicit ones
    return np.asarray(a)


def _dense(a):
    return a.toarray() if sp.issparse(a) else a


def _as_form(form, a, device):
    """The matrix ``a`` in one of the accepted forms, on ``device`` where tessera."""
    if form == "csr":
        return csr_array(sp.csr_array(a), device=device)
    if form == "dense":
        return xp.asarray(_dense(a), device=device)
    if form == "linop":
        t = xp.asarray(_dense(a), device=device)
        return tla.LinearOperator(a.shape, matvec=lambda v: t @ v,
                                  rmatvec=lambda v: xp.conj(t.mT) @ v, dtype=t.dtype)
    if form == "scipy":
        return sp.csr_array(a)
    if form == "numpy":
        return np.asarray(_dense(a))
    raise AssertionError(form)


def _run(name, A, b, **kw):
    """(x, info, callback count) of tessera's solver ``name``."""
    count = [0]

    def cb(_):
        count[0] += 1

    extra = {"callback_type": "x"} if name == "gmres" else {}
    x, info = getattr(tla, name)(A, b, callback=cb, **extra, **kw)
    return x, info, count[0]


def _run_scipy(name, A, b, **kw):
    count = [0]

    def cb(_):
        count[0] += 1

    extra = {"callback_type": "x"} if name == "gmres" else {}
    x, info = getattr(sla, name)(A, b, callback=cb, **extra, **kw)
    return x, info, count[0]


# ---- how far rounding moves SciPy's own result (the bounds for device results) ------
#
# The NumPy backend computes as SciPy does (the host's BLAS, SciPy's operation order), so
# there its results are compared with SciPy's exactly: the same info and iteration count.
# A device sums its dot products (and dense products, and complex arithmetic) in its own
# order, so its iterates differ from SciPy's by rounding, which a Krylov method amplifies
# and which can move the iteration count (CGS on the SPD problem: SciPy 32, with its data
# perturbed at one ulp 33-37). The bounds for device results are therefore measured, per
# case and dtype: SciPy's solver on the same system with every entry of A and b
# perturbed by up to one ulp of the dtype (relative; a real symmetric pattern keeps A
# symmetric / Hermitian), for PERTURBED seeds. A device's result passes when its info is
# one of theirs, its iteration count lies in their range widened by one, its x is within
# max(tol, SPREAD_MARGIN x their largest deviation from SciPy's x) of SciPy's, and (when
# converged) its true residual at most twice the largest of theirs.

PERTURBED = 8
SPREAD_MARGIN = 16


class Spread(NamedTuple):
    """SciPy's results on one-ulp perturbations of a system (with the unperturbed one)."""

    infos: frozenset  # the info codes
    counts: tuple  # (fewest, most) iterations (callback calls)
    xdev: float  # max over the runs of max |x_run - x_scipy| / max |x_scipy|
    residual: float  # the largest true relative residual ||b - A x|| / ||b|| (float64)


def _true_residual(a, b, x):
    a = _dense(a).astype(np.complex128)
    return float(np.linalg.norm(b - a @ np.asarray(x, np.complex128)) / np.linalg.norm(b))


def _rounding_spread(solver, a, b, want, **kw) -> Spread:
    """SciPy's ``solver`` on PERTURBED one-ulp perturbations of ``(a, b)``; ``want``:
    its ``(x, info, count)`` on ``(a, b)`` itself."""
    xs, ins, ns = want
    runs = [_run_scipy(solver, *_perturbed(a, b, seed), **kw) for seed in range(PERTURBED)]
    scale = np.abs(xs).max()
    counts = [ns] + [c for _, _, c in runs]
    return Spread(frozenset([ins] + [i for _, i, _ in runs]), (min(counts), max(counts)),
                  max(float(np.abs(x - xs).max() / scale) for x, _, _ in runs),
                  max(_true_residual(a, b, x) for x in [xs] + [x for x, _, _ in runs]))


def _assert_like_scipy(solver, a, b, got, want, tol, *, exact, **kw):
    """tessera's ``got = (x, info, count)`` for ``solver(a, b, **kw)`` against SciPy's
    ``want`` (SciPy run on ``a`` as given: the same form, dtype and keywords).

    ``exact`` (the NumPy backend, or products in SciPy's order): the same info and count,
    x within ``tol`` (relative to max |x|). Otherwise within the rounding bounds above.
    Returns the :class:`Spread` where it was measured."""
    xt, it, nt = got
    xs, ins, ns = want
    xt = _np(xt)
    scale = np.abs(xs).max()
    if exact:
        assert (it, nt) == (ins, ns), ((it, nt), (ins, ns))
        np.testing.assert_allclose(xt, xs, rtol=tol, atol=tol * scale)
        return None
    spread = _rounding_spread(solver, a, b, want, **kw)
    lo, hi = spread.counts
    assert it in spread.infos, (it, sorted(spread.infos))
    assert lo - 1 <= nt <= hi + 1, (nt, spread.counts)
    bound = max(tol, SPREAD_MARGIN * spread.xdev)
    np.testing.assert_allclose(xt, xs, rtol=bound, atol=bound * scale)
    if it == 0:
        res = _true_residual(a, b, xt)
        assert res <= 2 * spread.residual, (res, spread.residual)
    return spread


def _host(device) -> bool:
    """True where the device computes as SciPy does (the NumPy backend: the host's BLAS)."""
    return bool(device.backend.is_host)


def _exact(device, products, dtype) -> bool:
    """Whether tessera's iterates must equal SciPy's (same info and count, x to the
    test's tolerance): on the NumPy backend; elsewhere with products="blas" where the
    device's CSR rows also round as SciPy's: real dtypes on every device, complex ones
    except on cuda, whose complex CSR product (cuSPARSE) does not (measured on the H200:
    cg on the Hermitian problem took 27 iterations to SciPy's 26)."""
    if _host(device):
        return True
    if products != "blas":
        return False
    return not (np.dtype(dtype).kind == "c" and device.backend_name == "cuda")


def _products_for(device) -> tuple:
    """The ``products`` settings worth running on ``device``: both where they differ
    (an accelerator), one on the NumPy backend (both are the host's BLAS there)."""
    return ("device",) if _host(device) else ("device", "blas")


# ---- the routing table ------------------------------------------------------------


def test_routing_table_pinned():
    """The table the measurements in sparse/_routing.py justify: dense products warp in
    every solver (H200 OpenCL), CSR products scalar for CG-like solvers and warp for
    GMRES (the seed's split)."""
    table = {s: dict(row) for s, row in _routing.MATVEC_ROUTING.items()}
    cg_like = {"dense": "warp", "csr": "scalar"}
    assert table == {
        "cg": cg_like, "gmres": {"dense": "warp", "csr": "warp"}, "bicg": cg_like,
        "bicgstab": cg_like, "cgs": cg_like, "minres": cg_like,
        "matmul": {"dense": "default", "csr": "default"},
    }
    assert _routing.matvec_variant("cg", "csr") == "scalar"
    assert _routing.matvec_variant("cg", "dense") == "warp"
    assert _routing.matvec_variant("gmres", "csr") == "warp"
    with pytest.raises(KeyError, match=r"matvec_variant: no routing for solver='qmr'"):
        _routing.matvec_variant("qmr", "csr")
    with pytest.raises(KeyError, match=r"kind='coo'"):
        _routing.matvec_variant("cg", "coo")


def test_routing_backend_rows(monkeypatch):
    """A backend's own row overrides the default row of that solver on that backend only;
    the default rows stay as pinned above, and rows need every kind and a measurement."""
    monkeypatch.setattr(_routing, "_backend_rows", {})
    default = {s: dict(row) for s, row in _routing.MATVEC_ROUTING.items()}
    _routing.register_routing("opencl", "cg", {"dense": "scalar", "csr": "warp"},
                              measured="a test's row: no measurement")
    assert _routing.matvec_variant("cg", "csr", "opencl") == "warp"
    assert _routing.matvec_variant("cg", "dense", "opencl") == "scalar"
    assert _routing.matvec_variant("gmres", "csr", "opencl") == "warp"  # no row: default
    assert _routing.matvec_variant("cg", "csr", "numpy") == "scalar"  # another backend
    assert _routing.matvec_variant("cg", "csr") == "scalar"  # no backend: the default
    seen = {s: dict(row) for s, row in _routing.routing("opencl").items()}
    assert seen == {**default, "cg": {"dense": "scalar", "csr": "warp"}}
    assert {s: dict(row) for s, row in _routing.routing("numpy").items()} == default
    assert {s: dict(row) for s, row in _routing.MATVEC_ROUTING.items()} == default
    assert _routing.backend_rows("opencl")["cg"].measured == "a test's row: no measurement"
    with pytest.raises(ValueError, match=r"register_routing: opencl already has a row"):
        _routing.register_routing("opencl", "cg", {"dense": "warp", "csr": "warp"},
                                  measured="x")
    _routing.register_routing("opencl", "cg", {"dense": "warp", "csr": "warp"},
                              measured="x", replace=True)
    assert _routing.matvec_variant("cg", "dense", "opencl") == "warp"
    with pytest.raises(ValueError, match=r"row must map each kind \['dense', 'csr'\]"):
        _routing.register_routing("opencl", "gmres", {"dense": "warp"}, measured="x")
    with pytest.raises(ValueError, match=r"measured must say"):
        _routing.register_routing("opencl", "gmres", {"dense": "warp", "csr": "warp"},
                                  measured=" ")
    with pytest.raises(KeyError, match=r"register_routing: no routing for solver='qmr'"):
        _routing.register_routing("opencl", "qmr", {"dense": "warp", "csr": "warp"},
                                  measured="x")
    _routing.unregister_routing("opencl")
    assert {s: dict(row) for s, row in _routing.routing("opencl").items()} == default


def test_cuda_cg_routing_row_pinned(monkeypatch):
    """The CUDA backend's cg row (its persistent kernel's products, measured on the H200:
    backends/_cupy/cg.py) is registered with that measurement, for cg alone, and only
    where the build can launch a cooperative kernel (not ROCm through CuPy)."""
    from tessera_array.backends._cupy import cg as cucg
    from tessera_array.backends.cuda import CudaBackend
    from tessera_array.backends.rocm import RocmBackend

    assert dict(cucg.ROUTING) == {"dense": "warp", "csr": "scalar"}
    assert "H200" in cucg.MEASURED and "2049" in cucg.MEASURED
    monkeypatch.setattr(_routing, "_backend_rows", {})

    class Registry:
        def __init__(self):
            self.ops = []

        def register(self, op, backend, dtypes, launcher, **kw):
            self.ops.append((op, backend))

        def register_family(self, family, backend, dtypes, names):
            self.ops.append((family, backend))

    reg = Registry()
    cucg.register(reg, "cuda")
    assert reg.ops == [("cg_fused", "cuda")]
    assert set(_routing.backend_rows("cuda")) == {"cg"}
    assert _routing.matvec_variant("cg", "csr", "cuda") == "scalar"
    assert _routing.backend_rows("cuda")["cg"].measured == cucg.MEASURED
    assert CudaBackend.cooperative_launch and not RocmBackend.cooperative_launch


def test_cuda_cg_geometry():
    """The persistent kernel's grid: the blocks a pass over the rows needs (a warp a row:
    n warps; a thread a row: n threads), at least one, at most BLOCKS_PER_SM per
    multiprocessor and never more than stay resident (so a cooperative launch is never
    trimmed)."""
    from tessera_array.backends._cupy.cg import BLOCK, BLOCKS_PER_SM, geometry

    assert BLOCK % 32 == 0 and BLOCK <= 1024
    assert geometry(1, 1, 32, 132, 4) == geometry(0, 32, 32, 132, 4) == 1
    assert geometry(2049, 32, 32, 132, 4) == -(-2049 * 32 // BLOCK)  # a warp a row
    assert geometry(2049, 1, 32, 132, 4) == -(-2049 // BLOCK)  # a thread a row
    assert geometry(2049, 2, 32, 132, 4) == -(-2049 * 2 // BLOCK)
    big = 1 << 20
    assert geometry(big, 1, 32, 132, 4) == 132 * min(BLOCKS_PER_SM, 4)
    assert geometry(big, 1, 32, 132, 1) == 132  # residency caps it
    assert geometry(big, 1, 32, 132, 8, per_sm=8) == 132 * 8
    assert geometry(big, 1, 64, 104, 2, per_sm=8) == 208  # a 64-lane wavefront


def test_cuda_gmres_launch_shape():
    """The fused gmres's column form and grid by the basis's size: two barriers, blocks of
    512 threads, one a multiprocessor, for a basis of at most PIPELINE_BYTES (the dense
    2049 system of the benchmarks); three barriers, two blocks of 256 past it (Poisson
    1024^2); the grid a pass over the rows at 32 and 64 lanes."""
    from tessera_array.backends._cupy import gmres as cu

    assert cu.launch_shape(2049, 30, 4) == (True, 512, 1)
    assert cu.launch_shape(2049, 30, 16) == (True, 512, 1)
    assert cu.launch_shape(1 << 20, 30, 4) == (False, 256, 2)
    edge = cu.PIPELINE_BYTES // (31 * 8)
    assert cu.launch_shape(edge, 30, 8)[0] and not cu.launch_shape(edge + 1, 30, 8)[0]
    assert cu.geometry(2049, 32, 32, 132, 1, block=512) == 129  # 16 rows a pass
    assert cu.geometry(2049, 64, 64, 104, 1, block=512) == 104  # 8 rows a pass, capped
    assert cu.geometry(1 << 20, 1, 64, 104, 2, per_sm=2, block=256) == 208
    for warp in (32, 64):
        names = [name for _, name in cu.instances(warp)]
        assert {name.rsplit(", ", 2)[1] for name in names} == {"256", "512"}
        assert all(f", {warp}, " in name for name in names)
        # the one-reduction instances (ONE): 512-thread blocks, every dtype but complex128
        ones = {name for name in names if name.endswith(", true>")}
        assert ones and all(", 512, " in n and "cdouble" not in n for n in ones)
        assert len(ones) == 3 * 4 and len(names) == 4 * 4 * 2 + len(ones)


def test_cuda_gmres_stages_u_only_for_a_dense_two_barrier_column_that_fits():
    """gmres.cu's stage_v (U in each block's shared memory for the column's product):
    asked for a dense A in the two-barrier column with n elements within STAGE_BYTES;
    never for CSR, the three-barrier column or a larger n (decided before any driver
    call: these cases need no GPU)."""
    from tessera_array.backends._cupy import gmres as cu
    from tessera_array.backends._cupy.cg import OP_CSR, OP_DENSE, _Stored

    dense, csr = _Stored(OP_DENSE, 32), _Stored(OP_CSR, 4)
    fits = cu.STAGE_BYTES // 8
    for a, n, pipelined in ((csr, 2049, True), (dense, 2049, False), (dense, fits + 1, True)):
        assert cu.stage_bytes(None, None, a, n, 8, pipelined, 512, 129, 132) == 0
    assert cu.STAGE_BYTES >= 2049 * 16  # (the benchmarks' dense system, complex128 too)


def test_cuda_gmres_one_reduction_only_where_the_rows_fit_the_cache():
    """gmres.cu's one-reduction column (pipe 2): in the two-barrier column where every
    block has at most a row a warp and the restart is within ONE_REDUCTION_RMAX, for
    every dtype but complex128; else the two-barrier column (1), or the three (0)."""
    from tessera_array.backends._cupy import gmres as cu

    form = cu.column_form
    for dt in (np.float32, np.float64, np.complex64):
        assert form(2049, 30, dt, True, 512, 129, 32) == 2  # 16 rows a block
        assert form(2049, 30, dt, True, 512, 128, 32) == 1  # 17
        assert form(2049, cu.ONE_REDUCTION_RMAX + 1, dt, True, 512, 129, 32) == 1
        assert form(2049, 30, dt, False, 256, 129, 32) == 0
    assert form(2049, 30, np.complex128, True, 512, 129, 32) == 1
    assert form(60, 30, np.float32, True, 512, 8, 64) == 2  # (a 64-wide wave: 8 rows)
    assert form(60, 30, np.float32, True, 512, 4, 64) == 1  # (15 rows, 8 waves)


def test_solver_takes_its_backends_row(device, monkeypatch):
    """The solvers read the row of their device's backend."""
    monkeypatch.setattr(_routing, "_backend_rows", {})
    seen = []
    real = _dispatch.lookup

    def spy(op, dev, dtype, variant="default"):
        seen.append((op, variant))
        return real(op, dev, dtype, variant)

    monkeypatch.setattr("tessera_array.sparse._csr.lookup", spy)
    _routing.register_routing(device.backend.name, "cg", {"dense": "warp", "csr": "warp"},
                              measured="a test's row: no measurement")
    a = poisson2d(4)
    # (the generic loop: a device's fused kernel may form the products itself)
    _generic_cg(csr_array(a, device=device), xp.asarray(_rhs(16), device=device), maxiter=2)
    assert set(seen) == {("spmv", "warp")}
    assert _fused_variants(device, monkeypatch, csr_array(a, device=device)) in ([], ["warp"])


def test_products_take_their_backends_matmul_row(device, monkeypatch):
    """``A @ x``, ``x @ A``, ``A.toarray()`` and ``aslinearoperator(A)`` of a floating
    csr_array ask for the ``spmv`` variant of the ``matmul`` row of the device's backend;
    integer ones for ``default`` (their only variant), whatever the row."""
    monkeypatch.setattr(_routing, "_backend_rows", {})
    seen = []
    real = _dispatch.lookup

    def spy(op, dev, dtype, variant="default"):
        seen.append((op, dtype, variant))
        return real(op, dev, dtype, variant)

    monkeypatch.setattr("tessera_array.sparse._csr.lookup", spy)
    _routing.register_routing(device.backend.name, "matmul",
                              {"dense": "default", "csr": "scalar"},
                              measured="a test's row: no measurement")
    a = poisson2d(4)
    A = csr_array(a, device=device)
    x = np.random.default_rng(3).standard_normal(16)
    xd = xp.asarray(x, device=device)
    for got, want in ((A @ xd, a @ x), (xd @ A, x @ a),
                      (tla.aslinearoperator(A).matvec(xd), a @ x)):
        np.testing.assert_allclose(_np(got), want, rtol=1e-12)
    np.testing.assert_array_equal(_np(A.toarray()), a.toarray())
    assert {v for _, _, v in seen} == {"scalar"}, seen
    seen.clear()
    Ai = csr_array(scipy.sparse.csr_array(a.toarray().astype(np.int64)), device=device)
    xi = xp.asarray(np.arange(16), device=device)
    np.testing.assert_array_equal(_np(Ai @ xi),
                                  a.toarray().astype(np.int64) @ np.arange(16))
    assert seen == [("spmv", xp.int64, "default")], seen


def _fused_variants(device, monkeypatch, A):
    """The variants a fused cg solve of ``A`` on ``device`` is handed (FusedOperand.variant
    of A), or [] where the device has no fused CG."""
    if not _fused(device):
        return []
    got = []
    real = tla._isolve._fused_cg_for(xp, xp.ones(3, device=device))

    def launcher(x, r, p, Aop, M, atol, maxiter):
        got.append(Aop.variant)
        return real(x, r, p, Aop, M, atol, maxiter)

    with monkeypatch.context() as m:
        m.setattr(tla._isolve, "_fused_cg_for", lambda _xp, _r: launcher)
        tla.cg(A, xp.asarray(_rhs(A.shape[0]), device=device), maxiter=2)
    return got


def test_routing_resolves_on_device(device):
    table = _routing.routing(device.backend.name)
    variants = {v for row in table.values() for v in row.values()}
    for variant in variants:
        for dt in (xp.float32, xp.float64, xp.complex64, xp.complex128):
            if dt not in device.backend.dtypes(device):
                continue
            assert callable(_dispatch.lookup("matvec", device, dt, variant))
            assert callable(_dispatch.lookup("spmv", device, dt, variant))


def test_solver_uses_routed_variant(device, monkeypatch):
    seen = []
    real = _dispatch.lookup

    def spy(op, dev, dtype, variant="default"):
        seen.append((op, variant))
        return real(op, dev, dtype, variant)

    monkeypatch.setattr("tessera_array.sparse._csr.lookup", spy)
    monkeypatch.setattr("tessera_array.sparse.linalg._interface.lookup", spy)
    a = poisson2d(4)
    b = xp.asarray(_rhs(16), device=device)
    _generic_cg(csr_array(a, device=device), b, maxiter=2)
    assert set(seen) == {("spmv", "scalar")}
    seen.clear()
    _generic_cg(xp.asarray(a.toarray(), device=device), b, maxiter=2)
    assert set(seen) == {("matvec", "warp")}
    seen.clear()
    # a fused solve is handed the same variants with the stored matrix
    assert _fused_variants(device, monkeypatch, csr_array(a, device=device)) in ([],
                                                                                 ["scalar"])
    assert _fused_variants(device, monkeypatch, xp.asarray(a.toarray(), device=device)) in (
        [], ["warp"])
    seen.clear()
    # the generic loop (native=False: where a fused gmres exists, CUDA's, it is the
    # reference; the fused kernel takes the stored matrix, no registered product)
    _gmres._gmres(csr_array(a, device=device), b, maxiter=1, restart=2, native=False)
    assert set(seen) == {("spmv", "warp")}
    seen.clear()
    _gmres._gmres(xp.asarray(a.toarray(), device=device), b, maxiter=1, restart=2,
                  native=False)
    assert ("matvec", "warp") in seen and all(v == "warp" for _, v in seen)


# ---- iterates and convergence against SciPy -----------------------------------------


@pytest.mark.parametrize("solver,problem", CASES)
def test_iterates_match_scipy(device, solver, problem):
    """Iterates after 1 and 3 iterations: SciPy's (1e-10) on the NumPy backend and with
    products in SciPy's order; with a device's own products within the rounding bounds."""
    a = PROBLEMS[problem]()
    b = _rhs(a.shape[0], complex_=problem == "hermitian")
    A = _as_form("csr", a, device)
    bt = xp.asarray(b, device=device)
    # GMRES: restart=5 keeps 3 restarts short of convergence; see the test below.
    kw = {"restart": 5} if solver == "gmres" else {}
    for products in _products_for(device):
        for maxiter in (1, 3):
            # SciPy gets the same CSR matrix: GMRES near convergence amplifies one-ulp
            # differences (a dense gemv sums in another order than a CSR row loop).
            want = _run_scipy(solver, sp.csr_array(a), b, maxiter=maxiter, **kw)
            got = _run(solver, A, bt, maxiter=maxiter, products=products, **kw)
            xt, xs = got[0], want[0]
            assert xt.dtype == getattr(xp, xs.dtype.name) and xt.device is device
            _assert_like_scipy(solver, sp.csr_array(a), b, got, want, 1e-10,
                               exact=_exact(device, products, b.dtype), maxiter=maxiter,
                               **kw)


@pytest.mark.parametrize("problem", list(PROBLEMS))
def test_gmres_default_restart_iterates(device, problem):
    """restart=20 on these 24-36 unknowns nearly exhausts the Krylov space, where one-ulp
    differences grow: in SciPy's order real problems still match SciPy bit for bit (the
    operation order is SciPy's); complex ones to ~1e-7, because numpy.linalg.norm sums the
    real and imaginary parts as strided BLAS dots, an order the namespace cannot express.
    A device's own products: within the rounding bounds (the SPD problem: SciPy's own x
    moves by 1e-6 under one-ulp perturbations)."""
    a = PROBLEMS[problem]()
    cplx = problem == "hermitian"
    b = _rhs(a.shape[0], complex_=cplx)
    tol = 1e-6 if cplx else 1e-10
    for products in _products_for(device):
        for maxiter in (1, 3):
            want = _run_scipy("gmres", sp.csr_array(a), b, maxiter=maxiter)
            got = _run("gmres", _as_form("csr", a, device), xp.asarray(b, device=device),
                       maxiter=maxiter, products=products)
            _assert_like_scipy("gmres", sp.csr_array(a), b, got, want, tol,
                               exact=_exact(device, products, b.dtype), maxiter=maxiter)


@pytest.mark.parametrize("solver,problem", CASES)
def test_converges_like_scipy(device, solver, problem):
    """Converged runs (rtol=1e-8): SciPy's info and iteration count exactly on the NumPy
    backend and with products in SciPy's order; with a device's own products within the
    rounding bounds (CGS on the SPD problem moves by up to 5 iterations there); and the
    solution within 1e-5 of numpy.linalg.solve's."""
    a = PROBLEMS[problem]()
    b = _rhs(a.shape[0], complex_=problem == "hermitian")
    ref = np.linalg.solve(_dense(a), b)
    want = _run_scipy(solver, sp.csr_array(a), b, rtol=1e-8)
    assert want[1] == 0
    for products in _products_for(device):
        got = _run(solver, _as_form("csr", a, device), xp.asarray(b, device=device),
                   rtol=1e-8, products=products)
        assert got[1] == 0
        _assert_like_scipy(solver, sp.csr_array(a), b, got, want, 1e-6,
                           exact=_exact(device, products, b.dtype), rtol=1e-8)
        np.testing.assert_allclose(_np(got[0]), ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


@pytest.mark.parametrize("form", ["dense", "csr", "linop", "scipy", "numpy"])
@pytest.mark.parametrize("solver", ["cg", "gmres", "bicgstab", "cgs", "bicg"])
def test_operator_forms(device, form, solver):
    a = poisson2d(5)
    b = _rhs(25)
    xs, ins, ns = _run_scipy(solver, a, b, maxiter=3)
    xt, it, nt = _run(solver, _as_form(form, a, device), xp.asarray(b, device=device),
                      maxiter=3)
    assert (it, nt) == (ins, ns)
    np.testing.assert_allclose(_np(xt), xs, rtol=1e-10, atol=1e-12)


def _single_precision_check(device, dtype, solver, exact):
    a = complex_hermitian(20) if dtype == "complex64" else dense_spd(20)
    b = _rhs(20, complex_=dtype == "complex64")
    a, b = a.astype(dtype), b.astype(dtype)
    for kw in ({"maxiter": 3}, {"rtol": 1e-4}):
        want = _run_scipy(solver, a, b, **kw)
        for products in _products_for(device):
            got = _run(solver, xp.asarray(a, device=device), xp.asarray(b, device=device),
                       products=products, **kw)
            assert got[0].dtype == getattr(xp, dtype)
            _assert_like_scipy(solver, a, b, got, want, 1e-5, exact=exact, **kw)


@pytest.mark.parametrize("dtype", ["float32", "complex64"])
@pytest.mark.parametrize("solver", ["cg", "gmres", "bicgstab"])
def test_single_precision(device, dtype, solver):
    """float32 / complex64 against SciPy in the same precision. The NumPy backend: SciPy's
    info and count exactly, x to 1e-5. A device (its own products, and even in SciPy's
    order, since a dense A @ p and complex arithmetic round as the device's): within the
    rounding bounds measured at float32's ulp. This complex64 bicgstab takes 17-20
    iterations under one-ulp perturbations (SciPy itself 18 on AVX2, 17 on an AVX-512
    machine, whose NumPy loops round complex64 otherwise; PoCL 19), so no one machine's
    count can be the reference."""
    _single_precision_check(device, dtype, solver, exact=_host(device))


def _bfloat16(v):
    """A 0-d product rounded to bfloat16's 8 significant bits (its real part)."""
    h = np.asarray(v.to_device("cpu") if v.device.kind != "cpu" else v)
    re = h.real.astype(np.float32)
    re = ((re.view(np.uint32) + np.uint32(0x8000)) & np.uint32(0xFFFF0000)).view(np.float32)
    out = re + 1j * h.imag if h.dtype.kind == "c" else re
    return xp.asarray(out.astype(h.dtype), device=v.device)


@pytest.mark.parametrize("dtype,broken", [("complex64", "unconjugated"),
                                          ("float32", "bfloat16"), ("complex64", "bfloat16")])
@pytest.mark.parametrize("solver", ["cg", "bicgstab"])
def test_single_precision_bounds_catch_a_broken_step(device, monkeypatch, dtype, broken,
                                                     solver):
    """The rounding bounds of test_single_precision (taken as on a device: not exact) can
    fail: a solver whose dot products drop the conjugate, or lose precision to bfloat16's
    8 bits (far more than float32 rounding explains), fails them."""
    real = tla._isolve._products

    def products(xp_, v, products="device"):
        vecdot, vecmat = real(xp_, v, products)
        if broken == "unconjugated":
            return (lambda x, y: vecdot(xp.conj(x), y)), vecmat
        return (lambda x, y: _bfloat16(vecdot(x, y))), vecmat

    monkeypatch.setattr(tla._isolve, "_products", products)
    # (the generic loop, whose products are broken here: a fused solve has its own)
    monkeypatch.setattr(tla._isolve, "_fused_cg_for", lambda _xp, _r: None)
    with pytest.raises(AssertionError):
        _single_precision_check(device, dtype, solver, exact=False)


def test_result_dtypes(device):
    a = dense_spd(10)
    b = _rhs(10)
    cases = [("float32", "float64", "float64"), ("float64", "complex64", "complex128"),
             ("float32", "complex64", "complex64"), ("float64", "int64", "float64")]
    for adt, bdt, want in cases:
        bb = (b * 10).astype(bdt) if bdt == "int64" else b.astype(bdt)
        x, _ = tla.cg(xp.asarray(a.astype(adt), device=device), xp.asarray(bb, device=device))
        xs, _ = sla.cg(a.astype(adt), bb)
        assert x.dtype == getattr(xp, want) == getattr(xp, xs.dtype.name)


def test_preconditioners_and_x0(device):
    a = convection_diffusion(5)
    n = a.shape[0]
    b = _rhs(n)
    d = 1.0 / a.diagonal()
    m_sp = sp.diags_array(d).tocsr()
    dt = xp.asarray(d, device=device)
    x0 = np.random.default_rng(9).standard_normal(n)
    for solver in ("gmres", "bicgstab", "cgs", "bicg"):
        xs, ins, ns = _run_scipy(solver, a, b, M=m_sp, x0=x0, maxiter=3)
        for M in (csr_array(m_sp, device=device),
                  tla.LinearOperator((n, n), matvec=lambda v: dt * v,
                                     rmatvec=lambda v: dt * v),
                  m_sp):
            xt, it, nt = _run(solver, csr_array(a, device=device), xp.asarray(b, device=device),
                              M=M, x0=xp.asarray(x0, device=device), maxiter=3)
            assert (it, nt) == (ins, ns)
            np.testing.assert_allclose(_np(xt), xs, rtol=1e-10, atol=1e-12)
    # cg with a Jacobi preconditioner given as a callable
    p = poisson2d(5)
    dp = xp.asarray(1.0 / p.diagonal(), device=device)
    xs, ins = sla.cg(p, _rhs(25), M=sp.diags_array(1.0 / p.diagonal()), maxiter=3)
    xt, it = tla.cg(csr_array(p, device=device), xp.asarray(_rhs(25), device=device),
                    M=lambda v: dp * v, maxiter=3)
    np.testing.assert_allclose(_np(xt), xs, rtol=1e-10, atol=1e-12)


def test_gmres_callbacks_and_restart(device):
    a = convection_diffusion(6)
    b = _rhs(a.shape[0])
    A = csr_array(a, device=device)
    bt = xp.asarray(b, device=device)
    for ctype in ("legacy", "pr_norm"):
        for kw in ({"restart": 5, "maxiter": 7}, {"restart": 4}):
            for products in _products_for(device):
                got, want = [], []
                xt, it = tla.gmres(A, bt, callback=got.append, callback_type=ctype,
                                   products=products, **kw)
                xs, ins = sla.gmres(a, b, callback=want.append, callback_type=ctype, **kw)
                if _host(device) or products == "blas":
                    assert it == ins and len(got) == len(want)
                else:  # a device's own products: the rounding bounds
                    counts = [len(want)]
                    for seed in range(PERTURBED):
                        seen = []
                        sla.gmres(*_perturbed(a, b, seed), callback=seen.append,
                                  callback_type=ctype, **kw)
                        counts.append(len(seen))
                    assert it == ins and min(counts) - 1 <= len(got) <= max(counts) + 1
                m = min(len(got), len(want))
                np.testing.assert_allclose(got[:m], want[:m], rtol=1e-8)
                np.testing.assert_allclose(_np(xt), xs, rtol=1e-8, atol=1e-10)
    with pytest.warns(DeprecationWarning, match=r"gmres: called with a callback but without"):
        tla.gmres(A, bt, callback=lambda r: None, maxiter=1)
    with pytest.raises(ValueError, match=r"gmres: callback_type must be"):
        tla.gmres(A, bt, callback_type="bad")


def test_zero_rhs_and_report(device):
    a = poisson2d(4)
    A = csr_array(a, device=device)
    x, info = tla.cg(A, xp.zeros(16, device=device))
    assert info == 0 and not bool(xp.any(x != 0))
    b = xp.asarray(_rhs(16), device=device)
    x, info, rep = tla.cg(A, b, report=True)
    assert info == 0 and rep.reason == "converged" and rep.info == 0
    assert rep.iterations == len(rep.residual_norms) - 1 and rep.residual_norms[-1] < 1e-5 * \
        np.linalg.norm(_rhs(16))
    x, info, rep = tla.gmres(A, b, maxiter=1, restart=2, report=True)
    assert info == 1 and rep.reason == "maxiter"
    x, info, rep = tla.bicgstab(A, b, maxiter=2, report=True)
    assert info == 2 and rep.reason == "maxiter" and rep.iterations == 2


def test_foreign_namespace_numpy_b():
    """With NumPy b (its own Array API namespace), the solvers run on NumPy."""
    a = convection_diffusion(5)
    b = _rhs(a.shape[0])
    for solver in ("gmres", "bicgstab", "bicg"):
        xs, ins, ns = _run_scipy(solver, a, b, maxiter=3)
        xt, it, nt = _run(solver, a, b, maxiter=3)
        assert isinstance(xt, np.ndarray) and (it, nt) == (ins, ns)
        np.testing.assert_allclose(xt, xs, rtol=1e-10, atol=1e-12)
        xt, it, nt = _run(solver, a.toarray(), b, maxiter=3)
        np.testing.assert_allclose(xt, xs, rtol=1e-10, atol=1e-12)


# ---- LinearOperator ----------------------------------------------------------------


def test_linear_operator(device):
    rng = np.random.default_rng(4)
    m = rng.standard_normal((5, 3)) + 1j * rng.standard_normal((5, 3))
    t = xp.asarray(m, device=device)
    op = tla.LinearOperator((5, 3), matvec=lambda v: t @ v, rmatvec=lambda v: xp.conj(t.mT) @ v)
    v = rng.standard_normal(3) + 0j
    u = rng.standard_normal(5) + 0j
    np.testing.assert_allclose(_np(op.matvec(xp.asarray(v, device=device))), m @ v)
    np.testing.assert_allclose(_np(op @ xp.asarray(v, device=device)), m @ v)
    np.testing.assert_allclose(_np(op.rmatvec(xp.asarray(u, device=device))), m.conj().T @ u)
    np.testing.assert_allclose(_np(op.H.matvec(xp.asarray(u, device=device))), m.conj().T @ u)
    V = rng.standard_normal((3, 2)) + 0j
    np.testing.assert_allclose(_np(op.matmat(xp.asarray(V, device=device))), m @ V)
    assert op.matvec(xp.asarray(v[:, None], device=device)).shape == (5, 1)
    assert op.dtype == xp.complex128  # taken from the first product
    for A in (t, csr_array(t)):
        lo = tla.aslinearoperator(A)
        np.testing.assert_allclose(_np(lo.matvec(xp.asarray(v, device=device))), m @ v)
        np.testing.assert_allclose(_np(lo.rmatvec(xp.asarray(u, device=device))),
                                   m.conj().T @ u)
    assert tla.aslinearoperator(op) is op
    assert tla.aslinearoperator(m).shape == (5, 3)
    with pytest.raises(ValueError, match=r"LinearOperator.matvec: x must have shape \(3,\)"):
        op.matvec(xp.ones(4, device=device))
    with pytest.raises(ValueError, match=r"LinearOperator: shape must be a pair"):
        tla.LinearOperator((3,), matvec=lambda v: v)
    with pytest.raises(TypeError, match=r"LinearOperator: matvec must be callable"):
        tla.LinearOperator((3, 3), matvec=5)
    with pytest.raises(NotImplementedError, match=r"rmatvec"):
        tla.LinearOperator((3, 3), matvec=lambda v: v).rmatvec(xp.ones(3, device=device))
    with pytest.raises(TypeError, match=r"aslinearoperator: A must be a 2-D array"):
        tla.aslinearoperator("A")


# ---- bad input (issue point 8) ------------------------------------------------------

ALL = ["cg", "gmres", "bicgstab", "cgs", "bicg", "minres"]


@pytest.mark.parametrize("solver", ALL)
def test_bad_shapes(device, solver):
    f = getattr(tla, solver)
    b = xp.ones(4, device=device)
    with pytest.raises(ValueError, match=rf"{solver}: A must be a square matrix\. "
                                         r"Received: A\.shape=\(4, 3\)"):
        f(xp.ones((4, 3), device=device), b)
    A = xp.asarray(dense_spd(4), device=device)
    with pytest.raises(ValueError, match=rf"{solver}: b must have shape \(4,\) or \(4, 1\)"):
        f(A, xp.ones(5, device=device))
    with pytest.raises(ValueError, match=rf"{solver}: the preconditioner M must have the shape"):
        f(A, b, M=xp.eye(3, device=device))
    with pytest.raises(ValueError, match=rf"{solver}: x0 must have shape \(4,\)"):
        f(A, b, x0=xp.ones(3, device=device))
    with pytest.raises(TypeError, match=rf"{solver}: A must be a 2-D array"):
        f("A", b)
    if solver != "minres":  # SciPy's minres has no atol
        with pytest.raises(ValueError, match=rf"{solver}: atol must be a real, non-negative"):
            f(A, b, atol=-1.0)


@pytest.mark.parametrize("solver", ALL)
def test_non_finite_input(device, solver):
    f = getattr(tla, solver)
    a = dense_spd(6)
    b = _rhs(6)
    bad_b = b.copy()
    bad_b[2] = np.nan
    with pytest.raises(ValueError, match=rf"{solver}: b must be finite"):
        f(xp.asarray(a, device=device), xp.asarray(bad_b, device=device))
    with pytest.raises(ValueError, match=rf"{solver}: x0 must be finite"):
        f(xp.asarray(a, device=device), xp.asarray(b, device=device),
          x0=xp.asarray(bad_b, device=device))
    # Note: the NumPy backend's vecdot does not yet silence NumPy's overflow/invalid
    # RuntimeWarnings (its result, inf/NaN, is what IEEE 754 defines); filtered here.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        _non_finite_a(f, solver, a, b, device)


def _non_finite_a(f, solver, a, b, device):
    with pytest.raises(ValueError, match=rf"{solver}: \|\|b\|\| overflows in float64"):
        f(xp.asarray(a, device=device), xp.asarray(b * 1e300, device=device))
    # NaN/inf inside A (dense or CSR): info -20 within a few iterations, never a hang.
    for bad in (np.inf, np.nan):
        bad_a = a.copy()
        bad_a[1, 1] = bad
        for A in (xp.asarray(bad_a, device=device), csr_array(bad_a, device=device)):
            _x, info, rep = f(A, xp.asarray(b, device=device), maxiter=50, report=True)
            assert info == -20 and rep.reason == "non-finite" and rep.iterations <= 3
    # NaN appearing inside a LinearOperator: info -20, bounded by maxiter.
    calls = [0]
    t = xp.asarray(a, device=device)

    def mv(v):
        calls[0] += 1
        return t @ v * xp.asarray(float("nan"), device=device)

    op = tla.LinearOperator((6, 6), matvec=mv, rmatvec=mv, dtype=xp.float64)
    _, info = f(op, xp.asarray(b, device=device), maxiter=50)
    assert info == -20 and calls[0] <= 3


def test_cg_indefinite(device):
    a = -dense_spd(8)  # negative definite: p^H A p < 0 at the first step
    b = xp.asarray(_rhs(8), device=device)
    x, info, rep = tla.cg(xp.asarray(a, device=device), b, report=True)
    assert info == -30 and rep.reason == "indefinite"
    assert not bool(xp.any(x != 0))  # the last iterate before the bad step: x0
    d = np.ones(8)
    d[3] = -1.0  # symmetric indefinite
    x, info = tla.cg(csr_array(sp.diags_array(d).tocsr(), device=device), b, maxiter=20)
    assert info in (0, -30)
    if info == 0:
        np.testing.assert_allclose(_np(x), _np(b) / d, rtol=1e-5)


@pytest.mark.parametrize("solver", ALL)
def test_loops_bounded_by_maxiter(device, solver):
    calls = [0]
    a = convection_diffusion(5) if solver != "cg" else poisson2d(5)
    t = csr_array(a, device=device)

    def mv(v):
        calls[0] += 1
        return t @ v

    rmv = None if solver == "minres" else (lambda v: t.H @ v)
    op = tla.LinearOperator(a.shape, matvec=mv, rmatvec=rmv, dtype=xp.float64)
    b = xp.asarray(_rhs(25), device=device)
    _, info = getattr(tla, solver)(op, b, rtol=1e-30, maxiter=4)
    assert info == 4, info
    limit = {"gmres": 4 * 21 + 1, "bicgstab": 8, "cgs": 8}.get(solver, 4)
    assert calls[0] <= limit


def test_warnings_free(device):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tla.gmres(xp.asarray(dense_spd(5), device=device), xp.ones(5, device=device),
                  callback=lambda r: None, callback_type="pr_norm")


# ---- minres ------------------------------------------------------------------------


def _indefinite(n=30):
    return dense_spd(n) - 1.0 * np.eye(n)  # symmetric, some eigenvalues negative


@pytest.mark.parametrize("problem", ["poisson", "spd", "indefinite"])
def test_minres_matches_scipy(device, problem):
    a = _indefinite() if problem == "indefinite" else PROBLEMS[problem]()
    assert problem != "indefinite" or np.linalg.eigvalsh(a).min() < 0
    b = _rhs(a.shape[0])
    x0 = np.random.default_rng(5).standard_normal(a.shape[0])
    for kw in ({"maxiter": 1}, {"maxiter": 3}, {"maxiter": 3, "x0": x0}, {"shift": 0.5,
                                                                          "maxiter": 3}):
        kt = dict(kw)
        if "x0" in kt:
            kt["x0"] = xp.asarray(x0, device=device)
        xs, ins, ns = _run_scipy("minres", sp.csr_array(a), b, **kw)
        xt, it, nt = _run("minres", _as_form("csr", a, device), xp.asarray(b, device=device),
                          **kt)
        assert (it, nt) == (ins, ns)
        np.testing.assert_allclose(_np(xt), xs, rtol=1e-10, atol=1e-10 * np.abs(xs).max())
    want = _run_scipy("minres", sp.csr_array(a), b, rtol=1e-10)
    for products in _products_for(device):
        got = _run("minres", _as_form("csr", a, device), xp.asarray(b, device=device),
                   rtol=1e-10, products=products)
        assert got[1] == want[1] == 0
        _assert_like_scipy("minres", sp.csr_array(a), b, got, want, 1e-6,
                           exact=_exact(device, products, b.dtype), rtol=1e-10)
        np.testing.assert_allclose(_np(got[0]), np.linalg.solve(_dense(a), b), rtol=1e-6,
                                   atol=1e-8)


def test_minres_bad_input(device):
    a = convection_diffusion(4).toarray()
    b = xp.asarray(_rhs(16), device=device)
    with pytest.raises(ValueError, match=r"minres: A is not symmetric"):
        tla.minres(xp.asarray(a, device=device), b, check=True)
    spd = dense_spd(16)
    with pytest.raises(ValueError, match=r"minres: the preconditioner M is indefinite"):
        tla.minres(xp.asarray(spd, device=device), b, M=xp.asarray(-np.eye(16), device=device))
    with pytest.raises(TypeError, match=r"minres: A and b must be real"):
        tla.minres(xp.asarray(complex_hermitian(16), device=device),
                   xp.asarray(_rhs(16, True), device=device))


# ---- beyond SciPy: batched right-hand sides for cg ----------------------------------


@pytest.mark.parametrize("form", ["csr", "dense"])
def test_cg_batched_columns_match_single(device, form):
    a = poisson2d(6)
    rng = np.random.default_rng(8)
    B = rng.standard_normal((36, 4))
    B[:, 2] *= 1e-3
    B[:, 3] = 0.0
    A = _as_form(form, a, device)
    for products in ("device", "blas"):
        for kw in ({"maxiter": 1}, {"maxiter": 3}, {"rtol": 1e-8}):
            X, infos, reps = tla.cg(A, xp.asarray(B, device=device), report=True,
                                    products=products, **kw)
            assert X.shape == (36, 4) and len(infos) == 4
            for j in range(4):
                want = _run_scipy("cg", sp.csr_array(a), B[:, j], **kw)
                got = (X[:, j], infos[j], reps[j].iterations)
                if want[1] == 0 and want[2] == 0:  # (the zero column: x = 0 at once)
                    assert got[1:] == want[1:] and not np.any(_np(X)[:, j])
                    continue
                # (columns sum their dot products in the device's order: the namespace's
                # vecdot over axis 0, or per column on the host's BLAS)
                _assert_like_scipy("cg", sp.csr_array(a), B[:, j], got, want, 1e-10,
                                   exact=_host(device), **kw)


def test_cg_batched_bad_input(device):
    A = xp.asarray(dense_spd(6), device=device)
    with pytest.raises(ValueError, match=r"cg: b must be finite"):
        B = np.ones((6, 2))
        B[0, 1] = np.nan
        tla.cg(A, xp.asarray(B, device=device))
    with pytest.raises(ValueError, match=r"cg: x0 must have the shape of b, \(6, 2\)"):
        tla.cg(A, xp.ones((6, 2), device=device), x0=xp.ones(6, device=device))
    with pytest.raises(ValueError, match=r"cg: b must have shape \(6,\)"):
        tla.cg(A, xp.ones((5, 2), device=device))
    _, infos = tla.cg(-A, xp.ones((6, 2), device=device))
    assert infos == (-30, -30)


def test_cg_batched_column_stops_on_its_own_curvature(device, monkeypatch):
    """A column whose step finds p^H A p <= 0 stops at -30 with its last good iterate while
    the others go on; one host read an iteration (norms and curvatures together)."""
    a = np.diag([2.0, 1.0, -1.0, 3.0])
    B = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    reads = []
    real = tla._isolve._host_floats

    def counted(ns, v):
        reads.append(v.shape)
        return real(ns, v)

    monkeypatch.setattr(tla._isolve, "_host_floats", counted)
    X, infos, reps = tla.cg(xp.asarray(a, device=device), xp.asarray(B, device=device),
                            rtol=1e-12, report=True)
    assert infos == (0, -30)
    assert [r.iterations for r in reps] == [2, 0]
    np.testing.assert_allclose(_np(X)[:, 0], [0.5, 1.0, 0.0, 0.0], rtol=1e-12)
    assert not np.any(_np(X)[:, 1])  # (x0 = 0: the step it refused was its first)
    for j, (info, its) in enumerate(((0, 2), (-30, 0))):
        x1, i1, r1 = tla.cg(xp.asarray(a, device=device), xp.asarray(B[:, j], device=device),
                            rtol=1e-12, report=True)
        assert (i1, r1.iterations) == (info, its)
        np.testing.assert_allclose(_np(x1), _np(X)[:, j], rtol=1e-12, atol=0)
    # ||b|| once, then one read each of the three iterations it took (the last one stops)
    assert reads == [(2,), (2,), (4,), (4,)]


def test_deterministic(device):
    a = convection_diffusion(6)
    A = csr_array(a, device=device)
    b = xp.asarray(_rhs(36), device=device)
    for solver in ("cg", "gmres", "bicgstab"):
        x1, _ = getattr(tla, solver)(A, b, maxiter=5)
        x2, _ = getattr(tla, solver)(A, b, maxiter=5)
        np.testing.assert_array_equal(_np(x1), _np(x2))


# ---- in-place updates (cg, gmres): caller's arrays untouched, same iterates ---------


@pytest.mark.parametrize("solver", ["cg", "gmres"])
def test_b_and_x0_unchanged(device, solver):
    """cg and gmres update x and r in place: never the caller's b or x0."""
    a = poisson2d(5)
    n = a.shape[0]
    b_np = _rhs(n)
    x0_np = np.random.default_rng(11).standard_normal(n)
    m_sp = sp.diags_array(1.0 / a.diagonal()).tocsr()
    for M in (None, csr_array(m_sp, device=device), lambda v: v):
        for x0 in (None, "x0", "Mb"):
            for cb in (None, lambda _: None):
                extra = {"callback_type": "x"} if solver == "gmres" and cb else {}
                for ns in ("tessera", "numpy"):
                    if ns == "tessera":
                        b = xp.asarray(b_np, device=device)
                        x0v = xp.asarray(x0_np, device=device) if x0 == "x0" else x0
                        mm = M
                    else:
                        b = b_np.copy()
                        x0v = x0_np.copy() if x0 == "x0" else x0
                        mm = m_sp if M is not None and not callable(M) else M
                    x, _ = getattr(tla, solver)(a, b, x0=x0v, M=mm, maxiter=3,
                                                callback=cb, **extra)
                    np.testing.assert_array_equal(_np(b), b_np)
                    if x0 == "x0":
                        np.testing.assert_array_equal(_np(x0v), x0_np)
                    assert x is not b and x is not x0v


def _fused(device, dtype=np.float64) -> bool:
    """True where cg without a callback runs the device's fused steps (real dtypes)."""
    try:
        _dispatch.lookup("cg_fused", device, getattr(xp, np.dtype(dtype).name))
    except KernelNotFoundError:
        return False
    return True


@pytest.mark.parametrize("problem", SYMMETRIC)
def test_cg_without_callback_matches_scipy(device, problem):
    """Without a callback cg applies each x step one iteration late (in place); the
    iterates are those of the callback path, bit for bit, and SciPy's (within the rounding
    bounds with a device's own products). On a device with fused CG steps (real
    problems, products="device") the two paths sum their dot products in two orders: to
    1e-10 after 1 and 3 iterations, 1e-6 over a whole solve (the dense SPD problem: 8e-7),
    the iteration counts within one."""
    a = PROBLEMS[problem]()
    b = _rhs(a.shape[0], complex_=problem == "hermitian")
    A = _as_form("csr", a, device)
    bt = xp.asarray(b, device=device)
    for products in _products_for(device):
        fused = products == "device" and _fused(device, b.dtype)
        for maxiter in (1, 3, None):
            want = _run_scipy("cg", sp.csr_array(a), b, maxiter=maxiter)
            xt, it, rt = tla.cg(A, bt, maxiter=maxiter, products=products, report=True)
            got = _run("cg", A, bt, maxiter=maxiter, products=products)
            xc, ic, nc = got
            assert it == ic
            if fused:
                tol = 1e-6 if maxiter is None else 1e-10
                assert abs(rt.iterations - nc) <= 1
                np.testing.assert_allclose(_np(xt), _np(xc), rtol=tol,
                                           atol=tol * np.abs(want[0]).max())
            else:
                assert rt.iterations == nc
                np.testing.assert_array_equal(_np(xt), _np(xc))
            _assert_like_scipy("cg", sp.csr_array(a), b, got, want, 1e-10,
                               exact=_exact(device, products, b.dtype), maxiter=maxiter)
    # NumPy's namespace (b a NumPy array): the same in-place updates on ndarrays.
    xs, ins = sla.cg(sp.csr_array(a), b, maxiter=3)
    xn, inn = tla.cg(sp.csr_array(a), b.copy(), maxiter=3)
    assert isinstance(xn, np.ndarray) and inn == ins
    np.testing.assert_allclose(xn, xs, rtol=1e-10, atol=1e-10 * np.abs(xs).max())


def test_cg_indefinite_last_good_iterate_both_paths(device):
    """info -30 returns the iterate before the step with p^H A p <= 0, with or without
    a callback (the in-place path defers each step until its curvature is read)."""
    n = 12
    d = np.linspace(1.0, 3.0, n)
    d[-1] = -0.05  # indefinite: the curvature turns negative after a few steps
    A = csr_array(sp.diags_array(d).tocsr(), device=device)
    b = xp.asarray(np.random.default_rng(5).standard_normal(n), device=device)
    seen = []
    xl, il, rl = tla.cg(A, b, maxiter=50, report=True)
    xc, ic, rc = tla.cg(A, b, maxiter=50, report=True, callback=seen.append)
    assert il == ic == -30 and rl.iterations == rc.iterations >= 1
    # (fused device steps: the dot products sum in another order than the host's BLAS)
    same = np.testing.assert_array_equal if not _fused(device) else \
        (lambda u, v: np.testing.assert_allclose(u, v, rtol=1e-12, atol=1e-14))
    same(_np(xl), _np(xc))
    # The returned x is the iterate after rl.iterations steps (the callback saw it).
    same(_np(xl), _np(seen[rl.iterations - 1]))
    # And at maxiter exactly at the bad step: the same iterate.
    xm, im = tla.cg(A, b, maxiter=rl.iterations + 1)
    assert im == -30
    np.testing.assert_array_equal(_np(xm), _np(xl))


@pytest.mark.parametrize("solver", ["cg", "gmres"])
def test_operator_returning_its_input(device, solver):
    """A user matvec (or M) may return its argument (here a row of GMRES's basis, or
    cg's p); the in-place updates must not write through it."""
    n = 16
    b_np = _rhs(n)
    b = xp.asarray(b_np, device=device)
    ident = tla.LinearOperator((n, n), matvec=lambda v: v, dtype=xp.float64)
    for M in (None, lambda v: v):
        x, info = getattr(tla, solver)(ident, b, M=M, maxiter=5)
        assert info == 0
        np.testing.assert_allclose(_np(x), b_np, rtol=1e-12)
        np.testing.assert_array_equal(_np(b), b_np)
    a = 2.0 * np.eye(n) + np.diag(np.full(n - 1, 0.5), 1) + np.diag(np.full(n - 1, 0.5), -1)
    at = xp.asarray(a, device=device)
    half = tla.LinearOperator((n, n), matvec=lambda v: v, dtype=xp.float64)  # M = I
    xs, ins = getattr(sla, solver)(a, b_np, M=np.eye(n), maxiter=3)
    xt, it = getattr(tla, solver)(at, b, M=half, maxiter=3)
    assert it == ins
    np.testing.assert_allclose(_np(xt), xs, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("solver", ["cg", "gmres"])
def test_callback_iterates_are_kept(device, solver):
    """x is updated in place, but each x a callback receives stays as it was given."""
    a = convection_diffusion(5) if solver == "gmres" else poisson2d(5)
    b = _rhs(a.shape[0])
    seen = []
    kw = {"callback_type": "x", "restart": 3} if solver == "gmres" else {}
    xt, _ = getattr(tla, solver)(csr_array(a, device=device), xp.asarray(b, device=device),
                                 callback=lambda x: seen.append((x, _np(x).copy())),
                                 maxiter=4, **kw)
    assert len(seen) == 4
    for x, snap in seen:
        np.testing.assert_array_equal(_np(x), snap)
    assert not np.array_equal(seen[0][1], seen[-1][1])
    np.testing.assert_array_equal(_np(xt), seen[-1][1])  # the last one is returned


# ---- the registered axpy kernel the solvers update their vectors with ------------


def _update_operands(device, dtype, n, seed):
    """``(x, y, alpha)`` of ``dtype`` for the in-place update kernels: random vectors of n
    elements with a NaN and an inf (x[3], y[5]) and a -0.0 (x[7]) when n > 10, and a
    scalar; skips a dtype the device lacks."""
    if dtype not in {d.name for d in device.backend.dtypes(device)}:
        pytest.skip(f"{device} has no {dtype}")
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n)
    y = rng.standard_normal(n)
    if dtype.startswith("complex"):
        x = x + 1j * rng.standard_normal(n)
        y = y + 1j * rng.standard_normal(n)
    x, y = x.astype(dtype), y.astype(dtype)
    if n > 10:
        x[3], y[5], x[7] = np.nan, np.inf, -0.0
    return x, y, np.asarray(rng.standard_normal() + 0.3, dtype=dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
@pytest.mark.parametrize("n", [1, 1000, (1 << 14) + 3, 1 << 17])
@pytest.mark.parametrize("subtract", [False, True])
def test_axpy_rounds_as_the_two_step_expression(device, dtype, n, subtract):
    """y += alpha*x through the solvers' kernel equals NumPy's y + alpha*x bit for bit
    (no fused multiply-add), above and below the BLAS threshold, incl. NaN/inf."""
    from tessera_array.sparse.linalg._isolve import _axpy_for

    x, y, alpha = _update_operands(device, dtype, n, seed=n)
    expect = y - alpha * x if subtract else y + alpha * x
    xa = xp.asarray(x, device=device)
    ya = xp.asarray(y, device=device)
    al = xp.asarray(alpha, device=device)
    _axpy_for(xp, ya)(al, xa, ya, subtract)
    got = np.asarray(ya.to_device("cpu"))
    np.testing.assert_array_equal(got, expect)


def test_axpy_is_registered_for_every_floating_dtype(device):
    for dt in (xp.float32, xp.float64, xp.complex64, xp.complex128):
        if dt in device.backend.dtypes(device):
            assert callable(_dispatch.lookup("axpy", device, dt))
            assert callable(_dispatch.lookup("aypx", device, dt))


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
@pytest.mark.parametrize("n", [1, 1000, (1 << 17) + 3])
@pytest.mark.parametrize("beta_on_device", [False, True])
def test_aypx_rounds_as_the_two_step_expression(device, dtype, n, beta_on_device):
    """p = z + beta*p through the solvers' kernel equals NumPy's ``p *= beta; p += z``
    bit for bit (no fused multiply-add), NaN/inf/-0.0 included; beta a host scalar or
    a 0-d device array (as cg passes rho / rho_prev)."""
    from tessera_array.sparse.linalg._isolve import _aypx_for

    z, p, beta = _update_operands(device, dtype, n, seed=n + 1)
    with np.errstate(all="ignore"):
        expect = p * beta
        expect += z
    pa = xp.asarray(p, device=device)
    bt = xp.asarray(beta, device=device) if beta_on_device else beta[()]
    with np.errstate(all="ignore"):
        _aypx_for(xp, pa)(bt, xp.asarray(z, device=device), pa)
    got = np.asarray(pa.to_device("cpu"))
    # Bit for bit, except the payload of a NaN (NVIDIA's OpenCL writes its canonical one).
    g, e = (got.view(got.real.dtype), expect.view(expect.real.dtype))
    same = (g.view(f"u{g.itemsize}") == e.view(f"u{e.itemsize}")) | (np.isnan(g) & np.isnan(e))
    assert same.all(), np.flatnonzero(~same)[:10]


# ---- fused CG steps (a device's registered cg_fused op) -----------------------------------


def _need_fused(device, dtype=np.float64):
    if not _fused(device, dtype):
        pytest.skip(f"{device} registers no fused CG steps for {np.dtype(dtype).name} "
                    "(the generic path serves it)")


def _generic_cg(*args, **kw):
    """cg on its generic loop (the reference), through the solver core's seam."""
    return tla._isolve._cg(*args, fused=False, **kw)


@pytest.mark.parametrize("dtype,form,problem", [
    (dt, form, problem) for dt in (np.float64, np.float32)
    for form, problem in (("csr", "poisson"), ("dense", "spd"), ("linop", "poisson"))
] + [(dt, form, "hermitian") for dt in (np.complex128, np.complex64)
     for form in ("csr", "dense")])
def test_cg_fused_matches_generic(device, monkeypatch, dtype, form, problem):
    """The fused steps against the generic path (the reference): iterates after 1, 3 and
    10 iterations to 1e-10 (float64, complex128) / 1e-5 (float32, complex64) of max |x|,
    the same info and iteration counts, and the converged solution to 1e-6 (double)."""
    _need_fused(device, dtype)
    a = PROBLEMS[problem]().astype(dtype)
    b = _rhs(a.shape[0], complex_=problem == "hermitian").astype(dtype)
    A = _as_form(form, a, device)
    bt = xp.asarray(b, device=device)
    double = dtype in (np.float64, np.complex128)
    tol = 1e-10 if double else 1e-5
    for maxiter in (1, 3, 10):
        xf, infof, rf = tla.cg(A, bt, maxiter=maxiter, report=True)
        xg, infog, rg = _generic_cg(A, bt, maxiter=maxiter, report=True)
        assert infof == infog == maxiter and rf.iterations == rg.iterations == maxiter
        assert xf.dtype == xg.dtype and xf.device == xg.device
        np.testing.assert_allclose(_np(xf), _np(xg), rtol=0, atol=tol * np.abs(_np(xg)).max())
        np.testing.assert_allclose(rf.residual_norms, rg.residual_norms, rtol=tol * 10)
    xf, infof, rf = tla.cg(A, bt, report=True)
    xg, infog, rg = _generic_cg(A, bt, report=True)
    assert infof == infog == 0 and abs(rf.iterations - rg.iterations) <= 1
    if double:
        np.testing.assert_allclose(_np(xf), _np(xg), rtol=1e-6, atol=1e-6 * np.abs(_np(xg)).max())
    r = b - _dense(a) @ _np(xf).astype(np.complex128 if problem == "hermitian" else np.float64)
    assert np.linalg.norm(r) <= 1e-5 * np.linalg.norm(b) * (1.01 if double else 10)


def test_cg_fused_is_the_path_taken(device, monkeypatch):
    """Without a callback, a real cg on such a device runs no generic update (with M or
    without): the generic helpers may not even be built."""
    _need_fused(device)

    def refuse(*_a, **_k):
        raise AssertionError("the generic CG path ran")

    monkeypatch.setattr(tla._isolve, "_axpy_for", refuse)
    monkeypatch.setattr(tla._isolve, "_aypx_for", refuse)
    a = poisson2d(6)
    b = _rhs(36)
    x, info = tla.cg(csr_array(a, device=device), xp.asarray(b, device=device))
    assert info == 0
    assert np.linalg.norm(b - a @ _np(x)) <= 1e-5 * np.linalg.norm(b)
    jacobi = csr_array(sp.diags_array(1.0 / a.diagonal()).tocsr(), device=device)
    x, info = tla.cg(csr_array(a, device=device), xp.asarray(b, device=device), M=jacobi)
    assert info == 0
    assert np.linalg.norm(b - a @ _np(x)) <= 1e-5 * np.linalg.norm(b)
    # A callback keeps the fused path (called after each run); complex keeps the
    # generic one, which now refuses.
    seen = []
    x, info = tla.cg(csr_array(a, device=device), xp.asarray(b, device=device),
                     callback=seen.append)
    assert info == 0 and len(seen) > 5
    if not _fused(device, np.complex128):
        with pytest.raises(AssertionError, match="generic CG path"):
            tla.cg(csr_array(a, device=device), xp.asarray(b + 0j, device=device))


def test_cg_fused_callback(device):
    """With a callback the fused path runs check_every iterations between calls (default
    1: every iteration, as SciPy): the iterates it is given are the generic path's (to
    rounding), each a copy kept as given; check_every=3 shows every third (and the
    last); check_every must be an int >= 1."""
    _need_fused(device)
    a = poisson2d(12)
    A = csr_array(a, device=device)
    b = xp.asarray(_rhs(144), device=device)
    gen = []
    xg, ig = _generic_cg(A, b, callback=lambda v: gen.append(_np(v).copy()))
    fus = []
    xf, inf = tla.cg(A, b, callback=lambda v: fus.append((v, _np(v).copy())))
    assert ig == inf == 0 and len(fus) == len(gen) > 10
    scale = np.abs(gen[-1]).max()
    for (v, snap), want in zip(fus, gen):
        np.testing.assert_array_equal(_np(v), snap)  # kept as given
        np.testing.assert_allclose(snap, want, rtol=0, atol=1e-10 * scale)
    np.testing.assert_array_equal(_np(xf), fus[-1][1])
    every = []
    _, i3 = tla.cg(A, b, callback=lambda v: every.append(_np(v).copy()), check_every=3)
    assert i3 == 0 and len(every) == -(-len(gen) // 3)
    for j, snap in enumerate(every[:-1]):
        np.testing.assert_allclose(snap, gen[3 * j + 2], rtol=0, atol=1e-10 * scale)
    np.testing.assert_allclose(every[-1], gen[-1], rtol=0, atol=1e-10 * scale)
    for bad in (0, 1.5, True, "2"):
        with pytest.raises(ValueError, match=r"cg: check_every must be an int >= 1\. "
                                             r"Received: check_every="):
            tla.cg(A, b, callback=print, check_every=bad)


@pytest.mark.parametrize("n", [1, 2, 5, 63, 257, 1000])
def test_cg_fused_any_length(device, monkeypatch, n):
    """Lengths below, at and between the kernels' chunk and work-group sizes (every element
    of x, r and p is written, every partial sum read): a diagonally dominant system."""
    _need_fused(device)
    rng = np.random.default_rng(n)
    d = sp.diags_array([rng.uniform(3, 4, n), -np.ones(max(n - 1, 0)), -np.ones(max(n - 1, 0))],
                       offsets=[0, 1, -1]).tocsr() if n > 1 else sp.csr_array([[3.5]])
    b = rng.standard_normal(n)
    A, bt = csr_array(d, device=device), xp.asarray(b, device=device)
    for maxiter in (1, 2, None):
        xf, infof = tla.cg(A, bt, maxiter=maxiter)
        xg, infog = _generic_cg(A, bt, maxiter=maxiter)
        assert infof == infog
        np.testing.assert_allclose(_np(xf), _np(xg), rtol=1e-10, atol=1e-12)
        assert np.isfinite(_np(xf)).all()


def test_cg_fused_nonfinite_matrix(device, monkeypatch):
    """NaN in A reaches the residual: info -20 on both paths, x finite up to that step."""
    _need_fused(device)
    a = poisson2d(5).toarray()
    a[3, 3] = np.nan
    b = _rhs(25)
    A, bt = xp.asarray(a, device=device), xp.asarray(b, device=device)
    _, infof, rf = tla.cg(A, bt, report=True)
    _, infog, rg = _generic_cg(A, bt, report=True)
    assert infof == infog == -20 and rf.reason == "non-finite"
    assert rf.iterations == rg.iterations


def _times(device, c, dtype=xp.float64):
    """A FusedOperand applying ``c I`` (a callable: kind None)."""
    from tessera_array.sparse.linalg._fused import FusedOperand

    def apply(v):
        return (xp.Array._new(v, dtype, device) * c)._data

    return FusedOperand(apply, None, (), None)


def test_cg_fused_steps_bad_input(device):
    """The registered launcher refuses buffers its kernels cannot take, naming them; a
    run takes k >= 1 and is not called again once the solve has finished."""
    _need_fused(device)
    launcher = _dispatch.lookup("cg_fused", device, xp.float64)
    A = _times(device, 2.0)
    v = [xp.asarray(np.ones(8), device=device) for _ in range(3)]
    data = [t._data for t in v]
    with pytest.raises(TypeError,
                       match=r"p must be a (pyopencl\.array\.Array|cupy\.ndarray|numpy\.ndarray)"):
        launcher(data[0], data[1], [1.0] * 8, A, None, 0.0, 5)
    short = xp.asarray(np.ones(7), device=device)._data
    with pytest.raises(ValueError, match="one shape"):
        launcher(data[0], data[1], short, A, None, 0.0, 5)
    f32 = xp.asarray(np.ones(8, np.float32), device=device)._data
    with pytest.raises(TypeError, match="floating dtype"):
        launcher(data[0], data[1], f32, A, None, 0.0, 5)
    two = xp.asarray(np.ones((2, 8)), device=device)._data
    with pytest.raises(ValueError, match="r must be 1-D"):
        launcher(data[0], two, data[2], A, None, 0.0, 5)
    with pytest.raises(TypeError, match="A must be a FusedOperand"):
        launcher(*data, lambda q: q, None, 0.0, 5)
    with pytest.raises(ValueError, match="maxiter must be an int >= 0"):
        launcher(*data, A, None, 0.0, -1)
    with pytest.raises(ValueError, match="atol must be >= 0"):
        launcher(*data, A, None, float("nan"), 5)
    solve = launcher(*data, A, None, 0.0, 5)
    with pytest.raises(ValueError, match=r"run takes k >= 1"):
        solve.run(0)
    bad = launcher(*data, _times(device, 2.0).__class__(lambda q: short, None, (), None),
                   None, 0.0, 5)
    with pytest.raises(ValueError, match="q = A p"):
        bad.run(1)
    done = launcher(*data, A, None, 0.0, 1)
    assert done.run(5).status.name == "MAXITER"
    with pytest.raises(ValueError, match="the solve has finished"):
        done.run(1)


def test_cg_fused_direction_writes_every_element(device):
    """p poisoned with NaN: the first direction is r exactly, the step x = r / 2 (A = 2I),
    r -> 0; the report: r . r summed on the device, the next test converged."""
    _need_fused(device)
    from tessera_array.sparse.linalg._fused import CGStatus

    rng = np.random.default_rng(7)
    n = 1001
    r_h = rng.standard_normal(n)
    # (copies: on the NumPy backend asarray shares r_h, which the solve updates)
    x, r = xp.asarray(np.zeros(n), device=device), xp.asarray(r_h.copy(), device=device)
    p = xp.asarray(np.full(n, np.nan), device=device)
    solve = _dispatch.lookup("cg_fused", device, xp.float64)(
        x._data, r._data, p._data, _times(device, 2.0), None, 1e-8, 10)
    out = solve.run(1)
    assert out.status is CGStatus.RUNNING and out.iterations == 1
    assert out.residual_norms == pytest.approx((float(np.sqrt(r_h @ r_h)),), rel=1e-13)
    np.testing.assert_array_equal(_np(p), r_h)
    np.testing.assert_allclose(_np(x), 0.5 * r_h, rtol=1e-15)  # alpha = 1/2: x = r/2
    np.testing.assert_allclose(_np(r), 0 * r_h, atol=1e-15)
    out = solve.run(3)
    assert out.status is CGStatus.CONVERGED and out.iterations == 1
    assert len(out.residual_norms) == 1 and out.residual_norms[0] < 1e-14
    np.testing.assert_allclose(_np(x), 0.5 * r_h, rtol=1e-15)  # frozen after the stop


def test_cg_fused_report_contract(device):
    """run(k) reports each test's norm once, the steps of the whole solve, the status:
    maxiter=0 (the final check alone), MAXITER after the budget, -30 on a negative
    curvature (x the iterate before that step, one step fewer)."""
    _need_fused(device)
    from tessera_array.sparse.linalg._fused import CGStatus

    launcher = _dispatch.lookup("cg_fused", device, xp.float64)
    n = 64
    r_h = np.random.default_rng(3).standard_normal(n)

    def fresh():
        return [xp.asarray(v, device=device) for v in (np.zeros(n), r_h.copy(), np.zeros(n))]

    x, r, p = fresh()
    out = launcher(x._data, r._data, p._data, _times(device, 1.0), None, 0.0, 0).run(4)
    assert out == (CGStatus.MAXITER, 0, ())
    a = poisson2d(8)
    A = csr_array(a, device=device)
    op = tla._isolve._operand(xp, tla._isolve._as_operator(A, variant="scalar"),
                              lambda v: A @ v, r, "A")
    x, r, p = fresh()
    solve = launcher(x._data, r._data, p._data, op, None, 0.0, 7)
    reports = [solve.run(3), solve.run(3), solve.run(3)]
    assert [(o.status, o.iterations, len(o.residual_norms)) for o in reports] == [
        (CGStatus.RUNNING, 3, 3), (CGStatus.RUNNING, 6, 3), (CGStatus.MAXITER, 7, 1)]
    xg, ig, rg = _generic_cg(A, xp.asarray(r_h, device=device), rtol=0.0, maxiter=7,
                             report=True)
    assert ig == 7
    np.testing.assert_allclose(sum((o.residual_norms for o in reports), ()),
                               rg.residual_norms, rtol=1e-12)
    np.testing.assert_allclose(_np(x), _np(xg), rtol=1e-12, atol=1e-12)
    x, r, p = fresh()  # A = -I: p^T A p < 0 at the first step
    out = launcher(x._data, r._data, p._data, _times(device, -1.0), None, 1e-8, 9).run(5)
    assert out.status is CGStatus.INDEFINITE and out.iterations == 0
    assert len(out.residual_norms) == 2 and not np.any(_np(x))


def test_cg_fused_any_k_same_bits(device):
    """The device does the same steps whatever k is: k = 1, 2, 7, 64 and the default
    schedule give the same x, info and report, bit for bit (with and without M)."""
    _need_fused(device)
    a = poisson2d(10)
    A = csr_array(a, device=device)
    b = xp.asarray(_rhs(100), device=device)
    jacobi = csr_array(sp.diags_array(1.0 / a.diagonal()).tocsr(), device=device)
    for M in (None, jacobi):
        for kw in ({"maxiter": 9}, {}):
            ref = tla.cg(A, b, M=M, report=True, **kw)
            for k in (1, 2, 7, 64):
                got = tla._isolve._cg(A, b, M=M, report=True, steps_per_read=k, **kw)
                assert got[1:] == ref[1:], (k, got[2], ref[2])
                np.testing.assert_array_equal(_np(got[0]), _np(ref[0]))


class _Spy:
    """Wraps a cg_fused launcher: counts its runs (host reads) and A's products."""

    def __init__(self, launcher):
        self.launcher, self.runs, self.products, self.ks = launcher, 0, 0, []

    def __call__(self, x, r, p, A, M, atol, maxiter):
        def apply(v):
            self.products += 1
            return A.apply(v)

        solve = self.launcher(x, r, p, A._replace(apply=apply), M, atol, maxiter)
        spy = self

        class Run:
            def run(self, k):
                spy.runs += 1
                spy.ks.append(k)
                return solve.run(k)

        return Run()


def test_cg_fused_reads_and_waste(device, monkeypatch):
    """The default schedule reads far less than once per iteration and applies A only a
    few times past the stopping iteration (a stored matrix), or once (a callable)."""
    _need_fused(device)
    spy = _Spy(tla._isolve._fused_cg_for(xp, xp.ones(3, device=device)))
    monkeypatch.setattr(tla._isolve, "_fused_cg_for", lambda _xp, _r: spy)
    a = poisson2d(24)  # 576 unknowns: ~60 iterations to rtol=1e-8
    b = xp.asarray(_rhs(576), device=device)
    _, info, rep = tla.cg(csr_array(a, device=device), b, rtol=1e-8, report=True)
    its = rep.iterations
    assert info == 0 and its > 40
    assert spy.runs <= its / 4, (spy.runs, its, spy.ks)
    assert spy.products - its <= 4, (spy.products, its, spy.ks)
    spy.runs = spy.products = 0
    t = csr_array(a, device=device)
    op = tla.LinearOperator(a.shape, matvec=lambda v: t @ v, dtype=xp.float64)
    _, info, rep = tla.cg(op, b, rtol=1e-8, report=True)
    # (a device applies A in the run whose test stops it; the host stops before it)
    assert info == 0 and spy.runs == rep.iterations + 1
    assert rep.iterations <= spy.products <= rep.iterations + 1


def test_steps_per_read_schedule():
    """k: _K_FIRST before a decay is known; half the predicted iterations left; kmax when
    nothing converges (atol 0) or no decay shows; at least 1."""
    f = tla._isolve._steps_per_read
    assert f([], 1e-8) == f([1.0], 1e-8) == tla._isolve._K_FIRST
    halves = [2.0 ** -i for i in range(11)]  # rate 1/2, now 2^-10
    assert f(halves, 2.0 ** -30) == 10  # 20 left
    assert f(halves, 2.0 ** -12) == 1  # 2 left
    assert f(halves, 2.0 ** -200) == tla._isolve._K_MAX
    assert f(halves, 2.0 ** -200, kmax=8) == 8
    assert f(halves, 0.0) == tla._isolve._K_MAX
    assert f([1.0, 1.0, 1.5], 1e-8) == tla._isolve._K_MAX
    assert f([1.0, float("nan")], 1e-8) == tla._isolve._K_MAX


class _HostPersistentCG:
    """A cg_fused launcher as a persistent kernel would do it, on NumPy buffers: ``A p``
    from the stored matrix (a callable ``A`` or any ``M`` is declined: None), k
    iterations per run, each with the contract's tests, in SciPy's operation order."""

    def __init__(self, x, r, p, A, M, atol, maxiter):
        from tessera_array.sparse.linalg._fused import stop_threshold

        self.x, self.r, self.p, self.maxiter = x, r, p, maxiter
        if A.kind == "dense":
            self.mv = A.arrays[0].__matmul__
        else:
            data, indices, indptr = A.arrays
            self.mv = sp.csr_array((data, indices, indptr), shape=(r.size, r.size)).__matmul__
        self.thr = stop_threshold(atol, r.dtype)
        self.done, self.ok, self.pq, self.rho = 0, True, 0.0, None

    @classmethod
    def launcher(cls, x, r, p, A, M, atol, maxiter):
        return None if A.kind is None or M is not None else cls(x, r, p, A, M, atol, maxiter)

    def run(self, k):
        from tessera_array.sparse.linalg._fused import CGReport
        from tessera_array.sparse.linalg._fused import CGStatus as S

        x, r, p, norms = self.x, self.r, self.p, []
        for _ in range(min(k, self.maxiter - self.done)):
            rr = np.dot(r, r)
            norms.append(float(np.sqrt(float(rr))))
            if not self.ok:
                bad = np.isfinite(rr) and self.pq <= 0
                return CGReport(S.INDEFINITE if bad else S.NONFINITE, self.done - 1, tuple(norms))
            if rr < self.thr:
                return CGReport(S.CONVERGED, self.done, tuple(norms))
            if not np.isfinite(rr):
                return CGReport(S.NONFINITE, self.done, tuple(norms))
            if self.done == 0:
                p[:] = r
            else:
                p *= rr / self.rho
                p += r
            q = self.mv(p)
            self.pq = np.dot(p, q)
            alpha = rr / self.pq
            self.ok = bool(self.pq > 0)
            if self.ok:
                x += alpha * p
            r -= alpha * q
            self.rho = rr
            self.done += 1
        if self.done < self.maxiter:
            return CGReport(S.RUNNING, self.done, tuple(norms))
        if self.ok:
            return CGReport(S.MAXITER, self.maxiter, tuple(norms))
        return CGReport(S.INDEFINITE if self.pq <= 0 else S.NONFINITE, self.maxiter - 1,
                        tuple(norms))


@pytest.mark.parametrize("form", ["csr", "dense", "linop"])
def test_cg_fused_contract_fits_a_persistent_kernel(monkeypatch, form):
    """The contract, consumed by cg, with a launcher that runs whole blocks of iterations
    from the stored matrix (as a persistent cooperative kernel would), on the NumPy
    backend: SciPy's info, iteration count and iterates; declined (a LinearOperator) cg
    runs its generic loop."""
    monkeypatch.setattr(tla._isolve, "_fused_cg_for",
                        lambda _xp, _r: _HostPersistentCG.launcher)
    for problem in ("poisson", "spd"):
        a = PROBLEMS[problem]()
        b = _rhs(a.shape[0])
        A = _as_form(form, a, xp.__array_namespace_info__().devices()[0])
        for kw in ({"maxiter": 3}, {"maxiter": 0}, {}):
            xs, ins = sla.cg(sp.csr_array(a) if form == "csr" else _dense(a), b, **kw)
            for k in (None, 1, 5):
                xt, it, rep = tla._isolve._cg(A, xp.asarray(b), report=True,
                                              steps_per_read=k, **kw)
                assert it == ins
                np.testing.assert_allclose(_np(xt), xs, rtol=1e-12, atol=1e-12)
                rg = _generic_cg(A, xp.asarray(b), report=True, **kw)[2]
                assert rep == rg
    _, info, rep = tla._isolve._cg(xp.asarray(-dense_spd(8)), xp.asarray(_rhs(8)),
                                   report=True)
    assert info == -30 and rep.iterations == 0


def test_cg_fused_user_operator_results(device, monkeypatch):
    """A LinearOperator on the fused path: x0 is read, not written, and the iterates are
    the generic path's; an operator returning a host array or the wrong shape is refused
    with a message naming A's matvec."""
    _need_fused(device)
    a = poisson2d(5)
    t = xp.asarray(a.toarray(), device=device)
    b = xp.asarray(_rhs(25), device=device)
    x0 = xp.asarray(np.full(25, 0.5), device=device)
    op = tla.LinearOperator((25, 25), matvec=lambda v: t @ v, dtype=xp.float64)
    xf, infof = tla.cg(op, b, x0=x0, maxiter=4)
    xg, infog = _generic_cg(op, b, x0=x0, maxiter=4)
    assert infof == infog == 4
    np.testing.assert_allclose(_np(xf), _np(xg), rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(_np(x0), np.full(25, 0.5))  # x0 untouched
    calls = []

    def host_after_first(v):  # the first product (r = b - A x0) is fine, then a host array
        calls.append(1)
        return t @ v if len(calls) == 1 else np.ones(25)

    with pytest.raises(TypeError, match="matvec must return an array"):
        tla.cg(tla.LinearOperator((25, 25), matvec=host_after_first, dtype=xp.float64), b,
               x0=x0, maxiter=2)
    short = tla.LinearOperator((25, 25), matvec=lambda v: (t @ v)[:24], dtype=xp.float64)
    with pytest.raises(ValueError, match="shape"):
        tla.cg(short, b, maxiter=2)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("mform", ["csr", "dense", "callable"])
def test_cg_fused_preconditioned_matches_generic(device, monkeypatch, dtype, mform):
    """With M (Jacobi here; rho = r . z for z = M r, one more dot launch) the fused steps
    against the generic path: iterates after 1, 3 and 10 iterations, info and counts."""
    _need_fused(device, dtype)
    a = PROBLEMS["spd"]().astype(dtype)
    n = a.shape[0]
    d = (1.0 / np.diag(_dense(a))).astype(dtype)
    if mform == "csr":
        M = csr_array(sp.diags_array(d).tocsr(), device=device)
    elif mform == "dense":
        M = xp.asarray(np.diag(d), device=device)
    else:
        dt = xp.asarray(d, device=device)
        M = lambda v: dt * v
    A = _as_form("csr", a, device)
    bt = xp.asarray(_rhs(n).astype(dtype), device=device)
    tol = 1e-10 if dtype == np.float64 else 1e-5
    for maxiter in (1, 3, 10):
        xf, infof, rf = tla.cg(A, bt, M=M, maxiter=maxiter, report=True)
        xg, infog, rg = _generic_cg(A, bt, M=M, maxiter=maxiter, report=True)
        assert infof == infog == maxiter
        np.testing.assert_allclose(_np(xf), _np(xg), rtol=0, atol=tol * np.abs(_np(xg)).max())
        np.testing.assert_allclose(rf.residual_norms, rg.residual_norms, rtol=tol * 10)
    xf, infof, rf = tla.cg(A, bt, M=M, report=True)
    xg, infog, rg = _generic_cg(A, bt, M=M, report=True)
    assert infof == infog == 0 and abs(rf.iterations - rg.iterations) <= 1
    if dtype == np.float64:
        xs, ins = sla.cg(sp.csr_array(a), _rhs(n), M=sp.diags_array(d))
        assert ins == 0
        np.testing.assert_allclose(_np(xf), xs, rtol=1e-6, atol=1e-6 * np.abs(xs).max())


# (bicg is left out: its A^H x builds the CSR transpose with repeat(array repeats), which
# has no OpenCL kernel yet.)
@pytest.mark.parametrize("solver", ["cg", "gmres", "bicgstab", "cgs", "minres"])
def test_device_products_need_no_host_fallback(device, solver):
    """By default the products run on the device's own kernels: with host fallbacks refused
    (TESSERA_HOST_FALLBACK=error) the solvers converge as SciPy's, within the rounding
    bounds. products="blas" asks for the host's BLAS, a listed host fallback on a device:
    refused, it raises HostFallbackError rather than run another order quietly."""
    if _host(device):
        pytest.skip(f"{device} has no host fallbacks to refuse")
    import importlib

    from tessera_array.backends._common.fallback import initial_mode

    from tessera_array import HostFallbackError

    set_host_fallback = importlib.import_module(
        f"tessera_array.backends.{device.backend_name}").set_host_fallback

    a = poisson2d(6) if solver in ("cg", "minres") else convection_diffusion(6)
    b = _rhs(a.shape[0])
    want = _run_scipy(solver, sp.csr_array(a), b, rtol=1e-8)
    set_host_fallback("error")
    try:
        got = _run(solver, _as_form("csr", a, device), xp.asarray(b, device=device),
                   rtol=1e-8)
        x, info = getattr(tla, solver)(_as_form("csr", a, device),
                                       xp.asarray(b, device=device), rtol=1e-8)
        with pytest.raises(HostFallbackError, match=r"vecdot\[blas\]"):
            getattr(tla, solver)(_as_form("csr", a, device), xp.asarray(b, device=device),
                                 products="blas")
    finally:
        set_host_fallback(initial_mode())
    assert got[1] == want[1] == info == 0
    _assert_like_scipy(solver, sp.csr_array(a), b, got, want, 1e-6, exact=False, rtol=1e-8)
    np.testing.assert_allclose(_np(x), want[0], rtol=1e-6, atol=1e-6 * np.abs(want[0]).max())


@pytest.mark.parametrize("solver", ALL)
def test_products_keyword(device, solver):
    """products is "device" or "blas"; anything else is refused, naming the solver."""
    A = xp.asarray(dense_spd(6), device=device)
    b = xp.asarray(_rhs(6), device=device)
    with pytest.raises(ValueError, match=rf"{solver}: products must be 'device' or 'blas'\. "
                                         r"Received: products='host'"):
        getattr(tla, solver)(A, b, products="host")
    with pytest.raises(ValueError, match=r"cg: products must be"):
        tla.cg(A, xp.ones((6, 2), device=device), products=None)


@pytest.mark.parametrize("solver", ["cg", "gmres", "bicgstab", "cgs", "bicg", "minres"])
def test_blas_products_give_scipys_iterates(device, solver):
    """products="blas" on a CSR system (whose rows every device sums in order, as SciPy):
    real iterates equal SciPy's bit for bit, on any device; cg then runs no fused steps."""
    a = convection_diffusion(5) if solver in ("gmres", "bicgstab", "cgs", "bicg") \
        else poisson2d(5)
    b = _rhs(a.shape[0])
    A = csr_array(a, device=device)
    for maxiter in (1, 3):
        xs, ins = getattr(sla, solver)(sp.csr_array(a), b, maxiter=maxiter)
        xt, it = getattr(tla, solver)(A, xp.asarray(b, device=device), maxiter=maxiter,
                                      products="blas")
        assert it == ins
        if solver == "gmres" and not _host(device):
            # (gmres routes CSR to the warp-per-row spmv: its rows sum as a tree)
            np.testing.assert_allclose(_np(xt), xs, rtol=1e-12, atol=1e-12)
        else:
            np.testing.assert_array_equal(_np(xt), xs)


def test_cg_fused_run_that_never_finishes_is_refused(monkeypatch):
    """A launcher whose runs never leave RUNNING cannot hang cg: bounded by maxiter."""
    from tessera_array.sparse.linalg._fused import CGReport, CGStatus

    class Stuck:
        def run(self, k):
            return CGReport(CGStatus.RUNNING, 0, (1.0,))

    monkeypatch.setattr(tla._isolve, "_fused_cg_for", lambda _xp, _r: lambda *a: Stuck())
    with pytest.raises(RuntimeError, match=r"still reports RUNNING after 6 runs"):
        tla.cg(xp.asarray(dense_spd(6)), xp.asarray(_rhs(6)), maxiter=5)


# ---- cg(A, b) alone: the short set-up path (_isolve._cg_plain) ---------------------------


def _plain_systems(device, dtype):
    cplx = dtype.startswith("complex")
    a = complex_hermitian(40) if cplx else dense_spd(40)
    p = poisson2d(7).astype(np.complex128 if cplx else np.float64)
    b = _rhs(40, cplx)
    return [(xp.asarray(a.astype(dtype), device=device), xp.asarray(b.astype(dtype), device=device)),
            (csr_array(sp.csr_array(p.astype(dtype)), device=device),
             xp.asarray(_rhs(49, cplx).astype(dtype), device=device))]


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_cg_plain_path_equals_the_general_one(device, dtype, monkeypatch):
    """cg(A, b) with nothing else takes the short set-up, and gives the general path's x,
    info and report bit for bit, converged and stopped at maxiter (dense and CSR)."""
    if not _fused(device, dtype):
        pytest.skip(f"{device} registers no cg_fused for {dtype}: cg(A, b) has no short path")
    general = tla._isolve._make_system
    for A, b in _plain_systems(device, dtype):
        for kw in ({}, {"maxiter": 3}, {"rtol": 1e-3, "atol": 1e-9}):
            calls = []
            monkeypatch.setattr(tla._isolve, "_make_system",
                                lambda *a, **k: calls.append(1) or general(*a, **k))
            x1, info1, rep1 = tla.cg(A, b, report=True, **kw)
            assert not calls, "cg(A, b) went through _make_system"
            monkeypatch.setattr(tla._isolve, "_cg_plain", lambda *a: None)
            x2, info2, rep2 = tla.cg(A, b, report=True, **kw)
            monkeypatch.undo()
            assert calls, "the general path was not taken"
            assert info1 == info2 and rep1 == rep2, (kw, info1, info2, rep1, rep2)
            h1, h2 = np.asarray(x1.to_device("cpu")), np.asarray(x2.to_device("cpu"))
            assert h1.dtype == h2.dtype == np.dtype(dtype)
            assert h1.tobytes() == h2.tobytes(), kw


def test_cg_plain_path_errors_and_edges_are_the_general_ones(device):
    """What the short path does not answer itself goes to the general path: the same
    errors for a non-finite b and a bad maxiter/rtol, the zero b's answer, and every
    call it does not cover (x0, M, another dtype of A)."""
    a = xp.asarray(dense_spd(8), device=device)
    b = _rhs(8)
    bad = b.copy()
    bad[2] = np.nan
    with pytest.raises(ValueError, match=r"cg: b must be finite \(no NaN or inf\)"):
        tla.cg(a, xp.asarray(bad, device=device))
    for kw, msg in (({"maxiter": -1}, r"cg: maxiter must be a non-negative int"),
                    ({"rtol": -1.0}, r"cg: rtol must be a real, non-negative number"),
                    ({"atol": float("nan")}, r"cg: atol must be a real, non-negative number")):
        with pytest.raises(ValueError, match=msg):
            tla.cg(a, xp.asarray(b, device=device), **kw)
    x, info = tla.cg(a, xp.zeros(8, device=device))
    assert info == 0 and not np.asarray(x.to_device("cpu")).any()
    want = sla.cg(dense_spd(8), b, rtol=1e-10)[0]
    for kw in ({"x0": xp.zeros(8, device=device)}, {"M": tla.aslinearoperator(xp.eye(8, device=device))}):
        x, info = tla.cg(a, xp.asarray(b, device=device), rtol=1e-10, **kw)
        assert info == 0
        np.testing.assert_allclose(np.asarray(x.to_device("cpu")), want, rtol=1e-7)
    if _fused(device, np.float32):  # A float32, b float64: the general path's promotion
        x, info = tla.cg(xp.asarray(dense_spd(8).astype(np.float32), device=device),
                         xp.asarray(b, device=device), rtol=1e-6)
        assert info == 0 and x.dtype == xp.float64
