"""tessera chunks on a real Dask cluster: a ``distributed.LocalCluster`` of two worker
processes (not threads), started here and closed on every path.

The chunks travel to the workers pickled, are computed there by tessera_array, and come
back as tessera arrays; every result is compared with the same graph computed in this
process and with NumPy. The last test starts a cluster of its own and checks that none of
its worker processes outlives it.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

import tessera_array as xp

# (test extras: .ci/run installs them; a machine without them, say a GPU box, skips these)
dask = pytest.importorskip("dask")
pytest.importorskip("distributed")
import dask.array as da
from distributed import Client, LocalCluster

from _cluster import compute  # tests/ is on sys.path

RNG = np.random.default_rng(7)
A = RNG.standard_normal((400, 300))
WORKERS = 2
_PIDS: list = []  # the cluster's worker processes, for the leak check


@pytest.fixture(scope="module")
def client():
    cluster = LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=True,
                           dashboard_address=":0")
    try:
        with Client(cluster) as c:
            _PIDS[:] = list(c.run(os.getpid).values())
            yield c
    finally:
        cluster.close()


def _pid_block(block):
    """A block of the calling process's id (where a chunk was computed)."""
    return xp.full((1,), os.getpid(), dtype=xp.int64)


def test_the_workers_are_other_processes(client):
    assert len(_PIDS) == WORKERS and os.getpid() not in _PIDS


def _package_file():
    import tessera_array

    return tessera_array.__file__


def test_the_workers_import_this_process_s_tessera_array(client):
    """A worker that imports another copy (a source folder left on sys.path, which has no
    backends) cannot even unpickle a CPU chunk: it dies and the graph waits forever."""
    files = set(client.run(_package_file).values())
    assert files == {xp.__file__}, (files, xp.__file__)


CASES = {
    "matmul_sum": (lambda d: (d @ d.T).sum(axis=0), lambda a: (a @ a.T).sum(0)),
    "mean": (lambda d: d.mean(axis=1), lambda a: a.mean(1)),
    "map_blocks": (lambda d: d.map_blocks(xp.tanh), lambda a: np.tanh(a)),
    "rechunk": (lambda d: d.rechunk((400, 100)) * 3.0, lambda a: a * 3.0),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_cluster_results_equal_the_single_process_ones(client, case):
    dask_op, numpy_op = CASES[case]
    dx = da.from_array(xp.asarray(A), chunks=(100, 300))
    got = compute(client, dask_op(dx))
    assert isinstance(got, xp.Array), type(got)
    with dask.config.set(scheduler="synchronous"):
        here = dask_op(dx).compute()
    # the same graph; its tree reductions may pair the chunks in another order: ulps of
    # the sums of the terms' magnitudes (numpy_op on |A|), not of the results
    scale = float(np.abs(numpy_op(np.abs(A))).max())
    np.testing.assert_allclose(np.asarray(got), np.asarray(here), rtol=1e-14,
                               atol=2.0**-45 * scale)
    np.testing.assert_allclose(np.asarray(got), numpy_op(A), rtol=1e-12, atol=1e-12)


def test_the_chunks_are_computed_on_the_workers(client):
    dx = da.from_array(xp.asarray(A), chunks=(50, 300))  # 8 chunks
    pids = compute(client, dx.map_blocks(_pid_block, drop_axis=1, chunks=((1,) * 8,),
                                         dtype=np.int64))
    assert isinstance(pids, xp.Array)
    seen = set(np.asarray(pids).tolist())
    assert seen <= set(_PIDS) and seen, (seen, _PIDS)
    blocks = compute(client, list(dx.blocks.ravel()))
    assert all(isinstance(b, xp.Array) for b in blocks)
    np.testing.assert_array_equal(np.asarray(blocks[3]), A[150:200])


def test_no_worker_outlives_its_cluster():
    """A cluster of its own, closed after one computation: each of its worker processes
    is gone within 30 s of the close."""
    cluster = LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=True,
                           dashboard_address=":0")
    try:
        with Client(cluster) as c:
            pids = list(c.run(os.getpid).values())
            dx = da.from_array(xp.asarray(A), chunks=(100, 300))
            assert isinstance(compute(c, dx.sum()), xp.Array)
    finally:
        cluster.close()
    assert len(pids) == WORKERS
    deadline = time.monotonic() + 30
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if _alive(p)]
        time.sleep(0.2)
    assert not alive, f"worker processes still running after the cluster closed: {alive}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped) counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False
    return True
