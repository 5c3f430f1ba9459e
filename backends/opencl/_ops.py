"""The OpenCL backend's native namespace (``backend.ops``).

The chapter files hold the generated kernels; every other name of the NumPy
backend's namespace runs through the host fallback of :mod:`._fallback` and is
listed by ``backend.host_fallbacks()`` (as are the dtypes or keys that a native
op hands to the host, written ``name[...]``). See
:mod:`tessera_array._backend_api` for the contract (native buffers in, native
buffers out, weak Python scalars).
"""

from ._fallback import make_fallbacks
from ._ops_core import *
from ._ops_creation import *
from ._ops_elementwise import *
from ._ops_indexing import *
from ._ops_linalg import *
from ._ops_manipulation import *
from ._ops_reductions import *
from ._ops_sets import *
from ._ops_sorting import *

globals().update(make_fallbacks(set(globals())))
