"""The NumPy backend's native namespace (``backend.ops``).

NumPy's own functions wherever they already meet the standard; the chapter files
hold the fixes where they do not. See :mod:`tessera_array._backend_api` for the
contract (native buffers in, native buffers out, weak Python scalars).
"""

from ._ops_core import *
from ._ops_creation import *
from ._ops_elementwise import *
from ._ops_linalg import *
from ._ops_manipulation import *
from ._ops_reductions import *
