"""Philox4x32-10 and the dropout keep mask on the NumPy backend.

:func:`philox4x32_10` is Random123's Philox4x32 with 10 rounds (Salmon, Moraes, Dror
and Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC'11), vectorised over
blocks; :func:`keep_block` is the keep decision of the dropout contract
(``tessera_array.random``'s module docstring) for one tile of one attention problem,
used by the attention kernel per tile and by the ``dropout_mask`` launcher. Both are
tested bit for bit against the ``xp`` reference :func:`tessera_array.random.philox4x32_10`.

How it is fast
--------------
A round is ``hi, lo = mulhilo(M0, x0); hi', lo' = mulhilo(M1, x2);
(x0, x1, x2, x3) = (hi' ^ x1 ^ k0, lo', hi ^ x3 ^ k1, lo)``. Each 32 x 32 -> 64-bit
product is one ``np.multiply`` of the uint32 word by a uint64 constant into a uint64
buffer; its halves are read as strided uint32 views of that buffer (no shift, no mask),
so a round is 2 multiplies and 4 XORs over the blocks. Two product buffers alternate
between rounds, because a round's low halves are the next round's ``x1``/``x3``. The
counter words that are the same for every block of a tile (the offset words, and the
high block word unless the tile straddles 2**32 blocks) stay Python ints, which removes
one multiply and two XORs from the first two rounds. A tile computes only the blocks it
touches: per row, from the block of its first counter to the block of its last.

Measured (NumPy 2.4.6, one thread of a 2-core AMD EPYC VM, best of 20; the tie
decisions included): a 128 x 1024 tile takes 9.8 ns per element when ``Sk % 16 == 0``
and 18.5 ns otherwise (a gather of each row's bytes); a 64 x 64 tile 91 ns (per-call
overhead: the ties' lookup); the whole mask of (4, 8, 1024, 1024) 5.6 ns per element.
"""

from __future__ import annotations

import sys

import numpy as np

__all__ = ["M0", "M1", "W0", "W1", "dropout_mask", "keep_block", "philox4x32_10", "refine_words",
           "register"]

M0 = 0xD2511F53  # Random123's PHILOX_M4x32_0
M1 = 0xCD9E8D57  # PHILOX_M4x32_1
W0 = 0x9E3779B9  # PHILOX_W32_0 (golden ratio)
W1 = 0xBB67AE85  # PHILOX_W32_1 (sqrt(3) - 1)
ROUNDS = 10
_MASK = 0xFFFFFFFF
_LO, _HI = (0, 1) if sys.byteorder == "little" else (1, 0)
_M0 = np.uint64(M0)
_M1 = np.uint64(M1)
CHUNK = 32768  # blocks per pass of the rounds: bounds the scratch of a whole-mask call


def _xor3(a, b, k: int, out):
    """``a ^ b ^ k`` (each a uint32 array or a Python int) into ``out`` (or an int)."""
    a_int = isinstance(a, int)
    b_int = isinstance(b, int)
    if a_int and b_int:
        return a ^ b ^ k
    if a_int or b_int:
        arr, s = (b, a ^ k) if a_int else (a, b ^ k)
        return np.bitwise_xor(arr, np.uint32(s), out=out)
    np.bitwise_xor(a, b, out=out)
    if k:
        np.bitwise_xor(out, np.uint32(k), out=out)
    return out


def _scratch(n: int):
    """Scratch for :func:`_rounds` over ``n`` blocks: two product buffers, two words."""
    prod = (np.empty((2, n), np.uint64), np.empty((2, n), np.uint64))
    return prod, np.empty(n, np.uint32), np.empty(n, np.uint32)


def _rounds(x0, x1, x2, x3, k0: int, k1: int, out: np.ndarray, scratch=None) -> np.ndarray:
    """Ten Philox4x32 rounds over ``n`` blocks; the words go to ``out`` (n, 4) uint32.

    Each ``x*`` is a contiguous uint32 array of shape (n,) or a Python int (the same
    word for every block); at least one of them must be an array.
    """
    n = out.shape[0]
    if n > CHUNK:
        # Chunks bound the scratch of a whole-mask call (5 words of scratch per block);
        # they cost nothing measurable (tile sizes 2048..32768 blocks timed alike).
        scratch = _scratch(CHUNK)
        for lo in range(0, n, CHUNK):
            hi = min(n, lo + CHUNK)
            _rounds(*(x if isinstance(x, int) else x[lo:hi] for x in (x0, x1, x2, x3)),
                    k0, k1, out[lo:hi], scratch)
        return out
    prod, a0, a2 = _scratch(n) if scratch is None else scratch
    halves = [p[:, :n].view(np.uint32).reshape(2, n, 2) for p in prod]
    prod = [p[:, :n] for p in prod]
    a0 = a0[:n]
    a2 = a2[:n]
    for r in range(ROUNDS):
        p = prod[r & 1]
        v = halves[r & 1]
        last = r == ROUNDS - 1
        if isinstance(x0, int):
            t = M0 * x0
            hi0, lo0 = t >> 32, t & _MASK
        else:
            np.multiply(x0, _M0, out=p[0])
            hi0, lo0 = v[0, :, _HI], v[0, :, _LO]
        if isinstance(x2, int):
            t = M1 * x2
            hi1, lo1 = t >> 32, t & _MASK
        else:
            np.multiply(x2, _M1, out=p[1])
            hi1, lo1 = v[1, :, _HI], v[1, :, _LO]
        if last:
            for col, w in ((0, _xor3(hi1, x1, k0, out[:, 0])), (2, _xor3(hi0, x3, k1, out[:, 2]))):
                if isinstance(w, int):
                    out[:, col] = w
            out[:, 1] = lo1
            out[:, 3] = lo0
            return out
        x0, x2 = _xor3(hi1, x1, k0, a0), _xor3(hi0, x3, k1, a2)
        x1, x3 = lo1, lo0
        k0 = (k0 + W0) & _MASK
        k1 = (k1 + W1) & _MASK
    return out  # pragma: no cover


def philox4x32_10(counter: np.ndarray, key) -> np.ndarray:
    """Philox4x32-10 of each counter: uint32 ``(..., 4)`` -> uint32 ``(..., 4)``.

    ``key`` is ``(k0, k1)``, two ints in [0, 2**32).
    """
    counter = np.asarray(counter)
    if counter.dtype != np.uint32 or counter.ndim < 1 or counter.shape[-1] != 4:
        raise TypeError(
            "philox4x32_10: counter must be a uint32 array of shape (..., 4). "
            f"Received: counter dtype={counter.dtype}, shape={counter.shape}"
        )
    k0, k1 = (int(k) for k in key)
    if not (0 <= k0 <= _MASK and 0 <= k1 <= _MASK):
        raise ValueError(f"philox4x32_10: key words must be in [0, 2**32). Received: key={key!r}")
    flat = counter.reshape(-1, 4)
    out = np.empty(flat.shape, np.uint32)
    if flat.shape[0]:
        words = [np.ascontiguousarray(flat[:, i]) for i in range(4)]
        _rounds(*words, k0, k1, out)
    return out.reshape(counter.shape)


def _blocks(first: np.ndarray, nb: int, offset: int, seed: int) -> np.ndarray:
    """Philox outputs of blocks ``first[r] + t`` (t < nb): uint32 (len(first), nb * 4)."""
    rows = first.shape[0]
    lo_hi = int(first.min()) >> 32
    hi_hi = (int(first.max()) + nb - 1) >> 32
    if lo_hi == hi_hi:
        # block & 0xFFFFFFFF = (first + t) mod 2**32: uint32 arithmetic wraps exactly so.
        c0 = (first.astype(np.uint32)[:, None] + np.arange(nb, dtype=np.uint32)).reshape(-1)
        c1 = lo_hi
    else:
        block = (first[:, None] + np.arange(nb, dtype=np.uint64)).reshape(-1)
        c0 = block.astype(np.uint32)
        c1 = (block >> np.uint64(32)).astype(np.uint32)
    out = np.empty((rows * nb, 4), np.uint32)
    _rounds(c0, c1, offset & _MASK, offset >> 32, seed & _MASK, seed >> 32, out)
    return out.reshape(rows, nb * 4)


def refine_words(c: np.ndarray, offset: int, seed: int) -> np.ndarray:
    """The refinement word of each element counter ``c`` (uint64 array): word ``c & 3`` of
    Philox4x32-10 of block ``2**63 | (c >> 2)`` (uint32, ``c``'s shape)."""
    c = np.asarray(c, dtype=np.uint64).reshape(-1)
    out = np.empty((c.shape[0], 4), np.uint32)
    if c.shape[0]:
        block = c >> np.uint64(2)
        _rounds(block.astype(np.uint32),
                ((block >> np.uint64(32)) | np.uint64(1 << 31)).astype(np.uint32),
                offset & _MASK, offset >> 32, seed & _MASK, seed >> 32, out)
    return out[np.arange(c.shape[0]), (c & np.uint64(3)).astype(np.intp)]


def keep_block(seed: int, offset: int, threshold: int, Sq: int, Sk: int,
               bh, i0: int, i1: int, j0: int, j1: int) -> np.ndarray:
    """The dropout keep mask (True = keep) of the tile ``[i0:i1, j0:j1]`` of row(s) ``bh``.

    Element ``(bh, i, j)`` has counter ``c = (bh*Sq + i)*Sk + j`` and the contract of
    ``tessera_array.random`` (``threshold = floor(dropout_p * 2**40)``): byte ``c & 15``
    of Philox block ``c >> 4``, above ``threshold >> 32`` keeps, below drops, equal is
    decided by :func:`refine_words` against ``threshold & 0xFFFFFFFF``. ``bh`` is an int
    (result shape ``(i1-i0, j1-j0)``) or a 1-D integer array of flattened batch*head
    indices (result shape ``(len(bh), i1-i0, j1-j0)``). Arguments are trusted (the
    callers validate).
    """
    scalar_bh = isinstance(bh, (int, np.integer))
    bhs = np.asarray([bh] if scalar_bh else bh, dtype=np.uint64).reshape(-1)
    h = i1 - i0
    w = j1 - j0
    shape = (h, w) if scalar_bh else (bhs.shape[0], h, w)
    if threshold <= 0:
        return np.ones(shape, dtype=bool)
    if h <= 0 or w <= 0 or bhs.shape[0] == 0:
        return np.zeros(shape, dtype=bool)
    t8, frac = threshold >> 32, threshold & _MASK
    # First counter of each (bh, i) row of the tile.
    rows = (bhs[:, None] * np.uint64(Sq) + np.arange(i0, i1, dtype=np.uint64)).reshape(-1)
    start = rows * np.uint64(Sk) + np.uint64(j0)
    if Sk % 16 == 0:
        # Every row starts at the same byte of its block: one slice of the rows' bytes.
        lane = j0 & 15
        nb = (lane + w + 15) >> 4
        u = _bytes(_blocks(start >> np.uint64(4), nb, offset, seed))
        b = u[:, lane:lane + w]
    else:
        lanes = (start & np.uint64(15)).astype(np.intp)
        nb = (15 + w + 15) >> 4
        u = _bytes(_blocks(start >> np.uint64(4), nb, offset, seed))
        b = np.take_along_axis(u, lanes[:, None] + np.arange(w), axis=1)
    keep = b > t8
    tie = b == t8
    if frac == 0:
        keep |= tie
    else:
        r, j = np.nonzero(tie)
        if r.size:
            c = start[r] + j.astype(np.uint64)
            keep[r, j] = refine_words(c, offset, seed) >= np.uint32(frac)
    return keep.reshape(shape)


def _bytes(u: np.ndarray) -> np.ndarray:
    """The bytes of Philox words (rows, 4 k) uint32 in the contract's order (byte e of word
    l is byte 4 l + e, its bits 8 e .. 8 e + 7): (rows, 16 k) uint8."""
    return u.astype("<u4", copy=False).view(np.uint8)


def dropout_mask(shape: tuple, seed: int, offset: int, threshold: int, device=None) -> np.ndarray:
    """The ``dropout_mask`` launcher: the whole mask of ``shape`` (..., Sq, Sk), bool.

    ``device`` (the host) is not used.
    """
    *lead, Sq, Sk = shape
    bh = 1
    for d in lead:
        bh *= d
    if bh == 0 or Sq == 0 or Sk == 0:
        return np.zeros(shape, dtype=bool)
    return keep_block(seed, offset, threshold, Sq, Sk, np.arange(bh), 0, Sq, 0, Sk).reshape(shape)


def register(registry, backend_name: str) -> None:
    """Register the ``dropout_mask`` launcher (keyed on bool, the mask's dtype)."""
    from tessera_array import _dtypes

    registry.register("dropout_mask", backend_name, _dtypes.bool, dropout_mask)
