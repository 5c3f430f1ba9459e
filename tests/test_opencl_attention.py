"""The OpenCL attention and dropout-mask kernels against the CPU.

The launchers of ``backends/opencl/attention.py`` and ``backends/opencl/philox.py``
run on platform 0, device 0 (or the device ``PYOPENCL_CTX`` names; never a prompt)
and are compared with the NumPy backend's launchers on the same inputs and with the
float64 math reference (:mod:`tessera_array.nn._reference`). Inputs are uploaded
with their strides (transposed views, GQA's stride-0 heads) after a few poisoned
elements, and every output buffer is filled with NaN before the kernel runs, so an
element a kernel forgets to write cannot pass. Dropout masks must be bit-identical
to the CPU's, inside the attention kernels as well as from ``dropout_mask``.

Without PyOpenCL or an OpenCL device the module is skipped with the reason; with
``TESSERA_REQUIRE_BACKENDS`` naming ``opencl`` that skip is a failure instead.
"""

from __future__ import annotations

import math

import _opencl_gate
import numpy as np
import pytest
from tessera_array.backends.numpy import attention as np_attention
from tessera_array.backends.numpy import philox as np_philox

import tessera_array as xp
from tessera_array._dispatch import KernelRegistry
from tessera_array._errors import MissingCapabilityError
from tessera_array.nn._reference import attention_backward_reference, attention_reference
from tessera_array.random import dropout_keep_threshold

cl, cla, CTX = _opencl_gate.opencl_context()

from tessera_array.backends.opencl import _programs
from tessera_array.backends.opencl import attention as cl_attention
from tessera_array.backends.opencl import philox as cl_philox

DEVICE = CTX.devices[0]
QUEUE = cl.CommandQueue(CTX)
FP64 = "cl_khr_fp64" in DEVICE.extensions.split()
needs_fp64 = pytest.mark.skipif(not FP64, reason=f"{DEVICE.name.strip()} lacks cl_khr_fp64")
# Relative error (max |got - ref| / max |ref|) allowed against the float64 reference
# and against the NumPy backend's launcher.
TOL = {np.float32: 1e-5, np.float64: 1e-12}
PAD = 3  # poisoned elements before each uploaded input


@pytest.fixture(autouse=True)
def poisoned_outputs(monkeypatch):
    """Every output buffer of the attention launchers starts as NaN."""
    def alloc(queue, shape, dtype):
        out = cla.empty(queue, shape, dtype)
        if out.size:  # from the host: pyopencl's fill kernel warns on NVIDIA's compiler
            out.set(np.full(shape, np.nan, dtype))
        return out

    def alloc_mask(queue, shape, dtype):
        out = cla.empty(queue, shape, dtype)
        if out.size:  # 0xFF bytes: neither False (0) nor True (1)
            cl.enqueue_fill_buffer(queue, out.base_data, np.uint8(0xFF), out.offset, out.nbytes)
        return out

    monkeypatch.setattr(cl_attention, "_alloc", alloc)
    monkeypatch.setattr(cl_philox, "_alloc", alloc_mask)


def mask_of(a):
    """The host copy of a device bool mask, every byte checked to be 0 or 1 (written)."""
    host = a.get()
    assert host.dtype == np.bool_
    assert np.all(host.view(np.uint8) <= 1), "the mask kernel left poisoned bytes"
    return host


def dev(x):
    """A device view of host array ``x`` with ``x``'s strides (stride 0 included) and
    an offset of PAD poisoned (NaN / 0xFF) elements into its buffer."""
    x = np.asarray(x)
    isz = x.dtype.itemsize
    if x.size == 0:
        return cla.empty(QUEUE, x.shape, x.dtype)
    assert all(s >= 0 for s in x.strides)
    span = sum((n - 1) * s for n, s in zip(x.shape, x.strides)) // isz + 1
    base = np.empty(PAD + span, x.dtype)
    base.view(np.uint8)[...] = 0xFF
    view = np.lib.stride_tricks.as_strided(base[PAD:], x.shape, x.strides, writeable=True)
    view[...] = x
    buf = cla.to_device(QUEUE, base)
    return cla.Array(QUEUE, x.shape, x.dtype, data=buf.base_data, offset=PAD * isz,
                     strides=x.strides)


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
                 transposed=False):
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
            m = rng.random((B, 1, Sq, Sk)) > 0.3
            m[:, :, min(3, Sq - 1)] = False  # a fully masked row
            self.mask = m
        elif mask == "additive":
            m = rng.standard_normal((1, Hq, Sq, Sk)).astype(dtype)
            m[rng.random(m.shape) < 0.2] = -np.inf
            m[:, :, min(2, Sq - 1)] = -np.inf  # a fully masked row
            self.mask = m
        self.scale = 1.0 / math.sqrt(D) if D else 1.0
        self.causal, self.window, self.dropout = causal, window, dropout
        self.shape5 = (B, Hkv, G)

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

    def kw(self):
        dropout = self.dropout
        if dropout is not None:  # the launchers' (p, seed, offset, threshold)
            dropout = dropout + (dropout_keep_threshold(dropout[0]),)
        return {"scale": self.scale, "causal": self.causal, "window": self.window,
                    "dropout": dropout}

    def opencl_fwd(self, want_lse=True):
        q5, k5, v5, m5 = self.host_args()
        out, lse = cl_attention.attention_fwd(
            dev(q5), dev(k5), dev(v5), None if m5 is None else dev(m5), **self.kw(),
            want_lse=want_lse)
        return out.get(), (None if lse is None else lse.get())

    def numpy_fwd(self):
        return np_attention.attention_fwd(*self.host_args(), **self.kw())

    def opencl_bwd(self, out, lse):
        q5, k5, v5, m5 = self.host_args()
        g = self.split(self.dout, *self.dout.shape[-2:])
        res = cl_attention.attention_bwd(
            dev(q5), dev(k5), dev(v5), dev(out), dev(g), dev(lse),
            None if m5 is None else dev(m5), **self.kw())
        return tuple(r.get() for r in res)

    def numpy_bwd(self, out, lse):
        q5, k5, v5, m5 = self.host_args()
        g = self.split(self.dout, *self.dout.shape[-2:])
        return np_attention.attention_bwd(q5, k5, v5, out, g, lse, m5, **self.kw())

    def to_reference(self, dq, dk, dv):
        """Launcher gradients in the reference's layout (dk/dv summed over each group)."""
        return (dq.reshape(self.q.shape), dk.sum(axis=2), dv.sum(axis=2))

    # float64 reference ---------------------------------------------------------------
    def reference(self):
        f64 = [xp.asarray(np.asarray(a, dtype=np.float64)) for a in (self.q, self.k, self.v)]
        kw = {"scale": self.scale, "enable_gqa": self.shape5[2] > 1,
                  "is_causal": self.causal or False, "window": self.window}
        if self.mask is not None:
            m = self.mask if self.mask.dtype == np.bool_ else self.mask.astype(np.float64)
            kw["attn_mask"] = xp.asarray(m)
        if self.dropout is not None:
            p, seed, offset = self.dropout
            B, Hkv, G = self.shape5
            shape = (B, Hkv * G) + (self.q.shape[-2], self.k.shape[-2])
            kw["dropout_p"] = p
            kw["dropout_mask"] = xp.asarray(np_philox.dropout_mask(
                shape, seed, offset, dropout_keep_threshold(p)))
        out, lse = attention_reference(*f64, **kw)
        grads = attention_backward_reference(
            *f64, xp.asarray(self.dout.astype(np.float64)), **kw)
        return (np.asarray(out), np.asarray(lse)), tuple(np.asarray(g) for g in grads)


def check(pb: Problem, tol_scale=1.0):
    """OpenCL forward and backward against the NumPy launchers and the float64 reference."""
    tol = TOL[pb.dtype.type] * tol_scale
    out, lse = pb.opencl_fwd()
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
    grads = pb.opencl_bwd(n_out, n_lse)
    n_grads = pb.numpy_bwd(n_out, n_lse)
    for name, g, ng, gr, rg in zip(("dq", "dk", "dv"), grads, n_grads,
                                   pb.to_reference(*grads), r_grads):
        assert g.dtype == pb.dtype and g.shape == ng.shape
        errs[f"{name}/numpy"] = rel_err(g, ng)
        errs[f"{name}/ref"] = rel_err(gr, rg)
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
    ((5, 1, 1), 7, 0, 2.0**-32),
    ((13, 6), 99, 3, 1 - 2.0**-32),
    ((3, 40, 50), 11, 4, 2.0**-40),  # threshold 1: byte 0 ties, decided by the refinement
    ((3, 40, 50), 12, 5, 1 - 2.0**-40),  # threshold 2**40 - 1
    ((3, 33, 47), 13, 6, 0.3),  # frac != 0: the ties (about 1 in 256) refine
]


@pytest.mark.parametrize("shape, seed, offset, p", MASK_CASES)
def test_keep_range_matches_numpy(shape, seed, offset, p):
    thr = dropout_keep_threshold(p)
    *lead, sq, sk = shape
    bh = math.prod(lead)
    got = mask_of(cl_philox.keep_range(QUEUE, seed, offset, thr, sq, sk, 0, bh))
    want = np_philox.dropout_mask(shape, seed, offset, thr).reshape(bh, sq, sk)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("bh0", [2**30, 2**34 // 3, 2**40 + 1, 2**62 // (17 * 33)])
def test_keep_range_counters_beyond_2_32_blocks(bh0):
    """Rows far out (block indices >= 2**32, high counter word used) stay bit-identical."""
    sq, sk, seed, offset, thr = 17, 33, 0xDEADBEEFCAFEF00D, 5, 2**39 + 11
    assert (bh0 * sq * sk) >> 4 >= 2**32
    got = mask_of(cl_philox.keep_range(QUEUE, seed, offset, thr, sq, sk, bh0, 3))
    want = np_philox.keep_block(seed, offset, thr, sq, sk,
                                np.arange(bh0, bh0 + 3, dtype=np.uint64), 0, sq, 0, sk)
    assert np.array_equal(got, want)
    assert 0.3 < got.mean() < 0.7


def test_keep_range_matches_xp_reference():
    from tessera_array.random import dropout_mask_reference

    shape, seed, offset, p = (2, 3, 9, 11), 2**63 + 5, 2**33 + 1, 0.375
    ref = np.asarray(dropout_mask_reference(shape, p, seed=seed, offset=offset))
    got = cl_philox.keep_range(QUEUE, seed, offset, dropout_keep_threshold(p), 9, 11, 0, 6)
    assert np.array_equal(mask_of(got).reshape(shape), ref)


def test_philox_known_answer_through_the_mask():
    """Random123's Philox4x32-10 known answer (ctr = key = 0) is block 0: element e < 16
    has byte e of its words (byte e & 3 of word e >> 2). A threshold of b * 2**32 keeps
    it (a tie with frac 0), (b + 1) * 2**32 drops it, and b * 2**32 + frac keeps it
    exactly when its refinement word (word e & 3 of block 2**63 | e >> 2) is >= frac."""
    words = (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)  # Random123 kat_vectors
    refine = np_philox.refine_words(np.arange(16, dtype=np.uint64), 0, 0)
    for e in range(16):
        b = (words[e >> 2] >> (8 * (e & 3))) & 0xFF
        at = cl_philox.keep_range(QUEUE, 0, 0, b << 32, 1, 16, 0, 1).get()[0, 0]
        assert at[e]
        if b < 255:
            above = cl_philox.keep_range(QUEUE, 0, 0, (b + 1) << 32, 1, 16, 0, 1).get()[0, 0]
            assert not above[e]
        r = int(refine[e])
        for frac in (r, r + 1):
            if 0 < frac < 2**32:
                tie = cl_philox.keep_range(QUEUE, 0, 0, (b << 32) | frac, 1, 16, 0, 1).get()
                assert tie[0, 0, e] == (r >= frac)


def test_dropout_mask_launcher_on_opencl_device():
    """The registered launcher through the public helper on opencl:0 equals the CPU mask."""
    from tessera_array.nn import dropout_mask

    devs = [d for d in xp.__array_namespace_info__().devices() if d.kind == "opencl"]
    assert devs  # the module's gate has the opencl backend loaded
    registry = KernelRegistry()
    cl_philox.register(registry, "opencl")
    launcher = registry.lookup("dropout_mask", "opencl", xp.bool)
    shape, seed, offset, p = (2, 3, 19, 21), 31337, 2**35, 0.2
    thr = dropout_keep_threshold(p)
    got = launcher(shape, seed, offset, thr, device=devs[0])
    assert isinstance(got, cla.Array) and got.shape == shape
    want = np.asarray(dropout_mask(shape, p, seed=seed, offset=offset))  # the CPU's
    assert np.array_equal(mask_of(got), want)


# ---- attention: forward and backward ---------------------------------------------------

CASES = {
    "plain": {},
    "odd-sizes": {"Sq": 70, "Sk": 129, "B": 1, "Hkv": 3},
    "causal-top-left": {"causal": "top_left", "Sq": 45, "Sk": 37},
    "causal-bottom-right": {"causal": "bottom_right", "Sq": 40, "Sk": 75},
    "causal-bottom-right-sq>sk": {"causal": "bottom_right", "Sq": 75, "Sk": 40},
    "window": {"window": (5, 3)},
    "window-left": {"window": (4, None), "Sq": 66, "Sk": 66},
    "long-window": {"window": (20, 0), "Sq": 260, "Sk": 260, "B": 1, "Hkv": 1},
    "window-causal-bottom-right": {"window": (6, None), "causal": "bottom_right"},
    "bool-mask": {"mask": "bool"},
    "additive-mask": {"mask": "additive", "causal": "top_left"},
    "gqa": {"Hkv": 2, "G": 3, "B": 1},
    "mqa-masked": {"Hkv": 1, "G": 4, "B": 1, "mask": "bool", "window": (None, 8)},
    "dropout": {"dropout": (0.3, 1234, 5)},
    "dropout-gqa-causal": {"dropout": (0.5, 2**64 - 1, 2**63 + 3), "G": 2, "B": 1,
                               "causal": "bottom_right"},
    "d64": {"D": 64, "B": 1, "Sq": 50, "Sk": 83},
    "d80-dv64": {"D": 80, "Dv": 64, "B": 1, "Hkv": 1, "Sq": 33, "Sk": 70, "mask": "additive"},
    "transposed-q": {"transposed": True, "D": 16},
}


@pytest.mark.parametrize("name", list(CASES))
def test_attention_float32(name):
    check(Problem(sorted(CASES).index(name), **CASES[name]))


@needs_fp64
@pytest.mark.parametrize("name", ["plain", "causal-bottom-right", "gqa", "dropout",
                                  "d80-dv64"])
def test_attention_float64(name):
    check(Problem(11, dtype=np.float64, **CASES[name]))


@pytest.mark.parametrize("kw", [{"Sq": 1, "Sk": 1}, {"Sq": 5, "Sk": 3, "D": 3}, {"Sq": 2, "Sk": 97},
                                {"Sq": 9, "Sk": 0}, {"Sq": 0, "Sk": 4}, {"B": 0}],
                         ids=["1x1", "tiny", "one-row-group", "no-keys", "no-queries",
                              "no-heads"])
def test_attention_small_and_empty(kw):
    pb = Problem(3, **kw)
    out, lse = pb.opencl_fwd()
    n_out, n_lse = pb.numpy_fwd()
    assert rel_err(out, n_out) <= 1e-5 and rel_err(lse, n_lse) <= 1e-5
    grads = pb.opencl_bwd(n_out, n_lse)
    for g, ng in zip(grads, pb.numpy_bwd(n_out, n_lse)):
        # floor 1: a gradient that is 0 in exact arithmetic (one key) is rounding noise
        assert g.shape == ng.shape and rel_err(g, ng, floor=1.0) <= 1e-5


def test_fully_masked_rows_give_zero_and_minus_inf():
    # bottom-right causal with Sq > Sk: rows i < Sq - Sk see no key; the bool mask
    # empties one more row.
    pb = Problem(4, mask="bool", causal="bottom_right", Sq=40, Sk=20)
    pb.mask[:, :, 25] = False
    out, lse = pb.opencl_fwd()
    (_, r_lse), _ = pb.reference()
    dead = (r_lse == -np.inf).reshape(lse.shape)
    assert dead[..., :20].all() and dead[..., 25].all()
    assert np.all(out[dead] == 0) and np.all(lse[dead] == -np.inf)
    assert np.all(np.isfinite(lse[~dead]))
    dq, _, _ = pb.opencl_bwd(out, lse)
    assert np.all(dq[dead] == 0)


def test_want_lse_false_returns_none():
    pb = Problem(5, B=1, Hkv=1)
    out, lse = pb.opencl_fwd(want_lse=False)
    assert lse is None and rel_err(out, pb.numpy_fwd()[0]) <= 1e-5


def test_forward_dropout_keeps_exactly_the_cpu_mask():
    """V = identity: out[i, j] = P_ij * Z_ij / l_i, zero exactly where the CPU mask drops."""
    sq = sk = 40
    p, seed, offset = 0.4, 2**40 + 17, 77
    pb = Problem(6, B=2, Hkv=3, Sq=sq, Sk=sk, D=8, Dv=sk, dropout=(p, seed, offset))
    pb.v[...] = np.eye(sk, dtype=np.float32)
    out, _ = pb.opencl_fwd()
    keep = np_philox.dropout_mask((2, 3, sq, sk), seed, offset, dropout_keep_threshold(p))
    assert np.array_equal(out.reshape(keep.shape) != 0, keep)


def test_backward_dropout_keeps_exactly_the_cpu_mask():
    """dO = identity: dV[j, i] = P_ij * Z_ij, zero exactly where the CPU mask drops."""
    sq = sk = 40
    p, seed, offset = 0.4, 2**40 + 17, 77
    pb = Problem(7, B=2, Hkv=3, Sq=sq, Sk=sk, D=8, Dv=sq, dropout=(p, seed, offset))
    pb.dout[...] = np.eye(sq, dtype=np.float32)
    out, lse = pb.numpy_fwd()
    _, _, dv = pb.opencl_bwd(out, lse)
    keep = np_philox.dropout_mask((2, 3, sq, sk), seed, offset, dropout_keep_threshold(p))
    assert np.array_equal(np.swapaxes(dv, -1, -2).reshape(keep.shape) != 0, keep)


def test_deterministic_run_to_run():
    pb = Problem(8, G=2, B=1, mask="additive", dropout=(0.2, 5, 6), Sq=70, Sk=90)
    out1, lse1 = pb.opencl_fwd()
    out2, lse2 = pb.opencl_fwd()
    assert out1.tobytes() == out2.tobytes() and lse1.tobytes() == lse2.tobytes()
    g1 = pb.opencl_bwd(out1, lse1)
    g2 = pb.opencl_bwd(out1, lse1)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(g1, g2))


def test_gqa_inputs_are_not_copied():
    """The stride-0 broadcast K/V views are read in place (the offset table repeats)."""
    pb = Problem(9, G=3, B=1)
    k5 = pb.host_args()[1]
    k_dev = dev(k5)
    assert k_dev.strides[2] == 0
    table = cl_attention._lead_offsets(k_dev, k5.shape[:3])
    assert table.tolist() == [PAD + h * k5.strides[1] // 4 for h in range(2) for _ in range(3)]


def test_second_launch_builds_nothing():
    pb = Problem(10, B=1, Hkv=1)
    pb.opencl_fwd()
    built = _programs.build_count()
    pb.opencl_fwd()
    pb.opencl_bwd(*pb.numpy_fwd())
    assert _programs.build_count() == built


def test_float64_without_fp64_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(_programs, "_fp64", lambda device: False)
    monkeypatch.setattr(cl_attention, "_setup", {})
    pb = Problem(12, B=1, Hkv=1, dtype=np.float64)
    with pytest.raises(MissingCapabilityError, match=r"attention: .*lacks cl_khr_fp64"):
        pb.opencl_fwd()


def test_register_keys():
    registry = KernelRegistry()
    cl_attention.register(registry, "opencl")
    cl_philox.register(registry, "opencl")
    for op in ("attention_fwd", "attention_bwd"):
        for dt in (xp.float32, xp.float64):
            assert registry.lookup(op, "opencl", dt) is getattr(cl_attention, op)
    assert registry.lookup("dropout_mask", "opencl", xp.bool) is cl_philox.dropout_mask


# ---- through the front end -------------------------------------------------------------


def _opencl_device():
    devs = [d for d in xp.__array_namespace_info__().devices() if d.kind == "opencl"]
    assert devs  # the module's gate has the opencl backend loaded
    return devs[0]


@pytest.mark.parametrize("kw", [
    {},
    {"is_causal": "bottom_right"},
    {"enable_gqa": True, "dropout_p": 0.25, "seed": 2**63 + 1, "offset": 9},
    {"window": (3, 2), "attn_mask": "bool"},
], ids=["plain", "causal-bottom-right", "gqa-dropout", "window-mask"])
def test_front_end_on_opencl_matches_cpu(kw):
    """tessera_array.nn.attention / attention_backward on opencl:0 run these kernels (no
    host fallback) and equal the CPU's results within float32 tolerance."""
    from tessera_array import nn
    from tessera_array._dispatch import lookup

    ocl = _opencl_device()
    assert lookup("attention_fwd", ocl, xp.float32) is cl_attention.attention_fwd
    assert lookup("attention_bwd", ocl, xp.float32) is cl_attention.attention_bwd
    rng = np.random.default_rng(20)
    hkv = 2 if kw.get("enable_gqa") else 4
    host = {"q": rng.standard_normal((2, 4, 33, 16)), "k": rng.standard_normal((2, hkv, 41, 16)),
            "v": rng.standard_normal((2, hkv, 41, 8)), "g": rng.standard_normal((2, 4, 33, 8))}
    host = {n: a.astype(np.float32) for n, a in host.items()}
    kw = dict(kw)
    if kw.get("attn_mask") == "bool":
        host["m"] = rng.random((1, 4, 33, 41)) > 0.2  # broadcast over the batch
    results = []
    for device in (xp.asarray(0).device, ocl):
        a = {n: xp.asarray(h, device=device) for n, h in host.items()}
        if "m" in a:
            kw["attn_mask"] = a["m"]
        out, lse = nn.attention(a["q"], a["k"], a["v"], return_lse=True, **kw)
        grads = nn.attention_backward(a["q"], a["k"], a["v"], out, a["g"], lse, **kw)
        results.append([np.asarray(r.to_device(xp.asarray(0).device))
                        for r in (out, lse, *grads)])
    for got, want in zip(*results[::-1]):
        assert rel_err(got, want) <= TOL[np.float32]


def test_mismatched_dtypes_are_type_errors():
    pb = Problem(13, B=1, Hkv=1)
    q5, k5, v5, _ = pb.host_args()
    q, k, v = dev(q5), dev(k5), dev(v5)
    with pytest.raises(TypeError, match=r"attention_fwd: k must have q's dtype.*k\.dtype=float64"):
        cl_attention.attention_fwd(q, dev(k5.astype(np.float64)), v, scale=1.0)
    with pytest.raises(TypeError, match=r"attention_fwd: mask must be bool or of q's dtype"):
        cl_attention.attention_fwd(q, k, v, dev(np.zeros(q5.shape[:-1] + (k5.shape[-2],),
                                                         np.int32)), scale=1.0)
    with pytest.raises(TypeError, match=r"attention_fwd: q must be float32 or float64"):
        cl_attention.attention_fwd(dev(q5.astype(np.int32)), k, v, scale=1.0)
    out, lse = pb.numpy_fwd()
    with pytest.raises(TypeError, match=r"attention_bwd: lse must be float32"):
        cl_attention.attention_bwd(q, k, v, dev(out), dev(out), dev(lse.astype(np.float64)),
                                   scale=1.0)
