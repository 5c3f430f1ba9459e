"""The benchmark ratchet: a slowed kernel FAILs, changed sources go STALE, a re-record PASSes.

No real timing: a virtual clock advances only when the timed expressions do
their "work", so every ratio is exact and the tests cannot flake on a busy
machine. The kernels live in a temporary source tree that the fingerprints hash.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass

import numpy as np
import pytest

from _repo import import_benchmarks  # tests/ is on sys.path

import_benchmarks()  # the root stays off sys.path (tests/_repo.py says why)

from benchmarks import _cli, _core, _devices, _fingerprint, _ratchet
from benchmarks._progress import Progress
from benchmarks._suites import SUITES, Suite

SETTINGS = _core.Settings(batch_ns=1_000, rounds=5, min_rounds=5, max_seconds=60.0, warmup=1)


class VirtualClock:
    """A timer whose time moves only when ``work(ns)`` is called."""

    name = "virtual"

    def __init__(self):
        self.now = 0

    def work(self, ns):
        self.now += ns

    def start(self):
        return self.now

    def stop(self, token):
        return self.now - token


class Kernels:
    """The 'kernels' the toy benchmarks call: a cost in virtual ns per call."""

    def __init__(self, clock):
        self.clock = clock
        self.tessera_cost = 150
        self.peer_cost = 100

    def tessera(self):
        self.clock.work(self.tessera_cost)

    def peer(self):
        self.clock.work(self.peer_cost)


def _no_check(t, p, ns):
    return None


@pytest.fixture
def tree(tmp_path):
    """A source tree with one kernel file, the clock and the kernels timed against it."""
    src = tmp_path / "src" / "kern"
    src.mkdir(parents=True)
    (src / "add.py").write_text("def add(a, b):\n    return a + b\n")
    (src / "helpers.py").write_text("SCALE = 1\n")
    clock = VirtualClock()
    return tmp_path / "src", clock, Kernels(clock)


def _bench(kernels, name="add", variant="n=1", sources=("kern/*.py",), setup=None, **kw):
    return _core.Benchmark(
        suite="toy",
        name=name,
        variant=variant,
        tessera="k.tessera()",
        peer="k.peer()",
        setup=setup or (lambda: {"k": kernels}),
        sources=tuple(sources),
        params={"n": 1},
        peer_name="peer",
        check=_no_check,
        **kw,
    )


def _run(benches, root, clock):
    return _core.run_benchmarks(benches, timer=clock, settings=SETTINGS, root=root)


def _doc(results):
    return {
        "backend": "toy",
        "device": {"device": "cpu"},
        "quick": False,
        "machine": {"cpu_model": "virtual", "cores_usable": 1},
        "versions": {},
        "git": {"commit": None, "dirty": None},
        "benchmarks": results,
    }


def _record(path, results, benches):
    return _ratchet.record_baseline(
        path, _doc(results), declared_ids=[b.id for b in benches], suites_run={"toy"}
    )


def _verdicts(results, path):
    return _ratchet.compare(results, _ratchet.load_baseline(path), suites_run={"toy"})


# ---- the three cases of the brief ---------------------------------------------------


def test_virtual_timing_gives_exact_ratios(tree):
    root, clock, kernels = tree
    (res,) = _run([_bench(kernels)], root, clock)
    assert res["status"] == "ok", res.get("reason")
    assert res["tessera_median_ns"] == 150
    assert res["peer_median_ns"] == 100
    assert res["ratio"] == pytest.approx(1.5)
    assert res["batch"] >= 7  # calibrated to >= batch_ns of virtual time
    assert res["rounds"] == SETTINGS.rounds
    assert set(res["files"]) == {"kern/add.py", "kern/helpers.py"}


def test_slowed_kernel_fails(tree, tmp_path):
    root, clock, kernels = tree
    benches = [_bench(kernels)]
    path = tmp_path / "baselines" / "toy-cpu.json"
    _record(path, _run(benches, root, clock), benches)

    kernels.tessera_cost = 300  # the kernel now does twice the work: ratio 3.0
    (v,) = _verdicts(_run(benches, root, clock), path)
    assert v.status == "FAIL"
    assert v.ratio == pytest.approx(3.0) and v.baseline_ratio == pytest.approx(1.5)
    assert v.status in _ratchet.FAILING
    assert "+100.0%" in v.message and "FAIL" in v.message


def test_small_slowdown_within_tolerance_passes(tree, tmp_path):
    root, clock, kernels = tree
    benches = [_bench(kernels)]
    path = tmp_path / "toy-cpu.json"
    _record(path, _run(benches, root, clock), benches)
    kernels.tessera_cost = 160  # ratio 1.6: +6.7%, inside 10%
    assert [v.status for v in _verdicts(_run(benches, root, clock), path)] == ["PASS"]
    kernels.tessera_cost = 166  # ratio 1.66: +10.7%
    assert [v.status for v in _verdicts(_run(benches, root, clock), path)] == ["FAIL"]


def test_changed_source_is_stale_until_rerecorded(tree, tmp_path):
    root, clock, kernels = tree
    benches = [_bench(kernels)]
    path = tmp_path / "toy-cpu.json"
    _record(path, _run(benches, root, clock), benches)
    assert [v.status for v in _verdicts(_run(benches, root, clock), path)] == ["PASS"]

    kernel = root / "kern" / "add.py"
    data = bytearray(kernel.read_bytes())
    data[-2] = ord("c")  # one byte: "a + b" -> "a + c"
    kernel.write_bytes(bytes(data))

    # Same ratio, even a better one: still STALE, never PASS against the old number.
    kernels.tessera_cost = 120
    (v,) = _verdicts(_run(benches, root, clock), path)
    assert v.status == "STALE"
    assert v.status in _ratchet.FAILING
    assert "changed: kern/add.py" in v.message
    assert "--record" in v.message

    # Re-recorded after the change: PASS.
    _record(path, _run(benches, root, clock), benches)
    (v,) = _verdicts(_run(benches, root, clock), path)
    assert v.status == "PASS", v.message


def test_stale_wins_over_fail(tree, tmp_path):
    root, clock, kernels = tree
    benches = [_bench(kernels)]
    path = tmp_path / "toy-cpu.json"
    _record(path, _run(benches, root, clock), benches)
    (root / "kern" / "helpers.py").write_text("SCALE = 2\n")
    kernels.tessera_cost = 900
    (v,) = _verdicts(_run(benches, root, clock), path)
    assert v.status == "STALE"
    assert "changed: kern/helpers.py" in v.message


def test_sources_edited_during_the_run_are_not_reported_ok(tree, tmp_path):
    root, clock, kernels = tree
    benches = [_bench(kernels)]
    path = tmp_path / "toy-cpu.json"
    _record(path, _run(benches, root, clock), benches)

    def edit_while_running():
        (root / "kern" / "add.py").write_text("def add(a, b):\n    return b + a\n")
        return {"k": kernels}

    (res,) = _run([_bench(kernels, setup=edit_while_running)], root, clock)
    assert res["status"] == "error"
    assert "changed on disk while the run was under way (kern/add.py)" in res["reason"]
    assert [v.status for v in _verdicts([res], path)] == ["MISSING"]


# ---- fingerprints -----------------------------------------------------------------------


def test_fingerprint_sees_added_files_and_definitions(tree, tmp_path):
    root, clock, kernels = tree
    benches = [_bench(kernels)]
    path = tmp_path / "toy-cpu.json"
    _record(path, _run(benches, root, clock), benches)

    (root / "kern" / "new_path.py").write_text("X = 1\n")
    (v,) = _verdicts(_run(benches, root, clock), path)
    assert v.status == "STALE" and "added: kern/new_path.py" in v.message
    (root / "kern" / "new_path.py").unlink()
    assert [v.status for v in _verdicts(_run(benches, root, clock), path)] == ["PASS"]

    # The same id timing a different expression is a different benchmark.
    changed = _core.Benchmark(**{**benches[0].__dict__, "peer": "k.peer() or None"})
    (v,) = _verdicts(_run([changed], root, clock), path)
    assert v.status == "STALE" and "definition changed" in v.message


def test_fingerprint_rejects_patterns_matching_nothing(tree):
    root, clock, kernels = tree
    with pytest.raises(_fingerprint.FingerprintError, match=r"fingerprint: .*matches no file.*"
                       r"pattern='kern/typo\*\.py'"):
        _fingerprint.resolve_sources(["kern/*.py", "kern/typo*.py"], root)
    with pytest.raises(_fingerprint.FingerprintError, match=r"relative paths inside"):
        _fingerprint.resolve_sources(["../outside.py"], root)
    (res,) = _run([_bench(kernels, sources=("kern/typo*.py",))], root, clock)
    assert res["status"] == "error" and "matches no file" in res["reason"]


def test_fingerprint_is_order_independent_and_byte_sensitive(tree):
    root, _, _ = tree
    paths = _fingerprint.resolve_sources(["kern/helpers.py", "kern/*.py"], root)
    assert paths == ["kern/add.py", "kern/helpers.py"]
    files = _fingerprint.file_hashes(paths, root)
    fp = _fingerprint.fingerprint(files, "d")
    assert fp == _fingerprint.fingerprint(dict(reversed(list(files.items()))), "d")
    assert fp != _fingerprint.fingerprint(files, "e")
    (root / "kern" / "add.py").write_bytes((root / "kern" / "add.py").read_bytes() + b" ")
    assert fp != _fingerprint.fingerprint(_fingerprint.file_hashes(paths, root), "d")


# ---- NEW, MISSING, unavailable ----------------------------------------------------------


def test_new_missing_and_unavailable(tree, tmp_path):
    root, clock, kernels = tree
    a = _bench(kernels, name="a")
    b = _bench(kernels, name="b")
    path = tmp_path / "toy-cpu.json"
    _record(path, _run([a, b], root, clock), [a, b])

    def gone():
        raise _core.Unavailable("toy.b does not exist yet")

    b_gone = _bench(kernels, name="b", setup=gone)
    c = _bench(kernels, name="c")
    results = _run([a, b_gone, c], root, clock)
    assert results[1]["status"] == "unavailable"
    assert results[1]["reason"] == "toy.b does not exist yet"
    status = {v.id: v.status for v in _verdicts(results, path)}
    assert status == {
        "toy/a[n=1]": "PASS",
        "toy/b[n=1]": "MISSING",
        "toy/c[n=1]": "NEW",
    }
    # A baseline entry whose benchmark is no longer declared is MISSING too.
    status = {v.id: v.status for v in _verdicts(_run([a], root, clock), path)}
    assert status == {"toy/a[n=1]": "PASS", "toy/b[n=1]": "MISSING"}
    # Re-recording drops entries that were not measured and keeps other suites'.
    base = json.loads(path.read_text())
    base["benchmarks"]["other/x[n=1]"] = {**base["benchmarks"]["toy/a[n=1]"], "suite": "other"}
    path.write_text(json.dumps(base))
    notes = _record(path, results, [a, b_gone, c])
    assert set(notes["dropped"]) == {"toy/b[n=1]"}
    assert set(json.loads(path.read_text())["benchmarks"]) == {
        "toy/a[n=1]", "toy/c[n=1]", "other/x[n=1]"
    }


def test_not_implemented_raises_and_wrong_answers_are_reported(tree):
    root, clock, kernels = tree

    def boom():
        raise NotImplementedError("sum is a stub")

    ni = _core.Benchmark(
        suite="toy", name="ni", variant="v", tessera="f()", peer="k.peer()",
        setup=lambda: {"f": boom, "k": kernels}, sources=("kern/*.py",),
    )
    wrong = _core.Benchmark(
        suite="toy", name="wrong", variant="v", tessera="one + 1", peer="one",
        setup=lambda: {"one": 1.0}, sources=("kern/*.py",),
    )
    r_ni, r_wrong = _run([ni, wrong], root, clock)
    assert r_ni["status"] == "unavailable" and "sum is a stub" in r_ni["reason"]
    assert r_wrong["status"] == "error" and r_wrong["reason"].startswith("check failed")


# ---- the command line, end to end on the toy suite --------------------------------------


@dataclass(frozen=True)
class _ToySuite(Suite):
    declare: object = None

    def load(self):
        return self.declare

    def not_implemented_reason(self):
        return None


def _toy_suites(kernels):
    def declare(ctx):
        return [_bench(kernels, name="add"), _bench(kernels, name="mul")]

    toy = _ToySuite("toy", "toy kernels", "tessera_array:add", None, declare)
    later = Suite("later", "not written yet", "tessera_array.nowhere:thing")
    return {"toy": toy, "later": later}


def _execute(argv, kernels, root, clock):
    suites = _toy_suites(kernels)
    args = _cli.build_parser(suites).parse_args(argv)
    out, err = io.StringIO(), io.StringIO()
    code = _cli.execute(args, suites=suites, root=root, timer=clock, settings=SETTINGS,
                        stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_cli_record_ratchet_and_exit_codes(tree, tmp_path):
    root, clock, kernels = tree
    out_dir, base_dir = tmp_path / "results", tmp_path / "baselines"
    common = ["--backend", "numpy", "--out", str(out_dir), "--baseline-dir", str(base_dir),
              "--no-plots", "--no-progress"]

    code, out, err = _execute(common + ["--ratchet"], kernels, root, clock)
    assert code == 2 and "no baseline" in err

    code, out, _ = _execute(common + ["--record"], kernels, root, clock)
    assert code == 0, out
    assert "suite later: not yet implemented: the later family does not exist yet" in out
    base = json.loads((base_dir / "numpy-cpu.json").read_text())
    assert base["benchmarks"]["toy/add[n=1]"]["ratio"] == pytest.approx(1.5)

    code, out, _ = _execute(common + ["--ratchet"], kernels, root, clock)
    assert code == 0 and "ratchet: PASS" in out
    # --filter: the benchmarks left out are neither compared nor MISSING.
    code, out, _ = _execute(common + ["--ratchet", "--filter", "mul"], kernels, root, clock)
    assert code == 0 and "ratchet: PASS (PASS 1)" in out

    kernels.tessera_cost = 400
    code, out, _ = _execute(common + ["--ratchet"], kernels, root, clock)
    assert code == 1 and "ratchet: FAIL" in out
    doc = json.loads((out_dir / "numpy-cpu.json").read_text())
    assert {v["status"] for v in doc["ratchet"]["verdicts"]} == {"FAIL"}
    assert {s["name"]: s["status"] for s in doc["suites"]} == {
        "toy": "ran", "later": "not yet implemented"
    }
    for key in ("machine", "device", "versions", "git", "timing"):
        assert key in doc
    res = doc["benchmarks"][0]
    for key in ("id", "params", "tessera_median_ns", "peer_median_ns", "ratio", "fingerprint"):
        assert key in res
    md = (out_dir / "numpy-cpu.md").read_text()
    assert "| add |" in md and "## Ratchet" in md and "later: not yet implemented" in md
    # the machine's NumPy SIMD level, as NumPy reports it, in the JSON and the header
    simd = np.show_config(mode="dicts")["SIMD Extensions"]
    assert doc["machine"]["numpy_simd"]["baseline"] == list(simd["baseline"])
    assert doc["machine"]["numpy_simd"]["found"] == list(simd["found"])
    assert f"NumPy SIMD baseline {' '.join(simd['baseline'])}; found " in md


def test_cli_record_refuses_a_run_with_errors(tree, tmp_path):
    root, clock, kernels = tree
    common = ["--backend", "numpy", "--out", str(tmp_path / "r"), "--baseline-dir",
              str(tmp_path / "b"), "--no-plots", "--no-progress"]
    assert _execute(common + ["--record"], kernels, root, clock)[0] == 0
    before = (tmp_path / "b" / "numpy-cpu.json").read_text()

    def broken(ctx):
        def setup():
            raise RuntimeError("toy setup broke")

        return [_bench(kernels, name="add", setup=setup), _bench(kernels, name="mul")]

    suites = _toy_suites(kernels)
    suites["toy"] = _ToySuite("toy", "toy kernels", "tessera_array:add", None, broken)
    args = _cli.build_parser(suites).parse_args(common + ["--record"])
    out = io.StringIO()
    code = _cli.execute(args, suites=suites, root=root, timer=clock, settings=SETTINGS,
                        stdout=out, stderr=io.StringIO())
    assert code == 1
    assert "baseline: NOT written: 1 benchmark(s) errored" in out.getvalue()
    assert "setup raised RuntimeError: toy setup broke" in out.getvalue()
    assert (tmp_path / "b" / "numpy-cpu.json").read_text() == before


def test_cli_fail_is_confirmed_by_remeasuring(tree, tmp_path):
    root, clock, kernels = tree
    common = ["--backend", "numpy", "--out", str(tmp_path / "r"), "--baseline-dir",
              str(tmp_path / "b"), "--no-plots", "--no-progress"]
    assert _execute(common + ["--record"], kernels, root, clock)[0] == 0

    # A one-off hiccup: only the first measurement is slow. Re-measuring clears it.
    calls = []

    def hiccup_setup():
        calls.append(1)
        kernels.tessera_cost = 400 if len(calls) <= 2 else 150  # 2 benchmarks, first run
        return {"k": kernels}

    suites = _toy_suites(kernels)
    hiccup = [_bench(kernels, name=n, setup=hiccup_setup) for n in ("add", "mul")]
    suites["toy"] = _ToySuite("toy", "toy kernels", "tessera_array:add", None,
                              lambda ctx: hiccup)
    args = _cli.build_parser(suites).parse_args(common + ["--ratchet"])
    out = io.StringIO()
    code = _cli.execute(args, suites=suites, root=root, timer=clock, settings=SETTINGS,
                        stdout=out, stderr=io.StringIO())
    assert code == 0, out.getvalue()
    doc = json.loads((tmp_path / "r" / "numpy-cpu.json").read_text())
    assert doc["benchmarks"][0]["attempts"] == [pytest.approx(400 / 100), pytest.approx(1.5)]
    assert {v["status"] for v in doc["ratchet"]["verdicts"]} == {"PASS"}

    # A real regression shows in every attempt and stays a FAIL.
    kernels.tessera_cost = 400
    code, out, _ = _execute(common + ["--ratchet", "--confirm", "2"], kernels, root, clock)
    assert code == 1 and "lowest of 3 measurements: 4.000, 4.000, 4.000" in out


def test_cli_rejects_record_with_ratchet(capsys):
    with pytest.raises(SystemExit):
        _cli.build_parser().parse_args(["--record", "--ratchet"])
    assert "not allowed with" in capsys.readouterr().err


# ---- the real suite table ---------------------------------------------------------------


def test_real_suites_declare_resolvable_sources():
    """Every real suite's source patterns match files of the repository checkout (the
    fingerprints hash them). Outside a checkout (the tests copied beside an installed
    package) there are no sources to match."""
    if not (_cli.REPO_ROOT / "tessera_array" / "__init__.py").is_file():
        pytest.skip(f"no repository checkout at {_cli.REPO_ROOT}: the benchmarks' source "
                    "fingerprints need one (tessera_array is installed without its tree)")
    import tessera_array as xp
    from benchmarks._suites import SuiteContext
    from tessera_array._devices import default_device

    ctx = SuiteContext(xp=xp, device=default_device(), quick=True)
    assert set(SUITES) >= {"overhead", "krylov", "fft", "attention", "optim"}
    for suite in SUITES.values():
        if suite.not_implemented_reason() is not None:
            assert "not" in suite.not_implemented_reason()
            continue
        benches = suite.load()(ctx)
        assert len({b.id for b in benches}) == len(benches)
        for b in benches:
            assert _fingerprint.resolve_sources(b.sources, _cli.REPO_ROOT)


def test_committed_baselines_are_well_formed():
    for path in (_cli.REPO_ROOT / "benchmarks" / "baselines").glob("*.json"):
        base = _ratchet.load_baseline(path)
        assert base["benchmarks"], path
        for bid, entry in base["benchmarks"].items():
            assert entry["ratio"] > 0, bid
            assert len(entry["fingerprint"]) == 64, bid


def test_progress_bar_lines_without_a_terminal():
    stream = io.StringIO()
    bar = Progress(2, stream=stream)
    bar.step("a")
    bar.step("b")
    bar.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3
    assert "1/2" in lines[0] and lines[0].endswith("a")
    assert "2/2" in lines[2] and lines[2].endswith("done")


# ---- per-side timers, fixed batches, primed batches ------------------------------------


def _two_clocks(ns):
    return ns["tessera_clock"], ns["peer_clock"]


def test_benchmark_timers_batch_and_prime(tree):
    """A benchmark may time each side with its own clock (an OpenCL kernel by profiling
    markers, a CuPy one by CUDA events), a fixed number of calls per batch, and primed
    batches; each is part of its definition, hence of its fingerprint."""
    root, clock, kernels = tree
    t_clock, p_clock = VirtualClock(), VirtualClock()
    calls = {"tessera": 0, "peer": 0}

    class Sides:
        def tessera(self):
            calls["tessera"] += 1
            t_clock.work(300)
            clock.work(1)  # the run's clock barely moves: it must not be the one read

        def peer(self):
            calls["peer"] += 1
            p_clock.work(100)

    def setup():
        return {"k": Sides(), "tessera_clock": t_clock, "peer_clock": p_clock}

    plain = _bench(kernels, name="own", setup=setup, timers=_two_clocks, batch=1)
    (res,) = _run([plain], root, clock)
    assert res["status"] == "ok", res.get("reason")
    assert res["ratio"] == pytest.approx(3.0)
    assert res["tessera_median_ns"] == 300 and res["peer_median_ns"] == 100
    assert res["batch"] == 1 and res["rounds"] == SETTINGS.rounds
    assert res["timers"] == {"tessera": "virtual", "peer": "virtual"}
    # check call + warm-up + one call per round, no calibration
    assert calls["tessera"] == 1 + SETTINGS.warmup + SETTINGS.rounds

    calls.update(tessera=0, peer=0)
    primed = _bench(kernels, name="own", setup=setup, timers=_two_clocks, batch=1,
                    settle_s=1e-4, prime=True)
    (res2,) = _run([primed], root, clock)
    assert res2["status"] == "ok" and res2["ratio"] == pytest.approx(3.0)
    # every timed (and warm-up) batch is preceded by one untimed call of its own side
    assert calls["tessera"] == 1 + 2 * (SETTINGS.warmup + SETTINGS.rounds)

    base = _bench(kernels, name="own", setup=setup)
    defs = [b.definition() for b in (base, plain, primed)]
    assert "timers" not in defs[0] and defs[1]["timers"] == "_two_clocks"
    assert defs[1]["batch"] == 1 and defs[2]["prime"] is True
    assert len({r["fingerprint"] for r in (res, res2)}) == 2


def test_benchmark_timers_can_report_unavailable(tree):
    root, clock, kernels = tree

    def no_device_clock(ns):
        raise _core.Unavailable("no profiling queue here")

    (res,) = _run([_bench(kernels, timers=no_device_clock)], root, clock)
    assert res["status"] == "unavailable" and res["reason"] == "no profiling queue here"


# ---- device suites -------------------------------------------------------------------


def _facts(device, backend, name, *, gpu, vendor=None, host=False):
    return _devices.DeviceFacts(device=device, backend=backend, name=name, vendor=vendor,
                                platform=None, driver=None, is_gpu=gpu, is_host=host)


def test_device_labels_keep_baselines_apart(monkeypatch, tmp_path):
    """Baselines are named by backend and device model: a CPU OpenCL driver's and an
    H200's never share a file, while two H200s (opencl:0 on one host, opencl:1 on
    another) do."""
    pocl = _facts("opencl:0", "opencl", "pthread-AMD EPYC", gpu=False)
    h200 = _facts("opencl:1", "opencl", "NVIDIA H200", gpu=True, vendor="NVIDIA Corporation")
    h200_other = _facts("opencl:0", "opencl", "NVIDIA H200", gpu=True)
    host = _facts("cpu", "numpy", "AMD EPYC 7B13", gpu=False, host=True)
    assert [f.label for f in (pocl, h200, h200_other, host)] == [
        "pthread-amd-epyc", "nvidia-h200", "nvidia-h200", "cpu"]
    table = {"pocl": pocl, "h200": h200}
    monkeypatch.setattr(_devices, "facts", lambda d: table[d])
    paths = {_ratchet.baseline_path(tmp_path, "opencl", d).name for d in table}
    assert paths == {"opencl-pthread-amd-epyc.json", "opencl-nvidia-h200.json"}


def test_needs_say_why_a_device_suite_cannot_run(monkeypatch):
    """A device suite's Needs name what is missing: the device (with the one that would
    do, where it is loaded), the GPU, the vendor, the peer's module, the peer's check."""
    table = {
        "cpu": _facts("cpu", "numpy", "AMD EPYC", gpu=False, host=True),
        "opencl:0": _facts("opencl:0", "opencl", "pthread-AMD EPYC", gpu=False),
        "opencl:1": _facts("opencl:1", "opencl", "NVIDIA H200", gpu=True,
                           vendor="NVIDIA Corporation"),
        "opencl:2": _facts("opencl:2", "opencl", "gfx90a", gpu=True, vendor="AMD"),
    }
    loaded = {"opencl": ["opencl:0", "opencl:1", "opencl:2"]}
    monkeypatch.setattr(_devices, "facts", lambda d: table[d])
    monkeypatch.setattr(_devices, "_loaded_devices", lambda b: loaded.get(b, []))
    monkeypatch.setattr(_devices, "_backend_reason", lambda b: "no such backend")

    any_cl = _devices.Needs("opencl")
    assert any_cl.unavailable_reason("opencl:0") is None
    why = any_cl.unavailable_reason("cpu")
    assert "this run's device, cpu (AMD EPYC" in why and "is a numpy device" in why
    assert "run it with --device opencl:0 (pthread-AMD EPYC" in why

    nvidia = _devices.Needs("opencl", gpu=True, vendor="NVIDIA")
    assert nvidia.unavailable_reason("opencl:1") is None
    assert "is not a GPU: run it with --device opencl:1 (NVIDIA H200; a GPU)" in \
        nvidia.unavailable_reason("opencl:0")
    assert "is not an NVIDIA device" in nvidia.unavailable_reason("opencl:2")

    cuda = _devices.Needs("cuda", gpu=True, peers=("cupy",))
    why = cuda.unavailable_reason("cpu")
    assert "runs on cuda GPUs;" in why and "no cuda device is loaded here" in why

    peer = _devices.Needs("opencl", peers=("tessera_no_such_peer_module",),
                          peer_check=lambda f: "never consulted while a module is missing")
    why = peer.unavailable_reason("opencl:0")
    assert "its peer needs tessera_no_such_peer_module, which does not import" in why
    assert "never consulted" not in why
    checked = _devices.Needs("opencl", peer_check=lambda f: f"the peer is not on {f.name}")
    assert checked.unavailable_reason("opencl:0") == "the peer is not on pthread-AMD EPYC"


def _real_context(quick=True):
    import tessera_array as xp
    from benchmarks._suites import SuiteContext
    from tessera_array._devices import default_device

    return SuiteContext(xp=xp, device=default_device(), quick=quick)


def _need_checkout():
    if not (_cli.REPO_ROOT / "tessera_array" / "__init__.py").is_file():
        pytest.skip(f"no repository checkout at {_cli.REPO_ROOT}: the benchmarks' source "
                    "fingerprints need one (tessera_array is installed without its tree)")


def test_every_suite_in_the_table_has_a_fingerprint_source_list():
    """Every suite of the table, host and device suites alike, declares its benchmarks
    without touching a device, and every benchmark names the sources it measures, each
    pattern matching files of the checkout, in quick and full settings."""
    _need_checkout()
    device_suites = [s for s in SUITES.values() if s.needs is not None]
    assert {s.name for s in device_suites} >= {
        "opencl_kernels", "opencl_launch", "opencl_ops", "opencl_vs_cupy", "krylov_vs_cupy"}
    for suite in SUITES.values():
        if suite.not_implemented_reason() is not None:
            continue
        for quick in (True, False):
            benches = suite.load()(_real_context(quick))
            assert benches, suite.name
            assert len({b.id for b in benches}) == len(benches), suite.name
            for b in benches:
                assert b.suite == suite.name and b.sources, b.id
                assert _fingerprint.resolve_sources(b.sources, _cli.REPO_ROOT), b.id


def test_device_suites_report_unavailable_without_their_device(tmp_path):
    """On the host device every device suite is listed and reported unavailable with its
    reason (no crash, exit 0, nothing measured, no baseline written); the reason names
    the device it needs."""
    import tessera_array as xp

    device_suites = {n: s for n, s in SUITES.items() if s.needs is not None}
    host = xp.__array_namespace_info__().devices()[0]
    assert str(host) == "cpu"
    for suite in device_suites.values():
        why = suite.unavailable_reason(host)
        assert why and suite.needs.backend in why, (suite.name, why)
    common = ["--device", "cpu", "--out", str(tmp_path / "r"), "--baseline-dir",
              str(tmp_path / "b"), "--no-plots", "--no-progress"]
    for argv in (common + ["--list"], common + ["--record"], common):
        args = _cli.build_parser(device_suites).parse_args(argv)
        out, err = io.StringIO(), io.StringIO()
        code = _cli.execute(args, suites=device_suites, stdout=out, stderr=err)
        assert code == 0, (argv, out.getvalue(), err.getvalue())
        for name in device_suites:
            assert f"{name}: unavailable" in out.getvalue() or \
                f"suite {name}: unavailable" in out.getvalue(), out.getvalue()
    doc = json.loads((tmp_path / "r" / "numpy-cpu.json").read_text())
    assert doc["benchmarks"] == []
    assert {s["status"] for s in doc["suites"]} == {"unavailable"}
    assert all(s["reason"] for s in doc["suites"])
    # --record measured nothing: the baseline it wrote holds no ratio to hold anyone to
    assert json.loads((tmp_path / "b" / "numpy-cpu.json").read_text())["benchmarks"] == {}


def test_a_device_suite_runs_on_its_device(device, tmp_path):
    """On an OpenCL device, a device suite runs end to end through the runner: the
    launcher timed by its own clock, results and baseline named by the device's model."""
    if device.kind != "opencl":
        pytest.skip(f"the OpenCL device suites need an OpenCL device; {device} is not one")
    _need_checkout()
    suites = {"opencl_launch": SUITES["opencl_launch"]}
    argv = ["--device", str(device), "--suite", "opencl_launch", "--filter",
            "matvec[scalar]", "--out", str(tmp_path / "r"), "--baseline-dir",
            str(tmp_path / "b"), "--no-plots", "--no-progress", "--record"]
    args = _cli.build_parser(suites).parse_args(argv)
    out = io.StringIO()
    code = _cli.execute(args, suites=suites, settings=SETTINGS, stdout=out,
                        stderr=io.StringIO())
    assert code == 0, out.getvalue()
    label = _devices.facts(device).label
    doc = json.loads((tmp_path / "r" / f"opencl-{label}.json").read_text())
    (res,) = doc["benchmarks"]
    assert res["status"] == "ok", res.get("reason")
    assert res["ratio"] > 0 and res["timers"]["tessera"] == _core.DrainedQueueTimer.name
    base = json.loads((tmp_path / "b" / f"opencl-{label}.json").read_text())
    assert set(base["benchmarks"]) == {"opencl_launch/matvec[scalar]"}


def test_opencl_marker_timer_times_device_work(device):
    """OpenclMarkerTimer: the span between two profiling markers around a launcher
    call on a profiling queue (the launcher launches on its inputs' queue)."""
    if device.kind != "opencl":
        pytest.skip(f"an OpenCL device's timer; {device} is not one")
    import numpy as np

    import tessera_array as xp
    from benchmarks._opencl import put
    from tessera_array import launchers

    a = put(np.ones((256, 256), np.float32), device)
    queue = _devices.opencl_profiling_queue(a)
    assert _devices.opencl_profiling_queue(a) is queue
    a = a.with_queue(queue)
    x = put(np.ones(256, np.float32), device).with_queue(queue)
    mv = launchers.launcher("matvec", device, xp.float32)
    timer = _core.OpenclMarkerTimer(queue)
    token = timer.start()
    y = mv(a, x)
    span = timer.stop(token)
    assert span > 0
    assert y.queue is queue and np.array_equal(y.get(), np.full(256, 256, np.float32))
