"""The fused BiCGSTAB solve of the CuPy backend: one persistent cooperative kernel
(``kernels/cuda/bicgstab.cu``) per run of iterations.

``bicgstab_fused(x, r, A, M, *, atol, rhotol, omegatol, maxiter)``, the registered op
``bicgstab_fused`` of the ``matvec`` family, implements the contract of
:mod:`tessera_array.sparse.linalg._fused_bicgstab` for stored matrices (dense or CSR,
``A`` and ``M``) over 1-D contiguous ``cupy.ndarray`` of one floating dtype; it declines
(None) a callable operator. :meth:`FusedBiCGSTAB.run` is one cooperative launch of up to
``k`` iterations (at most :data:`K_MAX`) with every product, dot product, update,
breakdown test and stopping test on the device, five grid barriers an iteration (seven
with ``M``), then one read of the state words and the run's norms through pinned memory
(``# sync``). The grid: :func:`._persistent.geometry`, at most :data:`BLOCKS_PER_SM`
blocks a multiprocessor.
"""

from __future__ import annotations

import ctypes

import numpy as np

from tessera_array import _dtypes

from . import _kernels
from ._persistent import Launch, check_vectors, geometry, kernel_name, lanes_of, stored_pair
from .cg import _INDEX, OP_NONE, _ptr, _resident_blocks

__all__ = ["BLOCKS_PER_SM", "K_MAX", "FusedBiCGSTAB", "bicgstab_fused", "instances",
           "register"]

FILE = "bicgstab.cu"
# Blocks per multiprocessor at most: 2. H200, us an iteration (probe_krylov_grid.py,
# 200 iterations, CUDA events, medians of 15): dense SPD 2049 float32 29.7 at one a
# multiprocessor, 22.1 at two (float64 35.0, 27.2); Poisson 1024^2 float32 202, 128
# (float64 266, 171).
BLOCKS_PER_SM = 2
K_MAX = 256  # the most iterations of one run (the norms it records)
SLOTS = 4  # bicgstab.cu's: a block's partial sums (a multiple of 16 / itemsize)
# Entry points, state words and status values: bicgstab.cu's.
E_INIT, E_RESUME = 0, 1
W_STATUS, W_ITER, W_NHIST, WORDS = 0, 1, 2, 9
_FLOATING = frozenset(np.dtype(d._np) for d in _dtypes.FLOATING)


def _cupy():
    import cupy

    return cupy


def _name(dtype, itype, ptype, warp: int) -> str:
    return kernel_name("tessera_bicgstab_run", dtype, itype, ptype, warp)


def _check(x, r, atol, rhotol, omegatol, maxiter):
    check_vectors("bicgstab_fused", (("x", x), ("r", r)), _FLOATING)
    if isinstance(maxiter, bool) or int(maxiter) != maxiter or maxiter < 1:
        raise ValueError(f"bicgstab_fused: maxiter must be an int >= 1. Received: "
                         f"maxiter={maxiter!r}")
    for name, v in (("atol", atol), ("rhotol", rhotol), ("omegatol", omegatol)):
        if not float(v) >= 0:
            raise ValueError(f"bicgstab_fused: {name} must be >= 0. Received: {name}={v!r}")


class FusedBiCGSTAB:
    """The device state of one BiCGSTAB solve: see the module docstring."""

    k_max = K_MAX

    def __init__(self, x, r, A, M, atol, rhotol, omegatol, maxiter):
        self.device = dev = r.device
        self.dtype = dt = r.dtype
        self.n = n = r.shape[0]
        self.maxiter = int(maxiter)
        self._done = 0
        self._finished = False
        self._entry = E_INIT
        with dev:
            warp = _kernels.warp_size(dev)
            a, m, index = stored_pair(A, M, n, dt, warp)
            self.declined = a is None
            if self.declined:
                return
            name = _name(dt, index[0], index[1], warp)
            kernel = _kernels.function(FILE, name, dev)
            blocks = geometry(n, lanes_of(a, m), warp, _kernels.multiprocessors(dev),
                              _resident_blocks(kernel, name, dev), BLOCKS_PER_SM)
            vecs = 6 if m.kind != OP_NONE else 4  # rt, p, v, t (phat, shat with M)
            # The partial sums first (16-byte aligned, as persistent.cuh's RowGrid loads
            # them), then rt, p, v, t (phat, shat).
            o = 2 * SLOTS * blocks
            work = _kernels.empty((o + vecs * n,), dt)
            rt, p, v, t = (work[o + k * n:o + (k + 1) * n] for k in range(4))
            phat, shat = (work[o + 4 * n:o + 5 * n], work[o + 5 * n:o + 6 * n]) \
                if vecs == 6 else (None, None)
            words = WORDS + K_MAX + 1
            st = _kernels.empty((words,), np.float64)
            self.bar = _cupy().zeros((1,), dtype=np.uint64)
            c_ = ctypes
            args = [c_.c_longlong(n), c_.c_int(E_INIT), c_.c_longlong(0),
                    c_.c_longlong(self.maxiter), c_.c_double(float(atol)),
                    c_.c_double(float(rhotol)), c_.c_double(float(omegatol)),
                    *a.ctypes_args(), *m.ctypes_args(),
                    *[_ptr(u) for u in (x, r, rt, p, v, t, phat, shat,
                                        work[:o], st, self.bar)]]
            self._launch = Launch(kernel, blocks, args, st, words)
            self.blocks = blocks
            self._keep = (work, a, m, x, r)  # (what the kernel touches lives with the solve)

    def run(self, k: int):
        """Up to ``k`` iterations in one launch, then one read: a
        :class:`~tessera_array.sparse.linalg._fused_bicgstab.BiCGSTABReport`."""
        from tessera_array.sparse.linalg._fused_bicgstab import BiCGSTABReport, BiCGSTABStatus

        if isinstance(k, bool) or int(k) != k or not 1 <= k <= K_MAX:
            raise ValueError(f"bicgstab_fused: run takes 1 <= k <= {K_MAX}. Received: "
                             f"k={k!r}")
        if self._finished:
            raise ValueError("bicgstab_fused: the solve has finished (its last report was "
                             "not RUNNING); run is not called again")
        target = min(self._done + int(k), self.maxiter)
        launch = self._launch
        with self.device:
            launch.args[1].value, launch.args[2].value = self._entry, target
            launch()
            self._entry = E_RESUME
            # sync: the state words and this run's norms (at most k + 1 of them).
            st = launch.read(WORDS + int(k) + 1)
        status = BiCGSTABStatus(int(st[W_STATUS]))
        self._done = int(st[W_ITER])
        self._finished = status is not BiCGSTABStatus.RUNNING
        nhist = int(st[W_NHIST])
        return BiCGSTABReport(status, self._done,
                              tuple(float(v) for v in st[WORDS:WORDS + nhist]))


def bicgstab_fused(x, r, A, M, *, atol, rhotol, omegatol, maxiter):
    """The fused bicgstab solve over ``x`` and ``r`` (:class:`FusedBiCGSTAB`), or None:
    an empty system, or an operator that is not a stored matrix of r's dtype."""
    _check(x, r, atol, rhotol, omegatol, maxiter)
    if r.shape[0] == 0:
        return None
    solve = FusedBiCGSTAB(x, r, A, M, atol, rhotol, omegatol, maxiter)
    return None if solve.declined else solve


def instances(warp: int) -> list:
    """``(file, name)`` of every kernel template instance these launchers may ask for at
    warp width ``warp`` (``.ci/compile-kernels`` compiles each)."""
    return [(FILE, _name(dt, it, pt, warp)) for dt in sorted(_FLOATING, key=str)
            for it in _INDEX for pt in _INDEX]


def register(registry, backend_name: str) -> None:
    registry.register("bicgstab_fused", backend_name, _dtypes.FLOATING, bicgstab_fused)
