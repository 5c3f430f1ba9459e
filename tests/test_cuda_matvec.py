"""The CUDA matvec-family launchers (``backends/_cupy/matvec.py`` and ``sparse.py``) against
the NumPy backend's.

Inputs are ``cupy`` arrays uploaded from random NumPy data (never zeros), on the current
device. Every buffer a launcher allocates for its result comes from
``backends/_cupy/_kernels.empty``, which the autouse fixture :func:`poisoned` replaces by
a buffer filled with 0xFF bytes (NaN for floats, -1 or the maximum for integers), so an
element a kernel forgets to write cannot pass. Results are compared with the NumPy
backend's launchers on the same inputs and, for the dense products, with a float64
(complex128) reference; the bit-exact contracts (axpy/aypx rounding, the spmv kernels'
storage order) are checked with exact equality.

Without a CUDA backend the module is skipped with the reason; with
``TESSERA_REQUIRE_BACKENDS`` naming ``cuda`` that skip is a failure instead.
"""

from __future__ import annotations

import _gate
import numpy as np
import pytest
from _poison import poisoned_empty
import scipy.sparse
from tessera_array.backends.numpy import matvec as np_matvec
from tessera_array.backends.numpy import sparse as np_sparse

from tessera_array import _dtypes
from tessera_array._dispatch import KernelRegistry

BACKEND = _gate.require_backend("cuda")

import cupy
from tessera_array.backends._cupy import _kernels
from tessera_array.backends._cupy import matvec as cu_matvec
from tessera_array.backends._cupy import sparse as cu_sparse

FLOATS = [np.float32, np.float64, np.complex64, np.complex128]
REALS = [np.float32, np.float64]
TOL = {np.float32: 2e-5, np.complex64: 2e-5, np.float64: 1e-12, np.complex128: 1e-12}
BIG = 3 * 2**20 + 7  # many blocks, not a multiple of any block or warp


@pytest.fixture(autouse=True)
def poisoned(monkeypatch):
    """Every result buffer a launcher allocates starts as 0xFF bytes."""
    monkeypatch.setattr(_kernels, "empty", poisoned_empty(cupy))


def dev(a):
    """A device copy of host array ``a``."""
    return cupy.asarray(np.array(a, copy=True))


def rand(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.kind in "iu":
        lo = 0 if dtype.kind == "u" else -50
        return rng.integers(lo, 50, size=shape, endpoint=True).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def hi(dtype):
    """The reference's precision for ``dtype``."""
    return np.complex128 if np.dtype(dtype).kind == "c" else np.float64


def assert_close(got, ref, dtype, scale=1.0):
    assert got.shape == ref.shape and got.dtype == np.dtype(dtype)
    assert np.all(np.isfinite(got)), "a kernel left poisoned (NaN) elements"
    tol = TOL[dtype] * scale
    np.testing.assert_allclose(got, ref.astype(dtype), rtol=tol,
                               atol=tol * max(1.0, float(np.max(np.abs(ref), initial=0.0))))


# ---- registration ---------------------------------------------------------------------


def test_register_mirrors_numpy_backend():
    """Every (op, dtype, variant) the NumPy backend registers for these families, except the
    host-BLAS-order ``blas`` variants (the generic host fallback's); ``linear``'s float16
    and bfloat16 come with the CUDA build's cuBLASLt (``register_cublaslt``)."""
    ours, theirs = KernelRegistry(), KernelRegistry()
    for mod in (cu_matvec, cu_sparse):
        mod.register(ours, "cuda")
    cu_matvec.register_cublaslt(ours, "cuda")
    for mod in (np_matvec, np_sparse):
        mod.register(theirs, "numpy")

    def strip(reg):
        return {(k.op, k.dtype, k.variant) for k in KernelRegistry.keys(reg)}

    assert strip(ours) == {k for k in strip(theirs) if k[2] != "blas"}
    assert ours.lookup("matvec", "cuda", _dtypes.float32, "warp") is cu_matvec.dense_matvec_warp
    assert ours.lookup("spmv", "cuda", _dtypes.float64, "scalar") is cu_sparse.spmv_scalar
    assert ours.lookup("spmv", "cuda", _dtypes.int16, "default") is cu_sparse.spmv


# ---- dense matvec -----------------------------------------------------------------------

VARIANTS = ["default", "scalar", "warp"]
LAUNCH = {"default": cu_matvec.dense_matvec, "scalar": cu_matvec.dense_matvec_scalar,
          "warp": cu_matvec.dense_matvec_warp}
# (33, 64), (130, 4100): rows the warp kernel reads with 16-byte loads (aligned starts);
# (257, 1031), (4097, 4097): rows it cannot; (1, 1), (5, 4097), (1000, 37): tails of
# every kind; (64, 0), (0, 3): empty
MATVEC_SHAPES = [(1, 1), (3, 5), (33, 64), (257, 1031), (1000, 37), (5, 4097), (130, 4100),
                 (4097, 4097), (64, 0), (0, 3)]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", MATVEC_SHAPES, ids=str)
def test_matvec_matches_numpy(variant, dtype, shape):
    rng = np.random.default_rng(sum(shape))
    a, x = rand(rng, shape, dtype), rand(rng, shape[1:], dtype)
    y = LAUNCH[variant](dev(a), dev(x))
    assert isinstance(y, cupy.ndarray) and y.flags.c_contiguous
    ref = np_matvec.dense_matvec(a.astype(hi(dtype)), x.astype(hi(dtype)))
    assert_close(y.get(), ref, dtype, scale=np.sqrt(max(shape[1], 1)))


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", FLOATS)
def test_matvec_strided_views(variant, dtype):
    """Transposed, offset, reversed and column-cut views are read in place."""
    rng = np.random.default_rng(3)
    a, x = rand(rng, (130, 67), dtype), rand(rng, (2 * 130,), dtype)
    a_d, x_d = dev(a), dev(x)
    launch = LAUNCH[variant]
    cases = [
        (a_d.T, x_d[::2], a.T, x[::2]),
        (a_d[1:], x_d[:67], a[1:], x[:67]),  # an offset view
        (a_d[::-1, ::-2], x_d[:34][::-1], a[::-1, ::-2], x[:34][::-1]),  # negative strides
    ]
    # rows at 16-byte-aligned starts whose length is no multiple of the vector width:
    # the warp kernel's vector loads, then its tail
    wide, x_cut = rand(rng, (70, 1032), dtype), rand(rng, (1029,), dtype)
    cases.append((dev(wide)[:, :1029], dev(x_cut), wide[:, :1029], x_cut))
    for got_a, got_x, ref_a, ref_x in cases:
        y = launch(got_a, got_x)
        ref = np_matvec.dense_matvec(ref_a.astype(hi(dtype)), ref_x.astype(hi(dtype)))
        assert_close(y.get(), ref, dtype, scale=np.sqrt(ref_a.shape[1]))


def test_matvec_repeats_bit_for_bit():
    rng = np.random.default_rng(8)
    a, x = dev(rand(rng, (300, 2000), np.float32)), dev(rand(rng, (2000,), np.float32))
    for launch in (cu_matvec.dense_matvec_scalar, cu_matvec.dense_matvec_warp):
        np.testing.assert_array_equal(launch(a, x).get(), launch(a, x).get())


@pytest.mark.parametrize("variant", ["scalar", "warp"])
def test_matvec_launch_plans_follow_layout_and_alignment(variant):
    """The launch plan kept per (shapes, strides, dtype, alignment, device): layouts that
    share a shape but not their strides or their 16-byte alignment, called in turn, each
    give their own product, the same bits on every call; clear_all() drops the plans."""
    from tessera_array.backends._common import clear_all

    rng = np.random.default_rng(11)
    big, xs = rand(rng, (65, 1032), np.float32), rand(rng, (1032,), np.float32)
    big_d, xs_d = dev(big), dev(xs)
    cases = [(big_d[:64, :1028], xs_d[:1028], big[:64, :1028], xs[:1028]),  # aligned rows
             (big_d[:64, 1:1029], xs_d[1:1029], big[:64, 1:1029], xs[1:1029]),  # offset
             (big_d[1:65, 2:1030], xs_d[:1028], big[1:65, 2:1030], xs[:1028])]
    launch = LAUNCH[variant]
    first = [launch(a, x).get() for a, x, _, _ in cases]
    assert cu_matvec._plans, "no plan was kept"
    for _ in range(2):
        for (a, x, ra, rx), want in zip(cases, first):
            np.testing.assert_array_equal(launch(a, x).get(), want)
            ref = np_matvec.dense_matvec(ra.astype(np.float64), rx.astype(np.float64))
            assert_close(want, ref, np.float32, scale=np.sqrt(ra.shape[1]))
    clear_all()
    assert not cu_matvec._plans
    np.testing.assert_array_equal(launch(*cases[1][:2]).get(), first[1])


def test_matvec_bad_input():
    rng = np.random.default_rng(4)
    a, x = dev(rand(rng, (3, 4), np.float32)), dev(rand(rng, (4,), np.float32))
    with pytest.raises(TypeError, match=r"matvec: a must be a cupy\.ndarray\. "
                       r"Received: a of type ndarray"):
        cu_matvec.dense_matvec_scalar(np.ones((3, 4), np.float32), x)
    with pytest.raises(ValueError, match=r"matvec: .*Received: a.shape=\(3, 4\), x.shape=\(3,\)"):
        cu_matvec.dense_matvec_warp(a, dev(rand(rng, (3,), np.float32)))
    with pytest.raises(TypeError, match=r"matvec: .*Received: a.dtype=float32, x.dtype=complex64"):
        cu_matvec.dense_matvec(a, dev(rand(rng, (4,), np.complex64)))
    with pytest.raises(TypeError, match=r"matvec: .*Received: a.dtype=int32"):
        cu_matvec.dense_matvec_scalar(dev(np.ones((3, 4), np.int32)), dev(np.ones(4, np.int32)))


# ---- axpy / aypx ------------------------------------------------------------------------


def _assert_update(got, ref, dtype):
    if np.dtype(dtype).kind == "f":  # rounded as NumPy rounds: bit for bit
        np.testing.assert_array_equal(got, ref, strict=True)
    else:
        assert_close(got, ref, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 3, 1000, 4097, BIG])
@pytest.mark.parametrize("subtract", [False, True])
@pytest.mark.parametrize("on_device", [False, True])
def test_axpy_matches_numpy(dtype, n, subtract, on_device):
    """y += alpha*x rounds the product, then the sum: real results equal NumPy's exactly,
    with alpha a Python scalar or a 0-d device array."""
    rng = np.random.default_rng(n)
    x, y = rand(rng, (n,), dtype), rand(rng, (n,), dtype)
    alpha = rand(rng, (), dtype)
    y_d = dev(y)
    cu_matvec.axpy(dev(alpha) if on_device else alpha.item(), dev(x), y_d, subtract)
    np_matvec.axpy(alpha if on_device else alpha.item(), x, y, subtract)
    _assert_update(y_d.get(), y, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 3, 1000, 4097, BIG])
@pytest.mark.parametrize("on_device", [False, True])
def test_aypx_matches_numpy(dtype, n, on_device):
    """y = beta*y + x rounded as NumPy's y *= beta; y += x."""
    rng = np.random.default_rng(n + 1)
    x, y = rand(rng, (n,), dtype), rand(rng, (n,), dtype)
    beta = rand(rng, (), dtype)
    y_d = dev(y)
    cu_matvec.aypx(dev(beta) if on_device else beta.item(), dev(x), y_d)
    np_matvec.aypx(beta if on_device else beta.item(), x, y)
    _assert_update(y_d.get(), y, dtype)


@pytest.mark.parametrize("dtype", FLOATS)
def test_axpy_strided_views(dtype):
    """x and y views with strides (negative too) are read and written in place; the
    elements of y outside the view keep their values."""
    rng = np.random.default_rng(7)
    x, y = rand(rng, (60,), dtype), rand(rng, (90,), dtype)
    alpha = rand(rng, (), dtype)
    for xs, ys in ((slice(None, None, 2), slice(None, None, 3)),
                   (slice(None, None, -2), slice(None, None, -3)),
                   (slice(1, 31), slice(30, 60))):
        for op in ("axpy", "axpy_sub", "aypx"):
            y_d, want = dev(y), y.copy()
            if op == "aypx":
                cu_matvec.aypx(dev(alpha), dev(x)[xs], y_d[ys])
                np_matvec.aypx(alpha, x[xs], want[ys])
            else:
                cu_matvec.axpy(alpha.item(), dev(x)[xs], y_d[ys], op == "axpy_sub")
                np_matvec.axpy(alpha.item(), x[xs], want[ys], op == "axpy_sub")
            _assert_update(y_d.get(), want, dtype)


def test_axpy_x_is_y():
    rng = np.random.default_rng(9)
    y = rand(rng, (5000,), np.float64)
    y_d = dev(y)
    cu_matvec.axpy(0.75, y_d, y_d)
    np.testing.assert_array_equal(y_d.get(), y + 0.75 * y)


def test_axpy_bad_input():
    rng = np.random.default_rng(7)
    x, y = dev(rand(rng, (20,), np.float32)), dev(rand(rng, (10,), np.float32))
    with pytest.raises(ValueError, match=r"axpy: x and y must be 1-D of one shape.*"
                       r"Received: x.shape=\(20,\), y.shape=\(10,\)"):
        cu_matvec.axpy(1.0, x, y)
    with pytest.raises(TypeError, match=r"axpy: a device alpha must be one element of y's "
                       r"dtype\. Received: alpha.dtype=int32"):
        cu_matvec.axpy(dev(np.array(1, np.int32)), x[:10], y)
    with pytest.raises(TypeError, match=r"aypx: a device beta must be one element"):
        cu_matvec.aypx(dev(np.zeros(2, np.float32)), x[:10], y)
    with pytest.raises(TypeError, match=r"axpy: y must be a cupy\.ndarray"):
        cu_matvec.axpy(1.0, x[:10], np.ones(10, np.float32))


# ---- vecdot / vecmat ---------------------------------------------------------------------


def _dot_bound(x, y, dtype):
    """A bound on the sum's rounding error: 64 units of roundoff times sum |x_i y_i| (the
    kernel's sums are at most ~30 additions deep for these sizes)."""
    eps = np.finfo(np.dtype(dtype)).eps
    return 64 * eps * float(np.sum(np.abs(x.astype(hi(dtype)) * y.astype(hi(dtype))))) + 1e-30


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 5, 256 * 8, 256 * 8 + 1, 200_003, BIG])
def test_vecdot_matches_numpy(dtype, n):
    """conj(x) . y as a 0-d device array, one block or many (a final pass)."""
    rng = np.random.default_rng(n)
    x, y = rand(rng, (n,), dtype), rand(rng, (n,), dtype)
    got = cu_matvec.vecdot(dev(x), dev(y))
    assert isinstance(got, cupy.ndarray) and got.shape == () and got.dtype == np.dtype(dtype)
    g = got.get()
    assert np.isfinite(g), "the result was not written (poisoned)"
    ref = np.vdot(x.astype(hi(dtype)), y.astype(hi(dtype)))
    assert abs(complex(g) - complex(ref)) <= _dot_bound(x, y, dtype)
    host = np_matvec.vecdot(x, y)  # the NumPy backend's (BLAS order): within the same bound
    assert abs(complex(g) - complex(host)) <= 2 * _dot_bound(x, y, dtype)
    np.testing.assert_array_equal(cu_matvec.vecdot(dev(x), dev(y)).get(), g)  # repeats


@pytest.mark.parametrize("dtype", FLOATS)
def test_vecdot_strided_and_empty(dtype):
    rng = np.random.default_rng(11)
    x, y = rand(rng, (30_000,), dtype), rand(rng, (45_000,), dtype)
    got = cu_matvec.vecdot(dev(x)[::-2], dev(y)[::3]).get()
    ref = np.vdot(x[::-2].astype(hi(dtype)), y[::3].astype(hi(dtype)))
    assert abs(complex(got) - complex(ref)) <= _dot_bound(x[::-2], y[::3], dtype)
    zero = cu_matvec.vecdot(dev(x)[:0], dev(y)[:0]).get()
    assert zero.shape == () and zero == 0


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(1, 1), (5, 3), (1000, 37), (37, 4097), (64, 0), (0, 5)],
                         ids=str)
def test_vecmat_matches_numpy(dtype, shape):
    rng = np.random.default_rng(sum(shape) + 2)
    x, a = rand(rng, shape[:1], dtype), rand(rng, shape, dtype)
    got = cu_matvec.vecmat(dev(x), dev(a)).get()
    ref = np_matvec.vecmat(x.astype(hi(dtype)), a.astype(hi(dtype)))
    assert_close(got, ref, dtype, scale=np.sqrt(max(shape[0], 1)))
    got = cu_matvec.vecmat(dev(x), dev(np.asfortranarray(a))).get()  # a column-major a
    assert_close(got, ref, dtype, scale=np.sqrt(max(shape[0], 1)))


def test_vecdot_vecmat_bad_input():
    rng = np.random.default_rng(12)
    x = dev(rand(rng, (4,), np.float32))
    with pytest.raises(ValueError, match=r"vecdot: x and y must be 1-D of one length\. "
                       r"Received: x.shape=\(4,\), y.shape=\(3,\)"):
        cu_matvec.vecdot(x, x[:3])
    with pytest.raises(TypeError, match=r"vecdot: .*Received: x.dtype=float32, "
                       r"y.dtype=float64"):
        cu_matvec.vecdot(x, dev(np.ones(4)))
    with pytest.raises(ValueError, match=r"vecmat: x must be 1-D \(k,\) and a 2-D \(k, n\)\. "
                       r"Received: x.shape=\(4,\), a.shape=\(3, 4\)"):
        cu_matvec.vecmat(x, dev(rand(rng, (3, 4), np.float32)))


# ---- spmv ---------------------------------------------------------------------------------

SPMV = {"default": cu_sparse.spmv, "scalar": cu_sparse.spmv_scalar,
        "warp": cu_sparse.spmv_warp}
INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


def _csr(rng, m, n, density, dtype, idx_dtype, ptr_dtype):
    """A random CSR matrix with an empty row, a long row, a duplicate entry and unsorted
    columns."""
    counts = rng.binomial(n, density, size=m) if n else np.zeros(m, np.int64)
    if m > 2:
        counts[m // 2] = 0  # an empty row
        counts[m // 3] = n  # a full row: longer than a warp's step
    indptr = np.concatenate([[0], np.cumsum(counts)])
    indices = np.concatenate([rng.permutation(n)[:c] for c in counts]) if m else \
        np.zeros(0, np.int64)
    if indices.size >= 2 and counts[0] >= 2:
        indices[1] = indices[0]  # a duplicate, summed
    data = rand(rng, indices.shape, dtype)
    return data, indices.astype(idx_dtype), indptr.astype(ptr_dtype)


def _spmv_exact(variant, data, indices):
    """Whether the result must equal SciPy's bit for bit: the two kernels sum each row in
    storage order (real and integer dtypes); ``default`` runs them where cuSPARSE does not."""
    kind = np.dtype(data.dtype).kind
    if kind == "c":
        return False
    if variant != "default" or kind in "iu":
        return True
    return indices.dtype != np.int32  # the scalar kernel there


INDEX_PAIRS = [(np.int32, np.int32), (np.int32, np.int64), (np.int64, np.int32),
               (np.int64, np.int64)]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("index_types", INDEX_PAIRS, ids=lambda p: f"{p[0].__name__}-"
                         f"{p[1].__name__}")
@pytest.mark.parametrize("m,n", [(1, 1), (3, 4), (1000, 999), (4097, 300), (7, 0), (0, 5)],
                         ids=str)
@pytest.mark.parametrize("k", [None, 3])
def test_spmv_matches_numpy(variant, dtype, index_types, m, n, k):
    rng = np.random.default_rng(m + n)
    data, indices, indptr = _csr(rng, m, n, 0.05 if n > 50 else 0.5, dtype, *index_types)
    x = rand(rng, (n,) if k is None else (n, k), dtype)
    buffers = dev(data), dev(indices), dev(indptr)
    y = SPMV[variant](*buffers, (m, n), dev(x))
    assert isinstance(y, cupy.ndarray) and y.flags.c_contiguous
    for got, want in zip(buffers, (data, indices, indptr)):  # duplicates summed elsewhere
        np.testing.assert_array_equal(got.get(), want, strict=True)
    ref = np_sparse.spmv(data, indices, indptr, (m, n), x)
    if _spmv_exact(variant, data, indices):
        np.testing.assert_array_equal(y.get(), ref, strict=True)
    else:
        assert_close(y.get(), ref, dtype, scale=10)


@pytest.mark.parametrize("launch", ["default", "scalar", "warp"])
@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("k", [None, 2])
def test_spmv_integers_wrap_as_numpy(launch, dtype, k):
    """Integer sums wrap modulo 2^bits, as NumPy's (registered for ``default``; the warp
    kernel takes them too)."""
    rng = np.random.default_rng(np.dtype(dtype).itemsize)
    data, indices, indptr = _csr(rng, 300, 200, 0.3, dtype, np.int64, np.int32)
    data = (data.astype(np.int64) * 97).astype(dtype)  # products and sums that overflow
    x = (rand(rng, (200,) if k is None else (200, k), dtype).astype(np.int64) * 89).astype(dtype)
    y = SPMV[launch](dev(data), dev(indices), dev(indptr), (300, 200), dev(x)).get()
    np.testing.assert_array_equal(y, np_sparse.spmv(data, indices, indptr, (300, 200), x),
                                  strict=True)


def _poisson(side, dtype):
    """The 2-D five-point Laplacian on a side x side grid (SciPy CSR, int32 indices)."""
    t = scipy.sparse.diags([-1.0, 4.0, -1.0], [-1, 0, 1], shape=(side, side))
    e = scipy.sparse.identity(side)
    a = (scipy.sparse.kron(e, t) + scipy.sparse.kron(scipy.sparse.diags(
        [-1.0, -1.0], [-1, 1], shape=(side, side)), e)).tocsr().astype(dtype)
    a.sort_indices()
    return a


@pytest.mark.parametrize("variant", ["scalar", "warp"])
@pytest.mark.parametrize("dtype", REALS)
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_spmv_poisson_bitwise_scipy(variant, dtype, index_dtype):
    """Both kernels equal SciPy's A @ x bit for bit on a Poisson matrix (the solvers'
    iterates stay SciPy's)."""
    a = _poisson(300, dtype)
    rng = np.random.default_rng(13)
    x = rand(rng, (a.shape[1],), dtype)
    y = SPMV[variant](dev(a.data), dev(a.indices.astype(index_dtype)),
                      dev(a.indptr.astype(index_dtype)), a.shape, dev(x)).get()
    np.testing.assert_array_equal(y, a @ x, strict=True)
    xk = rand(rng, (a.shape[1], 4), dtype)
    y = SPMV[variant](dev(a.data), dev(a.indices.astype(index_dtype)),
                      dev(a.indptr.astype(index_dtype)), a.shape, dev(xk)).get()
    np.testing.assert_array_equal(y, a @ xk, strict=True)


def test_csr_products_take_the_warp_kernel():
    """``A @ x`` of a float csr_array on cuda runs the warp kernel (cuSPARSE through CuPy
    costs 5-10x its time a call, its matrix rebuilt): the registered row, and the result
    SciPy's bit for bit, as the warp kernel's is."""
    import tessera_array as xp
    from tessera_array.sparse import _routing, csr_array

    assert _routing.matvec_variant("matmul", "csr", "cuda") == "warp"
    a = _poisson(64, np.float64)
    x = np.random.default_rng(5).standard_normal(a.shape[1])
    got = csr_array(a, device="cuda:0") @ xp.asarray(x, device="cuda:0")
    np.testing.assert_array_equal(np.asarray(got.to_device("cpu")), a @ x, strict=True)


def test_spmv_lanes_follow_the_row_length():
    """Lanes per row: about an eighth of the mean row length, a power of two in [2, 32],
    at most the warp."""
    assert [cu_sparse.lanes_for(m, nnz, 32) for m, nnz in
            ((3, 0), (1000, 5000), (1000, 17_000), (100_000, 6_400_000), (4096, 4096**2))] == \
        [2, 2, 4, 8, 32]
    assert cu_sparse.lanes_for(4096, 4096**2, 64) == 32
    assert cu_sparse.lanes_for(4096, 4096**2, 16) == 16


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_spmv_strided_block(variant, dtype):
    """x given as a transposed (n, k) view or with negative strides is read in place."""
    rng = np.random.default_rng(5)
    data, indices, indptr = _csr(rng, 50, 40, 0.2, dtype, np.int32, np.int32)
    xt = rand(rng, (4, 40), dtype)
    for xd, xh in ((dev(xt).T, xt.T), (dev(xt).T[::-1, ::-1], xt.T[::-1, ::-1]),
                   (dev(xt)[1, ::-1], xt[1, ::-1])):
        y = SPMV[variant](dev(data), dev(indices), dev(indptr), (50, 40), xd).get()
        ref = np_sparse.spmv(data, indices, indptr, (50, 40), np.ascontiguousarray(xh))
        assert_close(y, ref, dtype, scale=10)


@pytest.mark.parametrize("variant", ["scalar", "warp"])
def test_spmv_columns_past_the_grid_loop(variant, monkeypatch):
    """More columns than the grid's y extent: the kernels loop over the rest."""
    monkeypatch.setattr(cu_sparse, "GRID_Y_MAX", 2)
    rng = np.random.default_rng(6)
    data, indices, indptr = _csr(rng, 70, 60, 0.2, np.float64, np.int32, np.int64)
    x = rand(rng, (60, 5), np.float64)
    y = SPMV[variant](dev(data), dev(indices), dev(indptr), (70, 60), dev(x)).get()
    np.testing.assert_array_equal(y, np_sparse.spmv(data, indices, indptr, (70, 60), x))


def test_spmv_bad_input():
    rng = np.random.default_rng(6)
    data, indices, indptr = _csr(rng, 5, 6, 0.5, np.float32, np.int32, np.int32)
    d, i, p, x = dev(data), dev(indices), dev(indptr), dev(rand(rng, (6,), np.float32))
    with pytest.raises(TypeError, match=r"spmv: indices must be int32 or int64\. "
                       r"Received: indices.dtype=uint8"):
        cu_sparse.spmv_scalar(d, dev(indices.astype(np.uint8)), p, (5, 6), x)
    with pytest.raises(ValueError, match=r"spmv: x must have shape \(6,\) or \(6, k\)\. "
                       r"Received: shape=\(5, 6\), x.shape=\(5,\)"):
        cu_sparse.spmv_warp(d, i, p, (5, 6), dev(rand(rng, (5,), np.float32)))
    with pytest.raises(ValueError, match=r"spmv: .*indptr 1-D of m \+ 1"):
        cu_sparse.spmv(d, i, p, (4, 6), x)
    with pytest.raises(TypeError, match=r"spmv: .*Received: data.dtype=float32, x.dtype=int32"):
        cu_sparse.spmv_scalar(d, i, p, (5, 6), dev(np.ones(6, np.int32)))
    with pytest.raises(TypeError, match=r"spmv: x must be a cupy\.ndarray"):
        cu_sparse.spmv_scalar(d, i, p, (5, 6), np.ones(6, np.float32))
    with pytest.raises(ValueError, match=r"spmv: data must be contiguous"):
        cu_sparse.spmv_warp(dev(np.repeat(data, 2))[::2], i, p, (5, 6), x)


# ---- nn.linear's launcher: cuBLASLt with the bias in the epilogue ------------------------


@pytest.mark.parametrize("dtype", REALS)
@pytest.mark.parametrize("with_bias,with_res", [(True, True), (True, False), (False, True)])
def test_linear_takes_cublaslt_epilogue(dtype, with_bias, with_res, monkeypatch):
    """A bias vector and a full residual on aligned contiguous operands: in float32 one
    cuBLASLt call (the epilogue's bias, the residual as C), in float64 none (CuPy's gemm is
    the faster there); both against the float64 product."""
    calls = _spy_linear_lt(monkeypatch)
    rng = np.random.default_rng(41)
    x, w = rng.standard_normal((3, 37, 70)), rng.standard_normal((45, 70))
    b, r = rng.standard_normal(45), rng.standard_normal((3, 37, 45))
    ref = x @ w.T + (b if with_bias else 0) + (r if with_res else 0)
    cast = [dev(a.astype(dtype)) for a in (x, w, b, r)]
    out = cu_matvec.linear_cublaslt(cast[0], cast[1], cast[2] if with_bias else None,
                                    cast[3] if with_res else None)
    assert calls == ([True] if dtype == np.float32 else [])
    from tessera_array._dispatch import registry  # what nn.linear calls on cuda

    assert registry.lookup("linear", "cuda", _dtypes.float32) is cu_matvec.linear_cublaslt
    assert out.dtype == dtype and out.shape == ref.shape
    got = cupy.asnumpy(out).astype(np.float64)
    assert np.abs(got - ref).max() <= TOL[dtype] * np.abs(ref).max()


def test_linear_other_layouts_take_the_prefilled_gemm(monkeypatch):
    """A broadcast residual, a (n, 1)-shaped bias or a misaligned operand: no cuBLASLt call,
    the same values through the pre-filled gemm."""
    from tessera_array.backends._cupy import _cublaslt

    monkeypatch.setattr(_cublaslt, "linear_lt", lambda *a: pytest.fail("cuBLASLt called"))
    rng = np.random.default_rng(42)
    x, w = rng.standard_normal((9, 16)), rng.standard_normal((9, 16))
    buf = cupy.asarray(rng.standard_normal(9 * 9 + 1))
    misaligned = buf[1:].reshape(9, 9)
    for b, r in ((rng.standard_normal(9), rng.standard_normal((1, 9))),
                 (rng.standard_normal((9, 1)), None),
                 (rng.standard_normal(9), misaligned)):
        rd = r if isinstance(r, cupy.ndarray) else None if r is None else dev(r)
        out = cu_matvec.linear_cublaslt(dev(x), dev(w), dev(b), rd)
        ref = x @ w.T + b + (0 if r is None else cupy.asnumpy(rd))
        np.testing.assert_allclose(cupy.asnumpy(out), ref, rtol=1e-12, atol=1e-12)


def test_cublaslt_enums_match_the_headers():
    """The enum values _cublaslt passes, against the toolkit's headers where they are
    installed (the device machine's CUDA toolkit); the library CuPy loaded is found."""
    import os
    import re

    from tessera_array.backends._cupy import _cublaslt

    assert _cublaslt.library_path() is not None
    folder = os.path.join(os.environ.get("CUDA_PATH", "/usr/local/cuda"), "include")
    text = ""
    for name in ("cublasLt.h", "cublas_api.h", "library_types.h"):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            with open(path) as f:
                text += f.read()
    if "cublasLtMatmul" not in text:
        pytest.skip(f"no cuBLASLt headers under {folder}")
    for name, value in _cublaslt.ENUMS.items():
        m = re.search(rf"\b{name}\s*=\s*(\d+)", text)
        assert m is not None and int(m.group(1)) == value, (name, value, m and m.group(0))


# ---- nn.linear in float16 and bfloat16: cuBLASLt on 16-bit operands, float32 accumulation ----

# max |error| / max |reference| against the float64 product of the rounded operands: one
# rounding of the result (half an ulp) over a float32 accumulation
RTOL16 = {"float16": 2.0**-10, "bfloat16": 2.0**-7}
HALF_NAMES = ["float16", "bfloat16"]


def _spy_linear_lt(monkeypatch) -> list:
    """What each call of ``_cublaslt.linear_lt`` returned (True: one cuBLASLt call ran),
    the calls going through."""
    from tessera_array.backends._cupy import _cublaslt

    calls = []
    real = _cublaslt.linear_lt

    def spy(*args):
        calls.append(real(*args))
        return calls[-1]

    monkeypatch.setattr(_cublaslt, "linear_lt", spy)
    return calls


def _half_np(name):
    import ml_dtypes

    return np.dtype(np.float16) if name == "float16" else np.dtype(ml_dtypes.bfloat16)


def _held_half(name):
    dt = getattr(_dtypes, name)
    if dt not in BACKEND.dtypes(BACKEND.devices()[0]):
        pytest.skip(f"cuda: {BACKEND.missing_capability(BACKEND.devices()[0], dt)}")
    return dt


def _rounded(rng, shape, name):
    """Random host data rounded to the 16-bit dtype: (its device copy, its float64 values)."""
    h = rng.standard_normal(shape).astype(np.float32).astype(_half_np(name))
    return dev(h), h.astype(np.float64)


def _rel16(out, ref, name):
    got = cupy.asnumpy(out)
    assert got.dtype == _half_np(name) and got.shape == ref.shape
    got = got.astype(np.float64)
    assert np.all(np.isfinite(got)), "an element left poisoned (NaN)"
    return float(np.abs(got - ref).max() / np.abs(ref).max())


@pytest.mark.parametrize("name", HALF_NAMES)
@pytest.mark.parametrize("with_bias,with_res", [(True, True), (True, False), (False, True),
                                                (False, False)])
def test_linear_half_takes_cublaslt(name, with_bias, with_res, monkeypatch):
    """16-bit operands, a bias vector and a full residual (or neither): one cuBLASLt call
    (A/B/C/D 16-bit, float32 compute, the bias in the epilogue, the residual as C with
    beta = 1) into the poisoned output, within the dtype's tolerance of float64."""
    from tessera_array._dispatch import registry

    dt = _held_half(name)
    assert registry.lookup("linear", "cuda", dt) is cu_matvec.linear_cublaslt
    calls = _spy_linear_lt(monkeypatch)
    rng = np.random.default_rng(43)
    (x, x64), (w, w64) = _rounded(rng, (3, 37, 72), name), _rounded(rng, (48, 72), name)
    (b, b64), (r, r64) = _rounded(rng, (48,), name), _rounded(rng, (3, 37, 48), name)
    ref = x64 @ w64.T + (b64 if with_bias else 0) + (r64 if with_res else 0)
    out = cu_matvec.linear_cublaslt(x, w, b if with_bias else None, r if with_res else None)
    assert calls == [True]
    assert out.dtype == _half_np(name) and out.flags.c_contiguous
    assert _rel16(out, ref, name) <= RTOL16[name]


@pytest.mark.parametrize("name", HALF_NAMES)
def test_linear_half_other_layouts_compute_in_float32(name, monkeypatch):
    """A broadcast residual, an (n, 1)-shaped bias, a misaligned residual, or the
    launcher without cuBLASLt: no cuBLASLt call; float32 copies through the pre-filled
    gemm, the result rounded once, within the dtype's tolerance."""
    from tessera_array.backends._cupy import _cublaslt

    _held_half(name)
    monkeypatch.setattr(_cublaslt, "linear_lt", lambda *a: pytest.fail("cuBLASLt called"))
    rng = np.random.default_rng(44)
    (x, x64), (w, w64) = _rounded(rng, (9, 16), name), _rounded(rng, (9, 16), name)
    (b, b64), (r1, r164) = _rounded(rng, (9,), name), _rounded(rng, (1, 9), name)
    (bc, bc64) = _rounded(rng, (9, 1), name)
    buf, buf64 = _rounded(rng, (9 * 9 + 1,), name)
    misaligned, mis64 = buf[1:].reshape(9, 9), buf64[1:].reshape(9, 9)
    cases = [((b, r1), b64 + r164), ((bc, None), bc64), ((b, misaligned), b64 + mis64)]
    for (bb, rr), extra in cases:
        out = cu_matvec.linear_cublaslt(x, w, bb, rr)
        assert _rel16(out, x64 @ w64.T + extra, name) <= RTOL16[name]
    out = cu_matvec.linear(x, w, b, r1)  # (the registration without cuBLASLt)
    assert _rel16(out, x64 @ w64.T + b64 + r164, name) <= RTOL16[name]


def test_linear_cublaslt_plans_keep_dtypes_apart():
    """One layout in float32, bfloat16 and float16 in turn: each its own cuBLASLt plan
    (descriptors of its types), each result right for its dtype."""
    rng = np.random.default_rng(45)
    x64, w64 = rng.standard_normal((64, 96)), rng.standard_normal((80, 96))
    b64, r64 = rng.standard_normal(80), rng.standard_normal((64, 80))
    for name in ("float32", "bfloat16", "float16", "float32"):
        if name == "float32":
            cast = [dev(a.astype(np.float32)) for a in (x64, w64, b64, r64)]
            out = cu_matvec.linear_cublaslt(*cast)
            got = cupy.asnumpy(out).astype(np.float64)
            ref = x64 @ w64.T + b64 + r64
            assert np.abs(got - ref).max() <= TOL[np.float32] * np.abs(ref).max()
            continue
        if getattr(_dtypes, name) not in BACKEND.dtypes(BACKEND.devices()[0]):
            continue
        hs = [a.astype(np.float32).astype(_half_np(name)) for a in (x64, w64, b64, r64)]
        out = cu_matvec.linear_cublaslt(*(dev(h) for h in hs))
        x, w, b, r = (h.astype(np.float64) for h in hs)
        assert _rel16(out, x @ w.T + b + r, name) <= RTOL16[name]


@pytest.mark.parametrize("name", HALF_NAMES)
def test_nn_linear_half_on_cuda(name):
    """Through the namespace on cuda:0: nn.linear (1024 x 512 x 768, bias and residual)
    and nn.linear_backward against the float64 results of the rounded operands, and
    nn.linear_reference (float32 math, one rounding) on the same device."""
    import tessera_array as xp
    from tessera_array import nn

    dt = _held_half(name)
    dev0 = BACKEND.devices()[0]
    rng = np.random.default_rng(46)
    hs = [rng.standard_normal(s).astype(np.float32).astype(_half_np(name))
          for s in ((1024, 512), (768, 512), (768,), (1024, 768), (1024, 768))]
    x64, w64, b64, r64, g64 = (h.astype(np.float64) for h in hs)
    X, W, B, R, G = (xp.asarray(h, device=dev0) for h in hs)
    assert X.dtype is dt and X.device == dev0
    out = nn.linear(X, W, B, R)
    assert out.dtype is dt and out.device == dev0
    ref = x64 @ w64.T + b64 + r64
    assert _rel16(out._data, ref, name) <= RTOL16[name]
    again = nn.linear_reference(X, W, B, R)
    assert _rel16(again._data, ref, name) <= RTOL16[name]
    grads = nn.linear_backward(X, W, G, bias=B, residual=R)
    for got, want in zip(grads, (g64 @ w64, g64.T @ x64, g64.sum(0), g64)):
        assert got.dtype is dt and got.device == dev0
        assert _rel16(got._data, want, name) <= RTOL16[name]


@pytest.mark.parametrize("name", ["float32", "bfloat16"])
def test_linear_kept_call_equals_the_general_path(name, monkeypatch):
    """A signature's second call takes the kept cuBLASLt call (no ``linear_lt``): the same
    matmul, so the same bits as the first call's, each into a poisoned output, with and
    without bias and residual; a misaligned residual of a kept signature takes the
    general path, within the dtype's tolerance of the aligned result."""
    from tessera_array.backends._cupy import _cublaslt

    if name != "float32":
        _held_half(name)
    npdt = np.dtype(np.float32) if name == "float32" else _half_np(name)
    calls = _spy_linear_lt(monkeypatch)
    rng = np.random.default_rng(47)
    x, w, b, r = (dev(rng.standard_normal(s).astype(np.float32).astype(npdt))
                  for s in ((2, 33, 64), (40, 64), (40,), (2, 33, 40)))
    firsts = []
    for bb, rr in ((b, r), (None, r), (b, None)):
        calls.clear()
        first = cupy.asnumpy(cu_matvec.linear_cublaslt(x, w, bb, rr))
        firsts.append(first)
        second = cupy.asnumpy(cu_matvec.linear_cublaslt(x, w, bb, rr))
        assert calls == [True], "the second call should be the kept one"
        assert np.all(np.isfinite(second.astype(np.float64)))
        assert np.array_equal(first.view(np.uint8), second.view(np.uint8))
    mis = dev(np.zeros(r.size + 1, npdt))[1:].reshape(r.shape)
    mis[...] = r
    assert _cublaslt.linear_kept(x, w, b, mis) is None
    calls.clear()
    got = cupy.asnumpy(cu_matvec.linear_cublaslt(x, w, b, mis)).astype(np.float64)
    assert calls == []
    want = firsts[0].astype(np.float64)  # (bias and the aligned residual)
    rtol = RTOL16.get(name, TOL[np.float32])
    assert np.abs(got - want).max() <= 2 * rtol * np.abs(want).max()
