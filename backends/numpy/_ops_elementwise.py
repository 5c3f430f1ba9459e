"""Native elementwise ops of the NumPy backend.

NumPy's ufuncs are used directly wherever they meet the standard; the functions
below patch the IEEE special cases where NumPy and the standard part ways
(``floor_divide`` with infinities, complex ``expm1`` and ``tanh``). A patch
computes with NumPy first and then fixes only the special positions, found with
one vectorised mask, so the common path pays a mask test and nothing else.

Floating-point warnings
-----------------------
The standard defines the results NumPy warns about (``1/0 -> inf``, ``log(0) ->
-inf``, integer ``x // 0 -> 0``), so tessera never lets those warnings reach the
user, without paying ``numpy.errstate`` (about 2 us) on every call:

- a warnings filter, installed when this module is imported, ignores NumPy's
  floating-point warnings raised *from tessera_array's own frames* only;
- where warnings are turned into errors (``-W error``, pytest's
  ``filterwarnings = error``) that filter is outranked, so the front end catches
  the ``RuntimeWarning`` and reruns the op through :func:`call_quietly`.
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = [
    "abs",
    "acos",
    "acosh",
    "add",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "bitwise_and",
    "bitwise_invert",
    "bitwise_left_shift",
    "bitwise_or",
    "bitwise_right_shift",
    "bitwise_xor",
    "call_quietly",
    "ceil",
    "clip",
    "conj",
    "copysign",
    "cos",
    "cosh",
    "divide",
    "equal",
    "exp",
    "expm1",
    "floor",
    "floor_divide",
    "greater",
    "greater_equal",
    "hypot",
    "imag",
    "isfinite",
    "isinf",
    "isnan",
    "less",
    "less_equal",
    "log",
    "log1p",
    "log2",
    "log10",
    "logaddexp",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "maximum",
    "minimum",
    "multiply",
    "negative",
    "nextafter",
    "not_equal",
    "positive",
    "pow",
    "real",
    "reciprocal",
    "remainder",
    "round",
    "sign",
    "signbit",
    "sin",
    "sinh",
    "sqrt",
    "square",
    "subtract",
    "tan",
    "tanh",
    "trunc",
]

# Note: see the module docstring. The filter matches NumPy's floating-point
# messages raised from tessera_array's modules; the user's own NumPy calls keep
# their warnings.
warnings.filterwarnings(
    "ignore",
    message=r"(divide by zero|invalid value|overflow|underflow) encountered in",
    category=RuntimeWarning,
    module=r"tessera_array(\.|$)",
)


def call_quietly(func, *args):
    """``func(*args)`` with NumPy's floating-point error reporting off."""
    with np.errstate(all="ignore"):
        return func(*args)


# ---- NumPy ufuncs that already meet the standard --------------------------------

abs = np.absolute
acos = np.arccos
acosh = np.arccosh
add = np.add
asin = np.arcsin
asinh = np.arcsinh
atan = np.arctan
atan2 = np.arctan2
atanh = np.arctanh
bitwise_and = np.bitwise_and
bitwise_invert = np.invert
bitwise_or = np.bitwise_or
bitwise_xor = np.bitwise_xor
# Note: shift counts that are negative or not smaller than the bit width give
# NumPy's results (0, or -1 for a right shift of a negative value).
bitwise_left_shift = np.left_shift
bitwise_right_shift = np.right_shift
ceil = np.ceil
conj = np.conjugate
copysign = np.copysign
cos = np.cos
cosh = np.cosh
divide = np.divide
equal = np.equal
exp = np.exp
floor = np.floor
greater = np.greater
greater_equal = np.greater_equal
hypot = np.hypot
isfinite = np.isfinite
isinf = np.isinf
isnan = np.isnan
less = np.less
less_equal = np.less_equal
log = np.log
log1p = np.log1p
log2 = np.log2
log10 = np.log10
logaddexp = np.logaddexp
logical_and = np.logical_and
logical_not = np.logical_not
logical_or = np.logical_or
logical_xor = np.logical_xor
maximum = np.maximum
minimum = np.minimum
multiply = np.multiply
negative = np.negative
nextafter = np.nextafter
not_equal = np.not_equal
positive = np.positive
# Integer arrays to negative integer powers raise ValueError, as in NumPy; the
# front end words the error.
pow = np.power
reciprocal = np.reciprocal
remainder = np.remainder
sign = np.sign
signbit = np.signbit
sin = np.sin
sinh = np.sinh
square = np.square
sqrt = np.sqrt
subtract = np.subtract
tan = np.tan
trunc = np.trunc


# ---- functions NumPy has in another shape ---------------------------------------


def real(a: np.ndarray) -> np.ndarray:
    """The real part, as a new array (NumPy returns a view, or ``a`` itself)."""
    return np.array(np.real(a), copy=True)


def imag(a: np.ndarray) -> np.ndarray:
    """The imaginary part, as a new writeable array."""
    return np.array(np.imag(a), copy=True)


def round(a: np.ndarray, decimals: int = 0) -> np.ndarray:
    """Round half to even (NumPy's rule, the standard's too)."""
    if decimals >= 0 and a.dtype.kind in "biu":
        return a.copy()
    return np.asarray(np.round(a, decimals))


def clip(a: np.ndarray, lo, hi) -> np.ndarray:
    """Clamp ``a`` to ``[lo, hi]``; NaN in ``a`` or in a bound gives NaN.

    The front end passes each bound as None, a Python scalar that fits ``a``'s
    dtype, or a buffer of ``a``'s dtype, so the result keeps ``a``'s dtype.
    """
    if lo is None and hi is None:
        return a.copy()
    return np.asarray(np.clip(a, lo, hi))


# ---- special-case patches -------------------------------------------------------

_any = np.count_nonzero  # truthy when any element is True; far cheaper than .any()


def floor_divide(a, b):
    """``floor(a / b)`` for floats, including its IEEE special cases.

    NumPy pairs ``//`` with ``%`` as Python does, which gives ``inf // 2 -> nan``
    and ``-1 // inf -> -1``; the standard asks for ``floor(a / b)`` there
    (``inf`` and ``-0``). Only positions where an operand is infinite are patched.
    """
    r = np.floor_divide(a, b)
    if r.dtype.kind != "f":
        return r
    inf_a = np.isinf(a)
    inf_b = np.isinf(b)
    # count_nonzero: the cheapest "any" NumPy has (ndarray.any costs ~1 us).
    if _any(inf_a) or _any(inf_b):
        r = np.array(r, copy=True)  # writeable even when NumPy gave a scalar
        m = np.broadcast_to(inf_a | inf_b, r.shape)
        fixed = np.broadcast_to(np.floor(np.divide(a, b)), r.shape)
        np.copyto(r, fixed, where=m)
    return r


def expm1(a):
    """``exp(a) - 1``; complex non-finite and zero inputs follow the standard.

    For complex ``z = x + iy`` the patched positions use
    ``exp(x)*cos(y) - 1 + i*exp(x)*sin(y)`` with the standard's values where that
    formula meets ``inf * 0`` or ``inf * nan``.
    """
    r = np.expm1(a)
    if a.dtype.kind != "c":
        return r
    m = ~np.isfinite(a)
    m |= a == 0
    if not _any(m):
        return r
    r = np.asarray(r)
    z = a[m]
    x, y = z.real, z.imag
    e = np.exp(x)
    re = e * np.cos(y) - 1
    im = np.where(y == 0, y, e * np.sin(y))
    # Infinite x with a non-finite y: exp(+inf) -> inf + nan j, exp(-inf) -> -1 + 0j.
    bad_y = ~np.isfinite(y)
    pos = bad_y & (x == np.inf)
    neg = bad_y & (x == -np.inf)
    re = np.where(pos, np.inf, np.where(neg, -1.0, re))
    im = np.where(pos, np.nan, np.where(neg, 0.0, im))
    out = np.empty(z.shape, dtype=a.dtype)
    out.real = re
    out.imag = im
    r[m] = out
    return r


def tanh(a):
    """Hyperbolic tangent; complex ``tanh(+-inf + iy)`` is ``+-1 + 0j`` with y's sign.

    NumPy follows C99 here (``1 + i*0*sin(2y)``, so ``tanh(inf + 2j) -> 1 - 0j``);
    the standard asks for an imaginary zero with the sign of ``y``.
    """
    r = np.tanh(a)
    if a.dtype.kind != "c":
        return r
    m = np.isinf(a.real)
    if not _any(m):
        return r
    r = np.asarray(r)
    z = a[m]
    out = np.empty(z.shape, dtype=a.dtype)
    out.real = np.sign(z.real)
    out.imag = np.copysign(0.0, z.imag)
    r[m] = out
    return r
