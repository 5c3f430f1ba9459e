"""What a result was measured on: machine, device, driver, library versions, git commit."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

__all__ = ["cpu_model", "device_info", "git_info", "library_versions", "machine_info",
           "numpy_simd", "simd_text"]


def cpu_model() -> str:
    """The host CPU's model name."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    if sys.platform == "darwin":
        try:
            out = subprocess.run(
                ["sysctl", "-n", "machdep.cpu.brand_string"],
                capture_output=True, text=True, timeout=5, check=False,
            )
            if out.stdout.strip():
                return out.stdout.strip()
        except OSError:
            pass
    return platform.processor() or platform.machine() or "unknown"


def numpy_simd() -> dict:
    """NumPy's SIMD level on this machine (``numpy.show_config(mode="dicts")``'s "SIMD
    Extensions"): ``baseline`` (compiled in), ``found`` (dispatched to at run time),
    ``not found``; an empty dict where this NumPy does not report it. NumPy's float32
    ``exp`` took 2.5-3.4 ns an element on an AVX2 EPYC and 0.46 ns on an AVX-512 one of
    the same 2-core kind, so a ratio means little without it."""
    import numpy as np

    try:
        info = np.show_config(mode="dicts").get("SIMD Extensions") or {}
    except Exception:  # older NumPy: no dict mode
        return {}
    return {k: list(info.get(k) or ()) for k in ("baseline", "found", "not found")}


def simd_text(simd: dict | None) -> str:
    """``baseline X86_V2; found X86_V3 X86_V4`` (``unknown`` without a record)."""
    if not simd:
        return "unknown"
    return (f"baseline {' '.join(simd.get('baseline') or ()) or 'none'}; "
            f"found {' '.join(simd.get('found') or ()) or 'none'}")


def _memory_gib():
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def machine_info() -> dict:
    """Platform, CPU model, core counts, memory and load at the time of the run."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    try:
        load = [round(v, 2) for v in os.getloadavg()]
    except (AttributeError, OSError):
        load = None
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "cpu_model": cpu_model(),
        "cores_logical": os.cpu_count(),
        "cores_usable": usable,
        "memory_gib": _memory_gib(),
        "load_average": load,
        "hostname": platform.node(),
        "numpy_simd": numpy_simd(),
    }


def device_info(device) -> dict:
    """The device, its backend, and the driver (``n/a`` for the host backend)."""
    from ._devices import facts

    backend = device._backend
    try:
        versions = dict(backend.versions())
    except Exception as err:  # a backend that cannot say still gets measured
        versions = {"error": f"{type(err).__name__}: {err}"}
    try:
        f = facts(device)
    except Exception as err:  # described as far as it goes
        f = None
        versions["facts"] = f"{type(err).__name__}: {err}"
    driver = None if f is None else f.driver
    if driver is None:
        driver = "n/a (host CPU backend)" if backend.is_host else "not reported by the backend"
    if f is None:
        description = str(device)
    else:
        description = f.name + (f" ({f.platform})" if f.platform else "")
    return {
        "device": str(device),
        "kind": device.kind,
        "backend": backend.name,
        "description": description,
        "label": "cpu" if f is None and backend.is_host else (
            str(device).replace(":", "") if f is None else f.label),
        "is_gpu": None if f is None else f.is_gpu,
        "driver": driver,
        "backend_versions": versions,
    }


def library_versions() -> dict:
    """numpy, scipy, tessera_array (and matplotlib, the BLAS NumPy uses)."""
    import numpy as np

    import tessera_array

    out = {"python": platform.python_version(), "numpy": np.__version__}
    try:
        import scipy

        out["scipy"] = scipy.__version__
    except ImportError:
        out["scipy"] = "not installed"
    out["tessera_array"] = tessera_array.__version__
    try:
        import matplotlib

        out["matplotlib"] = matplotlib.__version__
    except ImportError:
        out["matplotlib"] = "not installed"
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        out["blas"] = f"{blas.get('name', '?')} {blas.get('version', '?')}"
    except Exception:
        out["blas"] = "unknown"
    return out


def git_info(root) -> dict:
    """The commit of the working tree and whether it has local changes (read-only git)."""

    def git(*args):
        try:
            out = subprocess.run(
                ["git", "-C", str(Path(root)), *args],
                capture_output=True, text=True, timeout=10, check=False,
            )
        except OSError:
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": bool(status)}
