"""The shared namespace over native buffers (backends/_xp) on an array module with CuPy's
gaps and defects, against the NumPy backend's ops.

The fake module (:func:`_fake_module`) is NumPy with what CuPy 14.2 lacks or gets wrong
on the H200: no ``ufunc.reduce`` for maximum/minimum/logical ops, ``count_nonzero``
without ``keepdims``, ``isin`` refusing scalars, ``linalg.cholesky`` without ``upper``,
no ``vecdot``/``unstack``/``linalg.vector_norm``/``matrix_norm``/``svdvals``,
``remainder(5, inf) = nan``, wrong complex ``tanh(+0+inf j)``/``acosh(+0+nan j)``/
``log(nan+inf j)``, wrong ``nextafter(+0, -0)``, ``inv`` of a singular matrix giving
nan unless its linalg errors are raised, out-of-bounds index arrays wrapping, duplicate
scatter indices keeping the first value, ``fill``/``a[...] = -0.0`` storing +0.0. Its
buffers are :class:`_Buffer` (an ndarray subclass). :class:`_GapNamespace` sets the
traits and overrides the one hook (``linalg_call``) those need, and nothing else; every
affected op then gives the NumPy backend's values on random and special inputs.
"""

from __future__ import annotations

import contextlib
import math
import types
import warnings

import numpy as np
import pytest
from tessera_array.backends._xp import Namespace
from tessera_array.backends._xp._elementwise_functions import MODULE_FUNCTIONS
from tessera_array.backends.numpy import _ops as ref

import tessera_array as xp
from tessera_array import _backend_api as api
from tessera_array._errors import LinAlgError

# ---- the fake module ----------------------------------------------------------------------


class _Buffer(np.ndarray):
    """A buffer of the fake module: integer index arrays wrap around their axis, a
    repeated index keeps the first value written, a zero scalar is stored as +0.0."""

    def __getitem__(self, key):
        return super().__getitem__(_wrapped_key(self.shape, key))

    def __setitem__(self, key, value):
        key = _wrapped_key(self.shape, key)
        if _is_zero_scalar(value):
            value = type(value)(0)  # a memset: +0.0
        items = key if isinstance(key, tuple) else (key,)
        if (any(isinstance(i, np.ndarray) and i.dtype.kind in "iu" for i in items)
                and isinstance(value, np.ndarray) and value.ndim):
            # The first of repeated positions wins: the writes in reverse order.
            assert self.flags.c_contiguous
            pos = np.arange(self.size).reshape(self.shape)[key]
            vals = np.broadcast_to(np.asarray(value), pos.shape).reshape(-1)
            self.view(np.ndarray).reshape(-1)[pos.reshape(-1)[::-1]] = vals[::-1]
            return
        super().__setitem__(key, value)

    def fill(self, value):
        super().fill(0 if _is_zero_scalar(value) else value)


def _is_zero_scalar(value) -> bool:
    return isinstance(value, (int, float, complex)) and value == 0


def _wrapped_key(shape, key):
    items = key if isinstance(key, tuple) else (key,)
    used = sum((it.ndim if it.dtype.kind == "b" else 1) if isinstance(it, np.ndarray)
               else 0 if it is None or it is Ellipsis or isinstance(it, bool) else 1
               for it in items)
    out, axis = [], 0
    for it in items:
        if it is Ellipsis:
            axis += len(shape) - used
        elif isinstance(it, np.ndarray):
            if it.dtype.kind in "iu":
                it = np.asarray(it) % shape[axis] if shape[axis] else np.asarray(it)
                axis += 1
            else:
                axis += it.ndim
        elif it is not None and not isinstance(it, bool):
            axis += 1
        out.append(it)
    return tuple(out) if isinstance(key, tuple) else out[0]


def _buffers(r):
    if type(r) is np.ndarray:
        return r.view(_Buffer)
    if isinstance(r, tuple):
        return tuple(_buffers(x) for x in r)
    if isinstance(r, list):
        return [_buffers(x) for x in r]
    return r


def _returning_buffers(f):
    def g(*args, **kwargs):
        return _buffers(f(*args, **kwargs))

    g.__name__ = getattr(f, "__name__", "f")
    return g


class _NoReduce:
    """A ufunc without ``reduce`` (CuPy has it only for add and multiply)."""

    def __init__(self, ufunc):
        self._ufunc = ufunc
        self.nin, self.nout, self.__name__ = ufunc.nin, ufunc.nout, ufunc.__name__

    def __call__(self, *args, **kwargs):
        return self._ufunc(*args, **kwargs)


def _fake_module():
    fake = types.ModuleType("fakecupy")
    for name in dir(np):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated names
            value = getattr(np, name, None)
        if name.startswith("_") or value is None or isinstance(value, types.ModuleType):
            continue
        if callable(value) and not isinstance(value, (type, np.ufunc)):
            value = _returning_buffers(value)
        setattr(fake, name, value)
    fake.ndarray = _Buffer
    for name in ("maximum", "minimum", "logical_and", "logical_or", "logical_xor"):
        setattr(fake, name, _NoReduce(getattr(np, name)))
    for name in ("vecdot", "unstack"):
        delattr(fake, name)

    def count_nonzero(a, axis=None):
        return _buffers(np.count_nonzero(a, axis=axis))

    def isin(element, test_elements, assume_unique=False, invert=False):
        if not (isinstance(element, _Buffer) and isinstance(test_elements, _Buffer)):
            raise TypeError("isin: arguments must be arrays")
        return _buffers(np.isin(element, test_elements, invert=invert))

    def remainder(a, b, /):
        r = np.remainder(a, b)
        return _buffers(np.where(np.isfinite(a) & np.isinf(b), np.nan, r))

    def nextafter(a, b, /):
        r = np.nextafter(a, b)
        return _buffers(np.where(a == b, a, r))  # nextafter(+0, -0) -> +0

    def complex_defect(func, bad):
        def f(a, /):
            r = func(a)
            if np.asarray(a).dtype.kind != "c":
                return r
            return _buffers(np.where(bad(np.asarray(a)), complex(1.0, 2.0), r))

        return f

    def copyto(dst, src, casting="same_kind"):
        np.copyto(dst, type(src)(0) if _is_zero_scalar(src) else src, casting=casting)

    fake.count_nonzero, fake.isin, fake.copyto = count_nonzero, isin, copyto
    fake.remainder, fake.nextafter = remainder, nextafter
    fake.tanh = complex_defect(np.tanh, lambda z: (z.real == 0) & np.isinf(z.imag))
    fake.arccosh = complex_defect(np.arccosh, lambda z: (z.real == 0) & np.isnan(z.imag))
    fake.log = complex_defect(np.log, lambda z: np.isnan(z.real) & np.isinf(z.imag))

    linalg = types.SimpleNamespace(LinAlgError=np.linalg.LinAlgError, raises=False)
    for name in dir(np.linalg):
        if not name.startswith("_") and name not in (
                "vector_norm", "matrix_norm", "svdvals", "LinAlgError"):
            value = getattr(np.linalg, name)
            if callable(value):
                setattr(linalg, name, _returning_buffers(value))

    def cholesky(a):
        return _buffers(np.linalg.cholesky(a))

    def inv(a):
        try:
            return _buffers(np.linalg.inv(a))
        except np.linalg.LinAlgError:
            if linalg.raises:
                raise
            return _buffers(np.full(a.shape, np.nan, dtype=a.dtype))

    @contextlib.contextmanager
    def errstate_raise():
        linalg.raises = True
        try:
            yield
        finally:
            linalg.raises = False

    linalg.cholesky, linalg.inv, linalg.errstate_raise = cholesky, inv, errstate_raise
    fake.linalg = linalg
    return fake


FAKE = _fake_module()


class _GapNamespace(Namespace):
    """The shared namespace over the fake module: its traits, and its error policy."""

    host_reads_cheap = False
    index_arrays_checked = False
    scatter_last_wins = False
    stores_negative_zero = False
    remainder_by_inf_ok = False
    complex_specials_ok = False
    nextafter_equal_ok = False
    isin_takes_scalars = False
    cholesky_has_upper = False
    linalg_library = "fakesolver"

    def linalg_call(self, func, what, f, *args, **kwargs):
        with self.m.linalg.errstate_raise():
            return super().linalg_call(func, what, f, *args, **kwargs)


OPS = _GapNamespace(FAKE)


@pytest.fixture(autouse=True)
def _module_reports_nothing():
    # CuPy reports no floating-point flags; the fake computes with NumPy, which would.
    with np.errstate(all="ignore"):
        yield


def _fake(a):
    return np.array(a, copy=True).view(_Buffer)


def _plain(r):
    if isinstance(r, tuple):
        return tuple(_plain(x) for x in r)
    return np.asarray(r).view(np.ndarray)


def _same(got, want):
    """Equal dtypes, shapes and values (NaNs equal, signed zeros told apart)."""
    got, want = _plain(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    if want.dtype.kind in "fc":  # the signs of zeros (those of NaNs are unspecified)
        for g, w in ((got.real, want.real), (got.imag, want.imag)):
            zero = w == 0
            np.testing.assert_array_equal(np.signbit(g[zero]), np.signbit(w[zero]))


def _close(got, want, rtol=1e-12):
    got, want = _plain(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


RNG = np.random.default_rng(20261201)


def _random(shape, dtype="float64"):
    x = RNG.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * RNG.standard_normal(shape)
    return x.astype(dtype)


# ---- the fake has the gaps -------------------------------------------------------------------


def test_the_fake_module_has_cupys_gaps_and_defects():
    x = _fake([1.0, 2.0, 3.0])
    assert not hasattr(FAKE.maximum, "reduce") and not hasattr(FAKE.logical_or, "reduce")
    for name in ("vecdot", "unstack"):
        assert not hasattr(FAKE, name)
    for name in ("vector_norm", "matrix_norm", "svdvals"):
        assert not hasattr(FAKE.linalg, name)
    with pytest.raises(TypeError):
        FAKE.count_nonzero(x, keepdims=True)
    with pytest.raises(TypeError):
        FAKE.isin(2.0, x)
    with pytest.raises(TypeError):
        FAKE.linalg.cholesky(_fake(np.eye(2)), upper=True)
    assert math.isnan(FAKE.remainder(_fake([5.0]), math.inf)[0])
    assert not np.signbit(FAKE.nextafter(_fake([0.0]), -0.0)[0])
    assert FAKE.tanh(_fake([complex(0, math.inf)]))[0] == complex(1, 2)
    assert float(x[np.array([3])][0]) == 1.0  # wraps silently
    y = _fake([0.0, 0.0])
    y[np.array([0, 0])] = _fake([1.0, 2.0])
    assert y[0] == 1.0  # the first of the repeated positions
    y.fill(-0.0)
    assert not np.signbit(y).any()
    assert np.isnan(FAKE.linalg.inv(_fake(np.zeros((2, 2))))).all()


def test_the_namespace_meets_the_contract_on_both_modules():
    assert api.check_ops(types.SimpleNamespace(**OPS.members())) == []
    assert api.check_ops(ref) == []
    # The module's own functions are bound as they are, unless a trait binds a fix.
    for name, attr in MODULE_FUNCTIONS.items():
        assert getattr(ref, name) is getattr(np, attr), name
    assert ref.add is np.add and OPS.add is FAKE.add
    assert OPS.remainder == OPS.remainder_by_inf and OPS.log == OPS.log_specials
    assert OPS.getitem == OPS.getitem_checked and OPS.setitem == OPS.setitem_checked


# ---- reductions without ufunc.reduce ---------------------------------------------------------

_AXES = [None, (0,), (1,), (0, 2), (0, 1, 2)]


@pytest.mark.parametrize("axis", _AXES)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("name", ["max", "min", "sum", "prod", "mean", "any", "all",
                                  "count_nonzero"])
def test_reductions(name, axis, keepdims):
    a = _random((3, 4, 5))
    if name in ("any", "all", "count_nonzero"):
        a = a > 0.5
    kw = {"axis": axis, "keepdims": keepdims}
    _same(getattr(OPS, name)(_fake(a), **kw), getattr(ref, name)(a, **kw))


@pytest.mark.parametrize("axis", _AXES)
@pytest.mark.parametrize("correction", [0.0, 1.0, 60.0])
@pytest.mark.parametrize("name", ["var", "std"])
def test_var_std(name, axis, correction):
    a = _random((3, 4, 5), "complex128")
    kw = {"axis": axis, "correction": correction, "keepdims": False}
    _same(getattr(OPS, name)(_fake(a), **kw), getattr(ref, name)(a, **kw))


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_arg_reductions(name, axis):
    a = _random((4, 6))
    _same(getattr(OPS, name)(_fake(a), axis=axis), getattr(ref, name)(a, axis=axis))


# ---- functions the module lacks or has in another shape --------------------------------------


def test_isin_with_scalars():
    a = RNG.integers(0, 5, 12)
    for x1, x2 in ((a, 3), (3, a), (a, a[:4]), (7, a)):
        f1 = _fake(x1) if isinstance(x1, np.ndarray) else x1
        f2 = _fake(x2) if isinstance(x2, np.ndarray) else x2
        for invert in (False, True):
            _same(OPS.isin(f1, f2, invert=invert), ref.isin(x1, x2, invert=invert))


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_cholesky_upper(dtype):
    b = _random((3, 4, 4), dtype)
    a = b @ np.conj(np.swapaxes(b, -1, -2)) + 4 * np.eye(4)
    for upper in (False, True):
        got = OPS.cholesky(_fake(a), upper)
        _close(got, ref.cholesky(a, upper))
    u = _plain(OPS.cholesky(_fake(a), True))
    np.testing.assert_allclose(np.conj(np.swapaxes(u, -1, -2)) @ u, a, rtol=1e-12)
    with pytest.raises(LinAlgError, match=r"^linalg\.cholesky: .*not positive definite "
                                          r"\(fakesolver: "):
        OPS.cholesky(_fake(-np.eye(3)), True)


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
@pytest.mark.parametrize("shapes", [((5,), (5,)), ((3, 5), (5,)), ((2, 1, 5), (4, 5))])
def test_vecdot(dtype, shapes):
    a, b = _random(shapes[0], dtype), _random(shapes[1], dtype)
    _close(OPS.vecdot(_fake(a), _fake(b), -1), ref.vecdot(a, b, -1))
    a3, b3 = _random((3, 5, 2), dtype), _random((3, 5, 2), dtype)
    _close(OPS.vecdot(_fake(a3), _fake(b3), -2), ref.vecdot(a3, b3, -2))


def test_unstack():
    a = _random((3, 4, 2))
    for axis in range(3):
        got, want = OPS.unstack(_fake(a), axis=axis), ref.unstack(a, axis=axis)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)


@pytest.mark.parametrize("ord", [2, 1, 0, 3, 0.5, -1, math.inf, -math.inf])
@pytest.mark.parametrize("axis", [None, (1,), (0, 2)])
def test_vector_norm(ord, axis):
    a = _random((3, 4, 5), "complex128")
    a[0, 0, 0] = 1e300  # the two-norm's sum of squares overflows there
    for keepdims in (False, True):
        _close(OPS.vector_norm(_fake(a), axis, keepdims, ord),
               ref.vector_norm(a, axis, keepdims, ord))
    empty = np.zeros((0, 3))
    _same(OPS.vector_norm(_fake(empty), (0,), False, ord), ref.vector_norm(empty, (0,), False, ord))


@pytest.mark.parametrize("ord", ["fro", "nuc", 2, -2, 1, -1, math.inf, -math.inf])
def test_matrix_norm_svdvals_pinv_rank(ord):
    a = _random((2, 4, 3))
    a[1, 0, 0] = 1e200
    for keepdims in (False, True):
        _close(OPS.matrix_norm(_fake(a), keepdims, ord), ref.matrix_norm(a, keepdims, ord))
    _close(OPS.svdvals(_fake(a)), ref.svdvals(a))
    low = _random((2, 5, 2)) @ _random((2, 2, 4))  # rank 2
    _close(OPS.pinv(_fake(low), None), ref.pinv(low, None), rtol=1e-9)
    _same(OPS.matrix_rank(_fake(low), None), ref.matrix_rank(low, None))
    _same(OPS.matrix_rank(_fake(np.zeros((2, 0, 3))), None), ref.matrix_rank(np.zeros((2, 0, 3)), None))


@pytest.mark.parametrize("name", ["cumulative_sum", "cumulative_prod"])
@pytest.mark.parametrize("include_initial", [False, True])
def test_cumulative(name, include_initial):
    a = _random((3, 4))
    for axis in (0, 1):
        kw = {"axis": axis, "dtype": None, "include_initial": include_initial}
        _same(getattr(OPS, name)(_fake(a), **kw), getattr(ref, name)(a, **kw))


# ---- special values: the trait-bound patches and where-based patching ------------------------

_SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, math.inf, -math.inf, math.nan])


def _pairs():
    a, b = np.meshgrid(_SPECIAL, _SPECIAL, indexing="ij")
    return a.ravel(), b.ravel()


def _complex_grid():
    # complex(x, y) keeps the signs of zero parts (x + 1j * y would not).
    return np.array([complex(x, y) for x, y in zip(*_pairs())])


@pytest.mark.parametrize("name", ["remainder", "floor_divide", "nextafter"])
def test_binary_special_values(name, monkeypatch):
    a, b = _pairs()
    want = getattr(ref, name)(a, b)
    # Where-based: no host read of the mask (the fake's count_nonzero is not called).
    monkeypatch.setattr(FAKE, "count_nonzero", _no_host_read)
    ops = _GapNamespace(FAKE)
    _same(getattr(ops, name)(_fake(a), _fake(b)), want)
    _same(getattr(ops, name)(_fake(a), 2.5), getattr(ref, name)(a, 2.5))
    _same(getattr(ops, name)(_fake(a), math.inf), getattr(ref, name)(a, math.inf))


@pytest.mark.parametrize("name", ["tanh", "acosh", "log", "expm1"])
def test_complex_special_values(name, monkeypatch):
    z = _complex_grid()
    want = getattr(ref, name)(z)
    monkeypatch.setattr(FAKE, "count_nonzero", _no_host_read)
    ops = _GapNamespace(FAKE)
    _same(getattr(ops, name)(_fake(z)), want)
    real = _SPECIAL
    _same(getattr(ops, name)(_fake(real)), getattr(ref, name)(real))


def _no_host_read(*args, **kwargs):
    raise AssertionError("a patch read its mask on the host")


def test_the_defects_are_what_the_traits_fix():
    """The same fake with the traits left at NumPy's defaults keeps its defects."""
    plain = Namespace(FAKE)
    assert math.isnan(float(plain.remainder(_fake([5.0]), math.inf)[0]))
    assert plain.tanh(_fake([complex(0, math.inf)]))[0] == complex(1, 2)
    assert not np.signbit(plain.nextafter(_fake([0.0]), -0.0)[0])
    assert float(plain.getitem(_fake([1.0, 2.0, 3.0]), np.array([3]))[0]) == 1.0
    assert np.isnan(_plain(plain.inv(_fake(np.zeros((2, 2)))))).all()
    full = plain.full((2,), -0.0, dtype=xp.float64)
    assert not np.signbit(full).any()


# ---- indexing: bounds, duplicates, negative zeros --------------------------------------------


def test_index_bounds_are_checked_first():
    a = _fake(np.arange(12.0).reshape(3, 4))
    for key in (_fake([3]), (slice(None), _fake([0, 4])), (Ellipsis, _fake([-5])),
                (_fake([True, False, True]), _fake([4, 0]))):
        with pytest.raises(IndexError, match=r"out of bounds for axis \d with size \d"):
            OPS.getitem(a, key)
        with pytest.raises(IndexError, match=r"out of bounds"):
            OPS.setitem(a, key, 1.0)
    for key in (_fake([-3, 2]), (slice(None), _fake([-4, 3])), (None, _fake([1]))):
        _same(OPS.getitem(a, key), ref.getitem(np.asarray(a), key))
    with pytest.raises(IndexError, match=r"^take: indices must be in \[-n, n\) where n is the "
                                         r"size of axis 1\. Received: x\.shape=\(3, 4\), "
                                         r"index 4 is out of bounds for axis 1 with size 4"):
        OPS.take(a, _fake([0, 4]), axis=1)
    with pytest.raises(IndexError, match=r"^take: .*the flattened x.*index -13"):
        OPS.take(a, _fake([-13]), axis=None)
    with pytest.raises(IndexError, match=r"^take_along_axis: .*axis 0"):
        OPS.take_along_axis(a, _fake([[3, 0, 0, 0]]), axis=0)
    idx = RNG.integers(-4, 4, (3, 4))
    _same(OPS.take_along_axis(a, _fake(idx), axis=1),
          ref.take_along_axis(np.asarray(a), idx, axis=1))
    _same(OPS.take(a, _fake([-1, 2]), axis=0), ref.take(np.asarray(a), np.array([-1, 2]), axis=0))


@pytest.mark.parametrize("shape", [(6,), (6, 3)])
def test_duplicate_scatter_indices_store_the_last_value(shape):
    idx = np.array([1, 4, 1, 1, 0, 4])
    values = _random((6,) + shape[1:])
    want = np.zeros(shape)
    ref.setitem(want, idx, values)
    got = _fake(np.zeros(shape))
    OPS.setitem(got, _fake(idx), _fake(values))
    _same(got, want)
    plain = _fake(np.zeros(shape))  # the fake's own scatter: the first value wins
    Namespace(FAKE).setitem(plain, _fake(idx), _fake(values))
    assert not np.array_equal(np.asarray(plain), want)


@pytest.mark.parametrize("value", [-0.0, complex(-0.0, -0.0), complex(0.0, -0.0)])
def test_negative_zeros_are_stored(value):
    dt = xp.complex128 if isinstance(value, complex) else xp.float64
    _same(OPS.full((3,), value, dtype=dt), ref.full((3,), value, dtype=dt))
    got, want = OPS.zeros((3,), dtype=dt), ref.zeros((3,), dtype=dt)
    OPS.copy_into(got, value)
    ref.copy_into(want, value)
    _same(got, want)
    got, want = OPS.ones((3,), dtype=dt), ref.ones((3,), dtype=dt)
    OPS.setitem(got, slice(1, None), value)
    ref.setitem(want, slice(1, None), value)
    _same(got, want)


def test_linalg_errors_are_raised_through_the_one_hook():
    singular = _fake(np.ones((2, 3, 3)))
    with pytest.raises(LinAlgError, match=r"^linalg\.inv: x \(or a matrix of the stack\) is "
                                          r"singular \(fakesolver: .*Received: x\.shape="
                                          r"\(2, 3, 3\), x\.dtype=float64"):
        OPS.inv(singular)
    with pytest.raises(LinAlgError, match=r"^linalg\.solve: .*Received: x1\.shape=\(2, 3, 3\), "
                                          r"x2\.shape=\(2, 3, 1\)"):
        OPS.solve(singular, _fake(np.ones((2, 3, 1))))
    a = _random((3, 3)) + 3 * np.eye(3)
    _close(OPS.inv(_fake(a)), ref.inv(a))


def test_numpy_patches_are_mask_compact():
    """On the host a patch's fix sees only the masked elements, and an empty mask (counted
    on the host) skips it."""
    ns = ref.namespace
    assert ns.mask_any is np.count_nonzero and OPS.mask_any(np.zeros(3, bool))
    seen = []

    def fix(x):
        seen.append(x.shape)
        return -x

    a = np.arange(6.0)
    got = ns.patch(np.zeros(6), np.array([0, 1, 0, 0, 1, 0], bool), fix, a)
    assert seen == [(2,)] and got.tolist() == [0.0, -1.0, 0.0, 0.0, -4.0, 0.0]
    where = OPS.patch(_fake(np.zeros(6)), _fake(np.array([0, 1, 0, 0, 1, 0], bool)), fix,
                      _fake(a))
    assert seen[-1] == (6,) and _plain(where).tolist() == got.tolist()
