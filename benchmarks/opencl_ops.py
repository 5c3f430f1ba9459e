"""The opencl_ops suite: the namespace's native OpenCL ops against the host path.

Before the OpenCL backend had kernels for them, ``matmul`` and ``sort`` ran through
the host: a copy of the operands to the host, NumPy, a copy of the result back. Each
benchmark times the native op on tessera arrays of an OpenCL device against that host
path spelled with the public API, both ending with the result on the host (so both
wait for the device):

=======  ===================================================  =============================
name     tessera                                              peer (host path)
=======  ===================================================  =============================
matmul   ``fetch(a @ b)``, float32/float64, n x n, n = 16,    ``fetch(put(fetch(a) @
         64, 256, 512 (64, 256 with ``--quick``)              fetch(b)))``
sort     ``fetch(xp.sort(a))``, float64, n = 1000, 100000     ``fetch(put(np.sort(fetch(a))))``
=======  ===================================================  =============================

``fetch`` copies an array to a NumPy array, ``put`` copies a NumPy array to the
device. On PoCL the "device" is the host's own CPU, where OpenBLAS and NumPy's sort
win; the native kernels are there so that on a GPU no product or sort goes through
the host. The ratio is native time / host-path time (below 1: the native op wins).
"""

from __future__ import annotations

import numpy as np

from ._opencl import CORE_SOURCES, close, needs_dtype

__all__ = ["benchmarks"]


def _setup(ctx, op, n, dtype):
    def setup():
        import tessera_array as xp
        from tessera_array import launchers

        dev = ctx.device
        needs_dtype(dev, dtype)
        rng = np.random.default_rng(0)

        def fetch(t):
            return launchers.to_host(launchers.native(t), dev)

        def put(h):
            return xp.asarray(h, device=dev)

        shape = (n, n) if op == "matmul" else (n,)
        ns = {"xp": xp, "np": np, "fetch": fetch, "put": put,
              "a": put(rng.standard_normal(shape).astype(dtype))}
        if op == "matmul":
            ns["b"] = put(rng.standard_normal(shape).astype(dtype))
        return ns

    return setup


def _check(rtol):
    def check(t, p, ns):
        close("result", t, p, rtol)

    return check


def benchmarks(ctx) -> list:
    from ._core import Benchmark

    out = []
    sizes = (64, 256) if ctx.quick else (16, 64, 256, 512)
    for dtype in ("float32", "float64"):
        for n in sizes:
            out.append(Benchmark(
                suite="opencl_ops", name="matmul", variant=f"{dtype} {n}^2",
                tessera="fetch(a @ b)", peer="fetch(put(fetch(a) @ fetch(b)))",
                setup=_setup(ctx, "matmul", n, dtype),
                sources=CORE_SOURCES + ("kernels/opencl/gemm.cl", "kernels/opencl/matvec.cl",
                                        "backends/opencl/matvec.py",
                                        "tessera_array/_linear_algebra_functions.py"),
                params={"label": f"a @ b {dtype}", "shape": (n, n), "dtype": dtype},
                peer_name="host path", check=_check(1e-5 if dtype == "float32" else 1e-12),
            ))
    for n in (1000, 100000):
        out.append(Benchmark(
            suite="opencl_ops", name="sort", variant=f"float64 {n}",
            tessera="fetch(xp.sort(a))", peer="fetch(put(np.sort(fetch(a))))",
            setup=_setup(ctx, "sort", n, "float64"),
            sources=CORE_SOURCES + ("kernels/opencl/sort.cl", "kernels/opencl/gather.cl",
                                    "tessera_array/_sorting_functions.py"),
            params={"label": "xp.sort(a) float64", "shape": (n,), "dtype": "float64"},
            peer_name="host path", check=_check(0.0),
        ))
    return out
