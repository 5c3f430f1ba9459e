"""``import tessera_array`` pulls in no GPU library; neither does the backend discovery
that the first array triggers, unless a GPU backend actually loads.

Stand-in packages named like the GPU libraries are put on the child's path, so an
import that a ``try: import cupy`` would hide on a machine without CuPy still shows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

GPU_LIBRARIES = ("cupy", "cupyx", "pyopencl", "torch", "jax", "jaxlib", "numba", "pycuda", "cuda")

_IMPORT_ONLY = """
import json, sys
import tessera_array
print(json.dumps(sorted(sys.modules)))
"""

_FIRST_ARRAY = """
import json, sys
import tessera_array as xp
from tessera_array import _discovery
x = xp.asarray([1.0, 2.0])          # triggers backend discovery
y = x + x
hosts = [b.is_host for b in _discovery.loaded_backends().values()]
print(json.dumps({"modules": sorted(sys.modules), "device": str(y.device),
                  "host_only": all(hosts)}))
"""


def _gpu_modules(names):
    return sorted(n for n in names if n.split(".", 1)[0] in GPU_LIBRARIES)


def _run(code, pythonpath=None):
    env = dict(os.environ)
    env.pop("TESSERA_DEVICE", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_import_pulls_in_no_gpu_library(tmp_path):
    for name in GPU_LIBRARIES:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")  # importable stand-ins
    assert _gpu_modules(_run(_IMPORT_ONLY, tmp_path)) == []


def test_first_array_pulls_in_no_gpu_library_without_a_gpu_backend():
    result = _run(_FIRST_ARRAY)
    if result["host_only"]:  # a GPU backend that loads may of course import its library
        assert result["device"] == "cpu"
        assert _gpu_modules(result["modules"]) == []


SUBPACKAGES = ("fft", "launchers", "linalg", "nn", "optim", "random", "sparse", "sparse.linalg")

_LAZY = """
import json, sys
import tessera_array as xp
before = sorted(sys.modules)
found = {}
for path in %r:
    obj = xp
    for part in path.split("."):
        listed = part in dir(obj)
        obj = getattr(obj, part)
    found[path] = [obj.__name__, listed]
names = [xp.optim.Adam.__name__, xp.sparse.linalg.cg.__name__, xp.sparse.csr_array.__name__,
         xp.nn.attention.__name__, xp.fft.rfft.__name__, xp.linalg.solve.__name__]
try:
    xp.no_such_subpackage
    missing = "no error"
except AttributeError as err:
    missing = str(err)
print(json.dumps({"before": before, "after": sorted(sys.modules), "found": found,
                  "names": names, "missing": missing}))
""".replace("%r", repr(SUBPACKAGES))


def test_subpackages_load_on_first_attribute_access(tmp_path):
    for name in GPU_LIBRARIES:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    out = _run(_LAZY, tmp_path)
    before, after = set(out["before"]), set(out["after"])
    for path in SUBPACKAGES:
        assert f"tessera_array.{path}" not in before, path  # not loaded by the bare import
        assert out["found"][path] == [f"tessera_array.{path}", True], path
    assert not any(n == "scipy" or n.startswith("scipy.") for n in before)
    assert not any(n == "scipy" or n.startswith("scipy.") for n in after)
    assert _gpu_modules(after) == []
    assert out["names"] == ["Adam", "cg", "csr_array", "attention", "rfft", "solve"]
    assert out["missing"] == "module 'tessera_array' has no attribute 'no_such_subpackage'"
