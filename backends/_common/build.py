"""Compile kernels once per device: in memory, on disk, and one error for failures.

A backend states what its compiler does in a small :class:`Dialect` (compile a text
with options, save and load a program binary, take a kernel out of a program, say
which compiler, driver and device a context has); a :class:`BuildStack` over it does the
rest, the same for every backend:

memory
    Programs are kept per (device scope, source digest, options), kernels per program,
    name and signature, in :class:`~.cache.Memo` objects (``<backend>.programs``,
    ``<backend>.kernels``), so :func:`~.cache.clear_all` forgets them.
disk
    After a memory miss the program binary is looked up under
    ``$TESSERA_CACHE_DIR/<backend>/`` (default ``$XDG_CACHE_HOME/tessera_array``, that
    is ``~/.cache/tessera_array``), and a program compiled from source is saved there.
    ``TESSERA_DISK_CACHE=0`` turns the disk cache off (read and write); both variables
    are read at each miss. A binary that fails to load is compiled again (and replaced).
    A dialect may leave a context's programs to its driver's own cache
    (:meth:`Dialect.disk_cache`).
key
    The disk key is the sha256 of tessera's version, the backend's name, the source's
    digest (its text and every header it includes, see :mod:`.source`), the options and
    the dialect's fingerprint of the device (compiler and driver versions, device name).
errors
    A source the compiler rejects raises :class:`~tessera_array._errors.KernelCompileError`
    from one place (:meth:`BuildStack.program`), carrying the backend, the options, the
    compiler's log and the source, which the message also shows with line numbers.
counts
    :meth:`BuildStack.build_count` counts the programs made after a memory miss,
    compiled or loaded from disk (a repeated call makes none); :attr:`BuildStack.stats`
    tells the two apart.
"""

from __future__ import annotations

import abc
import hashlib
import os
import tempfile
import threading
from pathlib import Path

from tessera_array._errors import KernelCompileError

from .cache import memo
from .source import KernelSource

__all__ = ["BuildFailure", "BuildStack", "Dialect", "disk_cache_dir", "numbered"]

_OFF = frozenset({"0", "off", "false", "no"})


class BuildFailure(Exception):
    """Raised by :meth:`Dialect.compile` when the compiler rejects a source."""

    def __init__(self, log: str):
        super().__init__(log)
        self.log = log  # the compiler's log (its errors and warnings)


class Dialect(abc.ABC):
    """What one backend's compiler adds to a :class:`BuildStack`."""

    backend: str = ""  # the backend's name: messages, memo names, the disk cache's folder

    def scope(self, context):
        """The memory cache's scope of ``context`` (a hashable; by default itself)."""
        return context

    @abc.abstractmethod
    def fingerprint(self, context) -> str:
        """The compiler, driver and device of ``context``: a program binary made for one
        fingerprint is never loaded for another."""

    @abc.abstractmethod
    def compile(self, context, text: str, options: tuple):
        """The program of ``text`` built for ``context``; :class:`BuildFailure` with the
        compiler's log when the compiler rejects it."""

    def disk_cache(self, context) -> bool:
        """Whether the stack keeps ``context``'s programs on disk (False where the driver
        caches its builds itself and a binary costs more than it saves)."""
        return True

    def binary(self, program) -> bytes | None:
        """The bytes that :meth:`load` turns back into ``program``, or None (not kept on
        disk)."""
        return None

    def load(self, context, binary: bytes, options: tuple):
        """The program of a :meth:`binary` (any exception: the binary is not usable)."""
        raise NotImplementedError

    @abc.abstractmethod
    def kernel(self, program, name: str, signature=None):
        """Kernel ``name`` of ``program``; ``signature`` is the dialect's own description
        of its arguments (None: the dialect's default)."""


def disk_cache_dir(backend: str) -> Path | None:
    """The folder of ``backend``'s program binaries, or None when the disk cache is off
    (``TESSERA_DISK_CACHE=0``); see the module docstring."""
    if os.environ.get("TESSERA_DISK_CACHE", "").strip().lower() in _OFF:
        return None
    root = os.environ.get("TESSERA_CACHE_DIR")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"),
                                                                 ".cache")
        root = os.path.join(base, "tessera_array")
    return Path(root) / backend


def numbered(text: str) -> str:
    """``text`` with a line number before each line (the dump of a failed source)."""
    return "\n".join(f"{i:4d} | {line}" for i, line in enumerate(text.splitlines(), 1))


class BuildStack:
    """Programs and kernels of one backend, compiled once (see the module docstring).

    Parameters
    ----------
    dialect : Dialect
        The backend's compiler.
    version : str, optional
        The library version the disk key holds (default: tessera_array's).
    """

    def __init__(self, dialect: Dialect, *, version: str | None = None):
        if version is None:
            from tessera_array import __version__ as version
        self.dialect = dialect
        self.version = version
        name = dialect.backend
        self._programs = memo(f"{name}.programs")  # (scope, digest, options) -> program
        self._kernels = memo(f"{name}.kernels")  # (scope, digest, options, name, sig) -> kernel
        self._fingerprints = memo(f"{name}.fingerprints")  # scope -> dialect.fingerprint
        self._lock = threading.RLock()
        # Programs made after a memory miss: compiled from source, loaded from disk.
        self.stats = {"compiled": 0, "loaded": 0}

    def build_count(self) -> int:
        """How many programs this stack has made (memory misses; hits do not count)."""
        return self.stats["compiled"] + self.stats["loaded"]

    def key(self, context, source: KernelSource, options: tuple) -> str:
        """The disk key of ``source`` built with ``options`` for ``context``."""
        scope = self.dialect.scope(context)
        fp = self._fingerprints.get(scope)
        if fp is None:
            fp = self._fingerprints[scope] = self.dialect.fingerprint(context)
        h = hashlib.sha256()
        for part in ("tessera", self.version, self.dialect.backend, source.digest,
                     "\x1f".join(options), fp):
            h.update(part.encode() + b"\0")
        return h.hexdigest()

    def program(self, context, source: KernelSource, options: tuple = ()):
        """The program of ``source`` built with ``options`` for ``context``.

        Raises
        ------
        KernelCompileError
            The compiler rejected the source (the backend, options, log and source).
        """
        options = tuple(options)
        mkey = (self.dialect.scope(context), source.digest, options)
        prg = self._programs.get(mkey)
        if prg is not None:
            return prg
        with self._lock:
            prg = self._programs.get(mkey)
            if prg is None:
                prg = self._programs[mkey] = self._make(context, source, options)
        return prg

    def _make(self, context, source: KernelSource, options: tuple):
        folder = disk_cache_dir(self.dialect.backend) if self.dialect.disk_cache(context) \
            else None
        path = None
        if folder is not None:
            key = self.key(context, source, options)
            path = folder / key[:2] / f"{key}.bin"
            prg = self._load(context, path, options)
            if prg is not None:
                self.stats["loaded"] += 1
                return prg
        try:
            prg = self.dialect.compile(context, source.text, options)
        except BuildFailure as err:
            backend = self.dialect.backend
            raise KernelCompileError(
                f"{backend}: building {source.name} failed. Received: "
                f"options={' '.join(options)}\n{err.log}\n--- source ---\n"
                f"{numbered(source.text)}",
                backend=backend, options=options, log=err.log, source=source.text,
            ) from err
        self.stats["compiled"] += 1
        if path is not None:
            self._save(path, self.dialect.binary(prg))
        return prg

    def _load(self, context, path: Path, options: tuple):
        try:
            binary = path.read_bytes()
        except OSError:  # (not there, or unreadable: a miss)
            return None
        try:
            return self.dialect.load(context, binary, options)
        except Exception:  # noqa: BLE001 - a stale or broken binary is compiled again
            try:
                path.unlink()
            except OSError:
                pass
            return None

    @staticmethod
    def _save(path: Path, binary) -> None:
        """Write ``binary`` to ``path`` atomically (a concurrent reader sees the whole file
        or none); a folder that cannot be written leaves the program unsaved."""
        if not binary:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(binary)
                os.replace(tmp, path)
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError:
            pass

    def kernel(self, context, source: KernelSource, name: str, options: tuple = (),
               signature=None):
        """Kernel ``name`` of :meth:`program` ``(context, source, options)``, kept (one
        object per program, name and signature)."""
        options = tuple(options)
        kkey = (self.dialect.scope(context), source.digest, options, name, signature)
        knl = self._kernels.get(kkey)
        if knl is None:
            prg = self.program(context, source, options)
            knl = self._kernels[kkey] = self.dialect.kernel(prg, name, signature)
        return knl
