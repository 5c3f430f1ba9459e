"""The Array object: a backend-native buffer, its DType and its Device.

Operators map to the namespace functions. The common case (two arrays of one dtype
on one device, or an array and a Python scalar) takes a short path straight to the
backend; everything else goes through the namespace function, which validates
devices, promotes dtypes and raises the library's errors.

Specification: https://data-apis.org/array-api/2025.12/API_specification/array_object.html
"""

from __future__ import annotations

import os
import types

from . import _dtypes
from ._dtypes import DType
from ._errors import DeviceMismatchError, ImplicitHostCopyError

__all__ = ["Array"]

_object_new = object.__new__


def _compiled():
    """The C half of Array (tessera_array/_arrayobject.c), or None: not built, or
    TESSERA_PURE_PYTHON=1."""
    if os.environ.get("TESSERA_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from . import _arrayobject
    except ImportError:
        return None
    return _arrayobject


_C = _compiled()


class Array(_C.ArrayBase if _C is not None else object):
    """An n-dimensional array on one device.

    Arrays are made by the creation functions (``asarray``, ``zeros``, ...), never
    by calling ``Array`` directly.

    Attributes
    ----------
    dtype : DType
    device : Device
    shape : tuple of int
    ndim, size : int
    """

    # With the C half, its base holds the three fields (and the weak-reference list).
    __slots__ = () if _C is not None else ("__weakref__", "_data", "_device", "_dtype")
    # NumPy defers to our reflected operators (``ndarray + Array`` -> Array.__radd__).
    __array_priority__ = 1000.0
    __hash__ = None

    def __init__(self, *args, **kwargs):
        raise TypeError(
            "Array: arrays are not built by calling Array(); use tessera_array.asarray(obj, "
            "device=...) or another creation function."
        )

    @classmethod
    def _new(cls, data, dtype: DType, device) -> Array:
        """Wrap a native buffer (no checks; the front end's own constructor)."""
        obj = _object_new(cls)
        obj._data = data
        obj._dtype = dtype
        obj._device = device
        return obj

    # ---- attributes -------------------------------------------------------------

    @property
    def dtype(self) -> DType:
        """The array's data type."""
        return self._dtype

    @property
    def device(self):
        """The device the array lives on."""
        return self._device

    @property
    def shape(self) -> tuple:
        """The array's shape (a tuple of ints)."""
        return self._data.shape

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self._data.shape)

    @property
    def size(self) -> int:
        """The number of elements."""
        n = 1
        for s in self._data.shape:
            n *= s
        return n

    @property
    def T(self) -> Array:
        """The transpose of a 2-D array (the standard allows only 2-D)."""
        if self.ndim != 2:
            raise ValueError(
                f"Array.T: x.T is defined for 2-D arrays only; use permute_dims() or x.mT "
                f"for other ranks. Received: x.ndim={self.ndim}"
            )
        return _ns().permute_dims(self, (1, 0))

    @property
    def mT(self) -> Array:
        """The matrix transpose (the last two axes swapped)."""
        return _ns().matrix_transpose(self)

    # ---- namespace and devices -------------------------------------------------

    def __array_namespace__(self, /, *, api_version: str | None = None) -> types.ModuleType:
        if api_version is not None and api_version not in _SUPPORTED_VERSIONS:
            raise ValueError(
                f"__array_namespace__: api_version must be one of {_SUPPORTED_VERSIONS} or "
                f"None. Received: api_version={api_version!r}"
            )
        return _ns()

    def to_device(self, device, /, *, stream=None) -> Array:
        """Copy the array to ``device`` (a no-op returning ``self`` on the same device)."""
        from ._devices import as_device

        if stream is not None:
            raise ValueError(
                f"to_device: stream is not supported by the {self._device} device. "
                f"Received: stream={stream!r}"
            )
        dev = as_device(device, "to_device")
        if dev is self._device:
            return self
        be = dev._backend
        from ._helpers import check_dtype_on_device

        check_dtype_on_device(self._dtype, dev, "to_device")
        # sync: through the host unless the target backend moves buffers itself.
        host = self._device._backend.to_host(self._data)
        data = be.from_host(host, dev)
        if data is host and self._device._backend.is_host:
            data = data.copy()  # host to host: the result must not alias self
        return Array._new(data, self._dtype, dev)

    # ---- conversions -----------------------------------------------------------

    def _host_scalar(self, func: str):
        if self._data.shape != ():
            # Note: NumPy also converts other size-1 arrays; the standard allows 0-d only.
            raise TypeError(
                f"{func}: only 0-d arrays can be converted to Python scalars; index the "
                f"element first (x[0, ...]). Received: x.shape={self.shape}"
            )
        # sync: reads the value back to the host.
        return self._device._backend.to_host(self._data)[()]

    def __bool__(self) -> bool:
        return bool(self._host_scalar("__bool__"))

    def __int__(self) -> int:
        if self._dtype.kind == "c":
            raise TypeError("__int__: cannot convert a complex array to int.")
        return int(self._host_scalar("__int__"))

    def __float__(self) -> float:
        if self._dtype.kind == "c":
            raise TypeError("__float__: cannot convert a complex array to float; use real().")
        return float(self._host_scalar("__float__"))

    def __complex__(self) -> complex:
        return complex(self._host_scalar("__complex__"))

    def __index__(self) -> int:
        if self._dtype.kind not in "iu":
            raise TypeError(
                f"__index__: only integer arrays can be used as an index. "
                f"Received: x.dtype={self._dtype}"
            )
        return int(self._host_scalar("__index__"))

    def __len__(self) -> int:
        if not self._data.shape:
            raise TypeError("len() of a 0-d array")
        return self._data.shape[0]

    def __iter__(self):
        # Note: iteration is not in the standard; NumPy users expect it over axis 0.
        if not self._data.shape:
            raise TypeError("iteration over a 0-d array")
        for i in range(self._data.shape[0]):
            yield self[i]

    def __array__(self, dtype=None, copy=None):
        be = self._device._backend
        if not be.is_host:
            raise ImplicitHostCopyError(
                f"__array__: the array is on device {self._device}; tessera_array does not "
                f"copy device arrays to the host implicitly. Copy explicitly with "
                f"numpy.asarray(x.to_device('cpu')) or numpy.from_dlpack(x.to_device('cpu'))."
            )
        data = self._data
        import numpy as np

        if copy is True:
            data = np.array(data, dtype=dtype, copy=True)
        elif dtype is not None:
            data = np.asarray(data, dtype=dtype)
            if copy is False and data is not self._data:
                raise ValueError("__array__: a copy is needed to change the dtype, copy=False")
        return data

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        from ._numpy_interop import array_ufunc

        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        from ._numpy_interop import array_function

        return array_function(func, types, args, kwargs)

    def __dlpack__(self, /, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self._device._backend.dlpack(
            self._data, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy
        )

    def __dlpack_device__(self) -> tuple:
        return self._device._backend.dlpack_device(self._data)

    @property
    def __cuda_array_interface__(self) -> dict:
        """The native buffer's CUDA Array Interface (version 3): zero-copy for Numba,
        CuPy and PyTorch. Only arrays on CUDA devices have it (AttributeError elsewhere,
        so ``hasattr`` tells)."""
        try:
            return self._data.__cuda_array_interface__
        except AttributeError:
            raise AttributeError(
                f"__cuda_array_interface__: only arrays on CUDA devices export it. "
                f"Received: an array on {self._device}"
            ) from None

    def __repr__(self) -> str:
        be = self._device._backend
        if be is not None and be.is_host:
            import numpy as np

            body = np.array2string(np.asarray(self._data), separator=", ", prefix="Array(")
        else:
            body = f"<{self.shape} on {self._device}>"
        dev = "" if str(self._device) == "cpu" else f", device={self._device}"
        return f"Array({body}, dtype={self._dtype}{dev})"

    __str__ = __repr__

    def __getstate__(self):
        return {"host": self._device._backend.to_host(self._data), "device": str(self._device)}

    def __setstate__(self, state):
        from ._devices import as_device

        dev = as_device(state["device"], "Array.__setstate__")
        self._data = dev._backend.from_host(state["host"], dev)
        self._dtype = dev._backend.native_dtype(self._data)
        self._device = dev

    def __reduce__(self):
        return (_unpickle, (self.__getstate__(),))

    # ---- indexing ------------------------------------------------------------

    def __getitem__(self, key, /) -> Array:
        # x[i] (in bounds) and x[a:b] on an array of 1+ dims: without the general key
        # handling of _indexing.getitem; where the device's buffers give the result as a
        # view themselves (dev.views: NumPy, CuPy) without the backend's getitem either
        # (x[i] 850 -> 350 ns on the NumPy backend: benchmarks/NOTES.md).
        cls = key.__class__
        if cls is int or cls is slice:
            data = self._data
            shape = data.shape
            if shape and (cls is slice or -shape[0] <= key < shape[0]):
                dev = self._device
                if dev.views:
                    out = data[key, ...] if cls is int else data[key]
                else:
                    out = dev.ops.getitem(data, key)
                obj = _object_new(Array)
                obj._data = out
                obj._dtype = self._dtype
                obj._device = dev
                return obj
        return _getitem(self, key)

    def __setitem__(self, key, value, /) -> None:
        _setitem(self, key, value)

    # ---- operators -----------------------------------------------------------

    # Each operator's first branch is the hot path: an Array of the same dtype and
    # device (and, where the op needs it, a dtype kind whose result keeps the
    # dtype) goes straight to the backend op. A native failure (a floating-point
    # warning raised as an error, a bad value) is left to the namespace function,
    # which words the error or reruns quietly; scalars, promotion and every other
    # case go there too.
    #
    # Written out per operator, on purpose: a factory-made operator has to fetch the
    # backend op with getattr(dev.ops, name), which costs one more call per use.
    # Measured (x + y, two float64 arrays of shape (1,), min over 15 interleaved
    # rounds of timeit, NumPy 2.4, Python 3.11, 2-core x86 host):
    #
    #     numpy  a + b                   435 ns    1.00x
    #     written out (this code)        827 ns    1.90x
    #     factory with getattr           947 ns    2.18x
    #
    # The overhead target for add at size 1 is <= 2.0x NumPy, which only the
    # written-out form meets.

    def __add__(self, other, /) -> Array:
        """``self + other``: see :func:`tessera_array.add`."""
        if other.__class__ is Array:
            dt = self._dtype
            dev = self._device
            if other._dtype is dt and other._device is dev:
                a = self._data
                try:
                    r = dev.ops.add(a, other._data)
                except _NATIVE_ERRORS:
                    return _ns().add(self, other)
                if r.__class__ is not a.__class__:
                    r = dev._backend.coerce_native(r)
                obj = _object_new(Array)
                obj._data = r
                obj._dtype = dt
                obj._device = dev
                return obj
            return _ns().add(self, other)
        if other.__class__ in _SCALARS or _is_operand(other):
            return _ns().add(self, other)
        return NotImplemented

    def __sub__(self, other, /) -> Array:
        """``self - other``: see :func:`tessera_array.subtract`."""
        if other.__class__ is Array:
            dt = self._dtype
            dev = self._device
            if other._dtype is dt and other._device is dev and dt.kind in "iufc":
                a = self._data
                try:
                    r = dev.ops.subtract(a, other._data)
                except _NATIVE_ERRORS:
                    return _ns().subtract(self, other)
                if r.__class__ is not a.__class__:
                    r = dev._backend.coerce_native(r)
                obj = _object_new(Array)
                obj._data = r
                obj._dtype = dt
                obj._device = dev
                return obj
            return _ns().subtract(self, other)
        if other.__class__ in _SCALARS or _is_operand(other):
            return _ns().subtract(self, other)
        return NotImplemented

    def __mul__(self, other, /) -> Array:
        """``self * other``: see :func:`tessera_array.multiply`."""
        if other.__class__ is Array:
            dt = self._dtype
            dev = self._device
            if other._dtype is dt and other._device is dev:
                a = self._data
                try:
                    r = dev.ops.multiply(a, other._data)
                except _NATIVE_ERRORS:
                    return _ns().multiply(self, other)
                if r.__class__ is not a.__class__:
                    r = dev._backend.coerce_native(r)
                obj = _object_new(Array)
                obj._data = r
                obj._dtype = dt
                obj._device = dev
                return obj
            return _ns().multiply(self, other)
        if other.__class__ in _SCALARS or _is_operand(other):
            return _ns().multiply(self, other)
        return NotImplemented

    def __truediv__(self, other, /) -> Array:
        """``self / other``: see :func:`tessera_array.divide`."""
        if other.__class__ is Array:
            dt = self._dtype
            dev = self._device
            if other._dtype is dt and other._device is dev and dt.kind in "fc":
                a = self._data
                try:
                    r = dev.ops.divide(a, other._data)
                except _NATIVE_ERRORS:
                    return _ns().divide(self, other)
                if r.__class__ is not a.__class__:
                    r = dev._backend.coerce_native(r)
                obj = _object_new(Array)
                obj._data = r
                obj._dtype = dt
                obj._device = dev
                return obj
            return _ns().divide(self, other)
        if other.__class__ in _SCALARS or _is_operand(other):
            return _ns().divide(self, other)
        return NotImplemented

    def __floordiv__(self, other, /) -> Array:
        """``self // other``: see :func:`tessera_array.floor_divide`."""
        if other.__class__ is Array:
            dt = self._dtype
            dev = self._device
            if other._dtype is dt and other._device is dev and dt.kind in "iuf":
                a = self._data
                try:
                    r = dev.ops.floor_divide(a, other._data)
                except _NATIVE_ERRORS:
                    return _ns().floor_divide(self, other)
                if r.__class__ is not a.__class__:
                    r = dev._backend.coerce_native(r)
                obj = _object_new(Array)
                obj._data = r
                obj._dtype = dt
                obj._device = dev
                return obj
            return _ns().floor_divide(self, other)
        if other.__class__ in _SCALARS or _is_operand(other):
            return _ns().floor_divide(self, other)
        return NotImplemented

    def __mod__(self, other, /) -> Array:
        """``self % other``: see :func:`tessera_array.remainder`."""
        if other.__class__ is Array:
            dt = self._dtype
            dev = self._device
            if other._dtype is dt and other._device is dev and dt.kind in "iuf":
                a = self._data
                try:
                    r = dev.ops.remainder(a, other._data)
                except _NATIVE_ERRORS:
                    return _ns().remainder(self, other)
                if r.__class__ is not a.__class__:
                    r = dev._backend.coerce_native(r)
                obj = _object_new(Array)
                obj._data = r
                obj._dtype = dt
                obj._device = dev
                return obj
            return _ns().remainder(self, other)
        if other.__class__ in _SCALARS or _is_operand(other):
            return _ns().remainder(self, other)
        return NotImplemented

    def __pow__(self, other, /) -> Array:
        """``self ** other``: see :func:`tessera_array.pow`."""
        if other.__class__ is Array:
            dt = self._dtype
            dev = self._device
            if other._dtype is dt and other._device is dev and dt.kind in "iufc":
                a = self._data
                try:
                    r = dev.ops.pow(a, other._data)
                except _NATIVE_ERRORS:
                    return _ns().pow(self, other)
                if r.__class__ is not a.__class__:
                    r = dev._backend.coerce_native(r)
                obj = _object_new(Array)
                obj._data = r
                obj._dtype = dt
                obj._device = dev
                return obj
            return _ns().pow(self, other)
        if other.__class__ in _SCALARS or _is_operand(other):
            return _ns().pow(self, other)
        return NotImplemented

    def __and__(self, other, /) -> Array:
        """``self & other``: see :func:`tessera_array.bitwise_and`."""
        if other.__class__ is Array:
            dt = self._dtype
            dev = self._device
            if other._dtype is dt and other._device is dev and dt.kind in "biu":
                a = self._data
                try:
                    r = dev.ops.bitwise_and(a, other._data)
                except _NATIVE_ERRORS:
                    return _ns().bitwise_and(self, other)
                if r.__class__ is not a.__class__:
                    r = dev._backend.coerce_native(r)
                obj = _object_new(Array)
                obj._data = r
                obj._dtype = dt
                obj._device = dev
                return obj
            return _ns().bitwise_and(self, other)
        if other.__class__ in _SCALARS or _is_operand(other):
            return _ns().bitwise_and(self, other)
        return NotImplemented

    def __or__(self, other, /) -> Array:
        """``self | other``: see :func:`tessera_array.bitwise_or`."""
        if other.__class__ is Array:
            dt = self._dtype
            dev = self._device
            if other._dtype is dt and other._device is dev and dt.kind in "biu":
                a = self._data
                try:
                    r = dev.ops.bitwise_or(a, other._data)
                except _NATIVE_ERRORS:
                    return _ns().bitwise_or(self, other)
                if r.__class__ is not a.__class__:
                    r = dev._backend.coerce_native(r)
                obj = _object_new(Array)
                obj._data = r
                obj._dtype = dt
                obj._device = dev
                return obj
            return _ns().bitwise_or(self, other)
        if other.__class__ in _SCALARS or _is_operand(other):
            return _ns().bitwise_or(self, other)
        return NotImplemented

    def __xor__(self, other, /) -> Array:
        """``self ^ other``: see :func:`tessera_array.bitwise_xor`."""
        if other.__class__ is Array:
            dt = self._dtype
            dev = self._device
            if other._dtype is dt and other._device is dev and dt.kind in "biu":
                a = self._data
                try:
                    r = dev.ops.bitwise_xor(a, other._data)
                except _NATIVE_ERRORS:
                    return _ns().bitwise_xor(self, other)
                if r.__class__ is not a.__class__:
                    r = dev._backend.coerce_native(r)
                obj = _object_new(Array)
                obj._data = r
                obj._dtype = dt
                obj._device = dev
                return obj
            return _ns().bitwise_xor(self, other)
        if other.__class__ in _SCALARS or _is_operand(other):
            return _ns().bitwise_xor(self, other)
        return NotImplemented

    def __lshift__(self, other, /) -> Array:
        """``self << other``: see :func:`tessera_array.bitwise_left_shift`."""
        if other.__class__ is Array:
            dt = self._dtype
            dev = self._device
            if other._dtype is dt and other._device is dev and dt.kind in "iu":
                a = self._data
                try:
                    r = dev.ops.bitwise_left_shift(a, other._data)
                except _NATIVE_ERRORS:
                    return _ns().bitwise_left_shift(self, other)
                if r.__class__ is not a.__class__:
                    r = dev._backend.coerce_native(r)
                obj = _object_new(Array)
                obj._data = r
                obj._dtype = dt
                obj._device = dev
                return obj
            return _ns().bitwise_left_shift(self, other)
        if other.__class__ in _SCALARS or _is_operand(other):
            return _ns().bitwise_left_shift(self, other)
        return NotImplemented

    def __rshift__(self, other, /) -> Array:
        """``self >> other``: see :func:`tessera_array.bitwise_right_shift`."""
        if other.__class__ is Array:
            dt = self._dtype
            dev = self._device
            if other._dtype is dt and other._device is dev and dt.kind in "iu":
                a = self._data
                try:
                    r = dev.ops.bitwise_right_shift(a, other._data)
                except _NATIVE_ERRORS:
                    return _ns().bitwise_right_shift(self, other)
                if r.__class__ is not a.__class__:
                    r = dev._backend.coerce_native(r)
                obj = _object_new(Array)
                obj._data = r
                obj._dtype = dt
                obj._device = dev
                return obj
            return _ns().bitwise_right_shift(self, other)
        if other.__class__ in _SCALARS or _is_operand(other):
            return _ns().bitwise_right_shift(self, other)
        return NotImplemented

    def __eq__(self, other, /) -> Array:
        """``self == other``: see :func:`tessera_array.equal`."""
        if other.__class__ is Array:
            dt = self._dtype
            dev = self._device
            if other._dtype is dt and other._device is dev:
                a = self._data
                try:
                    r = dev.ops.equal(a, other._data)
                except _NATIVE_ERRORS:
                    return _ns().equal(self, other)
                if r.__class__ is not a.__class__:
                    r = dev._backend.coerce_native(r)
                obj = _object_new(Array)
                obj._data = r
                obj._dtype = _BOOL
                obj._device = dev
                return obj
            return _ns().equal(self, other)
        if other.__class__ in _SCALARS or _is_operand(other):
            return _ns().equal(self, other)
        return NotImplemented

    def __ne__(self, other, /) -> Array:
        """``self != other``: see :func:`tessera_array.not_equal`."""
        if other.__class__ is Array:
            dt = self._dtype
            dev = self._device
            if other._dtype is dt and other._device is dev:
                a = self._data
                try:
                    r = dev.ops.not_equal(a, other._data)
                except _NATIVE_ERRORS:
                    return _ns().not_equal(self, other)
                if r.__class__ is not a.__class__:
                    r = dev._backend.coerce_native(r)
                obj = _object_new(Array)
                obj._data = r
                obj._dtype = _BOOL
                obj._device = dev
                return obj
            return _ns().not_equal(self, other)
        if other.__class__ in _SCALARS or _is_operand(other):
            return _ns().not_equal(self, other)
        return NotImplemented

    def __lt__(self, other, /) -> Array:
        """``self < other``: see :func:`tessera_array.less`."""
        if other.__class__ is Array:
            dt = self._dtype
            dev = self._device
            if other._dtype is dt and other._device is dev:
                a = self._data
                try:
                    r = dev.ops.less(a, other._data)
                except _NATIVE_ERRORS:
                    return _ns().less(self, other)
                if r.__class__ is not a.__class__:
                    r = dev._backend.coerce_native(r)
                obj = _object_new(Array)
                obj._data = r
                obj._dtype = _BOOL
                obj._device = dev
                return obj
            return _ns().less(self, other)
        if other.__class__ in _SCALARS or _is_operand(other):
            return _ns().less(self, other)
        return NotImplemented

    def __le__(self, other, /) -> Array:
        """``self <= other``: see :func:`tessera_array.less_equal`."""
        if other.__class__ is Array:
            dt = self._dtype
            dev = self._device
            if other._dtype is dt and other._device is dev:
                a = self._data
                try:
                    r = dev.ops.less_equal(a, other._data)
                except _NATIVE_ERRORS:
                    return _ns().less_equal(self, other)
                if r.__class__ is not a.__class__:
                    r = dev._backend.coerce_native(r)
                obj = _object_new(Array)
                obj._data = r
                obj._dtype = _BOOL
                obj._device = dev
                return obj
            return _ns().less_equal(self, other)
        if other.__class__ in _SCALARS or _is_operand(other):
            return _ns().less_equal(self, other)
        return NotImplemented

    def __gt__(self, other, /) -> Array:
        """``self > other``: see :func:`tessera_array.greater`."""
        if other.__class__ is Array:
            dt = self._dtype
            dev = self._device
            if other._dtype is dt and other._device is dev:
                a = self._data
                try:
                    r = dev.ops.greater(a, other._data)
                except _NATIVE_ERRORS:
                    return _ns().greater(self, other)
                if r.__class__ is not a.__class__:
                    r = dev._backend.coerce_native(r)
                obj = _object_new(Array)
                obj._data = r
                obj._dtype = _BOOL
                obj._device = dev
                return obj
            return _ns().greater(self, other)
        if other.__class__ in _SCALARS or _is_operand(other):
            return _ns().greater(self, other)
        return NotImplemented

    def __ge__(self, other, /) -> Array:
        """``self >= other``: see :func:`tessera_array.greater_equal`."""
        if other.__class__ is Array:
            dt = self._dtype
            dev = self._device
            if other._dtype is dt and other._device is dev:
                a = self._data
                try:
                    r = dev.ops.greater_equal(a, other._data)
                except _NATIVE_ERRORS:
                    return _ns().greater_equal(self, other)
                if r.__class__ is not a.__class__:
                    r = dev._backend.coerce_native(r)
                obj = _object_new(Array)
                obj._data = r
                obj._dtype = _BOOL
                obj._device = dev
                return obj
            return _ns().greater_equal(self, other)
        if other.__class__ in _SCALARS or _is_operand(other):
            return _ns().greater_equal(self, other)
        return NotImplemented

    def __neg__(self) -> Array:
        """``-self``: see :func:`tessera_array.negative`."""
        dt = self._dtype
        if dt.kind in "iufc":
            dev = self._device
            a = self._data
            try:
                r = dev.ops.negative(a)
            except _NATIVE_ERRORS:
                return _ns().negative(self)
            if r.__class__ is not a.__class__:
                r = dev._backend.coerce_native(r)
            obj = _object_new(Array)
            obj._data = r
            obj._dtype = dt
            obj._device = dev
            return obj
        return _ns().negative(self)

    def __pos__(self) -> Array:
        """``+self``: see :func:`tessera_array.positive`."""
        dt = self._dtype
        if dt.kind in "iufc":
            dev = self._device
            a = self._data
            try:
                r = dev.ops.positive(a)
            except _NATIVE_ERRORS:
                return _ns().positive(self)
            if r.__class__ is not a.__class__:
                r = dev._backend.coerce_native(r)
            obj = _object_new(Array)
            obj._data = r
            obj._dtype = dt
            obj._device = dev
            return obj
        return _ns().positive(self)

    def __abs__(self) -> Array:
        """``abs(self)``: see :func:`tessera_array.abs`."""
        dt = self._dtype
        if dt.kind in "biuf":
            dev = self._device
            a = self._data
            try:
                r = dev.ops.abs(a)
            except _NATIVE_ERRORS:
                return _ns().abs(self)
            if r.__class__ is not a.__class__:
                r = dev._backend.coerce_native(r)
            obj = _object_new(Array)
            obj._data = r
            obj._dtype = dt
            obj._device = dev
            return obj
        return _ns().abs(self)

    def __invert__(self) -> Array:
        """``~self``: see :func:`tessera_array.bitwise_invert`."""
        dt = self._dtype
        if dt.kind in "biu":
            dev = self._device
            a = self._data
            try:
                r = dev.ops.bitwise_invert(a)
            except _NATIVE_ERRORS:
                return _ns().bitwise_invert(self)
            if r.__class__ is not a.__class__:
                r = dev._backend.coerce_native(r)
            obj = _object_new(Array)
            obj._data = r
            obj._dtype = dt
            obj._device = dev
            return obj
        return _ns().bitwise_invert(self)

    def __matmul__(self, other, /) -> Array:
        if other.__class__ is not Array and not isinstance(other, Array):
            # Let the other operand answer first (``x @ A`` for a tessera csr_array or a
            # LinearOperator); a type nobody handles ends in Python's TypeError.
            return NotImplemented
        return _ns().matmul(self, other)

    def __rmatmul__(self, other, /) -> Array:
        if other.__class__ is not Array and not isinstance(other, Array):
            return NotImplemented
        return _ns().matmul(other, self)

    def __imatmul__(self, other, /) -> Array:
        return self._inplace("__imatmul__", _ns().matmul(self, other))

    def _inplace(self, func: str, result: Array) -> Array:
        """Write ``result`` into self: the dtype and shape of self may not change."""
        if result._dtype is not self._dtype:
            raise TypeError(
                f"{func}: the in-place result would have dtype {result._dtype}, but x1 has "
                f"dtype {self._dtype}; in-place operators cannot change an array's dtype."
            )
        if result.shape != self.shape:
            raise ValueError(
                f"{func}: the in-place result would have shape {result.shape}, but x1 has "
                f"shape {self.shape}; in-place operators cannot change an array's shape."
            )
        self._device.ops.copy_into(self._data, result._data)
        return self


def _make_reflected(opname: str, nsname: str):
    """Build the reflected operator: ``other <op> self`` for a scalar ``other``."""

    func = None  # the namespace function, looked up on first use

    def op(self, other, /):
        nonlocal func
        if other.__class__ in _SCALARS or other.__class__ is Array or _is_operand(other):
            if func is None:
                func = getattr(_ns(), nsname)
            return func(other, self)
        return NotImplemented

    op.__name__ = opname
    op.__qualname__ = f"Array.{opname}"
    op.__doc__ = f"``other {_SYMBOLS[nsname]} self``: see :func:`tessera_array.{nsname}`."
    return op


def _make_inplace(opname: str, nsname: str, forward):
    """Build ``opname`` (``x1 op= x2``): ``x1 op x2`` written back into x1.

    The standard's rule: the result must keep x1's dtype and shape (TypeError /
    ValueError otherwise), and x1's buffer is updated, so views of it see the change.
    """

    kinds = _INPLACE_KINDS.get(nsname)

    def op(self, other, /):
        if kinds is not None:
            # Short path: compute straight into x1's buffer when the result keeps
            # x1's dtype (x2 an Array of that dtype on x1's device, or a Python
            # scalar of a kind x1 holds), as NumPy's ``a += b`` does: no temporary for
            # the result, and views of x1 see the update.
            dt = self._dtype
            kind = dt.kind
            if kind in kinds:
                cls = other.__class__
                if cls is Array:
                    if (other._dtype is dt and other._device is self._device
                            and self._device.ops.inplace(nsname, self._data, other._data)):
                        return self
                elif (((cls is float and kind in "fc") or (cls is complex and kind == "c"))
                        and self._device.ops.inplace(nsname, self._data, other)):
                    return self
        result = forward(self, other)
        if result is NotImplemented:
            # Another library's array, or an unsupported type: refuse here, rather
            # than let Python rebind x1 to whatever ``x1 op x2`` gives.
            result = getattr(_ns(), nsname)(self, other)
        return self._inplace(opname, result)

    op.__name__ = opname
    op.__qualname__ = f"Array.{opname}"
    op.__doc__ = f"``self {_SYMBOLS[nsname]}= other``: x1's dtype and shape are kept."
    return op


def _is_operand(obj) -> bool:
    """True for the non-Array operands an operator accepts: Python and NumPy scalars."""
    cls = obj.__class__
    if cls in _SCALARS:
        return True
    if cls.__module__ == "numpy":
        import numpy as np

        return isinstance(obj, np.generic)
    if hasattr(obj, "__array_namespace__") or hasattr(obj, "__array_ufunc__"):
        return False  # another library's array: let it handle the operator
    return isinstance(obj, (bool, int, float, complex))


_SCALARS = frozenset({bool, int, float, complex})
_BOOL = _dtypes.bool
# In-place operators with a short path (ops.inplace), and the dtype kinds of x1 for
# which ``x1 op x2`` keeps x1's dtype when x2 has it too.
_INPLACE_KINDS = {"add": "iufc", "subtract": "iufc", "multiply": "iufc", "divide": "fc"}
# What a backend op may raise on the hot path; the namespace function then words
# the error, or reruns the op quietly for a floating-point warning made an error.
_NATIVE_ERRORS = (Warning, ArithmeticError, ValueError, TypeError)

_SYMBOLS = {
    "add": "+", "subtract": "-", "multiply": "*", "divide": "/", "floor_divide": "//",
    "remainder": "%", "pow": "**", "bitwise_and": "&", "bitwise_or": "|",
    "bitwise_xor": "^", "bitwise_left_shift": "<<", "bitwise_right_shift": ">>",
    "equal": "==", "not_equal": "!=", "less": "<", "less_equal": "<=", "greater": ">",
    "greater_equal": ">=",
}

# (operator stem, namespace function): reflected and in-place operators are built
# from these; the forward operators are methods of Array above.
_BINARY = (
    ("add", "add"),
    ("sub", "subtract"),
    ("mul", "multiply"),
    ("truediv", "divide"),
    ("floordiv", "floor_divide"),
    ("mod", "remainder"),
    ("pow", "pow"),
    ("and", "bitwise_and"),
    ("or", "bitwise_or"),
    ("xor", "bitwise_xor"),
    ("lshift", "bitwise_left_shift"),
    ("rshift", "bitwise_right_shift"),
)

for _stem, _fn in _BINARY:
    setattr(Array, f"__r{_stem}__", _make_reflected(f"__r{_stem}__", _fn))
    _forward = getattr(Array, f"__{_stem}__")
    setattr(Array, f"__i{_stem}__", _make_inplace(f"__i{_stem}__", _fn, _forward))
del _stem, _fn, _forward

# The operators with a short path in C (their order: _arrayobject.OPS): the stem of
# their methods, and the DType kinds the method's short path takes (None: every kind).
# Beside each method above the same kinds are written out; tests/test_arrayobject.py
# checks the two halves give the same results and errors for every dtype.
_COMPILED_OPERATORS = {
    "add": ("add", None), "subtract": ("sub", "iufc"), "multiply": ("mul", None),
    "divide": ("truediv", "fc"), "floor_divide": ("floordiv", "iuf"),
    "remainder": ("mod", "iuf"), "bitwise_and": ("and", "biu"), "bitwise_or": ("or", "biu"),
    "bitwise_xor": ("xor", "biu"), "bitwise_left_shift": ("lshift", "iu"),
    "bitwise_right_shift": ("rshift", "iu"), "less": ("lt", None),
    "less_equal": ("le", None), "equal": ("eq", None), "not_equal": ("ne", None),
    "greater": ("gt", None), "greater_equal": ("ge", None),
    "negative": ("neg", "iufc"), "positive": ("pos", "iufc"), "abs": ("abs", "biuf"),
    "bitwise_invert": ("invert", "biu"),
}
_COMPARISONS = ("lt", "le", "eq", "ne", "gt", "ge")
_UNARY = ("neg", "pos", "abs", "invert")


def _dtypes_of(kinds):
    """The DTypes of the kinds (a string of DType.kind letters); None stays None."""
    if kinds is None:
        return None
    return tuple(d for d in _dtypes.ALL_DTYPES if d.kind in kinds)


def _install_compiled(c) -> dict:
    """Hand the Python operators to the C half as its fallbacks, and take them off the
    class, so that the C slots answer (a Python ``__add__`` in the class would shadow
    them). Returns the Python methods, by name (for the tests)."""
    table = []
    methods = {}
    for name in c.OPS:
        stem, kinds = _COMPILED_OPERATORS[name]
        forward = Array.__dict__[f"__{stem}__"]
        methods[f"__{stem}__"] = forward
        if stem in _COMPARISONS:
            reflected, result = None, _BOOL
        elif stem in _UNARY:
            reflected, result = None, None
        else:
            reflected, result = Array.__dict__[f"__r{stem}__"], None
            methods[f"__r{stem}__"] = reflected
        table.append((name, _dtypes_of(kinds), result, forward, reflected))
    methods["__getitem__"] = Array.__dict__["__getitem__"]
    c.install(Array, tuple(table), _NATIVE_ERRORS, methods["__getitem__"])
    for method in methods:
        delattr(Array, method)
    return methods


PYTHON_METHODS = _install_compiled(_C) if _C is not None else {}

_SUPPORTED_VERSIONS = ("2021.12", "2022.12", "2023.12", "2024.12", "2025.12")

_namespace = None


def _ns():
    global _namespace
    if _namespace is None:
        import tessera_array

        _namespace = tessera_array
    return _namespace


def _unpickle(state):
    obj = _object_new(Array)
    obj.__setstate__(state)
    return obj


def check_same_device(func: str, *arrays) -> None:
    """DeviceMismatchError naming both devices when arrays do not share one."""
    first = None
    for a in arrays:
        if a.__class__ is not Array:
            continue
        if first is None:
            first = a
        elif a._device is not first._device:
            raise DeviceMismatchError(
                f"{func}: arrays are on different devices. Received: devices {first._device} "
                f"and {a._device}. Use to_device() to move one."
            )


# Bound after the class exists: _indexing imports Array from this module.
from ._indexing import getitem as _getitem
from ._indexing import setitem as _setitem

from ._numpy_methods import install as _install_numpy_methods  # noqa: E402

_install_numpy_methods(Array)
