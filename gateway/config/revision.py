"""The config revision: one short SHA-256 over the config files and the policy files they name.

Every audit event and span carries it (§12). The watcher computes the same digest to notice a
change, so a revision equal to the running one means "nothing to reload". Files are read through
their visible names, following symlinks: a Kubernetes ConfigMap swap (a new `..data` target)
changes the digest exactly when some content changed.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

SHORT_HASH = 16
POLICY_SUFFIXES = (".yaml", ".yml")


def policy_files(paths: Iterable[str | Path]) -> list[Path]:
    """Policy files under `paths` (files as given; directories walked, hidden entries skipped)."""
    found: list[Path] = []
    for entry in paths:
        path = Path(entry)
        if path.is_file():
            found.append(path)
            continue
        if not path.is_dir():
            continue
        for folder, dirs, names in os.walk(path, followlinks=True):
            # Hidden entries include Kubernetes' `..data` and `..<timestamp>` directories, which
            # the visible names already point into; walking both would count files twice.
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            found.extend(
                Path(folder, n)
                for n in sorted(names)
                if not n.startswith(".") and n.endswith(POLICY_SUFFIXES)
            )
    return found


def key_files(listeners: Iterable[Any]) -> list[Path]:
    """Verification-key files the listeners read (JWKS files, public key files): part of the
    revision, so rotating a key in a file is a change the watcher reloads, like an edit of the
    config itself."""
    found: list[Path] = []
    for listener in listeners:
        jwt = getattr(listener, "jwt", None)
        if jwt is None:
            continue
        if jwt.jwks_file:
            found.append(Path(jwt.jwks_file))
        found += [Path(k.public_key_file) for k in jwt.keys if k.public_key_file]
    return found


def digest(
    config: Sequence[tuple[Path, bytes]],
    policies: Sequence[Path],
    *,
    read: Callable[[Path], bytes] | None = None,
) -> str:
    """Short hex SHA-256 over (name, content) of each config file and each policy file.
    `read` supplies a policy file's bytes (default: read it now) — the snapshot build passes
    the bytes it compiled, to check they are the ones a revision covers."""
    h = hashlib.sha256()
    get = read or read_file
    for label, data in [(p.name, d) for p, d in config] + [(str(p), get(p)) for p in policies]:
        encoded = label.encode()
        h.update(len(encoded).to_bytes(4, "big") + encoded)
        h.update(len(data).to_bytes(8, "big") + data)
    return h.hexdigest()[:SHORT_HASH]


def read_file(path: Path) -> bytes:
    """Content of a watched file; a marker when it cannot be read right now."""
    try:
        return path.read_bytes()
    except OSError:
        # Vanished between listing and reading (a swap in progress): hash as absent; the next
        # poll sees the settled state.
        return b"\x00<unreadable>"
