"""``python -m tessera_array`` (also the ``tessera-array`` console script).

Commands
--------
``info`` (the default)
    One row per backend: its name, whether it loaded (or why not), its library
    versions, its devices and the dtypes of each device; then, for each backend
    with ``host_fallbacks()``, the functions that run on the host for want of a
    native kernel. ``--json`` prints the same as JSON.
``kernels``
    The kernel registry's op x backend x dtype coverage matrix.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys

__all__ = ["format_info", "info_report", "main"]


def _safe(call, default):
    try:
        return call()
    except Exception as err:  # a broken backend must not break the report
        return default(err)


def info_report() -> dict:
    """The data ``info`` prints: versions, the default device and one entry per backend."""
    import tessera_array
    from tessera_array import _devices, _discovery

    backends = []
    for name, backend, reason in _discovery.backend_status():
        loaded = reason is None and backend is not None
        entry = {"name": name, "loaded": loaded, "reason": reason, "evidence": None,
                 "versions": {}, "devices": [], "host_fallbacks": []}
        if backend is not None:
            entry["versions"] = _safe(
                lambda b=backend: dict(b.versions()),
                lambda err: {"versions()": f"failed: {type(err).__name__}: {err}"},
            )
        if loaded:
            for dev in backend.devices():
                dtypes = _safe(
                    lambda d=dev, b=backend: [dt.name for dt in b.dtypes(d)],
                    lambda err: [f"dtypes() failed: {type(err).__name__}: {err}"],
                )
                entry["devices"].append({"device": str(dev), "dtypes": dtypes})
            listing = getattr(backend, "host_fallbacks", None)
            if listing is not None:
                entry["host_fallbacks"] = _safe(
                    lambda: list(listing()),
                    lambda err: [f"host_fallbacks() failed: {type(err).__name__}: {err}"],
                )
        elif backend is not None:
            probe = getattr(backend, "plausibly_present", None)
            if probe is not None:
                entry["evidence"] = _safe(
                    probe, lambda err: f"plausibly_present() failed: {type(err).__name__}: {err}"
                )
        backends.append(entry)
    default = _safe(lambda: str(_devices.default_device()),
                    lambda err: f"none ({type(err).__name__}: {err})")
    return {
        "tessera_array": tessera_array.__version__,
        "array_api_version": tessera_array.__array_api_version__,
        "python": platform.python_version(),
        "default_device": default,
        "backends": backends,
    }


def format_info(report: dict) -> str:
    """The ``info`` table as text."""
    head = ("backend", "status", "versions", "device", "dtypes")
    rows = []
    for b in report["backends"]:
        if b["loaded"]:
            status = "loaded"
        else:
            status = f"not loaded: {b['reason']}"
            if b["evidence"]:
                status += f" (looks present: {b['evidence']})"
        versions = ", ".join(f"{k} {v}" for k, v in b["versions"].items()) or "-"
        devices = b["devices"] or [{"device": "-", "dtypes": []}]
        for i, dev in enumerate(devices):
            first = i == 0
            rows.append((
                b["name"] if first else "",
                status if first else "",
                versions if first else "",
                dev["device"],
                ", ".join(dev["dtypes"]) or "-",
            ))
    widths = [max(len(r[c]) for r in rows + [head]) for c in range(len(head) - 1)]

    def line(cells):
        text = "  ".join(cell.ljust(w) for cell, w in zip(cells, widths))
        return f"{text}  {cells[-1]}".rstrip()

    title = (
        f"tessera_array {report['tessera_array']} (Array API {report['array_api_version']}), "
        f"Python {report['python']}, default device: {report['default_device']}"
    )
    out = [
        title,
        "",
        line(head),
        line(tuple("-" * len(h) for h in head)),
    ]
    out.extend(line(r) for r in rows)
    for b in report["backends"]:
        names = b.get("host_fallbacks")
        if names:
            out.append("")
            out.append(f"{b['name']}: {len(names)} functions run on the host (no native "
                       f"kernel yet):")
            out.append("  " + ", ".join(names))
    return "\n".join(out)


def _kernels() -> str:
    from tessera_array import _discovery
    from tessera_array._dispatch import registry

    _discovery.loaded_backends()  # loading a backend registers its kernels
    return registry.matrix()


def main(argv=None) -> int:
    """Entry point of ``python -m tessera_array`` and ``tessera-array``."""
    parser = argparse.ArgumentParser(
        prog="tessera-array", description="tessera_array: backends, devices and kernels."
    )
    sub = parser.add_subparsers(dest="command")
    p_info = sub.add_parser("info", help="backends, their status, versions, devices, dtypes")
    p_info.add_argument("--json", action="store_true", help="print the report as JSON")
    sub.add_parser("kernels", help="the kernel registry's coverage matrix")
    args = parser.parse_args(argv)
    if args.command == "kernels":
        text = _kernels()
    else:
        report = info_report()
        text = json.dumps(report, indent=2) if getattr(args, "json", False) else format_info(report)
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `tessera-array info | head`
        sys.stdout = None
    return 0


if __name__ == "__main__":
    sys.exit(main())
