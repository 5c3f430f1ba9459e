"""``__array_namespace_info__``: devices, dtypes and capabilities.

Specification: https://data-apis.org/array-api/2025.12/API_specification/inspection.html
"""

from __future__ import annotations

__all__ = ["__array_namespace_info__"]


def __array_namespace_info__():
    raise NotImplementedError
