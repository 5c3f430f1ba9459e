"""tessera arrays as Dask chunks on the host device, NumPy's dtype protocol and the NumPy
array methods that Dask (and other NumPy-written code) calls on the arrays it is given.

Every result is compared with NumPy's on the same random data (float64). Dask runs its
synchronous scheduler here: these tests are about the chunks, not the cluster.
"""

from __future__ import annotations

import numpy as np
import pytest

# (a test extra: .ci/run installs it; a machine without it, say a GPU box, skips these)
dask = pytest.importorskip("dask")
import dask.array as da

import tessera_array as xp

RNG = np.random.default_rng(20261202)
A = RNG.standard_normal((6, 8))
B = RNG.standard_normal((8, 5))


@pytest.fixture(autouse=True)
def synchronous():
    with dask.config.set(scheduler="synchronous"):
        yield


# ---- NumPy's dtype protocol --------------------------------------------------------------


@pytest.mark.parametrize("dt", xp._dtypes.ALL_DTYPES, ids=str)
def test_numpy_reads_tessera_dtypes(dt):
    assert np.dtype(dt) == np.dtype(dt.name)
    assert np.zeros(2, dtype=dt).dtype == np.dtype(dt.name)
    assert dt.type is np.dtype(dt.name).type


# ---- NumPy's array methods ---------------------------------------------------------------


def _host(r):
    assert isinstance(r, xp.Array), type(r)
    return np.asarray(r)


METHOD_CASES = [
    ("sum", (), {"axis": 0, "keepdims": True}),
    ("sum", (), {"axis": (0, 1)}),
    ("prod", (), {"axis": 1}),
    ("mean", (), {}),
    ("std", (), {"ddof": 1}),
    ("var", (), {"axis": 0}),
    ("max", (), {"axis": 1}),
    ("min", (), {}),
    ("argmax", (), {"axis": 0}),
    ("cumsum", (), {"axis": 1}),
    ("clip", (-0.5, 0.5), {}),
    ("round", (2,), {}),
    ("conj", (), {}),
    ("copy", (), {}),
    ("ravel", (), {}),
    ("flatten", (), {}),
    ("swapaxes", (0, 1), {}),
    ("reshape", (4, 12), {}),
    ("reshape", ((12, 4),), {}),
    ("reshape", (-1,), {}),
    ("transpose", (), {}),
    ("transpose", (1, 0), {}),
    ("take", ([0, 3],), {"axis": 1}),
    ("repeat", (2,), {"axis": 0}),
    ("diagonal", (), {}),
    ("trace", (), {}),
]


@pytest.mark.parametrize("name,args,kwargs", METHOD_CASES,
                         ids=[f"{c[0]}{i}" for i, c in enumerate(METHOD_CASES)])
def test_numpy_methods_match_numpy(name, args, kwargs):
    x = xp.asarray(A)
    got = getattr(x, name)(*args, **kwargs)
    want = getattr(A, name)(*args, **kwargs)
    np.testing.assert_allclose(_host(got), want, rtol=1e-13, atol=1e-13)
    assert got.device == x.device


def test_astype_squeeze_any_all_nonzero():
    x = xp.asarray(A)
    y = x.astype("float32")
    assert y.dtype == xp.float32
    np.testing.assert_array_equal(_host(y), A.astype(np.float32))
    assert x.astype(np.int64).dtype == xp.int64
    same = x.astype(xp.float64, copy=False)
    assert same.dtype == xp.float64
    np.testing.assert_array_equal(_host(same), A)
    z = xp.asarray(A[:, :1])
    assert z.squeeze(axis=1).shape == (6,) and z.squeeze().shape == (6,)
    assert bool(_host((x > 0).any())) == bool((A > 0).any())
    assert bool(_host((x > 0).all(axis=0)).all()) == bool((A > 0).all(axis=0).all())
    (i,) = xp.asarray(A[0]).nonzero()
    np.testing.assert_array_equal(_host(i), A[0].nonzero()[0])


def test_item_gives_python_scalars(device):
    x = xp.asarray(A, device=device)
    assert x[1, 2].item() == A[1, 2].item() and type(x[1, 2].item()) is float
    assert x.item(5) == A.item(5) and x.item(1, 3) == A.item(1, 3)
    assert xp.asarray([3], device=device).item() == 3
    assert type(xp.asarray([3], device=device).item()) is int
    assert xp.asarray(True, device=device).item() is True
    with pytest.raises(ValueError, match=r"item: only an array of one element.*\(6, 8\)"):
        x.item()


def test_astype_refuses_what_it_does_not_support():
    x = xp.asarray(A)
    with pytest.raises(ValueError, match=r"astype: only order='K'.*Received: order='F'"):
        x.astype("float32", order="F")
    with pytest.raises(TypeError, match=r"astype: dtype must be one of the Array API dtypes"):
        x.astype("datetime64")
    with pytest.raises(TypeError, match=r"reshape: expected ints or one tuple of ints"):
        x.reshape("a")


# ---- Dask arrays of tessera chunks -----------------------------------------------------------

DASK_CASES = {
    "elementwise": (lambda dx, dy: dx + 1.5 * dx - 2.0, lambda a, b: a + 1.5 * a - 2.0),
    "exp": (lambda dx, dy: da.exp(dx), lambda a, b: np.exp(a)),
    "sum_axis": (lambda dx, dy: dx.sum(axis=0), lambda a, b: a.sum(0)),
    "mean": (lambda dx, dy: dx.mean(), lambda a, b: a.mean()),
    "max": (lambda dx, dy: dx.max(axis=1), lambda a, b: a.max(1)),
    "matmul": (lambda dx, dy: dx @ dy, lambda a, b: a @ b),
    "matvec": (lambda dx, dy: dx @ dy[:, 0], lambda a, b: a @ b[:, 0]),
    "tensordot": (lambda dx, dy: da.tensordot(dx, dy, axes=1), lambda a, b: a @ b),
    "concatenate": (lambda dx, dy: da.concatenate([dx, dx], axis=0),
                    lambda a, b: np.concatenate([a, a])),
    "rechunk": (lambda dx, dy: dx.rechunk((2, 8)) * 2, lambda a, b: a * 2),
    "map_blocks": (lambda dx, dy: dx.map_blocks(xp.sin), lambda a, b: np.sin(a)),
    "transpose": (lambda dx, dy: dx.T, lambda a, b: a.T),
    "slicing": (lambda dx, dy: dx[1:5, ::2], lambda a, b: a[1:5, ::2]),
    "where": (lambda dx, dy: da.where(dx > 0, dx, 0.0), lambda a, b: np.where(a > 0, a, 0.0)),
}


@pytest.mark.parametrize("case", sorted(DASK_CASES))
def test_dask_computes_on_tessera_chunks(device, case):
    """On every device: the chunks, the graph's intermediates and the result stay tessera
    arrays on it (a device array copied to the host implicitly raises
    ImplicitHostCopyError, so a graph that needed one fails here)."""
    dask_op, numpy_op = DASK_CASES[case]
    x, y = xp.asarray(A, device=device), xp.asarray(B, device=device)
    dx, dy = da.from_array(x, chunks=(3, 4)), da.from_array(y, chunks=(4, 5))
    assert isinstance(dx._meta, xp.Array) and dx.dtype == np.float64
    out = dask_op(dx, dy)
    got = out.compute()
    assert isinstance(got, xp.Array), f"{case}: compute() gave {type(got).__name__}"
    assert got.device == device
    np.testing.assert_allclose(np.asarray(got.to_device("cpu")), numpy_op(A, B), rtol=1e-12,
                               atol=1e-12)


def test_dask_std_on_host_chunks():
    """std (its chunks' counts are NumPy arrays, combined with the chunks: host only)."""
    dx = da.from_array(xp.asarray(A), chunks=(3, 4))
    got = dx.std(axis=0).compute()
    assert isinstance(got, xp.Array)
    np.testing.assert_allclose(np.asarray(got), A.std(axis=0), rtol=1e-12)


def test_dask_chunks_are_tessera_arrays():
    dx = da.from_array(xp.asarray(A), chunks=(3, 4))
    blocks = [b.compute() for b in dx.blocks.ravel()]  # every block, in order
    assert len(blocks) == 4 and all(isinstance(b, xp.Array) for b in blocks)
    np.testing.assert_array_equal(np.asarray(dx.blocks[1, 0].compute()), A[3:, :4])


# ---- tessera_array.fft on dask arrays --------------------------------------------------------

C = RNG.standard_normal((8, 64)) + 1j * RNG.standard_normal((8, 64))
R = RNG.standard_normal((8, 64))
FFT_CASES = {
    "fft": (lambda d, dr: xp.fft.fft(d), lambda: np.fft.fft(C)),
    "ifft_n": (lambda d, dr: xp.fft.ifft(d, n=32), lambda: np.fft.ifft(C, n=32)),
    "rfft_axis0": (lambda d, dr: xp.fft.rfft(dr.rechunk((8, 16)), axis=0, norm="ortho"),
                   lambda: np.fft.rfft(R, axis=0, norm="ortho")),
    "irfft": (lambda d, dr: xp.fft.irfft(xp.fft.rfft(dr)), lambda: R),
    "hfft": (lambda d, dr: xp.fft.hfft(d[:, :33]), lambda: np.fft.hfft(C[:, :33])),
    "ihfft": (lambda d, dr: xp.fft.ihfft(dr, n=50), lambda: np.fft.ihfft(R, n=50)),
}


def _check_transform(out, want, device):
    """A lazy dask result of tessera chunks on ``device``, equal to NumPy's ``want``."""
    assert isinstance(out, da.Array) and isinstance(out._meta, xp.Array)
    got = out.compute()
    assert isinstance(got, xp.Array) and got.device == device
    assert got.shape == out.shape and np.dtype(got.dtype) == out.dtype
    np.testing.assert_allclose(np.asarray(got.to_device("cpu")), want, rtol=1e-11,
                               atol=1e-11)


@pytest.mark.parametrize("case", sorted(FFT_CASES))
def test_fft_of_dask_arrays_block_by_block(device, case):
    op, ref = FFT_CASES[case]
    d = da.from_array(xp.asarray(C, device=device), chunks=(2, 64))
    dr = da.from_array(xp.asarray(R, device=device), chunks=(2, 64))
    _check_transform(op(d, dr), ref(), device)


C3 = RNG.standard_normal((6, 8, 10)) + 1j * RNG.standard_normal((6, 8, 10))
R3 = RNG.standard_normal((6, 8, 10))
FFTN_CASES = {
    "fftn_axes12": (lambda d, dr: xp.fft.fftn(d, axes=(1, 2)),
                    lambda: np.fft.fftn(C3, axes=(1, 2))),
    "ifftn_s": (lambda d, dr: xp.fft.ifftn(d, s=(6, 12), axes=(2, 1), norm="ortho"),
                lambda: np.fft.ifftn(C3, s=(6, 12), axes=(2, 1), norm="ortho")),
    "rfftn": (lambda d, dr: xp.fft.rfftn(dr, axes=(1, 2)),
              lambda: np.fft.rfftn(R3, axes=(1, 2))),
    "irfftn_s": (lambda d, dr: xp.fft.irfftn(xp.fft.rfftn(dr, axes=(1, 2)), s=(8, 10),
                                             axes=(1, 2)), lambda: R3),
}


@pytest.mark.parametrize("case", sorted(FFTN_CASES))
def test_fftn_of_dask_arrays_block_by_block(device, case):
    """Transforms over several axes, each one chunk (the first axis in 3 chunks)."""
    op, ref = FFTN_CASES[case]
    d = da.from_array(xp.asarray(C3, device=device), chunks=(2, 8, 10))
    dr = da.from_array(xp.asarray(R3, device=device), chunks=(2, 8, 10))
    _check_transform(op(d, dr), ref(), device)
    with pytest.raises(ValueError, match=r"fftn: .*axis 0 must be one chunk.*\(2, 2, 2\)"):
        xp.fft.fftn(d)


def test_fft_of_dask_arrays_needs_one_chunk_along_the_axis():
    d = da.from_array(xp.asarray(C), chunks=(2, 32))
    with pytest.raises(ValueError, match=r"fft: .*axis 1 must be one chunk.*\(32, 32\)"):
        xp.fft.fft(d)
    with pytest.raises(TypeError, match=r"rfft: a dask array must hold tessera arrays"):
        xp.fft.rfft(da.from_array(R, chunks=(2, 64)))
