"""Hot reload: poll the config and policy files, load a changed config off the request path.

Polling (not inotify) because Kubernetes updates a mounted ConfigMap by writing a new
`..<timestamp>` directory and atomically swapping the `..data` symlink: the files the gateway
opens never change in place, so the only robust signal is the content behind the visible names.
Each poll hashes that content exactly as `Settings.revision` does; a different digest triggers a
full load on the watcher's own thread, never on the event loop that serves requests.
`on_change` receives only a fully valid `Settings`; a failed load goes to `on_error` and the
caller keeps its last good snapshot (§10: an invalid config never replaces a running one).
A given bad content is reported once, not on every poll.

Only settled content is loaded (issue 14): a change must read the same — every watched file's
size, modification time and content — twice, `settle_s` apart, and the settings loaded must
carry exactly the revision that settled. A file caught mid-write (truncated, or a prefix that
happens to parse, such as a policy file whose deny rule is not written yet) is neither applied
nor reported; the next poll looks again.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple, TypeVar

from gateway.config.loader import load_settings
from gateway.config.revision import digest, key_files, policy_files, read_file
from gateway.config.settings import Settings
from gateway.config.source import config_files

log = logging.getLogger("gateway.config")
_T = TypeVar("_T")

SETTLE_S = 0.5  # default wait between the two reads that show a change has settled


class _Seen(NamedTuple):
    """What one look at the watched files found: the revision digest and each file's stat."""

    revision: str
    stats: tuple[tuple[str, int, int], ...]


class ConfigWatcher:
    """Watches one config path (file or directory) and the policy paths of its last good load.

    Callbacks run on the watcher thread: an asyncio caller hands results to its loop with
    `loop.call_soon_threadsafe`. With `initial`, that snapshot is the baseline and only later
    changes are reported; without it, the first valid load is delivered to `on_change` too
    (nothing between the caller's own load and the first poll can be missed).
    """

    def __init__(
        self,
        path: str | Path,
        on_change: Callable[[Settings], None],
        on_error: Callable[[Exception], None],
        interval_s: float = 1.0,
        *,
        environ: Mapping[str, str] | None = None,
        initial: Settings | None = None,
        settle_s: float = SETTLE_S,
        settle: Callable[[float], None] | None = None,
    ) -> None:
        self._path = Path(os.path.abspath(path))
        self._on_change = on_change
        self._on_error = on_error
        self._interval = interval_s
        self._environ = environ
        self._good = initial
        self._seen: str | None = initial.revision if initial is not None else None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()  # one poll at a time (the thread, or a direct poll())
        self._settle_s = settle_s
        # The wait between the two reads of a change; injectable (tests move a writer forward
        # there). Stopping the watcher cuts it short.
        self._settle = settle or self._stop.wait

    @property
    def current(self) -> Settings | None:
        """The last valid settings (initial or delivered)."""
        return self._good

    def start(self) -> None:
        """Start polling on a daemon thread (idempotent)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="capgate-config-watch", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop polling; waits up to `timeout_s` for a load in flight to finish."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    def poll(self) -> bool:
        """Check once now (blocking); True when `on_change` received new settings.

        A change is loaded only once it has settled (see the module docstring); one still
        being written returns False and is looked at again by the next poll."""
        with self._lock:
            seen = self._look(self._good)
            if seen.revision == self._seen:
                return False
            if not self._settled(seen, self._good):
                return False
            try:
                settings = load_settings(self._path, environ=self._environ)
            except Exception as exc:  # any load failure keeps the last good snapshot
                if self._look(self._good) != seen:
                    return False  # the files moved during the load: not the settled content
                self._seen = seen.revision
                _notify(self._on_error, exc)
                return False
            if settings.revision != seen.revision:
                # New policy paths or key files (their files were not part of the settled
                # look), or content that moved during the load: settle what it names.
                again = self._look(settings)
                if again.revision != settings.revision or not self._settled(again, settings):
                    return False
            # The new revision covers the new policy paths; later fingerprints use them too.
            self._seen = settings.revision
            if self._good is not None and settings.revision == self._good.revision:
                return False
            self._good = settings
        _notify(self._on_change, settings)
        return True

    def fingerprint(self) -> str:
        """The revision the files on disk would have with the current policy paths."""
        return self._look(self._good).revision

    def _look(self, good: Settings | None) -> _Seen:
        """The revision the files on disk would have under `good`'s policy paths and key
        files, and the stat of each file read for it."""
        exists = self._path.exists()
        names = config_files(self._path) if exists else []
        config = [(p, read_file(p)) for p in names]
        paths = good.policy_paths if good is not None else ()
        others = policy_files(paths) + (key_files(good.listeners) if good is not None else [])
        stats = tuple(_stat(p) for p in [*names, *others])
        return _Seen(digest(config, others), stats)

    def _settled(self, seen: _Seen, good: Settings | None) -> bool:
        """Whether the files still look exactly like `seen` after the settle wait."""
        self._settle(self._settle_s)
        if self._stop.is_set():
            return False  # stopped meanwhile: nothing new is applied
        if self._look(good) != seen:
            log.debug("config or policy files still changing; waiting for them to settle")
            return False
        return True

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception:
                # Listing files can fail mid-swap; the next poll sees the settled state.
                log.exception("config watcher poll failed")
            self._stop.wait(self._interval)


def _stat(path: Path) -> tuple[str, int, int]:
    try:
        info = path.stat()
    except OSError:
        return str(path), -1, -1
    return str(path), info.st_size, info.st_mtime_ns


def _notify(callback: Callable[[_T], None], value: _T) -> None:
    try:
        callback(value)
    except Exception:
        # A failing callback must not stop reloads; its error is the caller's to fix.
        log.exception("config watcher callback failed")
