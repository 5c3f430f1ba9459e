"""Counter-based random bits: Philox4x32-10, the same bits on every backend.

Philox4x32-10 is Random123's counter-based generator (Salmon, Moraes, Dror and Shaw,
"Parallel random numbers: as easy as 1, 2, 3", SC'11): a keyed bijection of a 128-bit
counter (four uint32 words) under a 64-bit key (two uint32 words), ten rounds of
``(x0, x1, x2, x3) -> (hi(M1*x2) ^ x1 ^ k0, lo(M1*x2), hi(M0*x0) ^ x3 ^ k1, lo(M0*x0))``
with the key bumped by ``(W0, W1)`` between rounds. There is no state: the bits of a
counter depend on nothing else, so any device, any tiling and any thread layout gives
the same bits.

:func:`philox4x32_10` here is written only with the ``xp`` namespace (products of
uint32 words through uint64, split into high and low words), so it runs unchanged on
every backend; it is the reference each backend's fast path is tested against, and
it passes Random123's published known-answer vectors (``tests/test_random.py``).

The dropout keep-decision contract
----------------------------------
``tessera_array.nn.attention`` and :func:`tessera_array.nn.dropout_mask` decide
whether element ``(bh, i, j)`` of a score tensor of ``BH`` flattened batch*query-head
rows, ``Sq`` query rows and ``Sk`` key columns is kept as follows (``seed`` and
``offset`` ints in [0, 2**64), ``0 <= dropout_p < 1``)::

    c         = (bh*Sq + i)*Sk + j                 (64-bit unsigned)
    key       = (seed & 0xFFFFFFFF, seed >> 32)
    P(n)      = philox4x32_10((n & 0xFFFFFFFF, n >> 32, offset & 0xFFFFFFFF,
                               offset >> 32), key)  (block n: four uint32 words)
    b         = byte c & 15 of P(c >> 4)           (byte e of word l is byte 4 l + e,
                                                    bits 8 e .. 8 e + 7 of the word)
    r         = P(2**63 | (c >> 2))[c & 3]         (the refinement word)
    threshold = floor(dropout_p * 2**40)           (dropout_keep_threshold)
    keep      = b * 2**32 + r >= threshold

so an element drops with probability ``threshold / 2**40`` (``dropout_p`` to within
2**-40), and the decision is a pure function of ``(seed, offset, c)``: independent of
tiling, independent across batch and head, and bit-identical on every backend. The
refinement word decides only where ``b == threshold >> 32`` (one element in 256), so a
kernel computes one Philox block for sixteen elements and the rare refinement blocks
beside them; the two sets of blocks are disjoint (``c >> 4 < 2**60 <= 2**63``).
:func:`dropout_mask_reference` computes it with ``xp`` only.
"""

from __future__ import annotations

import math
import numbers
import operator

from . import _dtypes
from ._array import Array
from ._creation_functions import arange, asarray
from ._data_type_functions import astype
from ._devices import as_device
from ._elementwise_functions import (
    add,
    bitwise_and,
    bitwise_right_shift,
    bitwise_xor,
    greater_equal,
    multiply,
)
from ._manipulation_functions import broadcast_to, reshape, stack

__all__ = [
    "M0",
    "M1",
    "W0",
    "W1",
    "dropout_keep_threshold",
    "dropout_mask_reference",
    "philox4x32_10",
]

M0 = 0xD2511F53  # Random123's PHILOX_M4x32_0
M1 = 0xCD9E8D57  # PHILOX_M4x32_1
W0 = 0x9E3779B9  # PHILOX_W32_0 (golden ratio)
W1 = 0xBB67AE85  # PHILOX_W32_1 (sqrt(3) - 1)
_ROUNDS = 10
_MASK = 0xFFFFFFFF


def _check_words(func: str, x, name: str, words: int) -> None:
    if not isinstance(x, Array):
        raise TypeError(
            f"{func}: {name} must be a tessera_array Array of dtype uint32. "
            f"Received: {name}={type(x).__name__}"
        )
    if x.dtype != _dtypes.uint32:
        raise TypeError(
            f"{func}: {name} must have dtype uint32. Received: {name}.dtype={x.dtype}"
        )
    if x.ndim < 1 or x.shape[-1] != words:
        raise ValueError(
            f"{func}: {name} must have shape (..., {words}). Received: {name}.shape={x.shape}"
        )


def philox4x32_10(counter: Array, key: Array, /) -> Array:
    """Philox4x32-10 (Random123) of each counter under ``key``: the ``xp`` reference.

    ``counter`` is a uint32 Array of shape ``(..., 4)`` (words ``x0..x3``), ``key`` a
    uint32 Array of shape ``(2,)`` or ``(..., 2)`` broadcastable with the counters'
    leading shape. Returns uint32 of shape ``broadcast(...) + (4,)``.
    """
    func = "philox4x32_10"
    _check_words(func, counter, "counter", 4)
    _check_words(func, key, "key", 2)
    if counter.device != key.device:
        raise ValueError(
            f"{func}: counter and key must be on the same device. "
            f"Received: counter.device={counter.device}, key.device={key.device}"
        )
    lead_c = counter.shape[:-1]
    lead_k = key.shape[:-1]
    try:
        lead = _broadcast(lead_c, lead_k)
    except ValueError:
        raise ValueError(
            f"{func}: the leading shapes of counter and key must broadcast. "
            f"Received: counter.shape={counter.shape}, key.shape={key.shape}"
        ) from None
    u64 = _dtypes.uint64
    x0, x1, x2, x3 = (astype(counter[..., w], u64) for w in range(4))
    k0, k1 = (astype(key[..., w], u64) for w in range(2))
    for r in range(_ROUNDS):
        if r:
            k0 = bitwise_and(add(k0, W0), _MASK)
            k1 = bitwise_and(add(k1, W1), _MASK)
        p0 = multiply(x0, M0)  # < 2**64: exact in uint64
        p1 = multiply(x2, M1)
        x0, x1, x2, x3 = (
            bitwise_xor(bitwise_xor(bitwise_right_shift(p1, 32), x1), k0),
            bitwise_and(p1, _MASK),
            bitwise_xor(bitwise_xor(bitwise_right_shift(p0, 32), x3), k1),
            bitwise_and(p0, _MASK),
        )
    words = [broadcast_to(astype(w, _dtypes.uint32), lead) for w in (x0, x1, x2, x3)]
    return stack(words, axis=-1)


def _broadcast(a: tuple, b: tuple) -> tuple:
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for da, db in zip(a, b):
        if da != db and da != 1 and db != 1:
            raise ValueError("shapes do not broadcast")
        out.append(db if da == 1 else da)
    return tuple(out)


def dropout_keep_threshold(dropout_p) -> int:
    """``floor(dropout_p * 2**40)``: an element drops when its 40-bit word (the contract
    above: its byte, then its refinement word) is below it.

    ``dropout_p`` is a real number in [0, 1); the product is exact in float64.
    """
    func = "dropout_keep_threshold"
    p = check_dropout_p(func, dropout_p)
    return math.floor(p * 1099511627776.0)


def check_dropout_p(func: str, dropout_p) -> float:
    """``dropout_p`` as a float in [0, 1); TypeError / ValueError naming it otherwise."""
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, numbers.Real):
        raise TypeError(
            f"{func}: dropout_p must be a real number in [0, 1). "
            f"Received: dropout_p={dropout_p!r}"
        )
    p = float(dropout_p)
    if not 0.0 <= p < 1.0:  # also rejects NaN
        raise ValueError(
            f"{func}: dropout_p must be in [0, 1). Received: dropout_p={dropout_p!r}"
        )
    return p


def check_u64(func: str, value, name: str) -> int:
    """``value`` as a Python int in [0, 2**64); TypeError / ValueError naming it otherwise."""
    if isinstance(value, bool):
        raise TypeError(f"{func}: {name} must be an int in [0, 2**64). Received: {name}={value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(
            f"{func}: {name} must be an int in [0, 2**64). Received: {name}={value!r}"
        ) from None
    if not 0 <= v < 1 << 64:
        raise ValueError(f"{func}: {name} must be in [0, 2**64). Received: {name}={value!r}")
    return v


def check_score_shape(func: str, shape) -> tuple:
    """``shape`` as a tuple of >= 2 non-negative ints (..., Sq, Sk)."""
    if not isinstance(shape, (tuple, list)):
        raise TypeError(
            f"{func}: shape must be a tuple of ints (..., Sq, Sk). Received: shape={shape!r}"
        )
    dims = []
    for d in shape:
        if isinstance(d, bool):
            raise TypeError(f"{func}: shape must hold ints. Received: shape={shape!r}")
        try:
            dims.append(operator.index(d))
        except TypeError:
            raise TypeError(f"{func}: shape must hold ints. Received: shape={shape!r}") from None
    if len(dims) < 2:
        raise ValueError(
            f"{func}: shape must have at least 2 dimensions (..., Sq, Sk). "
            f"Received: shape={shape!r}"
        )
    if any(d < 0 for d in dims):
        raise ValueError(
            f"{func}: shape must have non-negative dimensions. Received: shape={shape!r}"
        )
    return tuple(dims)


def dropout_mask_reference(shape, dropout_p, *, seed, offset=0, device=None) -> Array:
    """The dropout keep mask of the contract above, computed with ``xp`` only.

    Same arguments and result as :func:`tessera_array.nn.dropout_mask` (bool Array of
    ``shape``, True = keep); slow (every element's refinement word computed), for
    testing backends.
    """
    func = "dropout_mask_reference"
    shape = check_score_shape(func, shape)
    threshold = dropout_keep_threshold(check_dropout_p(func, dropout_p))
    seed = check_u64(func, seed, "seed")
    offset = check_u64(func, offset, "offset")
    dev = as_device(device, func)
    n = math.prod(shape)
    if threshold == 0 or n == 0:
        from ._creation_functions import ones

        return ones(shape, dtype=_dtypes.bool, device=dev)
    key = asarray([seed & _MASK, seed >> 32], dtype=_dtypes.uint32, device=dev)

    def words(first: int, count: int) -> Array:
        # the words of blocks first .. first + count - 1, in order: (4 count,) uint32
        block = add(arange(count, dtype=_dtypes.uint64, device=dev), first)
        u32 = _dtypes.uint32
        counter = stack(
            [
                astype(bitwise_and(block, _MASK), u32),
                astype(bitwise_right_shift(block, 32), u32),
                broadcast_to(asarray(offset & _MASK, dtype=u32, device=dev), (count,)),
                broadcast_to(asarray(offset >> 32, dtype=u32, device=dev), (count,)),
            ],
            axis=-1,
        )
        return reshape(philox4x32_10(counter, key), (count * 4,))

    # b[c]: byte c & 15 of block c >> 4, that is byte c & 3 of word c >> 2 of the blocks
    # from 0 in order
    w = astype(words(0, (n + 15) // 16), _dtypes.uint64)
    b = stack([bitwise_and(bitwise_right_shift(w, 8 * e), 0xFF) for e in range(4)], axis=-1)
    b = reshape(b, ((n + 15) // 16 * 16,))[:n]
    r = astype(words(1 << 63, (n + 3) // 4), _dtypes.uint64)[:n]  # r[c]: word c & 3 of 2**63 | c >> 2
    u40 = add(multiply(b, 1 << 32), r)
    return reshape(greater_equal(u40, threshold), shape)
