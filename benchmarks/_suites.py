"""The one table of benchmark suites.

Each row names a suite, what it measures, the tessera_array feature it needs
(``module:attribute``) and the module that declares its benchmarks. A suite
without a module is listed and reported as "not yet implemented" with the
reason, never silently left out; ``--suite all`` runs the suites that exist.

A device suite's row also says what it needs (:class:`~benchmarks._devices.Needs`:
a device of a backend, a GPU, a vendor, its peer's modules). On a run whose device
(``--device``) or peer does not fit, the suite is reported ``unavailable`` with the
reason and is not loaded. Adding one, say matvec against cuBLAS on a CUDA GPU, is a
row here, ``Needs("cuda", gpu=True, peers=("cupy",))``, and a module.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field

from ._devices import Needs, cupy_on_same_gpu

__all__ = ["SUITES", "Suite", "SuiteContext", "family_status"]


@dataclass(frozen=True)
class SuiteContext:
    """What a suite's ``benchmarks(ctx)`` receives."""

    xp: object  # the tessera_array namespace
    device: object  # the Device measured (a device suite's: one its Needs accept)
    quick: bool


@dataclass(frozen=True)
class Suite:
    """A row of the table.

    ``module`` is a dotted module with ``benchmarks(ctx) -> list[Benchmark]``, or
    None while the suite is not written; ``family`` is the feature it measures,
    ``"module:attribute"``, probed to say whether the feature itself exists yet;
    ``needs``, for a device suite, the device and peer it runs with (None: the
    suite judges the run's device itself, benchmark by benchmark); ``on_request``:
    left out of ``--suite all`` (and so of the baselines' ratchet), run when named.
    """

    name: str
    description: str
    family: str
    module: str | None = None
    needs: Needs | None = field(default=None, kw_only=True)
    on_request: bool = field(default=False, kw_only=True)

    def load(self):
        """The suite's ``benchmarks`` function, or None when not implemented."""
        if self.module is None:
            return None
        return importlib.import_module(self.module).benchmarks

    def info(self, ctx):
        """What the suite reports beside its ratios (``info(ctx) -> dict`` in its
        module: cold and warm compile times, say), or None where it has none."""
        if self.module is None:
            return None
        describe = getattr(importlib.import_module(self.module), "info", None)
        return None if describe is None else describe(ctx)

    def not_implemented_reason(self):
        """None when the suite exists; otherwise why it cannot run."""
        if self.module is not None:
            return None
        exists, detail = family_status(self.family)
        if exists:
            return f"{detail} exists, but no benchmark suite is written for it yet"
        return f"the {self.name} family does not exist yet ({detail})"

    def unavailable_reason(self, device):
        """None when the suite can run on ``device``; otherwise why not (no such device
        here, or its peer is missing), from :attr:`needs`."""
        if self.needs is None:
            return None
        return self.needs.unavailable_reason(device)


def family_status(family: str):
    """``(exists, detail)`` for ``"module:attribute"``, without raising."""
    module, _, attr = family.partition(":")
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return False, f"no module {module}"
    if attr and not hasattr(mod, attr):
        return False, f"{module} has no {attr}"
    return True, family.replace(":", ".")


SUITES = {
    s.name: s
    for s in (
        Suite(
            "overhead",
            "per-operation overhead of tessera_array against raw NumPy",
            "tessera_array:add",
            "benchmarks.overhead",
        ),
        Suite(
            "krylov",
            "cg / gmres against scipy.sparse.linalg (CPU) and cupyx (GPU)",
            "tessera_array.sparse.linalg:cg",
            "benchmarks.krylov",
        ),
        Suite(
            "fft",
            "batched FFTs against numpy.fft / scipy.fft",
            "tessera_array.fft:fft",
            "benchmarks.fft",
        ),
        Suite(
            "attention",
            "nn.attention forward/backward against torch's CPU SDPA and naive NumPy",
            "tessera_array.nn:attention",
            "benchmarks.attention",
        ),
        Suite(
            "optim",
            "Adam / AdamW / Adafactor steps against torch.optim (foreach) on the CPU",
            "tessera_array.optim:Adam",
            "benchmarks.optim",
        ),
        Suite(
            "linear",
            "nn.linear with bias and residual against torch addmm + add on the CPU",
            "tessera_array.nn:linear",
            "benchmarks.linear",
        ),
        Suite(
            "dask_krylov",
            "cg on dask arrays of tessera chunks over a 2-process LocalCluster against "
            "the single-process solve and SciPy",
            "tessera_array.sparse.linalg:row_block_operator",
            "benchmarks.dask_krylov",
            # (its ratios are the scheduling of a cluster of processes: reported, never
            # ratcheted)
            on_request=True,
        ),
        # ---- device suites ----
        Suite(
            "opencl_kernels",
            "OpenCL launchers (matvec, spmv, optimizer steps, FFT) against the NumPy "
            "backend's on the same host data",
            "tessera_array.launchers:launcher",
            "benchmarks.opencl_kernels",
            needs=Needs("opencl"),
        ),
        Suite(
            "opencl_launch",
            "host time of an OpenCL launcher call on tiny inputs against bare PyOpenCL "
            "enqueues",
            "tessera_array.launchers:launcher",
            "benchmarks.opencl_launch",
            needs=Needs("opencl"),
        ),
        Suite(
            "opencl_ops",
            "the namespace's native OpenCL matmul and sort against the host path (copy "
            "out, NumPy, copy back)",
            "tessera_array:matmul",
            "benchmarks.opencl_ops",
            needs=Needs("opencl"),
        ),
        Suite(
            "opencl_vs_cupy",
            "OpenCL launchers and namespace products on an NVIDIA GPU against CuPy "
            "(cuBLAS, cuSPARSE, elementwise kernels, cuFFT) on the same GPU",
            "tessera_array.launchers:launcher",
            "benchmarks.opencl_vs_cupy",
            needs=Needs("opencl", gpu=True, vendor="NVIDIA", peers=("cupy",),
                        peer_check=cupy_on_same_gpu),
        ),
        Suite(
            "cuda_vs_peers",
            "the CUDA backend on an NVIDIA GPU against its peers there: x + y against CuPy, "
            "matvec against cuBLAS gemv, spmv against cuSPARSE, Adam/AdamW/Adafactor steps "
            "against torch's fused/foreach steps, nn.linear against torch's addmm, fft_c2c "
            "against cupy.fft",
            "tessera_array.launchers:launcher",
            "benchmarks.cuda_vs_peers",
            needs=Needs("cuda", gpu=True, vendor="NVIDIA", peers=("cupy",),
                        peer_check=cupy_on_same_gpu),
        ),
        Suite(
            "cuda_krylov",
            "cg solves on a CUDA GPU (the persistent cooperative kernel and the generic "
            "path) against cupyx.scipy.sparse.linalg.cg on the same GPU",
            "tessera_array.sparse.linalg:cg",
            "benchmarks.cuda_krylov",
            needs=Needs("cuda", gpu=True, vendor="NVIDIA", peers=("cupy",),
                        peer_check=cupy_on_same_gpu),
        ),
        Suite(
            "cuda_attention",
            "attention forward and backward in float16/bfloat16 on a CUDA GPU (tensor "
            "cores) against torch's scaled_dot_product_attention on the same GPU",
            "tessera_array.nn:attention",
            "benchmarks.cuda_attention",
            needs=Needs("cuda", gpu=True, vendor="NVIDIA", peers=("torch",)),
        ),
        Suite(
            "krylov_vs_cupy",
            "cg solves on an OpenCL GPU (fused device steps and the generic path) "
            "against cupyx.scipy.sparse.linalg.cg on the same GPU",
            "tessera_array.sparse.linalg:cg",
            "benchmarks.krylov_vs_cupy",
            needs=Needs("opencl", gpu=True, vendor="NVIDIA", peers=("cupy",),
                        peer_check=cupy_on_same_gpu),
        ),
    )
}
