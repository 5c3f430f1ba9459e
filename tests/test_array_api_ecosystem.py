"""tessera_array in the Array API ecosystem: array-api-compat finds its namespace, and
array-api-extra's functions run on tessera arrays with NumPy's answers."""

from __future__ import annotations

import warnings

import array_api_compat
import array_api_extra as xpx
import numpy as np
import pytest

import tessera_array as xp

SEED = 1234


def _host(x):
    return np.asarray(x.to_device("cpu"))


def _same(result, expected, device, rtol=1e-12):
    assert result.__class__ is xp.Array, type(result)
    assert result.device is device
    expected = np.asarray(expected)
    assert result.dtype == expected.dtype, (result.dtype, expected.dtype)
    assert result.shape == expected.shape
    if expected.dtype.kind in "fc":
        np.testing.assert_allclose(_host(result), expected, rtol=rtol, atol=rtol)
    else:
        np.testing.assert_array_equal(_host(result), expected)


# ---- array-api-compat ------------------------------------------------------------------


def test_array_namespace(device):
    x = xp.asarray([1.0], device=device)
    assert array_api_compat.is_array_api_obj(x)
    assert array_api_compat.array_namespace(x) is xp
    assert array_api_compat.array_namespace(x, xp.asarray([2], device=device)) is xp
    assert array_api_compat.array_namespace(x, api_version="2025.12") is xp
    assert not array_api_compat.is_numpy_array(x)
    assert not array_api_compat.is_array_api_obj([1.0])


def test_compat_helpers(device):
    x = xp.asarray(np.arange(6.0).reshape(2, 3), device=device)
    assert array_api_compat.device(x) is device
    assert array_api_compat.size(x) == 6
    y = array_api_compat.to_device(x, device)
    assert y.device is device
    np.testing.assert_array_equal(_host(y), _host(x))


def test_compat_rejects_mixing_namespaces(device):
    with pytest.raises(TypeError, match="Multiple namespaces"):
        array_api_compat.array_namespace(xp.asarray([1.0], device=device), np.asarray([1.0]))


# ---- array-api-extra ------------------------------------------------------------------


@pytest.fixture
def rng():
    return np.random.default_rng(SEED)


def test_cov(device, rng):
    m = rng.standard_normal((3, 7))
    _same(xpx.cov(xp.asarray(m, device=device)), np.cov(m), device)
    _same(xpx.cov(xp.asarray(m.T, device=device), axis=0), np.cov(m), device)


def test_pad(device, rng):
    a = rng.standard_normal((2, 3))
    x = xp.asarray(a, device=device)
    _same(xpx.pad(x, 2), np.pad(a, 2), device)
    _same(xpx.pad(x, ((1, 2), (0, 1)), constant_values=3.0),
          np.pad(a, ((1, 2), (0, 1)), constant_values=3.0), device)


def test_atleast_nd(device, rng):
    a = rng.standard_normal((4,))
    x = xp.asarray(a, device=device)
    _same(xpx.atleast_nd(x, ndim=3), a.reshape(1, 1, 4), device)
    assert xpx.atleast_nd(x, ndim=1).shape == (4,)


def test_isclose(device, rng):
    a = rng.standard_normal((5,))
    b = a + np.array([0.0, 1e-9, 1e-3, np.nan, -1e-7])
    x, y = xp.asarray(a, device=device), xp.asarray(b, device=device)
    _same(xpx.isclose(x, y), np.isclose(a, b), device)
    _same(xpx.isclose(x, y, rtol=1e-2), np.isclose(a, b, rtol=1e-2), device)
    a[3] = np.nan
    x = xp.asarray(a, device=device)
    _same(xpx.isclose(x, y, equal_nan=True), np.isclose(a, b, equal_nan=True), device)


def test_nunique(device, rng):
    a = rng.integers(0, 5, (4, 6))
    r = xpx.nunique(xp.asarray(a, device=device))
    assert r.__class__ is xp.Array and r.device is device
    assert int(r) == np.unique(a).size


def test_expand_dims(device, rng):
    a = rng.standard_normal((2, 3))
    x = xp.asarray(a, device=device)
    with warnings.catch_warnings():
        # array-api-extra >= 0.9 deprecates it in favour of the standard's tuple axis
        warnings.simplefilter("ignore", DeprecationWarning)
        _same(xpx.expand_dims(x, axis=(0, 2)), np.expand_dims(a, (0, 2)), device)
        _same(xpx.expand_dims(x, axis=-1), np.expand_dims(a, -1), device)
    _same(xp.expand_dims(x, axis=(0, 2)), np.expand_dims(a, (0, 2)), device)


def test_kron(device, rng):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 2))
    _same(xpx.kron(xp.asarray(a, device=device), xp.asarray(b, device=device)),
          np.kron(a, b), device)
    ai, bi = rng.integers(-4, 5, (3,)), rng.integers(-4, 5, (2,))
    _same(xpx.kron(xp.asarray(ai, device=device), xp.asarray(bi, device=device)),
          np.kron(ai, bi), device)


def test_setdiff1d(device, rng):
    a, b = rng.integers(0, 10, (12,)), rng.integers(0, 10, (5,))
    _same(xpx.setdiff1d(xp.asarray(a, device=device), xp.asarray(b, device=device)),
          np.setdiff1d(a, b), device)


def test_sinc(device, rng):
    a = np.concatenate([rng.standard_normal((6,)), [0.0]])
    _same(xpx.sinc(xp.asarray(a, device=device)), np.sinc(a), device)


def test_create_diagonal(device, rng):
    a = rng.standard_normal((4,))
    x = xp.asarray(a, device=device)
    _same(xpx.create_diagonal(x), np.diag(a), device)
    _same(xpx.create_diagonal(x, offset=1), np.diag(a, k=1), device)
    _same(xpx.create_diagonal(x, offset=-2), np.diag(a, k=-2), device)


def test_at_set_and_add(device, rng):
    a = rng.standard_normal((5,))
    x = xp.asarray(a, device=device, copy=True)
    y = xpx.at(x)[1:3].set(0.0, copy=True)
    expected = a.copy()
    expected[1:3] = 0.0
    _same(y, expected, device)
    _same(x, a, device)  # copy=True left x alone
    z = xpx.at(x, xp.asarray([0, 4], device=device)).add(1.0, copy=True)
    expected = a.copy()
    expected[[0, 4]] += 1.0
    _same(z, expected, device)
    w = xpx.at(x)[2].multiply(3.0, copy=False)  # tessera arrays are writeable: in place
    expected = a.copy()
    expected[2] *= 3.0
    _same(w, expected, device)
    _same(x, expected, device)
