"""The OpenCL launchers' kept launch plans: a repeated call reuses its plan only when
every attribute the plan depends on matches, and a call that does not match still gets
the full checks (same errors as a first call).

Each test first runs a launcher once, so its plan is kept, then calls it again with
buffers that agree in some attributes and differ in others (offset, strides, dtype,
queue), comparing every result with NumPy. Buffers come from a poisoning allocator
(0xFF bytes: NaN floats), so an element a kernel forgets to write cannot pass.
"""

from __future__ import annotations

import _opencl_gate
import numpy as np
import pytest

cl, cla, CTX = _opencl_gate.opencl_context()

from tessera_array.backends.opencl import matvec as cl_matvec
from tessera_array.backends.opencl import optim as cl_optim
from tessera_array.backends.opencl import sparse as cl_sparse

QUEUE = cl.CommandQueue(CTX)


def _poison(nbytes):
    buf = cl.Buffer(CTX, cl.mem_flags.READ_WRITE, nbytes)
    cl.enqueue_fill_buffer(QUEUE, buf, np.uint8(0xFF), 0, nbytes)
    return buf


def dev(a):
    a = np.array(a, copy=True)
    out = cla.empty(QUEUE, a.shape, a.dtype, allocator=_poison)
    if a.size:
        out.set(a)
    return out


def close(got, ref):
    got = got.get()
    assert got.shape == ref.shape and got.dtype == ref.dtype
    assert np.all(np.isfinite(got)), "a kernel left poisoned (NaN) elements"
    np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5 * np.max(np.abs(ref)))


@pytest.mark.parametrize("variant", ["scalar", "warp"])
def test_matvec_plan_follows_layout(variant):
    rng = np.random.default_rng(60)
    launch = getattr(cl_matvec, f"dense_matvec_{variant}")
    a = rng.standard_normal((6, 5)).astype(np.float32)
    x = rng.standard_normal(5).astype(np.float32)
    big = rng.standard_normal((8, 11)).astype(np.float32)
    xs = rng.standard_normal(12).astype(np.float32)
    a_d, x_d, big_d, xs_d = dev(a), dev(x), dev(big), dev(xs)
    for _ in range(2):  # the second round runs on kept plans
        close(launch(a_d, x_d), a @ x)
        # same shapes, other strides and offsets
        close(launch(big_d[1:7, ::2][:, :5], xs_d[1::2][:5]), big[1:7, ::2][:, :5] @ xs[1::2][:5])
        close(launch(big_d[2:7, 3:9].T[:6], x_d), big[2:7, 3:9].T[:6] @ x)
        # same shapes, another dtype
        close(launch(dev(a.astype(np.complex64)), dev(x.astype(np.complex64))),
              a.astype(np.complex64) @ x.astype(np.complex64))


def test_matvec_checks_after_a_kept_plan():
    rng = np.random.default_rng(61)
    a, x = dev(rng.standard_normal((3, 4)).astype(np.float32)), dev(np.ones(4, np.float32))
    cl_matvec.dense_matvec_scalar(a, x)
    with pytest.raises(TypeError, match=r"matvec: a must be a pyopencl\.array\.Array.*"
                       r"Received: a of type ndarray"):
        cl_matvec.dense_matvec_scalar(a.get(), x)
    with pytest.raises(TypeError, match=r"matvec: .*Received: a.dtype=float32, x.dtype=float64"):
        cl_matvec.dense_matvec_scalar(a, dev(np.ones(4)))
    with pytest.raises(ValueError, match=r"matvec: .*Received: a.shape=\(3, 4\), x.shape=\(3,\)"):
        cl_matvec.dense_matvec_scalar(a, x[:3])
    with pytest.raises(ValueError, match=r"matvec: the pyopencl array has no queue"):
        cl_matvec.dense_matvec_scalar(a.with_queue(None), x)


def test_axpy_plan_follows_alpha_and_subtract():
    rng = np.random.default_rng(62)
    x, y = rng.standard_normal(9).astype(np.float32), rng.standard_normal(9).astype(np.float32)
    x_d, y_d = dev(x), dev(y)
    for alpha, subtract in ((0.5, False), (dev(np.float32(-1.5)), False), (0.25, True),
                            (dev(np.float32(2.0)), True), (0.5, False)):
        cl_matvec.axpy(alpha, x_d, y_d, subtract)
        a = np.float32(alpha if isinstance(alpha, float) else alpha.get())
        y = y - a * x if subtract else y + a * x
        np.testing.assert_array_equal(y_d.get(), y)
    with pytest.raises(TypeError, match=r"axpy: a device alpha must be one element of y's "
                       r"dtype\. Received: alpha.dtype=float64"):
        cl_matvec.axpy(dev(np.float64(1.0)), x_d, y_d)


def test_spmv_plan_follows_layout():
    rng = np.random.default_rng(63)
    indptr = np.array([0, 2, 2, 5, 6], np.int32)
    indices = np.array([0, 3, 1, 2, 3, 0], np.int32)
    data = rng.standard_normal(6).astype(np.float32)
    x = rng.standard_normal(4).astype(np.float32)
    dense = np.zeros((4, 4), np.float32)
    for r in range(4):
        for j in range(indptr[r], indptr[r + 1]):
            dense[r, indices[j]] += data[j]
    d_d, i_d, p_d = dev(data), dev(indices), dev(indptr)
    padded = dev(np.concatenate([rng.standard_normal(3), data]).astype(np.float32))[3:]
    xs = rng.standard_normal((4, 3)).astype(np.float32)
    for _ in range(2):
        for launch in (cl_sparse.spmv_scalar, cl_sparse.spmv_warp):
            close(launch(d_d, i_d, p_d, (4, 4), dev(x)), dense @ x)
            close(launch(padded, i_d, p_d, (4, 4), dev(xs)[:, 1]), dense @ xs[:, 1])
            close(launch(d_d, i_d, p_d, [4, 4], dev(x)), dense @ x)  # a list: not kept
    with pytest.raises(TypeError, match=r"spmv: indices must be int32 or int64\. "
                       r"Received: indices.dtype=uint8"):
        cl_sparse.spmv_scalar(d_d, dev(indices.astype(np.uint8)), p_d, (4, 4), dev(x))


def test_optimizer_checks_after_a_fast_call():
    rng = np.random.default_rng(64)
    kw = {"lr": 0.1, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.0,
          "nesterov": False, "maximize": False, "first": True}
    p = rng.standard_normal(8).astype(np.float32)
    g = rng.standard_normal(8).astype(np.float32)
    p_d, g_d, b_d = dev(p), dev(g), dev(np.zeros(8, np.float32))
    assert cl_optim.sgd_step([p_d], [g_d], [b_d], **kw) == ()
    np.testing.assert_array_equal(p_d.get(), p - np.float32(0.1) * g)
    with pytest.raises(ValueError, match=r"sgd_step: momentum_buffers\[0\] must be contiguous"):
        cl_optim.sgd_step([p_d], [g_d], [dev(np.zeros(16, np.float32))[::2]], **kw)
    with pytest.raises(TypeError, match=r"sgd_step: grads\[0\] must have the parameters' dtype"):
        cl_optim.sgd_step([p_d], [dev(g.astype(np.float64))], [b_d], **kw)
    with pytest.raises(ValueError, match=r"sgd_step: grads must have one entry per parameter"):
        cl_optim.sgd_step([p_d], [g_d, g_d], [b_d], **kw)
    np.testing.assert_array_equal(p_d.get(), p - np.float32(0.1) * g)  # untouched
