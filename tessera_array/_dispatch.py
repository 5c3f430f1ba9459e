"""The kernel registry: ``(op, backend, dtype, variant) -> launcher``.

Op names come from :data:`OPS`, the one list of kernel families and their ops;
registering or looking up any other name fails at once. Dispatch never depends on
a caller's function name or any other user-chosen string: the caller names the op
from :data:`OPS`, the backend comes from the operands' device, the dtype is a
:class:`~tessera_array._dtypes.DType` object, and the variant is an explicit field.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import NamedTuple

from ._dtypes import HALF_FLOATING, DType
from ._errors import KernelDTypeError, KernelNotFoundError

__all__ = ["FAMILIES", "OPS", "KernelKey", "KernelRegistry", "find", "lookup", "registry"]

# The four kernel families and the ops in each. This is the only list of op names.
FAMILIES = {
    "matvec": ("matvec", "spmv", "axpy", "aypx", "cg_fused", "gmres_fused", "bicgstab_fused",
               "krylov_vectors", "vecdot", "vecmat", "linear"),
    "fft": ("fft_c2c", "fft_r2c", "fft_c2r"),
    "attention": ("attention_fwd", "attention_bwd", "dropout_mask"),
    "optimizer": ("sgd_step", "adam_step", "adamw_step", "adafactor_step"),
}
OPS = frozenset(op for ops in FAMILIES.values() for op in ops)

DEFAULT_VARIANT = "default"


class KernelKey(NamedTuple):
    op: str
    backend: str
    dtype: DType
    variant: str = DEFAULT_VARIANT


class KernelRegistry:
    """Holds every registered kernel; the only record of which kernels exist."""

    def __init__(self):
        self._kernels: dict = {}
        self._lock = threading.Lock()
        # The module's lookup(op, device, dtype, variant) by (op, id(device), id(dtype),
        # variant): devices and dtypes are interned, and a hit costs a tuple's hash, where
        # a KernelKey with its DType hashes through Python (~1 us a lookup, a few a solve).
        # Emptied by every change of the registry.
        self._fast: dict = {}

    @staticmethod
    def _check_key(op, backend, dtype, variant, func):
        if op not in OPS:
            raise ValueError(
                f"{func}: unknown op. Expected one of {sorted(OPS)}. Received: op={op!r}"
            )
        if not isinstance(dtype, DType):
            raise TypeError(
                f"{func}: dtype must be a tessera_array DType. Received: dtype={dtype!r}"
            )
        if not isinstance(variant, str) or not variant:
            raise TypeError(
                f"{func}: variant must be a non-empty string. Received: variant={variant!r}"
            )
        if not isinstance(backend, str):
            raise TypeError(f"{func}: backend must be a name. Received: backend={backend!r}")

    def register(self, op: str, backend: str, dtypes, launcher: Callable, *,
                 variant: str = DEFAULT_VARIANT, replace: bool = False) -> None:
        """Register ``launcher`` for ``op`` on ``backend`` for each dtype in ``dtypes``."""
        if isinstance(dtypes, DType):
            dtypes = (dtypes,)
        elif isinstance(dtypes, str):
            self._check_key(op, backend, dtypes, variant, "register")  # raises TypeError
        if not callable(launcher):
            raise TypeError(
                f"register: launcher must be callable. Received: launcher={launcher!r}"
            )
        with self._lock:
            for dt in dtypes:
                self._check_key(op, backend, dt, variant, "register")
                key = KernelKey(op, backend, dt, variant)
                if key in self._kernels and not replace:
                    raise ValueError(f"register: a kernel is already registered for {key}")
                self._kernels[key] = launcher
            self._fast.clear()

    def register_family(self, family: str, backend: str, dtypes, launchers) -> None:
        """Register ``launchers[op]`` for every op of kernel family ``family`` (a mapping by
        op name, e.g. a launcher module's ``globals()``), each for ``dtypes``."""
        try:
            ops = FAMILIES[family]
        except KeyError:
            raise ValueError(f"register_family: unknown family. Expected one of "
                             f"{sorted(FAMILIES)}. Received: family={family!r}") from None
        missing = [op for op in ops if op not in launchers]
        if missing:
            raise ValueError(f"register_family: the {family} family needs a launcher for "
                             f"every op. Received: none for {', '.join(missing)}")
        for op in ops:
            self.register(op, backend, dtypes, launchers[op])

    def unregister_backend(self, backend: str) -> None:
        with self._lock:
            for key in [k for k in self._kernels if k.backend == backend]:
                del self._kernels[key]
            self._fast.clear()

    def lookup(self, op: str, backend: str, dtype: DType,
               variant: str = DEFAULT_VARIANT) -> Callable:
        """The launcher for the key; KernelNotFoundError naming what is registered."""
        try:
            return self._kernels[KernelKey(op, backend, dtype, variant)]
        except KeyError:
            pass
        except TypeError:
            self._check_key(op, backend, dtype, variant, "lookup")
            raise
        self._check_key(op, backend, dtype, variant, "lookup")
        same = sorted({(k.dtype.name, k.variant) for k in self._kernels
                       if k.op == op and k.backend == backend})
        if same:
            have = ", ".join(f"{d}/{v}" for d, v in same)
            msg = f"Registered on {backend} (dtype/variant): {have}."
        else:
            elsewhere = sorted({k.backend for k in self._kernels if k.op == op})
            msg = (f"Nothing is registered for {op} on {backend}; backends with {op}: "
                   f"{', '.join(elsewhere) or 'none'}.")
        if dtype in HALF_FLOATING:
            # No kernel is registered for the 16-bit dtypes: a TypeError as well, so
            # that a caller without its own check still reports a wrong dtype.
            raise KernelDTypeError(
                f"{op}: no kernel for op={op}, backend={backend}, dtype={dtype.name}, "
                f"variant={variant}: none is registered for float16 or bfloat16; cast to "
                f"float32 first. {msg}"
            )
        raise KernelNotFoundError(
            f"{op}: no kernel for op={op}, backend={backend}, dtype={dtype.name}, "
            f"variant={variant}. {msg}"
        )

    def keys(self) -> list:
        return sorted(self._kernels, key=lambda k: (k.op, k.backend, k.dtype.name, k.variant))

    def matrix(self) -> str:
        """The op x backend x dtype coverage table, as text."""
        rows = {}
        for k in self.keys():
            rows.setdefault((k.op, k.backend, k.variant), []).append(k.dtype.name)
        lines = [f"{'op':<16}{'backend':<10}{'variant':<10}dtypes"]
        for (op, be, var), dts in sorted(rows.items()):
            lines.append(f"{op:<16}{be:<10}{var:<10}{', '.join(dts)}")
        return "\n".join(lines)


registry = KernelRegistry()


def lookup(op: str, device, dtype: DType, variant: str = DEFAULT_VARIANT) -> Callable:
    """The launcher of ``op`` for arrays of ``dtype`` on ``device``."""
    fast = registry._fast
    key = (op, id(device), id(dtype), variant)
    hit = fast.get(key)
    if hit is not None and hit is not _MISS:
        return hit
    launcher = registry.lookup(op, device.backend.name, dtype, variant)
    fast[key] = launcher
    return launcher


_MISS = object()  # (find's remembered miss in the registry's fast table)


def find(op: str, device, dtype: DType, variant: str = DEFAULT_VARIANT) -> Callable | None:
    """:func:`lookup`'s launcher, or None where none is registered, for callers with a
    path of their own then: a miss is remembered until the next registration (lookup's
    message, which lists what is registered, took ~20 us a solve on gmres's front end)."""
    key = (op, id(device), id(dtype), variant)
    if registry._fast.get(key) is _MISS:
        return None
    try:
        return lookup(op, device, dtype, variant)
    except KernelNotFoundError:
        registry._fast[key] = _MISS
        return None
