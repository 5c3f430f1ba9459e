"""tessera_array.sparse.csr_array against scipy.sparse, on every device."""

from __future__ import annotations

import numpy as np
import pytest

import tessera_array as xp
from tessera_array import _dispatch
from tessera_array.sparse import csr_array, issparse

sp = pytest.importorskip("scipy.sparse")

DTYPES = ["float32", "float64", "complex64", "complex128"]
TOL = {"float32": 1e-5, "float64": 1e-12, "complex64": 1e-5, "complex128": 1e-12}


def _random_sparse(m, n, dtype, seed=0, density=0.2):
    rng = np.random.default_rng(seed)
    a = sp.random_array((m, n), density=density, rng=rng, format="csr", dtype=np.float64)
    if dtype.startswith("complex"):
        a = a + 1j * sp.random_array((m, n), density=density, rng=rng, format="csr")
    return sp.csr_array(a).astype(dtype)


def _host(a):
    return np.asarray(a.to_device(xp.__array_namespace_info__().devices()[0])
                      if a.device.kind != "cpu" else a)


@pytest.mark.parametrize("dtype", DTYPES)
def test_from_scipy_matvec_matmat(device, dtype):
    s = _random_sparse(13, 9, dtype)
    a = csr_array(s, device=device)
    assert a.shape == (13, 9) and a.nnz == s.nnz and a.dtype == getattr(xp, dtype)
    assert a.device is device and a.ndim == 2 and a.format == "csr" and issparse(a)
    rng = np.random.default_rng(1)
    x = rng.standard_normal(9).astype(dtype)
    X = rng.standard_normal((9, 4)).astype(dtype)
    np.testing.assert_allclose(_host(a @ xp.asarray(x, device=device)), s @ x,
                               rtol=TOL[dtype], atol=TOL[dtype])
    np.testing.assert_allclose(_host(a @ xp.asarray(X, device=device)), s @ X,
                               rtol=TOL[dtype], atol=TOL[dtype])
    np.testing.assert_allclose(_host(a.toarray()), s.toarray(), rtol=0, atol=0)
    np.testing.assert_allclose(_host(a.T.toarray()), s.T.toarray(), rtol=0, atol=0)
    np.testing.assert_allclose(_host(a.H.toarray()), s.conj().T.toarray(), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_from_dense_and_tuple(device, dtype):
    s = _random_sparse(7, 11, dtype, seed=3)
    dense = s.toarray()
    a = csr_array(xp.asarray(dense, device=device))
    assert a.nnz == s.nnz
    np.testing.assert_array_equal(_host(a.indptr), s.indptr)
    np.testing.assert_array_equal(_host(a.indices), s.indices)
    np.testing.assert_array_equal(_host(a.data), s.data)
    b = csr_array((s.data, s.indices, s.indptr), shape=s.shape, device=device)
    np.testing.assert_array_equal(_host(b.toarray()), dense)
    c = csr_array(dense, device=device)  # a NumPy array, copied to the device
    np.testing.assert_array_equal(_host(c.toarray()), dense)
    # Duplicates are summed, as in SciPy.
    d = csr_array((np.array([1.0, 2.0]), np.array([0, 0]), np.array([0, 2])), shape=(1, 2),
                  device=device)
    np.testing.assert_array_equal(_host(d.toarray()), [[3.0, 0.0]])


def test_mixed_dtypes_promote(device):
    s = _random_sparse(5, 5, "float32")
    a = csr_array(s, device=device)
    x = np.arange(5.0)
    y = a @ xp.asarray(x, device=device)
    assert y.dtype == xp.float64
    np.testing.assert_allclose(_host(y), s.astype(np.float64) @ x, rtol=1e-12)
    assert a.astype(xp.complex128).dtype == xp.complex128


def test_spmv_registered_for_every_variant(device):
    for variant in ("default", "scalar", "warp"):
        for dt in (xp.float32, xp.float64, xp.complex64, xp.complex128):
            assert callable(_dispatch.lookup("spmv", device, dt, variant))


def test_bad_input(device):
    s = _random_sparse(4, 3, "float64")
    a = csr_array(s, device=device)
    with pytest.raises(TypeError, match=r"csr_array.__matmul__: x must be a tessera_array"):
        a @ np.ones(3)
    with pytest.raises(ValueError, match=r"csr_array.__matmul__: x must have shape \(3,\)"):
        a @ xp.ones(4, device=device)
    with pytest.raises(ValueError, match=r"csr_array: column indices must lie in \[0, 2\)"):
        csr_array((np.ones(1), np.array([5]), np.array([0, 1])), shape=(1, 2), device=device)
    with pytest.raises(ValueError, match=r"csr_array: expected indptr\[0\] == 0"):
        csr_array((np.ones(2), np.array([0, 1]), np.array([0, 1])), device=device)
    with pytest.raises(ValueError, match=r"csr_array: a dense argument must be 2-D"):
        csr_array(xp.ones(3, device=device))
    with pytest.raises(ValueError, match=r"csr_array: a tuple argument must be"):
        csr_array((np.ones(2), np.array([0, 1])))
    with pytest.raises(TypeError, match=r"csr_array: indices and indptr must have an integer"):
        csr_array((np.ones(1), np.array([0.0]), np.array([0, 1])), shape=(1, 1), device=device)


def test_numpy_reference_spmv_matches_scipy():
    """The NumPy backend's fallback (used without SciPy) computes the same product."""
    from tessera_array.backends.numpy import sparse as nsp

    s = _random_sparse(9, 6, "complex128", seed=4)
    rng = np.random.default_rng(5)
    for x in (rng.standard_normal(6), rng.standard_normal((6, 3))):
        np.testing.assert_allclose(
            nsp._spmv_reference(s.data, s.indices, s.indptr, s.shape, x), s @ x, rtol=1e-12)


def test_row_vector_times_csr(device):
    """``x @ A`` with a tessera Array on the left reaches csr_array.__rmatmul__."""
    rng = np.random.default_rng(7)
    dense = rng.standard_normal((5, 4)) * (rng.random((5, 4)) < 0.5)
    a = csr_array(xp.asarray(dense, device=device))
    x = rng.standard_normal(5)
    got = xp.asarray(x, device=device) @ a
    assert isinstance(got, xp.Array) and got.device == device
    np.testing.assert_allclose(np.asarray(got.to_device("cpu")), x @ dense, rtol=1e-12)
    xs = rng.standard_normal((3, 5))
    got2 = xp.asarray(xs, device=device) @ a
    np.testing.assert_allclose(np.asarray(got2.to_device("cpu")), xs @ dense, rtol=1e-12)
