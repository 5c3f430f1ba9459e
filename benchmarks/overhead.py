"""The overhead suite: what tessera_array adds to raw NumPy, per operation.

tessera_array on the NumPy backend against the same operation in raw NumPy,
float64, timed side by side (see :mod:`benchmarks._core`). Sizes are 1, 1e3 and
1e6 elements:

===========  ===============================  ==================================
benchmark    tessera / numpy                  shapes
===========  ===============================  ==================================
add_op       ``x + y`` / ``a + b``            (1,), (1000,), (1000000,)
add          ``xp.add(x, y)`` / ``np.add``    (1,), (1000,), (1000000,)
sum          ``xp.sum(x)`` / ``a.sum()``      (1,), (1000,), (1000000,)
matmul_op    ``x @ y`` / ``a @ b``            (1, 1), (32, 32), (1000, 1000)
matmul       ``xp.matmul`` / ``np.matmul``    (1, 1), (32, 32), (1000, 1000)
getitem_int  ``x[i]`` / ``a[i]``, i = n // 2  (1,), (1000,), (1000000,)
getitem_sl   ``x[s]`` / ``a[s]``, s a slice   (1,), (1000,), (1000000,)
===========  ===============================  ==================================

Matrices are square with about the given total size (32 x 32 = 1,024 for 1e3).
``a[i]`` in NumPy returns a NumPy scalar, tessera a 0-d Array: the ratio is what
a user pays for the standard's semantics. A basic slice is a view, so its cost
does not grow with n. Targets (reported, not enforced): ``x + y`` and ``xp.add`` at
ratio <= 1.5 for one element, ``xp.sum`` <= 1.3, all three <= 1.05 for 1e6 elements;
``x[i]`` <= 3 and ``x[a:b]`` <= 2.5 at every size (array-api-strict pays 23x on
``a + b``, torch on the CPU 4x). The one-element figures rest on the C short paths of
tessera_array/_arrayobject.c; with ``TESSERA_PURE_PYTHON=1`` they are about 2x, 1.35x,
7x and 4x.
"""

from __future__ import annotations

__all__ = ["benchmarks"]

SIZES = (1, 1_000, 1_000_000)
MATRIX_SIDE = {1: 1, 1_000: 32, 1_000_000: 1000}
# (benchmark, n) -> the ratio it should meet; a benchmark's n=None: every size.
TARGETS = {
    ("add_op", 1): 1.5, ("add", 1): 1.5, ("sum", 1): 1.3,
    ("add_op", 1_000_000): 1.05, ("add", 1_000_000): 1.05, ("sum", 1_000_000): 1.05,
    ("getitem_int", None): 3.0, ("getitem_slice", None): 2.5,
}

# The code on the tessera side's path. Err on the side of inclusion: a needless
# STALE costs one re-record, a missed change costs a shipped regression.
_COMMON = (
    "tessera_array/_array.py",
    "tessera_array/_arrayobject.c",
    "tessera_array/_helpers.py",
    "tessera_array/_dtypes.py",
    "tessera_array/_devices.py",
    "backends/numpy/__init__.py",
    "backends/numpy/_ops*.py",
    "backends/numpy/_namespace.py",
    "backends/_xp/*.py",
)
_SOURCES = {
    "add_op": _COMMON + ("tessera_array/_elementwise_functions.py",),
    "add": _COMMON + ("tessera_array/_elementwise_functions.py",),
    "sum": _COMMON + ("tessera_array/_statistical_functions.py",),
    "matmul_op": _COMMON + ("tessera_array/_linear_algebra_functions.py",),
    "matmul": _COMMON + ("tessera_array/_linear_algebra_functions.py",),
    "getitem_int": _COMMON + ("tessera_array/_indexing.py",),
    "getitem_slice": _COMMON + ("tessera_array/_indexing.py",),
}

# name: (tessera expression, numpy expression, namespace function it needs, label)
_OPS = {
    "add_op": ("x + y", "a + b", None, "x + y"),
    "add": ("xp.add(x, y)", "np.add(a, b)", "add", "xp.add(x, y)"),
    "sum": ("xp.sum(x)", "a.sum()", "sum", "xp.sum(x)"),
    "matmul_op": ("x @ y", "a @ b", "matmul", "x @ y"),
    "matmul": ("xp.matmul(x, y)", "np.matmul(a, b)", "matmul", "xp.matmul(x, y)"),
    "getitem_int": ("x[i]", "a[i]", None, "x[i]"),
    "getitem_slice": ("x[s]", "a[s]", None, "x[a:b]"),
}


def _shape(name: str, n: int) -> tuple:
    if name.startswith("matmul"):
        side = MATRIX_SIDE[n]
        return (side, side)
    return (n,)


def _make_setup(xp, device, name: str, shape: tuple, needs):
    def setup() -> dict:
        import numpy as np

        from benchmarks._core import Unavailable

        if needs is not None and not callable(getattr(xp, needs, None)):
            raise Unavailable(f"tessera_array.{needs} does not exist yet")
        rng = np.random.default_rng(20261130)
        a = rng.standard_normal(shape)
        b = rng.standard_normal(shape)
        n = a.shape[0]
        ns = {
            "xp": xp,
            "np": np,
            "a": a,
            "b": b,
            "x": xp.asarray(a, device=device),
            "y": xp.asarray(b, device=device),
            "i": n // 2,
            "s": slice(n // 4, n // 4 + max(1, n // 2)),
        }
        return ns

    return setup


def _check(t, p, ns):
    import numpy as np

    xp = ns["xp"]
    if not isinstance(t, xp.Array):
        raise AssertionError(f"the tessera side returned {type(t).__name__}, not an Array")
    ta, pa = np.asarray(t), np.asarray(p)
    if ta.shape != pa.shape or ta.dtype != pa.dtype:
        raise AssertionError(
            f"shape/dtype differ: tessera {ta.shape} {ta.dtype}, numpy {pa.shape} {pa.dtype}"
        )
    np.testing.assert_allclose(ta, pa, rtol=1e-12, atol=0)


def benchmarks(ctx) -> list:
    """The overhead benchmarks for ``ctx.device`` (a host device: the peer is raw NumPy)."""
    from benchmarks._core import Benchmark, Unavailable

    xp, device = ctx.xp, ctx.device
    host = device._backend.is_host

    out = []
    for name, (t_expr, p_expr, needs, label) in _OPS.items():
        for n in SIZES:
            shape = _shape(name, n)
            if host:
                setup = _make_setup(xp, device, name, shape, needs)
            else:
                def setup(_dev=device):
                    raise Unavailable(
                        f"the overhead suite compares with raw NumPy and needs a host device; "
                        f"{_dev} is not one (a CuPy peer comes with the GPU backends)"
                    )
            target = TARGETS.get((name, n), TARGETS.get((name, None)))
            size = 1
            for s in shape:
                size *= s
            out.append(Benchmark(
                suite="overhead",
                name=name,
                variant=f"n={n}",
                tessera=t_expr,
                peer=p_expr,
                setup=setup,
                sources=_SOURCES[name],
                params={"label": label, "shape": list(shape), "size": size, "dtype": "float64"},
                peer_name="numpy",
                target=target,
                check=_check,
            ))
    return out
