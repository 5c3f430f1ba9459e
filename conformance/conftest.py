"""The ``device`` parameter for conformance/: the same gate as tests/conftest.py.

tests/conftest.py is loaded under its own module name and its hooks are reused;
they keep their state on ``config``, so running tests/ and conformance/ together
plans, warns and reports once.
"""

import importlib.util
import pathlib
import sys

_tests = pathlib.Path(__file__).resolve().parents[1] / "tests"
if str(_tests) not in sys.path:
    sys.path.insert(0, str(_tests))  # tests/conftest.py imports tests/_gate.py
_path = _tests / "conftest.py"
_spec = importlib.util.spec_from_file_location("tessera_tests_conftest", _path)
_gate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_gate)

pytest_configure = _gate.pytest_configure
pytest_report_header = _gate.pytest_report_header
pytest_generate_tests = _gate.pytest_generate_tests
pytest_collection_modifyitems = _gate.pytest_collection_modifyitems
pytest_terminal_summary = _gate.pytest_terminal_summary
pytest_sessionfinish = _gate.pytest_sessionfinish
pytest_runtest_setup = _gate.pytest_runtest_setup
pytest_runtest_call = _gate.pytest_runtest_call
pytest_runtest_teardown = _gate.pytest_runtest_teardown
