"""ConfigWatcher: Kubernetes-style symlink swaps, bad edits keep the last good settings."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from gateway.config import ConfigError, ConfigWatcher, load_settings
from gateway.config.settings import Settings


class Recorder:
    def __init__(self) -> None:
        self.changes: list[Settings] = []
        self.errors: list[Exception] = []

    def on_change(self, settings: Settings) -> None:
        self.changes.append(settings)

    def on_error(self, exc: Exception) -> None:
        self.errors.append(exc)


def publish(directory: Path, files: dict[str, str], generation: int) -> None:
    """What the kubelet does: write a new timestamped dir, then atomically swap `..data`."""
    target = directory / f"..2026_01_01_00_00_00.{generation:09d}"
    target.mkdir()
    for name, text in files.items():
        (target / name).write_text(text)
    tmp = directory / "..data_tmp"
    os.symlink(target.name, tmp)
    os.replace(tmp, directory / "..data")
    for name in files:
        if not (directory / name).is_symlink():
            os.symlink(f"..data/{name}", directory / name)


def wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def with_description(base: dict[str, Any], text: str) -> str:
    base["capabilities"][0]["description"] = text
    return yaml.safe_dump(base)


def test_a_configmap_swap_delivers_the_new_settings(base, env, config_dir):
    publish(config_dir, {"gateway.yaml": with_description(base, "v1")}, 1)
    initial = load_settings(config_dir, environ=env)
    seen = Recorder()
    watcher = ConfigWatcher(
        config_dir, seen.on_change, seen.on_error, interval_s=0.02, environ=env, initial=initial
    )
    watcher.start()
    try:
        publish(config_dir, {"gateway.yaml": with_description(base, "v2")}, 2)
        assert wait_for(lambda: bool(seen.changes))
    finally:
        watcher.stop()
    [new] = seen.changes
    assert new.capabilities[0].description == "v2"
    assert new.revision != initial.revision
    assert new.revision == load_settings(config_dir, environ=env).revision
    assert seen.errors == []
    assert watcher.current is new


def test_a_bad_edit_is_reported_once_and_never_replaces_the_good_settings(base, env, config_dir):
    publish(config_dir, {"gateway.yaml": with_description(base, "good")}, 1)
    initial = load_settings(config_dir, environ=env)
    seen = Recorder()
    watcher = ConfigWatcher(config_dir, seen.on_change, seen.on_error, environ=env, initial=initial)

    base["capabilities"][0]["risk"] = "extreme"
    publish(config_dir, {"gateway.yaml": yaml.safe_dump(base)}, 2)
    assert [watcher.poll() for _ in range(3)] == [False, False, False]
    assert seen.changes == []
    [error] = seen.errors
    assert isinstance(error, ConfigError)
    assert [p.path_in_file for p in error.problems] == ["capabilities[0].risk"]
    assert watcher.current is initial

    base["capabilities"][0]["risk"] = "high"
    publish(config_dir, {"gateway.yaml": yaml.safe_dump(base)}, 3)
    assert watcher.poll() is True
    assert seen.changes[0].capabilities[0].risk == "high"


def test_an_unchanged_config_is_not_reloaded(base, env, write):
    path = write(base)
    seen = Recorder()
    initial = load_settings(path, environ=env)
    watcher = ConfigWatcher(path, seen.on_change, seen.on_error, environ=env, initial=initial)
    assert watcher.poll() is False
    path.write_text(path.read_text())  # touched, same bytes
    assert watcher.poll() is False
    assert seen.changes == []
    assert seen.errors == []


def test_a_policy_file_edit_triggers_a_reload(base, env, write, config_dir):
    policies = config_dir / "policies"
    policies.mkdir()
    (policies / "limits.yaml").write_text("policies: []\n")
    base["policies"] = {"paths": ["policies"]}
    path = write(base)
    seen = Recorder()
    initial = load_settings(path, environ=env)
    watcher = ConfigWatcher(path, seen.on_change, seen.on_error, environ=env, initial=initial)
    (policies / "limits.yaml").write_text("policies: [] # tightened\n")
    assert watcher.poll() is True
    assert seen.changes[0].revision != initial.revision


def test_without_initial_settings_the_first_valid_load_is_delivered(base, env, write):
    path = write(base)
    seen = Recorder()
    watcher = ConfigWatcher(path, seen.on_change, seen.on_error, environ=env)
    assert watcher.poll() is True
    assert watcher.poll() is False
    assert [s.revision for s in seen.changes] == [load_settings(path, environ=env).revision]


def test_a_failing_callback_does_not_stop_the_watcher(base, env, write):
    path = write(with_description(base, "one"))
    calls: list[str] = []

    def on_change(settings: Settings) -> None:
        calls.append(settings.capabilities[0].description)
        raise RuntimeError("callback bug")

    watcher = ConfigWatcher(path, on_change, lambda exc: None, interval_s=0.02, environ=env)
    watcher.start()
    try:
        assert wait_for(lambda: calls == ["one"])
        path.write_text(with_description(base, "two"))
        assert wait_for(lambda: calls == ["one", "two"])
    finally:
        watcher.stop()


def _public_pem() -> str:
    from cryptography.hazmat.primitives import serialization  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec  # noqa: PLC0415

    key = ec.generate_private_key(ec.SECP256R1()).public_key()
    return key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()


def test_key_files_are_watched_jwks_and_public_key_files_alike(base, env, write, config_dir):
    (config_dir / "idp.pem").write_text(_public_pem())
    (config_dir / "jwks.json").write_text('{"keys": []}')
    jwt = base["listeners"][0]["jwt"]
    jwt["keys"].append({"kid": "ec1", "alg": "ES256", "public_key_file": "idp.pem"})
    jwt["jwks_file"] = "jwks.json"
    path = write(base)
    seen = Recorder()
    initial = load_settings(path, environ=env)
    watcher = ConfigWatcher(path, seen.on_change, seen.on_error, environ=env, initial=initial)
    assert watcher.poll() is False
    # A rotated public key file (a mounted Secret updated in place) is a new revision...
    (config_dir / "idp.pem").write_text(_public_pem())
    assert watcher.poll() is True
    rotated = seen.changes[-1].listeners[0].jwt
    assert rotated is not None and initial.listeners[0].jwt is not None
    assert rotated.keys[1].public_key_pem != initial.listeners[0].jwt.keys[1].public_key_pem
    # ...and so is a new JWKS file content.
    (config_dir / "jwks.json").write_text('{"keys": []}\n')
    assert watcher.poll() is True
    assert seen.errors == []
