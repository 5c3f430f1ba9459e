"""Native linear-algebra ops of the main namespace (``matmul``, ``matrix_transpose``,
``tensordot``, ``vecdot``); the ``linalg`` extension is in :mod:`._linalg`.

The front end (:mod:`tessera_array._linear_algebra_functions`) has already checked
shapes and cast operands to one dtype; ``axis`` of ``vecdot`` arrives as a negative
int, ``tensordot``'s ``axes`` as a pair of tuples of non-negative ints.
"""

from __future__ import annotations

__all__ = ["LinearAlgebraFunctions"]


class LinearAlgebraFunctions:
    """The main namespace's part of the ``linear_algebra`` chapter (a mixin of
    ``Namespace``)."""

    def matmul(self, a, b, /):
        """``a @ b`` for operands of one dtype (shapes already checked)."""
        # Note: as NumPy does, a floating-point overflow to inf emits NumPy's
        # RuntimeWarning; no errstate here, to keep the tiny-matrix path short.
        r = self.m.matmul(a, b)
        return r if r.__class__ is self.ndarray else self.m.asarray(r)

    def matrix_transpose(self, a, /):
        """A view of ``a`` with its last two axes swapped."""
        return a.swapaxes(-1, -2)

    def tensordot(self, a, b, axes, /):
        """Contract ``a`` over ``axes[0]`` with ``b`` over ``axes[1]`` (non-negative ints)."""
        return self.m.asarray(self.m.tensordot(a, b, axes=(list(axes[0]), list(axes[1]))))

    def vecdot(self, a, b, axis=-1, /):
        """``sum(conj(a) * b)`` along the negative ``axis``, other axes broadcast.

        Written with ``matmul`` (a module without ``vecdot``, CuPy, gets its BLAS): each
        pair of vectors is a (1, k) @ (k, 1) product.
        """
        m = self.m
        if a.dtype.kind == "c":
            a = m.conj(a)
        r = m.matmul(m.moveaxis(a, axis, -1)[..., None, :], m.moveaxis(b, axis, -1)[..., None])
        return m.asarray(r[..., 0, 0])
