"""Device kernel sources, shipped as ``tessera_array.kernels``.

One folder per dialect: ``cuda/*.cu``, ``hip/`` (only where HIP must differ),
``opencl/*.cl``, ``metal/*.metal``, with shared headers in ``include/tessera``.
Backends read sources through :func:`source_path`; nothing here is Python code.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["KERNELS_DIR", "source_path"]

KERNELS_DIR = Path(__file__).resolve().parent


def source_path(dialect: str, name: str) -> Path:
    """The path of kernel source ``name`` of ``dialect`` (``"cuda"``, ``"opencl"``, ...)."""
    path = KERNELS_DIR / dialect / name
    if not path.is_file():
        raise FileNotFoundError(
            f"source_path: no kernel source {name!r} for dialect {dialect!r} under {KERNELS_DIR}"
        )
    return path
