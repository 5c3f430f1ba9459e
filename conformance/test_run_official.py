"""conformance/run_official.py, checked against a small stand-in for array-api-tests.

The stand-in suite understands the same options as the real one (``--max-examples``,
``--xfails-file``) and reads ``ARRAY_API_TESTS_MODULE`` the way the real one does, so
the runner's whole path is exercised without the real checkout.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
import run_official

HERE = pathlib.Path(__file__).resolve().parent
TESTS_DIR = HERE.parent / "tests"

_SUITE_CONFTEST = '''
import pytest


def pytest_addoption(parser):
    parser.addoption("--max-examples", "--hypothesis-max-examples", type=int, default=100)
    parser.addoption("--xfails-file", default=None)


def pytest_collection_modifyitems(config, items):
    path = config.getoption("--xfails-file")
    ids = open(path).read().split("\\n") if path else []
    for item in items:
        if item.nodeid in ids:
            item.add_marker(pytest.mark.xfail(reason="xfails file"))
'''

_SUITE_TESTS = '''
import os


def _xp():
    spec = os.environ["ARRAY_API_TESTS_MODULE"]
    if spec.startswith("exec('") and spec.endswith("')"):
        namespace = {}
        exec(spec[6:-2], namespace)
        return namespace["xp"]
    import importlib

    return importlib.import_module(spec)


def test_module_binds_the_device():
    assert str(_xp().asarray(1.0).device) == os.environ["EXPECT_DEVICE"]


def test_options_arrive(request):
    assert request.config.getoption("--max-examples") == int(os.environ["EXPECT_MAX"])


def test_passes():
    pass


def test_known_failure():
    assert False
'''


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    root = tmp_path_factory.mktemp("aat")
    (root / "array_api_tests").mkdir()
    (root / "array_api_tests" / "test_fake.py").write_text(_SUITE_TESTS)
    (root / "conftest.py").write_text(_SUITE_CONFTEST)
    (root / "pytest.ini").write_text("[pytest]\n")
    xfails = root / "xfails-fake.txt"
    xfails.write_text(
        "# expected failures\n\n"
        "array_api_tests/test_fake.py::test_known_failure  # fails on purpose\n"
    )
    return root


def _runner(*args, suite=None, **env):
    full = {k: v for k, v in os.environ.items()
            if k not in ("ARRAY_API_TESTS_DIR", "TESSERA_DEVICE", "ARRAY_API_TESTS_MODULE")}
    if suite is not None:
        full["ARRAY_API_TESTS_DIR"] = str(suite)
    full.update(env)
    proc = subprocess.run([sys.executable, str(HERE / "run_official.py"), *args],
                          env=full, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def test_runs_the_suite_and_counts(suite):
    rc, out = _runner("--max-examples", "7", "--xfails-file", str(suite / "xfails-fake.txt"),
                      suite=suite, EXPECT_DEVICE="cpu", EXPECT_MAX="7")
    assert rc == 0, out
    assert "ARRAY_API_TESTS_MODULE=tessera_array" in out
    assert "--hypothesis-seed 0" in out
    assert "xfails: 1 from" in out
    assert "tessera_array on cpu: 3 passed, 0 failed, 0 errors, 0 skipped, 1 xfailed" in out
    assert "\n3 passed, 0 failed\n" in out


def test_default_options_and_failures_count(suite, tmp_path):
    empty = tmp_path / "xfails.txt"
    empty.write_text("# nothing expected to fail\n")
    rc, out = _runner("--xfails-file", str(empty), suite=suite, EXPECT_DEVICE="cpu",
                      EXPECT_MAX="20")
    assert rc == 1, out
    assert "--max-examples 20 --hypothesis-seed 0" in out
    assert "tessera_array on cpu: 3 passed, 1 failed, 0 errors, 0 skipped, 0 xfailed" in out


def test_exec_form_binds_another_device(suite, tmp_path):
    site = tmp_path / "site"
    info = site / "tessera_fake_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tessera-fake-plugin\n"
                                   "Version: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[tessera_array.backends]\nfakegood = _fake_backends:loadable\n")
    rc, out = _runner("--backend", "fakegood", "--xfails-file",
                      str(suite / "xfails-fake.txt"), suite=suite,
                      PYTHONPATH=os.pathsep.join(
                          [str(site), str(TESTS_DIR)]  # and where the package may come from
                          + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
                      EXPECT_DEVICE="fakegood:0", EXPECT_MAX="20")
    assert rc == 0, out
    assert ("ARRAY_API_TESTS_MODULE=exec('import tessera_array as xp; "
            "xp.set_default_device(\"fakegood:0\")')") in out
    assert "tessera_array on fakegood:0: 3 passed" in out


def test_unset_checkout_fails_clearly():
    rc, out = _runner()
    assert rc == 2
    assert "error: run_official: set ARRAY_API_TESTS_DIR to a checkout of" in out


def test_not_a_checkout(tmp_path):
    rc, out = _runner(suite=tmp_path)
    assert rc == 2
    assert "holds no array_api_tests/ folder" in out


def test_unknown_backend(suite):
    rc, out = _runner("--backend", "nosuch", suite=suite)
    assert rc == 2
    assert "backend 'nosuch' is not loaded: no backend of that name is known" in out


def test_parse_xfails():
    text = (
        "# header\n"
        "\n"
        "array_api_tests/test_a.py::test_x  # reason one\n"
        "   array_api_tests/test_b.py::test_y[a#b]\t# reason two\n"
    )
    assert run_official.parse_xfails(text) == [
        "array_api_tests/test_a.py::test_x",
        "array_api_tests/test_b.py::test_y[a#b]",
    ]
    with pytest.raises(run_official.RunnerError, match=r"xfails file:1: every xfail needs a "
                                                       r"reason"):
        run_official.parse_xfails("array_api_tests/test_a.py::test_x\n")
    with pytest.raises(run_official.RunnerError, match=r"f\.txt:2: every xfail needs a reason"):
        run_official.parse_xfails("# ok\narray_api_tests/test_a.py::test_x  #  \n", "f.txt")


def test_shipped_xfails_files_parse():
    for path in sorted(HERE.glob("xfails-*.txt")):
        run_official.parse_xfails(path.read_text(), str(path))


def test_module_spec():
    assert run_official.module_spec("cpu", True) == "tessera_array"
    spec = run_official.module_spec("cuda:1", False)
    assert spec == "exec('import tessera_array as xp; xp.set_default_device(\"cuda:1\")')"
    assert spec.startswith("exec('") and spec.endswith("')")


def test_count_junit(tmp_path):
    xml = tmp_path / "j.xml"
    xml.write_text(
        '<testsuites><testsuite>'
        '<testcase name="a"/>'
        '<testcase name="b"><failure message="x"/></testcase>'
        '<testcase name="c"><error message="x"/></testcase>'
        '<testcase name="d"><skipped type="pytest.skip" message="x"/></testcase>'
        '<testcase name="e"><skipped type="pytest.xfail" message="x"/></testcase>'
        '</testsuite></testsuites>'
    )
    assert run_official.count_junit(xml) == {
        "passed": 1, "failed": 1, "errors": 1, "skipped": 1, "xfailed": 1,
    }
