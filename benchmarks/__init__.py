"""tessera_array's benchmarks: one runner, side-by-side peers, fingerprinted baselines.

Run from the repository root: ``python -m benchmarks [--suite overhead] [--quick]
[--record | --ratchet]``. The suites are listed in :mod:`benchmarks._suites`; the
timing method is described in :mod:`benchmarks._core`; baselines and the ratchet
in :mod:`benchmarks._ratchet`. See ``benchmarks/README.md``.
"""

from ._core import Benchmark, Settings, Unavailable
from ._suites import SUITES, Suite, SuiteContext

__all__ = ["SUITES", "Benchmark", "Settings", "Suite", "SuiteContext", "Unavailable"]
