"""The fft suite: batched transforms against numpy.fft and scipy.fft, and against a row loop.

tessera_array's ``fft`` on the NumPy backend (pocketfft through ``scipy.fft`` with
``TESSERA_FFT_WORKERS`` threads, default: the usable CPUs), timed side by side
(see :mod:`benchmarks._core`) with:

===================  ============================================  =======================
benchmark            tessera / peer                                shapes (``--quick``)
===================  ============================================  =======================
fft_c64_vs_numpy     ``xp.fft.fft(x)`` / ``np.fft.fft(a)``         512x256, 16384x1024
                                                                   (2048x1024)
fft_c64_vs_scipy1    ``xp.fft.fft(x)`` / ``sfft.fft(a, workers=1)``  same
rfftn_f64_vs_numpy   ``xp.fft.rfftn(x)`` / ``np.fft.rfftn(a)``     128x128x128 (64x64x64)
rfftn_f64_vs_scipy1  ``xp.fft.rfftn(x)`` / ``sfft.rfftn(a,         same
                     workers=1)``
batched_vs_rowloop   ``xp.fft.fft(x)`` / ``per_row(x)``: ``xp.stack(  512x256
                     [xp.fft.fft(x[i]) for i in range(512)])``
===================  ============================================  =======================

The complex64 transforms run along the last axis over every row (the batch);
both sides keep single precision (NumPy >= 2 and scipy.fft do). The float64 3-D
transform is ``rfftn`` over all three axes. Targets (reported, not enforced):
tessera/numpy.fft <= 1.0 on the batched complex64 cases. The scipy peer runs one
worker, so its ratio shows what tessera's threads and its overhead add up to.
``--quick`` uses the smaller shapes in parentheses (fewer rows, a smaller cube)
and says so when the suite is declared. The suite needs a host device (its
peers are NumPy and SciPy); on another device each benchmark is ``unavailable``
(a cupy.fft peer comes with the GPU backends).
"""

from __future__ import annotations

__all__ = ["benchmarks"]

# The code on the tessera side's path (see benchmarks/README.md: err on inclusion).
_SOURCES = (
    "tessera_array/fft.py",
    "tessera_array/_dispatch.py",
    "tessera_array/_array.py",
    "tessera_array/_helpers.py",
    "tessera_array/_dtypes.py",
    "tessera_array/_devices.py",
    "tessera_array/_manipulation_functions.py",
    "backends/numpy/__init__.py",
    "backends/numpy/fft.py",
    "backends/numpy/_ops*.py",
    "backends/numpy/_namespace.py",
    "backends/_xp/*.py",
)
_LOOP_SOURCES = _SOURCES + ("tessera_array/_indexing.py",)

BATCHED = ((512, 256), (16384, 1024))
BATCHED_QUICK = ((512, 256), (2048, 1024))
CUBE, CUBE_QUICK = (128, 128, 128), (64, 64, 64)
TOL = {"complex64": 1e-5, "float32": 1e-5, "complex128": 1e-12, "float64": 1e-12}


def _text(shape) -> str:
    return "x".join(str(s) for s in shape)


def _make_setup(xp, device, shape, dtype, needs_scipy: bool):
    def setup() -> dict:
        import numpy as np

        from benchmarks._core import Unavailable

        if not device._backend.is_host:
            raise Unavailable(
                f"the fft suite compares with numpy.fft/scipy.fft and needs a host device; "
                f"{device} is not one (a cupy.fft peer comes with the GPU backends)"
            )
        if not callable(getattr(xp.fft, "fft", None)):
            raise Unavailable("tessera_array.fft.fft does not exist yet")
        ns = {"xp": xp, "np": np}
        if needs_scipy:
            try:
                import scipy.fft as sfft
            except ImportError as err:
                raise Unavailable(f"scipy is not installed: {err}") from err
            ns["sfft"] = sfft
        rng = np.random.default_rng(20261130)
        a = rng.standard_normal(shape)
        if dtype.startswith("complex"):
            a = a + 1j * rng.standard_normal(shape)
        a = a.astype(dtype)
        ns["a"] = a
        ns["x"] = xp.asarray(a, device=device)

        def per_row(x):
            """What a batched call replaces: one transform per row, stacked."""
            return xp.stack([xp.fft.fft(x[i]) for i in range(x.shape[0])])

        ns["per_row"] = per_row
        return ns

    return setup


def _check(t, p, ns):
    """Same shape and dtype, and a relative error (norm of the difference) within tolerance."""
    import numpy as np

    xp = ns["xp"]
    if not isinstance(t, xp.Array):
        raise AssertionError(f"the tessera side returned {type(t).__name__}, not an Array")
    ta = np.asarray(t)
    pa = np.asarray(p)
    if ta.shape != pa.shape or ta.dtype != pa.dtype:
        raise AssertionError(
            f"shape/dtype differ: tessera {ta.shape} {ta.dtype}, peer {pa.shape} {pa.dtype}"
        )
    err = np.linalg.norm((ta - pa).ravel()) / np.linalg.norm(pa.ravel())
    tol = TOL[ta.dtype.name]
    if not err <= tol:
        raise AssertionError(f"relative error {err:.3g} > {tol:g}")


def benchmarks(ctx) -> list:
    """The fft benchmarks for ``ctx.device`` (a host device: the peers are NumPy and SciPy)."""
    from benchmarks._core import Benchmark

    xp, device = ctx.xp, ctx.device
    batched = BATCHED_QUICK if ctx.quick else BATCHED
    cube = CUBE_QUICK if ctx.quick else CUBE
    if ctx.quick:
        print(f"fft suite (--quick): smaller shapes: complex64 batches {_text(batched[1])} "
              f"instead of {_text(BATCHED[1])}, float64 cube {_text(cube)} instead of "
              f"{_text(CUBE)}")
    out = []

    def add(name, shape, dtype, tessera, peer, peer_name, label, target=None, sources=_SOURCES,
            scipy=False):
        out.append(Benchmark(
            suite="fft",
            name=name,
            variant=_text(shape),
            tessera=tessera,
            peer=peer,
            setup=_make_setup(xp, device, shape, dtype, scipy),
            sources=sources,
            params={"label": label, "shape": list(shape), "dtype": dtype,
                    "reduced_for_quick": bool(ctx.quick and shape in (batched[1], cube))},
            peer_name=peer_name,
            target=target,
            check=_check,
        ))

    for shape in batched:
        add("fft_c64_vs_numpy", shape, "complex64", "xp.fft.fft(x)", "np.fft.fft(a)",
            "numpy.fft", "xp.fft.fft(x) vs np.fft.fft(a)", target=1.0)
        add("fft_c64_vs_scipy1", shape, "complex64", "xp.fft.fft(x)",
            "sfft.fft(a, workers=1)", "scipy.fft (1 worker)",
            "xp.fft.fft(x) vs sfft.fft(a, workers=1)", scipy=True)
    add("rfftn_f64_vs_numpy", cube, "float64", "xp.fft.rfftn(x)", "np.fft.rfftn(a)",
        "numpy.fft", "xp.fft.rfftn(x) vs np.fft.rfftn(a)")
    add("rfftn_f64_vs_scipy1", cube, "float64", "xp.fft.rfftn(x)",
        "sfft.rfftn(a, workers=1)", "scipy.fft (1 worker)",
        "xp.fft.rfftn(x) vs sfft.rfftn(a, workers=1)", scipy=True)
    add("batched_vs_rowloop", batched[0], "complex64", "xp.fft.fft(x)",
        "per_row(x)", "tessera per-row loop",
        "xp.fft.fft(x) vs a loop of xp.fft.fft(x[i])", sources=_LOOP_SOURCES)
    return out
