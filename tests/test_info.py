"""``__array_namespace_info__``: capabilities, devices, default and supported dtypes."""

from __future__ import annotations

import pytest

import tessera_array as xp
from tessera_array import _discovery

_KINDS = {
    "bool": {"bool"},
    "signed integer": {"int8", "int16", "int32", "int64"},
    "unsigned integer": {"uint8", "uint16", "uint32", "uint64"},
    "integral": {"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"},
    "real floating": {"float32", "float64"},
    "complex floating": {"complex64", "complex128"},
}
_KINDS["numeric"] = _KINDS["integral"] | _KINDS["real floating"] | _KINDS["complex floating"]



def test_capabilities():
    caps = xp.__array_namespace_info__().capabilities()
    assert caps == {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 64}
    x = xp.zeros((1,) * caps["max dimensions"])
    assert x.ndim == 64


def test_devices_and_default(device):
    info = xp.__array_namespace_info__()
    devs = info.devices()
    assert type(devs) is tuple
    assert device in devs
    assert devs == _discovery.all_devices()
    assert info.default_device() in devs
    assert xp.zeros(1).device is info.default_device()
    for d in devs:
        assert xp.empty(1, device=d).device is d


def test_devices_lists_every_backend(f32_device):
    devs = xp.__array_namespace_info__().devices()
    assert f32_device in devs and xp.Device("cpu") in devs


def test_default_dtypes(device, f32_device):
    info = xp.__array_namespace_info__()
    expected = {"real floating": xp.float64, "complex floating": xp.complex128,
                "integral": xp.int64, "indexing": xp.int64}
    assert info.default_dtypes(device=device) == expected
    assert info.default_dtypes() == info.default_dtypes(device=info.default_device())
    assert info.default_dtypes(device=str(device)) == expected
    assert info.default_dtypes(device=f32_device) == {
        "real floating": xp.float32, "complex floating": xp.complex64,
        "integral": xp.int64, "indexing": xp.int64,
    }


@pytest.mark.parametrize("kind", [None, *_KINDS, ("bool", "real floating"),
                                  ("signed integer", "complex floating")])
def test_dtypes(device, kind):
    out = xp.__array_namespace_info__().dtypes(device=device, kind=kind)
    if kind is None:
        names = set().union(*_KINDS.values()) | {"bool"}
    elif isinstance(kind, tuple):
        names = set().union(*(_KINDS[k] for k in kind))
    else:
        names = _KINDS[kind]
    assert set(out) == names
    assert all(out[n] is getattr(xp, n) for n in out)


def test_dtypes_of_a_device_without_float64(f32_device):
    info = xp.__array_namespace_info__()
    out = info.dtypes(device=f32_device)
    assert "float64" not in out and "complex128" not in out and "float32" in out
    assert set(info.dtypes(device=f32_device, kind="real floating")) == {"float32"}


def test_dtypes_bad_input(device):
    info = xp.__array_namespace_info__()
    with pytest.raises(ValueError, match=r"^dtypes: unknown kind.*Received: kind='floating'"):
        info.dtypes(kind="floating")
    with pytest.raises(ValueError, match=r"^dtypes: unknown kind"):
        info.dtypes(kind=("bool", "strings"))
    with pytest.raises(TypeError, match=r"^dtypes: kind must be None, a kind name or a tuple of "
                                        r"kind names. Received: kind=tessera_array.float32"):
        info.dtypes(kind=xp.float32)
    with pytest.raises(TypeError, match=r"^dtypes: kind must be a kind name"):
        info.dtypes(kind=("bool", xp.float32))
    with pytest.raises(ValueError, match=r"^dtypes: no such device"):
        info.dtypes(device="cpu:3")
    with pytest.raises(ValueError, match=r"^default_dtypes: no such device"):
        info.default_dtypes(device="cpu:3")
    with pytest.raises(TypeError, match=r"^default_dtypes: device must be"):
        info.default_dtypes(device=1.0)
    with pytest.raises(TypeError):
        info.dtypes("cpu")  # keyword-only, as in the standard
