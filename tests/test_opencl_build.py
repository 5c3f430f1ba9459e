"""The OpenCL backend on the build stack of backends/_common: one place builds, one call clears.

Every program, the ``.cl`` files' and the generated ones', goes through one
``pyopencl.Program`` call (``backends/opencl/_compile.py``); every per-device cache is a
registered memo, so ``clear_all()`` empties them all and the next call rebuilds; no
module-level cache of backends/opencl escapes the registry (checked in a fresh process,
where every cache starts empty); programs are kept on disk under ``TESSERA_CACHE_DIR``.
"""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import _gate
import numpy as np
import pytest

import tessera_array as xp

BACKEND = _gate.require_backend("opencl")

from tessera_array.backends import _common
from tessera_array.backends._common import clear_all, from_text, memos
from tessera_array.backends.opencl import _compile, _families, _generate, _kernels, _memory

from tessera_array._dispatch import lookup
from tessera_array._errors import KernelCompileError

DEV = BACKEND.devices()[0]
BACKENDS_DIR = pathlib.Path(_common.__file__).resolve().parent.parent


def battery() -> dict:
    """Run one op of every kernel family of the backend; their results (host arrays) by
    name, each checked against NumPy by the caller."""
    rng = np.random.default_rng(20261201)
    f32 = np.float32
    h = rng.standard_normal((6, 5)).astype(f32)
    w = rng.standard_normal((5, 4)).astype(f32)
    v = rng.standard_normal(5).astype(f32)
    a, b, x = (xp.asarray(t, device=DEV) for t in (h, w, v))
    out = {}
    out["map"] = (a * 2.0 + 1.5, h * f32(2) + f32(1.5))
    out["cast"] = (xp.astype(a, xp.int32), h.astype(np.int32))
    out["reduce"] = (xp.sum(a, axis=0), h.sum(axis=0))
    out["scan"] = (xp.cumulative_sum(a, axis=1), np.cumsum(h, axis=1))
    big = rng.standard_normal((2,) * 10).astype(f32)
    key = (slice(None, None, -1), slice(None)) * 5  # ten axes that do not coalesce
    out["ranked map"] = (xp.asarray(big, device=DEV)[key] * 3.0, big[key] * f32(3))
    out["gemm"] = (a @ b, h @ w)
    hi, wi = h.astype(np.int32), w.astype(np.int32)
    out["integer matmul"] = (xp.asarray(hi, device=DEV) @ xp.asarray(wi, device=DEV), hi @ wi)
    out["matvec"] = (a @ x, h @ v)
    out["dot"] = (xp.vecdot(x, x), np.dot(v, v))
    out["sort"] = (xp.sort(x), np.sort(v))
    idx = np.array([4, 0, 2])
    out["gather"] = (xp.take(x, xp.asarray(idx, device=DEV)), v[idx])
    out["nonzero"] = (xp.nonzero(x > 0)[0], np.nonzero(v > 0)[0])
    c = (rng.standard_normal((3, 8)) + 1j * rng.standard_normal((3, 8))).astype(np.complex64)
    out["fft"] = (xp.fft.fft(xp.asarray(c, device=DEV)), np.fft.fft(c).astype(np.complex64))
    q = rng.standard_normal((1, 1, 4, 8)).astype(f32)
    s = q @ q.transpose(0, 1, 3, 2) / np.sqrt(f32(8))
    p = np.exp(s - s.max(-1, keepdims=True))
    qd = xp.asarray(q, device=DEV)
    out["attention"] = (xp.nn.attention(qd, qd, qd), (p / p.sum(-1, keepdims=True)) @ q)
    mask = xp.nn.dropout_mask((2, 3, 4), 0.5, seed=7, device=DEV)
    want = np.asarray(xp.nn.dropout_mask((2, 3, 4), 0.5, seed=7))  # the NumPy backend's
    out["philox"] = (mask, want)
    # Launchers reached through the registry (native buffers).
    data, indices = xp.asarray(np.array([1.0, 2.0, 3.0], f32), device=DEV), \
        xp.asarray(np.array([0, 4, 2], np.int32), device=DEV)
    indptr = xp.asarray(np.array([0, 2, 2, 3], np.int32), device=DEV)
    spmv = lookup("spmv", DEV, xp.float32)
    dense = np.zeros((3, 5), f32)
    dense[0, 0], dense[0, 4], dense[2, 2] = 1.0, 2.0, 3.0
    out["spmv"] = (spmv(data._data, indices._data, indptr._data, (3, 5), x._data), dense @ v)
    param = xp.asarray(v.copy(), device=DEV)
    lookup("sgd_step", DEV, xp.float32)(
        [param._data], [x._data], [x._data], lr=0.5, momentum=0.0, dampening=0.0,
        weight_decay=0.0, nesterov=False, maximize=False, first=True)
    out["sgd"] = (param, v - f32(0.5) * v)
    # cg on a diagonal SPD system runs the fused CG steps (cg_fused): five distinct
    # eigenvalues, so five iterations solve it.
    d = np.arange(1.0, 6.0, dtype=f32)
    from tessera_array.sparse.linalg import cg

    sol, info = cg(xp.asarray(np.diag(d), device=DEV),
                                    xp.asarray(v, device=DEV), rtol=1e-6, maxiter=20)
    out["cg"] = (sol, v / d)
    return out


def _host(value):
    if isinstance(value, xp.Array):
        return np.asarray(value.to_device("cpu"))
    if value.__class__ is _memory.NATIVE:
        return _memory.to_host(value)
    return np.asarray(value)


def _check(results) -> None:
    for name, (got, want) in results.items():
        np.testing.assert_allclose(_host(got), want, rtol=1e-5, atol=1e-5, err_msg=name)


def test_one_place_calls_cl_program():
    calls = []
    for path in sorted(BACKENDS_DIR.rglob("*.py")):
        for line in path.read_text().splitlines():
            if re.search(r"\b(cl|pyopencl)\.Program\s*\(|\b_Program\s*\(", line):
                calls.append(path.relative_to(BACKENDS_DIR).as_posix())
    assert calls == ["opencl/_compile.py"]


# The memos the battery must fill (the rest fill on other paths: the fingerprints of
# contexts whose programs go to disk, probes, family failures...).
FILLED = ["opencl.programs", "opencl.kernels", "opencl.disk_cache", "opencl.sources",
          "opencl.file_kernels", "opencl.families", "opencl.member_sources",
          "opencl.member_kernels", "opencl.map_kernels", "opencl.ranked_sources",
          "opencl.pools", "opencl.cpu_devices", "opencl.matvec.setup", "opencl.sparse.setup",
          "opencl.optim.setup", "opencl.dot.setup", "opencl.cg.setup", "opencl.fft.plans",
          "opencl.attention.options", "opencl.linalg.int_matmul_sources",
          "opencl.linalg.gemm_options"]


def test_clear_all_empties_every_cache_and_the_next_call_rebuilds():
    _check(battery())
    names = {m.name: m for m in memos("opencl")}
    assert set(FILLED) <= set(names)
    assert [n for n in FILLED if not names[n]] == []
    clear_all("opencl")
    assert [m.name for m in memos("opencl") if m] == []
    before = _kernels.build_count()
    _check(battery())  # every kernel again, from the stack (disk or compiler)
    assert _kernels.build_count() > before
    assert [n for n in FILLED if not names[n]] == []


_SCAN = """
import json, sys
sys.path.insert(0, {tests!r})
import test_opencl_build as t
print("RESULT " + json.dumps(t.escaped_caches()))
"""

# Module-level containers that are state, not caches (documented where they live).
STATE = {("_memory", "QUEUE_DEVICE"), ("_kernels", "QUEUE_DEVICE"), ("_fallback", "_names")}


def _containers() -> dict:
    import importlib
    import pkgutil

    from tessera_array.backends import opencl

    out = {}
    for info in pkgutil.iter_modules(opencl.__path__):
        mod = importlib.import_module(f"{opencl.__name__}.{info.name}")
        for name, obj in vars(mod).items():
            if isinstance(obj, (dict, list, set)) and not isinstance(obj, _common.Memo) \
                    and (info.name, name) not in STATE:
                out[f"{info.name}.{name}"] = obj
    return out


def escaped_caches() -> list:
    """Run in a fresh process: the module-level dicts, lists and sets of backends/opencl
    (not memos) that running every kernel family changed: caches outside the registry."""
    before = {k: repr(sorted(map(repr, v))) for k, v in _containers().items()}
    _check(battery())
    after = {k: repr(sorted(map(repr, v))) for k, v in _containers().items()}
    return sorted(k for k in after if before.get(k) != after[k])


def test_no_module_level_cache_escapes_the_registry():
    tests = str(pathlib.Path(__file__).resolve().parent)
    run = subprocess.run([sys.executable, "-c", _SCAN.format(tests=tests)], cwd=tests,
                         capture_output=True, text=True, timeout=900, check=False)
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("RESULT ")]
    assert run.returncode == 0 and lines, run.stdout[-3000:] + run.stderr[-3000:]
    assert json.loads(lines[-1][len("RESULT "):]) == []


def _unique_source(note=""):
    value = float(np.random.default_rng().integers(1, 1 << 20))  # a source not built before
    return value, from_text(f"__kernel void k(__global float *x, float y) "
                            f"{{ x[0] = y + {value:.1f}f; }}\n// {note}\n")


def _run(ctx, src, value):
    queue = _memory.device_queue(DEV)
    out = _memory.empty(queue, (1,), np.float32)
    _compile.STACK.kernel(ctx, src, "k")(queue, (1,), None, out.base_data, 0.5)
    assert float(_memory.to_host(out)[0]) == value + 0.5


def test_programs_are_kept_on_disk(tmp_path, monkeypatch):
    """Kept under TESSERA_CACHE_DIR (forced here where the driver caches its own builds:
    PoCL, whose binaries are costly) and loaded after clear_all(); TESSERA_DISK_CACHE=0
    keeps nothing."""
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TESSERA_DISK_CACHE", raising=False)
    monkeypatch.setattr(_compile.OpenclDialect, "disk_cache", lambda self, context: True)
    ctx = _memory.device_queue(DEV).context
    value, src = _unique_source()
    stats = dict(_compile.STACK.stats)
    _run(ctx, src, value)
    files = list((tmp_path / "opencl").rglob("*.bin"))
    assert len(files) == 1 and _compile.STACK.stats["compiled"] == stats["compiled"] + 1
    clear_all("opencl")
    _run(ctx, src, value)  # from the file
    assert _compile.STACK.stats["loaded"] == stats["loaded"] + 1
    monkeypatch.setenv("TESSERA_DISK_CACHE", "0")
    _compile.STACK.program(ctx, _unique_source("off")[1])
    assert len(list((tmp_path / "opencl").rglob("*.bin"))) == 1  # nothing written


def test_drivers_with_their_own_build_cache_keep_it(tmp_path, monkeypatch):
    from pyopencl.characterize import has_src_build_cache

    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TESSERA_DISK_CACHE", raising=False)
    ctx = _memory.device_queue(DEV).context
    own = bool(has_src_build_cache(ctx.devices[0]))
    assert _compile.STACK.dialect.disk_cache(ctx) is not own
    value, src = _unique_source("driver")
    _run(ctx, src, value)
    assert len(list(tmp_path.rglob("*.bin"))) == (0 if own else 1)


def test_a_family_that_fails_to_build_is_split(monkeypatch):
    good = _generate.map_member("a0 * 0.125f + 3.0f", "float", ("float",))
    bad = _generate.map_member("not_a_function(a0)", "float", ("float",))
    monkeypatch.setattr(_families, "_PROVIDERS", [lambda: [[good, bad]]])
    for m in (_families._family, _families._source, _families._failed):
        m.clear()
    monkeypatch.setattr(_kernels, "_map_kernels", _common.Memo("opencl.test.map_kernels"))
    try:
        h = np.arange(4, dtype=np.float32)
        got = _kernels.launch_map(_memory.device_queue(DEV), good.expr, None,
                                  [xp.asarray(h, device=DEV)._data], "float", shape=(4,))
        np.testing.assert_array_equal(_memory.to_host(got), h * np.float32(0.125) + 3)
        assert _kernels.family_failures() == [(good, bad)]
        with pytest.raises(KernelCompileError, match=r"(?s)opencl: building generated program "
                                                     r"failed.*not_a_function"):
            _families.kernel_of(_memory.device_queue(DEV).context, bad, "m{}",
                                _generate.map_arg_types(("float",)))
    finally:
        for m in (_families._family, _families._source, _families._failed):
            m.clear()
