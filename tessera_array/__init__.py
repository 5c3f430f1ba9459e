"""tessera_array: one NumPy-compatible Array API namespace over many backends.

``import tessera_array as xp`` gives every function, constant and dtype of the
Python Array API standard (version 2025.12) with the ``linalg`` and ``fft``
extensions, on the default device (the CPU through NumPy unless an accelerator
backend loads or ``TESSERA_DEVICE`` says otherwise).
"""

__version__ = "0.1.0"
__array_api_version__ = "2025.12"

from ._dtypes import (  # noqa: F401
    bool,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
    float32,
    float64,
    complex64,
    complex128,
    DType,
)
from ._array import Array
from ._devices import Device, set_default_device
from ._errors import *  # noqa: F403
from ._errors import __all__ as _errors_all
from ._constants import *  # noqa: F403
from ._constants import __all__ as _constants_all
from ._creation_functions import *  # noqa: F403
from ._creation_functions import __all__ as _creation_all
from ._data_type_functions import *  # noqa: F403
from ._data_type_functions import __all__ as _data_type_all
from ._elementwise_functions import *  # noqa: F403
from ._elementwise_functions import __all__ as _elementwise_all
from ._indexing_functions import *  # noqa: F403
from ._indexing_functions import __all__ as _indexing_all
from ._linear_algebra_functions import *  # noqa: F403
from ._linear_algebra_functions import __all__ as _linear_algebra_all
from ._manipulation_functions import *  # noqa: F403
from ._manipulation_functions import __all__ as _manipulation_all
from ._searching_functions import *  # noqa: F403
from ._searching_functions import __all__ as _searching_all
from ._set_functions import *  # noqa: F403
from ._set_functions import __all__ as _set_all
from ._sorting_functions import *  # noqa: F403
from ._sorting_functions import __all__ as _sorting_all
from ._statistical_functions import *  # noqa: F403
from ._statistical_functions import __all__ as _statistical_all
from ._utility_functions import *  # noqa: F403
from ._utility_functions import __all__ as _utility_all
from ._info import __array_namespace_info__
from . import linalg, fft  # noqa: E402

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
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
        "float32", "float64", "complex64", "complex128",
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
