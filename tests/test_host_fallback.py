"""The generic host fallback (backends/_common/fallback.py), without any device library.

A fake device buffer wraps a NumPy array and names its device (``fake:0``, ``fake:1``);
the hooks copy it to and from the host. Contract functions and kernels run through
fallbacks made over the NumPy backend and are compared with NumPy; in-place writes come
back (and only to the arguments written); the listing; each mode, the default "warn"
once per (function, device) included. The suite itself runs with fallbacks allowed
(tests/conftest.py), so every instance here is made fresh, its mode read from an
environment set by the test.
"""

from __future__ import annotations

import collections
import warnings

import numpy as np
import pytest
from tessera_array.backends._common import fallback as fb
from tessera_array.backends.numpy import backend as numpy_backend

import tessera_array as xp
from tessera_array import _backend_api as api
from tessera_array._dispatch import KernelRegistry


class FakeBuffer:
    """A device buffer of a fake backend: a private copy of an array, on ``device``."""

    __slots__ = ("data", "device")

    def __init__(self, data, device):
        self.data = np.array(data, copy=True)
        self.device = device


class Hooks:
    """The fake backend's buffer operations, counting copies and write-backs."""

    def __init__(self):
        self.copies_in = 0
        self.written = []  # the native buffers written back, in order

    @staticmethod
    def is_native(obj):
        return obj.__class__ is FakeBuffer

    def to_host(self, native):
        self.copies_in += 1
        return native.data.copy()

    @staticmethod
    def from_host(host, like):
        return FakeBuffer(host, like.device if like.__class__ is FakeBuffer else like)

    def write_back(self, native, host):
        self.written.append(native)
        native.data[...] = host

    @staticmethod
    def device_of(native):
        return native.device


def make(monkeypatch, mode=None):
    """A fresh fallback of the fake backend, its mode from TESSERA_HOST_FALLBACK=mode
    (unset: None)."""
    if mode is None:
        monkeypatch.delenv(fb.ENV, raising=False)
    else:
        monkeypatch.setenv(fb.ENV, mode)
    hooks = Hooks()
    fallback = fb.HostFallback(
        "fake", label="Fake", is_native=hooks.is_native, to_host=hooks.to_host,
        from_host=hooks.from_host, write_back=hooks.write_back, device_of=hooks.device_of,
        host=numpy_backend)
    return fallback, hooks


def on(device, data):
    return FakeBuffer(np.asarray(data), device)


A = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.25], [0.5, 0.25, 2.0]])
B = np.array([1.0, -2.0, 0.5])


# ---- results equal NumPy's ---------------------------------------------------------------


def test_ops_run_on_the_host_and_come_back_to_the_argument_device(monkeypatch):
    f, hooks = make(monkeypatch, "allow")
    a, b = on("fake:1", A), on("fake:1", B)
    r = f.op("inv")(a)
    assert r.__class__ is FakeBuffer and r.device == "fake:1"
    np.testing.assert_array_equal(r.data, np.linalg.inv(A))
    np.testing.assert_array_equal(f.op("solve")(a, on("fake:1", B[:, None])).data,
                                  np.linalg.solve(A, B[:, None]))
    np.testing.assert_array_equal(f.op("det")(a).data, np.linalg.det(A))
    w, v = f.op("eigh")(a)  # a tuple of native buffers
    ew, ev = np.linalg.eigh(A)
    np.testing.assert_array_equal(w.data, ew)
    np.testing.assert_array_equal(v.data, ev)
    u, s, vh = f.op("svd")(a, False)
    np.testing.assert_array_equal(s.data, np.linalg.svd(A, full_matrices=False).S)
    np.testing.assert_allclose((u.data * s.data) @ vh.data, A, rtol=1e-14)
    got = f.op("sum")(a, axis=(0,), dtype=None, keepdims=True)
    np.testing.assert_array_equal(got.data, A.sum(axis=0, keepdims=True))
    np.testing.assert_array_equal(f.op("vecdot")(a, b, -1).data, A @ B)
    # An index buffer inside a key tuple goes to the host too.
    idx = on("fake:1", np.array([2, 0]))
    np.testing.assert_array_equal(f.op("getitem")(a, (idx, slice(None))).data, A[[2, 0]])
    assert hooks.written == []  # nothing here writes its arguments


def test_creation_goes_to_the_device_argument(monkeypatch):
    f, _ = make(monkeypatch, "allow")
    r = f.op("full")((2, 3), 1.5, dtype=xp.float32, device="fake:0")
    assert r.device == "fake:0" and r.data.dtype == np.float32
    np.testing.assert_array_equal(r.data, np.full((2, 3), 1.5, np.float32))
    with pytest.raises(RuntimeError, match=r"^eye: the fake host fallback found no fake "
                                           r"array and no device= among its arguments"):
        f.op("eye")(2, 2, k=0, dtype=xp.float32)


def test_named_tuples_and_host_scalars_come_back_as_native_buffers(monkeypatch):
    f, _ = make(monkeypatch, "allow")
    Pair = collections.namedtuple("Pair", "low high")
    wrapped = f.wrap("pair", lambda a: Pair(a.min(), np.float32(a.max())))
    r = wrapped(on("fake:0", A))
    assert type(r) is Pair and r.low.__class__ is r.high.__class__ is FakeBuffer
    assert r.low.data.shape == () and float(r.high.data) == A.max()


# ---- in-place writes come back -------------------------------------------------------------


def test_in_place_ops_write_back_exactly_the_written_argument(monkeypatch):
    f, hooks = make(monkeypatch, "allow")
    dst, src = on("fake:0", np.zeros(3)), on("fake:0", B)
    assert f.op("copy_into")(dst, src) is None
    np.testing.assert_array_equal(dst.data, B)
    assert hooks.written == [dst]
    a = on("fake:0", np.zeros((2, 3)))
    f.op("setitem")(a, (1, slice(None)), on("fake:0", B))
    np.testing.assert_array_equal(a.data, [[0, 0, 0], B])
    assert hooks.written[1:] == [a]
    x, y = on("fake:0", A), on("fake:0", np.ones((3, 3)))
    assert f.op("inplace")("add", x, y) is True
    np.testing.assert_array_equal(x.data, A + 1)
    np.testing.assert_array_equal(y.data, np.ones((3, 3)))
    assert hooks.written[2:] == [x]
    assert f.op("inplace")("no such op", x, y) is False  # the contract's bool, as is


def _host_kernel(op, dtype, variant="default"):
    host = KernelRegistry()
    numpy_backend.register(host)
    return host.lookup(op, "numpy", dtype, variant)


def native_matvec(a, x):
    return FakeBuffer(a.data @ x.data, a.device)


def test_kernel_fallbacks_cover_the_contract_ops_a_backend_lacks(monkeypatch):
    f, hooks = make(monkeypatch, "allow")
    registry = KernelRegistry()
    registry.register("matvec", "fake", xp.float32, native_matvec)
    covered = f.register_kernels(registry)
    assert set(covered) <= set(api.KERNELS) and {"axpy", "sgd_step", "matvec"} <= set(covered)
    assert registry.lookup("matvec", "fake", xp.float32) is native_matvec  # native kept
    assert registry.lookup("matvec", "fake", xp.float64).host_fallback
    assert all(k.backend == "fake" for k in registry.keys())  # noqa: SIM118
    assert {f"kernel {op}" for op in covered} == set(f.names())
    # A host kernel that writes in place: y comes back, x is not written.
    x, y = on("fake:0", np.array([10.0, 20.0])), on("fake:0", np.array([1.0, 2.0]))
    assert registry.lookup("axpy", "fake", xp.float64)(np.float64(0.5), x, y) is None
    np.testing.assert_array_equal(y.data, [6.0, 12.0])
    assert hooks.written == [y]


def test_optimizer_step_fallback_writes_back_params_and_state(monkeypatch):
    f, hooks = make(monkeypatch, "allow")
    registry = KernelRegistry()
    f.register_kernels(registry)
    rng = np.random.default_rng(7)
    p, g = rng.standard_normal(5), rng.standard_normal(5)
    m = np.zeros(5)
    kw = {"lr": 0.1, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.01,
          "nesterov": True, "maximize": False, "first": True}
    params, grads, bufs = [on("fake:0", p)], [on("fake:0", g)], [on("fake:0", m)]
    out = registry.lookup("sgd_step", "fake", xp.float64)(params, grads, bufs, **kw)
    want_p, want_m = p.copy(), m.copy()
    assert out == _host_kernel("sgd_step", xp.float64)([want_p], [g.copy()], [want_m], **kw)
    np.testing.assert_array_equal(params[0].data, want_p)
    np.testing.assert_array_equal(bufs[0].data, want_m)
    assert not np.array_equal(want_p, p)  # the step did move the parameter
    np.testing.assert_array_equal(grads[0].data, g)
    assert hooks.written == [params[0], bufs[0]]  # grads are read only


# ---- the listing ---------------------------------------------------------------------------


def test_listing_names_what_was_made_and_only_contract_ops(monkeypatch):
    f, _ = make(monkeypatch, "allow")
    f.op("inv")
    f.op("cholesky")
    f.wrap("acos[complex64]", np.arccos)
    f.wrap("measurement", np.sort, record=False)
    assert f.names() == ("acos[complex64]", "cholesky", "inv")
    with pytest.raises(ValueError, match=r"^host fallback: expected an ops name of the "
                                         r"contract .*Received: name='asarray'"):
        f.op("asarray")  # a NumPy-backend export, not a contract name


# ---- modes ---------------------------------------------------------------------------------


def test_the_default_mode_is_warn(monkeypatch):
    assert fb.DEFAULT_MODE == "warn"
    assert make(monkeypatch)[0].mode == "warn"
    assert make(monkeypatch, "")[0].mode == "warn"
    for mode in fb.MODES:
        assert make(monkeypatch, f" {mode.upper()} ")[0].mode == mode
    with pytest.raises(ValueError, match=r"^TESSERA_HOST_FALLBACK: expected one of allow, "
                                         r"warn, error. Received: TESSERA_HOST_FALLBACK='no'"):
        make(monkeypatch, "no")


def test_warn_once_per_function_and_device(monkeypatch):
    f, _ = make(monkeypatch)  # the default
    inv, det = f.op("inv"), f.op("det")
    a0, a1 = on("fake:0", A), on("fake:1", A)
    with pytest.warns(fb.HostFallbackWarning) as first:
        inv(a0)
    assert len(first) == 1
    text = str(first[0].message)
    assert text.startswith("inv: no native Fake kernel; the call runs on the host "
                           "(copying its arrays from and back to fake:0).")
    assert "TESSERA_HOST_FALLBACK=allow" in text and "set_host_fallback('allow')" in text
    assert "TESSERA_HOST_FALLBACK=error" in text
    assert first[0].filename == __file__  # points at the caller, not at the mechanism
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(inv(a0).data, np.linalg.inv(A))  # silent now
    with pytest.warns(fb.HostFallbackWarning, match=r"^inv: .*fake:1"):
        inv(a1)  # the same function on another device
    with pytest.warns(fb.HostFallbackWarning, match=r"^det: .*fake:0"):
        det(a0)  # another function on the same device
    with pytest.warns(fb.HostFallbackWarning, match=r"^full: .*fake:1"):
        f.op("full")((2,), 0.0, dtype=xp.float64, device="fake:1")  # the device= argument
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        inv(a1), det(a0)
    f.set_mode("warn")  # the record starts afresh
    with pytest.warns(fb.HostFallbackWarning, match=r"^inv: .*fake:0"):
        inv(a0)


def test_a_warning_raised_as_an_error_is_not_counted_as_issued(monkeypatch):
    f, _ = make(monkeypatch, "warn")
    inv = f.op("inv")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            with pytest.raises(fb.HostFallbackWarning, match=r"^inv: "):
                inv(on("fake:0", A))
    with pytest.warns(fb.HostFallbackWarning):
        inv(on("fake:0", A))


def test_allow_is_silent(monkeypatch):
    f, _ = make(monkeypatch, "allow")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f.op("inv")(on("fake:0", A))
        f.op("inv")(on("fake:1", A))


def test_error_refuses_before_copying(monkeypatch):
    f, hooks = make(monkeypatch, "error")
    dst = on("fake:1", np.zeros(3))
    with pytest.raises(fb.HostFallbackError,
                       match=r"^copy_into: no native Fake kernel; the call would run on the "
                             r"host \(copying its arrays from and back to fake:1\)\. "
                             r"Received: TESSERA_HOST_FALLBACK='error'\. Allow it with "
                             r"TESSERA_HOST_FALLBACK=allow or "
                             r"tessera_array\.backends\.fake\.set_host_fallback\('allow'\)\.$"):
        f.op("copy_into")(dst, on("fake:1", B))
    assert hooks.copies_in == 0 and hooks.written == [] and not dst.data.any()
    f.set_mode("allow")
    f.op("copy_into")(dst, on("fake:1", B))
    np.testing.assert_array_equal(dst.data, B)


def test_set_mode_refuses_an_unknown_mode(monkeypatch):
    f, _ = make(monkeypatch, "error")
    with pytest.raises(ValueError, match=r"^set_host_fallback: mode must be one of 'allow', "
                                         r"'warn', 'error'. Received: mode='off'"):
        f.set_mode("off")
    assert f.mode == "error"
