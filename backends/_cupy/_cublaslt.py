"""cuBLASLt through ctypes: one matmul with the bias in its epilogue and the residual as its
C operand (``beta = 1``), for ``nn.linear`` on CUDA (CuPy binds cuBLAS, not cuBLASLt).

``linear_lt(x2, w, bias, residual, out)`` computes ``out = x2 @ w.T + bias + residual``
for C-contiguous float32, float64, float16 or bfloat16 ``x2`` (m, k), ``w`` (n, k), ``out``
(m, n) of one dtype, a contiguous ``bias`` of n elements or None and a C-contiguous
``residual`` (m, n) or None, in one cuBLASLt call on the current stream, and returns False
(nothing launched) where cuBLASLt offers no algorithm for the layout (the caller then
pre-fills and calls gemm).

float16 and bfloat16: A, B, C and D are 16-bit (``CUDA_R_16F``, ``CUDA_R_16BF``), the
products accumulate in float32 (``CUBLAS_COMPUTE_32F``, float ``alpha``/``beta``: the
scale type ``CUDA_R_32F``), and the result, bias and residual added, is rounded to 16 bits
once, as torch's ``addmm`` on the GPU. The bias is read in D's type: that is cuBLASLt's
rule while ``CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE`` is left unset (its default, -1, means
"D's type" for every output but FP8 and IMMA ones; cublasLt.h), so no attribute is set
for it.
Column-major, as cuBLASLt reads memory: ``out^T (n x m) = (w^T)^T x^T`` with A = w (k x n,
transposed), B = x (k x m), C = residual^T, D = out^T, the bias one value per row of D:
torch's ``addmm`` takes the same call, with its residual added by a second kernel.

``linear_kept(x, w, bias, residual)`` is the same call for operands whose signature
(shapes, strides, dtypes, device) was seen before: its output made, five pointers set
(None where it does not apply). Both launch through a plan's ``_Call`` (its ctypes
arguments made once).

The library is the one CuPy's cuBLAS loaded (found in ``/proc/self/maps``, so the
versions agree); a handle, a workspace and each layout's descriptors and heuristic
algorithm are kept per device (``clear_all`` drops them). The enum values are cuBLASLt's
(``cublasLt.h``, ``library_types.h``; the device tests check them against the headers
where the toolkit is installed).
"""

from __future__ import annotations

import ctypes
import importlib
import threading

from tessera_array.backends._common import memo

from . import _kernels

__all__ = ["DTYPES", "ENUMS", "library_path", "linear_kept", "linear_lt"]

# cublasLt.h, cublas_api.h, library_types.h. The 16-bit values (CUDA_R_16F, CUDA_R_16BF)
# and CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE (named in the docstring, not set) were checked
# against NVIDIA's nvmath-python bindings generated from those headers (cycublasLt.pxd,
# cycublas.pxd, nvmath/_utils.py's cudaDataType) and a preprocessed library_types.h;
# test_cuda_matvec.py checks every value against the toolkit's headers where installed.
ENUMS = {
    "CUDA_R_32F": 0, "CUDA_R_64F": 1, "CUDA_R_16F": 2, "CUDA_R_16BF": 14,
    "CUBLAS_COMPUTE_32F": 68, "CUBLAS_COMPUTE_64F": 70,
    "CUBLAS_OP_N": 0, "CUBLAS_OP_T": 1,
    "CUBLASLT_MATMUL_DESC_TRANSA": 3, "CUBLASLT_MATMUL_DESC_TRANSB": 4,
    "CUBLASLT_MATMUL_DESC_EPILOGUE": 7, "CUBLASLT_MATMUL_DESC_BIAS_POINTER": 8,
    "CUBLASLT_EPILOGUE_DEFAULT": 1, "CUBLASLT_EPILOGUE_BIAS": 4,
    "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES": 1,
}
_E = ENUMS
WORKSPACE_BYTES = 1 << 25  # 32 MiB, what torch gives cuBLASLt on Hopper

# dtype name -> (A/B/C/D type, compute type, scale type, host type of alpha and beta)
_TYPES = {
    "float32": (_E["CUDA_R_32F"], _E["CUBLAS_COMPUTE_32F"], _E["CUDA_R_32F"], ctypes.c_float),
    "float64": (_E["CUDA_R_64F"], _E["CUBLAS_COMPUTE_64F"], _E["CUDA_R_64F"], ctypes.c_double),
    "float16": (_E["CUDA_R_16F"], _E["CUBLAS_COMPUTE_32F"], _E["CUDA_R_32F"], ctypes.c_float),
    "bfloat16": (_E["CUDA_R_16BF"], _E["CUBLAS_COMPUTE_32F"], _E["CUDA_R_32F"], ctypes.c_float),
}
DTYPES = tuple(_TYPES)
"""The dtype names :func:`linear_lt` takes."""


class _Heuristic(ctypes.Structure):
    _fields_ = [("algo", ctypes.c_uint64 * 8), ("workspaceSize", ctypes.c_size_t),
                ("state", ctypes.c_int), ("wavesCount", ctypes.c_float),
                ("reserved", ctypes.c_int * 4)]


_lib = None
_lock = threading.Lock()
_handles = memo("cuda.cublaslt_handles")  # device id -> (handle, workspace array)
_plans = memo("cuda.cublaslt_plans")  # layout key -> _Plan or None (no algorithm)
# operands' (shape, strides, dtype) and device -> (_Call, output shape, dtype), or False
# (not cuBLASLt's layout)
_kept = memo("cuda.cublaslt_kept", limit=256)


def library_path() -> str | None:
    """The path of the libcublasLt this process has loaded (CuPy's cuBLAS needs it)."""
    # CuPy's cuBLAS module links libcublas, and with it libcublasLt
    importlib.import_module("cupy_backends.cuda.libs.cublas")

    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rsplit(None, 1)[-1]
                if "/libcublasLt.so" in path:
                    return path
    except OSError:
        pass
    return None


def _library():
    global _lib
    if _lib is None:
        path = library_path()
        lib = ctypes.CDLL(path or "libcublasLt.so")
        vp, sz, i32, u64, i64 = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                 ctypes.c_uint64, ctypes.c_int64)
        for name, args in (
                ("cublasLtCreate", [ctypes.POINTER(vp)]),
                ("cublasLtMatmulDescCreate", [ctypes.POINTER(vp), i32, i32]),
                ("cublasLtMatmulDescSetAttribute", [vp, i32, vp, sz]),
                ("cublasLtMatrixLayoutCreate", [ctypes.POINTER(vp), i32, u64, u64, i64]),
                ("cublasLtMatmulPreferenceCreate", [ctypes.POINTER(vp)]),
                ("cublasLtMatmulPreferenceSetAttribute", [vp, i32, vp, sz]),
                ("cublasLtMatmulAlgoGetHeuristic", [vp, vp, vp, vp, vp, vp, vp, i32,
                                                    ctypes.POINTER(_Heuristic),
                                                    ctypes.POINTER(i32)]),
                ("cublasLtMatmul", [vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp, vp,
                                    sz, vp])):
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, i32
        _lib = lib
    return _lib


def _ok(status: int, what: str) -> None:
    if status != 0:
        raise RuntimeError(f"nn.linear: cuBLASLt's {what} failed with status {status}")


def _handle(device_id: int):
    hit = _handles.get(device_id)
    if hit is None:
        import cupy

        lib = _library()
        h = ctypes.c_void_p()
        _ok(lib.cublasLtCreate(ctypes.byref(h)), "cublasLtCreate")
        hit = _handles[device_id] = (h, cupy.empty(WORKSPACE_BYTES, cupy.uint8))
    return hit


def _set(fn, obj, attr: str, value) -> None:
    _ok(fn(obj, _E[attr], ctypes.byref(value), ctypes.sizeof(value)), attr)


class _Plan:
    __slots__ = ("a", "algo", "b", "c", "calls", "desc", "scalar")


def _plan(device_id, dtype_name, m, n, k, bias: bool):
    key = (device_id, dtype_name, m, n, k, bias)
    if key in _plans:
        return _plans[key]
    lib = _library()
    handle, _ = _handle(device_id)
    dt, compute, scale, scalar = _TYPES[dtype_name]
    plan = _Plan()
    plan.calls = {}  # with a residual (C read, beta = 1) or not -> _Call
    plan.scalar = scalar
    desc = ctypes.c_void_p()
    _ok(lib.cublasLtMatmulDescCreate(ctypes.byref(desc), compute, scale),
        "cublasLtMatmulDescCreate")
    _set(lib.cublasLtMatmulDescSetAttribute, desc, "CUBLASLT_MATMUL_DESC_TRANSA",
         ctypes.c_int(_E["CUBLAS_OP_T"]))
    _set(lib.cublasLtMatmulDescSetAttribute, desc, "CUBLASLT_MATMUL_DESC_TRANSB",
         ctypes.c_int(_E["CUBLAS_OP_N"]))
    _set(lib.cublasLtMatmulDescSetAttribute, desc, "CUBLASLT_MATMUL_DESC_EPILOGUE",
         ctypes.c_int(_E["CUBLASLT_EPILOGUE_BIAS" if bias else "CUBLASLT_EPILOGUE_DEFAULT"]))
    layouts = []
    for rows, cols, ld in ((k, n, k), (k, m, k), (n, m, n)):
        lay = ctypes.c_void_p()
        _ok(lib.cublasLtMatrixLayoutCreate(ctypes.byref(lay), dt, rows, cols, ld),
            "cublasLtMatrixLayoutCreate")
        layouts.append(lay)
    plan.desc, (plan.a, plan.b, plan.c) = desc, layouts
    pref = ctypes.c_void_p()
    _ok(lib.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)),
        "cublasLtMatmulPreferenceCreate")
    _set(lib.cublasLtMatmulPreferenceSetAttribute, pref,
         "CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES", ctypes.c_uint64(WORKSPACE_BYTES))
    found, count = _Heuristic(), ctypes.c_int(0)
    status = lib.cublasLtMatmulAlgoGetHeuristic(handle, desc, plan.a, plan.b, plan.c, plan.c,
                                                pref, 1, ctypes.byref(found),
                                                ctypes.byref(count))
    # A status other than success with no result: no algorithm for this layout.
    plan.algo = found if status == 0 and count.value > 0 else None
    _plans[key] = plan if plan.algo is not None else None
    return _plans[key]


class _Call:
    """A plan's matmul, with the residual as C (beta = 1) or without (C = D, beta = 0): its
    ctypes arguments made once; :meth:`launch` sets the pointers and launches."""

    __slots__ = ("alpha", "args", "beta", "bias", "bias_ref", "desc", "matmul", "ptrs",
                 "set_attr", "work")

    def __init__(self, plan, dev, residual: bool):
        lib = _library()
        handle, self.work = _handle(dev)
        vp = ctypes.c_void_p
        self.desc, self.matmul = plan.desc, lib.cublasLtMatmul
        self.set_attr = lib.cublasLtMatmulDescSetAttribute
        self.bias = vp(0)
        self.bias_ref = ctypes.byref(self.bias)
        self.alpha, self.beta = plan.scalar(1.0), plan.scalar(1.0 if residual else 0.0)
        # w, x, C, D, stream: the pointers a launch sets
        self.ptrs = w, x, c, d, stream = vp(0), vp(0), vp(0), vp(0), vp(0)
        self.args = (handle, plan.desc, ctypes.byref(self.alpha), w, plan.a, x, plan.b,
                     ctypes.byref(self.beta), c, plan.c, d, plan.c,
                     ctypes.byref(plan.algo.algo), vp(self.work.data.ptr), WORKSPACE_BYTES,
                     stream)

    def launch(self, w: int, x: int, bias, c: int, d: int, stream: int) -> None:
        """``D = x @ w.T (+ bias) + beta C`` on ``stream`` (device addresses; ``bias`` None
        for a plan without the bias epilogue)."""
        wp, xp_, cp_, dp, sp = self.ptrs
        with _lock:  # the pointers, and the bias's in the shared descriptor, are shared
            wp.value, xp_.value, cp_.value, dp.value, sp.value = w, x, c, d, stream
            if bias is not None:
                self.bias.value = bias
                _ok(self.set_attr(self.desc, _E["CUBLASLT_MATMUL_DESC_BIAS_POINTER"],
                                  self.bias_ref, 8), "CUBLASLT_MATMUL_DESC_BIAS_POINTER")
            _ok(self.matmul(*self.args), "cublasLtMatmul")


def _call(plan, dev, residual: bool) -> _Call:
    call = plan.calls.get(residual)
    if call is None:
        call = plan.calls[residual] = _Call(plan, dev, residual)
    return call


def linear_lt(x2, w, bias, residual, out) -> bool:
    """``out = x2 @ w.T (+ bias) (+ residual)`` in one cuBLASLt call; False where cuBLASLt
    has no algorithm for it (nothing launched). Operands as the module docstring says."""
    import cupy

    m, k = x2.shape
    n = w.shape[0]
    dev = out.device.id
    plan = _plan(dev, out.dtype.name, m, n, k, bias is not None)
    if plan is None:
        return False
    c = out if residual is None else residual
    _call(plan, dev, residual is not None).launch(
        w.data.ptr, x2.data.ptr, None if bias is None else bias.data.ptr, c.data.ptr,
        out.data.ptr, cupy.cuda.get_current_stream().ptr)
    return True


def _keep(x, w, bias, residual, dev):
    """``(call, output shape, dtype)`` for these operands' signature, or False where
    :func:`linear_lt` would not take them (layout, dtype, an empty product, no
    algorithm)."""
    name = x.dtype.name
    if name not in _TYPES or name == "float64" or x.size == 0 or w.ndim != 2:
        return False
    n, k = w.shape
    out_shape = x.shape[:-1] + (n,)
    if k == 0 or x.shape[-1] != k or not (x.flags.c_contiguous and w.flags.c_contiguous):
        return False
    for a in (w, bias, residual):
        if a is not None and (a.dtype != x.dtype or a.data.device_id != dev):
            return False
    if bias is not None and (bias.shape != (n,) or not bias.flags.c_contiguous):
        return False
    if residual is not None and (residual.shape != out_shape
                                 or not residual.flags.c_contiguous):
        return False
    plan = _plan(dev, name, x.size // k, n, k, bias is not None)
    if plan is None:
        return False
    return _call(plan, dev, residual is not None), out_shape, x.dtype


def linear_kept(x, w, bias, residual):
    """:func:`linear_lt`'s call for operands whose signature (shapes, strides, dtypes,
    device) was seen before, its output made here; None where it does not apply (the
    signature's first call, another current device, an operand not 256-byte aligned (the
    bias: 16), a layout :func:`linear_lt` does not take): the caller's general path then
    answers.

    A kept call skips the general path's checks, copies and lookups. Host time of
    ``nn.linear`` a call (64^3, an H100's host; torch ``addmm + add`` 21-27 us): 40.5 us
    through the general path, 22.3-23.3 kept; at 4096^3, timed one call at a time, that
    is the gap between the host's first launch and torch's (benchmarks/NOTES.md)."""
    import cupy

    dev = x.data.device_id
    key = (x.shape, x.strides, x.dtype, w.shape, w.strides, w.dtype,
           None if bias is None else (bias.shape, bias.strides, bias.dtype),
           None if residual is None else (residual.shape, residual.strides, residual.dtype),
           dev)
    kept = _kept.get(key)
    if kept is None:  # (a signature's first call: the general path's)
        _kept.put(key, _keep(x, w, bias, residual, dev))
        return None
    if kept is False or cupy.cuda.runtime.getDevice() != dev:
        return None
    c = x if residual is None else residual
    if (x.data.ptr | w.data.ptr | c.data.ptr) & 255 or (
            bias is not None and bias.data.ptr & 15):
        return None
    call, out_shape, dtype = kept
    out = _kernels.empty(out_shape, dtype)
    d = out.data.ptr
    if d & 255:  # (CuPy's pool hands out 512-byte aligned blocks)
        return None
    call.launch(w.data.ptr, x.data.ptr, None if bias is None else bias.data.ptr,
                d if residual is None else residual.data.ptr, d,
                cupy.cuda.get_current_stream().ptr)
    return out
