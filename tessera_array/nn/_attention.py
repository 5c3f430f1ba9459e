"""Scaled dot-product attention, forward and backward: :func:`attention`, :func:`attention_backward`.

PyTorch's ``scaled_dot_product_attention`` names and semantics, with
FlashAttention's bottom-right causal alignment and sliding window, the
log-sum-exp on request, and a dropout mask that is the same on every backend.

Backend contract: the ``attention`` kernel family
-------------------------------------------------
The math runs in the kernels registered under ``attention_fwd`` and
``attention_bwd`` (:data:`tessera_array._dispatch.FAMILIES`), looked up by
``(op, backend, dtype of q)``. The front end validates, broadcasts and reshapes
(views only), so a launcher sees one canonical layout: a common leading shape
``L`` (the output's batch and heads; under GQA the query heads split as
``(Hkv, G)``, the K/V operands are stride-0 broadcast views along ``G``, so K/V
are never copied per head), ``L`` flattening row-major to the dropout's ``bh``:

``attention_fwd(q, k, v, mask, *, scale, causal, window, dropout, want_lse)``
    ``q (*L, Sq, D)``, ``k (*L, Sk, D)``, ``v (*L, Sk, Dv)`` of one dtype, any
    strides (stride 0 included); ``mask`` None or ``(*L, Sq, Sk)``, bool (True =
    take part) or additive of q's dtype; ``scale`` a float; ``causal`` None,
    ``"top_left"`` or ``"bottom_right"``; ``window`` None or ``(left, right)``,
    ints >= 0 or None; ``dropout`` None or ``(p, seed, offset, threshold)`` (the
    keep decision of :mod:`tessera_array.random`, applied to the probabilities,
    kept ones scaled by ``1/(1-p)``). Returns ``(out (*L, Sq, Dv) of q's dtype,
    lse (*L, Sq) or None)``; ``lse`` is float32 for float16/bfloat16/float32
    inputs, float64 for float64, and is that of the undropped scores.
``attention_bwd(q, k, v, out, dout, lse, mask, *, scale, causal, window, dropout)``
    Same layout, ``out``/``dout (*L, Sq, Dv)``, ``lse (*L, Sq)``. Returns
    ``(dq, dk, dv)`` of shapes ``(*L, ...)`` (per query head: the front end sums
    over broadcast axes and GQA groups), q's dtype. It must rebuild the forward's
    dropout mask from ``(seed, offset)`` and be deterministic (same bits run to run).

Query ``i`` sees key ``j`` when ``i + shift - left <= j <= i + shift + right``
(each bound dropped when None), ``shift = Sk - Sq`` for ``"bottom_right"``, else
0; causal caps ``right`` at 0. A row that sees no key (fully masked) gives output
0, lse ``-inf`` and zero gradients, as torch 2.13's CPU SDPA does (and
FlashAttention). Every backend is tested against the plain math reference
:func:`tessera_array.nn._reference.attention_reference`.
"""

from __future__ import annotations

import math
import numbers
import operator

from .. import _dtypes
from .._array import Array
from .._dispatch import lookup
from .._errors import DeviceMismatchError, KernelNotFoundError
from .._helpers import check_array, refuse_half, wrap_as
from ..random import check_dropout_p, check_u64, dropout_keep_threshold

__all__ = ["attention", "attention_backward"]

_CAUSAL = {False: None, True: "top_left", "top_left": "top_left", "bottom_right": "bottom_right"}


class _Problem:
    """The validated call in the launchers' layout (see the module docstring)."""

    __slots__ = (
        "causal",
        "device",
        "dropout",
        "dtype",
        "groups",
        "k",
        "k_shape",
        "kv_lead",
        "lead",
        "mask",
        "ops",
        "out_lead",
        "q",
        "q_shape",
        "scale",
        "sk",
        "sq",
        "v",
        "v_shape",
        "window",
    )


def _shape(func: str, shapes: dict, what: str) -> tuple:
    """The broadcast of the named shapes; ValueError naming them when they do not broadcast."""
    n = max(len(s) for s in shapes.values())
    out = []
    for axis in range(n):
        size = 1
        for s in shapes.values():
            d = s[axis - n + len(s)] if axis - n + len(s) >= 0 else 1
            if d != 1:
                if size not in (1, d):
                    got = ", ".join(f"{k}={v}" for k, v in shapes.items())
                    raise ValueError(f"{func}: {what} must broadcast. Received: {got}")
                size = d
        out.append(size)
    return tuple(out)


def _check_causal(func: str, is_causal):
    if isinstance(is_causal, (bool, str)) and is_causal in _CAUSAL:
        return _CAUSAL[is_causal]
    raise ValueError(
        f"{func}: is_causal must be False, True, 'top_left' or 'bottom_right'. "
        f"Received: is_causal={is_causal!r}"
    )


def _check_window(func: str, window):
    if window is None:
        return None
    if not isinstance(window, (tuple, list)) or len(window) != 2:
        raise TypeError(
            f"{func}: window must be None or a pair (left, right) of ints >= 0 or None. "
            f"Received: window={window!r}"
        )
    out = []
    for side in window:
        if side is None:
            out.append(None)
            continue
        if isinstance(side, bool) or not isinstance(side, numbers.Integral):
            raise TypeError(
                f"{func}: window must be None or a pair (left, right) of ints >= 0 or None. "
                f"Received: window={window!r}"
            )
        if side < 0:
            raise ValueError(
                f"{func}: window sizes must be >= 0. Received: window={window!r}"
            )
        out.append(operator.index(side))
    return tuple(out)


def _prepare(func, q, k, v, attn_mask, is_causal, scale, dropout_p, seed, offset, enable_gqa,
             window) -> _Problem:
    check_array(q, func, "q")
    check_array(k, func, "k")
    check_array(v, func, "v")
    dev = q._device
    for name, a in (("k", k), ("v", v)):
        if a._device is not dev:
            raise DeviceMismatchError(
                f"{func}: q, k and v must be on one device. "
                f"Received: q.device={dev}, {name}.device={a._device}"
            )
    dt = q._dtype
    if dt.kind != "f":
        raise TypeError(
            f"{func}: q, k and v must have a real floating-point dtype. Received: q.dtype={dt}"
        )
    if dt in _dtypes.HALF_FLOATING and not _has_kernel(dev, dt):
        refuse_half(func, dt, "q", f"no attention kernel is registered for them on "
                                   f"{dev.backend.name}")
    if k._dtype is not dt or v._dtype is not dt:
        raise TypeError(
            f"{func}: q, k and v must have the same dtype. "
            f"Received: q.dtype={dt}, k.dtype={k._dtype}, v.dtype={v._dtype}"
        )
    qs, ks, vs = q.shape, k.shape, v.shape
    if len(qs) < 2 or len(ks) < 2 or len(vs) < 2:
        raise ValueError(
            f"{func}: q, k and v must have at least 2 dimensions (..., S, D). "
            f"Received: q.shape={qs}, k.shape={ks}, v.shape={vs}"
        )
    sq, d = qs[-2:]
    sk, dv = vs[-2:]
    if ks[-1] != d:
        raise ValueError(
            f"{func}: q and k must have the same head dimension D (last axis). "
            f"Received: q.shape={qs}, k.shape={ks}"
        )
    if ks[-2] != sk:
        raise ValueError(
            f"{func}: k and v must have the same key length Sk (axis -2). "
            f"Received: k.shape={ks}, v.shape={vs}"
        )
    if d == 0:
        raise ValueError(f"{func}: the head dimension D must be >= 1. Received: q.shape={qs}")
    try:
        kv_lead = _shape(func, {"k": ks[:-2], "v": vs[:-2]}, "")
    except ValueError:
        raise ValueError(
            f"{func}: the leading (batch, head) dimensions of k and v must broadcast. "
            f"Received: k.shape={ks}, v.shape={vs}"
        ) from None
    groups = 1
    if not isinstance(enable_gqa, bool):
        raise TypeError(f"{func}: enable_gqa must be a bool. Received: enable_gqa={enable_gqa!r}")
    if enable_gqa and len(qs) >= 3 and len(kv_lead) >= 1:
        hq, hkv = qs[-3], kv_lead[-1]
        if hkv == 0 or hq % hkv:
            raise ValueError(
                f"{func}: with enable_gqa the number of query heads must be a multiple of "
                f"the number of key/value heads (axis -3). "
                f"Received: q.shape={qs}, k.shape={ks}, v.shape={vs}"
            )
        groups = hq // hkv
    if groups > 1:
        q_lead = qs[:-3] + (hq // groups, groups)
        kv_l = kv_lead + (1,)
    else:
        q_lead, kv_l = qs[:-2], kv_lead
    try:
        lead = _shape(func, {"q": q_lead, "kv": kv_l}, "")
    except ValueError:
        raise ValueError(
            f"{func}: the leading (batch, head) dimensions of q and k/v must broadcast"
            f"{' (with enable_gqa: those before the head axis, and the heads divide)' if groups > 1 else ''}. "
            f"Received: q.shape={qs}, k.shape={ks}, v.shape={vs}"
        ) from None
    out_lead = lead[:-2] + (lead[-2] * groups,) if groups > 1 else lead

    causal = _check_causal(func, is_causal)
    win = _check_window(func, window)
    if scale is None:
        scale = 1.0 / math.sqrt(d)
    elif isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"{func}: scale must be None or a real number. Received: scale={scale!r}")
    else:
        scale = float(scale)
    p = check_dropout_p(func, dropout_p)
    if seed is not None:
        seed = check_u64(func, seed, "seed")
    offset = check_u64(func, offset, "offset")
    dropout = None
    if p > 0.0:
        if seed is None:
            raise ValueError(
                f"{func}: dropout_p > 0 needs a seed (an int in [0, 2**64)): the mask is a "
                f"pure function of (seed, offset). Received: dropout_p={dropout_p!r}, seed=None"
            )
        dropout = (p, seed, offset, dropout_keep_threshold(p))

    ops = dev.ops
    mask = None
    if attn_mask is not None:
        check_array(attn_mask, func, "attn_mask")
        if attn_mask._device is not dev:
            raise DeviceMismatchError(
                f"{func}: attn_mask must be on the device of q. "
                f"Received: q.device={dev}, attn_mask.device={attn_mask._device}"
            )
        if causal is not None:
            raise ValueError(
                f"{func}: give either attn_mask or is_causal, not both (as PyTorch). "
                f"Received: is_causal={is_causal!r} and an attn_mask"
            )
        mdt = attn_mask._dtype
        if mdt is not _dtypes.bool and mdt is not dt:
            raise TypeError(
                f"{func}: attn_mask must be bool (True = take part) or additive of q's dtype. "
                f"Received: attn_mask.dtype={mdt}, q.dtype={dt}"
            )
        target = out_lead + (sq, sk)
        ms = attn_mask.shape
        try:
            ok = len(ms) <= len(target) and _shape(func, {"m": ms, "t": target}, "") == target
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(
                f"{func}: attn_mask must broadcast to the scores' shape (..., Sq, Sk) = "
                f"{target}. Received: attn_mask.shape={ms}"
            )
        mask = ops.broadcast_to(attn_mask._data, target)
        if groups > 1:
            mask = ops.reshape(mask, lead + (sq, sk))

    pr = _Problem()
    pr.ops, pr.device, pr.dtype = ops, dev, dt
    pr.q_shape, pr.k_shape, pr.v_shape = qs, ks, vs
    pr.lead, pr.out_lead, pr.kv_lead, pr.groups = lead, out_lead, kv_lead, groups
    pr.sq, pr.sk = sq, sk
    qn = q._data
    kn = ops.broadcast_to(k._data, kv_lead + (sk, d))
    vn = ops.broadcast_to(v._data, kv_lead + (sk, dv))
    if groups > 1:
        qn = ops.reshape(qn, q_lead + (sq, d))
        kn = ops.reshape(kn, kv_l + (sk, d))
        vn = ops.reshape(vn, kv_l + (sk, dv))
    pr.q = ops.broadcast_to(qn, lead + (sq, d))
    pr.k = ops.broadcast_to(kn, lead + (sk, d))
    pr.v = ops.broadcast_to(vn, lead + (sk, dv))
    pr.mask, pr.scale, pr.causal, pr.window, pr.dropout = mask, scale, causal, win, dropout
    return pr


def _has_kernel(device, dt) -> bool:
    try:
        lookup("attention_fwd", device, dt)
    except KernelNotFoundError:
        return False
    return True


def _acc_dtype(dt):
    return _dtypes.float64 if dt is _dtypes.float64 else _dtypes.float32


def attention(q: Array, k: Array, v: Array, /, *, attn_mask: Array | None = None,
              is_causal: bool | str = False, scale: float | None = None,
              dropout_p: float = 0.0, seed: int | None = None, offset: int = 0,
              enable_gqa: bool = False, window: tuple | None = None,
              return_lse: bool = False):
    """Scaled dot-product attention: ``softmax(q k^T * scale + mask) v``.

    PyTorch's ``torch.nn.functional.scaled_dot_product_attention`` arguments and
    meaning; what tessera adds:

    Parameters
    ----------
    q, k, v : Array
        ``(..., Hq, Sq, D)``, ``(..., Hkv, Sk, D)``, ``(..., Hkv, Sk, Dv)``, one real
        floating dtype; leading dims broadcast. With ``enable_gqa`` the head axis
        (-3) of k/v may divide q's: query head ``h`` uses key/value head
        ``h // (Hq // Hkv)`` (K/V are not copied per head).
    attn_mask : Array, optional
        Bool (True = take part) or additive of q's dtype, broadcastable to
        ``(..., Hq, Sq, Sk)``. Not together with ``is_causal``.
    is_causal : bool or str
        False; True or ``"top_left"`` (PyTorch's: query ``i`` sees keys ``j <= i``);
        ``"bottom_right"`` (FlashAttention's: ``j <= i + Sk - Sq``).
    scale : float, optional
        Default ``1 / sqrt(D)``.
    dropout_p, seed, offset
        Dropout on the probabilities, kept ones scaled by ``1/(1 - dropout_p)``; the
        keep decision of element ``(bh, i, j)`` is a byte of a Philox4x32-10 block
        of the counter ``(bh*Sq + i)*Sk + j`` under ``(seed, offset)``, refined by a
        second word on a tie, so an element drops with probability
        ``floor(dropout_p * 2**40) / 2**40`` (see :mod:`tessera_array.random`); the
        same on every backend and what :func:`tessera_array.nn.dropout_mask` returns. ``seed`` is required when
        ``dropout_p > 0``.
    window : tuple, optional
        ``(left, right)``, ints >= 0 or None (unbounded): query ``i`` sees keys
        ``i - left <= j <= i + right`` (shifted by ``Sk - Sq`` when ``is_causal`` is
        ``"bottom_right"``); FlashAttention's ``window_size``.
    return_lse : bool
        Also return the natural log-sum-exp of each row's (undropped, scaled, masked)
        scores, ``(..., Hq, Sq)``, float32 (float64 for float64 inputs).

    Returns
    -------
    out : Array
        ``(..., Hq, Sq, Dv)``, q's dtype; ``(out, lse)`` with ``return_lse``. Rows that
        see no key give 0 (lse ``-inf``), as torch's CPU SDPA.

    Notes
    -----
    Backend notes: the NumPy backend's kernel is FlashAttention-2's tiled online
    softmax on BLAS, memory O(S*D), float32 accumulation (float64 for float64).
    float16/bfloat16: on CUDA the forward runs on tensor cores (float32 accumulation,
    head dims 64 and 128; other head dims through float32) and the backward through
    float32, each result rounded once; on other backends they raise TypeError (no
    kernel takes them).
    """
    func = "attention"
    pr = _prepare(func, q, k, v, attn_mask, is_causal, scale, dropout_p, seed, offset,
                  enable_gqa, window)
    if not isinstance(return_lse, bool):
        raise TypeError(f"{func}: return_lse must be a bool. Received: return_lse={return_lse!r}")
    launcher = lookup("attention_fwd", pr.device, pr.dtype)
    out, lse = launcher(pr.q, pr.k, pr.v, pr.mask, scale=pr.scale, causal=pr.causal,
                        window=pr.window, dropout=pr.dropout, want_lse=return_lse)
    ops = pr.ops
    out = wrap_as(ops.reshape(out, pr.out_lead + out.shape[-2:]), pr.dtype, pr.device)
    if not return_lse:
        return out
    lse = wrap_as(ops.reshape(lse, pr.out_lead + (pr.sq,)), _acc_dtype(pr.dtype), pr.device)
    return out, lse


def _sum_to(ops, g, shape: tuple):
    """``g`` summed over the axes broadcasting added or stretched to reach it from ``shape``."""
    extra = g.ndim - len(shape)
    axes = tuple(range(extra)) + tuple(
        extra + i for i, n in enumerate(shape) if n == 1 and g.shape[extra + i] != 1
    )
    if axes:
        g = ops.sum(g, axis=axes, keepdims=True)
    return ops.reshape(g, shape)


def attention_backward(q: Array, k: Array, v: Array, out: Array, dout: Array,
                       lse: Array | None = None, /, *, attn_mask: Array | None = None,
                       is_causal: bool | str = False, scale: float | None = None,
                       dropout_p: float = 0.0, seed: int | None = None, offset: int = 0,
                       enable_gqa: bool = False, window: tuple | None = None):
    """The gradients ``(dq, dk, dv)`` of :func:`attention` for the output gradient ``dout``.

    ``q, k, v`` and the keywords are those of the forward call, ``out`` its output and
    ``lse`` its log-sum-exp (``return_lse=True``); without ``lse`` the forward is run
    again to get it. The dropout mask is rebuilt from ``(seed, offset)``: the same as
    the forward's. Each gradient has its input's shape and dtype (summed over the
    axes the input was broadcast along; under GQA ``dk``/``dv`` over the query heads
    of each group). Deterministic: the same inputs give the same bits on every run.
    """
    func = "attention_backward"
    pr = _prepare(func, q, k, v, attn_mask, is_causal, scale, dropout_p, seed, offset,
                  enable_gqa, window)
    out_shape = pr.out_lead + (pr.sq, pr.v_shape[-1])
    for name, a in (("out", out), ("dout", dout)):
        check_array(a, func, name)
        if a._device is not pr.device:
            raise DeviceMismatchError(
                f"{func}: {name} must be on the device of q. "
                f"Received: q.device={pr.device}, {name}.device={a._device}"
            )
        if a._dtype is not pr.dtype:
            raise TypeError(
                f"{func}: {name} must have q's dtype. "
                f"Received: q.dtype={pr.dtype}, {name}.dtype={a._dtype}"
            )
        if a.shape != out_shape:
            raise ValueError(
                f"{func}: {name} must have the forward output's shape {out_shape}. "
                f"Received: {name}.shape={a.shape}"
            )
    ops = pr.ops
    lead_out = pr.lead + (pr.sq, pr.v_shape[-1])
    on = ops.reshape(out._data, lead_out)
    don = ops.reshape(dout._data, lead_out)
    acc = _acc_dtype(pr.dtype)
    if lse is None:
        _, ln = lookup("attention_fwd", pr.device, pr.dtype)(
            pr.q, pr.k, pr.v, pr.mask, scale=pr.scale, causal=pr.causal, window=pr.window,
            dropout=None, want_lse=True)
    else:
        check_array(lse, func, "lse")
        if lse._device is not pr.device:
            raise DeviceMismatchError(
                f"{func}: lse must be on the device of q. "
                f"Received: q.device={pr.device}, lse.device={lse._device}"
            )
        if lse._dtype is not acc:
            raise TypeError(
                f"{func}: lse must be the forward's log-sum-exp, of dtype {acc}. "
                f"Received: lse.dtype={lse._dtype}"
            )
        if lse.shape != pr.out_lead + (pr.sq,):
            raise ValueError(
                f"{func}: lse must have shape {pr.out_lead + (pr.sq,)}. "
                f"Received: lse.shape={lse.shape}"
            )
        ln = ops.reshape(lse._data, pr.lead + (pr.sq,))
    launcher = lookup("attention_bwd", pr.device, pr.dtype)
    dq, dk, dv = launcher(pr.q, pr.k, pr.v, on, don, ln, pr.mask, scale=pr.scale,
                          causal=pr.causal, window=pr.window, dropout=pr.dropout)
    sk = pr.sk
    if pr.groups > 1:
        dq = ops.reshape(dq, pr.out_lead + dq.shape[-2:])
        # (..., Hkv, G, Sk, D) -> (..., Hkv, Sk, D): the sum over each group's query heads.
        dk = ops.sum(dk, axis=dk.ndim - 3)
        dv = ops.sum(dv, axis=dv.ndim - 3)
    dq = _sum_to(ops, dq, pr.q_shape)
    dk = _sum_to(ops, dk, pr.kv_lead + (sk, pr.k_shape[-1]))
    dv = _sum_to(ops, dv, pr.kv_lead + (sk, pr.v_shape[-1]))
    dk = _sum_to(ops, dk, pr.k_shape)
    dv = _sum_to(ops, dv, pr.v_shape)
    dt, dev = pr.dtype, pr.device
    return wrap_as(dq, dt, dev), wrap_as(dk, dt, dev), wrap_as(dv, dt, dev)
