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
