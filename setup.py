"""The one compiled part of tessera_array: the Array object's short paths in C.

Everything else is in pyproject.toml. The extension is optional: without a C compiler or
Python's headers the build goes on and Array is the pure Python class (same behaviour,
more time per operation; tessera_array/_arrayobject.c says what it speeds up).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tessera_array._arrayobject",
            ["tessera_array/_arrayobject.c"],
            optional=True,
        )
    ]
)
