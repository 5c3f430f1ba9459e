"""Data types and the type-promotion table.

A :class:`DType` is backend-neutral: a name, a kind and a size. Every backend maps
it to its native dtype. NumPy is a hard dependency (it is the embedded CPU backend
and the host format), so each DType also carries the matching ``numpy.dtype``.

Besides the standard's thirteen dtypes there are two extension dtypes, ``float16``
and ``bfloat16`` (:data:`EXTENSION_DTYPES`). Their kind is real floating (``"f"``),
so ``isdtype(float16, "real floating")`` holds (as for PyTorch through
array-api-compat), but they stay out of :data:`ALL_DTYPES` and of the groups that
register kernels (:data:`REAL_FLOATING`, :data:`FLOATING` ...): a kernel is never
registered for them by accident. bfloat16's NumPy dtype comes from ``ml_dtypes``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = [
    "DType",
    "bfloat16",
    "bool",
    "complex64",
    "complex128",
    "float16",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
]

_builtin_bool = bool


class DType:
    """An array data type of the Array API standard.

    Attributes
    ----------
    name : str
        The standard's name, e.g. ``"float32"``.
    kind : str
        ``"b"`` boolean, ``"i"`` signed integer, ``"u"`` unsigned integer,
        ``"f"`` real floating, ``"c"`` complex floating.
    bits : int
        Size of one element in bits.
    """

    __slots__ = ("__weakref__", "_np", "bits", "kind", "name")

    def __init__(self, name: str, kind: str, bits: int, native=None):
        self.name = name
        self.kind = kind
        self.bits = bits
        self._np = np.dtype(name if native is None else native)

    def __repr__(self) -> str:
        return f"tessera_array.{self.name}"

    def __str__(self) -> str:
        return self.name

    def __eq__(self, other) -> _builtin_bool:
        if other.__class__ is DType:
            return self is other
        # Note: an extension for NumPy users: ``x.dtype == np.float32`` and
        # ``x.dtype == "float32"`` hold, as they do for NumPy and CuPy arrays.
        if isinstance(other, (str, np.dtype, type)):
            try:
                return self._np == np.dtype(other)
            except (TypeError, ValueError):  # e.g. "a, b" parses as a bad record format
                return False
        return NotImplemented

    def __ne__(self, other) -> _builtin_bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        return hash(self._np)

    def __reduce__(self):
        return (_by_name, (self.name,))

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.bits // 8

    @property
    def type(self) -> type:
        """NumPy's scalar type of this dtype (``numpy.float64``), as ``numpy.dtype.type``."""
        return self._np.type

    @property
    def __numpy_dtype__(self) -> np.dtype:
        """The NumPy dtype, so that ``numpy.dtype(xp.float64)`` and NumPy's functions taking
        ``dtype=`` accept tessera's dtypes (as they accept NumPy's scalar types); libraries
        built on NumPy's dtypes (Dask's meta arrays, pandas) need it."""
        return self._np


bool = DType("bool", "b", 8)
int8 = DType("int8", "i", 8)
int16 = DType("int16", "i", 16)
int32 = DType("int32", "i", 32)
int64 = DType("int64", "i", 64)
uint8 = DType("uint8", "u", 8)
uint16 = DType("uint16", "u", 16)
uint32 = DType("uint32", "u", 32)
uint64 = DType("uint64", "u", 64)
float32 = DType("float32", "f", 32)
float64 = DType("float64", "f", 64)
complex64 = DType("complex64", "c", 64)
complex128 = DType("complex128", "c", 128)
# Extension dtypes, outside the standard (see the module docstring).
float16 = DType("float16", "f", 16)
bfloat16 = DType("bfloat16", "f", 16, ml_dtypes.bfloat16)

ALL_DTYPES = (
    bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64,
    float32, float64, complex64, complex128,
)
"""The standard's dtypes (what ``__array_namespace_info__().dtypes()`` lists)."""
SIGNED_INTEGER = (int8, int16, int32, int64)
UNSIGNED_INTEGER = (uint8, uint16, uint32, uint64)
INTEGER = SIGNED_INTEGER + UNSIGNED_INTEGER
REAL_FLOATING = (float32, float64)
COMPLEX_FLOATING = (complex64, complex128)
FLOATING = REAL_FLOATING + COMPLEX_FLOATING
NUMERIC = INTEGER + FLOATING
BOOLEAN = (bool,)

HALF_FLOATING = (float16, bfloat16)
"""The 16-bit extension dtypes. No group above holds them: kernels registered for
``REAL_FLOATING``/``FLOATING`` never see them."""
EXTENSION_DTYPES = HALF_FLOATING
EVERY_DTYPE = ALL_DTYPES + EXTENSION_DTYPES
"""The standard's dtypes and the extension dtypes: what a backend may hold."""
ANY_REAL_FLOATING = REAL_FLOATING + HALF_FLOATING
"""Every real floating dtype, the 16-bit ones included (``isdtype``'s "real floating")."""

COMPUTE_IN = {float16: float32, bfloat16: float32}
"""The dtype a 16-bit dtype's matmul and reductions compute in (the result is rounded
back to the 16-bit dtype), as PyTorch does on the CPU."""

_BY_NAME = {d.name: d for d in EVERY_DTYPE}
# Native numpy dtype -> DType. Keys are numpy dtype objects (hash equal to their
# scalar types too, so ``FROM_NUMPY[arr.dtype]`` is one dict lookup).
FROM_NUMPY = {d._np: d for d in EVERY_DTYPE}

# Kind names accepted by isdtype(), as in the standard; the 16-bit dtypes are real
# floating (and numeric), as PyTorch's are through array-api-compat.
KIND_NAMES = {
    "bool": BOOLEAN,
    "signed integer": SIGNED_INTEGER,
    "unsigned integer": UNSIGNED_INTEGER,
    "integral": INTEGER,
    "real floating": ANY_REAL_FLOATING,
    "complex floating": COMPLEX_FLOATING,
    "numeric": NUMERIC + HALF_FLOATING,
}

# Real <-> complex counterparts.
REAL_OF = {complex64: float32, complex128: float64}
# Note: there is no complex32; a complex Python scalar with a 16-bit array (and
# ``complex`` of one) gives complex64, the narrowest complex dtype.
COMPLEX_OF = {float32: complex64, float64: complex128, float16: complex64, bfloat16: complex64}


def _by_name(name: str) -> DType:
    return _BY_NAME[name]


def from_native_numpy(dt) -> DType:
    """The DType of a NumPy dtype; TypeError for dtypes tessera does not have."""
    try:
        return FROM_NUMPY[np.dtype(dt)]
    except (KeyError, TypeError) as err:
        raise TypeError(
            "tessera_array supports the Array API dtypes, float16 and bfloat16 only. "
            f"Received: dtype={dt!r}"
        ) from err


def _build_promotion_table() -> dict:
    # NumPy 2 (NEP 50) promotes array dtypes exactly as the standard does for every
    # pair the standard defines; for the pairs it leaves to the implementation
    # (mixed kinds, int64 with uint64) tessera follows NumPy, as its users expect.
    # The 16-bit dtypes promote as in PyTorch among floats: float16 with bfloat16
    # gives float32 (neither holds the other), with a wider float or a complex dtype
    # that dtype; ml_dtypes gives NumPy the same answers. With integers and booleans
    # (mixed kinds) they follow NumPy's rule, as float32 does: the narrowest float
    # that holds both (int8 + float16 -> float16, int16 + float16 -> float32).
    # Note: PyTorch gives the 16-bit float for every integer dtype there.
    table = {}
    for a in EVERY_DTYPE:
        for b in EVERY_DTYPE:
            table[a, b] = FROM_NUMPY[np.promote_types(a._np, b._np)]
    return table


PROMOTION_TABLE = _build_promotion_table()


def promote(a: DType, b: DType) -> DType:
    """Result dtype of combining arrays of dtypes ``a`` and ``b``."""
    return PROMOTION_TABLE[a, b]


def coerce_dtype(dtype, name: str = "dtype", func: str = "") -> DType:
    """Accept a DType (or a dtype name / NumPy dtype, as NumPy users write) and return a DType."""
    if dtype.__class__ is DType:
        return dtype
    if isinstance(dtype, str) and dtype in _BY_NAME:
        return _BY_NAME[dtype]
    try:
        if dtype is float:
            return float64
        if dtype is int:
            return int64
        if dtype is complex:
            return complex128
        if dtype is _builtin_bool:
            return bool
        return FROM_NUMPY[np.dtype(dtype)]
    except (KeyError, TypeError):
        prefix = f"{func}: " if func else ""
        raise TypeError(
            f"{prefix}{name} must be one of the Array API dtypes or an extension dtype "
            f"({', '.join(_BY_NAME)}). Received: {name}={dtype!r}"
        ) from None
