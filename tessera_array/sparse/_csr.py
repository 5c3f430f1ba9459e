"""``csr_array``: a compressed-sparse-row matrix living on any device.

The three buffers (``data``, ``indices``, ``indptr``) are tessera Arrays on one
device. ``A @ x`` goes through the kernel registry (op ``spmv``); everything else
(construction from a dense array, ``.T``, ``.toarray()``) is written with the
namespace, so it runs on every backend.
"""

from __future__ import annotations

from .. import _dtypes
from .._array import Array
from .._devices import as_device
from .._dispatch import DEFAULT_VARIANT, lookup

__all__ = ["csr_array", "issparse"]


def _xp():
    import tessera_array

    return tessera_array


def _refuse_half(func: str, data) -> None:
    """TypeError for float16/bfloat16 data: no spmv kernel is registered for them."""
    from .._helpers import refuse_half

    refuse_half(func, data._dtype, "data", "no sparse kernel is registered for them")


def _product_variant(device, dtype) -> str:
    """The ``spmv`` variant of a csr_array's own products on ``device``: its backend's
    ``matmul`` row of the routing table for the floating dtypes; ``default`` for the
    integer ones (the only variant registered for them, as on the NumPy backend)."""
    if dtype not in _dtypes.FLOATING:
        return DEFAULT_VARIANT
    from ._routing import matvec_variant

    return matvec_variant("matmul", "csr", device.backend.name)


def _is_scipy_sparse(obj) -> bool:
    """True for a SciPy sparse array or matrix (without importing SciPy)."""
    mod = type(obj).__module__ or ""
    return mod.startswith("scipy.sparse") and hasattr(obj, "tocsr") and hasattr(obj, "format")


def issparse(x) -> bool:
    """True when ``x`` is a tessera_array sparse array (``csr_array``)."""
    return isinstance(x, csr_array)


class csr_array:
    """A sparse matrix in compressed sparse row (CSR) format.

    Parameters
    ----------
    arg1 : tuple, array or SciPy sparse
        ``(data, indices, indptr)`` (the CSR buffers, as in SciPy), a dense 2-D array
        (a tessera Array or anything ``asarray`` accepts), or a SciPy sparse
        array/matrix of any format (converted to CSR, then copied to ``device``).
    shape : tuple of two ints, optional
        Required when it cannot be inferred from ``(data, indices, indptr)``: the
        inferred number of columns is ``max(indices) + 1``.
    dtype : DType, optional
        The dtype of ``data`` (cast if given).
    device : Device or str, optional
        Where the buffers live. Defaults to the device of a tessera Array argument,
        else the default device. A tessera Array on another device is refused
        (move it with ``to_device`` first): no silent cross-device copy.

    Notes
    -----
    ``indices`` and ``indptr`` are int32 when the sizes allow, else int64, as in
    SciPy. Duplicate entries are kept and summed by ``A @ x`` and ``toarray()``.
    ``A @ x`` takes a tessera Array on the same device, of shape ``(n,)`` or
    ``(n, k)``; the result dtype follows the standard's promotion of ``A.dtype``
    and ``x.dtype``.
    """

    format = "csr"
    ndim = 2

    def __init__(self, arg1, shape=None, dtype=None, *, device=None):
        xp = _xp()
        if dtype is not None:
            dtype = _dtypes.coerce_dtype(dtype, "dtype", "csr_array")
        if isinstance(arg1, csr_array):
            dev = arg1._device if device is None else as_device(device, "csr_array")
            data, indices, indptr = arg1.data, arg1.indices, arg1.indptr
            if dev is not arg1._device:
                data, indices, indptr = (a.to_device(dev) for a in (data, indices, indptr))
            shape = arg1.shape if shape is None else shape
        elif _is_scipy_sparse(arg1):
            dev = as_device(device, "csr_array")
            s = arg1.tocsr()
            data = xp.asarray(s.data, device=dev)
            indices = xp.asarray(s.indices, device=dev)
            indptr = xp.asarray(s.indptr, device=dev)
            shape = s.shape if shape is None else shape
        elif isinstance(arg1, tuple) and len(arg1) == 3:
            dev = self._device_of(arg1, device)
            data, indices, indptr = (
                a if isinstance(a, Array) else xp.asarray(a, device=dev) for a in arg1
            )
        elif isinstance(arg1, tuple):
            raise ValueError(
                "csr_array: a tuple argument must be (data, indices, indptr). "
                f"Received: len(arg1)={len(arg1)}"
            )
        else:
            dev = self._device_of((arg1,), device)
            dense = arg1 if isinstance(arg1, Array) else xp.asarray(arg1, device=dev)
            data, indices, indptr, shape = self._from_dense(dense, shape)
        self._set(data, indices, indptr, shape, dtype, dev)

    @staticmethod
    def _device_of(arrays, device):
        devs = {a.device for a in arrays if isinstance(a, Array)}
        if device is not None:
            dev = as_device(device, "csr_array")
            if devs - {dev}:
                raise ValueError(
                    "csr_array: the arrays given are on another device than device=; move "
                    f"them with to_device() first. Received: device={dev}, array devices="
                    f"{sorted(str(d) for d in devs)}"
                )
            return dev
        if len(devs) > 1:
            raise ValueError(
                "csr_array: data, indices and indptr must be on one device. Received: "
                f"devices={sorted(str(d) for d in devs)}"
            )
        return devs.pop() if devs else as_device(None, "csr_array")

    @staticmethod
    def _from_dense(dense, shape):
        xp = _xp()
        if dense.ndim != 2:
            raise ValueError(
                f"csr_array: a dense argument must be 2-D. Received: arg1.shape={dense.shape}"
            )
        if shape is not None and tuple(shape) != dense.shape:
            raise ValueError(
                "csr_array: shape disagrees with the dense argument. Received: "
                f"shape={tuple(shape)}, arg1.shape={dense.shape}"
            )
        m, n = dense.shape
        mask = dense != 0
        counts = xp.sum(xp.astype(mask, xp.int64), axis=1)
        zero = xp.zeros(1, dtype=xp.int64, device=dense.device)
        indptr = xp.concat([zero, xp.cumulative_sum(counts)])
        (flat_nz,) = xp.nonzero(xp.reshape(mask, (-1,)))
        data = xp.take(xp.reshape(dense, (-1,)), flat_nz)
        indices = flat_nz % n if n else flat_nz
        return data, indices, indptr, (m, n)

    def _set(self, data, indices, indptr, shape, dtype, dev):
        xp = _xp()
        for name, a in (("data", data), ("indices", indices), ("indptr", indptr)):
            if a.ndim != 1:
                raise ValueError(
                    f"csr_array: {name} must be 1-D. Received: {name}.shape={a.shape}"
                )
        if not (xp.isdtype(indices.dtype, "integral") and xp.isdtype(indptr.dtype, "integral")):
            raise TypeError(
                "csr_array: indices and indptr must have an integer dtype. Received: "
                f"indices.dtype={indices.dtype}, indptr.dtype={indptr.dtype}"
            )
        if dtype is not None and data.dtype != dtype:
            data = xp.astype(data, dtype)
        _refuse_half("csr_array", data)
        nnz = data.shape[0]
        if indptr.shape[0] < 1:
            raise ValueError("csr_array: indptr must have at least one entry. Received: "
                             "indptr.shape=(0,)")
        m = indptr.shape[0] - 1
        # sync: validation reads a few scalars back once, at construction.
        if indices.shape[0] != nnz or int(indptr[-1]) != nnz or int(indptr[0]) != 0:
            raise ValueError(
                "csr_array: expected indptr[0] == 0 and indptr[-1] == len(indices) == "
                f"len(data). Received: indptr[0]={int(indptr[0])}, "
                f"indptr[-1]={int(indptr[-1])}, len(indices)={indices.shape[0]}, len(data)={nnz}"
            )
        if m and bool(xp.any(xp.diff(indptr) < 0)):
            raise ValueError("csr_array: indptr must be non-decreasing.")
        imin = int(xp.min(indices)) if nnz else 0
        imax = int(xp.max(indices)) if nnz else -1
        if shape is None:
            shape = (m, imax + 1)
        shape = tuple(int(s) for s in shape)
        if len(shape) != 2 or shape[0] != m or min(shape) < 0:
            raise ValueError(
                "csr_array: shape must be (len(indptr) - 1, n_cols). Received: "
                f"shape={shape}, len(indptr)={m + 1}"
            )
        if imin < 0 or imax >= shape[1]:
            raise ValueError(
                f"csr_array: column indices must lie in [0, {shape[1]}). Received: "
                f"min(indices)={imin}, max(indices)={imax}"
            )
        small = max(shape[0], shape[1], nnz) < 2**31 - 1
        itype = xp.int32 if small else xp.int64
        self.data = data
        self.indices = indices if indices.dtype == itype else xp.astype(indices, itype)
        self.indptr = indptr if indptr.dtype == itype else xp.astype(indptr, itype)
        self._shape = shape
        self._device = dev
        self._transpose = None

    @classmethod
    def _from_parts(cls, data, indices, indptr, shape, dev):
        """Build without validation (the parts come from an already valid csr_array)."""
        obj = object.__new__(cls)
        obj.data, obj.indices, obj.indptr = data, indices, indptr
        obj._shape = shape
        obj._device = dev
        obj._transpose = None
        return obj

    # ---- attributes ------------------------------------------------------------

    @property
    def shape(self) -> tuple:
        return self._shape

    @property
    def dtype(self):
        return self.data.dtype

    @property
    def device(self):
        return self._device

    @property
    def nnz(self) -> int:
        """The number of stored entries (explicit zeros and duplicates included)."""
        return self.data.shape[0]

    def __repr__(self) -> str:
        return (f"<csr_array of shape {self._shape}, dtype {self.dtype}, {self.nnz} stored "
                f"entries, on {self._device}>")

    # ---- conversions ---------------------------------------------------------------

    def astype(self, dtype) -> csr_array:
        """A copy with ``data`` cast to ``dtype``."""
        xp = _xp()
        data = xp.astype(self.data, dtype)
        _refuse_half("csr_array.astype", data)
        return csr_array._from_parts(data, self.indices, self.indptr, self._shape,
                                     self._device)

    def to_device(self, device, /) -> csr_array:
        """The same matrix on ``device``."""
        dev = as_device(device, "csr_array.to_device")
        if dev is self._device:
            return self
        return csr_array._from_parts(self.data.to_device(dev), self.indices.to_device(dev),
                                     self.indptr.to_device(dev), self._shape, dev)

    def conj(self) -> csr_array:
        """The elementwise complex conjugate."""
        xp = _xp()
        if not xp.isdtype(self.dtype, "complex floating"):
            return self
        return csr_array._from_parts(xp.conj(self.data), self.indices, self.indptr,
                                     self._shape, self._device)

    def toarray(self) -> Array:
        """The dense matrix (duplicates summed), on the same device."""
        xp = _xp()
        m, n = self._shape
        eye = xp.eye(n, dtype=self.dtype, device=self._device)
        return self._spmv(eye, None) if m and n else xp.zeros(
            self._shape, dtype=self.dtype, device=self._device)

    @property
    def T(self) -> csr_array:
        """The transpose, as a csr_array (computed once, then cached)."""
        if self._transpose is None:
            self._transpose = self._transposed()
        return self._transpose

    def transpose(self) -> csr_array:
        """The transpose (see :attr:`T`)."""
        return self.T

    @property
    def H(self) -> csr_array:
        """The conjugate transpose."""
        return self.T.conj()

    def _transposed(self) -> csr_array:
        xp = _xp()
        m, n = self._shape
        dev = self._device
        itype = self.indices.dtype
        rows = xp.repeat(xp.arange(m, dtype=itype, device=dev), xp.diff(self.indptr))
        order = xp.argsort(self.indices, stable=True)
        cols_sorted = xp.take(self.indices, order)
        data_t = xp.take(self.data, order)
        indices_t = xp.take(rows, order)
        indptr_t = xp.astype(
            xp.searchsorted(cols_sorted, xp.arange(n + 1, dtype=itype, device=dev)), itype)
        return csr_array._from_parts(data_t, indices_t, indptr_t, (n, m), dev)

    # ---- products ----------------------------------------------------------------

    def _spmv(self, x: Array, variant: str | None) -> Array:
        """``self @ x`` through the registered ``spmv`` kernel of ``variant`` (None: the
        backend's ``matmul`` row of :mod:`._routing`)."""
        if x.__class__ is not Array:
            raise TypeError(
                "csr_array.__matmul__: x must be a tessera_array Array (convert NumPy "
                f"input with asarray(x, device=A.device)). Received: type(x)={type(x).__name__}"
            )
        if x._device is not self._device:
            raise ValueError(
                "csr_array.__matmul__: A and x are on different devices; use to_device() to "
                f"move one. Received: A.device={self._device}, x.device={x._device}"
            )
        if x.ndim not in (1, 2) or x.shape[0] != self._shape[1]:
            raise ValueError(
                f"csr_array.__matmul__: x must have shape ({self._shape[1]},) or "
                f"({self._shape[1]}, k). Received: A.shape={self._shape}, x.shape={x.shape}"
            )
        dt = self.data._dtype
        if x._dtype is not dt:
            xp = _xp()
            dt = xp.result_type(dt, x._dtype)
            x = xp.astype(x, dt) if x._dtype is not dt else x
            data = xp.astype(self.data, dt)._data
        else:
            data = self.data._data
        if variant is None:
            variant = _product_variant(self._device, dt)
        launcher = lookup("spmv", self._device, dt, variant)
        y = launcher(data, self.indices._data, self.indptr._data, self._shape, x._data)
        return Array._new(y, dt, self._device)

    def _native_spmv(self, variant: str):
        """``f(v) -> self @ v`` on native 1-D vectors of the data's dtype: the registered
        ``spmv`` kernel of ``variant``, looked up once (for a solver's native loop)."""
        launcher = lookup("spmv", self._device, self.data._dtype, variant)
        data, indices, indptr = self.data._data, self.indices._data, self.indptr._data
        shape = self._shape

        def spmv(v):
            return launcher(data, indices, indptr, shape, v)

        return spmv

    def __matmul__(self, other):
        if isinstance(other, csr_array):
            return NotImplemented
        return self._spmv(other, None)

    def __rmatmul__(self, other):
        # x @ A == (A.T @ x.T).T
        if other.__class__ is not Array:
            return NotImplemented
        if other.ndim == 1:
            return self.T._spmv(other, None)
        return self.T._spmv(other.mT, None).mT

    def dot(self, other):
        """``self @ other``."""
        return self @ other
