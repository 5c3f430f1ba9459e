"""The repository's ``benchmarks`` package, for the tests that check it, imported without
leaving the repository root on ``sys.path``.

The root holds the source folder ``tessera_array/``, which lacks the package's backends
and kernels (setuptools maps ``backends/`` and ``kernels/`` into the installed package).
With the root left on ``sys.path``, a process that the test process starts later (a Dask
worker, a spawned pool) imports that folder instead of the installed package and finds
no device at all: on the H200, where the suite runs from an installed copy, three Dask
cluster tests lost both workers to "no such device: cpu" that way.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def import_benchmarks():
    """The ``benchmarks`` package of this checkout; ``sys.path`` is as it was after."""
    if "benchmarks" in sys.modules:
        return sys.modules["benchmarks"]
    import tessera_array  # noqa: F401  (the installed package first, never the root's)

    sys.path.insert(0, str(ROOT))
    try:
        import benchmarks
    finally:
        sys.path.remove(str(ROOT))
    return benchmarks
