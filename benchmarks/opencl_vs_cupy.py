"""The opencl_vs_cupy suite: OpenCL kernels on an NVIDIA GPU against CuPy, same GPU.

Needs NVIDIA's OpenCL driver (register ``libnvidia-opencl.so.1`` through an
``OCL_ICD_VENDORS`` folder where no ICD file is installed) and CuPy on the same GPU;
run with ``--device opencl:N`` naming that device. Each benchmark times one launcher
registered for the device (through ``tessera_array.launchers``) on device buffers, or
a namespace product on tessera arrays, against what a CuPy user would write:

=================  =========================================  ==============================
benchmark          tessera                                    CuPy peer
=================  =========================================  ==============================
matvec             ``matvec`` scalar/warp, float32/64,        ``cupy.cublas.gemv`` (cuBLAS)
                   4096^2 8192^2 (2048^2 with ``--quick``)
spmv               ``spmv`` scalar/warp, 2-D Poisson 1024^2   ``csr_matrix @ x`` (cuSPARSE)
                   2048^2 (512^2)
sgd, adam, adamw   the steps over 10 x 1M and 4 x 16M         one ``cupy.ElementwiseKernel``
                   float32 (10 x 100k)                        launch per tensor
adafactor          ``adafactor_step``, 10 x 1000^2 (4 x 316^2)  CuPy array expressions
fft                ``fft_c2c`` 64 x 4096, 64 x 4095,          ``cupy.fft.fft`` (cuFFT)
                   16 x 65536, complex128 64 x 4096
ns_matvec          the namespace's ``A @ x``, ``x @ A``,      the same expressions on CuPy
                   4096^2 (2048^2), float32/64                arrays
ns_vecdot          ``xp.vecdot(u, w)``, 2^20, float32/64      ``cupy.vdot(u, w)``
=================  =========================================  ==============================

Timing: each launcher call is timed alone (``batch=1``) between device timestamps on
its own queue or stream, after warm-up, the two sides alternating call by call:
OpenCL profiling markers on a profiling queue (the launchers launch on their inputs'
queue: the buffers are moved onto it with ``with_queue``, same memory, same pool),
CUDA events for CuPy; both count from the first command of the call to the end of its
last, launch gaps and the Python of the call included. The namespace rows are timed
by host wall clock (call, then ``finish``/``synchronize``). The ratio is tessera time /
CuPy time; the issue's target, CuPy time / ours >= 0.7, is ratio <= 1/0.7 for matvec,
spmv and the optimizer steps. Both sides' results are compared before timing.
"""

from __future__ import annotations

import numpy as np

from ._opencl import close, dtype_of, family_sources, needs_dtype, poisson, put

__all__ = ["benchmarks"]

TARGET = round(1 / 0.7, 3)  # CuPy time / OpenCL time >= 0.7
_FAMILY_SOURCES = {
    "matvec": family_sources(("matvec",), ("matvec",)),
    "spmv": family_sources(("sparse",), ("spmv",)),
    "optim": family_sources(("optim",), ("optim",)),
    "fft": family_sources(("fft",), ("fft",)),
    "namespace": family_sources(("matvec", "dot"), ("matvec", "dot", "gemm"))
    + ("tessera_array/_linear_algebra_functions.py",),
}


def _cupy():
    from ._core import Unavailable

    try:
        import cupy
    except ImportError as err:
        raise Unavailable(f"CuPy (the peer) is not installed: {err}") from err
    return cupy


def _device_timers(ns):
    """OpenCL profiling markers on the suite's queue; CUDA events for CuPy."""
    from ._core import CudaEventTimer, OpenclMarkerTimer

    return OpenclMarkerTimer(ns["queue"]), CudaEventTimer()


def _on_profiling_queue(host_arrays, device):
    """``(queue, buffers)``: each host array on ``device`` through the namespace, moved
    onto one profiling queue of its context."""
    from ._devices import opencl_profiling_queue

    bufs = [put(h, device) for h in host_arrays]
    queue = opencl_profiling_queue(bufs[0])
    return queue, [b.with_queue(queue) for b in bufs]


def _matvec(ctx, n, dtype, variant):
    def setup():
        cp = _cupy()
        from cupy import cublas

        from tessera_array import launchers

        dev = ctx.device
        needs_dtype(dev, dtype)
        rng = np.random.default_rng(20261130)
        a = rng.standard_normal((n, n)).astype(dtype)
        x = rng.standard_normal(n).astype(dtype)
        queue, (a_d, x_d) = _on_profiling_queue((a, x), dev)
        return {"mv": launchers.launcher("matvec", dev, dtype_of(dtype), variant),
                "a_d": a_d, "x_d": x_d, "queue": queue, "gemv": cublas.gemv,
                "a_c": cp.asarray(a), "x_c": cp.asarray(x), "y_c": cp.empty(n, dtype),
                "cp": cp}

    return setup


def _spmv(ctx, k, dtype, variant):
    def setup():
        cp = _cupy()
        import cupyx.scipy.sparse as cps

        from tessera_array import launchers

        dev = ctx.device
        needs_dtype(dev, dtype)
        s = poisson(k, dtype)
        x = np.random.default_rng(20261130).standard_normal(s.shape[1]).astype(dtype)
        queue, (data, ind, ptr, x_d) = _on_profiling_queue(
            (s.data, s.indices, s.indptr, x), dev)
        s_c = cps.csr_matrix((cp.asarray(s.data), cp.asarray(s.indices), cp.asarray(s.indptr)),
                             shape=s.shape)
        return {"sp": launchers.launcher("spmv", dev, dtype_of(dtype), variant),
                "csr_d": (data, ind, ptr), "shape": s.shape, "x_d": x_d, "queue": queue,
                "s_c": s_c, "x_c": cp.asarray(x), "cp": cp}

    return setup


def _result_check(rtol):
    def check(t, p, ns):
        close("result", t.get(), ns["cp"].asnumpy(ns["y_c"] if p is None else p), rtol)

    return check


# The CuPy peers of the optimizer steps: PyTorch's formulas, one launch per tensor.
_SGD = ("T g, T lr, T mom, T damp1", "T p, T b",
        "b = mom * b + damp1 * g; p = p - lr * b", "tessera_peer_sgd")
_ADAM = ("T g, T wd, T keep, T one_b1, T beta2, T one_b2, T bc2, T eps, T step, int32 decoupled",
         "T p, T m, T v",
         """
         T d = g;
         if (wd != 0) { if (decoupled) p = p * keep; else d = d + p * wd; }
         m = m + (d - m) * one_b1;
         v = v * beta2 + d * d * one_b2;
         p = p - step * (m / (sqrt(v) / bc2 + eps));
         """, "tessera_peer_adam")
_SGD_KW = {"lr": 0.01, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.0,
           "nesterov": False, "maximize": False, "first": False}
_ADAM_KW = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01,
            "amsgrad": False, "maximize": False, "step": 10}


def _state_check(t, p, ns):
    # One step each from the same state (the runner evaluates each side once first).
    cp = ns["cp"]
    for d, c in zip(ns["p_d"], ns["p_c"]):
        close(ns["op"], d.get(), cp.asnumpy(c), 1e-5)


def _optim(ctx, op, count, n):
    def setup():
        cp = _cupy()

        from tessera_array import launchers

        dev = ctx.device
        rng = np.random.default_rng(20261130)
        host = [[np.zeros(n, np.float32) if zero else rng.standard_normal(n, dtype=np.float32)
                 for _ in range(count)] for zero in (False, False, True, True)]
        queue, flat = _on_profiling_queue([h for lst in host for h in lst], dev)
        p_d, g_d, m_d, v_d = (flat[i * count:(i + 1) * count] for i in range(4))
        p_c, g_c, m_c, v_c = ([cp.asarray(h) for h in lst] for lst in host)
        f = np.float32
        if op == "sgd_step":
            kernel = cp.ElementwiseKernel(*_SGD)
            scal = (f(0.01), f(0.9), f(1.0))

            def peer():
                for p, g, b in zip(p_c, g_c, m_c):
                    kernel(g, *scal, p, b)

            dev_args, kw = (p_d, g_d, m_d), _SGD_KW
        else:
            kernel = cp.ElementwiseKernel(*_ADAM)
            step, lr, wd = 10, 1e-3, 0.01
            scal = (f(wd), f(1 - lr * wd), f(0.1), f(0.999), f(0.001),
                    f(np.sqrt(1 - 0.999**step)), f(1e-8), f(lr / (1 - 0.9**step)),
                    np.int32(op == "adamw_step"))

            def peer():
                for p, g, m, v in zip(p_c, g_c, m_c, v_c):
                    kernel(g, *scal, p, m, v)

            dev_args, kw = (p_d, g_d, m_d, v_d, None), _ADAM_KW
        return {"step": launchers.launcher(op, dev, dtype_of("float32")),
                "dev_args": dev_args, "kw": kw, "peer": peer, "queue": queue,
                "p_d": p_d, "p_c": p_c, "op": op, "cp": cp}

    return setup


def _adafactor(ctx, count, side):
    def setup():
        cp = _cupy()

        from tessera_array import launchers
        from tessera_array.optim import adafactor_decay

        dev = ctx.device
        rng = np.random.default_rng(20261130)
        shape = (side, side)
        p = [rng.standard_normal(shape, dtype=np.float32) for _ in range(count)]
        g = [rng.standard_normal(shape, dtype=np.float32) for _ in range(count)]
        r = [np.zeros((side, 1), np.float32) for _ in range(count)]
        c = [np.zeros((1, side), np.float32) for _ in range(count)]
        queue, flat = _on_profiling_queue(p + g + r + c, dev)
        p_d, g_d, r_d, c_d = (flat[i * count:(i + 1) * count] for i in range(4))
        p_c, g_c, r_c, c_c = ([cp.asarray(h) for h in lst] for lst in (p, g, r, c))
        rate = 1 - adafactor_decay(0.999, 10)
        kw = {"lr": 0.01, "rho": 0.01, "rate": rate, "eps1": None, "eps2": 1e-3, "d": 1.0,
              "weight_decay": 0.0, "maximize": False}
        e1 = float(np.finfo(np.float32).eps)

        def peer():
            # torch.optim.Adafactor's update, as the NumPy launcher computes it
            for pc, gc, rc, cc in zip(p_c, g_c, r_c, c_c):
                alpha = cp.maximum(1e-3, cp.sqrt(cp.mean(pc * pc))) * 0.01
                g2 = gc * gc
                rc += (g2.mean(axis=-1, keepdims=True) - rc) * rate
                cc += (g2.mean(axis=-2, keepdims=True) - cc) * rate
                u = (rc * cc) / cp.maximum(rc.mean(axis=-2, keepdims=True), e1)
                u = gc / cp.sqrt(cp.maximum(u, e1 * e1))
                u *= alpha / cp.maximum(1.0, cp.sqrt(cp.mean(u * u)))
                pc -= u

        return {"step": launchers.launcher("adafactor_step", dev, dtype_of("float32")),
                "dev_args": (p_d, g_d, r_d, c_d, [None] * count), "kw": kw, "peer": peer,
                "queue": queue, "p_d": p_d, "p_c": p_c, "op": "adafactor_step", "cp": cp}

    return setup


def _fft(ctx, batch, n, dtype):
    def setup():
        cp = _cupy()

        from tessera_array import launchers

        dev = ctx.device
        needs_dtype(dev, dtype)
        rng = np.random.default_rng(20261130)
        z = (rng.standard_normal((batch, n)) + 1j * rng.standard_normal((batch, n))).astype(dtype)
        queue, (z_d,) = _on_profiling_queue((z,), dev)
        return {"fft": launchers.launcher("fft_c2c", dev, dtype_of(dtype)), "z_d": z_d,
                "n": n, "queue": queue, "z_c": cp.asarray(z), "cp": cp}

    return setup


def _namespace(ctx, expr, n, dtype):
    def setup():
        cp = _cupy()

        import tessera_array as xp
        from tessera_array import launchers

        dev = ctx.device
        needs_dtype(dev, dtype)
        rng = np.random.default_rng(20261130)
        stream = cp.cuda.get_current_stream()

        def fin(r):  # the result, its device work done
            launchers.native(r).queue.finish()
            return r

        def csync(r):
            stream.synchronize()
            return r

        if expr == "vecdot":
            u, w = (rng.standard_normal(n).astype(dtype) for _ in range(2))
            names = {"u": u, "w": w}
        else:
            names = {"a": rng.standard_normal((n, n)).astype(dtype),
                     "x": rng.standard_normal(n).astype(dtype)}
        ns = {"xp": xp, "cp": cp, "fin": fin, "csync": csync,
              "fetch": lambda t: launchers.to_host(launchers.native(t), dev)}
        for k, v in names.items():
            ns[f"{k}_t"] = xp.asarray(v, device=dev)
            ns[f"{k}_c"] = cp.asarray(v)
        return ns

    return setup


def _namespace_check(rtol):
    def check(t, p, ns):
        close("result", ns["fetch"](t), ns["cp"].asnumpy(p), rtol)

    return check


def benchmarks(ctx) -> list:
    from ._core import Benchmark

    quick = ctx.quick
    out = []

    def add(name, variant, tessera, peer, setup, family, params, **kw):
        out.append(Benchmark(suite="opencl_vs_cupy", name=name, variant=variant,
                             tessera=tessera, peer=peer, setup=setup,
                             sources=_FAMILY_SOURCES[family], params=params, peer_name="cupy",
                             **kw))

    device_timed = {"timers": _device_timers, "batch": 1}
    for dtype in ("float32", "float64"):
        rtol = 1e-4 if dtype == "float32" else 1e-12
        for n in ((2048,) if quick else (4096, 8192)):
            for variant in ("scalar", "warp"):
                add("matvec", f"{dtype} {n}^2 {variant}", "mv(a_d, x_d)",
                    'gemv("N", 1.0, a_c, x_c, 0.0, y_c)', _matvec(ctx, n, dtype, variant),
                    "matvec", {"label": f"matvec {variant} {dtype}", "shape": (n, n)},
                    target=TARGET, check=_result_check(rtol), **device_timed)
    for dtype in ("float32", "float64"):
        rtol = 1e-5 if dtype == "float32" else 1e-13
        for k in ((512,) if quick else (1024, 2048)):
            for variant in ("scalar", "warp"):
                add("spmv", f"{dtype} poisson {k}^2 {variant}", "sp(*csr_d, shape, x_d)",
                    "s_c @ x_c", _spmv(ctx, k, dtype, variant), "spmv",
                    {"label": f"spmv {variant} {dtype}", "shape": (k * k, k * k)},
                    target=TARGET, check=_result_check(rtol), **device_timed)
    layouts = [(10, 100_000)] if quick else [(10, 1_000_000), (4, 16_000_000)]
    for count, n in layouts:
        for op in ("sgd_step", "adam_step", "adamw_step"):
            add(op.split("_")[0], f"{count}x{n}", "step(*dev_args, **kw)", "peer()",
                _optim(ctx, op, count, n), "optim",
                {"label": op, "tensors": count, "elements": n, "dtype": "float32"},
                target=TARGET, check=_state_check, **device_timed)
    count, side = (4, 316) if quick else (10, 1000)
    add("adafactor", f"{count}x{side}^2", "step(*dev_args, **kw)", "peer()",
        _adafactor(ctx, count, side), "optim",
        {"label": "adafactor_step", "tensors": count, "shape": (side, side)},
        check=_state_check, **device_timed)
    for n, b, dtype in ((4096, 64, "complex64"), (4095, 64, "complex64"),
                        (65536, 16, "complex64"), (4096, 64, "complex128")):
        rtol = 1e-4 if dtype == "complex64" else 1e-11
        add("fft", f"{dtype} {b}x{n}", "fft(z_d, (n,), (1,), 'backward', True)",
            "cp.fft.fft(z_c, axis=1)", _fft(ctx, b, n, dtype), "fft",
            {"label": f"fft_c2c {dtype}", "shape": (b, n)},
            check=_result_check(rtol), **device_timed)
    for dtype in ("float32", "float64"):
        n = 2048 if quick else 4096
        for expr, t_expr, c_expr in (("A @ x", "fin(a_t @ x_t)", "csync(a_c @ x_c)"),
                                     ("x @ A", "fin(x_t @ a_t)", "csync(x_c @ a_c)")):
            add("ns_matvec", f"{expr} {dtype} {n}^2", t_expr, c_expr,
                _namespace(ctx, expr, n, dtype), "namespace",
                {"label": f"{expr} {dtype}", "shape": (n, n)},
                check=_namespace_check(1e-4 if dtype == "float32" else 1e-12))
        add("ns_vecdot", f"{dtype} 2^20", "fin(xp.vecdot(u_t, w_t))", "csync(cp.vdot(u_c, w_c))",
            _namespace(ctx, "vecdot", 1 << 20, dtype), "namespace",
            {"label": f"vecdot {dtype}", "shape": (1 << 20,)},
            check=_namespace_check(1e-3 if dtype == "float32" else 1e-10))
    return out
