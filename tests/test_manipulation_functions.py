"""Manipulation functions against NumPy, on every device; bad input with message checks."""

from __future__ import annotations

import numpy as np
import pytest

import tessera_array as xp

_DTYPES = ["bool", "int8", "uint16", "int64", "float32", "float64", "complex64"]


def _random(rng, shape, dtype="float64"):
    """Random, never all-zero data of ``dtype``."""
    dtype = np.dtype(dtype)
    if dtype.kind == "b":
        out = rng.integers(0, 2, size=shape).astype(bool)
    elif dtype.kind in "iu":
        out = rng.integers(1, 100, size=shape).astype(dtype)
    elif dtype.kind == "c":
        out = (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    else:
        out = rng.standard_normal(shape).astype(dtype)
    return np.asarray(out)


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


# ---- broadcasting ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "shapes",
    [
        [(3,)],
        [(2, 1), (3,)],
        [(4, 1, 3), (5, 1), ()],
        [(0, 3), (1, 3)],
        [(2, 1, 1), (1, 4, 1), (3,)],
    ],
)
def test_broadcast_arrays(device, rng, shapes):
    data = [_random(rng, s, dt) for s, dt in zip(shapes, ["float32", "int16", "bool"])]
    out = xp.broadcast_arrays(*(xp.asarray(d, device=device) for d in data))
    assert isinstance(out, tuple)
    for o, e in zip(out, np.broadcast_arrays(*data)):
        _check(o, e)
        assert o.device == device


def test_broadcast_arrays_none():
    assert xp.broadcast_arrays() == ()


def test_broadcast_arrays_errors(device):
    a = xp.asarray(np.ones((2, 3)), device=device)
    b = xp.asarray(np.ones((4,)), device=device)
    with pytest.raises(ValueError, match=r"broadcast_arrays: shapes are not broadcast-compatible"):
        xp.broadcast_arrays(a, b)
    with pytest.raises(TypeError, match=r"broadcast_arrays: arrays\[1\] must be a tessera_array"):
        xp.broadcast_arrays(a, np.ones(3))


@pytest.mark.parametrize(
    "shapes", [(), ((2, 3),), ((2, 1), (3,)), ((1,), (4, 1, 5), ()), ((0,), (1,)), ([5, 1], (1, 7))]
)
def test_broadcast_shapes(shapes):
    out = xp.broadcast_shapes(*shapes)
    assert out.__class__ is tuple
    assert out == np.broadcast_shapes(*(tuple(s) for s in shapes))


def test_broadcast_shapes_errors():
    with pytest.raises(ValueError, match=r"broadcast_shapes: .*axis -1 has sizes 3 and 4"):
        xp.broadcast_shapes((2, 3), (4,))
    with pytest.raises(TypeError, match=r"broadcast_shapes: shapes\[0\] must be an int"):
        xp.broadcast_shapes((2.0, 3))
    with pytest.raises(ValueError, match=r"broadcast_shapes: shapes\[1\] must hold ints >= 0"):
        xp.broadcast_shapes((2,), (-1,))
    with pytest.raises(TypeError, match=r"broadcast_shapes: shapes\[0\] must be a tuple"):
        xp.broadcast_shapes("ab")


@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize(
    "shape, target", [((3,), (2, 3)), ((2, 1), (4, 2, 5)), ((), (3,)), ((1,), (0,))]
)
def test_broadcast_to(device, rng, dtype, shape, target):
    data = _random(rng, shape, dtype)
    out = xp.broadcast_to(xp.asarray(data, device=device), target)
    _check(out, np.broadcast_to(data, target))


def test_broadcast_to_errors(device):
    x = xp.asarray(np.ones((2, 3)), device=device)
    with pytest.raises(ValueError, match=r"broadcast_to: x cannot be broadcast to shape \(3, 3\)"):
        xp.broadcast_to(x, (3, 3))
    with pytest.raises(ValueError, match=r"broadcast_to: .*fewer dimensions.*shape=\(3,\)"):
        xp.broadcast_to(x, (3,))
    with pytest.raises(ValueError, match=r"broadcast_to: shape must hold ints >= 0"):
        xp.broadcast_to(x, (-1, 3))
    with pytest.raises(TypeError, match=r"broadcast_to: x must be a tessera_array Array"):
        xp.broadcast_to(np.ones(3), (3,))


# ---- joining and splitting --------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, -1, -2, None])
@pytest.mark.parametrize(
    "dtypes",
    [
        ("float32", "float32"),
        ("int8", "int16", "uint8"),
        ("float32", "float64"),
        ("bool", "bool"),
        ("complex64", "float64"),
    ],
)
def test_concat(device, rng, axis, dtypes):
    data = []
    for i, dt in enumerate(dtypes):
        shape = [2, 3]
        if axis is not None:
            shape[axis] = i + 1
        data.append(_random(rng, tuple(shape), dt))
    out = xp.concat([xp.asarray(d, device=device) for d in data], axis=axis)
    expected = np.concatenate(data, axis=axis, dtype=np.result_type(*data))
    _check(out, expected)
    assert out.device == device


def test_concat_default_axis_and_tuple(device, rng):
    data = [_random(rng, (i, 2)) for i in (1, 0, 3)]
    out = xp.concat(tuple(xp.asarray(d, device=device) for d in data))
    _check(out, np.concatenate(data))


def test_concat_zero_d_flattened(device):
    out = xp.concat(
        [
            xp.asarray(np.float32(1.5), device=device),
            xp.asarray(np.arange(3, dtype=np.float32), device=device),
        ],
        axis=None,
    )
    _check(out, np.array([1.5, 0, 1, 2], dtype=np.float32))


def test_concat_errors(device):
    a = xp.asarray(np.ones((2, 3)), device=device)
    with pytest.raises(ValueError, match=r"concat: arrays must hold at least one array"):
        xp.concat([])
    with pytest.raises(TypeError, match=r"concat: arrays must be a tuple or list"):
        xp.concat(a)
    with pytest.raises(TypeError, match=r"concat: arrays\[1\] must be a tessera_array Array"):
        xp.concat([a, np.ones((2, 3))])
    with pytest.raises(ValueError, match=r"concat: every array must have the same number of dim"):
        xp.concat([a, xp.asarray(np.ones(3), device=device)])
    with pytest.raises(ValueError, match=r"concat: the shapes must match except along axis 0"):
        xp.concat([a, xp.asarray(np.ones((2, 4)), device=device)])
    with pytest.raises(IndexError, match=r"concat: axis must be in \[-2, 2\).*axis=2"):
        xp.concat([a, a], axis=2)
    with pytest.raises(ValueError, match=r"concat: 0-d arrays cannot be joined along an axis"):
        xp.concat([xp.asarray(1.0, device=device)] * 2)
    with pytest.raises(TypeError, match=r"concat: axis must be an int"):
        xp.concat([a, a], axis=1.0)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
@pytest.mark.parametrize(
    "dtypes", [("float64",), ("int8", "int32"), ("float32", "complex128"), ("bool", "bool", "bool")]
)
def test_stack(device, rng, axis, dtypes):
    data = [_random(rng, (2, 3), dt) for dt in dtypes]
    out = xp.stack([xp.asarray(d, device=device) for d in data], axis=axis)
    _check(out, np.stack(data, axis=axis).astype(np.result_type(*data)))


def test_stack_errors(device):
    a = xp.asarray(np.ones((2, 3)), device=device)
    with pytest.raises(ValueError, match=r"stack: every array must have the same shape.*\(3, 2\)"):
        xp.stack([a, xp.asarray(np.ones((3, 2)), device=device)])
    with pytest.raises(IndexError, match=r"stack: axis must be in \[-3, 3\).*axis=3"):
        xp.stack([a, a], axis=3)
    with pytest.raises(ValueError, match=r"stack: arrays must hold at least one array"):
        xp.stack(())
    with pytest.raises(TypeError, match=r"stack: arrays\[0\] must be a tessera_array Array"):
        xp.stack([[1, 2], a])


@pytest.mark.parametrize(
    "shape, axis", [((3,), 0), ((2, 3), 1), ((2, 3, 4), -1), ((2, 0), 0), ((2, 0), 1)]
)
def test_unstack(device, rng, shape, axis):
    data = _random(rng, shape, "int32")
    out = xp.unstack(xp.asarray(data, device=device), axis=axis)
    assert isinstance(out, tuple)
    expected = np.unstack(data, axis=axis)
    assert len(out) == len(expected)
    for o, e in zip(out, expected):
        _check(o, np.asarray(e))


def test_unstack_errors(device):
    with pytest.raises(IndexError, match=r"unstack: axis must be in \[0, 0\)"):
        xp.unstack(xp.asarray(1.0, device=device))
    with pytest.raises(ValueError, match=r"unstack: axis must be in \[-2, 2\).*axis=-3"):
        xp.unstack(xp.asarray(np.ones((2, 2)), device=device), axis=-3)


# ---- shape changes ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, axis",
    [
        ((), 0),
        ((), -1),
        ((3,), 1),
        ((2, 3), -2),
        ((2, 3), 0),
        ((2, 3), (0, 3)),
        ((2, 3), (-1, 0)),
        ((2,), (1, -4, 3)),
        ((4,), ()),
    ],
)
def test_expand_dims(device, rng, shape, axis):
    data = _random(rng, shape, "float32")
    out = xp.expand_dims(xp.asarray(data, device=device), axis=axis)
    _check(out, np.expand_dims(data, axis))


def test_expand_dims_errors(device):
    x = xp.asarray(np.ones((2, 3)), device=device)
    with pytest.raises(IndexError, match=r"expand_dims: axis must be in \[-3, 3\).*axis=3"):
        xp.expand_dims(x, axis=3)
    with pytest.raises(IndexError, match=r"expand_dims: axis must be in \[-3, 3\).*axis=-4"):
        xp.expand_dims(x, axis=-4)
    with pytest.raises(IndexError, match=r"expand_dims: axis must be in \[-4, 4\).*axis=4"):
        xp.expand_dims(x, axis=(0, 4))
    with pytest.raises(ValueError, match=r"expand_dims: axis must not repeat an axis.*\(0, -4\)"):
        xp.expand_dims(x, axis=(0, -4))
    with pytest.raises(TypeError, match=r"expand_dims: axis must be an int, not a bool"):
        xp.expand_dims(x, axis=True)
    with pytest.raises(
        TypeError, match=r"expand_dims: axis must be an int. Received: axis of type str"
    ):
        xp.expand_dims(x, axis="0")


@pytest.mark.parametrize(
    "shape, axis",
    [((1,), 0), ((2, 1, 3), 1), ((1, 3, 1), (0, -1)), ((1, 1), (1, 0)), ((2,), ()), ((), ())],
)
def test_squeeze(device, rng, shape, axis):
    data = _random(rng, shape, "complex64")
    out = xp.squeeze(xp.asarray(data, device=device), axis)
    _check(out, np.squeeze(data, axis))


def test_squeeze_errors(device):
    x = xp.asarray(np.ones((1, 3)), device=device)
    with pytest.raises(ValueError, match=r"squeeze: only axes of size 1 .* axis 1 has size 3"):
        xp.squeeze(x, 1)
    with pytest.raises(IndexError, match=r"squeeze: axis must be in \[-2, 2\)"):
        xp.squeeze(x, 2)
    with pytest.raises(ValueError, match=r"squeeze: axis must not repeat an axis"):
        xp.squeeze(x, (0, -2))
    with pytest.raises(TypeError, match=r"squeeze\(\) missing 1 required positional argument"):
        xp.squeeze(x)


@pytest.mark.parametrize("dtype", _DTYPES)
@pytest.mark.parametrize(
    "shape, new",
    [
        ((6,), (2, 3)),
        ((2, 3), (-1,)),
        ((2, 3, 4), (4, -1, 2)),
        ((), (1, 1)),
        ((1,), ()),
        ((0, 3), (3, 0)),
        ((0, 3), (-1, 3)),
        ((2, 2), 4),
    ],
)
def test_reshape(device, rng, dtype, shape, new):
    data = _random(rng, shape, dtype)
    out = xp.reshape(xp.asarray(data, device=device), new)
    _check(out, np.reshape(data, new))


@pytest.mark.parametrize("copy", [None, True, False])
def test_reshape_copy(device, rng, copy):
    data = _random(rng, (2, 3))
    x = xp.asarray(data, device=device)
    out = xp.reshape(x, (3, 2), copy=copy)
    _check(out, data.reshape(3, 2))
    if device._backend.is_host:
        assert np.shares_memory(_to_np(out), _to_np(x)) is (copy is not True)


def test_reshape_errors(device, rng):
    x = xp.asarray(_random(rng, (2, 3)), device=device)
    xt = xp.permute_dims(x, (1, 0))
    with pytest.raises(ValueError, match=r"reshape: a copy is needed .* copy=False forbids"):
        xp.reshape(xt, (6,), copy=False)
    np.testing.assert_array_equal(_to_np(xp.reshape(xt, (6,))), _to_np(x).T.reshape(6))
    with pytest.raises(
        ValueError, match=r"reshape: an array of size 6 cannot take a shape of size 4"
    ):
        xp.reshape(x, (2, 2))
    with pytest.raises(ValueError, match=r"reshape: at most one dimension of shape may be -1"):
        xp.reshape(x, (-1, -1))
    with pytest.raises(ValueError, match=r"reshape: cannot infer the -1 dimension"):
        xp.reshape(x, (4, -1))
    with pytest.raises(ValueError, match=r"reshape: shape must hold ints >= 0 \(one may be -1\)"):
        xp.reshape(x, (-2, -3))
    with pytest.raises(TypeError, match=r"reshape: copy must be True, False or None"):
        xp.reshape(x, (6,), copy=0)
    with pytest.raises(
        TypeError, match=r"reshape: shape must be an int. Received: shape of type float"
    ):
        xp.reshape(x, (6.0,))
    with pytest.raises(TypeError, match=r"reshape: x must be a tessera_array Array"):
        xp.reshape([1, 2], (2,))


@pytest.mark.parametrize(
    "shape, reps",
    [((3,), (2,)), ((2, 3), (2,)), ((2, 3), (1, 2, 3)), ((), (3,)), ((2,), (0, 2)), ((2, 2), 3)],
)
def test_tile(device, rng, shape, reps):
    data = _random(rng, shape, "int16")
    out = xp.tile(xp.asarray(data, device=device), reps)
    _check(out, np.tile(data, reps))


def test_tile_errors(device):
    x = xp.asarray(np.ones(3), device=device)
    with pytest.raises(ValueError, match=r"tile: repetitions must hold ints >= 0"):
        xp.tile(x, (-1,))
    with pytest.raises(TypeError, match=r"tile: repetitions must be an int"):
        xp.tile(x, (1.5,))


@pytest.mark.parametrize("dtype", ["bool", "uint8", "float64", "complex128"])
@pytest.mark.parametrize(
    "shape, repeats, axis",
    [
        ((2, 3), 2, None),
        ((2, 3), 3, 1),
        ((2, 3), 0, 0),
        ((), 4, None),
        ((2, 3), [1, 0, 2], 1),
        ((2, 3), [3], -1),
        ((2, 3), [1, 2, 0, 1, 1, 2], None),
        ((4,), [2], 0),
    ],
)
def test_repeat(device, rng, dtype, shape, repeats, axis):
    data = _random(rng, shape, dtype)
    x = xp.asarray(data, device=device)
    if isinstance(repeats, list):
        for rdt in ("int8", "uint64", "int64"):
            r = np.asarray(repeats, dtype=rdt)
            out = xp.repeat(x, xp.asarray(r, device=device), axis=axis)
            _check(out, np.repeat(data, r.astype(np.intp), axis=axis))
    else:
        _check(xp.repeat(x, repeats, axis=axis), np.repeat(data, repeats, axis=axis))


def test_repeat_errors(device):
    x = xp.asarray(np.ones((2, 3)), device=device)
    with pytest.raises(ValueError, match=r"repeat: repeats must be >= 0. Received: repeats=-1"):
        xp.repeat(x, -1)
    with pytest.raises(ValueError, match=r"repeat: repeats must not contain negative values"):
        xp.repeat(x, xp.asarray(np.array([1, -1, 2]), device=device), axis=1)
    with pytest.raises(TypeError, match=r"repeat: an array repeats must have an integer dtype"):
        xp.repeat(x, xp.asarray(np.array([1.0]), device=device))
    with pytest.raises(ValueError, match=r"repeat: repeats must have shape \(1,\) or \(3,\)"):
        xp.repeat(x, xp.asarray(np.array([1, 2]), device=device), axis=1)
    with pytest.raises(ValueError, match=r"repeat: repeats must have shape \(1,\) or \(6,\)"):
        xp.repeat(x, xp.asarray(np.ones((2, 3), dtype=np.int64), device=device))
    with pytest.raises(TypeError, match=r"repeat: repeats must be an int"):
        xp.repeat(x, 2.0)
    with pytest.raises(IndexError, match=r"repeat: axis must be in \[-2, 2\)"):
        xp.repeat(x, 2, axis=2)


# ---- reordering -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, axis",
    [
        ((), None),
        ((4,), None),
        ((4,), 0),
        ((2, 3, 4), 1),
        ((2, 3, 4), (0, -1)),
        ((2, 3, 4), None),
        ((2, 3), ()),
    ],
)
def test_flip(device, rng, shape, axis):
    data = _random(rng, shape, "float32")
    out = xp.flip(xp.asarray(data, device=device), axis=axis)
    _check(out, np.flip(data, axis=axis) if axis != () else data)


def test_flip_errors(device):
    x = xp.asarray(np.ones((2, 3)), device=device)
    with pytest.raises(IndexError, match=r"flip: axis must be in \[-2, 2\)"):
        xp.flip(x, axis=2)
    with pytest.raises(ValueError, match=r"flip: axis must not repeat an axis"):
        xp.flip(x, axis=(1, -1))


@pytest.mark.parametrize(
    "shape, axes",
    [((3,), (0,)), ((2, 3), (1, 0)), ((2, 3, 4), (2, 0, 1)), ((2, 3, 4), (-1, 0, -2)), ((), ())],
)
def test_permute_dims(device, rng, shape, axes):
    data = _random(rng, shape, "int8")
    out = xp.permute_dims(xp.asarray(data, device=device), axes)
    _check(out, np.transpose(data, axes))


def test_permute_dims_errors(device):
    x = xp.asarray(np.ones((2, 3)), device=device)
    with pytest.raises(ValueError, match=r"permute_dims: axes must be a permutation of the 2 axes"):
        xp.permute_dims(x, (0,))
    with pytest.raises(ValueError, match=r"permute_dims: axes must not repeat an axis.*\(1, -1\)"):
        xp.permute_dims(x, (1, -1))
    with pytest.raises(IndexError, match=r"permute_dims: axes must be in \[-2, 2\)"):
        xp.permute_dims(x, (0, 2))
    with pytest.raises(TypeError, match=r"permute_dims: axes must be a tuple of ints"):
        xp.permute_dims(x, 0)


@pytest.mark.parametrize(
    "shape, src, dst",
    [
        ((2, 3, 4), 0, -1),
        ((2, 3, 4), -1, 0),
        ((2, 3, 4), (0, 1), (2, 0)),
        ((3,), 0, 0),
        ((2, 3, 4, 5), (-1, 0), (1, -2)),
    ],
)
def test_moveaxis(device, rng, shape, src, dst):
    data = _random(rng, shape, "uint16")
    out = xp.moveaxis(xp.asarray(data, device=device), src, dst)
    _check(out, np.moveaxis(data, src, dst))


def test_moveaxis_errors(device):
    x = xp.asarray(np.ones((2, 3)), device=device)
    with pytest.raises(ValueError, match=r"moveaxis: source and destination must name the same"):
        xp.moveaxis(x, (0, 1), 0)
    with pytest.raises(IndexError, match=r"moveaxis: destination must be in \[-2, 2\)"):
        xp.moveaxis(x, 0, 5)
    with pytest.raises(ValueError, match=r"moveaxis: source must not repeat an axis"):
        xp.moveaxis(x, (0, 0), (0, 1))


@pytest.mark.parametrize(
    "shape, shift, axis",
    [
        ((5,), 2, None),
        ((5,), -7, 0),
        ((2, 3), 4, None),
        ((2, 3), 1, 1),
        ((2, 3, 4), (1, -2), (0, 2)),
        ((2, 3), 1, (0, 1)),
        ((), 3, None),
        ((0, 3), 1, None),
        ((0, 3), 2, 0),
        ((4,), 10**30, 0),
        ((2, 3), (1, 1), (1, 1)),
    ],
)
def test_roll(device, rng, shape, shift, axis):
    data = _random(rng, shape, "complex128")
    out = xp.roll(xp.asarray(data, device=device), shift, axis=axis)
    ref_shift = shift if not isinstance(shift, int) or abs(shift) < 2**62 else shift % 4
    _check(out, np.roll(data, ref_shift, axis=axis))


def test_roll_errors(device):
    x = xp.asarray(np.ones((2, 3)), device=device)
    with pytest.raises(
        ValueError, match=r"roll: when shift is a tuple, axis must be a tuple of the same"
    ):
        xp.roll(x, (1, 2))
    with pytest.raises(
        ValueError, match=r"roll: when shift is a tuple, axis must be a tuple of the same"
    ):
        xp.roll(x, (1, 2), axis=(0,))
    with pytest.raises(IndexError, match=r"roll: axis must be in \[-2, 2\)"):
        xp.roll(x, 1, axis=-3)
    with pytest.raises(TypeError, match=r"roll: shift must be an int"):
        xp.roll(x, 1.5)


# ---- shared checks ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "func, args, kwargs",
    [
        ("broadcast_to", ((3,),), {}),
        ("expand_dims", (), {"axis": 0}),
        ("flip", (), {}),
        ("moveaxis", (0, 0), {}),
        ("permute_dims", ((0,),), {}),
        ("repeat", (2,), {}),
        ("reshape", ((3,),), {}),
        ("roll", (1,), {}),
        ("squeeze", (0,), {}),
        ("tile", ((2,),), {}),
        ("unstack", (), {}),
    ],
)
@pytest.mark.parametrize("bad", [[1.0, 2.0, 3.0], np.ones(3), 3.0])
def test_non_array_input(func, args, kwargs, bad):
    with pytest.raises(
        TypeError, match=rf"^{func}: x must be a tessera_array Array. Received: x of type"
    ):
        getattr(xp, func)(bad, *args, **kwargs)


def test_views_keep_device_and_dtype(device, rng):
    x = xp.asarray(_random(rng, (2, 1, 3), "float32"), device=device)
    for out in (
        xp.squeeze(x, 1),
        xp.expand_dims(x, 0),
        xp.flip(x),
        xp.permute_dims(x, (2, 1, 0)),
        xp.moveaxis(x, 0, 2),
        xp.reshape(x, (6,)),
        xp.broadcast_to(x, (4, 2, 5, 3)),
    ):
        assert out.device == device
        assert out.dtype == xp.float32
