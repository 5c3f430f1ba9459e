"""The NumPy backend's namespace: :class:`~tessera_array.backends._xp.Namespace` over
NumPy, with what is NumPy's own.

- Floating-point warnings. The standard defines the results NumPy warns about
  (``1/0 -> inf``, ``log(0) -> -inf``, integer ``x // 0 -> 0``), so tessera never lets
  them reach the user, without paying ``numpy.errstate`` (about 2 us) on every call:
  a warnings filter, installed when this module is imported, ignores NumPy's
  floating-point warnings raised *from tessera_array's own frames* only; where
  warnings are turned into errors (``-W error``, pytest's ``filterwarnings = error``)
  that filter is outranked, so the front end catches the ``RuntimeWarning`` and reruns
  the op through :meth:`NumpyNamespace.call_quietly`. The C short paths of the front end
  (``tessera_array/_arrayobject.c``) call NumPy's ufuncs from no Python frame of ours, so
  the filter cannot match there: they set NumPy's error-state context variable to
  ``errstate(all="ignore")``'s value around the call instead (``quiet_context``, about
  0.1 us where ``errstate`` costs 2).
- Reductions through ``ufunc.reduce(..., out=...)``, which returns a 0-d array where
  ``numpy.sum`` would give a scalar and skips its Python layer. These and NumPy's other
  own ops (``getitem``, ``argmax``/``argmin``, ``vecdot``) are plain functions, bound
  as static methods: the front end calls them with no bound method between.
- Patches on the host: mask-compact (``host_reads_cheap``).
- ``vecdot`` of long vectors through the BLAS dot of :mod:`._threads`.
- LAPACK's errors (``numpy.linalg.LinAlgError``) become tessera's LinAlgError through
  the shared ``linalg_call``.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
from tessera_array.backends._xp import Namespace
from tessera_array.backends._xp._dtypes import INDEX

from . import _threads

__all__ = ["NumpyNamespace"]

# Note: see the module docstring. The filter matches NumPy's floating-point messages
# raised from tessera_array's modules; the user's own NumPy calls keep their warnings.
warnings.filterwarnings(
    "ignore",
    message=r"(divide by zero|invalid value|overflow|underflow) encountered in",
    category=RuntimeWarning,
    module=r"tessera_array(\.|$)",
)

_add_reduce = np.add.reduce
_multiply_reduce = np.multiply.reduce
_maximum_reduce = np.maximum.reduce
_minimum_reduce = np.minimum.reduce
_and_reduce = np.logical_and.reduce
_or_reduce = np.logical_or.reduce
_vecdot = np.vecdot
_asarray = np.asarray
_empty = np.empty

# NumPy's own ops are plain functions (bound below as static methods): ``ops.sum`` is then
# a function, not a bound method, as is ``self.sum`` inside the shared chapters.


def call_quietly(func, /, *args):
    """``func(*args)`` with NumPy's floating-point error reporting off."""
    with np.errstate(all="ignore"):
        return func(*args)


def quiet_context():
    """``(ContextVar, value)``: NumPy's error-state variable and its value inside
    ``errstate(all="ignore")``, for the C short paths (``ops.quiet_context``); False
    where this NumPy keeps its state elsewhere (those paths then step aside)."""
    try:
        from numpy._core._ufunc_config import _extobj_contextvar as var
    except ImportError:
        return False
    with np.errstate(all="ignore"):
        value = var.get()
    # Checked, not assumed: under the variable alone a warning made an error stays quiet.
    token = var.set(value)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            np.log(np.zeros(1))
    except (Warning, FloatingPointError):
        return False
    finally:
        var.reset(token)
    return var, value


_ndarray = np.ndarray


def getitem(a, key, /):
    """``a[key]`` as an ndarray (NumPy gives a scalar for an element: that one through
    ``asarray``; a view is returned as it is, ~60 ns sooner)."""
    r = a[key]
    return r if r.__class__ is _ndarray else _asarray(r)


# ---- reductions: ufunc.reduce with out=... (a 0-d array, never a scalar) -----------------


def sum(a, /, *, axis=None, dtype=None, keepdims=False):
    """Sum over ``axis``; ``dtype`` (a DType or None) is the accumulation and result dtype."""
    if dtype is None:
        return _add_reduce(a, axis=axis, keepdims=keepdims, out=...)
    return _add_reduce(a, axis=axis, dtype=dtype._np, keepdims=keepdims, out=...)


def prod(a, /, *, axis=None, dtype=None, keepdims=False):
    """Product over ``axis``; ``dtype`` (a DType or None) is the accumulation and result dtype."""
    if dtype is None:
        return _multiply_reduce(a, axis=axis, keepdims=keepdims, out=...)
    return _multiply_reduce(a, axis=axis, dtype=dtype._np, keepdims=keepdims, out=...)


def max(a, /, *, axis=None, keepdims=False):
    """Maximum over ``axis`` (NaNs propagate); the front end rejects empty reductions."""
    return _maximum_reduce(a, axis=axis, keepdims=keepdims, out=...)


def min(a, /, *, axis=None, keepdims=False):
    """Minimum over ``axis`` (NaNs propagate); the front end rejects empty reductions."""
    return _minimum_reduce(a, axis=axis, keepdims=keepdims, out=...)


def all(a, /, *, axis=None, keepdims=False):
    """Logical AND over ``axis`` (bool result; True for an empty reduction)."""
    return _and_reduce(a, axis=axis, keepdims=keepdims, out=...)


def any(a, /, *, axis=None, keepdims=False):
    """Logical OR over ``axis`` (bool result; False for an empty reduction)."""
    return _or_reduce(a, axis=axis, keepdims=keepdims, out=...)


def argmax(a, /, *, axis=None, keepdims=False):
    """Index of the first maximum along the int ``axis`` or of the flattened array."""
    if axis is None and not keepdims:  # into an int64 0-d array: no scalar, no cast
        return a.argmax(None, _empty((), INDEX))
    return _asarray(a.argmax(axis, keepdims=keepdims), dtype=INDEX)


def argmin(a, /, *, axis=None, keepdims=False):
    """Index of the first minimum along the int ``axis`` or of the flattened array."""
    if axis is None and not keepdims:
        return a.argmin(None, _empty((), INDEX))
    return _asarray(a.argmin(axis, keepdims=keepdims), dtype=INDEX)


# ---- the BLAS dot --------------------------------------------------------------------------


def vecdot(a, b, axis=-1, /):
    """``sum(conj(a) * b)`` along the negative ``axis``, other axes broadcast.

    Long contiguous real vectors of one dtype go through ``_threads.blas_dot``: the value
    of ``np.dot``, bit for bit, with OpenBLAS's threads held (see _threads.py).
    """
    if (a.ndim == 1 and b.ndim == 1 and a.nbytes >= _threads.DOT_MIN_BYTES
            and a.dtype is b.dtype and a.dtype.kind == "f" and a.flags.c_contiguous
            and b.flags.c_contiguous):
        r = _threads.blas_dot(a, b)
        if r is not None:
            return r
    return _asarray(_vecdot(a, b, axis=axis))


class NumpyNamespace(Namespace):
    """The standard's namespace over ``numpy.ndarray`` buffers (``backend.ops``)."""

    host_reads_cheap = True
    probe_bfloat16_loops = True  # ml_dtypes' bfloat16 ufuncs vary by version
    quiet = functools.partial(np.errstate, all="ignore")
    quiet_context = quiet_context()
    call_quietly = staticmethod(call_quietly)
    getitem = staticmethod(getitem)
    sum = staticmethod(sum)
    prod = staticmethod(prod)
    max = staticmethod(max)
    min = staticmethod(min)
    all = staticmethod(all)
    any = staticmethod(any)
    argmax = staticmethod(argmax)
    argmin = staticmethod(argmin)
    vecdot = staticmethod(vecdot)

    def __init__(self):
        super().__init__(np)
