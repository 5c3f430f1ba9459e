"""The fused conjugate-gradient solve of the NumPy backend: SciPy's cg loop on ndarrays.

``cg_fused(x, r, p, A, M, atol, maxiter)``, the registered op ``cg_fused`` of the
``matvec`` family, implements the contract of :mod:`tessera_array.sparse.linalg._fused`
for the four floating dtypes. On the host there is no launch to save and no read to
batch: what it saves is the front end. The generic loop calls, per iteration, some
twenty Array methods and namespace functions (each a new Array, a dtype and device
check, a registry lookup through a closure); here the same kernels run on the ndarrays
themselves: the registered ``vecdot`` (NumPy's BLAS dot, OpenBLAS's threads held for
long vectors), ``axpy``/``aypx`` (NumPy's two-step rounding, the pool for long
vectors) and, for a stored matrix, the ``spmv``/``matvec`` of the NumPy backend called
directly (every variant name is the same routine here). So the iterates are the generic
loop's, and SciPy's, bit for bit: the same operations on the same values in the same
order. A real unpreconditioned system with a C-contiguous float32/float64 matrix runs
its iterations in one C loop (``_krylov_c.c``: the same BLAS calls and roundings),
checked once per dtype against this module's Python loop before it is taken. Measured
(2-core EPYC, NumPy SIMD found X86_V4; ``python -m benchmarks --suite krylov``; tessera /
SciPy per call of 10 iterations): see benchmarks/NOTES.md, "The NumPy backend's fused CG"
and "cg on a dense matrix in C".

A run stops at its test, never past it: ``A`` and ``M`` are applied exactly as often
as SciPy applies them. The step ``x += alpha p`` is made only where that step's
``p^H A p`` is > 0, so an indefinite stop leaves ``x`` at the last good iterate.
"""

from __future__ import annotations

import math

import numpy as np
from tessera_array.backends._common.cg import check_k, check_solve, check_vector

from tessera_array import _dtypes

from . import _threads
from . import matvec as _mv
from . import sparse as _sp
from ._namespace import vecdot as _vecdot

__all__ = ["HostCG", "cg_fused", "register"]

_FLOATING = frozenset(np.dtype(d._np) for d in _dtypes.FLOATING)


def _is_native(a) -> bool:
    return isinstance(a, np.ndarray)


def _layout(a):
    if a.ndim != 1 or not a.flags.c_contiguous:
        return f"of shape {a.shape}, strides {a.strides}"
    return None


def _real_dot(n: int, dtype):
    """``f(a, b) -> a . b`` for real contiguous vectors of length ``n``: ``ndarray.dot``
    (NumPy's BLAS dot, a NumPy scalar: 0.9 us at n = 4096 against 2.6 us for the
    namespace's ``vecdot``, which makes a 0-d array) below the length whose dots the
    backend's pool computes, the registered ``vecdot`` (the same value, bit for bit)
    from there."""
    if n * np.dtype(dtype).itemsize >= _threads.DOT_MIN_BYTES:
        return _vecdot
    return np.ndarray.dot


def _root(s) -> float:
    """The square root in ``s``'s own (single) precision, as a Python float."""
    return float(np.sqrt(s))


def _norm_for(n: int, dtype):
    """``f(v) -> ||v||`` (a Python float) for vectors of length ``n`` and ``dtype``, as the
    generic loops' norm on the NumPy backend computes it: the square root in the real
    dtype of ``v . v``, or of ``re . re + im . im`` over contiguous copies of the parts (as
    the namespace's ``real`` / ``imag`` make them; a strided part sums otherwise)."""
    dt = np.dtype(dtype)
    real = np.dtype(dt.char.lower())
    part = _real_dot(n, real)
    root = math.sqrt if real == np.float64 else _root
    if dt.kind == "c":
        def norm(v):
            re, im = np.array(v.real), np.array(v.imag)
            return root(part(re, re) + part(im, im))
    else:
        def norm(v):
            return root(part(v, v))
    return norm


def _product(op, dtype, n, what, products=0):
    """``op`` (a FusedOperand) as ``f(v) -> op v`` on ndarrays: a stored matrix through
    the backend's own routine (a CSR stencil's runs, the same bits, where ``products``,
    the most the solve may take, make it pay: :func:`.sparse.stencil_pays`); anything
    else through ``op.apply``, its result checked."""
    if op.kind == "csr":
        data, indices, indptr = op.arrays
        shape = (n, n)
        q = np.empty(n, dtype=dtype)  # the product's vector, the same every iteration
        st = (_sp.stencil(data, indices, indptr, shape)
              if data.dtype == dtype and _sp.stencil_pays(products, data.shape[0]) else None)
        if st is not None:
            into = st.into
            return lambda v: into(v, q)
        spmv = _sp.spmv_into
        return lambda v: spmv(data, indices, indptr, shape, v, q)
    if op.kind == "dense":
        (a,) = op.arrays
        dense = _mv.dense_matvec
        return lambda v: dense(a, v)
    apply = op.apply

    def call(v):
        q = apply(v)
        check_vector(q, what, dtype, (n,), native="numpy.ndarray", is_native=_is_native)
        return q

    return call


_DENSE_LOOP: dict = {}  # dtype char -> the C loop's BLAS arguments, or False (checked once)


def _dense_loop(dtype, n: int):
    """``(module, (real64, blas64, gemv, dot))`` for the C loops on vectors of length
    ``n`` and ``dtype``, or None: not float32/float64, vectors whose dots the pool computes
    (:func:`_real_dot`), no extension, no NumPy OpenBLAS, or a first solve of random
    systems (a gemv NumPy threads and one it does not) whose x, r and norms were not the
    Python loop's bit for bit (checked once per dtype)."""
    if dtype.char not in "fd" or n * dtype.itemsize >= _threads.DOT_MIN_BYTES:
        return None
    got = _DENSE_LOOP.get(dtype.char)
    if got is None:
        got = _DENSE_LOOP[dtype.char] = _check_dense_loop(dtype) or False
    return got or None


def _check_dense_loop(dtype):
    mod, blas = _mv.krylov_c(), _threads.blas_gemv_dot()
    if mod is None or blas is None:
        return None
    sgemv, dgemv, sdot, ddot, int64 = blas
    f64 = dtype == np.float64
    got = (mod, (f64, int64, dgemv if f64 else sgemv, ddot if f64 else sdot))
    rng = np.random.default_rng(0xC6C)
    for n in (37, 130):  # (130^2 > 9216: NumPy's OpenBLAS threads that gemv)
        g = rng.standard_normal((n, n))
        a = (g @ g.T / n + 0.01 * np.eye(n)).astype(dtype)
        b = rng.standard_normal(n).astype(dtype)
        op = _fused_types()[2](lambda v, a=a: a @ v, "dense", (a,), None)
        ends = []
        for loop in (None, got):
            x, r = np.zeros(n, dtype), b.copy()
            solve = HostCG(x, r, np.empty(n, dtype), op, None, 0.0, 8, loop=loop)
            norms = solve.run(5).residual_norms + solve.run(5).residual_norms
            ends.append((x.tobytes(), r.tobytes(), norms))
        if ends[0] != ends[1]:
            return None
    return got


_FUSED_TYPES = None


def _fused_types():
    """``(CGReport, CGStatus, FusedOperand)`` of the contract (imported on the first run:
    the front end's module, loaded after the backends)."""
    global _FUSED_TYPES
    if _FUSED_TYPES is None:
        from tessera_array.sparse.linalg._fused import CGReport, CGStatus, FusedOperand

        _FUSED_TYPES = (CGReport, CGStatus, FusedOperand)
    return _FUSED_TYPES


_AUTO = object()


class HostCG:
    """One CG solve on ndarrays (see the module docstring); ``run(k)`` takes up to ``k``
    iterations and returns their CGReport. A real unpreconditioned system with a
    C-contiguous float32/float64 matrix runs its iterations in C (``_krylov_c.c``: the same
    calls and roundings, so the same bits); ``loop`` (tests) forces the Python loop (None)
    or the C loop's arguments."""

    def __init__(self, x, r, p, A, M, atol, maxiter, *, loop=_AUTO):
        check_solve(x, r, p, A, M, atol, maxiter, native="numpy.ndarray",
                    is_native=_is_native, layout=_layout, dtypes=_FLOATING,
                    kind="floating")
        n = r.shape[0]
        self.x, self.r, self.p = x, r, p
        self.atol = float(atol)
        self.maxiter = int(maxiter)
        self.cplx = r.dtype.kind == "c"
        if loop is _AUTO:
            loop = _dense_loop(r.dtype, n) if self._dense_in_c(A, M, n, r.dtype) else None
        self.loop = loop
        if loop is not None:
            self.a, self.q = A.arrays[0], np.empty(n, dtype=r.dtype)
        else:
            self.matvec = _product(A, r.dtype, n, "q = A p", self.maxiter)
            self.psolve = None if M is None else _product(M, r.dtype, n, "z = M r",
                                                          self.maxiter)
        # ||r|| in the generic loops' order, where the plain r . r does not give it
        self._norm = _norm_for(n, r.dtype) if self.cplx or M is not None else None
        self.done = 0  # steps taken (tests passed)
        self.rho_prev = self.pq = None
        self.finished = False

    @staticmethod
    def _dense_in_c(A, M, n, dtype) -> bool:
        """Whether the C loop could take this operator (the dtype and length checked by
        :func:`_dense_loop`): no M, and a C-contiguous n x n matrix of the dtype."""
        if M is not None or A.kind != "dense":
            return False
        a = A.arrays[0]
        return a.dtype == dtype and a.shape == (n, n) and a.flags.c_contiguous

    def run(self, k: int):
        """Up to ``k`` iterations: the generic loop's tests and steps on the ndarrays."""
        CGReport, CGStatus = _fused_types()[:2]
        check_k(k, self.finished)
        steps = min(int(k), self.maxiter - self.done)
        if self.loop is not None:
            stopped, status, its, norms = self._c_steps(steps)
        else:
            stopped, status, its, norms = self._py_steps(steps)
        if not stopped:
            status = CGStatus.RUNNING
            pq = self.pq
            if self.done == self.maxiter and pq is not None:  # the final check
                pqf = float(pq.real)
                if not pqf > 0:
                    status = CGStatus.INDEFINITE if pqf <= 0 else CGStatus.NONFINITE
                    its = self.maxiter - 1
                else:
                    status, its = CGStatus.MAXITER, self.maxiter
            elif self.done == self.maxiter:  # maxiter = 0
                status, its = CGStatus.MAXITER, 0
        if status is CGStatus.RUNNING:
            its = self.done
        else:
            self.finished = True
        return CGReport(status, its, tuple(norms))

    def _c_steps(self, steps: int):
        """``(stopped, status, its, norms)`` of up to ``steps`` iterations in C."""
        mod, args = self.loop
        pq, rho = self.pq, self.rho_prev
        stopped, status, its, done, norms, pq, rho = mod.steps(
            *args, self.r.shape[0], self.a, self.x, self.r, self.p, self.q, steps, self.atol,
            self.done, pq is not None, 0.0 if pq is None else pq, 0.0 if rho is None else rho)
        self.done, self.pq, self.rho_prev = done, pq, rho
        return stopped, _fused_types()[1](status) if stopped else None, its, norms

    def _py_steps(self, steps: int):
        """``(stopped, status, its, norms)`` of up to ``steps`` iterations in Python."""
        CGStatus = _fused_types()[1]
        x, r, p = self.x, self.r, self.p
        axpy, aypx = _mv.axpy, _mv.aypx
        matvec, psolve, atol = self.matvec, self.psolve, self.atol
        plain = psolve is None and not self.cplx
        vecdot = _real_dot(r.shape[0], r.dtype) if not self.cplx else _vecdot
        rho_prev, pq = self.rho_prev, self.pq
        pqf = None if pq is None else float(pq.real)
        norms = []
        stopped, status, its = False, None, None
        for _ in range(steps):
            i = self.done
            if plain:
                z = r
                rho = vecdot(r, r)
                rnorm = math.sqrt(float(rho))  # (IEEE sqrt of r . r: numpy.linalg.norm)
            else:
                rnorm = self._norm(r)
            norms.append(rnorm)
            if pq is not None and not pqf > 0:  # the last step's p^H A p <= 0 (or NaN)
                bad = math.isfinite(rnorm) and pqf <= 0
                status = CGStatus.INDEFINITE if bad else CGStatus.NONFINITE
                stopped, its = True, i - 1
                break
            if rnorm < atol:
                stopped, status, its = True, CGStatus.CONVERGED, i
                break
            if not math.isfinite(rnorm):
                stopped, status, its = True, CGStatus.NONFINITE, i
                break
            if not plain:
                z = r if psolve is None else psolve(r)
                rho = vecdot(r, z)
            if i > 0:
                aypx(rho / rho_prev, z, p)  # p = z + beta p
            else:
                p[...] = z
            q = matvec(p)
            pq = vecdot(p, q)
            alpha = rho / pq
            pqf = float(pq.real)
            if pqf > 0:
                axpy(alpha, p, x)
            axpy(alpha, q, r, True)  # r -= alpha q
            rho_prev = rho
            self.done = i + 1
        self.rho_prev, self.pq = rho_prev, pq
        return stopped, status, its, norms


def cg_fused(x, r, p, A, M, atol, maxiter) -> HostCG:
    """The fused CG solve over ndarrays ``x``, ``r``, ``p``: the ``cg_fused`` contract
    (:mod:`tessera_array.sparse.linalg._fused`), realised as :class:`HostCG`."""
    return HostCG(x, r, p, A, M, atol, maxiter)


def register(registry, backend_name: str) -> None:
    registry.register("cg_fused", backend_name, _dtypes.FLOATING, cg_fused)
