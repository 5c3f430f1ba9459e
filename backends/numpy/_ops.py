"""The NumPy backend's native namespace (``backend.ops``).

NumPy's own functions wherever they already meet the standard; the chapter files
hold the fixes where they do not. See :mod:`tessera_array._backend_api` for the
contract (native buffers in, native buffers out, weak Python scalars).
"""

from ._ops_core import *  # noqa: F401,F403
from ._ops_elementwise import *  # noqa: F401,F403
from ._ops_creation import *  # noqa: F401,F403
from ._ops_manipulation import *  # noqa: F401,F403
from ._ops_reductions import *  # noqa: F401,F403
from ._ops_linalg import *  # noqa: F401,F403
