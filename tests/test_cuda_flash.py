"""Attention for float16 and bfloat16 on CUDA (``backends/_cupy/flash.py``): the forward on
tensor cores (``kernels/cuda/flash_attention.cu``'s mma.sync kernel, and on compute
capability 9.0 ``flash_attention_sm90.cu``'s wgmma kernel, each tested by name) and the
general path through float32, against the float64 math reference.

The inputs are the problems of ``tests/test_cuda_attention.py`` (poisoned elements around
each upload, GQA's stride-0 heads, masks, causal bands, dropout) in 16-bit; every output
buffer starts as NaN. Tolerances are the issue's: relative error (max |got - ref| / max
|ref|) <= 2e-2 for bfloat16 and 5e-3 for float16, outputs and gradients. Dropout masks
must equal the CPU's bit for bit.

Without the cuda backend the module is skipped with the reason; with
``TESSERA_REQUIRE_BACKENDS`` naming ``cuda`` that skip is a failure instead.
"""

from __future__ import annotations

import pathlib
import re

import _gate
import numpy as np
import pytest
from tessera_array.backends._cupy import _kernels, flash
from tessera_array.backends.numpy import philox as np_philox

import tessera_array as xp
from tessera_array import _dtypes

BACKEND = _gate.require_backend("cuda")

import cupy  # after the gate: only where the cuda backend loaded
from test_cuda_attention import Problem, dev, host, rel_err

HALF = [np.dtype(d._np) for d in _dtypes.HALF_FLOATING]
HALF_IDS = [d.name for d in _dtypes.HALF_FLOATING]
TOL = {"float16": 5e-3, "bfloat16": 2e-2}


@pytest.fixture(autouse=True)
def poisoned_outputs(monkeypatch):
    def empty(shape, dtype):
        out = cupy.empty(shape, dtype)
        if out.size:
            out.fill(np.nan)
        return out

    monkeypatch.setattr(_kernels, "empty", empty)


@pytest.fixture
def no_general_path(monkeypatch):
    """The float32 general path raises: a call that reaches it fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("the float32 general path was taken")

    monkeypatch.setattr(flash, "_fwd_tiled", refuse)
    monkeypatch.setattr(flash, "_bwd_tiled", refuse)


def run_fwd(pb, want_lse=True, fwd=flash.attention_fwd):
    q5, k5, v5, m5 = pb.host_args()
    out, lse = fwd(dev(q5), dev(k5), dev(v5), None if m5 is None else dev(m5), **pb.kw(),
                   want_lse=want_lse)
    return host(out), host(lse)


def _sm90() -> bool:
    return int(cupy.cuda.Device(0).compute_capability) == flash.SM90_CC


def forward_kernel(kind):
    """The forward kernel ``kind`` by name: "mma" (flash_attention.cu, its TILES) or
    "wgmma" (flash_attention_sm90.cu, its SM90_BN; skipped, with the reason, on a device
    without wgmma)."""
    if kind == "mma":
        return lambda q, *a, **kw: flash.forward_tiled(flash.TILES[q.shape[-1]], q, *a, **kw)
    if not _sm90():
        pytest.skip(f"wgmma needs compute capability 9.0; this device has "
                    f"{cupy.cuda.Device(0).compute_capability}")
    return lambda q, *a, **kw: flash.forward_sm90(flash.SM90_BN[q.shape[-1]], q, *a, **kw)


def run_bwd(pb, out, lse):
    q5, k5, v5, m5 = pb.host_args()
    g = pb.split(pb.dout, *pb.dout.shape[-2:])
    res = flash.attention_bwd(dev(q5), dev(k5), dev(v5), dev(out), dev(g), dev(lse),
                              None if m5 is None else dev(m5), **pb.kw())
    return tuple(host(r) for r in res)


def check(pb, *, backward=True, fwd=flash.attention_fwd):
    tol = TOL[pb.dtype.name]
    out, lse = run_fwd(pb, fwd=fwd)
    assert out.dtype == pb.dtype and lse.dtype == np.float32
    (r_out, r_lse), r_grads = pb.reference()
    errs = {"out": rel_err(out.reshape(r_out.shape), r_out),
            "lse": rel_err(lse.reshape(r_lse.shape), r_lse)}
    if backward:
        grads = run_bwd(pb, out, lse)
        floor = 1.0 if pb.k.shape[-2] == 1 else 1e-300
        for name, g, gr, rg in zip(("dq", "dk", "dv"), grads, pb.to_reference(*grads),
                                   r_grads):
            assert g.dtype == pb.dtype
            errs[name] = rel_err(gr, rg, floor)
    bad = {k: v for k, v in errs.items() if not v <= tol}
    assert not bad, f"relative errors above {tol}: {bad}"
    return errs


# Head dims 64 and 128 take the tensor cores; the others the general path.
FAST = {
    "d64": {"D": 64, "B": 1, "Sq": 200, "Sk": 333},
    "d128": {"D": 128, "Sq": 130, "Sk": 97},
    "causal-top-left": {"D": 64, "causal": "top_left", "Sq": 150, "Sk": 90},
    "causal-top-left-sq<sk": {"D": 128, "causal": "top_left", "Sq": 60, "Sk": 201},
    "causal-bottom-right": {"D": 128, "causal": "bottom_right", "Sq": 70, "Sk": 260},
    "causal-bottom-right-sq>sk": {"D": 64, "causal": "bottom_right", "Sq": 200, "Sk": 64},
    "window": {"D": 64, "window": (40, 7), "Sq": 300, "Sk": 300, "B": 1, "Hkv": 1},
    "window-causal": {"D": 128, "window": (70, None), "causal": "bottom_right", "Sq": 190,
                      "Sk": 230, "B": 1},
    "bool-mask": {"D": 128, "mask": "bool", "Sq": 90, "Sk": 150},
    "additive-mask": {"D": 64, "mask": "additive", "Sq": 77, "Sk": 129},
    "additive-mask-causal": {"D": 128, "mask": "additive", "causal": "top_left", "Sq": 64,
                             "Sk": 64},
    "gqa-8-2": {"D": 128, "Hkv": 2, "G": 4, "B": 1, "Sq": 65, "Sk": 100},
    "mqa": {"D": 64, "Hkv": 1, "G": 8, "B": 2, "Sq": 29, "Sk": 141},
    "dropout": {"D": 64, "dropout": (0.1, 1234, 5), "Sq": 100, "Sk": 130},
    "dropout-gqa-causal": {"D": 128, "dropout": (0.5, 2**64 - 1, 2**63 + 3), "G": 4, "B": 1,
                           "causal": "bottom_right", "Sq": 70, "Sk": 90},
    "dropout-window-mask": {"D": 64, "dropout": (0.1, 77, 2**33), "window": (9, 4),
                            "mask": "bool", "Sq": 80, "Sk": 81},
    "dropout-odd-sk": {"D": 128, "dropout": (0.2, 5, 3), "Sq": 33, "Sk": 67, "B": 1},
    # Sk % 4 == 0: a quad of lanes shares its Philox blocks
    "dropout-sk%4": {"D": 128, "dropout": (0.2, 2**62 + 1, 9), "Sq": 100, "Sk": 128,
                     "causal": "bottom_right"},
    "dropout-sk%4-d64-gqa": {"D": 64, "dropout": (0.4, 3, 2**35), "G": 2, "Sq": 77,
                             "Sk": 196, "mask": "bool"},
    "transposed-q": {"D": 64, "transposed": True, "Sq": 70, "Sk": 70},
    # the wgmma forward takes a scale > 0 alone (these route to the mma.sync one)
    "negative-scale": {"D": 64, "scale": -0.2, "Sq": 130, "Sk": 200},
    "zero-scale-dropout": {"D": 128, "scale": 0.0, "dropout": (0.1, 8, 1), "Sq": 130,
                           "Sk": 128},
    "one-key": {"D": 64, "Sq": 9, "Sk": 1},
    "one-query": {"D": 128, "Sq": 1, "Sk": 300},
}
GENERAL = {
    "d80": {"D": 80, "Sq": 50, "Sk": 70, "mask": "additive"},
    "d32-dv64": {"D": 32, "Dv": 64, "Sq": 33, "Sk": 45, "causal": "top_left"},
    "d128-dv64": {"D": 128, "Dv": 64, "Sq": 40, "Sk": 41, "dropout": (0.1, 3, 4)},
}


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("name", list(FAST))
def test_tensor_cores(name, dt, no_general_path):
    """Forward and backward on tensor cores against the float64 reference."""
    check(Problem(sorted(FAST).index(name), dtype=dt, **FAST[name]))


@pytest.mark.parametrize("kind", ["mma", "wgmma"])
@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("name", list(FAST))
def test_each_forward_kernel(name, dt, kind, no_general_path):
    """Each forward kernel by name against the float64 reference (the routed one is
    tested with the backward above); the wgmma kernel refuses a scale <= 0, which the
    launcher routes to the mma.sync one (test_forward_routing)."""
    pb = Problem(sorted(FAST).index(name), dtype=dt, **FAST[name])
    if kind == "wgmma" and not pb.scale > 0:
        with pytest.raises(ValueError, match="the wgmma kernel needs 2"):
            run_fwd(pb, fwd=forward_kernel(kind))
        return
    check(pb, backward=False, fwd=forward_kernel(kind))


@pytest.mark.parametrize("kind", ["mma", "wgmma"])
@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("sq, sk", [(2048, 2048), (300, 1000), (1000, 129)])
def test_each_forward_kernel_long(sq, sk, dt, kind, no_general_path):
    """Many key tiles (the double buffers' turns), causal and not, against the float64
    reference."""
    fwd = forward_kernel(kind)
    check(Problem(78, dtype=dt, B=1, Hkv=2, Sq=sq, Sk=sk, D=128), backward=False, fwd=fwd)
    check(Problem(79, dtype=dt, B=1, Hkv=1, G=2, Sq=sq, Sk=sk, D=64, causal="bottom_right",
                  dropout=(0.1, 7, 11)), backward=False, fwd=fwd)


@pytest.mark.parametrize("kind", ["mma", "wgmma"])
@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("d", sorted(flash.TILES))
@pytest.mark.parametrize("sq, sk, at", [(77, None, 0), (77, 250, 0), (300, 1000, 640)])
def test_each_forward_kernel_keeps_the_cpu_mask(dt, d, sq, sk, at, kind, no_general_path):
    """As test_dropout_keeps_exactly_the_cpu_mask, for each kernel by name, with V's rows
    at .. at + D the identity (out != 0 where keys at + c are kept). Sk = 250: not a
    multiple of 4 (each pair's own Philox blocks); Sk = 1000, at = 640: the sixth key
    tile of the wgmma kernel (its keep words' ring of four stages turned once), three row
    blocks."""
    p, seed, offset = 0.3, 2**40 + 17, 77
    n = d if sk is None else sk
    pb = Problem(8, dtype=dt, B=2, Hkv=2, G=2, Sq=sq, Sk=n, D=d, dropout=(p, seed, offset))
    pb.q[...] = 0
    pb.v[...] = 0
    pb.v[..., at:at + d, :] = np.eye(d, dtype=pb.dtype)
    out, _ = run_fwd(pb, fwd=forward_kernel(kind))
    keep = np_philox.dropout_mask(pb.score_shape(), seed, offset, pb.threshold())
    assert np.array_equal(out.reshape(keep.shape[:-1] + (d,)) != 0, keep[..., at:at + d])


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("name", list(GENERAL))
def test_general_path(name, dt):
    check(Problem(sorted(GENERAL).index(name), dtype=dt, **GENERAL[name]))


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_long_causal_sequence(dt, no_general_path):
    """S = 2048, D = 128: many key tiles, the band's tile skipping, the longest rows first."""
    check(Problem(77, dtype=dt, B=1, Hkv=2, Sq=2048, Sk=2048, D=128, causal="top_left"))


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_empty_and_keyless(dt):
    out, lse = run_fwd(Problem(3, dtype=dt, D=64, Sq=9, Sk=0))
    assert out.shape == (2, 2, 1, 9, 64) and np.all(out == 0) and np.all(lse == -np.inf)
    out, lse = run_fwd(Problem(3, dtype=dt, D=128, Sq=0, Sk=5))
    assert out.shape == (2, 2, 1, 0, 128) and lse.shape == (2, 2, 1, 0)


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("d", sorted(flash.TILES))
@pytest.mark.parametrize("seed, offset", [(0, 0), (2**40 + 17, 77), (2**64 - 1, 2**63 + 5)])
def test_dropout_keeps_exactly_the_cpu_mask(dt, d, seed, offset, no_general_path):
    """q = 0 and V = identity (Sk = D): P = 1 / Sk everywhere, so out[i, j] = Z_ij / Sk,
    zero exactly where the CPU's mask drops (p = 0.3, GQA heads)."""
    p = 0.3
    pb = Problem(8, dtype=dt, B=2, Hkv=2, G=2, Sq=77, Sk=d, D=d, dropout=(p, seed, offset))
    pb.q[...] = 0
    pb.v[...] = np.eye(d, dtype=pb.dtype)
    out, _ = run_fwd(pb)
    keep = np_philox.dropout_mask(pb.score_shape(), seed, offset, pb.threshold())
    assert 0.6 < keep.mean() < 0.8
    assert np.array_equal(out.reshape(keep.shape) != 0, keep)


@pytest.mark.parametrize("sk", [93, 96])
@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("d", sorted(flash.TILES))
def test_backward_dropout_keeps_exactly_the_cpu_mask(dt, d, sk, no_general_path):
    """q = 0 and dO = identity (Sq = D): P = 1 / Sk, so dV[j, i] = Z_ij / Sk, zero exactly
    where the CPU's mask drops (the backward rebuilds the forward's mask)."""
    p, seed, offset = 0.3, 2**40 + 17, 77
    pb = Problem(11, dtype=dt, B=2, Hkv=2, G=2, Sq=d, Sk=sk, D=d, dropout=(p, seed, offset))
    pb.q[...] = 0
    pb.dout[...] = np.eye(d, dtype=pb.dtype)
    out, lse = run_fwd(pb)
    _, _, dv = run_bwd(pb, out, lse)
    keep = np_philox.dropout_mask(pb.score_shape(), seed, offset, pb.threshold())
    assert np.array_equal(np.swapaxes(dv, -1, -2).reshape(keep.shape) != 0, keep)


def test_dropout_masks_three_seeds_by_three_offsets():
    """The acceptance's 3 x 3: forward masks against the CPU's through the kernel, and the
    backward (which rebuilds the mask) against the float64 reference with the CPU's mask."""
    for seed in (1, 2**33 + 5, 2**64 - 3):
        for offset in (0, 12, 2**40):
            pb = Problem(9, dtype=HALF[1], B=1, Hkv=2, Sq=64, Sk=64, D=64,
                         dropout=(0.25, seed, offset))
            pb.q[...] = 0
            pb.v[...] = np.eye(64, dtype=pb.dtype)
            out, _ = run_fwd(pb)
            keep = np_philox.dropout_mask(pb.score_shape(), seed, offset, pb.threshold())
            assert np.array_equal(out.reshape(keep.shape) != 0, keep), (seed, offset)
            pb2 = Problem(10, dtype=HALF[1], B=1, Hkv=2, Sq=64, Sk=64, D=64,
                          dropout=(0.25, seed, offset))
            check(pb2)


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_deterministic_run_to_run(dt):
    pb = Problem(12, dtype=dt, D=128, Sq=300, Sk=257, dropout=(0.1, 5, 6),
                 causal="bottom_right")
    a, la = run_fwd(pb)
    b, lb = run_fwd(pb)
    assert a.tobytes() == b.tobytes() and la.tobytes() == lb.tobytes()


def test_routing_table_is_pinned():
    """The tiles chosen by measurement (the module docstring's table); each fits the
    device's shared memory, and CI compiles every instance the launcher may ask for."""
    assert flash.TILES == {64: flash.Tile(2, 64, 1), 128: flash.Tile(2, 32, 1)}
    assert flash.DQ_TILES == {64: flash.Tile(1, 64, 3), 128: flash.Tile(1, 64, 2)}
    assert flash.DKDV_TILES == {64: flash.Tile(1, 64, 2), 128: flash.Tile(1, 64, 2)}
    assert flash.DKDV_DROP_TILES == {64: flash.Tile(1, 64, 2), 128: flash.Tile(1, 32, 2)}
    optin = cupy.cuda.Device(0).attributes["MaxSharedMemoryPerBlockOptin"]
    names = {n for _, n in flash.instances(32)}
    for kernel, tables in (("fwd", (flash.TILES,) * 2), ("bwd_dq", (flash.DQ_TILES,) * 2),
                           ("bwd_dkdv", (flash.DKDV_TILES, flash.DKDV_DROP_TILES))):
        for drop, table in zip((False, True), tables):
            assert set(table) == set(flash.TILES)
            for d, tile in table.items():
                assert flash.shared_bytes(kernel, d, tile) <= optin
                for dt in ("float16", "bfloat16"):
                    assert flash.kernel_name(kernel, dt, d, tile, drop) in names
    assert flash.instances(64) == []
    assert flash.SM90_BN == {64: 128, 128: 128}
    for d, bn in flash.SM90_BN.items():
        if _sm90():
            assert flash.sm90_shared_bytes(d, bn) <= optin
        for dt in ("float16", "bfloat16"):
            for drop in (False, True):
                assert (flash.SM90_FILE, flash.sm90_name(dt, d, bn, drop)) in flash.instances(32)


@pytest.mark.parametrize("d", sorted(flash.SM90_BN))
def test_wgmma_dropout_block_holds_setmaxnreg_split(d):
    """The dropout instances of the wgmma forward run sm90_threads(True) threads at the
    register count setmaxnreg's split is sized for (the kernel's LAUNCH_REGS): a block
    launched at fewer would wait forever in setmaxnreg.inc."""
    forward_kernel("wgmma")  # skips without wgmma
    text = (pathlib.Path(__file__).resolve().parents[1] / "kernels" / "cuda"
            / flash.SM90_FILE).read_text()
    soft, keep = map(int, re.search(
        r"SOFTMAX_REGS = (\d+), KEEP_REGS = (\d+);", text).groups())
    threads = flash.sm90_threads(True)
    assert threads == flash.SM90_THREADS + flash.SM90_KEEP_THREADS
    for dt in ("float16", "bfloat16"):
        fn = _kernels.function(flash.SM90_FILE, flash.sm90_name(dt, d, flash.SM90_BN[d], True),
                               cupy.cuda.Device(0))
        regs = cupy.cuda.driver.funcGetAttribute(4, fn.ptr)  # CU_FUNC_ATTRIBUTE_NUM_REGS
        assert regs == (65536 // threads) & ~7, regs
        assert flash.SM90_THREADS * soft + flash.SM90_KEEP_THREADS * keep <= threads * regs


def test_forward_routing(monkeypatch):
    """Compute capability 9.0 takes the wgmma forward, any other (and a scale outside
    [2**-120, 2**120]) the mma.sync one."""
    taken = []
    monkeypatch.setattr(flash, "forward_sm90", lambda *a, **kw: taken.append("wgmma"))
    monkeypatch.setattr(flash, "forward_tiled", lambda *a, **kw: taken.append("mma"))
    pb = Problem(3, dtype=HALF[0], D=64, Sq=9, Sk=5)
    q5, k5, v5, _ = pb.host_args()
    flash.attention_fwd(dev(q5), dev(k5), dev(v5), **pb.kw())
    assert taken == ["wgmma" if _sm90() else "mma"]
    for scale in (0.0, -0.5, float("nan"), 1e-38, 1e38):  # outside the wgmma kernel's range
        flash.attention_fwd(dev(q5), dev(k5), dev(v5), **(pb.kw() | {"scale": scale}))
    assert taken[1:] == ["mma"] * 5


@pytest.mark.parametrize("dt", _dtypes.HALF_FLOATING, ids=HALF_IDS)
def test_front_end(dt):
    def to_f64(a):
        return np.asarray(a.to_device("cpu")).astype(np.float64)

    """xp.nn.attention and attention_backward on cuda:0 in 16-bit: q's dtype out, float32
    lse, the float64 reference's values."""
    rng = np.random.default_rng(13)
    shapes = [(2, 4, 100, 64), (2, 2, 120, 64), (2, 2, 120, 64)]
    host_in = [rng.standard_normal(s).astype(dt._np) for s in shapes]
    q, k, v = (xp.asarray(a, device=BACKEND.devices()[0]) for a in host_in)
    out, lse = xp.nn.attention(q, k, v, is_causal="bottom_right", enable_gqa=True,
                               return_lse=True)
    assert out.dtype is dt and lse.dtype is xp.float32 and out.device == q.device
    f64 = [xp.asarray(a.astype(np.float64)) for a in host_in]
    ref = xp.nn.attention(*f64, is_causal="bottom_right", enable_gqa=True)
    assert rel_err(to_f64(out), np.asarray(ref)) <= TOL[dt.name]
    dout = xp.asarray(rng.standard_normal(out.shape).astype(dt._np), device=q.device)
    grads = xp.nn.attention_backward(q, k, v, out, dout, is_causal="bottom_right",
                                     enable_gqa=True)
    rgrads = xp.nn.attention_backward(*f64, xp.asarray(to_f64(out)), xp.asarray(to_f64(dout)),
                                      is_causal="bottom_right", enable_gqa=True)
    for g, r, a in zip(grads, rgrads, (q, k, v)):
        assert g.dtype is dt and g.shape == a.shape
        assert rel_err(to_f64(g), np.asarray(r)) <= TOL[dt.name]
