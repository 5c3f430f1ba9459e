"""Utility functions (all, any, diff) against NumPy, on every device."""

from __future__ import annotations

import numpy as np
import pytest

import tessera_array as xp

DTYPES = ["bool", "int8", "uint16", "int64", "float32", "float64", "complex64"]
AXES = [None, 0, -1, (0, 2), (2, 1, 0), ()]


def _host(x):
    return np.asarray(x.to_device("cpu"))


def _rand(rng, shape, dtype, p_zero=0.3):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) > p_zero
    a = rng.integers(1, 5, size=shape).astype(dt)
    a[rng.random(shape) < p_zero] = 0
    if dt.kind in "fc":
        a.flat[0] = np.nan  # NaN counts as True
        a.flat[-1] = -np.inf
    return a


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.mark.parametrize("func", ["all", "any"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_all_any_match_numpy(device, rng, func, dtype, axis, keepdims):
    a = _rand(rng, (3, 4, 5), dtype, p_zero=0.1 if func == "all" else 0.9)
    out = getattr(xp, func)(xp.asarray(a, device=device), axis=axis, keepdims=keepdims)
    ref = getattr(np, func)(a, axis=axis, keepdims=keepdims)
    assert out.dtype == xp.bool and out.shape == ref.shape
    np.testing.assert_array_equal(_host(out), ref)


def test_all_any_special_values(device):
    x = xp.asarray(np.array([np.nan, np.inf, -np.inf]), device=device)
    assert bool(xp.all(x)) is True
    c = xp.asarray(np.array([1j, 0j]), device=device)
    assert bool(xp.any(c)) is True and bool(xp.all(c)) is False
    e = xp.asarray(np.zeros((0, 3)), device=device)
    assert bool(xp.all(e)) is True and bool(xp.any(e)) is False
    np.testing.assert_array_equal(_host(xp.all(e, axis=0)), [True] * 3)
    np.testing.assert_array_equal(_host(xp.any(e, axis=0)), [False] * 3)
    z = xp.any(xp.asarray(np.array(0.0), device=device))
    assert z.shape == () and bool(z) is False


@pytest.mark.parametrize("func", ["all", "any"])
def test_all_any_bad_input(device, func):
    x = xp.asarray(np.ones((2, 3)), device=device)
    with pytest.raises(TypeError, match=rf"^{func}: x must be a tessera_array Array\. "
                                        r"Received: x of type list"):
        getattr(xp, func)([True])
    with pytest.raises(ValueError, match=rf"^{func}: axis must be in \[-2, 2\).*"
                                         r"Received: axis=3"):
        getattr(xp, func)(x, axis=(0, 3))
    with pytest.raises(ValueError, match=rf"^{func}: axis must not repeat an axis"):
        getattr(xp, func)(x, axis=(0, 0))
    with pytest.raises(TypeError, match=rf"^{func}: keepdims must be a bool\. "
                                        r"Received: keepdims=None"):
        getattr(xp, func)(x, keepdims=None)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int64", "float32", "float64",
                                   "complex128", "bool"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_diff_matches_numpy(device, rng, dtype, axis, n):
    a = _rand(rng, (4, 5), dtype)
    if np.dtype(dtype).kind in "fc":
        a = rng.standard_normal((4, 5)).astype(dtype)
    out = xp.diff(xp.asarray(a, device=device), axis=axis, n=n)
    ref = np.diff(a, axis=axis, n=n)
    assert str(out.dtype) == str(ref.dtype) and out.shape == ref.shape
    np.testing.assert_allclose(_host(out), ref, rtol=1e-6)


@pytest.mark.parametrize("axis", [0, -1])
def test_diff_prepend_append(device, rng, axis):
    a = rng.integers(-9, 9, size=(3, 4)).astype(np.int16)
    pshape = (2, 4) if axis == 0 else (3, 2)
    ashape = (1, 4) if axis == 0 else (3, 1)
    p = rng.integers(-9, 9, size=pshape).astype(np.int16)
    q = rng.integers(-9, 9, size=ashape).astype(np.int16)
    out = xp.diff(xp.asarray(a, device=device), axis=axis, n=2,
                  prepend=xp.asarray(p, device=device), append=xp.asarray(q, device=device))
    ref = np.diff(a, axis=axis, n=2, prepend=p, append=q)
    assert out.dtype == xp.int16
    np.testing.assert_array_equal(_host(out), ref)


def test_diff_prepend_promotes_and_scalars(device):
    a = np.array([1, 4, 9], dtype=np.int8)
    x = xp.asarray(a, device=device)
    out = xp.diff(x, prepend=xp.asarray(np.array([0.5]), device=device))
    assert out.dtype == xp.float64
    np.testing.assert_array_equal(_host(out), [0.5, 3, 5])
    out = xp.diff(x, prepend=0, append=10)
    assert out.dtype == xp.int8
    np.testing.assert_array_equal(_host(out), np.diff(a, prepend=0, append=10))


def test_diff_n_larger_than_axis_is_empty(device):
    out = xp.diff(xp.asarray(np.arange(3.0), device=device), n=5)
    assert out.shape == (0,)


def test_diff_n0_is_a_copy(device):
    x = xp.asarray(np.arange(3.0), device=device)
    out = xp.diff(x, n=0)
    assert out is not x
    np.testing.assert_array_equal(_host(out), [0.0, 1.0, 2.0])
    if x.device == "cpu":
        assert not np.shares_memory(_host(out), _host(x))


def test_diff_bad_input(device):
    x = xp.asarray(np.ones((2, 3)), device=device)
    with pytest.raises(TypeError, match=r"^diff: x must be a tessera_array Array"):
        xp.diff([1, 2, 3])
    with pytest.raises(ValueError, match=r"^diff: x must have at least one dimension\. "
                                         r"Received: x.shape=\(\)"):
        xp.diff(xp.asarray(np.array(1.0), device=device))
    with pytest.raises(ValueError, match=r"^diff: axis must be in \[-2, 2\).*Received: axis=2"):
        xp.diff(x, axis=2)
    with pytest.raises(TypeError, match=r"^diff: axis must be an int\. Received: axis=None"):
        xp.diff(x, axis=None)
    with pytest.raises(ValueError, match=r"^diff: n must be >= 0\. Received: n=-1"):
        xp.diff(x, n=-1)
    with pytest.raises(TypeError, match=r"^diff: n must be an int\. Received: n=1.0"):
        xp.diff(x, n=1.0)
    with pytest.raises(ValueError, match=r"^diff: prepend must have the shape of x except "
                                         r"along axis 1\. Received: x.shape=\(2, 3\), "
                                         r"prepend.shape=\(3, 1\)"):
        xp.diff(x, prepend=xp.asarray(np.ones((3, 1)), device=device))
    with pytest.raises(ValueError, match=r"^diff: append must have the shape of x"):
        xp.diff(x, append=xp.asarray(np.ones(3), device=device))
    with pytest.raises(TypeError, match=r"^diff: append must be a tessera_array Array or a "
                                        r"Python scalar.*Received: append of type list"):
        xp.diff(x, append=[1.0])
