"""Sparse arrays: ``csr_array`` (on any device) and, in ``.linalg``, SciPy-style solvers.

``A @ x`` for a ``csr_array`` runs the registered ``spmv`` kernel of its device.
"""

import importlib as _importlib

from ._csr import csr_array, issparse

__all__ = ["csr_array", "issparse", "linalg"]


def __getattr__(name: str):
    # ``linalg`` (the solvers) loads on first attribute access, as SciPy's subpackages do.
    if name == "linalg":
        return _importlib.import_module(f"{__name__}.linalg")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | {"linalg"})
