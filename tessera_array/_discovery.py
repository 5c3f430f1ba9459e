"""Finding and loading backends.

Built-in backends are one explicit tuple; third-party ones arrive through the
entry-point group ``tessera_array.backends`` (each entry point names a backend
object). Nothing is imported until a device is first needed, and a backend that
fails to load keeps its reason, which shows in ``python -m tessera_array info``,
in ``__array_namespace_info__().devices()`` errors and in test skip reasons.
"""

from __future__ import annotations

import importlib
import os
import threading
import types

from ._errors import BackendUnavailableError, DeviceNotFoundError

__all__ = [
    "BUILTIN_BACKENDS",
    "ENTRY_POINT_GROUP",
    "BackendLoadWarning",
    "add_backend",
    "all_devices",
    "backend_for_device",
    "backend_status",
    "check_device",
    "loaded_backends",
    "pick_default_device",
    "remove_backend",
]


class BackendLoadWarning(UserWarning):
    """A backend whose hardware or library looks present did not load (the test gate
    issues it; its message names the backend, the reason and the fix)."""


# (name, module path). The module exposes ``backend``.
BUILTIN_BACKENDS = (
    ("numpy", "tessera_array.backends.numpy"),
    ("opencl", "tessera_array.backends.opencl"),
    ("cuda", "tessera_array.backends.cuda"),
    ("rocm", "tessera_array.backends.rocm"),
)
ENTRY_POINT_GROUP = "tessera_array.backends"

_lock = threading.RLock()
_candidates: dict | None = None  # name -> backend object, or an exception if import failed
_all_tried = False  # every candidate's load() tried (the default device tries fewer)
_loaded: dict = {}  # name -> backend object (load() succeeded)
_failed: dict = {}  # name -> reason string
_device_owner: dict = {}  # Device -> backend object


def _collect_candidates() -> dict:
    found = {}
    for name, module in BUILTIN_BACKENDS:
        try:
            found[name] = importlib.import_module(module).backend
        except Exception as err:  # kept, reported; never hidden
            found[name] = err
    if os.environ.get("TESSERA_NO_ENTRY_POINTS") != "1":
        from importlib.metadata import entry_points

        try:
            eps = list(entry_points(group=ENTRY_POINT_GROUP))
        except Exception as err:  # broken package metadata: kept, reported
            found[f"<entry points {ENTRY_POINT_GROUP}>"] = err
            eps = []
        for ep in eps:
            if ep.name in found:
                continue
            try:
                obj = ep.load()
                # An entry point may name the backend object or a module exposing
                # ``backend``, as the built-in backend packages do.
                if isinstance(obj, types.ModuleType):
                    obj = obj.backend
                found[ep.name] = obj
            except Exception as err:
                found[ep.name] = err
    return found


def _ensure_collected() -> dict:
    """The candidates, imported (a backend module's import is cheap) but not loaded."""
    global _candidates
    if _candidates is None:
        with _lock:
            if _candidates is None:
                _candidates = _collect_candidates()
    return _candidates


def _ensure_discovered() -> None:
    """Every candidate tried: loaded, or its reason kept."""
    global _all_tried
    if _all_tried:
        return
    with _lock:
        if _all_tried:
            return
        for name, obj in _ensure_collected().items():
            if name not in _loaded and name not in _failed:
                _try_load(name, obj)
        _all_tried = True


def _try_load(name, obj) -> None:
    if isinstance(obj, Exception):
        _failed[name] = f"import failed: {type(obj).__name__}: {obj}"
        return
    from ._dispatch import registry

    try:
        if not obj.is_available():
            # unavailable_reason() is optional in the protocol.
            reason = getattr(obj, "unavailable_reason", None)
            _failed[name] = (reason() if reason is not None else None) or "not available"
            return
        obj.load()
        _check_contract(obj)
        obj.register(registry)
    except Exception as err:
        _failed[name] = f"load failed: {type(err).__name__}: {err}"
        registry.unregister_backend(getattr(obj, "name", name))  # no half-registered kernels
        return
    _loaded[name] = obj
    ops_for = getattr(obj, "ops_for", None)  # a namespace per device (a device guard)
    for dev in obj.devices():
        _device_owner[dev] = obj
        dev._backend = obj
        dev.backend_name = obj.name
        dev.ops = obj.ops if ops_for is None else ops_for(dev)
        dev.views = bool(getattr(dev.ops, "basic_views", False))


def _check_contract(obj) -> None:
    """Refuse a loaded backend that lacks a required member or an ``ops`` name (the
    contract of :mod:`._backend_api`): it would fail only when that name is first used."""
    from ._backend_api import OPS, missing_required

    lacks = missing_required(obj)
    if lacks:
        raise TypeError(f"the backend lacks the required members {', '.join(lacks)} "
                        f"(tessera_array._backend_api.MEMBERS)")
    ops = obj.ops
    lacks = [n for n in OPS if not callable(getattr(ops, n, None))]
    if lacks:
        raise TypeError(f"its ops namespace lacks {', '.join(lacks)} "
                        f"(tessera_array._backend_api.OPS)")


def add_backend(backend) -> None:
    """Load and add a backend object at run time (tests, plug-ins under development)."""
    _ensure_discovered()
    with _lock:
        if backend.name in _loaded:
            raise ValueError(
                f"add_backend: a backend named {backend.name!r} is already loaded; "
                f"remove_backend({backend.name!r}) first."
            )
        _failed.pop(backend.name, None)
        _candidates[backend.name] = backend
        _try_load(backend.name, backend)
        if backend.name in _failed:
            raise BackendUnavailableError(
                f"add_backend: backend {backend.name!r} did not load: {_failed[backend.name]}"
            )


def remove_backend(name: str) -> None:
    """Forget a backend added with :func:`add_backend` (tests)."""
    with _lock:
        obj = _loaded.pop(name, None)
        _failed.pop(name, None)
        if _candidates is not None:
            _candidates.pop(name, None)
        if obj is not None:
            for dev in [d for d, o in _device_owner.items() if o is obj]:
                del _device_owner[dev]
                dev._backend = None
                dev.ops = None
                dev.views = False
            from ._dispatch import registry

            registry.unregister_backend(name)


def loaded_backends() -> dict:
    """name -> backend object, for every backend that loaded."""
    _ensure_discovered()
    return dict(_loaded)


def backend_status() -> list:
    """One row per known backend: (name, backend object or None, reason or None)."""
    _ensure_discovered()
    rows = []
    for name, obj in _candidates.items():
        if name in _loaded:
            rows.append((name, _loaded[name], None))
        else:
            rows.append((name, None if isinstance(obj, Exception) else obj, _failed.get(name)))
    return rows


def all_devices() -> tuple:
    """Every device of every loaded backend, in priority order."""
    _ensure_discovered()
    order = sorted(_loaded.values(), key=lambda b: -b.priority)
    return tuple(d for b in order for d in b.devices())


def backend_for_device(device):
    try:
        return _device_owner[device]
    except KeyError:
        _ensure_discovered()
        try:
            return _device_owner[device]
        except KeyError:
            raise _missing_device(device, "device") from None


def check_device(device, func: str) -> None:
    if device in _device_owner:
        return
    _ensure_discovered()
    if device not in _device_owner:
        raise _missing_device(device, func)


def _missing_device(device, func: str) -> Exception:
    owners = [
        n for n, o in (_candidates or {}).items()
        if not isinstance(o, Exception) and getattr(o, "device_kind", None) == device.kind
    ]
    if owners and owners[0] in _failed:
        return BackendUnavailableError(
            f"{func}: device {device} is unavailable: backend {owners[0]!r} did not load: "
            f"{_failed[owners[0]]}"
        )
    have = ", ".join(str(d) for d in all_devices()) or "none"
    # A backend module that did not import may be the device's owner (a source folder
    # imported in place of the installed package has no backends at all): name it.
    broken = "; ".join(f"{n}: {_failed[n]}" for n, o in (_candidates or {}).items()
                       if isinstance(o, Exception) and n in _failed)
    return DeviceNotFoundError(
        f"{func}: no such device. Received: device={device}. Available devices: {have}."
        + (f" Backends that did not import: {broken}." if broken else "")
    )


def pick_default_device():
    """The first device of the highest-priority backend that loads. Backends are loaded
    in priority order only until one gives a device, so work on the default CPU never
    imports a GPU library (CuPy's import, its driver's start and ml_dtypes, which it
    imports, cost about a second) nor creates a context."""
    with _lock:
        cands = _ensure_collected()
        order = sorted((o for o in cands.items() if not isinstance(o[1], Exception)),
                       key=lambda item: -getattr(item[1], "priority", 0))
        for name, obj in order:
            if name not in _loaded and name not in _failed:
                _try_load(name, obj)
            if name in _loaded and obj.devices():
                return obj.devices()[0]
    devs = all_devices()
    if not devs:
        reasons = "; ".join(f"{n}: {r}" for n, r in _failed.items())
        raise BackendUnavailableError(f"tessera_array: no backend loaded ({reasons})")
    return devs[0]
