"""Which files make a policy set, in which order, and the set's revision.

Load order is lexicographic by path. Directories are walked recursively, following
symlinks but skipping dot-entries: a Kubernetes ConfigMap mount shows each key as a
symlink into `..data/`, which is itself a symlink swapped atomically on update.
`*_test.yaml` files are test suites, not policies.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["SourceFile", "discover", "read_sources", "revision_of"]

_POLICY_SUFFIXES = (".yaml", ".yml")
_TEST_SUFFIXES = ("_test.yaml", "_test.yml")


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One file: its display label (as given), its name within its root, its bytes."""

    label: str
    relative: str
    data: bytes | None
    error: str | None = None


def discover(paths: Path | Sequence[Path], *, tests: bool = False) -> list[tuple[Path, str]]:
    """(path, name relative to its root) of every policy file (or test suite) in load order."""
    roots = [paths] if isinstance(paths, Path | str) else list(paths)
    found: dict[str, tuple[Path, str]] = {}
    for root in map(Path, roots):
        if root.is_dir():
            for file in _walk(root):
                if _wanted(file.name, tests):
                    found[str(file)] = (file, file.relative_to(root).as_posix())
        else:
            found[str(root)] = (root, root.name)
    return [found[key] for key in sorted(found)]


def _wanted(name: str, tests: bool) -> bool:
    is_test = name.endswith(_TEST_SUFFIXES)
    return name.endswith(_POLICY_SUFFIXES) and is_test == tests


def _walk(root: Path) -> list[Path]:
    files: list[Path] = []
    seen: set[str] = set()
    for current, dirs, names in os.walk(root, followlinks=True):
        real = os.path.realpath(current)
        if real in seen:  # a symlink loop
            dirs.clear()
            continue
        seen.add(real)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        files += [Path(current, n) for n in names if not n.startswith(".")]
    return files


def read_sources(paths: Path | Sequence[Path], *, tests: bool = False) -> list[SourceFile]:
    """The files `discover` finds, read; an unreadable file carries its error."""
    out = []
    for path, relative in discover(paths, tests=tests):
        try:
            out.append(SourceFile(str(path), relative, path.read_bytes()))
        except OSError as exc:
            out.append(SourceFile(str(path), relative, None, exc.strerror or str(exc)))
    return out


def revision_of(sources: Sequence[SourceFile]) -> str:
    """Short SHA-256 over the files' names and contents, in load order."""
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.relative.encode() + b"\0")
        digest.update(hashlib.sha256(source.data or b"").digest())
    return digest.hexdigest()[:12]
