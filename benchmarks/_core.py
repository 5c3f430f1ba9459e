"""The measuring core: benchmark declarations, timers, the side-by-side loop.

Method
------
A benchmark times two expressions, tessera's and its peer's (``x + y`` against
``a + b``), each compiled into its own loop the way :mod:`timeit` does it, so no
Python call layer is added to either side. After a warm-up, the batch size ``N``
is calibrated until the slower side's batch lasts ``Settings.batch_ns``; tiny
operations are thus timed as batches of ``N`` calls and divided by ``N``. Then
rounds alternate the two sides in the same process (A B, B A, A B, ...: the
order flips each round so neither side always runs second). The reported times
are the medians over rounds of the per-call times. The ratio is the median over
rounds of ``tessera batch / peer batch`` within a round: the two batches of a
round run back to back under the same load, so pairing them cancels load that
drifts between rounds (on a shared machine it came out steadier than
``tessera median / peer median``, which is kept as ``ratio_of_medians``). The
garbage collector is off while timing.

Timers
------
:class:`HostTimer` reads ``time.perf_counter_ns``. :class:`CudaEventTimer` records a
CUDA event (CuPy) before and after the batch and synchronizes on the second, so
queued device work is counted; :func:`timer_for` picks it for devices of kind
``cuda``/``rocm``. :class:`OpenclMarkerTimer` does the same with profiling markers on
an OpenCL queue, and :class:`DrainedQueueTimer` times the host's part of a batch of
launches (its queue drained, untimed, before each batch). A benchmark whose two
sides need different clocks (an OpenCL kernel against a CuPy one, each timed on its
own device) names them in ``Benchmark.timers``; the others use the run's timer.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ._fingerprint import definition_hash, file_hashes, fingerprint, resolve_sources

__all__ = [
    "FULL",
    "QUICK",
    "Benchmark",
    "CudaEventTimer",
    "DrainedQueueTimer",
    "HostTimer",
    "OpenclMarkerTimer",
    "Settings",
    "Unavailable",
    "make_loop",
    "measure",
    "run_benchmarks",
    "timer_for",
]

_MAX_BATCH = 1 << 24


class Unavailable(Exception):
    """Raised by a benchmark's setup when what it measures does not exist yet."""


@dataclass(frozen=True)
class Benchmark:
    """One side-by-side measurement.

    Attributes
    ----------
    suite, name, variant : str
        Together the benchmark's id, ``"<suite>/<name>[<variant>]"``.
    tessera, peer : str
        Python expressions timed in a loop. Their names come from ``setup()``.
    setup : callable
        ``setup() -> dict`` of the names the expressions use (arrays, modules,
        functions). Raises :class:`Unavailable` when the thing measured does not
        exist yet.
    sources : tuple of str
        Paths or globs, relative to the repository root, of the code the tessera
        side exercises. They make the fingerprint.
    params : dict
        Shown in the results (sizes, shapes, dtype).
    peer_name : str
        What the peer is (``"numpy"``).
    target : float or None
        A ratio the benchmark should stay at or below; reported, never enforced.
    (``params["bytes_moved"]``, bytes one call reads and writes, adds each side's
    effective bandwidth, ``effective_TB_s``, to the result; ``params["flops"]``, the
    floating-point operations of one call, each side's ``TFLOP_s``.)
    check : callable or None
        ``check(tessera_value, peer_value, namespace)`` raises AssertionError when
        the two sides disagree; run once before timing.
    settle_s : float
        Seconds idle before each timed batch of either side (0: none), so that one
        side's leftover threads (OpenBLAS's spinning workers) do not run into the
        other side's batch. Part of the definition.
    prime : bool
        With ``settle_s``: after the pause, one untimed call of the side's own before
        its timed batch, so each side is timed in its own steady state (NumPy's BLAS
        threads awake for NumPy's batch, asleep for the other side's). Part of the
        definition.
    batch : int or None
        Calls per timed batch; None calibrates it (``Settings.batch_ns``). ``1`` times
        each call on its own, as device-timed single launches are. Part of the
        definition.
    timers : callable or None
        ``timers(namespace) -> (tessera timer, peer timer)``, called after ``setup()``;
        None: the run's timer for both sides. Its ``__name__`` is part of the
        definition.
    """

    suite: str
    name: str
    variant: str
    tessera: str
    peer: str
    setup: Callable[[], dict]
    sources: tuple
    params: dict = field(default_factory=dict)
    peer_name: str = "numpy"
    target: float | None = None
    check: Callable | None = None
    settle_s: float = 0.0
    prime: bool = False
    batch: int | None = None
    timers: Callable[[dict], tuple] | None = None

    @property
    def id(self) -> str:
        return f"{self.suite}/{self.name}[{self.variant}]"

    def definition(self) -> dict:
        """What, besides the sources, decides what is measured (hashed into the fingerprint)."""
        return {
            "id": self.id,
            "tessera": self.tessera,
            "peer": self.peer,
            "peer_name": self.peer_name,
            "params": self.params,
            **({"settle_s": self.settle_s} if self.settle_s else {}),
            **({"prime": True} if self.prime else {}),
            **({"batch": self.batch} if self.batch is not None else {}),
            **({"timers": getattr(self.timers, "__name__", repr(self.timers))}
               if self.timers is not None else {}),
        }


@dataclass(frozen=True)
class Settings:
    """How long and how often to time.

    batch_ns: calibrate ``N`` until one batch lasts at least this long.
    rounds: timed rounds (one tessera batch and one peer batch each).
    min_rounds: rounds always run, even past ``max_seconds``.
    max_seconds: wall-clock budget of one benchmark's timed rounds.
    warmup: untimed calls of each side before calibrating.
    """

    batch_ns: int
    rounds: int
    min_rounds: int
    max_seconds: float
    warmup: int

    def as_dict(self) -> dict:
        return {
            "batch_ns": self.batch_ns,
            "rounds": self.rounds,
            "min_rounds": self.min_rounds,
            "max_seconds": self.max_seconds,
            "warmup": self.warmup,
        }


FULL = Settings(batch_ns=500_000, rounds=201, min_rounds=11, max_seconds=4.0, warmup=3)
QUICK = Settings(batch_ns=250_000, rounds=31, min_rounds=5, max_seconds=0.4, warmup=1)


class HostTimer:
    """Wall time on the host, ``time.perf_counter_ns``."""

    name = "perf_counter_ns"
    start = staticmethod(time.perf_counter_ns)

    @staticmethod
    def stop(token: int) -> int:
        return time.perf_counter_ns() - token


class CudaEventTimer:
    """Device time between two CUDA events (CuPy), synchronized at the end of a batch.

    When the device is busy from the start of a batch to its end, the elapsed event
    time is the batch's wall time on the device; host-side launch overhead shows up
    as idle gaps between kernels, so tiny ops are still charged for it.
    """

    name = "cuda-events"

    def __init__(self):
        import cupy

        self._cupy = cupy
        self._begin = cupy.cuda.Event()
        self._end = cupy.cuda.Event()

    def start(self):
        self._begin.record()

    def stop(self, token) -> int:
        self._end.record()
        # sync: waits for the batch's device work to finish.
        self._end.synchronize()
        return int(self._cupy.cuda.get_elapsed_time(self._begin, self._end) * 1e6)


class OpenclMarkerTimer:
    """Device time between two profiling markers on an OpenCL ``queue`` (made with
    ``PROFILING_ENABLE``), finished at the end of a batch: from the end of the first
    marker (the queue empty before the batch) to the end of the last command, launch
    gaps and the Python of the calls included, as :class:`CudaEventTimer` counts."""

    name = "opencl-markers"

    def __init__(self, queue):
        import pyopencl as cl

        self._cl = cl
        self._queue = queue

    def start(self):
        # sync: an empty queue first, so the batch's span starts at its first command.
        self._queue.finish()
        return self._cl.enqueue_marker(self._queue)

    def stop(self, token) -> int:
        end = self._cl.enqueue_marker(self._queue)
        # sync: waits for the batch's device work to finish.
        self._queue.finish()
        return int(end.profile.end - token.profile.end)


class DrainedQueueTimer:
    """The host's share of a batch of launches: ``queue.finish()`` (untimed) before the
    batch, then thread CPU time (``time.thread_time_ns``) of the calls alone, so the
    device work they queue, and other processes on a shared machine, are not counted."""

    name = "thread-cpu, queue drained"

    def __init__(self, queue):
        self._queue = queue

    def start(self) -> int:
        # sync: nothing of an earlier batch still queued.
        self._queue.finish()
        return time.thread_time_ns()

    @staticmethod
    def stop(token: int) -> int:
        return time.thread_time_ns() - token


def timer_for(device):
    """The timer for ``device``: CUDA events on CUDA/ROCm GPUs, ``perf_counter_ns`` elsewhere."""
    if getattr(device, "kind", None) in ("cuda", "rocm"):
        return CudaEventTimer()
    return HostTimer()


def make_loop(expr: str, names, label: str):
    """Compile ``expr`` into ``loop(n, start, stop, namespace) -> elapsed ns``.

    The names are bound as locals before the clock starts, as timeit binds its
    setup, so the loop costs one ``for`` iteration per call and nothing else.
    """
    if "\n" in expr or not expr.strip():
        raise ValueError(f"make_loop: expr must be one line. Received: expr={expr!r}")
    compile(expr, label, "eval")  # a syntax error names the benchmark
    for n in names:
        if not n.isidentifier() or n.startswith("_"):
            raise ValueError(
                f"make_loop: setup names must be identifiers not starting with '_'. "
                f"Received: {n!r} in {label}"
            )
    lines = ["def _loop(_n, _start, _stop, _ns):"]
    lines += [f"    {n} = _ns[{n!r}]" for n in names]
    lines += [
        "    _tok = _start()",
        "    for _ in range(_n):",
        f"        {expr}",
        "    return _stop(_tok)",
    ]
    scope = {}
    exec(compile("\n".join(lines), label, "exec"), scope)  # noqa: S102 (timeit's method)
    return scope["_loop"]


def _quartiles(values):
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def measure(tessera_loop, peer_loop, namespace: dict, timer, settings: Settings,
            settle_s: float = 0.0, *, peer_timer=None, batch: int | None = None,
            prime: bool = False) -> dict:
    """Time two compiled loops side by side; medians per call, in ns, and their ratio.

    ``settle_s``, ``prime``, ``batch``: as in :class:`Benchmark`. ``peer_timer``: the
    peer's clock where it differs from the tessera side's ``timer``."""
    sides = ((tessera_loop, timer), (peer_loop, peer_timer or timer))

    def run(side, n):
        loop, clock = side
        if settle_s:
            time.sleep(settle_s)
            if prime:
                loop(1, clock.start, clock.stop, namespace)
        return loop(n, clock.start, clock.stop, namespace)

    tessera, peer = sides
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(settings.warmup):
            run(tessera, 1)
            run(peer, 1)
        n = 1 if batch is None else batch
        while batch is None:
            t = max(run(tessera, n), run(peer, n))
            if t >= settings.batch_ns or n >= _MAX_BATCH:
                break
            grow = settings.batch_ns / max(t, 1) * 1.1
            n = min(_MAX_BATCH, max(2 * n, min(100 * n, math.ceil(n * grow))))
        tessera_ns, peer_ns, paired = [], [], []
        t0 = time.perf_counter()
        for r in range(settings.rounds):
            if r % 2 == 0:
                a = run(tessera, n)
                b = run(peer, n)
            else:
                b = run(peer, n)
                a = run(tessera, n)
            tessera_ns.append(a / n)
            peer_ns.append(b / n)
            paired.append(a / b if b > 0 else math.inf)
            if r + 1 >= settings.min_rounds and time.perf_counter() - t0 > settings.max_seconds:
                break
    finally:
        if gc_was_enabled:
            gc.enable()
    t_med = statistics.median(tessera_ns)
    p_med = statistics.median(peer_ns)
    return {
        "tessera_median_ns": t_med,
        "peer_median_ns": p_med,
        "ratio": statistics.median(paired),
        "ratio_of_medians": t_med / p_med if p_med > 0 else math.inf,
        "tessera_quartiles_ns": list(_quartiles(tessera_ns)),
        "peer_quartiles_ns": list(_quartiles(peer_ns)),
        "batch": n,
        "rounds": len(tessera_ns),
    }


def _default_check(t, p, namespace):
    import numpy as np

    ta, pa = np.asarray(t), np.asarray(p)
    if ta.shape != pa.shape or ta.dtype != pa.dtype:
        raise AssertionError(
            f"shape/dtype differ: tessera {ta.shape} {ta.dtype}, peer {pa.shape} {pa.dtype}"
        )
    np.testing.assert_allclose(ta, pa, rtol=1e-12, atol=0)


def _source_info(bench: Benchmark, root, cache: dict) -> dict:
    key = tuple(bench.sources)
    if key not in cache:
        paths = resolve_sources(bench.sources, root)
        cache[key] = file_hashes(paths, root)
    files = cache[key]
    definition = definition_hash(bench.definition())
    return {
        "fingerprint": fingerprint(files, definition),
        "definition_sha256": definition,
        "files": dict(files),
    }


def run_benchmarks(benchmarks, *, timer, settings: Settings, root, progress=None) -> list:
    """Run each benchmark; one result dict per benchmark, in order.

    ``status`` is ``"ok"`` (timed), ``"unavailable"`` (what it measures does not
    exist yet or raises NotImplementedError: reported, not a failure) or
    ``"error"`` (setup failed, the two sides disagree, the fingerprint could not
    be taken, or the sources changed on disk while the run was under way).

    Every fingerprint is taken before the first timing and again after the last:
    a benchmark whose files changed in between measured code that neither
    fingerprint describes, so it is not reported as ``ok``.
    """
    results = []
    cache = {}
    for bench in benchmarks:
        res = {
            "id": bench.id,
            "suite": bench.suite,
            "name": bench.name,
            "variant": bench.variant,
            "params": bench.params,
            "tessera_expr": bench.tessera,
            "peer_expr": bench.peer,
            "peer": bench.peer_name,
            "target": bench.target,
            "sources": list(bench.sources),
        }
        results.append(res)
        try:
            res.update(_source_info(bench, root, cache))
        except (OSError, ValueError) as err:
            res.update(status="error", reason=f"fingerprint: {err}")
    for bench, res in zip(benchmarks, results):
        if progress is not None:
            progress.step(bench.id)
        if res.get("status") == "error":
            continue
        _run_one(bench, res, timer, settings)
    after = {}
    for bench, res in zip(benchmarks, results):
        if "fingerprint" not in res:
            continue
        try:
            now = _source_info(bench, root, after)
        except (OSError, ValueError) as err:
            now = {"fingerprint": None, "files": {}, "error": str(err)}
        if now["fingerprint"] != res["fingerprint"]:
            changed = sorted(
                p for p in set(res["files"]) | set(now["files"])
                if res["files"].get(p) != now["files"].get(p)
            )
            res.update(
                status="error",
                reason="the sources changed on disk while the run was under way ("
                + (", ".join(changed) or now.get("error", "?"))
                + "); the timing cannot be attributed to either version: run again",
            )
    return results


def _run_one(bench: Benchmark, res: dict, timer, settings: Settings) -> None:
    """Set up, check and time one benchmark, writing into ``res``."""
    try:
        namespace = bench.setup()
    except Unavailable as err:
        res.update(status="unavailable", reason=str(err))
        return
    except Exception as err:  # reported in the results, never hidden
        res.update(status="error", reason=f"setup raised {type(err).__name__}: {err}")
        return
    try:
        t_loop = make_loop(bench.tessera, sorted(namespace), f"<{bench.id} tessera>")
        p_loop = make_loop(bench.peer, sorted(namespace), f"<{bench.id} peer>")
    except (SyntaxError, ValueError) as err:
        res.update(status="error", reason=f"{type(err).__name__}: {err}")
        return
    try:
        t_val = eval(bench.tessera, {}, dict(namespace))
    except NotImplementedError as err:
        res.update(status="unavailable", reason=f"tessera side: NotImplementedError: {err}")
        return
    except Exception as err:
        res.update(status="error", reason=f"tessera side raised {type(err).__name__}: {err}")
        return
    try:
        p_val = eval(bench.peer, {}, dict(namespace))
        (bench.check or _default_check)(t_val, p_val, namespace)
    except Exception as err:
        res.update(status="error", reason=f"check failed: {type(err).__name__}: {err}")
        return
    del t_val, p_val
    t_timer = p_timer = timer
    if bench.timers is not None:
        try:
            t_timer, p_timer = bench.timers(namespace)
        except Unavailable as err:
            res.update(status="unavailable", reason=str(err))
            return
        except Exception as err:
            res.update(status="error", reason=f"timers raised {type(err).__name__}: {err}")
            return
    res["timers"] = {side: getattr(t, "name", type(t).__name__)
                     for side, t in (("tessera", t_timer), ("peer", p_timer))}
    res.update(measure(t_loop, p_loop, namespace, t_timer, settings, bench.settle_s,
                       peer_timer=p_timer, batch=bench.batch, prime=bench.prime))
    res["status"] = "ok"
    moved = bench.params.get("bytes_moved")
    if moved:  # bytes / ns = GB/s
        res["effective_TB_s"] = {side: moved / res[f"{side}_median_ns"] / 1e3
                                 for side in ("tessera", "peer")}
    flops = bench.params.get("flops")
    if flops:  # flop / ns = GFLOP/s
        res["TFLOP_s"] = {side: flops / res[f"{side}_median_ns"] / 1e3
                          for side in ("tessera", "peer")}
    target = bench.target
    res["meets_target"] = None if target is None else res["ratio"] <= target
