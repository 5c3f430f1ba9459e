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
         matmul then the additions
opencl   gemm.cl with its accumulate epilogue: the output pre-filled, the
         kernel adds its products to it
cuda     the generic composition (matmul, then the additions) on the device, until
         a CUDA kernel registers under the same key
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
from .._helpers import check_array, refuse_half, wrap_as
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
    refuse_half(func, dt, "x", "no linear kernel is registered for them yet")
    if dt not in _dtypes.REAL_FLOATING:
        raise TypeError(
            f"{func}: x must have a real floating-point dtype (float32 or float64). "
            f"Received: x.dtype={dt}"
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
        ``(..., in_features)``, float32 or float64; ``(in_features,)`` gives
        ``(out_features,)``.
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
        An operand that is not an Array, or of another dtype than ``x``.
    ValueError
        A shape that does not fit, naming the operand (``DeviceMismatchError``, a
        ValueError, for an operand on another device).

    Notes
    -----
    Backend notes: the module docstring lists each backend's kernel. On the CPU the
    product and both additions take one BLAS call over a pre-filled output.
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
    g = dout._data
    dx = ops.matmul(g, weight._data)  # (..., N) @ (N, K)
    rows = 1
    for d in out_shape[:-1]:
        rows *= d
    g2 = ops.reshape(g, (rows, n))
    dw = ops.matmul(ops.matrix_transpose(g2), ops.reshape(x._data, (rows, k)))
    db = None if bias is None else wrap_as(_sum_to(ops, g, (n,)), dt, dev)
    dr = None if residual is None else wrap_as(_sum_to(ops, g, residual.shape), dt, dev)
    return wrap_as(dx, dt, dev), wrap_as(dw, dt, dev), db, dr
