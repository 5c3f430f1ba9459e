"""Property-based tests with ``hypothesis.extra.array_api`` strategies over tessera_array.

Derandomized (a fixed seed per test) and kept small, so the file runs in seconds.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.array_api import make_strategies_namespace

import tessera_array as xp

xps = make_strategies_namespace(xp, api_version="2025.12")

SETTINGS = settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
SHAPES = xps.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)
SMALL = xps.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)


def _host(x):
    return np.asarray(x.to_device("cpu"))


def _on(device, x):
    return xp.asarray(x, device=device)


def test_namespace_strategies_know_the_version():
    assert xps.api_version == "2025.12"


@SETTINGS
@given(data=st.data())
def test_add_commutes(device, data):
    dtype = data.draw(xps.numeric_dtypes(), label="dtype")
    shapes = data.draw(xps.mutually_broadcastable_shapes(2, max_dims=3, max_side=4),
                       label="shapes")
    x1 = _on(device, data.draw(xps.arrays(dtype, shapes.input_shapes[0]), label="x1"))
    x2 = _on(device, data.draw(xps.arrays(dtype, shapes.input_shapes[1]), label="x2"))
    a, b = xp.add(x1, x2), xp.add(x2, x1)
    assert a.dtype == b.dtype == dtype
    assert a.shape == b.shape == shapes.result_shape
    np.testing.assert_array_equal(_host(a), _host(b))  # NaNs compare equal here


@SETTINGS
@given(data=st.data())
def test_astype_round_trips_through_a_wider_dtype(device, data):
    src = data.draw(xps.scalar_dtypes(), label="src")
    complex_src = xp.isdtype(src, "complex floating")
    wider = [d for d in xp.__array_namespace_info__().dtypes(device=device).values()
             if d != src and xp.can_cast(src, d)
             and xp.isdtype(d, "complex floating") == complex_src]  # complex -> real raises
    if not wider:
        return
    dst = data.draw(st.sampled_from(wider), label="dst")
    x = _on(device, data.draw(xps.arrays(src, SHAPES), label="x"))
    y = xp.astype(xp.astype(x, dst), src)
    assert y.dtype == src and y.shape == x.shape
    np.testing.assert_array_equal(_host(y), _host(x))


@SETTINGS
@given(data=st.data())
def test_reshape_preserves_elements(device, data):
    x = _on(device, data.draw(xps.arrays(xps.scalar_dtypes(), SHAPES), label="x"))
    flat = xp.reshape(x, (-1,))
    assert flat.shape == (x.size,)
    np.testing.assert_array_equal(_host(flat), _host(x).reshape(-1))
    back = xp.reshape(flat, x.shape)
    np.testing.assert_array_equal(_host(back), _host(x))


@SETTINGS
@given(data=st.data())
def test_permute_dims_preserves_elements(device, data):
    x = _on(device, data.draw(xps.arrays(xps.scalar_dtypes(), SHAPES), label="x"))
    perm = tuple(data.draw(st.permutations(range(x.ndim)), label="perm"))
    y = xp.permute_dims(x, perm)
    np.testing.assert_array_equal(_host(y), np.transpose(_host(x), perm))
    inverse = tuple(int(i) for i in np.argsort(perm))
    np.testing.assert_array_equal(_host(xp.permute_dims(y, inverse)), _host(x))


@SETTINGS
@given(data=st.data())
def test_sort_is_sorted(device, data):
    dtype = data.draw(xps.real_dtypes(), label="dtype")
    x = _on(device, data.draw(
        xps.arrays(dtype, SMALL, elements={"allow_nan": False}), label="x"))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1), label="axis")
    descending = data.draw(st.booleans(), label="descending")
    y = _host(xp.sort(x, axis=axis, descending=descending))
    expected = np.sort(_host(x), axis=axis)
    if descending:
        expected = np.flip(expected, axis=axis)
    np.testing.assert_array_equal(y, expected)
    # Sortedness by comparing neighbours (a difference would turn inf - inf into NaN).
    z = np.moveaxis(y, axis, 0)
    assert np.all(z[:-1] >= z[1:]) if descending else np.all(z[:-1] <= z[1:])


@SETTINGS
@given(data=st.data())
def test_concat_then_split_by_slicing(device, data):
    dtype = data.draw(xps.scalar_dtypes(), label="dtype")
    shape = data.draw(SMALL, label="shape")
    x1 = _on(device, data.draw(xps.arrays(dtype, shape), label="x1"))
    x2 = _on(device, data.draw(xps.arrays(dtype, shape), label="x2"))
    y = xp.concat([x1, x2], axis=0)
    n = shape[0]
    np.testing.assert_array_equal(_host(y[:n, ...]), _host(x1))
    np.testing.assert_array_equal(_host(y[n:, ...]), _host(x2))


@pytest.mark.parametrize("dtype", [xp.float32, xp.float64])
@SETTINGS
@given(data=st.data())
def test_sum_matches_numpy(device, dtype, data):
    x = _on(device, data.draw(
        xps.arrays(dtype, SMALL, elements={"min_value": -1e3, "max_value": 1e3}), label="x"))
    expected = np.sum(_host(x).astype(np.float64))
    got = float(xp.sum(x))
    tol = 1e-4 if dtype == xp.float32 else 1e-10
    assert got == pytest.approx(expected, rel=tol, abs=tol * x.size * 1e3)
