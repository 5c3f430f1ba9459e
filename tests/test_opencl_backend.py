"""The OpenCL backend (backends/opencl) on whatever OpenCL device loads (PoCL in CI).

Device listing, the float64 capability (faked away by monkeypatching the
extension query), the host fallback's list and its modes (the default warning in a
fresh process, "warn", "allow", "error"), the kernel cache, and every native
elementwise kernel against NumPy on random inputs with special values, bit for bit
where NumPy's result is exactly rounded.
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import _gate
import numpy as np
import pytest

import tessera_array as xp
from tessera_array import _helpers

BACKEND = _gate.require_backend("opencl")

from tessera_array.backends.numpy import _ops as host_ops
from tessera_array.backends.opencl import (
    _fallback,
    _families,
    _kernels,
    _ops_core,
    _ops_elementwise,
    _ops_linalg,
    set_host_fallback,
)

DEV = BACKEND.devices()[0]
HAS_FP64 = BACKEND.capabilities(DEV)["float64"]
SEED = 20261130

FLOATS = ["float32", "float64"] if HAS_FP64 else ["float32"]
COMPLEX = ["complex64", "complex128"] if HAS_FP64 else ["complex64"]
INTS = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"]
DTYPES = ["bool"] + INTS + FLOATS + COMPLEX


# ---- devices ------------------------------------------------------------------------------


def test_devices_are_listed_per_platform_then_device():
    import pyopencl as cl

    expected = [d for p in cl.get_platforms() for d in p.get_devices()]
    devs = BACKEND.devices()
    assert [str(d) for d in devs] == [f"opencl:{i}" for i in range(len(expected))]
    assert [BACKEND.cl_device(d).int_ptr for d in devs] == [d.int_ptr for d in expected]
    assert all(d.backend is BACKEND for d in devs)
    assert BACKEND.priority < 0 and BACKEND.is_host is False
    # One context and one in-order queue per device, made once.
    assert BACKEND.queue(DEV) is BACKEND.queue(DEV)


def test_never_the_default_device_by_itself():
    code = ("import tessera_array as xp; from tessera_array import _discovery; "
            "print(xp.asarray([1.0]).device, 'opencl' in _discovery.loaded_backends())")
    env = {k: v for k, v in __import__("os").environ.items() if k != "TESSERA_DEVICE"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120, check=True).stdout.split()
    assert out == ["cpu", "True"]


def test_versions_and_info_list_the_fallbacks(capsys):
    v = BACKEND.versions()
    assert "pyopencl" in v and any(k.startswith("platform") for k in v)
    from tessera_array.__main__ import main

    main(["info"])
    out = capsys.readouterr().out
    names = BACKEND.host_fallbacks()
    assert f"opencl: {len(names)} functions run on the host" in out
    assert names[0] in out and names[-1] in out


# ---- float64 capability -------------------------------------------------------------------


@pytest.fixture
def no_fp64(monkeypatch):
    """opencl:0 as a device without cl_khr_fp64 (the extension query is faked)."""
    real = BACKEND.extensions(DEV)

    def caches():
        BACKEND._dtypes.clear()
        _helpers._SUPPORTED.clear()

    monkeypatch.setattr(BACKEND, "extensions", lambda device: real - {"cl_khr_fp64"})
    caches()
    yield DEV
    monkeypatch.undo()
    caches()


def test_float64_needs_cl_khr_fp64(no_fp64):
    dev = no_fp64
    names = {d.name for d in BACKEND.dtypes(dev)}
    assert "float64" not in names and "complex128" not in names and "float32" in names
    with pytest.raises(xp.MissingCapabilityError,
                       match=r"^asarray: device opencl:0 does not support dtype float64 "
                             r"\(the device lacks cl_khr_fp64\)"):
        xp.asarray(np.array([1.0, 2.0]), device=dev)
    with pytest.raises(xp.MissingCapabilityError, match=r"^zeros: .*cl_khr_fp64"):
        xp.zeros(3, dtype=xp.float64, device=dev)
    x = xp.asarray(np.array([1.5, 2.5], dtype=np.float32), device=dev)
    with pytest.raises(xp.MissingCapabilityError, match=r"^astype: .*cl_khr_fp64"):
        xp.astype(x, xp.complex128)
    with pytest.raises(xp.MissingCapabilityError, match=r"^from_host: .*lacks cl_khr_fp64"):
        BACKEND.from_host(np.zeros(2), dev)
    # Never a silent downcast; the defaults follow the device.
    assert xp.asarray([1.0, 2.0], device=dev).dtype == xp.float32
    assert xp.ones(2, device=dev).dtype == xp.float32
    assert xp.__array_namespace_info__().default_dtypes(device=dev)["real floating"] == xp.float32
    r = xp.sum(x)
    assert r.dtype == xp.float32 and float(r) == 4.0


# ---- the host fallback --------------------------------------------------------------------


def test_fallback_list_is_sorted_and_names_what_runs_on_the_host():
    names = BACKEND.host_fallbacks()
    assert names == tuple(sorted(names)) and len(set(names)) == len(names)
    assert "inv" in names and "kernel fft_c2c" not in names  # FFT kernels are native
    assert "unique_values" not in names and "unique_all" not in names  # native (sort-based)
    assert "add" not in names and "sum" not in names  # native kernels
    assert "acos[complex64, complex128]" in names or not HAS_FP64


@pytest.fixture
def fallback_mode():
    yield set_host_fallback
    set_host_fallback(_fallback._initial_mode())


def test_fallback_error_and_warn_settings(fallback_mode):
    x = xp.asarray(np.array([[2.0, 0.0], [0.0, 4.0]], dtype=np.float32), device=DEV)
    fallback_mode("error")
    with pytest.raises(xp.HostFallbackError,
                       match=r"^inv: no native OpenCL kernel; .*opencl:0.*"
                             r"TESSERA_HOST_FALLBACK='error'"):
        xp.linalg.inv(x)
    assert xp.max(x + x).to_device("cpu") == 8.0  # native kernels still run
    fallback_mode("warn")
    with pytest.warns(xp.HostFallbackWarning, match=r"^inv: no native OpenCL kernel"):
        r = xp.linalg.inv(x)
    np.testing.assert_array_equal(np.asarray(r.to_device("cpu")), [[0.5, 0.0], [0.0, 0.25]])
    fallback_mode("allow")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        xp.linalg.inv(x)
    with pytest.raises(ValueError, match=r"^set_host_fallback: mode must be one of .*"
                                         r"Received: mode='never'"):
        fallback_mode("never")


def test_fallback_env_setting_in_a_fresh_process():
    code = ("import tessera_array as xp\n"
            "x = xp.asarray([[2.0, 0.0], [0.0, 1.0]], device='opencl:0')\n"
            "y = x + 1\n"
            "try:\n    xp.linalg.inv(x)\nexcept xp.HostFallbackError as e:\n    print('refused', e)\n")
    env = dict(__import__("os").environ, TESSERA_HOST_FALLBACK="error")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("refused inv: ")


def test_fallback_default_warns_once_per_function_and_device_in_a_fresh_process():
    """The default mode (the suite runs with TESSERA_HOST_FALLBACK=allow: tests/conftest.py)."""
    code = ("import warnings\n"
            "import tessera_array as xp\n"
            "x = xp.asarray([[2.0, 0.0], [0.0, 4.0]], device='opencl:0')\n"
            "with warnings.catch_warnings(record=True) as seen:\n"
            "    warnings.simplefilter('always')\n"
            "    y = x + x\n"
            "    for _ in range(3):\n"
            "        xp.linalg.inv(y)\n"
            "    xp.linalg.det(y)\n"
            "    xp.linalg.inv(y)\n"
            "for w in seen:\n"
            "    print(w.category.__name__, w.filename, w.lineno, w.message)\n")
    env = {k: v for k, v in __import__("os").environ.items() if k != "TESSERA_HOST_FALLBACK"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2, out.stdout
    assert lines[0].startswith("HostFallbackWarning <string> 8 inv: no native OpenCL kernel; "
                               "the call runs on the host (copying its arrays from and back "
                               "to opencl:0).")
    assert lines[1].startswith("HostFallbackWarning <string> 9 det: no native OpenCL kernel")
    for line in lines:
        assert "TESSERA_HOST_FALLBACK=allow" in line and "TESSERA_HOST_FALLBACK=error" in line
        assert "tessera_array.backends.opencl.set_host_fallback('allow')" in line


def test_ops_fallbacks_are_the_contract_names_the_chapters_lack():
    import importlib
    import pkgutil

    from tessera_array.backends import opencl
    from tessera_array.backends.opencl import _ops

    from tessera_array import _backend_api as api

    native = set()
    for info in pkgutil.iter_modules(opencl.__path__):
        if info.name.startswith("_ops_"):
            native |= set(importlib.import_module(f"{opencl.__name__}.{info.name}").__all__)
    made = {n for n in api.OPS if getattr(getattr(_ops, n), "host_fallback", False)}
    assert made == set(api.OPS) - native and made
    names = BACKEND.host_fallbacks()
    for n in made:
        assert getattr(_ops, n).__name__ == n and n in names
    # Only contract names: NumPy-backend exports the front end never calls fall back nowhere.
    assert not hasattr(_ops, "asarray") and "asarray" not in names


def test_kernel_fallbacks_write_back_in_place_updates():
    from tessera_array.backends._common.fallback import HostFallback

    from tessera_array._dispatch import KernelRegistry, lookup

    y = xp.asarray(np.array([1.0, 2.0], dtype=np.float32), device=DEV)
    x = xp.asarray(np.array([10.0, 20.0], dtype=np.float32), device=DEV)
    axpy = lookup("axpy", DEV, xp.float32)
    axpy(np.float32(0.5), x._data, y._data, False)
    np.testing.assert_array_equal(np.asarray(y.to_device("cpu")), [6.0, 12.0])
    # Through the host fallback (OpenCL's hooks, a registry without OpenCL kernels): the
    # NumPy backend's kernels, whose in-place writes come back to the device buffers,
    # views included.
    real = _fallback.FALLBACK
    fallback = HostFallback("opencl", label="OpenCL", is_native=real.is_native,
                            to_host=real.to_host, from_host=real.from_host,
                            write_back=real.write_back, device_of=real.device_of,
                            host=real.host)
    registry = KernelRegistry()
    assert "axpy" in fallback.register_kernels(registry)
    base = xp.asarray(np.arange(4.0, dtype=np.float32), device=DEV)
    view = base[::2]
    registry.lookup("axpy", "opencl", xp.float32)(np.float32(2.0), x._data, view._data)
    np.testing.assert_array_equal(np.asarray(base.to_device("cpu")), [20, 1, 42, 3])
    np.testing.assert_array_equal(np.asarray(x.to_device("cpu")), [10.0, 20.0])
    rng = np.random.default_rng(SEED)
    p, g = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    params, grads = [xp.asarray(p, device=DEV)._data], [xp.asarray(g, device=DEV)._data]
    bufs = [xp.asarray(np.zeros(4, np.float32), device=DEV)._data]
    kw = {"lr": 0.1, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.0,
          "nesterov": False, "maximize": False, "first": True}
    registry.lookup("sgd_step", "opencl", xp.float32)(params, grads, bufs, **kw)
    want_p, want_m = p.copy(), np.zeros(4, np.float32)
    host_ops = KernelRegistry()
    real.host.register(host_ops)
    host_ops.lookup("sgd_step", "numpy", xp.float32)([want_p], [g.copy()], [want_m], **kw)
    np.testing.assert_array_equal(_kernels.to_host(params[0]), want_p)
    np.testing.assert_array_equal(_kernels.to_host(bufs[0]), want_m)
    assert not np.array_equal(want_p, p)


# ---- the kernel cache ---------------------------------------------------------------------


def test_a_second_call_builds_nothing():
    rng = np.random.default_rng(SEED)
    a = xp.asarray(rng.standard_normal((5, 3)).astype(np.float32), device=DEV)
    b = xp.asarray(rng.standard_normal(3).astype(np.float32), device=DEV)
    for f in (lambda: a * b + 1.5, lambda: xp.sum(a, axis=0), lambda: a[1:, ::2]):
        f().to_device("cpu")
        before = _kernels.build_count()
        f().to_device("cpu")
        assert _kernels.build_count() == before
    c = xp.asarray(rng.standard_normal((7, 3)).astype(np.float32), device=DEV)
    before = _kernels.build_count()
    (c * b + 1.5).to_device("cpu")  # another shape of the same rank: the same kernels
    assert _kernels.build_count() == before


def test_one_kernel_serves_every_rank_layout_and_scalar_side():
    # After the first call, every rank 1..6, layout (contiguous, transposed, reversed,
    # broadcast) and scalar side of the same op and dtype builds and makes nothing new.
    rng = np.random.default_rng(SEED + 3)
    shapes = [(7,), (3, 5), (2, 3, 4), (2, 1, 3, 2), (1, 2, 3, 2, 2), (2, 1, 2, 3, 1, 2)]
    hosts = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    devs = [xp.asarray(h, device=DEV) for h in hosts]
    (devs[0] - devs[0]).to_device("cpu")
    xp.sum(devs[1], axis=0).to_device("cpu")
    xp.cumulative_sum(devs[1], axis=1).to_device("cpu")
    builds = _kernels.build_count()
    kernels = len(_families.KERNELS)
    for h, d in zip(hosts, devs):
        perm = tuple(range(h.ndim))[::-1]
        want = [h - h, h.transpose(perm) - 2.5, 2.5 - h[::-1], h - h[..., :1], h.sum(axis=0),
                h.sum(axis=-1), h.sum(), np.cumsum(h, axis=0)]
        got = [d - d, xp.permute_dims(d, perm) - 2.5, 2.5 - d[::-1], d - d[..., :1],
               xp.sum(d, axis=0), xp.sum(d, axis=-1), xp.sum(d), xp.cumulative_sum(d, axis=0)]
        for g, w in zip(got, want):
            g = np.asarray(g.to_device("cpu"))
            assert g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=1e-6)
    assert _kernels.build_count() == builds
    assert len(_families.KERNELS) == kernels


def test_more_axes_than_the_layout_holds_take_a_kernel_of_that_rank():
    # 18 axes that coalesce to nothing shorter (every other one reversed): the map, the
    # reduction (17 kept axes) and the scan run kernels generated for the rank.
    rng = np.random.default_rng(SEED + 4)
    h = rng.standard_normal((2,) * 18).astype(np.float32)
    d = xp.asarray(h, device=DEV)
    key = (slice(None, None, -1), slice(None)) * 9
    np.testing.assert_array_equal(np.asarray((d[key] * 2.0).to_device("cpu")), h[key] * 2)
    h64 = h[key].astype(np.float64)  # float32 sums accumulate in float64 here
    np.testing.assert_allclose(np.asarray(xp.sum(d[key], axis=0).to_device("cpu")),
                               h64.sum(axis=0), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(
        np.asarray(xp.cumulative_sum(d[key], axis=0).to_device("cpu")), np.cumsum(h[key], 0))
    np.testing.assert_allclose(np.asarray(xp.sum(d[key], axis=(0, 2, 4, 6, 8, 9))
                                          .to_device("cpu")),
                               h64.sum(axis=(0, 2, 4, 6, 8, 9)), rtol=1e-6, atol=1e-7)
    keys = list(_kernels._ranked)
    assert any(len(k) == 5 and k[3] == 18 for k in keys)  # the map
    assert any(len(k) == 10 and k[6:8] == (17, 1) for k in keys)  # sum over axis 0
    assert any(len(k) == 5 and k[4] == 17 for k in keys)  # the scan


def test_kernel_families_build_whole():
    # One program holds the unary (the binary, the cast) kernels of a dtype; a family
    # that failed to build would leave each member to build alone (slow, not wrong).
    rng = np.random.default_rng(SEED + 5)
    for dt in DTYPES:
        h = _sample(rng, dt, 16)
        a = xp.asarray(h, device=DEV)
        want = (h == h[::-1])
        np.testing.assert_array_equal(np.asarray(xp.equal(a, a[::-1]).to_device("cpu")), want)
        np.testing.assert_array_equal(np.asarray(xp.isfinite(a).to_device("cpu")),
                                      np.isfinite(h) if h.dtype.kind in "fc" else
                                      np.ones(h.shape, bool))
        np.testing.assert_array_equal(np.asarray(xp.astype(a, xp.bool).to_device("cpu")),
                                      h.astype(bool))
    assert _kernels.family_failures() == []


# ---- elementwise kernels against NumPy -------------------------------------------------------

_SPECIAL_F = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -1.5, 2.5, 1e-30, 3e38,
              -7.0, 1e-45]
# Functions whose NumPy results are libm's, which OpenCL may round differently
# (within a few ulp): compared with a tolerance; everything else bit for bit.
_INEXACT = {"acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "exp", "expm1",
            "log", "log1p", "log2", "log10", "sin", "sinh", "tan", "tanh", "atan2", "hypot",
            "pow", "logaddexp"}
_UNARY = [n for n in _ops_elementwise.__all__ if n not in ("where", "clip")
          and n not in _ops_elementwise._FLOAT_BINARY and n not in _ops_elementwise._COMPARE
          and n not in _ops_elementwise._LOGICAL and n not in _ops_elementwise._BITWISE
          and n not in ("floor_divide", "remainder", "bitwise_left_shift",
                        "bitwise_right_shift")]
_BINARY = [n for n in _ops_elementwise.__all__ if n not in _UNARY and n not in ("where", "clip")]


def _ct(dtype: str) -> str:
    return "bool" if dtype == "bool" else _kernels.CTYPE[np.dtype(dtype).char]


def _native_cases(names):
    out = []
    for name in names:
        for dt in DTYPES:
            kinds = _ops_elementwise._REACHES.get(name, "biufc")
            if np.dtype(dt).kind in kinds and _ops_elementwise.expression(name, _ct(dt)):
                out.append((name, dt))
    return out


def _sample(rng, dtype, n):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(n) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        edge = np.array([0, 1, info.max, info.min, info.max - 1, info.min + 1, 2, 7],
                        dtype=dt)
        vals = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
        small = rng.integers(max(info.min, -9), 10, n).astype(dt)
        return np.concatenate([edge, vals[: n // 2], small[: n - n // 2]])[:n]
    special = np.array(_SPECIAL_F, dtype=np.float64)
    vals = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)
    vals[: len(special)] = special
    if dt.kind == "c":
        im = rng.standard_normal(n) * 3
        im[: len(special)] = special[::-1]
        out = np.empty(n, dtype=dt)
        out.real = vals
        out.imag = im
        return out
    return vals.astype(dt)


def _assert_same(name, got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (name, got.dtype, want.dtype)
    if got.dtype.kind == "c":
        # NumPy's complex log1p is log(hypot(1 + x, y)): near |1 + z| = 1 its real part
        # carries an ulp of 1, not of itself (NVIDIA's OpenCL: 2.8e-14 relative, 0.5 eps).
        _assert_same("log1p_re" if name == "log1p" else name, got.real.copy(),
                     want.real.copy())
        _assert_same(name, got.imag.copy(), want.imag.copy())
        return
    if got.dtype.kind != "f":
        np.testing.assert_array_equal(got, want, err_msg=name)
        return
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan, err_msg=f"{name}: NaN positions")
    if name in _INEXACT or name == "log1p_re":
        ok = ~nan
        rtol = 4e-6 if got.dtype == np.float32 else 1e-14
        # Subnormal results may flush to zero (OpenCL allows it for float32).
        atol = np.finfo(got.dtype).tiny if name != "log1p_re" else 4 * np.finfo(got.dtype).eps
        np.testing.assert_allclose(got[ok], want[ok], rtol=rtol, atol=atol, err_msg=name)
        return
    # Bit for bit, so -0.0 and 0.0 differ.
    bits = f"u{got.dtype.itemsize}"
    np.testing.assert_array_equal(got[~nan].view(bits), want[~nan].view(bits), err_msg=name)


def _host(name, *args, **kwargs):
    with np.errstate(all="ignore"):
        return np.asarray(getattr(host_ops, name)(*args, **kwargs))


def _dev(a):
    return BACKEND.from_host(np.asarray(a), DEV)


@pytest.mark.parametrize("name,dtype", _native_cases(_UNARY))
def test_native_unary_kernel_equals_numpy(name, dtype):
    rng = np.random.default_rng(SEED)
    a = _sample(rng, dtype, 64)
    if name in ("abs", "sqrt", "sign") and np.dtype(dtype).kind == "c":
        name_cmp = "hypot"  # built on |z| = hypot(re, im): libm's rounding, within ulps
    else:
        name_cmp = name
    got = BACKEND.to_host(getattr(BACKEND.ops, name)(_dev(a)))
    _assert_same(name_cmp, got, _host(name, a))
    # Strided input (a view with a negative step) and a 0-d input.
    v = a.reshape(8, 8)[::-2, 1::3]
    got = BACKEND.to_host(getattr(BACKEND.ops, name)(BACKEND.ops.getitem(
        _dev(a.reshape(8, 8)), (slice(None, None, -2), slice(1, None, 3)))))
    _assert_same(name_cmp, got, _host(name, v))
    got = BACKEND.to_host(getattr(BACKEND.ops, name)(_dev(a[3:4].reshape(()))))
    _assert_same(name_cmp, got, _host(name, a[3:4].reshape(())))


@pytest.mark.parametrize("name,dtype", _native_cases(_BINARY))
def test_native_binary_kernel_equals_numpy(name, dtype):
    rng = np.random.default_rng(SEED + 1)
    a = _sample(rng, dtype, 16)
    b = _sample(np.random.default_rng(SEED + 2), dtype, 16)
    if name == "pow" and np.dtype(dtype).kind in "iu":
        b = (b.astype(np.int64) % 9).astype(dtype)  # negative powers raise (tested below)
    # Every pair of samples, through broadcasting (16, 1) x (16,).
    x, y = a.reshape(16, 1), b
    got = BACKEND.to_host(getattr(BACKEND.ops, name)(_dev(x), _dev(y)))
    _assert_same(name, got, _host(name, x, y))
    # A weak Python scalar on either side.
    s = b[5].item()
    got = BACKEND.to_host(getattr(BACKEND.ops, name)(_dev(a), s))
    _assert_same(name, got, _host(name, a, s if np.dtype(dtype).kind != "f" else b[5]))
    c, sv = (b, a[5]) if name == "pow" else (a, b[5])  # integer exponents stay >= 0
    s = sv.item()
    got = BACKEND.to_host(getattr(BACKEND.ops, name)(s, _dev(c)))
    _assert_same(name, got, _host(name, s if np.dtype(dtype).kind != "f" else sv, c))


@pytest.mark.parametrize("src", DTYPES)
def test_native_astype_equals_numpy(src):
    rng = np.random.default_rng(SEED + 3)
    a = _sample(rng, src, 48)
    if np.dtype(src).kind == "f":
        a[-8:] = np.array([300.7, -1.5, 70000.5, -3e9, 5e9, 2.0**63, -(2.0**63), 0.99])
    for dst in DTYPES:
        expr = _ops_core.cast_expression(_ct(src), _ct(dst))
        if expr is None:
            continue
        got = BACKEND.to_host(BACKEND.ops.astype(_dev(a), xp.__dict__[dst]))
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = a.astype(dst)
        _assert_same(f"astype {src}->{dst}", got, want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_preallocated_outputs_are_written_everywhere(dtype):
    """copy_into, setitem and inplace write into buffers made beforehand: each is first
    filled with a poison byte pattern, which must not survive anywhere."""
    rng = np.random.default_rng(SEED + 4)
    a = _sample(rng, dtype, 24).reshape(4, 6)
    b = _sample(np.random.default_rng(SEED + 5), dtype, 24)[-6:]
    poison = np.full(a.nbytes, 0x5A, dtype=np.uint8).view(a.dtype).reshape(a.shape)
    ops = BACKEND.ops
    dst = _dev(poison)
    ops.copy_into(dst, _dev(b))  # broadcast (6,) -> (4, 6)
    _assert_same("copy_into", BACKEND.to_host(dst), np.broadcast_to(b, a.shape).copy())
    dst = _dev(poison)
    ops.setitem(dst, (slice(None), slice(None)), _dev(a))
    _assert_same("setitem", BACKEND.to_host(dst), a)
    dst = _dev(poison)
    ops.setitem(dst, (slice(1, 3), Ellipsis), b[0].item())
    want = poison.copy()
    want[1:3] = b[0]
    _assert_same("setitem scalar", BACKEND.to_host(dst), want)
    if np.dtype(dtype).kind in "iufc":
        for name in ("add", "subtract", "multiply"):
            dst = _dev(a)
            assert ops.inplace(name, dst, _dev(b)) is True
            _assert_same(f"inplace {name}", BACKEND.to_host(dst), _host(name, a, b))


def test_views_see_writes_and_overlapping_copies_read_first():
    a = np.arange(10.0, dtype=np.float32)
    x = xp.asarray(a, device=DEV)
    v = x[2:6]
    x += 1.0
    np.testing.assert_array_equal(np.asarray(v.to_device("cpu")), a[2:6] + 1)
    x[1:] = x[:-1]
    want = a + 1
    want[1:] = want[:-1].copy()
    np.testing.assert_array_equal(np.asarray(x.to_device("cpu")), want)


def test_reductions_equal_numpy():
    rng = np.random.default_rng(SEED + 6)
    for dtype in ["int8", "uint32", "int64"] + FLOATS:
        a = _sample(rng, dtype, 60).reshape(3, 4, 5)
        if np.dtype(dtype).kind == "f":
            a = np.where(np.isfinite(a), a, 1.0).astype(dtype)
            a[1, 2, 3] = np.nan
        x = _dev(a)
        for axis in (None, (0,), (1, 2), (0, 2)):
            for name in ("max", "min"):
                got = BACKEND.to_host(getattr(BACKEND.ops, name)(x, axis=axis))
                _assert_same(name, got, _host(name, a, axis=axis))
            if np.dtype(dtype).kind in "iu":
                got = BACKEND.to_host(BACKEND.ops.sum(x, axis=axis))
                _assert_same("sum", got, _host("sum", a, axis=axis))
            else:
                got = BACKEND.to_host(BACKEND.ops.sum(x, axis=axis))
                np.testing.assert_allclose(got, _host("sum", a, axis=axis), rtol=1e-5)
        for axis in (None, 0, 2):
            for name in ("argmax", "argmin"):
                got = BACKEND.to_host(getattr(BACKEND.ops, name)(x, axis=axis))
                _assert_same(name, got, _host(name, a, axis=axis))


def test_integer_pow_refuses_negative_exponents():
    x = xp.asarray(np.array([2, 3], dtype=np.int32), device=DEV)
    with pytest.raises(ValueError, match=r"^pow: Integers to negative integer powers"):
        x ** xp.asarray(np.array([1, -1], dtype=np.int32), device=DEV)
    with pytest.raises(ValueError, match=r"^pow: Integers to negative integer powers"):
        x ** -2
    np.testing.assert_array_equal(np.asarray((x ** 31).to_device("cpu")),
                                  np.array([2, 3], dtype=np.int32) ** 31)


def test_diagonal_trace_outer_meshgrid_equal_numpy():
    rng = np.random.default_rng(SEED + 7)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    x = xp.asarray(a, device=DEV)
    for k in (-2, 0, 1, 5):
        np.testing.assert_array_equal(np.asarray(xp.linalg.diagonal(x, offset=k).to_device("cpu")),
                                      np.diagonal(a, k, -2, -1))
        np.testing.assert_allclose(np.asarray(xp.linalg.trace(x, offset=k).to_device("cpu")),
                                   np.trace(a, k, -2, -1), rtol=1e-6)
    u, v = a[0, 0], a[1, 1, :3]
    np.testing.assert_array_equal(
        np.asarray(xp.linalg.outer(x[0, 0], x[1, 1, :3]).to_device("cpu")), np.outer(u, v))
    for indexing in ("xy", "ij"):
        got = xp.meshgrid(x[0, 0], x[1, 1, :3], indexing=indexing)
        for g, w in zip(got, np.meshgrid(u, v, indexing=indexing)):
            np.testing.assert_array_equal(np.asarray(g.to_device("cpu")), w)


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int64", "bool"] + FLOATS + COMPLEX)
def test_cumulative_sum_and_prod_equal_numpy_bit_for_bit(dtype):
    rng = np.random.default_rng(SEED + 8)
    a = _sample(rng, dtype, 60).reshape(3, 4, 5)
    if np.dtype(dtype).kind in "fc":
        a = np.where(np.isfinite(a), a, 1.5).astype(dtype)  # keep the products finite
    x = _dev(a)
    for axis in (0, 1, 2):
        for include_initial in (False, True):
            for name in ("cumulative_sum", "cumulative_prod"):
                got = BACKEND.to_host(getattr(BACKEND.ops, name)(
                    x, axis=axis, include_initial=include_initial))
                _assert_same(name, got, _host(name, a, axis=axis,
                                              include_initial=include_initial))


def test_matmul_vecdot_tensordot_equal_numpy():
    rng = np.random.default_rng(SEED + 9)
    cases = [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),
             ((2, 1, 3, 4), (5, 4, 2)), ((0, 3), (3, 2)), ((2, 0), (0, 3))]
    for dtype in ["int8", "uint32", "int64", "bool"] + FLOATS + COMPLEX:
        for sa, sb in cases:
            a = (rng.standard_normal(sa) * 3).astype(dtype)
            b = (rng.standard_normal(sb) * 3).astype(dtype)
            got = BACKEND.to_host(_ops_linalg.matmul_native(_dev(a), _dev(b)))
            want = _host("matmul", a, b)
            assert got.shape == want.shape and got.dtype == want.dtype
            if np.dtype(dtype).kind in "fc":  # BLAS blocks its sums: the last bits differ
                rtol = 1e-5 if np.dtype(dtype).itemsize <= 8 and dtype != "float64" else 1e-12
                np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)
            else:  # integers wrap, exactly as NumPy's loop
                np.testing.assert_array_equal(got, want)
    a = rng.integers(-9, 9, (3, 4, 5)).astype(np.int32)
    b = rng.integers(-9, 9, (5, 4, 2)).astype(np.int32)
    for axes in [((1, 2), (1, 0)), ((2,), (0,)), ((), ())]:
        np.testing.assert_array_equal(
            BACKEND.to_host(BACKEND.ops.tensordot(_dev(a), _dev(b), axes)),
            _host("tensordot", a, b, axes))
    c = rng.integers(-9, 9, (2, 3, 4)).astype(np.int64)
    np.testing.assert_array_equal(BACKEND.to_host(BACKEND.ops.vecdot(_dev(c), _dev(c[0]))),
                                  _host("vecdot", c, c[0]))


def test_repeat_tile_roll_diff_equal_numpy():
    rng = np.random.default_rng(SEED + 10)
    a = rng.integers(-50, 50, (3, 4, 5)).astype(np.int16)
    x = _dev(a)
    ops = BACKEND.ops
    for r, ax in [(2, None), (3, 0), (2, 2), (0, 1)]:
        _assert_same("repeat", BACKEND.to_host(ops.repeat(x, r, axis=ax)),
                     _host("repeat", a, r, axis=ax))
    for reps in [(2,), (2, 1, 3), (1, 2, 1, 2), ()]:
        _assert_same("tile", BACKEND.to_host(ops.tile(x, reps)), _host("tile", a, reps))
    for sh, ax in [(2, None), (-1, 0), ((1, 2), (0, 2)), ((1, -1), (1, 1)), (7, 2), (0, 1)]:
        _assert_same("roll", BACKEND.to_host(ops.roll(x, sh, axis=ax)),
                     _host("roll", a, sh, axis=ax))
    for dtype in ["int8", "bool"] + FLOATS:
        b = (rng.standard_normal((3, 4)) * 5).astype(dtype)
        for kw in [{}, {"axis": 0, "n": 2}, {"n": 0}, {"n": 5},
                   {"prepend": True if dtype == "bool" else 1, "append": b[:, :2]}]:
            dkw = {k: (_dev(v) if isinstance(v, np.ndarray) else v) for k, v in kw.items()}
            _assert_same("diff", BACKEND.to_host(ops.diff(_dev(b), **dkw)),
                         _host("diff", b, **kw))
