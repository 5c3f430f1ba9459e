"""The compiled parts of tessera_array: the Array object's short paths, and the NumPy
backend's stencil products, dense CG loop and attention, in C.

Everything else is in pyproject.toml. Both extensions are optional: without a C compiler
or Python's headers the build goes on and the pure Python paths are used (same behaviour,
more time per operation; each C file says what it speeds up).
"""

import sys

from setuptools import Extension, setup

# The attention kernel's row loops want -O3 (GCC/Clang; MSVC keeps its defaults).
_O3 = [] if sys.platform == "win32" else ["-O3"]

setup(
    ext_modules=[
        Extension(
            "tessera_array._arrayobject",
            ["tessera_array/_arrayobject.c"],
            optional=True,
        ),
        Extension(
            "tessera_array.backends.numpy._stencil_c",
            ["backends/numpy/_stencil_c.c"],
            # no fused multiply-adds: the sums must be csr_matvec's, bit for bit
            extra_compile_args=_O3 + ([] if sys.platform == "win32" else ["-ffp-contract=off"]),
            optional=True,
        ),
        Extension(
            "tessera_array.backends.numpy._krylov_c",
            ["backends/numpy/_krylov_c.c"],
            # no fused multiply-adds: the updates must round as NumPy's two ufuncs do
            extra_compile_args=_O3 + ([] if sys.platform == "win32" else ["-ffp-contract=off"]),
            optional=True,
        ),
        Extension(
            "tessera_array.backends.numpy._attention_c",
            ["backends/numpy/_attention_c.c"],
            depends=["backends/numpy/_attention_c.h"],
            extra_compile_args=_O3,
            optional=True,
        ),
    ]
)
