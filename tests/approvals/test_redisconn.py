"""Connecting to Redis from one URL, with bounded timeouts; mapping outages to one exception."""

from __future__ import annotations

import pytest
from redis import exceptions as rexc
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from gateway.config.settings import RedisSettings
from gateway.state.connections import (
    CONNECT_TIMEOUT_S,
    OPERATION_TIMEOUT_S,
    RedisUnavailable,
    connect,
    is_cluster,
    mapped_errors,
)


def _kwargs(client: Redis) -> dict[str, object]:
    return dict(client.connection_pool.connection_kwargs)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("redis://127.0.0.1:6390/3", {"host": "127.0.0.1", "port": 6390, "db": 3}),
        ("redis://:s3cret@10.0.0.5:6379/0", {"host": "10.0.0.5", "password": "s3cret"}),
        ("unix:///run/redis/redis.sock?db=2", {"path": "/run/redis/redis.sock", "db": 2}),
    ],
)
def test_plain_urls_get_bounded_timeouts(url: str, expected: dict[str, object]) -> None:
    client = connect(RedisSettings(url=url))
    assert isinstance(client, Redis)
    kwargs = _kwargs(client)
    for name, value in expected.items():
        assert kwargs[name] == value
    assert kwargs["socket_connect_timeout"] == CONNECT_TIMEOUT_S
    assert kwargs["socket_timeout"] == OPERATION_TIMEOUT_S
    assert kwargs["health_check_interval"] > 0
    assert not is_cluster(client)


def test_tls_urls_use_tls() -> None:
    client = connect(RedisSettings(url="rediss://redis.example:6380/0"))
    assert isinstance(client, Redis)
    assert client.connection_pool.connection_class.__name__ == "SSLConnection"


def test_cluster_urls_make_a_cluster_client() -> None:
    client = connect(RedisSettings(url="redis+cluster://127.0.0.1:7000,127.0.0.1:7001"))
    assert isinstance(client, RedisCluster)
    assert is_cluster(client)


@pytest.mark.parametrize(
    "url",
    [
        "",
        "http://127.0.0.1:6379",
        "redis+sentinel://127.0.0.1:26379",  # no service name
        "redis+sentinel://127.0.0.1:26379/main/zero",  # db not a number
        "redis+cluster://127.0.0.1:7000/2",  # clusters have only db 0
        "redis+cluster://",
        "redis+sentinel://host:port/main",
    ],
)
def test_malformed_or_unsupported_urls_are_refused_without_echoing_them(url: str) -> None:
    with pytest.raises(ValueError) as err:
        connect(RedisSettings(url=url or None))
    if url:
        assert url not in str(err.value)


def test_a_password_never_appears_in_the_error() -> None:
    with pytest.raises(ValueError) as err:
        connect(RedisSettings(url="ftp://user:hunter2@host:1/0"))
    assert "hunter2" not in str(err.value)


@pytest.mark.parametrize(
    "error",
    [
        rexc.ConnectionError("refused"),
        rexc.TimeoutError("slow"),
        rexc.BusyLoadingError("loading"),
        rexc.ReadOnlyError("replica"),
        rexc.ClusterDownError("down"),
        ConnectionResetError("reset"),
    ],
)
def test_outages_map_to_redis_unavailable(error: Exception) -> None:
    with pytest.raises(RedisUnavailable) as err, mapped_errors():
        raise error
    assert err.value.__cause__ is error


def test_script_and_usage_errors_are_not_outages() -> None:
    with pytest.raises(rexc.ResponseError), mapped_errors():
        raise rexc.ResponseError("ERR wrong number of arguments")
