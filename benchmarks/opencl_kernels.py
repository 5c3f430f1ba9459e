"""The OpenCL kernel launchers against the NumPy backend's, on the same inputs, same run.

``python -m benchmarks.opencl_kernels [--quick] [--repeat N] [--json PATH]``

Times each launcher of ``backends/opencl/{matvec,sparse,optim}.py`` on an OpenCL
device (platform 0 device 0, or ``PYOPENCL_CTX``; PoCL on the CPU in CI) and the
NumPy backend's launcher of the same op on the same host data, alternating the two
sides rep by rep so that a shared machine's load falls on both. An OpenCL time
includes the launch and ``queue.finish()`` (the result is ready), the output
allocation through the arrays' allocator (the backend's memory pool, as the namespace's
arrays have it), and nothing else: inputs are on the device beforehand. The matvec pairs wait
:data:`BLAS_SETTLE_S` and make one untimed call before each timed call on either
side, so that OpenBLAS's worker threads, which spin for ~0.1 s after a NumPy call,
are awake for NumPy's timed call and asleep for OpenCL's.

The ratio is ``numpy time / opencl time`` of the medians: 1.0 or more means the
OpenCL kernel is at least as fast. Issue 7's target on PoCL: >= 1.0 for matvec and
the optimizer steps. Also reported: the device and driver, the machine's load, and
each program's cold (first, compiling) and warm call times.

This is a separate module rather than a suite of ``benchmarks/_suites.py``: the
suites time the tessera namespace on one device, while this compares two backends'
launchers, below the namespace, in one process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from functools import partial

import numpy as np

__all__ = ["main", "run"]

MATVEC_SIZES = (513, 2049, 4097)
QUICK_MATVEC_SIZES = (257, 1025)
OPTIM_LAYOUT = [(1_000_000,)] * 10
QUICK_OPTIM_LAYOUT = [(100_000,)] * 10
# OpenBLAS's worker threads spin for 2^28 TSC ticks (~0.11 s here;
# OPENBLAS_THREAD_TIMEOUT=28, its default) after each threaded call before they sleep:
# a call timed right after `a @ x` shares the cores with that spinning thread. Measured
# on the 2-core EPYC (PoCL 3.0, load average 7, 4097^2 float32 matvec, medians of 21):
# OpenCL 20.4 ms right after NumPy's call, 9.7 ms 0.3 s later; with
# OPENBLAS_THREAD_TIMEOUT=4, 15.0 and 13.0 ms. So the matvec pairs pause this long
# before each side's untimed and timed calls (_pair).
BLAS_SETTLE_S = 0.15
TARGETS = {"matvec": 1.0, "sgd_step": 1.0, "adam_step": 1.0, "adamw_step": 1.0,
           "adafactor_step": 1.0}


def _context():
    import pyopencl as cl

    if os.environ.get("PYOPENCL_CTX"):
        return cl.create_some_context(interactive=False)
    return cl.Context([cl.get_platforms()[0].get_devices()[0]])


def _pair(host_call, dev_call, queue, repeat, settle=0.0):
    """Medians (s) of the two sides, alternated rep by rep after one warm-up each.

    With ``settle`` > 0 each side's timed call follows ``settle`` seconds idle and one
    untimed call of its own, so each side is timed in its own steady state (for NumPy,
    its BLAS threads awake; for OpenCL, the cores free of them: see
    :data:`BLAS_SETTLE_S`).
    """
    host_call()
    dev_call()
    queue.finish()
    th, td = [], []
    for _ in range(repeat):
        if settle:
            time.sleep(settle)
            host_call()
        t = time.perf_counter()
        host_call()
        th.append(time.perf_counter() - t)
        if settle:
            time.sleep(settle)
            dev_call()
            queue.finish()
        t = time.perf_counter()
        dev_call()
        queue.finish()
        td.append(time.perf_counter() - t)
    return statistics.median(th), statistics.median(td)


def _poisson(k):
    """The 5-point Laplacian on a k x k grid, CSR (int32 indices), float32."""
    import scipy.sparse as sp

    one = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    a = sp.kronsum(one, one, format="csr").astype(np.float32)
    a.sort_indices()
    return a


def run(quick=False, repeat=15):
    import pyopencl as cl
    import pyopencl.array as cla
    from tessera_array.backends.numpy import matvec as nmv
    from tessera_array.backends.numpy import optim as nop
    from tessera_array.backends.numpy import sparse as nsp
    from tessera_array.backends.opencl import _programs
    from tessera_array.backends.opencl import matvec as cmv
    from tessera_array.backends.opencl import optim as cop
    from tessera_array.backends.opencl import sparse as csp

    from tessera_array.optim.adafactor import adafactor_decay

    ctx = _context()
    queue = cl.CommandQueue(ctx)
    # Device arrays come from the backend's memory pool, as the namespace's do, so results
    # and scratch are allocated as they are for a user (a pyopencl array made without an
    # allocator costs a driver allocation per result: 513^2 matvec on PoCL, 101 -> 65 us).
    from tessera_array.backends.opencl import _kernels

    to_device = partial(cla.to_device, queue, allocator=_kernels.allocator(queue))
    dev = ctx.devices[0]
    rng = np.random.default_rng(20261130)
    rows = []

    def record(bench, op, t_np, t_cl, extra=None):
        row = {"bench": bench, "op": op, "numpy_ms": t_np * 1e3, "opencl_ms": t_cl * 1e3,
               "ratio": t_np / t_cl, "target": TARGETS.get(op)}
        row.update(extra or {})
        rows.append(row)
        tgt = "" if row["target"] is None else f"  target >= {row['target']:.1f}"
        print(f"{bench:<32} numpy {row['numpy_ms']:9.3f} ms  opencl {row['opencl_ms']:9.3f} ms"
              f"  ratio {row['ratio']:5.2f}{tgt}", flush=True)

    def cold_warm(name, call):
        from tessera_array.backends.opencl import fft as cfft

        _programs.clear_cache()
        cfft.clear_plans()
        for mod in (cmv, csp, cop):
            mod._setup.clear()
        t = time.perf_counter()
        call()
        queue.finish()
        cold = time.perf_counter() - t
        t = time.perf_counter()
        call()
        queue.finish()
        warm = time.perf_counter() - t
        print(f"compile {name:<24} cold {cold * 1e3:9.1f} ms  warm {warm * 1e3:9.3f} ms",
              flush=True)
        return {"program": name, "cold_ms": cold * 1e3, "warm_ms": warm * 1e3}

    # dense matvec
    compiles = []
    sizes = QUICK_MATVEC_SIZES if quick else MATVEC_SIZES
    for n in sizes:
        a = rng.standard_normal((n, n), dtype=np.float32)
        x = rng.standard_normal(n, dtype=np.float32)
        a_d, x_d = to_device(a), to_device(x)
        if not compiles:
            compiles.append(cold_warm("matvec.cl float32",
                                      partial(cmv.dense_matvec_scalar, a_d, x_d)))
        for variant in ("scalar", "warp"):
            launch = getattr(cmv, f"dense_matvec_{variant}")
            t_np, t_cl = _pair(partial(nmv.dense_matvec, a, x), partial(launch, a_d, x_d),
                               queue, repeat, BLAS_SETTLE_S)
            record(f"matvec f32 {n}x{n} {variant}", "matvec", t_np, t_cl)
        if n == sizes[-1] and "cl_khr_fp64" in dev.extensions.split():
            a, x = a.astype(np.float64), x.astype(np.float64)  # float64 at the largest size
            a_d, x_d = to_device(a), to_device(x)
            t_np, t_cl = _pair(partial(nmv.dense_matvec, a, x),
                               partial(cmv.dense_matvec_scalar, a_d, x_d), queue, repeat,
                               BLAS_SETTLE_S)
            record(f"matvec f64 {n}x{n} scalar", "matvec", t_np, t_cl)

    # CSR spmv
    k = 128 if quick else 512
    s = _poisson(k)
    x = rng.standard_normal(s.shape[1], dtype=np.float32)
    dd = [to_device(v) for v in (s.data, s.indices, s.indptr, x)]
    compiles.append(cold_warm("spmv.cl float32",
                              partial(csp.spmv_scalar, *dd[:3], s.shape, dd[3])))
    for variant in ("scalar", "warp"):
        launch = getattr(csp, f"spmv_{variant}")
        t_np, t_cl = _pair(partial(nsp.spmv, s.data, s.indices, s.indptr, s.shape, x),
                           partial(launch, *dd[:3], s.shape, dd[3]), queue, repeat)
        record(f"spmv f32 poisson {k}^2 {variant}", "spmv", t_np, t_cl)

    # optimizer steps
    layout = QUICK_OPTIM_LAYOUT if quick else OPTIM_LAYOUT
    total = sum(int(np.prod(sh)) for sh in layout)
    label = f"{len(layout)}x{total // len(layout)}"

    def fresh(zero=False):
        host = [np.zeros(sh, np.float32) if zero else rng.standard_normal(sh, dtype=np.float32)
                for sh in layout]
        return host, [to_device(h) for h in host]

    p_h, p_d = fresh()
    g_h, g_d = fresh()
    (m_h, m_d), (v_h, v_d) = fresh(True), fresh(True)
    sgd_kw = {"lr": 0.01, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.0,
              "nesterov": False, "maximize": False, "first": False}
    adam_kw = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01,
               "amsgrad": False, "maximize": False, "step": 10}
    compiles.append(cold_warm("optim.cl float32", partial(cop.sgd_step, p_d, g_d, m_d,
                                                          **sgd_kw)))
    for check in (False, True):
        tag = " check_finite" if check else ""
        t_np, t_cl = _pair(partial(nop.sgd_step, p_h, g_h, m_h, check_finite=check, **sgd_kw),
                           partial(cop.sgd_step, p_d, g_d, m_d, check_finite=check, **sgd_kw),
                           queue, repeat)
        record(f"sgd momentum {label}{tag}", "sgd_step", t_np, t_cl)
        for op in ("adam_step", "adamw_step"):
            t_np, t_cl = _pair(
                partial(getattr(nop, op), p_h, g_h, m_h, v_h, None, check_finite=check,
                        **adam_kw),
                partial(getattr(cop, op), p_d, g_d, m_d, v_d, None, check_finite=check,
                        **adam_kw),
                queue, repeat)
            record(f"{op.split('_')[0]} {label}{tag}", op, t_np, t_cl)
    # Adafactor on matrices (factored moments): the same element count as 1000 x 1000 each
    shapes = [(1000, 1000)] * len(layout) if not quick else [(316, 316)] * len(layout)
    pf_h = [rng.standard_normal(sh, dtype=np.float32) for sh in shapes]
    gf_h = [rng.standard_normal(sh, dtype=np.float32) for sh in shapes]
    r_h = [np.zeros((sh[0], 1), np.float32) for sh in shapes]
    c_h = [np.zeros((1, sh[1]), np.float32) for sh in shapes]
    pf_d, gf_d, r_d, c_d = ([to_device(h) for h in lst]
                            for lst in (pf_h, gf_h, r_h, c_h))
    none = [None] * len(shapes)
    af_kw = {"lr": 0.01, "rho": 0.01, "rate": 1 - adafactor_decay(0.999, 10), "eps1": None,
             "eps2": 1e-3, "d": 1.0, "weight_decay": 0.0, "maximize": False}
    t_np, t_cl = _pair(lambda: nop.adafactor_step(pf_h, gf_h, r_h, c_h, none, **af_kw),
                       lambda: cop.adafactor_step(pf_d, gf_d, r_d, c_d, none, **af_kw),
                       queue, repeat)
    record(f"adafactor {len(shapes)}x{shapes[0][0]}x{shapes[0][1]}", "adafactor_step",
           t_np, t_cl)

    # FFT: batched rows, a power of two (radix-8/4/2 Stockham passes) and its neighbour
    # (Bluestein), a long row (global passes), complex128; pyvkfft beside them if installed
    from tessera_array.backends.numpy import fft as nfft
    from tessera_array.backends.opencl import fft as cfft

    eng = nfft.pick_engine()
    batch = 16 if quick else 64
    fp64 = "cl_khr_fp64" in dev.extensions.split()
    fft_cases = [(batch, 4096, np.complex64, True), (batch, 4095, np.complex64, True),
                 (4 if quick else 16, 65536, np.complex64, False)]
    if fp64:
        fft_cases.append((batch, 4096, np.complex128, False))
    try:
        import pyvkfft.opencl as vkfft
    except ImportError:  # not a dependency: no wheel on PyPI (fft.py's docstring)
        vkfft = None

    def vkfft_call(app, x):  # out of place into a fresh array, as fft_c2c returns
        return app.fft(x, cla.empty_like(x))

    for b, n, cdt, with_r2c in fft_cases:
        tag = "c64" if cdt == np.complex64 else "c128"
        z = (rng.standard_normal((b, n)) + 1j * rng.standard_normal((b, n))).astype(cdt)
        z_d = to_device(z)
        if n == 4096 and cdt == np.complex64:
            compiles.append(cold_warm("fft.cl complex64",
                                      partial(cfft.fft_c2c, z_d, (n,), (1,), "backward", True)))
        m = n if n & (n - 1) == 0 else 1 << (2 * n - 2).bit_length()
        passes = len(cfft._radices(m)) * (1 if m == n else 2)
        t_np, t_cl = _pair(partial(eng.c2c, z, (n,), (1,), "backward", True),
                           partial(cfft.fft_c2c, z_d, (n,), (1,), "backward", True),
                           queue, repeat)
        record(f"fft c2c {tag} {b}x{n}", "fft_c2c", t_np, t_cl, {"passes": passes})
        if n == 4096 and cdt == np.complex64 and n > cfft.LOCAL_MAX_N:
            # the one-launch local-memory kernel on the same rows (fft.py's LOCAL_MAX_N),
            # where the row fits the device's local memory
            keep, cfft.LOCAL_MAX_N = cfft.LOCAL_MAX_N, n
            try:
                fits = cfft._local_shape(cfft._Ctx("bench", z_d, cdt), n, b) is not None
                if fits:
                    t_np, t_cl = _pair(partial(eng.c2c, z, (n,), (1,), "backward", True),
                                       partial(cfft.fft_c2c, z_d, (n,), (1,), "backward",
                                               True), queue, repeat)
            finally:
                cfft.LOCAL_MAX_N = keep
            if fits:
                record(f"fft c2c {tag} {b}x{n} local", "fft_c2c_local", t_np, t_cl)
        if vkfft is not None:
            app = vkfft.VkFFTApp(z_d.shape, z_d.dtype, queue, ndim=1, inplace=False)
            t_np, t_cl = _pair(partial(eng.c2c, z, (n,), (1,), "backward", True),
                               partial(vkfft_call, app, z_d), queue, repeat)
            record(f"fft c2c {tag} {b}x{n} pyvkfft", "fft_c2c_pyvkfft", t_np, t_cl)
        if not with_r2c:
            continue
        zr = np.ascontiguousarray(z.real)
        zr_d = to_device(zr)
        t_np, t_cl = _pair(partial(eng.r2c, zr, (n,), (1,), "backward", True),
                           partial(cfft.fft_r2c, zr_d, (n,), (1,), "backward", True),
                           queue, repeat)
        record(f"fft r2c f32 {b}x{n}", "fft_r2c", t_np, t_cl)

    try:
        load = [round(v, 2) for v in os.getloadavg()]
    except OSError:
        load = None
    return {
        "device": dev.name.strip(),
        "platform": dev.platform.name,
        "driver": dev.driver_version,
        "opencl": dev.version,
        "cores": os.cpu_count(),
        "load_after": load,
        "repeat": repeat,
        "quick": quick,
        "compiles": compiles,
        "results": rows,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.opencl_kernels",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--repeat", type=int, default=15, help="timed reps per side")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    try:
        load = [round(v, 2) for v in os.getloadavg()]
    except OSError:
        load = None
    print(f"load average before: {load}", flush=True)
    out = run(quick=args.quick, repeat=args.repeat)
    print(f"device: {out['device']} ({out['platform']}, driver {out['driver']}); "
          f"load after: {out['load_after']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
