"""GMRES with SciPy's signature: restarted, left-preconditioned (``scipy.sparse.linalg.gmres``).

Its conventions are those of every solver in this package, described once in
:mod:`tessera_array.sparse.linalg._isolve`: the ``info`` codes, the refusal of a
non-finite ``b`` or ``x0``, the ``products`` keyword, ``report=True`` and the
synchronization policy. gmres uses that module's system set-up, products and update
helpers and looks them up there when it runs (``_core._products`` and the like), so a
test or benchmark that replaces one of them there reaches gmres too.

Synchronization: besides the residual norms of the stopping tests, each Hessenberg entry
is read back to the host (``# sync:``), as SciPy and CuPy do; the small least-squares
problem is solved there, with Givens rotations (:func:`_lartg`) and back substitution
(:func:`_cdiv` for complex entries).

On a device that registers ``gmres_fused`` (CUDA: a persistent cooperative kernel) the
restart cycles run there instead (:func:`_gmres_fused`; the contract
:mod:`._fused_gmres`): after the set-up reads (||b||, ||M b||), one launch and one read
per run of cycles, the Arnoldi process, rotations, triangular solve and every test on the
device; callable operators, ``products="blas"`` and restarts past the backend's limit
keep the loop below. ``gmres(A, b)`` without x0, M or callback, where the launcher has a
``plain`` form (:func:`_gmres_plain`), skips the set-up reads: its first launch takes
||b|| and the thresholds.

On native buffers: the restart loop, :func:`_gmres_loop`, is written once against a few
vector operations (:mod:`tessera_array.sparse.linalg._vectors`); a device that registers
``krylov_vectors`` (the NumPy backend) runs it on its native buffers, without an Array
per operation, with the generic loop's iterates bit for bit; :func:`_gmres` takes
``native=False`` to run it on Arrays there (:class:`_ArrayVectors`, the reference).
"""

from __future__ import annotations

import math
import warnings

from . import _isolve as _core
from ._fused import FusedOperand
from ._interface import _CSROperator, _DenseOperator, _is_dask, _NamespaceOperator

__all__ = ["gmres"]


def gmres(A, b, x0=None, *, rtol=1e-5, atol=0.0, restart=None, maxiter=None, M=None,
          callback=None, callback_type=None, report=False, products="device"):
    """Solve ``A x = b`` with restarted GMRES (left preconditioning).

    Same signature, iteration, inner tolerance control and ``info`` as
    ``scipy.sparse.linalg.gmres`` (SciPy >= 1.14): ``restart`` defaults to
    ``min(20, n)``, ``maxiter`` (outer iterations) to ``10 * n``; ``callback_type``
    is ``'legacy'`` (the default, with a DeprecationWarning when a callback is given
    without it, as SciPy does: ``callback(residual / ||b||)`` per inner iteration, and
    ``maxiter`` then counts inner iterations), ``'pr_norm'`` (the same values) or
    ``'x'`` (``callback(x)`` per restart).

    Returns ``(x, info)``; with ``report=True`` ``(x, info, SolveReport)``. The
    Arnoldi basis lives on the device; each Hessenberg entry is read back (``# sync``)
    and the small least-squares problem is solved on the host with Givens rotations.
    ``products`` (tessera): where the dot products sum, ``"device"`` (default) or
    ``"blas"`` (the host BLAS's order: SciPy's iterates; see
    :mod:`tessera_array.sparse.linalg._isolve`).

    Notes
    -----
    On a device that registers ``krylov_vectors`` for b's dtype (the NumPy backend) the
    same loop runs on its native buffers instead of on Arrays (the contract:
    :mod:`tessera_array.sparse.linalg._vectors`), with the same iterates bit for bit;
    ``A``, ``M`` and a callback still receive tessera Arrays.
    """
    if callback is not None and callback_type is None:
        warnings.warn(
            "gmres: called with a callback but without callback_type; the default "
            "'legacy' may change, as in SciPy. Pass callback_type='pr_norm', 'x' or "
            "'legacy' explicitly.", DeprecationWarning, stacklevel=2)
    return _gmres(A, b, x0, rtol=rtol, atol=atol, restart=restart, maxiter=maxiter, M=M,
                  callback=callback, callback_type=callback_type, report=report,
                  products=products)


def _gmres(A, b, x0=None, *, rtol=1e-5, atol=0.0, restart=None, maxiter=None, M=None,
           callback=None, callback_type=None, report=False, products="device",
           native=True):
    """gmres's core: :func:`gmres`'s arguments (``callback_type=None`` is ``'legacy'``,
    without gmres's warning), and a seam for tests and benchmarks: ``native=False`` runs
    the loop on Arrays where the device has native vector operations (the reference
    they are tested against)."""
    if callback_type is None:
        callback_type = "legacy"
    if callback_type not in ("x", "pr_norm", "legacy"):
        raise ValueError("gmres: callback_type must be 'x', 'pr_norm' or 'legacy'. Received: "
                         f"callback_type={callback_type!r}")
    if callback is None:
        callback_type = None
    _core._check_products("gmres", products)
    if native and x0 is None and M is None and callback is None and products == "device":
        done = _gmres_plain(A, b, rtol, atol, restart, maxiter, report)
        if done is not None:
            return done
    A, M, x, b, xp, nonzero = _core._make_system("gmres", A, M, x0, b)
    n = b.shape[0]
    vec = _native_vectors(xp, A, M, b, products) if native else None
    if vec is None:
        vec = _ArrayVectors(xp, A, M, b, products)
        bv, xv, wrap = b, x, _same
    else:
        new, dt, dev = _core._xp_tessera().Array._new, b._dtype, b._device
        bv, xv = b._data, x._data

        def wrap(v):
            return new(v, dt, dev)
    bnrm2 = vec.norm(bv)  # sync
    if not math.isfinite(bnrm2):
        _core._refuse_b("gmres", xp, b)
    atol = _core._get_atol("gmres", bnrm2, atol, rtol)
    if bnrm2 == 0:
        return _core._finish(report, xp.zeros_like(b), 0, 0, [0.0])
    if maxiter is None:
        maxiter = 10 * n
    if restart is None:
        restart = 20
    restart = min(int(restart), n)
    if restart < 1 or int(maxiter) != maxiter or maxiter < 0:
        raise ValueError(f"gmres: restart must be >= 1 and maxiter >= 0. Received: "
                         f"restart={restart}, maxiter={maxiter!r}")
    eps = xp.finfo(b.dtype).eps
    if native:
        done = _gmres_fused(xp, vec, A, M, b, bv, x, nonzero, restart, int(maxiter), atol,
                            bnrm2, eps, callback, callback_type, products)
        if done is not None:
            return _core._finish(report, *done)
    # w = M A v is orthogonalized in place (as SciPy does) when it is known to be a
    # fresh array (the library's own operators); a user's matvec or M may return one
    # it keeps (even its input, a row of V), so then the first update is out of place.
    owned = (isinstance(A, _OWN_OPERATORS) and (M is None or isinstance(M, _OWN_OPERATORS)))
    expect = getattr(vec, "expect", None)  # (optional: the products the solve may take)
    if expect is not None:
        expect(int(maxiter) * (restart + 1))
    x, info, its, hist = _gmres_loop(vec, bv, xv, nonzero, owned, restart, int(maxiter),
                                     atol, bnrm2, eps,
                                     xp.isdtype(b.dtype, "complex floating"), callback,
                                     callback_type, wrap)
    return _core._finish(report, wrap(x), info, its, hist)


_OWN_OPERATORS = (_DenseOperator, _CSROperator, _NamespaceOperator)


def _same(v):
    return v


class _Basis:
    """GMRES's Krylov basis: the rows of one (m, n) array written in place, or, for a
    namespace of immutable arrays (dask), a list of vectors stacked where they are used
    together."""

    def __init__(self, xp, m, n, dtype, device, listed=False):
        self.xp, self.listed = xp, listed
        self.rows = [None] * m if listed else None
        self.V = None if listed else xp.empty((m, n), dtype=dtype, device=device)

    def set(self, k, v):
        if self.listed:
            self.rows[k] = v
        else:
            self.V[k, :] = v

    def row(self, k):
        return self.rows[k] if self.listed else self.V[k, :]

    def first(self, m):
        """Rows 0 .. m-1 as one (m, n) array."""
        return self.xp.stack(self.rows[:m]) if self.listed else self.V[:m, :]


class _ArrayVectors:
    """gmres's vector operations on arrays of ``b``'s namespace (the generic path, on
    every device and for every library; the contract: :mod:`._vectors`): the solver's
    products (:func:`~._isolve._products`), the registered ``axpy`` or its expression,
    dask's settle, and :class:`_Basis`."""

    def __init__(self, xp, A, M, b, products):
        self.xp = xp
        self.matvec = _core._fast_matvec(A)
        self.psolve = _same if M is None else M.matvec
        self.dot, self._vecmat = _core._products(xp, b, products)
        self.axpy = _core._axpy_for(xp, b)
        self.settle = _core._settler(xp)
        self.n, self.dtype, self.device = b.shape[0], b.dtype, _core._device(b)
        self.listed = _is_dask(b)  # (a basis of immutable rows: see _Basis)

    def norm(self, v) -> float:
        return float(_core._norm(self.xp, v, self.dot))  # sync

    def basis(self, m):
        return _Basis(self.xp, m, self.n, self.dtype, self.device, listed=self.listed)

    def vecmat(self, coef, V, k):
        c = self.xp.asarray(coef, dtype=self.dtype, device=self.device)
        return self._vecmat(c, V.first(k))


def _gmres_fused(xp, vec, A, M, b, bv, x, nonzero, restart, maxiter, atol, bnrm2, eps,
                 callback, callback_type, products):
    """gmres's restarts on the device's fused solve (op ``gmres_fused``, the contract
    :mod:`._fused_gmres`): ``(x, info, inner iterations, residual norms)``, or None where
    the device registers none or declines (the generic loop then runs). The set-up reads
    (||b||, ||M b||) are the generic loop's; then one read per run of cycles (``# sync``).
    A callback is called after each run, in order: ``'x'`` runs one cycle per launch and
    is given a copy of x; ``'legacy'`` and ``'pr_norm'`` get each inner estimate."""
    if xp is not _core._xp_tessera() or products != "device" or maxiter < 1:
        return None
    from ... import _dispatch
    from ..._errors import KernelNotFoundError

    try:
        launcher = _dispatch.lookup("gmres_fused", b.device, b.dtype)
    except KernelNotFoundError:
        return None
    Aop = _core._operand(xp, A, _core._fast_matvec(A), b, "A", "gmres")
    Mop = None if M is None else _core._operand(xp, M, M.matvec, b, "M", "gmres")
    if Aop.kind is None or (Mop is not None and Mop.kind is None):
        return None  # (a callable operator: the generic loop)
    Mb = vec.psolve(bv)
    Mb_nrm2 = bnrm2 if Mb is bv else vec.norm(Mb)  # sync
    solve = launcher(x._data, b._data, Aop, Mop, restart=restart, maxiter=maxiter,
                     inner_limit=maxiter if callback_type == "legacy" else -1, atol=atol,
                     ptol=Mb_nrm2 * min(1.0, atol / bnrm2), eps=float(eps), nonzero=nonzero)
    if solve is None:
        return None
    from ._fused_gmres import GMRESStatus

    estimates = callback_type in ("legacy", "pr_norm")
    cycles = 1 if callback_type == "x" else solve.cycles_max
    hist = []
    while True:
        out = solve.run(cycles, presids=estimates)  # sync: one read per run
        hist.extend(out.residual_norms)
        if estimates:
            for presid in out.presids:
                callback(presid / bnrm2)
        elif callback_type == "x" and out.x_points:
            callback(xp.asarray(x, copy=True))  # (x itself is updated in place)
        if out.status is not GMRESStatus.RUNNING:
            break
    info = {GMRESStatus.CONVERGED: 0, GMRESStatus.NONFINITE: -20}.get(out.status, maxiter)
    return x, info, out.iterations, hist


def _gmres_plain(A, b, rtol, atol, restart, maxiter, report):
    """gmres's most common call, ``gmres(A, b)`` (restart, maxiter, rtol, atol and report
    alone) with a tessera dense matrix or ``csr_array`` of b's device and dtype and a
    floating 1-D ``b``, on a device whose fused solve also starts the system
    (``gmres_fused.plain``: CUDA): the kernel's first launch takes ||b|| (= ||M b||, =
    ||r|| from x = 0), the threshold and the first inner tolerance, so no read precedes
    it (a vecdot, a root and a read: 85-95 us of an H100 host's solve) and
    ``_make_system``'s conversions are skipped. None where the call is not that one or
    anything is amiss (b not finite, bad arguments): the general path then answers it,
    errors included."""
    kind = _core._plain_kind(A, b)
    if kind is None:
        return None
    T = _core._xp_tessera()
    Arr = T.Array
    dt, dev = b._dtype, b._device
    n = b._data.shape[0]
    restart = 20 if restart is None else restart
    maxiter = 10 * n if maxiter is None else maxiter
    for v in (restart, maxiter):
        if v.__class__ is not int or v < 1:
            return None
    from ... import _dispatch

    launcher = _dispatch.find("gmres_fused", dev, dt)
    plain = getattr(launcher, "plain", None)
    if plain is None:
        return None
    _core._get_atol("gmres", 0.0, atol, rtol)  # (their checks: the threshold is the kernel's)
    variant = _core.matvec_variant("gmres", kind, dev.backend.name)
    solve = plain(b._data, _core._plain_operand(T, A, b, kind, variant, "gmres"),
                  restart=min(restart, n), maxiter=maxiter, rtol=float(rtol),
                  atol=float(atol), eps=float(T.finfo(dt).eps))
    if solve is None:
        return None
    from ._fused_gmres import GMRESStatus

    hist = []
    while True:
        out = solve.run(solve.cycles_max)  # sync: one read per run
        hist.extend(out.residual_norms)
        if out.status is not GMRESStatus.RUNNING:
            break
    if not math.isfinite(hist[0]):
        return None  # (b not finite: the general path words the error)
    info = {GMRESStatus.CONVERGED: 0, GMRESStatus.NONFINITE: -20}.get(out.status, maxiter)
    return _core._finish(report, Arr._new(solve.x, dt, dev), info, out.iterations, hist)


def _native_vectors(xp, A, M, b, products):
    """The device's ``krylov_vectors`` for tessera ``b`` (its dtype), with ``A`` and ``M``
    as FusedOperands; None where it registers none or declines."""
    if xp is not _core._xp_tessera():
        return None
    from ..._dispatch import find

    launcher = find("krylov_vectors", b.device, b.dtype)
    if launcher is None:
        return None
    Aop = _native_operand(xp, A, _core._fast_matvec(A), b, "A")
    Mop = None if M is None else _native_operand(xp, M, M.matvec, b, "M")
    return launcher(b._data, Aop, Mop, products == "blas")


def _native_operand(xp, op, product, b, name):
    """Operator ``op`` (A or M) as ``krylov_vectors`` takes it: a :class:`FusedOperand`
    whose ``apply`` is, for a stored matrix, its registered kernel of the routed variant
    itself (native in, native out); for any other operator :func:`~._isolve._operand`'s."""
    if isinstance(op, _DenseOperator) and op.A.dtype == b.dtype:
        launch, a = op._launch, op.A._data

        def dense(v):
            return launch(a, v)

        return FusedOperand(dense, "dense", (a,), op.variant)
    if isinstance(op, _CSROperator) and op.A.dtype == b.dtype:
        A = op.A
        return FusedOperand(A._native_spmv(op.variant), "csr",
                            (A.data._data, A.indices._data, A.indptr._data), op.variant)
    return _core._operand(xp, op, product, b, name, "gmres")


def _gmres_loop(vec, b, x, nonzero, owned, restart, maxiter, atol, bnrm2, eps, cplx,
                callback, callback_type, wrap):
    """gmres's restarts, SciPy's iteration, on the vectors of ``vec`` (a
    :class:`~._vectors.KrylovVectors`; ``b`` and ``x`` are of its kind, ``x`` updated in
    place or replaced): ``(x, info, inner iterations, residual norms)``. ``wrap(v)`` is
    the Array a callback is given for vector ``v``."""
    matvec, psolve, dot, norm, axpy, settle = (vec.matvec, vec.psolve, vec.dot, vec.norm,
                                               vec.axpy, vec.settle)
    mgs = None if cplx else getattr(vec, "mgs", None)
    eps = float(eps)
    # (a norm of a vector whose norm is known is not taken again: M b is b without M,
    # r is b from x = 0, and M r is r; the same value, one product and sync fewer)
    Mb = psolve(b)
    Mb_nrm2 = bnrm2 if Mb is b else norm(Mb)  # sync
    ptol_max_factor = 1.0
    ptol = Mb_nrm2 * min(ptol_max_factor, atol / bnrm2)
    presid = 0.0
    V = vec.basis(restart + 1)
    givens = [(1.0, 0.0)] * restart
    inner_iter = 0
    hist = []
    rnorm = math.inf
    r = None
    for iteration in range(maxiter):
        if iteration == 0:
            r = (b - matvec(x)) if nonzero else b
            rnorm = bnrm2 if r is b else norm(r)  # sync
            hist.append(rnorm)
            if rnorm < atol:
                return x, 0, 0, hist
            if not math.isfinite(rnorm):
                return x, -20, 0, hist
        v0 = psolve(r)
        tmp = rnorm if v0 is r else norm(v0)  # sync
        if owned and v0 is not b:
            v0 *= 1 / tmp  # v0 is this solver's (r, or M r): scaled in place
            V.set(0, v0)
        else:
            V.set(0, v0 * (1 / tmp))
        h = [[0.0] * (restart + 1) for _ in range(restart)]
        S = [0.0] * (restart + 1)
        S[0] = tmp
        breakdown = False
        nonfinite = False
        for col in range(restart):
            w, = settle(psolve(matvec(V.row(col))))
            h0 = norm(w)  # sync
            if not math.isfinite(h0):
                nonfinite = True
                break
            hcol = h[col]
            if mgs is not None:  # (the steps below in one call)
                hcol[:col + 1], w = mgs(V, w, col + 1, owned)
            else:
                for k in range(col + 1):  # modified Gram-Schmidt
                    vk = V.row(k)
                    t = dot(vk, w)
                    hcol[k] = complex(t) if cplx else float(t)  # sync
                    if owned or k > 0:
                        w = axpy(t, vk, w, True)  # w -= t * vk
                    else:
                        w = w - t * vk
                    w, = settle(w)
            h1 = norm(w)  # sync
            hcol[col + 1] = h1
            if h1 <= eps * h0:
                hcol[col + 1] = 0.0
                breakdown = True
            else:
                w *= 1 / h1  # w is this solver's here (updated in place or replaced)
            V.set(col + 1, w)
            for k in range(col):  # apply the previous rotations to the new column
                c, s = givens[k]
                n0, n1 = hcol[k], hcol[k + 1]
                hcol[k] = c * n0 + s * n1
                hcol[k + 1] = -s.conjugate() * n0 + c * n1
            c, s, mag = _lartg(hcol[col], hcol[col + 1])
            givens[col] = (c, s)
            hcol[col], hcol[col + 1] = mag, 0.0
            tmp = -s.conjugate() * S[col]
            S[col], S[col + 1] = c * S[col], tmp
            presid = abs(tmp)
            inner_iter += 1
            if callback_type in ("legacy", "pr_norm"):
                callback(presid / bnrm2)
            if callback_type == "legacy" and inner_iter == maxiter:
                break
            if presid <= ptol or breakdown:
                break
        if nonfinite:
            return x, -20, inner_iter, hist
        # Back substitution with the triangular h (a pseudo-solve where singular).
        if h[col][col] == 0:
            S[col] = 0
        y = S[:col + 1]
        for k in range(col, 0, -1):
            if y[k] != 0:
                y[k] = _cdiv(y[k], h[k][k]) if cplx else y[k] / h[k][k]
                yk = y[k]
                for i in range(k):
                    y[i] -= yk * h[k][i]
        if y[0] != 0:
            y[0] = _cdiv(y[0], h[0][0]) if cplx else y[0] / h[0][0]
        # dx = y @ V (vecmat conjugates its vector: conj(y) given; exact)
        dx = vec.vecmat([v.conjugate() for v in y] if cplx else y, V, col + 1)
        if callback_type == "x":
            x = x + dx  # a new array: the callback may keep the one it was given
        else:
            x += dx
        x, r = settle(x, b - matvec(x))
        rnorm = norm(r)  # sync
        hist.append(rnorm)
        if not math.isfinite(rnorm):
            return x, -20, inner_iter, hist
        if callback_type == "legacy" and inner_iter == maxiter:
            return x, 0 if rnorm <= atol else maxiter, inner_iter, hist
        if callback_type == "x":
            callback(wrap(x))
        if rnorm <= atol or breakdown:
            break
        if presid <= ptol:
            ptol_max_factor = max(eps, 0.25 * ptol_max_factor)
        else:
            ptol_max_factor = min(1.0, 1.5 * ptol_max_factor)
        ptol = presid * min(ptol_max_factor, atol / rnorm)
    return x, 0 if rnorm <= atol else maxiter, inner_iter, hist


def _lartg(f, g):
    """A plane rotation ``(c, s, r)``: ``[c s; -conj(s) c] @ [f; g] = [r; 0]`` (LAPACK lartg)."""
    if g == 0:
        return 1.0, 0 * g, f
    if f == 0:
        ag = abs(g)
        return 0.0, g.conjugate() / ag, ag
    if isinstance(f, complex) or isinstance(g, complex):
        # LAPACK 3.10 zlartg, unscaled branch, in its operation order.
        f2 = f.real * f.real + f.imag * f.imag
        g2 = g.real * g.real + g.imag * g.imag
        h2 = f2 + g2
        if 1e-290 < f2 and h2 < 1e290:
            c = math.sqrt(f2 / h2)
            return c, g.conjugate() * (f / math.sqrt(f2 * h2)), f / c
    af, ag = abs(f), abs(g)
    # sqrt(f^2 + g^2) as LAPACK forms it in range (not hypot: the rounding then matches
    # SciPy's lartg); scaled only where the squares would over- or underflow.
    if 1e-150 < af < 1e150 and 1e-150 < ag < 1e150:
        d = math.sqrt(af * af + ag * ag)
    else:
        d = math.hypot(af, ag)
    sgn = f / af
    return af / d, sgn * g.conjugate() / d, sgn * d


def _cdiv(a, b):
    """a / b for complex b in NumPy's operation order, so the
    back substitution rounds as SciPy's (Smith's method with a reciprocal)."""
    ar, ai, br, bi = a.real, a.imag, b.real, b.imag
    if abs(br) >= abs(bi):
        if br == 0 and bi == 0:
            return a / b
        rat = bi / br
        scl = 1.0 / (br + bi * rat)
        return complex((ar + ai * rat) * scl, (ai - ar * rat) * scl)
    rat = br / bi
    scl = 1.0 / (bi + br * rat)
    return complex((ar * rat + ai) * scl, (ai * rat - ar) * scl)
