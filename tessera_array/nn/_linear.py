"""The affine map with fused operands: :func:`linear` and :func:`linear_backward`.

``linear(x, weight, bias, residual) = x @ weight.mT + bias + residual``, with
torch.nn.functional.linear's shapes: ``x (..., K)``, ``weight (N, K)``, ``bias (N,)``,
and a ``residual`` broadcastable to the output ``(..., N)`` (a skip connection). Bias
and residual are operands of the op, never keyword side channels, so every backend
sees them and may fuse them into its GEMM.

Backend contract: the ``linear`` op of the matvec family
--------------------------------------------------------
``linear(x, weight, bias, residual)`` (:data:`tessera_array._backend_api.KERNELS`),
looked up by ``(op, backend, dtype of x)``: native buffers of one real floating dtype,
shapes already checked; ``bias``/``residual`` None when absent; a fresh C-contiguous
``(..., N)`` result. Registered now:

=======  =====================================================================
numpy    one BLAS ?gemm with the output pre-filled by ``bias + residual`` and
         beta = 1 (SciPy's BLAS wrappers, writing in place); without SciPy, NumPy's
         matmul then the additions. float16/bfloat16: the same in float32 (one
         sgemm), the result rounded to the 16-bit dtype once
opencl   gemm.cl with its accumulate epilogue: the output pre-filled, the
         kernel adds its products to it (float32/float64; the device holds no
         16-bit arrays)
cuda     float32, float16, bfloat16: one cuBLASLt matmul, the bias in its epilogue
         and the residual as C with beta = 1 (the 16-bit dtypes accumulate in
         float32); float64 and other layouts: the output pre-filled, then one
         cuBLAS gemm into it
rocm     the pre-filled gemm, float32/float64 only (no 16-bit kernel: a
         KernelDTypeError, a TypeError, names what is registered)
=======  =====================================================================

:func:`tessera_array.nn._reference.linear_reference` (the namespace only) is what every
launcher is tested against. The backward pass is two matmuls and two sums in the
namespace (no kernel of its own): it runs on every device.
"""

from __future__ import annotations

from .. import _dtypes
from .._array import Array
from .._dispatch import lookup
from .._errors import DeviceMismatchError
from .._helpers import check_array, wrap_as
from ._attention import _sum_to  # the one reduction of a broadcast gradient

__all__ = ["linear", "linear_backward"]


def _check(func: str, x, weight, bias, residual, extra=()):
    """The operands checked: ``(device, dtype, out_shape)``."""
    check_array(x, func, "x")
    check_array(weight, func, "weight")
    named = [("weight", weight)]
    for name, a in (("bias", bias), ("residual", residual)) + tuple(extra):
        if a is not None:
            check_array(a, func, name)
            named.append((name, a))
    dev, dt = x._device, x._dtype
    if dt not in _dtypes.ANY_REAL_FLOATING:
        raise TypeError(
            f"{func}: x must have a real floating-point dtype (float32, float64, float16 "
            f"or bfloat16). Received: x.dtype={dt}"
        )
    for name, a in named:
        if a._device is not dev:
            raise DeviceMismatchError(
                f"{func}: {name} must be on the device of x. "
                f"Received: x.device={dev}, {name}.device={a._device}"
            )
        if a._dtype is not dt:
            raise TypeError(
                f"{func}: {name} must have x's dtype (no promotion, as torch). "
                f"Received: x.dtype={dt}, {name}.dtype={a._dtype}"
            )
    if weight.ndim != 2:
        raise ValueError(
            f"{func}: weight must be 2-D (out_features, in_features). "
            f"Received: weight.shape={weight.shape}"
        )
    n, k = weight.shape
    if x.ndim < 1 or x.shape[-1] != k:
        raise ValueError(
            f"{func}: x must have shape (..., in_features) with in_features = "
            f"weight.shape[1] = {k}. Received: x.shape={x.shape}, weight.shape={weight.shape}"
        )
    out_shape = x.shape[:-1] + (n,)
    if bias is not None and bias.shape != (n,):
        raise ValueError(
            f"{func}: bias must have shape (out_features,) = ({n},). "
            f"Received: bias.shape={bias.shape}"
        )
    if residual is not None:
        rs = residual.shape
        ok = len(rs) <= len(out_shape) and all(
            r == o or r == 1 for r, o in zip(rs[::-1], out_shape[::-1]))
        if not ok:
            raise ValueError(
                f"{func}: residual must broadcast to the output's shape (..., out_features) "
                f"= {out_shape}. Received: residual.shape={rs}"
            )
    return dev, dt, out_shape


def _native(a):
    return None if a is None else a._data


def linear(x: Array, weight: Array, bias: Array | None = None,
           residual: Array | None = None) -> Array:
    """``x @ weight.mT + bias + residual``: torch.nn.functional.linear with a residual.

    Parameters
    ----------
    x : Array
        ``(..., in_features)``, float32, float64, float16 or bfloat16 (every operand of
        x's dtype); ``(in_features,)`` gives ``(out_features,)``.
    weight : Array
        ``(out_features, in_features)``.
    bias : Array, optional
        ``(out_features,)``, added to every row.
    residual : Array, optional
        Broadcastable to the output ``(..., out_features)`` without enlarging it.

    Returns
    -------
    out : Array
        ``(..., out_features)``, x's dtype and device.

    Raises
    ------
    TypeError
        An operand that is not an Array, or of another dtype than ``x``; a 16-bit dtype
        on a backend with no 16-bit ``linear`` kernel (``KernelDTypeError``).
    ValueError
        A shape that does not fit, naming the operand (``DeviceMismatchError``, a
        ValueError, for an operand on another device).

    Notes
    -----
    Backend notes: the module docstring lists each backend's kernel. On the CPU the
    product and both additions take one BLAS call over a pre-filled output; on CUDA one
    cuBLASLt call (float32, float16, bfloat16).

    float16 and bfloat16 accumulate in float32, and the result (bias and residual added)
    is rounded to the 16-bit dtype once: on the CPU as torch's CPU kernels, on CUDA as
    torch's cuBLASLt ``addmm`` (whose residual add is a second rounding: one fewer here).
    """
    func = "linear"
    dev, dt, _ = _check(func, x, weight, bias, residual)
    launcher = lookup("linear", dev, dt)
    out = launcher(x._data, weight._data, _native(bias), _native(residual))
    return wrap_as(out, dt, dev)


def linear_backward(x: Array, weight: Array, dout: Array, *, bias: Array | None = None,
                    residual: Array | None = None) -> tuple:
    """The gradients ``(dx, dweight, dbias, dresidual)`` of :func:`linear` for ``dout``.

    ``x``, ``weight`` and the ``bias``/``residual`` keywords are the forward call's
    operands (``bias`` and ``residual`` are read for their shapes only: pass them as
    given to the forward, or leave them out when the forward had none).

    Returns
    -------
    dx : Array
        ``dout @ weight``, x's shape.
    dweight : Array
        ``dout.mT @ x`` summed over x's leading axes, ``(out_features, in_features)``.
    dbias : Array or None
        ``dout`` summed over every axis but the last; None without ``bias``.
    dresidual : Array or None
        ``dout`` summed to residual's shape (over the axes it was broadcast along);
        None without ``residual``.

    Raises
    ------
    ValueError
        ``dout`` not of the output's shape, or a forward operand's shape that does not
        fit (as :func:`linear`); TypeError for a dtype other than x's.

    Notes
    -----
    Two matmuls and two sums in the namespace, on every device. float16 and bfloat16
    operands are computed in float32 and each gradient is rounded to the 16-bit dtype
    once.
    """
    func = "linear_backward"
    dev, dt, out_shape = _check(func, x, weight, bias, residual, extra=(("dout", dout),))
    if dout.shape != out_shape:
        raise ValueError(
            f"{func}: dout must have the output's shape (..., out_features) = {out_shape}. "
            f"Received: dout.shape={dout.shape}"
        )
    ops = dev.ops
    n, k = weight.shape
    g, xd, wd = dout._data, x._data, weight._data
    acc = _dtypes.COMPUTE_IN.get(dt)
    if acc is not None:
        # Note: float16/bfloat16 gradients are computed in float32 (the matmuls and the
        # sums) and each is rounded to the 16-bit dtype once, as torch on the CPU.
        g, xd, wd = ops.astype(g, acc), ops.astype(xd, acc), ops.astype(wd, acc)

    def back(a):
        return a if acc is None else ops.astype(a, dt)

    dx = ops.matmul(g, wd)  # (..., N) @ (N, K)
    rows = 1
    for d in out_shape[:-1]:
        rows *= d
    g2 = ops.reshape(g, (rows, n))
    dw = ops.matmul(ops.matrix_transpose(g2), ops.reshape(xd, (rows, k)))
    db = None if bias is None else wrap_as(back(_sum_to(ops, g, (n,))), dt, dev)
    dr = None if residual is None else wrap_as(back(_sum_to(ops, g, residual.shape)), dt, dev)
    return wrap_as(back(dx), dt, dev), wrap_as(back(dw), dt, dev), db, dr
