"""tessera_array.nn.linear / linear_backward against NumPy in float64 on every device.

Float32 results must be within ``RTOL32`` (max abs error over max abs value) of the
float64 product, float64 within ``RTOL64``; the gradients are checked against the float64
reference, central finite differences, and torch when it is installed. float16 and
bfloat16 results (computed in float32, rounded once) are checked against the float64
product of the rounded operands within the dtype's eps (``RTOL16``), and against the
namespace reference (float32 math, one rounding).
"""

from __future__ import annotations

import importlib.util
import zlib

import _gate
import numpy as np
import pytest

import tessera_array as xp
from tessera_array import nn
from tessera_array._helpers import supports_dtype
from tessera_array.nn._reference import linear_backward_reference, linear_reference

RTOL32 = 1e-6
RTOL64 = 1e-12
# float16/bfloat16 outputs: one rounding (half an ulp, eps / 2 of the value) over a float32
# accumulation: eps of the largest value bounds it
RTOL16 = {"float16": 2.0**-10, "bfloat16": 2.0**-7}
HALF = ["float16", "bfloat16"]
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


# ---- float16 and bfloat16: computed in float32, rounded once -----------------------------


def _half_on(device, a, dtype):
    """``a`` (float64) rounded to the 16-bit ``dtype`` on ``device``, and those rounded
    values in float64 (what the reference multiplies)."""
    if a is None:
        return None, None
    h = xp.astype(xp.asarray(np.asarray(a, np.float32), device=device), getattr(xp, dtype))
    return h, _np(h).astype(np.float64)


def _half_kernel(device, dtype) -> bool:
    """Whether the device's backend registers a 16-bit ``linear`` (numpy, cuda)."""
    from tessera_array._dispatch import registry

    try:
        registry.lookup("linear", device._backend.name, getattr(xp, dtype))
    except xp.KernelDTypeError:
        return False
    return True


def _needs_half(device, dtype):
    if not supports_dtype(device, getattr(xp, dtype)):
        pytest.skip(f"{device} does not hold {dtype} (test_opencl_keeps_refusing_half "
                    f"checks the error)")


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("rkind", ["none", "full", "row", "col", "scalar"])
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("xs", [(K,), (7, K), (2, 3, K), (0, K)],
                         ids=lambda s: "x" + "x".join(map(str, s)))
def test_linear_half_matches_float64(device, dtype, xs, bias, rkind):
    _needs_half(device, dtype)
    rng = np.random.default_rng(zlib.crc32(repr((dtype, xs, bias, rkind)).encode()))
    halves = [_half_on(device, a, dtype) for a in _operands(rng, xs, bias, rkind)]
    ops16 = [h for h, _ in halves]
    ref = _expected(*(r for _, r in halves))
    if not _half_kernel(device, dtype):  # (rocm: no cuBLASLt, no 16-bit kernel)
        with pytest.raises(xp.KernelDTypeError, match=r"^linear: no kernel for op=linear"):
            nn.linear(*ops16)
        return
    out = nn.linear(*ops16)
    assert out.dtype == getattr(xp, dtype) and out.device == device
    got = _np(out)
    assert got.dtype == getattr(xp, dtype)._np and got.shape == ref.shape
    assert np.all(np.isfinite(got.astype(np.float64)))
    assert _rel(got, ref) <= RTOL16[dtype]
    # the namespace reference: float32 math rounded once, the same dtype
    again = linear_reference(*ops16)
    assert again.dtype == getattr(xp, dtype)
    assert _rel(_np(again), ref) <= RTOL16[dtype]
    assert _rel(got, _np(again).astype(np.float64)) <= RTOL16[dtype]


@pytest.mark.parametrize("dtype", HALF)
def test_linear_half_reference_rounds_once(dtype):
    """The reference computes in float32 and rounds to the 16-bit dtype at the end: equal
    to NumPy's float32 composition rounded once, bit for bit; the NumPy launcher agrees."""
    rng = np.random.default_rng(21)
    halves = [_half_on("cpu", a, dtype) for a in _operands(rng, (6, K), True, "full")]
    ops16 = [h for h, _ in halves]
    x, w, b, r = (a.astype(np.float32) for _, a in halves)
    want = (np.matmul(x, w.T) + b + r).astype(getattr(xp, dtype)._np)
    np.testing.assert_array_equal(_np(linear_reference(*ops16)), want)
    from tessera_array.backends.numpy import matvec

    got = matvec.linear_half(*(o._data for o in ops16))
    assert got.dtype == want.dtype and got.flags.c_contiguous
    # bias + residual summed first there: at most one ulp apart
    assert _rel(got, want.astype(np.float64)) <= RTOL16[dtype]


@pytest.mark.parametrize("dtype", HALF)
def test_numpy_linear_half_is_one_sgemm(dtype, monkeypatch):
    """On the CPU a 16-bit linear is one sgemm (float32) into the pre-filled float32
    output, then one rounding; registered for both 16-bit dtypes."""
    from scipy.linalg import blas
    from tessera_array.backends.numpy import matvec

    from tessera_array._dispatch import registry

    assert registry.lookup("linear", "numpy", getattr(xp, dtype)) is matvec.linear_half
    calls = []
    real = blas.sgemm

    def spy(*args, **kwargs):
        calls.append(kwargs.get("beta"))
        return real(*args, **kwargs)

    monkeypatch.setattr(blas, "sgemm", spy)
    monkeypatch.setattr(blas, "dgemm", lambda *a, **k: pytest.fail("dgemm called"))
    rng = np.random.default_rng(22)
    halves = [_half_on("cpu", a, dtype) for a in _operands(rng, (2, 5, K), True, "col")]
    out = nn.linear(*(h for h, _ in halves))
    assert calls == [1.0]
    assert out.dtype == getattr(xp, dtype) and out.shape == (2, 5, N)
    assert _rel(_np(out), _expected(*(a for _, a in halves))) <= RTOL16[dtype]


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("rkind", ["none", "full", "col"])
def test_linear_backward_half(device, dtype, rkind):
    """Gradients of 16-bit operands: computed in float32, each rounded once; against the
    float64 gradients of the rounded operands and the namespace reference."""
    _needs_half(device, dtype)
    rng = np.random.default_rng(23)
    xs = (2, 3, K)
    halves = [_half_on(device, a, dtype) for a in _operands(rng, xs, True, rkind)]
    gh, g = _half_on(device, rng.standard_normal(xs[:-1] + (N,)), dtype)
    (xh, x), (wh, w), (bh, _), (rh, r) = halves
    grads = nn.linear_backward(xh, wh, gh, bias=bh, residual=rh)
    g2, x2 = g.reshape(-1, N), x.reshape(-1, K)
    want = [g @ w, g2.T @ x2, g2.sum(0)]
    if r is not None:
        s = g.sum(axis=tuple(range(g.ndim - r.ndim)))
        want.append(s.sum(axis=tuple(i for i, n in enumerate(r.shape) if n == 1),
                          keepdims=True).reshape(r.shape))
    else:
        assert grads[3] is None
    refs = linear_backward_reference(xh, wh, gh, bias=bh, residual=rh)
    for got, ref, w64 in zip(grads, refs, want):
        assert got.dtype == getattr(xp, dtype) and got.device == device
        assert _rel(_np(got), w64) <= RTOL16[dtype]
        assert ref.dtype == getattr(xp, dtype)
        assert _rel(_np(ref), w64) <= RTOL16[dtype]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed "
                    "(the float64 product of the rounded operands is the reference above)")
@pytest.mark.parametrize("dtype", HALF)
def test_linear_half_matches_torch_cpu(dtype):
    """torch's CPU ``linear(x, w, b) + r`` in the 16-bit dtype against nn.linear: each
    within the dtype's eps of the other (torch rounds the addmm, then the sum)."""
    import torch

    rng = np.random.default_rng(24)
    halves = [_half_on("cpu", a, dtype) for a in _operands(rng, (2, 3, K), True, "full")]
    tdt = getattr(torch, dtype)
    tx, tw, tb, tr = (torch.tensor(a, dtype=torch.float64).to(tdt) for _, a in halves)
    want = (torch.nn.functional.linear(tx, tw, tb) + tr).to(torch.float64).numpy()
    got = _np(nn.linear(*(h for h, _ in halves)))
    assert _rel(got, want) <= RTOL16[dtype]
    assert _rel(got, _expected(*(a for _, a in halves))) <= RTOL16[dtype]


@pytest.mark.parametrize("dtype", HALF)
def test_linear_half_mixed_dtypes_follow_the_rules(dtype):
    """Every operand has x's dtype, as for float32 (no promotion, as torch)."""
    dt = getattr(xp, dtype)
    x = xp.ones((3, K), dtype=dt)
    w = xp.ones((N, K), dtype=dt)
    with pytest.raises(TypeError, match=rf"^linear: bias must have x's dtype .*"
                                        rf"x\.dtype={dtype}, bias\.dtype=float32"):
        nn.linear(x, w, xp.ones(N, dtype=xp.float32))
    with pytest.raises(TypeError, match=rf"^linear: weight must have x's dtype .*"
                                        rf"x\.dtype=float32, weight\.dtype={dtype}"):
        nn.linear(xp.ones((3, K), dtype=xp.float32), w)
    with pytest.raises(TypeError, match=r"^linear_backward: dout must have x's dtype .*"
                                        r"dout\.dtype=float32"):
        nn.linear_backward(x, w, xp.ones((3, N), dtype=xp.float32))


def test_opencl_keeps_refusing_half():
    """OpenCL holds no 16-bit arrays (a TypeError naming the missing capability) and
    registers no 16-bit linear kernel (a KernelDTypeError, a TypeError)."""
    from tessera_array._dispatch import registry

    be = _gate.loaded_backend("opencl")
    dev = be.devices()[0]
    for dt in (xp.float16, xp.bfloat16):
        with pytest.raises(TypeError, match=rf"{dt.name}"):
            xp.zeros((3, K), dtype=dt, device=dev)
        with pytest.raises(xp.KernelDTypeError, match=r"^linear: no kernel for op=linear, "
                                                       r"backend=opencl"):
            registry.lookup("linear", "opencl", dt)
