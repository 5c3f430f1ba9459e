"""The cuda_vs_peers suite: the CUDA backend against CuPy, cuBLAS, cuSPARSE, cuFFT, torch.

Needs a ``cuda:N`` device (run with ``--device cuda:N``) and CuPy on the same GPU; the
optimizer rows also need a CUDA build of torch (without it they report unavailable).
Launcher rows call ``tessera_array.launchers.launcher(op, device, dtype, variant)`` on
``cupy.ndarray`` buffers made through the namespace; the peers get their own copies:

=============  ==========================================  ==================================
benchmark      tessera (``--quick`` sizes)                 peer
=============  ==========================================  ==================================
overhead       ``x + y`` float32, sizes 1, 1e3, 1e6, 1e7,  ``a + b`` on CuPy arrays
               1e8 (1e8 left out)
matvec         ``matvec`` default/scalar/warp,             ``cupy.cublas.gemv`` (cuBLAS)
               float32/64, 4096^2 8192^2 (2048^2)
spmv           ``spmv`` default/scalar/warp, 2-D Poisson   ``csr_matrix @ x`` (cuSPARSE)
               1024^2 2048^2 (512^2), float32/64
adam, adamw    ``adam_step``/``adamw_step``, 10 x 10M      ``torch.optim.Adam``/``AdamW``
               float32 (10 x 1M)                           (``fused=True``) ``.step()``
adafactor      ``adafactor_step``, 6 x 4096^2 (6 x 1024^2)  ``torch.optim.Adafactor``
                                                           (``foreach=True``) ``.step()``
linear         ``nn.linear(x, w, b, r)`` float32, bfloat16,  ``torch.addmm(b, x, w.T) + r``
               float16 4096^3 (1024^3)                     (same dtype, same operands)
fft            ``fft_c2c`` 16384 x 1024 complex64 and      ``cupy.fft.fft(axis=-1)`` (cuFFT)
               complex128 (1024 x 1024)
=============  ==========================================  ==================================

Targets (ratio = tessera time / peer time): overhead <= 1.2 at size 1 and <= 1.02 at 1e7;
matvec warp float32 4096^2 <= 1.0; spmv scalar/warp float32 Poisson 1024^2 <=
1/1.5; Adam/AdamW <= 1.0 (the goal 1/1.2); Adafactor <= 0.25; linear <= 1.0 (each dtype);
fft complex64 <= 1/0.95.
The ``default`` matvec and spmv variants are cuBLAS and cuSPARSE themselves: control rows,
no target. The optimizer rows also report the effective bandwidth, 7 x 4 bytes per
parameter (read p, g, m, v; write p, m, v).

Timing: every op runs on CuPy's current stream (the backend's one stream per device, the
null stream), torch on its current stream. Sizes 1 and 1e3 of ``x + y`` are host wall
time per call, launch included: batches of 200 calls then one synchronize (the stream
drained before each batch). Everything else is CUDA events around calibrated batches
after warm-up (:class:`~benchmarks._core.CudaEventTimer`), torch's side between
``torch.cuda.Event`` records on its own stream, each side its own clock; medians over
rounds. Each row's results are compared with its peer's before timing (random inputs,
rtol by precision; the optimizer rows after one step each from the same state).
"""

from __future__ import annotations

import time

import numpy as np

from ._opencl import close, dtype_of, needs_dtype, poisson, put

__all__ = ["CudaWallTimer", "TorchEventTimer", "benchmarks", "info"]

SUITE = "cuda_vs_peers"
SEED = 20261202
WALL_BATCH = 200  # calls per host-timed batch of the small x + y rows
OPTIM_BYTES_PER_PARAM = 7 * 4  # float32: read p, g, m, v; write p, m, v
CORE_SOURCES = (
    "backends/cuda/__init__.py",
    "backends/_cupy/__init__.py",
    "backends/_cupy/_*.py",
    "kernels/include/tessera/*.cuh",
    "tessera_array/launchers.py",
    "tessera_array/_dispatch.py",
    "tessera_array/_array.py",
)
_SOURCES = {
    "overhead": CORE_SOURCES + ("tessera_array/_elementwise_functions.py",),
    "matvec": CORE_SOURCES + ("backends/_cupy/matvec.py", "kernels/cuda/matvec.cu"),
    "spmv": CORE_SOURCES + ("backends/_cupy/sparse.py", "backends/_cupy/matvec.py",
                            "kernels/cuda/spmv.cu"),
    "optim": CORE_SOURCES + ("backends/_cupy/optim.py", "backends/_common/optim.py",
                             "kernels/cuda/optim.cu"),
    "fft": CORE_SOURCES + ("backends/_cupy/fft.py",),
    "linear": CORE_SOURCES + ("backends/_cupy/matvec.py", "tessera_array/nn/_linear.py"),
}


def _cupy():
    from ._core import Unavailable

    try:
        import cupy
    except ImportError as err:
        raise Unavailable(f"CuPy (the peer) is not installed: {err}") from err
    return cupy


def _torch(device):
    """torch, with CUDA on the GPU ``device`` names (the same model as CuPy's), or
    Unavailable saying what is missing."""
    from ._core import Unavailable

    try:
        import torch
    except ImportError as err:
        raise Unavailable(f"torch (the optimizers' peer) is not installed: {err}") from err
    if not torch.cuda.is_available():
        raise Unavailable(f"torch {torch.__version__} has no CUDA device here (a CPU build, "
                          f"or no driver it can use)")
    cp = _cupy()
    ours = cp.cuda.runtime.getDeviceProperties(device.index)["name"]
    ours = ours.decode() if isinstance(ours, bytes) else str(ours)
    theirs = torch.cuda.get_device_name(device.index)
    if theirs.strip().lower() != ours.strip().lower():
        raise Unavailable(f"torch's cuda:{device.index} is {theirs!r}, CuPy's is {ours!r}: "
                          f"both sides must run on one GPU")
    return torch


class CudaWallTimer:
    """Host wall time of a batch of calls, launch overhead included: the current CuPy
    stream is drained (untimed) before the batch and synchronized at its end."""

    name = "perf_counter_ns, stream synchronized"

    def __init__(self):
        import cupy

        self._cupy = cupy

    def start(self) -> int:
        # sync: nothing of an earlier batch still queued.
        self._cupy.cuda.get_current_stream().synchronize()
        return time.perf_counter_ns()

    def stop(self, token: int) -> int:
        # sync: the batch's device work finished.
        self._cupy.cuda.get_current_stream().synchronize()
        return time.perf_counter_ns() - token


class TorchEventTimer:
    """Device time between two ``torch.cuda.Event`` records on torch's current stream,
    synchronized at the end of a batch (what :class:`~benchmarks._core.CudaEventTimer`
    measures on CuPy's stream)."""

    name = "torch-cuda-events"

    def __init__(self, torch):
        self._begin = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def start(self):
        self._begin.record()

    def stop(self, token) -> int:
        self._end.record()
        # sync: waits for the batch's device work to finish.
        self._end.synchronize()
        return int(self._begin.elapsed_time(self._end) * 1e6)


def _wall_timers(ns):
    """Host wall clock (stream synchronized) for both sides of the small x + y rows."""
    timer = CudaWallTimer()
    return timer, timer


def _torch_timers(ns):
    """CUDA events on CuPy's stream for tessera, torch's events on its own for torch."""
    from ._core import CudaEventTimer

    return CudaEventTimer(), TorchEventTimer(ns["torch"])


def _fetch(device):
    from tessera_array import launchers

    return lambda t: launchers.to_host(launchers.native(t), device)


# ---- rows -----------------------------------------------------------------------------


def _overhead(ctx, n):
    def setup():
        cp = _cupy()

        import tessera_array as xp

        dev = ctx.device
        rng = np.random.default_rng(SEED)
        x, y = (rng.standard_normal(n, dtype=np.float32) for _ in range(2))
        return {"x": xp.asarray(x, device=dev), "y": xp.asarray(y, device=dev),
                "a": cp.asarray(x), "b": cp.asarray(y), "cp": cp, "fetch": _fetch(dev)}

    return setup


def _overhead_check(t, p, ns):
    got, want = ns["fetch"](t), ns["cp"].asnumpy(p)
    if got.dtype != want.dtype:
        raise AssertionError(f"dtypes differ: tessera {got.dtype}, CuPy {want.dtype}")
    np.testing.assert_array_equal(got, want)  # one correctly rounded add on both sides


def _matvec(ctx, n, dtype, variant):
    def setup():
        cp = _cupy()
        from cupy import cublas

        from tessera_array import launchers

        dev = ctx.device
        needs_dtype(dev, dtype)
        rng = np.random.default_rng(SEED)
        a = rng.standard_normal((n, n)).astype(dtype)
        x = rng.standard_normal(n).astype(dtype)
        return {"mv": launchers.launcher("matvec", dev, dtype_of(dtype), variant),
                "a_d": put(a, dev), "x_d": put(x, dev), "gemv": cublas.gemv,
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
        x = np.random.default_rng(SEED).standard_normal(s.shape[1]).astype(dtype)
        csr_d = tuple(put(h, dev) for h in (s.data, s.indices, s.indptr))
        s_c = cps.csr_matrix((cp.asarray(s.data), cp.asarray(s.indices),
                              cp.asarray(s.indptr)), shape=s.shape)
        return {"sp": launchers.launcher("spmv", dev, dtype_of(dtype), variant),
                "csr_d": csr_d, "shape": s.shape, "x_d": put(x, dev), "s_c": s_c,
                "x_c": cp.asarray(x), "cp": cp}

    return setup


def _result_check(rtol):
    def check(t, p, ns):
        cp = ns["cp"]
        close("result", cp.asnumpy(t), cp.asnumpy(ns["y_c"] if p is None else p), rtol)

    return check


def _random_on_gpu(cp, shape, seed):
    """Standard normal float32 of ``shape`` drawn on the GPU (100M host draws are slow),
    from CuPy's memory pool, the backend's own: a native buffer of the cuda device."""
    return cp.random.RandomState(seed).standard_normal(shape, dtype=cp.float32)


def _torch_params(torch, device, host_like):
    """Leaf torch tensors on ``device`` holding copies of the CuPy arrays ``host_like``."""
    out = []
    for c in host_like:
        t = torch.from_dlpack(c.copy()).to(f"cuda:{device.index}")
        out.append(t.requires_grad_(True))
    return out


def _adam(ctx, op, count, n):
    def setup():
        cp = _cupy()

        from tessera_array import launchers

        dev = ctx.device
        torch = _torch(dev)
        with cp.cuda.Device(dev.index):
            p_d = [_random_on_gpu(cp, n, SEED + i) for i in range(count)]
            g_d = [_random_on_gpu(cp, n, SEED + 100 + i) for i in range(count)]
            m_d = [cp.zeros(n, cp.float32) for _ in range(count)]
            v_d = [cp.zeros(n, cp.float32) for _ in range(count)]
            tp = _torch_params(torch, dev, p_d)
            for t, g in zip(tp, g_d):
                t.grad = torch.from_dlpack(g.copy())
        decoupled = op == "adamw_step"
        wd = 0.01 if decoupled else 0.0
        cls = torch.optim.AdamW if decoupled else torch.optim.Adam
        topt = cls(tp, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=wd, fused=True)
        # step 1 from zero moments on both sides (torch's state starts there too)
        kw = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": wd,
              "amsgrad": False, "maximize": False, "step": 1}
        return {"step": launchers.launcher(op, dev, dtype_of("float32")),
                "dev_args": (p_d, g_d, m_d, v_d, None), "kw": kw, "topt": topt,
                "p_d": p_d, "tp": tp, "cp": cp, "torch": torch}

    return setup


def _adafactor(ctx, count, side):
    def setup():
        cp = _cupy()

        from tessera_array import launchers

        dev = ctx.device
        torch = _torch(dev)
        shape = (side, side)
        with cp.cuda.Device(dev.index):
            p_d = [_random_on_gpu(cp, shape, SEED + i) for i in range(count)]
            g_d = [_random_on_gpu(cp, shape, SEED + 100 + i) for i in range(count)]
            r_d = [cp.zeros((side, 1), cp.float32) for _ in range(count)]
            c_d = [cp.zeros((1, side), cp.float32) for _ in range(count)]
            tp = _torch_params(torch, dev, p_d)
            for t, g in zip(tp, g_d):
                t.grad = torch.from_dlpack(g.copy())
        topt = torch.optim.Adafactor(tp, lr=1e-2, beta2_decay=-0.8, eps=(None, 1e-3), d=1.0,
                                     weight_decay=0.0, foreach=True)
        # torch's rule at step 1: 1 - beta2_t = 1**-0.8, rho = min(lr, 1/sqrt(1))
        kw = {"lr": 1e-2, "rho": 1e-2, "rate": 1.0, "eps1": None, "eps2": 1e-3, "d": 1.0,
              "weight_decay": 0.0, "maximize": False}
        return {"step": launchers.launcher("adafactor_step", dev, dtype_of("float32")),
                "dev_args": (p_d, g_d, r_d, c_d, [None] * count), "kw": kw, "topt": topt,
                "p_d": p_d, "tp": tp, "cp": cp, "torch": torch}

    return setup


def _state_check(rtol):
    def check(t, p, ns):
        # One step each from the same state (the runner evaluates each side once first).
        cp = ns["cp"]
        for i, (d, tt) in enumerate(zip(ns["p_d"], ns["tp"])):
            close(f"params[{i}]", cp.asnumpy(d), tt.detach().cpu().numpy(), rtol)

    return check


# bf16/fp16 rows: both sides multiply the same rounded operands; each result is within
# half an ulp of its own float32 accumulation (torch rounds twice: the addmm, then + r)
LINEAR_RTOL = {"float32": 1e-5, "bfloat16": 2.0**-7, "float16": 2.0**-10}


def _needs_any_dtype(device, name: str) -> None:
    """Unavailable when ``device`` holds no ``name`` dtype, the extension dtypes included
    (``info.dtypes()`` lists the standard's only: bfloat16 before CuPy 14 is missing)."""
    from tessera_array._helpers import supports_dtype

    from ._core import Unavailable

    dt = dtype_of(name)
    if not supports_dtype(device, dt):
        why = device._backend.missing_capability(device, dt) or "not held"
        raise Unavailable(f"{device} has no {name}: {why}")


def _linear(ctx, n, dtype="float32"):
    def setup():
        cp = _cupy()

        import tessera_array as xp
        from tessera_array import nn

        dev = ctx.device
        torch = _torch(dev)
        _needs_any_dtype(dev, dtype)
        host = dtype_of(dtype)._np  # (ml_dtypes' bfloat16 for "bfloat16")
        rng = np.random.default_rng(SEED)
        # the operands rounded to the dtype on the host: both sides get the same values
        x, w, r = (rng.standard_normal((n, n), dtype=np.float32).astype(host)
                   for _ in range(3))
        b = rng.standard_normal(n, dtype=np.float32).astype(host)
        ours = {k: xp.asarray(v, device=dev) for k, v in zip("xwbr", (x, w, b, r))}
        tdt = getattr(torch, dtype)
        theirs = {"t" + k: torch.from_numpy(v.astype(np.float32)).to(f"cuda:{dev.index}")
                  .to(tdt) for k, v in zip("xwbr", (x, w, b, r))}
        return {"nn": nn, "torch": torch, "cp": cp, "fetch": _fetch(dev), "dtype": dtype,
                **ours, **theirs}

    return setup


def _linear_check(t, p, ns):
    # float32: n terms per dot product on each side, in different orders: the scale of the
    # largest output times float32 rounding, with room for the sum's length. float16 and
    # bfloat16: float32 accumulation on both sides, then the rounding to 16 bits (twice
    # for torch): the dtype's eps of the largest output.
    rtol = LINEAR_RTOL[ns["dtype"]]
    got = ns["fetch"](t).astype(np.float64)
    want = p.detach().float().cpu().numpy().astype(np.float64)
    err = np.abs(got - want).max()
    if not err <= rtol * np.abs(want).max():
        raise AssertionError(f"linear {ns['dtype']}: max |tessera - torch| = {err}, "
                             f"max |torch| = {np.abs(want).max()}, rtol {rtol}")


def _fft(ctx, batch, n, dtype):
    def setup():
        cp = _cupy()

        from tessera_array import launchers

        dev = ctx.device
        needs_dtype(dev, dtype)
        rng = np.random.default_rng(SEED)
        z = (rng.standard_normal((batch, n)) + 1j * rng.standard_normal((batch, n))).astype(dtype)
        return {"fft": launchers.launcher("fft_c2c", dev, dtype_of(dtype)), "z_d": put(z, dev),
                "n": n, "z_c": cp.asarray(z), "cp": cp}

    return setup


def benchmarks(ctx) -> list:
    from ._core import Benchmark

    quick = ctx.quick
    out = []

    def add(name, variant, tessera, peer, setup, family, params, peer_name="cupy", **kw):
        out.append(Benchmark(suite=SUITE, name=name, variant=variant, tessera=tessera,
                             peer=peer, setup=setup, sources=_SOURCES[family], params=params,
                             peer_name=peer_name, **kw))

    sizes = (1, 1_000, 1_000_000, 10_000_000) + (() if quick else (100_000_000,))
    targets = {1: 1.2, 10_000_000: 1.02}
    for n in sizes:
        wall = {"timers": _wall_timers, "batch": WALL_BATCH} if n <= 1_000 else {}
        add("overhead", f"float32 {n:.0e}".replace("+0", ""), "x + y", "a + b",
            _overhead(ctx, n), "overhead", {"label": "x + y", "shape": (n,), "dtype": "float32"},
            target=targets.get(n), check=_overhead_check, **wall)
    for dtype in ("float32", "float64"):
        rtol = 1e-4 if dtype == "float32" else 1e-12
        for n in ((2048,) if quick else (4096, 8192)):
            for variant in ("default", "scalar", "warp"):
                # the warp kernel is the one the solvers route dense products to; the
                # scalar one (a thread per row: lanes 4n bytes apart, uncoalesced on a
                # row-major matrix; 11.5x cuBLAS on the H200) is a control row
                target = 1.0 if (dtype, n, variant) == ("float32", 4096, "warp") else None
                add("matvec", f"{dtype} {n}^2 {variant}", "mv(a_d, x_d)",
                    'gemv("N", 1.0, a_c, x_c, 0.0, y_c)', _matvec(ctx, n, dtype, variant),
                    "matvec", {"label": f"matvec {variant}", "shape": (n, n), "dtype": dtype},
                    peer_name="cublas", target=target, check=_result_check(rtol))
    for dtype in ("float32", "float64"):
        rtol = 1e-5 if dtype == "float32" else 1e-13
        for k in ((512,) if quick else (1024, 2048)):
            for variant in ("default", "scalar", "warp"):
                target = round(1 / 1.5, 3) \
                    if (dtype, k, variant != "default") == ("float32", 1024, True) else None
                add("spmv", f"{dtype} poisson {k}^2 {variant}", "sp(*csr_d, shape, x_d)",
                    "s_c @ x_c", _spmv(ctx, k, dtype, variant), "spmv",
                    {"label": f"spmv {variant}", "shape": (k * k, k * k), "dtype": dtype},
                    peer_name="cusparse", target=target, check=_result_check(rtol))
    count, n = (10, 1_000_000) if quick else (10, 10_000_000)
    for op, name in (("adam_step", "adam"), ("adamw_step", "adamw")):
        add(name, f"{count}x{n:.0e}".replace("+0", ""), "step(*dev_args, **kw)", "topt.step()",
            _adam(ctx, op, count, n), "optim",
            {"label": f"{op} vs fused", "tensors": count, "elements": n, "dtype": "float32",
             "bytes_moved": OPTIM_BYTES_PER_PARAM * count * n},
            peer_name="torch", target=1.0, check=_state_check(1e-5), timers=_torch_timers)
    count, side = (6, 1024) if quick else (6, 4096)
    add("adafactor", f"{count}x{side}^2", "step(*dev_args, **kw)", "topt.step()",
        _adafactor(ctx, count, side), "optim",
        {"label": "adafactor_step vs foreach", "tensors": count, "shape": (side, side),
         "dtype": "float32"},
        peer_name="torch", target=0.25, check=_state_check(1e-5), timers=_torch_timers)
    n = 1024 if quick else 4096
    for dtype in ("float32", "bfloat16", "float16"):
        # the 16-bit rows: one cuBLASLt call (16-bit A/B/C/D, float32 accumulation, the
        # bias in its epilogue, the residual as C) against torch's bf16/fp16 addmm + add
        add("linear", f"{dtype} {n}^3", "nn.linear(x, w, b, r)",
            "torch.addmm(tb, tx, tw.T) + tr", _linear(ctx, n, dtype), "linear",
            {"label": "linear bias residual", "m x k x n": f"{n} x {n} x {n}",
             "dtype": dtype},
            peer_name="torch", target=1.0, check=_linear_check, timers=_torch_timers)
    batch = 1024 if quick else 16384
    for dtype in ("complex64", "complex128"):
        add("fft", f"{dtype} {batch}x1024", "fft(z_d, (n,), (1,), 'backward', True)",
            "cp.fft.fft(z_c, axis=-1)", _fft(ctx, batch, 1024, dtype), "fft",
            {"label": "fft_c2c", "shape": (batch, 1024), "dtype": dtype},
            peer_name="cufft", target=round(1 / 0.95, 3) if dtype == "complex64" else None,
            check=_result_check(1e-4 if dtype == "complex64" else 1e-11))
    return out


def info(ctx) -> dict:
    """The peers' versions beside the ratios."""
    out = {}
    for module in ("cupy", "torch"):
        try:
            out[module] = __import__(module).__version__
        except ImportError:
            out[module] = "not installed"
    return out
