"""The start-up warning about an unreachable `redis.url` names the result cache only while the
cache keeps its entries there (ADR 0043: with `redis.limits_url` they live in limits' Redis)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import yaml

from gateway.config.loader import load_settings
from gateway.process.reach import redis_features
from tests.cache.conftest import HERE, environ_for

CACHE = "the result cache (calls go uncached)"


def _features(tmp_path: Path, limits_url: str | None) -> list[str]:
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["policies"]["paths"] = [str(HERE / "policies.yaml")]
    if limits_url is not None:
        data["redis"]["limits_url"] = limits_url
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(data))
    environ = environ_for("127.0.0.1:9", "redis://127.0.0.1:9/0", tempfile.mkdtemp(prefix="cg-"))
    return redis_features(load_settings(path, environ=environ))


def test_the_cache_depends_on_redis_url_only_without_a_limits_redis(tmp_path: Path) -> None:
    assert CACHE in _features(tmp_path, None)
    assert CACHE not in _features(tmp_path, "redis://127.0.0.1:10/0")
