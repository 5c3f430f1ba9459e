"""FFT launchers of the OpenCL backend (``kernels/opencl/fft.cl``).

The NumPy backend's contract (:mod:`tessera_array.backends.numpy.fft`, and the
module docstring of :mod:`tessera_array.fft`): ``launcher(a, s, axes, norm, forward)``
on ``pyopencl.array.Array`` buffers, ``a`` of any strides, ``axes`` distinct
non-negative ints, ``s`` the logical length per axis (input cut or zero-padded),
``norm`` one of ``"backward"``, ``"ortho"``, ``"forward"``; the result is a fresh
C-ordered array of the input's precision on ``a``'s queue and allocator.

==========  ======================  ==============================================
op          dtypes (input)          computes
==========  ======================  ==============================================
fft_c2c     complex64, complex128   ``fftn`` (``forward=True``) / ``ifftn``
fft_r2c     float32, float64        ``rfftn`` (``forward=True``) / ``ihfftn``
fft_c2r     complex64, complex128   ``hfftn`` (``forward=True``) / ``irfftn``
==========  ======================  ==============================================

How: a C-ordered input is read in place (never written); any other is first gathered
into a contiguous complex block. Each transformed axis is moved last (a gather that also
cuts or zero-pads it to ``s``), transformed as a batch of rows, and moved back. A row
length ``n = 2^k`` runs Stockham passes of radix 8, the last one radix 8, 4 or 2
(:func:`_radices`: ``ceil(k/3)`` passes, 4 for 4096 where radix 2 took 12): rows of
``n <= LOCAL_MAX_N`` points in one launch of ``tessera_fft_local`` (all passes in
local memory, several short rows a work-group), longer rows one launch per pass. Any
other length runs Bluestein's algorithm through a power-of-two FFT of at least
``2n - 1`` points. Twiddle tables (per pass, ``exp(-2 pi i r k / (Ns R))`` from the
exact integer angle) and Bluestein's chirp and filter are computed on the host in double
and rounded once, once per ``(context, n, dtype)``, and kept (:func:`clear_plans`).
``rfftn``/``ihfftn`` are the complex transform of the real input cut to
``s[-1] // 2 + 1`` points on the last axis; ``irfftn`` transforms the leading axes,
extends the last one Hermitian to ``s[-1]`` points and keeps the real part; ``hfftn``
is ``irfftn`` of the conjugate with the normalization mirrored (the NumPy backend's
identity). Normalization is one scaling at the end.

Accuracy, ``C = max |error| / max |numpy.fft| / (eps log2 m)`` (``m`` the power of two
transformed): lengths 2 .. 2^16 C <= 0.68 (complex64), 0.47 (complex128); Bluestein
C <= 0.68 / 2.52. The local and the global routes give the same bits.
tests/test_opencl_kernels.py asserts C <= 2 (powers of two) and C <= 5 (Bluestein).

Speed, and why not pyvkfft (VkFFT's OpenCL backend): PoCL 3.0, 2-core EPYC, c2c forward:

=======================  =========  ============  ===========================
rows                     launches   numpy / ours  ours / pyvkfft time
=======================  =========  ============  ===========================
64 x 4096 complex64      4          0.20-0.43     0.50
64 x 4095 (Bluestein)    13         0.05-0.12     1.32
16 x 65536 complex64     6          0.31-0.41     0.21
64 x 4096 complex128     4          0.18-0.97     0.34
=======================  =========  ============  ===========================

The native kernels need no build step (pyvkfft has no wheel); pyvkfft wins only on
lengths with small odd factors, Bluestein's here (mixed radix 3/5/7 would be next).
``LOCAL_MAX_N = 2048``: the one-launch kernel wins for short rows on PoCL, is even up to
2048 points and loses from 4096 (a GPU may want more; not measured). PoCL 3.0 ignored a
store guard after barriers, so the output has ``ceil(batch / P) P`` rows, sliced after.
:func:`tessera_array.fft.get_plan_cache` gives an :class:`OpenclPlanCache` (a device's
twiddles and Bluestein plans). Launches put at most 65535 rows in the second grid
dimension (:func:`_by_rows`: CUDA's grid-y limit). float64/complex128 need
``cl_khr_fp64``. The runs behind these figures: benchmarks/NOTES.md.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from tessera_array.backends._common import c_strides, memo
from tessera_array.backends._common.plans import BasePlanCache
from tessera_array.backends._xp._dtypes import COMPLEX_OF, REAL_OF

from tessera_array import _dtypes

from . import _memory, _programs

__all__ = ["clear_plans", "fft_c2c", "fft_c2r", "fft_r2c", "register"]

FILE = "fft.cl"
WG = 64
LOCAL_MAX_N = 2048  # longest row for the one-launch local-memory kernel (measured below)
LOCAL_ROWS = 64  # work-items of a local-kernel work-group, rows packed up to it
_MIRROR = {"backward": "forward", "forward": "backward", "ortho": "ortho"}
_REAL_IN = (np.dtype(np.float32), np.dtype(np.float64))  # the input dtypes of fft_r2c
_MAX_ROWS = 65535  # rows of one launch (CUDA's grid-y limit; see the module docstring)


def _by_rows(knl, queue, gx: int, lx: int, batch: int, *args) -> None:
    """``knl`` over ``batch`` rows in launches of at most :data:`_MAX_ROWS` rows: global
    size ``(gx, rows)``, local ``(lx, 1)``, the launch's first row passed first."""
    for row0 in range(0, batch, _MAX_ROWS):
        knl(queue, (gx, min(_MAX_ROWS, batch - row0)), (lx, 1), np.int64(row0), *args)

_plans = memo("opencl.fft.plans")  # (context, kind, n, dtype) -> _Twiddles or _Bluestein


class _Twiddles(NamedTuple):
    """The plan of a power-of-two length n (see :meth:`_Ctx.plan`)."""

    radices: list  # the Stockham passes' radices (8, ..., then 8, 4 or 2)
    table: object  # their twiddle factors on the device (complex, pass after pass)


class _Bluestein(NamedTuple):
    """The plan of any other length n (see :meth:`_Ctx.bluestein`)."""

    m: int  # the power-of-two length of the convolution, >= 2n - 1
    chirp: object  # exp(-i pi k^2 / n), k < n, on the device
    filt: object  # the FFT of the chirp filter (length m) on the device


def clear_plans() -> None:
    """Forget every kept twiddle table and Bluestein plan."""
    _plans.clear()


def _kernels(func, context, cdtype, real_in=False):
    dev = context.devices[0]
    extra = ("-DIN_REAL",) if real_in else ()
    opts = _programs.dtype_options(func, cdtype, dev, extra=extra)
    return lambda name: _programs.kernel(context, FILE, opts, name)


def _radices(n):
    """The Stockham passes of ``n = 2^k`` points: radix 8 while more than 8 points remain,
    then the rest (8, 4 or 2): ceil(k / 3) passes (fft.cl builds the same sequence)."""
    out = []
    while n > 8:
        out.append(8)
        n //= 8
    return out + [n] if n > 1 else out


def _cl():
    import pyopencl as cl

    return cl


# (context, complex dtype) -> tessera_fft_local's work-group size limit
_local_wg = memo("opencl.fft.local_wg")


def _local_shape(c, n, batch):
    """``((local size, rows per group), groups)`` of tessera_fft_local for ``batch`` rows of
    ``n`` points, or None when the row does not fit (or ``n > LOCAL_MAX_N``)."""
    lx = max(1, n // 8)
    if n > LOCAL_MAX_N:
        return None
    key = (c.context, c.cdtype)
    limit = _local_wg.get(key)
    dev = c.context.devices[0]
    if limit is None:
        knl = c.k("tessera_fft_local")
        limit = _local_wg[key] = min(
            knl.get_work_group_info(_cl().kernel_work_group_info.WORK_GROUP_SIZE, dev),
            dev.max_work_item_sizes[0], dev.max_work_group_size)
    if lx > limit or n * c.cdtype.itemsize > dev.local_mem_size:
        return None
    p = max(1, min(LOCAL_ROWS // lx, batch, limit // lx,
                   dev.local_mem_size // (n * c.cdtype.itemsize)))
    return (lx, p), -(-batch // p)


def _ceil(n, k=WG):
    return -(-n // k) * k


def _empty(queue, shape, dtype, like):
    return _memory.new(queue, shape, dtype, like.allocator)



class _Ctx:
    """What one launch needs: queue, dtypes, kernel getter, allocator source."""

    def __init__(self, func, a, cdtype):
        self.func = func
        self.queue = _memory.queue_of(func, a)
        self.context = a.context
        self.cdtype = np.dtype(cdtype)
        self.rdtype = REAL_OF[self.cdtype]
        self.like = a
        self.k = _kernels(func, a.context, cdtype)

    def gather(self, src, out_shape, in_strides, in_lens, in_off=0, scale=1.0, conj=False,
               real_in=False):
        """A contiguous complex block of ``out_shape`` read from ``src`` (see fft.cl)."""
        out = _empty(self.queue, out_shape, self.cdtype, self.like)
        total = math.prod(out_shape)
        if total == 0:
            return out
        nd = len(out_shape)
        meta = np.array(list(out_shape) + list(in_strides) + list(in_lens), np.int64)
        meta_d = _memory.upload(self.queue, meta, self.like.allocator)
        knl = (_kernels(self.func, self.context, self.cdtype, real_in=True) if real_in
               else self.k)("tessera_fft_gather")
        x = src.base_data if src.size else meta_d.base_data  # nothing is read then
        last = out_shape[-1]
        rows = total // last
        wg = min(WG, last)
        _by_rows(knl, self.queue, _ceil(last, wg), wg, rows, np.int32(nd), meta_d.base_data,
                 x, np.int64(in_off), self.rdtype.type(scale), np.int32(bool(conj)),
                 out.base_data)
        return out

    def contiguous(self, a, scale=1.0, conj=False, real_in=False):
        size = a.dtype.itemsize
        return self.gather(a, a.shape, [st // size for st in a.strides], a.shape,
                           a.offset // size, scale, conj, real_in)

    def plan(self, n):
        """``(radices, table)`` of a length ``n = 2^k``: the Stockham passes' radices (see
        fft.cl) and their twiddle table on the device, computed in double and rounded
        once."""
        key = (self.context, "tw", n, self.cdtype)
        hit = _plans.get(key)
        if hit is None:
            radices = _radices(n)
            parts, ns = [], 1
            for r in radices:
                k = np.arange(ns, dtype=np.int64)[:, None]
                q = np.arange(1, r, dtype=np.int64)[None, :]
                t = (k * q * (n // (ns * r))) % n  # exact: the angle is 2 pi t / n
                parts.append(np.exp(-2j * np.pi * t.ravel() / n))
                ns *= r
            table = np.concatenate(parts).astype(self.cdtype)
            hit = _plans[key] = _Twiddles(radices, _memory.upload(self.queue, table))
        return hit

    def bluestein(self, n):
        key = (self.context, "bluestein", n, self.cdtype)
        hit = _plans.get(key)
        if hit is None:
            m = 1 << (2 * n - 2).bit_length()  # a power of two >= 2n - 1
            k = np.arange(n, dtype=np.int64)
            chirp = np.exp(-1j * np.pi * ((k * k) % (2 * n)) / n)  # exact angle mod 2 pi
            filt = np.zeros(m, np.complex128)
            filt[:n] = np.conj(chirp)
            filt[m - n + 1:] = np.conj(chirp[1:][::-1])
            hit = _plans[key] = _Bluestein(
                m, _memory.upload(self.queue, chirp.astype(self.cdtype)),
                _memory.upload(self.queue, np.fft.fft(filt).astype(self.cdtype)))
        return hit

    def rows(self, w, n, batch, sign, owned=True):
        """The unnormalized transform of the ``batch`` contiguous rows of ``n`` points of
        ``w`` (exponent sign ``sign``); ``w`` may be overwritten when ``owned``."""
        if batch == 0:
            return w
        if n == 1:
            return w if owned else self.contiguous(w)
        if n & (n - 1) == 0:
            return self._pow2(w, n, batch, sign, owned)
        m, chirp, filt = self.bluestein(n)
        q = self.queue
        a = _empty(q, (batch, m), self.cdtype, self.like)
        _by_rows(self.k("tessera_fft_chirp_in"), q, _ceil(m), WG, batch, np.int32(n),
                 np.int32(m), w.base_data, chirp.base_data, np.int32(sign), a.base_data)
        a = self._pow2(a, m, batch, -1, True)
        _by_rows(self.k("tessera_fft_pointwise"), q, _ceil(m), WG, batch, np.int32(m),
                 a.base_data, filt.base_data, np.int32(sign))
        a = self._pow2(a, m, batch, +1, True)
        y = _empty(q, (batch, n), self.cdtype, self.like)
        _by_rows(self.k("tessera_fft_chirp_out"), q, _ceil(n), WG, batch, np.int32(n),
                 np.int32(m), a.base_data, chirp.base_data, np.int32(sign), y.base_data)
        return y

    def _pow2(self, w, n, batch, sign, owned):
        """Rows of ``n = 2^k >= 2`` points: one local-memory launch where the row fits
        (:func:`_local_shape`), else one global launch per pass."""
        q = self.queue
        radices, tw = self.plan(n)
        shape = _local_shape(self, n, batch)
        if shape is not None:
            (lx, p), groups = shape
            y = _empty(q, (groups * p, n), self.cdtype, self.like)  # padding rows: fft.cl
            self.k("tessera_fft_local")(
                q, (lx * p * groups,), (lx * p,), np.int32(n), np.int32(sign), tw.base_data,
                w.base_data, y.base_data, np.int32(batch),
                _cl().LocalMemory(p * n * self.cdtype.itemsize))
            return y[:batch] if groups * p != batch else y
        src = w
        bufs = [_empty(q, w.shape, self.cdtype, self.like)]
        if len(radices) > 1:
            bufs.append(w if owned else _empty(q, w.shape, self.cdtype, self.like))
        ns, off = 1, 0
        for i, r in enumerate(radices):
            dst = bufs[i % 2]
            items = n // r
            wg = min(WG, items)
            _by_rows(self.k(f"tessera_fft_radix{r}"), q, _ceil(items, wg), wg, batch,
                     np.int32(n), np.int32(ns), np.int32(sign), tw.base_data, np.int32(off),
                     src.base_data, dst.base_data)
            off += (r - 1) * ns
            ns *= r
            src = dst
        return src

    def axis(self, w, ax, n, sign, owned=True):
        """``w`` (contiguous) transformed along ``ax``, cut or padded to ``n`` points; ``w``
        may be overwritten when ``owned``."""
        shape = list(w.shape)
        st = c_strides(shape)
        nd = len(shape)
        other = [d for d in range(nd) if d != ax]
        batch = math.prod(shape[d] for d in other)
        if ax == nd - 1 and shape[ax] == n:
            rows = w
        else:
            rows, owned = self.gather(w, [shape[d] for d in other] + [n],
                                      [st[d] for d in other] + [st[ax]],
                                      [shape[d] for d in other] + [shape[ax]]), True
        rows = self.rows(rows, n, batch, sign, owned)
        res_shape = list(shape)
        res_shape[ax] = n
        if ax == nd - 1:
            return rows.reshape(res_shape)
        rst = c_strides([shape[d] for d in other] + [n])
        strides = [rst[-1] if d == ax else rst[other.index(d)] for d in range(nd)]
        return self.gather(rows, res_shape, strides, res_shape)


def _scale(norm, inverse, total):
    if norm == "ortho":
        return 1.0 / math.sqrt(total)
    if (norm == "backward") == inverse:
        return 1.0 / total
    return 1.0


def _check(func, a, s, axes, norm, kinds):
    _memory.check_array(func, "a", a)
    if a.dtype not in kinds:
        raise TypeError(f"{func}: a must be {' or '.join(sorted(str(k) for k in kinds))}. "
                        f"Received: a.dtype={a.dtype}")
    if norm not in _MIRROR:
        raise ValueError(f"{func}: norm must be 'backward', 'ortho' or 'forward'. "
                         f"Received: norm={norm!r}")
    axes, s = tuple(int(x) for x in axes), tuple(int(n) for n in s)
    if not axes or len(axes) != len(s) or len(set(axes)) != len(axes) \
            or any(not 0 <= x < a.ndim for x in axes) or any(n < 1 for n in s):
        raise ValueError(f"{func}: axes must be distinct axes of a, with one length >= 1 "
                         f"each in s. Received: a.shape={a.shape}, s={s}, axes={axes}")
    return s, axes


def fft_c2c(a, s, axes, norm, forward):
    """Complex-to-complex: ``fftn`` (forward) or ``ifftn`` of ``a`` over ``axes``."""
    func = "fft_c2c"
    s, axes = _check(func, a, s, axes, norm, (np.dtype(np.complex64), np.dtype(np.complex128)))
    c = _Ctx(func, a, a.dtype)
    shape = list(a.shape)
    for ax, n in zip(axes, s):
        shape[ax] = n
    if math.prod(shape) == 0:
        return _empty(c.queue, shape, c.cdtype, a)
    # a C-ordered input is read in place (never written); any other is gathered first
    owned = not (a.flags.c_contiguous and a.offset == 0)
    w = c.contiguous(a) if owned else a
    for ax, n in zip(axes, s):
        w = c.axis(w, ax, n, -1 if forward else +1, owned)
        owned = True
    scale = _scale(norm, not forward, math.prod(s))
    return w if scale == 1.0 else c.contiguous(w.reshape(-1), scale).reshape(w.shape)


def fft_r2c(a, s, axes, norm, forward):
    """Real-to-complex: ``rfftn`` (forward) or ``ihfftn``; last axis cut to ``s[-1]//2 + 1``."""
    func = "fft_r2c"
    s, axes = _check(func, a, s, axes, norm, _REAL_IN)
    c = _Ctx(func, a, COMPLEX_OF[a.dtype])
    shape = list(a.shape)
    for ax, n in zip(axes, s):
        shape[ax] = n
    last = axes[-1]
    out_shape = list(shape)
    out_shape[last] = s[-1] // 2 + 1
    if math.prod(out_shape) == 0:
        return _empty(c.queue, out_shape, c.cdtype, a)
    w = c.contiguous(a, real_in=True)
    for ax, n in zip(axes, s):
        w = c.axis(w, ax, n, -1 if forward else +1)
    scale = _scale(norm, not forward, math.prod(s))
    return c.gather(w, out_shape, c_strides(shape), out_shape, scale=scale)


def fft_c2r(a, s, axes, norm, forward):
    """Complex-to-real: ``hfftn`` (forward) or ``irfftn``; ``s[-1]`` the real length."""
    func = "fft_c2r"
    s, axes = _check(func, a, s, axes, norm, (np.dtype(np.complex64), np.dtype(np.complex128)))
    c = _Ctx(func, a, a.dtype)
    if forward:  # hfftn(a) = irfftn(conj(a)) with the normalization mirrored
        norm = _MIRROR[norm]
    shape = list(a.shape)
    for ax, n in zip(axes[:-1], s[:-1]):
        shape[ax] = n
    last, n = axes[-1], s[-1]
    out_shape = list(shape)
    out_shape[last] = n
    if math.prod(out_shape) == 0:
        return _empty(c.queue, out_shape, c.rdtype, a)
    w = c.contiguous(a, conj=forward)
    for ax, m in zip(axes[:-1], s[:-1]):
        w = c.axis(w, ax, m, +1)
    # the last axis: moved last, cut or padded to n//2 + 1, extended Hermitian to n
    nd = len(shape)
    st = c_strides(shape)
    other = [d for d in range(nd) if d != last]
    m_in = n // 2 + 1
    batch = math.prod(shape[d] for d in other)
    rows = c.gather(w, [shape[d] for d in other] + [m_in], [st[d] for d in other] + [st[last]],
                    [shape[d] for d in other] + [shape[last]])
    full = _empty(c.queue, (batch, n), c.cdtype, a)
    _by_rows(c.k("tessera_fft_hermitian"), c.queue, _ceil(n), WG, batch, np.int32(n),
             np.int32(m_in), rows.base_data, np.int32(0), full.base_data)
    full = c.rows(full, n, batch, +1)
    if last != nd - 1:
        rst = c_strides([shape[d] for d in other] + [n])
        strides = [rst[-1] if d == last else rst[other.index(d)] for d in range(nd)]
        full = c.gather(full, out_shape, strides, out_shape)
    total = math.prod(out_shape)
    out = _empty(c.queue, out_shape, c.rdtype, a)
    c.k("tessera_fft_real")(c.queue, (_ceil(total),), (WG,), np.int64(total), full.base_data,
                            c.rdtype.type(_scale(norm, True, math.prod(s))), out.base_data)
    return out


class OpenclPlanCache(BasePlanCache):
    """The twiddle tables and Bluestein plans kept for one device's context.

    Counted and sized exactly (they are this module's own device arrays); unbounded
    (``max_size`` and ``max_memory`` are None and cannot be set); ``clear()`` drops
    them. The compiled FFT programs are kept by the backend's build stack (until
    ``clear_all()``) and are not counted here.
    """

    backend = "opencl"
    fixed_bounds = "the opencl backend keeps its FFT plans unbounded; call clear() to drop them"

    def _entries(self):
        ctx = _memory.device_queue(self._device).context
        return [(k, v) for k, v in list(_plans.items()) if k[0] == ctx]

    def _size(self) -> int:
        return len(self._entries())

    def _memsize(self) -> int:
        total = 0
        for _, v in self._entries():
            for a in (v if isinstance(v, tuple) else (v,)):
                total += getattr(a, "nbytes", 0)
        return int(total)

    def clear(self) -> None:
        """Drop this device's twiddle tables and Bluestein plans."""
        for k, _ in self._entries():
            _plans.pop(k, None)

    def _notes(self) -> dict:
        return {"holds": "twiddle tables and Bluestein chirp/filter arrays on the device",
                "clearable": True}


def _plan_cache(device=None):
    """The plan cache of ``device`` (read by tessera_array.fft.get_plan_cache)."""
    return OpenclPlanCache(device)


for _fn in (fft_c2c, fft_r2c, fft_c2r):
    _fn.plan_cache = _plan_cache


def register(registry, backend_name: str) -> None:
    registry.register("fft_c2c", backend_name, _dtypes.COMPLEX_FLOATING, fft_c2c)
    registry.register("fft_r2c", backend_name, _dtypes.REAL_FLOATING, fft_r2c)
    registry.register("fft_c2r", backend_name, _dtypes.COMPLEX_FLOATING, fft_c2r)
