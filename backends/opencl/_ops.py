"""The OpenCL backend's native namespace (``backend.ops``).

The chapter files hold the generated kernels. The names of the contract
(:data:`tessera_array._backend_api.OPS`) they lack run through the host fallback of
:mod:`._fallback`, each named below; ``backend.host_fallbacks()`` lists them, and the
dtypes or keys a native function hands to the host (written ``name[...]``). See
:mod:`tessera_array._backend_api` for the contract (native buffers in, native buffers
out, weak Python scalars).
"""

from . import _fallback
from ._ops_core import *
from ._ops_creation import *
from ._ops_elementwise import *
from ._ops_indexing import *
from ._ops_linalg import *
from ._ops_manipulation import *
from ._ops_reductions import *
from ._ops_sets import *
from ._ops_sorting import *

# No native kernel yet: the linalg extension's factorizations and solvers run on the host.
# (tests/test_opencl_backend.py checks that these are exactly the names the chapters lack.)
cholesky = _fallback.op("cholesky")
cross = _fallback.op("cross")
det = _fallback.op("det")
eig = _fallback.op("eig")
eigh = _fallback.op("eigh")
eigvals = _fallback.op("eigvals")
eigvalsh = _fallback.op("eigvalsh")
inv = _fallback.op("inv")
matrix_power = _fallback.op("matrix_power")
matrix_rank = _fallback.op("matrix_rank")
pinv = _fallback.op("pinv")
qr = _fallback.op("qr")
slogdet = _fallback.op("slogdet")
solve = _fallback.op("solve")
svd = _fallback.op("svd")
svdvals = _fallback.op("svdvals")
