"""The standard's namespace over native buffers, written once over an array module.

A backend whose buffers are those of an array module mirroring NumPy's API (NumPy
on the host; CuPy, CUDA or ROCm build, on a GPU) builds its ``ops`` namespace (see
:mod:`tessera_array._backend_api`) from :class:`Namespace`: subclass it, set the
traits and override the hooks its module needs (the class docstring lists them,
with what NumPy and CuPy need), and instantiate it with the module::

    class NumpyNamespace(Namespace):
        host_reads_cheap = True
        ...

    ops = NumpyNamespace(numpy)

What differs between modules is a trait or a hook of the class, never a test of
which module it is. Where the module's own function meets the standard it is bound
as it is (``ops.add is numpy.add``), so the front end's hot path calls it with no
Python frame between.

The chapter files are named as the front end's: ``_creation_functions``,
``_elementwise_functions``, ``_linear_algebra_functions`` (with ``_linalg`` for the
extension), ``_manipulation_functions``, ``_statistical_functions``,
``_searching_functions``, ``_set_functions``, ``_sorting_functions``,
``_utility_functions``, and ``_core`` for conversion, copies and indexing; each holds
a mixin class of :class:`Namespace`. Shared dtype tables are in ``_dtypes``.

Every op receives native buffers already of the computation dtype (or weak Python
scalars where the contract says so) and returns native buffers, never scalars.
"""

from ._namespace import Namespace

__all__ = ["Namespace", "export_dlpack"]


def export_dlpack(native, *, stream=None, max_version=None, dl_device=None, copy=None):
    """``native.__dlpack__`` with the keywords the caller gave (an older producer takes
    only ``stream``: the DLPack 1.0 keywords are passed only when set)."""
    kwargs = {}
    if max_version is not None:
        kwargs["max_version"] = max_version
    if dl_device is not None:
        kwargs["dl_device"] = dl_device
    if copy is not None:
        kwargs["copy"] = copy
    return native.__dlpack__(stream=stream, **kwargs)
