"""The NumPy backend: the host CPU, always available, the embedded default.

Its native buffers are ``numpy.ndarray``; its ``ops`` namespace is
:mod:`tessera_array.backends.numpy._ops`, the members of the shared namespace over
NumPy (:mod:`tessera_array.backends._xp`, with NumPy's own parts in
:mod:`._namespace`); its kernels are registered in :func:`NumpyBackend.register`.
"""

from __future__ import annotations

import numpy as np
from tessera_array.backends._xp import export_dlpack
from tessera_array.backends._xp._dtypes import is_bfloat16

from tessera_array import _dtypes
from tessera_array._devices import Device

from . import _ops

__all__ = ["backend", "NumpyBackend"]



class NumpyBackend:
    name = "numpy"
    device_kind = "cpu"
    priority = 0  # the fallback: any accelerator backend that loads outranks it
    is_host = True
    native_type = np.ndarray
    ops = _ops

    def __init__(self):
        self._device = Device("cpu", 0, backend_name=self.name)

    def is_available(self) -> bool:
        return True

    def unavailable_reason(self):
        return None

    def plausibly_present(self):
        return "the host CPU"

    def load(self) -> None:
        pass

    def devices(self) -> tuple:
        return (self._device,)

    def dtypes(self, device) -> tuple:
        # The standard's dtypes and the 16-bit extension dtypes (NumPy's float16,
        # ml_dtypes' bfloat16).
        return _dtypes.EVERY_DTYPE

    def capabilities(self, device) -> dict:
        return {"float64": True, "complex128": True}

    def versions(self) -> dict:
        out = {"numpy": np.__version__}
        try:
            import scipy

            out["scipy"] = scipy.__version__
        except ImportError:
            out["scipy"] = "not installed"
        return out

    # ---- buffers ---------------------------------------------------------------

    @staticmethod
    def native_dtype(a):
        try:
            return _dtypes.FROM_NUMPY[a.dtype]
        except KeyError:
            found = _dtypes.lookup_numpy(a.dtype)  # bfloat16 before its first use
            if found is not None:
                return found
            raise TypeError(
                f"numpy backend: dtype {a.dtype} is not an Array API dtype"
            ) from None

    @staticmethod
    def coerce_native(r):
        # NumPy returns scalars where an operation's inputs were all 0-d.
        return np.asarray(r)

    @staticmethod
    def from_host(array, device):
        return np.asarray(array)

    @staticmethod
    def to_host(native):
        return native

    @staticmethod
    def dlpack(native, *, stream=None, max_version=None, dl_device=None, copy=None):
        if is_bfloat16(native.dtype):
            # Note: NumPy's DLPack exporter has no bfloat16 (DLPack's kDLBfloat, code 4).
            raise BufferError(
                "__dlpack__: the numpy backend cannot export bfloat16 through DLPack "
                "(NumPy's exporter lacks kDLBfloat, code 4); convert with "
                "astype(x, float32) first, or pass the data through numpy.asarray(x). "
                "Received: x.dtype=bfloat16"
            )
        return export_dlpack(native, stream=stream, max_version=max_version,
                             dl_device=dl_device, copy=copy)

    @staticmethod
    def dlpack_device(native):
        return native.__dlpack_device__()

    @staticmethod
    def from_dlpack(obj, *, device=None, copy=None):
        """Import any DLPack producer into host memory (producers on other devices copy)."""
        try:
            return np.from_dlpack(obj, device="cpu", copy=copy)
        except (BufferError, RuntimeError) as err:
            if "bfloat16" not in str(getattr(obj, "dtype", "")):
                raise
            # Note: NumPy's DLPack importer has no bfloat16 (kDLBfloat, code 4).
            raise TypeError(
                "from_dlpack: the numpy backend cannot import bfloat16 DLPack data (NumPy's "
                "importer lacks kDLBfloat, code 4); convert the producer to float32 first. "
                f"Received: x of type {type(obj).__name__} with dtype {obj.dtype}"
            ) from err

    # ---- kernels ---------------------------------------------------------------

    def register(self, registry) -> None:
        # Imported here, not at module import: pocketfft's engine and the thread pools
        # are set up only once the backend registers.
        from . import attention, cg, fft, krylov, matvec, optim, philox, sparse

        for family in (matvec, fft, sparse, optim, philox, attention, cg, krylov):
            family.register(registry, self.name)


backend = NumpyBackend()
