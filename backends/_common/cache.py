"""One registry of a backend's in-memory caches, and :func:`clear_all` to empty them.

Every per-device cache of a device backend (programs, kernels, launch plans, kept device
tables, device properties, memory pools) is a :class:`Memo`: a ``dict`` made through
:func:`memo`, which records it under a dotted name whose first part is the backend's
(``"opencl.matvec.plans"``). :func:`clear_all` empties every recorded memo (or those of
one backend), so the next call of an op builds and plans again: the test fixture that
switches devices, and a test after a driver setting changed, need nothing else.

A memo is a plain ``dict`` subclass (lookups cost what a dict's cost: the launchers'
hot paths read them per call); :meth:`Memo.put` adds an entry and empties the memo first
when it holds ``limit`` entries (plan caches keyed by shapes stay bounded).
"""

from __future__ import annotations

import threading

__all__ = ["Memo", "clear_all", "memo", "memos"]


class Memo(dict):
    """A registered cache: a ``dict`` that :func:`clear_all` empties.

    Parameters
    ----------
    name : str
        The dotted name it is recorded under (``"<backend>.<module>.<what>"``).
    limit : int, optional
        :meth:`put` empties the memo before adding to one of ``limit`` entries.
    """

    __slots__ = ("limit", "name")

    def __init__(self, name: str, limit: int | None = None):
        super().__init__()
        self.name = name
        self.limit = limit

    def put(self, key, value):
        """``self[key] = value`` (emptied first when full); returns ``value``."""
        if self.limit is not None and len(self) >= self.limit:
            self.clear()
        self[key] = value
        return value

    def __repr__(self) -> str:
        return f"Memo({self.name!r}, {len(self)} entries)"


_lock = threading.Lock()
_registry: dict[str, Memo] = {}  # name -> the memo recorded under it (the registry itself)


def memo(name: str, *, limit: int | None = None) -> Memo:
    """A new empty :class:`Memo`, recorded under ``name`` for :func:`clear_all`.

    A second memo of one name replaces the first in the record (a reloaded module's
    caches are the ones in use).
    """
    if not all(part.strip() for part in name.split(".")) or "." not in name:
        raise ValueError(
            f"memo: expected a dotted name '<backend>.<what>'. Received: name={name!r}"
        )
    m = Memo(name, limit)
    with _lock:
        _registry[name] = m
    return m


def memos(backend: str | None = None) -> tuple:
    """The recorded memos (of ``backend`` only, when given), sorted by name."""
    with _lock:
        items = sorted(_registry.items())
    return tuple(m for name, m in items
                 if backend is None or name.split(".", 1)[0] == backend)


def clear_all(backend: str | None = None) -> None:
    """Empty every recorded memo (of ``backend`` only, when given)."""
    for m in memos(backend):
        m.clear()
