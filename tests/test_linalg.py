"""Linear algebra (main namespace and ``linalg``) against NumPy float64/complex128 references.

Decompositions are checked by rebuilding ``A`` from their factors; random inputs are
well conditioned (diagonally dominated), and every test runs on every device.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import tessera_array as xp

TOL = {"float32": 2e-4, "float64": 1e-10, "complex64": 2e-4, "complex128": 1e-10}
FLOATS = ["float32", "float64", "complex64", "complex128"]
INF = float("inf")


def _host(x):
    return np.asarray(x.to_device("cpu"))


def _ref(a):
    """``a`` in the float64/complex128 reference precision."""
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)


def _rand(rng, shape, dtype):
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.random(shape) > 0.5
    if dt.kind in "iu":
        a = rng.integers(0 if dt.kind == "u" else -4, 5, size=shape).astype(dt)
        if a.size:
            a.flat[0] = 3  # never all zeros
        return a
    a = rng.standard_normal(shape)
    if dt.kind == "c":
        a = a + 1j * rng.standard_normal(shape)
    return a.astype(dt)


def _well_conditioned(rng, shape, dtype):
    """Random square matrices with a dominant diagonal (condition number ~ a few)."""
    a = _rand(rng, shape, dtype)
    n = shape[-1]
    return (a + 2 * n * np.eye(n, dtype=a.dtype)).astype(dtype)


def _hermitian_pd(rng, shape, dtype):
    a = _rand(rng, shape, dtype)
    n = shape[-1]
    h = np.matmul(a, np.conj(np.swapaxes(a, -1, -2))) + n * np.eye(n)
    return h.astype(dtype)


def _close(out, ref, dtype, scale=1.0):
    tol = TOL[str(dtype)] * scale
    np.testing.assert_allclose(_host(out), ref, rtol=tol, atol=tol)


def _check(out, device, dtype, shape=None):
    """An Array on ``device`` of ``dtype`` whose buffer holds that dtype."""
    assert isinstance(out, xp.Array)
    assert out.device is device
    assert str(out.dtype) == str(dtype), (out.dtype, dtype)
    assert _host(out).dtype == np.dtype(str(dtype))
    if shape is not None:
        assert out.shape == shape


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# ---- main namespace: matmul ----------------------------------------------------------


MATMUL_SHAPES = [
    ((3,), (3,)),
    ((2, 3), (3,)),
    ((3,), (3, 4)),
    ((2, 3), (3, 4)),
    ((5, 2, 3), (3, 4)),
    ((2, 3), (5, 3, 4)),
    ((3,), (5, 3, 4)),
    ((5, 2, 3), (3,)),
    ((5, 1, 2, 3), (4, 3, 2)),
    ((0, 2, 3), (3, 4)),
]


@pytest.mark.parametrize("s1, s2", MATMUL_SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64", "int32"])
def test_matmul_matches_numpy(device, rng, s1, s2, dtype):
    a, b = _rand(rng, s1, dtype), _rand(rng, s2, dtype)
    x1, x2 = xp.asarray(a, device=device), xp.asarray(b, device=device)
    ref = np.matmul(_ref(a), _ref(b))
    for out in (xp.matmul(x1, x2), x1 @ x2, xp.linalg.matmul(x1, x2)):
        _check(out, device, dtype, ref.shape)
        _close(out, ref, dtype if dtype != "int32" else "float64")


@pytest.mark.parametrize(
    "d1, d2, expected",
    [("int8", "float32", "float32"), ("int64", "float64", "float64"),
     ("float32", "complex128", "complex128"), ("uint8", "int8", "int16"),
     ("bool", "bool", "bool")],
)
def test_matmul_promotes(device, rng, d1, d2, expected):
    a, b = _rand(rng, (2, 3), d1), _rand(rng, (3, 2), d2)
    out = xp.matmul(xp.asarray(a, device=device), xp.asarray(b, device=device))
    _check(out, device, expected, (2, 2))
    np.testing.assert_allclose(_host(out), np.matmul(a, b).astype(expected), rtol=1e-5)


def test_matmul_bad_input(device):
    x0 = xp.asarray(2.0, device=device)
    v3 = xp.ones((3,), device=device)
    m23 = xp.ones((2, 3), device=device)
    m24 = xp.ones((2, 4), device=device)
    with pytest.raises(ValueError, match=r"^matmul: x1 and x2 must have at least one dimension"):
        xp.matmul(x0, v3)
    with pytest.raises(ValueError, match=r"^matmul: .*Received: x1.shape=\(2, 3\), x2.shape=\(2, 4\)"):
        xp.matmul(m23, m24)
    with pytest.raises(ValueError, match=r"^matmul: .*only axis of x2"):
        xp.matmul(m23, xp.ones((4,), device=device))
    with pytest.raises(ValueError, match=r"^matmul: the stack dimensions .* cannot be broadcast"):
        xp.matmul(xp.ones((2, 2, 3), device=device), xp.ones((3, 3, 1), device=device))
    with pytest.raises(TypeError, match=r"^matmul: x2 must be a tessera_array Array"):
        xp.matmul(m23, [[1.0], [2.0], [3.0]])
    # A NumPy array operand goes through NumPy's protocol, as with ``+``: on a host
    # device the product is a tessera Array (see tessera_array._numpy_interop).
    if device.backend.is_host:
        prod = m23 @ np.ones((3, 1))
        assert isinstance(prod, xp.Array) and prod.shape == (2, 1)
    else:  # a device array moves nothing implicitly
        with pytest.raises(xp.DeviceMismatchError, match=r"^numpy.matmul: a NumPy array and "):
            m23 @ np.ones((3, 1))
    with pytest.raises(TypeError):
        m23 @ "not an array"


# ---- main namespace: matrix_transpose, tensordot, vecdot ----------------------------------


@pytest.mark.parametrize("shape", [(2, 3), (4, 2, 3), (1, 0, 3)])
def test_matrix_transpose(device, rng, shape):
    a = _rand(rng, shape, "int16")
    x = xp.asarray(a, device=device)
    for out in (xp.matrix_transpose(x), xp.linalg.matrix_transpose(x), x.mT):
        _check(out, device, "int16", shape[:-2] + shape[:-3:-1])
        np.testing.assert_array_equal(_host(out), np.swapaxes(a, -1, -2))
    with pytest.raises(ValueError, match=r"^matrix_transpose: x must have at least 2 dim.*"
                                         r"Received: x.shape=\(3,\)"):
        xp.matrix_transpose(xp.ones((3,), device=device))


@pytest.mark.parametrize(
    "s1, s2, axes",
    [((2, 3, 4), (3, 4, 5), 2), ((2, 3), (3, 4), 1), ((2, 3), (4,), 0),
     ((2, 3, 4), (4, 3, 5), ((1, 2), (1, 0))), ((2, 3, 4), (5, 4, 2), ((-1, 0), (1, -1))),
     ((3,), (3,), ([0], [0])), ((2, 3), (3, 2), ((), ()))],
)
@pytest.mark.parametrize("dtype", ["float64", "complex64", "int32"])
def test_tensordot_matches_numpy(device, rng, s1, s2, axes, dtype):
    a, b = _rand(rng, s1, dtype), _rand(rng, s2, dtype)
    ref = np.tensordot(_ref(a), _ref(b), axes=axes)
    for ns in (xp, xp.linalg):
        out = ns.tensordot(xp.asarray(a, device=device), xp.asarray(b, device=device), axes=axes)
        _check(out, device, dtype, ref.shape)
        _close(out, ref, dtype if dtype != "int32" else "float64")


def test_tensordot_bad_input(device):
    x = xp.ones((2, 3), device=device)
    y = xp.ones((4, 2), device=device)
    with pytest.raises(ValueError, match=r"^tensordot: contracted axes must have equal sizes"):
        xp.tensordot(x, y, axes=1)
    with pytest.raises(ValueError, match=r"^tensordot: contracted axes .*x1.shape\[0\]=2, "
                                         r"x2.shape\[0\]=4"):
        xp.tensordot(x, y, axes=((0,), (0,)))
    with pytest.raises(ValueError, match=r"^tensordot: an int axes must be in \[0, min"):
        xp.tensordot(x, y, axes=3)
    with pytest.raises(ValueError, match=r"^tensordot: an int axes .*Received: axes=-1"):
        xp.tensordot(x, y, axes=-1)
    with pytest.raises(xp.AxisError, match=r"^tensordot: every axis for x2 must be in \[-2, 2\)"):
        xp.tensordot(x, y, axes=((0,), (2,)))
    with pytest.raises(ValueError, match=r"^tensordot: the axes for x1 must be unique"):
        xp.tensordot(x, xp.ones((2, 2), device=device), axes=((0, 0), (0, 1)))
    with pytest.raises(ValueError, match=r"^tensordot: x1_axes and x2_axes must have the same"):
        xp.tensordot(x, y, axes=((0, 1), (1,)))
    with pytest.raises(TypeError, match=r"^tensordot: axes must be an int"):
        xp.tensordot(x, y, axes=1.5)
    with pytest.raises(TypeError, match=r"^tensordot: x1 must be a tessera_array Array"):
        xp.tensordot(np.ones((2, 3)), y)


def test_vecdot_conjugates_x1(device):
    x1 = xp.asarray([1j, 2j, 3j], device=device)
    x2 = xp.asarray([1, 2j, 3], device=device)
    out = xp.vecdot(x1, x2)
    _check(out, device, "complex128", ())
    assert complex(out) == 4 - 10j
    assert complex(xp.linalg.vecdot(x1, x2)) == 4 - 10j


@pytest.mark.parametrize(
    "s1, s2, axis",
    [((4,), (4,), -1), ((3, 4), (4,), -1), ((2, 1, 4), (3, 4), -1), ((4, 3), (4, 1), -2),
     ((2, 4, 3), (4, 3), -2), ((2, 4, 3), (4, 3), 1)],
)
@pytest.mark.parametrize("dtype", ["float32", "complex128", "int64"])
def test_vecdot_matches_numpy(device, rng, s1, s2, axis, dtype):
    a, b = _rand(rng, s1, dtype), _rand(rng, s2, dtype)
    neg = axis if axis < 0 else axis - max(len(s1), len(s2))
    ref = np.sum(np.conj(_ref(a)) * _ref(b), axis=neg)
    out = xp.vecdot(xp.asarray(a, device=device), xp.asarray(b, device=device), axis=axis)
    _check(out, device, dtype, ref.shape)
    _close(out, ref, dtype if dtype != "int64" else "float64")


def test_vecdot_bad_input(device):
    x = xp.ones((2, 3), device=device)
    with pytest.raises(ValueError, match=r"^vecdot: x1 and x2 must have the same size along "
                                         r"axis .*x1.shape=\(2, 3\), x2.shape=\(2, 1\)"):
        xp.vecdot(x, xp.ones((2, 1), device=device))  # the contracted axis is not broadcast
    with pytest.raises(xp.AxisError, match=r"^vecdot: axis must be in \[-1, -1\]"):
        xp.vecdot(x, xp.ones((3,), device=device), axis=-2)
    with pytest.raises(ValueError, match=r"^vecdot: the non-contracted axes .* cannot be broadcast"):
        xp.vecdot(x, xp.ones((4, 3), device=device))
    with pytest.raises(ValueError, match=r"^vecdot: x1 and x2 must have at least one dimension"):
        xp.vecdot(xp.asarray(1.0, device=device), x)
    with pytest.raises(TypeError, match=r"^vecdot: axis must be an int"):
        xp.vecdot(x, x, axis=1.0)


# ---- linalg: factorizations -------------------------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (1, 1)])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_reconstructs(device, rng, dtype, shape, upper):
    a = _hermitian_pd(rng, shape, dtype)
    out = xp.linalg.cholesky(xp.asarray(a, device=device), upper=upper)
    _check(out, device, dtype, shape)
    f = _ref(_host(out))
    fh = np.conj(np.swapaxes(f, -1, -2))
    rebuilt = fh @ f if upper else f @ fh
    np.testing.assert_allclose(rebuilt, _ref(a), rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
    tri = np.triu(f) if upper else np.tril(f)
    np.testing.assert_array_equal(f, tri)


def test_cholesky_not_positive_definite(device):
    x = xp.asarray([[1.0, 2.0], [2.0, 1.0]], device=device)
    with pytest.raises(xp.linalg.LinAlgError, match=r"^linalg.cholesky: x .*not positive "
                                                     r"definite.*Received: x.shape=\(2, 2\)"):
        xp.linalg.cholesky(x)
    assert issubclass(xp.linalg.LinAlgError, ValueError)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (2, 5, 3)])
@pytest.mark.parametrize("mode", ["reduced", "complete"])
def test_qr_reconstructs(device, rng, dtype, shape, mode):
    a = _rand(rng, shape, dtype)
    res = xp.linalg.qr(xp.asarray(a, device=device), mode=mode)
    assert type(res).__name__ == "QRResult" and res._fields == ("Q", "R")
    m, n = shape[-2:]
    k = m if mode == "complete" else min(m, n)
    _check(res.Q, device, dtype, shape[:-2] + (m, k))
    _check(res.R, device, dtype, shape[:-2] + (k, n))
    q, r = _ref(_host(res.Q)), _ref(_host(res.R))
    np.testing.assert_allclose(q @ r, _ref(a), rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
    qhq = np.conj(np.swapaxes(q, -1, -2)) @ q
    np.testing.assert_allclose(qhq, np.broadcast_to(np.eye(k), qhq.shape), atol=TOL[dtype] * 10)
    np.testing.assert_array_equal(r, np.triu(r))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_svd_reconstructs(device, rng, dtype, shape, full_matrices):
    a = _rand(rng, shape, dtype)
    res = xp.linalg.svd(xp.asarray(a, device=device), full_matrices=full_matrices)
    assert type(res).__name__ == "SVDResult" and res._fields == ("U", "S", "Vh")
    m, n = shape[-2:]
    k = min(m, n)
    real = "float32" if dtype in ("float32", "complex64") else "float64"
    _check(res.U, device, dtype, shape[:-2] + ((m, m) if full_matrices else (m, k)))
    _check(res.S, device, real, shape[:-2] + (k,))
    _check(res.Vh, device, dtype, shape[:-2] + ((n, n) if full_matrices else (k, n)))
    u, s, vh = _ref(_host(res.U)), _ref(_host(res.S)), _ref(_host(res.Vh))
    rebuilt = (u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :]
    np.testing.assert_allclose(rebuilt, _ref(a), rtol=TOL[dtype] * 10, atol=TOL[dtype] * 10)
    assert np.all(s[..., :-1] >= s[..., 1:])
    sv = xp.linalg.svdvals(xp.asarray(a, device=device))
    _check(sv, device, real, shape[:-2] + (k,))
    _close(sv, np.linalg.svd(_ref(a), compute_uv=False), dtype, 10)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(4, 4), (3, 2, 2)])
def test_eigh_reconstructs(device, rng, dtype, shape):
    a = _hermitian_pd(rng, shape, dtype)
    res = xp.linalg.eigh(xp.asarray(a, device=device))
    assert type(res).__name__ == "EighResult"
    assert res._fields == ("eigenvalues", "eigenvectors")
    real = "float32" if dtype in ("float32", "complex64") else "float64"
    _check(res.eigenvalues, device, real, shape[:-1])
    _check(res.eigenvectors, device, dtype, shape)
    w, v = _ref(_host(res.eigenvalues)), _ref(_host(res.eigenvectors))
    rebuilt = (v * w[..., None, :]) @ np.conj(np.swapaxes(v, -1, -2))
    np.testing.assert_allclose(rebuilt, _ref(a), rtol=TOL[dtype] * 10, atol=TOL[dtype] * 100)
    ev = xp.linalg.eigvalsh(xp.asarray(a, device=device))
    _check(ev, device, real, shape[:-1])
    _close(ev, np.linalg.eigvalsh(_ref(a)), dtype, 100)


@pytest.mark.parametrize(
    "dtype, expected",
    [("float32", "complex64"), ("float64", "complex128"), ("complex64", "complex64"),
     ("complex128", "complex128"), ("int32", "complex128")],
)
@pytest.mark.parametrize("shape", [(4, 4), (3, 3, 3)])
def test_eig_reconstructs(device, rng, dtype, expected, shape):
    a = _rand(rng, shape, dtype)  # general, non-symmetric: complex eigenvalues
    res = xp.linalg.eig(xp.asarray(a, device=device))
    assert type(res).__name__ == "EigResult"
    assert res._fields == ("eigenvalues", "eigenvectors")
    _check(res.eigenvalues, device, expected, shape[:-1])
    _check(res.eigenvectors, device, expected, shape)
    w, v = _ref(_host(res.eigenvalues)), _ref(_host(res.eigenvectors))
    tol = TOL[expected] * 100
    np.testing.assert_allclose(_ref(a) @ v, v * w[..., None, :], rtol=tol, atol=tol)
    ev = xp.linalg.eigvals(xp.asarray(a, device=device))
    _check(ev, device, expected, shape[:-1])
    ref = np.linalg.eigvals(_ref(a))
    np.testing.assert_allclose(np.sort_complex(_host(ev).astype(np.complex128)),
                               np.sort_complex(ref.astype(np.complex128)), rtol=tol, atol=tol)


def test_eig_of_real_spectrum_is_still_complex(device):
    x = xp.asarray(np.diag([1.0, 2.0, 3.0]).astype(np.float32), device=device)
    _check(xp.linalg.eigvals(x), device, "complex64", (3,))
    _check(xp.linalg.eig(x).eigenvectors, device, "complex64", (3, 3))


# ---- linalg: determinants, inverses, solvers ---------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4), (0, 2, 2), (0, 0)])
def test_det_slogdet(device, rng, dtype, shape):
    a = _rand(rng, shape, dtype) if 0 in shape else _well_conditioned(rng, shape, dtype)
    x = xp.asarray(a, device=device)
    real = "float32" if dtype in ("float32", "complex64") else "float64"
    d = xp.linalg.det(x)
    _check(d, device, dtype, shape[:-2])
    _close(d, np.linalg.det(_ref(a)), dtype, 10)
    res = xp.linalg.slogdet(x)
    assert type(res).__name__ == "SlogdetResult" and res._fields == ("sign", "logabsdet")
    _check(res.sign, device, dtype, shape[:-2])
    _check(res.logabsdet, device, real, shape[:-2])
    rs, rl = np.linalg.slogdet(_ref(a))
    _close(res.sign, rs, dtype, 10)
    _close(res.logabsdet, rl, dtype, 10)


def test_slogdet_of_singular_matrix(device):
    res = xp.linalg.slogdet(xp.asarray([[1.0, 2.0], [2.0, 4.0]], device=device))
    assert float(res.sign) == 0.0 and float(res.logabsdet) == -INF


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(4, 4), (3, 2, 2), (0, 0)])
def test_inv(device, rng, dtype, shape):
    a = _well_conditioned(rng, shape, dtype)
    out = xp.linalg.inv(xp.asarray(a, device=device))
    _check(out, device, dtype, shape)
    eye = np.broadcast_to(np.eye(shape[-1]), shape)
    np.testing.assert_allclose(_ref(a) @ _ref(_host(out)), eye, atol=TOL[dtype] * 10)


def test_inv_singular_and_non_square(device):
    with pytest.raises(xp.linalg.LinAlgError, match=r"^linalg.inv: x .*is singular"):
        xp.linalg.inv(xp.asarray([[1.0, 2.0], [2.0, 4.0]], device=device))
    with pytest.raises(ValueError, match=r"^linalg.inv: x must be a square matrix .*"
                                         r"Received: x.shape=\(2, 3\)"):
        xp.linalg.inv(xp.ones((2, 3), device=device))
    with pytest.raises(ValueError, match=r"^linalg.det: x must have at least 2 dimensions.*"
                                         r"Received: x.shape=\(3,\)"):
        xp.linalg.det(xp.ones((3,), device=device))
    with pytest.raises(ValueError, match=r"^linalg.det: x must be a square matrix"):
        xp.linalg.det(xp.ones((4, 2, 3), device=device))


@pytest.mark.parametrize(
    "s1, s2, expected",
    [((3, 3), (3,), (3,)), ((2, 3, 3), (3,), (2, 3)), ((3, 3), (3, 4), (3, 4)),
     ((2, 3, 3), (3, 1), (2, 3, 1)), ((3, 3), (2, 3, 2), (2, 3, 2)),
     ((4, 1, 3, 3), (2, 3, 5), (4, 2, 3, 5)), ((3, 3), (3, 0), (3, 0))],
)
@pytest.mark.parametrize("dtype", FLOATS)
def test_solve(device, rng, s1, s2, expected, dtype):
    a = _well_conditioned(rng, s1, dtype)
    b = _rand(rng, s2, dtype)
    out = xp.linalg.solve(xp.asarray(a, device=device), xp.asarray(b, device=device))
    _check(out, device, dtype, expected)
    x = _ref(_host(out))
    ab = _ref(a) @ (x[..., None] if len(s2) == 1 else x)
    bb = _ref(b)[..., None] if len(s2) == 1 else _ref(b)
    np.testing.assert_allclose(ab, np.broadcast_to(bb, ab.shape), rtol=TOL[dtype] * 10,
                               atol=TOL[dtype] * 10)


def test_solve_promotes_and_rejects(device, rng):
    a = _well_conditioned(rng, (3, 3), "float32")
    b = _rand(rng, (3,), "float64")
    out = xp.linalg.solve(xp.asarray(a, device=device), xp.asarray(b, device=device))
    _check(out, device, "float64", (3,))
    ai = xp.asarray(np.array([[2, 1], [1, 3]]), device=device)
    _check(xp.linalg.solve(ai, xp.asarray(np.array([1, 2]), device=device)), device, "float64")
    x = xp.asarray(a, device=device)
    with pytest.raises(ValueError, match=r"^linalg.solve: a 1-D x2 must have the size of x1's "
                                         r"last axis. Received: x1.shape=\(3, 3\), x2.shape=\(4,\)"):
        xp.linalg.solve(x, xp.ones((4,), device=device))
    with pytest.raises(ValueError, match=r"^linalg.solve: x2 must have shape \(M,\) or "
                                         r"\(\.\.\., M, K\)"):
        xp.linalg.solve(x, xp.ones((2, 3), device=device))
    with pytest.raises(ValueError, match=r"^linalg.solve: the stack dimensions of x1 and x2"):
        xp.linalg.solve(xp.ones((2, 3, 3), device=device), xp.ones((4, 3, 1), device=device))
    with pytest.raises(ValueError, match=r"^linalg.solve: x1 must be a square matrix"):
        xp.linalg.solve(xp.ones((3, 2), device=device), xp.ones((3,), device=device))
    with pytest.raises(xp.linalg.LinAlgError, match=r"^linalg.solve: x1 .*is singular"):
        xp.linalg.solve(xp.zeros((2, 2), device=device), xp.ones((2,), device=device))
    with pytest.raises(TypeError, match=r"^linalg.solve: x2 must be a tessera_array Array"):
        xp.linalg.solve(x, [1.0, 2.0, 3.0])


# ---- linalg: pinv, matrix_rank, matrix_power ---------------------------------------------


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 4, 4), (0, 3)])
def test_pinv_matches_numpy(device, rng, dtype, shape):
    a = _rand(rng, shape, dtype)
    out = xp.linalg.pinv(xp.asarray(a, device=device))
    _check(out, device, dtype, shape[:-2] + shape[:-3:-1])
    _close(out, np.linalg.pinv(_ref(a), rtol=None), dtype, 100)


def test_pinv_rtol_array_broadcasts(device, rng):
    a = _rand(rng, (4, 4), "float64")
    s = np.linalg.svd(a, compute_uv=False)
    rtol = np.array([0.0, (s[1] + s[2]) / 2 / s[0]])  # keep all / keep the top two
    out = xp.linalg.pinv(xp.asarray(a, device=device), rtol=xp.asarray(rtol, device=device))
    _check(out, device, "float64", (2, 4, 4))
    for i in range(2):
        _close(out[i], np.linalg.pinv(a, rtol=rtol[i]), "float64", 100)


@pytest.mark.parametrize("dtype", FLOATS)
def test_matrix_rank(device, rng, dtype):
    u = _rand(rng, (3, 6, 2), dtype)
    v = _rand(rng, (3, 2, 5), dtype)
    a = (u @ v).astype(dtype)  # rank 2
    a[1] = 0
    out = xp.linalg.matrix_rank(xp.asarray(a, device=device))
    _check(out, device, "int64", (3,))
    np.testing.assert_array_equal(_host(out), [2, 0, 2])
    out = xp.linalg.matrix_rank(xp.asarray(a, device=device), rtol=0.99)
    np.testing.assert_array_equal(_host(out), [1, 0, 1])
    rt = xp.asarray(np.array([1e-3, 0.0, 0.99]), device=device)
    out = xp.linalg.matrix_rank(xp.asarray(a, device=device), rtol=rt)
    np.testing.assert_array_equal(_host(out), [2, 0, 1])


def test_rtol_bad_input(device):
    x = xp.ones((2, 3, 3), device=device)
    with pytest.raises(TypeError, match=r"^linalg.matrix_rank: an array rtol must have a real "
                                        r"floating-point dtype. Received: rtol.dtype=int64"):
        xp.linalg.matrix_rank(x, rtol=xp.asarray([1, 2], device=device))
    with pytest.raises(ValueError, match=r"^linalg.pinv: rtol and the stack shape of x cannot be "
                                         r"broadcast"):
        xp.linalg.pinv(x, rtol=xp.asarray([0.1, 0.2, 0.3], device=device))
    with pytest.raises(TypeError, match=r"^linalg.pinv: rtol must be None, a Python float"):
        xp.linalg.pinv(x, rtol="1e-3")


@pytest.mark.parametrize("n", [0, 1, 2, 5, -1, -3])
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
def test_matrix_power(device, rng, n, dtype):
    a = (_well_conditioned(rng, (2, 3, 3), dtype) / 6).astype(dtype)
    out = xp.linalg.matrix_power(xp.asarray(a, device=device), n)
    _check(out, device, dtype, (2, 3, 3))
    _close(out, np.linalg.matrix_power(_ref(a), n), dtype, 100)


def test_matrix_power_integer_input_and_bad_n(device):
    x = xp.asarray(np.array([[1, 1], [0, 1]]), device=device)
    out = xp.linalg.matrix_power(x, 3)
    _check(out, device, "float64", (2, 2))
    np.testing.assert_array_equal(_host(out), [[1, 3], [0, 1]])
    with pytest.raises(TypeError, match=r"^linalg.matrix_power: n must be an int. "
                                        r"Received: n=2.0"):
        xp.linalg.matrix_power(x, 2.0)
    with pytest.raises(xp.linalg.LinAlgError, match=r"^linalg.matrix_power: x .*singular"):
        xp.linalg.matrix_power(xp.zeros((2, 2), device=device), -1)


# ---- linalg: norms -------------------------------------------------------------------


@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, INF, -INF])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("keepdims", [False, True])
def test_matrix_norm_matches_numpy(device, rng, ord, dtype, keepdims):
    a = _rand(rng, (2, 4, 3), dtype)
    out = xp.linalg.matrix_norm(xp.asarray(a, device=device), ord=ord, keepdims=keepdims)
    ref = np.linalg.norm(_ref(a), ord=ord, axis=(-2, -1), keepdims=keepdims)
    real = "float32" if dtype in ("float32", "complex64") else "float64"
    _check(out, device, real, ref.shape)
    _close(out, ref, dtype, 10)


def test_matrix_norm_empty_and_bad_ord(device):
    out = xp.linalg.matrix_norm(xp.ones((2, 0, 3), device=device), ord=2, keepdims=True)
    _check(out, device, "float64", (2, 1, 1))
    assert not np.any(_host(out))
    x = xp.ones((3, 3), device=device)
    for bad in (3, "f", 0, True):
        with pytest.raises(ValueError, match=r"^linalg.matrix_norm: ord must be one of 'fro', "
                                             r"'nuc', 1, -1, 2, -2, inf, -inf. Received: ord="):
            xp.linalg.matrix_norm(x, ord=bad)
    with pytest.raises(ValueError, match=r"^linalg.matrix_norm: x must have at least 2 dim"):
        xp.linalg.matrix_norm(xp.ones((3,), device=device))


def _vector_norm_ref(a, axis, keepdims, ord):
    a = np.abs(_ref(a))
    if ord == INF:
        return np.max(a, axis=axis, keepdims=keepdims)
    if ord == -INF:
        return np.min(a, axis=axis, keepdims=keepdims)
    if ord == 0:
        return np.sum(a != 0, axis=axis, keepdims=keepdims).astype(np.float64)
    with np.errstate(divide="ignore"):
        return np.sum(a**ord, axis=axis, keepdims=keepdims) ** (1.0 / ord)


@pytest.mark.parametrize("ord", [2, 1, 0, INF, -INF, -1, -2, 3.5, 0.5, 10])
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), (2, 0, 1), ()])
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
def test_vector_norm_matches_numpy(device, rng, ord, axis, dtype):
    a = _rand(rng, (3, 4, 5), dtype)
    for keepdims in (False, True):
        out = xp.linalg.vector_norm(xp.asarray(a, device=device), axis=axis,
                                    keepdims=keepdims, ord=ord)
        ref = _vector_norm_ref(a, axis, keepdims, ord)
        _check(out, device, "float64" if dtype == "float64" else "float32", ref.shape)
        _close(out, ref, dtype, 10)


def test_vector_norm_integer_input_zeros_and_overflow(device):
    out = xp.linalg.vector_norm(xp.asarray([3, 4], device=device))
    _check(out, device, "float64", ())
    assert float(out) == 5.0
    z = xp.asarray([0.0, 2.0], device=device)
    assert float(xp.linalg.vector_norm(z, ord=-1)) == 0.0  # 1/sum(1/|a|) with a zero
    assert float(xp.linalg.vector_norm(z, ord=0)) == 1.0
    big = xp.asarray(np.array([3e30, 4e30], dtype=np.float32), device=device)
    for ord in (2, 3):
        out = xp.linalg.vector_norm(big, ord=ord)
        _check(out, device, "float32", ())
        ref = np.sum(np.array([3e30, 4e30]) ** ord) ** (1 / ord)
        assert math.isclose(float(out), ref, rel_tol=1e-5)  # no spurious overflow to inf
    inf = xp.asarray([1.0, INF], device=device)
    assert float(xp.linalg.vector_norm(inf)) == INF
    assert float(xp.linalg.vector_norm(inf, ord=3)) == INF


def test_vector_norm_bad_input(device):
    x = xp.ones((2, 3), device=device)
    with pytest.raises(TypeError, match=r"^linalg.vector_norm: ord must be an int or a float"):
        xp.linalg.vector_norm(x, ord="fro")
    with pytest.raises(ValueError, match=r"^linalg.vector_norm: ord must not be nan"):
        xp.linalg.vector_norm(x, ord=float("nan"))
    with pytest.raises(xp.AxisError, match=r"^linalg.vector_norm: axis 2 is out of range"):
        xp.linalg.vector_norm(x, axis=2)
    with pytest.raises(ValueError, match=r"^linalg.vector_norm: axis has repeated entries"):
        xp.linalg.vector_norm(x, axis=(0, -2))
    with pytest.raises(TypeError, match=r"^linalg.vector_norm: x must be a tessera_array Array"):
        xp.linalg.vector_norm([1.0, 2.0])


# ---- linalg: trace, diagonal, outer, cross ------------------------------------------------


@pytest.mark.parametrize(
    "dtype, expected",
    [("int8", "int64"), ("uint16", "uint64"), ("int64", "int64"), ("uint64", "uint64"),
     ("bool", "int64"), ("float32", "float32"), ("complex64", "complex64")],
)
@pytest.mark.parametrize("offset", [0, 1, -2, 7])
def test_trace(device, rng, dtype, expected, offset):
    a = _rand(rng, (2, 4, 5), dtype)
    out = xp.linalg.trace(xp.asarray(a, device=device), offset=offset)
    _check(out, device, expected, (2,))
    ref = np.trace(_ref(a) if dtype[0] in "fc" else a, offset=offset, axis1=-2, axis2=-1)
    _close(out, ref, "float64" if dtype[0] not in "fc" else dtype)


def test_trace_dtype_argument(device, rng):
    a = _rand(rng, (3, 3), "int8")
    out = xp.linalg.trace(xp.asarray(a, device=device), dtype=xp.float32)
    _check(out, device, "float32", ())
    assert float(out) == float(np.trace(a))
    x = xp.asarray(_rand(rng, (3, 3), "complex64"), device=device)
    with pytest.raises(TypeError, match=r"^linalg.trace: dtype must not lower the kind.*"
                                        r"Received: dtype=float64, x.dtype=complex64"):
        xp.linalg.trace(x, dtype=xp.float64)
    with pytest.raises(ValueError, match=r"^linalg.trace: x must have at least 2 dimensions"):
        xp.linalg.trace(xp.ones((3,), device=device))


@pytest.mark.parametrize("offset", [0, 2, -1, -5, 100])
def test_diagonal(device, rng, offset):
    a = _rand(rng, (2, 3, 4), "int32")
    x = xp.asarray(a, device=device)
    out = xp.linalg.diagonal(x, offset=offset)
    ref = np.diagonal(a, offset, -2, -1)
    _check(out, device, "int32", ref.shape)
    np.testing.assert_array_equal(_host(out), ref)
    if out.size:
        out[...] = 0  # a new array: writable, and x is untouched
        np.testing.assert_array_equal(_host(x), a)
    with pytest.raises(TypeError, match=r"^linalg.diagonal: offset must be an int"):
        xp.linalg.diagonal(x, offset=0.5)


@pytest.mark.parametrize("d1, d2", [("float64", "float32"), ("int16", "int16"),
                                    ("complex64", "float64"), ("bool", "bool")])
def test_outer(device, rng, d1, d2):
    a, b = _rand(rng, (4,), d1), _rand(rng, (3,), d2)
    out = xp.linalg.outer(xp.asarray(a, device=device), xp.asarray(b, device=device))
    ref = np.outer(a, b)
    _check(out, device, ref.dtype, (4, 3))
    np.testing.assert_allclose(_host(out), ref, rtol=1e-6)
    with pytest.raises(ValueError, match=r"^linalg.outer: x1 and x2 must be 1-D. Received: "
                                         r"x1.shape=\(2, 2\)"):
        xp.linalg.outer(xp.ones((2, 2), device=device), xp.ones((2,), device=device))


@pytest.mark.parametrize(
    "s1, s2, axis",
    [((3,), (3,), -1), ((4, 3), (3,), -1), ((2, 1, 3), (5, 3), -1), ((3, 4), (3, 1), -2),
     ((2, 3, 4), (3, 4), 1)],
)
@pytest.mark.parametrize("dtype", ["float32", "int64", "complex128"])
def test_cross(device, rng, s1, s2, axis, dtype):
    a, b = _rand(rng, s1, dtype), _rand(rng, s2, dtype)
    neg = axis if axis < 0 else axis - max(len(s1), len(s2))
    ref = np.cross(_ref(a), _ref(b), axis=neg)
    out = xp.linalg.cross(xp.asarray(a, device=device), xp.asarray(b, device=device), axis=axis)
    _check(out, device, dtype, ref.shape)
    _close(out, ref, dtype if dtype != "int64" else "float64")


def test_cross_bad_input(device):
    with pytest.raises(ValueError, match=r"^linalg.cross: x1 and x2 must have size 3 along axis"):
        xp.linalg.cross(xp.ones((2,), device=device), xp.ones((2,), device=device))
    with pytest.raises(ValueError, match=r"^linalg.cross: x1 and x2 must have size 3 .*"
                                         r"x2.shape=\(1,\)"):
        xp.linalg.cross(xp.ones((3,), device=device), xp.ones((1,), device=device))
    with pytest.raises(TypeError, match=r"^linalg.cross: x1 and x2 must have a numeric dtype"):
        xp.linalg.cross(xp.ones((3,), dtype=xp.bool, device=device),
                        xp.ones((3,), dtype=xp.bool, device=device))
    with pytest.raises(xp.AxisError, match=r"^linalg.cross: axis must be in \[-1, -1\]"):
        xp.linalg.cross(xp.ones((3, 3), device=device), xp.ones((3,), device=device), axis=-2)


# ---- dtypes and argument types across the extension ----------------------------------------

SQUARE_FUNCS = ["cholesky", "det", "eig", "eigvals", "eigh", "eigvalsh", "inv", "slogdet"]
MATRIX_FUNCS = ["qr", "svd", "svdvals", "pinv", "matrix_rank", "matrix_norm"]


@pytest.mark.parametrize("name", SQUARE_FUNCS + MATRIX_FUNCS + ["matrix_power", "vector_norm"])
def test_float32_stays_float32(device, rng, name):
    a = _hermitian_pd(rng, (3, 3), "float32")
    x = xp.asarray(a, device=device)
    f = getattr(xp.linalg, name)
    res = f(x, 2) if name == "matrix_power" else f(x)
    outs = res if isinstance(res, tuple) else (res,)
    for out in outs:
        assert str(out.dtype) in ("float32", "complex64", "int64"), (name, out.dtype)
        assert _host(out).dtype == np.dtype(str(out.dtype))


@pytest.mark.parametrize("name", SQUARE_FUNCS + MATRIX_FUNCS)
def test_integer_input_computes_in_float64(device, name):
    x = xp.asarray(np.array([[4, 1], [1, 3]], dtype=np.int32), device=device)
    res = getattr(xp.linalg, name)(x)
    outs = res if isinstance(res, tuple) else (res,)
    for out in outs:
        assert str(out.dtype) in ("float64", "complex128", "int64"), (name, out.dtype)


@pytest.mark.parametrize("name", SQUARE_FUNCS + MATRIX_FUNCS + ["diagonal", "trace"])
def test_non_array_argument_is_type_error(name):
    with pytest.raises(TypeError, match=rf"^linalg.{name}: x must be a tessera_array Array. "
                                        r"Received: x of type list"):
        getattr(xp.linalg, name)([[1.0, 0.0], [0.0, 1.0]])


@pytest.mark.parametrize("name", SQUARE_FUNCS)
def test_non_square_is_value_error(device, name):
    with pytest.raises(ValueError, match=rf"^linalg.{name}: x must be a square matrix"):
        getattr(xp.linalg, name)(xp.ones((2, 3), device=device))


def test_qr_bad_mode(device):
    with pytest.raises(ValueError, match=r"^linalg.qr: mode must be 'reduced' or 'complete'. "
                                         r"Received: mode='r'"):
        xp.linalg.qr(xp.ones((2, 2), device=device), mode="r")


def test_linalg_namespace_is_complete():
    spec = ["cholesky", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh", "inv",
            "matmul", "matrix_norm", "matrix_power", "matrix_rank", "matrix_transpose", "outer",
            "pinv", "qr", "slogdet", "solve", "svd", "svdvals", "tensordot", "trace", "vecdot",
            "vector_norm"]
    for name in spec:
        assert name in xp.linalg.__all__ and callable(getattr(xp.linalg, name)), name
    for name in xp.linalg.__all__:
        assert hasattr(xp.linalg, name), name
    assert xp.linalg.matmul is xp.matmul and xp.linalg.vecdot is xp.vecdot
    for name in ("matmul", "matrix_transpose", "tensordot", "vecdot"):
        assert name in xp.__all__
