"""A tour of tessera_array: its main jobs on the default device and every other device.

Run: python examples/tour.py

Four jobs, each checked against a reference and timed beside a peer in the same run:

- a SciPy-style ``cg`` on the 2-D Poisson problem (checked against scipy.sparse.linalg.cg's
  solution where SciPy is installed, else against NumPy's dense solve);
- a batched FFT (against numpy.fft);
- attention forward and backward with dropout (against the float64 reference functions
  of ``tessera_array.nn``; the dropout mask is the same on every device);
- an Adam step (against ``optim.adam_reference`` in float64).

Times are medians of a few calls after one warm-up call (which compiles a device's
kernels), each up to the result read back on the host. The peer is SciPy, NumPy or torch
(torch where installed, else NumPy's plain formula). Only the public API is used.
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import tessera_array as xp
from tessera_array import nn, optim

info = xp.__array_namespace_info__()
DEFAULT = info.default_device()
DEVICES = [DEFAULT] + [d for d in info.devices() if d != DEFAULT]
CPU = "cpu"
rng = np.random.default_rng(20261202)

try:
    import scipy.sparse as sp
    import scipy.sparse.linalg as spla
except ImportError:
    sp = None
try:
    import torch
except ImportError:
    torch = None


def host(a) -> np.ndarray:
    """A NumPy copy of ``a`` (an explicit transfer from a device)."""
    return np.asarray(a.to_device(CPU))


def timed(f, reps: int = 3) -> float:
    """Median seconds of ``f()`` after one warm-up call."""
    f()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def rel(got, ref) -> float:
    got, ref = np.asarray(got, dtype=np.complex128), np.asarray(ref, dtype=np.complex128)
    return float(np.abs(got - ref).max() / np.abs(ref).max())


rows = []  # (job, device, check, tessera s, peer name, peer s)

# ---- 1. cg on the 2-D Poisson problem (5-point stencil, n x n grid) ---------------------
n = 48
N = n * n
idx = np.arange(N).reshape(n, n)
r_, c_, v_ = [idx.ravel()], [idx.ravel()], [np.full(N, 4.0)]
for di, dj in ((0, 1), (0, -1), (1, 0), (-1, 0)):
    a = idx[max(di, 0):n + min(di, 0), max(dj, 0):n + min(dj, 0)]
    b = idx[max(-di, 0):n + min(-di, 0), max(-dj, 0):n + min(-dj, 0)]
    r_.append(a.ravel()), c_.append(b.ravel()), v_.append(np.full(a.size, -1.0))
rr, cc, vv = (np.concatenate(t) for t in (r_, c_, v_))
order = np.lexsort((cc, rr))
rr, cc, vv = rr[order], cc[order], vv[order]
indptr = np.searchsorted(rr, np.arange(N + 1))
rhs = rng.standard_normal(N)
if sp is not None:
    A_peer = sp.csr_array((vv, cc, indptr), shape=(N, N))
    ref_x, _ = spla.cg(A_peer, rhs, rtol=1e-10)
    peer_name, peer_f = "scipy.sparse.linalg.cg", lambda: spla.cg(A_peer, rhs, rtol=1e-10)
else:
    dense = np.zeros((N, N))
    dense[rr, cc] = vv
    ref_x = np.linalg.solve(dense, rhs)
    peer_name, peer_f = "numpy.linalg.solve (dense)", lambda: np.linalg.solve(dense, rhs)
peer_s = timed(peer_f, reps=1)
for dev in DEVICES:
    dt = xp.float64 if xp.float64 in info.dtypes(device=dev).values() else xp.float32
    A = xp.sparse.csr_array((vv, cc, indptr), shape=(N, N), dtype=dt, device=dev)
    b = xp.asarray(rhs, dtype=dt, device=dev)
    tol = 1e-10 if dt == xp.float64 else 1e-5
    sol, status = xp.sparse.linalg.cg(A, b, rtol=tol)
    assert status == 0, f"cg on {dev}: info={status}"
    s = timed(lambda A=A, b=b, tol=tol: host(xp.sparse.linalg.cg(A, b, rtol=tol)[0]), reps=1)
    err = rel(host(sol), ref_x)
    assert err < (1e-7 if dt == xp.float64 else 1e-3), (dev, err)
    rows.append((f"cg Poisson {n}x{n}", dev, f"rel {err:.1e} vs {peer_name.split('.')[0]}",
                 s, peer_name, peer_s))

# ---- 2. a batched FFT -------------------------------------------------------------------
sig = (rng.standard_normal((128, 4096)) + 1j * rng.standard_normal((128, 4096))).astype(np.complex64)
ref = np.fft.fft(sig.astype(np.complex128), axis=-1)
peer_s = timed(lambda: np.fft.fft(sig, axis=-1))
for dev in DEVICES:
    a = xp.asarray(sig, device=dev)
    s = timed(lambda a=a: host(xp.fft.fft(a)))
    err = rel(host(xp.fft.fft(a)), ref)
    assert err < 1e-5, (dev, err)
    rows.append(("fft 128 x 4096 c64", dev, f"rel {err:.1e} vs numpy", s, "numpy.fft.fft", peer_s))

# ---- 3. attention forward + backward with dropout ---------------------------------------
B, H, S, D, P, SEED = 2, 4, 256, 64, 0.1, 1234
qkv = [rng.standard_normal((B, H, S, D)).astype(np.float32) for _ in range(3)]
dout = rng.standard_normal((B, H, S, D)).astype(np.float32)
q64, k64, v64, do64 = (xp.asarray(t.astype(np.float64), device=CPU) for t in qkv + [dout])
mask_cpu = nn.dropout_mask((B, H, S, S), P, seed=SEED, device=CPU)
ref_out, _ = nn.attention_reference(q64, k64, v64, dropout_p=P, dropout_mask=mask_cpu)
ref_grads = nn.attention_backward_reference(q64, k64, v64, do64, dropout_p=P,
                                            dropout_mask=mask_cpu)
if torch is not None:
    tq, tk, tv = (torch.tensor(t, requires_grad=True) for t in qkv)
    tdo = torch.tensor(dout)

    def peer_attention():
        o = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, dropout_p=P)
        return torch.autograd.grad(o, (tq, tk, tv), tdo)

    peer_name = "torch SDPA"
else:
    nq, nk, nv, ndo = qkv + [dout]
    keep = host(mask_cpu)

    def peer_attention():
        nn.attention_reference(nq, nk, nv, dropout_p=P, dropout_mask=keep)
        return nn.attention_backward_reference(nq, nk, nv, ndo, dropout_p=P, dropout_mask=keep)

    peer_name = "numpy formula"
peer_s = timed(peer_attention)
for dev in DEVICES:
    q, k, v, do = (xp.asarray(t, device=dev) for t in qkv + [dout])
    kw = {"dropout_p": P, "seed": SEED}

    def step(q=q, k=k, v=v, do=do, kw=kw):
        out, lse = nn.attention(q, k, v, return_lse=True, **kw)
        return out, nn.attention_backward(q, k, v, out, do, lse, **kw)

    s = timed(lambda: [host(t) for t in (step()[1])])
    out, grads = step()
    err = max([rel(host(out), host(ref_out))]
              + [rel(host(g), host(r)) for g, r in zip(grads, ref_grads)])
    assert err < 1e-4, (dev, err)
    same = np.array_equal(host(nn.dropout_mask((B, H, S, S), P, seed=SEED, device=dev)),
                          host(mask_cpu))
    assert same, f"the dropout mask of {dev} differs from the CPU's"
    rows.append((f"attention fwd+bwd p={P}", dev,
                 f"rel {err:.1e} vs f64, mask = cpu's", s, peer_name, peer_s))

# ---- 4. an Adam step --------------------------------------------------------------------
shapes = [(512, 512)] * 4
p0 = [rng.standard_normal(s).astype(np.float32) for s in shapes]
g0 = [rng.standard_normal(s).astype(np.float32) for s in shapes]
if torch is not None:
    tps = [torch.tensor(p, requires_grad=True) for p in p0]
    for tp, g in zip(tps, g0):
        tp.grad = torch.tensor(g)
    topt = torch.optim.Adam(tps, lr=1e-3, foreach=True)
    peer_name, peer_s = "torch.optim.Adam", timed(topt.step)
else:
    nps, ms, vs = [p.copy() for p in p0], [np.zeros_like(p) for p in p0], [np.zeros_like(p) for p in p0]

    def numpy_adam(t=1, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
        for p, g, m, v in zip(nps, g0, ms, vs):
            m += (1 - b1) * (g - m)
            v *= b2
            v += (1 - b2) * g * g
            p -= lr / (1 - b1**t) * m / (np.sqrt(v) / (1 - b2**t) ** 0.5 + eps)

    peer_name, peer_s = "numpy formula", timed(numpy_adam)
ref_p = []
for p, g in zip(p0, g0):
    p64, g64 = (xp.asarray(t.astype(np.float64), device=CPU) for t in (p, g))
    z = xp.zeros_like(p64)
    ref_p.append(host(optim.adam_reference(p64, g64, z, z, step=1, lr=1e-3)[0]))
for dev in DEVICES:
    params = [xp.asarray(p.copy(), device=dev) for p in p0]  # updated in place
    grads = [xp.asarray(g, device=dev) for g in g0]
    opt = optim.Adam(params, lr=1e-3)
    opt.step(grads)  # step 1: checked against the reference
    err = max(rel(host(p), r) for p, r in zip(params, ref_p))
    assert err < 1e-5, (dev, err)
    s = timed(lambda opt=opt, grads=grads, params=params: (opt.step(grads), host(params[-1])))
    rows.append(("adam step 4 x 512^2", dev, f"rel {err:.1e} vs f64 ref", s, peer_name, peer_s))

# ---- the table ----------------------------------------------------------------------------
print(f"tessera_array {xp.__version__} (Array API {xp.__array_api_version__}); devices: "
      f"{', '.join(str(d) for d in DEVICES)} (default {DEFAULT})")
head = ("job", "device", "check", "tessera", "peer", "peer time")
table = [head] + [(j, str(d), c, f"{s * 1e3:.2f} ms", pn, f"{ps * 1e3:.2f} ms")
                  for j, d, c, s, pn, ps in rows]
widths = [max(len(r[i]) for r in table) for i in range(len(head))]
for i, r in enumerate(table):
    print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    if i == 0:
        print("  ".join("-" * w for w in widths))
