"""Creation functions against NumPy, on every device; bad input with message checks.

A fake backend whose device lacks float64/complex128 (tests/_fake_backends.py)
checks the device-dependent defaults and the dtype checks.
"""

from __future__ import annotations

import array as pyarray

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


def _check(out, expected, device):
    assert isinstance(out, xp.Array)
    assert out.device == device
    assert out.dtype == expected.dtype, (out.dtype, expected.dtype)
    assert out.shape == expected.shape, (out.shape, expected.shape)
    np.testing.assert_array_equal(_np(out), expected)


# ---- zeros / ones / empty / full ---------------------------------------------------------


@pytest.mark.parametrize("dtype", _ALL)
@pytest.mark.parametrize("shape", [(), 0, 3, (2, 3), (1, 0, 4)])
def test_zeros_ones_empty(device, dtype, shape):
    dt = getattr(xp, dtype)
    _check(xp.zeros(shape, dtype=dt, device=device), np.zeros(shape, dtype=dtype), device)
    _check(xp.ones(shape, dtype=dt, device=device), np.ones(shape, dtype=dtype), device)
    out = xp.empty(shape, dtype=dt, device=device)
    assert out.shape == np.empty(shape).shape and out.dtype == dt and out.device == device


def test_defaults_and_device_strings(device):
    for f in (xp.zeros, xp.ones, xp.empty):
        out = f((2,), device=str(device))
        assert out.dtype == xp.float64 and out.device is device
    assert xp.zeros(2).device is xp.__array_namespace_info__().default_device()
    assert xp.zeros(np.int64(3), device=device).shape == (3,)
    assert xp.zeros([2, np.int32(2)], device=device).shape == (2, 2)


def test_device_takes_its_string_form():
    """``Device("cuda:1")`` is ``Device("cuda", 1)``, as ``torch.device("cuda:1")`` is (it
    once made a kind "cuda:1" of index 0, named "cuda:1:0", that no backend owns)."""
    assert xp.Device("opencl:1") is xp.Device("opencl", 1)
    assert str(xp.Device("opencl:1")) == "opencl:1" and xp.Device("opencl:1").index == 1
    assert xp.Device("cpu:0") is xp.Device("cpu") is xp.Device("cpu", 0)
    with pytest.raises(ValueError, match=r"^Device: give the index once.*index=1"):
        xp.Device("cuda:1", 1)
    with pytest.raises(ValueError, match=r"must be a non-negative integer.*'cuda:x'"):
        xp.Device("cuda:x")
    with pytest.raises(TypeError, match=r"^Device: kind must be a non-empty string"):
        xp.Device(["cuda"])


@pytest.mark.parametrize("func", [xp.zeros, xp.ones, xp.empty])
def test_bad_shapes(device, func):
    name = func.__name__
    with pytest.raises(ValueError, match=rf"^{name}: shape entries must be >= 0.*shape=\(2, -1\)"):
        func((2, -1), device=device)
    with pytest.raises(TypeError, match=rf"^{name}: shape must be an int or a tuple of ints"):
        func(2.0, device=device)
    with pytest.raises(TypeError, match=rf"^{name}: shape must be"):
        func((2, 1.5), device=device)
    with pytest.raises(TypeError, match=rf"^{name}: shape must be"):
        func(True, device=device)
    with pytest.raises(TypeError, match=rf"^{name}: shape must be.*Received: shape='3'"):
        func("3", device=device)
    with pytest.raises(ValueError, match=rf"^{name}: at most 64 dimensions.*65"):
        func((1,) * 65, device=device)
    with pytest.raises(TypeError, match=rf"^{name}: dtype must be one of the Array API dtypes"):
        func(2, dtype="datetime64", device=device)
    with pytest.raises(ValueError, match=rf"^{name}: no such device"):
        func(2, device="cpu:7")
    with pytest.raises(TypeError, match=rf"^{name}: device must be"):
        func(2, device=3)


@pytest.mark.parametrize(
    "fill, dtype",
    [(True, "bool"), (7, "int64"), (-2.5, "float64"), (1 - 2j, "complex128")],
)
def test_full_default_dtypes(device, fill, dtype):
    _check(xp.full((2, 3), fill, device=device), np.full((2, 3), fill, dtype=dtype), device)


@pytest.mark.parametrize("dtype", _ALL)
def test_full_and_full_like(device, dtype, rng):
    npdt = np.dtype(dtype)
    if npdt.kind == "b":
        fill = True
    elif npdt.kind in "iu":
        fill = int(np.iinfo(npdt).max)  # the extreme value must survive
    elif npdt.kind == "f":
        fill = float(rng.standard_normal())
    else:
        fill = complex(rng.standard_normal(), rng.standard_normal())
    dt = getattr(xp, dtype)
    _check(xp.full((3, 2), fill, dtype=dt, device=device), np.full((3, 2), fill, dtype), device)
    x = xp.asarray(rng.integers(1, 9, size=(2, 4)).astype(dtype), device=device)
    _check(xp.full_like(x, fill), np.full((2, 4), fill, dtype), device)
    _check(xp.zeros_like(x), np.zeros((2, 4), dtype), device)
    _check(xp.ones_like(x), np.ones((2, 4), dtype), device)
    out = xp.empty_like(x)
    assert (out.shape, out.dtype, out.device) == ((2, 4), dt, device)


def test_like_with_dtype_and_device(device):
    x = xp.asarray([[1, 2, 3]], device=device)
    for f in (xp.zeros_like, xp.ones_like, xp.empty_like):
        out = f(x, dtype=xp.float32, device=str(device))
        assert (out.shape, out.dtype, out.device) == ((1, 3), xp.float32, device)
    out = xp.full_like(x, 2.5, dtype=xp.float32)
    _check(out, np.full((1, 3), 2.5, np.float32), device)


def test_full_bad_fill(device):
    with pytest.raises(TypeError, match=r"^full: a Python float fill_value cannot be stored in "
                                        r"an array of dtype int32.*fill_value=1.5"):
        xp.full(2, 1.5, dtype=xp.int32, device=device)
    with pytest.raises(TypeError, match=r"^full: a Python complex fill_value.*float64"):
        xp.full(2, 1j, dtype=xp.float64, device=device)
    with pytest.raises(TypeError, match=r"^full: a Python int fill_value.*dtype bool"):
        xp.full(2, 2, dtype=xp.bool, device=device)
    with pytest.raises(OverflowError, match=r"^full: the Python int fill_value=300 is out of "
                                            r"range for the array's dtype int8"):
        xp.full(2, 300, dtype=xp.int8, device=device)
    with pytest.raises(xp.ScalarOutOfRangeError, match=r"^full: .*fill_value=-1"):
        xp.full(2, -1, dtype=xp.uint8, device=device)
    with pytest.raises(TypeError, match=r"^full: fill_value must be a Python bool, int, float "
                                        r"or complex. Received: fill_value of type str"):
        xp.full(2, "a", device=device)
    x = xp.asarray([1, 2], device=device)
    with pytest.raises(TypeError, match=r"^full_like: a Python float fill_value.*int64"):
        xp.full_like(x, 0.5)
    with pytest.raises(TypeError, match=r"^full_like: x must be a tessera_array Array. "
                                        r"Received: x of type list"):
        xp.full_like([1, 2], 1)
    # NumPy scalars keep their dtype, as in numpy.full.
    _check(xp.full(2, np.float32(1.5), device=device), np.full(2, np.float32(1.5)), device)
    _check(xp.full(2, np.int8(3), dtype=xp.int64, device=device), np.full(2, 3), device)


@pytest.mark.parametrize("func", [xp.zeros_like, xp.ones_like, xp.empty_like])
def test_like_bad_input(device, func):
    name = func.__name__
    with pytest.raises(TypeError, match=rf"^{name}: x must be a tessera_array Array. "
                                        rf"Received: x of type ndarray"):
        func(np.zeros(2))
    x = xp.zeros(2, device=device)
    with pytest.raises(TypeError, match=rf"^{name}: dtype must be one of the Array API dtypes"):
        func(x, dtype="datetime64")


# ---- arange / linspace / eye ---------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [(5,), (2, 9), (2, 9, 3), (9, 2, -3), (5, 5), (5, 0), (-7, 7, 2), (0, -10, -1)],
)
def test_arange_ints(device, args):
    _check(xp.arange(*args, device=device), np.arange(*args, dtype=np.int64), device)


@pytest.mark.parametrize(
    "args", [(2.5,), (0, 1, 0.1), (1.5, -3.0, -0.5), (0, 5.0), (1e-3, 2e-3, 1e-4)]
)
def test_arange_floats(device, args):
    out = xp.arange(*args, device=device)
    expected = np.arange(*args)
    assert out.dtype == xp.float64
    np.testing.assert_allclose(_np(out), expected, rtol=1e-15, atol=0)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint32", "int64", "uint64"])
def test_arange_int_dtypes_exact(device, dtype):
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    step = max((hi - lo) // 7, 1)
    out = xp.arange(lo, hi, step, dtype=getattr(xp, dtype), device=device)
    expected = np.array(list(range(lo, hi, step)), dtype=dtype)
    _check(out, expected, device)
    if info.min < 0:
        out = xp.arange(hi, lo, -step, dtype=getattr(xp, dtype), device=device)
        _check(out, np.array(list(range(hi, lo, -step)), dtype=dtype), device)


def test_arange_large_int64_is_exact(device):
    # NumPy's float64 length computation is off by one for this range.
    start, stop, step = 0, 108086391056891901, 1080863910568919
    out = xp.arange(start, stop, step, device=device)
    assert out.shape == (len(range(start, stop, step)),)
    assert int(out[-1]) == list(range(start, stop, step))[-1]


def test_arange_float32(device):
    out = xp.arange(0, 2, 0.25, dtype=xp.float32, device=device)
    _check(out, np.arange(0, 2, 0.25, dtype=np.float32), device)


def test_arange_bad_input(device):
    with pytest.raises(ValueError, match=r"^arange: step must not be 0"):
        xp.arange(0, 5, 0, device=device)
    with pytest.raises(TypeError, match=r"^arange: an integer dtype needs int start, stop and "
                                        r"step.*start=0.5"):
        xp.arange(0.5, 5, dtype=xp.int32, device=device)
    with pytest.raises(TypeError, match=r"^arange: start must be an int or a float. "
                                        r"Received: start=1j"):
        xp.arange(1j, device=device)
    with pytest.raises(TypeError, match=r"^arange: stop must be an int or a float"):
        xp.arange(0, "5", device=device)
    with pytest.raises(TypeError, match=r"^arange: dtype must be a numeric dtype.*bool"):
        xp.arange(2, dtype=xp.bool, device=device)
    with pytest.raises(ValueError, match=r"^arange: start, stop and step must be finite"):
        xp.arange(0, float("inf"), device=device)
    with pytest.raises(OverflowError, match=r"^arange: the values 0 \.\. 299 do not fit dtype int8"):
        xp.arange(0, 300, dtype=xp.int8, device=device)


@pytest.mark.parametrize("endpoint", [True, False])
@pytest.mark.parametrize("num", [0, 1, 2, 7])
def test_linspace(device, num, endpoint, rng):
    a, b = rng.standard_normal(2) * 10
    out = xp.linspace(float(a), float(b), num, endpoint=endpoint, device=device)
    _check(out, np.linspace(a, b, num, endpoint=endpoint), device)
    out = xp.linspace(1 + 2j, 3 - 1j, num, endpoint=endpoint, device=device)
    _check(out, np.linspace(1 + 2j, 3 - 1j, num, endpoint=endpoint), device)
    out = xp.linspace(0, 1, num, dtype=xp.float32, endpoint=endpoint, device=device)
    _check(out, np.linspace(0, 1, num, endpoint=endpoint, dtype=np.float32), device)


def test_linspace_bad_input(device):
    with pytest.raises(ValueError, match=r"^linspace: num must be >= 0. Received: num=-1"):
        xp.linspace(0, 1, -1, device=device)
    with pytest.raises(TypeError, match=r"^linspace: num must be an int. Received: num=2.5"):
        xp.linspace(0, 1, 2.5, device=device)
    with pytest.raises(TypeError, match=r"^linspace: start must be an int, float or complex. "
                                        r"Received: start of type str"):
        xp.linspace("0", 1, 3, device=device)
    with pytest.raises(TypeError, match=r"^linspace: complex start/stop need a complex dtype"):
        xp.linspace(0, 1j, 3, dtype=xp.float64, device=device)
    with pytest.raises(TypeError, match=r"^linspace: endpoint must be a bool"):
        xp.linspace(0, 1, 3, endpoint=1, device=device)


@pytest.mark.parametrize("dtype", ["int32", "float32", "float64", "complex64", "bool"])
def test_eye(device, dtype):
    for n, m in [(0, None), (1, None), (4, None), (3, 5), (5, 3), (6, 2)]:
        for k in range(-7, 8):
            out = xp.eye(n, m, k=k, dtype=getattr(xp, dtype), device=device)
            _check(out, np.eye(n, m, k=k, dtype=dtype), device)
    _check(xp.eye(3, k=10**30, device=device), np.zeros((3, 3)), device)
    _check(xp.eye(2, device=device), np.eye(2), device)


def test_eye_bad_input(device):
    with pytest.raises(ValueError, match=r"^eye: n_rows and n_cols must be >= 0. "
                                         r"Received: n_rows=-1"):
        xp.eye(-1, device=device)
    with pytest.raises(TypeError, match=r"^eye: n_rows must be an int. Received: n_rows=2.0"):
        xp.eye(2.0, device=device)
    with pytest.raises(TypeError, match=r"^eye: k must be an int. Received: k=None"):
        xp.eye(2, k=None, device=device)


# ---- meshgrid / tril / triu ---------------------------------------------------------------


@pytest.mark.parametrize("indexing", ["xy", "ij"])
def test_meshgrid(device, indexing, rng):
    vecs = [rng.standard_normal(n) for n in (3, 4, 2)]
    out = xp.meshgrid(*(xp.asarray(v, device=device) for v in vecs), indexing=indexing)
    expected = np.meshgrid(*vecs, indexing=indexing)
    assert type(out) is tuple and len(out) == 3
    for o, e in zip(out, expected):
        _check(o, e, device)
    assert xp.meshgrid() == ()
    (one,) = xp.meshgrid(xp.asarray(vecs[0], device=device), indexing=indexing)
    _check(one, vecs[0], device)


def test_meshgrid_bad_input(device, f32_device):
    x = xp.asarray([1.0, 2.0], device=device)
    with pytest.raises(ValueError, match=r"^meshgrid: indexing must be 'xy' or 'ij'. "
                                         r"Received: indexing='yx'"):
        xp.meshgrid(x, x, indexing="yx")
    with pytest.raises(ValueError, match=r"^meshgrid: every array must be 1-D. "
                                         r"Received: arrays\[1\].shape=\(1, 2\)"):
        xp.meshgrid(x, xp.reshape(x, (1, 2)))
    with pytest.raises(TypeError, match=r"^meshgrid: arrays\[0\] must be a tessera_array Array"):
        xp.meshgrid([1, 2], x)
    y = xp.asarray([1.0, 2.0], dtype=xp.float32, device=f32_device)
    with pytest.raises(xp.DeviceMismatchError, match=r"^meshgrid: arrays are on different devices"):
        xp.meshgrid(x, y)


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3), (2, 3, 4), (0, 3), (2, 0, 0)])
def test_tril_triu(device, shape, rng):
    a = rng.standard_normal(shape)
    x = xp.asarray(a, device=device)
    for k in (-10**20, -4, -1, 0, 1, 2, 6, 10**20):
        kk = max(-50, min(50, k))
        _check(xp.tril(x, k=k), np.tril(a, k=kk), device)
        _check(xp.triu(x, k=k), np.triu(a, k=kk), device)
    b = xp.asarray(rng.integers(0, 2, size=(3, 3)).astype(bool), device=device)
    _check(xp.tril(b), np.tril(_np(b)), device)


def test_tril_triu_bad_input(device):
    for f in (xp.tril, xp.triu):
        name = f.__name__
        with pytest.raises(ValueError, match=rf"^{name}: x must have at least 2 dimensions. "
                                             rf"Received: x.shape=\(3,\)"):
            f(xp.ones(3, device=device))
        with pytest.raises(TypeError, match=rf"^{name}: x must be a tessera_array Array"):
            f(np.ones((2, 2)))
        with pytest.raises(TypeError, match=rf"^{name}: k must be an int. Received: k=1.0"):
            f(xp.ones((2, 2), device=device), k=1.0)


# ---- asarray ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "obj, dtype",
    [(True, "bool"), (3, "int64"), (2.5, "float64"), (1j, "complex128"),
     ([1, 2], "int64"), ([True, 2], "int64"), ([1, 2.5], "float64"), ([[1, 1j]], "complex128"),
     ([[True], [False]], "bool"), ([], "float64"), (2**63, "uint64")],
)
def test_asarray_python_objects(device, obj, dtype):
    if obj == 2**63:
        obj = [obj]
    _check(xp.asarray(obj, device=device), np.asarray(obj, dtype=dtype), device)


@pytest.mark.parametrize("dtype", _ALL)
def test_asarray_numpy_and_dtype(device, dtype, rng):
    a = rng.integers(1, 50, size=(3, 4)).astype(dtype)
    _check(xp.asarray(a, device=device), a, device)
    _check(xp.asarray(a.tolist(), dtype=getattr(xp, dtype), device=device), a, device)
    _check(xp.asarray(a[0, 0].item(), dtype=getattr(xp, dtype), device=device), a[0, 0], device)


def test_asarray_copy_semantics(device):
    a = np.arange(6.0)
    x = xp.asarray(a, device=device)
    if device.backend.is_host:
        shared = xp.asarray(a, copy=False, device=device)
        a[0] = 42.0
        assert float(shared[0]) == 42.0
    copied = xp.asarray(a, copy=True, device=device)
    a[1] = -1.0
    assert float(copied[1]) == 1.0
    # Arrays: copy=None/False return the array itself; copy=True a new buffer.
    assert xp.asarray(x) is x
    assert xp.asarray(x, copy=False, dtype=xp.float64) is x
    y = xp.asarray(x, copy=True)
    y[0] = 7.0
    assert float(x[0]) != 7.0
    _check(xp.asarray(x, dtype=xp.float32), _np(x).astype(np.float32), device)


def test_asarray_copy_false_needs_copy(device):
    x = xp.asarray([1, 2, 3], device=device)
    with pytest.raises(ValueError, match=r"^asarray: copy=False but converting dtype int64 to "
                                         r"float64 needs a copy"):
        xp.asarray(x, dtype=xp.float64, copy=False)
    with pytest.raises(ValueError, match=r"^asarray: copy=False but obj is a Python sequence"):
        xp.asarray([1, 2], copy=False, device=device)
    with pytest.raises(ValueError, match=r"^asarray: copy=False but obj is a Python scalar"):
        xp.asarray(1.0, copy=False, device=device)
    if device.backend.is_host:
        with pytest.raises(ValueError, match=r"^asarray: .*copy"):
            xp.asarray(np.arange(3), dtype=xp.float64, copy=False, device=device)


def test_asarray_nested_arrays_and_buffers(device):
    parts = [xp.asarray([1.0, 2.0], device=device), xp.asarray([3.0, 4.0], device=device)]
    _check(xp.asarray(parts), np.array([[1.0, 2.0], [3.0, 4.0]]), device)
    _check(xp.asarray([xp.asarray(1, device=device), 2]), np.array([1, 2]), device)
    _check(xp.asarray(bytearray(b"\x01\x02"), device=device), np.array([1, 2], np.uint8), device)
    _check(xp.asarray(b"\x05", device=device), np.array([5], np.uint8), device)
    buf = pyarray.array("d", [1.5, -2.0])
    _check(xp.asarray(buf, device=device), np.array([1.5, -2.0]), device)
    _check(xp.asarray(memoryview(buf), device=device), np.array([1.5, -2.0]), device)
    _check(xp.asarray(np.float32(2.5), device=device), np.asarray(2.5, np.float32), device)
    if xp._helpers.supports_dtype(device, xp.float16):  # an extension dtype: kept
        _check(xp.asarray(np.ones(2, np.float16), device=device), np.ones(2, np.float16),
               device)


def test_asarray_bad_input(device):
    with pytest.raises(TypeError, match=r"^asarray: obj must hold numbers or booleans.*<U1"):
        xp.asarray(["a"], device=device)
    with pytest.raises(ValueError, match=r"^asarray: .*inhomogeneous"):
        xp.asarray([[1, 2], [3]], device=device)
    with pytest.raises(TypeError, match=r"^asarray: obj must hold numbers or booleans.*object"):
        xp.asarray([2**70], device=device)
    with pytest.raises(OverflowError, match=r"^asarray: the Python int obj=300 is out of range "
                                            r"for the array's dtype int8"):
        xp.asarray(300, dtype=xp.int8, device=device)
    with pytest.raises(OverflowError, match=r"^asarray: .*obj=" + str(2**64)):
        xp.asarray(2**64, device=device)
    with pytest.raises(TypeError, match=r"^asarray: a complex value cannot be converted to "
                                        r"dtype float64"):
        xp.asarray(1j, dtype=xp.float64, device=device)
    with pytest.raises(TypeError, match=r"^asarray: converting a complex array to dtype float32"):
        xp.asarray(xp.asarray([1j], device=device), dtype=xp.float32)
    with pytest.raises(TypeError, match=r"^asarray: dtype must be one of the Array API dtypes"):
        xp.asarray([1], dtype="datetime64", device=device)
    with pytest.raises(TypeError, match=r"^asarray: copy must be True, False or None"):
        xp.asarray([1], copy="yes", device=device)


# ---- DLPack -------------------------------------------------------------------------------


class _Producer:
    """A foreign DLPack producer (only the protocol, not an array type NumPy knows)."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


@pytest.mark.parametrize("dtype", _ALL)
def test_from_dlpack_roundtrips(device, dtype, rng):
    a = rng.integers(0, 2 if dtype == "bool" else 50, size=(2, 3)).astype(dtype)
    x = xp.asarray(a, device=device)
    _check(xp.from_dlpack(x), a, device)
    _check(xp.from_dlpack(x, copy=True), a, device)
    cpu = x.to_device("cpu")
    np.testing.assert_array_equal(np.from_dlpack(cpu), a)
    _check(xp.from_dlpack(a, device=device), a, device)
    _check(xp.from_dlpack(_Producer(a), device=device), a, device)
    _check(xp.asarray(_Producer(a), device=device), a, device)


def test_from_dlpack_copy_and_views():
    a = np.arange(4.0)
    view = xp.from_dlpack(a, copy=False)
    a[0] = 9.0
    assert float(view[0]) == 9.0
    copied = xp.from_dlpack(a, copy=True)
    a[1] = -5.0
    assert float(copied[1]) == 1.0
    assert view.device == xp.Device("cpu")
    x = xp.asarray([1.0, 2.0])
    back = np.from_dlpack(x)
    x[0] = 3.0
    assert back[0] == 3.0  # np.from_dlpack shares the buffer of a cpu Array


def test_from_dlpack_bad_input(f32_device):
    with pytest.raises(AttributeError, match=r"^from_dlpack: x must implement __dlpack__ and "
                                             r"__dlpack_device__. Received: x of type list"):
        xp.from_dlpack([1, 2])
    # bfloat16 through DLPack is NumPy's importer's call: before NumPy 2.5 a TypeError
    # naming kDLBfloat; NumPy 2.5 takes a bfloat16 ndarray (then the values must hold)
    try:
        got = xp.from_dlpack(np.ones(2, xp.bfloat16._np))
    except TypeError as err:
        assert str(err).startswith("from_dlpack: the numpy backend cannot import bfloat16 "
                                   "DLPack data"), err
    else:
        assert got.dtype is xp.bfloat16
        np.testing.assert_array_equal(np.asarray(got).astype(np.float32), [1.0, 1.0])
    with pytest.raises(xp.MissingCapabilityError, match=r"^from_dlpack: device fakef32:0 does "
                                                        r"not support dtype float64"):
        xp.from_dlpack(np.ones(2), device=f32_device)
    with pytest.raises(ValueError, match=r"^from_dlpack: copy=False but the fakef32 backend"):
        xp.from_dlpack(np.ones(2, np.float32), device=f32_device, copy=False)
    x = xp.asarray([1.0])
    with pytest.raises(ValueError, match=r"^asarray: copy=False but the array is on cpu and "
                                         r"device=fakef32:0"):
        xp.from_dlpack(xp.astype(x, xp.float32), device=f32_device, copy=False)

    class Elsewhere(_Producer):
        def __dlpack_device__(self):
            return (9, 0)  # a VPI device: no backend owns it

    with pytest.raises(BufferError, match=r"^from_dlpack: x lives on DLPack device \(9, 0\)"):
        xp.from_dlpack(Elsewhere(np.ones(2)))


# ---- devices without float64 ------------------------------------------------------------


def test_device_defaults_without_float64(f32_device):
    dev = f32_device
    for f in (xp.zeros, xp.ones, xp.empty):
        assert f(2, device=dev).dtype == xp.float32
    assert xp.eye(2, device=dev).dtype == xp.float32
    assert xp.arange(0.5, 3, device=dev).dtype == xp.float32
    assert xp.arange(3, device=dev).dtype == xp.int64
    assert xp.linspace(0, 1, 3, device=dev).dtype == xp.float32
    assert xp.linspace(0, 1j, 3, device=dev).dtype == xp.complex64
    assert xp.full(2, 1.5, device=dev).dtype == xp.float32
    assert xp.full(2, 1j, device=dev).dtype == xp.complex64
    assert xp.asarray(1.5, device=dev).dtype == xp.float32
    assert xp.asarray([1.5, 2], device=dev).dtype == xp.float32
    assert xp.asarray([1j], device=dev).dtype == xp.complex64
    _check(xp.asarray([1.5, 2.5], device=dev), np.array([1.5, 2.5], np.float32), dev)


@pytest.mark.parametrize(
    "call",
    [
        lambda d: xp.zeros(2, dtype=xp.float64, device=d),
        lambda d: xp.ones(2, dtype=xp.complex128, device=d),
        lambda d: xp.empty(2, dtype=xp.float64, device=d),
        lambda d: xp.full(2, 1.0, dtype=xp.float64, device=d),
        lambda d: xp.eye(2, dtype=xp.float64, device=d),
        lambda d: xp.arange(2, dtype=xp.float64, device=d),
        lambda d: xp.linspace(0, 1, 2, dtype=xp.float64, device=d),
        lambda d: xp.asarray(np.ones(2), device=d),
        lambda d: xp.asarray([1.0], dtype=xp.float64, device=d),
        lambda d: xp.zeros_like(xp.ones(2, dtype=xp.float32, device=d), dtype=xp.float64),
        lambda d: xp.asarray(xp.ones(2), device=d),
    ],
)
def test_missing_dtype_on_device(f32_device, call):
    with pytest.raises(xp.MissingCapabilityError,
                       match=r"^\w+: device fakef32:0 does not support dtype (float64|complex128)"
                             r"\. Supported on fakef32:0: bool, .*float32, complex64\."):
        call(f32_device)
