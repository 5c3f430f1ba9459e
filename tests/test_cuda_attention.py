"""The CUDA attention and dropout-mask kernels against the CPU.

The launchers of ``backends/_cupy/attention.py`` and ``backends/_cupy/philox.py`` run on
CuPy device 0 and are compared with the NumPy backend's launchers on the same inputs and
with the float64 math reference (:mod:`tessera_array.nn._reference`). Inputs are
uploaded with their strides (transposed views, GQA's stride-0 heads) between poisoned
elements (NaN or 0xFF bytes before and after each), and every output buffer starts
poisoned (``_kernels.empty`` patched: NaN for floats, 0xFF bytes for bool masks), so an
element a kernel forgets to write, or one it reads out of bounds, cannot pass. Dropout
masks must be bit-identical to the CPU's, inside the attention kernels as well as from
``dropout_mask``.

Without the cuda backend the module is skipped with the reason; with
``TESSERA_REQUIRE_BACKENDS`` naming ``cuda`` that skip is a failure instead.
"""

from __future__ import annotations

import math

import _gate
import numpy as np
import pytest
from tessera_array.backends._cupy import _kernels
from tessera_array.backends._cupy import attention as cu_attention
from tessera_array.backends._cupy import philox as cu_philox
from tessera_array.backends.numpy import attention as np_attention
from tessera_array.backends.numpy import philox as np_philox

import tessera_array as xp
from tessera_array._dispatch import KernelRegistry
from tessera_array.nn._reference import attention_backward_reference, attention_reference
from tessera_array.random import dropout_keep_threshold

BACKEND = _gate.require_backend("cuda")

import cupy  # after the gate: only where the cuda backend loaded

DEVICE = cupy.cuda.Device(0)
# Relative error (max |got - ref| / max |ref|) allowed against the float64 reference and
# the NumPy backend's launchers, for sizes up to 64; larger sizes n (head dims, sequence
# lengths) scale it by sqrt(n / 64).
TOL = {np.float32: 1e-5, np.float64: 1e-12}
PAD = 3  # poisoned elements before and after each uploaded input


@pytest.fixture(autouse=True)
def poisoned_outputs(monkeypatch):
    """Every output buffer of the launchers starts as NaN (floats) or 0xFF bytes (bool)."""

    def empty(shape, dtype):
        out = cupy.empty(shape, dtype)
        if out.size:
            if out.dtype == np.bool_:
                out.view(np.uint8).fill(0xFF)  # neither False (0) nor True (1)
            else:
                out.fill(np.nan)
        return out

    monkeypatch.setattr(_kernels, "empty", empty)


def mask_of(a):
    """The host copy of a device bool mask, every byte checked to be 0 or 1 (written)."""
    host = cupy.asnumpy(a)
    assert host.dtype == np.bool_
    assert np.all(host.view(np.uint8) <= 1), "the mask kernel left poisoned bytes"
    return host


def dev(x):
    """A device view of host array ``x`` with ``x``'s strides (stride 0 included), between
    PAD poisoned (NaN / 0xFF) elements on each side in its buffer."""
    x = np.asarray(x)
    isz = x.dtype.itemsize
    if x.size == 0:
        return cupy.empty(x.shape, x.dtype)
    assert all(s >= 0 for s in x.strides)
    span = sum((n - 1) * s for n, s in zip(x.shape, x.strides)) // isz + 1
    base = np.empty(2 * PAD + span, x.dtype)
    base.view(np.uint8)[...] = 0xFF
    view = np.lib.stride_tricks.as_strided(base[PAD:], x.shape, x.strides, writeable=True)
    view[...] = x
    buf = cupy.asarray(base)
    return cupy.ndarray(x.shape, x.dtype, memptr=buf.data + PAD * isz, strides=x.strides)


def host(a):
    return None if a is None else cupy.asnumpy(a)


def rel_err(got, ref, floor=1e-300) -> float:
    """max |got - ref| / max(max |ref|, floor) over the finite elements of ref (the
    infinities must be equal)."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert got.shape == ref.shape
    assert not np.any(np.isnan(got)), "a kernel left poisoned (NaN) elements"
    fin = np.isfinite(ref)
    assert np.array_equal(got[~fin], ref[~fin])
    scale = max(float(np.max(np.abs(ref[fin]), initial=0.0)), floor)
    return float(np.max(np.abs(got[fin] - ref[fin]), initial=0.0)) / scale


# ---- problems ------------------------------------------------------------------------


class Problem:
    """Attention inputs in the reference's layout and in the launchers' layout.

    Reference: q (B, Hq, Sq, D), k/v (B, Hkv, Sk, D/Dv), mask broadcasting to
    (B, Hq, Sq, Sk). Launchers: leading dims (B, Hkv, G) with k/v broadcast (stride 0)
    over the G query heads of each KV head, as the front end hands them over.
    """

    def __init__(self, seed, *, B=2, Hkv=2, G=1, Sq=37, Sk=45, D=16, Dv=None,
                 dtype=np.float32, mask=None, causal=None, window=None, dropout=None,
                 transposed=False, scale=None):
        rng = np.random.default_rng(seed)
        Dv = D if Dv is None else Dv
        Hq = Hkv * G
        self.dtype = np.dtype(dtype)
        self.q = rng.standard_normal((B, Hq, Sq, D)).astype(dtype)
        if transposed:  # a non-contiguous q: the transpose of a (B, Hq, D, Sq) array
            self.q = np.swapaxes(rng.standard_normal((B, Hq, D, Sq)).astype(dtype), -1, -2)
        self.k = rng.standard_normal((B, Hkv, Sk, D)).astype(dtype)
        self.v = rng.standard_normal((B, Hkv, Sk, Dv)).astype(dtype)
        self.dout = rng.standard_normal((B, Hq, Sq, Dv)).astype(dtype)
        self.mask = None
        if mask == "bool":
            m = rng.random((B, 1, Sq, Sk)) > 0.3  # broadcast over the heads
            m[:, :, min(3, Sq - 1)] = False  # a fully masked row
            self.mask = m
        elif mask == "additive":
            m = rng.standard_normal((1, Hq, Sq, Sk)).astype(dtype)  # over the batch
            m[rng.random(m.shape) < 0.2] = -np.inf
            m[:, :, min(2, Sq - 1)] = -np.inf  # a fully masked row
            self.mask = m
        self.scale = 1.0 / math.sqrt(D) if scale is None else scale
        self.causal, self.window, self.dropout = causal, window, dropout
        self.shape5 = (B, Hkv, G)
        self.size = max(Sq, Sk, D, Dv)

    def tol(self) -> float:
        return TOL[self.dtype.type] * max(1.0, math.sqrt(self.size / 64))

    # launcher layout -------------------------------------------------------------
    def split(self, a, seq, last):
        B, Hkv, G = self.shape5
        if a.shape[1] == Hkv * G:
            return a.reshape(B, Hkv, G, seq, last)
        return np.broadcast_to(a[:, :, None], (B, Hkv, G, seq, last))

    def host_args(self):
        B, Hkv, G = self.shape5
        sq, sk = self.q.shape[-2], self.k.shape[-2]
        q5 = self.split(self.q, sq, self.q.shape[-1])
        k5 = self.split(self.k, sk, self.k.shape[-1])
        v5 = self.split(self.v, sk, self.v.shape[-1])
        m5 = None
        if self.mask is not None:
            m5 = np.broadcast_to(self.mask, (B, Hkv * G, sq, sk)).reshape(B, Hkv, G, sq, sk)
        return q5, k5, v5, m5

    def threshold(self) -> int:
        return dropout_keep_threshold(self.dropout[0])

    def kw(self):
        dropout = self.dropout
        if dropout is not None:  # the launchers' (p, seed, offset, threshold)
            dropout = dropout + (self.threshold(),)
        return {"scale": self.scale, "causal": self.causal, "window": self.window,
                "dropout": dropout}

    def cuda_fwd(self, want_lse=True):
        q5, k5, v5, m5 = self.host_args()
        out, lse = cu_attention.attention_fwd(
            dev(q5), dev(k5), dev(v5), None if m5 is None else dev(m5), **self.kw(),
            want_lse=want_lse)
        return host(out), host(lse)

    def numpy_fwd(self):
        return np_attention.attention_fwd(*self.host_args(), **self.kw())

    def cuda_bwd(self, out, lse):
        q5, k5, v5, m5 = self.host_args()
        g = self.split(self.dout, *self.dout.shape[-2:])
        res = cu_attention.attention_bwd(
            dev(q5), dev(k5), dev(v5), dev(out), dev(g), dev(lse),
            None if m5 is None else dev(m5), **self.kw())
        return tuple(host(r) for r in res)

    def numpy_bwd(self, out, lse):
        q5, k5, v5, m5 = self.host_args()
        g = self.split(self.dout, *self.dout.shape[-2:])
        return np_attention.attention_bwd(q5, k5, v5, out, g, lse, m5, **self.kw())

    def to_reference(self, dq, dk, dv):
        """Launcher gradients in the reference's layout (dk/dv summed over each group)."""
        return (dq.reshape(self.q.shape), dk.sum(axis=2), dv.sum(axis=2))

    def score_shape(self):
        B, Hkv, G = self.shape5
        return (B, Hkv * G, self.q.shape[-2], self.k.shape[-2])

    # float64 reference ---------------------------------------------------------------
    def reference(self, keep=None):
        """``((out, lse), (dq, dk, dv))`` in float64; the dropout mask is ``keep`` (bool,
        the score shape) or the CPU's mask of the problem's (p, seed, offset)."""
        f64 = [xp.asarray(np.asarray(a, dtype=np.float64)) for a in (self.q, self.k, self.v)]
        kw = {"scale": self.scale, "enable_gqa": self.shape5[2] > 1,
              "is_causal": self.causal or False, "window": self.window}
        if self.mask is not None:
            m = self.mask if self.mask.dtype == np.bool_ else self.mask.astype(np.float64)
            kw["attn_mask"] = xp.asarray(m)
        if self.dropout is not None:
            p, seed, offset = self.dropout
            if keep is None:
                keep = np_philox.dropout_mask(self.score_shape(), seed, offset,
                                              self.threshold())
            kw["dropout_p"] = p
            kw["dropout_mask"] = xp.asarray(keep)
        out, lse = attention_reference(*f64, **kw)
        grads = attention_backward_reference(
            *f64, xp.asarray(self.dout.astype(np.float64)), **kw)
        return (np.asarray(out), np.asarray(lse)), tuple(np.asarray(g) for g in grads)


def check(pb: Problem, tol_scale=1.0):
    """CUDA forward and backward against the NumPy launchers and the float64 reference."""
    tol = pb.tol() * tol_scale
    out, lse = pb.cuda_fwd()
    n_out, n_lse = pb.numpy_fwd()
    assert out.dtype == pb.dtype and lse.dtype == n_lse.dtype
    assert out.shape == n_out.shape and lse.shape == n_lse.shape
    (r_out, r_lse), r_grads = pb.reference()
    errs = {
        "out/numpy": rel_err(out, n_out), "lse/numpy": rel_err(lse, n_lse),
        "out/ref": rel_err(out.reshape(r_out.shape), r_out),
        "lse/ref": rel_err(lse.reshape(r_lse.shape), r_lse),
    }
    # The backward pass from the NumPy forward's results, so both backends get one input.
    grads = pb.cuda_bwd(n_out, n_lse)
    n_grads = pb.numpy_bwd(n_out, n_lse)
    # With one key dq and dk are 0 in exact arithmetic (rounding noise): measured against 1,
    # the size of the inputs.
    floor = 1.0 if pb.k.shape[-2] == 1 else 1e-300
    for name, g, ng, gr, rg in zip(("dq", "dk", "dv"), grads, n_grads,
                                   pb.to_reference(*grads), r_grads):
        assert g.dtype == pb.dtype and g.shape == ng.shape
        errs[f"{name}/numpy"] = rel_err(g, ng, floor)
        errs[f"{name}/ref"] = rel_err(gr, rg, floor)
    bad = {k: v for k, v in errs.items() if not v <= tol}
    assert not bad, f"relative errors above {tol}: {bad}"
    return errs


# ---- Philox / dropout_mask --------------------------------------------------------------

MASK_CASES = [
    # (shape, seed, offset, p)
    ((1, 1), 0, 0, 0.5),
    ((3, 5, 7), 1, 2, 0.1),
    ((2, 3, 17, 33), 2**64 - 1, 2**64 - 1, 0.9),
    ((4, 1, 31), 12345, 2**32 + 7, 0.25),
    ((2, 2, 64, 64), 2**32, 2**40 + 3, 0.5),
    ((2, 8, 128, 300), 2**63 + 11, 5, 0.1),
    ((5, 1, 1), 7, 0, 2.0**-40),
    ((13, 6), 99, 3, 1 - 2.0**-40),
    ((3, 40, 48), 5, 6, 0.5 + 2.0**-8),  # t8 = 129, frac = 0: every tie keeps
    ((3, 40, 50), 5, 6, 1e-3),  # t8 = 0: a kept tie's byte is 0
]


@pytest.mark.parametrize("shape, seed, offset, p", MASK_CASES)
def test_keep_range_matches_numpy(shape, seed, offset, p):
    thr = dropout_keep_threshold(p)
    *lead, sq, sk = shape
    bh = math.prod(lead)
    got = mask_of(cu_philox.keep_range(DEVICE, seed, offset, thr, sq, sk, 0, bh))
    want = np_philox.dropout_mask(shape, seed, offset, thr).reshape(bh, sq, sk)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("bh0", [2**30, 2**34 // 3, 2**40 + 1, 2**62 // (17 * 33)])
def test_keep_range_counters_beyond_2_32_blocks(bh0):
    """Rows far out (block indices >= 2**32, high counter word used) stay bit-identical."""
    sq, sk, seed, offset, thr = 17, 33, 0xDEADBEEFCAFEF00D, 5, 2**39 + 11
    assert (bh0 * sq * sk) >> 4 >= 2**32
    got = mask_of(cu_philox.keep_range(DEVICE, seed, offset, thr, sq, sk, bh0, 3))
    want = np_philox.keep_block(seed, offset, thr, sq, sk,
                                np.arange(bh0, bh0 + 3, dtype=np.uint64), 0, sq, 0, sk)
    assert np.array_equal(got, want)
    assert 0.3 < got.mean() < 0.7


def test_keep_range_counter_overflow_is_refused():
    with pytest.raises(ValueError, match=r"dropout_mask: the element counters must stay "):
        cu_philox.keep_range(DEVICE, 1, 2, 3, 4, 5, 2**64 // 20 + 1, 1)


def test_keep_range_matches_xp_reference():
    from tessera_array.random import dropout_mask_reference

    shape, seed, offset, p = (2, 3, 9, 11), 2**63 + 5, 2**33 + 1, 0.375
    ref = np.asarray(dropout_mask_reference(shape, p, seed=seed, offset=offset))
    got = cu_philox.keep_range(DEVICE, seed, offset, dropout_keep_threshold(p), 9, 11, 0, 6)
    assert np.array_equal(mask_of(got).reshape(shape), ref)


def test_philox_known_answer_through_the_mask():
    """Random123's Philox4x32-10 known answer (ctr = key = 0) through the mask's bytes:
    element e has byte e & 3 of word e >> 2 of block 0, so at threshold (byte + 1) 2**32
    it drops and at byte 2**32 it keeps, whatever its refinement word."""
    words = (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)  # Random123 kat_vectors
    for e in range(16):
        b = (words[e >> 2] >> (8 * (e & 3))) & 0xFF
        below = mask_of(cu_philox.keep_range(DEVICE, 0, 0, (b + 1) << 32, 1, 16, 0, 1))[0, 0]
        at = mask_of(cu_philox.keep_range(DEVICE, 0, 0, b << 32, 1, 16, 0, 1))[0, 0]
        assert not below[e] and at[e]


def _cuda_device():
    devs = [d for d in xp.__array_namespace_info__().devices() if d.kind == "cuda"]
    assert devs  # the module's gate has the cuda backend loaded
    return devs[0]


def test_dropout_mask_launcher_equals_the_cpu_mask():
    """The registered launcher, given the tessera cuda Device, equals
    ``tessera_array.nn.dropout_mask`` on the CPU bit for bit (p = 0.1)."""
    from tessera_array.nn import dropout_mask

    registry = KernelRegistry()
    cu_philox.register(registry, "cuda")
    launcher = registry.lookup("dropout_mask", "cuda", xp.bool)
    shape, seed, offset, p = (2, 3, 19, 21), 31337, 2**35, 0.1
    thr = dropout_keep_threshold(p)
    got = launcher(shape, seed, offset, thr, device=_cuda_device())
    assert isinstance(got, cupy.ndarray) and got.shape == shape
    want = np.asarray(dropout_mask(shape, p, seed=seed, offset=offset))  # the CPU's
    assert np.array_equal(mask_of(got), want)


# ---- attention: forward and backward ---------------------------------------------------

CASES = {
    "plain": {},
    "odd-sizes": {"Sq": 70, "Sk": 129, "B": 1, "Hkv": 3},
    "tile-edges": {"Sq": 17, "Sk": 33, "D": 33, "Dv": 31},
    "causal-top-left": {"causal": "top_left", "Sq": 45, "Sk": 37},
    "causal-top-left-sq<sk": {"causal": "top_left", "Sq": 30, "Sk": 71},
    "causal-bottom-right": {"causal": "bottom_right", "Sq": 40, "Sk": 75},
    "causal-bottom-right-sq>sk": {"causal": "bottom_right", "Sq": 75, "Sk": 40},
    "window": {"window": (5, 3)},
    "window-left": {"window": (4, None), "Sq": 66, "Sk": 66},
    "window-right": {"window": (None, 2), "Sq": 50, "Sk": 61},
    "long-window": {"window": (20, 0), "Sq": 260, "Sk": 260, "B": 1, "Hkv": 1},
    "window-causal-bottom-right": {"window": (6, None), "causal": "bottom_right"},
    "bool-mask": {"mask": "bool"},
    "additive-mask": {"mask": "additive"},
    "additive-mask-causal": {"mask": "additive", "causal": "top_left"},
    "gqa-8-2": {"Hkv": 2, "G": 4, "B": 1, "Sq": 33, "Sk": 50},
    "gqa-causal-bottom-right": {"Hkv": 2, "G": 4, "B": 1, "causal": "bottom_right",
                                "Sq": 20, "Sk": 47},
    "mqa": {"Hkv": 1, "G": 8, "B": 2, "Sq": 29, "Sk": 41},
    "mqa-masked": {"Hkv": 1, "G": 4, "B": 1, "mask": "bool", "window": (None, 8)},
    "dropout": {"dropout": (0.1, 1234, 5)},
    "dropout-gqa-causal": {"dropout": (0.5, 2**64 - 1, 2**63 + 3), "G": 4, "B": 1,
                           "causal": "bottom_right"},
    "dropout-window-mask": {"dropout": (0.1, 77, 2**33), "window": (9, 4), "mask": "bool"},
    "d64": {"D": 64, "B": 1, "Sq": 50, "Sk": 83},
    "d80-dv64": {"D": 80, "Dv": 64, "B": 1, "Hkv": 1, "Sq": 33, "Sk": 70, "mask": "additive"},
    "d7-dv200": {"D": 7, "Dv": 200, "B": 1, "Hkv": 1, "Sq": 19, "Sk": 40},
    # Head dims beyond 8 * 32: more than one pass over the keys.
    "multi-pass-d300-dv264": {"D": 300, "Dv": 264, "B": 1, "Hkv": 1, "Sq": 21, "Sk": 45,
                              "causal": "bottom_right"},
    "multi-pass-d520-dropout": {"D": 520, "Dv": 40, "B": 1, "Hkv": 1, "Sq": 18, "Sk": 35,
                                "dropout": (0.1, 9, 1)},
    "transposed-q": {"transposed": True, "D": 16},
}


@pytest.mark.parametrize("name", list(CASES))
def test_attention_float32(name):
    check(Problem(sorted(CASES).index(name), **CASES[name]))


@pytest.mark.parametrize("name", ["plain", "causal-bottom-right", "causal-top-left",
                                  "gqa-8-2", "mqa", "window", "bool-mask", "additive-mask",
                                  "dropout", "d80-dv64", "multi-pass-d300-dv264"])
def test_attention_float64(name):
    check(Problem(11, dtype=np.float64, **CASES[name]))


GRID = [(s, d) for s in (1, 17, 128, 300) for d in (1, 7, 64, 128, 200)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("s, d", GRID, ids=[f"S{s}-D{d}" for s, d in GRID])
def test_attention_sizes(s, d, dtype):
    """Every (S, D) of the grid, plain and with bottom-right causal masking and Sq != Sk."""
    check(Problem(s * 1000 + d, B=1, Hkv=2, Sq=s, Sk=s, D=d, dtype=dtype))
    check(Problem(s * 1000 + d + 1, B=1, Hkv=1, G=2, Sq=s, Sk=s + 13, D=d, dtype=dtype,
                  causal="bottom_right"))


@pytest.mark.parametrize("kw", [{"Sq": 1, "Sk": 1}, {"Sq": 5, "Sk": 3, "D": 3},
                                {"Sq": 2, "Sk": 97}, {"Sq": 9, "Sk": 0}, {"Sq": 0, "Sk": 4},
                                {"B": 0}, {"Dv": 0}],
                         ids=["1x1", "tiny", "one-row", "no-keys", "no-queries", "no-heads",
                              "dv0"])
def test_attention_small_and_empty(kw):
    pb = Problem(3, **kw)
    out, lse = pb.cuda_fwd()
    n_out, n_lse = pb.numpy_fwd()
    assert out.shape == n_out.shape and lse.shape == n_lse.shape
    assert rel_err(out, n_out) <= 1e-5 and rel_err(lse, n_lse) <= 1e-5
    grads = pb.cuda_bwd(n_out, n_lse)
    for g, ng in zip(grads, pb.numpy_bwd(n_out, n_lse)):
        # floor 1: a gradient that is 0 in exact arithmetic (one key) is rounding noise
        assert g.shape == ng.shape and rel_err(g, ng, floor=1.0) <= 1e-5


def test_fully_masked_rows_give_zero_and_minus_inf():
    # The bool mask empties rows 0..19 and 25 (and the Problem's row 3).
    pb = Problem(4, mask="bool", Sq=40, Sk=20)
    pb.mask[:, :, 25] = False
    pb.mask[:, :, :20] = False
    out, lse = pb.cuda_fwd()
    (_, r_lse), _ = pb.reference()
    dead = (r_lse == -np.inf).reshape(lse.shape)
    assert dead[..., :20].all() and dead[..., 25].all()
    assert np.all(out[dead] == 0) and np.all(lse[dead] == -np.inf)
    assert np.all(np.isfinite(lse[~dead]))
    dq, _, _ = pb.cuda_bwd(out, lse)
    assert np.all(dq[dead] == 0)


def test_causal_bottom_right_rows_before_the_keys_see_nothing():
    pb = Problem(14, causal="bottom_right", Sq=40, Sk=20)
    out, lse = pb.cuda_fwd()
    assert np.all(out[..., :20, :] == 0) and np.all(lse[..., :20] == -np.inf)
    assert np.all(np.isfinite(lse[..., 20:]))
    check(pb)


def test_want_lse_false_returns_none():
    pb = Problem(5, B=1, Hkv=1)
    out, lse = pb.cuda_fwd(want_lse=False)
    assert lse is None and rel_err(out, pb.numpy_fwd()[0]) <= 1e-5


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_lse_matches_reference(dtype):
    pb = Problem(15, dtype=dtype, mask="additive", Sq=64, Sk=129, D=32)
    _, lse = pb.cuda_fwd()
    (_, r_lse), _ = pb.reference()
    assert lse.dtype == dtype
    assert rel_err(lse.reshape(r_lse.shape), r_lse) <= pb.tol()


def test_forward_dropout_equals_reference_with_the_cpu_mask():
    """p = 0.1: the CUDA mask kernel's output equals tessera_array.nn.dropout_mask on the
    CPU bit for bit, and the forward with dropout equals the float64 reference with that
    mask applied."""
    from tessera_array.nn import dropout_mask

    p, seed, offset = 0.1, 2**50 + 3, 12
    pb = Problem(16, B=2, Hkv=2, G=2, Sq=45, Sk=67, D=24, dropout=(p, seed, offset),
                 causal="bottom_right")
    shape = pb.score_shape()
    cpu = np.asarray(dropout_mask(shape, p, seed=seed, offset=offset))
    gpu = mask_of(cu_philox.dropout_mask(shape, seed, offset, pb.threshold(), device=DEVICE))
    assert np.array_equal(gpu, cpu)
    assert 0.85 < cpu.mean() < 0.95
    out, lse = pb.cuda_fwd()
    (r_out, r_lse), _ = pb.reference(keep=cpu)
    assert rel_err(out.reshape(r_out.shape), r_out) <= pb.tol()
    assert rel_err(lse.reshape(r_lse.shape), r_lse) <= pb.tol()  # of the undropped scores
    check(pb)


def test_forward_dropout_keeps_exactly_the_cpu_mask():
    """V = identity: out[i, j] = P_ij * Z_ij / l_i, zero exactly where the CPU mask drops."""
    sq = sk = 40
    p, seed, offset = 0.4, 2**40 + 17, 77
    pb = Problem(6, B=2, Hkv=3, Sq=sq, Sk=sk, D=8, Dv=sk, dropout=(p, seed, offset))
    pb.v[...] = np.eye(sk, dtype=np.float32)
    out, _ = pb.cuda_fwd()
    keep = np_philox.dropout_mask((2, 3, sq, sk), seed, offset, pb.threshold())
    assert np.array_equal(out.reshape(keep.shape) != 0, keep)


def test_backward_dropout_keeps_exactly_the_cpu_mask():
    """dO = identity: dV[j, i] = P_ij * Z_ij, zero exactly where the CPU mask drops."""
    sq = sk = 40
    p, seed, offset = 0.4, 2**40 + 17, 77
    pb = Problem(7, B=2, Hkv=3, Sq=sq, Sk=sk, D=8, Dv=sq, dropout=(p, seed, offset))
    pb.dout[...] = np.eye(sq, dtype=np.float32)
    out, lse = pb.numpy_fwd()
    _, _, dv = pb.cuda_bwd(out, lse)
    keep = np_philox.dropout_mask((2, 3, sq, sk), seed, offset, pb.threshold())
    assert np.array_equal(np.swapaxes(dv, -1, -2).reshape(keep.shape) != 0, keep)


def test_forward_dropout_counters_beyond_2_32_blocks():
    """Heads far out (bh*Sq*Sk > 2**36: Philox blocks >= 2**32, the high counter word):
    q, k and v are broadcast over 2**22 + 2**16 heads (stride 0, no copy), so every head
    has the same probabilities and only its keep mask differs; a few heads against the
    CPU. The heads outnumber the grid's blocks (GRID_MAX): the grid-stride loop runs."""
    nh, sq, sk = 2**22 + 2**16, 16, 1027
    assert ((nh - 1) * sq * sk) >> 4 >= 2**32 and nh > cu_attention.GRID_MAX
    p, seed, offset = 0.3, 0xDEADBEEF12345678, 2**33 + 1
    thr = dropout_keep_threshold(p)
    rng = np.random.default_rng(17)
    q1 = rng.standard_normal((1, sq, 4)).astype(np.float32)
    k1 = rng.standard_normal((1, sk, 4)).astype(np.float32)
    v1 = rng.standard_normal((1, sk, 1)).astype(np.float32)
    q = cupy.broadcast_to(cupy.asarray(q1), (nh, sq, 4))
    k = cupy.broadcast_to(cupy.asarray(k1), (nh, sk, 4))
    v = cupy.broadcast_to(cupy.asarray(v1), (nh, sk, 1))
    out, lse = cu_attention.attention_fwd(q, k, v, scale=0.5, dropout=(p, seed, offset, thr))
    heads = [0, 1, nh // 2, nh - 2, nh - 1]
    got = cupy.asnumpy(out[heads])[..., 0]  # (heads, sq)
    s = 0.5 * (q1[0].astype(np.float64) @ k1[0].astype(np.float64).T)  # (sq, sk)
    w = np.exp(s - s.max(axis=1, keepdims=True))
    vv = v1[0, :, 0].astype(np.float64)
    scale = (w * np.abs(vv)).sum(axis=1) / w.sum(axis=1)
    for h, g in zip(heads, got):
        keep = np_philox.keep_block(seed, offset, thr, sq, sk, h, 0, sq, 0, sk)
        want = (w * keep / (1 - p)) @ vv / w.sum(axis=1)
        assert np.all(np.abs(g - want) <= 1e-5 * scale), (h, g - want)
    # The log-sum-exp is of the undropped scores: the same bits for every head.
    assert bool(cupy.all(lse == lse[0]))


def test_dropout_counters_beyond_2_32_blocks_on_the_diagonal():
    """One head, Sq = Sk = 2**18 + 5 and window (0, 0): query i sees key i alone (P = 1),
    so out_i = Z_ii v_i and dV_i = Z_ii dO_i exactly, with counters i*Sk + i up to past
    2**36 (Philox blocks >= 2**32); the keep bits against the CPU's Philox."""
    n = 2**18 + 5
    assert ((n - 1) * n + n - 1) >> 4 >= 2**32
    p, seed, offset = 0.25 + 2.0**-20, 2**64 - 2**40 + 3, 2**32 - 1
    thr = dropout_keep_threshold(p)
    rng = np.random.default_rng(19)
    q, k = (rng.standard_normal((1, n, 2)).astype(np.float32) for _ in range(2))
    v, g = (rng.standard_normal((1, n, 1)).astype(np.float32) for _ in range(2))
    kw = {"scale": 0.7, "window": (0, 0), "dropout": (p, seed, offset, thr)}
    out, lse = cu_attention.attention_fwd(dev(q), dev(k), dev(v), **kw)
    c = np.arange(n, dtype=np.uint64) * np.uint64(n + 1)  # counters of (i, i)
    block = c >> np.uint64(4)
    words = np.stack([block.astype(np.uint32), (block >> np.uint64(32)).astype(np.uint32),
                      np.full(n, offset & 0xFFFFFFFF, np.uint32),
                      np.full(n, offset >> 32, np.uint32)], axis=-1)
    u = np_philox.philox4x32_10(words, (seed & 0xFFFFFFFF, seed >> 32))
    word = u[np.arange(n), ((c >> np.uint64(2)) & np.uint64(3)).astype(np.intp)]
    byte = (word >> ((c & np.uint64(3)) * np.uint64(8)).astype(np.uint32)) & np.uint32(0xFF)
    refine = np_philox.refine_words(c, offset, seed)
    keep = (byte.astype(np.uint64) << np.uint64(32)) + refine.astype(np.uint64) >= np.uint64(thr)
    assert (byte == thr >> 32).sum() > 100  # ties, decided by their refinement words
    assert keep[-1000:].mean() > 0.6 and not keep[-1000:].all()
    ks = np.float32(1.0 / (1.0 - p))
    assert np.array_equal(host(out)[0, :, 0], np.where(keep, ks * v[0, :, 0], 0))
    _, _, dv = cu_attention.attention_bwd(dev(q), dev(k), dev(v), out, dev(g), lse, **kw)
    assert np.array_equal(host(dv)[0, :, 0], np.where(keep, ks * g[0, :, 0], 0))


def test_deterministic_run_to_run():
    pb = Problem(8, G=2, B=1, mask="additive", dropout=(0.2, 5, 6), Sq=70, Sk=90)
    out1, lse1 = pb.cuda_fwd()
    out2, lse2 = pb.cuda_fwd()
    assert out1.tobytes() == out2.tobytes() and lse1.tobytes() == lse2.tobytes()
    g1 = pb.cuda_bwd(out1, lse1)
    g2 = pb.cuda_bwd(out1, lse1)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(g1, g2))


def test_gqa_inputs_are_not_copied():
    """The stride-0 broadcast K/V views are read in place (the offset table repeats)."""
    pb = Problem(9, G=4, B=1)
    k5 = pb.host_args()[1]
    k_dev = dev(k5)
    assert k_dev.strides[2] == 0
    table = cu_attention._lead_offsets(k_dev, k5.shape[:3])
    assert table.tolist() == [h * k5.strides[1] // 4 for h in range(2) for _ in range(4)]


def test_negative_strides_are_read_in_place():
    """A reversed view (negative strides) of q and v gives the results of its copy."""
    pb = Problem(18, B=1, Hkv=2, Sq=20, Sk=30, D=8)
    q5, k5, v5, _ = pb.host_args()
    qd = dev(np.ascontiguousarray(q5[:, ::-1, :, ::-1]))[:, ::-1, :, ::-1]
    vd = dev(np.ascontiguousarray(v5[..., ::-1, :]))[..., ::-1, :]
    assert qd.strides[1] < 0 and vd.strides[-2] < 0
    out, lse = cu_attention.attention_fwd(qd, dev(k5), vd, scale=pb.scale)
    n_out, n_lse = pb.numpy_fwd()
    assert rel_err(host(out), n_out) <= pb.tol() and rel_err(host(lse), n_lse) <= pb.tol()


def test_mismatched_dtypes_are_type_errors():
    pb = Problem(13, B=1, Hkv=1)
    q5, k5, v5, _ = pb.host_args()
    q, k, v = dev(q5), dev(k5), dev(v5)
    with pytest.raises(TypeError, match=r"attention_fwd: k must have q's dtype.*k\.dtype=float64"):
        cu_attention.attention_fwd(q, dev(k5.astype(np.float64)), v, scale=1.0)
    with pytest.raises(TypeError, match=r"attention_fwd: mask must be bool or of q's dtype"):
        cu_attention.attention_fwd(q, k, v, dev(np.zeros(q5.shape[:-1] + (k5.shape[-2],),
                                                         np.int32)), scale=1.0)
    with pytest.raises(TypeError, match=r"attention_fwd: q must be float32 or float64"):
        cu_attention.attention_fwd(dev(q5.astype(np.int32)), k, v, scale=1.0)
    out, lse = pb.numpy_fwd()
    with pytest.raises(TypeError, match=r"attention_bwd: lse must be float32"):
        cu_attention.attention_bwd(q, k, v, dev(out), dev(out), dev(lse.astype(np.float64)),
                                   scale=1.0)


def test_register_keys():
    registry = KernelRegistry()
    cu_attention.register(registry, "cuda")
    cu_philox.register(registry, "cuda")
    for op in ("attention_fwd", "attention_bwd"):
        for dt in (xp.float32, xp.float64):
            assert registry.lookup(op, "cuda", dt) is getattr(cu_attention, op)
    assert registry.lookup("dropout_mask", "cuda", xp.bool) is cu_philox.dropout_mask


def test_every_instance_compiles():
    """Each template instance the launchers can name compiles for this device."""
    warp = _kernels.warp_size(DEVICE)
    for file, name in cu_attention.instances(warp):
        assert _kernels.function(file, name, DEVICE) is not None


# ---- through the front end -------------------------------------------------------------


@pytest.mark.parametrize("kw", [
    {},
    {"is_causal": "bottom_right"},
    {"enable_gqa": True, "dropout_p": 0.1, "seed": 2**63 + 1, "offset": 9},
    {"window": (3, 2), "attn_mask": "bool"},
], ids=["plain", "causal-bottom-right", "gqa-dropout", "window-mask"])
def test_front_end_on_cuda_matches_cpu(kw):
    """tessera_array.nn.attention / attention_backward on cuda:0 run these kernels (no
    host fallback) and equal the CPU's results within float32 tolerance."""
    from tessera_array import nn
    from tessera_array._dispatch import lookup

    cuda = _cuda_device()
    assert lookup("attention_fwd", cuda, xp.float32) is cu_attention.attention_fwd
    assert lookup("attention_bwd", cuda, xp.float32) is cu_attention.attention_bwd
    assert lookup("dropout_mask", cuda, xp.bool) is cu_philox.dropout_mask
    rng = np.random.default_rng(20)
    hkv = 2 if kw.get("enable_gqa") else 8
    arrays = {"q": rng.standard_normal((2, 8, 33, 16)),
              "k": rng.standard_normal((2, hkv, 41, 16)),
              "v": rng.standard_normal((2, hkv, 41, 8)),
              "g": rng.standard_normal((2, 8, 33, 8))}
    arrays = {n: a.astype(np.float32) for n, a in arrays.items()}
    kw = dict(kw)
    if kw.get("attn_mask") == "bool":
        arrays["m"] = rng.random((1, 8, 33, 41)) > 0.2  # broadcast over the batch
    cpu = xp.asarray(0).device
    results = []
    for device in (cpu, cuda):
        a = {n: xp.asarray(h, device=device) for n, h in arrays.items()}
        if "m" in a:
            kw["attn_mask"] = a["m"]
        out, lse = nn.attention(a["q"], a["k"], a["v"], return_lse=True, **kw)
        grads = nn.attention_backward(a["q"], a["k"], a["v"], out, a["g"], lse, **kw)
        results.append([np.asarray(r.to_device(cpu)) for r in (out, lse, *grads)])
    for got, want in zip(*results[::-1]):
        assert rel_err(got, want) <= TOL[np.float32]
