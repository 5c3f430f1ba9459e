"""Dtype tables shared by the chapters of the namespace over native buffers.

Array modules that mirror NumPy's API (NumPy, CuPy) describe their buffers with
``numpy.dtype`` objects, so these tables are keyed by them. A tessera
:class:`~tessera_array.DType` carries its ``numpy.dtype`` as ``DType._np``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["COMPLEX_OF", "INDEX", "REAL_OF", "UINT64", "bfloat16", "is_bfloat16", "is_half",
           "kind_of"]

INDEX = np.dtype(np.int64)
"""The dtype of index results (argmax, argsort, nonzero, unique's indices and counts)."""

UINT64 = np.dtype(np.uint64)



def bfloat16() -> np.dtype:
    """ml_dtypes' bfloat16 (NumPy files it under kind ``"V"``), imported on first use."""
    from tessera_array import _dtypes

    return _dtypes.bfloat16._np


def is_bfloat16(dtype) -> bool:
    """Whether NumPy dtype ``dtype`` is ml_dtypes' bfloat16 (ml_dtypes is not imported for
    the question: such a dtype exists only once it is)."""
    return dtype.kind == "V" and dtype.name == "bfloat16" and dtype == bfloat16()


_F16 = np.dtype(np.float16)


def is_half(dtype) -> bool:
    """Whether NumPy dtype ``dtype`` is float16 or ml_dtypes' bfloat16 (nothing imported
    for the question)."""
    return dtype == _F16 or is_bfloat16(dtype)


def kind_of(dtype) -> str:
    """``dtype.kind``, with ``"f"`` for bfloat16 (a real floating dtype to tessera)."""
    kind = dtype.kind
    if kind == "V" and is_bfloat16(dtype):
        return "f"
    return kind

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_C64, _C128 = np.dtype(np.complex64), np.dtype(np.complex128)

REAL_OF = {_F32: _F32, _F64: _F64, _C64: _F32, _C128: _F64}
"""The real floating dtype of each floating dtype's precision (the norms' result dtype)."""

COMPLEX_OF = {_F32: _C64, _F64: _C128, _C64: _C64, _C128: _C128}
"""The complex dtype of each floating dtype's precision (eig's result dtype)."""

