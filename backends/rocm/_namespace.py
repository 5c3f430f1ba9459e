"""The ROCm build's namespace: the CuPy namespace with what CuPy's HIP build lacks.

The deviation traits of :class:`~tessera_array.backends._cupy._namespace.CupyNamespace`
were measured on CuPy 14.2's CUDA build; the HIP build runs the same CuPy code, so
they carry over (not yet confirmed on AMD hardware). What differs:

- the solver library is hipSOLVER (rocSOLVER), named in linalg errors;
- ``linalg.eig`` / ``linalg.eigvals``: CuPy's HIP build has no general eigensolver (its
  geev raises NotImplementedError), so they raise here, naming the way out.
"""

from __future__ import annotations

from tessera_array.backends._cupy._namespace import CupyNamespace

__all__ = ["RocmNamespace"]


class RocmNamespace(CupyNamespace):
    """The standard's namespace over ``cupy.ndarray`` buffers of CuPy's ROCm build."""

    linalg_library = "hipSOLVER"
    general_eig = False  # no eig/eigvals (non-Hermitian eigenproblems)

    def _no_general_eig(self, func: str, a):
        device = getattr(getattr(a, "device", None), "id", "?")
        raise NotImplementedError(
            f"linalg.{func}: not available on rocm devices: CuPy's ROCm build has no "
            f"general (non-Hermitian) eigensolver (geev). Received: x on rocm:{device}, "
            f"shape {tuple(a.shape)}. Use linalg.eigh/eigvalsh for a Hermitian matrix, "
            f"or move x to the host with x.to_device('cpu').")

    def eig(self, a, /):
        """Not available on ROCm (see the module docstring): raises NotImplementedError."""
        self._no_general_eig("eig", a)

    def eigvals(self, a, /):
        """Not available on ROCm (see the module docstring): raises NotImplementedError."""
        self._no_general_eig("eigvals", a)
