"""The package layout: backends/ and kernels/ ship inside tessera_array."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(tomllib is None, reason="tomllib needs Python >= 3.11")
def test_every_backend_package_is_listed_in_pyproject():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(conf["tool"]["setuptools"]["packages"])
    for init in (ROOT / "backends").rglob("__init__.py"):
        rel = init.parent.relative_to(ROOT / "backends").parts
        name = ".".join(("tessera_array", "backends") + rel)
        assert name in listed, f"{name} is missing from [tool.setuptools] packages"


def test_backends_ship_inside_the_package():
    mod = importlib.import_module("tessera_array.backends.numpy")
    assert mod.backend.name == "numpy"
    kernels = importlib.import_module("tessera_array.kernels")
    assert kernels.KERNELS_DIR.is_dir()


@pytest.mark.parametrize("name", ["backends", "kernels"])
def test_no_top_level_backends_or_kernels(name):
    code = (
        "import sys, importlib.util\n"
        f"sys.path = [p for p in sys.path if p not in ('', {str(ROOT)!r})]\n"
        f"print(importlib.util.find_spec({name!r}) is None)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd="/", check=True
    )
    assert out.stdout.strip() == "True", f"a top-level {name!r} package is importable"
