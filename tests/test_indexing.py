"""``__getitem__`` / ``__setitem__`` against NumPy, on every device; bad keys and values."""

from __future__ import annotations

import numpy as np
import pytest
from _fake_backends import FakeBackend

import tessera_array as xp
from tessera_array import _discovery

_ALL = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float32", "float64", "complex64", "complex128"]


@pytest.fixture
def rng():
    return np.random.default_rng(20251212)


@pytest.fixture
def other_device():
    """A second device (a fake accelerator over NumPy)."""
    _discovery.add_backend(FakeBackend("fakeidx", is_host=False))
    try:
        yield xp.Device("fakeidx", 0)
    finally:
        _discovery.remove_backend("fakeidx")


def _np(a):
    return np.asarray(a.to_device("cpu"))


def _sample(rng, dtype, shape):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind in "iu":
        return rng.integers(1, 100, size=shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


# Keys for an array of shape (4, 5, 6); index arrays are given as NumPy arrays and
# converted to tessera Arrays on the test's device.
_KEYS = [
    0, -1, 3, slice(None), slice(1, 3), slice(None, None, -2), slice(10, 20), Ellipsis, None,
    (1, 2), (1, 2, 3), (-4, -5, -6), (slice(None), 0), (Ellipsis, 0), (0, Ellipsis),
    (None, 1, None), (Ellipsis, None), (1, slice(None, None, 2), Ellipsis, None),
    (slice(3, 0, -1), slice(None), slice(-2, None)), (),
    np.array([0, 3, -1]), (np.array([[0], [2]]), np.array([1, 4])),
    (slice(None), np.array([4, 0])), (0, np.array([1, 1, 2]), slice(2, 5)),
    np.ones((4, 5), dtype=bool), (Ellipsis, np.array([True, False, True, False, True, False])),
    np.array(True), np.array(False), np.zeros(4, dtype=bool),
]


def _to_xp_key(key, device):
    if isinstance(key, np.ndarray):
        return xp.asarray(key, device=device)
    if isinstance(key, tuple):
        return tuple(_to_xp_key(k, device) for k in key)
    return key


@pytest.mark.parametrize("dtype", ["bool", "int16", "uint64", "float32", "complex128"])
@pytest.mark.parametrize("key", _KEYS, ids=[repr(k)[:40] for k in _KEYS])
def test_getitem_matches_numpy(device, dtype, key, rng):
    a = _sample(rng, dtype, (4, 5, 6))
    x = xp.asarray(a, device=device)
    out = x[_to_xp_key(key, device)]
    expected = np.asarray(a[key])
    assert isinstance(out, xp.Array)
    assert out.dtype == x.dtype and out.device == device
    assert out.shape == expected.shape
    np.testing.assert_array_equal(_np(out), expected)


def test_getitem_zero_d(device):
    x = xp.asarray([[1.5, 2.5], [3.5, 4.5]], device=device)
    out = x[1, 0]
    assert isinstance(out, xp.Array) and out.shape == () and float(out) == 3.5
    z = xp.asarray(7, device=device)
    assert z[()].shape == () and int(z[()]) == 7
    assert z[...].shape == () and z[None].shape == (1,)
    assert int(x.shape[0]) == 2
    # 0-d integer Arrays and NumPy integers work as integer indices.
    assert float(x[xp.asarray(1, device=device), np.int64(1)]) == 4.5


def test_getitem_int_and_slice_short_path(device):
    """x[i] and x[a:b] (the short path of Array.__getitem__): the element as a 0-d array of
    x's dtype and device, negative and end indices, out of bounds an IndexError; where the
    device's buffers give views themselves (NumPy, CuPy) x[i] is a view, as a row x[i] of
    a 2-D array is (and as torch's t[i] is), so a write to x shows in it."""
    h = np.arange(6, dtype=np.float32) * 1.5
    x = xp.asarray(h, device=device)
    for i in (0, 5, -1, -6):
        e = x[i]
        assert e.shape == () and e.dtype == xp.float32 and e.device == device
        assert float(e) == h[i]
    for key in (slice(1, 4), slice(None, None, -2), slice(4, 1, -1), slice(7, 9)):
        np.testing.assert_array_equal(_np(x[key]), h[key])
    for i in (6, -7):
        with pytest.raises(IndexError):
            x[i]
    e = x[2]
    x[2] = 100.0
    if device.views:
        assert float(e) == 100.0
    assert float(x[2]) == 100.0


def test_getitem_views_and_lists(device):
    x = xp.asarray(np.arange(12).reshape(3, 4), device=device)
    np.testing.assert_array_equal(_np(x[[2, 0]]), np.arange(12).reshape(3, 4)[[2, 0]])
    np.testing.assert_array_equal(_np(x[[True, False, True]]), np.arange(12).reshape(3, 4)[[0, 2]])
    assert x[[]].shape == (0, 4)
    np.testing.assert_array_equal(_np(x[True]), np.arange(12).reshape(1, 3, 4))


def test_getitem_bad_keys(device, other_device):
    x = xp.asarray(np.arange(12.0).reshape(3, 4), device=device)
    with pytest.raises(IndexError, match=r"^__getitem__: index 3 is out of bounds for axis 0 "
                                         r"with size 3"):
        x[3]
    with pytest.raises(IndexError, match=r"^__getitem__: index -5 is out of bounds for axis 1 "
                                         r"with size 4"):
        x[0, -5]
    with pytest.raises(IndexError, match=r"^__getitem__: index 4 is out of bounds for axis 1"):
        x[..., 4]
    with pytest.raises(IndexError, match=r"^__getitem__: too many indices: x has 2 dimension"):
        x[0, 0, 0]
    with pytest.raises(IndexError, match=r"^__getitem__: too many indices: x is 0-d"):
        xp.asarray(1.0, device=device)[0]
    with pytest.raises(IndexError, match=r"^__getitem__: an index can only have a single "
                                         r"ellipsis"):
        x[..., 0, ...]
    with pytest.raises(IndexError, match=r"^__getitem__: only integers, slices.*Received: an "
                                         r"index of type float"):
        x[1.0]
    with pytest.raises(IndexError, match=r"^__getitem__: only integers, slices.*str"):
        x["a"]
    with pytest.raises(IndexError, match=r"^__getitem__: index arrays must have an integer or "
                                         r"boolean dtype. Received: an index array of dtype "
                                         r"float64"):
        x[xp.asarray([0.0], device=device)]
    with pytest.raises(IndexError, match=r"^__getitem__: only integers.*NumPy dtype float64"):
        x[[0.5]]
    with pytest.raises(IndexError, match=r"^__getitem__: .*out of bounds"):
        x[xp.asarray([0, 7], device=device)]
    with pytest.raises(IndexError, match=r"^__getitem__: .*boolean index did not match"):
        x[xp.asarray([True, False], device=device)]
    idx = xp.asarray([0, 1], device=other_device)
    with pytest.raises(xp.DeviceMismatchError, match=r"^__getitem__: the index array is on "
                                                     r"device fakeidx:0 but x is on "):
        x[idx]
    with pytest.raises(xp.DeviceMismatchError, match=r"^__getitem__: the index array"):
        x[0, idx]


# ---- __setitem__ ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", _ALL)
def test_setitem_scalars_and_arrays(device, dtype, rng):
    a = _sample(rng, dtype, (4, 5))
    x = xp.asarray(a.copy(), device=device)
    v = _sample(rng, dtype, (5,))
    expected = a.copy()
    x[1] = xp.asarray(v, device=device)
    expected[1] = v
    x[2:, ::2] = xp.asarray(v[:3], device=device)
    expected[2:, ::2] = v[:3]
    scalar = v[0].item()
    x[0, 0] = scalar
    expected[0, 0] = scalar
    mask = _sample(rng, "bool", (4, 5))
    x[xp.asarray(mask, device=device)] = scalar
    expected[mask] = scalar
    x[xp.asarray([3, 0], device=device), 1] = xp.asarray(v[:2], device=device)
    expected[[3, 0], 1] = v[:2]
    x[...] = x  # same buffer
    assert x.dtype == getattr(xp, dtype) and x.shape == (4, 5)
    np.testing.assert_array_equal(_np(x), expected)


@pytest.mark.parametrize(
    "target, value",
    [("int16", "int8"), ("int64", "uint32"), ("float64", "float32"), ("float64", "int32"),
     ("complex64", "float32"), ("complex128", "int16"), ("int8", "bool"), ("float32", "int8")],
)
def test_setitem_promotes_value(device, target, value, rng):
    x = xp.zeros((2, 3), dtype=getattr(xp, target), device=device)
    v = _sample(rng, value, (3,))
    x[0] = xp.asarray(v, device=device)
    assert x.dtype == getattr(xp, target)
    np.testing.assert_array_equal(_np(x)[0], v.astype(target))


@pytest.mark.parametrize(
    "target, value",
    [("int8", "int16"), ("uint8", "int8"), ("float32", "float64"), ("float32", "int32"),
     ("int64", "float32"), ("float64", "complex64"), ("bool", "int8")],
)
def test_setitem_refuses_unsafe_arrays(device, target, value, rng):
    x = xp.zeros(3, dtype=getattr(xp, target), device=device)
    v = xp.asarray(_sample(rng, value, (3,)), device=device)
    with pytest.raises(TypeError, match=rf"^__setitem__: value of dtype {value} does not promote "
                                        rf"to x's dtype {target}"):
        x[:] = v


@pytest.mark.parametrize(
    "target, value, ok",
    [("bool", True, True), ("int8", True, True), ("float32", 3, True), ("complex64", 2.5, True),
     ("float64", -1e300, True), ("uint64", 2**64 - 1, True), ("bool", 1, False),
     ("int32", 1.0, False), ("float32", 1j, False), ("int64", 1j, False)],
)
def test_setitem_python_scalars(device, target, value, ok):
    x = xp.zeros(3, dtype=getattr(xp, target), device=device)
    if ok:
        x[1] = value
        expected = np.zeros(3, dtype=target)
        expected[1] = value
        np.testing.assert_array_equal(_np(x), expected)
    else:
        with pytest.raises(TypeError, match=rf"^__setitem__: a Python {type(value).__name__} "
                                            rf"value cannot be stored in an array of dtype "
                                            rf"{target}"):
            x[1] = value


def test_setitem_float32_overflow_is_inf(device):
    x = xp.zeros(2, dtype=xp.float32, device=device)
    x[0] = 1e300  # rounds to inf, without a warning
    assert np.isinf(_np(x)[0])


def test_setitem_bad_input(device, other_device):
    x = xp.zeros((2, 3), dtype=xp.int8, device=device)
    with pytest.raises(OverflowError, match=r"^__setitem__: the Python int value=300 is out of "
                                            r"range for the array's dtype int8"):
        x[0, 0] = 300
    with pytest.raises(xp.ScalarOutOfRangeError, match=r"^__setitem__: .*value=-1.*uint8"):
        xp.zeros(2, dtype=xp.uint8, device=device)[0] = -1
    with pytest.raises(TypeError, match=r"^__setitem__: value must be a tessera_array Array or a "
                                        r"Python scalar.*Received: value of type list"):
        x[0] = [1, 2, 3]
    with pytest.raises(ValueError, match=r"^__setitem__: .*broadcast"):
        x[0] = xp.asarray([1, 2], dtype=xp.int8, device=device)
    with pytest.raises(IndexError, match=r"^__setitem__: index 2 is out of bounds for axis 0"):
        x[2] = 1
    with pytest.raises(IndexError, match=r"^__setitem__: index 3 is out of bounds for axis 1"):
        x[0, 3] = 1
    with pytest.raises(xp.DeviceMismatchError, match=r"^__setitem__: value is on device "
                                                     r"fakeidx:0 but x is on "):
        x[0] = xp.asarray([1, 2, 3], dtype=xp.int8, device=other_device)
    with pytest.raises(xp.DeviceMismatchError, match=r"^__setitem__: the index array is on"):
        x[xp.asarray([0], device=other_device)] = 1
    # NumPy scalars are taken as Python scalars.
    x[1, 1] = np.int16(5)
    assert int(x[1, 1]) == 5
    with pytest.raises(TypeError, match=r"^__setitem__: a Python float value"):
        x[1, 1] = np.float32(1.5)
    assert x.dtype == xp.int8
