"""The ``fft`` extension: discrete Fourier transforms, batched, on every backend.

Specification: https://data-apis.org/array-api/2025.12/extensions/fourier_transform_functions.html

Besides the standard's functions this module has NumPy's ``fft2``, ``ifft2``,
``rfft2`` and ``irfft2``, and :func:`get_plan_cache`.

Precision
---------
Precision is kept: float32 and complex64 input give complex64 (or float32) output,
float64 and complex128 give complex128 (or float64). Where the standard asks for
complex input (``fft``, ``ifft``, ``fftn``, ``ifftn``, ``irfft``, ``irfftn``,
``hfft``) real floating input is taken as complex of its precision, as NumPy does;
where it asks for real floating input (``rfft``, ``rfftn``, ``ihfft``) complex
input is a TypeError. Integer and boolean input is computed in the device's
default floating dtype (float64; float32 on a device without it), as NumPy
converts it to float64. ``norm=None`` means ``"backward"``, as in NumPy.

Deliberate choices where the standard leaves the behaviour open: ``s`` without
``axes`` is a ValueError (the standard requires ``axes`` then; NumPy 2 deprecates the
inference); repeated ``axes`` in the n-D transforms are a ValueError (``fftshift`` adds
the shifts of a repeated axis, as NumPy's ``roll``); ``s[-1] == -1`` in ``irfftn`` means
the default length ``2*(m - 1)``, so every input element is used (NumPy 2 takes ``m``).

Backend contract: the ``fft`` kernel family
-------------------------------------------
The transforms run in the kernels registered under the ops of
``FAMILIES["fft"]`` in :mod:`tessera_array._dispatch`, looked up by
``(op, backend, input dtype)``; this module never calls a library itself:

==========  ====================  =====================  ===========================
op          input dtypes          ``forward=True``       ``forward=False``
==========  ====================  =====================  ===========================
fft_c2c     complex64/128         ``fftn``               ``ifftn``
fft_r2c     float32/64            ``rfftn``              ``ihfftn`` (``ihfft``)
fft_c2r     complex64/128         ``hfftn`` (``hfft``)   ``irfftn``
==========  ====================  =====================  ===========================

``launcher(a, s, axes, norm, forward)`` returns a native buffer on ``a``'s device:

- ``a``: the native input buffer, of the registered dtype, any strides.
- ``axes``: distinct ints in ``[0, a.ndim)``, at least one; every other axis is a batch
  axis (one call batches over them, not a loop).
- ``s``: one int >= 1 per axis, the logical transform length (input cut or zero-padded);
  ``fft_r2c``'s last output axis has ``s[-1] // 2 + 1`` points, and for ``fft_c2r``
  ``s[-1]`` is the real output length (input cut or padded to ``s[-1] // 2 + 1``).
- ``norm``: ``"backward"`` (the inverse scaled by ``1/prod(s)``), ``"ortho"`` or
  ``"forward"``, as in the standard; ``forward`` picks the exponent's sign (``-``).
- The result has ``a``'s precision (complex64 <-> float32, complex128 <-> float64),
  C order.

Every op has a plain reference here, a DFT matrix product with ``xp`` (``_reference_c2c``,
``_r2c``, ``_c2r``; one axis, ``O(n**2)``): the tests check every backend's kernels with it.

Plan cache
----------
Every launcher of the family may carry an attribute ``plan_cache``: a callable
``plan_cache(device) -> PlanCache``, the cache of FFT plans the backend keeps for that
device, which :func:`get_plan_cache` returns (:class:`PlanCache` says what it holds).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import Literal, Protocol, runtime_checkable

from . import _dtypes
from ._array import Array
from ._devices import as_device
from ._dispatch import FAMILIES, lookup, registry
from ._dtypes import COMPLEX_OF, REAL_OF, DType, coerce_dtype
from ._elementwise_functions import divide, multiply
from ._errors import KernelNotFoundError
from ._helpers import (
    check_array,
    check_dtype_on_device,
    default_float,
    refuse_half,
    supports_dtype,
    wrap_as,
)
from ._manipulation_functions import normalize_axis

__all__ = [
    "fft",
    "ifft",
    "fftn",
    "ifftn",
    "rfft",
    "irfft",
    "rfftn",
    "irfftn",
    "hfft",
    "ihfft",
    "fftfreq",
    "rfftfreq",
    "fftshift",
    "ifftshift",
    # NumPy's 2-D spellings
    "fft2",
    "ifft2",
    "rfft2",
    "irfft2",
    # plans
    "PlanCache",
    "get_plan_cache",
]

_Norm = Literal["backward", "ortho", "forward"]
_NORMS = frozenset(("backward", "ortho", "forward"))
_C2C, _R2C, _C2R = FAMILIES["fft"]
_builtin_bool = bool


# ---- argument checks ----------------------------------------------------------------------

# Note: float16/bfloat16 input is refused, as scipy.fft refuses float16; no FFT
# kernel is registered for the 16-bit dtypes.
_NO_HALF = "no FFT kernel is registered for the 16-bit dtypes"


def _complex_in(func: str, x):
    """``(device, complex dtype, native)`` of ``x`` for a transform of complex input."""
    if x.__class__ is not Array:
        check_array(x, func)
    dt = x._dtype
    if dt.kind == "c":
        return x._device, dt, x._data
    refuse_half(func, dt, "x", _NO_HALF)
    dev = x._device
    # Note: the standard asks for complex input; like NumPy, real input is taken as
    # complex of its precision, integer and boolean input as the default complex.
    cdt = COMPLEX_OF[dt] if dt.kind == "f" else COMPLEX_OF[default_float(dev)]
    return dev, cdt, dev.ops.astype(x._data, cdt)


def _real_in(func: str, x):
    """``(device, real dtype, native)`` of ``x`` for a transform of real input."""
    if x.__class__ is not Array:
        check_array(x, func)
    dt = x._dtype
    refuse_half(func, dt, "x", _NO_HALF)
    if dt.kind == "f":
        return x._device, dt, x._data
    if dt.kind == "c":
        raise TypeError(
            f"{func}: x must have a real-valued floating-point dtype (the transform "
            f"assumes real input; use fft/fftn for complex input). Received: x.dtype={dt}"
        )
    dev = x._device
    # Note: integer and boolean input is computed in the default floating dtype (NumPy).
    fdt = default_float(dev)
    return dev, fdt, dev.ops.astype(x._data, fdt)


def _check_norm(func: str, norm) -> str:
    if norm is None:
        return "backward"  # NumPy's spelling of the default
    if norm.__class__ is not str and not isinstance(norm, str):
        raise TypeError(
            f"{func}: norm must be 'backward', 'ortho' or 'forward'. "
            f"Received: norm of type {type(norm).__name__}"
        )
    if norm not in _NORMS:
        raise ValueError(
            f"{func}: norm must be 'backward', 'ortho' or 'forward'. Received: norm={norm!r}"
        )
    return str(norm)


def _as_int(func: str, value, name: str) -> int:
    if value.__class__ is int:
        return value
    if isinstance(value, _builtin_bool):
        raise TypeError(f"{func}: {name} must be an int, not a bool. Received: {name}={value!r}")
    try:
        return value.__index__()
    except (AttributeError, TypeError) as err:
        raise TypeError(
            f"{func}: {name} must be an int. Received: {name}={value!r} of type "
            f"{type(value).__name__}"
        ) from err


def _positive(func: str, value, name: str) -> int:
    n = _as_int(func, value, name)
    if n < 1:
        raise ValueError(f"{func}: {name} must be a positive int. Received: {name}={n}")
    return n


def _sequence(func: str, value, name: str) -> tuple:
    if value.__class__ is tuple:
        return value
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return tuple(value)
    raise TypeError(
        f"{func}: {name} must be a sequence of ints (a tuple or list). "
        f"Received: {name}={value!r} of type {type(value).__name__}"
    )


def _axes(func: str, axes, ndim: int) -> tuple:
    """``axes`` as a tuple of distinct ints in ``[0, ndim)``."""
    out = tuple(normalize_axis(func, a, ndim, "axes") for a in _sequence(func, axes, "axes"))
    if len(set(out)) != len(out):
        raise ValueError(
            f"{func}: axes must not repeat an axis. Received: axes={tuple(axes)!r} "
            f"(normalized: {out}) for an array with {ndim} dimensions"
        )
    return out


def _kernel(func: str, op: str, dev, dt: DType):
    try:
        return lookup(op, dev, dt)
    except KernelNotFoundError as err:
        check_dtype_on_device(dt, dev, func)  # the clearer reason, when it applies
        raise KernelNotFoundError(f"{func}: {err}") from err


_OUT_DTYPE = {
    _C2C: lambda dt: dt,
    _R2C: COMPLEX_OF.__getitem__,
    _C2R: REAL_OF.__getitem__,
}


# ---- one axis ---------------------------------------------------------------------------


def _one_axis(func: str, op: str, x, n, axis, norm, forward: bool) -> Array:
    if x.__class__ is not Array and _is_dask(x):
        return _dask_one_axis(func, op, x, n, axis, norm)
    dev, dt, a = _real_in(func, x) if op is _R2C else _complex_in(func, x)
    shape = a.shape
    ndim = len(shape)
    if axis.__class__ is not int or not -ndim <= axis < ndim:
        axis = normalize_axis(func, axis, ndim)
    elif axis < 0:
        axis += ndim
    if n is None:
        m = shape[axis]
        n = 2 * (m - 1) if op is _C2R else m
        if n < 1:
            what = f"2*(m - 1) = {n}" if op is _C2R else "m = 0"
            raise ValueError(
                f"{func}: with n=None the transform length is {what}, where m = "
                f"x.shape[{axis}]; a transform needs n >= 1. Received: x.shape={shape}, "
                f"axis={axis}"
            )
    elif n.__class__ is not int or n < 1:
        n = _positive(func, n, "n")
    if norm.__class__ is not str or norm not in _NORMS:
        norm = _check_norm(func, norm)
    out = _kernel(func, op, dev, dt)(a, (n,), (axis,), norm, forward)
    return wrap_as(out, _OUT_DTYPE[op](dt), dev)


def _is_dask(x) -> _builtin_bool:
    return type(x).__module__.startswith("dask.array") and type(x).__name__ == "Array"


def _dask_one_axis(func: str, op: str, x, n, axis, norm):
    """A dask array of tessera chunks: the transform of each block along ``axis``, which
    must be one chunk (as ``dask.array.fft`` asks); the blocks' other axes as they are."""
    import dask.array as da
    import numpy as np

    from ._creation_functions import zeros

    ndim = x.ndim
    if axis.__class__ is not int or not -ndim <= axis < ndim:
        axis = normalize_axis(func, axis, ndim)
    axis %= ndim
    meta = _dask_meta(func, x, (axis,))
    fn = globals()[func]
    m = x.shape[axis]
    full = (2 * (m - 1) if op is _C2R else m) if n is None else n  # the transform length
    length = full // 2 + 1 if op is _R2C else full
    # the output dtype, from one tiny block on the chunks' device
    probe = fn(zeros((2,), dtype=meta.dtype, device=meta.device))
    chunks = x.chunks[:axis] + ((length,),) + x.chunks[axis + 1:]
    return da.map_blocks(lambda b: fn(b, n=n, axis=axis, norm=norm), x, chunks=chunks,
                         dtype=np.dtype(probe.dtype), meta=probe[:0])


# ---- several axes --------------------------------------------------------------------------


def _sizes(func: str, s, axes: tuple, shape: tuple, c2r: bool) -> tuple:
    """The transform lengths: ``s`` checked, with -1 and None resolved."""
    if s is None:
        out = [shape[ax] for ax in axes]
        if c2r and out:
            out[-1] = 2 * (out[-1] - 1)
    else:
        given = _sequence(func, s, "s")
        if len(given) != len(axes):
            raise ValueError(
                f"{func}: s and axes must have the same length. Received: s={given!r}, "
                f"axes={axes!r}"
            )
        out = []
        for i, (v, ax) in enumerate(zip(given, axes)):
            v = _as_int(func, v, f"s[{i}]")
            if v == -1:
                # -1: every input element along the axis is used.
                v = 2 * (shape[ax] - 1) if c2r and i == len(axes) - 1 else shape[ax]
            elif v < 1:
                raise ValueError(
                    f"{func}: every entry of s must be a positive int or -1. "
                    f"Received: s={given!r}"
                )
            out.append(v)
    for i, (v, ax) in enumerate(zip(out, axes)):
        if v < 1:
            raise ValueError(
                f"{func}: the transform length along axis {ax} is {v} (from x.shape[{ax}]"
                f"={shape[ax]}); a transform needs a length >= 1. Received: x.shape={shape}, "
                f"s={s!r}, axes={axes!r}"
            )
    return tuple(out)


def _transform_axes(func: str, s, axes, ndim: int) -> tuple:
    """The axes of a transform over several axes: ``axes`` checked, or every axis (where
    ``s`` is None too: the standard asks for axes with s)."""
    if axes is None:
        if s is not None:
            raise ValueError(
                f"{func}: axes must be given when s is given (the standard requires it; "
                f"NumPy 2 deprecates leaving it out). Received: s={s!r}, axes=None"
            )
        return tuple(range(ndim))
    return _axes(func, axes, ndim)


def _dask_meta(func: str, x, axes: tuple):
    """The tessera meta array of dask array ``x``, whose ``axes`` (the transformed ones)
    must each be one chunk: ValueError naming the first that is not, TypeError if the
    chunks are not tessera arrays."""
    for ax in axes:
        if len(x.chunks[ax]) != 1:
            raise ValueError(
                f"{func}: a dask array is transformed block by block, so axis {ax} must be "
                f"one chunk. Received: chunks along it {x.chunks[ax]}; rechunk with "
                f"x.rechunk({{{ax}: -1}})"
            )
    meta = x._meta
    if meta.__class__ is not Array:
        raise TypeError(f"{func}: a dask array must hold tessera arrays (its meta is "
                        f"{type(meta).__name__}); build it with da.from_array(xp.asarray(...))")
    return meta


def _dask_many_axes(func: str, op: str, x, s, axes, norm):
    """A dask array of tessera chunks: the transform of each block over ``axes``, each
    of which must be one chunk; the blocks' other axes as they are."""
    import dask.array as da
    import numpy as np

    from ._creation_functions import zeros

    ndim = x.ndim
    axes = _transform_axes(func, s, axes, ndim)
    meta = _dask_meta(func, x, axes)
    sizes = _sizes(func, s, axes, tuple(x.shape), op is _C2R)
    out = list(sizes)
    if op is _R2C and out:
        out[-1] = out[-1] // 2 + 1
    chunks = list(x.chunks)
    for ax, length in zip(axes, out):
        chunks[ax] = (length,)
    fn = globals()[func]
    probe = fn(zeros((2,) * max(len(axes), 1), dtype=meta.dtype, device=meta.device),
               axes=tuple(range(len(axes))) or None)
    return da.map_blocks(lambda b: fn(b, s=sizes, axes=axes, norm=norm), x,
                         chunks=tuple(chunks), dtype=np.dtype(probe.dtype), meta=probe[:0])


def _many_axes(func: str, op: str, x, s, axes, norm, forward: bool) -> Array:
    if x.__class__ is not Array and _is_dask(x):
        return _dask_many_axes(func, op, x, s, axes, norm)
    dev, dt, a = _real_in(func, x) if op is _R2C else _complex_in(func, x)
    shape = a.shape
    ndim = len(shape)
    axes = _transform_axes(func, s, axes, ndim)
    sizes = _sizes(func, s, axes, shape, op is _C2R)
    if norm.__class__ is not str or norm not in _NORMS:
        norm = _check_norm(func, norm)
    if not axes:
        if op is not _C2C:
            raise ValueError(
                f"{func}: axes must name at least one axis. Received: axes={axes!r}, "
                f"x.shape={shape}"
            )
        # Nothing to transform: a copy in the result dtype (NumPy returns the input).
        return wrap_as(dev.ops.astype(a, dt) if a is x._data else a, dt, dev)
    out = _kernel(func, op, dev, dt)(a, sizes, axes, norm, forward)
    return wrap_as(out, _OUT_DTYPE[op](dt), dev)


# ---- the standard's transforms -----------------------------------------------------------


def fft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: _Norm = "backward") -> Array:
    """One-dimensional discrete Fourier transform.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.fft.fft.html
    """
    return _one_axis("fft", _C2C, x, n, axis, norm, True)


def ifft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: _Norm = "backward") -> Array:
    """One-dimensional inverse discrete Fourier transform.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.fft.ifft.html
    """
    return _one_axis("ifft", _C2C, x, n, axis, norm, False)


def fftn(
    x: Array,
    /,
    *,
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    norm: _Norm = "backward",
) -> Array:
    """N-dimensional discrete Fourier transform.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.fft.fftn.html
    """
    return _many_axes("fftn", _C2C, x, s, axes, norm, True)


def ifftn(
    x: Array,
    /,
    *,
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    norm: _Norm = "backward",
) -> Array:
    """N-dimensional inverse discrete Fourier transform.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.fft.ifftn.html
    """
    return _many_axes("ifftn", _C2C, x, s, axes, norm, False)


def rfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: _Norm = "backward") -> Array:
    """One-dimensional discrete Fourier transform of real input.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.fft.rfft.html
    """
    return _one_axis("rfft", _R2C, x, n, axis, norm, True)


def irfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: _Norm = "backward") -> Array:
    """Inverse of ``rfft``: a real signal from its non-negative frequency terms.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.fft.irfft.html
    """
    return _one_axis("irfft", _C2R, x, n, axis, norm, False)


def rfftn(
    x: Array,
    /,
    *,
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    norm: _Norm = "backward",
) -> Array:
    """N-dimensional discrete Fourier transform of real input.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.fft.rfftn.html
    """
    return _many_axes("rfftn", _R2C, x, s, axes, norm, True)


def irfftn(
    x: Array,
    /,
    *,
    s: Sequence[int] | None = None,
    axes: Sequence[int] | None = None,
    norm: _Norm = "backward",
) -> Array:
    """N-dimensional inverse of ``rfftn``.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.fft.irfftn.html
    """
    return _many_axes("irfftn", _C2R, x, s, axes, norm, False)


def hfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: _Norm = "backward") -> Array:
    """One-dimensional discrete Fourier transform of a signal with Hermitian symmetry.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.fft.hfft.html
    """
    return _one_axis("hfft", _C2R, x, n, axis, norm, True)


def ihfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: _Norm = "backward") -> Array:
    """One-dimensional inverse discrete Fourier transform of a signal with Hermitian symmetry.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.fft.ihfft.html
    """
    return _one_axis("ihfft", _R2C, x, n, axis, norm, False)


# ---- NumPy's 2-D spellings ----------------------------------------------------------------


def fft2(x: Array, /, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
         norm: _Norm = "backward") -> Array:
    """Two-dimensional discrete Fourier transform (``fftn`` over ``axes``), as NumPy's ``fft2``."""
    return _many_axes("fft2", _C2C, x, s, axes, norm, True)


def ifft2(x: Array, /, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: _Norm = "backward") -> Array:
    """Two-dimensional inverse discrete Fourier transform, as ``numpy.fft.ifft2``."""
    return _many_axes("ifft2", _C2C, x, s, axes, norm, False)


def rfft2(x: Array, /, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: _Norm = "backward") -> Array:
    """Two-dimensional discrete Fourier transform of real input, as ``numpy.fft.rfft2``."""
    return _many_axes("rfft2", _R2C, x, s, axes, norm, True)


def irfft2(x: Array, /, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
           norm: _Norm = "backward") -> Array:
    """Inverse of ``rfft2``, as ``numpy.fft.irfft2``."""
    return _many_axes("irfft2", _C2R, x, s, axes, norm, False)


# ---- frequencies and shifts ---------------------------------------------------------------


def _frequencies(func: str, n, d, dtype, device, half: bool) -> Array:
    n = _positive(func, n, "n")
    if isinstance(d, _builtin_bool) or not isinstance(d, numbers.Real):
        raise TypeError(
            f"{func}: d must be a real number (the sample spacing). "
            f"Received: d={d!r} of type {type(d).__name__}"
        )
    d = float(d)
    if d == 0.0:
        raise ValueError(f"{func}: d must not be 0 (the sample spacing). Received: d={d!r}")
    dev = as_device(device, func)
    if dtype is None:
        dt = default_float(dev)
    else:
        dt = coerce_dtype(dtype, "dtype", func)
        if dt.kind != "f":
            raise TypeError(
                f"{func}: dtype must be a real-valued floating-point dtype. "
                f"Received: dtype={dt}"
            )
        check_dtype_on_device(dt, dev, func)
    ops = dev.ops
    # Computed in float64 where the device has it and rounded once, as NumPy does.
    wide = _dtypes.float64 if supports_dtype(dev, _dtypes.float64) else dt
    if half:
        k = ops.arange(0, n // 2 + 1, 1, dtype=wide, device=dev)
    else:
        positive = (n - 1) // 2 + 1
        k = ops.concat([ops.arange(0, positive, 1, dtype=wide, device=dev),
                        ops.arange(-(n // 2), 0, 1, dtype=wide, device=dev)], axis=0)
    k = wrap_as(k, wide, dev)
    val = 1.0 / (n * d)
    # k * (1/(n*d)) as NumPy computes it; k / (n*d) when 1/(n*d) overflows.
    out = multiply(k, val) if math.isfinite(val) else divide(k, n * d)
    if wide is not dt:
        return wrap_as(ops.astype(out._data, dt), dt, dev)
    return out


def fftfreq(
    n: int,
    /,
    *,
    d: float = 1.0,
    dtype: DType | None = None,
    device=None,
) -> Array:
    """Sample frequencies of the discrete Fourier transform.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.fft.fftfreq.html
    """
    return _frequencies("fftfreq", n, d, dtype, device, False)


def rfftfreq(
    n: int,
    /,
    *,
    d: float = 1.0,
    dtype: DType | None = None,
    device=None,
) -> Array:
    """Sample frequencies for ``rfft`` and ``irfft``.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.fft.rfftfreq.html
    """
    return _frequencies("rfftfreq", n, d, dtype, device, True)


def _shift(func: str, x, axes, sign: int) -> Array:
    if x.__class__ is not Array:
        check_array(x, func)
    shape = x._data.shape
    ndim = len(shape)
    if axes is None:
        axes = tuple(range(ndim))
    elif isinstance(axes, Sequence) and not isinstance(axes, (str, bytes)):
        # Note: a repeated axis adds its shifts, as numpy.fft.fftshift (roll) does.
        axes = tuple(normalize_axis(func, a, ndim, "axes") for a in axes)
    else:
        axes = (normalize_axis(func, axes, ndim, "axes"),)
    dev = x._device
    if not axes:
        return wrap_as(dev.ops.astype(x._data, x._dtype), x._dtype, dev)
    shifts = tuple(sign * (shape[ax] // 2) for ax in axes)
    return wrap_as(dev.ops.roll(x._data, shifts, axis=axes), x._dtype, dev)


def fftshift(x: Array, /, *, axes: int | Sequence[int] | None = None) -> Array:
    """Shift the zero-frequency component to the center of the spectrum.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.fft.fftshift.html

    Any dtype is accepted, as in NumPy.
    """
    return _shift("fftshift", x, axes, 1)


def ifftshift(x: Array, /, *, axes: int | Sequence[int] | None = None) -> Array:
    """Inverse of ``fftshift``.

    Specification: https://data-apis.org/array-api/2025.12/extensions/generated/array_api.fft.ifftshift.html

    Any dtype is accepted, as in NumPy.
    """
    return _shift("ifftshift", x, axes, -1)


# ---- the plain reference ------------------------------------------------------------------


def _reference_c2c(x: Array, n: int, axis: int, norm: str, forward: bool) -> Array:
    """The ``fft_c2c`` op along one axis as a DFT matrix product, written with ``xp``.

    ``O(n**2)``: the plain reference the kernels are tested against (STYLE: every op
    with kernels has one). The phases ``j*k mod n`` are exact integers, turned into
    angles in float64 where the device has it.
    """
    import tessera_array as xp

    dev, cdt = x.device, x.dtype
    x = xp.moveaxis(x, axis, -1)
    m = x.shape[-1]
    if n < m:
        x = x[..., :n]
    elif n > m:
        pad = xp.zeros(x.shape[:-1] + (n - m,), dtype=cdt, device=dev)
        x = xp.concat([x, pad], axis=-1)
    k = xp.arange(n, device=dev)
    phase = (k[:, None] * k[None, :]) % n
    wide = default_float(dev)
    sign = -1.0 if forward else 1.0
    angle = xp.astype(phase, wide) * (sign * 2.0 * math.pi / n)
    w = xp.astype(xp.cos(angle), cdt) + xp.astype(xp.sin(angle), cdt) * 1j
    y = xp.matmul(x, w)
    scale = {"backward": 1.0 if forward else 1.0 / n, "ortho": 1.0 / math.sqrt(n),
             "forward": 1.0 / n if forward else 1.0}[norm]
    return xp.moveaxis(y * scale if scale != 1.0 else y, -1, axis)


def _reference_r2c(x: Array, n: int, axis: int, norm: str, forward: bool) -> Array:
    """``fft_r2c`` (rfft, ihfft) along one axis: the first ``n//2 + 1`` terms of the DFT."""
    import tessera_array as xp

    full = _reference_c2c(xp.astype(x, COMPLEX_OF[x.dtype]), n, axis, norm, forward)
    return xp.take(full, xp.arange(n // 2 + 1, device=x.device), axis=axis)


def _reference_c2r(x: Array, n: int, axis: int, norm: str, forward: bool) -> Array:
    """``fft_c2r`` (irfft, hfft) along one axis: the DFT of the Hermitian extension, real."""
    import tessera_array as xp

    h = n // 2 + 1
    x = xp.moveaxis(x, axis, -1)
    m = x.shape[-1]
    if h < m:
        x = x[..., :h]
    elif h > m:
        pad = xp.zeros(x.shape[:-1] + (h - m,), dtype=x.dtype, device=x.device)
        x = xp.concat([x, pad], axis=-1)
    tail = xp.conj(xp.flip(x[..., 1:n - h + 1], axis=-1))  # X[n - k] for k = h .. n-1
    full = xp.concat([x, tail], axis=-1)
    return xp.real(xp.moveaxis(_reference_c2c(full, n, -1, norm, forward), -1, axis))


# ---- plans ----------------------------------------------------------------------------------


@runtime_checkable
class PlanCache(Protocol):
    """A backend's cache of FFT plans for one device (cuFFT/hipFFT plans, compiled
    OpenCL programs, twiddle tables), as :func:`get_plan_cache` returns it; CuPy's
    ``cupy.fft.config.get_plan_cache()`` in spirit.

    Attributes
    ----------
    size : int or None
        Plans held now; None where the backend cannot know.
    max_size : int or None
        Bound on the number of plans (0: no caching; settable where the backend can
        bound it); None where unbounded or unknown.
    memsize : int or None
        Bytes held by the plans now (work areas included); None where the backend
        cannot know.
    max_memory : int or None
        Bound on those bytes (settable likewise); None where there is none.

    Notes
    -----
    ``clear()`` drops every plan; ``info()`` is a dict of the above and the backend's
    notes; ``show()`` prints ``info()``. Setting a bound a backend cannot enforce raises
    NotImplementedError: a cache never claims plans it does not hold.

    The NumPy backend's plans live inside pocketfft (SciPy's, or NumPy's without
    SciPy): 16 per plan type, least recently used first out, no memory bound, not
    visible and not clearable from Python. There, ``size`` and ``memsize`` are ``None``,
    ``max_size`` is 16, and ``clear()`` does nothing and says so (see
    ``tessera_array.backends.numpy.fft``).
    """

    @property
    def size(self) -> int | None: ...

    @property
    def max_size(self) -> int | None: ...

    @property
    def memsize(self) -> int | None: ...

    @property
    def max_memory(self) -> int | None: ...

    def clear(self) -> None:
        """Drop every plan the cache holds (a documented no-op where it cannot)."""

    def info(self) -> dict:
        """The numbers above and the backend's notes, as a dict."""

    def show(self) -> None:
        """Print :meth:`info`."""


def get_plan_cache(device=None) -> PlanCache:
    """The FFT plan cache of ``device`` (the default device when None).

    Raises
    ------
    KernelNotFoundError
        The device's backend registers no FFT kernels.
    NotImplementedError
        Its FFT launchers expose no plan cache.
    """
    dev = as_device(device, "get_plan_cache")
    backend = dev.backend.name
    keys = [k for k in registry.keys() if k.backend == backend and k.op in FAMILIES["fft"]]
    if not keys:
        raise KernelNotFoundError(
            f"get_plan_cache: backend {backend} registers no FFT kernels "
            f"({', '.join(FAMILIES['fft'])}), so device {dev} has no FFT plan cache."
        )
    launcher = registry.lookup(keys[0].op, backend, keys[0].dtype, keys[0].variant)
    provider = getattr(launcher, "plan_cache", None)
    if provider is None:
        raise NotImplementedError(
            f"get_plan_cache: the FFT launchers of backend {backend} expose no plan cache "
            f"(no plan_cache attribute on the registered {keys[0].op} launcher)."
        )
    return provider(dev)
