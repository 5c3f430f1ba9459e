"""The opencl_kernels suite: OpenCL launchers against the NumPy backend's, same data.

Each benchmark times one launcher registered for an OpenCL device (PoCL on the CPU in
CI; a GPU driver elsewhere) on device buffers, against the NumPy backend's launcher of
the same op on the same host data, both looked up through ``tessera_array.launchers``.
An OpenCL call includes its launch, the result's allocation from the backend's memory
pool and the wait for its result (``finish``); inputs are on the device beforehand.

==============  =======================================================  ===========
benchmark       launcher (quick sizes in brackets)                       target
==============  =======================================================  ===========
matvec          ``matvec`` scalar/warp, float32 513^2 2049^2 4097^2      <= 1.0
                (257^2 1025^2), float64 at the largest where fp64 exists
spmv            ``spmv`` scalar/warp, float32 2-D Poisson 512^2 (128^2)  -
sgd/adam/adamw  the optimizer steps over 10 tensors of 1M (100k) float32,  <= 1.0
                with and without ``check_finite``
adafactor       ``adafactor_step``, 10 x 1000^2 (316^2) float32          <= 1.0
fft             ``fft_c2c`` 64 x 4096, 64 x 4095 (Bluestein), 16 x 65536,  -
                complex128 64 x 4096; ``fft_r2c`` float32 64 x 4096;
                batches of 16 (4 for 65536) with ``--quick``
fft_vkfft       ``fft_c2c`` against pyvkfft on the same device buffers,  -
                where pyvkfft is installed (no wheel on PyPI)
==============  =======================================================  ===========

The ratio is tessera (OpenCL) time / NumPy time: at most 1.0 means the OpenCL
kernel is at least as fast (issue 7's target for matvec and the optimizer steps). The
matvec pairs time single calls, each after ``BLAS_SETTLE_S`` idle and one untimed call
of its own side (``Benchmark.settle_s``, ``prime``): OpenBLAS's worker threads spin
for ~0.1 s after a NumPy call, and a call timed right after NumPy's shares the cores
with them (4097^2 float32 on PoCL: 20.4 ms right after NumPy's call, 9.7 ms 0.3 s
later). Both sides' results are compared before timing.

Beside the ratios, :func:`info` reports each program's cold and warm call: the first
call of a launcher in a fresh process whose program caches are empty (``TESSERA_CACHE_DIR``
and PoCL's cache pointed at an empty folder, NVIDIA's disabled), so it includes the
build, and the second call.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from ._opencl import close, dtype_of, family_sources, needs_dtype, poisson, put

__all__ = ["benchmarks"]

BLAS_SETTLE_S = 0.15
MATVEC_SIZES, QUICK_MATVEC_SIZES = (513, 2049, 4097), (257, 1025)
OPTIM_N, QUICK_OPTIM_N, OPTIM_TENSORS = 1_000_000, 100_000, 10
TARGET = 1.0
_NUMPY_SOURCES = ("backends/numpy/__init__.py", "backends/numpy/_threads.py")


def _finished(r):
    """``r`` once its kernel has finished (an OpenCL call is timed to its result)."""
    r.finish()
    return r


def _device_check(rtol):
    def check(t, p, ns):
        close("result", t.get(), p, rtol)

    return check


def _matvec(ctx, n, dtype, variant):
    def setup():
        from tessera_array import launchers

        dev = ctx.device
        needs_dtype(dev, dtype)
        rng = np.random.default_rng(20261130)
        a = rng.standard_normal((n, n)).astype(dtype)
        x = rng.standard_normal(n).astype(dtype)
        dt = dtype_of(dtype)
        return {"mv": launchers.launcher("matvec", dev, dt, variant),
                "host_mv": launchers.launcher("matvec", "cpu", dt),
                "a_d": put(a, dev), "x_d": put(x, dev), "a": a, "x": x, "done": _finished}

    return setup


def _spmv(ctx, k, variant):
    def setup():
        from tessera_array import launchers

        dev = ctx.device
        s = poisson(k, np.float32)
        x = np.random.default_rng(20261130).standard_normal(s.shape[1]).astype(np.float32)
        return {"sp": launchers.launcher("spmv", dev, dtype_of("float32"), variant),
                "host_sp": launchers.launcher("spmv", "cpu", dtype_of("float32")),
                "csr_d": (put(s.data, dev), put(s.indices, dev), put(s.indptr, dev)),
                "csr": (s.data, s.indices, s.indptr), "shape": s.shape,
                "x_d": put(x, dev), "x": x, "done": _finished}

    return setup


_SGD = {"lr": 0.01, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.0,
        "nesterov": False, "maximize": False, "first": False}
_ADAM = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01,
         "amsgrad": False, "maximize": False, "step": 10}


def _optim_check(t, p, ns):
    # One step each from the same state (the runner evaluates each side once first).
    for d, h in zip(ns["p_d"], ns["p"]):
        close(ns["op"], d.get(), h, 1e-5)


def _optim(ctx, op, n, check_finite):
    def setup():
        from tessera_array import launchers

        dev = ctx.device
        rng = np.random.default_rng(20261130)
        f32 = dtype_of("float32")

        def fresh(zero=False):
            return [np.zeros(n, np.float32) if zero else
                    rng.standard_normal(n, dtype=np.float32) for _ in range(OPTIM_TENSORS)]

        p, g, m, v = fresh(), fresh(), fresh(True), fresh(True)
        kw = dict(_SGD if op == "sgd_step" else _ADAM, check_finite=check_finite)
        p_d, g_d, m_d, v_d = ([put(t, dev) for t in lst] for lst in (p, g, m, v))
        if op == "sgd_step":
            dev_args, host_args = (p_d, g_d, m_d), (p, g, m)
        else:
            dev_args, host_args = (p_d, g_d, m_d, v_d, None), (p, g, m, v, None)
        return {"step": launchers.launcher(op, dev, f32), "host_step": launchers.launcher(
                    op, "cpu", f32), "dev_args": dev_args, "host_args": host_args, "kw": kw,
                "sync": p_d[0].queue.finish, "p_d": p_d, "p": p, "op": op}

    return setup


def _adafactor(ctx, side):
    def setup():
        from tessera_array import launchers
        from tessera_array.optim import adafactor_decay

        dev = ctx.device
        rng = np.random.default_rng(20261130)
        shapes = [(side, side)] * OPTIM_TENSORS
        p = [rng.standard_normal(sh, dtype=np.float32) for sh in shapes]
        g = [rng.standard_normal(sh, dtype=np.float32) for sh in shapes]
        r = [np.zeros((sh[0], 1), np.float32) for sh in shapes]
        c = [np.zeros((1, sh[1]), np.float32) for sh in shapes]
        p_d, g_d, r_d, c_d = ([put(t, dev) for t in lst] for lst in (p, g, r, c))
        none = [None] * len(shapes)
        kw = {"lr": 0.01, "rho": 0.01, "rate": 1 - adafactor_decay(0.999, 10), "eps1": None,
              "eps2": 1e-3, "d": 1.0, "weight_decay": 0.0, "maximize": False}
        f32 = dtype_of("float32")
        return {"step": launchers.launcher("adafactor_step", dev, f32),
                "host_step": launchers.launcher("adafactor_step", "cpu", f32),
                "dev_args": (p_d, g_d, r_d, c_d, none), "host_args": (p, g, r, c, none),
                "kw": kw, "sync": p_d[0].queue.finish, "p_d": p_d, "p": p,
                "op": "adafactor_step"}

    return setup


def _fft(ctx, op, batch, n, dtype, peer="numpy"):
    def setup():
        from tessera_array import launchers

        from ._core import Unavailable

        dev = ctx.device
        needs_dtype(dev, dtype)
        rng = np.random.default_rng(20261130)
        z = rng.standard_normal((batch, n)) + 1j * rng.standard_normal((batch, n))
        z = z.astype(dtype) if op == "fft_c2c" else np.ascontiguousarray(z.real, dtype)
        dt = dtype_of(dtype)
        ns = {"fft": launchers.launcher(op, dev, dt), "z_d": put(z, dev), "z": z,
              "n": n, "done": _finished}
        if peer == "numpy":
            ns["host_fft"] = launchers.launcher(op, "cpu", dt)
        else:
            try:
                import pyopencl.array as cla
                import pyvkfft.opencl as vkfft
            except ImportError as err:
                raise Unavailable(f"pyvkfft is not installed (the peer; no wheel on PyPI): "
                                  f"{err}") from err
            zd = ns["z_d"]
            app = vkfft.VkFFTApp(zd.shape, zd.dtype, zd.queue, ndim=1, inplace=False)

            def vk(x):  # out of place into a fresh array, as fft_c2c returns
                return app.fft(x, cla.empty_like(x))

            ns["vk"] = vk
        return ns

    return setup


def benchmarks(ctx) -> list:
    from ._core import Benchmark

    quick = ctx.quick
    out = []

    def add(name, variant, tessera, peer, setup, sources, params, **kw):
        out.append(Benchmark(suite="opencl_kernels", name=name, variant=variant,
                             tessera=tessera, peer=peer, setup=setup,
                             sources=sources + _NUMPY_SOURCES, params=params,
                             peer_name=kw.pop("peer_name", "numpy backend"), **kw))

    sizes = QUICK_MATVEC_SIZES if quick else MATVEC_SIZES
    mv_src = family_sources(("matvec",), ("matvec",)) + ("backends/numpy/matvec.py",)
    for n in sizes:
        cases = [("float32", "scalar"), ("float32", "warp")]
        if n == sizes[-1]:
            cases.append(("float64", "scalar"))
        for dtype, variant in cases:
            add("matvec", f"{dtype} {n}^2 {variant}", "done(mv(a_d, x_d))", "host_mv(a, x)",
                _matvec(ctx, n, dtype, variant), mv_src,
                {"label": f"matvec {variant} {dtype}", "shape": (n, n), "dtype": dtype},
                target=TARGET, check=_device_check(1e-4 if dtype == "float32" else 1e-12),
                settle_s=BLAS_SETTLE_S, prime=True, batch=1)

    k = 128 if quick else 512
    for variant in ("scalar", "warp"):
        add("spmv", f"float32 poisson {k}^2 {variant}", "done(sp(*csr_d, shape, x_d))",
            "host_sp(*csr, shape, x)", _spmv(ctx, k, variant),
            family_sources(("sparse",), ("spmv",)) + ("backends/numpy/sparse.py",),
            {"label": f"spmv {variant} float32", "shape": (k * k, k * k), "dtype": "float32"},
            check=_device_check(1e-5))

    n = QUICK_OPTIM_N if quick else OPTIM_N
    optim_src = family_sources(("optim",), ("optim",)) + ("backends/numpy/optim.py",)
    for check_finite in (False, True):
        tag = " check_finite" if check_finite else ""
        for op in ("sgd_step", "adam_step", "adamw_step"):
            add(op.split("_")[0], f"{OPTIM_TENSORS}x{n}{tag}",
                "step(*dev_args, **kw) or sync()", "host_step(*host_args, **kw)",
                _optim(ctx, op, n, check_finite), optim_src,
                {"label": f"{op}{tag}", "tensors": OPTIM_TENSORS, "elements": n,
                 "dtype": "float32", "check_finite": check_finite},
                target=TARGET, check=_optim_check)
    side = 316 if quick else 1000
    add("adafactor", f"{OPTIM_TENSORS}x{side}^2", "step(*dev_args, **kw) or sync()",
        "host_step(*host_args, **kw)", _adafactor(ctx, side), optim_src,
        {"label": "adafactor_step", "tensors": OPTIM_TENSORS, "shape": (side, side),
         "dtype": "float32"}, target=TARGET, check=_optim_check)

    batch = 16 if quick else 64
    fft_src = family_sources(("fft",), ("fft",)) + ("backends/numpy/fft.py",)
    fft_cases = [("fft_c2c", batch, 4096, "complex64"), ("fft_c2c", batch, 4095, "complex64"),
                 ("fft_c2c", 4 if quick else 16, 65536, "complex64"),
                 ("fft_c2c", batch, 4096, "complex128"), ("fft_r2c", batch, 4096, "float32")]
    for op, b, n, dtype in fft_cases:
        rtol = 1e-4 if dtype in ("complex64", "float32") else 1e-11
        add("fft", f"{op} {dtype} {b}x{n}", "done(fft(z_d, (n,), (1,), 'backward', True))",
            "host_fft(z, (n,), (1,), 'backward', True)", _fft(ctx, op, b, n, dtype), fft_src,
            {"label": f"{op} {dtype}", "shape": (b, n), "dtype": dtype},
            check=_device_check(rtol))
    for b, n in ((batch, 4096), (batch, 4095)):
        add("fft_vkfft", f"complex64 {b}x{n}",
            "done(fft(z_d, (n,), (1,), 'backward', True))", "done(vk(z_d))",
            _fft(ctx, "fft_c2c", b, n, "complex64", peer="pyvkfft"), fft_src,
            {"label": "fft_c2c", "shape": (b, n), "dtype": "complex64"},
            peer_name="pyvkfft", check=_vk_check)
    return out


def _vk_check(t, p, ns):
    close("fft against pyvkfft", t.get(), p.get(), 1e-4)


# Run in a fresh process: the first call of each launcher (its program built from
# source, the caches empty) and the second, in ms, as JSON on stdout.
_COLD_WARM = r"""
import json, sys, time
import numpy as np
import tessera_array as xp
from tessera_array import launchers

dev, quick = sys.argv[1], sys.argv[2] == "1"
rng = np.random.default_rng(0)

def put(h):
    return launchers.native(xp.asarray(h, device=dev))

f32 = xp.float32
a, x = put(rng.standard_normal((257, 257), dtype=np.float32)), put(np.ones(257, np.float32))
cases = {"matvec.cl float32": lambda: launchers.launcher("matvec", dev, f32)(a, x)}
if not quick:
    idx, ptr = put(np.arange(257, dtype=np.int32)), put(np.arange(258, dtype=np.int32))
    p, g, m = ([put(np.ones(1000, np.float32))] for _ in range(3))
    z = put(np.ones((4, 4096), np.complex64))
    kw = {"lr": 0.01, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.0,
          "nesterov": False, "maximize": False, "first": False}
    cases.update({
        "spmv.cl float32": lambda: launchers.launcher("spmv", dev, f32)(
            x, idx, ptr, (257, 257), x),
        "optim.cl float32": lambda: launchers.launcher("sgd_step", dev, f32)(p, g, m, **kw),
        "fft.cl complex64": lambda: launchers.launcher("fft_c2c", dev, xp.complex64)(
            z, (4096,), (1,), "backward", True),
    })
out = {}
for name, call in cases.items():
    times = []
    for _ in range(2):
        t = time.perf_counter()
        call()
        x.queue.finish()
        times.append((time.perf_counter() - t) * 1e3)
    out[name] = {"cold_ms": round(times[0], 2), "warm_ms": round(times[1], 3)}
print(json.dumps(out))
"""


def info(ctx) -> dict:
    """Cold (first, building) and warm call times of the launchers' programs, in ms."""
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory(prefix="tessera-cold-") as tmp:
        env = dict(os.environ, TESSERA_CACHE_DIR=tmp, POCL_CACHE_DIR=os.path.join(tmp, "pocl"),
                   CUDA_CACHE_DISABLE="1")
        proc = subprocess.run(
            [sys.executable, "-c", _COLD_WARM, str(ctx.device), "1" if ctx.quick else "0"],
            cwd=root, env=env, capture_output=True, text=True, timeout=900, check=False)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        return {"compile": f"the cold-start process failed ({proc.returncode}): {tail[0]}"}
    return {"compile (first call in a fresh process, caches empty / second call)":
            json.loads(proc.stdout.strip().splitlines()[-1])}

