"""Sparse arrays: ``csr_array`` (on any device) and, in ``.linalg``, SciPy-style solvers.

``A @ x`` for a ``csr_array`` runs the registered ``spmv`` kernel of its device.
"""

from . import linalg
from ._csr import csr_array, issparse

__all__ = ["csr_array", "issparse", "linalg"]
