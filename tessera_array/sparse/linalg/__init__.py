"""Sparse linear algebra with SciPy's names: ``LinearOperator`` and Krylov solvers.

``cg``, ``gmres``, ``bicgstab``, ``cgs``, ``bicg`` and ``minres`` keep the signatures, defaults,
callbacks and ``info`` codes of ``scipy.sparse.linalg`` (SciPy >= 1.14) and are
written once against the namespace of ``b``; the matvec variant each solver uses
comes from the routing table, :mod:`tessera_array.sparse._routing`. Their dot products
run on ``b``'s device unless ``products="blas"`` asks for the host BLAS's order
(SciPy's iterates). See :mod:`tessera_array.sparse.linalg._isolve` for both, and for
the info codes tessera adds; gmres itself is in ``_gmres.py``, the other five in
``_isolve.py``, the ``cg_fused`` contract in ``_fused.py``. On dask
arrays (``b`` a dask array of tessera chunks) they run through array_api_compat's
namespace for it, one graph per iteration persisted; :func:`row_block_operator` makes a
sparse operator over such vectors.
"""

from ._dask import row_block_operator
from ._gmres import gmres
from ._interface import LinearOperator, aslinearoperator
from ._isolve import SolveReport, bicg, bicgstab, cg, cgs, minres

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
    "row_block_operator",
]
