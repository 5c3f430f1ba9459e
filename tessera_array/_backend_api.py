"""The protocol every backend implements.

A backend is an object (usually a module-level instance in
``tessera_array/backends/<name>/__init__.py``) with:

``name``
    ``"numpy"``, ``"cuda"``, ``"rocm"``, ``"opencl"``, ``"metal"`` or a third-party name.
``device_kind``
    The kind its devices are written with (``"cpu"`` for numpy, ``"cuda"``, ...).
``priority``
    Higher wins when the default device is picked (JAX's rule).
``is_available() -> bool``
    Cheap: no context, no device query beyond what is free; may import nothing
    heavier than ``importlib.util.find_spec``.
``plausibly_present() -> str | None``
    Evidence that the hardware/driver is there (a device node, a driver library)
    even when loading fails, or None. Used by the test gate to tell an honest
    "no such device" from "present but unreachable".
``load() -> None``
    Imports the library and enumerates devices; raises on failure (the reason is kept).
``devices() -> tuple[Device, ...]``
``dtypes(device) -> tuple[DType, ...]``
    The dtypes the device supports (e.g. no float64 without cl_khr_fp64).
``versions() -> dict[str, str]``
    Library and driver versions, for ``python -m tessera_array info``.
``ops``
    The Array API namespace over *native* buffers (see below).
``is_host``
    True when native buffers are host memory NumPy can read without a copy.
``from_host(ndarray, device)`` / ``to_host(native) -> numpy.ndarray``
    Explicit transfers.
``native_dtype(native) -> DType``
    The DType of a native buffer.
``register(registry) -> None``
    Registers the backend's kernels (matvec, fft, attention, optimizers, ...).

``ops`` contract
----------------
The front end (``tessera_array``) validates arguments, resolves result dtypes and
devices, and casts operands; ``ops`` then receives native buffers already of the
computation dtype and returns native buffers (never host scalars) of the result
dtype. Python scalars passed to binary ops are *weak*: they take the dtype of the
array operand (NEP 50). Each function has the standard's name and signature with
the array arguments replaced by native buffers.

Besides the standard's names, ``ops`` has ``astype(a, dtype, copy=True)``,
``copy_into(dst, src)``, ``getitem``/``setitem``, and
``inplace(name, a, b) -> bool``: ``a <name>= b`` written straight into ``a`` for
``name`` in add/subtract/multiply/divide, where ``b`` has ``a``'s dtype or is a weak
Python scalar; it returns False, having written nothing, when it cannot (the front
end then takes its general path).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

__all__ = ["Backend"]


@runtime_checkable
class Backend(Protocol):
    name: str
    device_kind: str
    priority: int
    is_host: bool

    def is_available(self) -> bool: ...

    def plausibly_present(self) -> str | None: ...

    def load(self) -> None: ...

    def devices(self) -> tuple: ...

    def dtypes(self, device) -> tuple: ...

    def versions(self) -> dict: ...

    def from_host(self, array, device): ...

    def to_host(self, native): ...

    def register(self, registry) -> None: ...
