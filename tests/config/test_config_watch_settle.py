"""ConfigWatcher loads only settled content (issue 14 #10): a file written in place, in chunks,
is neither applied nor reported until it reads the same across the settle wait.

Deterministic: the settle wait is injected and moves a chunked writer forward, so every poll
sees the file change under it until the last chunk is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from gateway.config import ConfigWatcher, load_settings
from gateway.config.settings import Settings

DENY = "policies:\n  - name: a-open\n    rules: [{when: 'true', effect: allow}]\n" + (
    "  - name: z-gate\n    rules: [{when: 'true', effect: deny, message: closed}]\n"
)
CUT = DENY.index("  - name: z-gate")  # the prefix up to here is a valid allow-only set


class ChunkedWriter:
    """Truncates `path` now and writes one chunk per settle wait."""

    def __init__(self, path: Path, chunks: list[str]) -> None:
        self.chunks = list(chunks)
        self.handle = path.open("w")

    def step(self, _seconds: float) -> None:
        if self.chunks:
            self.handle.write(self.chunks.pop(0))
            self.handle.flush()
            if not self.chunks:
                self.handle.close()


class Recorder:
    def __init__(self) -> None:
        self.changes: list[Settings] = []
        self.errors: list[Exception] = []

    def on_change(self, settings: Settings) -> None:
        self.changes.append(settings)

    def on_error(self, exc: Exception) -> None:
        self.errors.append(exc)


def _watched(base: dict[str, Any], env: dict[str, str], write: Any, config_dir: Path) -> Path:
    policies = config_dir / "policies"
    policies.mkdir()
    (policies / "gate.yaml").write_text("policies: []\n")
    base["policies"] = {"paths": ["policies"]}
    return write(base)  # type: ignore[no-any-return]


def test_a_policy_file_written_in_place_is_loaded_only_once_settled(base, env, write, config_dir):
    path = _watched(base, env, write, config_dir)
    initial = load_settings(path, environ=env)
    seen = Recorder()
    state: dict[str, ChunkedWriter] = {}
    watcher = ConfigWatcher(
        path,
        seen.on_change,
        seen.on_error,
        environ=env,
        initial=initial,
        settle=lambda s: state["writer"].step(s) if state else None,
    )
    state["writer"] = ChunkedWriter(config_dir / "policies" / "gate.yaml", [DENY[:CUT], DENY[CUT:]])
    assert watcher.poll() is False  # empty file, then the allow-only prefix: still changing
    assert watcher.poll() is False  # the prefix, then the whole file: still changing
    assert seen.changes == [] and seen.errors == []
    assert watcher.poll() is True  # unchanged across the settle wait
    (delivered,) = seen.changes
    assert delivered.revision == load_settings(path, environ=env).revision
    assert (config_dir / "policies" / "gate.yaml").read_text() == DENY


def test_a_config_file_written_in_place_is_not_reported_broken_while_it_is_written(
    base, env, write, config_dir
):
    path = write(base)
    initial = load_settings(path, environ=env)
    seen = Recorder()
    state: dict[str, ChunkedWriter] = {}
    watcher = ConfigWatcher(
        path,
        seen.on_change,
        seen.on_error,
        environ=env,
        initial=initial,
        settle=lambda s: state["writer"].step(s) if state else None,
    )
    base["capabilities"][0]["description"] = "rewritten in place"
    text = yaml.safe_dump(base, sort_keys=False)
    half = len(text) // 2
    state["writer"] = ChunkedWriter(path, [text[:half], text[half:]])
    assert watcher.poll() is False
    assert watcher.poll() is False
    assert seen.errors == []  # a half-written config is not a bad edit to report
    assert watcher.poll() is True
    assert seen.changes[0].capabilities[0].description == "rewritten in place"
