"""Data types and the type-promotion table.

A :class:`DType` is backend-neutral: a name, a kind and a size. Every backend maps
it to its native dtype. NumPy is a hard dependency (it is the embedded CPU backend
and the host format), so each DType also carries the matching ``numpy.dtype``.

Besides the standard's thirteen dtypes there are two extension dtypes, ``float16``
and ``bfloat16`` (:data:`EXTENSION_DTYPES`). Their kind is real floating (``"f"``),
so ``isdtype(float16, "real floating")`` holds (as for PyTorch through
array-api-compat), but they stay out of :data:`ALL_DTYPES` and of the groups that
register kernels (:data:`REAL_FLOATING`, :data:`FLOATING` ...): a kernel is never
registered for them by accident. bfloat16's NumPy dtype comes from ``ml_dtypes``,
imported the first time bfloat16's NumPy dtype is needed (its C extension takes ~0.5 s
to load; ``import tessera_array`` and work in other dtypes never pay it): until then
bfloat16 has no entry in :data:`FROM_NUMPY` and none in :data:`PROMOTION_TABLE`
(:func:`lookup_numpy` and the table's lookup load it).
"""

from __future__ import annotations

import sys

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

    __slots__ = ("__weakref__", "_hash", "_load", "_np", "bits", "kind", "name")

    def __init__(self, name: str, kind: str, bits: int, native=None, *, load=None):
        self.name = name
        self.kind = kind
        self.bits = bits
        if load is None:
            self._np = np.dtype(name if native is None else native)
            self._hash = hash(self._np)
        else:
            # A lazy native dtype (bfloat16's, from ml_dtypes): ``load()`` gives it on the
            # first read of ``_np`` (__getattr__). Note: the hash is the name's, so it
            # differs from the NumPy dtype's although the two compare equal.
            self._load = load
            self._hash = hash(name)

    def __getattr__(self, attr):
        # Reached only for an unset slot: a lazy dtype's ``_np`` before its first use.
        if attr == "_np":
            load = object.__getattribute__(self, "_load")
            self._np = np.dtype(load())
            _registered(self)
            return self._np
        raise AttributeError(f"'DType' object has no attribute {attr!r}")

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
        return self._hash

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


def _ml_bfloat16():
    import ml_dtypes

    return ml_dtypes.bfloat16


bfloat16 = DType("bfloat16", "f", 16, load=_ml_bfloat16)

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
_LAZY = (bfloat16,)  # the dtypes whose NumPy dtype is loaded on first use
# Native numpy dtype -> DType. Keys are numpy dtype objects (hash equal to their
# scalar types too, so ``FROM_NUMPY[arr.dtype]`` is one dict lookup). A lazy dtype
# (bfloat16) enters when its NumPy dtype is first read; :func:`lookup_numpy` looks up a
# NumPy dtype that may be one not read yet.
FROM_NUMPY = {d._np: d for d in EVERY_DTYPE if d not in _LAZY}


def lookup_numpy(npdt):
    """The DType of NumPy dtype ``npdt``, or None; a bfloat16 from ml_dtypes (which the
    caller's data proves imported) loads tessera's bfloat16 first."""
    d = FROM_NUMPY.get(npdt)
    if d is None and "ml_dtypes" in sys.modules:
        for lazy in _LAZY:
            # (reading lazy._np loads it, and registers it in FROM_NUMPY)
            if not _has_slot(lazy, "_np") and npdt == lazy._np:
                return lazy
    return d


def _has_slot(d, name) -> _builtin_bool:
    try:
        object.__getattribute__(d, name)
    except AttributeError:
        return False
    return True


_ON_LOAD: dict = {}  # lazy dtype -> what runs once its NumPy dtype is known


def when_loaded(d: DType, fn) -> None:
    """Run ``fn()`` once ``d``'s NumPy dtype is known: now if it is (always, for a dtype
    that is not lazy), else right after its first use loads it (a backend's bfloat16
    probe waits so)."""
    if _has_slot(d, "_np"):
        fn()
    else:
        _ON_LOAD.setdefault(d, []).append(fn)


def _registered(d) -> None:
    """A lazy dtype's NumPy dtype is known: it enters FROM_NUMPY and the promotions, and
    what waited for it runs."""
    FROM_NUMPY[d._np] = d
    for other in EVERY_DTYPE:
        if other is d or _has_slot(other, "_np"):
            for a, b in ((d, other), (other, d)):
                PROMOTION_TABLE[a, b] = FROM_NUMPY[np.promote_types(a._np, b._np)]
    for fn in _ON_LOAD.pop(d, ()):
        fn()

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
        found = lookup_numpy(np.dtype(dt))
        if found is None:
            raise KeyError(dt)
        return found
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
    table = _Promotions()
    eager = [d for d in EVERY_DTYPE if d not in _LAZY]
    for a in eager:
        for b in eager:
            table[a, b] = FROM_NUMPY[np.promote_types(a._np, b._np)]
    return table


class _Promotions(dict):
    """The promotion table: a pair with a lazy dtype not loaded yet loads it (its
    ``_np``), which enters its pairs (:func:`_registered`)."""

    def __missing__(self, key):
        a, b = key
        if a in _LAZY or b in _LAZY:
            _ = a._np, b._np
            if key in self:
                return dict.__getitem__(self, key)
        raise KeyError(key)


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
        found = lookup_numpy(np.dtype(dtype))
        if found is None:
            raise KeyError(dtype)
        return found
    except (KeyError, TypeError):
        prefix = f"{func}: " if func else ""
        raise TypeError(
            f"{prefix}{name} must be one of the Array API dtypes or an extension dtype "
            f"({', '.join(_BY_NAME)}). Received: {name}={dtype!r}"
        ) from None
