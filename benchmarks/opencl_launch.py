"""Host microseconds per OpenCL launcher call (the Python around each kernel).

``python -m benchmarks.opencl_launch [--against DIR] [--reps R]`` times
host microseconds per launcher call on tiny inputs (the kernel costs nothing), as
thread-CPU time (wall time in brackets): ``floor``, the call's kernel invocations
alone (the ``enqueue_knl_*`` invokers, replayed with the call's own arguments);
``now``, the whole call; ``now py``, the whole call with every kernel a stub that
enqueues nothing: the launcher's own Python, the result's allocation included.
``--against DIR`` loads ``matvec.py``, ``sparse.py`` and ``optim.py`` from DIR (e.g.
an older commit's, from ``git show``) beside the current ones (``before``,
``before py``), alternating rep by rep.
"""

from __future__ import annotations

import numpy as np

__all__ = ["host_costs", "main"]

def _load_from(directory: str, name: str):
    """Module ``name`` of DIR, loaded as a sibling of this package's modules."""
    import importlib.util
    import os

    spec = importlib.util.spec_from_file_location(
        f"tessera_array.backends.opencl._against_{name}", os.path.join(directory, f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class _Recorder:
    """Stands in for a kernel during one call, keeping each invocation's arguments."""

    def __init__(self, knl, calls):
        self._knl, self._calls = knl, calls

    def __call__(self, *args, **kwargs):
        self._calls.append((self._knl, args, kwargs))
        return self._knl(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._knl, name)


def _cases(mods, queue, alloc):
    """``{name: callable}`` of tiny launcher calls over the modules in ``mods``."""
    import pyopencl.array as cla

    rng = np.random.default_rng(0)
    f32 = np.float32

    def dev(a):
        a = np.asarray(a)
        out = cla.empty(queue, a.shape, a.dtype, allocator=alloc)
        if a.size:
            out.set(a)
        return out

    a = dev(rng.standard_normal((8, 8)).astype(f32))
    x, y = dev(rng.standard_normal(8).astype(f32)), dev(rng.standard_normal(8).astype(f32))
    alpha = dev(np.array(0.5, f32))
    data, ind = dev(rng.standard_normal(8).astype(f32)), dev(np.arange(8, dtype=np.int32))
    ptr = dev(np.arange(9, dtype=np.int32))
    t = 10
    p = [dev(rng.standard_normal(4).astype(f32)) for _ in range(t)]
    g = [dev(rng.standard_normal(4).astype(f32)) for _ in range(t)]
    m1 = [dev(np.zeros(4, f32)) for _ in range(t)]
    m2 = [dev(np.zeros(4, f32)) for _ in range(t)]
    sgd = {"lr": 0.01, "momentum": 0.9, "dampening": 0.0, "weight_decay": 0.01,
           "nesterov": False, "maximize": False, "first": False}
    adam = {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01,
            "amsgrad": False, "maximize": False, "step": 3}
    mv, sp, op = mods
    return {
        "matvec scalar 8x8": (mv, lambda: mv.dense_matvec_scalar(a, x)),
        "matvec warp 8x8": (mv, lambda: mv.dense_matvec_warp(a, x)),
        "axpy host alpha, 8": (mv, lambda: mv.axpy(0.5, x, y)),
        "axpy device alpha, 8": (mv, lambda: mv.axpy(alpha, x, y)),
        "spmv scalar 8x8": (sp, lambda: sp.spmv_scalar(data, ind, ptr, (8, 8), x)),
        "spmv warp 8x8": (sp, lambda: sp.spmv_warp(data, ind, ptr, (8, 8), x)),
        "sgd_step, 10 tensors": (op, lambda: op.sgd_step(p, g, m1, **sgd)),
        "adam_step, 10 tensors": (op, lambda: op.adam_step(p, g, m1, m2, None, **adam)),
        "adamw_step, 10 tensors": (op, lambda: op.adamw_step(p, g, m1, m2, None, **adam)),
    }


class _Stub:
    """Stands in for a kernel: returns a finished event, enqueues nothing (the launcher's
    own Python is all that a call through it costs)."""

    def __init__(self, knl, evt):
        self._knl, self._evt = knl, evt

    def __call__(self, *args, **kwargs):
        return self._evt

    def __getattr__(self, name):
        return getattr(self._knl, name)


def _patched_kernels(programs, wrap, modules):
    """Context manager: ``programs.kernel`` returns ``wrap(kernel)``; the launcher
    modules' caches are emptied on entry and on exit (so none keeps a wrapped kernel)."""
    import contextlib

    @contextlib.contextmanager
    def patched():
        real = programs.kernel
        programs.kernel = lambda *a, **k: wrap(real(*a, **k))
        for mod in modules:
            mod._setup.clear()
        try:
            yield
        finally:
            programs.kernel = real
            for mod in modules:
                mod._setup.clear()

    return patched()


def _floor(mod, call, programs):
    """A callable replaying the kernel invocations of one ``call()`` with its arguments."""
    calls = []
    with _patched_kernels(programs, lambda knl: _Recorder(knl, calls), (mod,)):
        call()

    def replay():
        for knl, args, kwargs in calls:
            knl(*args, **kwargs)

    return replay


def _timed(queue, runs, batch, reps, table):
    """Alternate the callables of ``table`` ({case: {side: callable}}) rep by rep."""
    import time

    for _ in range(reps):
        for name, per in table.items():
            for side, call in per.items():
                queue.finish()
                w0, c0 = time.perf_counter(), time.thread_time()
                for _ in range(batch):
                    call()
                w1, c1 = time.perf_counter(), time.thread_time()
                runs[name].setdefault(side, []).append(
                    ((w1 - w0) * 1e6 / batch, (c1 - c0) * 1e6 / batch))
    queue.finish()


def host_costs(against: str | None = None, reps: int = 21, batch: int = 100) -> dict:
    """``{case: {side: (wall us, thread-CPU us)}}``, medians over ``reps`` batches of
    ``batch`` calls each (the queue drained, untimed, between batches). Sides: ``floor``
    (the call's kernel invocations alone), ``now`` and ``before`` (whole calls), and
    ``now py`` / ``before py`` (whole calls with every kernel a stub that enqueues
    nothing: the launcher's Python, allocation of the result included)."""
    import pyopencl as cl

    from tessera_array.backends.opencl import _kernels, _programs, matvec, optim, sparse

    ctx = cl.create_some_context(interactive=False)
    queue = cl.CommandQueue(ctx)
    alloc = _kernels.allocator(queue)
    mods = {"now": (matvec, sparse, optim)}
    if against:
        mods["before"] = tuple(_load_from(against, n) for n in ("matvec", "sparse", "optim"))
    sides = {side: _cases(m, queue, alloc) for side, m in mods.items()}
    every = [m for ms in mods.values() for m in ms]
    runs = {name: {} for name in sides["now"]}
    table = {name: {} for name in runs}
    for name, (mod, call) in sides["now"].items():
        call()
        table[name]["floor"] = _floor(mod, call, _programs)
    for side, cases in sides.items():
        for name, (_, call) in cases.items():
            call()
            table[name][side] = call
    _timed(queue, runs, batch, reps, table)
    done = cl.enqueue_marker(queue)
    done.wait()
    stubs = {}

    def stub(knl):
        return stubs.setdefault(knl, _Stub(knl, done))

    with _patched_kernels(_programs, stub, every):
        table = {name: {f"{side} py": sides[side][name][1] for side in sides} for name in runs}
        for per in table.values():
            for call in per.values():
                call()
        _timed(queue, runs, batch, reps, table)
    return {name: {side: (float(np.median([w for w, _ in v])),
                          float(np.median([c for _, c in v])))
                   for side, v in per.items()}
            for name, per in runs.items()}


def main(argv=None) -> None:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m benchmarks.opencl_launch")
    ap.add_argument("--against", help="a folder with older matvec.py, sparse.py, optim.py")
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--batch", type=int, default=100)
    args = ap.parse_args(argv)
    res = host_costs(args.against, args.reps, args.batch)
    cols = [c for c in ("floor", "before", "before py", "now", "now py")
            if c in next(iter(res.values()))]
    print(f"host us per call, medians of {args.reps} batches of {args.batch} calls, "
          "thread-CPU time (wall)")
    print(f"{'launcher':24}" + "".join(f"{c:>16}" for c in cols))
    for name, per in res.items():
        print(f"{name:24}" + "".join(f"{per[c][1]:9.1f} ({per[c][0]:4.0f})" for c in cols))


if __name__ == "__main__":
    main()
