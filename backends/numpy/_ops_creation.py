"""Native creation ops of the NumPy backend."""

from __future__ import annotations

__all__ = []
