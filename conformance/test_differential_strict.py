"""Differential conformance: tessera_array against array-api-strict, case by case.

Every case feeds the same inputs (dtype, shape and values from a NumPy generator
seeded by the case id) to tessera_array on each loaded ``device`` and to
array_api_strict. The results must match: dtype, shape, and values (exactly for
booleans and integers, within a per-dtype tolerance for floats, NaNs equal).
Where array_api_strict raises for a case the standard makes an error, tessera must
raise an exception of the same built-in kind (TypeError, ValueError, IndexError).

Deliberate deviations
---------------------
Where the standard leaves a case unspecified ("should have a floating-point data
type") and array_api_strict raises, tessera follows NumPy instead (the common
rule: the standard wins, NumPy fills its silences). Each kind of such case is one
row below (the tags of :data:`DEVIATIONS`); a case gets a tag from its function
and its operands' kinds, and when array_api_strict raises TypeError for a tagged
case the test checks that tessera gives NumPy's answer (dtype and values, or the
same kind of error where NumPy raises). One adjustment: where NumPy answers in
float16, which tessera lacks, tessera answers in float32.

====================  ========================================================
tag                   what tessera does instead of raising
====================  ========================================================
``mixed-kind``        Arrays of different kinds (bool/int/float, int64 with
                      uint64) promote as ``numpy.result_type``: ``int32 +
                      float32 -> float64``, ``int64 + uint64 -> float64``;
                      ``can_cast``/``result_type`` answer the same way.
``scalar-kind``       A Python scalar of a higher kind than the array (``int32
                      array + 1.5``, ``bool array + 1``) promotes as NumPy 2
                      (NEP 50) does.
``int-to-float``      Integer or boolean input to a function defined for
                      floating point (``sin``, ``exp``, ``divide``, ``mean``,
                      ``std`` ...) computes in floating point as NumPy does:
                      ``sin(int32) -> float64``, ``sin(int8) -> float32``.
``bool-as-number``    Boolean input to a numeric function (``abs``, ``add``,
                      ``sum``, ``max``, ``less``, ``isnan``, shifts ...) is
                      NumPy's answer (``sum(bool) -> int64``, ``add(bool, bool)
                      -> bool``).
``logical-of-number``  Non-boolean input to ``logical_and/or/xor/not`` tests
                      truthiness, as NumPy does.
``complex-order``     Complex input to an ordering function (``less``,
                      ``maximum``, ``max``, ``sort`` ...) orders
                      lexicographically (real part, then imaginary), as NumPy.
``parts-of-real``     ``real``/``imag``/``conj`` of real input: ``x``, zeros,
                      ``x``, as NumPy.
``complex-spread``    ``std``/``var`` of complex input: the real-valued spread
                      (mean squared modulus of the deviations), as NumPy.
``fft-input``         ``fft.fft``, ``ifft``, ``fftn``, ``ifftn``, ``irfft``,
                      ``irfftn`` and ``hfft`` take real input as complex of
                      its precision, integer/boolean input as complex128;
                      ``fft.rfft``, ``rfftn`` and ``ihfft`` take integer
                      input as float64; ``fft.fftshift``/``ifftshift`` take
                      any dtype, as NumPy.
====================  ========================================================

Known array-api-strict defects (:data:`STRICT_DEFECTS`) are compared with NumPy
instead; each entry says why.
"""

from __future__ import annotations

import math
import warnings
import zlib

import array_api_strict as strict
import numpy as np
import pytest

import tessera_array as xp

DEVIATIONS = {
    "mixed-kind": "arrays of different kinds promote as numpy.result_type (NumPy's rule)",
    "scalar-kind": "a Python scalar of a higher kind promotes as in NumPy 2 (NEP 50)",
    "int-to-float": "integer/bool input to a floating-point function computes in floating point",
    "bool-as-number": "boolean input to a numeric function gives NumPy's answer",
    "logical-of-number": "non-boolean input to a logical function tests truthiness",
    "complex-order": "complex input to an ordering function orders lexicographically",
    "parts-of-real": "real/imag/conj of real input: x, zeros, x",
    "complex-spread": "std/var of complex input: the real-valued spread, as NumPy",
    "fft-input": "fft functions take real/integer input (and shifts any dtype) as NumPy does",
}

# Cases where array-api-strict itself is wrong: compared with NumPy instead.
STRICT_DEFECTS = {
    "isin-invert": "array-api-strict 2.6 ignores invert= in isin",
}

ALL = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
       "float32", "float64", "complex64", "complex128")
KIND = {"bool": "b", "float32": "f", "float64": "f", "complex64": "c", "complex128": "c"}
KIND.update({d: "i" for d in ALL if d.startswith("int")})
KIND.update({d: "u" for d in ALL if d.startswith("uint")})
RTOL = {"float32": 2e-5, "complex64": 2e-5, "float64": 1e-12, "complex128": 1e-12}

# Functions the standard defines for floating-point input only.
FLOAT_ONLY = {
    "acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "exp", "expm1", "log",
    "log1p", "log2", "log10", "sin", "sinh", "sqrt", "tan", "tanh", "reciprocal", "atan2",
    "hypot", "logaddexp", "copysign", "nextafter", "divide", "mean", "std", "var", "signbit",
    "linalg.inv", "linalg.vector_norm",
}
NUMERIC_ONLY = {
    "abs", "negative", "positive", "sign", "square", "ceil", "floor", "trunc", "round", "add",
    "subtract", "multiply", "pow", "floor_divide", "remainder", "maximum", "minimum", "less",
    "less_equal", "greater", "greater_equal", "sum", "prod", "max", "min", "cumulative_sum",
    "cumulative_prod", "clip", "diff", "argmax", "argmin", "sort", "argsort", "matmul",
    "isnan", "isinf", "isfinite", "bitwise_left_shift", "bitwise_right_shift",
}
LOGICAL = {"logical_and", "logical_or", "logical_xor", "logical_not"}
ORDERING = {"maximum", "minimum", "less", "less_equal", "greater", "greater_equal", "max",
            "min", "sort", "argsort", "argmax", "argmin", "clip", "ceil", "floor", "trunc",
            "sign", "searchsorted", "remainder", "floor_divide", "copysign", "nextafter"}
PARTS = {"real", "imag", "conj"}
SPREAD = {"std", "var"}


# ---- inputs -----------------------------------------------------------------------------


class D:
    """A dtype argument, resolved in each namespace."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return self.name


class Seq:
    """A sequence-of-arrays argument (concat, stack)."""

    def __init__(self, *items):
        self.items = items


class Case:
    __slots__ = ("args", "creation", "fn", "id", "kwargs", "post", "rtol", "tags")

    def __init__(self, id, fn, args=(), kwargs=None, *, creation=False, post=None, tags=(),
                 rtol=None):
        self.id = id
        self.fn = fn
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})
        self.creation = creation
        self.post = post
        self.tags = frozenset(tags)
        self.rtol = rtol


def _rng(key):
    return np.random.default_rng(zlib.crc32(key.encode()))


def arr(key, dtype, shape=(3, 4), domain="any"):
    """A NumPy array of ``dtype`` whose values suit ``domain``, seeded by ``key``."""
    rng = _rng(f"{key}/{dtype}/{shape}/{domain}")
    kind = KIND[dtype]
    if kind == "b":
        return rng.random(shape) > 0.5
    if kind in "iu":
        lo, hi = {"any": (-10, 11), "unit": (-1, 2), "pos": (1, 21), "nonzero": (-10, 11),
                  "pbase": (0, 5), "pexp": (0, 4), "shift": (0, 6), "acosh": (1, 21),
                  "spec": (-10, 11)}[domain]
        if kind == "u":
            lo = max(lo, 0)
        a = rng.integers(lo, hi, shape)
        if domain == "nonzero":
            a[a == 0] = 1
        return a.astype(dtype)
    lo, hi = {"unit": (-0.95, 0.95), "pos": (1.05, 10.0), "acosh": (1.05, 10.0),
              "pbase": (0.5, 3.0), "pexp": (-2.0, 2.0), "shift": (0, 5)}.get(domain, (None, None))
    if lo is None:
        a = rng.standard_normal(shape) * 3
        if domain == "nonzero":
            a[np.abs(a) < 0.1] = 0.5
    else:
        a = rng.uniform(lo, hi, shape)
    if kind == "c":
        b = rng.uniform(lo, hi, shape) if lo is not None else rng.standard_normal(shape)
        a = a + 1j * b
    a = np.asarray(a).astype(dtype)
    if domain == "spec" and kind == "f" and a.size >= 5:
        a.reshape(-1)[:5] = [np.nan, np.inf, -np.inf, 0.0, -0.0]
    return a


def specials(dtype):
    return np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e30],
                    dtype=dtype)


# ---- the cases ------------------------------------------------------------------------------

UNARY = [
    ("abs", "any"), ("acos", "unit"), ("acosh", "acosh"), ("asin", "unit"), ("asinh", "any"),
    ("atan", "any"), ("atanh", "unit"), ("bitwise_invert", "any"), ("ceil", "any"),
    ("conj", "any"), ("cos", "any"), ("cosh", "any"), ("exp", "any"), ("expm1", "any"),
    ("floor", "any"), ("imag", "any"), ("isfinite", "spec"), ("isinf", "spec"),
    ("isnan", "spec"), ("log", "pos"), ("log1p", "pos"), ("log2", "pos"), ("log10", "pos"),
    ("logical_not", "any"), ("negative", "any"), ("positive", "any"), ("real", "any"),
    ("reciprocal", "nonzero"), ("round", "any"), ("sign", "spec"), ("signbit", "spec"),
    ("sin", "any"), ("sinh", "any"), ("sqrt", "pos"), ("square", "any"), ("tan", "any"),
    ("tanh", "any"), ("trunc", "any"),
]
# IEEE special values: functions whose special cases the standard defines for real floats.
SPECIAL_UNARY = [
    "abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "cos", "cosh", "exp",
    "expm1", "floor", "log", "log1p", "log2", "log10", "negative", "reciprocal", "round",
    "sign", "signbit", "sin", "sinh", "sqrt", "square", "tan", "tanh", "trunc",
]
BINARY = [
    ("add", "any", "any"), ("subtract", "any", "any"), ("multiply", "any", "any"),
    ("divide", "any", "nonzero"), ("floor_divide", "any", "nonzero"),
    ("remainder", "any", "nonzero"), ("pow", "pbase", "pexp"), ("atan2", "any", "any"),
    ("copysign", "any", "any"), ("hypot", "any", "any"), ("logaddexp", "any", "any"),
    ("maximum", "any", "any"), ("minimum", "any", "any"), ("nextafter", "any", "any"),
    ("equal", "any", "any"), ("not_equal", "any", "any"), ("less", "any", "any"),
    ("less_equal", "any", "any"), ("greater", "any", "any"), ("greater_equal", "any", "any"),
    ("logical_and", "any", "any"), ("logical_or", "any", "any"),
    ("logical_xor", "any", "any"), ("bitwise_and", "any", "any"),
    ("bitwise_or", "any", "any"), ("bitwise_xor", "any", "any"),
    ("bitwise_left_shift", "any", "shift"), ("bitwise_right_shift", "any", "shift"),
]
# floor_divide is left out: NumPy (and so array-api-strict) answers NaN for +-inf // finite,
# where the standard says +-inf.
SPECIAL_BINARY = ["add", "subtract", "multiply", "divide", "pow", "atan2", "maximum",
                  "minimum", "remainder", "hypot", "logaddexp", "copysign"]
MIXED_PAIRS = [
    ("int8", "int16"), ("uint8", "int8"), ("uint16", "uint32"), ("float32", "float64"),
    ("complex64", "float64"), ("float32", "complex128"), ("int32", "float32"),
    ("int64", "uint64"), ("bool", "int8"), ("uint8", "float32"), ("int16", "complex64"),
    ("bool", "float64"),
]
MIXED_FUNCS = ["add", "multiply", "equal", "maximum", "less", "divide"]
SCALARS = [
    ("int32", 3), ("int32", 1.5), ("int8", -2), ("float32", 2), ("float32", 0.25),
    ("float32", 1 + 2j), ("complex64", 2.5), ("bool", True), ("bool", 1), ("uint8", 300),
    ("int8", -129), ("float64", -0.0),
]
SCALAR_FUNCS = ["add", "multiply", "subtract", "less", "maximum", "pow", "divide"]


def _kinds_differ(d1, d2):
    """True when the standard has no promotion rule for the pair (NumPy's applies)."""
    k1, k2 = KIND[d1], KIND[d2]
    if k1 == k2 or {k1, k2} == {"f", "c"}:
        return False
    if {k1, k2} == {"i", "u"}:
        return np.promote_types(d1, d2).kind == "f"  # int64 with uint64
    return True


def _scalar_kind_higher(dtype, s):
    k = KIND[dtype]
    if isinstance(s, bool):
        return False
    if isinstance(s, int):
        return k == "b"
    if isinstance(s, float):
        return k in "biu"
    return k in "biuf"


# Operands that are conditions or indices, not values: they take no part in promotion.
_NOT_VALUES = {"where": (0,), "take": (1,), "take_along_axis": (1,), "repeat": (1,)}


def _operands(case):
    skip = _NOT_VALUES.get(case.fn, ())
    values = [a for i, a in enumerate(case.args) if i not in skip]
    values += [v for k, v in case.kwargs.items() if k != "sorter"]
    for a in values:
        yield from (a.items if isinstance(a, Seq) else (a,))


def deviation_tags(case) -> set:
    """The DEVIATIONS rows that apply to ``case`` (its explicit tags included)."""
    tags = set(case.tags)
    kinds = [(item.dtype.name, KIND[item.dtype.name]) for item in _operands(case)
             if isinstance(item, np.ndarray) and item.dtype.name in KIND]
    kinds += [(item.name, KIND[item.name]) for item in _operands(case) if isinstance(item, D)]
    names = [n for n, _ in kinds]
    ks = {k for _, k in kinds}
    fn = case.fn
    if any(_kinds_differ(a, b) for a in names for b in names):
        tags.add("mixed-kind")
    arrays = names
    for item in _operands(case):
        if isinstance(item, (bool, int, float, complex)) and arrays and \
                _scalar_kind_higher(arrays[0], item):
            tags.add("scalar-kind")
    if fn in FLOAT_ONLY and ks & set("biu"):
        tags.add("int-to-float")
    if fn in NUMERIC_ONLY and "b" in ks:
        tags.add("bool-as-number")
    if fn in LOGICAL and ks - {"b"}:
        tags.add("logical-of-number")
    if fn in ORDERING and "c" in ks:
        tags.add("complex-order")
    if fn in PARTS and ks - {"c"}:
        tags.add("parts-of-real")
    if fn in SPREAD and "c" in ks:
        tags.add("complex-spread")
    return tags


def _elementwise_cases():
    cases = []
    for fn, domain in UNARY:
        for dt in ALL:
            cases.append(Case(f"{fn}-{dt}", fn, (arr(fn, dt, domain=domain),)))
    for fn in SPECIAL_UNARY:
        for dt in ("float32", "float64"):
            cases.append(Case(f"{fn}-special-{dt}", fn, (specials(dt),)))
    for fn, d1, d2 in BINARY:
        for dt in ALL:
            cases.append(Case(f"{fn}-{dt}", fn, (arr(fn + "1", dt, (3, 4), d1),
                                                 arr(fn + "2", dt, (4,), d2))))
    for fn in SPECIAL_BINARY:
        s = specials("float64")
        cases.append(Case(f"{fn}-special-float64", fn, (s[:, None], s[None, :])))
    for fn in MIXED_FUNCS:
        for d1, d2 in MIXED_PAIRS:
            dom2 = "nonzero" if fn == "divide" else "any"
            cases.append(Case(f"{fn}-{d1}-{d2}", fn, (arr(fn, d1), arr(fn, d2, (4,), dom2))))
    for fn in SCALAR_FUNCS:
        for dt, s in SCALARS:
            dom = "pbase" if fn == "pow" else "nonzero"
            x = arr(fn, dt, domain=dom)
            if fn == "pow" and isinstance(s, int) and s < 0 and KIND[dt] in "iu":
                continue  # integer to a negative power: undefined
            cases.append(Case(f"{fn}-{dt}-scalar-{s!r}", fn, (x, s)))
            cases.append(Case(f"{fn}-scalar-{s!r}-{dt}", fn, (s, x)))
    # errors the standard defines
    cases += [
        Case("add-shape-mismatch", "add", (arr("e", "float64", (3,)), arr("e", "float64", (4,)))),
        Case("sin-not-an-array", "sin", ([1.0, 2.0],)),
        Case("add-two-scalars", "add", (1.0, 2.0)),
        Case("clip", "clip", (arr("c", "float64"),), {"min": -1.0, "max": 2.0}),
        Case("clip-arrays", "clip", (arr("c", "float32"), arr("lo", "float32", (4,)) - 5,
                                     arr("hi", "float32", (4,)) + 5)),
        Case("clip-int", "clip", (arr("c", "int16"),), {"min": -3, "max": 4}),
        Case("round-complex", "round", (arr("r", "complex128"),)),
    ]
    return cases


def _f(key, shape=(3, 4), dtype="float64", domain="any"):
    return arr(key, dtype, shape, domain)


def _creation_cases():
    c = []
    for kw in [{}, {"dtype": D("float32")}]:
        c.append(Case(f"arange-5-{kw}", "arange", (5,), kw, creation=True))
    c += [
        Case("arange-2-10-3", "arange", (2, 10, 3), creation=True),
        Case("arange-float", "arange", (0.0, 1.0, 0.25), creation=True),
        Case("arange-down", "arange", (10, 0, -3), creation=True),
        Case("arange-int8", "arange", (-3, 4), {"dtype": D("int8")}, creation=True),
        Case("asarray-nested", "asarray", ([[1, 2], [3, 4]],), creation=True),
        Case("asarray-float", "asarray", ([1.5, 2],), creation=True),
        Case("asarray-bool", "asarray", ([True, False],), creation=True),
        Case("asarray-scalar", "asarray", (3,), creation=True),
        Case("asarray-complex", "asarray", (1 + 2j,), creation=True),
        Case("asarray-dtype", "asarray", ([1, 2],), {"dtype": D("float32")}, creation=True),
        Case("asarray-ragged", "asarray", ([[1, 2], [3]],), creation=True),
        Case("eye-3", "eye", (3,), creation=True),
        Case("eye-3-4-k1", "eye", (3, 4), {"k": 1}, creation=True),
        Case("eye-int32", "eye", (4,), {"k": -2, "dtype": D("int32")}, creation=True),
        Case("full-int", "full", ((2, 3), 7), creation=True),
        Case("full-float32", "full", ((2,), 1.5), {"dtype": D("float32")}, creation=True),
        Case("full-bool-0d", "full", ((), True), creation=True),
        Case("linspace", "linspace", (0, 1, 5), creation=True),
        Case("linspace-open", "linspace", (0, 1, 5), {"endpoint": False}, creation=True),
        Case("linspace-float32", "linspace", (-2, 2, 4), {"dtype": D("float32")},
             creation=True),
        Case("linspace-complex", "linspace", (0, 1 + 1j, 3), creation=True),
        Case("ones", "ones", ((2, 3),), creation=True),
        Case("ones-int8", "ones", ((2,),), {"dtype": D("int8")}, creation=True),
        Case("zeros-empty", "zeros", ((0, 3),), creation=True),
        Case("zeros-bool", "zeros", ((3,),), {"dtype": D("bool")}, creation=True),
        Case("empty", "empty", ((2, 3),), creation=True, post=np.zeros_like),
        Case("zeros_like", "zeros_like", (_f("zl"),)),
        Case("ones_like-int", "ones_like", (_f("ol"),), {"dtype": D("int32")}),
        Case("full_like", "full_like", (_f("fl", dtype="int16"), 3)),
        Case("empty_like", "empty_like", (_f("el"),), post=np.zeros_like),
        Case("tril", "tril", (_f("tr", (4, 5)),), {"k": 1}),
        Case("triu", "triu", (_f("tu", (2, 4, 4)),), {"k": -1}),
        Case("meshgrid", "meshgrid", (_f("m1", (3,)), _f("m2", (4,)))),
        Case("meshgrid-ij", "meshgrid", (_f("m1", (3,)), _f("m2", (4,))), {"indexing": "ij"}),
    ]
    return c


def _manipulation_cases():
    a, b = _f("a"), _f("b", (4, 3))
    a3 = _f("a3", (2, 3, 4))
    return [
        Case("broadcast_arrays", "broadcast_arrays", (_f("x", (3, 1)), _f("y", (1, 4)))),
        Case("broadcast_to", "broadcast_to", (_f("x", (3, 1)), (2, 3, 4))),
        Case("broadcast_to-bad", "broadcast_to", (_f("x", (3,)), (4,))),
        Case("broadcast_shapes", "broadcast_shapes", ((3, 1), (1, 4), (2, 1, 1))),
        Case("concat-0", "concat", (Seq(a, _f("c", (2, 4))),)),
        Case("concat-1", "concat", (Seq(a, _f("c", (3, 1))),), {"axis": 1}),
        Case("concat-none", "concat", (Seq(a, b),), {"axis": None}),
        Case("concat-int32-float32", "concat",
             (Seq(_f("i", dtype="int32"), _f("f", dtype="float32")),)),
        Case("concat-int8-int16", "concat",
             (Seq(_f("i", dtype="int8"), _f("j", dtype="int16")),)),
        Case("concat-bad-shape", "concat", (Seq(a, b),)),
        Case("expand_dims-0", "expand_dims", (a,), {"axis": 0}),
        Case("expand_dims-tuple", "expand_dims", (a,), {"axis": (0, -1)}),
        Case("expand_dims-bad", "expand_dims", (a,), {"axis": 5}),
        Case("flip", "flip", (a3,)),
        Case("flip-1", "flip", (a3,), {"axis": 1}),
        Case("flip-tuple", "flip", (a3,), {"axis": (0, 2)}),
        Case("moveaxis", "moveaxis", (a3, 0, -1)),
        Case("moveaxis-tuple", "moveaxis", (a3, (0, 1), (2, 0))),
        Case("permute_dims", "permute_dims", (a3, (2, 0, 1))),
        Case("permute_dims-bad", "permute_dims", (a3, (0, 1))),
        Case("repeat", "repeat", (a, 2)),
        Case("repeat-axis", "repeat", (a, 2), {"axis": 1}),
        Case("repeat-array", "repeat", (_f("r", (4,)), np.array([1, 0, 2, 3])), {"axis": 0}),
        Case("reshape-flat", "reshape", (a, (-1,))),
        Case("reshape", "reshape", (a3, (4, 6))),
        Case("reshape-bad", "reshape", (a, (5,))),
        Case("roll", "roll", (a, 2)),
        Case("roll-axis", "roll", (a, -1), {"axis": 1}),
        Case("roll-tuple", "roll", (a, (1, 2)), {"axis": (0, 1)}),
        Case("squeeze", "squeeze", (_f("s", (1, 3, 1)),), {"axis": 0}),
        Case("squeeze-tuple", "squeeze", (_f("s", (1, 3, 1)),), {"axis": (0, 2)}),
        Case("squeeze-bad", "squeeze", (a,), {"axis": 0}),
        Case("stack", "stack", (Seq(a, _f("c")),)),
        Case("stack-last", "stack", (Seq(a, _f("c")),), {"axis": -1}),
        Case("stack-bad", "stack", (Seq(a, b),)),
        Case("tile", "tile", (a, (2, 1))),
        Case("tile-short", "tile", (a3, (2,))),
        Case("unstack", "unstack", (a,)),
        Case("unstack-1", "unstack", (a3,), {"axis": 1}),
        Case("take", "take", (a, np.array([3, 0, 0])), {"axis": 1}),
        Case("take-1d", "take", (_f("t", (6,)), np.array([5, 1]))),
        Case("take-negative", "take", (_f("t", (6,)), np.array([-1, -6]))),
        Case("take_along_axis", "take_along_axis",
             (a, np.array([[0, 3], [1, 1], [2, 0]])), {"axis": 1}),
    ]


def _reduction_cases():
    c = []
    data = {"float64": _f("r"), "float32": _f("r", dtype="float32"),
            "int32": _f("r", dtype="int32"), "int8": _f("r", dtype="int8"),
            "uint8": _f("r", dtype="uint8"), "bool": _f("r", dtype="bool"),
            "complex128": _f("r", dtype="complex128")}
    variants = [{}, {"axis": 0}, {"axis": -1, "keepdims": True}, {"axis": (0, 1)}]
    for fn in ("sum", "prod", "mean", "std", "var", "max", "min"):
        for dt, x in data.items():
            tags = {"int-to-float"} if fn in FLOAT_ONLY and KIND[dt] in "biu" else set()
            for kw in variants:
                c.append(Case(f"{fn}-{dt}-{kw}", fn, (x,), kw, tags=tags))
    c += [
        Case("sum-dtype", "sum", (data["int8"],), {"dtype": D("float32")}),
        Case("prod-dtype", "prod", (data["float32"],), {"dtype": D("float64")}),
        Case("std-correction", "std", (data["float64"],), {"correction": 1, "axis": 0}),
        Case("var-correction", "var", (data["float32"],), {"correction": 1.0}),
        Case("max-empty", "max", (np.zeros((0,)),)),
        Case("sum-empty", "sum", (np.zeros((0, 3)),), {"axis": 0}),
        Case("mean-empty", "mean", (np.zeros((0,)),)),
        Case("sum-axis-bad", "sum", (data["float64"],), {"axis": 2}),
    ]
    for fn in ("cumulative_sum", "cumulative_prod"):
        for dt in ("float64", "int8", "uint8", "bool", "complex128"):
            c.append(Case(f"{fn}-{dt}", fn, (data[dt],), {"axis": 1}))
        c.append(Case(f"{fn}-initial", fn, (data["int32"],), {"axis": 0,
                                                                "include_initial": True}))
        c.append(Case(f"{fn}-1d", fn, (_f("c1", (5,)),)))
        c.append(Case(f"{fn}-dtype", fn, (data["int8"],), {"axis": 1, "dtype": D("int64")}))
        c.append(Case(f"{fn}-2d-no-axis", fn, (data["float64"],)))
    for fn in ("all", "any"):
        for dt in ("bool", "int32", "float64"):
            for kw in ({}, {"axis": 1}, {"axis": 0, "keepdims": True}):
                c.append(Case(f"{fn}-{dt}-{kw}", fn, (data[dt],), kw))
    c += [
        Case("diff", "diff", (data["float64"],)),
        Case("diff-n2-axis0", "diff", (data["int32"],), {"axis": 0, "n": 2}),
        Case("diff-prepend", "diff", (data["float64"],),
             {"axis": 1, "prepend": _f("p", (3, 1))}),
        Case("diff-bool", "diff", (data["bool"],)),
    ]
    return c


def _search_sort_set_cases():
    x = _f("s")
    ties = arr("ties", "int32", (4, 6), "pexp")
    srt = np.sort(_f("sorted", (8,)))
    return [
        Case("argmax", "argmax", (x,)),
        Case("argmax-axis", "argmax", (x,), {"axis": 0}),
        Case("argmin-keepdims", "argmin", (x,), {"axis": 1, "keepdims": True}),
        Case("argmax-ties", "argmax", (ties,), {"axis": 1}),
        Case("count_nonzero", "count_nonzero", (ties,)),
        Case("count_nonzero-axis", "count_nonzero", (ties,), {"axis": 0, "keepdims": True}),
        Case("nonzero-1d", "nonzero", (ties[0],)),
        Case("nonzero-2d", "nonzero", (ties,)),
        Case("nonzero-0d", "nonzero", (np.asarray(1.0),)),
        Case("searchsorted", "searchsorted", (srt, _f("v", (5,)))),
        Case("searchsorted-right", "searchsorted", (srt, srt[2:5]), {"side": "right"}),
        Case("searchsorted-sorter", "searchsorted",
             (_f("u", (6,)), _f("v", (3,))), {"sorter": np.argsort(_f("u", (6,)))}),
        Case("where", "where", (x > 0, x, _f("w"))),
        Case("where-scalar", "where", (x > 0, x, 0.0)),
        Case("where-int-cond", "where", (ties[:3, :4], x, 1.0)),
        Case("sort", "sort", (x,)),
        Case("sort-axis0", "sort", (x,), {"axis": 0}),
        Case("sort-descending", "sort", (x,), {"descending": True}),
        Case("sort-int", "sort", (ties,)),
        Case("argsort", "argsort", (x,)),
        Case("argsort-stable-ties", "argsort", (ties,), {"stable": True}),
        Case("argsort-descending", "argsort", (x,), {"descending": True, "axis": 0}),
        Case("sort-complex", "sort", (arr("sc", "complex128"),)),
        Case("isin", "isin", (ties, ties[0, :3])),
        Case("isin-invert", "isin", (ties, ties[0, :3]), {"invert": True}),
        Case("isin-scalar", "isin", (ties, 2)),
        Case("unique_values", "unique_values", (ties,), post=_canon_values),
        Case("unique_values-float", "unique_values", (np.round(x),), post=_canon_values),
        Case("unique_counts", "unique_counts", (ties,), post=_canon_counts),
        Case("unique_inverse", "unique_inverse", (ties,), post=_canon_inverse),
        Case("unique_all", "unique_all", (ties,), post=_canon_all),
    ]


def _canon_values(v):
    return np.sort(v)


def _canon_counts(r):
    values, counts = r
    order = np.argsort(values, kind="stable")
    return values[order], counts[order]


def _canon_inverse(r):
    values, inverse = r
    return np.sort(values), values[inverse]


def _canon_all(r):
    values, indices, inverse, counts = r
    order = np.argsort(values, kind="stable")
    return values[order], indices[order], values[inverse], counts[order]


def _eigh_post(r):
    w, v = r
    return w, v @ (w[..., None] * np.conj(np.swapaxes(v, -1, -2)))


def _qr_post(r):
    q, rr = r
    return q @ rr, np.conj(np.swapaxes(q, -1, -2)) @ q


def _svd_post(r):
    u, s, vh = r
    return s, (u[..., :, : s.shape[-1]] * s[..., None, :]) @ vh[..., : s.shape[-1], :]


def _linalg_cases():
    c = []
    for dt in ("float64", "float32", "complex128"):
        rng = _rng(f"linalg/{dt}")
        a = rng.standard_normal((4, 4)) + 4 * np.eye(4)
        batch = rng.standard_normal((2, 4, 4)) + 4 * np.eye(4)
        if KIND[dt] == "c":
            a = a + 1j * rng.standard_normal((4, 4))
            batch = batch + 1j * rng.standard_normal((2, 4, 4))
        a, batch = a.astype(dt), batch.astype(dt)
        spd = (a @ np.conj(a.T) + 4 * np.eye(4)).astype(dt)
        b, v = arr("b", dt, (4, 3)), arr("v", dt, (4,))
        tol = 1e-4 if dt in ("float32", "complex64") else 1e-9
        c += [
            Case(f"linalg.inv-{dt}", "linalg.inv", (a,), rtol=tol),
            Case(f"linalg.inv-batch-{dt}", "linalg.inv", (batch,), rtol=tol),
            Case(f"linalg.det-{dt}", "linalg.det", (batch,), rtol=tol),
            Case(f"linalg.slogdet-{dt}", "linalg.slogdet", (a,), rtol=tol),
            Case(f"linalg.solve-{dt}", "linalg.solve", (a, b), rtol=tol),
            Case(f"linalg.solve-vector-{dt}", "linalg.solve", (a, v), rtol=tol),
            Case(f"linalg.cholesky-{dt}", "linalg.cholesky", (spd,), rtol=tol),
            Case(f"linalg.cholesky-upper-{dt}", "linalg.cholesky", (spd,), {"upper": True},
                 rtol=tol),
            Case(f"linalg.eigh-{dt}", "linalg.eigh", (spd,), post=_eigh_post, rtol=tol),
            Case(f"linalg.eigvalsh-{dt}", "linalg.eigvalsh", (spd,), rtol=tol),
            Case(f"linalg.qr-{dt}", "linalg.qr", (arr("q", dt, (5, 3)),), post=_qr_post,
                 rtol=tol),
            Case(f"linalg.qr-complete-{dt}", "linalg.qr", (arr("q", dt, (5, 3)),),
                 {"mode": "complete"}, post=_qr_post, rtol=tol),
            Case(f"linalg.svd-{dt}", "linalg.svd", (arr("s", dt, (5, 3)),),
                 {"full_matrices": False}, post=_svd_post, rtol=tol),
            Case(f"linalg.svdvals-{dt}", "linalg.svdvals", (batch,), rtol=tol),
            Case(f"linalg.pinv-{dt}", "linalg.pinv", (arr("p", dt, (5, 3)),), rtol=tol),
            Case(f"linalg.matrix_rank-{dt}", "linalg.matrix_rank", (batch,)),
            Case(f"linalg.matrix_power-{dt}", "linalg.matrix_power", (a, 3), rtol=tol),
            Case(f"linalg.matrix_power-neg-{dt}", "linalg.matrix_power", (a, -2), rtol=tol),
            Case(f"linalg.trace-{dt}", "linalg.trace", (batch,), {"offset": 1}, rtol=tol),
            Case(f"linalg.diagonal-{dt}", "linalg.diagonal", (batch,), {"offset": -1}),
            Case(f"linalg.outer-{dt}", "linalg.outer", (v, arr("w", dt, (3,))), rtol=tol),
            Case(f"linalg.cross-{dt}", "linalg.cross", (arr("x", dt, (4, 3)),
                                                          arr("y", dt, (3,))), rtol=tol),
            Case(f"linalg.vecdot-{dt}", "linalg.vecdot", (b, arr("y", dt, (4, 3))),
                 {"axis": -2}, rtol=tol),
            Case(f"matmul-{dt}", "matmul", (batch, b), rtol=tol),
            Case(f"matmul-vector-{dt}", "matmul", (v, a), rtol=tol),
            Case(f"vecdot-{dt}", "vecdot", (a, v), rtol=tol),
            Case(f"tensordot-{dt}", "tensordot", (batch, a), {"axes": 1}, rtol=tol),
            Case(f"tensordot-pairs-{dt}", "tensordot", (batch, b), {"axes": ((1,), (0,))},
                 rtol=tol),
            Case(f"matrix_transpose-{dt}", "matrix_transpose", (batch,)),
            Case(f"linalg.matrix_transpose-{dt}", "linalg.matrix_transpose", (batch,)),
            Case(f"linalg.matmul-{dt}", "linalg.matmul", (a, b), rtol=tol),
        ]
        for ord_ in ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf):
            c.append(Case(f"linalg.matrix_norm-{ord_}-{dt}", "linalg.matrix_norm", (batch,),
                          {"ord": ord_}, rtol=tol))
        for ord_ in (2, 1, 0, 3, math.inf, -math.inf):
            c.append(Case(f"linalg.vector_norm-{ord_}-{dt}", "linalg.vector_norm", (b,),
                          {"ord": ord_, "axis": 0}, rtol=tol))
    sing = np.array([[1.0, 2.0], [2.0, 4.0]])
    c += [
        Case("linalg.inv-singular", "linalg.inv", (sing,)),
        Case("linalg.solve-singular", "linalg.solve", (sing, np.ones(2))),
        Case("linalg.inv-int", "linalg.inv", (np.array([[2, 0], [0, 4]]),)),
        Case("linalg.inv-nonsquare", "linalg.inv", (_f("n", (2, 3)),)),
        Case("linalg.cholesky-not-pd", "linalg.cholesky", (-np.eye(3),)),
        Case("matmul-mismatch", "matmul", (_f("m", (2, 3)), _f("n", (4, 2)))),
        Case("matmul-0d", "matmul", (np.asarray(1.0), _f("n", (2,)))),
        Case("matmul-int", "matmul", (arr("mi", "int32", (3, 4)), arr("mj", "int32", (4, 2)))),
        Case("matmul-mixed", "matmul", (arr("mi", "int32", (3, 4)), _f("mj", (4, 2)))),
        Case("linalg.vector_norm-all", "linalg.vector_norm", (_f("vn", (2, 3, 4)),)),
        Case("linalg.vector_norm-int", "linalg.vector_norm", (arr("vi", "int32", (5,)),)),
    ]
    return c


def _dtype_cases():
    x = _f("d")
    return [
        Case("astype-float32", "astype", (x, D("float32"))),
        Case("astype-int-bool", "astype", (arr("ab", "int16"), D("bool"))),
        Case("astype-bool-float", "astype", (arr("ab", "bool"), D("float64"))),
        Case("astype-float-int", "astype", (x, D("int32"))),
        Case("astype-complex-real", "astype", (arr("cr", "complex64"), D("float32"))),
        Case("astype-nocopy", "astype", (x, D("float64")), {"copy": False}),
        Case("can_cast-int8-int16", "can_cast", (D("int8"), D("int16"))),
        # strict answers False (no cross-kind rule); tessera answers as it promotes
        Case("can_cast-int64-float64", "can_cast", (D("int64"), D("float64")),
             tags={"mixed-kind"}),
        Case("can_cast-uint8-int8", "can_cast", (D("uint8"), D("int8"))),
        Case("can_cast-array", "can_cast", (arr("cc", "float32"), D("float64"))),
        Case("finfo-float32", "finfo", (D("float32"),)),
        Case("finfo-complex128", "finfo", (D("complex128"),)),
        Case("finfo-array", "finfo", (x,)),
        Case("finfo-int", "finfo", (D("int32"),)),
        Case("iinfo-int8", "iinfo", (D("int8"),)),
        Case("iinfo-uint64", "iinfo", (D("uint64"),)),
        Case("iinfo-float", "iinfo", (D("float32"),)),
        Case("isdtype-integral", "isdtype", (D("int8"), "integral")),
        Case("isdtype-tuple", "isdtype", (D("float32"), ("real floating", "complex floating"))),
        Case("isdtype-bool-numeric", "isdtype", (D("bool"), "numeric")),
        Case("isdtype-bad-kind", "isdtype", (D("bool"), "numbers")),
        Case("result_type", "result_type", (D("int8"), D("uint8"))),
        Case("result_type-array", "result_type", (arr("rt", "int32"), D("int16"))),
        Case("result_type-mixed", "result_type", (D("int32"), D("float32"))),
        Case("result_type-scalar", "result_type", (D("float32"), 1.0)),
        Case("result_type-int-scalar", "result_type", (arr("rt", "uint8"), 3)),
        Case("result_type-complex", "result_type", (D("float64"), D("complex64"))),
    ]


# fft functions the standard defines for complex input (other input: the fft-input tag).
FFT_COMPLEX_IN = {"fft.fft", "fft.ifft", "fft.fftn", "fft.ifftn", "fft.irfft", "fft.irfftn",
                  "fft.hfft"}


def _fft_cases():
    c = []
    for dt in ("complex64", "complex128"):
        rdt = "float32" if dt == "complex64" else "float64"
        x, r = arr("fx", dt, (4, 6)), arr("fr", rdt, (4, 6))
        x3 = arr("fx3", dt, (3, 4, 5))
        for fn in ("fft.fft", "fft.ifft"):
            c += [Case(f"{fn}-{dt}", fn, (x,)),
                  Case(f"{fn}-n-axis-{dt}", fn, (x,), {"n": 9, "axis": 0, "norm": "ortho"}),
                  Case(f"{fn}-trim-{dt}", fn, (x,), {"n": 4, "norm": "forward"})]
        for fn in ("fft.fftn", "fft.ifftn"):
            c += [Case(f"{fn}-{dt}", fn, (x3,)),
                  Case(f"{fn}-s-axes-{dt}", fn, (x3,), {"s": (6, 3), "axes": (2, 0),
                                                         "norm": "ortho"})]
        c += [
            Case(f"fft.rfft-{rdt}", "fft.rfft", (r,), {"n": 7}),
            Case(f"fft.ihfft-{rdt}", "fft.ihfft", (r,), {"axis": 0, "norm": "forward"}),
            Case(f"fft.irfft-{dt}", "fft.irfft", (x,)),
            Case(f"fft.irfft-n-{dt}", "fft.irfft", (x,), {"n": 7, "axis": 0}),
            Case(f"fft.hfft-{dt}", "fft.hfft", (x,), {"n": 9, "norm": "ortho"}),
            Case(f"fft.rfftn-{rdt}", "fft.rfftn", (arr("fr3", rdt, (3, 4, 5)),)),
            Case(f"fft.rfftn-s-axes-{rdt}", "fft.rfftn", (arr("fr3", rdt, (3, 4, 5)),),
                 {"s": (5, 6), "axes": (0, 1)}),
            Case(f"fft.irfftn-{dt}", "fft.irfftn", (x3,)),
            Case(f"fft.irfftn-s-axes-{dt}", "fft.irfftn", (x3,), {"s": (4, 7), "axes": (1, 2),
                                                                  "norm": "forward"}),
            Case(f"fft.fftshift-{rdt}", "fft.fftshift", (arr("fs", rdt, (5, 6)),)),
            Case(f"fft.ifftshift-axes-{dt}", "fft.ifftshift", (arr("fs", dt, (5, 6)),),
                 {"axes": 0}),
            Case(f"fft.fftfreq-{rdt}", "fft.fftfreq", (7,), {"d": 0.5, "dtype": D(rdt)},
                 creation=True),
            Case(f"fft.rfftfreq-{rdt}", "fft.rfftfreq", (8,), {"d": 3.0, "dtype": D(rdt)},
                 creation=True),
            # errors the standard defines
            Case(f"fft.rfft-complex-{dt}", "fft.rfft", (x,)),
            Case(f"fft.ihfft-complex-{dt}", "fft.ihfft", (x,)),
        ]
    x = arr("fe", "complex128", (4, 6))
    c += [
        Case("fft.fftfreq", "fft.fftfreq", (6,), creation=True),
        Case("fft.rfftfreq", "fft.rfftfreq", (5,), creation=True),
        Case("fft.fft-axis-out-of-range", "fft.fft", (x,), {"axis": 2}),
        Case("fft.fft-n-0", "fft.fft", (x,), {"n": 0}),
        Case("fft.fft-bad-norm", "fft.fft", (x,), {"norm": "sideways"}),
        Case("fft.fftn-s-0", "fft.fftn", (x,), {"s": (0, 2), "axes": (0, 1)}),
        # NumPy's answers (fft-input)
        Case("fft.fft-float32", "fft.fft", (arr("fi", "float32", (4, 6)),)),
        Case("fft.fftn-float64", "fft.fftn", (arr("fi", "float64", (4, 6)),)),
        Case("fft.fft-int32", "fft.fft", (arr("fi", "int32", (4, 6)),), tags={"fft-input"}),
        Case("fft.irfft-float32", "fft.irfft", (arr("fi", "float32", (4, 6)),)),
        Case("fft.hfft-float64", "fft.hfft", (arr("fi", "float64", (4, 6)),)),
        Case("fft.rfft-int16", "fft.rfft", (arr("fi", "int16", (4, 6)),), tags={"fft-input"}),
        Case("fft.rfftn-bool", "fft.rfftn", (arr("fi", "bool", (4, 6)),), tags={"fft-input"}),
        Case("fft.fftshift-int8", "fft.fftshift", (arr("fi", "int8", (4, 6)),),
             tags={"fft-input"}),
    ]
    for case in c:
        if case.fn in FFT_COMPLEX_IN and any(
                isinstance(a, np.ndarray) and a.dtype.kind != "c" for a in case.args):
            case.tags = case.tags | {"fft-input"}
    return c


CASES = (_elementwise_cases() + _creation_cases() + _manipulation_cases()
         + _reduction_cases() + _search_sort_set_cases() + _linalg_cases() + _dtype_cases()
         + _fft_cases())


# ---- running a case in a namespace ----------------------------------------------------------


def _function(ns, name):
    obj = ns
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def _resolve(ns, obj, device):
    if isinstance(obj, np.ndarray):
        if ns is np:
            return obj.copy()
        if ns is xp:
            return xp.asarray(obj.copy(), device=device)
        return ns.asarray(obj.copy())
    if isinstance(obj, D):
        return np.dtype(obj.name) if ns is np else getattr(ns, obj.name)
    if isinstance(obj, Seq):
        return [_resolve(ns, item, device) for item in obj.items]
    return obj


def _run(ns, case, device=None):
    fn = _function(ns, case.fn)
    args = [_resolve(ns, a, device) for a in case.args]
    kwargs = {k: _resolve(ns, v, device) for k, v in case.kwargs.items()}
    if case.creation and ns is xp:
        kwargs["device"] = device
    return fn(*args, **kwargs)


def _quiet(call):
    """Run a reference call with NumPy's floating-point warnings silenced."""
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call()


_STRICT_ARRAY = type(strict.asarray(0))


def _dtype_name(dt):
    name = getattr(dt, "name", None)
    if isinstance(name, str) and not name.startswith("array_api_strict"):
        return name
    return str(dt).rsplit(".", 1)[-1]


def _host(value, ns, device):
    """A result as plain data: ("array", dtype name, ndarray), tuples, dtypes, infos."""
    if ns is xp and value.__class__ is xp.Array:
        assert value.device is device, f"result on {value.device}, expected {device}"
        return ("array", value.dtype.name, np.asarray(value.to_device("cpu")))
    if ns is strict and isinstance(value, _STRICT_ARRAY):
        return ("array", _dtype_name(value.dtype), np.from_dlpack(value).copy())
    if ns is np and isinstance(value, (np.ndarray, np.generic)):
        return ("array", value.dtype.name, np.asarray(value))
    if isinstance(value, (tuple, list)):
        return tuple(_host(v, ns, device) for v in value)
    if type(value).__name__ == "DType" or isinstance(value, np.dtype):
        return ("dtype", _dtype_name(value))
    if hasattr(value, "bits") and hasattr(value, "max"):
        fields = ("bits", "eps", "max", "min", "smallest_normal")
        return ("info", _dtype_name(value.dtype),
                tuple(float(getattr(value, f)) for f in fields if hasattr(value, f)))
    return ("value", value)


def _apply_post(data, post):
    if post is None:
        return data

    def arrays(d):
        return tuple(arrays(x) for x in d) if d[0] != "array" else d[2]

    def dtypes(d):
        return tuple(dtypes(x) for x in d) if d[0] != "array" else d[1]

    raw = arrays(data) if isinstance(data, tuple) and data and data[0] != "array" else data[2]
    out = post(raw)
    kinds = dtypes(data) if data[0] != "array" else data[1]
    if isinstance(out, tuple):
        return tuple(("array", str(o.dtype), o) for o in out), kinds
    return ("array", str(out.dtype), out), kinds


def _compare(got, want, rtol, where="result"):
    if isinstance(want, tuple) and want and want[0] == "array":
        assert isinstance(got, tuple) and got[0] == "array", f"{where}: {got!r} vs array"
        _, gdt, g = got
        _, wdt, w = want
        assert gdt == wdt, f"{where}: dtype {gdt}, expected {wdt}"
        assert g.shape == w.shape, f"{where}: shape {g.shape}, expected {w.shape}"
        if w.dtype.kind in "fc":
            tol = rtol if rtol is not None else RTOL.get(wdt, RTOL.get(w.dtype.name, 1e-12))
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True,
                                       err_msg=where)
        else:
            np.testing.assert_array_equal(g, w, err_msg=where)
        return
    if isinstance(want, tuple) and want and want[0] in ("dtype", "value"):
        assert got == want, f"{where}: {got!r}, expected {want!r}"
        return
    if isinstance(want, tuple) and want and want[0] == "info":
        assert got[0] == "info" and got[1] == want[1], f"{where}: {got!r} vs {want!r}"
        np.testing.assert_allclose(got[2], want[2], rtol=1e-15, err_msg=where)
        return
    assert isinstance(got, tuple) and len(got) == len(want), f"{where}: {got!r} vs {want!r}"
    for i, (g, w) in enumerate(zip(got, want)):
        _compare(g, w, rtol, f"{where}[{i}]")


def _builtin_kinds(err):
    """The built-in exception classes an error is (AxisError: ValueError and IndexError)."""
    return tuple(c for c in type(err).__mro__
                 if c.__module__ == "builtins" and c not in (Exception, BaseException, object)
                 and c is not LookupError)


def _expect_same_error(case, device, strict_err):
    kinds = _builtin_kinds(strict_err)
    try:
        got = _run(xp, case, device)
    except Exception as err:
        missing = [k.__name__ for k in kinds if not isinstance(err, k)]
        assert not missing, (
            f"{case.fn}: array_api_strict raised {type(strict_err).__name__}"
            f"({strict_err}); tessera raised {type(err).__name__}({err}), which is not "
            f"{', '.join(missing)}"
        )
        return
    pytest.fail(
        f"{case.fn}: array_api_strict raised {type(strict_err).__name__}({strict_err}) but "
        f"tessera returned {_host(got, xp, device)!r}"
    )


def _half_to_single(case):
    """The case with 8-bit integer and boolean arrays as float32 (NumPy's float16 answers
    become float32 ones, as in tessera, which has no float16)."""
    def widen(a):
        if isinstance(a, np.ndarray) and a.dtype.kind in "biu" and a.dtype.itemsize == 1:
            return a.astype(np.float32)
        return Seq(*map(widen, a.items)) if isinstance(a, Seq) else a

    return Case(case.id, case.fn, [widen(a) for a in case.args],
                {k: widen(v) for k, v in case.kwargs.items()}, creation=case.creation,
                post=case.post, rtol=case.rtol)


def _has_half(data):
    if isinstance(data, tuple) and data and data[0] == "array":
        return data[1] == "float16"
    return isinstance(data, tuple) and any(_has_half(d) for d in data)


def _check(case, device, ref_ns):
    want = _host(_quiet(lambda: _run(ref_ns, case)), ref_ns, None)
    if ref_ns is np and _has_half(want):
        want = _host(_quiet(lambda: _run(np, _half_to_single(case))), np, None)
    got = _host(_run(xp, case, device), xp, device)
    if case.post is not None:
        got, got_kinds = _apply_post(got, case.post)
        want, want_kinds = _apply_post(want, case.post)
        assert got_kinds == want_kinds, f"dtypes {got_kinds}, expected {want_kinds}"
    _compare(got, want, case.rtol)


def _supported(case, device):
    """False when the device lacks a dtype the case needs (skip on capability)."""
    have = {d.name for d in device.backend.dtypes(device)}
    for a in case.args + tuple(case.kwargs.values()):
        items = a.items if isinstance(a, Seq) else (a,)
        for item in items:
            name = item.name if isinstance(item, D) else (
                item.dtype.name if isinstance(item, np.ndarray) else None)
            if name is not None and name not in have:
                return name
    return None


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_matches_strict(device, case):
    lacking = _supported(case, device)
    if lacking:
        pytest.skip(f"{device} has no {lacking}")
    if case.tags or case.id in STRICT_DEFECTS:
        _check_numpy(case, device)  # explicitly NumPy's answer
        return
    try:
        _quiet(lambda: _run(strict, case))
    except Exception as strict_err:
        if isinstance(strict_err, TypeError) and deviation_tags(case):
            _check_numpy(case, device)  # a documented deviation: NumPy's answer
        else:
            _expect_same_error(case, device, strict_err)
        return
    _check(case, device, strict)


def _check_numpy(case, device):
    """tessera gives NumPy's answer: its result, or the same kind of error."""
    try:
        _quiet(lambda: _run(np, case))
    except Exception as np_err:
        _expect_same_error(case, device, np_err)
        return
    _check(case, device, np)


def test_every_deviation_tag_is_documented():
    used = set().union(*(deviation_tags(c) for c in CASES))
    assert used == DEVIATIONS.keys()
    assert set(STRICT_DEFECTS) <= {c.id for c in CASES}
    for tag in DEVIATIONS:
        assert f"``{tag}``" in __doc__


def test_case_ids_are_unique():
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))
