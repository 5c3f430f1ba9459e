"""The one table of benchmark suites.

Each row names a suite, what it measures, the tessera_array feature it needs
(``module:attribute``) and the module that declares its benchmarks. A suite
without a module is listed and reported as "not yet implemented" with the
reason, never silently left out; ``--suite all`` runs the suites that exist.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

__all__ = ["SUITES", "Suite", "SuiteContext", "family_status"]


@dataclass(frozen=True)
class SuiteContext:
    """What a suite's ``benchmarks(ctx)`` receives."""

    xp: object  # the tessera_array namespace
    device: object  # the Device measured
    quick: bool


@dataclass(frozen=True)
class Suite:
    """A row of the table.

    ``module`` is a dotted module with ``benchmarks(ctx) -> list[Benchmark]``, or
    None while the suite is not written; ``family`` is the feature it measures,
    ``"module:attribute"``, probed to say whether the feature itself exists yet.
    """

    name: str
    description: str
    family: str
    module: str | None = None

    def load(self):
        """The suite's ``benchmarks`` function, or None when not implemented."""
        if self.module is None:
            return None
        return importlib.import_module(self.module).benchmarks

    def not_implemented_reason(self):
        """None when the suite exists; otherwise why it cannot run."""
        if self.module is not None:
            return None
        exists, detail = family_status(self.family)
        if exists:
            return f"{detail} exists, but no benchmark suite is written for it yet"
        return f"the {self.name} family does not exist yet ({detail})"


def family_status(family: str):
    """``(exists, detail)`` for ``"module:attribute"``, without raising."""
    module, _, attr = family.partition(":")
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return False, f"no module {module}"
    if attr and not hasattr(mod, attr):
        return False, f"{module} has no {attr}"
    return True, family.replace(":", ".")


SUITES = {
    s.name: s
    for s in (
        Suite(
            "overhead",
            "per-operation overhead of tessera_array against raw NumPy",
            "tessera_array:add",
            "benchmarks.overhead",
        ),
        Suite(
            "krylov",
            "cg / gmres against scipy.sparse.linalg (CPU) and cupyx (GPU)",
            "tessera_array.sparse.linalg:cg",
            "benchmarks.krylov",
        ),
        Suite(
            "fft",
            "batched FFTs against numpy.fft / scipy.fft",
            "tessera_array.fft:fft",
            "benchmarks.fft",
        ),
        Suite(
            "attention",
            "nn.attention forward/backward against torch's CPU SDPA and naive NumPy",
            "tessera_array.nn:attention",
            "benchmarks.attention",
        ),
        Suite(
            "optim",
            "Adam / AdamW / Adafactor steps against torch.optim (foreach) on the CPU",
            "tessera_array.optim:Adam",
            "benchmarks.optim",
        ),
    )
}
