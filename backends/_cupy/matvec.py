"""Dense matvec, axpy/aypx and dot-product launchers of the CuPy backend.

The NumPy backend's call signatures and semantics
(:mod:`tessera_array.backends.numpy.matvec`), on ``cupy.ndarray`` buffers of one device:

``dense_matvec*(a, x) -> y``
    ``y = A @ x`` for a 2-D ``a`` and a 1-D ``x`` of one floating dtype, any strides (a
    transposed or offset view is read in place); ``y`` is a new contiguous vector.
    Variants: ``default`` cuBLAS (CuPy's ``matmul``), ``scalar`` one thread per row,
    ``warp`` one warp per row (``kernels/cuda/matvec.cu``; 16-byte loads where the rows
    and ``x`` are contiguous and aligned).
``axpy(alpha, x, y, subtract=False)`` / ``aypx(beta, x, y)``
    ``y += alpha * x`` (``-=``) and ``y = beta * y + x`` in place, for 1-D ``x`` and ``y``
    of one floating dtype and length, any strides, rounded as NumPy's two-step expressions
    (real results equal NumPy's bit for bit; ``kernels/cuda/blas1.cu``). ``alpha`` is a
    Python scalar or a 0-d ``cupy.ndarray`` of ``y``'s dtype, read on the device (no sync).
``linear(x, weight, bias, residual)``
    ``x @ weight.T + bias + residual``: on CUDA in float32, float16 and bfloat16 one cuBLASLt
    matmul with the bias in its epilogue and the residual as its C (``beta = 1``; the
    16-bit dtypes accumulate in float32); elsewhere (float64, ROCm, odd layouts) the output
    pre-filled with the additions, then one cuBLAS gemm into it (16-bit operands: in
    float32, rounded back once). float16/bfloat16 are registered on CUDA only.
``vecdot(x, y)`` / ``vecmat(x, a)``
    ``conj(x) . y`` of two vectors as a new 0-d array (a block-reduction kernel and a
    final pass, no host read), and ``conj(x) @ a`` for ``x`` (k,) and ``a`` (k, n)
    (cuBLAS through CuPy's ``matmul``). The ``blas`` variant (the host BLAS's order) is
    the host fallback's (``_fallback.register_blas_products``).

Every launcher makes its operands' device current and launches on its current stream;
outputs the kernels write come from :func:`._kernels.empty`. Registered for float32,
float64, complex64 and complex128 (``linear``: float32 and float64, and with cuBLASLt
float16 and bfloat16).
"""

from __future__ import annotations

import numpy as np
from tessera_array.backends._common import memo
from tessera_array.backends._common.checks import vector_pair
from tessera_array.backends._xp._dtypes import is_half

from tessera_array import _dtypes

from . import _kernels

__all__ = ["VARIANTS", "axpy", "aypx", "dense_matvec", "dense_matvec_scalar",
           "dense_matvec_warp", "linear", "linear_cublaslt", "register", "register_cublaslt",
           "vecdot", "vecmat"]

FILE = "matvec.cu"
BLAS1_FILE = "blas1.cu"
VARIANTS = ("default", "scalar", "warp")
SCALAR_BLOCK = 128  # rows (threads) per block of the scalar kernel
WARP_ROWS = 4  # rows (warps) per block of the warp kernel
AXPY_BLOCK = 256
AXPY_GRID_MAX = 1 << 16  # blocks of the axpy grid-stride loop at most
DOT_BLOCK = 256
DOT_PER_THREAD = 8  # elements per thread before the dot product takes another block
DOT_PARTS_MAX = 1024  # blocks (partial sums) of one dot product at most

_FLOAT_NP = frozenset(np.dtype(d._np) for d in _dtypes.FLOATING)
_F32 = np.dtype(np.float32)  # with the 16-bit dtypes (is_half), what linear hands cuBLASLt
CTYPE = {np.dtype(np.float32): "float", np.dtype(np.float64): "double",
         np.dtype(np.complex64): "tessera::cfloat", np.dtype(np.complex128): "tessera::cdouble"}


def _cupy():
    import cupy

    return cupy


def check_array(func: str, name: str, a) -> None:
    """TypeError unless ``a`` is a ``cupy.ndarray``."""
    cupy = _cupy()
    if not isinstance(a, cupy.ndarray):
        raise TypeError(f"{func}: {name} must be a cupy.ndarray. "
                        f"Received: {name} of type {type(a).__name__}")


def check_device(func: str, arrays: dict, device) -> None:
    """ValueError unless every array of ``arrays`` (name -> array) is on ``device``."""
    for name, a in arrays.items():
        if a.device.id != device.id:
            raise ValueError(f"{func}: every operand must be on one device. Received: "
                             f"{name}.device={_kernels.device_label(a.device.id)}, "
                             f"expected {_kernels.device_label(device.id)}")


def elem_strides(a) -> tuple:
    """``a``'s strides in elements (NumPy strides are bytes), or None where one is not a
    whole number of elements (a view through another dtype: the caller copies it)."""
    size = a.dtype.itemsize
    if any(s % size for s in a.strides):
        return None
    return tuple(s // size for s in a.strides)


def _strided(a):
    """``(a, element strides)``; ``a`` copied to a contiguous array when its byte strides
    are not whole elements."""
    st = elem_strides(a)
    if st is None:
        a = _cupy().ascontiguousarray(a)
        st = elem_strides(a)
    return a, st


GRID_MAX = (1 << 31) - 1  # blocks in a grid's x extent
_plans = memo("cuda.matvec_plans", limit=256)  # launch plans, see _launch_matvec


def grid_blocks(func: str, rows: int, per_block: int) -> int:
    """``ceil(rows / per_block)`` blocks, or ValueError past the grid's x extent."""
    blocks = -(-rows // per_block)
    if blocks > GRID_MAX:
        raise ValueError(f"{func}: too many rows for one launch. Received: {rows} rows, "
                         f"{per_block} per block, at most {GRID_MAX} blocks")
    return blocks


def _check_matvec(func, a, x):
    check_array(func, "a", a)
    check_array(func, "x", x)
    if a.ndim != 2 or x.ndim != 1 or a.shape[1] != x.shape[0]:
        raise ValueError(f"{func}: a must be 2-D (m, n) and x 1-D (n,). "
                         f"Received: a.shape={a.shape}, x.shape={x.shape}")
    if a.dtype != x.dtype or a.dtype not in _FLOAT_NP:
        raise TypeError(f"{func}: a and x must share one floating dtype (float32, float64, "
                        f"complex64, complex128). Received: a.dtype={a.dtype}, "
                        f"x.dtype={x.dtype}")
    check_device(func, {"x": x}, a.device)


def dense_matvec(a, x):
    """y = A @ x through cuBLAS (CuPy's ``matmul``): the ``default`` variant."""
    _check_matvec("matvec", a, x)
    with a.device:
        m, n = a.shape
        if m == 0 or n == 0:
            y = _kernels.empty((m,), a.dtype)
            y.fill(0)
            return y
        return _cupy().matmul(a, x)


def _vec_width(a, x, st, xs) -> int:
    """Elements per 16-byte load of the warp kernel: 16 // itemsize where the rows and
    ``x`` are contiguous and every row start and ``x`` is 16-byte aligned, else 1."""
    size = a.dtype.itemsize
    vec = 16 // size
    if vec < 2 or st[1] != 1 or xs != 1 or (st[0] * size) % 16 \
            or a.data.ptr % 16 or x.data.ptr % 16:
        return 1
    return vec


def _launch_matvec(variant, a, x):
    # The launch plan of a (variant, shapes, strides, dtype, alignment, device) seen before:
    # the checks, the kernel lookup and the geometry ran once (a 4096^2 float32 product is
    # ~20 us on an H200, under the ~35 us the full path took on the host; NOTES.md).
    cupy = _cupy()
    if type(a) is cupy.ndarray and type(x) is cupy.ndarray:
        ad, xd = a.data, x.data
        key = (variant, a.shape, x.shape, a.strides, x.strides, a.dtype, x.dtype,
               ad.ptr & 15, xd.ptr & 15, ad.device_id, xd.device_id)
        plan = _plans.get(key)
        if plan is not None:
            device, knl, grid, block, shape, m, n, s0, s1, xs = plan
            with device:
                y = _kernels.empty(shape, a.dtype)
                knl(grid, block, (m, n, a, s0, s1, x, xs, y))
            return y
    _check_matvec("matvec", a, x)
    device = a.device
    with device:
        m, n = a.shape
        y = _kernels.empty((m,), a.dtype)
        if m == 0:
            return y
        if n == 0:
            y.fill(0)
            return y
        key = (variant, a.shape, x.shape, a.strides, x.strides, a.dtype, x.dtype,
               a.data.ptr & 15, x.data.ptr & 15, a.data.device_id, x.data.device_id)
        copied = elem_strides(a) is None or elem_strides(x) is None
        a, st = _strided(a)
        x, (xs,) = _strided(x)
        ct = CTYPE[a.dtype]
        if variant == "warp":
            warp = _kernels.warp_size(device)
            vec = _vec_width(a, x, st, xs)
            knl = _kernels.function(FILE, f"tessera_matvec_warp<{ct}, {warp}, {vec}>", device)
            grid, block = grid_blocks("matvec", m, WARP_ROWS), WARP_ROWS * warp
        else:
            knl = _kernels.function(FILE, f"tessera_matvec_scalar<{ct}>", device)
            grid, block = grid_blocks("matvec", m, SCALAR_BLOCK), SCALAR_BLOCK
        args = (np.int64(m), np.int64(n), np.int64(st[0]), np.int64(st[1]), np.int64(xs))
        if not copied:  # a copy is made on every call: no plan
            _plans.put(key, (device, knl, (grid,), (block,), (m,)) + args)
        knl((grid,), (block,), (args[0], args[1], a, args[2], args[3], x, args[4], y))
        return y


def dense_matvec_scalar(a, x):
    """y = A @ x, one thread per row (``kernels/cuda/matvec.cu``)."""
    return _launch_matvec("scalar", a, x)


def dense_matvec_warp(a, x):
    """y = A @ x, one warp per row (``kernels/cuda/matvec.cu``)."""
    return _launch_matvec("warp", a, x)


# ---- axpy / aypx ------------------------------------------------------------------------


def _axpy(func, alpha, x, y, mode):
    cupy = _cupy()
    check_array(func, "x", x)
    check_array(func, "y", y)
    if x.ndim != 1 or x.shape != y.shape or x.dtype != y.dtype or y.dtype not in _FLOAT_NP:
        raise ValueError(
            f"{func}: x and y must be 1-D of one shape and one floating dtype. "
            f"Received: x.shape={x.shape}, y.shape={y.shape}, x.dtype={x.dtype}, "
            f"y.dtype={y.dtype}"
        )
    device = y.device
    check_device(func, {"x": x}, device)
    name = "beta" if mode == 2 else "alpha"
    on_device = isinstance(alpha, cupy.ndarray)
    if on_device:
        if alpha.dtype != y.dtype or alpha.size != 1:
            raise TypeError(f"{func}: a device {name} must be one element of y's dtype. "
                            f"Received: {name}.dtype={alpha.dtype}, {name}.shape={alpha.shape}")
        check_device(func, {name: alpha}, device)
        value = y.dtype.type(0)
    else:
        try:
            value = y.dtype.type(alpha)  # as NumPy rounds a Python scalar against y
        except (TypeError, ValueError) as err:
            raise TypeError(f"{func}: {name} must be a scalar of y's dtype ({y.dtype}) or a "
                            f"0-d cupy.ndarray of it. Received: {name}={alpha!r}") from err
    n = y.shape[0]
    if n == 0:
        return
    ys = elem_strides(y)
    if ys is None or (ys[0] == 0 and n > 1):
        raise ValueError(f"{func}: y must be a writable view of whole elements with a nonzero "
                         f"stride. Received: y.strides={y.strides}")
    with device:
        x, (xs,) = _strided(x)
        knl = _kernels.function(BLAS1_FILE, f"tessera_axpy<{CTYPE[y.dtype]}>", device)
        grid = min(-(-n // AXPY_BLOCK), AXPY_GRID_MAX)
        ptr = alpha if on_device else np.uint64(0)  # a null pointer: the value is used
        knl((grid,), (AXPY_BLOCK,), (np.int64(n), np.int32(mode), ptr, value, x, np.int64(xs),
                                     y, np.int64(ys[0])))


def axpy(alpha, x, y, subtract: bool = False) -> None:
    """``y += alpha * x`` (``y -= alpha * x`` when ``subtract``) in place, rounded as NumPy's
    ``t = alpha * x; y += t`` (no fused multiply-add)."""
    _axpy("axpy", alpha, x, y, 1 if subtract else 0)


def aypx(beta, x, y) -> None:
    """``y = beta * y + x`` in place, rounded as NumPy's ``y *= beta; y += x`` (CG's
    direction update ``p = z + beta p``)."""
    _axpy("aypx", beta, x, y, 2)


# ---- vecdot / vecmat --------------------------------------------------------------------


def dot_parts(n: int) -> int:
    """Blocks (partial sums) of a dot product of ``n`` elements: one per
    ``DOT_BLOCK * DOT_PER_THREAD`` elements, at most :data:`DOT_PARTS_MAX` (a function of
    ``n`` alone, so a result repeats bit for bit)."""
    return max(1, min(DOT_PARTS_MAX, -(-n // (DOT_BLOCK * DOT_PER_THREAD))))


def vecdot(x, y):
    """``conj(x) . y`` of two vectors: a new 0-d array on their device (no host sync)."""
    func = "vecdot"
    check_array(func, "x", x)
    check_array(func, "y", y)
    vector_pair(func, x, y, floating=_FLOAT_NP)
    device = x.device
    check_device(func, {"y": y}, device)
    with device:
        out = _kernels.empty((), x.dtype)
        n = x.shape[0]
        if n == 0:
            out.fill(0)
            return out
        x, (xs,) = _strided(x)
        y, (ys,) = _strided(y)
        warp = _kernels.warp_size(device)
        ct = CTYPE[x.dtype]
        parts = dot_parts(n)
        part = out if parts == 1 else _kernels.empty((parts,), x.dtype)
        knl = _kernels.function(BLAS1_FILE, f"tessera_vecdot_part<{ct}, {warp}, {DOT_BLOCK}>",
                                device)
        knl((parts,), (DOT_BLOCK,), (np.int64(n), x, np.int64(xs), y, np.int64(ys), part))
        if parts > 1:
            fin = _kernels.function(BLAS1_FILE,
                                    f"tessera_vecdot_final<{ct}, {warp}, {DOT_BLOCK}>", device)
            fin((1,), (DOT_BLOCK,), (np.int32(parts), part, out))
        return out


def vecmat(x, a):
    """``conj(x) @ a`` for a vector ``x`` (k,) and a matrix ``a`` (k, n), through cuBLAS
    (CuPy's ``matmul``; complex ``x`` is conjugated into a temporary of k elements)."""
    func = "vecmat"
    check_array(func, "x", x)
    check_array(func, "a", a)
    if x.ndim != 1 or a.ndim != 2 or a.shape[0] != x.shape[0]:
        raise ValueError(f"{func}: x must be 1-D (k,) and a 2-D (k, n). Received: "
                         f"x.shape={x.shape}, a.shape={a.shape}")
    if a.dtype != x.dtype or a.dtype not in _FLOAT_NP:
        raise TypeError(f"{func}: x and a must share one floating dtype (float32, float64, "
                        f"complex64, complex128). Received: x.dtype={x.dtype}, "
                        f"a.dtype={a.dtype}")
    check_device(func, {"a": a}, x.device)
    cupy = _cupy()
    with x.device:
        k, n = a.shape
        if n == 0 or k == 0:
            y = _kernels.empty((n,), a.dtype)
            y.fill(0)
            return y
        return cupy.matmul(cupy.conj(x) if x.dtype.kind == "c" else x, a)


def linear(x, weight, bias=None, residual=None, *, lt=False):
    """``x @ weight.T + bias + residual`` (the ``linear`` op; shapes checked by nn.linear).

    With ``lt`` (:func:`linear_cublaslt`, the builds with cuBLASLt), in float32, float16
    or bfloat16, one cuBLASLt matmul (:mod:`._cublaslt`: the bias in its epilogue, the
    residual as C with ``beta = 1``; the 16-bit dtypes accumulate in float32 and round
    once) where the bias is a vector of ``weight.shape[0]`` elements, the residual has the
    output's shape and every operand is contiguous and 256-byte aligned. Otherwise: the
    output pre-filled with ``residual + bias`` (one pass), then one cuBLAS gemm
    accumulating into it (``beta = 1``, CuPy's ``cublas.gemm``), as the NumPy backend's
    sgemm; with neither, CuPy's ``matmul``. A non-contiguous ``x`` or ``weight`` is copied
    first (gemm reads C- or F-ordered matrices only). float16 and bfloat16 in another
    layout (or where cuBLASLt has no algorithm): that path on float32 copies of the
    operands, the result rounded to the 16-bit dtype once (as the NumPy backend)."""
    cupy = _cupy()
    from cupy import cublas

    with x.device:
        half = is_half(x.dtype)
        if half and not lt:
            return _linear_in_float32(x, weight, bias, residual)
        if bias is None and residual is None and not half:
            return cupy.matmul(x, weight.T)
        n, k = weight.shape
        lead = x.shape[:-1]
        out = _kernels.empty(lead + (n,), x.dtype)
        rows = out.size // n if n else 0
        if out.size and k:
            x2 = cupy.ascontiguousarray(x).reshape(rows, k)
            w = cupy.ascontiguousarray(weight)
            if lt and _lt_fits(x2, w, bias, residual, out, n):
                from . import _cublaslt

                b = None if bias is None else bias.reshape(n)
                r = None if residual is None else residual.reshape(rows, n)
                if _cublaslt.linear_lt(x2, w, b, r, out.reshape(rows, n)):
                    return out
        if half:
            return _linear_in_float32(x, weight, bias, residual)
        if bias is not None and residual is not None:
            cupy.add(residual, bias, out=out)
        else:
            out[...] = bias if residual is None else residual
        if out.size == 0 or k == 0:
            return out
        cublas.gemm("N", "T", x2, w, out=out.reshape(rows, n), alpha=1.0, beta=1.0)
        return out


def _linear_in_float32(x, weight, bias, residual):
    """:func:`linear` of 16-bit operands outside cuBLASLt: float32 copies through the
    float32 path (the pre-filled gemm), the result rounded to x's dtype once."""
    f32 = np.float32

    def up(a):
        return None if a is None else a.astype(f32)

    out32 = linear(up(x), up(weight), up(bias), up(residual))
    out = _kernels.empty(out32.shape, x.dtype)
    out[...] = out32  # (one rounding to 16 bits)
    return out


def _lt_fits(x2, w, bias, residual, out, n) -> bool:
    """Whether cuBLASLt's epilogue call takes these operands (CUDA, one dtype, a bias
    vector, a residual of the output's shape, contiguous and 256-byte aligned)."""
    # float32 and the 16-bit dtypes only: for float64, cuBLASLt's heuristic choice took
    # 4.66 ms at 4096^3 on the H200 where CuPy's gemm (cublasGemmEx, FP64 tensor cores)
    # takes 2.35 (NOTES.md)
    if out.dtype != _F32 and not is_half(out.dtype):
        return False
    for a, shaped in ((bias, False), (residual, True)):
        if a is None:
            continue
        if a.dtype != out.dtype or not a.flags.c_contiguous:
            return False
        if a.shape != out.shape if shaped else a.size != n or a.shape[-1:] != (n,):
            return False
    return all(a is None or a.data.ptr % 256 == 0 for a in (x2, w, residual, out)) and \
        (bias is None or bias.data.ptr % 16 == 0)


def linear_cublaslt(x, weight, bias=None, residual=None):
    """:func:`linear` with its cuBLASLt call (registered by :func:`register_cublaslt`):
    operands of a signature seen before take the kept call (``_cublaslt.linear_kept``),
    the same cuBLASLt matmul without the general path's checks and copies."""
    from . import _cublaslt

    out = _cublaslt.linear_kept(x, weight, bias, residual)
    return linear(x, weight, bias, residual, lt=True) if out is None else out


def register_cublaslt(registry, backend_name: str) -> None:
    """``linear`` through cuBLASLt where the build has it (the CUDA backend's
    ``blas_lt``): replaces :func:`register`'s ``linear`` for float32 and float64, and
    registers it for float16 and bfloat16 (cuBLASLt's 16-bit matmul with float32
    accumulation; builds without cuBLASLt have no 16-bit ``linear``)."""
    registry.register("linear", backend_name, _dtypes.REAL_FLOATING, linear_cublaslt,
                      replace=True)
    registry.register("linear", backend_name, _dtypes.HALF_FLOATING, linear_cublaslt)


def instances(warp: int) -> list:
    """``(file, name)`` of every kernel template instance these launchers may ask for at
    warp width ``warp`` (``.ci/compile-kernels`` compiles each)."""
    out = []
    for dt, ct in CTYPE.items():
        out.append((FILE, f"tessera_matvec_scalar<{ct}>"))
        for vec in sorted({1, max(1, 16 // dt.itemsize)}):
            out.append((FILE, f"tessera_matvec_warp<{ct}, {warp}, {vec}>"))
        out.append((BLAS1_FILE, f"tessera_axpy<{ct}>"))
        for part in ("part", "final"):
            out.append((BLAS1_FILE, f"tessera_vecdot_{part}<{ct}, {warp}, {DOT_BLOCK}>"))
    return out


def register(registry, backend_name: str) -> None:
    launchers = {"default": dense_matvec, "scalar": dense_matvec_scalar,
                 "warp": dense_matvec_warp}
    for variant in VARIANTS:
        registry.register("matvec", backend_name, _dtypes.FLOATING, launchers[variant],
                          variant=variant)
    registry.register("axpy", backend_name, _dtypes.FLOATING, axpy)
    registry.register("aypx", backend_name, _dtypes.FLOATING, aypx)
    registry.register("vecdot", backend_name, _dtypes.FLOATING, vecdot)
    registry.register("vecmat", backend_name, _dtypes.FLOATING, vecmat)
    registry.register("linear", backend_name, _dtypes.REAL_FLOATING, linear)
