"""Fake backend objects for the tests of discovery and of the device gate.

A loadable fake reuses the NumPy backend's ``ops`` on devices of its own kind
(``fakegood:0``); the others fail in the ways real backends fail: absent
(``is_available()`` False), present but broken (``load()`` raises while
``plausibly_present()`` finds evidence), or failing in ``register()``.

Also importable from a subprocess (tests put this folder on ``PYTHONPATH``), where
the module-level instances serve as entry-point targets.
"""

from __future__ import annotations

import numpy as np
from tessera_array.backends.numpy import backend as _numpy_backend

from tessera_array import _dtypes
from tessera_array._devices import Device


class FakeBackend:
    native_type = np.ndarray
    ops = _numpy_backend.ops
    native_dtype = staticmethod(_numpy_backend.native_dtype)
    coerce_native = staticmethod(_numpy_backend.coerce_native)
    dlpack = staticmethod(_numpy_backend.dlpack)
    dlpack_device = staticmethod(_numpy_backend.dlpack_device)

    def __init__(self, name, *, available=True, reason=None, evidence=None, load_error=None,
                 register_error=None, priority=-10, ndevices=1, dtypes=None, fix_hint=None,
                 is_host=True):
        self.name = name
        self.is_host = is_host  # False: behaves as an accelerator (no implicit host copies)
        self.device_kind = name
        self.priority = priority
        self._available = available
        self._reason = reason
        self._evidence = evidence
        self._load_error = load_error
        self._register_error = register_error
        self._ndevices = ndevices
        self._dtypes = tuple(dtypes) if dtypes is not None else _dtypes.ALL_DTYPES
        self._devices = ()
        if fix_hint is not None:
            self.fix_hint = fix_hint

    @staticmethod
    def from_host(array, device):
        return np.array(array, copy=True)  # an explicit transfer: a copy, as to a device

    @staticmethod
    def to_host(native):
        return np.array(native, copy=True)

    def is_available(self):
        return self._available

    def unavailable_reason(self):
        return self._reason

    def plausibly_present(self):
        return self._evidence

    def load(self):
        if self._load_error is not None:
            raise self._load_error
        self._devices = tuple(
            Device(self.device_kind, i, backend_name=self.name) for i in range(self._ndevices)
        )

    def devices(self):
        return self._devices

    def dtypes(self, device):
        return self._dtypes

    def versions(self):
        return {"fakelib": "1.2.3"}

    def register(self, registry):
        registry.register("matvec", self.name, _dtypes.float32, _matvec)
        if self._register_error is not None:
            raise self._register_error


def _matvec(a, x):
    return np.asarray(a @ x)


# Entry-point targets for the subprocess tests.
loadable = FakeBackend("fakegood")
absent = FakeBackend("fakeabsent", available=False, reason="fakelib not installed")
broken = FakeBackend(
    "fakebroken",
    load_error=RuntimeError("fake driver 0.0 is older than 1.0"),
    evidence="/dev/fake0 exists",
    fix_hint="install fake driver >= 1.0",
)
