"""The ``fft`` extension against NumPy's float64/complex128 results, on every device.

Accuracy is the relative error ``norm(out - ref) / norm(ref)`` against NumPy's
double-precision transform of the same input values: <= 1e-5 for single
precision, <= 1e-12 for double, on random inputs of every length 1..64, every
prime up to 1009 and 2**20. Semantics (n, s, axes, norm, dtypes) are compared
with ``numpy.fft``; bad input is checked by error type and message. The kernel
family is checked through the registry: the launcher contract, batching in one
launch, both NumPy-backend engines (scipy.fft and the numpy.fft fallback), the
plan cache, and devices without float64 or without FFT kernels (fake backends
over NumPy).
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from _fake_backends import FakeBackend
from tessera_array.backends.numpy import fft as np_fft

import tessera_array as xp
import tessera_array.fft as F
from tessera_array import _discovery, _dispatch, _dtypes

TOL = {"float32": 1e-5, "complex64": 1e-5, "float64": 1e-12, "complex128": 1e-12}
REAL = ["float32", "float64"]
COMPLEX = ["complex64", "complex128"]
COMPLEX_OF = {"float32": "complex64", "float64": "complex128"}
REAL_OF = {"complex64": "float32", "complex128": "float64"}
NORMS = ["backward", "ortho", "forward"]
_MIRROR = {"backward": "forward", "forward": "backward", "ortho": "ortho"}  # hfft/ihfft identities
PRIMES = [p for p in range(2, 1010) if all(p % q for q in range(2, math.isqrt(p) + 1))]
_NO_F64 = tuple(d for d in _dtypes.ALL_DTYPES if d not in (xp.float64, xp.complex128))


@pytest.fixture
def rng():
    return np.random.default_rng(20251212)


def _rand(rng, shape, dtype):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        a = rng.random(shape) > 0.5
        a.flat[0] = True
        return a
    if dt.kind in "iu":
        a = rng.integers(0 if dt.kind == "u" else -5, 6, size=shape).astype(dt)
        a.flat[0] = 3
        return a
    a = rng.standard_normal(shape)
    if dt.kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dt)


def _wide(a):
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def _host(x):
    return np.asarray(x.to_device("cpu"))


def _rel_err(got, ref):
    return np.linalg.norm((got - ref).ravel()) / np.linalg.norm(ref.ravel())


def _check(out, ref, dtype, device, tol=None):
    """``out`` is on ``device``, of ``dtype`` and ``ref``'s shape, within the tolerance."""
    assert isinstance(out, xp.Array)
    assert out.device == device
    assert out.dtype == getattr(xp, dtype), (out.dtype, dtype)
    got = _host(out)
    assert got.shape == ref.shape, (got.shape, ref.shape)
    err = _rel_err(got, ref)
    assert err <= (TOL[dtype] if tol is None else tol), f"relative error {err:.3g}"


# ---- accuracy: lengths 1..64, primes up to 1009, 2**20 -----------------------------------


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("func", ["fft", "ifft"])
def test_c2c_accuracy_every_length_and_prime(device, rng, func, dtype):
    for n in list(range(1, 65)) + PRIMES:
        a = _rand(rng, (3, n), dtype)
        out = getattr(xp.fft, func)(xp.asarray(a, device=device))
        _check(out, getattr(np.fft, func)(_wide(a)), dtype, device)


@pytest.mark.parametrize("dtype", REAL)
@pytest.mark.parametrize("func", ["rfft", "ihfft"])
def test_r2c_accuracy_every_length_and_prime(device, rng, func, dtype):
    for n in list(range(1, 65)) + PRIMES:
        a = _rand(rng, (3, n), dtype)
        out = getattr(xp.fft, func)(xp.asarray(a, device=device))
        _check(out, getattr(np.fft, func)(_wide(a)), COMPLEX_OF[dtype], device)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("func", ["irfft", "hfft"])
def test_c2r_accuracy_every_length_and_prime(device, rng, func, dtype):
    for n in list(range(1, 65)) + PRIMES:  # n: the real output length
        a = _rand(rng, (3, n // 2 + 1), dtype)
        out = getattr(xp.fft, func)(xp.asarray(a, device=device), n=n)
        _check(out, getattr(np.fft, func)(_wide(a), n=n), REAL_OF[dtype], device)


@pytest.mark.parametrize(
    "func, dtype",
    [("fft", "complex64"), ("fft", "complex128"), ("ifft", "complex64"), ("rfft", "float32"),
     ("irfft", "complex128")],
)
def test_accuracy_two_to_the_twenty(device, rng, func, dtype):
    n = 2**20
    a = _rand(rng, (n // 2 + 1 if func == "irfft" else n,), dtype)
    kw = {"n": n} if func == "irfft" else {}
    out = getattr(xp.fft, func)(xp.asarray(a, device=device), **kw)
    want = COMPLEX_OF.get(dtype, dtype) if func != "irfft" else REAL_OF[dtype]
    _check(out, getattr(np.fft, func)(_wide(a), **kw), want, device)


@pytest.mark.parametrize("dtype", COMPLEX)
@pytest.mark.parametrize("shape, axes", [((8, 9, 10), None), ((5, 6, 7), (0, 2)),
                                         ((1009, 4), (0,)), ((16, 3, 12), (-1, 0))])
def test_nd_accuracy(device, rng, dtype, shape, axes):
    a = _rand(rng, shape, dtype)
    x = xp.asarray(a, device=device)
    r = _rand(rng, shape, REAL_OF[dtype])
    xr = xp.asarray(r, device=device)
    _check(xp.fft.fftn(x, axes=axes), np.fft.fftn(_wide(a), axes=axes), dtype, device)
    _check(xp.fft.ifftn(x, axes=axes), np.fft.ifftn(_wide(a), axes=axes), dtype, device)
    _check(xp.fft.rfftn(xr, axes=axes), np.fft.rfftn(_wide(r), axes=axes), dtype, device)
    spec = np.fft.rfftn(_wide(r), axes=axes).astype(dtype)
    last = shape[(axes or (-1,))[-1]]
    ax = tuple(range(len(shape))) if axes is None else axes
    s = [shape[i] for i in ax]
    s[-1] = last
    _check(xp.fft.irfftn(xp.asarray(spec, device=device), s=s, axes=ax),
           np.fft.irfftn(_wide(spec), s=s, axes=ax), REAL_OF[dtype], device)


@pytest.mark.parametrize("dtype", COMPLEX)
def test_kernels_match_the_plain_reference(device, rng, dtype):
    """Each op of the family against its xp-written DFT reference (no pocketfft there)."""
    rdt = REAL_OF[dtype]
    tol = {"complex64": 2e-5, "complex128": 1e-12}[dtype]
    for n in list(range(1, 33)) + [37, 64, 97]:
        for norm, forward, axis in (("backward", True, 1), ("ortho", False, 0),
                                    ("forward", True, -1)):
            a = xp.asarray(_rand(rng, (n + 2, n + 1), dtype), device=device)
            r = xp.real(a)
            f = xp.fft.fft if forward else xp.fft.ifft
            got = _host(f(a, n=n, axis=axis, norm=norm))
            ref = _host(F._reference_c2c(a, n, axis, norm, forward))
            assert _rel_err(got, ref) <= tol, ("c2c", n, norm)
            f = xp.fft.rfft if forward else xp.fft.ihfft
            got = _host(f(r, n=n, axis=axis, norm=norm))
            ref = _host(F._reference_r2c(r, n, axis, norm, forward))
            assert _rel_err(got, ref) <= tol, ("r2c", n, norm)
            f = xp.fft.hfft if forward else xp.fft.irfft
            got = f(a, n=n, axis=axis, norm=norm)
            ref = F._reference_c2r(a, n, axis, norm, forward)
            assert got.dtype == ref.dtype == getattr(xp, rdt)
            assert _rel_err(_host(got), _host(ref)) <= tol, ("c2r", n, norm)


# ---- dtypes --------------------------------------------------------------------------------

_C_IN = ["fft", "ifft", "fftn", "ifftn", "fft2", "ifft2", "irfft", "hfft", "irfftn", "irfft2"]
_R_IN = ["rfft", "ihfft", "rfftn", "rfft2"]


@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "complex128", "int8",
                                   "int32", "uint16", "bool"])
@pytest.mark.parametrize("func", _C_IN + _R_IN)
def test_result_dtype_matches_numpy(device, rng, func, dtype):
    """Precision kept; real input to a complex transform and integers as NumPy 2 has them."""
    a = _rand(rng, (4, 6), dtype)
    f = getattr(xp.fft, func)
    if func in _R_IN and dtype.startswith("complex"):
        with pytest.raises(TypeError, match=rf"^{func}: x must have a real-valued "
                                            rf"floating-point dtype.*Received: x.dtype={dtype}"):
            f(xp.asarray(a, device=device))
        return
    ref = getattr(np.fft, func)(a)
    out = f(xp.asarray(a, device=device))
    tol = 1e-5 if ref.dtype in (np.float32, np.complex64) else 1e-12
    _check(out, getattr(np.fft, func)(_wide(a)), ref.dtype.name, device, tol)


# ---- n, axis, norm, s, axes: NumPy's semantics ---------------------------------------------


@pytest.mark.parametrize("norm", NORMS + [None])
@pytest.mark.parametrize("axis", [0, 1, -1, -3])
@pytest.mark.parametrize("n", [None, 3, 7, 16])
@pytest.mark.parametrize("func", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
def test_one_axis_semantics(device, rng, func, n, axis, norm):
    real_in = func in ("rfft", "ihfft")
    a = _rand(rng, (5, 6, 7), "float64" if real_in else "complex128")
    out = getattr(xp.fft, func)(xp.asarray(a, device=device), n=n, axis=axis, norm=norm)
    ref = getattr(np.fft, func)(a, n=n, axis=axis, norm=norm)
    _check(out, ref, ref.dtype.name, device)


_ND = [
    (None, None), (None, (0,)), (None, (2, 0)), ((4, 9), (1, 2)), ((3, 5, 8), (0, 1, 2)),
    ((-1, 4), (0, 2)), ((7,), (-2,)), ((2, 2), (-1, 0)),
]


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("s, axes", _ND)
@pytest.mark.parametrize("func", ["fftn", "ifftn", "rfftn", "irfftn"])
def test_many_axes_semantics(device, rng, func, s, axes, norm):
    real_in = func == "rfftn"
    a = _rand(rng, (5, 6, 7), "float64" if real_in else "complex128")
    out = getattr(xp.fft, func)(xp.asarray(a, device=device), s=s, axes=axes, norm=norm)
    ref = getattr(np.fft, func)(a, s=s, axes=axes, norm=norm)
    _check(out, ref, ref.dtype.name, device)


@pytest.mark.parametrize("func", ["fft2", "ifft2", "rfft2", "irfft2"])
@pytest.mark.parametrize("kw", [{}, {"s": (4, 10)}, {"axes": (0, 2)}, {"s": (3, 3), "axes": (2, 1)},
                                {"norm": "ortho"}])
def test_two_dimensional_spellings(device, rng, func, kw):
    a = _rand(rng, (5, 6, 7), "float64" if func == "rfft2" else "complex128")
    out = getattr(xp.fft, func)(xp.asarray(a, device=device), **kw)
    ref = getattr(np.fft, func)(a, **kw)
    _check(out, ref, ref.dtype.name, device)


def test_irfftn_minus_one_uses_every_input_element(device, rng):
    # Note: the standard's reading; NumPy 2 takes the input length m for s[-1] == -1.
    a = _rand(rng, (4, 5), "complex128")
    x = xp.asarray(a, device=device)
    out = xp.fft.irfftn(x, s=(-1, -1), axes=(0, 1))
    assert out.shape == (4, 8)
    _check(out, np.fft.irfftn(a, s=(4, 8), axes=(0, 1)), "float64", device)


def test_fftn_without_axes_to_transform_returns_a_copy(device, rng):
    a = _rand(rng, (3, 4), "complex64")
    x = xp.asarray(a, device=device)
    out = xp.fft.fftn(x, axes=())
    assert out.dtype == xp.complex64 and out._data is not x._data
    np.testing.assert_array_equal(_host(out), a)
    r = xp.fft.fftn(xp.asarray(np.arange(3.0), device=device)[0])  # 0-d: nothing to do
    assert r.dtype == xp.complex128 and r.shape == ()


def test_round_trips(device, rng):
    for dtype in COMPLEX:
        a = _rand(rng, (6, 10), dtype)
        x = xp.asarray(a, device=device)
        for norm in NORMS:
            _check(xp.fft.ifft(xp.fft.fft(x, norm=norm), norm=norm), _wide(a), dtype, device)
            _check(xp.fft.ifftn(xp.fft.fftn(x, norm=norm), norm=norm), _wide(a), dtype, device)
        r = _rand(rng, (6, 11), REAL_OF[dtype])
        xr = xp.asarray(r, device=device)
        _check(xp.fft.irfft(xp.fft.rfft(xr), n=11), _wide(r), REAL_OF[dtype], device)
        _check(xp.fft.irfftn(xp.fft.rfftn(xr), s=(6, 11), axes=(0, 1)), _wide(r),
               REAL_OF[dtype], device)
        _check(xp.fft.hfft(xp.fft.ihfft(xr), n=11), _wide(r), REAL_OF[dtype], device)


def test_strided_and_empty_inputs(device, rng):
    a = _rand(rng, (12, 10), "complex128")
    x = xp.asarray(a, device=device)
    _check(xp.fft.fft(x[::2, 1::3]), np.fft.fft(a[::2, 1::3]), "complex128", device)
    _check(xp.fft.fft(x.T, axis=0), np.fft.fft(a.T, axis=0), "complex128", device)
    _check(xp.fft.rfftn(xp.real(x)[::-1], axes=(1, 0)), np.fft.rfftn(a.real[::-1], axes=(1, 0)),
           "complex128", device)
    empty = xp.fft.fft(xp.zeros((0, 8), dtype=xp.complex64, device=device))
    assert empty.shape == (0, 8) and empty.dtype == xp.complex64
    padded = xp.fft.fft(xp.zeros((0,), dtype=xp.complex64, device=device), n=4)
    np.testing.assert_array_equal(_host(padded), np.zeros(4, np.complex64))


def test_batched_equals_per_row(device, rng):
    a = _rand(rng, (64, 48), "complex64")
    x = xp.asarray(a, device=device)
    batched = _host(xp.fft.fft(x))
    rows = np.stack([_host(xp.fft.fft(x[i])) for i in range(64)])
    np.testing.assert_allclose(batched, rows, rtol=1e-6, atol=1e-5)


# ---- frequencies and shifts ----------------------------------------------------------------


@pytest.mark.parametrize("n", [1, 2, 5, 8, 101])
@pytest.mark.parametrize("d", [1.0, 0.25, 3, -2.0])
@pytest.mark.parametrize("dtype", [None, "float32", "float64"])
def test_frequencies(device, n, d, dtype):
    kw = {} if dtype is None else {"dtype": getattr(xp, dtype)}
    want = dtype or "float64"
    for name in ("fftfreq", "rfftfreq"):
        out = getattr(xp.fft, name)(n, d=d, device=device, **kw)
        ref = getattr(np.fft, name)(n, d).astype(want)
        assert out.device == device and out.dtype == getattr(xp, want)
        np.testing.assert_array_equal(_host(out), ref)


@pytest.mark.parametrize("axes", [None, 0, -1, (0, 2), [2, 1, 0], (), (1, 1)])
@pytest.mark.parametrize("dtype", ["float32", "complex128", "int16"])
def test_shifts(device, rng, axes, dtype):
    a = _rand(rng, (4, 5, 7), dtype)
    x = xp.asarray(a, device=device)
    for name in ("fftshift", "ifftshift"):
        out = getattr(xp.fft, name)(x, axes=axes)
        ref = getattr(np.fft, name)(a, axes=axes)
        assert out.dtype == x.dtype and out.device == device
        np.testing.assert_array_equal(_host(out), ref)
    back = xp.fft.ifftshift(xp.fft.fftshift(x, axes=axes), axes=axes)
    if axes != (1, 1):
        np.testing.assert_array_equal(_host(back), a)


# ---- bad input -----------------------------------------------------------------------------


def _x(device, shape=(4, 6), dtype="complex128"):
    return xp.asarray(_rand(np.random.default_rng(0), shape, dtype), device=device)


@pytest.mark.parametrize("func", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
def test_one_axis_errors(device, func):
    real = func in ("rfft", "ihfft")
    x = _x(device, dtype="float64" if real else "complex128")
    f = getattr(xp.fft, func)
    with pytest.raises(xp.AxisError, match=rf"^{func}: axis must be in \[-2, 2\) for an array "
                                           rf"with 2 dimensions\. Received: axis=2"):
        f(x, axis=2)
    with pytest.raises(IndexError, match=rf"^{func}: axis .*Received: axis=-3"):
        f(x, axis=-3)
    with pytest.raises(TypeError, match=rf"^{func}: axis must be an int\. Received: axis"):
        f(x, axis=1.0)
    for n in (0, -4):
        with pytest.raises(ValueError, match=rf"^{func}: n must be a positive int\. "
                                             rf"Received: n={n}$"):
            f(x, n=n)
    with pytest.raises(TypeError, match=rf"^{func}: n must be an int\. Received: n=2\.5"):
        f(x, n=2.5)
    with pytest.raises(TypeError, match=rf"^{func}: n must be an int, not a bool"):
        f(x, n=True)
    with pytest.raises(ValueError, match=rf"^{func}: norm must be 'backward', 'ortho' or "
                                         rf"'forward'\. Received: norm='Ortho'"):
        f(x, norm="Ortho")
    with pytest.raises(TypeError, match=rf"^{func}: norm must be .*Received: norm of type int"):
        f(x, norm=1)
    with pytest.raises(TypeError, match=rf"^{func}: x must be a tessera_array Array\. "
                                        rf"Received: x of type ndarray"):
        f(np.ones(4))
    with pytest.raises(xp.AxisError, match=rf"^{func}: axis must be in \[0, 0\)"):
        f(xp.asarray(1.0, device=device))


def test_default_length_errors(device):
    with pytest.raises(ValueError, match=r"^irfft: with n=None the transform length is "
                                         r"2\*\(m - 1\) = 0, where m = x.shape\[1\].*"
                                         r"Received: x.shape=\(3, 1\), axis=1"):
        xp.fft.irfft(_x(device, (3, 1)))
    with pytest.raises(ValueError, match=r"^hfft: with n=None the transform length is "
                                         r"2\*\(m - 1\) = -2"):
        xp.fft.hfft(_x(device, (0,)))
    with pytest.raises(ValueError, match=r"^fft: with n=None the transform length is m = 0, "
                                         r"where m = x.shape\[0\]"):
        xp.fft.fft(_x(device, (0, 3)), axis=0)


@pytest.mark.parametrize("func", ["fftn", "ifftn", "rfftn", "irfftn", "fft2"])
def test_many_axes_errors(device, func):
    real = func == "rfftn"
    x = _x(device, (4, 6, 5), "float64" if real else "complex128")
    f = getattr(xp.fft, func)
    with pytest.raises(xp.AxisError, match=rf"^{func}: axes must be in \[-3, 3\) .*"
                                           rf"Received: axes=3"):
        f(x, axes=(0, 3))
    with pytest.raises(ValueError, match=rf"^{func}: axes must not repeat an axis\. "
                                         rf"Received: axes=\(0, -3\) \(normalized: \(0, 0\)\)"):
        f(x, axes=(0, -3))
    with pytest.raises(TypeError, match=rf"^{func}: axes must be a sequence of ints"):
        f(x, axes=1)
    with pytest.raises(ValueError, match=rf"^{func}: every entry of s must be a positive int "
                                         rf"or -1\. Received: s=\(4, 0\)"):
        f(x, s=(4, 0), axes=(0, 1))
    with pytest.raises(ValueError, match=rf"^{func}: every entry of s .*Received: s=\(-2, 3\)"):
        f(x, s=[-2, 3], axes=[0, 1])
    with pytest.raises(ValueError, match=rf"^{func}: s and axes must have the same length\. "
                                         rf"Received: s=\(4,\), axes=\(0, 1\)"):
        f(x, s=(4,), axes=(0, 1))
    with pytest.raises(TypeError, match=rf"^{func}: s\[1\] must be an int\. Received: s\[1\]=2.0"):
        f(x, s=(4, 2.0), axes=(0, 1))
    with pytest.raises(TypeError, match=rf"^{func}: s must be a sequence of ints"):
        f(x, s=4, axes=(0,))
    with pytest.raises(ValueError, match=rf"^{func}: norm must be 'backward', 'ortho' or "
                                         rf"'forward'\. Received: norm='none'"):
        f(x, norm="none")
    if func != "fft2":  # fft2 has NumPy's default axes=(-2, -1)
        with pytest.raises(ValueError, match=rf"^{func}: axes must be given when s is given"
                                             rf".*Received: s=\(4, 4\), axes=None"):
            f(x, s=(4, 4))


def test_empty_axes_for_real_transforms(device):
    with pytest.raises(ValueError, match=r"^rfftn: axes must name at least one axis\. "
                                         r"Received: axes=\(\)"):
        xp.fft.rfftn(_x(device, dtype="float32"), axes=())
    with pytest.raises(ValueError, match=r"^irfftn: axes must name at least one axis"):
        xp.fft.irfftn(_x(device), axes=[])


def test_frequency_errors(device):
    for name in ("fftfreq", "rfftfreq"):
        f = getattr(xp.fft, name)
        with pytest.raises(ValueError, match=rf"^{name}: n must be a positive int\. "
                                             rf"Received: n=0"):
            f(0, device=device)
        with pytest.raises(TypeError, match=rf"^{name}: n must be an int\. Received: n=4.0"):
            f(4.0, device=device)
        with pytest.raises(ValueError, match=rf"^{name}: d must not be 0"):
            f(4, d=0.0, device=device)
        with pytest.raises(TypeError, match=rf"^{name}: d must be a real number .*"
                                            rf"Received: d=1j of type complex"):
            f(4, d=1j, device=device)
        with pytest.raises(TypeError, match=rf"^{name}: dtype must be a real-valued "
                                            rf"floating-point dtype\. Received: dtype=complex64"):
            f(4, dtype=xp.complex64, device=device)
        with pytest.raises(TypeError, match=rf"^{name}: dtype must be a real-valued .*int32"):
            f(4, dtype=xp.int32, device=device)


def test_shift_errors(device):
    x = _x(device)
    with pytest.raises(xp.AxisError, match=r"^fftshift: axes must be in \[-2, 2\) .*"
                                           r"Received: axes=5"):
        xp.fft.fftshift(x, axes=5)
    with pytest.raises(xp.AxisError, match=r"^ifftshift: axes must be in .*Received: axes=-3"):
        xp.fft.ifftshift(x, axes=(0, -3))
    with pytest.raises(TypeError, match=r"^fftshift: x must be a tessera_array Array"):
        xp.fft.fftshift([1.0, 2.0])


# ---- the kernel family: registry, launcher contract, engines -----------------------------


def test_registered_for_every_fft_op(device):
    for op, dtypes in (("fft_c2c", COMPLEX), ("fft_r2c", REAL), ("fft_c2r", COMPLEX)):
        for dt in dtypes:
            assert callable(_dispatch.lookup(op, device, getattr(xp, dt)))
        with pytest.raises(xp.KernelNotFoundError, match=rf"^{op}: no kernel for op={op}, "
                                                        rf".*dtype=int32.*Registered on"):
            _dispatch.lookup(op, device, xp.int32)
    rows = [ln.split()[:2] for ln in _dispatch.registry.matrix().splitlines()]
    assert ["fft_c2c", device.backend.name] in rows


@pytest.mark.parametrize("engine", ["scipy", "numpy"])
def test_engines_follow_the_launcher_contract(rng, engine):
    """Each engine's launchers: (a, s, axes, norm, forward), batched, precision kept."""
    eng = np_fft.scipy_engine() if engine == "scipy" else np_fft.numpy_engine()
    for dtype in COMPLEX:
        rdt = REAL_OF[dtype]
        a = _rand(rng, (4, 6, 9), dtype)
        r = _rand(rng, (4, 6, 9), rdt)
        for norm in NORMS:
            for s, axes in (((5,), (2,)), ((8, 3), (0, 2)), ((4, 6, 12), (0, 1, 2))):
                cases = [
                    (eng.c2c(a, s, axes, norm, True), np.fft.fftn(_wide(a), s, axes, norm), dtype),
                    (eng.c2c(a, s, axes, norm, False), np.fft.ifftn(_wide(a), s, axes, norm),
                     dtype),
                    (eng.r2c(r, s, axes, norm, True), np.fft.rfftn(_wide(r), s, axes, norm),
                     dtype),
                    (eng.r2c(r, s, axes, norm, False),
                     np.conj(np.fft.rfftn(_wide(r), s, axes, _MIRROR[norm])), dtype),
                    (eng.c2r(a, s, axes, norm, False), np.fft.irfftn(_wide(a), s, axes, norm),
                     rdt),
                    (eng.c2r(a, s, axes, norm, True),
                     np.fft.irfftn(np.conj(_wide(a)), s, axes, _MIRROR[norm]), rdt),
                ]
                for got, ref, want in cases:
                    assert isinstance(got, np.ndarray) and got.dtype == np.dtype(want)
                    assert got.shape == ref.shape
                    assert _rel_err(got, ref) <= TOL[want]


def test_engine_falls_back_to_numpy_fft_without_scipy(monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy.fft", None)  # import scipy.fft -> ImportError
    eng = np_fft.pick_engine()
    assert eng.name == "numpy.fft"
    assert eng.cache.info()["engine"] == "numpy.fft"


def test_workers_from_the_environment(monkeypatch):
    monkeypatch.delenv(np_fft.WORKERS_ENV, raising=False)
    assert np_fft.workers() >= 1
    monkeypatch.setenv(np_fft.WORKERS_ENV, "3")
    assert np_fft.workers() == 3
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv(np_fft.WORKERS_ENV, bad)
        with pytest.raises(ValueError, match=rf"^fft: the environment variable "
                                             rf"TESSERA_FFT_WORKERS must be a positive integer"
                                             rf".*Received: TESSERA_FFT_WORKERS='{bad}'"):
            np_fft.workers()


def test_scipy_engine_passes_workers(monkeypatch):
    """Threads from TESSERA_FFT_WORKERS above the routing threshold, one below it."""
    calls = []

    class Spy:
        def __getattr__(self, name):
            def f(*args, **kwargs):
                calls.append((name, args[1:], kwargs))
                return np.zeros(1)
            return f

    monkeypatch.setenv(np_fft.WORKERS_ENV, "5")
    c2c, r2c, c2r = np_fft._scipy_launchers(Spy())
    big = np.ones((4, np_fft.THREADS_MIN_ELEMENTS // 4), np.complex64)
    small = np.ones((4, np_fft.THREADS_MIN_ELEMENTS // 4 - 1), np.complex64)
    m = big.shape[1]
    c2c(big, (m,), (1,), "backward", True)
    c2c(big, (4, m), (0, 1), "backward", False)
    r2c(big.real, (m + 1,), (1,), "ortho", False)
    c2r(big, (2 * m - 2,), (1,), "forward", True)
    c2r(big, (6, 2 * m - 2), (0, 1), "forward", False)
    c2c(small, (3,), (0,), "backward", True)
    assert [c[0] for c in calls] == ["fft", "ifftn", "ihfft", "hfft", "irfftn", "fft"]
    # the default lengths go as None (scipy.fft then skips its cut-or-pad step)
    assert [c[1] for c in calls] == [(None, 1, "backward"), (None, (0, 1), "backward"),
                                     (m + 1, 1, "ortho"), (None, 1, "forward"),
                                     ((6, 2 * m - 2), (0, 1), "forward"), (3, 0, "backward")]
    assert [c[2]["workers"] for c in calls] == [5, 5, 5, 5, 5, 1]
    assert np_fft.THREADS_MIN_ELEMENTS == 1 << 14  # the measured crossover (module docstring)


class _Recording(FakeBackend):
    """A fake device whose FFT launchers record their calls, then run the numpy engine."""

    def __init__(self, name, **kw):
        super().__init__(name, **kw)
        self.calls = []

    def register(self, registry):
        super().register(registry)
        eng = np_fft.numpy_engine()
        for op, dtypes, fn in (("fft_c2c", _dtypes.COMPLEX_FLOATING, eng.c2c),
                               ("fft_r2c", _dtypes.REAL_FLOATING, eng.r2c),
                               ("fft_c2r", _dtypes.COMPLEX_FLOATING, eng.c2r)):
            dts = [d for d in dtypes if d in self._dtypes]
            registry.register(op, self.name, dts, self._recorder(op, fn))

    def _recorder(self, op, fn):
        def launch(a, s, axes, norm, forward):
            self.calls.append((op, a.dtype.name, a.shape, s, axes, norm, forward))
            return fn(a, s, axes, norm, forward)
        launch.plan_cache = fn.plan_cache
        return launch


@pytest.fixture
def recording():
    be = _Recording("fakefftrec", is_host=False)
    _discovery.add_backend(be)
    try:
        yield be, xp.Device("fakefftrec", 0)
    finally:
        _discovery.remove_backend("fakefftrec")


def test_front_end_goes_through_the_registry_in_one_batched_launch(recording, rng):
    be, dev = recording
    a = _rand(rng, (16, 8, 12), "complex64")
    x = xp.asarray(a, device=dev)
    out = xp.fft.fft(x, axis=1, n=10, norm="ortho")
    assert out.device == dev and out.dtype == xp.complex64
    assert be.calls == [("fft_c2c", "complex64", (16, 8, 12), (10,), (1,), "ortho", True)]
    _check(out, np.fft.fft(_wide(a), n=10, axis=1, norm="ortho"), "complex64", dev)
    be.calls.clear()
    xp.fft.irfftn(x, axes=(-1, 0))
    xp.fft.ihfft(xp.real(x))
    xp.fft.fft(xp.real(x))  # real input: cast to complex64, then c2c
    assert be.calls == [
        ("fft_c2r", "complex64", (16, 8, 12), (12, 30), (2, 0), "backward", False),
        ("fft_r2c", "float32", (16, 8, 12), (12,), (2,), "backward", False),
        ("fft_c2c", "complex64", (16, 8, 12), (12,), (2,), "backward", True),
    ]


@pytest.fixture
def f32_fft_device():
    """A device without float64/complex128 whose FFT kernels are single precision."""
    _discovery.add_backend(_Recording("fakefftf32", dtypes=_NO_F64, is_host=False))
    try:
        yield xp.Device("fakefftf32", 0)
    finally:
        _discovery.remove_backend("fakefftf32")


def test_device_without_float64(f32_fft_device, rng):
    dev = f32_fft_device
    ints = _rand(rng, (3, 8), "int32")
    out = xp.fft.fft(xp.asarray(ints, device=dev))  # integers: the default float, float32
    _check(out, np.fft.fft(ints), "complex64", dev)
    out = xp.fft.rfft(xp.asarray(ints, device=dev))
    _check(out, np.fft.rfft(ints), "complex64", dev)
    assert xp.fft.fftfreq(4, device=dev).dtype == xp.float32
    np.testing.assert_array_equal(_host(xp.fft.rfftfreq(5, d=0.1, device=dev)),
                                  np.fft.rfftfreq(5, 0.1).astype(np.float32))
    for name in ("fftfreq", "rfftfreq"):
        with pytest.raises(xp.MissingCapabilityError,
                           match=rf"^{name}: device fakefftf32:0 does not support dtype "
                                 rf"float64\. Supported on fakefftf32:0: .*float32, complex64\."):
            getattr(xp.fft, name)(4, dtype=xp.float64, device=dev)


@pytest.fixture
def no_fft_device():
    """A device whose backend registers no FFT kernels (only matvec)."""
    _discovery.add_backend(FakeBackend("fakenofft", is_host=False))
    try:
        yield xp.Device("fakenofft", 0)
    finally:
        _discovery.remove_backend("fakenofft")


def test_device_without_fft_kernels(no_fft_device):
    x = xp.ones((4,), dtype=xp.complex64, device=no_fft_device)
    with pytest.raises(xp.KernelNotFoundError,
                       match=r"^ifft: fft_c2c: no kernel for op=fft_c2c, backend=fakenofft, "
                             r"dtype=complex64.*Nothing is registered for fft_c2c on fakenofft; "
                             r"backends with fft_c2c: (\w+, )*numpy\b"):
        xp.fft.ifft(x)
    with pytest.raises(xp.KernelNotFoundError, match=r"^get_plan_cache: backend fakenofft "
                                                    r"registers no FFT kernels"):
        xp.fft.get_plan_cache(no_fft_device)


# ---- the plan cache -------------------------------------------------------------------------


def test_plan_cache_interface(device, capsys):
    cache = xp.fft.get_plan_cache(device)
    assert isinstance(cache, xp.fft.PlanCache)
    info = cache.info()
    assert set(info) >= {"size", "max_size", "memsize", "max_memory"}
    for key in ("size", "max_size", "memsize", "max_memory"):
        v = getattr(cache, key)
        assert v is None or (isinstance(v, int) and v >= 0)
        assert info[key] == v
    cache.clear()
    cache.show()
    assert "max_size" in capsys.readouterr().out


def test_numpy_backend_plan_cache_tells_the_truth(rng):
    cache = xp.fft.get_plan_cache("cpu")
    assert xp.fft.get_plan_cache() is cache or xp.fft.get_plan_cache().info()["backend"] != "numpy"
    assert (cache.size, cache.memsize, cache.max_memory) == (None, None, None)
    assert cache.max_size == 16
    assert cache.info()["clearable"] is False
    xp.fft.fft(xp.asarray(_rand(rng, (4, 33), "complex64"), device="cpu"))
    assert cache.size is None  # still: pocketfft does not report its plans
    assert cache.clear() is None
    with pytest.raises(NotImplementedError, match=r"^PlanCache.max_size: .*pocketfft"):
        cache.max_size = 4
    with pytest.raises(NotImplementedError, match=r"^PlanCache.max_memory: .*count only"):
        cache.max_memory = 1 << 20


def test_plan_cache_reaches_the_backend_through_the_launchers(recording):
    _, dev = recording
    cache = xp.fft.get_plan_cache(dev)
    assert cache.info()["engine"] == "numpy.fft"


def test_scipy_fft_is_imported_at_the_first_transform_only():
    import subprocess

    code = ("import sys, tessera_array as xp; x = xp.asarray([1.0, 2.0]); y = x + x; "
            "before = 'scipy.fft' in sys.modules; xp.fft.fft(x); "
            "print(before, 'scipy.fft' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", str(np_fft.scipy_present())]
