"""The CuPy backends' host fallback: what runs on the host where the caller asks for it.

One :class:`~tessera_array.backends._common.fallback.HostFallback` per backend object
(``cuda``, ``rocm``), over ``cupy.ndarray`` buffers. Today it serves only the
``blas`` variants of ``vecdot``/``vecmat``: ``products="blas"`` in the Krylov solvers asks
for the host BLAS's summation order (SciPy's iterates), an explicit request that is listed
by ``host_fallbacks()`` and refused under ``set_host_fallback("error")``. Every op of the
namespace has a native CuPy path; none falls back.
"""

from __future__ import annotations

from tessera_array.backends._common import fallback as _generic

__all__ = ["make"]


def make(backend, cupy):
    """The host fallback of ``backend`` (a loaded CuPy backend object)."""
    from tessera_array.backends.numpy import backend as numpy_backend

    native = cupy.ndarray

    def from_host(host, like):
        index = like.device.id if like.__class__ is native else like.index
        with cupy.cuda.Device(index):
            return cupy.asarray(host)

    def write_back(buf, host):
        with buf.device:
            buf.set(host)

    return _generic.HostFallback(
        backend.name, label=backend.library, is_native=lambda obj: obj.__class__ is native,
        to_host=backend.to_host, from_host=from_host, write_back=write_back,
        device_of=lambda buf: f"{backend.name}:{buf.device.id}", host=numpy_backend,
    )


def register_blas_products(fallback, registry, backend_name: str) -> None:
    """The ``blas`` variants of ``vecdot`` and ``vecmat``: the NumPy backend's products
    through the host fallback (operands copied in, the result copied back; a sync)."""
    from tessera_array import _dtypes
    from tessera_array.backends.numpy import matvec as host_matvec

    for op in ("vecdot", "vecmat"):
        registry.register(op, backend_name, _dtypes.FLOATING,
                          fallback.wrap(f"kernel {op}[blas]", getattr(host_matvec, op)),
                          variant="blas")
