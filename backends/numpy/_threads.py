"""The NumPy backend's one thread pool, and its hold on OpenBLAS's own threads.

NumPy's ufuncs and SciPy's CSR routines release the GIL, so a large call cut into
contiguous parts runs its parts in parallel on the cores this process may use (the
CPU affinity mask, at most :data:`MAX_THREADS`). Every part computes the same
elements with the same operations as the whole call would, so results are
bit-identical to a single thread, whatever the number of cores.

OpenBLAS (the BLAS NumPy's wheels bundle) keeps a pool of its own: after a threaded
call its workers spin for a while (about 0.1 s) before they sleep, and a pool thread
of ours then shares a core with a spinning worker. :class:`blas_one_thread` holds
OpenBLAS at one thread, process-wide, while a kernel runs; :func:`blas_dot` then
computes a long dot product as OpenBLAS's threads would (the same cut into parts,
each part the same single-thread kernel, the partial sums added in the same order),
bit for bit, on this pool instead. Measured inside a cg loop on 2-D Poisson 1024^2
float64 (2-core EPYC, ms per iteration, median of 9; SciPy's cg in the same run
19.7-21.6):

===========================================  ==========
serial spmv and axpy, OpenBLAS's dots        17.8-19.0
spmv and axpy on 2 threads, OpenBLAS's dots  18.5-20.2  (its spinning workers)
the same with OpenBLAS on 1 thread           15.8-16.5
===========================================  ==========

and then the library's cg and gmres (``python -m benchmarks --suite krylov``, tessera /
SciPy per iteration, float64): before 1.01-1.02 and 0.97-1.06; with these kernels 0.76-0.80
and 0.82-0.91 when each side starts after 0.15 s idle, 0.89 and 0.88 back to back right
after SciPy's calls (OpenBLAS's workers still spinning from SciPy's dots).

Each hand-off to the pool costs 50-100 us on that machine (a sleeping vCPU is woken),
so only large calls are cut: see the thresholds beside each kernel.
"""

from __future__ import annotations

import os
import threading

import numpy as np

__all__ = ["DOT_MIN_BYTES", "MAX_THREADS", "blas_api", "blas_dot", "blas_gemm", "blas_gemv_dot",
           "blas_one_thread", "blas_parts", "pool", "run_parts", "split", "threads"]

MAX_THREADS = 16
_POOL = None


_THREADS = 0


def threads() -> int:
    """Threads for a large call: the cores this process may use, at most 16 (read once:
    the affinity system call costs microseconds per kernel call otherwise)."""
    global _THREADS
    if not _THREADS:
        try:
            usable = len(os.sched_getaffinity(0))
        except AttributeError:  # not on Linux
            usable = os.cpu_count() or 1
        _THREADS = max(1, min(usable, MAX_THREADS))
    return _THREADS


def pool():
    """The shared ThreadPoolExecutor (created on first use)."""
    global _POOL
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        _POOL = ThreadPoolExecutor(threads(), thread_name_prefix="tessera-numpy")
    return _POOL


def split(n: int, parts: int) -> list:
    """``[(lo, hi), ...]``: ``range(n)`` cut into ``parts`` contiguous near-equal ranges."""
    parts = max(1, min(parts, n))
    return [(n * i // parts, n * (i + 1) // parts) for i in range(parts)]


def run_parts(fn, ranges) -> list:
    """``[fn(lo, hi) for (lo, hi) in ranges]``: the first on the calling thread, the rest
    on the pool (run concurrently); results in order, the first error raised."""
    if len(ranges) == 1:
        return [fn(*ranges[0])]
    futures = [pool().submit(fn, lo, hi) for lo, hi in ranges[1:]]
    try:
        first = fn(*ranges[0])
    finally:
        rest = [f.result() for f in futures]
    return [first] + rest


# ---- OpenBLAS's thread count ---------------------------------------------------------

_BLAS_LOCK = threading.Lock()
_BLAS_STATE = {"api": None, "depth": 0, "saved": 0}


def blas_api():
    """``(get, set)`` for the thread count of NumPy's OpenBLAS (pthreads build), or False.

    Found through ctypes in the library NumPy's wheel bundles (``numpy.libs`` or
    ``numpy/.dylibs``); any other BLAS (MKL, Accelerate, an OpenMP OpenBLAS): False.
    ``openblas_set_num_threads_local`` is not used: in OpenBLAS's pthreads build it
    sets the process-wide count too.
    """
    api = _BLAS_STATE["api"]
    if api is not None:
        return api
    api = False
    try:
        import ctypes

        for path in _openblas_paths():
            lib = ctypes.CDLL(path)
            for pre, suf in (("scipy_openblas_", "64_"), ("scipy_openblas_", ""),
                             ("openblas_", "")):
                get = getattr(lib, f"{pre}get_num_threads{suf}", None)
                put = getattr(lib, f"{pre}set_num_threads{suf}", None)
                par = getattr(lib, f"{pre}get_parallel{suf}", None)
                if get is None or put is None or par is None:
                    continue
                get.restype = par.restype = ctypes.c_int
                put.argtypes = [ctypes.c_int]
                put.restype = None
                if par() == 1:  # 1: pthreads; 0: sequential; 2: OpenMP
                    api = (get, put)
                    _BLAS_STATE["lib"] = (lib, pre, suf)
                break
            if api:
                break
    except (OSError, AttributeError):
        api = False
    _BLAS_STATE["api"] = api
    return api


def _openblas_paths() -> list:
    """The OpenBLAS libraries NumPy's wheel bundles (``numpy.libs`` or ``numpy/.dylibs``)."""
    import glob

    base = os.path.dirname(np.__file__)
    return sorted(glob.glob(os.path.join(base, os.pardir, "numpy.libs", "*openblas*"))
                  + glob.glob(os.path.join(base, ".dylibs", "*openblas*")))


def _cblas(names: tuple, key: str):
    """``(addresses..., int64)``: the addresses of the CBLAS routines ``names`` (``"sgemm"``,
    ...) in the OpenBLAS that :func:`blas_api` found, and whether its integers are 64-bit;
    None where there is no such OpenBLAS or a symbol is missing (found once, kept under
    ``key``)."""
    if not blas_api():
        return None
    got = _BLAS_STATE.get(key)
    if got is not None:
        return got or None
    import ctypes

    lib, pre, suf = _BLAS_STATE["lib"]
    # scipy-openblas64 names its ILP64 CBLAS "scipy_cblas_sgemm64_"; the 32-bit build
    # "scipy_cblas_sgemm"; a plain OpenBLAS "cblas_sgemm" (64-bit integers when its
    # configuration says USE64BITINT).
    cpre = "scipy_cblas_" if pre.startswith("scipy") else "cblas_"
    int64 = suf == "64_"
    if cpre == "cblas_":
        conf = getattr(lib, "openblas_get_config", None)
        if conf is None:
            _BLAS_STATE[key] = False
            return None
        conf.restype = ctypes.c_char_p
        int64 = b"USE64BITINT" in (conf() or b"")
    try:
        got = tuple(ctypes.cast(getattr(lib, f"{cpre}{name}{suf}"), ctypes.c_void_p).value
                    for name in names) + (int64,)
    except AttributeError:
        got = False
    _BLAS_STATE[key] = got
    return got or None


def blas_gemm():
    """``(sgemm, dgemm, int64)``: the addresses of ``cblas_sgemm``/``cblas_dgemm`` in the
    OpenBLAS that :func:`blas_api` found, and whether its integers are 64-bit; None where
    there is no such OpenBLAS (its thread hold is part of the deal: a caller of these
    must hold it at one thread) or the symbols are not there."""
    return _cblas(("sgemm", "dgemm"), "gemm")


def blas_gemv_dot():
    """``(sgemv, dgemv, sdot, ddot, int64)``: the addresses of those CBLAS routines in the
    OpenBLAS that :func:`blas_api` found (NumPy's own: its matmul and dot call them), and
    whether its integers are 64-bit; None where there is none."""
    return _cblas(("sgemv", "dgemv", "sdot", "ddot"), "gemv_dot")


class blas_one_thread:
    """Context: OpenBLAS on one thread (process-wide) while a kernel runs.

    Yields True when held (False: not ``wanted``, or no :func:`blas_api`). Nested and
    concurrent uses share one hold: the first saves the count, the last restores it.
    Other threads' BLAS calls meanwhile run on one thread too.
    """

    def __init__(self, wanted: bool = True):
        self.wanted = wanted

    def __enter__(self):
        api = blas_api() if self.wanted else False
        if not api:
            self.held = False
            return False
        with _BLAS_LOCK:
            st = _BLAS_STATE
            if st["depth"] == 0:
                st["saved"] = api[0]()
                api[1](1)
            st["depth"] += 1
        self.held = True
        return True

    def __exit__(self, *exc):
        if self.held:
            with _BLAS_LOCK:
                st = _BLAS_STATE
                st["depth"] -= 1
                if st["depth"] == 0:
                    st["api"][1](st["saved"])
        return False


# ---- dot products in OpenBLAS's order, on this pool ------------------------------------

# OpenBLAS threads ?dot only above this length (kernel/x86_64/ddot.c: n <= 10000 runs on
# the calling thread). A split dot costs a hand-off to the pool (50-100 us on the 2-core
# EPYC) where OpenBLAS's spinning worker answers at once: alone, 1M float64 measured
# 0.35-0.86 ms split against 0.21-0.30 for np.dot, and 64K 158 us against 17. It pays
# only where it keeps that worker asleep for the pool's own large spmv and axpy parts,
# so it starts at their size (AXPY_PARALLEL_MIN_BYTES in matvec.py: 8 MiB per vector).
BLAS_DOT_SERIAL_MAX = 10000
DOT_MIN_BYTES = 1 << 23
_DOT_PLANS: dict = {}  # (dtype char, OpenBLAS thread count) -> parts, or 0: no plan


def blas_parts(n: int, nthreads: int) -> list:
    """The ranges OpenBLAS's level-1 threading gives its threads: each takes
    ``ceil(left / threads_left)`` of what is left, in order."""
    out, lo, left = [], 0, n
    for k in range(nthreads):
        if left <= 0:
            break
        width = -(-left // (nthreads - k))
        out.append((lo, lo + width))
        lo, left = lo + width, left - width
    return out


def _split_dot(a, b, parts: int):
    """The dot of 1-D ``a`` and ``b`` as OpenBLAS on ``parts`` threads sums it: one plain
    (held, single-thread) BLAS call per part on this pool, the partial sums added in
    order from zero in the dtype."""
    n = a.shape[0]
    if parts <= 1 or n <= BLAS_DOT_SERIAL_MAX:
        return np.dot(a, b)
    sums = run_parts(lambda lo, hi: np.dot(a[lo:hi], b[lo:hi]), blas_parts(n, parts))
    acc = a.dtype.type(0)
    for s in sums:
        acc = acc + s
    return acc


def _dot_plan(dtype: np.dtype, nthreads: int) -> int:
    """How many parts reproduce this OpenBLAS's ``dot`` bit for bit, found once per dtype
    and thread count on random vectors: its thread count, else 1 (a dtype it does not
    thread), else 0 (neither: such dots stay plain BLAS calls)."""
    key = (dtype.char, nthreads)
    plan = _DOT_PLANS.get(key)
    if plan is not None:
        return plan
    rng = np.random.default_rng(0x7E55E4A)
    cases = []
    for n in (65537, 250001, 1048583):
        a = rng.standard_normal(n).astype(dtype)
        b = rng.standard_normal(n).astype(dtype)
        cases.append((a, b, np.dot(a, b)))  # OpenBLAS, threaded as it chooses
    plan = 0
    for parts in dict.fromkeys((nthreads, 1)):
        with blas_one_thread():
            same = all(_split_dot(a, b, parts).tobytes() == ref.tobytes()
                       for a, b, ref in cases)
        if same:
            plan = parts
            break
    _DOT_PLANS[key] = plan
    return plan


def blas_dot(a: np.ndarray, b: np.ndarray):
    """``np.dot(a, b)`` bit for bit, for contiguous 1-D real ``a``, ``b`` of one dtype,
    with OpenBLAS's threads held and its parts on this pool; None when that cannot be
    done here (no pthreads OpenBLAS, a dtype whose order was not reproduced, a short
    vector). Under another holder's hold the count it saved is OpenBLAS's own."""
    if a.nbytes < DOT_MIN_BYTES or threads() < 2:
        return None
    api = blas_api()
    if not api:
        return None
    with _BLAS_LOCK:
        held = _BLAS_STATE["depth"] > 0
        nthreads = _BLAS_STATE["saved"] if held else api[0]()
    plan = _DOT_PLANS.get((a.dtype.char, nthreads))
    if plan is None:
        if held:  # the reference would run on one thread: find the plan another time
            return None
        plan = _dot_plan(a.dtype, nthreads)
    if not plan:
        return None
    with blas_one_thread():
        return np.asarray(_split_dot(a, b, plan))
