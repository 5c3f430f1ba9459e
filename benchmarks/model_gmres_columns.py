"""Model: the Arnoldi column forms of the fused GMRES kernel, in NumPy float64, inside
SciPy's restarted iteration, against SciPy's gmres (no GPU).

Three forms of a column, each a function of ``(A, r)`` giving a cycle's Hessenberg
columns to the restart driver one at a time (the driver rotates, tests presid <= ptol and
stops a cycle as gmres does):

``mgs``
    Modified Gram-Schmidt: the generic loop's (and SciPy's).
``cgs2``
    gmres.cu's two-barrier column as it runs now. Two reductions a column: h = V^H w;
    U = w - V h; then g = V^H U with ||U||^2. Then h1 = sqrt(||U||^2 - ||g||^2), V[j+1] =
    (U - V g) / h1, and the next product is (A U - Z g) / h1, with Z = A V kept.
``dcgs2``
    One reduction a column: CGS2 with the second projection delayed by a column (DCGS2:
    Swirydowicz et al. 2020, Bielich et al. 2022), in the kernel's terms. The candidate
    u_s (projected once, not normalized) is multiplied as it is, P = A u_s. One
    reduction then takes g = V^H u_s, a = u_s^H u_s, p = V^H P, q = u_s^H P and c = Z^H
    u_s. From them: column s - 1 is completed (h' + g, with beta = sqrt(a - ||g||^2)
    below it), v_s = (u_s - V g) / beta, and A v_s = (P - Z g) / beta. Its first
    projection follows without another reduction: t = (p - H g) / beta, with H =
    V^H A V the Hessenberg so far, and t_s = (q - c^H g - g^H p + g^H H g) / beta^2.
    Then u_{s+1} = A v_s - V t - v_s t_s. Each column's Hessenberg entries come one
    column late, so the presid test (and the cycle's stop) is one reduction later. The
    cycle's last candidate takes a reduction with no product.

    python -m benchmarks.model_gmres_columns [--restart 30] [--maxiter 50]

prints, for each system and form, gmres's inner iterations to rtol 1e-8 against SciPy's,
and max |x - x_mgs| / max |x_mgs| after 1, 3 and 50 inner iterations (callback_type
'legacy' budgets).
"""

from __future__ import annotations

import argparse
import math

import numpy as np


def _lartg(f, g):
    if g == 0:
        return 1.0, 0 * g, f
    if f == 0:
        return 0.0, np.conj(g) / abs(g), abs(g)
    d = math.hypot(abs(f), abs(g))
    sgn = f / abs(f)
    return abs(f) / d, sgn * np.conj(g) / d, sgn * d


def _mgs(A, v0, restart, eps, column):
    n = v0.shape[0]
    V = np.zeros((restart + 1, n), dtype=v0.dtype)
    V[0] = v0
    for j in range(restart):
        w = A @ V[j]
        h0 = np.linalg.norm(w)
        h = np.zeros(j + 2, dtype=v0.dtype)
        for k in range(j + 1):
            h[k] = np.vdot(V[k], w)
            w = w - h[k] * V[k]
        h1 = np.linalg.norm(w)
        breakdown = h1 <= eps * h0
        h[j + 1] = 0.0 if breakdown else h1
        V[j + 1] = w if breakdown else w / h1
        if column(j, h, breakdown):
            return V, j + 1
    return V, restart


def _cgs2(A, v0, restart, eps, column):
    n = v0.shape[0]
    V = np.zeros((restart + 1, n), dtype=v0.dtype)
    Z = np.zeros((restart, n), dtype=v0.dtype)
    V[0] = v0
    Z[0] = A @ v0
    for j in range(restart):
        w = Z[j]
        h = V[:j + 1].conj() @ w  # reduction 1 (with ||w||^2)
        h0 = math.sqrt(np.vdot(w, w).real)
        U = w - h @ V[:j + 1]
        g = V[:j + 1].conj() @ U  # reduction 2 (with ||U||^2)
        h1 = math.sqrt(max(np.vdot(U, U).real - np.vdot(g, g).real, 0.0))
        breakdown = h1 <= eps * h0
        sc = 1.0 if breakdown else 1.0 / h1
        V[j + 1] = (U - g @ V[:j + 1]) * sc
        col = np.zeros(j + 2, dtype=v0.dtype)
        col[:j + 1] = h + g
        col[j + 1] = 0.0 if breakdown else h1
        if column(j, col, breakdown):
            return V, j + 1
        if j + 1 < restart:
            Z[j + 1] = (A @ U - g @ Z[:j + 1]) * sc
    return V, restart


def _dcgs2(A, v0, restart, eps, column):
    n, dt = v0.shape[0], v0.dtype
    V = np.zeros((restart + 1, n), dtype=dt)
    Z = np.zeros((restart, n), dtype=dt)
    H = np.zeros((restart + 1, restart), dtype=dt)  # H[k, m] = v_k^H A v_m, as made
    V[0] = v0
    Z[0] = A @ v0
    t = V[:1].conj() @ Z[0]  # column 0's first projection (v0 exact: the cycle's start)
    h0 = math.sqrt(np.vdot(Z[0], Z[0]).real)
    u = Z[0] - t @ V[:1]
    for s in range(1, restart + 1):
        P = A @ u if s < restart else None  # the product of the unnormalized candidate
        g = V[:s].conj() @ u  # one reduction: g, a (, p, q, c)
        a = np.vdot(u, u).real
        beta = math.sqrt(max(a - np.vdot(g, g).real, 0.0))
        breakdown = beta <= eps * h0
        H[:s, s - 1] = t + g
        H[s, s - 1] = 0.0 if breakdown else beta
        sc = 1.0 if breakdown else 1.0 / beta
        V[s] = (u - g @ V[:s]) * sc
        if column(s - 1, H[:s + 1, s - 1].copy(), breakdown) or P is None:
            return V, s
        p = V[:s].conj() @ P
        q = np.vdot(u, P)
        c = Z[:s].conj() @ u
        Hs = H[:s, :s]
        Z[s] = (P - g @ Z[:s]) * sc
        tv = (p - Hs @ g) * sc
        ts = (q - np.vdot(c, g) - np.vdot(g, p) + np.vdot(g, Hs @ g)) * sc * sc
        t = np.append(tv, ts)
        h0 = math.sqrt(np.vdot(t, t).real + max(np.vdot(u, u).real, 0.0) * sc * sc)
        u = Z[s] - t[:s] @ V[:s] - ts * V[s]
    return V, restart


FORMS = {"mgs": _mgs, "cgs2": _cgs2, "dcgs2": _dcgs2}


class _Cycle:
    """A cycle's columns as gmres takes them: the rotations, g (S), presid and the stop
    test (called by a form with each completed column; True ends the cycle)."""

    def __init__(self, rnorm, restart, ptol, inner, legacy_limit, dtype):
        self.S = np.zeros(restart + 1, dtype=dtype)
        self.S[0] = rnorm
        self.rots, self.cols, self.dtype = [], [], dtype
        self.ptol, self.inner, self.limit = ptol, inner, legacy_limit
        self.presid, self.breakdown = 0.0, False

    def __call__(self, j, h, breakdown):
        h, S = h.astype(self.dtype), self.S
        for k, (c, s) in enumerate(self.rots):
            h[k], h[k + 1] = c * h[k] + s * h[k + 1], -np.conj(s) * h[k] + c * h[k + 1]
        c, s, mag = _lartg(h[j], h[j + 1])
        self.rots.append((c, s))
        h[j], h[j + 1] = mag, 0.0
        self.cols.append(h)
        S[j], S[j + 1] = c * S[j], -np.conj(s) * S[j]
        self.presid, self.breakdown = abs(S[j + 1]), breakdown
        self.inner += 1
        return self.presid <= self.ptol or breakdown or self.inner == self.limit


def gmres(A, b, form, *, rtol=1e-5, restart=20, maxiter=None, legacy_limit=None):
    """SciPy's restarted gmres (x0 = 0, no M) with ``form``'s Arnoldi: (x, inner its,
    info). ``legacy_limit``: stop after that many inner iterations (callback_type
    'legacy')."""
    n = b.shape[0]
    eps = np.finfo(b.dtype).eps
    bnrm2 = np.linalg.norm(b)
    atol = rtol * bnrm2
    maxiter = 10 * n if maxiter is None else maxiter
    ptol, pmax, presid = bnrm2 * min(1.0, atol / bnrm2), 1.0, 0.0
    x = np.zeros_like(b)
    r, rnorm, inner = b.copy(), bnrm2, 0
    for _ in range(maxiter):
        cycle = _Cycle(rnorm, restart, ptol, inner, legacy_limit, b.dtype)
        V, m = FORMS[form](A, r / rnorm, restart, eps, cycle)
        presid, inner, S = cycle.presid, cycle.inner, cycle.S
        R = np.zeros((m, m), dtype=b.dtype)
        for j, h in enumerate(cycle.cols):
            R[:j + 1, j] = h[:j + 1]
        y = S[:m].copy()
        if R[m - 1, m - 1] == 0:
            y[m - 1] = 0
        for k in range(m - 1, -1, -1):
            if y[k] != 0:
                y[k] = y[k] / R[k, k]
                y[:k] -= y[k] * R[:k, k]
        x = x + y @ V[:m]
        r = b - A @ x
        rnorm = np.linalg.norm(r)
        if inner == legacy_limit:
            return x, inner, 0 if rnorm <= atol else maxiter
        if rnorm <= atol or cycle.breakdown:
            return x, inner, 0 if rnorm <= atol else maxiter
        pmax = max(eps, 0.25 * pmax) if presid <= ptol else min(1.0, 1.5 * pmax)
        ptol = presid * min(pmax, atol / rnorm)
    return x, inner, maxiter


def systems(seed=0):
    """(label, A, b): dense SPD 2049 (the suite's), 2-D Poisson 32^2, convection-diffusion
    24^2 (non-symmetric), and a complex non-Hermitian dense system."""
    import scipy.sparse as sp

    from .cuda_krylov import _spd

    rng = np.random.default_rng(seed)
    out = [("dense spd 2049", _spd(2049), rng.standard_normal(2049))]
    k = 32
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    out.append(("poisson 32^2", (sp.kron(sp.eye(k), t) + sp.kron(t, sp.eye(k))).toarray(),
                rng.standard_normal(k * k)))
    k = 24
    c = sp.diags([-1 - 0.4, 2.0, -1 + 0.4], [-1, 0, 1], shape=(k, k))
    out.append(("convection-diffusion 24^2",
                (sp.kron(sp.eye(k), c) + sp.kron(c, sp.eye(k))).toarray(),
                rng.standard_normal(k * k)))
    m = 300
    q = rng.standard_normal((m, m)) + 1j * rng.standard_normal((m, m))
    out.append(("complex dense 300", q / math.sqrt(m) + 3 * np.eye(m),
                rng.standard_normal(m) + 1j * rng.standard_normal(m)))
    return out


def main(argv=None) -> None:
    import scipy.sparse.linalg as sla

    ap = argparse.ArgumentParser(prog="benchmarks.model_gmres_columns")
    ap.add_argument("--restart", type=int, default=30)
    ap.add_argument("--rtol", type=float, default=1e-8)
    args = ap.parse_args(argv)
    for label, A, b in systems():
        its = []
        sla.gmres(A, b, rtol=args.rtol, restart=args.restart, maxiter=1000,
                  callback=its.append, callback_type="pr_norm")
        print(f"{label}: SciPy {len(its)} inner iterations to rtol {args.rtol:g}")
        ref = {m: gmres(A, b, "mgs", rtol=0.0, restart=args.restart, maxiter=10 ** 6,
                        legacy_limit=m)[0] for m in (1, 3, 50)}
        for form in FORMS:
            _, inner, info = gmres(A, b, form, rtol=args.rtol, restart=args.restart,
                                   maxiter=1000)
            devs = []
            for m, xr in ref.items():
                x = gmres(A, b, form, rtol=0.0, restart=args.restart, maxiter=10 ** 6,
                          legacy_limit=m)[0]
                devs.append(np.max(np.abs(x - xr)) / np.max(np.abs(xr)))
            print(f"  {form:6s} {inner:5d} its (info {info}); x against mgs after 1 / 3 / "
                  f"50: {devs[0]:.1e} / {devs[1]:.1e} / {devs[2]:.1e}")


if __name__ == "__main__":
    main()
