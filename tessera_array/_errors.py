"""The library's exception classes.

Each subclasses the built-in exception a user would already catch, so
``except TypeError`` / ``except ValueError`` code written for NumPy keeps working.
"""

__all__ = [
    "AxisError",
    "BackendUnavailableError",
    "DeviceMismatchError",
    "DeviceNotFoundError",
    "HostFallbackError",
    "HostFallbackWarning",
    "ImplicitHostCopyError",
    "KernelCompileError",
    "KernelDTypeError",
    "KernelNotFoundError",
    "LinAlgError",
    "MissingCapabilityError",
    "ScalarOutOfRangeError",
    "TesseraError",
]


class TesseraError(Exception):
    """Base class of every exception raised by tessera_array itself."""


class BackendUnavailableError(TesseraError, RuntimeError):
    """A backend (or one of its devices) cannot be loaded; the message says why."""


class DeviceMismatchError(TesseraError, ValueError):
    """Operands live on different devices; nothing is moved implicitly."""


class KernelNotFoundError(TesseraError, NotImplementedError):
    """No kernel is registered for the requested (op, backend, dtype, variant)."""


class KernelDTypeError(KernelNotFoundError, TypeError):
    """No kernel of the op takes the dtype on the backend (float16 and bfloat16 have
    kernels for a few ops only, e.g. ``linear`` on numpy and cuda): a
    KernelNotFoundError, and a TypeError as a wrong dtype is."""


class KernelCompileError(TesseraError, RuntimeError):
    """A device kernel failed to build; carries the backend, options, log and source."""

    def __init__(self, message, *, backend=None, options=None, log=None, source=None):
        super().__init__(message)
        self.backend = backend
        self.options = options
        self.log = log
        self.source = source


class ImplicitHostCopyError(TesseraError, TypeError):
    """An array on a non-host device was asked for an implicit host (NumPy) copy."""


class HostFallbackError(TesseraError, RuntimeError):
    """An op without a native kernel on the device would run on the host, and the
    backend's host-fallback setting forbids it (the message names the function)."""


class HostFallbackWarning(UserWarning):
    """An op without a native kernel on the device ran on the host (fallback "warn")."""


class ScalarOutOfRangeError(TesseraError, OverflowError, ValueError):
    """A Python scalar does not fit the array's dtype (NumPy raises OverflowError)."""


class MissingCapabilityError(TesseraError, TypeError):
    """The device lacks a capability (for example float64) that the call needs."""


class DeviceNotFoundError(TesseraError, ValueError):
    """A ``device=`` names no device of a loaded backend; the message says why."""


class AxisError(TesseraError, ValueError, IndexError):
    """An axis is out of range for the array (a ValueError and an IndexError, as in NumPy)."""


class LinAlgError(TesseraError, ValueError):
    """A linear-algebra routine failed on its input (singular matrix, not positive
    definite, no convergence); a ValueError, as ``numpy.linalg.LinAlgError`` is."""
