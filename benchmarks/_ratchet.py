"""Baselines and the ratchet.

A baseline, ``baselines/<backend>-<device label>.json`` (``numpy-cpu.json``,
``opencl-nvidia-h200.json``: the label names the device's model, so a CPU driver's
baseline and a GPU's never share a file), stores per benchmark the
tessera/peer *ratio* (never a time: ratios survive a busier machine far better)
with the fingerprint of the sources it measured. ``--record`` writes it on
purpose; ``--ratchet`` compares a run with it:

- PASS: ratio <= baseline ratio * (1 + tolerance). Exit code 0.
- FAIL: the ratio is more than ``tolerance`` (10%) worse than the baseline and
  stays so when re-measured (``--confirm``, 2 retries; the lowest ratio counts).
  Exit code 1.
- STALE: the fingerprint differs: the sources (or the benchmark's definition)
  changed since the baseline was recorded. Exit code 1.
- MISSING: in the baseline, but this run has no ratio for it. Exit code 1.
- NEW: measured, but the baseline has no entry (record it). Exit code 0.

STALE wins over FAIL and PASS: a ratio measured on changed sources is not
compared with a number measured on the old ones, in either direction, until
someone re-records the baseline.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "BASELINE_SCHEMA",
    "DEFAULT_TOLERANCE",
    "FAILING",
    "Verdict",
    "baseline_path",
    "compare",
    "device_label",
    "load_baseline",
    "record_baseline",
]

BASELINE_SCHEMA = 1
DEFAULT_TOLERANCE = 0.10
FAILING = frozenset({"FAIL", "STALE", "MISSING"})


@dataclass(frozen=True)
class Verdict:
    id: str
    status: str  # PASS | FAIL | STALE | MISSING | NEW
    ratio: float | None
    baseline_ratio: float | None
    message: str

    def as_dict(self) -> dict:
        return {
            "id": self.id,
            "status": self.status,
            "ratio": self.ratio,
            "baseline_ratio": self.baseline_ratio,
            "message": self.message,
        }


def device_label(device) -> str:
    """``cpu``, ``nvidia-h200``: the device as it appears in a baseline's file name
    (:attr:`benchmarks._devices.DeviceFacts.label`)."""
    from ._devices import facts

    return facts(device).label


def baseline_path(directory, backend: str, device) -> Path:
    """``<directory>/<backend>-<device label>.json``."""
    return Path(directory) / f"{backend}-{device_label(device)}.json"


def load_baseline(path):
    """The baseline at ``path``, or None when there is none."""
    path = Path(path)
    if not path.exists():
        return None
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    if data.get("schema") != BASELINE_SCHEMA:
        raise ValueError(
            f"ratchet: unknown baseline schema. Expected schema={BASELINE_SCHEMA}. "
            f"Received: schema={data.get('schema')!r} in {path}"
        )
    return data


def _entry(res: dict) -> dict:
    return {
        "suite": res["suite"],
        "ratio": round(res["ratio"], 4),
        "fingerprint": res["fingerprint"],
        "definition_sha256": res["definition_sha256"],
        "files": res["files"],
        "params": res["params"],
        "tessera_expr": res["tessera_expr"],
        "peer_expr": res["peer_expr"],
        "peer": res["peer"],
    }


def record_baseline(path, run: dict, *, declared_ids, suites_run) -> dict:
    """Write the ratios of ``run`` (a results document) into the baseline at ``path``.

    Entries of other suites are kept. In the suites that ran, every declared
    benchmark measured now gets a fresh entry; one declared but not measured now
    (unavailable, error) loses its entry, and so does one no longer declared, so
    the baseline never holds a number nobody can reproduce. Returns the notes
    on what changed as ``{"recorded": [...], "dropped": {id: reason}}``.
    """
    path = Path(path)
    old = load_baseline(path) or {}
    entries = dict(old.get("benchmarks", {}))
    declared_ids = set(declared_ids)
    recorded, dropped = [], {}
    by_id = {r["id"]: r for r in run["benchmarks"]}
    for bid, res in by_id.items():
        if res.get("status") == "ok":
            entries[bid] = _entry(res)
            recorded.append(bid)
        elif bid in entries:
            del entries[bid]
            dropped[bid] = f"{res.get('status')}: {res.get('reason')}"
    for bid in list(entries):
        if entries[bid].get("suite") in suites_run and bid not in declared_ids:
            del entries[bid]
            dropped[bid] = "no longer declared by its suite"
    doc = {
        "schema": BASELINE_SCHEMA,
        "backend": run["backend"],
        "device": run["device"]["device"],
        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "quick": run["quick"],
        "machine": run["machine"],
        "versions": run["versions"],
        "git": run["git"],
        "note": (
            "ratios tessera/peer, not times; `python -m benchmarks --ratchet` fails a ratio "
            "more than the tolerance above its entry, and reports STALE when the fingerprint "
            "of the sources differs. Re-record with `python -m benchmarks --suite S --record`."
        ),
        "benchmarks": dict(sorted(entries.items())),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
        f.write("\n")
    tmp.replace(path)
    return {"recorded": recorded, "dropped": dropped}


def _stale_message(res: dict, base: dict) -> str:
    old, new = base.get("files", {}), res.get("files", {})
    changed = sorted(p for p in set(old) & set(new) if old[p] != new[p])
    added = sorted(set(new) - set(old))
    removed = sorted(set(old) - set(new))
    parts = []
    if changed:
        parts.append("changed: " + ", ".join(changed))
    if added:
        parts.append("added: " + ", ".join(added))
    if removed:
        parts.append("removed: " + ", ".join(removed))
    if base.get("definition_sha256") != res.get("definition_sha256"):
        parts.append("the benchmark's definition changed")
    what = "; ".join(parts) or "fingerprint differs"
    return (
        f"STALE: the sources this benchmark measures changed since its baseline was recorded "
        f"({what}). Its ratio {res['ratio']:.3f} is not compared with the old "
        f"{base['ratio']:.3f}; measure the change, then re-record with "
        f"`python -m benchmarks --suite {res['suite']} --record`."
    )


def compare(results, baseline, *, suites_run, tolerance: float = DEFAULT_TOLERANCE,
            declared_ids=None) -> list:
    """One :class:`Verdict` per benchmark of the suites run (and per orphaned baseline entry).

    ``declared_ids``: every id the suites run declare, before any ``--filter``; a
    baseline entry among them that was filtered out is skipped, not MISSING.
    """
    entries = (baseline or {}).get("benchmarks", {})
    verdicts = []
    seen = set()
    for res in results:
        bid = res["id"]
        seen.add(bid)
        base = entries.get(bid)
        ok = res.get("status") == "ok"
        if base is None:
            if ok:
                verdicts.append(Verdict(
                    bid, "NEW", res["ratio"], None,
                    "NEW: no baseline entry; record one with "
                    f"`python -m benchmarks --suite {res['suite']} --record`.",
                ))
            continue
        if not ok:
            verdicts.append(Verdict(
                bid, "MISSING", None, base["ratio"],
                f"MISSING: the baseline has ratio {base['ratio']:.3f} but this run measured "
                f"nothing ({res.get('status')}: {res.get('reason')}).",
            ))
            continue
        ratio, base_ratio = res["ratio"], base["ratio"]
        if res.get("fingerprint") != base.get("fingerprint"):
            verdicts.append(Verdict(bid, "STALE", ratio, base_ratio, _stale_message(res, base)))
            continue
        limit = base_ratio * (1.0 + tolerance)
        change = ratio / base_ratio - 1.0
        attempts = res.get("attempts", [])
        tries = ""
        if len(attempts) > 1:
            tries = (f"; lowest of {len(attempts)} measurements: "
                     + ", ".join(f"{a:.3f}" for a in attempts))
        if ratio > limit:
            verdicts.append(Verdict(
                bid, "FAIL", ratio, base_ratio,
                f"FAIL: ratio {ratio:.3f} is {change:+.1%} against the baseline {base_ratio:.3f} "
                f"(allowed: up to {limit:.3f}, +{tolerance:.0%}{tries}).",
            ))
        else:
            verdicts.append(Verdict(
                bid, "PASS", ratio, base_ratio,
                f"PASS: ratio {ratio:.3f}, baseline {base_ratio:.3f} ({change:+.1%}{tries}).",
            ))
    declared = seen if declared_ids is None else set(declared_ids)
    for bid, base in entries.items():
        if bid not in seen and bid not in declared and base.get("suite") in suites_run:
            verdicts.append(Verdict(
                bid, "MISSING", None, base["ratio"],
                "MISSING: in the baseline but no longer declared by its suite; re-record "
                f"with `python -m benchmarks --suite {base.get('suite')} --record`.",
            ))
    return verdicts
