"""Hot reload: poll a policy directory, recompile off the request path, swap atomically.

The watcher hashes the policy files (names and contents, following symlinks, so a
Kubernetes ConfigMap's `..data` symlink swap is seen) every `interval_s`. On a change it
compiles the new set in its own thread; success replaces `current` in one assignment
(readers see the old or the new set, never a mix) and calls `on_swap`; failure keeps the
last good set and calls `on_error` with the `PolicyLoadError` saying why.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from policy.engine import PolicySet
from policy.errors import PolicyLoadError
from policy.files import read_sources, revision_of
from policy.loader import load_policy_set
from policy.model import Limits

__all__ = ["PolicyWatcher"]

_log = logging.getLogger(__name__)


class PolicyWatcher:
    """Keeps `current` equal to the last policy set under `directory` that compiled."""

    def __init__(
        self,
        directory: Path,
        on_swap: Callable[[PolicySet], None],
        on_error: Callable[[Exception], None],
        *,
        interval_s: float = 2.0,
        registry: Mapping[str, Mapping[str, Any]] | None = None,
        backend: str = "cel-expr-python",
        limits: Limits = Limits(),  # noqa: B008 - frozen value object
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self._directory = directory
        self._on_swap = on_swap
        self._on_error = on_error
        self._interval = interval_s
        self._options: dict[str, Any] = {
            "registry": registry,
            "backend": backend,
            "limits": limits,
            "clock": clock,
        }
        self._current: PolicySet | None = None
        self._seen: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def current(self) -> PolicySet | None:
        """The set in force (None before the first successful load)."""
        return self._current

    def start(self) -> PolicySet:
        """Load synchronously (raising `PolicyLoadError` if invalid), then watch in a thread."""
        if self._thread is not None:
            raise RuntimeError("the watcher is already running")
        self._current = load_policy_set(self._directory, **self._options)
        self._seen = self._current.revision
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="policy-watcher", daemon=True)
        self._thread.start()
        return self._current

    def stop(self, timeout: float | None = 5.0) -> None:
        """Stop watching; the current set stays usable."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def __enter__(self) -> PolicyWatcher:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def poll(self) -> bool:
        """Check once; True when a new set was swapped in."""
        revision = self._revision()
        if revision == self._seen:
            return False
        self._seen = revision
        try:
            fresh = load_policy_set(self._directory, **self._options)
        except PolicyLoadError as exc:
            _log.warning(
                "policy reload failed; keeping revision %s: %s", self._revision_in_force(), exc
            )
            self._notify(self._on_error, exc)
            return False
        self._seen = fresh.revision  # what was actually read, if the files moved meanwhile
        self._current = fresh
        _log.info("policy set %s swapped in", fresh.revision)
        self._notify(self._on_swap, fresh)
        return True

    def _revision(self) -> str:
        return revision_of(read_sources(self._directory))

    def _revision_in_force(self) -> str:
        return self._current.revision if self._current else "none"

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.poll()
            except Exception as exc:
                _log.exception("policy watcher poll failed")
                self._notify(self._on_error, exc)

    @staticmethod
    def _notify(callback: Callable[[Any], None], value: Any) -> None:
        try:
            callback(value)
        except Exception:
            _log.exception("policy watcher callback failed")
