"""The backend gate of the tests: one module that decides, for every backend, whether its
tests run, skip honestly, or fail.

Environment variables:

``TESSERA_TEST_BACKENDS=numpy,opencl``
    Narrow the run to these backends.
``TESSERA_REQUIRE_BACKENDS=cuda,opencl``
    These backends must load: every test that would be skipped for one of them fails
    instead, a required name no backend answers to included.

The ``device`` parameter of tests/conftest.py is planned by :func:`plan_devices`. A test
module that concerns one backend only (tests/test_opencl_*.py and their CUDA twins) opens
with ``BACKEND = _gate.require_backend("opencl")``: the backend object when it loaded,
else a module-level skip with the backend's reason, or a failure where the backend is
required. No test module calls ``pytest.skip(..., allow_module_level=True)`` itself
(``tests/test_backends.py`` checks).
"""

from __future__ import annotations

import os

import pytest

from tessera_array import _discovery

TEST_BACKENDS_ENV = "TESSERA_TEST_BACKENDS"
REQUIRE_BACKENDS_ENV = "TESSERA_REQUIRE_BACKENDS"

__all__ = [
    "REQUIRE_BACKENDS_ENV",
    "TEST_BACKENDS_ENV",
    "MissingBackend",
    "evidence_of",
    "missing_backend",
    "parse_names",
    "plan_devices",
    "require_backend",
    "required_names",
    "selected_names",
    "skip_or_fail",
]


class MissingBackend:
    """The ``device`` value standing for a backend that did not load.

    Tests never receive it: collection turns it into a skip, or into a failure when
    the backend is required.
    """

    # Recognised by this attribute, not by class: conformance/conftest.py loads this
    # file a second time under another module name.
    is_missing_backend = True

    def __init__(self, name, reason, evidence=None, required=False, fix=None):
        self.name = name
        self.reason = reason or "not available"
        self.evidence = evidence
        self.required = required
        self.fix = fix

    def __repr__(self):
        return f"MissingBackend({self.name!r}, {self.reason!r})"

    def __str__(self):
        return self.name

    @property
    def skip_reason(self) -> str:
        if self.evidence:
            return (f"{self.name}: present ({self.evidence}) but did not load: {self.reason}")
        return f"{self.name}: {self.reason}"

    @property
    def failure_message(self) -> str:
        return (f"{REQUIRE_BACKENDS_ENV} names {self.name!r}, but it did not load. "
                f"{self.skip_reason}. Fix: {self.fix_text}")

    @property
    def fix_text(self) -> str:
        if self.fix:
            return self.fix
        return (f"make its library and driver work (`python -m tessera_array info` shows "
                f"every backend's status), or leave it out with "
                f"{TEST_BACKENDS_ENV}=<the other backends>.")

    def warning_text(self) -> str:
        return (f"tessera_array backend {self.name!r} looks present ({self.evidence}) but did "
                f"not load: {self.reason}. Its device tests are skipped (they fail under "
                f"{REQUIRE_BACKENDS_ENV}={self.name}). Fix: {self.fix_text}")


def parse_names(text) -> set | None:
    """``"numpy, opencl"`` -> ``{"numpy", "opencl"}``; None or blank -> None."""
    if not text or not text.strip():
        return None
    return {n.strip() for n in text.split(",") if n.strip()}


def evidence_of(backend) -> str | None:
    """What ``backend.plausibly_present()`` says, or None (never raises)."""
    probe = getattr(backend, "plausibly_present", None)
    if probe is None:
        return None
    try:
        return probe() or None
    except Exception as err:  # a crashing probe is evidence of something, reported
        return f"plausibly_present() raised {type(err).__name__}: {err}"


def plan_devices(status_rows, selected=None, required=None):
    """Decide the ``device`` parameter.

    Parameters
    ----------
    status_rows : list of (name, backend or None, reason or None)
        As :func:`tessera_array._discovery.backend_status` returns them.
    selected : set of str or None
        ``TESSERA_TEST_BACKENDS``; None runs every known backend.
    required : set of str or None
        ``TESSERA_REQUIRE_BACKENDS``; always included, and their skips fail.

    Returns
    -------
    params : list
        Devices of loaded backends, then a :class:`MissingBackend` for each
        backend that did not load.
    broken : list of MissingBackend
        Backends that look present but did not load (to warn about).
    """
    required = set(required or ())
    wanted = None if selected is None else set(selected) | required
    params, broken, seen = [], [], set()
    loaded = []
    for name, backend, reason in status_rows:
        seen.add(name)
        if reason is None and backend is not None:
            loaded.append(backend)
            continue
        evidence = evidence_of(backend) if backend is not None else None
        missing = MissingBackend(name, reason, evidence, required=name in required,
                                 fix=getattr(backend, "fix_hint", None))
        if evidence:
            broken.append(missing)
        if wanted is None or name in wanted:
            params.append(missing)
    devices = []
    for backend in sorted(loaded, key=lambda b: -b.priority):
        if wanted is None or backend.name in wanted:
            devices.extend(backend.devices())
    known = ", ".join(sorted(seen)) or "none"
    # Names asked for that no backend answers to: a required one fails like a known one
    # that did not load (without a selection, only the required names are asked for).
    asked = wanted if wanted is not None else required
    for name in sorted(asked - seen):
        params.append(MissingBackend(
            name,
            f"no backend of that name is known (known: {known}; third-party backends "
            f"register through the entry-point group {_discovery.ENTRY_POINT_GROUP!r})",
            required=name in required,
        ))
    return devices + params, broken


def selected_names() -> set | None:
    """``TESSERA_TEST_BACKENDS`` as a set (None: every backend)."""
    return parse_names(os.environ.get(TEST_BACKENDS_ENV))


def required_names() -> set:
    """``TESSERA_REQUIRE_BACKENDS`` as a set."""
    return parse_names(os.environ.get(REQUIRE_BACKENDS_ENV)) or set()


def missing_backend(name: str) -> MissingBackend | None:
    """The :class:`MissingBackend` standing for ``name`` in this run, or None when its
    tests run (it loaded and is selected)."""
    params, _ = plan_devices(_discovery.backend_status(), {name}, required_names() & {name})
    for p in params:
        if getattr(p, "is_missing_backend", False) and p.name == name:
            return p
    return None


def skip_or_fail(missing: MissingBackend, *, module_level: bool = False):
    """Skip (honestly, with the backend's reason) or, for a required backend, fail."""
    if missing.required:
        pytest.fail(missing.failure_message, pytrace=False)
    pytest.skip(missing.skip_reason, allow_module_level=module_level)


def loaded_backend(name: str):
    """The loaded backend object ``name`` for one test: skips it (with the reason) where the
    backend did not load or is left out, fails it where ``TESSERA_REQUIRE_BACKENDS`` names
    the backend, and fails it where the plan says it runs but discovery has no such
    backend (the gate and discovery out of step)."""
    missing = missing_backend(name)
    if missing is not None:
        skip_or_fail(missing)
    backend = _discovery.loaded_backends().get(name)
    if backend is None:  # the plan says it runs, discovery has none: a gate out of step
        pytest.fail(f"{name}: the test plan has the backend, but discovery loaded none "
                    f"by that name (loaded: {sorted(_discovery.loaded_backends())})",
                    pytrace=False)
    return backend


def require_backend(name: str):
    """The loaded backend object ``name`` for a module of that backend's tests.

    A backend left out by ``TESSERA_TEST_BACKENDS`` skips the module; one that did not
    load skips it with its reason, or fails it when ``TESSERA_REQUIRE_BACKENDS`` names it.
    """
    selected = selected_names()
    if selected is not None and name not in selected and name not in required_names():
        pytest.skip(f"{TEST_BACKENDS_ENV}={os.environ[TEST_BACKENDS_ENV]} leaves out {name}",
                    allow_module_level=True)
    missing = missing_backend(name)
    if missing is not None:
        skip_or_fail(missing, module_level=True)
    return _discovery.loaded_backends()[name]
