"""tessera_array.nn.attention / attention_backward against the float64 math reference.

Every case runs on every device; on the NumPy backend the kernels also run with
small, non-dividing tiles (``blocks="small"``) so that the online softmax crosses
many key blocks and the causal/window band skips and cuts tiles. Float32 results
must be within ``RTOL`` (max abs error over max abs value) of the float64
reference; gradients are also checked by central finite differences in float64.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import math
import os
import tracemalloc

import numpy as np
import pytest
from _cbuild import ISAS, build_variant

import tessera_array as xp
from tessera_array import nn
from tessera_array.nn._reference import attention_backward_reference, attention_reference

RTOL = 1e-5  # float32 inputs against the float64 reference
RTOL64 = 1e-12


def _np(a):
    return np.asarray(a._device._backend.to_host(a._data))


def _arr(a, device):
    return xp.asarray(np.array(a, copy=True), device=device)


def _rel(got, ref) -> float:
    got, ref = _np(got).astype(np.float64), _np(ref)
    assert got.shape == ref.shape
    scale = np.abs(ref).max() if ref.size else 1.0
    return float(np.abs(got - ref).max() / scale) if ref.size else 0.0


def _need_f64(device):
    if xp.float64 not in xp.__array_namespace_info__().dtypes(device=device).values():
        pytest.skip(f"{device} has no float64 (the reference runs in float64)")


@pytest.fixture(params=["default", "small", "small-numpy"])
def blocks(request, device, monkeypatch):
    """On the NumPy backend, "small" makes the kernels use small tiles (16 x 24 forward,
    8 x 20 backward, compiled too; the compiled forward 16-row items in tiles of 8 x 24) and
    the thread pool; "small-numpy" the same on the NumPy tile loops
    (``KernelPaths(compiled=False)``), where the compiled kernel would otherwise run."""
    if request.param == "default":
        yield request.param
        return
    if device._backend.name != "numpy":
        pytest.skip("tile sizes are a NumPy-backend setting")
    from tessera_array.backends.numpy import attention as kern

    monkeypatch.setattr(kern, "BLOCK_Q", 16)
    monkeypatch.setattr(kern, "BLOCK_K", 24)
    monkeypatch.setattr(kern, "C_BLOCK_M", 8)
    monkeypatch.setattr(kern, "BLOCK_Q_BWD", 8)
    monkeypatch.setattr(kern, "BLOCK_K_BWD", 20)
    monkeypatch.setattr(kern, "C_BLOCK_Q_BWD", 8)
    monkeypatch.setattr(kern, "C_BLOCK_K_BWD", 20)
    monkeypatch.setattr(kern, "PARALLEL_MIN", 0)  # and the thread pool
    if request.param == "small":
        yield request.param
        return
    with _paths(kern, compiled=False):
        yield request.param


# (id, q shape, k shape, v shape, keywords; "mask" names a mask maker below)
CASES = [
    ("plain", (2, 3, 33, 16), (2, 3, 47, 16), (2, 3, 47, 8), {}),
    ("causal", (2, 3, 40, 16), (2, 3, 40, 16), (2, 3, 40, 16), {"is_causal": True}),
    ("causal_tl_sq<sk", (1, 2, 30, 16), (1, 2, 50, 16), (1, 2, 50, 16),
     {"is_causal": "top_left"}),
    ("causal_tl_sq>sk", (1, 2, 50, 16), (1, 2, 30, 16), (1, 2, 30, 16), {"is_causal": True}),
    ("causal_br_sq<sk", (1, 2, 30, 16), (1, 2, 50, 16), (1, 2, 50, 16),
     {"is_causal": "bottom_right"}),
    ("causal_br_sq>sk", (1, 2, 50, 16), (1, 2, 30, 16), (1, 2, 30, 16),
     {"is_causal": "bottom_right"}),
    ("bool_mask", (2, 3, 33, 16), (2, 3, 47, 16), (2, 3, 47, 16), {"mask": "bool"}),
    ("additive_mask", (2, 3, 33, 16), (2, 3, 47, 16), (2, 3, 47, 16), {"mask": "float"}),
    ("gqa", (2, 6, 35, 16), (2, 2, 41, 16), (2, 2, 41, 12), {"enable_gqa": True}),
    ("gqa_causal_mask", (2, 6, 35, 16), (2, 3, 41, 16), (2, 3, 41, 16),
     {"enable_gqa": True, "mask": "bool"}),
    ("mqa", (2, 4, 35, 16), (2, 1, 41, 16), (2, 1, 41, 16), {"enable_gqa": True}),
    ("mqa_causal_br", (2, 4, 35, 16), (2, 1, 41, 16), (2, 1, 41, 16),
     {"enable_gqa": True, "is_causal": "bottom_right"}),
    ("window", (1, 2, 60, 16), (1, 2, 60, 16), (1, 2, 60, 16), {"window": (5, 7)}),
    ("window_left", (1, 2, 60, 16), (1, 2, 70, 16), (1, 2, 70, 16), {"window": (9, None)}),
    ("window_right_causal", (1, 2, 60, 16), (1, 2, 70, 16), (1, 2, 70, 16),
     {"window": (None, 3), "is_causal": True}),
    ("window_causal_br", (1, 2, 50, 16), (1, 2, 70, 16), (1, 2, 70, 16),
     {"window": (6, 2), "is_causal": "bottom_right"}),
    ("broadcast_kv", (2, 3, 33, 16), (3, 47, 16), (1, 3, 47, 16), {}),
    ("broadcast_q", (3, 33, 16), (2, 3, 47, 16), (2, 3, 47, 16), {"is_causal": True}),
    ("two_d", (33, 16), (47, 16), (47, 16), {"scale": 0.3}),
]


def _mask(kind, qs, ks, rng, dtype=np.float64):
    """A bool mask (one fully masked row) or an additive one, broadcast over the batch."""
    sq, sk = qs[-2], ks[-2]
    heads = qs[-3] if len(qs) >= 3 else 1
    if kind == "bool":
        m = rng.random((heads, sq, sk)) < 0.7
        m[0, 3, :] = False  # a fully masked row
        return m
    m = rng.standard_normal((sq, sk)).astype(dtype)
    m[rng.random((sq, sk)) < 0.2] = -np.inf
    return m


def _problem(case, device, rng, dtype=np.float32):
    _name, qs, ks, vs, kw = case
    kw = dict(kw)
    q = rng.standard_normal(qs)
    k = rng.standard_normal(ks)
    v = rng.standard_normal(vs)
    mask = kw.pop("mask", None)
    m = None if mask is None else _mask(mask, qs, ks, rng, dtype)
    arrs = [_arr(a.astype(dtype), device) for a in (q, k, v)]
    refs = [_arr(a, device) for a in (q, k, v)]
    if m is not None:
        kw["attn_mask"] = _arr(m, device)
    kw_ref = dict(kw)
    if m is not None:
        kw_ref["attn_mask"] = _arr(m if m.dtype == bool else m.astype(np.float64), device)
    return arrs, refs, kw, kw_ref


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_forward_matches_reference(device, blocks, case):
    _need_f64(device)
    rng = np.random.default_rng(5)
    (q, k, v), (q64, k64, v64), kw, kw_ref = _problem(case, device, rng)
    out, lse = nn.attention(q, k, v, return_lse=True, **kw)
    ro, rl = attention_reference(q64, k64, v64, **kw_ref)
    assert out.dtype == xp.float32 and lse.dtype == xp.float32
    assert out.shape == ro.shape and lse.shape == rl.shape
    assert _rel(out, ro) <= RTOL
    lse_np, rl_np = _np(lse), _np(rl)
    assert np.array_equal(np.isneginf(lse_np), np.isneginf(rl_np))
    fin = np.isfinite(rl_np)
    assert np.abs(lse_np[fin] - rl_np[fin]).max() <= RTOL * max(1.0, np.abs(rl_np[fin]).max())
    # float64 inputs: float64 all the way
    o64, l64 = nn.attention(q64, k64, v64, return_lse=True, **kw_ref)
    assert o64.dtype == xp.float64 and l64.dtype == xp.float64
    assert _rel(o64, ro) <= RTOL64


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_backward_matches_reference(device, blocks, case):
    _need_f64(device)
    rng = np.random.default_rng(6)
    (q, k, v), (q64, k64, v64), kw, kw_ref = _problem(case, device, rng)
    out, lse = nn.attention(q, k, v, return_lse=True, **kw)
    g = rng.standard_normal(out.shape)
    dout, dout64 = _arr(g.astype(np.float32), device), _arr(g, device)
    grads = nn.attention_backward(q, k, v, out, dout, lse, **kw)
    refs = attention_backward_reference(q64, k64, v64, dout64, **kw_ref)
    for name, got, ref, inp in zip("qkv", grads, refs, (q, k, v)):
        assert got.shape == inp.shape and got.dtype == xp.float32, name
        assert _rel(got, ref) <= RTOL, name
    # without lse the forward runs again: the same bits
    again = nn.attention_backward(q, k, v, out, dout, **kw)
    for a, b in zip(grads, again):
        assert np.array_equal(_np(a), _np(b))
    o64 = nn.attention(q64, k64, v64, **kw_ref)
    for got, ref in zip(nn.attention_backward(q64, k64, v64, o64, dout64, **kw_ref), refs):
        assert _rel(got, ref) <= RTOL64


@pytest.mark.parametrize("growth", [1.0, 4.0, 12.0])
def test_running_max_raised_late(device, blocks, growth):
    """Keys whose scores jump after the first tiles: the running max must rise (exact
    rescaling) or may stay (lazy step within its slack); both give the reference."""
    _need_f64(device)
    rng = np.random.default_rng(18)
    q = rng.standard_normal((1, 2, 64, 16))
    k = rng.standard_normal((1, 2, 90, 16))
    k[..., 50:, :] *= growth
    v = rng.standard_normal((1, 2, 90, 16))
    q32, k32, v32 = (_arr(a.astype(np.float32), device) for a in (q, k, v))
    q64, k64, v64 = (_arr(a, device) for a in (q, k, v))
    for kw in ({}, {"is_causal": "bottom_right"}, {"window": (30, 10)}):
        out, lse = nn.attention(q32, k32, v32, return_lse=True, **kw)
        ro, rl = attention_reference(q64, k64, v64, **kw)
        assert _rel(out, ro) <= RTOL
        assert np.abs(_np(lse) - _np(rl)).max() <= RTOL * np.abs(_np(rl)).max()


FD_CASES = [
    ("plain", (1, 2, 5, 4), (1, 2, 7, 4), (1, 2, 7, 3), {}),
    ("causal_br_window", (1, 2, 6, 4), (1, 2, 8, 4), (1, 2, 8, 4),
     {"is_causal": "bottom_right", "window": (2, None)}),
    ("gqa_mask", (1, 4, 5, 4), (1, 2, 6, 4), (1, 2, 6, 4), {"enable_gqa": True, "mask": "float"}),
    ("broadcast", (2, 5, 4), (6, 4), (1, 6, 4), {"is_causal": True}),
]


@pytest.mark.parametrize("case", FD_CASES, ids=[c[0] for c in FD_CASES])
def test_gradients_by_finite_differences(device, blocks, case):
    """Central differences of sum(out * W) in float64 against attention_backward."""
    _need_f64(device)
    rng = np.random.default_rng(7)
    _, (q, k, v), _, kw = _problem(case, device, rng, dtype=np.float64)
    w = rng.standard_normal(nn.attention(q, k, v, **kw).shape)
    out = nn.attention(q, k, v, **kw)
    grads = nn.attention_backward(q, k, v, out, _arr(w, device), **kw)
    base = [_np(a).copy() for a in (q, k, v)]
    h = 1e-6
    for which, grad in enumerate(grads):
        fd = np.zeros_like(base[which])
        for idx in np.ndindex(base[which].shape):
            vals = []
            for sign in (1, -1):
                args = [b.copy() for b in base]
                args[which][idx] += sign * h
                o = nn.attention(*(_arr(a, device) for a in args), **kw)
                vals.append(float((_np(o) * w).sum()))
            fd[idx] = (vals[0] - vals[1]) / (2 * h)
        np.testing.assert_allclose(_np(grad), fd, rtol=1e-6, atol=1e-7)


def test_fully_masked_rows(device, blocks):
    """Rows that see no key: output 0, lse -inf, zero gradients (torch 2.13's CPU SDPA)."""
    rng = np.random.default_rng(8)
    q, k, v = (_arr(rng.standard_normal((2, 6, 8)).astype(np.float32), device) for _ in range(3))
    m = np.ones((6, 6), dtype=bool)
    m[2] = False
    out, lse = nn.attention(q, k, v, attn_mask=_arr(m, device), return_lse=True)
    assert np.all(_np(out)[:, 2] == 0) and np.all(np.isneginf(_np(lse)[:, 2]))
    assert np.all(np.isfinite(_np(out))) and np.isfinite(_np(lse)[:, [0, 1, 3, 4, 5]]).all()
    dq, dk, dv = nn.attention_backward(q, k, v, out, _arr(np.ones((2, 6, 8), np.float32), device),
                                       lse, attn_mask=_arr(m, device))
    assert np.all(_np(dq)[:, 2] == 0)
    assert all(np.isfinite(_np(g)).all() for g in (dq, dk, dv))
    # bottom-right causal with Sq > Sk: the first Sq - Sk queries see nothing
    k2, v2 = k[:, :4], v[:, :4]
    out, lse = nn.attention(q, k2, v2, is_causal="bottom_right", return_lse=True)
    assert np.all(_np(out)[:, :2] == 0) and np.all(np.isneginf(_np(lse)[:, :2]))
    dq, dk, dv = nn.attention_backward(q, k2, v2, out, _arr(np.ones((2, 6, 8), np.float32),
                                       device), is_causal="bottom_right")
    assert np.all(_np(dq)[:, :2] == 0)
    # a window no key falls in
    out, lse = nn.attention(q, k[:, :1], v[:, :1], window=(0, 0), return_lse=True)
    assert np.all(_np(out)[:, 1:] == 0) and np.all(np.isneginf(_np(lse)[:, 1:]))


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
@pytest.mark.parametrize("kind", ["plain", "causal", "causal_br", "bool_mask", "gqa"])
def test_matches_torch_sdpa(device, kind):
    """Same answers as torch's CPU scaled_dot_product_attention (fully masked row included)."""
    import torch
    import torch.nn.functional as F

    rng = np.random.default_rng(9)
    hkv = 2 if kind == "gqa" else 4
    qn = rng.standard_normal((2, 4, 9, 8)).astype(np.float32)
    kn = rng.standard_normal((2, hkv, 13, 8)).astype(np.float32)
    vn = rng.standard_normal((2, hkv, 13, 8)).astype(np.float32)
    tkw, kw = {}, {}
    if kind == "causal":
        tkw["is_causal"] = kw["is_causal"] = True
    elif kind == "causal_br":
        from torch.nn.attention.bias import causal_lower_right

        tkw["attn_mask"] = causal_lower_right(9, 13)
        kw["is_causal"] = "bottom_right"
    elif kind == "bool_mask":
        m = rng.random((9, 13)) < 0.6
        m[4] = False
        tkw["attn_mask"] = torch.from_numpy(m)
        kw["attn_mask"] = _arr(m, device)
    elif kind == "gqa":
        tkw["enable_gqa"] = kw["enable_gqa"] = True
    tq, tk, tv = (torch.from_numpy(a).requires_grad_() for a in (qn, kn, vn))
    tout = F.scaled_dot_product_attention(tq, tk, tv, **tkw)
    g = rng.standard_normal(tout.shape).astype(np.float32)
    tout.backward(torch.from_numpy(g))
    q, k, v = (_arr(a, device) for a in (qn, kn, vn))
    out = nn.attention(q, k, v, **kw)
    np.testing.assert_allclose(_np(out), tout.detach().numpy(), rtol=1e-5, atol=2e-6)
    grads = nn.attention_backward(q, k, v, out, _arr(g, device), **kw)
    for got, t in zip(grads, (tq, tk, tv)):
        np.testing.assert_allclose(_np(got), t.grad.numpy(), rtol=1e-4, atol=2e-5)


# ---- dropout ---------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["plain", "causal_br_sq<sk", "gqa", "broadcast_kv"])
def test_dropout_matches_reference_with_dropout_mask(device, blocks, case):
    """Forward and backward with dropout equal the reference given nn.dropout_mask's mask."""
    _need_f64(device)
    c = next(c for c in CASES if c[0] == case)
    rng = np.random.default_rng(10)
    (q, k, v), (q64, k64, v64), kw, kw_ref = _problem(c, device, rng)
    p, seed, offset = 0.3, 1234567, 77
    out, lse = nn.attention(q, k, v, dropout_p=p, seed=seed, offset=offset, return_lse=True, **kw)
    keep = nn.dropout_mask(out.shape[:-1] + (k.shape[-2],), p, seed=seed, offset=offset,
                           device=device)
    ro, _rl = attention_reference(q64, k64, v64, dropout_p=p, dropout_mask=keep, **kw_ref)
    assert _rel(out, ro) <= RTOL
    # lse is that of the undropped scores
    _, l0 = nn.attention(q, k, v, return_lse=True, **kw)
    assert np.array_equal(_np(lse), _np(l0))
    g = rng.standard_normal(out.shape)
    grads = nn.attention_backward(q, k, v, out, _arr(g.astype(np.float32), device), lse,
                                  dropout_p=p, seed=seed, offset=offset, **kw)
    refs = attention_backward_reference(q64, k64, v64, _arr(g, device), dropout_p=p,
                                        dropout_mask=keep, **kw_ref)
    for name, got, ref in zip("qkv", grads, refs):
        assert _rel(got, ref) <= RTOL, name


def test_dropout_same_seed_same_bits(device, blocks):
    rng = np.random.default_rng(11)
    q, k, v = (_arr(rng.standard_normal((2, 3, 20, 8)).astype(np.float32), device)
               for _ in range(3))
    a = nn.attention(q, k, v, dropout_p=0.25, seed=5, offset=9)
    b = nn.attention(q, k, v, dropout_p=0.25, seed=5, offset=9)
    assert np.array_equal(_np(a), _np(b))
    c = nn.attention(q, k, v, dropout_p=0.25, seed=5, offset=10)
    d = nn.attention(q, k, v, dropout_p=0.25, seed=6, offset=9)
    assert not np.array_equal(_np(a), _np(c)) and not np.array_equal(_np(a), _np(d))
    # p = 0: no dropout at all, whatever the seed
    e = nn.attention(q, k, v, dropout_p=0.0, seed=5)
    assert np.array_equal(_np(e), _np(nn.attention(q, k, v)))


def test_dropout_independent_of_tiling(device):
    """The keep decisions do not depend on the tile sizes or the threads (NumPy backend)."""
    if device._backend.name != "numpy":
        pytest.skip("tile sizes are a NumPy-backend setting")
    from tessera_array.backends.numpy import attention as kern

    rng = np.random.default_rng(12)
    q, k, v = (_arr(rng.standard_normal((2, 2, 37, 8)).astype(np.float32), device)
               for _ in range(3))
    a = nn.attention(q, k, v, dropout_p=0.4, seed=3, offset=1)
    old = kern.BLOCK_Q, kern.BLOCK_K
    try:
        kern.BLOCK_Q, kern.BLOCK_K = 8, 5
        b = nn.attention(q, k, v, dropout_p=0.4, seed=3, offset=1)
    finally:
        kern.BLOCK_Q, kern.BLOCK_K = old
    np.testing.assert_allclose(_np(a), _np(b), rtol=1e-5, atol=1e-6)


# ---- determinism, buffers --------------------------------------------------------------


def test_deterministic_run_to_run(device, monkeypatch):
    """The same inputs give the same bits, on the pool or not."""
    rng = np.random.default_rng(13)
    q, k, v = (_arr(rng.standard_normal((2, 4, 70, 16)).astype(np.float32), device)
               for _ in range(3))
    dout = _arr(rng.standard_normal((2, 4, 70, 16)).astype(np.float32), device)
    kw = {"is_causal": True, "dropout_p": 0.1, "seed": 1}
    if device._backend.name == "numpy":
        from tessera_array.backends.numpy import attention as kern

        monkeypatch.setattr(kern, "BLOCK_Q", 16)
        monkeypatch.setattr(kern, "BLOCK_K", 16)
        monkeypatch.setattr(kern, "BLOCK_Q_BWD", 16)
        monkeypatch.setattr(kern, "BLOCK_K_BWD", 8)
    runs = []
    for pmin in (0, 1 << 62, 0):
        if device._backend.name == "numpy":
            monkeypatch.setattr(kern, "PARALLEL_MIN", pmin)
        out, lse = nn.attention(q, k, v, return_lse=True, **kw)
        grads = nn.attention_backward(q, k, v, out, dout, lse, **kw)
        runs.append([_np(a).copy() for a in (out, lse) + grads])
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            assert np.array_equal(a, b)


def test_kernels_write_every_element(device, monkeypatch):
    """Poisoned (NaN) output buffers: every element is written, masked rows and keys included."""
    if device._backend.name != "numpy":
        pytest.skip("the poison hook is the NumPy backend's allocator")
    from tessera_array.backends.numpy import attention as kern

    rng = np.random.default_rng(14)
    q, k, v = (_arr(rng.standard_normal((2, 3, 30, 8)).astype(np.float32), device)
               for _ in range(3))
    dout = _arr(rng.standard_normal((2, 3, 30, 8)).astype(np.float32), device)
    cases = [{"window": (2, 0)}, {"is_causal": "bottom_right"},
             {"attn_mask": _arr(rng.random((30, 30)) < 0.1, device)}]
    clean = []
    for kw in cases:
        out, lse = nn.attention(q[:, :, :20], k, v, return_lse=True, **_cut(kw))
        clean.append((out, lse, nn.attention_backward(q[:, :, :20], k, v, out, dout[:, :, :20],
                                                      lse, **_cut(kw))))

    def poisoned(shape, dtype):
        return np.full(shape, np.nan, dtype=dtype)

    monkeypatch.setattr(kern, "_alloc", poisoned)
    monkeypatch.setattr(kern, "BLOCK_Q", 8)
    monkeypatch.setattr(kern, "BLOCK_K", 8)
    monkeypatch.setattr(kern, "BLOCK_Q_BWD", 8)
    monkeypatch.setattr(kern, "BLOCK_K_BWD", 8)
    for kw, (out0, lse0, grads0) in zip(cases, clean):
        out, lse = nn.attention(q[:, :, :20], k, v, return_lse=True, **_cut(kw))
        grads = nn.attention_backward(q[:, :, :20], k, v, out, dout[:, :, :20], lse, **_cut(kw))
        for a, b in zip((out, lse) + grads, (out0, lse0) + grads0):
            a, b = _np(a), _np(b)
            assert not np.isnan(a).any()
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def _cut(kw):
    """Keywords with a (30, 30) attn_mask cut to the 20 queries used."""
    if "attn_mask" in kw:
        return {"attn_mask": kw["attn_mask"][:20]}
    return kw


def test_peak_memory_is_O_S_D(device):
    """S = 16384, D = 64, float32: the traced peak stays far below one S x S matrix (1 GiB).

    tracemalloc traces NumPy's allocations and the compiled kernels' scratch (their
    PyMem_RawMalloc). The forward runs causal and the backward
    with a window, to keep the test short on 2 cores: the buffers a work item holds
    (tiles, K^T, the running sums, dQ) do not depend on the band, only the number of
    tiles visited does.
    """
    if device._backend.name != "numpy":
        pytest.skip("tracemalloc sees host (NumPy) allocations only")
    s, d = 16384, 64
    rng = np.random.default_rng(15)
    q, k, v = (_arr(rng.standard_normal((1, 1, s, d), dtype=np.float32), device)
               for _ in range(3))
    mib = 1 << 20
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        out, lse = nn.attention(q, k, v, is_causal=True, return_lse=True)
        _, peak_fwd = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        grads = nn.attention_backward(q, k, v, out, out, window=(512, 0))
        _, peak_bwd = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # out (4 MiB), lse, and per thread (the forward's items run at once): the Q block,
    # K^T (4 MiB), score and product tiles (up to 2 MiB and 256 KiB)
    from tessera_array.backends.numpy import attention as kern

    assert peak_fwd < 32 * mib + kern._threads() * 8 * mib, (peak_fwd / mib, kern._threads())
    # the recomputed forward, dq, dk, dv (12 MiB), float32 copies of scale*q and dout
    assert peak_bwd < 64 * mib, peak_bwd / mib
    assert all(np.isfinite(_np(g)).all() for g in grads)
    assert _np(out).shape == (1, 1, s, d) and np.isfinite(_np(lse)).all()


# ---- bad input ---------------------------------------------------------------------------


def _qkv(device, qs=(2, 4, 8, 16), ks=(2, 4, 10, 16), vs=(2, 4, 10, 16), dtype=np.float32):
    rng = np.random.default_rng(16)
    return tuple(_arr(rng.standard_normal(s).astype(dtype), device) for s in (qs, ks, vs))


@pytest.mark.parametrize("shapes, match", [
    (((2, 4, 8, 16), (2, 4, 10, 12), (2, 4, 10, 16)), (r"attention: q and k must have the same "
                                                      r"head dimension D.*k\.shape=\(2, 4, 10, 12\)")),
    (((2, 4, 8, 16), (2, 4, 10, 16), (2, 4, 11, 16)), (r"attention: k and v must have the same "
                                                      r"key length Sk.*v\.shape")),
    (((2, 4, 8, 16), (3, 4, 10, 16), (3, 4, 10, 16)), (r"attention: the leading \(batch, head\) "
                                                      r"dimensions of q and k/v must broadcast")),
    (((2, 4, 8, 16), (2, 3, 10, 16), (2, 3, 10, 16)), r"attention: the leading .* must broadcast"),
    (((2, 4, 8, 16), (2, 4, 10, 16), (3, 4, 10, 16)), (r"attention: the leading \(batch, head\) "
                                                      r"dimensions of k and v must broadcast")),
    (((16,), (10, 16), (10, 16)), r"attention: q, k and v must have at least 2 dimensions"),
    (((8, 0), (10, 0), (10, 4)), r"attention: the head dimension D must be >= 1"),
])
def test_bad_shapes(device, shapes, match):
    q, k, v = _qkv(device, *shapes)
    with pytest.raises(ValueError, match=match):
        nn.attention(q, k, v)


def test_bad_gqa(device):
    q, k, v = _qkv(device, (2, 6, 8, 16), (2, 4, 10, 16), (2, 4, 10, 16))
    with pytest.raises(ValueError, match=r"attention: with enable_gqa the number of query heads "
                                         r"must be a multiple .*k\.shape=\(2, 4, 10, 16\)"):
        nn.attention(q, k, v, enable_gqa=True)
    with pytest.raises(TypeError, match=r"attention: enable_gqa must be a bool"):
        nn.attention(q, k, v, enable_gqa="yes")


@pytest.mark.parametrize("kw, exc, match", [
    ({"dropout_p": 1.0, "seed": 1}, ValueError, (r"attention: dropout_p must be in \[0, 1\)\. "
                                                r"Received: dropout_p=1\.0")),
    ({"dropout_p": -0.1, "seed": 1}, ValueError, r"attention: dropout_p must be in \[0, 1\)"),
    ({"dropout_p": float("nan"), "seed": 1}, ValueError, r"attention: dropout_p"),
    ({"dropout_p": "0.1", "seed": 1}, TypeError, r"attention: dropout_p must be a real number"),
    ({"dropout_p": 0.1}, ValueError, r"attention: dropout_p > 0 needs a seed.*seed=None"),
    ({"dropout_p": 0.1, "seed": -1}, ValueError, r"attention: seed must be in \[0, 2\*\*64\)"),
    ({"dropout_p": 0.1, "seed": 2**64}, ValueError, r"attention: seed must be in"),
    ({"dropout_p": 0.1, "seed": 1.5}, TypeError, r"attention: seed must be an int"),
    ({"dropout_p": 0.1, "seed": 1, "offset": -3}, ValueError, r"attention: offset must be in"),
    ({"is_causal": "lower"}, ValueError, (r"attention: is_causal must be False, True, 'top_left' "
                                         r"or 'bottom_right'\. Received: is_causal='lower'")),
    ({"is_causal": 1}, ValueError, r"attention: is_causal must be"),
    ({"window": (1, -2)}, ValueError, (r"attention: window sizes must be >= 0\. "
                                      r"Received: window=\(1, -2\)")),
    ({"window": (1, 2, 3)}, TypeError, r"attention: window must be None or a pair"),
    ({"window": (1.5, 2)}, TypeError, r"attention: window must be None or a pair"),
    ({"window": 4}, TypeError, r"attention: window must be None or a pair"),
    ({"scale": "big"}, TypeError, r"attention: scale must be None or a real number"),
    ({"return_lse": 1}, TypeError, r"attention: return_lse must be a bool"),
])
def test_bad_keywords(device, kw, exc, match):
    q, k, v = _qkv(device)
    with pytest.raises(exc, match=match):
        nn.attention(q, k, v, **kw)


def test_bad_masks(device):
    q, k, v = _qkv(device)
    with pytest.raises(ValueError, match=r"attention: attn_mask must broadcast to the scores' "
                                         r"shape .*\(2, 4, 8, 10\)\. Received: "
                                         r"attn_mask\.shape=\(8, 9\)"):
        nn.attention(q, k, v, attn_mask=_arr(np.ones((8, 9), bool), device))
    with pytest.raises(ValueError, match=r"attention: attn_mask must broadcast"):
        nn.attention(q, k, v, attn_mask=_arr(np.ones((1, 2, 4, 8, 10), bool), device))
    with pytest.raises(TypeError, match=r"attention: attn_mask must be bool .* "
                                        r"Received: attn_mask\.dtype=int64"):
        nn.attention(q, k, v, attn_mask=_arr(np.ones((8, 10), np.int64), device))
    with pytest.raises(ValueError, match=r"attention: give either attn_mask or is_causal"):
        nn.attention(q, k, v, attn_mask=_arr(np.ones((8, 10), bool), device), is_causal=True)
    with pytest.raises(TypeError, match=r"attention: attn_mask must be a tessera_array Array"):
        nn.attention(q, k, v, attn_mask=np.ones((8, 10), bool))


def test_bad_types(device):
    q, k, v = _qkv(device)
    with pytest.raises(TypeError, match=r"attention: q must be a tessera_array Array"):
        nn.attention(_np(q), k, v)
    qi, ki, vi = _qkv(device, dtype=np.int32)
    with pytest.raises(TypeError, match=r"attention: q, k and v must have a real floating-point "
                                        r"dtype\. Received: q\.dtype=int32"):
        nn.attention(qi, ki, vi)
    with pytest.raises(TypeError, match=r"attention: q, k and v must have the same dtype.*"
                                        r"k\.dtype=int32"):
        nn.attention(q, ki, v)


def test_missing_kernel(f32_device):
    """A device with no attention kernel: KernelNotFoundError naming the op and backend."""
    q, k, v = _qkv(f32_device)
    with pytest.raises(xp.KernelNotFoundError, match=r"attention_fwd: no kernel for "
                                                     r"op=attention_fwd, backend=fakef32"):
        nn.attention(q, k, v)


def test_bad_backward_arguments(device):
    q, k, v = _qkv(device)
    out, lse = nn.attention(q, k, v, return_lse=True)
    with pytest.raises(ValueError, match=r"attention_backward: dout must have the forward "
                                         r"output's shape \(2, 4, 8, 16\)"):
        nn.attention_backward(q, k, v, out, out[:, :, :4], lse)
    with pytest.raises(TypeError, match=r"attention_backward: lse must be the forward's "
                                        r"log-sum-exp, of dtype float32"):
        nn.attention_backward(q, k, v, out, out, xp.astype(lse, xp.float64)
                              if xp.float64 in xp.__array_namespace_info__().dtypes(
                                  device=device).values() else out)
    with pytest.raises(ValueError, match=r"attention_backward: lse must have shape "
                                         r"\(2, 4, 8\)"):
        nn.attention_backward(q, k, v, out, out, lse[:, :2])
    with pytest.raises(TypeError, match=r"attention_backward: out must be a tessera_array Array"):
        nn.attention_backward(q, k, v, _np(out), out, lse)
    with pytest.raises(ValueError, match=r"attention_backward: dropout_p > 0 needs a seed"):
        nn.attention_backward(q, k, v, out, out, lse, dropout_p=0.5)


def test_default_scale_and_empty(device):
    rng = np.random.default_rng(17)
    q, k, v = _qkv(device)
    a = nn.attention(q, k, v)
    b = nn.attention(q, k, v, scale=1 / math.sqrt(16))
    assert np.array_equal(_np(a), _np(b))
    c = nn.attention(q, k, v, scale=0.5)
    assert not np.array_equal(_np(a), _np(c))
    # no queries: an empty output; no keys: every row fully masked
    out = nn.attention(q[:, :, :0], k, v)
    assert out.shape == (2, 4, 0, 16)
    out, lse = nn.attention(q, k[:, :, :0], v[:, :, :0], return_lse=True)
    assert out.shape == (2, 4, 8, 16) and np.all(_np(out) == 0) and np.all(np.isneginf(_np(lse)))
    del rng


# ---- NumPy kernel paths: the folded shift, one-call products, the OpenBLAS hold ---------


def _kern(device):
    if device._backend.name != "numpy":
        pytest.skip("a NumPy-backend kernel path")
    from tessera_array.backends.numpy import attention as kern

    return kern


@contextlib.contextmanager
def _paths(kern, **choices):
    """``nn.attention`` on the NumPy backend takes ``kern.KernelPaths(**choices)`` inside the
    block: the registry's two launchers are replaced by ones passing ``paths=``, then the
    originals are put back."""
    from tessera_array._dispatch import registry

    paths = kern.KernelPaths(**choices)
    dts = (xp.float32, xp.float64)
    ops = {"attention_fwd": kern.attention_fwd, "attention_bwd": kern.attention_bwd}
    saved = {(op, dt): registry.lookup(op, "numpy", dt) for op in ops for dt in dts}
    try:
        for op, fn in ops.items():
            registry.register(op, "numpy", dts, functools.partial(fn, paths=paths), replace=True)
        assert registry.lookup("attention_fwd", "numpy", xp.float32).keywords["paths"] is paths
        yield paths
    finally:
        for (op, dt), fn in saved.items():
            registry.register(op, "numpy", dt, fn, replace=True)


FOLD_CASES = ["plain", "causal", "causal_br_sq>sk", "bool_mask", "additive_mask", "gqa",
              "window_causal_br"]


@pytest.mark.parametrize("growth", [1.0, 12.0])
@pytest.mark.parametrize("case", FOLD_CASES)
def test_folded_shift_matches_plain_passes(device, monkeypatch, case, growth):
    """The folded shift (``KernelPaths.fold``: scores come out of the product already
    shifted by the running max) and the plain passes on the same inputs: both within RTOL
    of the float64 reference and within float32 rounding of each other; late large keys
    force exact rescaling steps (growth 12), an additive mask forces them on every tile;
    one fully masked row."""
    kern = _kern(device)
    _need_f64(device)
    monkeypatch.setattr(kern, "BLOCK_Q", 16)
    monkeypatch.setattr(kern, "BLOCK_K", 8)
    c = next(c for c in CASES if c[0] == case)
    rng = np.random.default_rng(19)
    (q, k, v), (q64, k64, v64), kw, kw_ref = _problem(c, device, rng)
    if growth != 1.0:
        kn = _np(k).copy()
        kn[..., kn.shape[-2] // 2:, :] *= growth
        k, k64 = _arr(kn, device), _arr(kn.astype(np.float64), device)
    ro, rl = attention_reference(q64, k64, v64, **kw_ref)
    got = {}
    for fold in (True, False):
        with _paths(kern, fold=fold, compiled=False):
            out, lse = nn.attention(q, k, v, return_lse=True, **kw)
        assert _rel(out, ro) <= RTOL, fold
        rl_np = _np(rl)
        fin = np.isfinite(rl_np)
        assert np.array_equal(np.isneginf(_np(lse)), np.isneginf(rl_np))
        assert np.abs(_np(lse)[fin] - rl_np[fin]).max() <= RTOL * np.abs(rl_np[fin]).max()
        got[fold] = _np(out)
    np.testing.assert_allclose(got[True], got[False], rtol=1e-5, atol=1e-6)


def test_one_call_products_under_the_blas_hold(device, monkeypatch):
    """Products large enough to take OpenBLAS's hold (one BLAS call each, on the pool and
    on the calling thread) against the cut products (no hold): the same results to
    float32 rounding, deterministic, and OpenBLAS's thread count restored afterwards."""
    kern = _kern(device)
    _need_f64(device)
    monkeypatch.setattr(kern, "BLOCK_Q", 32)
    monkeypatch.setattr(kern, "BLOCK_K", 16)
    monkeypatch.setattr(kern, "GEMM_MAX", 1024)  # 32 x 16 x 16 > GEMM_MAX: the hold
    rng = np.random.default_rng(20)
    c = next(c for c in CASES if c[0] == "causal")
    (q, k, v), (q64, k64, v64), kw, kw_ref = _problem(c, device, rng)
    ro, _ = attention_reference(q64, k64, v64, **kw_ref)
    api = kern._blas_api()
    before = api[0]() if api else None
    runs = []
    for pin, pmin in ((True, 0), (True, 1 << 62), (False, 0), (True, 0)):
        monkeypatch.setattr(kern, "PARALLEL_MIN", pmin)
        with _paths(kern, pin_blas=pin):
            out = nn.attention(q, k, v, **kw)
        assert _rel(out, ro) <= RTOL
        runs.append(_np(out).copy())
        if api:
            assert api[0]() == before
    assert np.array_equal(runs[0], runs[1]) and np.array_equal(runs[0], runs[3])
    np.testing.assert_allclose(runs[0], runs[2], rtol=1e-5, atol=1e-6)


def test_blas_hold_nests_and_restores(device):
    """The hold sets OpenBLAS to one thread once, however nested, restores the saved
    count when the last one exits (an exception included), and is a no-op when not
    wanted or when NumPy's BLAS is not a pthreads OpenBLAS."""
    kern = _kern(device)
    api = kern._blas_api()
    if not api:
        with kern._blas_one_thread() as one:
            assert one is False
        return
    before = api[0]()
    with kern._blas_one_thread(False) as one:
        assert one is False and api[0]() == before
    with pytest.raises(RuntimeError, match="inner"), kern._blas_one_thread() as one:
        assert one is True and api[0]() == 1
        with kern._blas_one_thread() as two:
            assert two is True and api[0]() == 1
        assert api[0]() == 1
        raise RuntimeError("inner")
    assert api[0]() == before


def test_mm_cuts_and_scratch(device):
    """_mm: one call, cut into GEMM_MAX chunks (ragged rows included) or into scratch."""
    kern = _kern(device)
    rng = np.random.default_rng(21)
    a = rng.standard_normal((103, 65)).astype(np.float32)
    b = rng.standard_normal((65, 40)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    buf = np.full(103 * 40 + 7, np.nan, dtype=np.float32)
    for gmax, scratch in ((0, None), (None, None), (4096, None), (65 * 40 * 9, buf), (0, buf)):
        got = kern._mm(a, b, gmax, scratch)
        assert got.shape == (103, 40)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-4)
        if scratch is not None:
            assert np.shares_memory(got, scratch)


# ---- the compiled kernel (backends/numpy/_attention_c.c) ---------------------------------

_REQUIRED = os.environ.get("TESSERA_REQUIRE_COMPILED", "") not in ("", "0")


def test_compiled_kernel_is_built_where_required(device):
    """Under TESSERA_REQUIRE_COMPILED=1 (CI) the extension must be built and take float32
    and float64 calls wherever NumPy's BLAS is an OpenBLAS with its CBLAS found."""
    kern = _kern(device)
    from tessera_array.backends.numpy import _threads

    q = np.zeros((4, 8), np.float32)
    mod = kern._compiled(kern.KernelPaths(), q.dtype, q)
    if mod is None:
        why = ("no pthreads OpenBLAS with cblas_?gemm" if _threads.blas_gemm() is None
               else "backends/numpy/_attention_c.c not built")
        if _REQUIRED and _threads.blas_gemm() is not None:
            pytest.fail(f"TESSERA_REQUIRE_COMPILED=1: {why}")
        pytest.skip(why)
    assert kern._compiled(kern.KernelPaths(), np.dtype(np.float64), q.astype(np.float64))
    assert kern._compiled(kern.KernelPaths(compiled=False), q.dtype, q) is None
    assert kern._compiled(kern.KernelPaths(pin_blas=False), q.dtype, q) is None
    assert kern._compiled(kern.KernelPaths(), q.dtype, q[:, ::2].view(np.int32)
                          .view(np.float32)) is not None
    odd = np.zeros(33, np.uint8)[1:].view(np.float32)  # not aligned
    assert kern._compiled(kern.KernelPaths(), q.dtype, odd) is None


def _compiled_or_skip(device, dtype):
    """The NumPy backend's attention module, where its compiled kernel takes ``dtype``."""
    kern = _kern(device)
    if kern._compiled(kern.KernelPaths(), np.dtype(dtype), np.zeros(1, dtype)) is None:
        pytest.skip("the compiled kernel is not available (its own test says why)")
    return kern


COMPILED_CASES = ["plain", "causal", "causal_br_sq>sk", "causal_tl_sq<sk", "gqa",
                  "mqa_causal_br", "window", "window_causal_br", "broadcast_kv", "two_d"]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", COMPILED_CASES)
def test_compiled_forward_matches_numpy_path(device, monkeypatch, case, dtype):
    """The compiled forward and the NumPy tile loops on the same inputs, with and without
    dropout (the same Philox keep mask: the outputs agree to rounding), with a NaN in one
    query row (and one value), on transposed (strided) inputs; the same rows of lse at
    -inf; in tiles that cross the band's edges."""
    kern = _compiled_or_skip(device, dtype)
    monkeypatch.setattr(kern, "BLOCK_Q", 24)
    monkeypatch.setattr(kern, "BLOCK_K", 16)
    monkeypatch.setattr(kern, "C_BLOCK_M", 8)
    _, qs, ks, vs, kw = next(c for c in CASES if c[0] == case)
    rng = np.random.default_rng(23)
    q, k, v = (rng.standard_normal(s).astype(dtype) for s in (qs, ks, vs))
    q[..., 5, :] = np.nan  # that row: output 0, lse -inf (l is NaN, not > 0)
    if not ({"is_causal", "window"} & kw.keys()):
        # (Under a band, which other rows a NaN value reaches depends on the tiles: a
        # tile's hidden entries are P = 0, and 0 * NaN is NaN.)
        v[..., 7, 1] = np.nan
    # strided views: the kernel copies them into its tiles
    k = np.swapaxes(np.ascontiguousarray(np.swapaxes(k, -1, -2)), -1, -2)
    tol = 2e-6 if dtype == np.float32 else 1e-13
    for extra in ({}, {"dropout_p": 0.3, "seed": 99, "offset": 5}):
        got = {}
        for compiled in (True, False):
            with _paths(kern, compiled=compiled):
                out, lse = nn.attention(*(xp.asarray(a, device=device) for a in (q, k, v)),
                                        return_lse=True, **kw, **extra)
            got[compiled] = (_np(out), _np(lse))
        (o1, l1), (o0, l0) = got[True], got[False]
        assert o1.dtype == dtype and l1.dtype == dtype
        np.testing.assert_allclose(o1, o0, rtol=tol, atol=tol, equal_nan=True)
        assert np.array_equal(np.isneginf(l1), np.isneginf(l0))
        np.testing.assert_allclose(l1, l0, rtol=tol, atol=tol, equal_nan=True)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", COMPILED_CASES)
def test_compiled_backward_matches_numpy_path(device, monkeypatch, case, dtype):
    """The compiled backward and the NumPy tile loops on the same inputs, with and without
    dropout, on transposed (strided) inputs and a transposed dO, in tiles that cross the
    band's edges: the same gradients to rounding."""
    kern = _compiled_or_skip(device, dtype)
    monkeypatch.setattr(kern, "BLOCK_Q_BWD", 8)
    monkeypatch.setattr(kern, "BLOCK_K_BWD", 12)
    monkeypatch.setattr(kern, "C_BLOCK_Q_BWD", 8)
    monkeypatch.setattr(kern, "C_BLOCK_K_BWD", 12)
    _, qs, ks, vs, kw = next(c for c in CASES if c[0] == case)
    rng = np.random.default_rng(24)
    q, k, v = (rng.standard_normal(s).astype(dtype) for s in (qs, ks, vs))
    v = np.swapaxes(np.ascontiguousarray(np.swapaxes(v, -1, -2)), -1, -2)
    tol = 2e-6 if dtype == np.float32 else 1e-13
    for extra in ({}, {"dropout_p": 0.3, "seed": 99, "offset": 5}):
        qa, ka, va = (xp.asarray(a, device=device) for a in (q, k, v))
        out, lse = nn.attention(qa, ka, va, return_lse=True, **kw, **extra)
        g = rng.standard_normal(out.shape).astype(dtype)
        g = xp.asarray(np.swapaxes(np.ascontiguousarray(np.swapaxes(g, -1, -2)), -1, -2),
                       device=device)
        got = {}
        for compiled in (True, False):
            with _paths(kern, compiled=compiled):
                got[compiled] = [_np(a) for a in nn.attention_backward(qa, ka, va, out, g, lse,
                                                                      **kw, **extra)]
        for name, a, b in zip("qkv", got[True], got[False]):
            assert a.dtype == dtype, name
            np.testing.assert_allclose(a, b, rtol=tol, atol=tol * np.abs(b).max(), err_msg=name)


# x86-64-v3 (AVX2, FMA) and the baseline: the instruction sets an AVX-512 machine never
# picks among the extension's target clones, and the CPU flags each needs.
@pytest.mark.parametrize("arch", sorted(ISAS))
def test_compiled_kernel_on_each_instruction_set(device, monkeypatch, tmp_path, arch):
    """The compiled kernel's row loops built for one instruction set each (x86-64-v3, the
    baseline: -DTESSERA_NO_CLONES), run in place of the built module: the same forward
    and backward as the NumPy tile loops (the two tests above), so the clones a machine
    with AVX-512 never runs are checked on it too."""
    kern = _compiled_or_skip(device, np.float32)
    f32 = np.dtype(np.float32)
    mod = build_variant("_attention_c", arch, tmp_path)
    from tessera_array.backends.numpy import _threads

    mod.set_blas(*_threads.blas_gemm())
    monkeypatch.setitem(kern._C, "mod", mod)
    for dtype in (np.float32, np.float64):
        for case in ("plain", "causal_br_sq>sk", "gqa", "window"):
            test_compiled_forward_matches_numpy_path(device, monkeypatch, case, dtype)
            test_compiled_backward_matches_numpy_path(device, monkeypatch, case, dtype)
    assert kern._compiled(kern.KernelPaths(), f32, np.zeros(1, f32)) is mod
