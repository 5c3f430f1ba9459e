"""tessera_array.nn.linear / linear_backward against NumPy in float64 on every device.

Float32 results must be within ``RTOL32`` (max abs error over max abs value) of the
float64 product, float64 within ``RTOL64``; the gradients are checked against the float64
reference, central finite differences, and torch when it is installed.
"""

from __future__ import annotations

import importlib.util
import zlib

import numpy as np
import pytest

import tessera_array as xp
from tessera_array import nn
from tessera_array.nn._reference import linear_backward_reference, linear_reference

RTOL32 = 1e-6
RTOL64 = 1e-12
K, N = 24, 9  # in_features, out_features: a float32 dot of 24 terms rounds below 1e-6

X_SHAPES = [(K,), (7, K), (2, 3, K), (2, 1, 4, K), (0, K)]
RESIDUALS = {  # name -> residual shape for an output of shape lead + (N,)
    "none": None, "full": "full", "row": (N,), "one_row": (1, N), "col": "col", "scalar": (),
}


def _np(a):
    return np.asarray(a._device._backend.to_host(a._data))


def _arr(a, device):
    return xp.asarray(np.array(a, copy=True), device=device)


def _rel(got, ref) -> float:
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == ref.shape
    if not ref.size:
        return 0.0
    return float(np.abs(got - ref).max() / np.abs(ref).max())


def _f64(device):
    return xp.float64 in xp.__array_namespace_info__().dtypes(device=device).values()


def _residual_shape(kind, out_shape):
    spec = RESIDUALS[kind]
    if spec == "full":
        return out_shape
    if spec == (1, N) and len(out_shape) < 2:
        return (N,)  # (1, N) would enlarge a 1-D output (refused: test_bad_operands...)
    if spec == "col":  # along the rows, broadcast over the features
        return out_shape[:-1] + (1,) if len(out_shape) > 1 else (1,)
    return spec


def _operands(rng, xs, bias, rkind):
    x = rng.standard_normal(xs)
    w = rng.standard_normal((N, K))
    b = rng.standard_normal(N) if bias else None
    rs = _residual_shape(rkind, xs[:-1] + (N,))
    r = None if rs is None else rng.standard_normal(rs)
    return x, w, b, r


def _expected(x, w, b, r):
    out = x @ w.T
    if b is not None:
        out = out + b
    if r is not None:
        out = out + r
    return out


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("rkind", sorted(RESIDUALS))
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("xs", X_SHAPES, ids=lambda s: "x" + "x".join(map(str, s)))
def test_linear_matches_float64(device, dtype, xs, bias, rkind):
    if dtype == "float64" and not _f64(device):
        pytest.skip(f"{device} has no float64")
    rng = np.random.default_rng(zlib.crc32(repr((xs, bias, rkind)).encode()))
    ops64 = _operands(rng, xs, bias, rkind)
    ref = _expected(*ops64)
    cast = [None if a is None else _arr(a.astype(dtype), device) for a in ops64]
    out = nn.linear(*cast)
    assert out.dtype == getattr(xp, dtype) and out.device == device
    assert out.shape == ref.shape
    assert _rel(_np(out), ref) <= (RTOL32 if dtype == "float32" else RTOL64)
    # the xp reference (the generic composition) agrees on the same device
    again = linear_reference(*cast)
    assert _rel(_np(again), ref) <= (RTOL32 if dtype == "float32" else RTOL64)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_linear_reads_views_in_place(device, dtype):
    """A transposed x (not C-contiguous), a column-major weight, a strided bias."""
    if dtype == "float64" and not _f64(device):
        pytest.skip(f"{device} has no float64")
    rng = np.random.default_rng(5)
    xt = rng.standard_normal((K, 6))
    wt = rng.standard_normal((K, N))
    b2 = rng.standard_normal(2 * N)
    r = rng.standard_normal((6, N))
    ref = xt.T @ wt + b2[::2] + r
    x = xp.matrix_transpose(_arr(xt.astype(dtype), device))
    w = xp.matrix_transpose(_arr(wt.astype(dtype), device))
    b = _arr(b2.astype(dtype), device)[::2]
    out = nn.linear(x, w, b, _arr(r.astype(dtype), device))
    assert _rel(_np(out), ref) <= (RTOL32 if dtype == "float32" else RTOL64)


@pytest.mark.parametrize("rkind", ["none", "full", "row", "col", "scalar"])
@pytest.mark.parametrize("xs", [(K,), (7, K), (2, 3, K)], ids=lambda s: "x" + "x".join(map(str, s)))
def test_linear_backward_matches_reference_and_differences(device, xs, rkind):
    if not _f64(device):
        pytest.skip(f"{device} has no float64")
    rng = np.random.default_rng(7 + len(xs))
    x, w, b, r = _operands(rng, xs, True, rkind)
    g = rng.standard_normal(xs[:-1] + (N,))
    dx, dw, db, dr = nn.linear_backward(
        _arr(x, device), _arr(w, device), _arr(g, device), bias=_arr(b, device),
        residual=None if r is None else _arr(r, device))
    # NumPy float64: dx = g W, dW = sum over rows of g^T x, db = sum of g, dr = g summed
    # to residual's shape
    g2, x2 = g.reshape(-1, N), x.reshape(-1, K)
    assert _rel(_np(dx), g @ w) <= RTOL64
    assert _rel(_np(dw), g2.T @ x2) <= RTOL64
    assert _rel(_np(db), g2.sum(0)) <= RTOL64
    if r is None:
        assert dr is None
    else:
        want = g.sum(axis=tuple(range(g.ndim - r.ndim)))
        want = want.sum(axis=tuple(i for i, n in enumerate(r.shape) if n == 1),
                        keepdims=True).reshape(r.shape)
        assert dr.shape == r.shape
        assert _rel(_np(dr), want) <= RTOL64
    # the xp reference
    refs = linear_backward_reference(_arr(x, device), _arr(w, device), _arr(g, device),
                                     bias=_arr(b, device),
                                     residual=None if r is None else _arr(r, device))
    for got, ref in zip((dx, dw, db, dr), refs):
        if ref is not None:
            assert _rel(_np(got), _np(ref)) <= RTOL64
    # central differences of L = sum(linear(...) * g), on a few entries of each operand
    def loss(x_, w_, b_, r_):
        return float(np.sum(_expected(x_, w_, b_, r_) * g))

    h = 1e-6
    operands = [x, w, b] + ([r] if r is not None else [])
    grads = [_np(dx), _np(dw), _np(db)] + ([_np(dr)] if r is not None else [])
    for i, (a, da) in enumerate(zip(operands, grads)):
        for flat in rng.choice(max(a.size, 1), size=min(4, a.size), replace=False):
            idx = np.unravel_index(flat, a.shape)
            plus = [o.copy() if o is not None else None for o in (x, w, b, r)]
            minus = [o.copy() if o is not None else None for o in (x, w, b, r)]
            plus[i][idx] += h
            minus[i][idx] -= h
            fd = (loss(*plus) - loss(*minus)) / (2 * h)
            assert abs(fd - da[idx]) <= 1e-6 * max(1.0, abs(fd)), (i, idx)


def test_linear_backward_without_bias_and_float32(device):
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((5, K)), rng.standard_normal((N, K))
    g = rng.standard_normal((5, N))
    dx, dw, db, dr = nn.linear_backward(_arr(x.astype("f"), device), _arr(w.astype("f"), device),
                                        _arr(g.astype("f"), device))
    assert db is None and dr is None
    assert dx.dtype == xp.float32 and dw.dtype == xp.float32
    assert _rel(_np(dx), g.astype("f").astype("d") @ w.astype("f").astype("d")) <= RTOL32
    assert _rel(_np(dw), g.astype("f").astype("d").T @ x.astype("f").astype("d")) <= RTOL32


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed "
                    "(NumPy float64 is the reference above)")
def test_linear_and_backward_match_torch(device):
    import torch

    if not _f64(device):
        pytest.skip(f"{device} has no float64")
    rng = np.random.default_rng(11)
    x, w, b, r = _operands(rng, (2, 3, K), True, "col")
    g = rng.standard_normal((2, 3, N))
    tx, tw, tb, tr = (torch.tensor(a, requires_grad=True) for a in (x, w, b, r))
    tout = torch.nn.functional.linear(tx, tw, tb) + tr
    tout.backward(torch.tensor(g))
    A = [_arr(a, device) for a in (x, w, b, r)]
    out = nn.linear(*A)
    assert _rel(_np(out), tout.detach().numpy()) <= RTOL64
    grads = nn.linear_backward(A[0], A[1], _arr(g, device), bias=A[2], residual=A[3])
    for got, t in zip(grads, (tx, tw, tb, tr)):
        assert _rel(_np(got), t.grad.numpy()) <= RTOL64


def test_bad_operands_name_the_operand(device):
    f = lambda *s: xp.ones(s, dtype=xp.float32, device=device)
    x, w = f(3, K), f(N, K)
    with pytest.raises(ValueError, match=r"^linear: weight must be 2-D .*weight\.shape=\(9,\)"):
        nn.linear(x, f(N))
    with pytest.raises(ValueError, match=r"^linear: x must have shape \(\.\.\., in_features\) "
                                         r"with in_features = weight\.shape\[1\] = 24\. "
                                         r"Received: x\.shape=\(3, 5\)"):
        nn.linear(f(3, 5), w)
    with pytest.raises(ValueError, match=r"^linear: x must have shape"):
        nn.linear(f(), w)
    with pytest.raises(ValueError, match=r"^linear: bias must have shape \(out_features,\) = "
                                         r"\(9,\)\. Received: bias\.shape=\(3, 9\)"):
        nn.linear(x, w, f(3, N))
    with pytest.raises(ValueError, match=r"^linear: residual must broadcast to the output's "
                                         r"shape .* = \(3, 9\)\. Received: residual\.shape=\(2, 3, 9\)"):
        nn.linear(x, w, None, f(2, 3, N))
    with pytest.raises(ValueError, match=r"^linear: residual .*Received: residual\.shape=\(4,\)"):
        nn.linear(x, w, residual=f(4))
    with pytest.raises(TypeError, match=r"^linear: bias must have x's dtype .*"
                                        r"x\.dtype=float32, bias\.dtype=int32"):
        nn.linear(x, w, xp.ones(N, dtype=xp.int32, device=device))
    with pytest.raises(TypeError, match=r"^linear: x must have a real floating-point dtype"):
        nn.linear(xp.ones((3, K), dtype=xp.int64, device=device), w)
    with pytest.raises(TypeError, match=r"^linear: residual must be a tessera_array Array"):
        nn.linear(x, w, None, np.ones(N))
    with pytest.raises(ValueError, match=r"^linear_backward: dout must have the output's shape "
                                         r"\(\.\.\., out_features\) = \(3, 9\)\. "
                                         r"Received: dout\.shape=\(3, 8\)"):
        nn.linear_backward(x, w, f(3, 8))
    with pytest.raises(ValueError, match=r"^linear_backward: bias must have shape"):
        nn.linear_backward(x, w, f(3, N), bias=f(8))


def test_linear_refuses_mixed_devices():
    devs = xp.__array_namespace_info__().devices()
    if len(devs) < 2:
        pytest.skip("one device loaded")
    a, b = devs[0], devs[1]
    with pytest.raises(ValueError, match=r"^linear: weight must be on the device of x"):
        nn.linear(xp.ones((2, K), device=a), xp.ones((N, K), device=b))


def test_numpy_linear_is_one_gemm_into_the_prefilled_output(monkeypatch):
    """The NumPy backend's launcher: one ?gemm call with beta = 1 whose C is the output
    buffer itself (pre-filled with bias + residual), no matmul and no extra additions."""
    pytest.importorskip("scipy")
    from scipy.linalg import blas
    from tessera_array.backends.numpy import matvec

    calls = []
    real = blas.sgemm

    def spy(alpha, a, b, beta=0.0, c=None, trans_a=0, trans_b=0, overwrite_c=0):
        r = real(alpha, a, b, beta=beta, c=c, trans_a=trans_a, trans_b=trans_b,
                 overwrite_c=overwrite_c)
        calls.append((beta, overwrite_c, r.ctypes.data == c.ctypes.data, c.flags.f_contiguous))
        return r

    monkeypatch.setattr(blas, "sgemm", spy)
    monkeypatch.setattr(np, "matmul", None)  # any matmul would fail
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 5, K)).astype("f")
    w = rng.standard_normal((N, K)).astype("f")
    b = rng.standard_normal(N).astype("f")
    r = rng.standard_normal((5, 1)).astype("f")
    out = matvec.linear(x, w, b, r)
    assert calls == [(1.0, 1, True, True)]
    assert out.flags.c_contiguous and out.shape == (2, 5, N)
    ref = x.astype("d") @ w.T.astype("d") + b + r
    assert _rel(out, ref) <= RTOL32


def test_numpy_linear_without_scipy(monkeypatch):
    """Without SciPy the NumPy backend's launcher takes NumPy's matmul and the additions."""
    import sys

    from tessera_array.backends.numpy import matvec

    monkeypatch.setitem(sys.modules, "scipy.linalg", None)  # import scipy.linalg fails
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 5, K))
    w = rng.standard_normal((N, K))
    b = rng.standard_normal(N)
    r = rng.standard_normal((3, 1, N))
    assert matvec._gemm_into(np.zeros((15, N)), x.reshape(15, K), w) is False
    out = matvec.linear(x, w, b, r)
    assert _rel(out, x @ w.T + b + r) <= RTOL64


@pytest.mark.parametrize("rkn", [(3, 0, 4), (3, 5, 0), (0, 5, 4)], ids=lambda s: "x".join(map(str, s)))
def test_empty_dimensions(device, rkn):
    """K = 0 gives bias + residual; no rows or no features give empty results."""
    r, k, n = rkn
    rng = np.random.default_rng(9)
    x, w = rng.standard_normal((r, k)), rng.standard_normal((n, k))
    b, res = rng.standard_normal(n), rng.standard_normal((r, n))
    A = [_arr(a.astype("f"), device) for a in (x, w, b, res)]
    out = nn.linear(*A)
    np.testing.assert_allclose(_np(out), (x @ w.T + b + res).astype("f"), rtol=1e-6, atol=1e-6)
    assert _np(nn.linear(A[0], A[1])).shape == (r, n)
    grads = nn.linear_backward(A[0], A[1], _arr(np.ones((r, n), "f"), device), bias=A[2],
                               residual=A[3])
    assert [g.shape for g in grads] == [(r, k), (n, k), (n,), (r, n)]
    np.testing.assert_array_equal(_np(grads[2]), np.full(n, float(r), "f"))
