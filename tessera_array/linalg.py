"""The ``linalg`` extension.

Specification: https://data-apis.org/array-api/2025.12/extensions/linear_algebra_functions.html
"""

from __future__ import annotations

__all__ = []
