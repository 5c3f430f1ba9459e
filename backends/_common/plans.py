"""The FFT plan caches of every backend: one base class for what they share.

:class:`BasePlanCache` is :class:`tessera_array.fft.PlanCache` written once: the four
numbers, their setters (validated; refused with the backend's reason where a bound
cannot be set), ``info``, ``show`` and ``repr``. A backend's cache says only what its
library holds: ``_size``, ``_memsize``, ``clear``, and, where the bounds can be set,
``_get_max_size``/``_set_max_size`` and ``_get_max_memory``/``_set_max_memory``, plus
``_notes`` for what ``info`` adds.
"""

from __future__ import annotations

__all__ = ["BasePlanCache"]


def _bound(name: str, value):
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                              or value < 0):
        raise ValueError(f"PlanCache.{name}: expected None or an int >= 0. "
                         f"Received: {name}={value!r}")
    return value


class BasePlanCache:
    """A backend's FFT plans for one device (see the module docstring).

    Class data: ``backend`` (its name, for messages and ``info``) and ``fixed_bounds``,
    why ``max_size``/``max_memory`` cannot be set (None where the subclass sets them).
    """

    backend = ""
    fixed_bounds: str | None = None

    def __init__(self, device=None):
        self._device = device

    # ---- what a backend says ---------------------------------------------------------

    def _size(self):
        """Plans held now (None: the library does not tell)."""
        return None

    def _memsize(self):
        """Bytes the plans hold now (None: the library does not tell)."""
        return None

    def _get_max_size(self):
        return None

    def _get_max_memory(self):
        return None

    def _set_max_size(self, value) -> None:
        self._refuse("max_size", value)

    def _set_max_memory(self, value) -> None:
        self._refuse("max_memory", value)

    def _notes(self) -> dict:
        return {}

    def clear(self) -> None:
        """Drop every plan the cache holds (a documented no-op where it cannot)."""

    # ---- the PlanCache interface -----------------------------------------------------

    def _refuse(self, name: str, value) -> None:
        raise NotImplementedError(f"PlanCache.{name}: {self.fixed_bounds}. Received: "
                                  f"{name}={value!r}")

    @property
    def size(self):
        return self._size()

    @property
    def max_size(self):
        return self._get_max_size()

    @max_size.setter
    def max_size(self, value):
        self._set_max_size(_bound("max_size", value))

    @property
    def memsize(self):
        return self._memsize()

    @property
    def max_memory(self):
        return self._get_max_memory()

    @max_memory.setter
    def max_memory(self, value):
        self._set_max_memory(_bound("max_memory", value))

    def info(self) -> dict:
        head = {"backend": self.backend}
        if self._device is not None:
            head["device"] = str(self._device)
        head.update(size=self.size, max_size=self.max_size, memsize=self.memsize,
                    max_memory=self.max_memory)
        head.update(self._notes())
        return head

    def show(self) -> None:
        """Print :meth:`info`, one field a line."""
        for key, value in self.info().items():
            print(f"{key}: {value}")

    def __repr__(self) -> str:
        where = "" if self._device is None else f"device={self._device}, "
        return (f"{type(self).__name__}({where}size={self.size}, max_size={self.max_size}, "
                f"memsize={self.memsize}, max_memory={self.max_memory})")
