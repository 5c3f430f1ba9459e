"""Krylov solvers with SciPy's signatures: cg, gmres, bicgstab, cgs, bicg, minres.

Written once against the namespace of ``b`` (``b.__array_namespace__()``): the
device is reached only through the operator's matvec (for tessera arrays the
registered ``matvec``/``spmv`` kernel, with the variant of the routing table,
:func:`tessera_array.sparse._routing.matvec_variant`), the registered ``vecdot`` /
``vecmat`` (dot products), ``multiply``/``add`` and the in-place operators (axpy) and
norms. The recurrences and stopping tests are SciPy's (>= 1.14), so iterates,
iteration counts and ``info`` agree with ``scipy.sparse.linalg`` up to rounding.

``info`` codes (SciPy's, plus three tessera codes for what SciPy does not detect):

==========  ===============================================================
``0``       converged: ``||b - A x|| <= max(rtol * ||b||, atol)``
``> 0``     ``maxiter`` iterations done without converging (the value is maxiter)
``-10``     breakdown: ``rho`` ~ 0 (bicg, bicgstab, cgs; SciPy's code)
``-11``     breakdown: a zero denominator or ``omega`` ~ 0 (SciPy's code)
``-20``     tessera: the residual became NaN or inf (NaN/inf in A or M, or an
            overflow); SciPy would run on to maxiter
``-30``     tessera, cg only: ``p^H A p <= 0``, so ``A`` (or ``M``) is not positive
            definite; ``x`` is the last iterate before that step. SciPy divides by it
==========  ===============================================================

Non-finite values in ``b`` or ``x0`` (or a ``||b||`` that overflows) are refused up
front with ValueError; NaN/inf inside ``A`` or ``M`` (any form) reach the residual
and stop the solver with info ``-20`` (searching A up front would cost a pass over
it per solve). Every loop is bounded by ``maxiter``.

Dot products (tessera only: the keyword ``products``). ``"device"`` (the default):
the dot products and norms run on ``b``'s device, the registered ``vecdot``/``vecmat``
of variant ``default``, in the device's summation order, so iterates agree with SciPy's
to rounding (which a Krylov method amplifies; an iteration count may move by a few).
``"blas"``: they sum in the host BLAS's order, SciPy's (variant ``blas``: on an
accelerator each product is a listed host fallback, two vectors copied to the host and a
scalar back), and cg runs no fused steps; where A's (and M's) products also round as
SciPy's (a CSR matrix whose rows the spmv sums in order, as the ``scalar`` variant does)
the iterates of real systems then equal SciPy's bit for bit on any device (complex ones,
and a dense A's device gemv, to rounding). On the NumPy backend both settings are the
host's BLAS: the iterates equal SciPy's bit for bit either way.

Beyond SciPy (tessera only): ``report=True`` returns ``(x, info, SolveReport)``;
``cg`` accepts ``b`` of shape ``(n, k)`` (k systems, each stopping on its own test).
Results are deterministic run to run. Vectors are updated in place where SciPy does
(the registered ``axpy``/``aypx``), after copying what the caller owns; the update
helpers return the vector, so on dask arrays (no in-place writes) the loops rebind it,
and there each iteration is persisted once and its scalars read in one compute.

Synchronization: each iteration reads residual norms back to the host for the stopping
test (``# sync:`` below); GMRES also reads each Hessenberg entry, as SciPy and CuPy do.

Fused CG: where the device registers ``cg_fused`` for the dtype (NumPy: SciPy's loop on
the ndarrays; OpenCL: real, four launches an iteration; CUDA: one persistent cooperative
kernel a run), cg with ``products="device"`` hands its iterations to it (the contract:
:mod:`._fused`), up to k per host read: k follows the residual's decay
(:func:`_steps_per_read`), is 1 for a callable ``A`` or ``M``, ``check_every`` with a
callback. The generic loop stays the reference: :func:`_cg` takes ``fused=False``.
GMRES is in :mod:`._gmres` (on native buffers where a device registers
``krylov_vectors``), on this module's set-up, products and update helpers.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ... import _dispatch
from ..._dtypes import DType, float64
from ..._errors import KernelNotFoundError as _KernelNotFoundError
from .._csr import csr_array
from .._routing import KINDS, matvec_variant
from ._fused import CGStatus, FusedOperand
from ._interface import (
    LinearOperator,
    _as_operator,
    _CSROperator,
    _DenseOperator,
    _in_namespace,
    _is_dask,
    _NamespaceOperator,
    namespace_of,
)

__all__ = ["SolveReport", "bicg", "bicgstab", "cg", "cgs", "minres"]

_REASONS = {0: "converged", -10: "breakdown", -11: "breakdown", -20: "non-finite",
            -30: "indefinite"}


class SolveReport(NamedTuple):
    """What a solver did (returned third when ``report=True``; tessera only)."""

    info: int  # the info code returned
    reason: str  # converged / maxiter / breakdown / non-finite / indefinite
    iterations: int  # iterations done (GMRES: inner iterations)
    residual_norms: tuple  # ||r|| at each stopping test, as floats (GMRES: per restart)


def _xp_tessera():
    import tessera_array

    return tessera_array


def _finish(want, x, info, its, hist):
    if not want:
        return x, info
    reason = _REASONS.get(info, "maxiter" if info > 0 else "breakdown")
    return x, info, SolveReport(info, reason, its, tuple(hist))


_PRODUCTS = ("device", "blas")


def _check_products(func, products):
    if products not in _PRODUCTS:
        raise ValueError(f"{func}: products must be 'device' or 'blas'. Received: "
                         f"products={products!r}")


def _products(xp, v, products="device"):
    """``(vecdot, vecmat)`` of the generic path for vectors like tessera ``v``:
    ``vecdot(x, y) = conj(x) . y`` of two vectors and ``vecmat(x, A) = conj(x) @ A``.

    ``products="device"``: the registered ops of variant ``default``, the device's own
    kernels in its summation order; ``"blas"``: variant ``blas``, the host BLAS's order
    (SciPy's; on a device listed host fallbacks, which raise HostFallbackError where
    host fallbacks are refused: an explicit request is never quietly downgraded). On
    the NumPy backend both are NumPy's own products. On another library's arrays: its
    ``vecdot`` and ``matmul``.
    """
    T = _xp_tessera()
    cplx = xp.isdtype(v.dtype, "complex floating")
    if xp is T:
        from ..._dispatch import lookup
        from ..._errors import KernelNotFoundError

        variant = "blas" if products == "blas" else "default"
        try:
            dot = lookup("vecdot", v.device, v.dtype, variant)
            mat = lookup("vecmat", v.device, v.dtype, variant)
        except KernelNotFoundError:
            dot = mat = None
        if dot is not None:
            new = T.Array._new

            def vecdot(x, y):
                return new(dot(x._data, y._data), x._dtype, x._device)

            def vecmat(x, a):
                return new(mat(x._data, a._data), x._dtype, x._device)

            return vecdot, vecmat

    def vecmat(x, a):
        return xp.matmul(xp.conj(x) if cplx else x, a)

    if _is_dask(v):
        # dask: a product and a sum per chunk, one combining task (array_api_compat's
        # vecdot for dask is a batched matmul: some twenty tasks of a dozen kinds, each
        # one more hop through a distributed scheduler)
        def dask_vecdot(x, y):
            return ((x.conj() if cplx else x) * y).sum(split_every=64)

        return dask_vecdot, vecmat
    return xp.vecdot, vecmat


def _norm(xp, v, vecdot):
    """||v||_2 in numpy.linalg.norm's operation order (so stopping tests round as SciPy's):
    sqrt(v . v) for real v, sqrt(re . re + im . im) for complex v (``vecdot``: the
    solver's, :func:`_products`)."""
    if xp.isdtype(v.dtype, "complex floating"):
        re, im = xp.real(v), xp.imag(v)
        return xp.sqrt(vecdot(re, re) + vecdot(im, im))
    return xp.sqrt(vecdot(v, v))


def _residual_test(xp, r, x, atol, iteration, hist, report, vecdot):
    """An iteration's opening test on ||r||: the finished result (0 converged, -20
    non-finite) or None to go on; the norm joins ``hist``. Synchronizes once."""
    rnorm = float(_norm(xp, r, vecdot))  # sync
    hist.append(rnorm)
    if rnorm < atol:
        return _finish(report, x, 0, iteration, hist)
    if not math.isfinite(rnorm):
        return _finish(report, x, -20, iteration, hist)
    return None


def _get_atol(func, bnrm2, atol, rtol):
    if atol is None or isinstance(atol, str) or not atol >= 0:
        raise ValueError(
            f"{func}: atol must be a real, non-negative number. Received: atol={atol!r}"
        )
    if rtol is None or isinstance(rtol, str) or not rtol >= 0:
        raise ValueError(
            f"{func}: rtol must be a real, non-negative number. Received: rtol={rtol!r}"
        )
    return max(float(atol), float(rtol) * float(bnrm2))


def _check_finite(xp, a, func, name):
    # sync: one check at entry.
    if not bool(xp.all(xp.isfinite(a))):
        raise ValueError(f"{func}: {name} must be finite (no NaN or inf). Received: {name} "
                         "with non-finite entries")


def _device_kernel(xp, v, op):
    """The registered ``op`` kernel for tessera ``v``'s device and dtype, called with
    tessera arrays (or scalars) as ``f(alpha, x, y, *flags)``; None elsewhere."""
    T = _xp_tessera()
    if xp is not T:
        return None
    from ..._dispatch import lookup
    from ..._errors import KernelNotFoundError

    try:
        kernel = lookup(op, v.device, v.dtype)
    except KernelNotFoundError:
        return None
    Array = T.Array

    def call(alpha, x, y, *flags):
        kernel(alpha._data if alpha.__class__ is Array else alpha, x._data, y._data, *flags)
        return y

    return call


def _axpy_for(xp, v):
    """``f(alpha, x, y, subtract=False) -> y``: ``y += alpha * x`` (or ``-=``), in place
    where the namespace's arrays can be written; callers rebind ``y = f(...)``, so that
    on a namespace of immutable arrays (dask) the new array is the one used.

    On tessera arrays it is the device's registered ``axpy`` kernel (rounded as the
    two-step expression, so iterates stay SciPy's; see backends/numpy/matvec.py); on
    a device without one, or on another library's arrays, the expression itself.
    """
    kernel = _device_kernel(xp, v, "axpy")
    if kernel is not None:
        return kernel

    def axpy(alpha, x, y, subtract=False):
        if subtract:
            y -= alpha * x
        else:
            y += alpha * x
        return y

    return axpy


def _aypx_for(xp, v):
    """``f(beta, x, y) -> y``: ``y = x + beta * y`` (in place where it can be), rounded as
    ``y *= beta; y += x`` (SciPy's CG direction update): the registered ``aypx``
    kernel, or the expression."""
    kernel = _device_kernel(xp, v, "aypx")
    if kernel is not None:
        return kernel

    def aypx(beta, x, y):
        y *= beta
        y += x
        return y

    return aypx


def _dask_namespace(xp) -> bool:
    """Whether ``xp`` is array_api_compat's namespace for dask arrays."""
    return getattr(xp, "__name__", "").startswith("array_api_compat.dask")


def _floats_of(*values):
    return tuple(None if v is None else float(v) for v in values)


def _dask_floats(*values):
    import dask

    got = iter(dask.compute(*[v for v in values if v is not None]))
    return tuple(None if v is None else float(next(got)) for v in values)


def _reader(xp):
    """``read(*values)``: ``float(v)`` of each value (None stays None), one read of them
    all on dask (one ``dask.compute``), one each elsewhere."""
    return _dask_floats if _dask_namespace(xp) else _floats_of


def _host_floats(xp, v) -> list:
    """The entries of the 1-D real array ``v`` as Python floats, in one read (``# sync``):
    one transfer of the whole vector, not one per entry."""
    if xp is _xp_tessera():
        import numpy as np

        return np.asarray(v.to_device("cpu")).tolist()
    if _dask_namespace(xp):
        import dask

        (v,) = dask.compute(v)
        return _host_floats(v.__array_namespace__(), v) if hasattr(
            v, "__array_namespace__") else [float(t) for t in v]
    return [float(t) for t in v]


def _as_is(*values):
    return values


def _dask_persist(*values):
    import dask

    return dask.persist(*values)


def _settler(xp):
    """``settle(*values)``: the values of one iteration (vectors and 0-d scalars) ready
    for the next: on dask, computed now and kept where they are (``dask.persist``: on a
    distributed cluster, on its workers), so that the task graph does not grow with the
    iterations; elsewhere the values themselves (chosen once per solve: nothing is
    asked of the values on the common path)."""
    return _dask_persist if _dask_namespace(xp) else _as_is


def _device(a):
    """``a.device``, or None for an array without one (dask: its chunks carry theirs)."""
    return getattr(a, "device", None)


def _fused_cg_for(xp, r):
    """The device's ``cg_fused`` launcher for tessera ``r`` (1-D, its dtype), or None."""
    if xp is not _xp_tessera() or r.ndim != 1:
        return None
    try:
        return _dispatch.lookup("cg_fused", r.device, r.dtype)  # (the module's: tests patch it)
    except _KernelNotFoundError:
        return None


def _fused_operand(xp, q, r, name="A", func="cg"):
    """A product of operator ``name`` (A or M) as a native solve (``func``'s) takes it: a
    tessera array of r's shape on r's device, in r's dtype (another dtype is cast)."""
    if not isinstance(q, _xp_tessera().Array):
        raise TypeError(f"{func}: {name}'s matvec must return an array of b's namespace. "
                        f"Received: {type(q).__name__}")
    if q.device != r.device:
        from ..._errors import DeviceMismatchError

        raise DeviceMismatchError(f"{func}: {name}'s matvec returned an array on {q.device}, "
                                  f"but b is on {r.device}; nothing is moved implicitly")
    if tuple(q.shape) != tuple(r.shape):
        raise ValueError(f"{func}: {name}'s matvec must return shape {tuple(r.shape)}. "
                         f"Received: shape {tuple(q.shape)}")
    return q if q.dtype == r.dtype else xp.astype(q, r.dtype)


def _operand(xp, op, product, r, name, func="cg"):
    """Operator ``op`` (A or M) as a :class:`FusedOperand` for vectors like ``r``:
    ``product`` (its matvec) on native buffers, and its stored matrix where it has one
    (``func``: the solver, named in the errors of ``apply``)."""
    new, dt, dev = _xp_tessera().Array._new, r._dtype, r._device

    def apply(v):
        return _fused_operand(xp, product(new(v, dt, dev)), r, name, func)._data

    if isinstance(op, _DenseOperator) and op.A.dtype == r.dtype:
        return FusedOperand(apply, "dense", (op.A._data,), op.variant)
    if isinstance(op, _CSROperator) and op.A.dtype == r.dtype:
        A = op.A
        return FusedOperand(apply, "csr", (A.data._data, A.indices._data, A.indptr._data),
                            op.variant)
    return FusedOperand(apply, None, (), None)


# Iterations per host read of a fused solve (measured on PoCL: benchmarks/NOTES.md,
# "Krylov routing and fused CG"): the first run, and the most of any run.
_K_FIRST = 4
_K_MAX = 32
_RATE_WINDOW = 16  # the residual norms the decay rate is measured over


def _steps_per_read(norms, atol, kmax=_K_MAX):
    """The k of the next ``run(k)`` of a fused solve, from the residual norms so far.

    Half the iterations the recent decay predicts are left (so a run seldom passes the
    stopping iteration: it does only where convergence comes more than twice as fast),
    at least 1 and at most ``kmax``; ``kmax`` where no decay is seen or nothing can
    converge (``atol = 0``); ``_K_FIRST`` before two norms are known.
    """
    if len(norms) < 2:
        return min(_K_FIRST, kmax)
    w = min(len(norms) - 1, _RATE_WINDOW)
    now, then = norms[-1], norms[-1 - w]
    if not (0 < now < math.inf and 0 < then < math.inf) or atol <= 0:
        return kmax
    rate = (now / then) ** (1.0 / w)
    if not rate < 1:
        return kmax
    left = math.log(atol / now) / math.log(rate) if now > atol else 1.0
    return max(1, min(kmax, int(left / 2)))


def _cg_fused(xp, launcher, A, M, matvec, psolve, x, r, atol, maxiter, report,
              steps_per_read, callback=None, check_every=1):
    """cg's loop on the device's fused solve (the ``cg_fused`` contract, ``_fused.py``):
    the same stopping test, info codes and report as the generic loop; ``x`` and ``r``
    are the solver's own arrays, updated in place. With a callback, runs of
    ``check_every`` iterations, each followed by ``callback(copy of x)`` where it moved
    x. None where the launcher declines."""
    p = xp.empty_like(r)
    Aop = _operand(xp, A, matvec, r, "A")
    Mop = None if M is None else _operand(xp, M, psolve, r, "M")
    solve = launcher(x._data, r._data, p._data, Aop, Mop, atol, maxiter)
    if solve is None:
        return None
    # Note: a run applies A and M past its stopping test (SciPy stops before them); for
    # a callable operator one iteration per read keeps that to one product per solve.
    callable_op = Aop.kind is None or (Mop is not None and Mop.kind is None)
    hist = []
    out = None
    for _ in range(maxiter + 1):  # (every run advances, so maxiter runs at most finish)
        if steps_per_read is not None:
            k = steps_per_read
        elif callable_op:
            k = 1
        elif callback is not None:
            k = check_every
        else:
            k = _steps_per_read(hist, atol)
        moved = out.iterations if out is not None else 0  # (steps that moved x so far)
        out = solve.run(k)  # sync: one read per run
        hist.extend(out.residual_norms)
        if callback is not None and out.iterations > moved:
            callback(xp.asarray(x, copy=True))  # (x moves on in place)
        if out.status != CGStatus.RUNNING:
            break
    else:
        raise RuntimeError(f"cg: the device's fused solve ({launcher!r}) still reports "
                           f"RUNNING after {maxiter + 1} runs for maxiter={maxiter}; a "
                           "cg_fused run must advance at least one iteration")
    info = maxiter if out.status == CGStatus.MAXITER else int(out.status)
    return _finish(report, x, info, out.iterations, hist)


def _fast_matvec(op):
    """The operator's product without the shape checks of the public ``matvec``."""
    if isinstance(op, (_DenseOperator, _CSROperator, _NamespaceOperator)):
        return op._mv
    return op.matvec


def _make_system(func, A, M, x0, b, *, need_rmatvec=False):
    """``(A, M, x, b, xp, x_nonzero)``: operators, start, right-hand side and namespace.

    Follows SciPy's ``make_system``: b of shape (N,) or (N, 1), raveled; the work
    dtype is the promotion of A's and b's dtypes (non-floating counted as float64).
    """
    T = _xp_tessera()
    if hasattr(b, "__array_namespace__") or _is_dask(b):
        xp = namespace_of(b)
    else:
        xp = T
        b = T.asarray(b)
    dev = _device(b)
    backend = dev.backend.name if xp is T else None
    variant = {kind: matvec_variant(func, kind, backend) for kind in KINDS}
    op = _as_operator(A, device=dev if xp is T else None, variant=variant, func=func,
                      xp=xp)
    if op.shape[0] != op.shape[1]:
        raise ValueError(
            f"{func}: A must be a square matrix. Received: A.shape={op.shape}"
        )
    n = op.shape[0]
    if tuple(b.shape) != (n,) and tuple(b.shape) != (n, 1):
        raise ValueError(
            f"{func}: b must have shape ({n},) or ({n}, 1) to match A. Received: "
            f"A.shape={op.shape}, b.shape={tuple(b.shape)}"
        )
    floating = ("real floating", "complex floating")

    def fl(dt):
        if dt is None:
            return xp.float64
        if xp is T and dt.__class__ is DType:  # (what isdtype decides, without its checks)
            return dt if dt.kind in "fc" else xp.float64
        return dt if xp.isdtype(dt, floating) else xp.float64

    bdt = fl(b.dtype)
    if b.dtype != bdt:
        b = xp.astype(b, bdt)
    if tuple(b.shape) != (n,):
        b = xp.reshape(b, (n,))
    adt = op.dtype if op.dtype is not None else op.matvec(b).dtype
    fa = fl(adt)
    xtype = bdt if fa is bdt else xp.result_type(fa, bdt)
    if b.dtype != xtype:
        b = xp.astype(b, xtype)
    op = _cast_operator(op, xtype, variant, xp, func, "A")
    if M is not None:
        if callable(M) and not isinstance(M, LinearOperator) and not hasattr(M, "shape"):
            M = LinearOperator(op.shape, matvec=M, rmatvec=M, dtype=xtype)
        else:
            M = _as_operator(M, device=dev if xp is T else None, variant=variant, func=func,
                             name="M", xp=xp)
        if tuple(M.shape) != op.shape:
            raise ValueError(
                f"{func}: the preconditioner M must have the shape of A. Received: "
                f"M.shape={tuple(M.shape)}, A.shape={op.shape}"
            )
        M = _cast_operator(M, xtype, variant, xp, func, "M")
    if need_rmatvec and not isinstance(op, (_DenseOperator, _CSROperator, _NamespaceOperator)) \
            and op._frmatvec is None and type(op)._rmatvec is LinearOperator._rmatvec:
        raise ValueError(f"{func}: A must provide rmatvec (the adjoint product). Received: "
                         f"A={op!r}")
    if x0 is None:
        x = xp.zeros(n, dtype=xtype, device=dev)
        nonzero = False
    elif isinstance(x0, str):
        if x0 != "Mb":
            raise ValueError(f"{func}: x0 must be an array, None or 'Mb'. Received: x0={x0!r}")
        # A copy: cg and gmres update x in place, and b (or M's result) is not theirs.
        x = xp.astype(b if M is None else M.matvec(b), xtype, copy=True)
        nonzero = True
    else:
        if not _in_namespace(x0, xp):
            if xp is T and type(x0).__module__ == "numpy":
                x0 = T.asarray(x0, device=dev)  # Note: an explicit copy to b's device.
            else:
                raise TypeError(f"{func}: x0 must be an array of b's namespace. Received: "
                                f"type(x0)={type(x0).__name__}")
        if _device(x0) != dev:
            raise ValueError(f"{func}: x0 is on another device than b; move it with "
                             f"to_device(). Received: x0.device={x0.device}, b.device={dev}")
        if tuple(x0.shape) != (n,) and tuple(x0.shape) != (n, 1):
            raise ValueError(f"{func}: x0 must have shape ({n},) or ({n}, 1) to match A. "
                             f"Received: A.shape={op.shape}, x0.shape={tuple(x0.shape)}")
        x = xp.reshape(xp.astype(x0, xtype, copy=True), (n,))
        _check_finite(xp, x, func, "x0")
        nonzero = bool(xp.any(x != 0))  # sync: SciPy's x.any()
    return op, M, x, b, xp, nonzero


def _cast_operator(op, xtype, variant, xp, func, name):
    """Cast a stored dense/CSR matrix to the work dtype once.

    Non-finite entries are not searched for here (that would cost a pass over A per
    solve); they reach the residual, and the solver stops with info -20.
    """
    if isinstance(op, _DenseOperator):
        if op.A.dtype != xtype:
            op = _DenseOperator(xp.astype(op.A, xtype), op.variant)
    elif isinstance(op, _CSROperator) and op.A.dtype != xtype:
        op = _CSROperator(op.A.astype(xtype), op.variant)
    return op


def _b_norm(func, xp, b, vecdot):
    """||b||, refusing a b with NaN/inf entries or whose norm overflows (ValueError)."""
    bnrm2 = float(_norm(xp, b, vecdot))  # sync
    if not math.isfinite(bnrm2):
        _refuse_b(func, xp, b)
    return bnrm2


def _refuse_b(func, xp, b):
    """Raise the ValueError for a b whose norm is not finite: NaN/inf entries, or an
    overflow."""
    _check_finite(xp, b, func, "b")
    raise ValueError(f"{func}: ||b|| overflows in {b.dtype}; rescale the system. "
                     f"Received: b with max |b_i| = {float(xp.max(xp.abs(b)))}")


def _start(func, xp, b, x, nonzero, matvec, rtol, atol, maxiter, vecdot):
    """Common opening: ``(bnrm2, atol, maxiter, r)``."""
    bnrm2 = _b_norm(func, xp, b, vecdot)
    atol = _get_atol(func, bnrm2, atol, rtol)
    n = b.shape[0]
    if maxiter is None:
        maxiter = 10 * n
    elif int(maxiter) != maxiter or maxiter < 0:
        raise ValueError(f"{func}: maxiter must be a non-negative int. Received: "
                         f"maxiter={maxiter!r}")
    maxiter = int(maxiter)
    r = (b - matvec(x)) if nonzero else b
    return bnrm2, atol, maxiter, r


def cg(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M=None, callback=None,
       report=False, products="device", check_every=1):
    """Solve ``A x = b`` with the Conjugate Gradient method (A Hermitian positive definite).

    Same signature, recurrence, stopping test and ``info`` as ``scipy.sparse.linalg.cg``
    (SciPy >= 1.14); ``maxiter`` defaults to ``10 * n``; ``callback(xk)`` after each
    iteration. ``A`` and ``M`` may be tessera dense arrays or ``csr_array`` (on ``b``'s
    device), LinearOperators, SciPy sparse arrays or NumPy arrays (both copied
    explicitly to ``b``'s device), or, with ``b`` from another Array API library, that
    library's arrays; ``M`` may also be a callable.

    Returns ``(x, info)``; with ``report=True`` ``(x, info, SolveReport)``.
    Info codes: see :mod:`tessera_array.sparse.linalg` (``-30``: ``p^H A p <= 0``, A
    or M not positive definite).

    Other Parameters
    ----------------
    report : bool
        (tessera) Return ``(x, info, SolveReport)``.
    products : {"device", "blas"}
        (tessera) Where the dot products sum: ``"device"`` (default) on ``b``'s device,
        in its order; ``"blas"`` in the host BLAS's order, so that the iterates of a real
        CSR system equal SciPy's bit for bit on any device, at a host round trip per
        product on an accelerator, and without fused steps (see
        :mod:`tessera_array.sparse.linalg`).
    check_every : int
        (tessera) With a callback on a device with fused CG steps: the iterations the
        device runs between two callbacks (default 1: after every iteration, as SciPy;
        more reads back less often). Elsewhere the callback follows every iteration.

    Notes
    -----
    Synchronizes once per iteration (the residual norm, read with the previous step's
    curvature), except on a device with fused CG steps for b's dtype (one right-hand
    side, ``products="device"``): there the device runs up to k iterations per host read
    (``check_every`` with a callback), stopping test included, and may apply A and M in
    the iterations of a run that follow its stopping test (their results unused): up to
    k products past SciPy's count, one where A or M is a callable or a LinearOperator
    (k is 1 there). With a callback there, a step whose ``p^H A p <= 0`` is not shown
    to it (x keeps the last good iterate; info -30 follows).
    """
    return _cg(A, b, x0, rtol=rtol, atol=atol, maxiter=maxiter, M=M, callback=callback,
               report=report, products=products, check_every=check_every)


def _cg_plain(A, b, rtol, atol, maxiter, report):
    """cg's most common call, ``cg(A, b)`` with a tessera dense matrix or ``csr_array``
    of b's device and dtype, a floating 1-D ``b`` and nothing else, on a device with
    fused CG steps: the general path's operations on the same values (so the same x,
    info and report), without its conversions and checks of what this call does not
    have (``_make_system``: some 20 us of the 42 a ``maxiter=0`` solve cost on the
    NumPy backend). None where the call is not that one or anything is amiss: the
    general path then answers it, errors included. Where the fused launcher also starts
    the system itself (``launcher.plain``: CUDA), a real solve is its one launch and one
    read (:func:`_cg_one_launch`)."""
    kind = _plain_kind(A, b)
    if kind is None:
        return None
    T = _xp_tessera()
    Arr = T.Array
    dt, dev = b._dtype, b._device
    n = b._data.shape[0]
    if maxiter is None:
        maxiter = 10 * n
    elif isinstance(maxiter, bool) or not isinstance(maxiter, int) or maxiter < 0:
        return None
    launcher = _fused_cg_for(T, b)
    if launcher is None:
        return None
    plain = getattr(launcher, "plain", None)
    if plain is not None and dt.kind == "f":
        _get_atol("cg", 0.0, atol, rtol)  # (their checks: the threshold is the kernel's)
        got = _cg_one_launch(T, plain, A, b, kind, rtol, atol, maxiter, report)
        if got is not _DECLINED:
            return got
    if dt.kind == "c":
        bnrm2 = float(_norm(T, b, _products(T, b, "device")[0]))  # sync
    else:  # _norm's sqrt(b . b) by _products' vecdot
        try:
            dot = _dispatch.lookup("vecdot", dev, dt, "default")
        except _KernelNotFoundError:
            return None
        bb = dot(b._data, b._data)
        if dev.backend.is_host:  # NumPy's root, correctly rounded to b's dtype: float32's
            # is the double root rounded (53 >= 2 * 24 + 2 bits: no double rounding)
            bb = float(bb)  # (a host buffer: NumPy's 0-d array)
            bnrm2 = math.sqrt(bb) if dt is float64 else float(np.float32(math.sqrt(bb)))
        else:  # the device's own root (CuPy's flushes a subnormal b . b to zero)
            bnrm2 = float(T.sqrt(Arr._new(bb, dt, dev)))  # sync
    if not math.isfinite(bnrm2):
        return None  # (the general path words the error)
    atol = _get_atol("cg", bnrm2, atol, rtol)
    if bnrm2 == 0:
        return _finish(report, T.zeros_like(b), 0, 0, [0.0])
    variant = matvec_variant("cg", kind, dev.backend.name)
    op = _DenseOperator(A, variant) if kind == "dense" else _CSROperator(A, variant)
    ops = dev.ops  # (x and r made as zeros_like and astype(copy=True) make them)
    x = Arr._new(ops.zeros((n,), dtype=dt, device=dev), dt, dev)
    r = Arr._new(ops.astype(b._data, dt, copy=True), dt, dev)  # updated in place
    return _cg_fused(T, launcher, op, None, op._mv, None, x, r, atol, maxiter, report, None)


_DECLINED = object()


def _plain_kind(A, b):
    """The kind (``"dense"`` or ``"csr"``) of ``A`` in the plain calls of cg and gmres: a
    tessera dense matrix or ``csr_array`` of b's device, dtype and shape (n, n), with a
    floating 1-D tessera ``b``; None for anything else."""
    Arr = _xp_tessera().Array
    if b.__class__ is not Arr:
        return None
    dt, dev = b._dtype, b._device
    if dt.kind not in "fc" or b._data.ndim != 1:
        return None
    n = b._data.shape[0]
    if A.__class__ is Arr:
        fits = A._device is dev and A._dtype is dt and A._data.shape == (n, n)
        return "dense" if fits else None
    if isinstance(A, csr_array):
        fits = A.device is dev and A.dtype is dt and tuple(A.shape) == (n, n)
        return "csr" if fits else None
    return None


def _plain_operand(T, A, b, kind, variant, func):
    """The stored ``A`` of a plain call (:func:`_plain_kind`) as a :class:`FusedOperand`,
    whose ``apply`` is what a launcher that declines the stored matrix would call."""
    dense = kind == "dense"
    arrays = (A._data,) if dense else (A.data._data, A.indices._data, A.indptr._data)

    def apply(v):
        op = _DenseOperator(A, variant) if dense else _CSROperator(A, variant)
        return _operand(T, op, op._mv, b, "A", func).apply(v)

    return FusedOperand(apply, kind, arrays, variant)


def _cg_one_launch(T, plain, A, b, kind, rtol, atol, maxiter, report):
    """:func:`_cg_plain` on a device whose fused CG also starts the system itself
    (``launcher.plain``: x = 0, r = b, ||b|| and the threshold in its first launch, so a
    short solve is one launch and one read): the same x, info and report as the general
    path, whose steps it takes in the kernel. None where b is not finite (the general path
    words the error); ``_DECLINED`` where ``plain`` declines."""
    dt, dev = b._dtype, b._device
    variant = matvec_variant("cg", kind, dev.backend.name)
    solve = plain(b._data, _plain_operand(T, A, b, kind, variant, "cg"), float(rtol),
                  float(atol), maxiter)
    if solve is None:
        return _DECLINED
    hist = []
    out = None
    atol_now = float(atol)  # max(atol, rtol ||b||) once the first run has read ||b||
    for _ in range(maxiter + 1):  # (every run advances, so maxiter runs at most finish)
        out = solve.run(_steps_per_read(hist, atol_now))  # sync: one read per run
        if out is None:
            return None
        if not hist:
            atol_now = _get_atol("cg", solve.bnrm2, atol, rtol)
        hist.extend(out.residual_norms)
        if out.status != CGStatus.RUNNING:
            break
    else:
        raise RuntimeError(f"cg: the device's fused solve ({plain!r}) still reports RUNNING "
                           f"after {maxiter + 1} runs for maxiter={maxiter}")
    info = maxiter if out.status == CGStatus.MAXITER else int(out.status)
    return _finish(report, T.Array._new(solve.x, dt, dev), info, out.iterations, hist)


def _cg(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M=None, callback=None,
        report=False, products="device", fused=True, steps_per_read=None, check_every=1):
    """cg's core: :func:`cg`'s arguments, and two seams for tests and benchmarks.

    ``fused=False`` runs the generic loop where the device has fused CG steps (the
    reference they are tested against); ``steps_per_read=k`` makes every run of a fused
    solve ``k`` iterations long instead of :func:`_steps_per_read`'s choice.
    """
    _check_products("cg", products)
    if isinstance(check_every, bool) or not isinstance(check_every, int) or check_every < 1:
        raise ValueError(f"cg: check_every must be an int >= 1. Received: "
                         f"check_every={check_every!r}")
    if getattr(b, "ndim", 1) == 2 and b.shape[1] != 1:
        return _cg_batched(A, b, x0, rtol, atol, maxiter, M, callback, report, products)
    if (fused and x0 is None and M is None and callback is None and products == "device"
            and steps_per_read is None):
        done = _cg_plain(A, b, rtol, atol, maxiter, report)
        if done is not None:
            return done
    A, M, x, b, xp, nonzero = _make_system("cg", A, M, x0, b)
    matvec = _fast_matvec(A)
    psolve = None if M is None else M.matvec
    vecdot = _products(xp, b, products)[0]
    bnrm2, atol, maxiter, r = _start("cg", xp, b, x, nonzero, matvec, rtol, atol, maxiter,
                                     vecdot)
    if bnrm2 == 0:
        return _finish(report, xp.zeros_like(b), 0, 0, [0.0])
    if r is b:
        r = xp.astype(b, b.dtype, copy=True)  # r is updated in place; b is the caller's
    cplx = xp.isdtype(b.dtype, "complex floating")
    launcher = None
    if fused and products == "device":  # (complex where the device registers it)
        launcher = _fused_cg_for(xp, r)
    if launcher is not None:  # (x is _make_system's own array: updated in place)
        if r.dtype != b.dtype:  # (a user operator's result of another dtype)
            r = xp.astype(r, b.dtype)
        done = _cg_fused(xp, launcher, A, M, matvec, psolve, x, r, atol, maxiter, report,
                         steps_per_read, callback, check_every)
        if done is not None:
            return done
    axpy = _axpy_for(xp, r)
    aypx = _aypx_for(xp, r)
    hist = []
    # x, r and p are updated in place, as SciPy does. Without a callback the step
    # x += alpha * p is applied one iteration late, once that step's p^H A p has been
    # read (with the next residual norm, one sync) and found > 0: x is then still the
    # last good iterate when it is not. A callback must see each iterate, so with one
    # x is updated out of place at once and the previous x kept.
    lazy = callback is None
    settle, read = _settler(xp), _reader(xp)
    rho_prev = p = pq = alpha = x_prev = None
    for iteration in range(maxiter):
        if psolve is None and not cplx:
            # One pass gives both: ||r|| = sqrt(r . r) exactly as numpy.linalg.norm.
            z = r
            rho_cur = vecdot(r, r)
            rr, pqf = read(rho_cur, pq)  # sync: the stopping test, the curvature
            rnorm = math.sqrt(rr)  # (IEEE sqrt, as NumPy)
        else:
            rnorm, pqf = read(_norm(xp, r, vecdot), None if pq is None else xp.real(pq))  # sync
        if report:
            hist.append(rnorm)
        if pq is not None:
            if not pqf > 0:
                # The last step divided by p^H A p <= 0 (or NaN): not positive definite.
                bad = math.isfinite(rnorm) and pqf <= 0
                return _finish(report, x if lazy else x_prev, -30 if bad else -20,
                               iteration - 1, hist)
            if lazy:
                x = axpy(alpha, p, x)  # the last iteration's step (p is still that step's)
        if rnorm < atol:
            return _finish(report, x, 0, iteration, hist)
        if not math.isfinite(rnorm):
            return _finish(report, x, -20, iteration, hist)
        if psolve is not None or cplx:
            z = r if psolve is None else psolve(r)
            rho_cur = vecdot(r, z)
        if iteration > 0:
            p = aypx(rho_cur / rho_prev, z, p)  # p = z + beta * p
        else:
            p = xp.astype(z, r.dtype, copy=True)  # z may be r (updated below) or M's
        q = matvec(p)
        pq = vecdot(p, q)
        alpha = rho_cur / pq
        if not lazy:
            # Out of place, but through axpy: the lazy path's rounding (CuPy's complex
            # ``alpha * p`` rounds otherwise; the callback must not change the iterates).
            x_prev = x
            x = axpy(alpha, p, xp.asarray(x, copy=True))
        r = axpy(alpha, q, r, True)  # r -= alpha * q
        rho_prev = rho_cur
        x, r, p, pq, alpha, rho_prev = settle(x, r, p, pq, alpha, rho_prev)
        if not lazy:
            callback(x)
    if pq is not None:
        pqf = float(xp.real(pq))  # sync
        if not pqf > 0:
            return _finish(report, x if lazy else x_prev, -30 if pqf <= 0 else -20,
                           maxiter - 1, hist)
        if lazy:
            x = axpy(alpha, p, x)
    return _finish(report, x, maxiter, maxiter, hist)


def _cg_batched(A, B, x0, rtol, atol, maxiter, M, callback, report, products):
    """cg for ``B`` of shape (n, k): k independent systems, each with its own stopping test.

    Every column follows exactly the single right-hand-side recurrence (a converged,
    failed or indefinite column is frozen: its step length becomes 0). The products
    are ``A @ P`` for the (n, k) block (one spmv/matmul per iteration for all columns);
    the dot products the namespace's ``vecdot`` over the columns (``products="device"``)
    or, ``"blas"``, the host BLAS's ``vecdot`` of each column (:func:`_products`).
    Returns ``(X, infos)`` with ``infos`` a tuple of k ints; with ``report=True`` a
    third item, a tuple of k SolveReports. Synchronizes once per iteration (the k
    residual norms and curvatures).
    """
    if not hasattr(B, "__array_namespace__"):
        B = _xp_tessera().asarray(B)
    xp = B.__array_namespace__()
    n, k = B.shape
    if k == 0:
        raise ValueError(f"cg: a 2-D b needs at least one column. Received: b.shape={B.shape}")
    # Operators, work dtype and the checks of the single case, through column 0.
    A, M, _, b0, xp, _ = _make_system("cg", A, M, None, B[:, 0])
    dt = b0.dtype
    B = B if B.dtype == dt else xp.astype(B, dt)
    _check_finite(xp, B, "cg", "b")
    if x0 is None:
        X = xp.zeros((n, k), dtype=dt, device=_device(B))
        R = B
    else:
        if tuple(x0.shape) != (n, k):
            raise ValueError(f"cg: x0 must have the shape of b, ({n}, {k}). Received: "
                             f"x0.shape={tuple(x0.shape)}")
        X = xp.astype(x0, dt, copy=True)
        _check_finite(xp, X, "cg", "x0")
        R = B - A.matmat(X)
    matmat = A.matmat
    psolve = None if M is None else M.matmat
    cplx = xp.isdtype(dt, "complex floating")
    if products == "blas":
        vecdot = _products(xp, b0, products)[0]

        def coldot(U, V):
            return xp.stack([vecdot(U[:, j], V[:, j]) for j in range(k)])
    else:
        def coldot(U, V):
            return xp.vecdot(U, V, axis=0)

    def colnorms(V):
        if cplx:
            re, im = xp.real(V), xp.imag(V)
            return xp.sqrt(coldot(re, re) + coldot(im, im))
        return xp.sqrt(coldot(V, V))

    bn = _host_floats(xp, colnorms(B))  # sync
    tols = [_get_atol("cg", v, atol, rtol) for v in bn]
    if maxiter is None:
        maxiter = 10 * n
    maxiter = int(maxiter)
    infos = [0 if v == 0 else None for v in bn]  # None: still iterating
    its = [0] * k
    hists = [[] for _ in range(k)]
    X = X * xp.asarray([0.0 if v == 0 else 1.0 for v in bn], dtype=dt, device=_device(B)) \
        if 0.0 in bn else X
    P = rho_prev = pq = None
    live = mask = None  # the columns still iterating: on the host, and on the device

    def curvature(pqh, rn, step):
        # A column whose last step found p^H A p <= 0 (or NaN) did not take it (its step
        # length was 0 on the device): x is its last good iterate, as in the single case.
        for j in range(k):
            if infos[j] is None and not pqh[j] > 0:
                bad = math.isfinite(rn[j]) and pqh[j] <= 0
                infos[j], its[j] = (-30 if bad else -20), step

    for iteration in range(maxiter):
        # One read an iteration: the residual norms with the last step's curvatures.
        rnv = colnorms(R)
        if pq is None:
            rn = _host_floats(xp, rnv)  # sync
        else:
            got = _host_floats(xp, xp.concat([rnv, xp.real(pq)]))  # sync
            rn = got[:k]
            curvature(got[k:], rn, iteration - 1)
        for j in range(k):
            if infos[j] is None:
                hists[j].append(rn[j])
                if rn[j] < tols[j]:
                    infos[j], its[j] = 0, iteration
                elif not math.isfinite(rn[j]):
                    infos[j], its[j] = -20, iteration
        if all(i is not None for i in infos):
            pq = None
            break
        now = [i is None for i in infos]
        if now != live:  # (a column stopped: the device's mask changes)
            live = now
            mask = xp.asarray(live, device=_device(B))
        Z = R if psolve is None else psolve(R)
        rho = coldot(R, Z)
        if iteration > 0:
            P = P * (rho / rho_prev) + Z
        else:
            P = Z
        Q = matmat(P)
        pq = coldot(P, Q)
        # Steps only for live columns with p^H A p > 0 (read with the next norms).
        ok = mask & (xp.real(pq) > 0)
        alpha = xp.where(ok, rho / xp.where(ok, pq, xp.ones_like(pq)), xp.zeros_like(pq))
        X = X + alpha * P
        R = R - alpha * Q
        rho_prev = xp.where(ok, rho, xp.ones_like(rho))
        for j in range(k):
            if infos[j] is None:
                its[j] = iteration + 1
        if callback is not None:
            callback(X)
    if pq is not None:  # (maxiter reached: the last step's curvatures)
        curvature(_host_floats(xp, xp.real(pq)), [0.0] * k, maxiter - 1)  # sync
    infos = tuple(maxiter if i is None else i for i in infos)
    if not report:
        return X, infos
    reps = tuple(SolveReport(i, _REASONS.get(i, "maxiter" if i > 0 else "breakdown"), t,
                             tuple(h)) for i, t, h in zip(infos, its, hists))
    return X, infos, reps


def bicgstab(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M=None, callback=None,
             report=False, products="device"):
    """Solve ``A x = b`` with BiCGSTAB; SciPy's signature, recurrence and ``info``.

    ``-10``: ``rho`` breakdown; ``-11``: ``omega`` breakdown or ``rtilde^H v = 0``.
    Synchronizes twice per iteration (two residual norms) plus the breakdown tests; on a
    device that registers ``bicgstab_fused`` (CUDA: one persistent cooperative kernel,
    for stored matrices ``A`` and ``M``) once per run of iterations instead, every test
    on the device (with a callback: a run is one iteration, and the callback gets a copy
    of x).
    ``products`` (tessera): where the dot products sum, ``"device"`` (default) or
    ``"blas"`` (the host BLAS's order: SciPy's iterates; see the module docstring).
    """
    _check_products("bicgstab", products)
    A, M, x, b, xp, nonzero = _make_system("bicgstab", A, M, x0, b)
    matvec = _fast_matvec(A)
    psolve = (lambda v: v) if M is None else M.matvec
    vecdot = _products(xp, b, products)[0]
    bnrm2, atol, maxiter, r = _start("bicgstab", xp, b, x, nonzero, matvec, rtol, atol,
                                     maxiter, vecdot)
    if bnrm2 == 0:
        return _finish(report, xp.zeros_like(b), 0, 0, [0.0])
    rhotol = float(xp.finfo(b.dtype).eps) ** 2
    omegatol = rhotol
    done = _bicgstab_fused(xp, A, M, x, r, atol, rhotol, maxiter, callback, products)
    if done is not None:
        return _finish(report, *done)
    rtilde = r
    rho_prev = omega = alpha = p = v = None
    settle = _settler(xp)
    hist = []
    for iteration in range(maxiter):
        done = _residual_test(xp, r, x, atol, iteration, hist, report, vecdot)  # sync
        if done is not None:
            return done
        rho = vecdot(rtilde, r)
        if abs(complex(rho)) < rhotol:  # sync
            return _finish(report, x, -10, iteration, hist)
        if iteration > 0:
            if abs(complex(omega)) < omegatol:  # sync
                return _finish(report, x, -11, iteration, hist)
            beta = (rho / rho_prev) * (alpha / omega)
            p = (p - omega * v) * beta + r
        else:
            p = r
        phat = psolve(p)
        v = matvec(phat)
        rv = vecdot(rtilde, v)
        p, phat, v, rv, rho = settle(p, phat, v, rv, rho)
        if complex(rv) == 0:  # sync
            return _finish(report, x, -11, iteration, hist)
        alpha = rho / rv
        r, alpha = settle(r - alpha * v, alpha)
        s = r
        snorm = float(_norm(xp, s, vecdot))  # sync
        if snorm < atol:
            x = x + alpha * phat
            if report:
                hist.append(snorm)
            return _finish(report, x, 0, iteration + 1, hist)
        shat = psolve(s)
        t = matvec(shat)
        omega = vecdot(t, s) / vecdot(t, t)
        x = x + alpha * phat
        x = x + omega * shat
        r = r - omega * t
        rho_prev = rho
        x, r, omega, rho_prev = settle(x, r, omega, rho_prev)
        if callback is not None:
            callback(x)
    return _finish(report, x, maxiter, maxiter, hist)


def _bicgstab_fused(xp, A, M, x, r, atol, tol, maxiter, callback, products):
    """bicgstab's iterations on the device's fused solve (op ``bicgstab_fused``, the
    contract :mod:`._fused_bicgstab`): ``(x, info, iterations, norms)``, or None where the
    device registers none or declines (the generic loop then runs). One read per run
    (``# sync``); with a callback a run is one iteration, and the callback is given a
    copy of x (x itself is updated in place)."""
    if (xp is not _xp_tessera() or products != "device" or maxiter < 1 or r.ndim != 1
            or r.shape[0] == 0):
        return None
    try:
        launcher = _dispatch.lookup("bicgstab_fused", r.device, r.dtype)
    except _KernelNotFoundError:
        return None
    Aop = _operand(xp, A, _fast_matvec(A), r, "A", "bicgstab")
    Mop = None if M is None else _operand(xp, M, M.matvec, r, "M", "bicgstab")
    if Aop.kind is None or (Mop is not None and Mop.kind is None):
        return None  # (a callable operator: the generic loop)
    r = xp.asarray(r, copy=True)  # (the solve's own: r may be b itself)
    solve = launcher(x._data, r._data, Aop, Mop, atol=atol, rhotol=tol, omegatol=tol,
                     maxiter=maxiter)
    if solve is None:
        return None
    from ._fused_bicgstab import BiCGSTABStatus

    hist = []
    while True:
        out = solve.run(1 if callback is not None else solve.k_max)  # sync: one read
        hist.extend(out.residual_norms)
        if out.status is BiCGSTABStatus.RUNNING or out.status is BiCGSTABStatus.MAXITER:
            if callback is not None:
                callback(xp.asarray(x, copy=True))
        if out.status is not BiCGSTABStatus.RUNNING:
            break
    info = maxiter if out.status is BiCGSTABStatus.MAXITER else int(out.status)
    return x, info, out.iterations, hist


def cgs(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M=None, callback=None,
        report=False, products="device"):
    """Solve ``A x = b`` with Conjugate Gradient Squared; SciPy's signature, recurrence
    (the true residual ``b - A x`` each iteration) and ``info`` (``-10``, ``-11``).
    ``products`` (tessera): where the dot products sum, ``"device"`` (default) or
    ``"blas"`` (the host BLAS's order: SciPy's iterates; see the module docstring).
    """
    _check_products("cgs", products)
    A, M, x, b, xp, nonzero = _make_system("cgs", A, M, x0, b)
    matvec = _fast_matvec(A)
    psolve = (lambda v: v) if M is None else M.matvec
    vecdot = _products(xp, b, products)[0]
    bnrm2, atol, maxiter, r = _start("cgs", xp, b, x, nonzero, matvec, rtol, atol,
                                     maxiter, vecdot)
    if bnrm2 == 0:
        return _finish(report, xp.zeros_like(b), 0, 0, [0.0])
    rhotol = float(xp.finfo(b.dtype).eps) ** 2
    rtilde = r
    rho_prev = p = u = q = None
    hist = []
    settle = _settler(xp)
    for iteration in range(maxiter):
        done = _residual_test(xp, r, x, atol, iteration, hist, report, vecdot)  # sync
        if done is not None:
            return done
        rho_cur = vecdot(rtilde, r)
        if abs(complex(rho_cur)) < rhotol:  # sync
            return _finish(report, x, -10, iteration, hist)
        if iteration > 0:
            beta = rho_cur / rho_prev
            u = r + beta * q
            p = ((p * beta + q) * beta) + u
        else:
            p = r
            u = r
        phat = psolve(p)
        vhat = matvec(phat)
        rv = vecdot(rtilde, vhat)
        p, u, vhat, rv, rho_cur = settle(p, u, vhat, rv, rho_cur)
        if complex(rv) == 0:  # sync
            return _finish(report, x, -11, iteration, hist)
        alpha = rho_cur / rv
        q = u - alpha * vhat
        uhat = psolve(u + q)
        x = x + alpha * uhat
        r = b - matvec(x)
        rho_prev = rho_cur
        x, r, q, rho_prev = settle(x, r, q, rho_prev)
        if callback is not None:
            callback(x)
    return _finish(report, x, maxiter, maxiter, hist)


def bicg(A, b, x0=None, *, rtol=1e-5, atol=0.0, maxiter=None, M=None, callback=None,
         report=False, products="device"):
    """Solve ``A x = b`` with BiConjugate Gradient; SciPy's signature, recurrence and
    ``info`` (``-10``, ``-11``). Needs ``A.rmatvec`` (and ``M.rmatvec``).
    ``products`` (tessera): where the dot products sum, ``"device"`` (default) or
    ``"blas"`` (the host BLAS's order: SciPy's iterates; see the module docstring).
    """
    _check_products("bicg", products)
    A, M, x, b, xp, nonzero = _make_system("bicg", A, M, x0, b, need_rmatvec=True)
    matvec = _fast_matvec(A)
    rmatvec = A.rmatvec
    psolve = (lambda v: v) if M is None else M.matvec
    rpsolve = (lambda v: v) if M is None else M.rmatvec
    vecdot = _products(xp, b, products)[0]
    bnrm2, atol, maxiter, r = _start("bicg", xp, b, x, nonzero, matvec, rtol, atol,
                                     maxiter, vecdot)
    if bnrm2 == 0:
        return _finish(report, xp.zeros_like(b), 0, 0, [0.0])
    rhotol = float(xp.finfo(b.dtype).eps) ** 2
    rtilde = r
    rho_prev = p = ptilde = None
    hist = []
    settle = _settler(xp)
    for iteration in range(maxiter):
        done = _residual_test(xp, r, x, atol, iteration, hist, report, vecdot)  # sync
        if done is not None:
            return done
        z = psolve(r)
        ztilde = rpsolve(rtilde)
        rho_cur = vecdot(rtilde, z)
        if abs(complex(rho_cur)) < rhotol:  # sync
            return _finish(report, x, -10, iteration, hist)
        if iteration > 0:
            beta = rho_cur / rho_prev
            p = p * beta + z
            ptilde = ptilde * xp.conj(beta) + ztilde
        else:
            p = z
            ptilde = ztilde
        q = matvec(p)
        qtilde = rmatvec(ptilde)
        rv = vecdot(ptilde, q)
        p, ptilde, q, qtilde, rv, rho_cur = settle(p, ptilde, q, qtilde, rv, rho_cur)
        if complex(rv) == 0:  # sync
            return _finish(report, x, -11, iteration, hist)
        alpha = rho_cur / rv
        x = x + alpha * p
        r = r - alpha * q
        rtilde = rtilde - xp.conj(alpha) * qtilde
        rho_prev = rho_cur
        x, r, rtilde, rho_prev = settle(x, r, rtilde, rho_prev)
        if callback is not None:
            callback(x)
    return _finish(report, x, maxiter, maxiter, hist)


def _rotation_norm(xp, v, products):
    """``norm2(a, b) = ||(a, b)||_2`` of two floats, for minres's rotations.

    SciPy forms it as ``numpy.linalg.norm([a, b])``: ``sqrt`` of the host BLAS ``ddot``
    of the pair, whose rounding is the machine's: OpenBLAS's AVX-512 kernel fuses the
    second product into the sum, ``fma(b, b, a*a)`` (one rounding), where AVX2 rounds
    ``a*a + b*b`` as written; the two differ in 3172 of 20000 random pairs on an
    AVX-512 Xeon, and one ulp of gamma moved 10 of 25 iterates (Poisson 5x5, 3 steps).
    So where the products are the host BLAS's (``"blas"``, the NumPy backend, NumPy's
    namespace) it is SciPy's call; on an accelerator's ``"device"`` products, as written.
    """
    T = _xp_tessera()
    host = products == "blas" or getattr(xp, "__name__", "") == "numpy" or (
        xp is T and v.device.backend.is_host)
    if not host:
        return lambda a, b: math.sqrt(a * a + b * b)
    import numpy as np

    # numpy.linalg.norm([a, b]): SciPy's minres's root and gamma.
    return lambda a, b: float(np.linalg.norm([a, b]))


def minres(A, b, x0=None, *, rtol=1e-5, shift=0.0, maxiter=None, M=None, callback=None,
           show=False, check=False, report=False, products="device"):
    """Solve ``(A - shift*I) x = b`` with MINRES (A real symmetric, possibly indefinite).

    SciPy's signature, Lanczos recurrence and stopping tests (``||r|| / (||A|| ||x||)
    <= rtol`` and its least-squares twin; ``maxiter`` defaults to ``5 * n``; ``info``
    is 0 or ``maxiter``). ``M`` must be symmetric positive definite: an indefinite M
    raises ValueError, as does a ``beta < 0`` showing A is not symmetric (SciPy's
    errors); ``check=True`` adds SciPy's up-front symmetry tests. ``show`` is accepted
    and prints nothing. Complex input raises TypeError: SciPy's minres uses
    unconjugated inner products and fails on it too.
    ``products`` (tessera): where the dot products sum, ``"device"`` (default) or
    ``"blas"`` (the host BLAS's order: SciPy's iterates; see the module docstring).
    """
    _check_products("minres", products)
    A, M, x, b, xp, _ = _make_system("minres", A, M, x0, b)
    if xp.isdtype(b.dtype, "complex floating"):
        raise TypeError("minres: A and b must be real (A symmetric); complex input is not "
                        f"supported. Received: dtype={b.dtype}")
    matvec = _fast_matvec(A)
    psolve = (lambda v: v) if M is None else M.matvec
    n = b.shape[0]
    if maxiter is None:
        maxiter = 5 * n
    maxiter = int(maxiter)
    vecdot = _products(xp, b, products)[0]
    norm2 = _rotation_norm(xp, b, products)
    eps = float(xp.finfo(b.dtype).eps)
    hist = []
    bnorm = _b_norm("minres", xp, b, vecdot)
    r1 = b if x0 is None else b - matvec(x)
    y = psolve(r1)
    beta1 = float(vecdot(r1, y))  # sync
    if beta1 < 0:
        raise ValueError("minres: the preconditioner M is indefinite (r^T M r < 0).")
    if beta1 == 0:
        return _finish(report, x, 0, 0, [0.0])
    if bnorm == 0:
        return _finish(report, xp.zeros_like(b), 0, 0, [0.0])
    if not math.isfinite(beta1):
        return _finish(report, x, -20, 0, [beta1])
    beta1 = math.sqrt(beta1)
    if check:
        w = matvec(y)
        r2 = matvec(w)
        s, t = float(vecdot(w, w)), float(vecdot(y, r2))  # sync
        if abs(s - t) > (s + eps) * eps ** (1.0 / 3.0):
            raise ValueError("minres: A is not symmetric (check=True found y^T A (A y) != "
                             "(A y)^T (A y)).")
        r2 = psolve(y)
        s, t = float(vecdot(y, y)), float(vecdot(r1, r2))  # sync
        if abs(s - t) > (s + eps) * eps ** (1.0 / 3.0):
            raise ValueError("minres: the preconditioner M is not symmetric (check=True).")
    istop = 0
    itn = 0
    oldb = 0.0
    beta = beta1
    dbar = epsln = 0.0
    phibar = rhs1 = beta1
    rhs2 = tnorm2 = gmax = 0.0
    gmin = float(xp.finfo(b.dtype).max)
    cs, sn = -1.0, 0.0
    w = xp.zeros(n, dtype=b.dtype, device=_device(b))
    w2 = w
    r2 = r1
    settle = _settler(xp)
    while itn < maxiter:
        itn += 1
        v = (1.0 / beta) * y
        y = matvec(v)
        if shift != 0:
            y = y - shift * v
        if itn >= 2:
            y = y - (beta / oldb) * r1
        v, y = settle(v, y)
        alfa = float(vecdot(v, y))  # sync
        y = y - (alfa / beta) * r2
        r1, r2 = r2, y
        y = psolve(r2)
        r2, y = settle(r2, y)
        oldb = beta
        beta = float(vecdot(r2, y))  # sync
        if not math.isfinite(beta) or not math.isfinite(alfa):
            return _finish(report, x, -20, itn, hist)
        if beta < 0:
            raise ValueError("minres: A is not symmetric (a Lanczos step gave beta^2 < 0).")
        beta = math.sqrt(beta)
        tnorm2 += alfa**2 + oldb**2 + beta**2
        if itn == 1 and beta / beta1 <= 10 * eps:
            istop = -1
        oldeps = epsln
        delta = cs * dbar + sn * alfa
        gbar = sn * dbar - cs * alfa
        epsln = sn * beta
        dbar = -cs * beta
        root = norm2(gbar, dbar)
        gamma = max(norm2(gbar, beta), eps)
        cs = gbar / gamma
        sn = beta / gamma
        phi = cs * phibar
        phibar = sn * phibar
        denom = 1.0 / gamma
        w1, w2 = w2, w
        w = (v - oldeps * w1 - delta * w2) * denom
        x = x + phi * w
        w, x = settle(w, x)
        gmax = max(gmax, gamma)
        gmin = min(gmin, gamma)
        z = rhs1 / gamma
        rhs1 = rhs2 - delta * z
        rhs2 = -epsln * z
        anorm = math.sqrt(tnorm2)
        ynorm = float(_norm(xp, x, vecdot))  # sync
        epsx = anorm * ynorm * eps
        rnorm = phibar
        hist.append(rnorm)
        test1 = math.inf if (ynorm == 0 or anorm == 0) else rnorm / (anorm * ynorm)
        test2 = math.inf if anorm == 0 else root / anorm
        acond = gmax / gmin
        if istop == 0:
            if 1 + test2 <= 1:
                istop = 2
            if 1 + test1 <= 1:
                istop = 1
            if itn >= maxiter:
                istop = 6
            if acond >= 0.1 / eps:
                istop = 4
            if epsx >= beta1:
                istop = 3
            if test2 <= rtol:
                istop = 2
            if test1 <= rtol:
                istop = 1
        if callback is not None:
            callback(x)
        if istop != 0:
            break
    info = maxiter if istop == 6 else 0
    return _finish(report, x, info, itn, hist)
