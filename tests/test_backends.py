"""Backend discovery, the device gate of tests/conftest.py, and ``python -m tessera_array info``.

Only the NumPy backend exists, so the gate is tested with fake backend objects
(tests/_fake_backends.py) added through ``_discovery.add_backend`` or reached
through the entry-point group ``tessera_array.backends``.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import pathlib
import re
import subprocess
import sys

import _fake_backends
import pytest
from _fake_backends import FakeBackend

import tessera_array as xp
from tessera_array import _discovery
from tessera_array._dispatch import registry

TESTS_DIR = pathlib.Path(__file__).resolve().parent
GROUP = _discovery.ENTRY_POINT_GROUP


@pytest.fixture
def add_fake():
    """``add_fake(backend)`` adds a fake through add_backend; removed afterwards."""
    names = []

    def add(backend):
        names.append(backend.name)
        _discovery.add_backend(backend)

    yield add
    for name in names:
        _discovery.remove_backend(name)


def _status(name):
    rows = [r for r in _discovery.backend_status() if r[0] == name]
    assert len(rows) == 1, rows
    return rows[0]


def _child_env(**extra):
    # A standalone run: neither the outer run's backend selection nor its xdist worker
    # (pytest-benchmark, where installed, reads PYTEST_XDIST_WORKER and warns).
    env = {k: v for k, v in os.environ.items()
           if k not in ("TESSERA_TEST_BACKENDS", "TESSERA_REQUIRE_BACKENDS", "TESSERA_DEVICE")
           and not k.startswith("PYTEST_XDIST")}
    # The package under test may itself come from PYTHONPATH (an install into a
    # target folder): kept, after the paths the test names.
    env["PYTHONPATH"] = os.pathsep.join(
        [str(p) for p in extra.pop("pythonpath", ())] + [str(TESTS_DIR)]
        + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    env.update(extra)
    return env


def _fakes_only(plan):
    """``plan_devices``'s (params, broken) with ``broken`` narrowed to the fake backends
    (a machine may hold a real backend that is present but did not load: an OpenCL ICD
    file without pyopencl, say)."""
    params, broken = plan
    return params, [b for b in broken if b.name.startswith("fake")]


def _real_broken() -> int:
    """How many real backends look present here but did not load (each warns once)."""
    from _gate import plan_devices

    return len(plan_devices(_discovery.backend_status())[1])


def _warnings(n: int) -> str:
    return "1 warning" if n == 1 else f"{n} warnings"


# ---- discovery: add_backend / remove_backend -------------------------------------------


def test_loaded_fake_backend_gives_devices(add_fake, tessera_gate):
    add_fake(FakeBackend("fakegood", ndevices=2))
    _, backend, reason = _status("fakegood")
    assert reason is None and backend.name == "fakegood"
    assert "fakegood" in _discovery.loaded_backends()
    params, broken = _fakes_only(tessera_gate.plan_devices(_discovery.backend_status()))
    ids = [str(p) for p in params]
    assert ids.index("cpu") < ids.index("fakegood:0") < ids.index("fakegood:1")
    assert broken == []
    x = xp.asarray([1.0, 2.0], device="fakegood:1")
    assert str(x.device) == "fakegood:1"
    assert x.device is xp.Device("fakegood", 1)
    assert (x + x).device is x.device
    assert registry.lookup("matvec", "fakegood", xp.float32) is _fake_backends._matvec


def test_remove_backend_forgets_devices_and_kernels(add_fake):
    add_fake(FakeBackend("fakegone"))
    _discovery.remove_backend("fakegone")
    assert "fakegone" not in [r[0] for r in _discovery.backend_status()]
    with pytest.raises(xp.DeviceNotFoundError, match=r"asarray: no such device.*fakegone:0"):
        xp.asarray([1.0], device="fakegone:0")
    with pytest.raises(xp.KernelNotFoundError,
                       match=r"Nothing is registered for matvec on fakegone"):
        registry.lookup("matvec", "fakegone", xp.float32)


def test_add_backend_twice_is_refused(add_fake):
    add_fake(FakeBackend("fakedup"))
    with pytest.raises(ValueError,
                       match=r"add_backend: a backend named 'fakedup' is already loaded"):
        _discovery.add_backend(FakeBackend("fakedup"))


def test_absent_backend_keeps_its_reason(add_fake, tessera_gate):
    with pytest.raises(xp.BackendUnavailableError,
                       match=r"add_backend: backend 'fakeabsent' did not load: "
                             r"fakelib not installed"):
        add_fake(FakeBackend("fakeabsent", available=False, reason="fakelib not installed"))
    assert _status("fakeabsent")[2] == "fakelib not installed"
    params, broken = _fakes_only(tessera_gate.plan_devices(_discovery.backend_status()))
    (missing,) = [p for p in params if str(p) == "fakeabsent"]
    assert missing.skip_reason == "fakeabsent: fakelib not installed"
    assert not missing.required
    assert broken == []  # nothing suggests it is there: an honest skip, no warning


def test_backend_without_unavailable_reason(add_fake):
    fake = FakeBackend("fakenoreason", available=False)
    del fake._reason
    fake.unavailable_reason = None  # the method is optional in the protocol
    with pytest.raises(xp.BackendUnavailableError, match="not available"):
        add_fake(fake)
    assert _status("fakenoreason")[2] == "not available"


def test_present_but_broken_backend_warns(add_fake, tessera_gate):
    with pytest.raises(xp.BackendUnavailableError, match="fake driver 0.0"):
        add_fake(FakeBackend("fakebroken", load_error=RuntimeError("fake driver 0.0"),
                             evidence="/dev/fake0 exists"))
    reason = _status("fakebroken")[2]
    assert reason == "load failed: RuntimeError: fake driver 0.0"
    params, broken = _fakes_only(tessera_gate.plan_devices(_discovery.backend_status()))
    (missing,) = broken
    assert missing in params
    assert missing.skip_reason == (
        "fakebroken: present (/dev/fake0 exists) but did not load: "
        "load failed: RuntimeError: fake driver 0.0"
    )
    text = missing.warning_text()
    for part in ("'fakebroken'", "/dev/fake0 exists", "RuntimeError: fake driver 0.0",
                 "Fix:", "python -m tessera_array info", "TESSERA_REQUIRE_BACKENDS=fakebroken"):
        assert part in text


def test_failed_register_leaves_no_kernels(add_fake):
    with pytest.raises(xp.BackendUnavailableError, match=r"load failed: ValueError: boom"):
        add_fake(FakeBackend("fakereg", register_error=ValueError("boom")))
    assert _status("fakereg")[2] == "load failed: ValueError: boom"
    with pytest.raises(xp.KernelNotFoundError, match="Nothing is registered for matvec on fakereg"):
        registry.lookup("matvec", "fakereg", xp.float32)
    with pytest.raises(xp.BackendUnavailableError,
                       match=r"asarray: device fakereg:0 is unavailable: backend 'fakereg' did not "
                             r"load: load failed: ValueError: boom"):
        xp.asarray([1.0], device="fakereg:0")


# ---- the gate's decisions ----------------------------------------------------------------


def test_parse_names(tessera_gate):
    assert tessera_gate.parse_names(" numpy, opencl,,") == {"numpy", "opencl"}
    assert tessera_gate.parse_names("") is None
    assert tessera_gate.parse_names(None) is None


def test_selection_narrows_and_requires(add_fake, tessera_gate):
    with pytest.raises(xp.BackendUnavailableError):
        add_fake(FakeBackend("fakeabsent", available=False, reason="fakelib not installed"))
    rows = _discovery.backend_status()
    plan = tessera_gate.plan_devices
    params, _ = plan(rows, selected={"numpy"})
    assert [str(p) for p in params] == ["cpu"]
    params, _ = plan(rows, selected={"numpy"}, required={"fakeabsent"})
    assert [str(p) for p in params] == ["cpu", "fakeabsent"]
    assert params[1].required
    assert "TESSERA_REQUIRE_BACKENDS names 'fakeabsent'" in params[1].failure_message
    params, _ = plan(rows, selected={"numpy", "nosuch"})
    assert [str(p) for p in params] == ["cpu", "nosuch"]
    assert re.search(r"nosuch: no backend of that name is known \(known: .*numpy",
                     params[1].skip_reason)
    # Required but unknown, with no selection: it fails as a known one that did not load.
    params, _ = plan(rows, required={"nosuch"})
    (unknown,) = [p for p in params if str(p) == "nosuch"]
    assert unknown.required
    assert unknown.failure_message.startswith(
        "TESSERA_REQUIRE_BACKENDS names 'nosuch', but it did not load. nosuch: no backend of "
        "that name is known")


def test_evidence_probe_that_raises(tessera_gate):
    fake = FakeBackend("fakeprobe")

    def probe():
        raise OSError("permission denied: /dev/fake0")

    fake.plausibly_present = probe
    assert tessera_gate.evidence_of(fake) == (
        "plausibly_present() raised OSError: permission denied: /dev/fake0"
    )
    assert tessera_gate.evidence_of(object()) is None


# ---- the gate end to end: a pytest run in a subprocess ----------------------------------

_INNER_TEST = '''
import tessera_array as xp


def test_dev(device):
    assert xp.asarray([1.0], device=device).device is device
'''

_INNER_CONFTEST_TAIL = '''

# ---- added by tests/test_backends.py: fake backends that do not load ----
import _fake_backends as _fb

for _b in (_fb.absent, _fb.broken):
    try:
        _discovery.add_backend(_b)
    except Exception:
        pass
'''


@pytest.fixture(scope="module")
def inner_project(tmp_path_factory):
    root = tmp_path_factory.mktemp("gate")
    conftest = (TESTS_DIR / "conftest.py").read_text()
    (root / "conftest.py").write_text(conftest + _INNER_CONFTEST_TAIL)
    (root / "test_inner.py").write_text(_INNER_TEST)
    (root / "pytest.ini").write_text(
        "[pytest]\nfilterwarnings = error\naddopts = -ra -p no:cacheprovider\n"
    )
    return root


def _run_inner(root, **env):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(root)],
        cwd=root, env=_child_env(**env), capture_output=True, text=True, timeout=120,
    )
    return proc.returncode, proc.stdout + proc.stderr


def test_gate_skips_honestly_and_warns(inner_project):
    rc, out = _run_inner(inner_project)
    assert rc == 0, out
    # Every loaded device passes; the two fakes, and any built-in backend that did not load
    # here (cuda without CuPy), skip.
    missing = sum(1 for _, _, reason in _discovery.backend_status() if reason is not None)
    assert f"{len(_discovery.all_devices())} passed, {missing + 2} skipped" in out
    assert "fakeabsent: fakelib not installed" in out
    assert ("fakebroken: present (/dev/fake0 exists) but did not load: load failed: "
            "RuntimeError: fake driver 0.0 is older than 1.0") in out
    # the loud part: a warning and a red summary line, with the fix
    assert "BackendLoadWarning" in out
    assert "backends present but not loaded" in out
    assert "Fix: install fake driver >= 1.0" in out
    # the report header lists every backend
    assert "tessera_array backends:" in out and "numpy: loaded (cpu)" in out


def test_gate_require_turns_skips_into_failures(inner_project):
    rc, out = _run_inner(inner_project, TESSERA_REQUIRE_BACKENDS="fakeabsent,fakebroken")
    assert rc == 1, out
    assert f"2 failed, {len(_discovery.all_devices())} passed" in out
    assert "FAILED test_inner.py::test_dev[fakeabsent]" in out
    assert "FAILED test_inner.py::test_dev[fakebroken]" in out
    assert "TESSERA_REQUIRE_BACKENDS names 'fakeabsent', but it did not load" in out


def test_gate_selection_and_unknown_required(inner_project):
    rc, out = _run_inner(inner_project, TESSERA_TEST_BACKENDS="numpy")
    assert rc == 0, out
    assert f"1 passed, {_warnings(1 + _real_broken())} in" in out
    rc, out = _run_inner(inner_project, TESSERA_TEST_BACKENDS="numpy",
                         TESSERA_REQUIRE_BACKENDS="nosuch")
    assert rc == 1, out
    assert "1 failed, 1 passed" in out
    assert "nosuch: no backend of that name is known" in out


def test_gate_required_unknown_backend_fails_without_a_selection(inner_project):
    rc, out = _run_inner(inner_project, TESSERA_REQUIRE_BACKENDS="nosuch")
    assert rc == 1, out
    assert "FAILED test_inner.py::test_dev[nosuch]" in out
    assert "TESSERA_REQUIRE_BACKENDS names 'nosuch', but it did not load" in out


def test_gate_required_backend_fails_a_run_without_device_tests(inner_project, tmp_path):
    (tmp_path / "conftest.py").write_text((inner_project / "conftest.py").read_text())
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert 1 + 1 == 2\n")
    (tmp_path / "pytest.ini").write_text((inner_project / "pytest.ini").read_text())
    rc, out = _run_inner(tmp_path, TESSERA_REQUIRE_BACKENDS="nosuch")
    assert rc == 1, out
    assert "1 passed" in out
    assert "FAILED (the run): TESSERA_REQUIRE_BACKENDS names 'nosuch'" in out
    rc, out = _run_inner(tmp_path)
    assert rc == 0, out


def test_backend_specific_modules_gate_through_the_gate_module():
    """No test module skips itself at module level: tests/_gate.py does, so that
    TESSERA_REQUIRE_BACKENDS turns each such skip into a failure."""
    offenders = [
        p.name for p in sorted(TESTS_DIR.glob("*.py")) + sorted(
            (TESTS_DIR.parent / "conformance").glob("*.py"))
        if p.name != "_gate.py" and re.search(r"allow_module_level\s*=", p.read_text())
    ]
    assert offenders == []


# ---- entry points ----------------------------------------------------------------------


def test_entry_points_are_discovered(monkeypatch, tmp_path):
    (tmp_path / "fake_plugin_module.py").write_text(
        "from _fake_backends import FakeBackend\nbackend = FakeBackend('fakemodule')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    EP = importlib.metadata.EntryPoint
    eps = [
        EP("fakegood", "_fake_backends:loadable", GROUP),
        EP("fakemodule", "fake_plugin_module", GROUP),
        EP("fakeimport", "no_such_tessera_plugin:backend", GROUP),
        EP("numpy", "_fake_backends:absent", GROUP),  # a built-in name: the built-in wins
    ]
    seen = {}

    def entry_points(**kwargs):
        seen.update(kwargs)
        return eps

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    monkeypatch.delenv("TESSERA_NO_ENTRY_POINTS", raising=False)
    found = _discovery._collect_candidates()
    assert seen == {"group": "tessera_array.backends"}
    assert found["fakegood"] is _fake_backends.loadable
    assert found["fakemodule"].name == "fakemodule"  # a module entry point: its ``backend``
    assert isinstance(found["fakeimport"], ModuleNotFoundError)
    assert found["numpy"] is _discovery.loaded_backends()["numpy"]
    monkeypatch.setenv("TESSERA_NO_ENTRY_POINTS", "1")
    assert set(_discovery._collect_candidates()) == {n for n, _ in _discovery.BUILTIN_BACKENDS}


def test_broken_entry_point_metadata_is_kept(monkeypatch):
    def entry_points(**kwargs):
        raise ValueError("bad metadata")

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    monkeypatch.delenv("TESSERA_NO_ENTRY_POINTS", raising=False)
    found = _discovery._collect_candidates()
    assert isinstance(found["<entry points tessera_array.backends>"], ValueError)
    assert "numpy" in found


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory):
    """A site folder holding the dist-info of a plugin with four backends."""
    site = tmp_path_factory.mktemp("site")
    info = site / "tessera_fake_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tessera-fake-plugin\nVersion: 0.1\n"
    )
    (info / "entry_points.txt").write_text(
        f"[{GROUP}]\n"
        "fakegood = _fake_backends:loadable\n"
        "fakeabsent = _fake_backends:absent\n"
        "fakebroken = _fake_backends:broken\n"
        "fakeimport = no_such_tessera_plugin:backend\n"
    )
    return site


def _info(site, *args):
    proc = subprocess.run(
        [sys.executable, "-m", "tessera_array", "info", *args],
        env=_child_env(pythonpath=[site]), capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_info_shows_every_backend(plugin_site):
    out = _info(plugin_site)
    lines = out.splitlines()
    assert lines[0].startswith(f"tessera_array {xp.__version__} (Array API 2025.12)")
    assert "default device: cpu" in lines[0]

    def row(name):
        (line,) = [ln for ln in lines if ln.split(" ", 1)[0] == name]
        return line

    import numpy

    assert "loaded" in row("numpy") and f"numpy {numpy.__version__}" in row("numpy")
    # the device column, then its dtypes: the standard's 13 and the extensions float16, bfloat16
    assert "complex128, float16, bfloat16" in row("numpy")
    assert row("numpy").split()[-16] == "cpu"
    good = row("fakegood")
    assert "loaded" in good and "fakelib 1.2.3" in good and "fakegood:0" in good
    assert "not loaded: fakelib not installed" in row("fakeabsent")
    assert ("not loaded: load failed: RuntimeError: fake driver 0.0 is older than 1.0 "
            "(looks present: /dev/fake0 exists)") in row("fakebroken")
    assert "not loaded: import failed: ModuleNotFoundError" in row("fakeimport")


def test_info_json(plugin_site):
    report = json.loads(_info(plugin_site, "--json"))
    by_name = {b["name"]: b for b in report["backends"]}
    assert by_name["numpy"]["loaded"] is True
    assert by_name["numpy"]["devices"] == [
        {"device": "cpu", "dtypes": [d.name for d in _discovery.loaded_backends()["numpy"]
                                     .dtypes(xp.Device("cpu"))]}
    ]
    assert by_name["fakegood"]["devices"][0]["device"] == "fakegood:0"
    assert by_name["fakebroken"]["evidence"] == "/dev/fake0 exists"
    assert by_name["fakeabsent"]["reason"] == "fakelib not installed"
    assert report["default_device"] == "cpu"


def test_info_in_process_shows_load_failures(add_fake, capsys):
    from tessera_array.__main__ import main

    with pytest.raises(xp.BackendUnavailableError):
        add_fake(FakeBackend("fakebroken2", load_error=OSError("libfake.so: cannot open"),
                             evidence="libfake.so found"))
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert ("fakebroken2  not loaded: load failed: OSError: libfake.so: cannot open "
            "(looks present: libfake.so found)") in out
    assert main(["kernels"]) == 0
    out = capsys.readouterr().out
    assert "matvec" in out and "float64" in out


def test_console_script_is_declared():
    eps = importlib.metadata.entry_points(group="console_scripts", name="tessera-array")
    assert [ep.value for ep in eps] == ["tessera_array.__main__:main"]


def test_a_device_whose_backend_module_did_not_import_names_the_import_error():
    """The package imported from a source folder has no ``tessera_array.backends``: asking
    for the CPU (as unpickling a CPU array does) names that failure, not just "none"."""
    code = (
        "import tessera_array as xp, pickle\n"
        "from tessera_array import _discovery\n"
        "_discovery.BUILTIN_BACKENDS = (('numpy', 'tessera_array.no_such_backend_module'),)\n"
        "try:\n"
        "    xp.asarray([1.0], device=xp.Device('cpu'))\n"
        "except xp.DeviceNotFoundError as err:\n"
        "    print(err)\n"
    )
    env = _child_env()
    env["TESSERA_NO_ENTRY_POINTS"] = "1"
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Available devices: none." in proc.stdout, proc.stdout
    assert ("Backends that did not import: numpy: import failed: ModuleNotFoundError"
            in proc.stdout), proc.stdout
    assert "tessera_array.no_such_backend_module" in proc.stdout, proc.stdout
