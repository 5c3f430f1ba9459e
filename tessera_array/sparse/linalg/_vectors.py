"""The contract of the ``krylov_vectors`` op: gmres's vector operations on native buffers.

:func:`tessera_array.sparse.linalg.gmres` runs its restarts (Arnoldi with modified
Gram-Schmidt, the Givens rotations and back substitution on the host, the update of x)
once, in ``_gmres._gmres_loop``, against the handful of vector operations of a
:class:`KrylovVectors`. Its generic realisation, ``_gmres._ArrayVectors``, works on
arrays of ``b``'s namespace (tessera Arrays on any device, another library's arrays,
dask arrays): every operation there is an Array method or a namespace function. A backend
may register op ``krylov_vectors`` (family ``matvec``) for floating dtypes; for a tessera
``b`` on its device gmres then calls its launcher once per solve::

    vectors = launcher(b, A, M, blas)          # KrylovVectors, or None to decline

and runs the same loop on the native buffers, making tessera Arrays only of what leaves
it (the result, the x a callback is given, the vectors a caller's operator is given).

``b``
    The right-hand side, a native 1-D buffer of the work dtype (never written).
``A``, ``M``
    :class:`~._fused.FusedOperand`: ``apply(v) -> A v`` on native buffers, for a stored
    matrix its registered ``spmv`` / ``matvec`` kernel of the routed variant itself, for
    any other operator its matvec on ``v`` wrapped as a tessera Array (the result checked
    and cast to ``b``'s dtype); for a stored matrix also the matrix (``kind``,
    ``arrays``). ``M`` is None without a preconditioner.
``blas``
    True for ``products="blas"``: the dot products and norms must sum in the host BLAS's
    order (SciPy's); a backend that cannot do so declines.

The realisation must compute what the generic loop computes on tessera Arrays of that
device, bit for bit: the same kernels on the same values in the same order, so that the
choice of path never shows in the iterates. The loop also applies Python's arithmetic
operators to the buffers (``b - A x``; ``x + dx`` and ``x += dx``; ``v * s`` and
``v *= s`` for a Python float ``s``; ``w - t * v`` for a ``dot`` result ``t``), which
must round as the namespace's elementwise functions do on those buffers.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["KrylovBasis", "KrylovVectors", "KrylovVectorsLauncher"]


class KrylovBasis(Protocol):
    """GMRES's Krylov basis: ``m`` vectors of length n."""

    def set(self, k: int, v) -> None:
        """Row ``k`` takes ``v``'s values (copied where the rows are one buffer)."""

    def row(self, k: int):
        """Row ``k`` (a view where the rows are one buffer: written through ``set`` only)."""

    def first(self, k: int):
        """Rows ``0 .. k-1`` as one (k, n) array."""


class KrylovVectors(Protocol):
    """The vector operations of gmres's loop (module docstring)."""

    def matvec(self, v):
        """``A v``."""

    def psolve(self, v):
        """``M v``; ``v`` itself without a preconditioner."""

    def dot(self, u, v):
        """``conj(u) . v``: a scalar of the work dtype that ``axpy`` takes as ``alpha``
        and ``float()`` / ``complex()`` read (``# sync``)."""

    def norm(self, v) -> float:
        """``||v||_2`` as a Python float (``# sync``), in numpy.linalg.norm's operation
        order: the square root, in v's real dtype, of ``v . v`` (real ``v``) or of
        ``re . re + im . im`` (complex ``v``, its real and imaginary parts copied)."""

    def axpy(self, alpha, x, y, subtract: bool = False):
        """``y += alpha x`` (``-=`` with ``subtract``), rounded as the two-step
        expression (op ``axpy``); returns ``y`` (the new array where arrays are immutable)."""

    def basis(self, m: int) -> KrylovBasis:
        """An empty basis of ``m`` vectors."""

    def vecmat(self, coef: list, V: KrylovBasis, k: int):
        """``conj(coef) @ V.first(k)`` for ``k`` Python scalars ``coef`` (op ``vecmat``)."""

    def settle(self, *values) -> tuple:
        """The values of one step ready for the next (dask persists them; elsewhere the
        values themselves)."""

    # Optional: ``expect(products)``, the most products of A (and of M) the solve may take
    # (maxiter * (restart + 1)), called once before the loop's first product where the
    # realisation has it (the NumPy backend's: whether a CSR stencil's set-up pays).
    # Optional: ``mgs(V, w, count, owned) -> (h, w)``, a column's modified Gram-Schmidt
    # in one call: for k = 0 .. count-1, ``h[k] = float(dot(V.row(k), w))`` and then
    # ``w -= h_k V.row(k)`` as ``axpy`` with the dot's own value (real vectors only); ``w``
    # updated in place where ``owned``, else a new vector; the same values as the loop's
    # own steps (the NumPy backend's: one C call a column).


class KrylovVectorsLauncher(Protocol):
    def __call__(self, b, A, M, blas: bool) -> KrylovVectors | None:
        """The vector operations for a solve with right-hand side ``b``, or None."""
