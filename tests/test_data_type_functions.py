"""Data type functions against NumPy and the standard's tables; bad input with messages."""

from __future__ import annotations

import numpy as np
import pytest

import tessera_array as xp

_ALL = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float32", "float64", "complex64", "complex128"]


@pytest.fixture
def rng():
    return np.random.default_rng(20251212)



def _np(a):
    return np.asarray(a.to_device("cpu"))


def _sample(rng, dtype, shape=(3, 4)):
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind in "iu":
        return rng.integers(1, 100, size=shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) * 50 + 1j * rng.standard_normal(shape)).astype(dtype)
    return (rng.standard_normal(shape) * 50).astype(dtype)


# ---- astype -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "src, dst",
    # complex -> real is refused (test_astype_bad_input)
    [(s, d) for s in _ALL for d in _ALL if not (s.startswith("complex") and d[0] in "iuf")],
)
def test_astype_matches_numpy(device, src, dst, rng):
    a = _sample(rng, src)
    x = xp.asarray(a, device=device)
    out = xp.astype(x, getattr(xp, dst))
    assert out.dtype == getattr(xp, dst) and out.device == device and out.shape == a.shape
    np.testing.assert_array_equal(_np(out), a.astype(dst))


def test_astype_copy_and_device(device):
    x = xp.asarray([1.0, 2.0], device=device)
    assert xp.astype(x, xp.float64, copy=False) is x
    y = xp.astype(x, xp.float64)
    assert y is not x
    y[0] = 5.0
    assert float(x[0]) == 1.0
    z = xp.astype(x, xp.float32, copy=False)
    assert z.dtype == xp.float32
    w = xp.astype(x, "int32", device=str(device))
    assert w.dtype == xp.int32 and w.device == device


def test_astype_nan_and_overflow_are_quiet(device):
    x = xp.asarray([np.nan, np.inf, 1e300], device=device)
    out = xp.astype(x, xp.int32)  # no RuntimeWarning (warnings are errors here)
    assert out.dtype == xp.int32
    f = xp.astype(x, xp.float32)
    assert np.isinf(_np(f)[2])


def test_astype_bad_input(device, f32_device):
    x = xp.asarray([1 + 2j], device=device)
    with pytest.raises(TypeError, match=r"^astype: casting a complex array to dtype float64 "
                                        r"would drop the imaginary part"):
        xp.astype(x, xp.float64)
    with pytest.raises(TypeError, match=r"^astype: casting a complex array to dtype int8"):
        xp.astype(x, xp.int8)
    np.testing.assert_array_equal(_np(xp.astype(x, xp.bool)), [True])
    with pytest.raises(TypeError, match=r"^astype: x must be a tessera_array Array. "
                                        r"Received: x of type list"):
        xp.astype([1, 2], xp.int8)
    with pytest.raises(TypeError, match=r"^astype: dtype must be one of the Array API dtypes"):
        xp.astype(x, "datetime64")
    with pytest.raises(TypeError, match=r"^astype: copy must be True or False. Received: copy=None"):
        xp.astype(x, xp.complex64, copy=None)
    y = xp.asarray([1.0, 2.0], dtype=xp.float32, device=f32_device)
    with pytest.raises(xp.MissingCapabilityError, match=r"^astype: device fakef32:0 does not "
                                                        r"support dtype float64"):
        xp.astype(y, xp.float64)
    with pytest.raises(xp.MissingCapabilityError, match=r"^astype: device fakef32:0 .*float64"):
        xp.astype(xp.asarray([1.0], device=device), xp.float64, device=f32_device)
    moved = xp.astype(xp.asarray([1.5], device=device), xp.float32, device=f32_device)
    assert moved.device == f32_device and moved.dtype == xp.float32


# ---- can_cast / result_type ---------------------------------------------------------------

# The standard's promotion lattice (dtypes of one kind), written out independently.
_SAME_KIND = {
    "int8": ["int8", "int16", "int32", "int64"],
    "int16": ["int16", "int32", "int64"],
    "int32": ["int32", "int64"],
    "int64": ["int64"],
    "uint8": ["uint8", "uint16", "uint32", "uint64", "int16", "int32", "int64"],
    "uint16": ["uint16", "uint32", "uint64", "int32", "int64"],
    "uint32": ["uint32", "uint64", "int64"],
    "uint64": ["uint64"],
    "float32": ["float32", "float64", "complex64", "complex128"],
    "float64": ["float64", "complex128"],
    "complex64": ["complex64", "complex128"],
    "complex128": ["complex128"],
    "bool": ["bool"],
}


@pytest.mark.parametrize("src", _ALL)
@pytest.mark.parametrize("dst", _ALL)
def test_can_cast(src, dst):
    out = xp.can_cast(getattr(xp, src), getattr(xp, dst))
    assert out is np.can_cast(src, dst, casting="safe")
    if dst in _SAME_KIND[src]:
        assert out is True
    if np.dtype(src).kind == np.dtype(dst).kind and dst not in _SAME_KIND[src]:
        assert out is False


def test_can_cast_arrays_and_devices(device, f32_device):
    x = xp.asarray([1], dtype=xp.int8, device=device)
    assert xp.can_cast(x, xp.int16) is True
    assert xp.can_cast(x, xp.uint8) is False
    y = xp.asarray([1.0], dtype=xp.float32, device=f32_device)
    assert xp.can_cast(xp.float32, xp.float64) is True
    assert xp.can_cast(y, xp.float64) is False  # the device has no float64
    with pytest.raises(TypeError, match=r"^can_cast: to must be one of the Array API dtypes"):
        xp.can_cast(xp.int8, "int7")
    with pytest.raises(TypeError, match=r"^can_cast: from_ must be one of the Array API dtypes"):
        xp.can_cast([1], xp.int8)


@pytest.mark.parametrize("a", _ALL)
@pytest.mark.parametrize("b", _ALL)
def test_result_type_pairs(device, a, b):
    expected = np.promote_types(a, b)
    da, db = getattr(xp, a), getattr(xp, b)
    assert xp.result_type(da, db) == expected
    assert xp.result_type(xp.empty(1, dtype=da, device=device), db) == expected
    assert xp.result_type(db, da) is xp.result_type(da, db)


@pytest.mark.parametrize(
    "args, expected",
    [
        ((xp.int8, 1), xp.int8),
        ((xp.int8, 1.0), xp.float64),
        ((xp.uint16, True), xp.uint16),
        ((xp.bool, 1), xp.int64),
        ((xp.bool, True), xp.bool),
        ((xp.float32, 1), xp.float32),
        ((xp.float32, 1.0), xp.float32),
        ((xp.float32, 1j), xp.complex64),
        ((xp.float64, 1j), xp.complex128),
        ((xp.int16, 1j), xp.complex128),
        ((xp.complex64, 2.0, 1), xp.complex64),
        ((1, xp.int8, xp.int16, 2.5), xp.float64),
    ],
)
def test_result_type_with_scalars(device, args, expected):
    assert xp.result_type(*args) is expected
    arrays = tuple(xp.empty(1, dtype=a, device=device) if isinstance(a, xp.DType) else a
                   for a in args)
    assert xp.result_type(*arrays) is expected


def test_result_type_device_context(f32_device):
    x = xp.empty(1, dtype=xp.int8, device=f32_device)
    assert xp.result_type(x, 1.0) is xp.float32  # the device's default float
    assert xp.result_type(xp.int8, 1.0) is xp.float64
    y = xp.empty(1, dtype=xp.float32, device=f32_device)
    with pytest.raises(xp.MissingCapabilityError, match=r"^result_type: the promoted dtype "
                                                        r"float64 is not supported on device "
                                                        r"fakef32:0"):
        xp.result_type(y, xp.float64)
    with pytest.raises(xp.DeviceMismatchError, match=r"^result_type: arrays are on different "
                                                     r"devices"):
        xp.result_type(y, xp.empty(1, dtype=xp.float32))


def test_result_type_bad_input():
    with pytest.raises(ValueError, match=r"^result_type: at least one array or dtype is "
                                         r"required. Received: 2 Python scalar"):
        xp.result_type(1, 2.0)
    with pytest.raises(ValueError, match=r"^result_type: at least one array or dtype"):
        xp.result_type()
    with pytest.raises(TypeError, match=r"^result_type: arrays_and_dtypes must be one of the "
                                        r"Array API dtypes.*Received: arrays_and_dtypes=\[1\]"):
        xp.result_type(xp.int8, [1])


# ---- finfo / iinfo / isdtype ----------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128"])
def test_finfo(device, dtype):
    real = {"complex64": "float32", "complex128": "float64"}.get(dtype, dtype)
    ref = np.finfo(real)
    for arg in (getattr(xp, dtype), xp.ones(1, dtype=getattr(xp, dtype), device=device)):
        info = xp.finfo(arg)
        assert info.bits == ref.bits and type(info.bits) is int
        for name in ("eps", "max", "min", "smallest_normal"):
            value = getattr(info, name)
            assert type(value) is float and value == float(getattr(ref, name))
        assert info.dtype is getattr(xp, real)


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64",
                                   "uint8", "uint16", "uint32", "uint64"])
def test_iinfo(device, dtype):
    ref = np.iinfo(dtype)
    for arg in (getattr(xp, dtype), xp.ones(1, dtype=getattr(xp, dtype), device=device)):
        info = xp.iinfo(arg)
        assert (info.bits, info.min, info.max) == (ref.bits, int(ref.min), int(ref.max))
        assert all(type(v) is int for v in (info.bits, info.min, info.max))
        assert info.dtype is getattr(xp, dtype)


def test_finfo_iinfo_bad_input():
    with pytest.raises(ValueError, match=r"^finfo: type must be a floating-point dtype.*"
                                        r"Received: dtype=int32"):
        xp.finfo(xp.int32)
    with pytest.raises(ValueError, match=r"^iinfo: type must be an integer dtype.*"
                                        r"Received: dtype=float32"):
        xp.iinfo(xp.ones(1, dtype=xp.float32))
    with pytest.raises(ValueError, match=r"^iinfo: type must be an integer dtype.*dtype=bool"):
        xp.iinfo(xp.bool)
    with pytest.raises(TypeError, match=r"^finfo: type must be one of the Array API dtypes"):
        xp.finfo("datetime64")


_KINDS = {
    "bool": {"bool"},
    "signed integer": {"int8", "int16", "int32", "int64"},
    "unsigned integer": {"uint8", "uint16", "uint32", "uint64"},
    "integral": {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"},
    "real floating": {"float32", "float64"},
    "complex floating": {"complex64", "complex128"},
}
_KINDS["numeric"] = _KINDS["integral"] | _KINDS["real floating"] | _KINDS["complex floating"]


@pytest.mark.parametrize("dtype", _ALL)
def test_isdtype(dtype):
    dt = getattr(xp, dtype)
    for kind, members in _KINDS.items():
        assert xp.isdtype(dt, kind) is (dtype in members)
    assert xp.isdtype(dt, dt) is True
    assert xp.isdtype(dt, xp.int8) is (dtype == "int8")
    assert xp.isdtype(dt, ("bool", xp.float32, "complex floating")) is (
        dtype in {"bool", "float32", "complex64", "complex128"}
    )
    assert xp.isdtype(dt, ()) is False


def test_isdtype_bad_input():
    with pytest.raises(ValueError, match=r"^isdtype: unknown kind.*Received: kind='floating'"):
        xp.isdtype(xp.float32, "floating")
    with pytest.raises(TypeError, match=r"^isdtype: kind tuples cannot be nested"):
        xp.isdtype(xp.float32, (("bool",),))
    with pytest.raises(TypeError, match=r"^isdtype: dtype must be one of the Array API dtypes"):
        xp.isdtype([1], "bool")
    with pytest.raises(TypeError, match=r"^isdtype: kind must be one of the Array API dtypes"):
        xp.isdtype(xp.float32, 3)
