"""The plain math reference of attention, forward and backward, in the xp namespace only.

``softmax(Q K^T * scale + mask) V`` computed whole (the ``Sq x Sk`` score matrix is
materialised), with nothing but Array API functions of the inputs' namespace, so
it runs on any backend and on any Array API library. It is what every backend's
``attention_fwd``/``attention_bwd`` kernels are tested against (in float64); it
is not meant to be fast. Semantics are those of
:func:`tessera_array.nn.attention` (fully masked rows: output 0, lse -inf, zero
gradients); the arguments are trusted (the public functions validate).
"""

from __future__ import annotations

import math

__all__ = ["attention_backward_reference", "attention_reference", "linear_backward_reference",
           "linear_reference"]


def _visible(xp, sq: int, sk: int, is_causal, window, device):
    """The ``(Sq, Sk)`` bool matrix of (query, key) pairs the band lets through, or None."""
    if not is_causal and window is None:
        return None
    shift = sk - sq if is_causal == "bottom_right" else 0
    left, right = window if window is not None else (None, None)
    if is_causal:
        right = 0 if right is None else min(right, 0)
    d = (xp.reshape(xp.arange(sk, device=device), (1, sk))
         - xp.reshape(xp.arange(sq, device=device), (sq, 1)))
    vis = xp.ones((sq, sk), dtype=xp.bool, device=device)
    if right is not None:
        vis = xp.logical_and(vis, d <= shift + right)
    if left is not None:
        vis = xp.logical_and(vis, d >= shift - left)
    return vis


def _repeat_heads(xp, k, groups: int):
    """``k (..., Hkv, S, D)`` with each head repeated ``groups`` times: ``(..., Hkv*G, S, D)``."""
    if groups == 1:
        return k
    return xp.repeat(k, groups, axis=-3)


def _sum_to(xp, g, shape):
    """``g`` summed over the axes that broadcasting added or stretched to reach its shape."""
    extra = g.ndim - len(shape)
    axes = tuple(range(extra)) + tuple(
        extra + i for i, n in enumerate(shape) if n == 1 and g.shape[extra + i] != 1
    )
    if axes:
        g = xp.sum(g, axis=axes, keepdims=True)
    return xp.reshape(g, shape)


def _forward(q, k, v, attn_mask, is_causal, scale, enable_gqa, window, dropout_p, dropout_mask):
    xp = q.__array_namespace__()
    sq, d = q.shape[-2], q.shape[-1]
    sk = k.shape[-2]
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    groups = q.shape[-3] // k.shape[-3] if enable_gqa and q.ndim >= 3 and k.ndim >= 3 else 1
    kr, vr = _repeat_heads(xp, k, groups), _repeat_heads(xp, v, groups)
    neg_inf = xp.asarray(-math.inf, dtype=q.dtype, device=q.device)
    s = xp.matmul(q, xp.matrix_transpose(kr)) * scale
    if attn_mask is not None:
        if attn_mask.dtype == xp.bool:
            s = xp.where(attn_mask, s, neg_inf)
        else:
            s = s + attn_mask
    vis = _visible(xp, sq, sk, is_causal, window, q.device)
    if vis is not None:
        s = xp.where(vis, s, neg_inf)
    m = xp.max(s, axis=-1, keepdims=True)
    m = xp.where(m == -math.inf, xp.zeros_like(m), m)
    p = xp.exp(s - m)
    l = xp.sum(p, axis=-1, keepdims=True)
    seen = l > 0
    l_safe = xp.where(seen, l, xp.ones_like(l))
    lse = xp.where(seen, m + xp.log(l_safe), xp.full_like(l, -math.inf))
    p = p / l_safe
    if dropout_mask is not None and dropout_p > 0:
        pd = xp.where(dropout_mask, p / (1.0 - dropout_p), xp.zeros_like(p))
    else:
        pd = p
    out = xp.matmul(pd, vr)
    return xp, scale, groups, kr, vr, p, pd, out, lse[..., 0]


def attention_reference(q, k, v, /, *, attn_mask=None, is_causal=False, scale=None,
                        enable_gqa=False, window=None, dropout_p=0.0, dropout_mask=None):
    """``(out, lse)`` of attention computed whole; ``dropout_mask`` (bool, True = keep) applied.

    ``is_causal`` is False, "top_left" or "bottom_right" (True means "top_left");
    ``dropout_mask`` broadcasts to the scores ``(..., Hq, Sq, Sk)``: kept
    probabilities are scaled by ``1 / (1 - dropout_p)``.
    """
    if is_causal is True:
        is_causal = "top_left"
    *_, out, lse = _forward(q, k, v, attn_mask, is_causal, scale, enable_gqa, window,
                            dropout_p, dropout_mask)
    return out, lse


def attention_backward_reference(q, k, v, dout, /, *, attn_mask=None, is_causal=False,
                                 scale=None, enable_gqa=False, window=None, dropout_p=0.0,
                                 dropout_mask=None):
    """``(dq, dk, dv)`` of :func:`attention_reference` for the output gradient ``dout``.

    With ``P = softmax(S)``, ``Pd = P * keep / (1 - p)``, ``O = Pd V``:
    ``dV = Pd^T dO``, ``dP = (dO V^T) * keep / (1 - p)``,
    ``dS = P * (dP - rowsum(dP * P))``, ``dQ = scale dS K``, ``dK = scale dS^T Q``;
    each summed over the axes its input was broadcast along (GQA groups included).
    """
    if is_causal is True:
        is_causal = "top_left"
    xp, scale, groups, kr, vr, p, pd, out, _ = _forward(
        q, k, v, attn_mask, is_causal, scale, enable_gqa, window, dropout_p, dropout_mask)
    dout = xp.broadcast_to(dout, out.shape)
    dpd = xp.matmul(dout, xp.matrix_transpose(vr))
    if dropout_mask is not None and dropout_p > 0:
        dp = xp.where(dropout_mask, dpd / (1.0 - dropout_p), xp.zeros_like(dpd))
    else:
        dp = dpd
    ds = p * (dp - xp.sum(dp * p, axis=-1, keepdims=True))
    dq = xp.matmul(ds, kr) * scale
    dkr = xp.matmul(xp.matrix_transpose(ds), q) * scale
    dvr = xp.matmul(xp.matrix_transpose(pd), dout)
    if groups > 1:
        shp = dkr.shape
        dkr = xp.sum(xp.reshape(dkr, shp[:-3] + (shp[-3] // groups, groups) + shp[-2:]), axis=-3)
        shp = dvr.shape
        dvr = xp.sum(xp.reshape(dvr, shp[:-3] + (shp[-3] // groups, groups) + shp[-2:]), axis=-3)
    return _sum_to(xp, dq, q.shape), _sum_to(xp, dkr, k.shape), _sum_to(xp, dvr, v.shape)


def _half_compute(xp, dtype):
    """float32 where ``dtype`` is a 16-bit real floating dtype (float16, bfloat16), else
    None: the dtype the references compute in."""
    if xp.isdtype(dtype, "real floating") and xp.finfo(dtype).bits < 32:
        return xp.float32
    return None


def _up(xp, acc, *arrays):
    return [a if a is None or acc is None else xp.astype(a, acc) for a in arrays]


def linear_reference(x, weight, bias=None, residual=None):
    """``x @ weight.mT + bias + residual`` composed in the inputs' namespace: the reference
    of every ``linear`` launcher (and the generic composition).

    float16 and bfloat16 operands are computed in float32 and the result is rounded to
    the 16-bit dtype once, at the end.
    """
    xp = x.__array_namespace__()
    dt = x.dtype
    # Note: 16-bit operands compute in float32 with one rounding at the end, as torch's
    # CPU addmm does (its CUDA addmm too, cuBLASLt accumulating in float32); a 16-bit
    # add of bias and residual after a 16-bit matmul would round three times.
    acc = _half_compute(xp, dt)
    x, weight, bias, residual = _up(xp, acc, x, weight, bias, residual)
    out = xp.matmul(x, xp.matrix_transpose(weight))
    if bias is not None:
        out = out + bias
    if residual is not None:
        out = out + residual
    return out if acc is None else xp.astype(out, dt)


def linear_backward_reference(x, weight, dout, *, bias=None, residual=None):
    """``(dx, dweight, dbias, dresidual)`` of :func:`linear_reference`, in the namespace
    (16-bit operands: computed in float32, each gradient rounded back once)."""
    xp = x.__array_namespace__()
    dt = x.dtype
    acc = _half_compute(xp, dt)
    if acc is not None:
        x, weight, dout = _up(xp, acc, x, weight, dout)
        grads = linear_backward_reference(x, weight, dout, bias=bias, residual=residual)
        return tuple(None if g is None else xp.astype(g, dt) for g in grads)
    dx = xp.matmul(dout, weight)
    g = xp.reshape(dout, (-1, dout.shape[-1])) if dout.ndim != 2 else dout
    xs = xp.reshape(x, (-1, x.shape[-1])) if x.ndim != 2 else x
    dw = xp.matmul(xp.matrix_transpose(g), xs)
    db = None if bias is None else xp.sum(g, axis=0)
    dr = None if residual is None else _sum_to(xp, dout, residual.shape)
    return dx, dw, db, dr
