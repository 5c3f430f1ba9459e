"""The opencl_launch suite: the host's cost of an OpenCL launcher call.

Each benchmark calls one launcher registered for an OpenCL device on tiny inputs
(8 x 8 matrices, 8-element vectors, 10 tensors of 4 elements: the kernel costs
nothing), so what is timed is the Python around the kernel: checks, the launch-plan
lookup, the result's allocation from the backend's memory pool, the enqueues. The peer
is the floor any launcher pays: the same number of enqueues of a one-argument no-op
kernel straight through PyOpenCL (one for matvec, axpy and spmv; one per tensor for the
optimizer steps). The ratio is how many times that floor a launcher call costs.

Timer: ``DrainedQueueTimer``, thread CPU time of a batch of calls with the queue
drained (untimed) before each batch, so neither the device's work nor other processes
on a shared machine are counted.
"""

from __future__ import annotations

import numpy as np

from ._opencl import family_sources, put

__all__ = ["benchmarks"]

TENSORS = 10
_NOOP = "__kernel void tessera_bench_noop(__global float *y) { }"


def _drained(ns):
    from ._core import DrainedQueueTimer

    timer = DrainedQueueTimer(ns["queue"])
    return timer, timer


def _setup(ctx, case):
    def setup():
        import pyopencl as cl

        import tessera_array as xp
        from tessera_array import launchers

        dev = ctx.device
        f32 = xp.float32
        rng = np.random.default_rng(0)
        x = put(rng.standard_normal(8).astype(np.float32), dev)
        queue = x.queue
        noop = cl.Program(x.context, _NOOP).build().tessera_bench_noop
        ns = {"queue": queue, "knl": noop, "y": x.base_data}
        if case in ("matvec scalar", "matvec warp"):
            ns.update(call=launchers.launcher("matvec", dev, f32, case.split()[1]),
                      args=(put(rng.standard_normal((8, 8)).astype(np.float32), dev), x))
        elif case in ("axpy host alpha", "axpy device alpha"):
            alpha = 0.5 if case.startswith("axpy host") else put(np.array(0.5, np.float32),
                                                                 dev)
            ns.update(call=launchers.launcher("axpy", dev, f32),
                      args=(alpha, x, put(rng.standard_normal(8).astype(np.float32), dev)))
        elif case in ("spmv scalar", "spmv warp"):
            data = put(rng.standard_normal(8).astype(np.float32), dev)
            ind, ptr = put(np.arange(8, dtype=np.int32), dev), put(np.arange(9, dtype=np.int32),
                                                                   dev)
            ns.update(call=launchers.launcher("spmv", dev, f32, case.split()[1]),
                      args=(data, ind, ptr, (8, 8), x))
        else:  # an optimizer step over TENSORS tensors
            op = case.split()[0]

            def tensors(zero=False):
                return [put(np.zeros(4, np.float32) if zero else
                            rng.standard_normal(4).astype(np.float32), dev)
                        for _ in range(TENSORS)]

            p, g, m1, m2 = tensors(), tensors(), tensors(True), tensors(True)
            if op == "sgd_step":
                kw = {"lr": 0.01, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.01,
                      "nesterov": False, "maximize": False, "first": False}
                args = (p, g, m1)
            else:
                kw = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                      "weight_decay": 0.01, "amsgrad": False, "maximize": False, "step": 3}
                args = (p, g, m1, m2, None)
            ns.update(call=launchers.launcher(op, dev, f32), args=args, kw=kw)
        return ns

    return setup


def _no_check(t, p, ns):
    return None  # tiny calls timed for their host cost; their results are the tests' concern


CASES = (
    ("matvec", "scalar", "matvec scalar", 1, ("matvec",), ("matvec",)),
    ("matvec", "warp", "matvec warp", 1, ("matvec",), ("matvec",)),
    ("axpy", "host alpha", "axpy host alpha", 1, ("matvec",), ("matvec",)),
    ("axpy", "device alpha", "axpy device alpha", 1, ("matvec",), ("matvec",)),
    ("spmv", "scalar", "spmv scalar", 1, ("sparse",), ("spmv",)),
    ("spmv", "warp", "spmv warp", 1, ("sparse",), ("spmv",)),
    ("sgd_step", f"{TENSORS} tensors", "sgd_step", TENSORS, ("optim",), ("optim",)),
    ("adam_step", f"{TENSORS} tensors", "adam_step", TENSORS, ("optim",), ("optim",)),
    ("adamw_step", f"{TENSORS} tensors", "adamw_step", TENSORS, ("optim",), ("optim",)),
)


def benchmarks(ctx) -> list:
    from ._core import Benchmark

    out = []
    for name, variant, case, launches, modules, kernels in CASES:
        tessera = "call(*args, **kw)" if launches > 1 else "call(*args)"
        peer = "(" + ", ".join(["knl(queue, (1,), None, y)"] * launches) + ",)"
        out.append(Benchmark(
            suite="opencl_launch", name=name, variant=variant, tessera=tessera, peer=peer,
            setup=_setup(ctx, case), sources=family_sources(modules, kernels),
            params={"label": case, "enqueues": launches}, peer_name="pyopencl enqueue",
            check=_no_check, timers=_drained,
        ))
    return out
