"""The gate of the OpenCL kernel test modules, which test kernels below the namespace
on a raw PyOpenCL context: ``(pyopencl, pyopencl.array, context)`` once the opencl
backend loads (tests/_gate.py decides: a skip with its reason, or a failure where
``TESSERA_REQUIRE_BACKENDS`` names opencl). The device is platform 0, device 0, or the
one ``PYOPENCL_CTX`` picks (never an interactive prompt).
"""

from __future__ import annotations

import os

import _gate


def opencl_context():
    """``(pyopencl, pyopencl.array, context)`` for a module-level gate."""
    _gate.require_backend("opencl")
    import pyopencl as cl
    import pyopencl.array as cla

    if os.environ.get("PYOPENCL_CTX"):
        ctx = cl.create_some_context(interactive=False)
    else:
        ctx = cl.Context([cl.get_platforms()[0].get_devices()[0]])
    return cl, cla, ctx
