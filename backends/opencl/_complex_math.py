"""Complex ``divide``, ``reciprocal``, ``sign``, ``exp``, ``log``, ``sqrt``, ``log1p``,
``expm1``, ``log2``, ``log10``, ``sinh``, ``cosh``, ``sin``, ``cos``, ``tanh`` and ``tan``
as OpenCL C (the algorithms of the last ten are beside their sources below).

:func:`complex_expression` gives the elementwise module an expression (and the
preamble functions it calls) for complex64/complex128, so these run as generated
kernels rather than on the host.

Algorithms (written from the published methods, checked against NumPy in
tests/test_opencl_native.py):

- ``divide``, ``reciprocal``: Smith's algorithm (R. L. Smith, "Algorithm 116: Complex
  division", CACM 5(8), 1962), branching on the larger of |re| and |im| of the divisor,
  as NumPy's loops do: equal to NumPy bit for bit, a zero divisor giving inf/nan parts.
- ``sign``: ``z / |z|`` with ``|z| = hypot(re, im)``; 0 for 0; an infinite part gives a
  unit value along it (NaN for two infinite parts); NaN propagates (NumPy 2's rule).
- ``exp``: ``exp(re) * (cos(im), sin(im))``, ``re`` scaled down first past the overflow
  threshold so that a finite result is not lost; C99 Annex G special values (the
  standard's list).
- ``log``: ``(log|z|, atan2(im, re))``; near ``|z| = 1``, ``log|z|`` is
  ``log1p(re**2 + im**2 - 1) / 2`` with the squares' rounding errors recovered by
  ``fma`` (an exact error term, not a contraction), as accurate libms do.
- complex64 ``exp``, ``log``, ``sqrt`` compute in double precision where the device has
  ``cl_khr_fp64`` (one rounding at the end).
- ``sqrt``: the half-angle form ``t = sqrt((|re| + |z|) / 2)``, then ``(t, im / 2t)`` or
  ``(|im| / 2t, copysign(t, im))``, scaled away from overflow and underflow; Annex G
  special values.
"""

from __future__ import annotations

__all__ = ["complex_expression"]

# r: the real C type; t: the complex one; big: a scale threshold; lo/hi: scale factors
_CONST = {
    "float": {"exp_t": "88.0f", "th_t": "9.0f", "big": "0x1p125f", "tiny": "0x1p-124f", "up": "0x1p50f",
              "down": "0x1p-25f", "f": "f"},
    "double": {"exp_t": "709.0", "th_t": "22.0", "big": "0x1p1021", "tiny": "0x1p-1020", "up": "0x1p108",
               "down": "0x1p-54", "f": ""},
}

_DIVIDE = """
inline {t} tcdiv_{r}({t} a, {t} b)
{{
  {r} br = fabs(b.x), bi = fabs(b.y);
  if (br >= bi) {{
    if (br == 0 && bi == 0) return ({t})(a.x / br, a.y / br);
    {r} rat = b.y / b.x;
    {r} scl = ({r})1 / (b.x + b.y * rat);
    return ({t})((a.x + a.y * rat) * scl, (a.y - a.x * rat) * scl);
  }}
  {r} rat = b.x / b.y;
  {r} scl = ({r})1 / (b.y + b.x * rat);
  return ({t})((a.x * rat + a.y) * scl, (a.y * rat - a.x) * scl);
}}
"""

_RECIPROCAL = """
inline {t} tcrecip_{r}({t} a)
{{
  if (fabs(a.y) <= fabs(a.x)) {{
    {r} q = a.y / a.x;
    {r} d = a.x + a.y * q;
    return ({t})(({r})1 / d, -q / d);
  }}
  {r} q = a.x / a.y;
  {r} d = a.x * q + a.y;
  return ({t})(q / d, ({r})-1 / d);
}}
"""

_SIGN = """
inline {t} tcsign_{r}({t} a)
{{
  {r} m = hypot(a.x, a.y);
  if (isnan(m)) return ({t})(NAN, NAN);
  if (isinf(m)) {{
    if (isinf(a.x)) {{
      if (isinf(a.y)) return ({t})(NAN, NAN);
      return ({t})(a.x > 0 ? 1 : -1, 0);
    }}
    return ({t})(0, a.y > 0 ? 1 : -1);
  }}
  if (m == 0) return ({t})(0, 0);
  return ({t})(a.x / m, a.y / m);
}}
"""

_EXP = """
inline {t} tcexp_{r}({t} z)
{{
  {r} x = z.x, y = z.y;
  if (isfinite(x)) {{
    if (!isfinite(y)) return ({t})(NAN, NAN);
    if (y == 0) return ({t})(exp(x), y);
    {r} c = cos(y), s = sin(y);
    if (x > {exp_t}) {{
      {r} e = exp(({r}){exp_t});
      x -= {exp_t}; c *= e; s *= e;
      if (x > {exp_t}) {{ x -= {exp_t}; c *= e; s *= e; }}
    }}
    {r} e = exp(x);
    return ({t})(e * c, e * s);
  }}
  if (isnan(x)) return ({t})(x, y == 0 ? y : NAN);
  if (x > 0) {{
    if (y == 0) return ({t})(x, y);
    if (isfinite(y)) return ({t})(copysign(x, cos(y)), copysign(x, sin(y)));
    return ({t})(x, NAN);
  }}
  if (isfinite(y)) return ({t})(copysign(({r})0, cos(y)), copysign(({r})0, sin(y)));
  return ({t})(0, copysign(({r})0, y));
}}
"""

_LOG = """
inline {t} tclog_{r}({t} z)
{{
  {r} x = z.x, y = z.y;
  {r} h = hypot(x, y);
  {r} re;
  if (h > ({r})0.75 && h < ({r})1.5) {{
    // x*x + y*y - 1 with the products' rounding errors kept (fma gives them exactly).
    {r} ax = fabs(x), ay = fabs(y);
    {r} u = fmax(ax, ay), v = fmin(ax, ay);
    {r} pu = u * u, eu = fma(u, u, -pu);
    {r} pv = v * v, ev = fma(v, v, -pv);
    {r} a = pu - 1;
    {r} s = a + pv;
    {r} bb = s - a;
    {r} err = (a - (s - bb)) + (pv - bb);
    re = ({r})0.5 * log1p(s + (err + (eu + ev)));
  }} else {{
    re = log(h);
  }}
  return ({t})(re, atan2(y, x));
}}
"""

_SQRT = """
inline {t} tcsqrt_{r}({t} z)
{{
  {r} x = z.x, y = z.y;
  if (isinf(y)) return ({t})(({r})INFINITY, y);
  if (isnan(x)) return ({t})(x, NAN);
  if (isinf(x)) {{
    if (x > 0) return ({t})(x, isnan(y) ? y : copysign(({r})0, y));
    return ({t})(isnan(y) ? y : 0, copysign(({r})INFINITY, y));
  }}
  if (isnan(y)) return ({t})(y, y);
  if (x == 0 && y == 0) return ({t})(0, y);
  {r} k = 1;
  if (fabs(x) > {big} || fabs(y) > {big}) {{
    x *= ({r})0.25; y *= ({r})0.25; k = 2;
  }} else if (fabs(x) < {tiny} && fabs(y) < {tiny}) {{
    x *= {up}; y *= {up}; k = {down};
  }}
  {r} t = sqrt(({r})0.5 * (fabs(x) + hypot(x, y)));
  if (x >= 0) return ({t})(t * k, (y / (2 * t)) * k);
  return ({t})((fabs(y) / (2 * t)) * k, copysign(t * k, y));
}}
"""

# log1p and expm1: NumPy's own formulas (numpy/_core/src/umath/funcs.inc.src, nc_log1p and
# nc_expm1), in the same operations and precision (float for complex64), so results
# follow NumPy's, including where those formulas lose accuracy (log1p of a tiny z is
# log(hypot(1 + re, im)), 0 for |z| < eps/2); expm1's non-finite and zero inputs take
# the NumPy backend's patch for the standard's special values.
_LOG1P = """
inline {t} tclog1p_{r}({t} z)
{{
  {r} x1 = z.x + ({r})1;
  return ({t})(log(hypot(x1, z.y)), atan2(z.y, x1));
}}
"""

_EXPM1 = """
inline {t} tcexpm1_{r}({t} z)
{{
  {r} x = z.x, y = z.y;
  if (!isfinite(x) || !isfinite(y) || (x == 0 && y == 0)) {{
    // The NumPy backend's patch (backends/_xp/_elementwise_functions.py: expm1), the standard's
    // special values: exp(x) cos(y) - 1 + i exp(x) sin(y), im = y where y == 0, and
    // inf + nan j / -1 + 0j for x = +inf / -inf with a non-finite y.
    if (!isfinite(y) && x == ({r})INFINITY) return ({t})(x, NAN);
    if (!isfinite(y) && x == -({r})INFINITY) return ({t})(-1, 0);
    {r} e = exp(x);
    return ({t})(e * cos(y) - ({r})1, y == 0 ? y : e * sin(y));
  }}
  {r} a = sin(y / ({r})2);
  return ({t})(expm1(x) * cos(y) - ({r})2 * a * a, exp(x) * sin(y));
}}
"""

# sinh and cosh (and sin, cos through sinh(iz), cosh(iz)): (sinh x cos y, cosh x sin y) and
# (cosh x cos y, sinh x sin y); past |x| = exp_t, cos y and sin y are scaled by e^|x| / 2 in
# steps (no overflow before the result does); y = 0 keeps an exact imaginary zero; the
# non-finite inputs take C99 Annex G's values, with the signs NumPy gives where Annex G
# leaves them open.
_SINHCOSH = """
inline {t} tcsc_big_{r}({r} ax, {r} c, {r} s)
{{
  {r} e = exp(({r}){exp_t});
  c *= e / 2; s *= e / 2; ax -= {exp_t};
  if (ax > {exp_t}) {{ c *= e; s *= e; ax -= {exp_t}; }}
  e = exp(ax);
  return ({t})(e * c, e * s);
}}

inline {t} tcsinh_{r}({t} z)
{{
  {r} x = z.x, y = z.y;
  if (isfinite(x)) {{
    if (isfinite(y)) {{
      if (y == 0) return ({t})(sinh(x), y);
      {r} c = cos(y), s = sin(y);
      if (fabs(x) <= {exp_t}) return ({t})(sinh(x) * c, cosh(x) * s);
      {t} w = tcsc_big_{r}(fabs(x), c, s);
      return ({t})(copysign(({r})1, x) * w.x, w.y);
    }}
    return x == 0 ? ({t})(x, NAN) : ({t})(NAN, NAN);
  }}
  if (isinf(x)) {{
    if (y == 0) return ({t})(x, y);
    if (isfinite(y)) return ({t})(x * copysign(({r})1, cos(y)), copysign(({r})INFINITY, sin(y)));
    return ({t})(({r})INFINITY, NAN);
  }}
  return ({t})(x, y == 0 ? y : NAN);
}}

inline {t} tccosh_{r}({t} z)
{{
  {r} x = z.x, y = z.y;
  if (isfinite(x)) {{
    if (isfinite(y)) {{
      if (y == 0) return ({t})(cosh(x), copysign(({r})0, x) * y);
      {r} c = cos(y), s = sin(y);
      if (fabs(x) <= {exp_t}) return ({t})(cosh(x) * c, sinh(x) * s);
      {t} w = tcsc_big_{r}(fabs(x), c, s);
      return ({t})(w.x, copysign(({r})1, x) * w.y);
    }}
    return x == 0 ? ({t})(NAN, 0) : ({t})(NAN, NAN);
  }}
  if (isinf(x)) {{
    if (y == 0) return ({t})(({r})INFINITY, copysign(({r})0, x) * y);
    if (isfinite(y)) return ({t})(copysign(({r})INFINITY, cos(y)), x * copysign(({r})1, sin(y)));
    return ({t})(({r})INFINITY, NAN);
  }}
  return ({t})(x, y == 0 ? y : NAN);
}}

inline {t} tcsin_{r}({t} z)
{{
  {t} w = tcsinh_{r}(({t})(-z.y, z.x));
  // sin(x + i inf) for a non-finite x: NaN + i inf (Annex G leaves the sign; NumPy's +).
  if (isinf(w.x) && isnan(w.y)) return ({t})(NAN, INFINITY);
  return ({t})(w.y, -w.x);
}}

inline {t} tccos_{r}({t} z)
{{
  return tccosh_{r}(({t})(-z.y, z.x));
}}
"""

# tanh: (sinh x cosh x + i sin y cos y) / (sinh^2 x + cos^2 y) (the identity cosh^2 x -
# sin^2 y = sinh^2 x + cos^2 y keeps the denominator free of cancellation); past |x| =
# th_t, where tanh x rounds to +-1, (+-1, 4 sin y cos y e^(-2|x|)). An infinite x gives
# +-1 + 0j with y's sign (the standard's value, as the NumPy backend patches NumPy's);
# the other non-finite inputs take Annex G's values. tan(z) = -i tanh(iz).
_TANH = """
inline {t} tctanh_{r}({t} z)
{{
  {r} x = z.x, y = z.y;
  if (isinf(x)) return ({t})(copysign(({r})1, x), copysign(({r})0, y));
  if (isnan(x)) return ({t})(x, y == 0 ? y : NAN);
  if (!isfinite(y)) return x == 0 ? ({t})(x, NAN) : ({t})(NAN, NAN);
  {r} sy = sin(y), cy = cos(y);
  if (fabs(x) > ({r}){th_t}) {{
    return ({t})(copysign(({r})1, x), 4 * sy * cy * exp(-2 * fabs(x)));
  }}
  {r} sx = sinh(x), cx = cosh(x);
  {r} den = sx * sx + cy * cy;
  return ({t})(sx * cx / den, sy * cy / den);
}}

inline {t} tctan_{r}({t} z)
{{
  {t} w = tctanh_{r}(({t})(-z.y, z.x));
  return ({t})(w.y, -w.x);
}}
"""

_UNARY = {"reciprocal": ("tcrecip", _RECIPROCAL), "sign": ("tcsign", _SIGN),
          "exp": ("tcexp", _EXP), "log": ("tclog", _LOG), "sqrt": ("tcsqrt", _SQRT),
          "log1p": ("tclog1p", _LOG1P), "expm1": ("tcexpm1", _EXPM1),
          "sinh": ("tcsinh", _SINHCOSH), "cosh": ("tccosh", _SINHCOSH),
          "sin": ("tcsin", _SINHCOSH), "cos": ("tccos", _SINHCOSH),
          "tanh": ("tctanh", _TANH), "tan": ("tctan", _TANH)}
# log2 and log10: NumPy's log times log2(e) or log10(e), each part (nc_log2, nc_log10),
# with the constant in the part's precision.
_SCALED_LOG = {"log2": "1.442695040888963407359924681001892137",
               "log10": "0.434294481903251827651128918916605082"}

# complex64 exp, log and sqrt run in double precision where the device has it (one
# rounding at the end: within an ulp of the exact value; measured on PoCL, log1p in
# float left complex64 log 16 ulps off near |z| = 1), in float otherwise.
_WIDE = frozenset({"exp", "log", "sqrt"})
_WIDEN = """
#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
{double_src}
inline float2 {fn}_float(float2 z) {{ return convert_float2({fn}_double(convert_double2(z))); }}
#else
{float_src}
#endif
"""


def complex_expression(name: str, t: str):
    """``(expression, result C type, preamble)`` of op ``name`` for the complex C type
    ``t`` (``float2`` or ``double2``), or None where this module has none."""
    r = "float" if t == "float2" else "double"
    if name == "divide":
        return f"tcdiv_{r}(a0, a1)", t, _DIVIDE.format(t=t, r=r)
    if name in _SCALED_LOG:
        expr, _, pre = complex_expression("log", t)
        c = f"({r}){_SCALED_LOG[name]}{_CONST[r]['f']}"
        return f"({expr} * {c})", t, pre
    hit = _UNARY.get(name)
    if hit is None:
        return None
    fn, src = hit
    pre = src.format(t=t, r=r, **_CONST[r])
    if r == "float" and name in _WIDE:
        pre = _WIDEN.format(fn=fn, float_src=pre,
                            double_src=src.format(t="double2", r="double", **_CONST["double"]))
    return f"{fn}_{r}(a0)", t, pre
