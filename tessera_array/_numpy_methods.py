"""NumPy's array methods on :class:`~tessera_array.Array`, as CuPy's arrays have them.

``x.sum(axis=0, keepdims=True)``, ``x.astype("float32")``, ``x.reshape(2, 3)``,
``x.squeeze(axis=1)``, ``x.max()`` ... take NumPy's signatures and call NumPy's function of
the same name on ``x``, which ``Array.__array_function__`` runs through the namespace
(:mod:`._numpy_interop`): the result is a tessera array on ``x``'s device, computed by the
backend. Libraries written against NumPy's array type call these on the arrays they are
given: Dask's blockwise reductions call ``chunk.sum``, ``chunk.squeeze``,
``chunk.astype`` on each chunk. The standard's own spelling stays the namespace's
(``xp.sum(x)``, ``xp.astype(x, dtype)``); these are an extension for NumPy's users.

Note: a method whose NumPy function has no translation (``dot``, ``flatten``'s order)
runs NumPy itself on a host device and raises ImplicitHostCopyError on others, as
NumPy's functions do on tessera arrays.
"""

from __future__ import annotations

import numpy as np

__all__ = ["METHODS", "install"]

# method name -> NumPy function: the method is ``func(self, *args, **kwargs)``.
METHODS = {
    name: getattr(np, name)
    for name in (
        "sum", "prod", "mean", "std", "var", "max", "min", "any", "all", "argmax",
        "argmin", "cumsum", "cumprod", "nonzero", "clip", "round", "conjugate", "copy",
        "squeeze", "ravel", "swapaxes", "repeat", "take", "diagonal", "trace",
        "searchsorted", "dot",
    )
}


def _delegate(name: str, func):
    def method(self, *args, **kwargs):
        return func(self, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"NumPy's ``ndarray.{name}``: ``numpy.{func.__name__}(self, ...)``."
    return method


def _astype(self, dtype, order="K", casting="unsafe", subok=True, copy=True):
    """NumPy's ``ndarray.astype``: ``xp.astype(self, dtype, copy=copy)`` (``order``,
    ``casting`` and ``subok`` at NumPy's defaults only)."""
    if (order, casting, subok) != ("K", "unsafe", True):
        raise ValueError(
            f"astype: only order='K', casting='unsafe', subok=True are supported. Received: "
            f"order={order!r}, casting={casting!r}, subok={subok!r}"
        )
    import tessera_array as xp

    return xp.astype(self, xp._dtypes.coerce_dtype(dtype, "dtype", "astype"), copy=copy)


def _shape_args(func: str, args: tuple):
    """``(2, 3)`` from ``x.reshape(2, 3)`` or ``x.reshape((2, 3))``, as NumPy reads them."""
    if len(args) == 1 and (args[0] is None or isinstance(args[0], (tuple, list))):
        return args[0]
    if all(isinstance(a, int) for a in args):
        return tuple(args)
    raise TypeError(f"{func}: expected ints or one tuple of ints. Received: {args!r}")


def _reshape(self, *shape, order="C", copy=None):
    """NumPy's ``ndarray.reshape``: ``x.reshape(2, 3)`` or ``x.reshape((2, 3))``."""
    kwargs = {} if copy is None else {"copy": copy}
    return np.reshape(self, _shape_args("reshape", shape), order=order, **kwargs)


def _transpose(self, *axes):
    """NumPy's ``ndarray.transpose``: the axes reversed, or in the order given."""
    axes = _shape_args("transpose", axes) if axes else None
    return np.transpose(self, axes)


def _flatten(self, order="C"):
    """NumPy's ``ndarray.flatten``: a 1-D copy."""
    return np.ravel(self, order=order).copy()


def _item(self, *args):
    """NumPy's ``ndarray.item``: the element as a Python scalar (``x.item()`` of a
    one-element array, ``x.item(i)`` / ``x.item(i, j)``); on a device, one read."""
    import tessera_array as xp

    x = self
    if args:
        x = xp.reshape(self, (-1,))[args[0]] if len(args) == 1 else self[tuple(args)]
    if x.size != 1:
        raise ValueError(f"item: only an array of one element converts to a Python scalar. "
                         f"Received: an array of shape {self.shape}")
    x = xp.reshape(x, ())
    kind = x.dtype.kind
    return (bool if kind == "b" else int if kind in "iu" else float if kind == "f"
            else complex)(x)


def install(cls) -> None:
    """Set the methods on ``cls`` (the Array class), once, after it is defined."""
    for name, func in METHODS.items():
        setattr(cls, name, _delegate(name, func))
    cls.conj = cls.conjugate
    cls.astype = _astype
    cls.reshape = _reshape
    cls.transpose = _transpose
    cls.flatten = _flatten
    cls.item = _item
