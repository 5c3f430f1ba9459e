"""The Array object's non-operator parts: attributes, conversions, devices, DLPack."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

import tessera_array as xp



@pytest.fixture
def rng():
    return np.random.default_rng(20251212)



def _np(a):
    return np.asarray(a.to_device("cpu"))


# ---- attributes ------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3), (2, 0, 4)])
def test_attributes(device, shape, rng):
    a = rng.standard_normal(shape).astype(np.float32)
    x = xp.asarray(a, device=device)
    assert x.dtype is xp.float32
    assert x.device is device
    assert x.shape == shape and type(x.shape) is tuple
    assert x.ndim == len(shape)
    assert x.size == a.size and type(x.size) is int
    assert x.__array_namespace__() is xp
    assert x.__array_namespace__(api_version="2025.12") is xp
    assert x.__array_namespace__(api_version="2023.12") is xp


def test_transposes(device, rng):
    a = rng.standard_normal((2, 3, 4))
    x = xp.asarray(a, device=device)
    np.testing.assert_array_equal(_np(x[0].T), a[0].T)
    np.testing.assert_array_equal(_np(x.mT), np.swapaxes(a, -1, -2))
    with pytest.raises(ValueError, match=r"^Array.T: x.T is defined for 2-D arrays only.*"
                                         r"Received: x.ndim=3"):
        _ = x.T


def test_bad_attributes(device):
    x = xp.asarray([1.0], device=device)
    with pytest.raises(ValueError, match=r"^__array_namespace__: api_version must be one of "
                                         r".*Received: api_version='2019.01'"):
        x.__array_namespace__(api_version="2019.01")
    with pytest.raises(TypeError, match=r"^Array: arrays are not built by calling Array\(\)"):
        xp.Array([1.0])


# ---- conversions ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype, value",
    [("bool", True), ("int8", -7), ("uint64", 2**64 - 1), ("int64", -(2**63)),
     ("float32", 1.5), ("float64", -0.0), ("complex64", 1 - 2j)],
)
def test_scalar_conversions(device, dtype, value):
    x = xp.asarray(value, dtype=getattr(xp, dtype), device=device)
    assert type(bool(x)) is bool and bool(x) is bool(value)
    assert type(complex(x)) is complex and complex(x) == complex(value)
    if dtype.startswith("complex"):
        with pytest.raises(TypeError, match=r"^__int__: cannot convert a complex array to int"):
            int(x)
        with pytest.raises(TypeError, match=r"^__float__: cannot convert a complex array"):
            float(x)
        return
    assert type(int(x)) is int and int(x) == int(value)
    assert type(float(x)) is float and float(x) == float(value)
    if dtype[0] in "iu":
        assert type(x.__index__()) is int and x.__index__() == value
        assert [10, 20, 30][xp.asarray(1, dtype=getattr(xp, dtype), device=device)] == 20
    else:
        with pytest.raises(TypeError, match=rf"^__index__: only integer arrays can be used as an "
                                            rf"index. Received: x.dtype={dtype}"):
            x.__index__()


def test_scalar_conversion_special_values(device):
    assert bool(xp.asarray(float("nan"), device=device)) is True
    assert bool(xp.asarray(0j, device=device)) is False
    assert math.isnan(float(xp.asarray(float("nan"), device=device)))
    assert complex(xp.asarray(float("inf"), device=device)) == complex(float("inf"), 0)
    with pytest.raises(ValueError):
        int(xp.asarray(float("nan"), device=device))
    with pytest.raises(OverflowError):
        int(xp.asarray(float("-inf"), device=device))


@pytest.mark.parametrize("shape", [(1,), (1, 1), (2,), (0,)])
@pytest.mark.parametrize("method", ["__bool__", "__int__", "__float__", "__complex__",
                                    "__index__"])
def test_scalar_conversions_need_0d(device, shape, method):
    x = xp.ones(shape, dtype=xp.int32, device=device)
    with pytest.raises(TypeError, match=rf"^{method}: only 0-d arrays can be converted to Python "
                                        rf"scalars.*Received: x.shape=\({shape[0]}"):
        getattr(x, method)()


def test_len_iter_repr(device):
    x = xp.asarray([[1, 2], [3, 4], [5, 6]], dtype=xp.int16, device=device)
    assert len(x) == 3
    rows = list(x)
    assert len(rows) == 3 and all(isinstance(r, xp.Array) and r.shape == (2,) for r in rows)
    assert [int(v) for v in xp.asarray([4, 5], device=device)] == [4, 5]
    with pytest.raises(TypeError, match=r"len\(\) of a 0-d array"):
        len(xp.asarray(1, device=device))
    with pytest.raises(TypeError, match=r"iteration over a 0-d array"):
        iter(xp.asarray(1, device=device)).__next__()
    text = repr(x)
    assert text.startswith("Array(") and "dtype=int16" in text
    if str(device) != "cpu":
        assert f"device={device}" in text


def test_pickle_roundtrip(device, rng):
    a = rng.standard_normal((2, 3))
    x = xp.asarray(a, device=device)
    y = pickle.loads(pickle.dumps(x))
    assert y.device is device and y.dtype is x.dtype
    np.testing.assert_array_equal(_np(y), a)


# ---- host interop and devices ----------------------------------------------------------------


def test_array_protocol_on_host():
    x = xp.asarray([1.0, 2.0])
    a = np.asarray(x)
    a[0] = 5.0
    assert float(x[0]) == 5.0  # np.asarray shares a cpu Array's buffer
    assert np.asarray(x, dtype=np.float32).dtype == np.float32
    c = np.array(x, copy=True)
    c[1] = -1.0
    assert float(x[1]) == 2.0


def test_array_protocol_refuses_device_arrays(f32_device):
    x = xp.asarray([1.0, 2.0], dtype=xp.float32, device=f32_device)
    with pytest.raises(xp.ImplicitHostCopyError, match=r"^__array__: the array is on device "
                                                       r"fakef32:0"):
        np.asarray(x)
    np.testing.assert_array_equal(np.asarray(x.to_device("cpu")), [1.0, 2.0])


def test_to_device(device, f32_device):
    x = xp.asarray([1.5, 2.5], dtype=xp.float32, device=device)
    assert x.to_device(device) is x
    assert x.to_device(str(device)) is x
    y = x.to_device(f32_device)
    assert y.device is f32_device and y.dtype is xp.float32
    back = y.to_device(device)
    back[0] = 9.0
    assert float(x[0]) == 1.5  # a transfer copies
    np.testing.assert_array_equal(_np(y), [1.5, 2.5])
    with pytest.raises(ValueError, match=r"^to_device: stream is not supported by the"):
        x.to_device(device, stream=1)
    with pytest.raises(xp.MissingCapabilityError, match=r"^to_device: device fakef32:0 does not "
                                                        r"support dtype float64"):
        xp.asarray([1.0], device=device).to_device(f32_device)
    missing = f"{device.kind}:99"  # the loaded backend has no such device
    with pytest.raises(ValueError, match=rf"^to_device: no such device.*{missing}"):
        x.to_device(missing)
    with pytest.raises(TypeError, match=r"^to_device: device must be"):
        x.to_device(0)


# ---- DLPack --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint32", "float32", "complex128"])
def test_dlpack_methods(device, dtype, rng):
    a = rng.integers(0, 2, size=(2, 3)).astype(dtype)
    x = xp.asarray(a, device=device).to_device("cpu")
    dev_type, dev_id = x.__dlpack_device__()
    assert (int(dev_type), dev_id) == (1, 0)
    x.__dlpack__()
    x.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=True)
    np.testing.assert_array_equal(np.from_dlpack(x), a)
    np.testing.assert_array_equal(np.from_dlpack(x, copy=True), a)
    with pytest.raises(BufferError):
        x.__dlpack__(dl_device=(2, 0))
