"""Test configuration: the ``device`` parameter and the backend gate.

Every test that takes ``device`` runs once per device of every backend that
loads (ids like ``cpu``, ``cuda:0``). Environment variables:

``TESSERA_TEST_BACKENDS=numpy,opencl``
    Narrow the run to these backends.
``TESSERA_REQUIRE_BACKENDS=cuda,opencl``
    These backends must load: every test that would be skipped for one of them
    fails instead (CI on a GPU machine sets this, so a broken driver cannot pass
    as "no GPU here").

A backend that did not load gives each ``device`` test one honest skip whose
reason is the backend's own (``cuda: cupy not installed``). A backend that looks
present (``backend.plausibly_present()`` finds evidence such as ``/dev/nvidia0``)
but did not load is a louder matter: a ``BackendLoadWarning`` at collection and a
red line in the terminal summary name the backend, the reason and the fix.

Tests are written once against ``xp`` and ``device`` and compared with NumPy.
"""

from __future__ import annotations

import os
import types
import warnings

import pytest

import tessera_array as xp
from tessera_array import _discovery

TEST_BACKENDS_ENV = "TESSERA_TEST_BACKENDS"
REQUIRE_BACKENDS_ENV = "TESSERA_REQUIRE_BACKENDS"


# ---- the gate (plain functions; tests/test_backends.py calls them directly) --------


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
    for name in sorted((wanted or set()) - seen):
        params.append(MissingBackend(
            name,
            f"no backend of that name is known (known: {known}; third-party backends "
            f"register through the entry-point group {_discovery.ENTRY_POINT_GROUP!r})",
            required=name in required,
        ))
    return devices + params, broken


def param_id(value) -> str:
    return str(value)


class RequiredBackendMissing(pytest.Item):
    """Stands in for a test whose required backend did not load: it fails."""

    def __init__(self, *, missing: MissingBackend, **kwargs):
        super().__init__(**kwargs)
        self.missing = missing

    def runtest(self):
        pytest.fail(self.missing.failure_message, pytrace=False)

    def reportinfo(self):
        return self.path, None, self.name


def apply_gate(items: list) -> None:
    """Skip (or, for required backends, replace by a failing item) every collected
    test whose ``device`` is a :class:`MissingBackend`."""
    for i, item in enumerate(items):
        callspec = getattr(item, "callspec", None)
        value = callspec.params.get("device") if callspec is not None else None
        if not getattr(value, "is_missing_backend", False):
            continue
        if value.required:
            stand_in = RequiredBackendMissing.from_parent(
                item.parent, name=item.name, missing=value
            )
            for mark in item.iter_markers():
                stand_in.add_marker(mark)
            items[i] = stand_in
        else:
            item.add_marker(pytest.mark.skip(reason=value.skip_reason))


def _gate(config):
    gate = getattr(config, "_tessera_gate", None)
    if gate is None:
        params, broken = plan_devices(
            _discovery.backend_status(),
            parse_names(os.environ.get(TEST_BACKENDS_ENV)),
            parse_names(os.environ.get(REQUIRE_BACKENDS_ENV)),
        )
        gate = types.SimpleNamespace(params=params, broken=broken, warned=False)
        config._tessera_gate = gate
    return gate


# ---- pytest hooks --------------------------------------------------------------------


def pytest_configure(config):
    # Shown, never turned into an error by filterwarnings=error: the warning is a report.
    config.addinivalue_line(
        "filterwarnings", "always::tessera_array._discovery.BackendLoadWarning"
    )
    # Hypothesis' failure report imports a module that warns; under filterwarnings=error
    # that turned a falsified property into an INTERNALERROR that hid the example.
    config.addinivalue_line(
        "filterwarnings", "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning"
    )
    _gate(config)


def pytest_report_header(config):
    if getattr(config, "_tessera_header_done", False):  # conformance/ shares these hooks
        return []
    config._tessera_header_done = True
    lines = []
    for name, backend, reason in _discovery.backend_status():
        if reason is None and backend is not None:
            devs = ", ".join(str(d) for d in backend.devices()) or "no devices"
            lines.append(f"  {name}: loaded ({devs})")
        else:
            evidence = evidence_of(backend) if backend is not None else None
            present = f" (looks present: {evidence})" if evidence else ""
            lines.append(f"  {name}: not loaded: {reason}{present}")
    return ["tessera_array backends:"] + lines


def pytest_generate_tests(metafunc):
    if "device" in metafunc.fixturenames:
        params = _gate(metafunc.config).params
        metafunc.parametrize("device", params, ids=[param_id(p) for p in params])


def pytest_collection_modifyitems(session, config, items):
    gate = _gate(config)
    if not gate.warned:
        gate.warned = True
        for missing in gate.broken:
            warnings.warn(_discovery.BackendLoadWarning(missing.warning_text()), stacklevel=1)
    apply_gate(items)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    gate = _gate(config)
    if gate.broken and not getattr(gate, "summarised", False):
        gate.summarised = True
        terminalreporter.write_sep(
            "!", "tessera_array: backends present but not loaded", red=True, bold=True
        )
        for missing in gate.broken:
            terminalreporter.write_line(missing.warning_text(), red=True)


@pytest.fixture(scope="session")
def tessera_gate():
    """The gate's functions, for tests of the gate itself."""
    return types.SimpleNamespace(
        MissingBackend=MissingBackend,
        plan_devices=plan_devices,
        parse_names=parse_names,
        evidence_of=evidence_of,
        apply_gate=apply_gate,
    )


@pytest.fixture
def xp_ns():
    return xp


@pytest.fixture
def f32_device():
    """A device without float64 and complex128 (a fake accelerator over NumPy),
    for the tests of what a device lacks."""
    from _fake_backends import FakeBackend

    from tessera_array import _dtypes

    no_f64 = tuple(d for d in _dtypes.ALL_DTYPES if d not in (xp.float64, xp.complex128))
    _discovery.add_backend(FakeBackend("fakef32", dtypes=no_f64, is_host=False))
    try:
        yield xp.Device("fakef32", 0)
    finally:
        _discovery.remove_backend("fakef32")
