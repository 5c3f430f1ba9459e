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

import ml_dtypes
import numpy as np

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


_DEFAULT_DEVICE_ONLY = """
import importlib, json
from tessera_array import _discovery
loads = []
def recorder(name):
    def load():
        loads.append(name)
        raise ImportError(f"{name}: not loaded in this test")
    return load
for name, module in _discovery.BUILTIN_BACKENDS:  # the others look present; loads recorded
    if name != "numpy":
        obj = importlib.import_module(module).backend
        obj.is_available, obj.load = (lambda: True), recorder(name)
import tessera_array as xp
x = xp.asarray([1.0, 2.0])
ys = [x + x, xp.sum(x), xp.linalg.vector_norm(x), xp.zeros(3), xp.arange(4)[1:3]]
first = list(loads)
devices = xp.__array_namespace_info__().devices()  # every backend, asked for
print(json.dumps({"first": first, "device": str(x.device), "later": sorted(loads)}))
"""


def test_default_device_work_loads_no_other_backend():
    """The default CPU device loads the NumPy backend alone: a machine with a GPU does
    not pay CuPy's import and driver start (nor ml_dtypes, which CuPy imports) for
    CPU-only work. Listing the devices loads (tries) every backend."""
    out = _run(_DEFAULT_DEVICE_ONLY)
    assert out["first"] == [] and out["device"] == "cpu"
    assert out["later"] == sorted(["opencl", "cuda", "rocm"])


_NO_BFLOAT16 = """
import json, sys
import tessera_array as xp
x = xp.asarray([1.0, 2.0])
ys = [x + x, xp.sin(x), xp.sum(x), xp.astype(x, xp.float16) * 2, xp.finfo(xp.float32).eps,
      xp.result_type(xp.float32, xp.int8), x.dtype == "float64", {xp.bfloat16: 1}]
print(json.dumps({"ml_dtypes": "ml_dtypes" in sys.modules}))
"""

_FIRST_BFLOAT16 = """
import json, pickle, sys
import tessera_array as xp
case = sys.argv[1]
if case == "ndarray":  # the caller's own ml_dtypes array comes in first
    import ml_dtypes, numpy as np
    a = xp.asarray(np.asarray([1.5, -2.25], dtype=ml_dtypes.bfloat16))
    out = [str(a.dtype), [float(v) for v in np.asarray(xp.astype(a + a, xp.float32))]]
elif case == "promotion":  # a dtype-only question first
    out = [str(xp.result_type(xp.bfloat16, xp.float16)),
           str(xp.result_type(xp.bfloat16, xp.int8)), xp.can_cast(xp.bfloat16, xp.float32)]
elif case == "finfo":
    out = [xp.finfo(xp.bfloat16).eps, xp.finfo(xp.bfloat16).bits]
elif case == "math":  # the namespace's float32 fallbacks for missing bfloat16 loops
    b = xp.asarray([0.5, 1.0], dtype=xp.bfloat16)
    out = [str(xp.sin(b).dtype), [float(v) for v in xp.astype(xp.exp(b), xp.float32)],
           pickle.loads(pickle.dumps(xp.bfloat16)) is xp.bfloat16]
print(json.dumps(out))
"""


def test_bfloat16_loads_ml_dtypes_on_first_use_only():
    """ml_dtypes' C extension (about half a second) loads when bfloat16 is first used,
    never with ``import tessera_array`` or work in other dtypes."""
    assert _run(_NO_BFLOAT16) == {"ml_dtypes": False}


def test_bfloat16_works_whichever_use_comes_first():
    """Each first use of bfloat16, in a fresh process, gives the same answers as when
    bfloat16 was loaded long before: an ml_dtypes array brought in, a promotion asked
    of the dtypes alone, finfo, math functions (and the dtype pickles to itself)."""
    def run(case):
        env = dict(os.environ)
        env.pop("TESSERA_DEVICE", None)
        proc = subprocess.run([sys.executable, "-c", _FIRST_BFLOAT16, case],
                              capture_output=True, text=True, timeout=120, env=env)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    assert run("ndarray") == ["bfloat16", [3.0, -4.5]]
    assert run("promotion") == ["float32", "bfloat16", True]
    assert run("finfo") == [0.0078125, 16]
    sin_dtype, exp, same = run("math")
    assert sin_dtype == "bfloat16" and same is True
    assert exp == [float(np.exp(np.float32(0.5)).astype(ml_dtypes.bfloat16)),
                   float(np.exp(np.float32(1.0)).astype(ml_dtypes.bfloat16))]
