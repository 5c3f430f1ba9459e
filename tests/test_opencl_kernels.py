"""The OpenCL kernel launchers (matvec, spmv, optimizer steps) against the NumPy backend's.

Buffers are made directly with PyOpenCL on platform 0, device 0 (or the device
``PYOPENCL_CTX`` names), never by an interactive prompt. Every buffer comes from a
poisoning allocator: fresh memory is filled with 0xFF bytes (NaN for floats, -1 for
integers), so an output element a kernel forgets to write cannot pass. Each result
is compared element by element with the NumPy backend's launcher on the same inputs.

Without PyOpenCL or an OpenCL device the module is skipped with the reason; with
``TESSERA_REQUIRE_BACKENDS`` naming ``opencl`` that skip is a failure instead.
``TESSERA_TEST_BACKENDS`` without ``opencl`` skips it too. The ``geometry`` fixture
runs the launchers with a CPU device's and with a GPU's launch geometry whatever the
device, so PoCL in CI exercises both code paths.
"""

from __future__ import annotations

import _opencl_gate
import numpy as np
import pytest
from tessera_array.backends.numpy import fft as np_fft
from tessera_array.backends.numpy import matvec as np_matvec
from tessera_array.backends.numpy import optim as np_optim
from tessera_array.backends.numpy import sparse as np_sparse

from tessera_array import _dtypes
from tessera_array._dispatch import KernelRegistry
from tessera_array._errors import KernelCompileError, MissingCapabilityError
from tessera_array.optim.adafactor import adafactor_decay
from tessera_array.sparse._routing import MATVEC_ROUTING

cl, cla, CTX = _opencl_gate.opencl_context()

from tessera_array.backends._common import Memo
from tessera_array.backends.opencl import _programs
from tessera_array.backends.opencl import dot as cl_dot
from tessera_array.backends.opencl import fft as cl_fft
from tessera_array.backends.opencl import matvec as cl_matvec
from tessera_array.backends.opencl import optim as cl_optim
from tessera_array.backends.opencl import sparse as cl_sparse

DEVICE = CTX.devices[0]
QUEUE = cl.CommandQueue(CTX)
FP64 = "cl_khr_fp64" in DEVICE.extensions.split()
EXACT_DIV_SQRT = bool(DEVICE.single_fp_config
                      & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT)
needs_fp64 = pytest.mark.skipif(not FP64, reason=f"{DEVICE.name.strip()} lacks cl_khr_fp64")

FLOATS = [np.float32, np.complex64,
          pytest.param(np.float64, marks=needs_fp64),
          pytest.param(np.complex128, marks=needs_fp64)]
TOL = {np.float32: 2e-5, np.complex64: 2e-5, np.float64: 1e-12, np.complex128: 1e-12}


class PoisonAllocator:
    """Fresh buffers filled with 0xFF bytes: NaN for floats, -1 for integers."""

    def __init__(self, ctx, queue):
        self.ctx, self.queue = ctx, queue

    def __call__(self, nbytes):
        buf = cl.Buffer(self.ctx, cl.mem_flags.READ_WRITE, nbytes)
        cl.enqueue_fill_buffer(self.queue, buf, np.uint8(0xFF), 0, nbytes)
        return buf


POISON = PoisonAllocator(CTX, QUEUE)


def dev(a):
    """A device copy of host array ``a`` (any shape, 0-d included) on the poisoned allocator."""
    a = np.array(a, copy=True)
    out = cla.empty(QUEUE, a.shape, a.dtype, allocator=POISON)
    if a.size:
        out.set(a)
    return out


def rand(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.kind in "iu":
        lo = 0 if dtype.kind == "u" else -50
        return rng.integers(lo, 50, size=shape, endpoint=True).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def assert_close(got, ref, dtype, scale=1.0):
    assert got.shape == ref.shape and got.dtype == ref.dtype
    assert np.all(np.isfinite(got)), "a kernel left poisoned (NaN) elements"
    tol = TOL[dtype] * scale
    np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * max(1.0, np.max(np.abs(ref),
                                                                            initial=0.0)))


@pytest.fixture(params=["cpu", "gpu"])
def geometry(request, monkeypatch):
    """Run with the launch geometry of a CPU device (contiguous chunks per work-item) or
    of a GPU (one element or row per work-item), whatever the device: both paths are
    tested on PoCL in CI."""
    monkeypatch.setattr(_programs, "is_cpu", lambda device: request.param == "cpu")
    _fresh_plans(monkeypatch)
    return request.param


def _fresh_plans(monkeypatch):
    """Empty (unregistered) plan caches for the launcher modules during one test."""
    for mod in (cl_matvec, cl_sparse, cl_optim):
        monkeypatch.setattr(mod, "_setup", Memo(f"opencl.test.{mod.__name__}",
                                                mod._setup.limit))


# ---- programs: cache, errors, capabilities ----------------------------------------


def test_program_cached_per_context_file_options():
    opts = _programs.dtype_options("test", np.float32, DEVICE, extra=("-DWG=8",))
    assert "-DT=float" in opts and "-DACC=float" in opts
    first = _programs.program(CTX, "matvec.cl", opts)
    built = _programs.build_count()
    assert _programs.program(CTX, "matvec.cl", opts) is first
    assert _programs.kernel(CTX, "matvec.cl", opts, "tessera_matvec_scalar") is \
        _programs.kernel(CTX, "matvec.cl", opts, "tessera_matvec_scalar")
    assert _programs.build_count() == built  # the second call compiled nothing
    other = _programs.program(CTX, "matvec.cl", opts[:-1] + ("-DWG=4",))
    assert other is not first and _programs.build_count() == built + 1


def test_launch_twice_compiles_once():
    rng = np.random.default_rng(1)
    a, x = dev(rand(rng, (5, 7), np.float32)), dev(rand(rng, (7,), np.float32))
    cl_matvec.dense_matvec_scalar(a, x)
    built = _programs.build_count()
    cl_matvec.dense_matvec_scalar(a, x)
    cl_matvec.dense_matvec_scalar(a, x)
    assert _programs.build_count() == built


def test_compile_error_carries_log_and_source():
    opts = ("-DT=not_a_type", "-DRT=float", "-DACC=float", "-DWG=1")
    with pytest.raises(KernelCompileError, match=r"building kernels/opencl/matvec\.cl failed") \
            as info:
        _programs.program(CTX, "matvec.cl", opts)
    assert info.value.backend == "opencl" and info.value.options == opts
    assert "not_a_type" in info.value.log
    assert "tessera_matvec_scalar" in info.value.source
    assert "   1 | " in str(info.value)  # the numbered source dump


def test_probe_options_leave_out_what_fails_to_build(monkeypatch):
    monkeypatch.setattr(_programs, "_PROBES", {
        "TESSERA_PROBE_OK": "__kernel void k(__global float *x) { x[0] = 1.0f; }",
        "TESSERA_PROBE_BAD": "__kernel void k(__global float *x) { not_a_function(x); }",
    })
    monkeypatch.setattr(_programs, "_probed", {})
    assert _programs.probe_options(CTX) == ("-DTESSERA_PROBE_OK",)


def test_dtype_options_unknown_dtype():
    with pytest.raises(TypeError, match=r"matvec: no OpenCL kernel type.*dtype=bool"):
        _programs.dtype_options("matvec", np.bool_, DEVICE)


class _NoFp64Device:
    name = "Fake OpenCL device "
    extensions = "cl_khr_byte_addressable_store"
    single_fp_config = 0


def test_fp64_needs_cl_khr_fp64():
    for dt in (np.float64, np.complex128):
        with pytest.raises(MissingCapabilityError, match=r"matvec: .*lacks cl_khr_fp64.*"
                           r"Received: dtype=(float64|complex128)"):
            _programs.dtype_options("matvec", dt, _NoFp64Device())
    _programs.dtype_options("matvec", np.float32, _NoFp64Device())  # float32 still fine


@needs_fp64
@pytest.mark.parametrize("call", ["matvec", "spmv", "adam_step"])
def test_launchers_refuse_float64_without_fp64(monkeypatch, call):
    """A device lacking cl_khr_fp64 (monkeypatched) gets a clear error, never a downcast."""
    monkeypatch.setattr(_programs, "_fp64", lambda device: False)
    _fresh_plans(monkeypatch)
    rng = np.random.default_rng(2)
    x = dev(rand(rng, (4,), np.float64))
    with pytest.raises(MissingCapabilityError, match=rf"{call}: .*lacks cl_khr_fp64"):
        if call == "matvec":
            cl_matvec.dense_matvec_warp(dev(rand(rng, (3, 4), np.float64)), x)
        elif call == "spmv":
            cl_sparse.spmv_scalar(dev(np.ones(2)), dev(np.array([0, 3], np.int32)),
                                  dev(np.array([0, 1, 2], np.int32)), (2, 4), x)
        else:
            cl_optim.adam_step([x], [x], [dev(np.zeros(4))], [dev(np.zeros(4))], None, lr=0.1,
                               beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.0,
                               amsgrad=False, maximize=False, step=1)


# ---- registration -----------------------------------------------------------------


def test_register_mirrors_numpy_backend():
    ours, theirs = KernelRegistry(), KernelRegistry()
    for mod in (cl_matvec, cl_dot, cl_sparse, cl_optim, cl_fft):
        mod.register(ours, "opencl")
    for mod in (np_matvec, np_sparse, np_optim, np_fft):
        mod.register(theirs, "numpy")

    def strip(reg):
        return {(k.op, k.dtype, k.variant) for k in KernelRegistry.keys(reg)}

    # the NumPy backend's 16-bit linear has no OpenCL counterpart (no 16-bit arrays there)
    half = {k for k in strip(theirs) if k[1] in _dtypes.HALF_FLOATING}
    assert half == {("linear", dt, "default") for dt in _dtypes.HALF_FLOATING}
    assert strip(ours) == strip(theirs) - half
    # every solver's routed variant resolves, dense and sparse
    # (``default``, the ``matmul`` row's, is the kernel DEFAULT_IS names)
    for variant in {v for row in MATVEC_ROUTING.values() for v in row.values()}:
        dense = cl_matvec.DEFAULT_IS if variant == "default" else variant
        sparse = cl_sparse.DEFAULT_IS if variant == "default" else variant
        assert ours.lookup("matvec", "opencl", _dtypes.float32, variant) is \
            getattr(cl_matvec, f"dense_matvec_{dense}")
        assert ours.lookup("spmv", "opencl", _dtypes.float32, variant) is \
            getattr(cl_sparse, f"spmv_{sparse}")


# ---- dense matvec -----------------------------------------------------------------

# (6, 8), (9, 15), (257, 1031): the CPU kernel's 4-row groups and 8-wide vector loads
# with every kind of tail (rows mod 4, columns mod 8 and 16)
MATVEC_SHAPES = [(1, 1), (3, 5), (6, 8), (9, 15), (257, 1031), (1000, 37), (4097, 33),
                 (5, 4097), (64, 0), (0, 3)]


@pytest.mark.parametrize("variant", ["scalar", "warp"])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", MATVEC_SHAPES, ids=str)
def test_matvec_matches_numpy(variant, dtype, shape, geometry):
    rng = np.random.default_rng(sum(shape))
    a, x = rand(rng, shape, dtype), rand(rng, shape[1:], dtype)
    launch = getattr(cl_matvec, f"dense_matvec_{variant}")
    y = launch(dev(a), dev(x)).get()
    hi = np.complex128 if np.dtype(dtype).kind == "c" else np.float64  # the reference's precision
    ref = np_matvec.dense_matvec(a.astype(hi), x.astype(hi))
    assert_close(y, ref.astype(dtype), dtype, scale=np.sqrt(max(shape[1], 1)))


@pytest.mark.parametrize("variant", ["scalar", "warp"])
@pytest.mark.parametrize("dtype", [np.float32, pytest.param(np.complex128, marks=needs_fp64)])
def test_matvec_strided_views(variant, dtype, geometry):
    """A transposed matrix and a strided vector are read in place, with their strides."""
    rng = np.random.default_rng(3)
    a, x = rand(rng, (130, 67), dtype), rand(rng, (2 * 130,), dtype)
    a_d, x_d = dev(a), dev(x)
    launch = getattr(cl_matvec, f"dense_matvec_{variant}")
    y = launch(a_d.T, x_d[::2]).get()
    assert_close(y, np_matvec.dense_matvec(a.T, x[::2]), dtype, scale=10)
    y = launch(a_d[1:], x_d[:67]).get()  # a view at an offset
    assert_close(y, np_matvec.dense_matvec(a[1:], x[:67]), dtype, scale=10)


def test_matvec_bad_input():
    rng = np.random.default_rng(4)
    a, x = dev(rand(rng, (3, 4), np.float32)), dev(rand(rng, (4,), np.float32))
    with pytest.raises(TypeError, match=r"matvec: a must be a pyopencl\.array\.Array.*"
                       r"Received: a of type ndarray"):
        cl_matvec.dense_matvec_scalar(np.ones((3, 4), np.float32), x)
    with pytest.raises(ValueError, match=r"matvec: .*Received: a.shape=\(3, 4\), x.shape=\(3,\)"):
        cl_matvec.dense_matvec_warp(a, dev(rand(rng, (3,), np.float32)))
    with pytest.raises(TypeError, match=r"matvec: .*Received: a.dtype=float32, x.dtype=complex64"):
        cl_matvec.dense_matvec_scalar(a, dev(rand(rng, (4,), np.complex64)))
    with pytest.raises(TypeError, match=r"matvec: .*Received: a.dtype=int32"):
        cl_matvec.dense_matvec_scalar(dev(np.ones((3, 4), np.int32)), dev(np.ones(4, np.int32)))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("n", [1, 3, 1000, 4097])
@pytest.mark.parametrize("subtract", [False, True])
@pytest.mark.parametrize("on_device", [False, True])
def test_axpy_matches_numpy(dtype, n, subtract, on_device):
    """y += alpha*x rounds the product, then the sum: real results equal NumPy's exactly."""
    rng = np.random.default_rng(n)
    x, y = rand(rng, (n,), dtype), rand(rng, (n,), dtype)
    alpha = rand(rng, (), dtype)
    x_d, y_d = dev(x), dev(y)
    cl_matvec.axpy(dev(alpha) if on_device else alpha.item(), x_d, y_d, subtract)
    np_matvec.axpy(alpha if on_device else alpha.item(), x, y, subtract)
    if np.dtype(dtype).kind == "f":
        np.testing.assert_array_equal(y_d.get(), y, strict=True)
    else:
        assert_close(y_d.get(), y, dtype)


def test_axpy_strided_and_bad_input():
    rng = np.random.default_rng(7)
    x, y = rand(rng, (20,), np.float32), rand(rng, (10,), np.float32)
    y_d = dev(y)
    cl_matvec.axpy(0.5, dev(x)[::2], y_d)
    np.testing.assert_array_equal(y_d.get(), y + np.float32(0.5) * x[::2])
    with pytest.raises(ValueError, match=r"axpy: x and y must be 1-D of one shape.*"
                       r"Received: x.shape=\(20,\), y.shape=\(10,\)"):
        cl_matvec.axpy(1.0, dev(x), y_d)
    with pytest.raises(TypeError, match=r"axpy: a device alpha must be one element of y's "
                       r"dtype\. Received: alpha.dtype=int32"):
        cl_matvec.axpy(dev(np.array(1, np.int32)), dev(x[:10]), y_d)


# ---- CSR spmv ---------------------------------------------------------------------


def _csr(rng, m, n, density, dtype, idx_dtype, ptr_dtype):
    """A random CSR matrix with some empty rows and a duplicate entry, unsorted columns."""
    counts = rng.binomial(n, density, size=m) if n else np.zeros(m, np.int64)
    if m > 2:
        counts[m // 2] = 0  # an empty row
    indptr = np.concatenate([[0], np.cumsum(counts)])
    indices = np.concatenate([rng.permutation(n)[:c] for c in counts]) if m else \
        np.zeros(0, np.int64)
    if indices.size >= 2 and counts[0] >= 2:
        indices[1] = indices[0]  # a duplicate, summed
    data = rand(rng, indices.shape, dtype)
    return data, indices.astype(idx_dtype), indptr.astype(ptr_dtype)


# Integer spmv is registered for the default (scalar) kernel only, as on the NumPy backend.
SPMV_CASES = [
    pytest.param(v, d, marks=needs_fp64 if d in (np.float64, np.complex128) else (),
                 id=f"{v}-{np.dtype(d).name}")
    for v in ("scalar", "warp") for d in (np.float32, np.complex64, np.float64, np.complex128)
] + [pytest.param("scalar", d, id=f"scalar-{np.dtype(d).name}")
     for d in (np.int8, np.uint16, np.int32, np.int64, np.uint64)]


@pytest.mark.parametrize("variant,dtype", SPMV_CASES)
@pytest.mark.parametrize("m,n", [(1, 1), (3, 4), (1000, 999), (4097, 300), (7, 0)], ids=str)
@pytest.mark.parametrize("k", [None, 3])
def test_spmv_matches_numpy(variant, dtype, m, n, k, geometry):
    rng = np.random.default_rng(m + n)
    idx_dt, ptr_dt = (np.int32, np.int64) if m % 2 else (np.int64, np.int32)
    data, indices, indptr = _csr(rng, m, n, 0.05 if n > 50 else 0.5, dtype, idx_dt, ptr_dt)
    x = rand(rng, (n,) if k is None else (n, k), dtype)
    launch = getattr(cl_sparse, f"spmv_{variant}")
    y = launch(dev(data), dev(indices), dev(indptr), (m, n), dev(x)).get()
    ref = np_sparse.spmv(data, indices, indptr, (m, n), x)
    if np.dtype(dtype).kind in "iuf":
        # Integers wrap as NumPy's; both kernels sum each row in SciPy's order: bit for bit.
        np.testing.assert_array_equal(y, ref, strict=True)
    else:
        assert_close(y, ref, dtype, scale=10)


def test_spmv_vector_lanes_follow_the_row_length():
    """Lanes per row: about an eighth of the mean row length, a power of two in [2, 32]."""
    assert [cl_sparse.lanes_for(m, nnz) for m, nnz in
            ((3, 0), (1000, 5000), (1000, 17_000), (100_000, 6_400_000), (4096, 4096**2))] == \
        [2, 2, 4, 8, 32]


@pytest.mark.parametrize("variant", ["scalar", "warp"])
def test_spmv_strided_block(variant):
    """x given as a transposed (n, k) view is read with its strides."""
    rng = np.random.default_rng(5)
    data, indices, indptr = _csr(rng, 50, 40, 0.2, np.float32, np.int32, np.int32)
    xt = rand(rng, (4, 40), np.float32)
    launch = getattr(cl_sparse, f"spmv_{variant}")
    y = launch(dev(data), dev(indices), dev(indptr), (50, 40), dev(xt).T).get()
    assert_close(y, np_sparse.spmv(data, indices, indptr, (50, 40), xt.T), np.float32, 10)


def test_spmv_bad_input():
    rng = np.random.default_rng(6)
    data, indices, indptr = _csr(rng, 5, 6, 0.5, np.float32, np.int32, np.int32)
    d, i, p, x = dev(data), dev(indices), dev(indptr), dev(rand(rng, (6,), np.float32))
    with pytest.raises(TypeError, match=r"spmv: indices must be int32 or int64\. "
                       r"Received: indices.dtype=uint8"):
        cl_sparse.spmv_scalar(d, dev(indices.astype(np.uint8)), p, (5, 6), x)
    with pytest.raises(ValueError, match=r"spmv: x must have shape \(6,\) or \(6, k\)\. "
                       r"Received: shape=\(5, 6\), x.shape=\(5,\)"):
        cl_sparse.spmv_warp(d, i, p, (5, 6), dev(rand(rng, (5,), np.float32)))
    with pytest.raises(ValueError, match=r"spmv: .*indptr 1-D of m \+ 1"):
        cl_sparse.spmv_scalar(d, i, p, (4, 6), x)
    with pytest.raises(TypeError, match=r"spmv: .*Received: data.dtype=float32, x.dtype=int32"):
        cl_sparse.spmv_scalar(d, i, p, (5, 6), dev(np.ones(6, np.int32)))
    with pytest.raises(TypeError, match=r"spmv: x must be a pyopencl\.array\.Array"):
        cl_sparse.spmv_scalar(d, i, p, (5, 6), np.ones(6, np.float32))


# ---- optimizer steps ------------------------------------------------------------------

SHAPES = [(), (1,), (7,), (3, 5), (2, 3, 4), (1000,), (33, 65), (4097,)]
OPT_DTYPES = [np.float32, pytest.param(np.float64, marks=needs_fp64)]


def _params(rng, dtype):
    return [rand(rng, s, dtype) for s in SHAPES]


def _assert_trajectory(got, ref, dtype, exact):
    for g, r in zip(got, ref):
        g = g.get()
        assert g.shape == r.shape
        if exact:
            np.testing.assert_array_equal(g, r, strict=True)
        else:
            np.testing.assert_allclose(g, r, rtol=1e-5 if dtype == np.float32 else 1e-12,
                                       atol=1e-6 if dtype == np.float32 else 1e-13)


SGD_CONFIGS = [
    {"momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01, "nesterov": True, "maximize": False},
    {"momentum": 0.9, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False, "maximize": True},
    {"momentum": 0.0, "dampening": 0.0, "weight_decay": 0.05, "nesterov": False, "maximize": False},
]


@pytest.mark.parametrize("dtype", OPT_DTYPES)
@pytest.mark.parametrize("config", range(len(SGD_CONFIGS)))
def test_sgd_trajectory(dtype, config, geometry):
    """100 steps equal the NumPy launcher's (bit for bit with correctly rounded arithmetic)."""
    kw = SGD_CONFIGS[config]
    rng = np.random.default_rng(10 + config)
    pn = _params(rng, dtype)
    bn = [rand(rng, s, dtype) for s in SHAPES]  # poisoned-looking: overwritten on step 1
    pd, bd = [dev(a) for a in pn], [dev(a) for a in bn]
    for t in range(1, 101):
        grads = [rand(rng, s, dtype) for s in SHAPES]
        assert np_optim.sgd_step(pn, grads, bn, lr=0.01, first=t == 1, **kw) == ()
        assert cl_optim.sgd_step(pd, [dev(g) for g in grads], bd, lr=0.01, first=t == 1,
                                 **kw) == ()
    _assert_trajectory(pd, pn, dtype, exact=EXACT_DIV_SQRT)
    if kw["momentum"]:
        _assert_trajectory(bd, bn, dtype, exact=EXACT_DIV_SQRT)


ADAM_CONFIGS = [
    {"weight_decay": 0.01, "amsgrad": False, "maximize": False},
    {"weight_decay": 0.0, "amsgrad": True, "maximize": True},
    {"weight_decay": 0.1, "amsgrad": True, "maximize": False},
]


@pytest.mark.parametrize("dtype", OPT_DTYPES)
@pytest.mark.parametrize("op", ["adam_step", "adamw_step"])
@pytest.mark.parametrize("config", range(len(ADAM_CONFIGS)))
def test_adam_trajectory(dtype, op, config, geometry):
    kw = dict(ADAM_CONFIGS[config], lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8)
    rng = np.random.default_rng(20 + config)
    pn = _params(rng, dtype)
    sn = [[np.zeros(s, dtype) for s in SHAPES] for _ in range(3)]
    pd, sd = [dev(a) for a in pn], [[dev(a) for a in st] for st in sn]
    if not kw["amsgrad"]:
        sn[2] = sd[2] = None
    for t in range(1, 101):
        grads = [rand(rng, s, dtype) for s in SHAPES]
        getattr(np_optim, op)(pn, grads, *sn, step=t, **kw)
        getattr(cl_optim, op)(pd, [dev(g) for g in grads], *sd, step=t, **kw)
    _assert_trajectory(pd, pn, dtype, exact=EXACT_DIV_SQRT)
    for got, ref in zip(sd, sn):
        if ref is not None:
            _assert_trajectory(got, ref, dtype, exact=EXACT_DIV_SQRT)


def _adafactor_state(shape, dtype):
    if len(shape) < 2:
        return None, None, np.zeros(shape, dtype)
    return np.zeros(shape[:-1] + (1,), dtype), np.zeros(shape[:-2] + (1, shape[-1]), dtype), None


@pytest.mark.parametrize("dtype", OPT_DTYPES)
@pytest.mark.parametrize("weight_decay,maximize,eps1", [(0.0, False, None), (0.01, True, 1e-30)])
def test_adafactor_trajectory(dtype, weight_decay, maximize, eps1, geometry):
    """100 steps within dtype tolerance (its sums run in another order than NumPy's)."""
    rng = np.random.default_rng(30)
    shapes = SHAPES + [(3, 1, 17), (64, 1)]
    pn = [rand(rng, s, dtype) for s in shapes]
    state = [_adafactor_state(s, dtype) for s in shapes]
    rn, cn, vn = ([st[j] for st in state] for j in range(3))
    pd = [dev(a) for a in pn]
    rd, cd, vd = ([None if a is None else dev(a) for a in lst] for lst in (rn, cn, vn))
    for t in range(1, 101):
        grads = [rand(rng, s, dtype) for s in shapes]
        kw = {"lr": 0.01, "rho": min(0.01, 1 / np.sqrt(t)), "rate": 1 - adafactor_decay(0.999, t),
              "eps1": eps1, "eps2": 1e-3, "d": 1.0, "weight_decay": weight_decay,
              "maximize": maximize}
        np_optim.adafactor_step(pn, grads, rn, cn, vn, **kw)
        cl_optim.adafactor_step(pd, [dev(g) for g in grads], rd, cd, vd, **kw)
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for got, ref in zip(pd + [a for a in rd + cd + vd if a is not None],
                        pn + [a for a in rn + cn + vn if a is not None]):
        g = got.get()
        assert np.all(np.isfinite(g))
        np.testing.assert_allclose(g, ref, rtol=tol, atol=tol * np.max(np.abs(ref)))


@pytest.mark.parametrize("op", ["sgd_step", "adam_step", "adafactor_step"])
def test_check_finite_updates_nothing(op, geometry):
    rng = np.random.default_rng(40)
    shapes = [(5,), (3, 4), (6,)]
    ps = [rand(rng, s, np.float32) for s in shapes]
    grads = [rand(rng, s, np.float32) for s in shapes]
    grads[1][2, 1] = np.nan
    grads[2][0] = np.inf
    pd, gd = [dev(p) for p in ps], [dev(g) for g in grads]
    if op == "sgd_step":
        bad = cl_optim.sgd_step(pd, gd, [dev(np.zeros(s, np.float32)) for s in shapes], lr=0.1,
                                momentum=0.9, dampening=0.0, weight_decay=0.0, nesterov=False,
                                maximize=False, first=True, check_finite=True)
    elif op == "adam_step":
        bad = cl_optim.adam_step(pd, gd, [dev(np.zeros(s, np.float32)) for s in shapes],
                                 [dev(np.zeros(s, np.float32)) for s in shapes], None, lr=0.1,
                                 beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.0,
                                 amsgrad=False, maximize=False, step=1, check_finite=True)
    else:
        st = [_adafactor_state(s, np.float32) for s in shapes]
        rd, cd, vd = ([None if x[j] is None else dev(x[j]) for x in st] for j in range(3))
        bad = cl_optim.adafactor_step(pd, gd, rd, cd, vd, lr=0.01, rho=0.01, rate=1.0,
                                      eps1=None, eps2=1e-3, d=1.0, weight_decay=0.0,
                                      maximize=False, check_finite=True)
    assert bad == (1, 2)
    assert bad == np_optim.nonfinite(grads)
    for got, ref in zip(pd, ps):
        np.testing.assert_array_equal(got.get(), ref)


def test_optimizer_bad_input():
    rng = np.random.default_rng(50)
    p, g = dev(rand(rng, (4,), np.float32)), dev(rand(rng, (4,), np.float32))
    kw = {"lr": 0.1, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.0, "nesterov": False,
              "maximize": False, "first": True}
    with pytest.raises(TypeError, match=r"sgd_step: parameters must be float32 or float64\. "
                       r"Received: params\[0\].dtype=int32"):
        cl_optim.sgd_step([dev(np.ones(4, np.int32))], [dev(np.ones(4, np.int32))],
                          [dev(np.ones(4, np.int32))], **kw)
    with pytest.raises(ValueError, match=r"sgd_step: grads\[0\] must have its parameter's "
                       r"shape\. Received: params\[0\].shape=\(4,\), grads\[0\].shape=\(3,\)"):
        cl_optim.sgd_step([p], [dev(rand(rng, (3,), np.float32))],
                          [dev(np.zeros(4, np.float32))], **kw)
    with pytest.raises(TypeError, match=r"sgd_step: momentum_buffers\[0\] must have the "
                       r"parameters' dtype"):
        cl_optim.sgd_step([p], [g], [dev(np.zeros(4, np.int16))], **kw)
    with pytest.raises(TypeError, match=r"sgd_step: grads\[0\] must be a pyopencl"):
        cl_optim.sgd_step([p], [np.ones(4, np.float32)], [dev(np.zeros(4, np.float32))], **kw)
    with pytest.raises(ValueError, match=r"sgd_step: params\[0\] must be contiguous"):
        cl_optim.sgd_step([dev(rand(rng, (8,), np.float32))[::2]], [g],
                          [dev(np.zeros(4, np.float32))], **kw)
    with pytest.raises(ValueError, match=r"adafactor_step: row_vars\[0\] is needed"):
        cl_optim.adafactor_step([dev(rand(rng, (2, 3), np.float32))],
                                [dev(rand(rng, (2, 3), np.float32))], [None], [None], [None],
                                lr=0.01, rho=0.01, rate=1.0, eps1=None, eps2=1e-3, d=1.0,
                                weight_decay=0.0, maximize=False)


def test_empty_lists_do_nothing():
    assert cl_optim.sgd_step([], [], [], lr=0.1, momentum=0.0, dampening=0.0,
                             weight_decay=0.0, nesterov=False, maximize=False, first=True) == ()
    assert cl_optim.adafactor_step([], [], [], [], [], lr=0.1, rho=0.1, rate=1.0, eps1=None,
                                   eps2=1e-3, d=1.0, weight_decay=0.0, maximize=False) == ()


# ---- FFT ---------------------------------------------------------------------------

NP_FFT = np_fft.pick_engine()
FFT_CASES = [  # (shape, s, axes): powers of two, Bluestein lengths, cut, pad, n-D, batches
    ((8,), (8,), (0,)), ((1,), (1,), (0,)), ((3,), (3,), (0,)), ((1000,), (1000,), (0,)),
    ((4, 4097), (4097,), (1,)), ((5, 6), (5,), (0,)), ((5, 6), (4, 9), (0, 1)),
    ((2, 3, 7), (3, 7), (1, 2)), ((2, 3, 7), (5, 2), (2, 0)), ((3, 0, 4), (4,), (2,)),
    # radix-8/4/2 passes on the last axis, on a leading axis, n-D, and Bluestein through them
    ((3, 256), (256,), (1,)), ((32, 5), (32,), (0,)), ((4, 16, 8), (16, 8), (1, 2)),
    ((2, 4096), (4096,), (1,)), ((64, 3), (64, 2), (0, 1)), ((3, 65), (65,), (1,)),
]
FFT_TOL = {np.complex64: 2e-6, np.complex128: 1e-13}


@pytest.mark.parametrize("dtype", [np.complex64, pytest.param(np.complex128, marks=needs_fp64)])
@pytest.mark.parametrize("case", FFT_CASES, ids=str)
@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("forward", [True, False])
def test_fft_matches_numpy(dtype, case, norm, forward):
    """c2c, r2c and c2r equal the NumPy backend's launchers (pocketfft) within a few ulp
    times log n, relative to the largest output element."""
    shape, s, axes = case
    rng = np.random.default_rng(sum(shape) + len(s))
    x = rand(rng, shape, dtype)
    xr = np.ascontiguousarray(x.real)
    for op, arg in (("c2c", x), ("r2c", xr), ("c2r", x)):
        ref = getattr(NP_FFT, op)(arg, s, axes, norm, forward)
        got = getattr(cl_fft, f"fft_{op}")(dev(arg), s, axes, norm, forward).get()
        assert got.shape == ref.shape and got.dtype == ref.dtype, op
        assert np.all(np.isfinite(got)), f"{op}: poisoned elements left"
        scale = max(np.max(np.abs(ref), initial=0.0), 1e-30)
        np.testing.assert_allclose(got, ref, rtol=0, atol=FFT_TOL[dtype] * 20 * scale,
                                   err_msg=op)


@pytest.mark.parametrize("op", ["c2c", "r2c", "c2r"])
def test_fft_strided_input(op):
    """A transposed, offset view is read in place with its strides."""
    rng = np.random.default_rng(8)
    x = rand(rng, (9, 12), np.complex64)
    arg = x if op != "r2c" else np.ascontiguousarray(x.real)
    view = dev(arg)[1:].T  # shape (12, 8), strided, at an offset
    ref = getattr(NP_FFT, op)(arg[1:].T, (12, 8), (0, 1), "backward", True)
    got = getattr(cl_fft, f"fft_{op}")(view, (12, 8), (0, 1), "backward", True).get()
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * np.max(np.abs(ref)))


POW2 = [1 << k for k in range(1, 17)]  # 2 .. 65536: every k mod 3 (radix 8, 8+2, 8+4)
BLUESTEIN = [3, 5, 7, 17, 97, 127, 1000, 4095, 65537]  # odd and prime lengths
# max |error| / max |reference| against numpy.fft in complex128 is at most C eps log2(m), m
# the power-of-two length transformed (Bluestein's 2^ceil(log2(2n - 1))); measured on PoCL
# 3.0: C <= 0.7 for powers of two, <= 2.6 through Bluestein (the chirp products)
FFT_EPS = {np.complex64: 2.0 ** -24, np.complex128: 2.0 ** -53}


@pytest.fixture(params=["local", "global"])
def fft_route(request, monkeypatch):
    """Run the power-of-two rows through the one-launch local-memory kernel (wherever
    the row fits) or through one global launch per pass, whatever LOCAL_MAX_N says."""
    monkeypatch.setattr(cl_fft, "LOCAL_MAX_N", 1 << 30 if request.param == "local" else 0)
    return request.param


def test_fft_radices_cover_each_length_in_ceil_k_over_3_passes():
    for k in range(1, 21):
        r = cl_fft._radices(1 << k)
        assert np.prod(r) == 1 << k and len(r) == -(-k // 3)
        assert all(x == 8 for x in r[:-1]) and r[-1] in (2, 4, 8)
    assert cl_fft._radices(1) == []


@pytest.mark.parametrize("shape,s,axes", [((7, 64), (64,), (1,)), ((7, 5), (5,), (1,)),
                                          ((5, 7), (5,), (0,)), ((6, 9), (6, 16), (0, 1))],
                         ids=str)
def test_fft_row_launches_split_at_the_grid_cap(shape, s, axes, fft_route, monkeypatch):
    """Launches that put rows in the grid's second dimension (radix passes, Bluestein's
    steps, the Hermitian extension, the gathers) are split into launches of at most
    _MAX_ROWS rows (65535: CUDA's grid-y limit); here 2, so 5-9 rows take 3-5 launches
    each, every row at its own offset, and the results still equal numpy.fft."""
    monkeypatch.setattr(cl_fft, "_MAX_ROWS", 2)
    rng = np.random.default_rng(sum(shape))
    x = rand(rng, shape, np.complex64)
    xr = np.ascontiguousarray(x.real)
    for op, arg in (("c2c", x), ("r2c", xr), ("c2r", x)):
        ref = getattr(NP_FFT, op)(arg, s, axes, "backward", True)
        got = getattr(cl_fft, f"fft_{op}")(dev(arg), s, axes, "backward", True).get()
        assert got.shape == ref.shape, op
        np.testing.assert_allclose(got, ref, rtol=0, atol=2e-5 * np.max(np.abs(ref)),
                                   err_msg=op)


@pytest.mark.parametrize("dtype", [np.complex64, pytest.param(np.complex128, marks=needs_fp64)])
@pytest.mark.parametrize("n", POW2 + BLUESTEIN)
def test_fft_rows_every_length_both_routes(dtype, n, fft_route):
    """Forward and inverse rows of powers of two 2 .. 2^16 and odd/prime (Bluestein)
    lengths, batches of 1 and of 3 (padding rows in the last local work-group), against
    numpy.fft in complex128; the input buffer is left as it was."""
    rng = np.random.default_rng(n)
    batch = 3 if n <= 4096 else 1
    x = rand(rng, (batch, n), dtype)
    x_d = dev(x)
    for forward in (True, False):
        got = cl_fft.fft_c2c(x_d, (n,), (1,), "backward", forward).get()
        ref = (np.fft.fft if forward else np.fft.ifft)(x.astype(np.complex128), axis=1)
        assert got.shape == ref.shape and got.dtype == dtype
        assert np.all(np.isfinite(got)), "poisoned elements left"
        err = np.max(np.abs(got - ref)) / np.max(np.abs(ref))
        m, c = (n, 2.0) if n & (n - 1) == 0 else (1 << (2 * n - 2).bit_length(), 5.0)
        assert err <= c * FFT_EPS[dtype] * np.log2(m), (forward, err)
    np.testing.assert_array_equal(x_d.get(), x)  # read in place, never written


@pytest.mark.parametrize("norm", ["backward", "ortho", "forward"])
@pytest.mark.parametrize("shape,axes", [((5, 64), (1,)), ((64, 5), (0,)), ((3, 16, 32), (1, 2)),
                                        ((2, 8, 4, 2), (0, 1, 2, 3)), ((40, 16), (1,))])
def test_fft_pow2_axes_norms_both_routes(shape, axes, norm, fft_route):
    """Batched power-of-two transforms along leading, trailing and several axes, every
    norm, c2c/r2c/c2r, through both routes ((40, 16): 32 rows a local work-group, so the
    second has 24 padding rows)."""
    rng = np.random.default_rng(len(shape) + shape[-1])
    x = rand(rng, shape, np.complex64)
    xr = np.ascontiguousarray(x.real)
    s = tuple(shape[a] for a in axes)
    for op, arg in (("c2c", x), ("r2c", xr), ("c2r", x)):
        for forward in (True, False):
            ref = getattr(NP_FFT, op)(arg, s, axes, norm, forward)
            got = getattr(cl_fft, f"fft_{op}")(dev(arg), s, axes, norm, forward).get()
            assert got.shape == ref.shape and got.dtype == ref.dtype, op
            assert np.all(np.isfinite(got)), f"{op}: poisoned elements left"
            scale = np.max(np.abs(ref))
            np.testing.assert_allclose(got, ref, rtol=0, atol=FFT_TOL[np.complex64] * 20 * scale,
                                       err_msg=f"{op} forward={forward}")


def test_fft_bad_input():
    x = dev(np.ones(4, np.complex64))
    with pytest.raises(TypeError, match=r"fft_r2c: a must be float32 or float64\. "
                       r"Received: a.dtype=complex64"):
        cl_fft.fft_r2c(x, (4,), (0,), "backward", True)
    with pytest.raises(ValueError, match=r"fft_c2c: norm must be .*Received: norm='none'"):
        cl_fft.fft_c2c(x, (4,), (0,), "none", True)
    with pytest.raises(ValueError, match=r"fft_c2c: axes must be distinct axes of a.*"
                       r"Received: a.shape=\(4,\), s=\(4,\), axes=\(1,\)"):
        cl_fft.fft_c2c(x, (4,), (1,), "backward", True)
    with pytest.raises(TypeError, match=r"fft_c2c: a must be a pyopencl"):
        cl_fft.fft_c2c(np.ones(4, np.complex64), (4,), (0,), "backward", True)


def test_fft_plan_cache_counts_and_clears_the_kept_plans():
    """get_plan_cache(opencl device) reports the twiddle/Bluestein plans it keeps."""
    import tessera_array as xp

    devs = [d for d in xp.__array_namespace_info__().devices() if d.backend.name == "opencl"]
    assert devs  # the module's gate has the opencl backend loaded
    dev = devs[0]
    cache = xp.fft.get_plan_cache(dev)
    cache.clear()
    assert cache.size == 0 and cache.memsize == 0
    rng = np.random.default_rng(3)
    a = (rng.standard_normal((4, 24)) + 1j * rng.standard_normal((4, 24))).astype(np.complex64)
    out = xp.fft.fft(xp.asarray(a, device=dev))  # 24: Bluestein through a 64-point FFT
    np.testing.assert_allclose(np.asarray(out.to_device("cpu")), np.fft.fft(a), rtol=1e-4,
                               atol=1e-4)
    assert cache.size >= 1 and cache.memsize > 0
    assert cache.info()["size"] == cache.size
    with pytest.raises(NotImplementedError, match="max_size"):
        cache.max_size = 4
    cache.clear()
    assert cache.size == 0
