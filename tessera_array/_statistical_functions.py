"""Statistical functions of the standard.

Specification: https://data-apis.org/array-api/2025.12/API_specification/statistical_functions.html
"""

from __future__ import annotations

__all__ = []
