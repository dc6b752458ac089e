"""Where the values of recently loaded configs are, by revision: so that a problem found
after the config layer (a snapshot that cannot be built at start or on a reload) is reported
at its file:line like any other.

`Settings` carries no locations; its `revision` is a digest of the config's bytes, so the
located data recorded for a revision is exactly the data that `Settings` was built from. The
store keeps the last `KEEP` loads (a process loads its config at start and on each reload).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from gateway.config.problems import PathParts, Problem, format_path
from gateway.config.source import problem_at

KEEP = 8


@dataclass(frozen=True, slots=True)
class Places:
    root: Any  # the located data (LDict) of one load
    secrets: frozenset[str]  # values substituted from the environment: never in messages


_lock = threading.Lock()  # the config watcher loads on its own thread
_recent: OrderedDict[str, Places] = OrderedDict()


def remember(revision: str, root: Any, secrets: Collection[str]) -> None:
    with _lock:
        _recent[revision] = Places(root, frozenset(secrets))
        _recent.move_to_end(revision)
        while len(_recent) > KEEP:
            _recent.popitem(last=False)


def places_of(revision: str) -> Places | None:
    with _lock:
        return _recent.get(revision)


def problem(places: Places | None, parts: PathParts, message: str) -> Problem:
    """A problem at `parts` of the config with that revision (file:line when it is known)."""
    if places is None:
        return Problem(format_path(parts), None, message)
    return problem_at(places.root, parts, message)
