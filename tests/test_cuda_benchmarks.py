"""The CUDA device benchmarks, on any machine: what the cuda_vs_peers suite declares, that
it is reported unavailable (never run, never a crash) without a CUDA device or CuPy, the
CuPy device probe behind its baseline's name, the bandwidth figure of its optimizer rows,
and the steady-memory script's clean refusal without CuPy.

Nothing here times or touches a GPU: the suite itself runs on the GPU machine
(``python -P -m benchmarks --suite cuda_vs_peers --device cuda:0``).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from _repo import import_benchmarks  # tests/ is on sys.path

_ROOT = Path(__file__).resolve().parents[1]
import_benchmarks()  # the root stays off sys.path (tests/_repo.py says why)

from benchmarks import _cli, _core, _devices, _fingerprint, _ratchet, _report
from benchmarks import cuda_vs_peers as suite_module
from benchmarks._suites import SUITES, SuiteContext

SUITE = SUITES["cuda_vs_peers"]


def _benches(quick):
    import tessera_array as xp
    from tessera_array._devices import default_device

    return SUITE.load()(SuiteContext(xp=xp, device=default_device(), quick=quick))


def _by_id(benches):
    return {b.id: b for b in benches}


def test_cuda_suite_declares_each_row_with_its_peer_and_target():
    """Every row of the issue, side by side with its peer, with the issue's targets, its
    shape and dtype in params, sources that exist; quick mode shrinks the sizes."""
    assert SUITE.needs.backend == "cuda" and SUITE.needs.gpu and SUITE.needs.vendor == "NVIDIA"
    assert "cupy" in SUITE.needs.peers
    full, quick = _by_id(_benches(False)), _by_id(_benches(True))
    for benches in (full, quick):
        assert {b.name for b in benches.values()} == {
            "overhead", "matvec", "spmv", "adam", "adamw", "adafactor", "linear", "fft"}
        for b in benches.values():
            assert b.suite == "cuda_vs_peers" and "dtype" in b.params, b.id
            assert _fingerprint.resolve_sources(b.sources, _cli.REPO_ROOT), b.id
    peers = {b.name: b.peer_name for b in full.values()}
    assert peers == {"overhead": "cupy", "matvec": "cublas", "spmv": "cusparse",
                     "adam": "torch", "adamw": "torch", "adafactor": "torch", "linear": "torch",
                     "fft": "cufft"}

    sizes = {b.params["shape"][0]: b for b in full.values() if b.name == "overhead"}
    assert sorted(sizes) == [1, 1_000, 1_000_000, 10_000_000, 100_000_000]
    assert sizes[1].target == 1.2 and sizes[10_000_000].target == 1.02
    assert sizes[1_000_000].target is None
    for n, b in sizes.items():
        # tiny sizes: host wall time of batches of 200 calls, then one synchronize
        assert (b.batch, b.timers) == ((200, suite_module._wall_timers) if n <= 1_000
                                       else (None, None)), b.id
        assert (b.tessera, b.peer) == ("x + y", "a + b")
    assert 100_000_000 not in {b.params["shape"][0] for b in quick.values()
                               if b.name == "overhead"}

    mv = full["cuda_vs_peers/matvec[float32 4096^2 warp]"]
    assert mv.target == 1.0 and mv.params["shape"] == (4096, 4096)
    assert full["cuda_vs_peers/matvec[float32 4096^2 scalar]"].target is None  # control
    assert full["cuda_vs_peers/matvec[float32 4096^2 default]"].target is None  # cuBLAS
    assert "cuda_vs_peers/matvec[float64 8192^2 warp]" in full
    assert {b.params["shape"] for b in quick.values() if b.name == "matvec"} == {(2048, 2048)}

    sp = full["cuda_vs_peers/spmv[float32 poisson 1024^2 warp]"]
    assert sp.target == pytest.approx(1 / 1.5, abs=1e-3)
    assert sp.params["shape"] == (1024**2, 1024**2)
    assert "cuda_vs_peers/spmv[float64 poisson 2048^2 scalar]" in full

    for name in ("adam", "adamw"):
        (b,) = [b for b in full.values() if b.name == name]
        assert (b.params["tensors"], b.params["elements"]) == (10, 10_000_000)
        assert b.params["bytes_moved"] == 7 * 4 * 100_000_000
        assert b.target == 1.0 and b.peer == "topt.step()"
        assert b.timers is suite_module._torch_timers
    (ada,) = [b for b in full.values() if b.name == "adafactor"]
    assert ada.params["shape"] == (4096, 4096) and ada.params["tensors"] == 6
    assert ada.target == 0.25

    lins = {b.params["dtype"]: b for b in full.values() if b.name == "linear"}
    assert sorted(lins) == ["bfloat16", "float16", "float32"]  # the 16-bit rows beside
    for dtype, lin in lins.items():
        assert lin.id == f"cuda_vs_peers/linear[{dtype} 4096^3]"
        assert lin.params["m x k x n"] == "4096 x 4096 x 4096" and lin.target == 1.0
        assert lin.timers is suite_module._torch_timers
        assert lin.check is suite_module._linear_check
        assert lin.peer == "torch.addmm(tb, tx, tw.T) + tr"
    assert {b.params["dtype"] for b in quick.values() if b.name == "linear"} == set(lins)

    fft = full["cuda_vs_peers/fft[complex64 16384x1024]"]
    assert fft.params["shape"] == (16384, 1024)
    assert fft.target == pytest.approx(1 / 0.95, abs=1e-3)
    assert full["cuda_vs_peers/fft[complex128 16384x1024]"].target is None


def test_cuda_suite_is_unavailable_here_without_cuda(tmp_path):
    """On the host device the runner lists the suite as unavailable with the reason, runs
    nothing and exits 0, with no baseline for the device (none is needed to run)."""
    import tessera_array as xp

    host = xp.__array_namespace_info__().devices()[0]
    why = SUITE.unavailable_reason(host)
    assert why and "runs on cuda GPUs from NVIDIA" in why
    suites = {"cuda_vs_peers": SUITE}
    common = ["--device", "cpu", "--suite", "cuda_vs_peers", "--out", str(tmp_path / "r"),
              "--baseline-dir", str(tmp_path / "b"), "--no-plots", "--no-progress"]
    for argv in (common + ["--list"], common):
        args = _cli.build_parser(suites).parse_args(argv)
        out = io.StringIO()
        assert _cli.execute(args, suites=suites, stdout=out, stderr=io.StringIO()) == 0
        assert "cuda_vs_peers: unavailable" in out.getvalue(), out.getvalue()
    doc = json.loads((tmp_path / "r" / "numpy-cpu.json").read_text())
    assert doc["benchmarks"] == []
    (row,) = doc["suites"]
    assert row["status"] == "unavailable" and "cuda" in row["reason"]
    assert not (tmp_path / "b").exists()


def test_cuda_rows_report_unavailable_without_cupy(monkeypatch, tmp_path):
    """Run anyway (as on a machine whose CuPy is broken), every row's setup says CuPy is
    missing: unavailable, not an error and not a crash."""
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    benches = _benches(True)
    results = _core.run_benchmarks(benches, timer=_core.HostTimer(), settings=_core.QUICK,
                                   root=_cli.REPO_ROOT)
    assert len(results) == len(benches)
    for res in results:
        assert res["status"] == "unavailable", (res["id"], res.get("reason"))
        assert "CuPy" in res["reason"], res["reason"]


def _fake_cupy(name=b"NVIDIA H200", hip=False):
    calls = []
    runtime = types.SimpleNamespace(
        getDeviceProperties=lambda i: {"name": name} if i == 0 else {"name": b"other"},
        runtimeGetVersion=lambda: 13000, driverGetVersion=lambda: 13010, is_hip=hip)
    stream = types.SimpleNamespace(synchronize=lambda: calls.append("sync"))
    cuda = types.SimpleNamespace(runtime=runtime, get_current_stream=lambda: stream)
    return types.SimpleNamespace(cuda=cuda), calls


def test_cupy_probe_names_the_gpu_and_its_baseline(monkeypatch, tmp_path):
    """A cuda device is described from CuPy's properties of its index: an H200's results
    and baseline are cuda-nvidia-h200.json, and the suite's Needs accept it."""
    fake, _ = _fake_cupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    got = _devices._cupy_facts(types.SimpleNamespace(index=0))
    assert got == {"name": "NVIDIA H200", "vendor": "NVIDIA Corporation",
                   "platform": "CUDA runtime 13000", "driver": "13010", "is_gpu": True}
    f = _devices.DeviceFacts(device="cuda:0", backend="cuda", platform=got["platform"],
                             name=got["name"], vendor=got["vendor"], driver=got["driver"],
                             is_gpu=True, is_host=False)
    assert SUITE.needs._misfit(f) is None and f.label == "nvidia-h200"
    monkeypatch.setattr(_devices, "facts", lambda d: f)
    assert _ratchet.baseline_path(tmp_path, "cuda", "cuda:0").name == "cuda-nvidia-h200.json"
    assert _devices._PROBES["cuda"] is _devices._cupy_facts
    amd, _ = _fake_cupy(name="AMD Instinct MI300X", hip=True)
    monkeypatch.setitem(sys.modules, "cupy", amd)
    got = _devices._cupy_facts(types.SimpleNamespace(index=0))
    assert got["vendor"] == "AMD" and got["platform"].startswith("HIP")


def test_wall_timer_drains_the_stream_before_and_after(monkeypatch):
    fake, calls = _fake_cupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    timer = suite_module.CudaWallTimer()
    token = timer.start()
    assert calls == ["sync"]
    assert timer.stop(token) >= 0 and calls == ["sync", "sync"]


class _Clock:
    name = "virtual"

    def __init__(self):
        self.now = 0

    def start(self):
        return self.now

    def stop(self, token):
        return self.now - token


def _toy_doc(res) -> dict:
    """A results document around one result, as the report reads it."""
    return {"machine": {"cpu_model": "v", "cores_usable": 1, "cores_logical": 1,
                        "platform": "p"},
            "versions": {"numpy": "n", "scipy": "s", "tessera_array": "t", "python": "3"},
            "git": {}, "timing": {"method": "m", "timer": "virtual"}, "quick": False,
            "backend": "toy", "device": {"device": "cuda:0", "description": "d",
                                         "driver": "x"},
            "created": "now", "benchmarks": [res], "suites": []}


def _toy_run(tmp_path, params, t_ns, p_ns) -> dict:
    """One toy row, the tessera side t_ns and the peer p_ns a call on a virtual clock."""
    (tmp_path / "k.py").write_text("X = 1\n")
    clock = _Clock()

    def work(ns):
        clock.now += ns

    bench = _core.Benchmark(
        suite="toy", name="row", variant="v", tessera=f"work({t_ns})", peer=f"work({p_ns})",
        setup=lambda: {"work": work}, sources=("k.py",), params=params, peer_name="torch",
        check=lambda t, p, ns: None)
    settings = _core.Settings(batch_ns=1_000, rounds=5, min_rounds=5, max_seconds=60.0,
                              warmup=1)
    (res,) = _core.run_benchmarks([bench], timer=clock, settings=settings, root=tmp_path)
    assert res["status"] == "ok"
    return res


def test_bytes_moved_gives_each_side_its_bandwidth(tmp_path):
    """A row naming bytes_moved gets each side's effective TB/s (bytes / median ns / 1e3),
    shown under the suite's table."""
    res = _toy_run(tmp_path, {"bytes_moved": 2_000_000}, 400, 500)
    assert res["effective_TB_s"] == pytest.approx({"tessera": 5.0, "peer": 4.0})
    text = _report.markdown(_toy_doc(res))
    assert "effective bandwidth tessera 5.00 TB/s, torch 4.00 TB/s" in text


def test_flops_gives_each_side_its_rate(tmp_path):
    """A row naming flops gets each side's TFLOP/s (flops / median ns / 1e3), shown under
    the suite's table."""
    res = _toy_run(tmp_path, {"flops": 80_000_000}, 400, 800)
    assert res["TFLOP_s"] == pytest.approx({"tessera": 200.0, "peer": 100.0})
    assert "tessera 200 TFLOP/s, torch 100 TFLOP/s" in _report.markdown(_toy_doc(res))


def test_cuda_attention_suite_declares_the_issue_rows():
    """B=8 H=16 S=2048, D 128 and 64, bf16 and fp16, causal and not, dropout 0 and 0.1,
    forward and forward+backward, against torch, with the issue's targets and FLOPs; on
    the host it is unavailable with the reason."""
    import tessera_array as xp
    from tessera_array._devices import default_device

    suite = SUITES["cuda_attention"]
    assert suite.needs.backend == "cuda" and "torch" in suite.needs.peers
    assert "runs on cuda GPUs from NVIDIA" in suite.unavailable_reason(default_device())
    full = suite.load()(SuiteContext(xp=xp, device=default_device(), quick=False))
    quick = suite.load()(SuiteContext(xp=xp, device=default_device(), quick=True))
    assert len(full) == 2 * 2 * (4 + 2) and 0 < len(quick) < len(full)
    for b in full:
        assert b.peer_name == "torch" and b.params["shape"][:3] == (8, 16, 2048)
        assert _fingerprint.resolve_sources(b.sources, _cli.REPO_ROOT), b.id
        d = b.params["shape"][3]
        fwd = 4 * 8 * 16 * 2048 * 2048 * d / (2 if b.params["causal"] else 1)
        if b.name == "attention_fwd":
            assert b.params["flops"] == fwd
            assert b.target == pytest.approx(1.0 if b.params["dropout_p"] else 1 / 0.6)
        else:
            assert b.name == "attention_fwd_bwd" and not b.params["causal"]
            assert b.params["flops"] == 3.5 * fwd and b.target == pytest.approx(2.0)


def test_steady_memory_script_refuses_cleanly_without_cupy(tmp_path):
    """Without CuPy (or a cuda device) the script says why and exits 2, no traceback."""
    code = ("import sys; sys.modules['cupy'] = None; "
            "from benchmarks import cuda_steady_memory as m; sys.exit(m.main([]))")
    proc = subprocess.run([sys.executable, "-c", code], check=False, cwd=_ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "cuda_steady_memory:" in proc.stderr and "Traceback" not in proc.stderr


def test_steady_memory_workloads_and_verdict_on_the_host():
    """The script's workloads run through the public API (here on the CPU: each first
    solve checked against SciPy's), and its verdict fails a pool that keeps growing."""
    import tessera_array as xp
    from benchmarks import cuda_steady_memory as m

    host = xp.__array_namespace_info__().devices()[0]
    for make in (m._adam, m._krylov("cg"), m._krylov("gmres"), m._krylov("bicgstab")):
        work = make(xp, host)
        work(0)
        work(1)

    used = [0]

    class Pool:
        def used_bytes(self):
            return used[0]

        def total_bytes(self):
            return used[0] + 4096

    fake = types.SimpleNamespace(
        cuda=types.SimpleNamespace(Device=lambda: types.SimpleNamespace(synchronize=lambda: None)),
        get_default_memory_pool=lambda: Pool())
    out = io.StringIO()
    assert m._run("flat", lambda i: None, 300, fake, 1024, out)
    assert "after   300: used" in out.getvalue() and "steady" in out.getvalue()

    def leak(i):
        used[0] += 512

    out = io.StringIO()
    assert not m._run("leak", leak, 300, fake, 1024, out)
    assert "GROWS: used bytes +102,400 B" in out.getvalue()


def test_optimizer_rows_need_torch_with_cuda_on_the_same_gpu(monkeypatch):
    """The torch rows say why they cannot run: torch missing, torch without CUDA, or
    torch's device not CuPy's."""
    dev = types.SimpleNamespace(index=0)
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(_core.Unavailable, match="torch .* is not installed"):
        suite_module._torch(dev)
    names = {"torch": "NVIDIA H200"}
    cuda = types.SimpleNamespace(is_available=lambda: False,
                                 get_device_name=lambda i: names["torch"])
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(__version__="9.9",
                                                                    cuda=cuda))
    with pytest.raises(_core.Unavailable, match="torch 9.9 has no CUDA device"):
        suite_module._torch(dev)
    cuda.is_available = lambda: True
    fake, _ = _fake_cupy()
    monkeypatch.setitem(sys.modules, "cupy", fake)
    assert suite_module._torch(dev) is sys.modules["torch"]
    names["torch"] = "NVIDIA A100"
    with pytest.raises(_core.Unavailable, match="both sides must run on one GPU"):
        suite_module._torch(dev)
