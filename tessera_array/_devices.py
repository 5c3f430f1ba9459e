"""Devices: ``Device(kind, index)``, written ``cpu``, ``cuda:0``, ``opencl:1``.

A device is owned by exactly one backend (``cpu`` by ``numpy``). Device objects
are interned, so two arrays are on the same device exactly when
``x1.device is x2.device``.
"""

from __future__ import annotations

import os

__all__ = ["Device", "as_device", "default_device", "set_default_device"]


class Device:
    """A place where arrays live and kernels run.

    Parameters
    ----------
    kind : str
        ``"cpu"``, ``"cuda"``, ``"rocm"``, ``"opencl"``, ``"metal"`` or a third-party kind;
        or the string form ``"cuda:1"`` (as ``torch.device`` takes it), index omitted.
    index : int, optional
        The device number within its kind (default 0).

    Notes
    -----
    ``str(device)`` is ``"cpu"`` for the host device and ``"<kind>:<index>"``
    otherwise; that string is accepted back wherever ``device=`` is.
    """

    __slots__ = ("__weakref__", "_backend", "_label", "backend_name", "index", "kind", "ops",
                 "views")
    _interned: dict = {}

    def __new__(cls, kind: str, index: int | None = None, *, backend_name: str | None = None):
        if not isinstance(kind, str) or not kind:
            raise TypeError(f"Device: kind must be a non-empty string. Received: kind={kind!r}")
        key = (kind, 0 if index is None else index)
        dev = cls._interned.get(key)
        if dev is not None:
            return dev
        if ":" in kind:  # "cuda:1": the string form, read as device= reads it
            if index is not None:
                raise ValueError(
                    "Device: give the index once, in kind ('cuda:1') or as index "
                    f"(Device('cuda', 1)). Received: kind={kind!r}, index={index!r}"
                )
            return parse_device_string(kind)
        index = 0 if index is None else index
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ValueError(f"Device: index must be an int >= 0. Received: index={index!r}")
        dev = object.__new__(cls)
        dev.kind = kind
        dev.index = index
        dev.backend_name = backend_name
        dev._backend = None  # set by discovery when the owning backend loads
        dev.ops = None  # the owning backend's native namespace, cached for the hot path
        dev.views = False  # its ops' basic_views trait (Array.__getitem__'s short path)
        dev._label = kind if (kind == "cpu" and index == 0) else f"{kind}:{index}"
        cls._interned[(kind, index)] = dev
        return dev

    @property
    def backend(self):
        """The loaded backend object that owns this device."""
        if self._backend is not None:
            return self._backend
        from ._discovery import backend_for_device

        return backend_for_device(self)

    def __repr__(self) -> str:
        return f"Device({self._label!r})"

    def __str__(self) -> str:
        return self._label

    def __eq__(self, other):
        if isinstance(other, Device):
            return self is other
        if isinstance(other, str):
            try:
                return parse_device_string(other) is self
            except ValueError:
                return False
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.kind, self.index))

    def __reduce__(self):
        return (Device, (self.kind, self.index))


def parse_device_string(text: str) -> Device:
    """``"cpu"`` / ``"cuda:0"`` / ``"opencl"`` -> the interned Device (not checked for existence)."""
    kind, sep, idx = text.strip().partition(":")
    if not kind:
        raise ValueError(f"device: expected a string like 'cpu' or 'cuda:0'. Received: {text!r}")
    if sep:
        if not idx.isdigit():
            raise ValueError(
                f"device: the index after ':' must be a non-negative integer. Received: {text!r}"
            )
        return Device(kind, int(idx))
    return Device(kind, 0)


def as_device(device, func: str = "device"):
    """Resolve a ``device=`` argument (Device, string, or None for the default)."""
    if device is None:
        return default_device()
    if device.__class__ is Device:
        dev = device
    elif isinstance(device, str):
        dev = parse_device_string(device)
    else:
        raise TypeError(
            f"{func}: device must be a tessera_array Device, a string such as 'cpu' or "
            f"'cuda:0', or None. Received: device={device!r}"
        )
    from ._discovery import check_device

    check_device(dev, func)
    return dev


_default = None


def default_device() -> Device:
    """The default device: ``TESSERA_DEVICE`` if set, else the first device of the
    highest-priority backend that loads."""
    global _default
    if _default is None:
        from ._discovery import pick_default_device

        env = os.environ.get("TESSERA_DEVICE")
        if env:
            dev = parse_device_string(env)
            from ._discovery import check_device

            check_device(dev, "TESSERA_DEVICE")
            _default = dev
        else:
            _default = pick_default_device()
    return _default


def set_default_device(device) -> None:
    """Set (or with None, reset) the process-wide default device."""
    global _default
    _default = None if device is None else as_device(device, "set_default_device")
