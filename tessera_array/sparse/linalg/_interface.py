"""``LinearOperator`` and ``aslinearoperator``, with SciPy's names and semantics.

A LinearOperator applies a matrix it may never store: ``matvec``, ``rmatvec``
(the adjoint product), ``matmat`` and ``rmatmat``. Operators made from a tessera
dense array or ``csr_array`` apply it through the kernel registry (ops ``matvec``
/ ``spmv``) with the variant a solver asks for (:mod:`.._routing`); operators made
from another Array API library's array use its ``@``.
"""

from __future__ import annotations

from ..._array import Array
from ..._devices import as_device
from ..._dispatch import DEFAULT_VARIANT, lookup
from .._csr import _is_scipy_sparse, _product_variant, csr_array

__all__ = ["LinearOperator", "aslinearoperator", "namespace_of"]


def _xp():
    import tessera_array

    return tessera_array


def _is_dask(a) -> bool:
    return type(a).__module__.startswith("dask.")


def namespace_of(a):
    """The Array API namespace of array ``a``: its own (``__array_namespace__``), or, for
    a dask array (which has none), array_api_compat's namespace for it."""
    get = getattr(a, "__array_namespace__", None)
    if get is not None:
        return get()
    if _is_dask(a):
        try:
            import array_api_compat
        except ImportError as err:
            raise TypeError("a dask array's namespace comes from array_api_compat, which "
                            "is not installed (pip install array-api-compat)") from err
        return array_api_compat.array_namespace(a)
    raise TypeError(f"no Array API namespace for an object of type {type(a).__name__}")


def _in_namespace(a, xp) -> bool:
    """Whether ``a`` is an array of namespace ``xp``."""
    if hasattr(a, "__array_namespace__"):
        return a.__array_namespace__() is xp
    return _is_dask(a) and namespace_of(a) is xp


class LinearOperator:
    """A linear map ``x -> A @ x`` of shape ``(M, N)``, given by callables.

    Parameters
    ----------
    shape : tuple of two ints
    matvec : callable
        ``matvec(x)`` for ``x`` of shape ``(N,)`` or ``(N, 1)``.
    rmatvec, matmat, rmatmat : callable, optional
        The adjoint product ``A^H @ x``, and the products with 2-D arrays. Without
        ``matmat``, ``matmat(X)`` applies ``matvec`` column by column.
    dtype : DType, optional
        When absent it is taken from the first ``matvec`` result (SciPy instead calls
        ``matvec`` on zeros at construction; here the operator does not know its
        device until it is first applied).

    Notes
    -----
    Subclasses may instead override ``_matvec``, ``_rmatvec``, ``_matmat`` and
    ``_rmatmat``, as in SciPy.
    """

    ndim = 2

    def __init__(self, shape, matvec=None, rmatvec=None, matmat=None, dtype=None,
                 rmatmat=None):
        try:
            shape = tuple(int(s) for s in shape)
        except TypeError:
            shape = None
        if shape is None or len(shape) != 2 or min(shape) < 0:
            raise ValueError(
                f"LinearOperator: shape must be a pair of non-negative ints. Received: "
                f"shape={shape!r}"
            )
        for name, f in (("matvec", matvec), ("rmatvec", rmatvec), ("matmat", matmat),
                        ("rmatmat", rmatmat)):
            if f is not None and not callable(f):
                raise TypeError(
                    f"LinearOperator: {name} must be callable. Received: {name}={f!r}"
                )
        if matvec is None and type(self)._matvec is LinearOperator._matvec \
                and type(self)._matmat is LinearOperator._matmat:
            raise TypeError("LinearOperator: matvec (or a subclass _matvec/_matmat) is required.")
        self.shape = shape
        self.dtype = dtype
        self._fmatvec, self._frmatvec = matvec, rmatvec
        self._fmatmat, self._frmatmat = matmat, rmatmat

    def __repr__(self) -> str:
        return f"<{self.shape[0]}x{self.shape[1]} {type(self).__name__} with dtype={self.dtype}>"

    # ---- what subclasses override ----------------------------------------------------

    def _matvec(self, x):
        if self._fmatvec is not None:
            return self._fmatvec(x)
        xp = namespace_of(x)
        return xp.reshape(self._matmat(xp.reshape(x, (-1, 1))), (-1,))

    def _rmatvec(self, x):
        if self._frmatvec is None:
            raise NotImplementedError(
                f"{type(self).__name__}.rmatvec: this operator has no rmatvec (adjoint product)."
            )
        return self._frmatvec(x)

    def _matmat(self, X):
        if self._fmatmat is not None:
            return self._fmatmat(X)
        xp = namespace_of(X)
        return xp.stack([self.matvec(X[:, j]) for j in range(X.shape[1])], axis=1)

    def _rmatmat(self, X):
        if self._frmatmat is not None:
            return self._frmatmat(X)
        xp = namespace_of(X)
        return xp.stack([self.rmatvec(X[:, j]) for j in range(X.shape[1])], axis=1)

    # ---- the public products ---------------------------------------------------------

    def _vec(self, x, n, m, f, name):
        if x.shape != (n,) and x.shape != (n, 1):
            raise ValueError(
                f"LinearOperator.{name}: x must have shape ({n},) or ({n}, 1). Received: "
                f"x.shape={x.shape}, operator shape={self.shape}"
            )
        y = f(x)
        if self.dtype is None:
            self.dtype = y.dtype
        xp = namespace_of(y)
        return xp.reshape(y, (m, 1) if x.ndim == 2 else (m,))

    def matvec(self, x):
        """``A @ x`` for ``x`` of shape ``(N,)`` or ``(N, 1)``."""
        return self._vec(x, self.shape[1], self.shape[0], self._matvec, "matvec")

    def rmatvec(self, x):
        """``A^H @ x`` for ``x`` of shape ``(M,)`` or ``(M, 1)``."""
        return self._vec(x, self.shape[0], self.shape[1], self._rmatvec, "rmatvec")

    def matmat(self, X):
        """``A @ X`` for a 2-D ``X`` of shape ``(N, K)``."""
        if X.ndim != 2 or X.shape[0] != self.shape[1]:
            raise ValueError(
                f"LinearOperator.matmat: X must have shape ({self.shape[1]}, K). Received: "
                f"X.shape={X.shape}"
            )
        return self._matmat(X)

    def rmatmat(self, X):
        """``A^H @ X`` for a 2-D ``X`` of shape ``(M, K)``."""
        if X.ndim != 2 or X.shape[0] != self.shape[0]:
            raise ValueError(
                f"LinearOperator.rmatmat: X must have shape ({self.shape[0]}, K). Received: "
                f"X.shape={X.shape}"
            )
        return self._rmatmat(X)

    def dot(self, x):
        """``A @ x``: a LinearOperator for an operator, else matvec or matmat."""
        if isinstance(x, LinearOperator):
            return _ProductOperator(self, x)
        if x.ndim == 1 or (x.ndim == 2 and x.shape[1] == 1):
            return self.matvec(x)
        if x.ndim == 2:
            return self.matmat(x)
        raise ValueError(f"LinearOperator.dot: expected a 1-D or 2-D array. Received: "
                         f"x.shape={x.shape}")

    __matmul__ = dot
    __call__ = dot

    def adjoint(self) -> LinearOperator:
        """The Hermitian adjoint ``A^H``, as an operator."""
        return _AdjointOperator(self)

    @property
    def H(self) -> LinearOperator:
        return self.adjoint()


class _AdjointOperator(LinearOperator):
    def __init__(self, op):
        super().__init__((op.shape[1], op.shape[0]), op.rmatvec, op.matvec, op.rmatmat,
                         op.dtype, op.matmat)
        self._op = op

    def adjoint(self):
        return self._op


class _ProductOperator(LinearOperator):
    def __init__(self, a, b):
        if a.shape[1] != b.shape[0]:
            raise ValueError(f"LinearOperator.dot: shapes {a.shape} and {b.shape} do not align")
        super().__init__((a.shape[0], b.shape[1]), lambda x: a.matvec(b.matvec(x)),
                         lambda x: b.rmatvec(a.rmatvec(x)), dtype=a.dtype or b.dtype)


class _DenseOperator(LinearOperator):
    """A tessera dense 2-D Array, applied through the registered ``matvec`` kernel."""

    def __init__(self, A: Array, variant: str = DEFAULT_VARIANT):
        super().__init__(A.shape, dtype=A.dtype, matvec=self._mv)
        self.A = A
        self.variant = variant
        self._launch = lookup("matvec", A.device, A.dtype, variant)
        self._AH = None

    def _mv(self, x):
        A = self.A
        if x.__class__ is not Array or x._device is not A._device or x._dtype is not A._dtype:
            return _xp().matmul(A, x)
        return Array._new(self._launch(A._data, x._data), A._dtype, A._device)

    def _rmatvec(self, x):
        xp = _xp()
        if self._AH is None:
            self._AH = xp.conj(self.A.mT) if xp.isdtype(self.A.dtype, "complex floating") \
                else self.A.mT
        AH = self._AH
        if x.__class__ is not Array or x._device is not AH._device or x._dtype is not AH._dtype:
            return xp.matmul(AH, x)
        return Array._new(self._launch(AH._data, x._data), AH._dtype, AH._device)

    def _matmat(self, X):
        return _xp().matmul(self.A, X)


class _CSROperator(LinearOperator):
    """A tessera ``csr_array``, applied through the registered ``spmv`` kernel."""

    def __init__(self, A: csr_array, variant: str | None = None):
        super().__init__(A.shape, dtype=A.dtype, matvec=self._mv)
        self.A = A
        # None: ``A @ x``'s own variant (the backend's ``matmul`` row), fixed here
        self.variant = _product_variant(A.device, A.dtype) if variant is None else variant
        self._AH = None

    def _mv(self, x):
        return self.A._spmv(x, self.variant)

    def _rmatvec(self, x):
        if self._AH is None:
            self._AH = self.A.H  # built once: a transpose (and conjugate) of the CSR data
        return self._AH._spmv(x, self.variant)

    def _matmat(self, X):
        return self.A._spmv(X, self.variant)


class _NamespaceOperator(LinearOperator):
    """Another library's matrix (any Array API array, or a SciPy sparse matrix used with
    NumPy vectors): ``A @ x``."""

    def __init__(self, A):
        super().__init__(A.shape, dtype=A.dtype, matvec=self._mv)
        self.A = A
        self._AH = None

    def _mv(self, x):
        return self.A @ x

    def _rmatvec(self, x):
        if self._AH is None:
            A = self.A
            if hasattr(A, "conj") and _is_scipy_sparse(A):
                self._AH = A.conj().T
            else:
                xp = namespace_of(A)
                self._AH = xp.conj(xp.matrix_transpose(A)) if xp.isdtype(
                    A.dtype, "complex floating") else xp.matrix_transpose(A)
        return self._AH @ x

    def _matmat(self, X):
        return self.A @ X


def _as_operator(A, *, device=None, variant=None, func="aslinearoperator",
                 name="A", xp=None):
    """``A`` as a LinearOperator whose products run on ``device`` (tessera) or in ``xp``.

    ``variant``: the registered variant for every kind, or a mapping ``{"dense": ...,
    "csr": ...}`` (a solver's row of the routing table); None: ``A @ x``'s own (the
    ``default`` dense product, the csr_array's ``matmul`` row)."""
    if isinstance(A, LinearOperator):
        return A
    if variant is None:
        v_dense, v_csr = DEFAULT_VARIANT, None
    elif isinstance(variant, str):
        v_dense = v_csr = variant
    else:
        v_dense, v_csr = variant["dense"], variant["csr"]
    tessera = xp is None or xp is _xp()
    if tessera:
        if isinstance(A, csr_array):
            if device is not None and A.device is not device:
                raise ValueError(
                    f"{func}: {name} is on another device than b; move it with to_device(). "
                    f"Received: {name}.device={A.device}, b.device={device}"
                )
            return _CSROperator(A, v_csr)
        if _is_scipy_sparse(A):
            # Note: an explicit host-to-device copy, at conversion, documented.
            return _CSROperator(csr_array(A, device=device), v_csr)
        if A.__class__ is Array:
            if device is not None and A.device is not device:
                raise ValueError(
                    f"{func}: {name} is on another device than b; move it with to_device(). "
                    f"Received: {name}.device={A.device}, b.device={device}"
                )
            _check_2d(A, func, name)
            return _DenseOperator(A, v_dense)
        if type(A).__module__ == "numpy" and hasattr(A, "__array_namespace__"):
            # Note: a NumPy matrix is moved explicitly to b's device (a copy off the host).
            A = _xp().asarray(A, device=as_device(device, func))
            _check_2d(A, func, name)
            return _DenseOperator(A, v_dense)
    else:
        if _is_scipy_sparse(A) or _in_namespace(A, xp):
            _check_2d(A, func, name)
            return _NamespaceOperator(A)
    raise TypeError(
        f"{func}: {name} must be a 2-D array, a csr_array, a SciPy sparse array or a "
        f"LinearOperator{'' if tessera else ' of the namespace of b'}. "
        f"Received: type({name})={type(A).__name__}"
    )


def _check_2d(A, func, name):
    if len(A.shape) != 2:
        raise ValueError(
            f"{func}: {name} must be 2-D (a matrix). Received: {name}.shape={tuple(A.shape)}"
        )


def aslinearoperator(A, *, device=None) -> LinearOperator:
    """``A`` as a LinearOperator.

    ``A`` may be a LinearOperator (returned as is), a tessera dense 2-D Array or
    ``csr_array`` (applied through the kernel registry), a SciPy sparse array or a
    NumPy array (copied explicitly to ``device``, default: the default device).
    """
    dev = None if device is None else as_device(device, "aslinearoperator")
    if dev is None and not isinstance(A, (Array, csr_array, LinearOperator)):
        dev = as_device(None, "aslinearoperator")
    return _as_operator(A, device=dev)
