"""Hot reload: poll the config and policy files, load a changed config off the request path.

Polling (not inotify) because Kubernetes updates a mounted ConfigMap by writing a new
`..<timestamp>` directory and atomically swapping the `..data` symlink: the files the gateway
opens never change in place, so the only robust signal is the content behind the visible names.
Each poll hashes that content exactly as `Settings.revision` does; a different digest triggers a
full load on the watcher's own thread, never on the event loop that serves requests.
`on_change` receives only a fully valid `Settings`; a failed load goes to `on_error` and the
caller keeps its last good snapshot (§10: an invalid config never replaces a running one).
A given bad content is reported once, not on every poll.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TypeVar

from gateway.config.loader import load_settings
from gateway.config.revision import digest, key_files, policy_files, read_file
from gateway.config.source import config_files
from gateway.settings import Settings

log = logging.getLogger("gateway.config")
_T = TypeVar("_T")


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
        """Check once now (blocking); True when `on_change` received new settings."""
        with self._lock:
            fingerprint = self.fingerprint()
            if fingerprint == self._seen:
                return False
            try:
                settings = load_settings(self._path, environ=self._environ)
            except Exception as exc:  # any load failure keeps the last good snapshot
                self._seen = fingerprint
                _notify(self._on_error, exc)
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
        exists = self._path.exists()
        config = [(p, read_file(p)) for p in config_files(self._path)] if exists else []
        good = self._good
        paths = good.policy_paths if good is not None else ()
        keys = key_files(good.listeners) if good is not None else []
        return digest(config, policy_files(paths) + keys)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception:
                # Listing files can fail mid-swap; the next poll sees the settled state.
                log.exception("config watcher poll failed")
            self._stop.wait(self._interval)


def _notify(callback: Callable[[_T], None], value: _T) -> None:
    try:
        callback(value)
    except Exception:
        # A failing callback must not stop reloads; its error is the caller's to fix.
        log.exception("config watcher callback failed")
