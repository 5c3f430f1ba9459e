"""Statistical functions against NumPy (float64 references), on every device."""

from __future__ import annotations

import numpy as np
import pytest

import tessera_array as xp

RTOL = {np.dtype("float32"): 1e-5, np.dtype("float64"): 1e-12,
        np.dtype("complex64"): 1e-5, np.dtype("complex128"): 1e-12}

AXES = [None, 0, -1, 1, (0, 2), (2, 0, 1), ()]
SHAPE = (3, 4, 5)


def _host(x):
    return np.asarray(x.to_device("cpu"))


def _rand(rng, shape, dtype, nans=False):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) > 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = max(info.min, -5), min(info.max, 6)
        a = rng.integers(lo, hi, size=shape).astype(dt)
        a.flat[0] = 3  # never all zeros
        return a
    a = rng.standard_normal(shape) * 3
    if dt.kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    a = a.astype(dt)
    if nans:
        a.flat[rng.integers(0, a.size)] = np.nan
    return a


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# ---- sum / prod ----------------------------------------------------------------------


@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
def test_sum_matches_numpy(device, rng, axis, keepdims, dtype):
    a = _rand(rng, SHAPE, dtype)
    x = xp.asarray(a, device=device)
    out = xp.sum(x, axis=axis, keepdims=keepdims)
    assert isinstance(out, xp.Array) and out.device is device
    assert str(out.dtype) == dtype
    ref = np.sum(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64),
                 axis=axis, keepdims=keepdims)
    assert out.shape == ref.shape
    np.testing.assert_allclose(_host(out), ref, rtol=10 * RTOL[np.dtype(dtype)], atol=1e-4)


def test_sum_whole_array_is_0d_array(device, rng):
    x = xp.asarray(_rand(rng, (7,), "float32"), device=device)
    out = xp.sum(x)
    assert isinstance(out, xp.Array)
    assert out.shape == () and out.dtype == xp.float32
    assert _host(out).shape == ()


@pytest.mark.parametrize(
    "dtype, expected",
    [("bool", "int64"), ("int8", "int64"), ("int16", "int64"), ("int32", "int64"),
     ("int64", "int64"), ("uint8", "uint64"), ("uint16", "uint64"), ("uint32", "uint64"),
     ("uint64", "uint64"), ("float32", "float32"), ("float64", "float64"),
     ("complex64", "complex64"), ("complex128", "complex128")],
)
@pytest.mark.parametrize("func", ["sum", "prod", "cumulative_sum", "cumulative_prod"])
def test_accumulation_default_dtype(device, rng, func, dtype, expected):
    a = _rand(rng, (2, 3), dtype)
    x = xp.asarray(a, device=device)
    kw = {"axis": 1} if func.startswith("cumulative") else {"axis": (0, 1)}
    out = getattr(xp, func)(x, **kw)
    assert str(out.dtype) == expected
    npfunc = {"sum": np.sum, "prod": np.prod, "cumulative_sum": np.cumulative_sum,
              "cumulative_prod": np.cumulative_prod}[func]
    ref = npfunc(a.astype(expected), **kw)
    np.testing.assert_allclose(_host(out), ref, rtol=1e-5)


@pytest.mark.parametrize("axis", AXES)
def test_prod_matches_numpy(device, rng, axis):
    a = rng.uniform(0.5, 1.5, SHAPE)
    out = xp.prod(xp.asarray(a, device=device), axis=axis)
    np.testing.assert_allclose(_host(out), np.prod(a, axis=axis), rtol=1e-12)


def test_sum_prod_dtype_argument(device, rng):
    a = np.array([100, 100, 100], dtype=np.int8)
    x = xp.asarray(a, device=device)
    assert int(xp.sum(x, dtype=xp.int16)) == 300
    out = xp.prod(x, dtype=xp.float32)
    assert out.dtype == xp.float32 and float(out) == 1e6
    out = xp.sum(xp.asarray(_rand(rng, (4,), "float32"), device=device), dtype=xp.float64)
    assert out.dtype == xp.float64


def test_empty_sum_prod(device):
    x = xp.asarray(np.zeros((0, 3)), device=device)
    assert float(xp.sum(x)) == 0.0
    assert float(xp.prod(x)) == 1.0
    np.testing.assert_array_equal(_host(xp.sum(x, axis=0)), np.zeros(3))
    np.testing.assert_array_equal(_host(xp.prod(x, axis=0)), np.ones(3))


def test_sum_nan_propagates(device, rng):
    a = _rand(rng, (5, 6), "float64", nans=True)
    out = _host(xp.sum(xp.asarray(a, device=device), axis=1))
    np.testing.assert_array_equal(np.isnan(out), np.isnan(np.sum(a, axis=1)))


# ---- max / min -----------------------------------------------------------------------


@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("dtype", ["int8", "uint16", "float32", "float64", "bool"])
@pytest.mark.parametrize("func", ["max", "min"])
def test_max_min_match_numpy(device, rng, func, axis, keepdims, dtype):
    a = _rand(rng, SHAPE, dtype)
    out = getattr(xp, func)(xp.asarray(a, device=device), axis=axis, keepdims=keepdims)
    ref = getattr(np, func)(a, axis=axis, keepdims=keepdims)
    assert str(out.dtype) == dtype and out.shape == ref.shape
    np.testing.assert_array_equal(_host(out), ref)


@pytest.mark.parametrize("func", ["max", "min"])
def test_max_min_nan_propagates(device, rng, func):
    a = _rand(rng, (4, 5), "float64", nans=True)
    out = _host(getattr(xp, func)(xp.asarray(a, device=device), axis=0))
    np.testing.assert_array_equal(out, getattr(np, func)(a, axis=0))
    assert np.isnan(float(getattr(xp, func)(xp.asarray(a, device=device))))


@pytest.mark.parametrize("func", ["max", "min"])
def test_max_min_empty_raises(device, func):
    x = xp.asarray(np.zeros((3, 0)), device=device)
    with pytest.raises(ValueError, match=rf"^{func}: cannot reduce over an axis of length 0.*"
                                         r"Received: x.shape=\(3, 0\)"):
        getattr(xp, func)(x)
    with pytest.raises(ValueError, match=rf"^{func}:"):
        getattr(xp, func)(x, axis=1)
    # An empty output is fine: nothing to reduce.
    assert getattr(xp, func)(x, axis=0).shape == (0,)


# ---- mean / var / std ----------------------------------------------------------------


@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
def test_mean_matches_numpy(device, rng, axis, keepdims, dtype):
    a = _rand(rng, SHAPE, dtype)
    out = xp.mean(xp.asarray(a, device=device), axis=axis, keepdims=keepdims)
    ref = np.mean(a.astype(np.complex128 if a.dtype.kind == "c" else np.float64),
                  axis=axis, keepdims=keepdims)
    assert str(out.dtype) == dtype and out.shape == ref.shape
    np.testing.assert_allclose(_host(out), ref, rtol=10 * RTOL[np.dtype(dtype)], atol=1e-5)


@pytest.mark.parametrize("dtype", ["int16", "uint8", "bool"])
def test_mean_of_integers_is_default_float(device, rng, dtype):
    a = _rand(rng, (4, 5), dtype)
    out = xp.mean(xp.asarray(a, device=device), axis=1)
    assert out.dtype == xp.float64
    np.testing.assert_allclose(_host(out), np.mean(a, axis=1), rtol=1e-12)


def test_mean_empty_is_nan_without_warning(device):
    out = xp.mean(xp.asarray(np.zeros((0, 2), dtype=np.float32), device=device), axis=0)
    assert out.dtype == xp.float32
    assert np.isnan(_host(out)).all()
    c = xp.mean(xp.asarray(np.zeros(0, dtype=np.complex128), device=device))
    assert np.isnan(_host(c).real) and np.isnan(_host(c).imag)


@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("correction", [0, 1, 0.5, 2.0])
@pytest.mark.parametrize("func", ["var", "std"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
def test_var_std_match_numpy(device, rng, func, axis, correction, dtype):
    a = _rand(rng, SHAPE, dtype)
    out = getattr(xp, func)(xp.asarray(a, device=device), axis=axis, correction=correction)
    ref64 = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    n = a.size if axis is None else int(np.prod([a.shape[i] for i in np.atleast_1d(axis)]))
    expected_dtype = "float64" if dtype == "complex128" else dtype
    assert str(out.dtype) == expected_dtype
    if n - correction <= 0:
        assert np.isnan(_host(out)).all()
        return
    ref = getattr(np, func)(ref64, axis=axis, ddof=correction)
    np.testing.assert_allclose(_host(out), ref, rtol=100 * RTOL[np.dtype(dtype)], atol=1e-6)


def test_var_correction_too_large_is_nan(device, rng):
    x = xp.asarray(_rand(rng, (2, 3), "float64"), device=device)
    for c in (3, 4, 10.0):
        assert np.isnan(_host(xp.var(x, axis=1, correction=c))).all()
        assert np.isnan(_host(xp.std(x, axis=1, correction=c))).all()
    np.testing.assert_allclose(
        _host(xp.var(x, axis=1, correction=2.5)),
        np.var(_host(x), axis=1, ddof=2.5), rtol=1e-12
    )


def test_var_keepdims_and_nan(device, rng):
    a = _rand(rng, (3, 4), "float64", nans=True)
    out = xp.var(xp.asarray(a, device=device), axis=0, keepdims=True)
    assert out.shape == (1, 4)
    np.testing.assert_allclose(_host(out), np.var(a, axis=0, keepdims=True), rtol=1e-12)


@pytest.mark.parametrize("func", ["mean", "var", "std", "sum", "prod", "max", "min"])
@pytest.mark.parametrize("dtype", ["float64", "complex64"])
def test_0d_input(device, func, dtype):
    a = np.array(2.5, dtype=dtype)
    out = getattr(xp, func)(xp.asarray(a, device=device))
    assert out.shape == ()
    ref = {"var": 0.0, "std": 0.0}.get(func, a)
    np.testing.assert_allclose(_host(out), ref)
    nan = getattr(xp, func)(xp.asarray(np.array(np.nan, dtype=dtype), device=device))
    assert np.isnan(_host(nan))


def test_var_of_integers_is_default_float(device):
    x = xp.asarray(np.array([1, 2, 3, 4], dtype=np.int32), device=device)
    out = xp.std(x, correction=1)
    assert out.dtype == xp.float64
    assert float(out) == pytest.approx(np.std([1, 2, 3, 4], ddof=1))


# ---- cumulative ----------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, -1, 2])
@pytest.mark.parametrize("include_initial", [False, True])
@pytest.mark.parametrize("func", ["cumulative_sum", "cumulative_prod"])
def test_cumulative_match_numpy(device, rng, func, axis, include_initial):
    a = rng.uniform(0.5, 1.5, SHAPE)
    out = getattr(xp, func)(xp.asarray(a, device=device), axis=axis,
                            include_initial=include_initial)
    ref = getattr(np, func)(a, axis=axis, include_initial=include_initial)
    assert out.shape == ref.shape
    np.testing.assert_allclose(_host(out), ref, rtol=1e-12)


@pytest.mark.parametrize("func", ["cumulative_sum", "cumulative_prod"])
def test_cumulative_1d_and_0d(device, func):
    x = xp.asarray(np.array([1, 2, 3], dtype=np.uint8), device=device)
    out = getattr(xp, func)(x, include_initial=True)
    assert out.dtype == xp.uint64 and out.shape == (4,)
    ref = getattr(np, func)(np.array([1, 2, 3], dtype=np.uint64), include_initial=True)
    np.testing.assert_array_equal(_host(out), ref)
    out = getattr(xp, func)(xp.asarray(np.array(5.0), device=device))
    assert out.shape == (1,) and _host(out)[0] == 5.0


def test_cumulative_dtype_argument(device):
    x = xp.asarray(np.array([100, 100, 100], dtype=np.int8), device=device)
    out = xp.cumulative_sum(x, dtype=xp.int16)
    assert out.dtype == xp.int16
    np.testing.assert_array_equal(_host(out), [100, 200, 300])


# ---- bad input -----------------------------------------------------------------------


ALL_REDUCERS = ["sum", "prod", "max", "min", "mean", "std", "var"]


@pytest.mark.parametrize("func", ALL_REDUCERS + ["cumulative_sum", "cumulative_prod"])
def test_non_array_input(func):
    with pytest.raises(TypeError, match=rf"^{func}: x must be a tessera_array Array\. "
                                        r"Received: x of type list"):
        getattr(xp, func)([1.0, 2.0])


@pytest.mark.parametrize("func", ALL_REDUCERS)
def test_axis_out_of_range(device, func):
    x = xp.asarray(np.ones((2, 3)), device=device)
    # AxisError is both a ValueError and an IndexError, as NumPy's is.
    with pytest.raises(xp.AxisError, match=rf"^{func}: axis must be in \[-2, 2\).*"
                                         r"Received: axis=2"):
        getattr(xp, func)(x, axis=2)
    with pytest.raises(ValueError, match=rf"^{func}: axis must be in .*Received: axis=-3"):
        getattr(xp, func)(x, axis=(0, -3))
    with pytest.raises(ValueError, match=rf"^{func}: axis must not repeat an axis"):
        getattr(xp, func)(x, axis=(1, -1))
    with pytest.raises(TypeError, match=rf"^{func}: axis must be an int.*Received: axis=1.0"):
        getattr(xp, func)(x, axis=1.0)
    with pytest.raises(TypeError, match=rf"^{func}: axis must be .*not a list"):
        getattr(xp, func)(x, axis=[0])
    with pytest.raises(TypeError, match=rf"^{func}: keepdims must be a bool"):
        getattr(xp, func)(x, keepdims="yes")


def test_0d_axis(device):
    x = xp.asarray(np.array(2.5), device=device)
    assert float(xp.sum(x)) == 2.5
    assert float(xp.sum(x, axis=())) == 2.5
    with pytest.raises(ValueError, match=r"^sum: axis is out of range: x is 0-d and has no axes\. "
                                         r"Received: axis=0"):
        xp.sum(x, axis=0)


def test_bad_dtype_argument(device):
    x = xp.asarray(np.ones(3, dtype=np.complex64), device=device)
    with pytest.raises(TypeError, match=r"^sum: dtype=float32 would discard the imaginary"):
        xp.sum(x, dtype=xp.float32)
    with pytest.raises(TypeError, match=r"^prod: dtype must be one of the Array API dtypes.*"
                                        r"Received: dtype='float8'"):
        xp.prod(x, dtype="float8")


def test_bad_correction(device):
    x = xp.asarray(np.ones(3), device=device)
    with pytest.raises(TypeError, match=r"^var: correction must be a real number.*"
                                        r"Received: correction='1'"):
        xp.var(x, correction="1")
    with pytest.raises(TypeError, match=r"^std: correction must be a real number"):
        xp.std(x, correction=True)


def test_cumulative_bad_axis(device):
    x = xp.asarray(np.ones((2, 3)), device=device)
    with pytest.raises(ValueError, match=r"^cumulative_sum: axis must be given for an array "
                                         r"with more than one dimension\. Received: x.ndim=2"):
        xp.cumulative_sum(x)
    with pytest.raises(ValueError, match=r"^cumulative_prod: axis must be in \[-2, 2\)"):
        xp.cumulative_prod(x, axis=5)
    with pytest.raises(TypeError, match=r"^cumulative_sum: include_initial must be a bool"):
        xp.cumulative_sum(x, axis=0, include_initial=None)
