"""Builds of the NumPy backend's C extensions for one instruction set each (x86-64-v3, the
baseline), so that the target clones a machine with AVX-512 never runs are tested on it
too: ``build_variant`` compiles one source with ``-march`` and ``-DTESSERA_NO_CLONES``
and loads it under another path."""

from __future__ import annotations

import importlib.util
import os
import platform
import shutil
import subprocess
import sysconfig
from importlib.machinery import ExtensionFileLoader
from pathlib import Path

import pytest

REQUIRED = os.environ.get("TESSERA_REQUIRE_COMPILED", "") not in ("", "0")
ISAS = {"x86-64-v3": {"avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "movbe", "abm"},
        "x86-64": set()}


def cpu_flags() -> set:
    """The CPU's feature flags from /proc/cpuinfo (empty where it cannot be read: the
    instruction sets that need flags are then skipped as not runnable here)."""
    try:
        with open("/proc/cpuinfo") as f:
            lines = [line for line in f if line.startswith("flags")]
    except OSError:
        return set()
    return set(lines[0].split(":", 1)[1].split()) if lines else set()


def build_variant(name: str, arch: str, tmp_path, extra=()):
    """``backends/numpy/<name>.c`` built for ``arch`` (a key of :data:`ISAS`) into
    ``tmp_path`` and loaded: the module. Skips where this CPU cannot run ``arch`` or gcc /
    Python.h is missing (a failure under TESSERA_REQUIRE_COMPILED=1)."""
    if platform.machine() != "x86_64" or not ISAS[arch] <= cpu_flags():
        pytest.skip(f"this CPU cannot run {arch} code")
    src = Path(__file__).resolve().parents[1] / "backends" / "numpy" / f"{name}.c"
    cc = shutil.which("gcc")
    include = sysconfig.get_paths()["include"]
    if not src.is_file() or cc is None or not Path(include, "Python.h").is_file():
        why = f"building one instruction set needs gcc, Python.h and {src}"
        if REQUIRED:
            pytest.fail(f"TESSERA_REQUIRE_COMPILED=1: {why}")
        pytest.skip(why)
    so = tmp_path / f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}"
    proc = subprocess.run(
        [cc, "-O3", "-shared", "-fPIC", f"-march={arch}", "-DTESSERA_NO_CLONES", *extra,
         f"-I{include}", f"-I{src.parent}", str(src), "-o", str(so), "-lm"],
        capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    loader = ExtensionFileLoader(name, str(so))
    spec = importlib.util.spec_from_file_location(name, so, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod
