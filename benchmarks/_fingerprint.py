"""Fingerprints: a sha256 over the source files a benchmark exercises.

Each benchmark declares the files on its code path as paths or globs relative to
the repository root (``tessera_array/_array.py``, ``backends/numpy/_ops*.py``).
The fingerprint hashes, in sorted order, each matched file's relative path and
the sha256 of its bytes, then the benchmark's own definition (its two timed
expressions and its parameters). A baseline stores the fingerprint of what it
measured; when the sources change, the ratchet reports STALE instead of
comparing a new kernel against an old number.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

__all__ = ["FingerprintError", "definition_hash", "file_hashes", "fingerprint", "resolve_sources"]


class FingerprintError(ValueError):
    """A declared source path or glob matched no file (a typo would freeze the fingerprint)."""


def resolve_sources(patterns, root) -> list:
    """Sorted relative POSIX paths of the files matched by ``patterns`` under ``root``.

    Every pattern must match at least one file: a pattern matching nothing would
    hash to the same value forever, and its benchmark would never go stale.
    """
    root = Path(root)
    found = set()
    for pattern in patterns:
        if Path(pattern).is_absolute() or ".." in Path(pattern).parts:
            raise FingerprintError(
                f"fingerprint: source patterns must be relative paths inside the repository. "
                f"Received: pattern={pattern!r}"
            )
        matched = [p for p in root.glob(pattern) if p.is_file() and "__pycache__" not in p.parts]
        if not matched:
            raise FingerprintError(
                f"fingerprint: the source pattern matches no file, so the fingerprint could not "
                f"see changes to it. Received: pattern={pattern!r}, root={str(root)!r}"
            )
        found.update(p.relative_to(root).as_posix() for p in matched)
    return sorted(found)


def file_hashes(paths, root) -> dict:
    """``{relative path: sha256 hex of the file's bytes}``."""
    root = Path(root)
    return {p: hashlib.sha256((root / p).read_bytes()).hexdigest() for p in paths}


def definition_hash(definition: dict) -> str:
    """sha256 of a benchmark's definition (expressions, parameters), as canonical JSON."""
    text = json.dumps(definition, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def fingerprint(files: dict, definition: str) -> str:
    """Combine per-file hashes (``file_hashes``) and a definition hash into one sha256."""
    h = hashlib.sha256()
    for path in sorted(files):
        h.update(path.encode())
        h.update(b"\0")
        h.update(files[path].encode())
        h.update(b"\n")
    h.update(b"definition\0")
    h.update(definition.encode())
    return h.hexdigest()
