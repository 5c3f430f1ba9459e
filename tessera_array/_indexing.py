"""``Array.__getitem__`` / ``Array.__setitem__``: the standard's indexing rules.

Specification: https://data-apis.org/array-api/2025.12/API_specification/indexing.html
"""

from __future__ import annotations

__all__ = ["getitem", "setitem"]


def getitem(x, key):
    return x._device.ops.getitem(x._data, key)


def setitem(x, key, value):
    raise NotImplementedError
