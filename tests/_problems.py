"""Test systems of the Krylov tests (SciPy sparse, float64): 2-D Poisson and an upwind
convection-diffusion operator, shared by tests/test_krylov.py and the dask solver tests."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def poisson2d(k):
    t = sp.diags_array([-np.ones(k - 1), 2 * np.ones(k), -np.ones(k - 1)], offsets=[-1, 0, 1])
    eye = sp.eye_array(k)
    return (sp.kron(eye, t) + sp.kron(t, eye)).tocsr()


def convection_diffusion(k, c=(20.0, 10.0)):
    """Upwind -Laplace(u) + c . grad(u) on a k x k grid: nonsymmetric."""
    h = 1.0 / (k + 1)
    d2 = sp.diags_array([-np.ones(k - 1), 2 * np.ones(k), -np.ones(k - 1)], offsets=[-1, 0, 1])
    d1 = sp.diags_array([-np.ones(k - 1), np.ones(k)], offsets=[-1, 0])
    eye = sp.eye_array(k)
    lap = (sp.kron(eye, d2) + sp.kron(d2, eye)) / h**2
    conv = (c[0] * sp.kron(eye, d1) + c[1] * sp.kron(d1, eye)) / h
    return (lap + conv).tocsr()


# ---- dense systems and right-hand sides of the fused-solver tests (tests/test_cuda_*) ----


def nonsymmetric(n, seed=2, dtype=np.float64):
    """A dense nonsymmetric, well-conditioned matrix (3 I plus a random part of norm ~1);
    complex dtypes get a random imaginary part too."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n)) / np.sqrt(n) + 3 * np.eye(n)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((n, n)) / np.sqrt(n)
    return a.astype(dtype)


def spd(n, seed=1):
    """A dense SPD matrix ``g g^T / n + 0.05 I``."""
    g = np.random.default_rng(seed).standard_normal((n, n))
    return g @ g.T / n + 0.05 * np.eye(n)


def hermitian(n, seed=3, shift=0.5):
    """A dense Hermitian positive definite matrix ``g g^H / n + shift I``."""
    rng = np.random.default_rng(seed)
    g = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
    return g @ g.conj().T / n + shift * np.eye(n)


def rhs(n, seed=5, dtype=np.float64):
    """A random right-hand side (complex parts for a complex dtype)."""
    rng = np.random.default_rng(seed)
    b = rng.standard_normal(n)
    if np.dtype(dtype).kind == "c":
        b = b + 1j * rng.standard_normal(n)
    return b.astype(dtype)


def assert_reports_close(one, two, host, rtol):
    """Two ``(x, info, SolveReport)`` results agree: the same info and iteration count,
    residual histories of one length within ``rtol`` (of the largest norm), and x within
    ``rtol`` of the largest entry; ``host(x)`` gives x as a NumPy array."""
    (x1, i1, r1), (x2, i2, r2) = one, two
    assert i1 == i2 and r1.iterations == r2.iterations, (i1, i2, r1, r2)
    h1, h2 = np.asarray(r1.residual_norms), np.asarray(r2.residual_norms)
    assert h1.shape == h2.shape
    np.testing.assert_allclose(h1, h2, rtol=rtol, atol=rtol * h2.max())
    a1, a2 = host(x1), host(x2)
    assert a1.dtype == a2.dtype
    err = np.abs(a1 - a2).max() / np.abs(a2).max()
    assert err <= rtol, err


def perturbed(a, b, seed):
    """``a`` (dense or SciPy sparse) and ``b`` with each entry moved by up to one ulp of
    its dtype, relative, in the form and dtype given."""
    rng = np.random.default_rng(seed)
    d = np.asarray(a.toarray() if sp.issparse(a) else a)
    eps = np.finfo(d.dtype).eps
    s = rng.uniform(-1, 1, d.shape)
    s = (s + s.T) / 2  # real symmetric: a symmetric (Hermitian) a stays so
    pa = (d * (1 + eps * s)).astype(d.dtype)
    pb = (b * (1 + np.finfo(b.dtype).eps * rng.uniform(-1, 1, b.shape))).astype(b.dtype)
    return (sp.csr_array(pa) if sp.issparse(a) else pa), pb


# The fused solvers' systems (tests/test_cuda_gmres.py, test_cuda_bicgstab.py), on the host:
# COMPARED (of a dtype) are compared with the generic loop after 1, 3 and 50 iterations
# (cycles), systems that 50 of them leave short of convergence or near it, so that no
# breakdown in the noise decides the comparison; CONVERGED are solved to rtol 1e-8 and
# their iteration counts compared with SciPy's.
COMPARED = {
    "dense poisson 16^2": lambda dt: poisson2d(16).toarray().astype(dt),
    "csr convection-diffusion 24^2": lambda dt: sp.csr_array(
        convection_diffusion(24).astype(dt)),
}
CONVERGED = {
    "poisson 2-D": lambda: poisson2d(12),
    "dense spd": lambda: spd(90),
    "convection-diffusion": lambda: convection_diffusion(12),
    "complex hermitian": lambda: hermitian(70),
}
