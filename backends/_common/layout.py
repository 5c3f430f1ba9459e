"""Index math on shapes and strides, shared by the device backends' launchers.

Strides here count elements unless a function says otherwise (``itemsize`` scales
them to bytes); nothing touches a device.
"""

from __future__ import annotations

__all__ = ["band", "broadcast_shape", "c_strides", "coalesce"]


def c_strides(shape, itemsize: int = 1) -> list:
    """The strides of a C-contiguous array of ``shape``, in units of ``itemsize`` (a new
    list).

    Each stride is the product of the lengths after its axis (so a zero-length axis
    gives the axes before it stride 0; such an array has no element to address).
    """
    out = [0] * len(shape)
    acc = itemsize
    for i in range(len(shape) - 1, -1, -1):
        out[i] = acc
        acc *= shape[i]
    return out


def broadcast_shape(shapes) -> tuple:
    """The shape ``shapes`` broadcast to (NumPy's rules); ValueError if they do not."""
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for i, d in enumerate(s, nd - len(s)):
            if d != 1:
                if out[i] != 1 and out[i] != d:
                    raise ValueError(
                        f"operands could not be broadcast together with shapes "
                        f"{' '.join(str(tuple(x)) for x in shapes)}"
                    )
                out[i] = d
    return tuple(out)


def coalesce(shape, strides) -> tuple:
    """``(dims, strides)`` walking the same elements in the same C order with fewer axes.

    Length-1 axes are dropped, and an axis is merged into the one before it wherever
    every operand's strides chain (``outer == inner * len(inner)``). ``strides`` is a
    list of per-operand stride lists; so a contiguous or transposed operand of any
    rank comes out as one or two axes.
    """
    dims = []
    out = [[] for _ in strides]
    for k, d in enumerate(shape):
        if d == 1:
            continue
        if dims and all(o[-1] == s[k] * d for o, s in zip(out, strides)):
            dims[-1] *= d
            for o, s in zip(out, strides):
                o[-1] = s[k]
            continue
        dims.append(d)
        for o, s in zip(out, strides):
            o.append(s[k])
    return dims, out


def band(causal, window, sq: int, sk: int) -> tuple:
    """``(lo, hi)`` of attention's visible band: query ``i`` sees key ``j`` when
    ``lo <= j - i <= hi`` (causal: None, "top_left" or "bottom_right"; window: None or
    (left, right), None for an unbounded side), clamped to ``[-sq - 1, sk + 1]``, beyond
    which every bound means the same (the NumPy backend's ``_Band``)."""
    shift = sk - sq if causal == "bottom_right" else 0
    left, right = window if window is not None else (None, None)
    if causal is not None:
        right = 0 if right is None else min(right, 0)
    lo = -sq - 1 if left is None else shift - left
    hi = sk + 1 if right is None else shift + right
    return min(max(lo, -sq - 1), sk + 1), min(max(hi, -sq - 1), sk + 1)
