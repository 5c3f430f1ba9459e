"""tessera_array: one NumPy-compatible Array API namespace over many backends.

``import tessera_array as xp`` gives every function, constant and dtype of the
Python Array API standard (version 2025.12) with the ``linalg`` and ``fft``
extensions, on the default device (the CPU through NumPy unless an accelerator
backend loads or ``TESSERA_DEVICE`` says otherwise).

The subpackages (``fft``, ``linalg``, ``nn``, ``optim``, ``random``, ``sparse`` with
``sparse.linalg``, ``launchers``) load on first attribute access (PEP 562, as SciPy's
do): ``xp.optim.Adam`` works after a bare ``import tessera_array as xp``, and that
import loads none of them, no GPU library and not SciPy.
"""

__version__ = "0.1.0"
__array_api_version__ = "2025.12"

import importlib as _importlib

from ._array import Array
from ._constants import *
from ._constants import __all__ as _constants_all
from ._creation_functions import *
from ._creation_functions import __all__ as _creation_all
from ._data_type_functions import *
from ._data_type_functions import __all__ as _data_type_all
from ._devices import Device, set_default_device
from ._dtypes import (
    DType,
    bfloat16,
    bool,
    complex64,
    complex128,
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
)
from ._elementwise_functions import *
from ._elementwise_functions import __all__ as _elementwise_all
from ._errors import *
from ._errors import __all__ as _errors_all
from ._indexing_functions import *
from ._indexing_functions import __all__ as _indexing_all
from ._info import __array_namespace_info__
from ._linear_algebra_functions import *
from ._linear_algebra_functions import __all__ as _linear_algebra_all
from ._manipulation_functions import *
from ._manipulation_functions import __all__ as _manipulation_all
from ._searching_functions import *
from ._searching_functions import __all__ as _searching_all
from ._set_functions import *
from ._set_functions import __all__ as _set_all
from ._sorting_functions import *
from ._sorting_functions import __all__ as _sorting_all
from ._statistical_functions import *
from ._statistical_functions import __all__ as _statistical_all
from ._utility_functions import *
from ._utility_functions import __all__ as _utility_all

__all__ = (
    [
        "__array_api_version__",
        "__array_namespace_info__",
        "Array",
        "Device",
        "DType",
        "set_default_device",
        "linalg",
        "fft",
        "nn",
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float32", "float64", "complex64", "complex128",
        # Extension dtypes, outside the standard (not listed by info.dtypes()).
        "float16", "bfloat16",
    ]
    + _errors_all
    + _constants_all
    + _creation_all
    + _data_type_all
    + _elementwise_all
    + _indexing_all
    + _linear_algebra_all
    + _manipulation_all
    + _searching_all
    + _set_all
    + _sorting_all
    + _statistical_all
    + _utility_all
)

# The public subpackages, imported on first attribute access (module __getattr__).
_SUBMODULES = ("fft", "launchers", "linalg", "nn", "optim", "random", "sparse")


def __getattr__(name: str):
    if name in _SUBMODULES:
        return _importlib.import_module(f"{__name__}.{name}")  # binds it here as well
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list:
    return sorted(set(globals()) | set(_SUBMODULES))
