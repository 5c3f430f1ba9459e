"""The NumPy backend's ops namespace (``backend.ops``), as a module.

Its attributes are the members of one :class:`~._namespace.NumpyNamespace`
(``namespace``): NumPy's own functions where they meet the standard (``add`` is
``numpy.add``), bound methods of the namespace elsewhere. A module rather than the
instance itself: the front end's ``ops.<name>(...)`` calls read a module attribute
(a method called through an instance with this many attributes measured 10-30 ns
slower a call on CPython 3.11). See :mod:`tessera_array._backend_api` for the contract.
"""

from ._namespace import NumpyNamespace

namespace = NumpyNamespace()
"""The namespace whose members this module holds (its traits and hooks)."""

globals().update(namespace.members())
basic_views = namespace.basic_views  # the front end reads this trait on the ops (Device.views)
quiet_context = namespace.quiet_context  # and this one in its C short paths

__all__ = sorted(namespace.members())  # noqa: PLE0605 (the names are generated)
