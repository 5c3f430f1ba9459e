"""The Array object: a backend-native buffer, its DType and its Device.

Operators map to the namespace functions. The common case (two arrays of one dtype
on one device, or an array and a Python scalar) takes a short path straight to the
backend; everything else goes through the namespace function, which validates
devices, promotes dtypes and raises the library's errors.

Specification: https://data-apis.org/array-api/2025.12/API_specification/array_object.html
"""

from __future__ import annotations

import types

from . import _dtypes
from ._dtypes import DType
from ._errors import DeviceMismatchError, ImplicitHostCopyError

__all__ = ["Array"]

_object_new = object.__new__


class Array:
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

    __slots__ = ("_data", "_dtype", "_device", "__weakref__")
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
        host = self._device._backend.to_host(self._data)
        data = dev._backend.from_host(host, dev)
        return Array._new(data, self._dtype, dev)

    # ---- conversions -----------------------------------------------------------

    def _host_scalar(self, func: str):
        if self._data.shape != () and self.size != 1:
            raise TypeError(
                f"{func}: only arrays with one element can be converted to Python scalars. "
                f"Received: x.shape={self.shape}"
            )
        if self._data.shape != ():
            raise TypeError(
                f"{func}: only 0-d arrays can be converted to Python scalars. "
                f"Received: x.shape={self.shape}"
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
        from ._indexing import getitem

        return getitem(self, key)

    def __setitem__(self, key, value, /) -> None:
        from ._indexing import setitem

        setitem(self, key, value)

    # ---- operators -----------------------------------------------------------

    def __neg__(self) -> Array:
        return _ns().negative(self)

    def __pos__(self) -> Array:
        return _ns().positive(self)

    def __abs__(self) -> Array:
        return _ns().abs(self)

    def __invert__(self) -> Array:
        return _ns().bitwise_invert(self)

    def __matmul__(self, other, /) -> Array:
        return _ns().matmul(self, other)

    def __rmatmul__(self, other, /) -> Array:
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


def _make_binary(opname: str, nsname: str, reflected: bool, bool_result: bool):
    """Build the forward/reflected operator for ``nsname``.

    Fast path: both operands are Arrays of one dtype on one device, or the other
    operand is a Python scalar; anything else goes to the namespace function, which
    raises the library's errors.
    """
    if reflected:
        def op(self, other, /):
            if other.__class__ is Array:
                return getattr(_ns(), nsname)(other, self)
            if other.__class__ in _SCALARS:
                return _scalar_binary(nsname, other, self, True)
            return NotImplemented
    else:
        def op(self, other, /):
            if other.__class__ is Array:
                if other._dtype is self._dtype and other._device is self._device:
                    r = getattr(self._device.ops, nsname)(self._data, other._data)
                    dev = self._device
                    if r.__class__ is not dev._backend.native_type:
                        r = dev._backend.coerce_native(r)
                    return Array._new(r, _dtypes.bool if bool_result else
                                      dev._backend.native_dtype(r), dev)
                return getattr(_ns(), nsname)(self, other)
            if other.__class__ in _SCALARS:
                return _scalar_binary(nsname, self, other, False)
            if _is_foreign_array(other):
                return NotImplemented
            if isinstance(other, (bool, int, float, complex)):
                return _scalar_binary(nsname, self, other, False)
            return NotImplemented
    op.__name__ = opname
    op.__qualname__ = f"Array.{opname}"
    op.__doc__ = f"``self {opname}`` other: see :func:`tessera_array.{nsname}`."
    return op


def _make_inplace(opname: str, nsname: str):
    def op(self, other, /):
        return self._inplace(opname, getattr(_ns(), nsname)(self, other))

    op.__name__ = opname
    op.__qualname__ = f"Array.{opname}"
    op.__doc__ = f"In-place :func:`tessera_array.{nsname}`; x1's dtype and shape are kept."
    return op


def _scalar_binary(nsname: str, x1, x2, reflected: bool):
    return getattr(_ns(), nsname)(x1, x2)


def _is_foreign_array(obj) -> bool:
    return hasattr(obj, "__array_namespace__") or hasattr(obj, "__array_ufunc__")


_SCALARS = frozenset({bool, int, float, complex})

# (operator stem, namespace function, returns bool)
_BINARY = (
    ("add", "add", False),
    ("sub", "subtract", False),
    ("mul", "multiply", False),
    ("truediv", "divide", False),
    ("floordiv", "floor_divide", False),
    ("mod", "remainder", False),
    ("pow", "pow", False),
    ("and", "bitwise_and", False),
    ("or", "bitwise_or", False),
    ("xor", "bitwise_xor", False),
    ("lshift", "bitwise_left_shift", False),
    ("rshift", "bitwise_right_shift", False),
)
_COMPARE = (
    ("eq", "equal"),
    ("ne", "not_equal"),
    ("lt", "less"),
    ("le", "less_equal"),
    ("gt", "greater"),
    ("ge", "greater_equal"),
)

for _stem, _fn, _b in _BINARY:
    setattr(Array, f"__{_stem}__", _make_binary(f"__{_stem}__", _fn, False, _b))
    setattr(Array, f"__r{_stem}__", _make_binary(f"__r{_stem}__", _fn, True, _b))
    setattr(Array, f"__i{_stem}__", _make_inplace(f"__i{_stem}__", _fn))
for _stem, _fn in _COMPARE:
    setattr(Array, f"__{_stem}__", _make_binary(f"__{_stem}__", _fn, False, True))
del _stem, _fn, _b

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
