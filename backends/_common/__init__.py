"""Dialect-free pieces of a device backend: kernel sources, builds, caches, layout math.

:mod:`.source`
    :class:`~.source.SourceTree`: a dialect's kernel sources read with the headers they
    include (``kernels/<dialect>/`` and the shared ``kernels/include/tessera/``).
:mod:`.build`
    :class:`~.build.BuildStack` over a backend's small :class:`~.build.Dialect`: compile
    once per device, keep programs and kernels in memory and on disk
    (``TESSERA_CACHE_DIR``; ``TESSERA_DISK_CACHE=0`` turns the disk part off), raise
    :class:`~tessera_array._errors.KernelCompileError` from one place.
:mod:`.cache`
    :class:`~.cache.Memo` and :func:`~.cache.memo`: every per-device cache of a backend
    is recorded, and :func:`~.cache.clear_all` empties them all.
:mod:`.layout`
    C strides, broadcasting and axis coalescing on shapes and element strides.
:mod:`.fallback`
    :class:`~.fallback.HostFallback`: the functions a backend lacks, run on the host over
    its buffer hooks, listed, and governed by ``TESSERA_HOST_FALLBACK``.

Nothing here imports a device library: a backend's dialect does.
"""

from .build import BuildFailure, BuildStack, Dialect, disk_cache_dir
from .cache import Memo, clear_all, memo, memos
from .layout import broadcast_shape, c_strides, coalesce
from .source import KernelSource, SourceTree, from_text

__all__ = [
    "BuildFailure",
    "BuildStack",
    "Dialect",
    "KernelSource",
    "Memo",
    "SourceTree",
    "broadcast_shape",
    "c_strides",
    "clear_all",
    "coalesce",
    "disk_cache_dir",
    "from_text",
    "memo",
    "memos",
]
