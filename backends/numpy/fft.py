"""FFT launchers of the NumPy backend: pocketfft through ``scipy.fft``.

The three ops of the ``fft`` kernel family (:data:`tessera_array._dispatch.FAMILIES`)
are registered for the dtypes of their input:

==========  ======================  ==============================================
op          dtypes (input)          computes
==========  ======================  ==============================================
fft_c2c     complex64, complex128   ``fftn`` (``forward=True``) / ``ifftn``
fft_r2c     float32, float64        ``rfftn`` (``forward=True``) / ``ihfftn``
fft_c2r     complex64, complex128   ``hfftn`` (``forward=True``) / ``irfftn``
==========  ======================  ==============================================

Every launcher is ``launcher(a, s, axes, norm, forward) -> ndarray``, the contract
of :mod:`tessera_array.fft` (its module docstring): ``a`` a native buffer of the
registered dtype, any layout; ``axes`` distinct non-negative ints; ``s`` the
logical length along each axis (>= 1; the input is cut or zero-padded to it, and
for ``fft_c2r`` ``s[-1]`` is the real output length); ``norm`` one of
``"backward"``, ``"ortho"``, ``"forward"``. The result keeps the precision of the
input (complex64 <-> float32, complex128 <-> float64). Transforms are batched over
every axis not in ``axes``; pocketfft vectorizes across the batch (SIMD) and
splits it over worker threads.

Engines
-------
``scipy.fft`` (the default): pocketfft's C++ code, single precision kept, with
``workers`` threads (below). ``scipy.fft`` is imported at the first transform,
not when the backend registers (the import takes about 0.25 s).

``numpy.fft`` (when SciPy is not installed): single-threaded. NumPy >= 2 keeps single
precision; NumPy < 2 computes it in double, cast back once (never a silent upcast).
``numpy.fft`` has no n-D Hermitian transforms, so ``hfftn`` /
``ihfftn`` are computed through ``irfftn`` / ``rfftn`` of the conjugate with the
normalization mirrored (the identity NumPy's own ``hfft`` uses).

Worker threads
--------------
``TESSERA_FFT_WORKERS`` when set (a positive int), otherwise the number of CPUs
this process may run on (``os.cpu_count()`` narrowed by the CPU affinity mask
where the platform has one); read at each call, so it can change at run time.
Threads cost more than they save on small transforms, so one of fewer than
:data:`THREADS_MIN_ELEMENTS` (16384) input elements runs on one thread (the crossover;
scipy 1.18.1, 16 idle cores, best us per call for ``workers=1 / 2 / 4 / 16``)::

    fft, complex64, batch x length            rfftn, float64
    16 x 64       6.3 /  6.5 /  6.5 /  6.5    8^3    18.6 / 17.8 / 18.0 / 18.4
    32 x 256     20.7 / 22.7 / 33.4 / 33.8    16^3   49.6 / 50.9 / 49.0 / 49.5
    64 x 256     63.8 / 47.7 / 40.0 / 40.1    32^3  262.9 / 270 / 260 / 276
    512 x 256     315 /  269 /  158 / 96.7    64^3   2093 / 1190 / 762 / 392
    2048 x 1024  7769 / 4477 / 2460 /  818

(pocketfft also caps the threads of each axis pass by the work it has, which is
why the small cubes show no difference.)

Plan cache
----------
pocketfft keeps its plans in a cache compiled into SciPy's and NumPy's extension
modules (``POCKETFFT_CACHE_SIZE``: 16 per plan type, least recently used first out, no
memory bound, no Python interface); :class:`PocketfftPlanCache` says exactly that.
"""

from __future__ import annotations

import importlib.util
import os

import numpy as np
from tessera_array.backends._common.plans import BasePlanCache
from tessera_array.backends._xp._dtypes import COMPLEX_OF, REAL_OF

from tessera_array import _dtypes

__all__ = [
    "THREADS_MIN_ELEMENTS",
    "WORKERS_ENV",
    "Engine",
    "PocketfftPlanCache",
    "numpy_engine",
    "pick_engine",
    "register",
    "scipy_engine",
    "scipy_present",
    "workers",
]

WORKERS_ENV = "TESSERA_FFT_WORKERS"
# Routing: a transform of fewer input elements than this runs on one thread (see
# "Worker threads" in the module docstring; tests/test_fft.py pins it).
THREADS_MIN_ELEMENTS = 1 << 14
# pocketfft_hdronly.h: POCKETFFT_CACHE_SIZE, not overridden by SciPy's or NumPy's build.
POCKETFFT_PLANS_PER_TYPE = 16


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


_CPUS = _usable_cpus()
_parsed_env: tuple = (None, _CPUS)  # (raw TESSERA_FFT_WORKERS, its value)


def workers() -> int:
    """The worker threads a transform uses: ``TESSERA_FFT_WORKERS``, else the usable CPUs."""
    global _parsed_env
    raw = os.environ.get(WORKERS_ENV)
    if raw == _parsed_env[0]:
        return _parsed_env[1]
    if raw is None or not raw.strip():
        value = _CPUS
    else:
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if value < 1:
            raise ValueError(
                f"fft: the environment variable {WORKERS_ENV} must be a positive integer "
                f"(worker threads per transform). Received: {WORKERS_ENV}={raw!r}"
            )
    _parsed_env = (raw, value)
    return value


_MIRROR = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


# ---- scipy.fft ---------------------------------------------------------------------------


def _threads(a: np.ndarray) -> int:
    """Worker threads for a transform of ``a``: one below :data:`THREADS_MIN_ELEMENTS`."""
    return 1 if a.size < THREADS_MIN_ELEMENTS else workers()


def _scipy_launchers(sfft=None):
    """The three launchers over the ``scipy.fft`` module ``sfft``.

    ``sfft=None`` imports ``scipy.fft`` at the first transform (about 0.25 s that a
    program using no FFT never pays). A length equal to the default is passed as
    None: scipy.fft then skips its cut-or-pad step (about 1.3 us of a 5 us call on
    8 points).
    """
    held = [sfft]

    def load():
        import scipy.fft

        held[0] = scipy.fft
        return scipy.fft

    def same_length(names, doc):
        """A launcher whose output length along each axis is ``s`` (no halving of the
        input's shape to compare with): c2c, and r2c whose halving scipy does itself."""
        fwd1, inv1, fwdn, invn = names

        def launch(a, s, axes, norm, forward):
            sfft = held[0] or load()
            shape = a.shape
            if len(axes) == 1:
                ax = axes[0]
                n = s[0]
                f = getattr(sfft, fwd1 if forward else inv1)
                return f(a, None if n == shape[ax] else n, ax, norm, workers=_threads(a))
            f = getattr(sfft, fwdn if forward else invn)
            default = all(n == shape[ax] for n, ax in zip(s, axes))
            return f(a, None if default else s, axes, norm, workers=_threads(a))

        launch.__doc__ = doc
        return launch

    scipy_c2c = same_length(
        ("fft", "ifft", "fftn", "ifftn"),
        "Complex-to-complex: ``fftn`` (forward) or ``ifftn`` of ``a`` over ``axes``.")
    scipy_r2c = same_length(
        ("rfft", "ihfft", "rfftn", "ihfftn"),
        "Real-to-complex: ``rfftn`` (forward) or ``ihfftn``; last axis halved.")

    def scipy_c2r(a, s, axes, norm, forward):
        """Complex-to-real: ``hfftn`` (forward) or ``irfftn``; ``s[-1]`` the real length."""
        sfft = held[0] or load()
        shape = a.shape
        if len(axes) == 1:
            ax = axes[0]
            n = s[0]
            f = sfft.hfft if forward else sfft.irfft
            return f(a, None if n == 2 * (shape[ax] - 1) else n, ax, norm,
                     workers=_threads(a))
        f = sfft.hfftn if forward else sfft.irfftn
        last = len(axes) - 1
        default = all(n == (2 * (shape[ax] - 1) if i == last else shape[ax])
                      for i, (n, ax) in enumerate(zip(s, axes)))
        return f(a, None if default else s, axes, norm, workers=_threads(a))

    return scipy_c2c, scipy_r2c, scipy_c2r


# ---- numpy.fft (no SciPy) -----------------------------------------------------------------


def _cast_back(r: np.ndarray, want: np.dtype) -> np.ndarray:
    """``r`` as ``want``: NumPy < 2 answers single-precision input in double precision."""
    return r if r.dtype == want else r.astype(want)


def _numpy_launchers(nfft):
    """The three launchers over the ``numpy.fft`` module ``nfft``."""

    def numpy_c2c(a, s, axes, norm, forward):
        """Complex-to-complex: ``fftn`` (forward) or ``ifftn`` of ``a`` over ``axes``."""
        if len(axes) == 1:
            f = nfft.fft if forward else nfft.ifft
            r = f(a, s[0], axes[0], norm)
        else:
            f = nfft.fftn if forward else nfft.ifftn
            r = f(a, s, axes, norm)
        return _cast_back(r, a.dtype)

    def numpy_r2c(a, s, axes, norm, forward):
        """Real-to-complex: ``rfftn`` (forward) or ``ihfftn`` = conj(rfftn), norm mirrored."""
        if forward:
            r = nfft.rfft(a, s[0], axes[0], norm) if len(axes) == 1 else nfft.rfftn(
                a, s, axes, norm)
        else:
            m = _MIRROR[norm]
            r = nfft.rfft(a, s[0], axes[0], m) if len(axes) == 1 else nfft.rfftn(a, s, axes, m)
            r = np.conjugate(r, out=r)
        return _cast_back(r, COMPLEX_OF[a.dtype])

    def numpy_c2r(a, s, axes, norm, forward):
        """Complex-to-real: ``irfftn``, or ``hfftn`` = irfftn(conj(a)) with norm mirrored."""
        if forward:
            a, norm = np.conjugate(a), _MIRROR[norm]
        r = nfft.irfft(a, s[0], axes[0], norm) if len(axes) == 1 else nfft.irfftn(
            a, s, axes, norm)
        return _cast_back(r, REAL_OF[a.dtype])

    return numpy_c2c, numpy_r2c, numpy_c2r


# ---- the plan cache ---------------------------------------------------------------------


class PocketfftPlanCache(BasePlanCache):
    """pocketfft's own plan cache, described as it is (see :mod:`tessera_array.fft`).

    pocketfft holds up to 16 plans per plan type (complex or real transform, per
    precision), least recently used first out, inside the compiled extension;
    nothing reports how many it holds or how much memory they take, and nothing
    can empty it from Python: ``size`` and ``memsize`` are None, ``clear()`` does
    nothing (the cache is bounded, so it never grows past ``max_size``).
    """

    backend = "numpy"

    def __init__(self, engine: str, library, max_size: int | None):
        super().__init__()
        self._engine = engine
        self._library = library  # a callable: "scipy 1.17.1" (imports scipy when asked)
        self._max_size = max_size
        self.fixed_bounds = (
            f"the numpy backend's plans live in pocketfft's own cache, bounded by count only "
            f"({max_size} per plan type, fixed when {engine} is compiled), not by memory")

    def _get_max_size(self):
        return self._max_size

    def _notes(self) -> dict:
        return {
            "engine": self._engine,
            "library": self._library(),
            "holds_plans": "inside pocketfft's compiled code; not visible to tessera_array",
            "max_size_scope": "per plan type (complex/real, per precision), LRU",
            "clearable": False,
            "workers": workers() if self._engine == "scipy.fft" else 1,
        }


# ---- engines and registration ------------------------------------------------------------


class Engine:
    """A set of launchers (c2c, r2c, c2r) and the plan cache they share."""

    def __init__(self, name: str, launchers, cache: PocketfftPlanCache):
        self.name = name
        self.c2c, self.r2c, self.c2r = launchers
        self.cache = cache

        def plan_cache(device=None):
            """The plan cache these launchers use (one per process: pocketfft's)."""
            return cache

        for fn in launchers:
            fn.plan_cache = plan_cache  # read by tessera_array.fft.get_plan_cache


def scipy_present() -> bool:
    """Whether ``scipy.fft`` can be imported (found, not imported: it takes ~0.25 s)."""
    try:
        return importlib.util.find_spec("scipy.fft") is not None
    except (ImportError, ValueError):
        return False


def _scipy_version() -> str:
    import scipy

    return f"scipy {scipy.__version__}"


def scipy_engine() -> Engine:
    """Launchers over ``scipy.fft``, imported at the first transform."""
    cache = PocketfftPlanCache("scipy.fft", _scipy_version, POCKETFFT_PLANS_PER_TYPE)
    return Engine("scipy.fft", _scipy_launchers(), cache)


def numpy_engine() -> Engine:
    """Launchers over ``numpy.fft`` (the fallback without SciPy)."""
    # NumPy >= 2 runs pocketfft's C++ code (its default cache); NumPy 1.x's C
    # pocketfft does not say how it keeps plans.
    major = int(np.__version__.split(".")[0])
    cache = PocketfftPlanCache("numpy.fft", lambda: f"numpy {np.__version__}",
                               POCKETFFT_PLANS_PER_TYPE if major >= 2 else None)
    return Engine("numpy.fft", _numpy_launchers(np.fft), cache)


def pick_engine() -> Engine:
    """``scipy.fft`` when SciPy is installed, ``numpy.fft`` otherwise."""
    return scipy_engine() if scipy_present() else numpy_engine()


def register(registry, backend_name: str, engine: Engine | None = None) -> Engine:
    """Register the FFT family's launchers for ``backend_name``; returns the engine used."""
    eng = pick_engine() if engine is None else engine
    registry.register("fft_c2c", backend_name, _dtypes.COMPLEX_FLOATING, eng.c2c)
    registry.register("fft_r2c", backend_name, _dtypes.REAL_FLOATING, eng.r2c)
    registry.register("fft_c2r", backend_name, _dtypes.COMPLEX_FLOATING, eng.c2r)
    return eng
