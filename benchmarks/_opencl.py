"""What the OpenCL device suites share: their sources, test systems and checks.

Everything here reaches the backend through the public namespace and the
``tessera_array.launchers`` seam: arrays are made with ``xp.asarray(..., device=)``
(so their buffers come from the backend's memory pool), launchers are looked up in
the registry by ``(op, device, dtype, variant)``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CORE_SOURCES", "close", "dtype_of", "family_sources", "needs_dtype", "poisson",
           "put"]

# The OpenCL backend's own modules and headers on every launcher's path; globs, so that
# a module moved between the private helpers is still seen (a pattern matching nothing
# is an error, which a moved file name would trigger).
CORE_SOURCES = (
    "backends/opencl/__init__.py",
    "backends/opencl/_*.py",
    "kernels/opencl/*.h",
    "tessera_array/launchers.py",
    "tessera_array/_dispatch.py",
    "tessera_array/_array.py",
)


def family_sources(modules=(), kernels=()) -> tuple:
    """:data:`CORE_SOURCES` plus ``backends/opencl/<module>.py`` for each of ``modules``
    and ``kernels/opencl/<kernel>.cl`` for each of ``kernels``."""
    return (CORE_SOURCES + tuple(f"backends/opencl/{m}.py" for m in modules)
            + tuple(f"kernels/opencl/{k}.cl" for k in kernels))


def dtype_of(name: str):
    """The tessera DType called ``name`` (``"float32"``)."""
    import tessera_array as xp

    return getattr(xp, name)


def needs_dtype(device, name: str) -> None:
    """Raise Unavailable when ``device`` has no ``name`` dtype (float64 without fp64)."""
    import tessera_array as xp

    from ._core import Unavailable

    if name not in xp.__array_namespace_info__().dtypes(device=device):
        raise Unavailable(f"{device} has no {name} (the device lacks the capability)")


def put(host, device):
    """The native buffer of ``host`` copied to ``device`` through the namespace."""
    import tessera_array as xp
    from tessera_array import launchers

    return launchers.native(xp.asarray(np.ascontiguousarray(host), device=device))


def poisson(k: int, dtype):
    """The 5-point Laplacian on a k x k grid, CSR with sorted int32 indices."""
    import scipy.sparse as sp

    one = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(k, k))
    a = sp.kronsum(one, one, format="csr").astype(dtype)
    a.sort_indices()
    return a


def close(what: str, got, want, rtol: float) -> float:
    """Max |got - want| / max |want|; AssertionError above ``rtol`` (or not finite)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        raise AssertionError(f"{what}: shapes differ: {got.shape} against {want.shape}")
    err = float(np.max(np.abs(got - want)) / max(float(np.max(np.abs(want))), 1e-300)) \
        if want.size else 0.0
    if not np.isfinite(err) or err > rtol:
        raise AssertionError(f"{what}: the two sides differ: max rel. error {err:.3g} > "
                             f"{rtol:.1g}")
    return err
