"""Native creation ops of the OpenCL backend.

The front end has validated shapes and resolved the DType (and checked it against
the device); these functions allocate on ``device``'s queue and fill with a
generated kernel.
"""

from __future__ import annotations

import math

import numpy as np
from tessera_array.backends.numpy import _ops as _host_ops

from . import _generate, _kernels, _memory
from ._fallback import host_fallback
from ._ops_elementwise import _scalar

__all__ = ["arange", "empty", "eye", "full", "linspace", "ones", "tril", "triu", "zeros"]

_CT = _generate.CTYPE


def _ct(npdt) -> str:
    return "bool" if npdt.char == "?" else _CT[npdt.char]


def empty(shape: tuple, *, dtype, device=None):
    return _memory.empty(_memory.device_queue(device), shape, dtype._np)


def full(shape: tuple, fill_value, *, dtype, device=None):
    """``fill_value`` is a Python scalar the front end checked against ``dtype``."""
    npdt = dtype._np
    with np.errstate(over="ignore"):  # a float beyond float32 rounds to inf (IEEE 754)
        value = _scalar(fill_value, npdt)
    return _kernels.launch_map(_memory.device_queue(device), "a0", None, [value], _ct(npdt),
                               shape=shape)


def zeros(shape: tuple, *, dtype, device=None):
    return full(shape, 0, dtype=dtype, device=device)


def ones(shape: tuple, *, dtype, device=None):
    return full(shape, 1, dtype=dtype, device=device)


_arange_host = host_fallback("arange[complex]", _host_ops.arange)
_linspace_host = host_fallback("linspace[complex, devices without float64]",
                               _host_ops.linspace)


def arange(start, /, stop, step, *, dtype, device=None):
    """NumPy's values: integers exact (modulo 2**64), floats ``start + i*delta``."""
    npdt = dtype._np
    q = _memory.device_queue(device)
    t = _ct(npdt)
    if npdt.kind in "iu":
        n = len(range(start, stop, step))
        if n:
            last = start + (n - 1) * step
            info = np.iinfo(npdt)
            if not (info.min <= start <= info.max and info.min <= last <= info.max):
                raise OverflowError(
                    f"arange: the values {start} .. {last} do not fit dtype {dtype}."
                )
        expr = f"({t})(a0 + (ulong)i * a1)"
        if t in ("char", "short", "int", "long"):
            expr = f"as_{t}((u{t})(a0 + (ulong)i * a1))"
        return _kernels.launch_map(q, expr, None, [np.uint64(start % 2**64),
                                                   np.uint64(step % 2**64)], t, shape=(n,))
    if npdt.kind != "f":
        return _arange_host(start, stop, step, dtype=dtype, device=device)
    n = max(0, math.ceil((stop - start) / step))
    with np.errstate(over="ignore", invalid="ignore"):
        v0 = npdt.type(start)
        v1 = npdt.type(start + step)
        delta = v1 - v0
    return _kernels.launch_map(q, f"i == 0 ? a0 : (i == 1 ? a1 : a0 + ({t})i * a2)", None, [v0, v1, delta], t,
                               shape=(n,))


def linspace(start, stop, /, num: int, *, dtype, device=None, endpoint: bool = True):
    """NumPy's values: ``i*step + start`` computed in float64, the last one ``stop``."""
    npdt = dtype._np
    if npdt.kind != "f" or not device._backend.capabilities(device)["float64"]:
        return _linspace_host(start, stop, num, dtype=dtype, device=device, endpoint=endpoint)
    t = _ct(npdt)
    div = (num - 1) if endpoint else num
    start, stop = float(start), float(stop)
    delta = stop - start
    if div > 0:
        step = delta / div
        if step == 0:
            expr = "((double)i / a2) * a3 + a0"
        else:
            expr = "(double)i * a3 + a0"
            delta = step
    else:
        expr = "(double)i * a3 + a0"
    value = f"({t})({expr})"
    if endpoint and num > 1:
        value = f"i == n - 1 ? ({t})a1 : {value}"
    return _kernels.launch_map(
        _memory.device_queue(device), value, None,
        [np.float64(start), np.float64(stop), np.float64(max(div, 1)), np.float64(delta)],
        t, shape=(num,),
    )


def _from_int(t: str, e: str) -> str:
    """An int-valued C expression as a value of C type ``t``."""
    if t in ("float2", "double2"):
        r = t[:-1]
        return f"({t})(({r})({e}), ({r})0)"
    if t == "bool":
        return f"({e})"
    return f"({t})({e})"


def _clamp_k(rows: int, cols: int, k: int) -> int:
    # Beyond the matrix the diagonal saturates; clamping keeps k a C long.
    return max(-rows - 1, min(cols + 1, k))


def eye(n_rows: int, n_cols: int, /, *, k: int = 0, dtype, device=None):
    t = _ct(dtype._np)
    k = _clamp_k(n_rows, n_cols, k)
    return _kernels.launch_map(_memory.device_queue(device), _from_int(t, "i % a0 == i / a0 + a1"),
                               None, [np.int64(max(n_cols, 1)), np.int64(k)], t,
                               shape=(n_rows, n_cols))


def _tri(x, k, lower):
    # The result is a fresh C-contiguous buffer: its flat index gives the row and
    # column, so one kernel serves every rank and layout of x.
    rows, cols = x.shape[-2], x.shape[-1]
    k = _clamp_k(rows, cols, k)
    col, row = "(i % a2)", "((i / a2) % a3)"
    cond = f"{col} - {row} <= a1" if lower else f"{col} - {row} >= a1"
    t = _ct(x.dtype)
    zero = f"({t})0"
    return _kernels.launch_map(x.queue, f"{cond} ? a0 : {zero}", None,
                               [x, np.int64(k), np.int64(max(cols, 1)), np.int64(max(rows, 1))],
                               t, shape=x.shape)


def tril(x, /, *, k: int = 0):
    return _tri(x, k, True)


def triu(x, /, *, k: int = 0):
    return _tri(x, k, False)
