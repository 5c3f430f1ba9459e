"""NumPy's protocols on tessera arrays (tessera_array/_numpy_interop.py).

Each case runs the same NumPy call on NumPy arrays (the reference) and on tessera
arrays: the tessera call must return tessera arrays on the operands' device with
NumPy's dtype, shape and values. A fake non-host backend checks that the
translated calls never touch the host and that the others refuse to.
"""

from __future__ import annotations

import numpy as np
import pytest
from _fake_backends import FakeBackend

import tessera_array as xp
from tessera_array import _discovery

RNG_SEED = 20251201


def _inputs(kind):
    rng = np.random.default_rng(RNG_SEED)
    if kind == "f":  # two float64 (3, 4) arrays
        return rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    if kind == "f32":
        return (rng.standard_normal((3, 4)).astype(np.float32),
                rng.standard_normal((3, 4)).astype(np.float32))
    if kind == "unit":  # inside (-1, 1): asin, acos, atanh
        return rng.uniform(-0.9, 0.9, (3, 4)), rng.uniform(-0.9, 0.9, (3, 4))
    if kind == "pos":  # > 1: log, sqrt, acosh
        return rng.uniform(1.1, 5.0, (3, 4)), rng.uniform(1.1, 5.0, (3, 4))
    if kind == "i":
        return rng.integers(-9, 10, (3, 4)), rng.integers(1, 10, (3, 4))
    if kind == "i32":
        return (rng.integers(-9, 10, (3, 4)).astype(np.int32),
                rng.integers(1, 10, (3, 4)).astype(np.int32))
    if kind == "u":  # small non-negative ints for shifts
        return rng.integers(0, 50, (3, 4)), rng.integers(0, 5, (3, 4))
    if kind == "b":
        return rng.random((3, 4)) > 0.5, rng.random((3, 4)) > 0.5
    if kind == "c":
        return (rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4)),
                rng.standard_normal((3, 4)) + 1j * rng.standard_normal((3, 4)))
    if kind == "sq":  # well-conditioned square matrices
        a = rng.standard_normal((4, 4)) + 4 * np.eye(4)
        return a, rng.standard_normal((4, 4))
    if kind == "spd":
        a = rng.standard_normal((4, 4))
        return a @ a.T + 4 * np.eye(4), rng.standard_normal((4,))
    if kind == "sorted":
        return np.sort(rng.standard_normal(8)), rng.standard_normal(5)
    raise ValueError(kind)


def _on(device, arrays):
    # copies: on a host backend asarray shares memory, and some cases write in place
    return tuple(xp.asarray(a, device=device, copy=True) for a in arrays)


def _same(result, expected, device):
    """``result`` (tessera) matches ``expected`` (NumPy) in type, device, dtype, values."""
    if isinstance(expected, tuple):
        assert isinstance(result, tuple) and len(result) == len(expected), result
        for r, e in zip(result, expected):
            _same(r, e, device)
        return
    if not isinstance(expected, (np.ndarray, np.generic)):
        assert result == expected
        return
    assert result.__class__ is xp.Array, type(result)
    assert result.device is device
    assert result.dtype == expected.dtype, (result.dtype, expected.dtype)
    assert result.shape == np.shape(expected)
    host = np.asarray(result.to_device("cpu"))
    if expected.dtype.kind in "fc":
        np.testing.assert_allclose(host, expected, rtol=1e-12, atol=1e-13)
    else:
        np.testing.assert_array_equal(host, expected)


def _check(device, kind, call):
    arrays = _inputs(kind)
    expected = call(*arrays)
    result = call(*_on(device, arrays))
    _same(result, expected, device)
    return result


# ---- ufuncs -----------------------------------------------------------------------------

UNARY_UFUNCS = [
    (np.absolute, "f"), (np.negative, "f"), (np.positive, "f"), (np.exp, "f"),
    (np.expm1, "f"), (np.log, "pos"), (np.log1p, "pos"), (np.log2, "pos"), (np.log10, "pos"),
    (np.sqrt, "pos"), (np.square, "f"), (np.sin, "f"), (np.cos, "f"), (np.tan, "f"),
    (np.arcsin, "unit"), (np.arccos, "unit"), (np.arctan, "f"), (np.sinh, "f"),
    (np.cosh, "f"), (np.tanh, "f"), (np.arcsinh, "f"), (np.arccosh, "pos"),
    (np.arctanh, "unit"), (np.ceil, "f"), (np.floor, "f"), (np.trunc, "f"), (np.rint, "f"),
    (np.sign, "f"), (np.signbit, "f"), (np.isfinite, "f"), (np.isnan, "f"), (np.isinf, "f"),
    (np.reciprocal, "pos"), (np.conjugate, "c"), (np.logical_not, "b"), (np.invert, "i"),
    (np.exp, "i"), (np.sqrt, "c"),
]
BINARY_UFUNCS = [
    (np.add, "f"), (np.subtract, "f"), (np.multiply, "f"), (np.divide, "f"),
    (np.true_divide, "i"), (np.floor_divide, "i"), (np.remainder, "i"), (np.power, "pos"),
    (np.arctan2, "f"), (np.hypot, "f"), (np.copysign, "f"), (np.nextafter, "f"),
    (np.logaddexp, "f"), (np.maximum, "f"), (np.minimum, "f"), (np.equal, "i"),
    (np.not_equal, "i"), (np.less, "f"), (np.less_equal, "f"), (np.greater, "f"),
    (np.greater_equal, "f"), (np.logical_and, "b"), (np.logical_or, "b"),
    (np.logical_xor, "b"), (np.bitwise_and, "i"), (np.bitwise_or, "i"), (np.bitwise_xor, "i"),
    (np.left_shift, "u"), (np.right_shift, "u"), (np.add, "i32"), (np.multiply, "c"),
]


def _uid(case):
    return f"{case[0].__name__}-{case[1]}"


@pytest.mark.parametrize("case", UNARY_UFUNCS, ids=_uid)
def test_unary_ufuncs(device, case):
    ufunc, kind = case
    _check(device, kind, lambda a, b: ufunc(a))


@pytest.mark.parametrize("case", BINARY_UFUNCS, ids=_uid)
def test_binary_ufuncs(device, case):
    ufunc, kind = case
    _check(device, kind, lambda a, b: ufunc(a, b))


def test_ufunc_goes_through_the_namespace(device, monkeypatch):
    calls = []
    real = xp.asin

    def spy(x):
        calls.append(x)
        return real(x)

    monkeypatch.setattr(xp, "asin", spy)
    x = xp.asarray([0.25, -0.5], device=device)
    r = np.arcsin(x)
    assert calls == [x]
    _same(r, np.arcsin(np.array([0.25, -0.5])), device)


def test_matmul_and_vecdot_ufuncs(device):
    _check(device, "sq", lambda a, b: np.matmul(a, b))
    _check(device, "f", lambda a, b: np.vecdot(a, b))
    _check(device, "f", lambda a, b: np.vecdot(a.T, b.T, axis=0))


def test_scalars_and_numpy_operands(device):
    a, b = _inputs("f32")
    x = xp.asarray(a, device=device)
    _same(np.add(x, 1), np.add(a, 1), device)  # Python scalars are weak: float32
    _same(np.multiply(2.5, x), np.multiply(2.5, a), device)
    _same(np.multiply(x, np.float64(2.0)), np.multiply(a, np.float64(2.0)), device)  # strong
    _same(np.multiply(x, np.float32(2.0)), np.multiply(a, np.float32(2.0)), device)
    if device.backend.is_host:
        _same(np.add(b, x), np.add(b, a), device)  # a NumPy array operand joins the device
        _same(b + x, b + a, device)  # ndarray.__add__ defers to the ufunc protocol
        _same(np.add(x, [1, 2, 3, 4]), np.add(a, [1, 2, 3, 4]), device)


# ---- ufunc methods -------------------------------------------------------------------------

REDUCE_CASES = [
    ("add", "f", {}), ("add", "i", {"axis": 1}), ("add", "b", {}),
    ("multiply", "f", {"axis": None}), ("multiply", "i32", {"axis": 0, "keepdims": True}),
    ("maximum", "f", {"axis": 1, "keepdims": True}), ("minimum", "i", {}),
    ("logical_and", "b", {"axis": 1}), ("logical_or", "b", {"axis": None}),
    ("add", "f32", {"axis": 1, "dtype": np.float64}),
]


@pytest.mark.parametrize("case", REDUCE_CASES, ids=lambda c: f"{c[0]}-{c[1]}-{sorted(c[2])}")
def test_ufunc_reduce(device, case):
    name, kind, kwargs = case
    ufunc = getattr(np, name)
    _check(device, kind, lambda a, b: ufunc.reduce(a, **kwargs))


def test_ufunc_reduce_goes_to_the_statistical_function(device, monkeypatch):
    calls = []
    real = xp.max

    def spy(x, **kwargs):
        calls.append(kwargs)
        return real(x, **kwargs)

    monkeypatch.setattr(xp, "max", spy)
    x = xp.asarray([[1.0, 5.0], [3.0, 2.0]], device=device)
    _same(np.maximum.reduce(x), np.array([3.0, 5.0]), device)
    assert calls == [{"axis": 0, "keepdims": False}]


@pytest.mark.parametrize("kind", ["f", "i32", "b"])
@pytest.mark.parametrize("name", ["add", "multiply"])
def test_ufunc_accumulate(device, name, kind):
    ufunc = getattr(np, name)
    _check(device, kind, lambda a, b: ufunc.accumulate(a))
    _check(device, kind, lambda a, b: ufunc.accumulate(a, axis=1))


def test_other_ufunc_methods_go_through_numpy_on_the_host(device):
    if not device.backend.is_host:
        pytest.skip("NumPy itself runs only on a host backend")
    a, b = _inputs("f")
    x, y = _on(device, (a, b))
    _same(np.add.outer(x[0], y[0]), np.add.outer(a[0], b[0]), device)
    _same(np.add.reduce(x, initial=2.0), np.add.reduce(a, initial=2.0), device)


# ---- functions -------------------------------------------------------------------------------

FUNCTION_CASES = [
    ("sum", "f", lambda a, b: np.sum(a)),
    ("sum-axis-keepdims", "i", lambda a, b: np.sum(a, axis=1, keepdims=True)),
    ("sum-dtype", "i32", lambda a, b: np.sum(a, dtype=np.float32)),
    ("prod", "i", lambda a, b: np.prod(a, axis=0)),
    ("mean", "f", lambda a, b: np.mean(a)),
    ("mean-axis0", "f", lambda a, b: np.mean(a, axis=0)),
    ("mean-int", "i", lambda a, b: np.mean(a, axis=1)),
    ("std-ddof", "f", lambda a, b: np.std(a, ddof=1)),
    ("var-axis", "f", lambda a, b: np.var(a, axis=1, keepdims=True)),
    ("max", "f", lambda a, b: np.max(a, axis=0)),
    ("amin", "i", lambda a, b: np.amin(a)),
    ("all", "b", lambda a, b: np.all(a, axis=1)),
    ("any", "b", lambda a, b: np.any(a)),
    ("argmax", "f", lambda a, b: np.argmax(a)),
    ("argmin-axis", "f", lambda a, b: np.argmin(a, axis=1)),
    ("count_nonzero", "i", lambda a, b: np.count_nonzero(a, axis=0)),
    ("cumsum-flat", "f", lambda a, b: np.cumsum(a)),
    ("cumsum-axis", "i32", lambda a, b: np.cumsum(a, axis=1)),
    ("cumprod", "i", lambda a, b: np.cumprod(a, axis=0)),
    ("diff", "f", lambda a, b: np.diff(a, axis=0)),
    ("concatenate", "f", lambda a, b: np.concatenate([a, b])),
    ("concatenate-axis1", "f", lambda a, b: np.concatenate((a, b), axis=1)),
    ("stack", "f", lambda a, b: np.stack([a, b], axis=1)),
    ("where", "f", lambda a, b: np.where(a > 0, a, b)),
    ("where-scalar", "f", lambda a, b: np.where(a > 0, a, 0.0)),
    ("where-1arg", "f", lambda a, b: np.where(a > 0)),
    ("nonzero", "i", lambda a, b: np.nonzero(a)),
    ("transpose", "f", lambda a, b: np.transpose(a)),
    ("transpose-axes", "f", lambda a, b: np.transpose(a[None], (2, 0, 1))),
    ("permute_dims", "f", lambda a, b: np.permute_dims(a, (1, 0))),
    ("matrix_transpose", "f", lambda a, b: np.matrix_transpose(a)),
    ("reshape", "f", lambda a, b: np.reshape(a, (4, 3))),
    ("reshape-int", "f", lambda a, b: np.reshape(a, -1)),
    ("ravel", "f", lambda a, b: np.ravel(a)),
    ("squeeze", "f", lambda a, b: np.squeeze(a[None, :, None])),
    ("expand_dims", "f", lambda a, b: np.expand_dims(a, 1)),
    ("swapaxes", "f", lambda a, b: np.swapaxes(a, 0, 1)),
    ("flip", "f", lambda a, b: np.flip(a, axis=1)),
    ("roll", "f", lambda a, b: np.roll(a, 2, axis=1)),
    ("moveaxis", "f", lambda a, b: np.moveaxis(a, 0, -1)),
    ("tile", "f", lambda a, b: np.tile(a, (2, 1))),
    ("repeat", "f", lambda a, b: np.repeat(a, 2, axis=0)),
    ("broadcast_to", "f", lambda a, b: np.broadcast_to(a[0], (2, 4))),
    ("broadcast_arrays", "f", lambda a, b: tuple(np.broadcast_arrays(a[0], b[:, :1]))),
    ("meshgrid", "f", lambda a, b: tuple(np.meshgrid(a[0], b[0], indexing="ij"))),
    ("tril", "sq", lambda a, b: np.tril(a, k=-1)),
    ("triu", "sq", lambda a, b: np.triu(a)),
    ("zeros_like", "f", lambda a, b: np.zeros_like(a)),
    ("ones_like-dtype", "f", lambda a, b: np.ones_like(a, dtype=np.int32)),
    ("full_like", "i", lambda a, b: np.full_like(a, 7)),
    ("copy", "f", lambda a, b: np.copy(a)),
    ("astype", "f", lambda a, b: np.astype(a, np.float32)),
    ("sort", "f", lambda a, b: np.sort(a)),
    ("sort-flat", "f", lambda a, b: np.sort(a, axis=None)),
    ("argsort", "f", lambda a, b: np.argsort(a, axis=0)),
    ("searchsorted", "sorted", lambda a, b: np.searchsorted(a, b)),
    ("searchsorted-right", "sorted", lambda a, b: np.searchsorted(a, b, side="right")),
    ("take", "f", lambda a, b: np.take(a, np.array([2, 0]) if isinstance(a, np.ndarray)
                                       else xp.asarray([2, 0], device=a.device), axis=1)),
    ("clip", "f", lambda a, b: np.clip(a, -0.5, 0.5)),
    ("round", "f", lambda a, b: np.round(a * 10)),
    ("real", "c", lambda a, b: np.real(a)),
    ("imag", "c", lambda a, b: np.imag(a)),
    ("isin", "i", lambda a, b: np.isin(a, b)),
    # the order of unique_values is unspecified (NumPy >= 2.3 does not sort)
    ("unique_values", "i", lambda a, b: np.sort(np.unique_values(a))),
    ("tensordot", "f", lambda a, b: np.tensordot(a, b, axes=([1], [1]))),
    ("outer", "f", lambda a, b: np.outer(a[0], b[1])),
    ("trace", "sq", lambda a, b: np.trace(a)),
    ("diagonal", "sq", lambda a, b: np.diagonal(a, offset=1)),
    ("linalg.inv", "sq", lambda a, b: np.linalg.inv(a)),
    ("linalg.det", "sq", lambda a, b: np.linalg.det(a)),
    ("linalg.solve", "sq", lambda a, b: np.linalg.solve(a, b)),
    ("linalg.cholesky", "spd", lambda a, b: np.linalg.cholesky(a)),
    ("linalg.eigvalsh", "spd", lambda a, b: np.linalg.eigvalsh(a)),
    ("linalg.svd-values", "sq", lambda a, b: np.linalg.svd(a, compute_uv=False)),
    ("linalg.matrix_rank", "sq", lambda a, b: np.linalg.matrix_rank(a)),
    ("linalg.vector_norm", "f", lambda a, b: np.linalg.vector_norm(a, axis=1)),
    ("linalg.matrix_norm", "sq", lambda a, b: np.linalg.matrix_norm(a)),
    ("linalg.matrix_power", "sq", lambda a, b: np.linalg.matrix_power(a, 3)),
]


@pytest.mark.parametrize("case", FUNCTION_CASES, ids=lambda c: c[0])
def test_functions(device, case):
    _, kind, call = case
    _check(device, kind, call)


def test_function_goes_through_the_namespace(device, monkeypatch):
    calls = []
    real = xp.concat

    def spy(arrays, /, **kwargs):
        calls.append((len(arrays), kwargs))
        return real(arrays, **kwargs)

    monkeypatch.setattr(xp, "concat", spy)
    a, b = _inputs("f")
    x, y = _on(device, (a, b))
    _same(np.concatenate([x, y], axis=1), np.concatenate([a, b], axis=1), device)
    assert calls == [(2, {"axis": 1})]


def test_metadata_functions(device):
    a, _ = _inputs("f32")
    x = xp.asarray(a, device=device)
    assert np.shape(x) == (3, 4)
    assert np.ndim(x) == 2
    assert np.size(x) == 12 and np.size(x, 1) == 4
    assert np.result_type(x, np.float64) == np.float64
    assert np.result_type(x, 1.0) == np.float32
    assert np.can_cast(x, np.float64) and not np.can_cast(x, np.int8)
    assert np.result_type(x, xp.int8) == np.float32  # tessera dtypes are understood
    assert np.can_cast(x, xp.float64)


def test_numpy_functions_without_a_namespace_twin_run_in_numpy_on_the_host(device):
    if not device.backend.is_host:
        pytest.skip("NumPy itself runs only on a host backend")
    _check(device, "i", lambda a, b: np.unique(a))
    _check(device, "i", lambda a, b: np.unique(a, return_counts=True))
    _check(device, "f", lambda a, b: np.histogram(a, bins=4))
    _check(device, "f", lambda a, b: np.median(a, axis=0))
    _check(device, "f", lambda a, b: np.sum(a, where=a > 0))  # an argument not translated
    a, b = _inputs("f")
    x, _ = _on(device, (a, b))
    _same(np.sum(x, where=x > 0, dtype=xp.float32),  # a tessera dtype reaches NumPy
          np.sum(a, where=a > 0, dtype=np.float32), device)
    a, b = _inputs("f")
    x, y = _on(device, (a, b))
    assert np.allclose(x, x) is True
    assert np.array_equal(x, y) is False
    # a dtype outside the standard stays a NumPy array
    obj = np.add(x, 1, dtype=object)
    assert isinstance(obj, np.ndarray) and obj.dtype == object


# ---- out= ----------------------------------------------------------------------------------


def test_out_tessera_array(device):
    a, b = _inputs("f")
    x, out = _on(device, (a, b))
    r = np.add(x, 1.0, out=out)
    assert r is out
    _same(out, a + 1.0, device)
    r = np.exp(x, out=(out,))
    assert r is out
    _same(out, np.exp(a), device)
    total = xp.asarray(0.0, device=device)
    assert np.sum(x, out=total) is total
    _same(total, np.sum(a), device)
    # in place, and a same-kind cast into a narrower float
    np.multiply(x, 2.0, out=x)
    _same(x, a * 2.0, device)
    (out32,) = _on(device, (b.astype(np.float32),))
    np.add(x, 1.0, out=out32)
    _same(out32, (a * 2.0 + 1.0).astype(np.float32), device)
    # the result broadcasts into out, as in NumPy
    wide = xp.asarray(np.zeros((2, 3, 4)), device=device)
    np.add(x, 1.0, out=wide)
    _same(wide, np.broadcast_to(a * 2.0 + 1.0, (2, 3, 4)).copy(), device)


def test_out_errors(device):
    a, _ = _inputs("i")
    x = xp.asarray(a, device=device)
    out = xp.asarray(np.zeros((3, 4), dtype=np.int64), device=device)
    with pytest.raises(TypeError, match=r"numpy\.exp: cannot cast the result from float64 to "
                                        r"out's dtype under the 'same_kind' rule\. "
                                        r"Received: out\.dtype=int64"):
        np.exp(x, out=out)
    small = xp.asarray(np.zeros((4,), dtype=np.int64), device=device)
    with pytest.raises(ValueError, match=r"numpy\.add: the result of shape \(3, 4\) does not "
                                         r"broadcast to out\. Received: out\.shape=\(4,\)"):
        np.add(x, 1, out=small)
    with pytest.raises(TypeError, match=r"numpy\.sum: out must be a tessera_array Array or a "
                                        r"NumPy array\. Received: out of type list"):
        np.sum(x, out=[0])


def test_out_numpy_array_on_the_host(device):
    if not device.backend.is_host:
        pytest.skip("a NumPy out= needs a host backend")
    a, b = _inputs("f")
    x, target = _on(device, (a, b))
    out = np.empty((3, 4))
    assert np.add(x, 1.0, out=out) is out
    np.testing.assert_array_equal(out, a + 1.0)
    # an argument that is not translated: NumPy writes straight into the tessera array
    mask = a > 0
    r = np.add(x, 1.0, out=target, where=mask)
    assert r is target
    _same(target, np.where(mask, a + 1.0, b), device)


def test_ufunc_dtype_and_like_shape_stay_on_the_device(device):
    """NumPy's dtype= of a ufunc call (the operands cast to it) and shape= of the *_like
    functions (a new array on the operand's device), as Dask calls them on its chunks."""
    a = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    x = xp.asarray(a, device=device)
    r = np.add(x, x, dtype=np.float64)
    assert isinstance(r, xp.Array) and r.dtype == xp.float64 and r.device == device
    np.testing.assert_array_equal(np.asarray(r.to_device("cpu")), np.add(a, a, dtype=np.float64))
    z = np.zeros_like(x, shape=(4, 1))
    assert z.shape == (4, 1) and z.dtype == xp.float32 and z.device == device
    np.testing.assert_array_equal(np.asarray(z.to_device("cpu")), np.zeros((4, 1)))
    f = np.full_like(x, 7, shape=3, dtype=np.int32)
    assert f.dtype == xp.int32 and f.device == device
    np.testing.assert_array_equal(np.asarray(f.to_device("cpu")), [7, 7, 7])
    assert np.ones_like(x, shape=()).shape == ()


# ---- protocol manners ---------------------------------------------------------------------


class _Foreign:
    """An array-like of another library that handles no ufunc."""

    def __array_ufunc__(self, *args, **kwargs):
        return NotImplemented

    def __array_function__(self, *args, **kwargs):
        return NotImplemented


def test_foreign_operands_are_declined(device):
    x = xp.asarray([1.0, 2.0], device=device)
    with pytest.raises(TypeError, match="NotImplemented"):
        np.add(x, _Foreign())
    with pytest.raises(TypeError, match="no implementation found"):
        np.concatenate([x, _Foreign()])


# ---- a non-host device: translated calls stay there, the rest refuse ---------------------


@pytest.fixture
def accel():
    """The device of a fake accelerator backend (is_host False) over NumPy's ops."""
    _discovery.add_backend(FakeBackend("fakeaccel", is_host=False))
    yield xp.Device("fakeaccel", 0)
    _discovery.remove_backend("fakeaccel")


def test_non_host_device_translated_calls(accel):
    a, b = _inputs("f")
    x, y = _on(accel, (a, b))
    _same(np.exp(x), np.exp(a), accel)
    _same(np.add(x, y), a + b, accel)
    _same(np.sum(x, axis=1), np.sum(a, axis=1), accel)
    _same(np.concatenate([x, y]), np.concatenate([a, b]), accel)
    _same(np.add.reduce(x), np.add.reduce(a), accel)
    assert np.shape(x) == (3, 4)


def test_non_host_device_refuses_implicit_host_copies(accel):
    a, b = _inputs("f")
    x = xp.asarray(a, device=accel)
    with pytest.raises(xp.ImplicitHostCopyError,
                       match=r"numpy\.median: numpy\.median has no tessera_array equivalent, so "
                             r"it would run in NumPy, but the array is on device fakeaccel:0 .*"
                             r"copy explicitly: numpy\.median\(numpy\.asarray\(x\.to_device"
                             r"\('cpu'\)\)"):
        np.median(x)
    with pytest.raises(xp.ImplicitHostCopyError, match=r"numpy\.add\.outer: .*fakeaccel:0"):
        np.add.outer(x, x)
    with pytest.raises(xp.ImplicitHostCopyError, match=r"numpy\.add: the argument where="):
        np.add(x, 1.0, where=a > 0)
    with pytest.raises(xp.DeviceMismatchError,
                       match=r"numpy\.add: a NumPy array and an array on device fakeaccel:0 "
                             r"were combined.*asarray\(a, device='fakeaccel:0'\)"):
        np.add(x, b)
    with pytest.raises(xp.ImplicitHostCopyError, match=r"numpy\.add: out is a NumPy array"):
        np.add(x, 1.0, out=np.empty((3, 4)))
    with pytest.raises(xp.ImplicitHostCopyError, match=r"__array__: the array is on device"):
        np.asarray(x)
    assert isinstance(xp.ImplicitHostCopyError("m"), TypeError)
