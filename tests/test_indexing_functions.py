"""take and take_along_axis against NumPy, on every device; bad input with message checks."""

from __future__ import annotations

import numpy as np
import pytest

import tessera_array as xp


def _to_np(a):
    return np.asarray(a.to_device("cpu"))


def _check(out, expected):
    assert isinstance(out, xp.Array)
    assert out.dtype == expected.dtype, (out.dtype, expected.dtype)
    assert out.shape == expected.shape, (out.shape, expected.shape)
    np.testing.assert_array_equal(_to_np(out), expected)


@pytest.fixture
def rng():
    return np.random.default_rng(20251212)


def _data(rng, shape, dtype):
    data = rng.standard_normal(shape) * 10
    if np.dtype(dtype).kind == "c":
        data = data + 1j * rng.standard_normal(shape)
    return np.asarray(data.astype(dtype))


@pytest.mark.parametrize("dtype", ["int8", "uint32", "float32", "float64", "complex64", "bool"])
@pytest.mark.parametrize("idx_dtype", ["int64", "int32", "uint8", "uint64"])
@pytest.mark.parametrize(
    "shape, axis", [((7,), None), ((7,), 0), ((7,), -1), ((3, 5), 1), ((3, 5), -2), ((2, 3, 4), 1)]
)
def test_take(device, rng, dtype, idx_dtype, shape, axis):
    data = _data(rng, shape, dtype)
    n = shape[0 if axis is None else axis]
    low = 0 if np.dtype(idx_dtype).kind == "u" else -n
    idx = rng.integers(low, n, size=6).astype(idx_dtype)
    out = xp.take(xp.asarray(data, device=device), xp.asarray(idx, device=device), axis=axis)
    _check(out, np.take(data, idx, axis=0 if axis is None else axis))
    assert out.device == device


def test_take_empty_indices(device, rng):
    data = _data(rng, (3, 4), "float32")
    idx = np.zeros(0, dtype=np.int64)
    out = xp.take(xp.asarray(data, device=device), xp.asarray(idx, device=device), axis=1)
    _check(out, np.take(data, idx, axis=1))


def test_take_errors(device):
    x = xp.asarray(np.arange(12.0).reshape(3, 4), device=device)
    i = xp.asarray(np.array([0, 1]), device=device)
    with pytest.raises(ValueError, match=r"take: axis is required when x has more than one dim"):
        xp.take(x, i)
    with pytest.raises(IndexError, match=r"take: indices must be in \[-n, n\) .* axis 1.*index 4"):
        xp.take(x, xp.asarray(np.array([4]), device=device), axis=1)
    with pytest.raises(IndexError, match=r"take: indices must be in \[-n, n\) .* axis 0.*index -4"):
        xp.take(x, xp.asarray(np.array([-4]), device=device), axis=0)
    with pytest.raises(IndexError, match=r"take: axis must be in \[-2, 2\).*Received: axis=2"):
        xp.take(x, i, axis=2)
    with pytest.raises(TypeError, match=r"take: indices must have an integer dtype.*float64"):
        xp.take(x, xp.asarray(np.array([0.0]), device=device), axis=0)
    with pytest.raises(TypeError, match=r"take: indices must be a tessera_array Array.*list"):
        xp.take(x, [0, 1], axis=0)
    with pytest.raises(TypeError, match=r"take: x must be a tessera_array Array.*ndarray"):
        xp.take(np.ones(3), i)
    with pytest.raises(TypeError, match=r"take: axis must be an int"):
        xp.take(x, i, axis=1.0)


@pytest.mark.parametrize("dtype", ["int16", "float32", "complex128", "bool"])
@pytest.mark.parametrize(
    "shape, axis, new_len",
    [
        ((6,), -1, 4),
        ((6,), 0, 0),
        ((3, 5), 1, 7),
        ((3, 5), 0, 2),
        ((2, 3, 4), -2, 5),
        ((2, 3, 4), 0, 1),
    ],
)
def test_take_along_axis(device, rng, dtype, shape, axis, new_len):
    data = _data(rng, shape, dtype)
    n = shape[axis]
    ishape = list(shape)
    ishape[axis] = new_len
    idx = rng.integers(-n, n, size=ishape)
    x = xp.asarray(data, device=device)
    out = xp.take_along_axis(x, xp.asarray(idx, device=device), axis=axis)
    _check(out, np.take_along_axis(data, idx, axis=axis))
    if axis == -1:
        _check(
            xp.take_along_axis(x, xp.asarray(idx, device=device)), np.take_along_axis(data, idx, -1)
        )


def test_take_along_axis_broadcasts(device, rng):
    data = _data(rng, (1, 5), "float64")
    idx = rng.integers(0, 5, size=(3, 2)).astype(np.int32)
    out = xp.take_along_axis(
        xp.asarray(data, device=device), xp.asarray(idx, device=device), axis=1
    )
    _check(out, np.take_along_axis(data, idx, axis=1))


def test_take_along_axis_sort_roundtrip(device, rng):
    data = _data(rng, (4, 6), "float64")
    order = np.argsort(data, axis=1)
    out = xp.take_along_axis(
        xp.asarray(data, device=device), xp.asarray(order, device=device), axis=1
    )
    _check(out, np.sort(data, axis=1))


def test_take_along_axis_none(device, rng):
    data = _data(rng, (2, 3), "float32")
    idx = np.array([5, 0, -1])
    out = xp.take_along_axis(
        xp.asarray(data, device=device), xp.asarray(idx, device=device), axis=None
    )
    _check(out, np.take_along_axis(data, idx, axis=None))


def test_take_along_axis_errors(device):
    x = xp.asarray(np.arange(12.0).reshape(3, 4), device=device)
    i2 = xp.asarray(np.zeros((3, 2), dtype=np.int64), device=device)
    with pytest.raises(ValueError, match=r"take_along_axis: indices must have as many dimensions"):
        xp.take_along_axis(x, xp.asarray(np.array([0, 1]), device=device))
    with pytest.raises(
        ValueError, match=r"take_along_axis: .*broadcast-compatible .* axis 0 has sizes 3 and 2"
    ):
        xp.take_along_axis(x, xp.asarray(np.zeros((2, 2), dtype=np.int64), device=device), axis=1)
    with pytest.raises(IndexError, match=r"take_along_axis: indices must be in \[-n, n\).*index 4"):
        xp.take_along_axis(x, xp.asarray(np.full((3, 1), 4), device=device), axis=1)
    with pytest.raises(IndexError, match=r"take_along_axis: axis must be in \[-2, 2\)"):
        xp.take_along_axis(x, i2, axis=2)
    with pytest.raises(TypeError, match=r"take_along_axis: indices must have an integer dtype"):
        xp.take_along_axis(x, xp.asarray(np.zeros((3, 2)), device=device))
    with pytest.raises(ValueError, match=r"take_along_axis: with axis=None, indices must be 1-D"):
        xp.take_along_axis(x, i2, axis=None)
    with pytest.raises(TypeError, match=r"take_along_axis: indices must be a tessera_array Array"):
        xp.take_along_axis(x, np.zeros((3, 2), dtype=np.int64))
