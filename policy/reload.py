"""Hot reload: poll a policy directory, recompile off the request path, swap atomically.

The watcher hashes the policy files (names and contents, following symlinks, so a
Kubernetes ConfigMap's `..data` symlink swap is seen) every `interval_s`. On a change it
compiles the new set in its own thread; success replaces `current` in one assignment
(readers see the old or the new set, never a mix) and calls `on_swap`; failure keeps the
last good set and calls `on_error` with the `PolicyLoadError` saying why.

Only settled content is compiled (issue 14): a change must read the same — names, sizes,
modification times and contents — twice, `settle_s` apart, and the set compiled must be
exactly what settled. A file caught mid-write (truncated, or a prefix that happens to parse,
such as an allow policy whose deny sibling is not written yet) is neither applied nor
reported; the next poll looks again.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from policy.engine import PolicySet
from policy.errors import PolicyLoadError
from policy.files import SourceFile, read_sources, revision_of
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
        settle_s: float = 0.25,
        settle: Callable[[float], None] | None = None,
    ) -> None:
        self._directory = directory
        self._on_swap = on_swap
        self._on_error = on_error
        self._interval = interval_s
        self._settle_s = settle_s
        # Waits `settle_s` between the two reads of a change; injectable (tests move a writer
        # forward there instead of waiting). Stopping the watcher cuts the wait short.
        self._settle = settle or self._stop_wait
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
        """Check once; True when a new set was swapped in.

        A change is compiled only once it has settled (see the module docstring); one still
        being written returns False and is looked at again by the next poll."""
        state = self._state()
        revision = revision_of(state[0])
        if revision == self._seen:
            return False
        self._settle(self._settle_s)
        if self._stop.is_set():
            return False  # stopping: nothing new is applied
        if self._state() != state:
            _log.debug("policy files still changing; waiting for them to settle")
            return False
        try:
            fresh = load_policy_set(self._directory, **self._options)
        except PolicyLoadError as exc:
            if self._state() != state:
                return False  # the files moved during the load: not the settled content
            self._seen = revision
            _log.warning(
                "policy reload failed; keeping revision %s: %s", self._revision_in_force(), exc
            )
            self._notify(self._on_error, exc)
            return False
        if fresh.revision != revision:
            return False  # what compiled is not what settled: look again next poll
        self._seen = revision
        self._current = fresh
        _log.info("policy set %s swapped in", fresh.revision)
        self._notify(self._on_swap, fresh)
        return True

    def _state(self) -> tuple[list[SourceFile], list[tuple[str, int, int]]]:
        """The files' contents, and each one's (label, size, mtime): a rewrite with the same
        bytes still counts as a change that has to settle."""
        sources = read_sources(self._directory)
        return sources, [_stat(source.label) for source in sources]

    def _stop_wait(self, seconds: float) -> None:
        self._stop.wait(seconds)

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


def _stat(path: str) -> tuple[str, int, int]:
    try:
        info = os.stat(path)
    except OSError:
        return path, -1, -1
    return path, info.st_size, info.st_mtime_ns
