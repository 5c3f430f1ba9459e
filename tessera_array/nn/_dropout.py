"""The dropout keep mask of attention, for inspection: :func:`dropout_mask`.

The keep decision is the contract in :mod:`tessera_array.random` (a byte of a
Philox4x32-10 block for each element counter ``((b*H + h)*Sq + i)*Sk + j`` under
``seed``, ``offset``, refined by a second word on a tie), the mask
``tessera_array.nn.attention`` applies for the same ``(seed, offset, dropout_p)`` and
score shape.

Backend contract: the ``dropout_mask`` op
-----------------------------------------
Registered in the ``attention`` family (:data:`tessera_array._dispatch.FAMILIES`)
under dtype ``bool`` (the mask's). The launcher is called as
``launcher(shape, seed, offset, threshold, device=device)`` and returns a native
bool buffer of ``shape`` on ``device`` (the target Device: the call has no array
argument to take it from). ``shape`` is a tuple of >= 2 non-negative ints
``(..., Sq, Sk)`` (the leading dims flatten row-major to ``bh``), ``seed`` and
``offset`` ints in [0, 2**64), ``threshold = floor(dropout_p * 2**40)`` an int in
[1, 2**40) (:func:`tessera_array.random.dropout_keep_threshold`). Element
``(bh, i, j)`` is True when it is kept. ``dropout_p == 0`` (or a threshold of 0) and
empty shapes never reach a launcher.
"""

from __future__ import annotations

from .. import _dtypes
from .._array import Array
from .._creation_functions import ones
from .._devices import as_device
from .._dispatch import lookup
from ..random import check_dropout_p, check_score_shape, check_u64, dropout_keep_threshold

__all__ = ["dropout_mask"]


def dropout_mask(shape, dropout_p, *, seed, offset=0, device=None) -> Array:
    """The boolean keep mask (True = keep) that attention dropout uses for ``shape``.

    ``shape`` is the score shape ``(..., Sq, Sk)`` (batch and query heads leading),
    ``dropout_p`` in [0, 1), ``seed`` and ``offset`` ints in [0, 2**64). The same
    arguments give the same mask on every device. ``dropout_p == 0`` keeps everything.
    """
    func = "dropout_mask"
    shape = check_score_shape(func, shape)
    p = check_dropout_p(func, dropout_p)
    seed = check_u64(func, seed, "seed")
    offset = check_u64(func, offset, "offset")
    dev = as_device(device, func)
    threshold = dropout_keep_threshold(p)
    if threshold == 0 or 0 in shape:
        return ones(shape, dtype=_dtypes.bool, device=dev)
    native = lookup("dropout_mask", dev, _dtypes.bool)(
        shape, seed, offset, threshold, device=dev
    )
    return Array._new(native, _dtypes.bool, dev)
