"""``__array_namespace_info__``: devices, dtypes and capabilities.

Specification: https://data-apis.org/array-api/2025.12/API_specification/inspection.html
"""

from __future__ import annotations

from . import _dtypes
from ._devices import as_device
from ._devices import default_device as _default_device
from ._helpers import default_complex, default_float, default_int, supports_dtype

__all__ = ["__array_namespace_info__"]

_MAX_DIMS = 64  # NumPy 2's limit on array dimensions


class Info:
    """Inspection utilities of the tessera_array namespace.

    ``devices()`` lists every device of every loaded backend; ``dtypes()`` and
    ``default_dtypes()`` answer for one device (the default device when
    ``device=None``), so a device without float64 reports float32 as its default
    real floating dtype.
    """

    __slots__ = ()

    def capabilities(self) -> dict:
        """Boolean indexing, data-dependent shapes and the maximum number of dimensions.

        Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.info.capabilities.html
        """
        return {
            "boolean indexing": True,
            "data-dependent shapes": True,
            "max dimensions": _MAX_DIMS,
        }

    def default_device(self):
        """The default device (``TESSERA_DEVICE`` or the highest-priority backend's first).

        Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.info.default_device.html
        """
        return _default_device()

    def devices(self) -> tuple:
        """Every device of every loaded backend, in priority order (a tuple, as in 2025.12).

        Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.info.devices.html
        """
        from ._discovery import all_devices

        return all_devices()

    def default_dtypes(self, *, device=None) -> dict:
        """The default dtypes of ``device`` (the default device when None).

        Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.info.default_dtypes.html
        """
        dev = as_device(device, "default_dtypes")
        return {
            "real floating": default_float(dev),
            "complex floating": default_complex(dev),
            "integral": default_int(dev),
            "indexing": default_int(dev),
        }

    def dtypes(self, *, device=None, kind=None) -> dict:
        """The dtypes ``device`` supports, by name, optionally only those of ``kind``.

        Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.info.dtypes.html
        """
        dev = as_device(device, "dtypes")
        if kind is None:
            wanted = _dtypes.ALL_DTYPES
        elif isinstance(kind, str):
            wanted = _kind_members(kind)
        elif isinstance(kind, tuple):
            wanted = ()
            for k in kind:
                if not isinstance(k, str):
                    raise TypeError(
                        f"dtypes: kind must be a kind name or a tuple of kind names. "
                        f"Received: kind={kind!r}"
                    )
                wanted += _kind_members(k)
        else:
            raise TypeError(
                f"dtypes: kind must be None, a kind name or a tuple of kind names. "
                f"Received: kind={kind!r}"
            )
        return {
            d.name: d for d in _dtypes.ALL_DTYPES if d in wanted and supports_dtype(dev, d)
        }

    def __repr__(self) -> str:
        return "tessera_array.__array_namespace_info__()"


def _kind_members(kind: str) -> tuple:
    members = _dtypes.KIND_NAMES.get(kind)
    if members is None:
        raise ValueError(
            f"dtypes: unknown kind. Expected one of "
            f"{', '.join(repr(k) for k in _dtypes.KIND_NAMES)}. Received: kind={kind!r}"
        )
    return members


_INFO = Info()


def __array_namespace_info__() -> Info:
    """The namespace's inspection utilities.

    Specification: https://data-apis.org/array-api/2025.12/API_specification/generated/array_api.__array_namespace_info__.html
    """
    return _INFO
