"""FFT launchers of the CuPy backend: cuFFT (hipFFT on ROCm) through ``cupy.fft``.

The three ops of the ``fft`` family, registered for their input dtypes, with the
launcher contract of :mod:`tessera_array.fft` (``launcher(a, s, axes, norm, forward)``:
``axes`` distinct non-negative ints, ``s`` the logical length along each, precision kept,
batched over every other axis; cuFFT batches them in one plan).

==========  ======================  ==============================================
op          dtypes (input)          computes
==========  ======================  ==============================================
fft_c2c     complex64, complex128   ``fftn`` (``forward=True``) / ``ifftn``
fft_r2c     float32, float64        ``rfftn`` (``forward=True``) / ``ihfftn``
fft_c2r     complex64, complex128   ``hfftn`` (``forward=True``) / ``irfftn``
==========  ======================  ==============================================

Note: CuPy's n-D transforms with ``s`` and axes not in ascending order return the wrong
shape (cupy#8248). A complex transform over several axes is separable and its factors
commute, so the axes are passed in ascending order (``s`` with them); the real
transforms keep their special last axis apart: ``rfftn`` is the real transform along
the last axis of ``axes`` followed by the complex one over the others, ``irfftn`` the
complex inverse over the others followed by the real inverse along the last, which is
how NumPy defines them. CuPy has no n-D Hermitian transforms: ``hfftn`` is ``irfftn``
of the conjugate and ``ihfftn`` the conjugate of ``rfftn``, each with the normalisation
mirrored (NumPy's own identity for ``hfft``).

Plans: cuFFT plans are kept by CuPy's plan cache, one per thread and device
(``cupy.fft.config.get_plan_cache``); :func:`plan_cache` wraps it as tessera's
``PlanCache`` (size, max_size, memsize, max_memory, clear, info, show), and every
launcher carries it as ``launcher.plan_cache``.
"""

from __future__ import annotations

from tessera_array.backends._common.plans import BasePlanCache

from tessera_array import _dtypes

__all__ = ["CupyPlanCache", "fft_c2c", "fft_c2r", "fft_r2c", "plan_cache", "register"]

_MIRROR = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


def _fft():
    import cupy.fft

    return cupy.fft


def _complex(a, s, axes, norm, forward):
    """The complex transform over ``axes`` (any order) with lengths ``s``."""
    f = _fft()
    if len(axes) == 1:
        return (f.fft if forward else f.ifft)(a, s[0], axes[0], norm)
    order = sorted(range(len(axes)), key=axes.__getitem__)
    s = tuple(s[i] for i in order)
    axes = tuple(axes[i] for i in order)
    return (f.fftn if forward else f.ifftn)(a, s, axes, norm)


def _rfftn(a, s, axes, norm):
    f = _fft()
    with a.device:
        r = f.rfft(a, s[-1], axes[-1], norm)
        if len(axes) > 1:
            r = _complex(r, s[:-1], axes[:-1], norm, True)
    return r


def _irfftn(a, s, axes, norm):
    f = _fft()
    with a.device:
        if len(axes) > 1:
            a = _complex(a, s[:-1], axes[:-1], norm, False)
        return f.irfft(a, s[-1], axes[-1], norm)


def fft_c2c(a, s, axes, norm, forward):
    """Complex-to-complex: ``fftn`` (forward) or ``ifftn`` of ``a`` over ``axes``."""
    with a.device:
        return _complex(a, tuple(s), tuple(axes), norm, forward)


def fft_r2c(a, s, axes, norm, forward):
    """Real-to-complex: ``rfftn`` (forward) or ``ihfftn`` = conj(rfftn), norm mirrored."""
    s, axes = tuple(s), tuple(axes)
    if forward:
        return _rfftn(a, s, axes, norm)
    r = _rfftn(a, s, axes, _MIRROR[norm])
    with a.device:
        import cupy

        return cupy.conjugate(r, out=r)


def fft_c2r(a, s, axes, norm, forward):
    """Complex-to-real: ``irfftn``, or ``hfftn`` = irfftn(conj(a)) with norm mirrored."""
    s, axes = tuple(s), tuple(axes)
    if forward:
        import cupy

        with a.device:
            a = cupy.conjugate(a)
        norm = _MIRROR[norm]
    return _irfftn(a, s, axes, norm)


class CupyPlanCache(BasePlanCache):
    """CuPy's cuFFT plan cache of one device, for the calling thread (a ``PlanCache``).

    ``size``/``memsize`` count the plans held and their work areas' bytes;
    ``max_size`` (16 by default; 0 disables caching) and ``max_memory`` (None: no bound)
    can be set. CuPy keeps one cache per thread and device, so another thread sees its
    own.
    """

    def __init__(self, device):
        super().__init__(device)
        self.backend = device.backend.name

    def _cache(self):
        from cupy.cuda import Device
        from cupy.fft.config import get_plan_cache

        with Device(self._device.index):
            return get_plan_cache()

    def _size(self) -> int:
        return int(self._cache().get_curr_size())

    def _memsize(self) -> int:
        return int(self._cache().get_curr_memsize())

    def _get_max_size(self):
        n = int(self._cache().get_size())
        return None if n < 0 else n

    def _get_max_memory(self):
        n = int(self._cache().get_memsize())
        return None if n < 0 else n

    def _set_max_size(self, value) -> None:
        from cupy.cuda import Device

        with Device(self._device.index):
            self._cache().set_size(-1 if value is None else value)

    def _set_max_memory(self, value) -> None:
        from cupy.cuda import Device

        with Device(self._device.index):
            self._cache().set_memsize(-1 if value is None else value)

    def clear(self) -> None:
        from cupy.cuda import Device

        with Device(self._device.index):
            self._cache().clear()

    def _notes(self) -> dict:
        return {"library": "cuFFT via cupy.fft",
                "notes": "CuPy's cache: one per thread and device, least recently used out"}


def plan_cache(device) -> CupyPlanCache:
    """The plan cache of ``device`` (a tessera Device of a CuPy backend)."""
    return CupyPlanCache(device)


def register(registry, backend_name: str) -> None:
    for launcher in (fft_c2c, fft_r2c, fft_c2r):
        launcher.plan_cache = plan_cache
    registry.register("fft_c2c", backend_name, _dtypes.COMPLEX_FLOATING, fft_c2c)
    registry.register("fft_r2c", backend_name, _dtypes.REAL_FLOATING, fft_r2c)
    registry.register("fft_c2r", backend_name, _dtypes.COMPLEX_FLOATING, fft_c2r)
