"""Kernel sources read together with the headers they include.

A :class:`SourceTree` is one dialect's view of ``kernels/``: the folders it searches
(its own, e.g. ``kernels/opencl``, then the shared ``kernels/include``, where
``#include "tessera/<name>.h"`` finds the headers every dialect shares). Loading a file
follows its quoted includes (``#include "name"``; angle-bracket includes are the
compiler's own), recursively, each resolved against the including file's folder first
and then the tree's folders in order. The result, a :class:`KernelSource`, carries the
text, every header it reached and a digest over all of them, so a cache keyed by the
digest misses when a header changes.

Some compilers get one string (OpenCL's ``clCreateProgramWithSource`` has no include
path that survives a binary cache): a tree made with ``paste=True`` pastes each header
in place of its ``#include`` line, as a preprocessor would (a header included twice is
pasted twice; include guards do their usual work). Others (NVRTC, hiprtc) take include
folders: with ``paste=False`` the text stays as on disk and the headers only feed the
digest.

Generated sources (OpenCL C built by the host) have no file: :func:`from_text`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from .cache import memo

__all__ = ["KernelSource", "SourceTree", "from_text"]

_INCLUDE = re.compile(r'\s*#\s*include\s+"([^"]+)"\s*(//.*)?$')
_MAX_DEPTH = 32  # deeper include chains are taken for a cycle


class KernelSource(NamedTuple):
    """One program's source, as the build stack compiles and keys it."""

    name: str  # what messages call it: "kernels/opencl/matvec.cl", "generated program"
    text: str  # the text the compiler gets (headers pasted in by a pasting tree)
    headers: tuple  # (name, text) of every header the source reached, in include order
    digest: str  # sha256 (hex) of the text and every header: the source's share of a key


def _digest(text: str, headers: tuple) -> str:
    h = hashlib.sha256(text.encode())
    for name, body in headers:
        h.update(b"\0" + name.encode() + b"\0" + body.encode())
    return h.hexdigest()


def from_text(text: str, name: str = "generated program") -> KernelSource:
    """A :class:`KernelSource` of ``text``, which includes nothing."""
    return KernelSource(name, text, (), _digest(text, ()))


class SourceTree:
    """The kernel sources of one dialect (see the module docstring).

    Parameters
    ----------
    backend : str
        The backend's name: the name of its memo of loaded sources.
    folders : sequence of path-like
        Where files and headers are looked up, in order.
    paste : bool
        Paste each included header in place of its ``#include`` line.
    root : path-like, optional
        Names in messages are relative to ``root``'s parent (``kernels/opencl/x.cl``
        for the ``kernels`` folder), else absolute.
    """

    def __init__(self, backend: str, folders: Sequence, *, paste: bool, root=None):
        self.folders = tuple(Path(f) for f in folders)
        self.paste = paste
        self._base = None if root is None else Path(root).parent
        self._loaded = memo(f"{backend}.sources")  # file name -> KernelSource

    def load(self, file: str) -> KernelSource:
        """The :class:`KernelSource` of ``file`` (looked up in the tree's folders)."""
        hit = self._loaded.get(file)
        if hit is None:
            path = self._find(file, None, None)
            headers: list = []
            text = self._read(path, headers, 0)
            hit = self._loaded[file] = KernelSource(self._label(path), text, tuple(headers),
                                                    _digest(text, tuple(headers)))
        return hit

    def _label(self, path: Path) -> str:
        if self._base is not None:
            try:
                return path.relative_to(self._base).as_posix()
            except ValueError:
                pass
        return str(path)

    def _find(self, name: str, here, includer):
        folders = ((here,) if here is not None else ()) + self.folders
        for folder in folders:
            path = folder / name
            if path.is_file():
                return path
        where = ", ".join(str(f) for f in folders)
        if includer is None:
            raise FileNotFoundError(
                f"SourceTree.load: expected a kernel source in one of: {where}. "
                f"Received: file={name!r}")
        raise FileNotFoundError(
            f"SourceTree.load: {self._label(includer)} includes {name!r}, expected in one "
            f"of: {where}")

    def _read(self, path: Path, headers: list, depth: int) -> str:
        if depth > _MAX_DEPTH:
            raise RecursionError(
                f"SourceTree.load: includes nest deeper than {_MAX_DEPTH} levels (a cycle?) "
                f"at {self._label(path)}")
        lines = []
        for line in path.read_text().splitlines():
            hit = _INCLUDE.match(line)
            if hit is None:
                lines.append(line)
                continue
            header = self._find(hit.group(1), path.parent, path)
            at = len(headers)
            headers.append(None)  # (its place in include order: before what it includes)
            body = self._read(header, headers, depth + 1)
            headers[at] = (self._label(header), header.read_text())
            lines.append(body.rstrip("\n") if self.paste else line)
        return "\n".join(lines) + "\n"
