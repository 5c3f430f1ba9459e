"""Probe: where a one-iteration ``cg(A, b, maxiter=1)`` spends its wall time on CUDA.

The issue's 1-iteration target is 60 us of wall time; H100 hosts measured 59-74 us, of
which ~20-27 us is Python before the launch and ~9 us after the read (benchmarks/
NOTES.md, "cg(A, b, maxiter=1) on CUDA"). This probe splits one solve of the dense SPD
2049 float32 system (``q q^T / n + 0.01 I``) into its stages by ``perf_counter_ns``
stamps around the same calls ``_isolve._cg_one_launch`` makes (the dispatch lookup, the
operand, PlainCG's construction, the launch call, launch to read, the read, the report,
the result), medians of ``N`` solves after 20 warm-up ones, after the whole call's median
(with and without ``report=True``).

``--full`` adds the host costs of the pieces (``cupy.empty``, a device context, the
current stream, ``Array._new``), a bare kernel's launch call through CuPy's driver
wrapper and through ctypes (cooperative and not, one block and 264), and a cProfile of
300 solves (calls a solve, the 30 largest own times).

    PYTHONPATH=<installed> python3 -P -m benchmarks.probe_cg_latency [N] [--full]
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import pstats
import statistics
import time

import numpy as np

PC = time.perf_counter_ns


def _median_us(f, n: int) -> tuple:
    for _ in range(20):
        f()
    ts = []
    for _ in range(n):
        t = PC()
        f()
        ts.append(PC() - t)
    return round(statistics.median(ts) / 1e3, 2), round(min(ts) / 1e3, 2)


def _stages(xp, A, b, n: int) -> dict:
    """Each stage's median (us) over n staged solves (the first 20 dropped)."""
    from tessera_array.sparse._routing import matvec_variant
    from tessera_array.sparse.linalg import _isolve
    from tessera_array.sparse.linalg._fused import FusedOperand

    names = ("lookup", "operand", "construct", "pre_launch", "launch", "launch_to_read",
             "read", "report", "result")
    got = {k: [] for k in names}

    def one():
        t0 = PC()
        plain = _isolve._fused_cg_for(xp, b).plain
        t1 = PC()
        variant = matvec_variant("cg", "dense", b._device.backend.name)
        op = FusedOperand(None, "dense", (A._data,), variant)
        t2 = PC()
        solve = plain(b._data, op, 1e-5, 0.0, 1)
        t3 = PC()
        marks = {}
        launch, read = solve._launch, solve._read

        def timed_launch(*a):
            marks["l0"] = PC()
            launch(*a)
            marks["l1"] = PC()

        def timed_read(count):
            marks["r0"] = PC()
            out = read(count)
            marks["r1"] = PC()
            return out

        solve._launch, solve._read = timed_launch, timed_read
        out = solve.run(1)
        t4 = PC()
        x = xp.Array._new(solve.x, b._dtype, b._device)
        _isolve._finish(False, x, 1, out.iterations, list(out.residual_norms))
        t5 = PC()
        for k, v in zip(names, (t1 - t0, t2 - t1, t3 - t2, marks["l0"] - t3,
                                marks["l1"] - marks["l0"], marks["r0"] - marks["l1"],
                                marks["r1"] - marks["r0"], t4 - marks["r1"], t5 - t4)):
            got[k].append(v)

    for _ in range(n + 20):
        one()
    return {k: round(statistics.median(v[20:]) / 1e3, 2) for k, v in got.items()}


def _launch_costs(n: int) -> dict:
    """The host's time in a bare kernel's launch call (the stream drained after each)."""
    import cupy

    k = cupy.RawKernel(r'extern "C" __global__ void nothing(int *p) { if (p) *p = 1; }',
                       "nothing")
    k.compile()
    stream = cupy.cuda.get_current_stream()
    arg = ctypes.c_void_p(0)
    params = (ctypes.c_void_p * 1)(ctypes.addressof(arg))
    drv = cupy.cuda.driver
    lib = ctypes.CDLL("libcuda.so.1").cuLaunchCooperativeKernel
    lib.restype = ctypes.c_int
    lib.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 2
    out = {}
    for blocks in (1, 264):
        calls = {
            "cooperative": lambda blocks=blocks: drv.launchCooperativeKernel(
                k.kernel.ptr, blocks, 1, 1, 256, 1, 1, 0, stream.ptr, ctypes.addressof(params)),
            "plain": lambda blocks=blocks: drv.launchKernel(
                k.kernel.ptr, blocks, 1, 1, 256, 1, 1, 0, stream.ptr, ctypes.addressof(params), 0),
            "cooperative, ctypes": lambda blocks=blocks: lib(
                k.kernel.ptr, blocks, 1, 1, 256, 1, 1, 0, stream.ptr, params),
        }
        for name, call in calls.items():
            ts = []
            for i in range(n + 20):
                t = PC()
                call()
                ts.append(PC() - t)
                stream.synchronize()
            out[f"{name}, {blocks} blocks"] = round(statistics.median(ts[20:]) / 1e3, 2)
    out["stream.synchronize, idle"] = _median_us(stream.synchronize, n)[0]
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("n", nargs="?", type=int, default=400, help="solves a median (400)")
    p.add_argument("--full", action="store_true", help="also the pieces and a cProfile")
    args = p.parse_args(argv)
    import cupy

    import tessera_array as xp
    from tessera_array.sparse.linalg import cg

    n, size = args.n, 2049
    rng = np.random.default_rng(0)
    q = rng.standard_normal((size, size)).astype(np.float32)
    A = xp.asarray((q @ q.T / size + 0.01 * np.eye(size)).astype(np.float32), device="cuda:0")
    b = xp.asarray(rng.standard_normal(size).astype(np.float32), device="cuda:0")
    print(cupy.cuda.runtime.getDeviceProperties(0)["name"].decode())
    print("cg(A, b, maxiter=1) us, median / min:", _median_us(lambda: cg(A, b, maxiter=1), n))
    print("  with report=True:", _median_us(lambda: cg(A, b, maxiter=1, report=True), n))
    for k, v in _stages(xp, A, b, n).items():
        print(f"  {k:16s} {v:7.2f} us")
    if not args.full:
        return
    bc = b._data
    dev = bc.device
    pieces = {
        "cupy.empty((n,))": lambda: cupy.empty((size,), np.float32),
        "with device": lambda: dev.__enter__() and dev.__exit__(None, None, None),
        "get_current_stream": cupy.cuda.get_current_stream,
        "flags.c_contiguous": lambda: bc.flags.c_contiguous,
        "data.ptr": lambda: bc.data.ptr,
        "Array._new": lambda: xp.Array._new(bc, b._dtype, b._device),
    }
    print("pieces (us, median / min):")
    for k, f in pieces.items():
        print(f"  {k:22s} {_median_us(f, n)}")
    print("launch calls (us, medians):")
    for k, v in _launch_costs(200).items():
        print(f"  {k:30s} {v}")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(300):
        cg(A, b, maxiter=1)
    prof.disable()
    st = pstats.Stats(prof)
    print("calls a solve:", st.total_calls / 300)
    st.sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
