"""``python -m benchmarks``: run suites, write results, record or ratchet baselines."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from . import _core, _machine, _ratchet, _report
from ._progress import Progress
from ._suites import SUITES, SuiteContext

__all__ = ["REPO_ROOT", "build_parser", "execute", "main"]

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO_ROOT / "benchmarks" / "results"
DEFAULT_BASELINES = REPO_ROOT / "benchmarks" / "baselines"

# Exit codes.
OK, FAILED, USAGE = 0, 1, 2


def build_parser(suites=None) -> argparse.ArgumentParser:
    suites = SUITES if suites is None else suites
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Side-by-side benchmarks of tessera_array against its peers, with "
        "fingerprinted baselines and a ratchet.",
    )
    p.add_argument("--backend", default=None,
                   help="backend to measure (default: the default device's backend)")
    p.add_argument("--device", default=None,
                   help="device, e.g. cpu or cuda:0 (default: the backend's first device)")
    p.add_argument("--suite", default="all", choices=[*suites, "all"],
                   help="suite to run (default: all that exist)")
    p.add_argument("--quick", action="store_true",
                   help="short batches and few rounds: a smoke run, noisier ratios")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--record", action="store_true",
                      help="write the measured ratios into the baseline on purpose")
    mode.add_argument("--ratchet", action="store_true",
                      help="compare with the baseline; exit 1 on FAIL, STALE or MISSING")
    p.add_argument("--out", default=None, help=f"results folder (default: {DEFAULT_OUT})")
    p.add_argument("--baseline-dir", default=None,
                   help=f"baselines folder (default: {DEFAULT_BASELINES})")
    p.add_argument("--tolerance", type=float, default=_ratchet.DEFAULT_TOLERANCE,
                   help="ratchet: how much worse a ratio may get (default 0.10 = 10%%)")
    p.add_argument("--confirm", type=int, default=2,
                   help="ratchet: re-measure a failing benchmark up to this many times; the "
                   "lowest ratio counts (default 2)")
    p.add_argument("--filter", default=None,
                   help="run only benchmarks whose id contains this text")
    p.add_argument("--list", action="store_true", help="list suites and benchmarks, run nothing")
    p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    return p


def _resolve_device(backend_name, device_text):
    """``(xp, device)`` or raise SystemExit-worthy ValueError with the reason."""
    import tessera_array as xp
    from tessera_array import _discovery
    from tessera_array._devices import as_device

    if device_text is not None:
        device = as_device(device_text, "benchmarks")
        if backend_name is not None and device._backend.name != backend_name:
            raise ValueError(
                f"benchmarks: device {device} belongs to backend {device._backend.name!r}. "
                f"Received: --backend {backend_name} --device {device_text}"
            )
        return xp, device
    if backend_name is None:
        from tessera_array._devices import default_device

        return xp, default_device()
    loaded = _discovery.loaded_backends()
    if backend_name not in loaded:
        reasons = {name: reason for name, _obj, reason in _discovery.backend_status()}
        why = reasons.get(backend_name, "no such backend")
        raise ValueError(
            f"benchmarks: backend {backend_name!r} is not available: {why}. "
            f"Loaded: {', '.join(loaded) or 'none'}"
        )
    return xp, loaded[backend_name].devices()[0]


def execute(args, *, suites=None, root=None, timer=None, settings=None,
            stdout=None, stderr=None) -> int:
    """Run what ``args`` (parsed options) ask for; returns the exit code.

    ``suites``, ``root``, ``timer`` and ``settings`` default to the real table,
    the repository, the device's timer and QUICK/FULL; tests pass their own.
    """
    suites = SUITES if suites is None else suites
    root = REPO_ROOT if root is None else Path(root)
    stdout = sys.stdout if stdout is None else stdout
    stderr = sys.stderr if stderr is None else stderr

    def say(text=""):
        print(text, file=stdout)

    try:
        xp, device = _resolve_device(args.backend, args.device)
    except (ValueError, RuntimeError) as err:
        print(str(err), file=stderr)
        return USAGE
    backend = device._backend.name
    ctx = SuiteContext(xp=xp, device=device, quick=args.quick)

    # (a suite that starts a cluster of processes runs only when named)
    names = [n for n, s in suites.items() if not s.on_request] if args.suite == "all" \
        else [args.suite]
    suite_rows, benches = [], []
    for name in names:
        suite = suites[name]
        reason = suite.not_implemented_reason()
        if reason is not None:
            suite_rows.append({"name": name, "status": "not yet implemented", "reason": reason})
            continue
        try:
            reason = suite.unavailable_reason(device)
        except Exception as err:  # a device probe that breaks is reported, and fails the run
            suite_rows.append({"name": name, "status": "error",
                               "reason": f"error while checking its device: "
                                         f"{type(err).__name__}: {err}"})
            continue
        if reason is not None:
            suite_rows.append({"name": name, "status": "unavailable", "reason": reason,
                               "description": suite.description})
            continue
        try:
            declared = list(suite.load()(ctx))
        except Exception as err:  # a broken suite is reported, and fails the run
            suite_rows.append({"name": name, "status": "error",
                               "reason": f"error while declaring benchmarks: "
                                         f"{type(err).__name__}: {err}"})
            continue
        suite_rows.append({"name": name, "status": "ran", "reason": None,
                           "description": suite.description, "declared": len(declared)})
        benches.extend(declared)
    declared_ids = [b.id for b in benches]
    if args.filter:
        benches = [b for b in benches if args.filter in b.id]

    if args.list:
        for row in suite_rows:
            why = f" ({row['reason']})" if row["reason"] else ""
            say(f"{row['name']}: {row['status']}{why}")
        for b in benches:
            target = "" if b.target is None else f"  target <= {b.target}"
            say(f"  {b.id}: {b.tessera}  vs  {b.peer_name}: {b.peer}{target}")
        return OK
    for row in suite_rows:
        if row["status"] != "ran":
            say(f"suite {row['name']}: {row['status']}: {row['reason']}")

    if timer is None:
        try:
            timer = _core.timer_for(device)
        except ImportError as err:
            print(f"benchmarks: cannot time device {device}: {err}", file=stderr)
            return USAGE
    if settings is None:
        settings = _core.QUICK if args.quick else _core.FULL
    progress = Progress(len(benches), stream=stderr, enabled=not args.no_progress)
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    t0 = time.perf_counter()
    results = _core.run_benchmarks(benches, timer=timer, settings=settings, root=root,
                                   progress=progress)
    progress.close()
    for row in suite_rows:
        if row["status"] != "ran" or getattr(suites[row["name"]], "info", None) is None:
            continue
        try:
            info = suites[row["name"]].info(ctx)
        except Exception as err:  # reported beside the suite; the ratios still stand
            info = {"error": f"{type(err).__name__}: {err}"}
        if info:
            row["info"] = info

    dev_info = _machine.device_info(device)
    doc = {
        "schema": _report.RESULTS_SCHEMA,
        "created": started,
        "wall_seconds": round(time.perf_counter() - t0, 2),
        "command": ["python", "-m", "benchmarks", *getattr(args, "argv", [])],
        "backend": backend,
        "device": dev_info,
        "quick": bool(args.quick),
        "machine": _machine.machine_info(),
        "versions": _machine.library_versions(),
        "git": _machine.git_info(root),
        "timing": {
            "method": "tessera and peer alternate in the same process (A B, B A, ...); "
            "batches of N calls after warm-up; times: medians of per-call times over rounds; "
            "ratio: median over rounds of the tessera/peer batch-time ratio",
            "timer": getattr(timer, "name", type(timer).__name__),
            "settings": settings.as_dict(),
        },
        "suites": suite_rows,
        "benchmarks": results,
    }
    suites_ran = {r["name"] for r in suite_rows if r["status"] == "ran"}
    exit_code = OK
    if any(r["status"] == "error" for r in suite_rows):
        exit_code = FAILED
    errors = [r for r in results if r.get("status") == "error"]
    if errors:
        exit_code = FAILED

    base_dir = DEFAULT_BASELINES if args.baseline_dir is None else Path(args.baseline_dir)
    base_path = _ratchet.baseline_path(base_dir, backend, device)
    if args.ratchet:
        try:
            baseline = _ratchet.load_baseline(base_path)
        except (ValueError, OSError) as err:
            print(str(err), file=stderr)
            return USAGE
        if baseline is None:
            print(f"ratchet: no baseline at {base_path}; record one with "
                  f"`python -m benchmarks --suite {args.suite} --record`.", file=stderr)
            exit_code = USAGE
        else:
            verdicts = _ratchet.compare(results, baseline, suites_run=suites_ran,
                                        tolerance=args.tolerance, declared_ids=declared_ids)
            for _ in range(max(0, args.confirm)):
                failed = {vd.id for vd in verdicts if vd.status == "FAIL"}
                if not failed:
                    break
                again = _core.run_benchmarks(
                    [b for b in benches if b.id in failed], timer=timer, settings=settings,
                    root=root, progress=Progress(len(failed), stream=stderr,
                                                 enabled=not args.no_progress),
                )
                _keep_lowest(results, again)
                verdicts = _ratchet.compare(results, baseline, suites_run=suites_ran,
                                            tolerance=args.tolerance,
                                            declared_ids=declared_ids)
            failing = [vd for vd in verdicts if vd.status in _ratchet.FAILING]
            notes = []
            bm = baseline.get("machine", {})
            here = doc["machine"]
            if (bm.get("cpu_model"), bm.get("cores_usable")) != (
                    here["cpu_model"], here["cores_usable"]):
                notes.append(
                    f"the baseline was recorded on {bm.get('cpu_model')} with "
                    f"{bm.get('cores_usable')} usable cores; this run is on "
                    f"{here['cpu_model']} with {here['cores_usable']}: ratios may not transfer."
                )
            if baseline.get("quick") and not args.quick:
                notes.append("the baseline was recorded from a --quick run (noisier).")
            doc["ratchet"] = {
                "baseline": str(base_path),
                "tolerance": args.tolerance,
                "overall": "FAIL" if failing else "PASS",
                "verdicts": [vd.as_dict() for vd in verdicts],
                "notes": notes,
            }
            if failing:
                exit_code = FAILED

    out_dir = DEFAULT_OUT if args.out is None else Path(args.out)
    stem = f"{backend}-{_ratchet.device_label(device)}"
    if args.no_plots:
        plots, plot_note = [], "plots skipped (--no-plots)"
    else:
        plots, plot_note = _report.write_plots(doc, out_dir, stem)
    doc["plots"] = plots
    doc["plot_note"] = plot_note
    json_path = out_dir / f"{stem}.json"
    md_path = out_dir / f"{stem}.md"
    _report.write_json(doc, json_path)
    table = _report.markdown(doc)
    md_path.parent.mkdir(parents=True, exist_ok=True)
    md_path.write_text(table + "\n", encoding="utf-8")

    say(table)
    if plot_note:
        say(plot_note)
    say(f"results: {json_path}")
    say(f"table:   {md_path}")
    for p in plots:
        say(f"plot:    {p}")

    if args.record and errors:
        say(f"baseline: NOT written: {len(errors)} benchmark(s) errored in this run, and a "
            f"baseline is only recorded from a clean one; fix them or run again.")
    elif args.record:
        if args.quick:
            say("note: recording a --quick run (fewer rounds: a noisier baseline).")
        notes = _ratchet.record_baseline(base_path, doc, declared_ids=declared_ids,
                                         suites_run=suites_ran)
        say(f"baseline: recorded {len(notes['recorded'])} ratios in {base_path}")
        for bid, why in notes["dropped"].items():
            say(f"baseline: dropped {bid} ({why})")
    if "ratchet" in doc:
        r = doc["ratchet"]
        counts = {}
        for vd in r["verdicts"]:
            counts[vd["status"]] = counts.get(vd["status"], 0) + 1
        summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        say(f"ratchet: {r['overall']} ({summary}) against {base_path}")
        for vd in r["verdicts"]:
            if vd["status"] != "PASS":
                say(f"  {vd['id']}: {vd['message']}")
    if errors:
        say(f"errors: {len(errors)} benchmark(s) could not be measured; reasons under "
            f"'Not measured' above and in {json_path}")
    return exit_code


def _keep_lowest(results: list, again: list) -> None:
    """Fold re-measurements into ``results``: each keeps its lowest-ratio attempt.

    A FAIL is confirmed by measuring again: noise on a shared machine makes a
    single ratio wrong by several percent now and then, while a real regression
    shows in every attempt. ``attempts`` lists every ratio measured.
    """
    by_id = {r["id"]: r for r in results}
    for new in again:
        old = by_id.get(new["id"])
        if old is None or old.get("status") != "ok" or new.get("status") != "ok":
            continue
        attempts = old.get("attempts", [old["ratio"]]) + [new["ratio"]]
        if new["ratio"] < old["ratio"]:
            old.update(new)
        old["attempts"] = attempts


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)
    args.argv = argv
    return execute(args)
