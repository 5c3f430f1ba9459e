"""Sparse linear algebra with SciPy's names: ``LinearOperator`` and Krylov solvers.

``cg``, ``gmres``, ``bicgstab``, ``cgs``, ``bicg`` and ``minres`` keep the signatures, defaults,
callbacks and ``info`` codes of ``scipy.sparse.linalg`` (SciPy >= 1.14) and are
written once against the namespace of ``b``; the matvec variant each solver uses
comes from :data:`tessera_array.sparse._routing.MATVEC_ROUTING`. See
:mod:`tessera_array.sparse.linalg._isolve` for the info codes tessera adds.
"""

from ._interface import LinearOperator, aslinearoperator
from ._isolve import SolveReport, bicg, bicgstab, cg, cgs, gmres, minres

__all__ = [
    "LinearOperator",
    "SolveReport",
    "aslinearoperator",
    "bicg",
    "bicgstab",
    "cg",
    "cgs",
    "gmres",
    "minres",
]
