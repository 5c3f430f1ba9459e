"""The NumPy backend's one thread pool, for kernels that split work over cores.

NumPy's ufuncs and SciPy's CSR routines release the GIL, so a large call cut into
contiguous parts runs its parts in parallel on the cores this process may use (the
CPU affinity mask, at most :data:`MAX_THREADS`). Every part computes the same
elements with the same operations as the whole call would, so results are
bit-identical to a single thread, whatever the number of cores.
"""

from __future__ import annotations

import os

__all__ = ["MAX_THREADS", "pool", "threads"]

MAX_THREADS = 16
_POOL = None


def threads() -> int:
    """Threads for a large call: the cores this process may use, at most 16."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        usable = os.cpu_count() or 1
    return max(1, min(usable, MAX_THREADS))


def pool():
    """The shared ThreadPoolExecutor (created on first use)."""
    global _POOL
    if _POOL is None:
        from concurrent.futures import ThreadPoolExecutor

        _POOL = ThreadPoolExecutor(threads(), thread_name_prefix="tessera-numpy")
    return _POOL

