"""The kernel registry (tessera_array/_dispatch.py) and the NumPy backend's matvec kernels."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tessera_array as xp
from tessera_array import _dispatch, _dtypes
from tessera_array._dispatch import OPS, KernelKey, KernelRegistry, registry

FLOATING = (xp.float32, xp.float64, xp.complex64, xp.complex128)
VARIANTS = ("default", "scalar", "warp")
RTOL = {xp.float32: 2e-5, xp.complex64: 2e-5, xp.float64: 1e-12, xp.complex128: 1e-12}


def _launcher(*args):
    return None


@pytest.fixture
def reg():
    return KernelRegistry()


def test_key_fields():
    key = KernelKey("matvec", "numpy", xp.float32)
    assert key == ("matvec", "numpy", xp.float32, "default")
    assert key.op == "matvec" and key.backend == "numpy"
    assert key.dtype is xp.float32 and key.variant == "default"
    assert KernelKey("matvec", "numpy", xp.float32, "warp") != key
    assert len({key, KernelKey("matvec", "numpy", xp.float32)}) == 1


def test_ops_come_from_one_list():
    assert OPS == frozenset(op for ops in _dispatch.FAMILIES.values() for op in ops)
    assert {"matvec", "spmv", "fft_c2c", "attention_fwd", "adam_step"} <= OPS


def test_register_and_lookup(reg):
    reg.register("matvec", "fake", (xp.float32, xp.float64), _launcher, variant="warp")
    assert reg.lookup("matvec", "fake", xp.float64, "warp") is _launcher
    assert KernelKey("matvec", "fake", xp.float32, "warp") in reg.keys()
    reg.register("spmv", "fake", xp.float32, _launcher)  # a single DType is accepted
    assert reg.lookup("spmv", "fake", xp.float32) is _launcher


def test_unknown_op_fails_at_register_and_lookup(reg):
    with pytest.raises(ValueError, match=r"register: unknown op\. Expected one of \[.*'matvec'.*\]"
                                         r"\. Received: op='matvecc'"):
        reg.register("matvecc", "fake", xp.float32, _launcher)
    with pytest.raises(ValueError, match=r"lookup: unknown op\..*Received: op='matvecc'"):
        reg.lookup("matvecc", "fake", xp.float32)
    with pytest.raises(ValueError, match=r"lookup: unknown op\..*Received: op='sum'"):
        registry.lookup("sum", "numpy", xp.float32)


def test_bad_keys(reg):
    with pytest.raises(TypeError, match=r"register: dtype must be a tessera_array DType\. "
                                        r"Received: dtype='float32'"):
        reg.register("matvec", "fake", "float32", _launcher)
    with pytest.raises(TypeError, match=r"register: dtype must be a tessera_array DType"):
        reg.register("matvec", "fake", (np.float32,), _launcher)
    with pytest.raises(TypeError, match=r"lookup: dtype must be a tessera_array DType"):
        reg.lookup("matvec", "fake", np.float32)
    with pytest.raises(TypeError, match=r"register: variant must be a non-empty string\. "
                                        r"Received: variant=''"):
        reg.register("matvec", "fake", xp.float32, _launcher, variant="")
    with pytest.raises(TypeError, match=r"register: backend must be a name"):
        reg.register("matvec", 3, xp.float32, _launcher)
    with pytest.raises(TypeError, match=r"register: launcher must be callable\. "
                                        r"Received: launcher='nope'"):
        reg.register("matvec", "fake", xp.float32, "nope")
    assert reg.keys() == []


def test_register_twice(reg):
    reg.register("matvec", "fake", xp.float32, _launcher)
    with pytest.raises(ValueError, match=r"register: a kernel is already registered for "
                                         r"KernelKey\(op='matvec', backend='fake'"):
        reg.register("matvec", "fake", xp.float32, _launcher)

    def other(*args):
        return None

    reg.register("matvec", "fake", xp.float32, other, replace=True)
    assert reg.lookup("matvec", "fake", xp.float32) is other


def test_failed_lookup_names_what_is_registered():
    with pytest.raises(xp.KernelNotFoundError) as info:
        registry.lookup("matvec", "numpy", xp.int32)
    assert isinstance(info.value, NotImplementedError)
    pattern = (
        r"^matvec: no kernel for op=matvec, backend=numpy, dtype=int32, variant=default\. "
        r"Registered on numpy \(dtype/variant\): (complex128|complex64|float32|float64)/default, "
        r".*float64/warp\.$"
    )
    msg = str(info.value)
    assert re.match(pattern, msg), msg
    for dt in FLOATING:
        for variant in VARIANTS:
            assert f"{dt.name}/{variant}" in msg
    with pytest.raises(xp.KernelNotFoundError, match=r"variant=tiled\. Registered on numpy"):
        registry.lookup("matvec", "numpy", xp.float32, "tiled")


def test_failed_lookup_on_a_backend_without_the_op():
    with pytest.raises(xp.KernelNotFoundError,
                       match=r"matvec: no kernel for op=matvec, backend=nosuch, dtype=float32, "
                             r"variant=default\. Nothing is registered for matvec on nosuch; "
                             r"backends with matvec: .*numpy"):
        registry.lookup("matvec", "nosuch", xp.float32)
    reg = KernelRegistry()
    with pytest.raises(xp.KernelNotFoundError, match=r"backends with spmv: none\."):
        reg.lookup("spmv", "numpy", xp.float32)


def test_unregister_backend(reg):
    reg.register("matvec", "a", xp.float32, _launcher)
    reg.register("matvec", "b", xp.float32, _launcher)
    reg.unregister_backend("a")
    assert [k.backend for k in reg.keys()] == ["b"]


def test_numpy_matvec_is_registered():
    keys = {k for k in registry.keys() if k.op == "matvec" and k.backend == "numpy"}
    assert keys == {KernelKey("matvec", "numpy", dt, v) for dt in FLOATING for v in VARIANTS}


def _random(rng, shape, dtype):
    a = rng.standard_normal(shape)
    if dtype.kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dtype._np)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", FLOATING, ids=str)
@pytest.mark.parametrize("transposed", [False, True], ids=["rowmajor", "colmajor"])
def test_matvec_matches_numpy(device, dtype, variant, transposed):
    if dtype not in device.backend.dtypes(device):
        pytest.skip(f"{device} has no {dtype}")
    rng = np.random.default_rng(7)
    a_np = _random(rng, (37, 23), dtype)
    if transposed:
        a_np = np.ascontiguousarray(a_np.T).T  # column-major storage, same values
    x_np = _random(rng, (23,), dtype)
    a = xp.asarray(a_np, device=device)
    x = xp.asarray(x_np, device=device)
    launch = _dispatch.lookup("matvec", device, dtype, variant)
    y = launch(a._data, x._data)
    y_host = np.asarray(device.backend.to_host(y))
    assert y_host.shape == (37,)
    assert y_host.dtype == dtype._np
    wide = np.complex128 if dtype.kind == "c" else np.float64
    expected = a_np.astype(wide) @ x_np.astype(wide)
    np.testing.assert_allclose(y_host, expected, rtol=RTOL[dtype], atol=RTOL[dtype] * 10)


def test_lookup_through_device_for_a_missing_dtype(device):
    with pytest.raises(xp.KernelNotFoundError, match=r"dtype=int64.*Registered on"):
        _dispatch.lookup("matvec", device, _dtypes.int64)


def test_find_is_none_for_a_miss_remembered_until_a_registration(device, monkeypatch):
    reg = KernelRegistry()
    monkeypatch.setattr(_dispatch, "registry", reg)
    asked = []
    real = reg.lookup

    def counting(*key):
        asked.append(key)
        return real(*key)

    monkeypatch.setattr(reg, "lookup", counting)
    assert _dispatch.find("matvec", device, xp.float32) is None
    assert _dispatch.find("matvec", device, xp.float32) is None
    assert len(asked) == 1  # (the miss remembered)
    with pytest.raises(xp.KernelNotFoundError, match="Nothing is registered for matvec"):
        _dispatch.lookup("matvec", device, xp.float32)  # still an error through lookup
    reg.register("matvec", device.backend.name, [xp.float32], _launcher)
    assert _dispatch.find("matvec", device, xp.float32) is _launcher
    assert _dispatch.lookup("matvec", device, xp.float32) is _launcher
    assert _dispatch.find("matvec", device, xp.float64) is None


def test_coverage_matrix_prints(capsys):
    text = registry.matrix()
    print(text)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["op", "backend", "variant", "dtypes"]
    for variant in VARIANTS:
        (line,) = [ln for ln in lines if ln.split()[:3] == ["matvec", "numpy", variant]]
        assert line.split(None, 3)[3] == "complex128, complex64, float32, float64"
    # every registered key appears in the matrix
    rows = {(ln.split()[0], ln.split()[1], ln.split()[2]) for ln in lines[1:]}
    assert rows == {(k.op, k.backend, k.variant) for k in registry.keys()}


def test_register_family_registers_every_op_of_the_family(reg):
    launchers = {op: _launcher for op in _dispatch.FAMILIES["optimizer"]}
    reg.register_family("optimizer", "fake", (xp.float32, xp.float64), launchers)
    assert {(k.op, k.dtype) for k in reg.keys()} == {
        (op, dt) for op in _dispatch.FAMILIES["optimizer"] for dt in (xp.float32, xp.float64)}
    with pytest.raises(ValueError, match=r"^register_family: the fft family needs a launcher "
                                         r"for every op. Received: none for fft_c2c"):
        reg.register_family("fft", "fake", xp.complex64, {"fft_r2c": _launcher,
                                                          "fft_c2r": _launcher})
    with pytest.raises(ValueError, match=r"^register_family: unknown family"):
        reg.register_family("optimizers", "fake", xp.float32, launchers)
