"""The CuPy backend shared by ``cuda`` (CuPy's CUDA build) and ``rocm`` (its ROCm build).

Native buffers are ``cupy.ndarray``; kernels are the CUDA C++ sources of
``kernels/cuda`` (HIP compiles the same files), compiled at run time and cached. Nothing
here imports CuPy at import time: the backend imports it in ``load()``.
"""
