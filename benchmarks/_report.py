"""Writing results: the JSON document, the Markdown table, the PNG plots."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ._machine import simd_text

__all__ = ["format_ns", "markdown", "write_json", "write_plots"]

RESULTS_SCHEMA = 1
_NICE_TICKS = (0.25, 0.5, 0.75, 1, 1.25, 1.5, 2, 3, 5, 10, 20, 50, 100, 200, 500, 1000)


def format_ns(ns) -> str:
    """``812 ns``, ``12.3 µs``, ``4.56 ms``, ``1.23 s``."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "—"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            v = ns / scale
            return f"{v:.3g} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return f"{ns:.3g} ns" if ns < 100 else f"{ns:.0f} ns"


def _shape_text(params: dict) -> str:
    shape = params.get("shape")
    if shape is None:
        # The label is already the expression column.
        return ", ".join(f"{k}={v}" for k, v in params.items() if k != "label")
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _target_cells(res: dict):
    target = res.get("target")
    if target is None:
        return "—", "—"
    if res.get("status") != "ok":
        return f"≤ {target:.2f}", "—"
    return f"≤ {target:.2f}", "yes" if res["ratio"] <= target else "**no**"


def markdown(doc: dict) -> str:
    """The run as Markdown: a header, one table per suite, skipped suites, ratchet verdicts."""
    m, v, g = doc["machine"], doc["versions"], doc["git"]
    commit = (g.get("commit") or "unknown")[:12] + (" (local changes)" if g.get("dirty") else "")
    machine = (
        f"- machine: {m['cpu_model']}, {m['cores_usable']} usable of {m['cores_logical']} "
        f"cores, {m['platform']}, load average {m.get('load_average')}; NumPy SIMD "
        f"{simd_text(m.get('numpy_simd'))}"
    )
    versions = (
        f"- versions: numpy {v['numpy']}, scipy {v['scipy']}, tessera_array "
        f"{v['tessera_array']}, Python {v['python']}, BLAS {v.get('blas')}"
    )
    timing = (
        f"- timing: {doc['timing']['method']} ({doc['timing']['timer']}; "
        f"{'quick' if doc['quick'] else 'full'} settings)"
    )
    legend = (
        "tessera, peer: median time per call. ratio: median over rounds of tessera time / "
        "peer time measured back to back (lower is better; 1.00 = no overhead). target: the "
        "ratio the benchmark should stay at or below (reported, not enforced)."
    )
    own_timers = {}
    for res in doc["benchmarks"]:
        t = res.get("timers")
        if t and set(t.values()) != {doc["timing"]["timer"]}:
            own_timers.setdefault(res["suite"], set()).add((t["tessera"], t["peer"]))
    lines = [
        f"# tessera_array benchmarks: {doc['backend']} backend on {doc['device']['device']}",
        "",
        machine,
        f"- device: {doc['device']['description']}; driver: {doc['device']['driver']}",
        versions,
        f"- commit: {commit}; run at {doc['created']}",
        timing,
        *(f"- suite {suite} times with its own clocks: "
          + "; ".join(f"tessera {a}, peer {b}" for a, b in sorted(pairs))
          for suite, pairs in own_timers.items()),
        "",
        legend,
        "",
    ]
    suites = {}
    for res in doc["benchmarks"]:
        suites.setdefault(res["suite"], []).append(res)
    for name, results in suites.items():
        peers = {res.get("peer", "peer") for res in results}
        # One peer for the whole suite: name it in the header; several (numpy.fft and
        # scipy.fft, say): a peer column names each row's own.
        one_peer = peers.pop() if len(peers) == 1 else None
        lines += [
            f"## {name}",
            "",
            (f"| benchmark | expression | shape | tessera | {one_peer} | ratio | target | meets |"
             if one_peer else
             "| benchmark | expression | shape | peer | tessera | peer time | ratio | target "
             "| meets |"),
            ("|---|---|---|---:|---:|---:|---:|:---:|" if one_peer else
             "|---|---|---|---|---:|---:|---:|---:|:---:|"),
        ]
        notes, figures = [], []
        for res in results:
            target, meets = _target_cells(res)
            label = res["params"].get("label", res["tessera_expr"])
            if res.get("status") == "ok":
                cells = [
                    format_ns(res["tessera_median_ns"]),
                    format_ns(res["peer_median_ns"]),
                    f"{res['ratio']:.2f}",
                ]
                bw = res.get("effective_TB_s")
                if bw:
                    figures.append(f"- `{res['id']}`: effective bandwidth tessera "
                                 f"{bw['tessera']:.2f} TB/s, {res.get('peer', 'peer')} "
                                 f"{bw['peer']:.2f} TB/s ({res['params']['bytes_moved']:.3g} "
                                 f"bytes per call)")
                rate = res.get("TFLOP_s")
                if rate:
                    figures.append(f"- `{res['id']}`: tessera {rate['tessera']:.0f} TFLOP/s, "
                                 f"{res.get('peer', 'peer')} {rate['peer']:.0f} TFLOP/s "
                                 f"({res['params']['flops']:.3g} FLOP per call)")
            else:
                cells = ["—", "—", res.get("status", "?")]
                notes.append(f"- `{res['id']}`: {res.get('status')}: {res.get('reason')}")
            if not one_peer:
                cells.insert(0, res.get("peer", "peer"))
            lines.append(
                f"| {res['name']} | `{label}` | {_shape_text(res['params'])} | "
                + " | ".join(cells)
                + f" | {target} | {meets} |"
            )
        if figures:
            lines += ["", "Bandwidth:", ""] + figures
        if notes:
            lines += ["", "Not measured:", ""] + notes
        lines.append("")
    notes = [s for s in doc["suites"] if s.get("info")]
    if notes:
        lines += ["## Suite notes", ""]
        for s in notes:
            for key, value in s["info"].items():
                lines.append(f"- {s['name']}, {key}: {_info_text(value)}")
        lines.append("")
    skipped = [s for s in doc["suites"] if s["status"] != "ran"]
    if skipped:
        lines += ["## Suites not run", ""]
        lines += [f"- {s['name']}: {s['status']}: {s['reason']}" for s in skipped]
        lines.append("")
    ratchet = doc.get("ratchet")
    if ratchet is not None:
        lines += [
            f"## Ratchet against `{ratchet['baseline']}`",
            "",
            f"Tolerance {ratchet['tolerance']:.0%}; overall: **{ratchet['overall']}**.",
            "",
            "| benchmark | status | ratio | baseline | message |",
            "|---|---|---:|---:|---|",
        ]
        for vd in ratchet["verdicts"]:
            r = "—" if vd["ratio"] is None else f"{vd['ratio']:.3f}"
            b = "—" if vd["baseline_ratio"] is None else f"{vd['baseline_ratio']:.3f}"
            lines.append(f"| {vd['id']} | {vd['status']} | {r} | {b} | {vd['message']} |")
        for note in ratchet.get("notes", []):
            lines += ["", f"Note: {note}"]
        lines.append("")
    return "\n".join(lines)


def _info_text(value) -> str:
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_info_text(v)}" for k, v in value.items())
    if isinstance(value, float):
        return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(value)


def write_json(doc: dict, path) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, allow_nan=True)
        f.write("\n")


def write_plots(doc: dict, out_dir, stem: str):
    """One PNG per suite of the tessera/peer ratios; ``(paths, note)``.

    Without matplotlib the note says so and no plot is written (the JSON and
    the table are).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    except ImportError:
        return [], "matplotlib is not installed (pip install -e .[bench]); plots skipped"
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    suites = {}
    for res in doc["benchmarks"]:
        if res.get("status") == "ok":
            suites.setdefault(res["suite"], []).append(res)
    paths = []
    for suite, results in suites.items():
        names = list(dict.fromkeys(r["name"] for r in results))
        variants = list(dict.fromkeys(r["variant"] for r in results))
        by_key = {(r["name"], r["variant"]): r for r in results}
        width = 0.8 / max(1, len(variants))
        fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(names) + 2), 4.2))
        colors = plt.get_cmap("viridis")
        for j, var in enumerate(variants):
            xs, ys, tx, ty = [], [], [], []
            for i, name in enumerate(names):
                r = by_key.get((name, var))
                if r is None:
                    continue
                x = i + (j - (len(variants) - 1) / 2) * width
                xs.append(x)
                ys.append(r["ratio"])
                if r.get("target") is not None:
                    tx.append(x)
                    ty.append(r["target"])
            ax.bar(xs, ys, width=width * 0.95, label=var,
                   color=colors(j / max(1, len(variants) - 1) * 0.85))
            if tx:
                ax.scatter(tx, ty, marker="_", s=220, color="crimson", zorder=3,
                           label="target" if j == 0 else None)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        ratios = [r["ratio"] for r in results] + [r["target"] for r in results if r.get("target")]
        lo, hi = min(ratios + [1.0]), max(ratios + [1.0])
        ax.set_ylim(lo / 1.25, hi * 1.35)
        ax.yaxis.set_major_locator(FixedLocator(
            [t for t in _NICE_TICKS if lo / 1.25 <= t <= hi * 1.35]))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.yaxis.set_minor_locator(NullLocator())
        for container in ax.containers:
            if hasattr(container, "datavalues"):
                ax.bar_label(container, fmt="%.2f", fontsize=6, padding=1)
        ax.set_xticks(range(len(names)))
        labels = [by_key[(n, next(v for v in variants if (n, v) in by_key))]["params"]
                  .get("label", n) for n in names]
        ax.set_xticklabels(labels, rotation=20, ha="right", fontsize=8)
        peers = sorted({res.get("peer", "peer") for res in results})
        peer = peers[0] if len(peers) == 1 else "peer (see the table)"
        ax.set_ylabel(f"time ratio tessera / {peer} (log)")
        ax.set_title(f"{suite}: tessera_array / {', '.join(peers)}, {doc['backend']} backend on "
                     f"{doc['device']['device']}", fontsize=10)
        ax.legend(fontsize=8, ncol=min(4, len(variants) + 1))
        ax.grid(axis="y", which="both", alpha=0.3)
        fig.tight_layout()
        path = out_dir / f"{stem}-{suite}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(str(path))
    return paths, None
