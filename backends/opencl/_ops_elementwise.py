"""Native elementwise ops of the OpenCL backend: generated OpenCL C.

Each op is an expression over ``a0`` (and ``a1``, ``a2``) in the operands' C type,
chosen per dtype by :func:`expression`; :func:`._kernels.launch_map` broadcasts and
builds (per dtype, the unary ops, the binary ops with ``where`` and the casts are one
program each: :func:`_families`). Integer arithmetic wraps (computed in the unsigned
type of the same width), integer ``//`` and ``%`` by zero give 0 and follow the
divisor's sign, shifts past the width give 0 (or -1 for a negative signed left
operand), and ``maximum``/``minimum`` propagate NaN, all as NumPy does. A dtype an op has no
expression for (complex ``divide``, float ``floor_divide``, integer ``pow``, the
complex transcendental functions, ...) runs through the host fallback, and the
name is listed by ``host_fallbacks()``.
"""

from __future__ import annotations

import numpy as np
from tessera_array.backends._common import broadcast_shape as _broadcast_shape
from tessera_array.backends._common import memo
from tessera_array.backends.numpy import _ops as _host_ops

from . import _generate, _kernels, _memory
from ._fallback import host_fallback
from ._families import add_families

__all__ = [
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh",
    "bitwise_and", "bitwise_invert", "bitwise_left_shift", "bitwise_or",
    "bitwise_right_shift", "bitwise_xor", "ceil", "clip", "conj", "copysign", "cos",
    "cosh", "divide", "equal", "exp", "expm1", "floor", "floor_divide", "greater",
    "greater_equal", "hypot", "imag", "isfinite", "isinf", "isnan", "less", "less_equal",
    "log", "log1p", "log2", "log10", "logaddexp", "logical_and", "logical_not",
    "logical_or", "logical_xor", "maximum", "minimum", "multiply", "negative",
    "nextafter", "not_equal", "positive", "pow", "real", "reciprocal", "remainder",
    "round", "sign", "signbit", "sin", "sinh", "sqrt", "square", "subtract", "tan",
    "tanh", "trunc", "where",
]

_NATIVE = _memory.NATIVE
_CT = _generate.CTYPE
_SIGNED = {"char": "uchar", "short": "ushort", "int": "uint", "long": "ulong"}
_UNSIGNED = ("uchar", "ushort", "uint", "ulong")
_INTS = tuple(_SIGNED) + _UNSIGNED
_FLOATS = ("float", "double")
_COMPLEX = ("float2", "double2")
_BITS = {"char": 8, "uchar": 8, "short": 16, "ushort": 16, "int": 32, "uint": 32,
         "long": 64, "ulong": 64}
_REAL_OF = {"float2": "float", "double2": "double"}


def _wrap(t: str, e: str) -> str:
    """An integer expression of type ``t`` computed modulo 2**bits."""
    u = _SIGNED.get(t)
    if u is None:
        return f"({t})({e})"
    return f"as_{t}(({u})({e}))"


def _u(t: str, x: str) -> str:
    u = _SIGNED.get(t, t)
    return f"(({u}){x})"


# ---- expressions -------------------------------------------------------------------------

_FLOAT_UNARY = {
    "acos": "acos(a0)", "acosh": "acosh(a0)", "asin": "asin(a0)", "asinh": "asinh(a0)",
    "atan": "atan(a0)", "atanh": "atanh(a0)", "ceil": "ceil(a0)", "cos": "cos(a0)",
    "cosh": "cosh(a0)", "exp": "exp(a0)", "expm1": "expm1(a0)", "floor": "floor(a0)",
    "log": "log(a0)", "log1p": "log1p(a0)", "log2": "log2(a0)", "log10": "log10(a0)",
    "sin": "sin(a0)", "sinh": "sinh(a0)", "sqrt": "sqrt(a0)", "tan": "tan(a0)",
    "tanh": "tanh(a0)", "trunc": "trunc(a0)", "round": "rint(a0)", "abs": "fabs(a0)",
    "negative": "-a0", "positive": "a0", "square": "a0 * a0", "reciprocal": "1 / a0",
    "sign": "a0 > 0 ? 1 : (a0 < 0 ? -1 : (a0 == 0 ? 0 : a0))",
}
_FLOAT_BINARY = {
    "add": "a0 + a1", "subtract": "a0 - a1", "multiply": "a0 * a1", "divide": "a0 / a1",
    "atan2": "atan2(a0, a1)", "hypot": "hypot(a0, a1)", "copysign": "copysign(a0, a1)",
    "nextafter": "nextafter(a0, a1)", "pow": "pow(a0, a1)",
    "maximum": "isnan(a0) ? a0 : (a0 > a1 ? a0 : a1)",
    "minimum": "isnan(a0) ? a0 : (a0 < a1 ? a0 : a1)",
    "logaddexp": "tlogaddexp(a0, a1)",
}
_LOGADDEXP = """
inline {t} tlogaddexp({t} x, {t} y)
{{
  if (x == y) return x + ({t})M_LN2{f};
  {t} d = x - y;
  if (d > 0) return x + log1p(exp(-d));
  if (d <= 0) return y + log1p(exp(d));
  return d;
}}
"""
_COMPARE = {"equal": "==", "not_equal": "!=", "less": "<", "less_equal": "<=",
            "greater": ">", "greater_equal": ">="}
_LOGICAL = {"logical_and": "{0} && {1}", "logical_or": "{0} || {1}",
            "logical_xor": "({0}) != ({1})"}
_BITWISE = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"}
_PREDICATES = ("isnan", "isinf", "isfinite", "signbit")


def expression(name: str, t: str):
    """``(expr, out_ct, preamble)`` of op ``name`` on operands of C type ``t`` (bool
    arrays are ``"bool"``), or None where the op runs on the host."""
    if name in _COMPARE:
        if t in _COMPLEX:
            if name == "equal":
                return "a0.x == a1.x && a0.y == a1.y", "bool", ""
            if name == "not_equal":
                return "a0.x != a1.x || a0.y != a1.y", "bool", ""
            return None
        return f"a0 {_COMPARE[name]} a1", "bool", ""
    if name in _LOGICAL:
        return _LOGICAL[name].format(_truth(t, "a0"), _truth(t, "a1")), "bool", ""
    if name == "logical_not":
        return f"!({_truth(t, 'a0')})", "bool", ""
    if name in _PREDICATES:
        if t in _FLOATS:
            return f"{name}(a0)", "bool", ""
        if t in _COMPLEX:
            expr = {"isnan": "isnan(a0.x) || isnan(a0.y)",
                    "isinf": "isinf(a0.x) || isinf(a0.y)",
                    "isfinite": "isfinite(a0.x) && isfinite(a0.y)"}.get(name)
            return (expr, "bool", "") if expr else None
        if name == "signbit":
            return ("a0 < 0" if t in _SIGNED else "0"), "bool", ""
        return ("1" if name == "isfinite" else "0"), "bool", ""
    if t == "bool":
        return _bool_expression(name)
    if t in _INTS:
        return _int_expression(name, t)
    if t in _FLOATS:
        return _float_expression(name, t)
    return _complex_expression(name, t)


def _truth(t, x):
    if t in _COMPLEX:
        return f"({x}.x != 0 || {x}.y != 0)"
    return f"({x} != 0)"


def _bool_expression(name):
    expr = {
        "add": "a0 | a1", "multiply": "a0 & a1", "maximum": "a0 | a1",
        "minimum": "a0 & a1", "bitwise_and": "a0 & a1", "bitwise_or": "a0 | a1",
        "bitwise_xor": "a0 ^ a1", "bitwise_invert": "!a0", "positive": "a0", "abs": "a0",
        "where": None,
    }.get(name)
    return (expr, "bool", "") if expr else None


def _int_expression(name, t):
    signed = t in _SIGNED
    bits = _BITS[t]
    if name in ("add", "subtract", "multiply"):
        op = {"add": "+", "subtract": "-", "multiply": "*"}[name]
        return _wrap(t, f"{_u(t, 'a0')} {op} {_u(t, 'a1')}"), t, ""
    if name == "negative":
        return _wrap(t, f"0 - {_u(t, 'a0')}"), t, ""
    if name == "square":
        return _wrap(t, f"{_u(t, 'a0')} * {_u(t, 'a0')}"), t, ""
    if name in ("positive", "floor", "ceil", "trunc", "round"):
        return "a0", t, ""
    if name == "abs":
        return (_wrap(t, f"a0 < 0 ? 0 - {_u(t, 'a0')} : {_u(t, 'a0')}"), t, "") if signed \
            else ("a0", t, "")
    if name == "sign":
        return (f"({t})(a0 > 0 ? 1 : (a0 < 0 ? -1 : 0))" if signed else f"({t})(a0 > 0)"), t, ""
    if name in ("maximum", "minimum"):
        return f"a0 {'>' if name == 'maximum' else '<'} a1 ? a0 : a1", t, ""
    if name in _BITWISE:
        return f"a0 {_BITWISE[name]} a1", t, ""
    if name == "bitwise_invert":
        return f"({t})(~a0)", t, ""
    if name == "bitwise_left_shift":
        # NumPy: a count outside [0, bits) gives 0.
        return (f"({_u(t, 'a1')} < {bits}) ? {_wrap(t, _u(t, 'a0') + ' << a1')} : ({t})0",
                t, "")
    if name == "bitwise_right_shift":
        fill = f"(a0 < 0 ? ({t})-1 : ({t})0)" if signed else f"({t})0"
        return f"({_u(t, 'a1')} < {bits}) ? ({t})(a0 >> a1) : {fill}", t, ""
    if name in ("floor_divide", "remainder"):
        return _int_division(name, t, signed), t, ""
    if name == "pow":
        # Square-and-multiply modulo 2**bits (NumPy's loop); negative exponents are
        # refused before the launch (see pow below).
        u = _SIGNED.get(t, t)
        back = f"as_{t}(r)" if t in _SIGNED else "r"
        return "tipow(a0, a1)", t, f"""
inline {t} tipow({t} a, {t} b)
{{
  {u} r = 1, base = ({u})a, e = ({u})b;
  while (e) {{
    if (e & 1) r = ({u})(r * base);
    base = ({u})(base * base);
    e >>= 1;
  }}
  return {back};
}}
"""
    return None


def _int_division(name, t, signed):
    if not signed:
        if name == "floor_divide":
            return f"a1 == 0 ? ({t})0 : ({t})(a0 / a1)"
        return f"a1 == 0 ? ({t})0 : ({t})(a0 % a1)"
    # Python's rules (floor the quotient, the remainder takes the divisor's sign);
    # x // 0 and x % 0 give 0, MIN // -1 wraps to MIN, as in NumPy.
    if name == "floor_divide":
        return (f"a1 == 0 ? ({t})0 : (a1 == -1 ? {_wrap(t, '0 - ' + _u(t, 'a0'))} : "
                f"({t})(a0 / a1 - ((a0 % a1 != 0) && ((a0 < 0) != (a1 < 0)))))")
    return (f"(a1 == 0 || a1 == -1) ? ({t})0 : ({t})((a0 % a1 != 0 && ((a0 % a1 < 0) != "
            f"(a1 < 0))) ? a0 % a1 + a1 : a0 % a1)")


# NumPy's npy_divmod: the quotient floored from (a - fmod(a, b)) / b, the remainder
# with the divisor's sign; b == 0 gives a / b and fmod(a, b).
_DIVMOD = """
inline {t} tdivmod({t} a, {t} b, {t} *modulus)
{{
  {t} mod = fmod(a, b);
  if (b == 0) {{ *modulus = mod; return a / b; }}
  {t} div = (a - mod) / b;
  if (mod != 0) {{
    if ((b < 0) != (mod < 0)) {{ mod += b; div -= 1; }}
  }} else {{
    mod = copysign(({t})0, b);
  }}
  {t} fdiv;
  if (div != 0) {{
    fdiv = floor(div);
    if (div - fdiv > ({t})0.5) fdiv += 1;
  }} else {{
    fdiv = copysign(({t})0, a / b);
  }}
  *modulus = mod;
  return fdiv;
}}
"""


def _divmod_preamble(t):
    """The helpers of ``floor_divide`` and ``remainder``: one text for both, so that a
    program holding both defines them once."""
    return _DIVMOD.format(t=t) + f"""
inline {t} tfloordiv({t} a, {t} b)
{{
  {t} m;
  // The NumPy backend's patch: an infinite operand gives floor(a / b).
  if (isinf(a) || isinf(b)) return floor(a / b);
  return tdivmod(a, b, &m);
}}

inline {t} tremainder({t} a, {t} b)
{{
  {t} m;
  if (b == 0) return fmod(a, b);
  tdivmod(a, b, &m);
  return m;
}}
"""


def _float_expression(name, t):
    if name in ("floor_divide", "remainder"):
        return ("tfloordiv(a0, a1)" if name == "floor_divide" else "tremainder(a0, a1)"), t, \
            _divmod_preamble(t)
    if name in _FLOAT_UNARY:
        return _FLOAT_UNARY[name], t, ""
    if name in _FLOAT_BINARY:
        pre = _LOGADDEXP.format(t=t, f="_F" if t == "float" else "") if name == "logaddexp" \
            else ""
        return _FLOAT_BINARY[name], t, pre
    if name in ("conj", "real"):
        return "a0", t, ""
    if name == "imag":
        return f"({t})0", t, ""
    return None


def _complex_expression(name, t):
    r = _REAL_OF[t]
    expr = {
        "add": "a0 + a1", "subtract": "a0 - a1", "negative": "-a0", "positive": "a0",
        # NumPy's SIMD loops (x86-64 with FMA) round complex products this way;
        # measured equal bit for bit on 20000 random pairs per precision.
        "multiply": f"({t})(fma(a0.x, a1.x, -(a0.y * a1.y)), fma(a0.x, a1.y, a0.y * a1.x))",
        "square": f"({t})(fma(a0.x, a0.x, -(a0.y * a0.y)), fma(a0.x, a0.y, a0.y * a0.x))",
        "conj": f"({t})(a0.x, -a0.y)",
    }.get(name)
    if expr is not None:
        return expr, t, ""
    if name == "real":
        return "a0.x", r, ""
    if name == "imag":
        return "a0.y", r, ""
    if name == "abs":
        return "hypot(a0.x, a0.y)", r, ""
    from ._complex_math import complex_expression  # divide, reciprocal, sign, exp, log, ...

    return complex_expression(name, t)


# ---- launching ---------------------------------------------------------------------------


def _ct(a) -> str:
    return "bool" if a.dtype.char == "?" else _CT[a.dtype.char]


def _scalar(value, dtype):
    """A Python scalar as the numpy scalar the kernel argument takes."""
    if dtype.char == "?":
        return np.uint8(bool(value))
    if dtype.kind == "f" and value.__class__ is not float:
        value = float(value)  # OverflowError for huge ints: the front end's general path
    return dtype.type(value)


_EXPR_CACHE = memo("opencl.elementwise.expressions")  # (op, C type) -> its spec or None
# op -> its listed host fallback: a listing made at import, not a cache (clear_all keeps it;
# an entry made again at first use would carry another label)
_FALLBACK: dict = {}
_ALL_CT = ("bool", "char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "float",
           "double", "float2", "double2")
_KIND_OF = {"bool": "b", "float": "f", "double": "f", "float2": "c", "double2": "c"}
# The dtype kinds the front end hands each op (others are cast first or refused),
# for the list of fallbacks; ops not named take every kind.
_REACHES = dict.fromkeys(
    ("acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "exp", "expm1",
     "log", "log1p", "log2", "log10", "sin", "sinh", "sqrt", "tan", "tanh", "divide",
     "reciprocal", "conj", "real", "imag"), "fc")
_REACHES.update(dict.fromkeys(("atan2", "hypot", "copysign", "nextafter", "logaddexp"), "f"))
_REACHES.update(dict.fromkeys(("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_invert"),
                              "biu"))
_REACHES.update(dict.fromkeys(("bitwise_left_shift", "bitwise_right_shift"), "iu"))
_REACHES.update(dict.fromkeys(("floor_divide", "remainder", "maximum", "minimum", "clip",
                               "floor", "ceil", "trunc", "signbit"), "iuf"))
_REACHES.update(dict.fromkeys(("less", "less_equal", "greater", "greater_equal"), "biuf"))
_REACHES.update(dict.fromkeys(("negative", "positive", "square", "sign", "pow", "subtract"),
                              "iufc"))


def _kind(t):
    return _KIND_OF.get(t, "u" if t in _UNSIGNED else "i")


def _host_dtypes(name) -> list:
    """The dtypes reaching op ``name`` that have no expression (they run on the host)."""
    kinds = _REACHES.get(name, "biufc")
    return [_generate.NP_OF[t].name for t in _ALL_CT
            if _kind(t) in kinds and expression(name, t) is None]


def _expr(name, t):
    key = (name, t)
    hit = _EXPR_CACHE.get(key, False)
    if hit is False:
        hit = _EXPR_CACHE[key] = expression(name, t)
    return hit


def _fallback(name, label=None):
    """The host fallback of ``name``, listed as ``name[label]`` (by default, the
    dtypes it serves)."""
    fn = _FALLBACK.get(name)
    if fn is None:
        label = label or ", ".join(_host_dtypes(name)) or "other dtypes"
        fn = _FALLBACK[name] = host_fallback(f"{name}[{label}]", getattr(_host_ops, name))
    return fn


_UNARY_OPS: list = []  # the names made by _unary and _binary (for the families)
_BINARY_OPS: list = []


def _unary(name):
    _UNARY_OPS.append(name)
    def op(a, /):
        spec = _expr(name, _ct(a))
        if spec is None:
            return _fallback(name)(a)
        expr, out_ct, pre = spec
        return _kernels.launch_map(a.queue, expr, None, [a], out_ct, preamble=pre,
                                   shape=a.shape)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise ``{name}`` (generated OpenCL C)."
    return op


def _binary(name):
    _BINARY_OPS.append(name)
    def op(a, b, /):
        if a.__class__ is _NATIVE:
            arr = a
            shape = a.shape if b.__class__ is not _NATIVE else \
                _broadcast_shape((a.shape, b.shape))
        else:
            arr = b
            shape = b.shape
        spec = _expr(name, _ct(arr))
        if spec is None:
            return _fallback(name)(a, b)
        expr, out_ct, pre = spec
        dt = arr.dtype
        x = a if a.__class__ is _NATIVE else _scalar(a, dt)
        y = b if b.__class__ is _NATIVE else _scalar(b, dt)
        return _kernels.launch_map(arr.queue, expr, None, [x, y], out_ct, preamble=pre,
                                   shape=shape)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"Elementwise ``{name}`` (generated OpenCL C)."
    return op


# One line per op (written out, so that linters and readers see every name).
abs = _unary("abs")
acos = _unary("acos")
acosh = _unary("acosh")
add = _binary("add")
asin = _unary("asin")
asinh = _unary("asinh")
atan = _unary("atan")
atan2 = _binary("atan2")
atanh = _unary("atanh")
bitwise_and = _binary("bitwise_and")
bitwise_invert = _unary("bitwise_invert")
bitwise_left_shift = _binary("bitwise_left_shift")
bitwise_or = _binary("bitwise_or")
bitwise_right_shift = _binary("bitwise_right_shift")
bitwise_xor = _binary("bitwise_xor")
ceil = _unary("ceil")
conj = _unary("conj")
copysign = _binary("copysign")
cos = _unary("cos")
cosh = _unary("cosh")
divide = _binary("divide")
equal = _binary("equal")
exp = _unary("exp")
expm1 = _unary("expm1")
floor = _unary("floor")
floor_divide = _binary("floor_divide")
greater = _binary("greater")
greater_equal = _binary("greater_equal")
hypot = _binary("hypot")
imag = _unary("imag")
isfinite = _unary("isfinite")
isinf = _unary("isinf")
isnan = _unary("isnan")
less = _binary("less")
less_equal = _binary("less_equal")
log = _unary("log")
log1p = _unary("log1p")
log2 = _unary("log2")
log10 = _unary("log10")
logaddexp = _binary("logaddexp")
logical_and = _binary("logical_and")
logical_not = _unary("logical_not")
logical_or = _binary("logical_or")
logical_xor = _binary("logical_xor")
maximum = _binary("maximum")
minimum = _binary("minimum")
multiply = _binary("multiply")
negative = _unary("negative")
nextafter = _binary("nextafter")
not_equal = _binary("not_equal")
positive = _unary("positive")
_pow = _binary("pow")
real = _unary("real")
reciprocal = _unary("reciprocal")
remainder = _binary("remainder")
sign = _unary("sign")
signbit = _unary("signbit")
sin = _unary("sin")
sinh = _unary("sinh")
sqrt = _unary("sqrt")
square = _unary("square")
subtract = _binary("subtract")
tan = _unary("tan")
tanh = _unary("tanh")
trunc = _unary("trunc")

for _name in __all__:
    if _host_dtypes(_name) and _name not in ("where", "clip", "round"):
        _fallback(_name)  # listed now, not at first use
del _name

_fallback("round", "complex64, complex128, decimals != 0")
_fallback("reciprocal", "bool, integer")  # NumPy's integer 1/x (the standard: floats only)
_fallback("clip", "bool, complex")

def pow(a, b, /):
    """``a ** b``; integer arrays to negative integer powers raise ValueError, as in
    NumPy (checked on the device first: one byte read back)."""
    arr = a if a.__class__ is _NATIVE else b
    if arr.dtype.kind == "i":
        if b.__class__ is _NATIVE:
            from ._ops_reductions import any as _any

            neg = _kernels.launch_map(b.queue, "a0 < 0", None, [b], "bool", shape=b.shape)
            bad = bool(_memory.to_host(_any(neg))[()])
        else:
            bad = b < 0
        if bad:
            raise ValueError("Integers to negative integer powers are not allowed.")
    return _pow(a, b)


_round0 = _unary("round")


def round(a, decimals: int = 0):
    """Round half to even; ``decimals != 0`` runs on the host."""
    if decimals == 0:
        return _round0(a)
    return _fallback("round")(a, decimals)


def where(condition, a, b, /):
    """``a`` where ``condition`` else ``b``; operands are buffers or weak scalars."""
    arr = a if a.__class__ is _NATIVE else b
    if arr.__class__ is not _NATIVE or condition.__class__ is not _NATIVE:
        raise TypeError(
            f"where: condition and one of x1, x2 must be opencl buffers. Received: "
            f"condition of type {type(condition).__name__}, x1 of type {type(a).__name__}, "
            f"x2 of type {type(b).__name__}"
        )
    shapes = [condition.shape] + [v.shape for v in (a, b) if v.__class__ is _NATIVE]
    shape = _broadcast_shape(shapes)
    dt = arr.dtype
    x = a if a.__class__ is _NATIVE else _scalar(a, dt)
    y = b if b.__class__ is _NATIVE else _scalar(b, dt)
    return _kernels.launch_map(arr.queue, "a0 ? a1 : a2", None, [condition, x, y], _ct(arr),
                               shape=shape)


def clip(a, lo, hi):
    """Clamp ``a`` to ``[lo, hi]`` (NaN propagates); bounds are None, weak scalars or
    buffers of ``a``'s dtype."""
    t = _ct(a)
    if t not in _INTS and t not in _FLOATS:
        return _fallback("clip")(a, lo, hi)
    ops = [a]
    expr = "a0"
    shapes = [a.shape]
    for bound, cmp in ((lo, "<"), (hi, ">")):
        if bound is None:
            continue
        j = len(ops)
        if bound.__class__ is _NATIVE:
            shapes.append(bound.shape)
            ops.append(bound)
        else:
            ops.append(_scalar(bound, a.dtype))
        if t in _FLOATS:
            expr = f"(isnan(a{j}) ? a{j} : (({expr}) {cmp} a{j} ? a{j} : ({expr})))"
        else:
            expr = f"(({expr}) {cmp} a{j} ? a{j} : ({expr}))"
    shape = _broadcast_shape(shapes)
    if t in _FLOATS:
        expr = f"isnan(a0) ? a0 : {expr}"
    return _kernels.launch_map(a.queue, expr, None, ops, t, shape=shape)


# ---- program families ------------------------------------------------------------------------


def _families():
    """Three programs per dtype (see :mod:`._families`): its unary ops, its binary ops
    with ``where``, and its casts to every dtype. A cold build of one holds the kernels
    its neighbours in a test or a program will ask for next."""
    from ._ops_core import cast_expression

    out = []
    for t in _ALL_CT:
        ct = "uchar" if t == "bool" else t
        unary, binary, casts = [], [], []
        for name in _UNARY_OPS:
            spec = _expr(name, t)
            if spec is not None:
                unary.append(_generate.map_member(spec[0], spec[1], (ct,), spec[2]))
        if t in _SIGNED:
            unary.append(_generate.map_member("a0 < 0", "bool", (ct,)))  # pow's check
        for name in _BINARY_OPS:
            spec = _expr(name, t)
            if spec is not None:
                binary.append(_generate.map_member(spec[0], spec[1], (ct, ct), spec[2]))
        binary.append(_generate.map_member("a0 ? a1 : a2", t, ("uchar", ct, ct)))
        for d in _ALL_CT:
            expr = cast_expression(t, d)
            if expr is not None:
                casts.append(_generate.map_member(expr, d, (ct,)))
        out += [unary, binary, casts]
    return out


add_families(_families)
