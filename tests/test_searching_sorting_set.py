"""Searching, sorting and set functions against NumPy, on every device."""

from __future__ import annotations

import numpy as np
import pytest

import tessera_array as xp

REAL = ["bool", "int8", "uint8", "int32", "uint64", "float32", "float64"]


def _host(x):
    return np.asarray(x.to_device("cpu"))


def _rand(rng, shape, dtype, nans=False, dups=True):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) > 0.5
    if dt.kind in "iu":
        hi = 4 if dups else min(np.iinfo(dt).max, 10**6)
        a = rng.integers(0, hi, size=shape).astype(dt)
        a.flat[0] = 1  # never all zeros
        return a
    a = rng.integers(-3, 4, size=shape).astype(dt) if dups else rng.standard_normal(shape)
    a = a.astype(dt)
    if dt.kind == "c":
        a = a + 1j * rng.integers(-1, 2, size=shape)
    if nans:
        a.flat[rng.choice(a.size, size=min(3, a.size), replace=False)] = np.nan
    return a


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# ---- argmax / argmin -----------------------------------------------------------------


@pytest.mark.parametrize("func", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_argmax_argmin_match_numpy(device, rng, func, dtype, axis, keepdims):
    a = _rand(rng, (4, 6), dtype)
    out = getattr(xp, func)(xp.asarray(a, device=device), axis=axis, keepdims=keepdims)
    ref = getattr(np, func)(a, axis=axis, keepdims=keepdims)
    assert out.dtype == xp.int64 and out.shape == np.shape(ref)
    np.testing.assert_array_equal(_host(out), ref)


@pytest.mark.parametrize("func", ["argmax", "argmin"])
def test_argmax_argmin_nan_is_found_first(device, func):
    a = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 0.0, -1.0, 5.0]])
    out = getattr(xp, func)(xp.asarray(a, device=device), axis=1)
    np.testing.assert_array_equal(_host(out), getattr(np, func)(a, axis=1))
    assert _host(out)[0] == 1


@pytest.mark.parametrize("func", ["argmax", "argmin"])
def test_argmax_argmin_bad_input(device, func):
    x = xp.asarray(np.ones((2, 3)), device=device)
    with pytest.raises(TypeError, match=rf"^{func}: axis must be an int or None.*"
                                        r"Received: axis=\(0, 1\)"):
        getattr(xp, func)(x, axis=(0, 1))
    with pytest.raises(ValueError, match=rf"^{func}: axis must be in \[-2, 2\)"):
        getattr(xp, func)(x, axis=-3)
    with pytest.raises(ValueError, match=rf"^{func}: cannot search an empty array.*"
                                         r"Received: x.shape=\(0,\)"):
        getattr(xp, func)(xp.asarray(np.ones(0), device=device))
    with pytest.raises(TypeError, match=rf"^{func}: x must be a tessera_array Array"):
        getattr(xp, func)(np.ones(3))


# ---- count_nonzero / nonzero ---------------------------------------------------------


@pytest.mark.parametrize("dtype", REAL + ["complex64"])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), ()])
@pytest.mark.parametrize("keepdims", [False, True])
def test_count_nonzero_matches_numpy(device, rng, dtype, axis, keepdims):
    a = _rand(rng, (3, 4, 5), dtype)
    out = xp.count_nonzero(xp.asarray(a, device=device), axis=axis, keepdims=keepdims)
    ref = np.asarray(np.count_nonzero(a, axis=axis, keepdims=keepdims))
    assert out.dtype == xp.int64 and out.shape == ref.shape
    np.testing.assert_array_equal(_host(out), ref)


def test_count_nonzero_complex_component(device):
    a = np.array([0j, 1j, 1 + 0j, complex(0, -0.0)])
    assert int(xp.count_nonzero(xp.asarray(a, device=device))) == 2


@pytest.mark.parametrize("dtype", REAL + ["complex128"])
@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 4)])
def test_nonzero_matches_numpy(device, rng, dtype, shape):
    a = _rand(rng, shape, dtype)
    out = xp.nonzero(xp.asarray(a, device=device))
    ref = np.nonzero(a)
    assert isinstance(out, tuple) and len(out) == len(ref)
    for o, r in zip(out, ref):
        assert o.dtype == xp.int64
        np.testing.assert_array_equal(_host(o), r)


def test_nonzero_0d_raises(device):
    with pytest.raises(ValueError, match=r"^nonzero: x must have at least one dimension.*"
                                         r"Received: x.shape=\(\)"):
        xp.nonzero(xp.asarray(np.array(1.0), device=device))


# ---- searchsorted --------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["int8", "uint16", "float32", "float64"])
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("use_sorter", [False, True])
def test_searchsorted_matches_numpy(device, rng, dtype, side, use_sorter):
    a = _rand(rng, (20,), dtype)
    v = _rand(rng, (3, 5), dtype)
    if use_sorter:
        sorter = np.argsort(a, kind="stable")
        out = xp.searchsorted(xp.asarray(a, device=device), xp.asarray(v, device=device),
                              side=side, sorter=xp.asarray(sorter, device=device))
        ref = np.searchsorted(a, v, side=side, sorter=sorter)
    else:
        a = np.sort(a)
        out = xp.searchsorted(xp.asarray(a, device=device), xp.asarray(v, device=device),
                              side=side)
        ref = np.searchsorted(a, v, side=side)
    assert out.dtype == xp.int64 and out.shape == (3, 5)
    np.testing.assert_array_equal(_host(out), ref)


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted_scalar(device, side):
    a = np.array([-2.0, 0.0, 1.5, 1.5, 4.0], dtype=np.float32)
    x1 = xp.asarray(a, device=device)
    for v in (1.5, 1, -10, 10.0, True):
        out = xp.searchsorted(x1, v, side=side)
        assert out.shape == () and out.dtype == xp.int64
        assert int(out) == np.searchsorted(a, v, side=side)
    ints = xp.asarray(np.array([1, 3, 5], dtype=np.int16), device=device)
    assert int(xp.searchsorted(ints, 3, side=side)) == (1 if side == "left" else 2)
    # A float scalar with an integer array compares in the default float dtype.
    assert int(xp.searchsorted(ints, 2.5, side=side)) == 1


def test_searchsorted_mixed_dtypes(device):
    x1 = xp.asarray(np.array([1, 2, 3], dtype=np.int8), device=device)
    x2 = xp.asarray(np.array([1.5, 2.0, 300.0]), device=device)
    np.testing.assert_array_equal(_host(xp.searchsorted(x1, x2)), [1, 1, 3])


def test_searchsorted_nan_consistent_with_sort(device):
    a = np.array([3.0, np.nan, 1.0, 2.0])
    s = xp.sort(xp.asarray(a, device=device))
    out = xp.searchsorted(s, xp.asarray(np.array([np.nan, 2.5, 10.0]), device=device))
    np.testing.assert_array_equal(_host(out), [3, 2, 3])


def test_searchsorted_bad_input(device):
    x1 = xp.asarray(np.arange(4.0), device=device)
    with pytest.raises(ValueError, match=r"^searchsorted: x1 must be one-dimensional\. "
                                         r"Received: x1.shape=\(2, 2\)"):
        xp.searchsorted(xp.asarray(np.ones((2, 2)), device=device), x1)
    with pytest.raises(ValueError, match=r"^searchsorted: side must be 'left' or 'right'\. "
                                         r"Received: side='middle'"):
        xp.searchsorted(x1, 1.0, side="middle")
    with pytest.raises(TypeError, match=r"^searchsorted: sorter must have an integer dtype\. "
                                        r"Received: sorter.dtype=float64"):
        xp.searchsorted(x1, 1.0, sorter=x1)
    with pytest.raises(ValueError, match=r"^searchsorted: sorter must have the shape of x1"):
        xp.searchsorted(x1, 1.0, sorter=xp.asarray(np.arange(3), device=device))
    with pytest.raises(TypeError, match=r"^searchsorted: x2 must be a tessera_array Array or "
                                        r"a Python scalar.*Received: x2 of type str"):
        xp.searchsorted(x1, "a")
    with pytest.raises(TypeError, match=r"^searchsorted: x1 must be a tessera_array Array"):
        xp.searchsorted([1, 2], 1)


# ---- where ---------------------------------------------------------------------------


@pytest.mark.parametrize("d1, d2", [("float32", "float32"), ("int8", "int16"),
                                    ("uint8", "float64"), ("bool", "bool"),
                                    ("float32", "complex128")])
def test_where_arrays_match_numpy(device, rng, d1, d2):
    c = rng.random((3, 1, 5)) > 0.5
    a = _rand(rng, (4, 5), d1)
    b = _rand(rng, (3, 4, 1), d2)
    out = xp.where(xp.asarray(c, device=device), xp.asarray(a, device=device),
                   xp.asarray(b, device=device))
    ref = np.where(c, a, b)
    assert str(out.dtype) == str(ref.dtype) and out.shape == ref.shape
    np.testing.assert_array_equal(_host(out), ref)


def test_where_scalars(device, rng):
    c = xp.asarray(np.array([True, False, True]), device=device)
    a = xp.asarray(np.array([1, 2, 3], dtype=np.int8), device=device)
    out = xp.where(c, a, 0)
    assert out.dtype == xp.int8
    np.testing.assert_array_equal(_host(out), [1, 0, 3])
    out = xp.where(c, -1, a)
    assert out.dtype == xp.int8
    np.testing.assert_array_equal(_host(out), [-1, 2, -1])
    f = xp.asarray(np.array([1.0, 2.0, 3.0], dtype=np.float32), device=device)
    out = xp.where(c, f, np.inf if False else float("nan"))
    assert out.dtype == xp.float32
    assert np.isnan(_host(out)[1])
    out = xp.where(c, a, 0.5)
    assert out.dtype == xp.float64
    np.testing.assert_array_equal(_host(out), [1.0, 0.5, 3.0])
    out = xp.where(c, f, 1j)
    assert out.dtype == xp.complex64


def test_where_bad_input(device):
    c = xp.asarray(np.array([True, False]), device=device)
    x = xp.asarray(np.array([1.0, 2.0]), device=device)
    with pytest.raises(TypeError, match=r"^where: condition must have the bool dtype.*"
                                        r"Received: condition.dtype=float64"):
        xp.where(x, x, x)
    with pytest.raises(TypeError, match=r"^where: condition must be a tessera_array Array\. "
                                        r"Received: condition of type list"):
        xp.where([True, False], x, x)
    with pytest.raises(TypeError, match=r"^where: at least one of x1, x2 must be a "
                                        r"tessera_array Array"):
        xp.where(c, 1.0, 2.0)
    with pytest.raises(ValueError, match=r"^where: the shapes cannot be broadcast together\. "
                                         r"Received: shapes \(2,\), \(3,\)"):
        xp.where(c, xp.asarray(np.ones(3), device=device), 0.0)
    with pytest.raises(TypeError, match=r"^where: x2 must be a tessera_array Array or a "
                                        r"Python scalar.*Received: x2 of type str"):
        xp.where(c, x, "0")
    with pytest.raises(OverflowError, match=r"^where: the Python int x2=300 is out of range"):
        xp.where(c, xp.asarray(np.array([1, 2], dtype=np.int8), device=device), 300)


# ---- sort / argsort ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("descending", [False, True])
def test_argsort_stable_matches_reference(device, rng, dtype, axis, descending):
    a = _rand(rng, (5, 30), dtype)  # many duplicates
    out = xp.argsort(xp.asarray(a, device=device), axis=axis, descending=descending)
    assert out.dtype == xp.int64 and out.shape == a.shape
    if descending:
        # Stable descending: sort by value descending, then by original index ascending.
        keys = np.moveaxis(a, axis, -1)
        ref = np.empty(keys.shape, dtype=np.int64)
        for i in np.ndindex(keys.shape[:-1]):
            row = keys[i].tolist()
            ref[i] = sorted(range(len(row)), key=lambda k: (-float(row[k]), k))
        ref = np.moveaxis(ref, -1, axis)
    else:
        ref = np.argsort(a, axis=axis, kind="stable")
    np.testing.assert_array_equal(_host(out), ref)


def test_stable_descending_is_not_reversed_ascending(device):
    a = np.array([1, 3, 1, 3, 2])
    out = _host(xp.argsort(xp.asarray(a, device=device), descending=True))
    np.testing.assert_array_equal(out, [1, 3, 4, 0, 2])
    assert not np.array_equal(out, np.argsort(a, kind="stable")[::-1])


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("axis", [0, -1])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("stable", [False, True])
def test_sort_matches_numpy(device, rng, dtype, axis, descending, stable):
    a = _rand(rng, (6, 9), dtype)
    out = xp.sort(xp.asarray(a, device=device), axis=axis, descending=descending,
                  stable=stable)
    ref = np.sort(a, axis=axis)
    if descending:
        ref = np.flip(ref, axis=axis)
    assert str(out.dtype) == dtype
    np.testing.assert_array_equal(_host(out), ref)


@pytest.mark.parametrize("descending", [False, True])
def test_argsort_unstable_is_a_valid_order(device, rng, descending):
    a = _rand(rng, (40,), "int8")
    idx = _host(xp.argsort(xp.asarray(a, device=device), descending=descending, stable=False))
    assert sorted(idx.tolist()) == list(range(40))
    vals = a[idx]
    assert np.all(np.diff(vals.astype(int)) <= 0 if descending else np.diff(vals) >= 0)


def test_sort_nans_last_ascending_first_descending(device):
    a = np.array([2.0, np.nan, -1.0, np.nan, 0.5])
    x = xp.asarray(a, device=device)
    np.testing.assert_array_equal(_host(xp.sort(x)), [-1.0, 0.5, 2.0, np.nan, np.nan])
    np.testing.assert_array_equal(_host(xp.sort(x, descending=True)),
                                  [np.nan, np.nan, 2.0, 0.5, -1.0])
    np.testing.assert_array_equal(_host(xp.argsort(x, descending=True)), [1, 3, 0, 4, 2])


def test_sort_descending_stable_keeps_signed_zero_order(device):
    a = np.array([0.0, -0.0, 1.0, -0.0, 0.0])
    out = _host(xp.sort(xp.asarray(a, device=device), descending=True))
    np.testing.assert_array_equal(np.signbit(out), [False, False, True, True, False])


@pytest.mark.parametrize("func", ["sort", "argsort"])
def test_sort_bad_input(device, func):
    x = xp.asarray(np.ones((2, 3)), device=device)
    with pytest.raises(ValueError, match=rf"^{func}: axis must be in \[-2, 2\) for an array "
                                         r"with 2 dimensions\. "
                                         r"Received: axis=2"):
        getattr(xp, func)(x, axis=2)
    with pytest.raises(TypeError, match=rf"^{func}: axis must be an int\. Received: axis=None"):
        getattr(xp, func)(x, axis=None)
    with pytest.raises(TypeError, match=rf"^{func}: descending must be a bool"):
        getattr(xp, func)(x, descending=1)
    with pytest.raises(TypeError, match=rf"^{func}: stable must be a bool"):
        getattr(xp, func)(x, stable="yes")
    with pytest.raises(ValueError, match=rf"^{func}: axis is out of range: x is 0-d"):
        getattr(xp, func)(xp.asarray(np.array(1.0), device=device))
    with pytest.raises(TypeError, match=rf"^{func}: x must be a tessera_array Array"):
        getattr(xp, func)((3, 1, 2))


# ---- unique --------------------------------------------------------------------------


ALL = REAL + ["int16", "uint32", "complex64", "complex128"]


def _check_unique(a, values, counts=None, indices=None, inverse=None):
    """Checks the standard's contract against NumPy, with each NaN distinct."""
    flat = a.reshape(-1)
    isnan = np.isnan(flat) if flat.dtype.kind in "fc" else np.zeros(flat.shape, bool)
    ref = np.unique(flat[~isnan])
    v = values[~(np.isnan(values) if values.dtype.kind in "fc" else np.zeros(values.shape, bool))]
    np.testing.assert_array_equal(v, ref)
    assert np.count_nonzero(np.isnan(values) if values.dtype.kind in "fc" else 0) == isnan.sum()
    assert values.dtype == a.dtype and values.ndim == 1
    if counts is not None:
        assert counts.dtype == np.int64 and counts.shape == values.shape
        for val, c in zip(values, counts):
            expected = 1 if np.isnan(val) else int(np.sum(flat == val))
            assert c == expected
    if indices is not None:
        assert indices.dtype == np.int64 and indices.shape == values.shape
        for val, i in zip(values, indices):
            if not np.isnan(val):
                assert i == np.flatnonzero(flat == val)[0]
            else:
                assert np.isnan(flat[i])
    if inverse is not None:
        assert inverse.dtype == np.int64 and inverse.shape == a.shape
        rebuilt = values[inverse]
        same = (rebuilt == a) | (np.isnan(rebuilt) & np.isnan(a))
        assert same.all()


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape", [(12,), (3, 4), (2, 3, 2), ()])
def test_unique_all(device, rng, dtype, shape):
    a = np.asarray(_rand(rng, shape, dtype, nans=np.dtype(dtype).kind in "fc" and shape != ()))
    out = xp.unique_all(xp.asarray(a, device=device))
    assert out._fields == ("values", "indices", "inverse_indices", "counts")
    assert all(isinstance(f, xp.Array) for f in out)
    values, indices, inverse, counts = (_host(f) for f in out)
    _check_unique(a, values, counts=counts, indices=indices, inverse=inverse)


@pytest.mark.parametrize("dtype", ALL)
def test_unique_counts_inverse_values(device, rng, dtype):
    a = _rand(rng, (4, 5), dtype, nans=np.dtype(dtype).kind in "fc")
    x = xp.asarray(a, device=device)
    uc = xp.unique_counts(x)
    assert uc._fields == ("values", "counts")
    _check_unique(a, _host(uc.values), counts=_host(uc.counts))
    ui = xp.unique_inverse(x)
    assert ui._fields == ("values", "inverse_indices")
    _check_unique(a, _host(ui.values), inverse=_host(ui.inverse_indices))
    uv = xp.unique_values(x)
    assert isinstance(uv, xp.Array)
    _check_unique(a, _host(uv))


def test_unique_nans_are_distinct_and_zeros_merge(device):
    a = np.array([np.nan, 0.0, -0.0, np.nan, 1.0, np.nan])
    out = xp.unique_counts(xp.asarray(a, device=device))
    v, c = _host(out.values), _host(out.counts)
    assert np.isnan(v).sum() == 3 and np.all(c[np.isnan(v)] == 1)
    assert c[v == 0].tolist() == [2]
    z = np.array([complex(np.nan, 1), complex(np.nan, 1), 1j])
    assert xp.unique_values(xp.asarray(z, device=device)).shape == (3,)


@pytest.mark.parametrize("func", ["unique_all", "unique_counts", "unique_inverse",
                                  "unique_values"])
def test_unique_bad_input(func):
    with pytest.raises(TypeError, match=rf"^{func}: x must be a tessera_array Array\. "
                                        r"Received: x of type list"):
        getattr(xp, func)([1, 2, 2])


# ---- isin ----------------------------------------------------------------------------


@pytest.mark.parametrize("d1, d2", [("int8", "int8"), ("int16", "uint8"), ("int64", "int32"),
                                    ("uint16", "uint64"), ("float32", "int8")])
@pytest.mark.parametrize("invert", [False, True])
def test_isin_matches_numpy(device, rng, d1, d2, invert):
    a = rng.integers(0, 20, size=(4, 5)).astype(d1)
    b = rng.integers(0, 20, size=(7,)).astype(d2)
    out = xp.isin(xp.asarray(a, device=device), xp.asarray(b, device=device), invert=invert)
    assert out.dtype == xp.bool and out.shape == a.shape
    np.testing.assert_array_equal(_host(out), np.isin(a, b, invert=invert))


@pytest.mark.parametrize("invert", [False, True])
def test_isin_scalars(device, rng, invert):
    a = rng.integers(0, 5, size=(3, 4)).astype(np.int16)
    x = xp.asarray(a, device=device)
    out = xp.isin(x, 3, invert=invert)
    assert out.dtype == xp.bool and out.shape == (3, 4)
    np.testing.assert_array_equal(_host(out), np.isin(a, 3, invert=invert))
    out = xp.isin(3, x, invert=invert)
    assert out.shape == () and bool(out) == ((3 in a) != invert)
    out = xp.isin(100, x, invert=invert)
    assert bool(out) == invert


def test_isin_bad_input(device):
    x = xp.asarray(np.arange(3), device=device)
    with pytest.raises(TypeError, match=r"^isin: at least one of x1, x2 must be a "
                                        r"tessera_array Array\. Received: x1 of type int, "
                                        r"x2 of type list"):
        xp.isin(1, [1, 2])
    with pytest.raises(TypeError, match=r"^isin: x2 must be a tessera_array Array or a "
                                        r"Python scalar.*Received: x2 of type list"):
        xp.isin(x, [1, 2])
    with pytest.raises(TypeError, match=r"^isin: invert must be a bool\. Received: invert=1"):
        xp.isin(x, x, invert=1)
