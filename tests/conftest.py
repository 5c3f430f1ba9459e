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

The plain logic lives in tests/_gate.py (also the module-level gate of the
backend-specific test files); this file holds pytest's hooks. A required backend that
did not load fails each of its ``device`` tests, and the run as a whole even when no
collected test takes ``device``.

Tests are written once against ``xp`` and ``device`` and compared with NumPy.
"""

from __future__ import annotations

import os
import sys
import types
import warnings

import pytest
from _gate import (  # tests/ is on sys.path (conformance/conftest.py adds it)
    MissingBackend,
    evidence_of,
    parse_names,
    plan_devices,
    required_names,
    selected_names,
)

import tessera_array as xp
from tessera_array import _discovery


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


def apply_gate(items: list) -> int:
    """Skip (or, for required backends, replace by a failing item) every collected
    test whose ``device`` is a :class:`MissingBackend`; returns how many were replaced."""
    replaced = 0
    for i, item in enumerate(items):
        callspec = getattr(item, "callspec", None)
        value = callspec.params.get("device") if callspec is not None else None
        if not getattr(value, "is_missing_backend", False):
            continue
        if value.required:
            stand_in = RequiredBackendMissing.from_parent(
                item.parent, name=item.name, missing=value
            )
            stand_in.own_markers.extend(item.iter_markers())
            items[i] = stand_in
            replaced += 1
        else:
            item.add_marker(pytest.mark.skip(reason=value.skip_reason))
    return replaced


def _gate(config):
    gate = getattr(config, "_tessera_gate", None)
    if gate is None:
        params, broken = plan_devices(
            _discovery.backend_status(),
            selected_names(),
            required_names(),
        )
        gate = types.SimpleNamespace(params=params, broken=broken, warned=False)
        config._tessera_gate = gate
    return gate


# ---- pytest hooks --------------------------------------------------------------------


def pytest_configure(config):
    # The suite runs with host fallbacks allowed: their default, a warning per function
    # and device, is an error under filterwarnings=error. The default is tested
    # explicitly (tests/test_host_fallback.py, the fallback tests of
    # test_opencl_backend.py); a TESSERA_HOST_FALLBACK the caller set is kept.
    if not os.environ.get("TESSERA_HOST_FALLBACK"):
        os.environ["TESSERA_HOST_FALLBACK"] = "allow"
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


def _drain_opencl_queues() -> None:
    """Wait for every OpenCL queue the run has made. PoCL builds a kernel's work-group
    function when a launch reaches its worker thread, and spawns the linker there
    (posix_spawn); pytest sets ``PYTEST_CURRENT_TEST`` (a setenv) between a test's
    phases. The two raced in one CI run: ``posix_spawn failed: Bad address`` from the
    linker, then a segfault in the main thread's setenv. Draining the queues before
    pytest moves on keeps the spawns inside the phase that launched them."""
    memory = sys.modules.get("tessera_array.backends.opencl._memory")
    if memory is not None:
        for queue in list(memory.QUEUE_DEVICE):
            queue.finish()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    yield
    _drain_opencl_queues()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield
    _drain_opencl_queues()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    _drain_opencl_queues()


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
    gate.failing_items = apply_gate(items)


def _required_missing(gate) -> list:
    return [p for p in gate.params if getattr(p, "is_missing_backend", False) and p.required]


def pytest_sessionfinish(session, exitstatus):
    # A required backend that did not load fails the run even where no collected test
    # took ``device`` (so none was replaced by a failing stand-in).
    gate = _gate(session.config)
    missing = _required_missing(gate)
    if missing and not getattr(gate, "failing_items", 0) and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        gate.run_failed_for = missing


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    gate = _gate(config)
    if not getattr(gate, "run_failure_reported", False):
        gate.run_failure_reported = True
        for missing in getattr(gate, "run_failed_for", ()):
            terminalreporter.write_line(f"FAILED (the run): {missing.failure_message}",
                                        red=True)
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
