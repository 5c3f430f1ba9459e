"""Elementwise functions of the standard.

Specification: https://data-apis.org/array-api/2025.12/API_specification/elementwise_functions.html
"""

from __future__ import annotations

from . import _dtypes
from ._array import Array
from ._helpers import elementwise_binary

__all__ = ["add", "equal"]


def add(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise sum ``x1 + x2``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.add.html
    """
    ops = (x1 if x1.__class__ is Array else x2)._device.ops
    return elementwise_binary("add", x1, x2, ops.add)


def equal(x1: Array | complex, x2: Array | complex, /) -> Array:
    """Elementwise ``x1 == x2``.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.equal.html
    """
    ops = (x1 if x1.__class__ is Array else x2)._device.ops
    return elementwise_binary("equal", x1, x2, ops.equal, result_dtype=_dtypes.bool)
