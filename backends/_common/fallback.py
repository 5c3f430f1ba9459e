"""The host fallback: how a device backend runs a function it has no native kernel for.

A fallback copies the native buffers among its arguments to the host, calls the host
backend's function of the same name (an ``ops`` name of the NumPy backend, or its
registered kernel), and copies the result to the device of the first native argument
(or of ``device=``). Arguments the function writes in place are written back from
their host copies: ``copy_into``'s ``dst`` and the ``a`` of ``setitem`` and
``inplace``; for kernels, what :data:`tessera_array._backend_api.KERNELS` says each
writes (``axpy``'s ``y``, an optimizer step's parameters and state).

Fallbacks exist for the names of the contract only: :data:`~tessera_array._backend_api.OPS`
(:meth:`HostFallback.op`) and the registry ops of
:data:`~tessera_array._backend_api.KERNELS` (:meth:`HostFallback.register_kernels`).
Each one made is recorded; :meth:`HostFallback.names` lists them (a backend's
``host_fallbacks()``, shown by ``python -m tessera_array info``): the ``ops`` name,
``kernel <op>`` for a registry kernel, and ``name[detail]`` for the dtypes or keys that
a native function hands to the host.

Modes
-----
``TESSERA_HOST_FALLBACK`` (read when the backend loads) or the backend's
``set_host_fallback()`` sets what a call of a fallback does:

``"warn"`` (the default)
    Run on the host. The first call of each (function, device) pair issues a
    :class:`~tessera_array.HostFallbackWarning` naming both and saying how to silence
    (``allow``) or forbid (``error``) host fallbacks; later calls of that pair are
    silent. Setting the mode, to any value, starts that record afresh. A warning that a
    warnings filter turns into an error does not count as issued: under ``-W error``
    each call raises.
``"allow"``
    Run on the host, silently.
``"error"``
    Raise :class:`~tessera_array.HostFallbackError` naming the function and the device;
    nothing is copied.

The buffer operations are the backend's: a :class:`HostFallback` is made with hooks
(``is_native``, ``to_host``, ``from_host``, ``write_back``, ``device_of``), so that one
mechanism serves PyOpenCL buffers, CuPy arrays, or the tests' fake device buffers.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, Iterable

import numpy as np

from tessera_array._backend_api import KERNELS, OPS, parse_signature
from tessera_array._errors import HostFallbackError, HostFallbackWarning

__all__ = ["DEFAULT_MODE", "ENV", "MODES", "HostFallback", "initial_mode"]

MODES = ("allow", "warn", "error")
DEFAULT_MODE = "warn"
ENV = "TESSERA_HOST_FALLBACK"

# The ``ops`` names that write an argument in place (the contract's "none"/"bool" ops).
_OP_WRITES = {"copy_into": ("dst",), "inplace": ("a",), "setitem": ("a",)}
# Optional attributes of a family's launchers, carried over to their fallbacks.
_LAUNCHER_ATTRS = ("plan_cache",)


def initial_mode() -> str:
    """The mode ``TESSERA_HOST_FALLBACK`` sets (:data:`DEFAULT_MODE` when unset or empty)."""
    value = os.environ.get(ENV, "").strip().lower() or DEFAULT_MODE
    if value not in MODES:
        raise ValueError(
            f"{ENV}: expected one of {', '.join(MODES)}. Received: {ENV}={value!r}"
        )
    return value


def _written(signature: str, names: Iterable[str]) -> frozenset:
    """The positions and names by which a caller of ``signature`` passes ``names``."""
    params = parse_signature(signature)
    out = set()
    for name in names:
        hits = [i for i, p in enumerate(params) if p.name == name]
        if not hits:
            raise ValueError(
                f"host fallback: a written argument must be a parameter of the signature. "
                f"Received: name={name!r}, signature={signature!r}"
            )
        if params[hits[0]].kind == "positional":
            out.add(hits[0])
        out.add(name)
    return frozenset(out)


class HostFallback:
    """The host fallback of one device backend: makes fallbacks, lists them, and holds
    the mode (see the module docstring).

    Parameters
    ----------
    backend : str
        The backend's name (``"opencl"``): the backend field of the kernels
        :meth:`register_kernels` registers, and where messages say its
        ``set_host_fallback`` is (``tessera_array.backends.<backend>``).
    label : str
        How messages name the backend's kernels (``"OpenCL"``: "no native OpenCL kernel").
    is_native : callable
        ``(obj) -> bool``: whether ``obj`` is a native buffer.
    to_host : callable
        ``(native) -> numpy.ndarray``: a new host copy of ``native``.
    from_host : callable
        ``(ndarray, like) -> native``: a new native buffer holding the host array, on the
        device of ``like``, which is a native buffer or the call's ``device=`` argument.
    write_back : callable
        ``(native, ndarray) -> None``: overwrite ``native`` with the host array (its shape).
    device_of : callable
        ``(native) -> device``: where ``native`` lives (hashable; messages print it).
    host : object
        The host backend (the NumPy backend's object): its ``ops`` namespace serves the
        ``ops`` fallbacks, its ``register(registry)`` the kernel fallbacks.

    Notes
    -----
    The hooks are attributes of the same names, read at each call.
    """

    def __init__(self, backend: str, *, label: str, is_native: Callable, to_host: Callable,
                 from_host: Callable, write_back: Callable, device_of: Callable, host):
        self.backend = backend
        self.label = label
        self.is_native = is_native
        self.to_host = to_host
        self.from_host = from_host
        self.write_back = write_back
        self.device_of = device_of
        self.host = host
        self._names: set = set()
        self._warned: set = set()  # (function, device) pairs reported in "warn" mode
        self._mode = initial_mode()

    # ---- the mode and the listing ----------------------------------------------------------

    @property
    def mode(self) -> str:
        """The current mode: ``"allow"``, ``"warn"`` or ``"error"``."""
        return self._mode

    def set_mode(self, value: str) -> None:
        """Set the mode (the backend's ``set_host_fallback``); the record of which
        (function, device) pairs have warned starts afresh."""
        if value not in MODES:
            raise ValueError(
                f"set_host_fallback: mode must be one of {', '.join(map(repr, MODES))}. "
                f"Received: mode={value!r}"
            )
        self._mode = value
        self._warned.clear()

    def names(self) -> tuple:
        """The sorted names of every function and kernel made a fallback (and recorded)."""
        return tuple(sorted(self._names))

    # ---- making fallbacks ------------------------------------------------------------------

    def op(self, name: str) -> Callable:
        """The fallback of the contract's ``ops`` function ``name``."""
        spec = OPS.get(name)
        if spec is None:
            raise ValueError(
                f"host fallback: expected an ops name of the contract "
                f"(tessera_array._backend_api.OPS). Received: name={name!r}"
            )
        return self.wrap(name, getattr(self.host.ops, name),
                         writes=_written(spec.signature, _OP_WRITES.get(name, ())),
                         returns=spec.returns)

    def register_kernels(self, registry, *, skip_dtypes=()) -> tuple:
        """Register the host backend's kernel, through a fallback, for every
        ``(op, dtype, variant)`` of the contract's kernel ops that ``registry`` holds no
        kernel of this backend for, dtypes of ``skip_dtypes`` aside; returns the ops so
        covered.

        Launchers that return a device-state object (``cg_fused``) are left out: their
        state cannot live in host copies. Without such a kernel the front end takes its
        generic path.
        """
        from tessera_array._dispatch import KernelRegistry

        host = KernelRegistry()
        self.host.register(host)
        have = {(k.op, k.dtype, k.variant)
                for k in registry.keys() if k.backend == self.backend}  # noqa: SIM118
        made: dict = {}
        for key in host.keys():  # noqa: SIM118 - a registry, not a dict
            spec = KERNELS.get(key.op)
            if spec is None or spec.returns == "object" or key.dtype in skip_dtypes or (
                (key.op, key.dtype, key.variant) in have
            ):
                continue
            launcher = host.lookup(key.op, key.backend, key.dtype, key.variant)
            fn = made.get((key.op, launcher))
            if fn is None:
                fn = made[key.op, launcher] = self.wrap(
                    f"kernel {key.op}", launcher, writes=_written(spec.signature, spec.writes),
                    returns=spec.returns)
                for attr in _LAUNCHER_ATTRS:
                    if hasattr(launcher, attr):
                        setattr(fn, attr, getattr(launcher, attr))
            registry.register(key.op, self.backend, key.dtype, fn, variant=key.variant)
        return tuple(sorted({op for op, _ in made}))

    def wrap(self, name: str, host_fn: Callable, *, writes: Iterable = (),
             record: bool = True, returns: str = "native") -> Callable:
        """``host_fn`` (a host function) as a fallback called ``name``.

        Parameters
        ----------
        name : str
            The name listed and named in messages (``"inv"``, ``"acos[complex64]"``).
        host_fn : callable
            The host function; it receives host copies of the native arguments.
        writes : iterable of int or str
            The positions and keyword names of the arguments ``host_fn`` writes in place:
            those native arguments are written back from their host copies after the call.
        record : bool
            List ``name`` in :meth:`names` (False: a fallback for measurements only;
            the mode still applies).
        returns : str
            ``"native"`` (the result's host arrays are copied to the device; nested
            tuples and lists too), ``"bool"`` or ``"none"`` (the host value is returned
            as a bool, or None).
        """
        writes = frozenset(writes)
        if record:
            self._names.add(name)
        this = self

        def fallback(*args, **kwargs):
            target = this._target(name, args, kwargs)
            if this._mode != "allow":
                this._report(name, target)
            written = [] if writes else None
            hargs = tuple(this._host(a, written if i in writes else None)
                          for i, a in enumerate(args))
            if kwargs:
                kwargs = {k: this._host(v, written if k in writes else None)
                          for k, v in kwargs.items()}
                if kwargs.get("device") is not None:
                    kwargs["device"] = None  # the host function's default: the host
            with np.errstate(all="ignore"):
                result = host_fn(*hargs, **kwargs)
            if written:
                for native, host in written:
                    this.write_back(native, host)
            if returns == "none":
                return None
            if returns == "bool":
                return bool(result)
            return this._device(result, target)

        fallback.__name__ = fallback.__qualname__ = name
        fallback.__doc__ = f"``{name}`` on the host (see :mod:`{__name__}`)."
        fallback.host_fallback = True
        return fallback

    # ---- inside a call ---------------------------------------------------------------------

    def _first_native(self, obj):
        if self.is_native(obj):
            return obj
        if obj.__class__ is list or obj.__class__ is tuple:
            for item in obj:
                hit = self._first_native(item)
                if hit is not None:
                    return hit
        return None

    def _target(self, name, args, kwargs):
        """The first native argument, else the ``device=`` argument: where results go."""
        hit = self._first_native(args)
        if hit is None and kwargs:
            hit = self._first_native(tuple(kwargs.values()))
            if hit is None:
                hit = kwargs.get("device")
        if hit is None:
            raise RuntimeError(
                f"{name}: the {self.backend} host fallback found no {self.backend} array "
                f"and no device= among its arguments"
            )
        return hit

    def _host(self, obj, written):
        if self.is_native(obj):
            host = self.to_host(obj)
            if written is not None:
                written.append((obj, host))
            return host
        cls = obj.__class__
        if cls is list or cls is tuple:
            return cls(self._host(item, written) for item in obj)
        if cls is dict:
            return {k: self._host(v, written) for k, v in obj.items()}
        return obj

    def _device(self, obj, target):
        if isinstance(obj, np.ndarray):
            return self.from_host(obj, target)
        if isinstance(obj, np.generic):
            return self.from_host(np.asarray(obj), target)
        if isinstance(obj, (list, tuple)):
            items = [self._device(item, target) for item in obj]
            if hasattr(obj, "_fields"):  # a named tuple (svd, slogdet, unique_all, ...)
                return obj.__class__(*items)
            return obj.__class__(items)
        return obj

    def _report(self, name, target):
        """Raise (mode "error") or warn once per (function, device) (mode "warn")."""
        device = self.device_of(target) if self.is_native(target) else target
        key = (name, device)
        if self._mode == "warn" and key in self._warned:
            return
        setter = f"tessera_array.backends.{self.backend}.set_host_fallback"
        if self._mode == "error":
            raise HostFallbackError(
                f"{name}: no native {self.label} kernel; the call would run on the host "
                f"(copying its arrays from and back to {device}). Received: "
                f"{ENV}={self._mode!r}. Allow it with {ENV}=allow or {setter}('allow')."
            )
        warnings.warn(HostFallbackWarning(
            f"{name}: no native {self.label} kernel; the call runs on the host (copying "
            f"its arrays from and back to {device}). Reported once per function and "
            f"device: silence these reports with {ENV}=allow or {setter}('allow'), or "
            f"forbid host fallbacks with {ENV}=error or {setter}('error')."
        ), stacklevel=_outside_level())
        self._warned.add(key)


_PREFIXES: tuple = ()


def _outside_level() -> int:
    """The ``stacklevel`` that makes its caller's ``warnings.warn`` point at the first
    frame outside tessera_array (the front end and the backends)."""
    global _PREFIXES
    if not _PREFIXES:
        import tessera_array.backends  # binds tessera_array too

        _PREFIXES = tuple(os.path.dirname(m.__file__) + os.sep
                          for m in (tessera_array, tessera_array.backends))
    frame = sys._getframe(1)
    level = 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PREFIXES):
        frame = frame.f_back
        level += 1
    return level
