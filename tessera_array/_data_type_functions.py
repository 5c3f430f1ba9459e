"""Data type functions of the standard.

Specification: https://data-apis.org/array-api/2025.12/API_specification/data_type_functions.html
"""

from __future__ import annotations

__all__ = []
