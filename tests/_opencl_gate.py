"""The gate of the OpenCL kernel test modules: PyOpenCL and a context, or an honest skip.

``TESSERA_REQUIRE_BACKENDS`` naming opencl turns the skip into a failure (CI sets it);
``TESSERA_TEST_BACKENDS`` without opencl skips. The device is platform 0, device 0, or
the one ``PYOPENCL_CTX`` picks (never an interactive prompt).
"""

from __future__ import annotations

import os

import pytest

REQUIRED = "opencl" in os.environ.get("TESSERA_REQUIRE_BACKENDS", "").split(",")
INSTALL = "pip install pyopencl pocl-binary-distribution"


def opencl_context():
    """``(pyopencl, pyopencl.array, context)`` for a module-level gate."""
    def missing(reason):
        if REQUIRED:
            pytest.fail(f"TESSERA_REQUIRE_BACKENDS names opencl, but {reason}", pytrace=False)
        pytest.skip(reason, allow_module_level=True)

    narrowed = os.environ.get("TESSERA_TEST_BACKENDS")
    if narrowed and "opencl" not in narrowed.split(",") and not REQUIRED:
        pytest.skip(f"TESSERA_TEST_BACKENDS={narrowed} leaves out opencl",
                    allow_module_level=True)
    try:
        import pyopencl as cl
        import pyopencl.array as cla
    except ImportError as err:
        missing(f"pyopencl is not installed ({err}); {INSTALL}")
    try:
        if os.environ.get("PYOPENCL_CTX"):
            ctx = cl.create_some_context(interactive=False)
        else:
            ctx = cl.Context([cl.get_platforms()[0].get_devices()[0]])
    except (cl.Error, IndexError) as err:
        missing(f"no OpenCL device: {type(err).__name__}: {err}")
    return cl, cla, ctx
