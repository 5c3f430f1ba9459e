"""float16 and bfloat16 on the CUDA backend (CuPy: float16 native, bfloat16 through
ml_dtypes from CuPy 14), against NumPy float32 computations rounded to the 16-bit dtype.

Inputs are random NumPy data (never zeros) uploaded to ``cuda:0``; tolerances come from
the dtype's eps. Without a CUDA backend the module is skipped with the reason; with
``TESSERA_REQUIRE_BACKENDS`` naming ``cuda`` that skip is a failure instead.
"""

from __future__ import annotations

import _gate
import ml_dtypes
import numpy as np
import pytest

import tessera_array as xp

BACKEND = _gate.require_backend("cuda")

import cupy

DEV = BACKEND.devices()[0]
EPS = {"float16": 2.0**-10, "bfloat16": 2.0**-7}
HALF = [xp.float16, xp.bfloat16]
HALF_IDS = ["float16", "bfloat16"]


def _held(dt):
    if dt not in BACKEND.dtypes(DEV):
        pytest.skip(f"{DEV}: {BACKEND.missing_capability(DEV, dt)}")


def _host(x) -> np.ndarray:
    return np.asarray(x.to_device("cpu"))


def _on(a32, dt):
    x = xp.astype(xp.asarray(a32, device=DEV), dt)
    return x, _host(x).astype(np.float32)


def _rand(rng, shape, lo=-3.0, hi=3.0):
    a = rng.uniform(lo, hi, size=shape).astype(np.float32)
    a.flat[0] = 0.75 * hi
    return a


def _close(got, ref32, dt, ulps=2.0, atol=None):
    assert got.dtype is dt and got.device == DEV
    eps = EPS[dt.name]
    np.testing.assert_allclose(_host(got).astype(np.float64),
                               ref32.astype(dt._np).astype(np.float64), rtol=ulps * eps,
                               atol=ulps * eps if atol is None else atol, equal_nan=True)


def test_dtypes_listed():
    assert xp.float16 in BACKEND.dtypes(DEV)
    major = int(cupy.__version__.split(".")[0])
    assert (xp.bfloat16 in BACKEND.dtypes(DEV)) == (major >= 14)
    assert BACKEND.capabilities(DEV)["bfloat16"] == (major >= 14)


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_creation_and_astype(dt):
    _held(dt)
    rng = np.random.default_rng(0)
    a = _rand(rng, (257,), -1000, 1000)
    x = xp.astype(xp.asarray(a, device=DEV), dt)
    assert isinstance(x._data, cupy.ndarray) and x._data.dtype == dt._np
    np.testing.assert_array_equal(_host(x), a.astype(dt._np))
    np.testing.assert_array_equal(_host(xp.astype(x, xp.float32)),
                                  a.astype(dt._np).astype(np.float32))
    for r, want in [(xp.zeros(3, dtype=dt, device=DEV), np.zeros(3)),
                    (xp.ones(3, dtype=dt, device=DEV), np.ones(3)),
                    (xp.full(2, 1.5, dtype=dt, device=DEV), np.full(2, 1.5)),
                    (xp.arange(0, 2, 0.5, dtype=dt, device=DEV), np.arange(0, 2, 0.5)),
                    (xp.linspace(0, 1, 5, dtype=dt, device=DEV), np.linspace(0, 1, 5))]:
        assert r.dtype is dt
        np.testing.assert_array_equal(_host(r).astype(np.float64), want)
    h = np.array([0.5, -2.0], dt._np)
    assert xp.asarray(h, device=DEV).dtype is dt


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("name,ref,lo,hi", [
    ("exp", np.exp, -3, 3), ("log", np.log, 0.01, 9), ("sin", np.sin, -3, 3),
    ("tanh", np.tanh, -3, 3), ("sqrt", np.sqrt, 0.01, 9), ("abs", np.abs, -3, 3),
])
def test_unary(dt, name, ref, lo, hi):
    _held(dt)
    x, x32 = _on(_rand(np.random.default_rng(1), (1000,), lo, hi), dt)
    _close(getattr(xp, name)(x), ref(x32), dt, atol=4 * EPS[dt.name])


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_binary_and_scalars(dt):
    _held(dt)
    rng = np.random.default_rng(2)
    x, x32 = _on(_rand(rng, (1000,)), dt)
    y, y32 = _on(_rand(rng, (1000,), 0.5, 2), dt)
    _close(x + y, x32 + y32, dt)
    _close(x * y, x32 * y32, dt)
    _close(x / y, x32 / y32, dt)
    _close(xp.maximum(x, y), np.maximum(x32, y32), dt)
    assert (x * 2.0).dtype is dt
    np.testing.assert_array_equal(_host(x < y), x32 < y32)


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_reductions_and_matmul_accumulate_in_float32(dt):
    _held(dt)
    ones = xp.ones(4096, dtype=dt, device=DEV)
    assert float(_host(xp.sum(ones))) == 4096.0
    m = xp.ones((2, 4096), dtype=dt, device=DEV)
    assert float(_host(m @ xp.matrix_transpose(m))[0, 0]) == 4096.0
    rng = np.random.default_rng(3)
    x, x32 = _on(_rand(rng, (64, 48), 0.5, 1.5), dt)
    for name in ("sum", "mean", "max", "min", "std"):
        _close(getattr(xp, name)(x, axis=0), getattr(np, name)(x32, axis=0), dt, ulps=1,
               atol=0.0)
    a, a32 = _on(_rand(rng, (3, 40, 33)), dt)
    b, b32 = _on(_rand(rng, (33, 17)), dt)
    _close(a @ b, a32 @ b32, dt, ulps=1, atol=9 * 33 * 2.0**-20)


def test_dlpack_float16():
    x = xp.asarray(np.array([0.5, -1.25], np.float16), device=DEV)
    c = cupy.from_dlpack(x)
    assert c.dtype == np.float16
    np.testing.assert_array_equal(c.get(), [0.5, -1.25])
    assert xp.from_dlpack(c).dtype is xp.float16


def test_dlpack_bfloat16():
    _held(xp.bfloat16)
    x = xp.asarray(np.array([0.5, -1.25], ml_dtypes.bfloat16), device=DEV)
    c = cupy.from_dlpack(x)  # kDLBfloat (code 4), 16 bits
    assert c.dtype == np.dtype(ml_dtypes.bfloat16)
    y = xp.from_dlpack(c)
    assert y.dtype is xp.bfloat16 and y.device == DEV
    np.testing.assert_array_equal(_host(y).astype(np.float32), [0.5, -1.25])


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_kernel_functions_refuse(dt):
    _held(dt)
    m, _ = _on(_rand(np.random.default_rng(4), (4, 4)), dt)
    for call in (lambda: xp.linalg.inv(m), lambda: xp.fft.fft(m)):
        with pytest.raises(TypeError, match=r"float16 and bfloat16 are not supported"):
            call()
