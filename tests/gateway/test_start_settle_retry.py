"""`capgate serve`'s initial load retries a policy file that moved while it loaded (issue 14
follow-up): a policy file that changes between reading the settings and compiling the snapshot
is a writer still at work, not a bad config. The load runs again `settle_s` later (bounded) and
starts with the content that settled; only a file that never holds still refuses the start.

Through the loader `serve` runs (`load_everything`, the real example upstream's descriptor set,
real CEL) and the real gateway started from what it loaded. The edit lands through the one hook
between the two moments: `prepare`, which serve runs after reading the settings and before the
snapshot is built."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import yaml

from gateway.audit.sinks import MemorySink
from gateway.config.problems import ConfigError
from gateway.config.settings import Settings
from gateway.process.load import SETTLE_ATTEMPTS, load_everything
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from gateway.upstream.channels import ChannelPool
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import Env
from tests.gateway.test_policy_reload_settle import gate
from tests.gateway.test_reload_settled_build import answer

pytestmark = pytest.mark.integration

MOVED = "the policy files changed after their content settled and before it compiled"


def _config(tmp_path: Path) -> tuple[Path, Path]:
    policies = tmp_path / "policies"
    policies.mkdir()
    target = policies / "gate.yaml"
    target.write_text(gate("v1"))
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(HERE / "../../examples/orders/orders.pb")
    data["policies"]["paths"] = [str(policies)]
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(data))
    return config, target


async def test_a_policy_file_that_moves_during_the_initial_load_is_loaded_once_settled(
    orders_upstream: str, redis_server: RedisProcess, tmp_path: Path
) -> None:
    config, target = _config(tmp_path)
    environ = gateway_environ(orders_upstream, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
    edits: list[str] = []
    waits: list[float] = []

    def prepare(loaded: Settings) -> Settings:
        if not edits:  # the first attempt: a writer replaces the file after the settings read
            edits.append("v2")
            target.write_text(gate("v2"))
        return loaded

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    pool = ChannelPool()
    everything = await load_everything(
        config, pool, environ=environ, prepare=prepare, settle_s=0.25, sleep=sleep
    )
    assert waits == [0.25]  # one retry, the settle interval apart
    gw = await start(everything.settings, loaded=everything, pool=pool, extra_sinks=[MemorySink()])
    env = Env(gw=gw, audit=MemorySink(), orders_address=orders_upstream, socket_path="")
    try:
        assert await answer(env) == "closed-v2"  # the content that settled, not the first read
    finally:
        for channel in env.channels.values():
            await channel.close()
        await gw.stop(0.2)


async def test_a_policy_file_that_never_settles_refuses_the_start_after_bounded_attempts(
    orders_upstream: str, redis_server: RedisProcess, tmp_path: Path
) -> None:
    config, target = _config(tmp_path)
    environ = gateway_environ(orders_upstream, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
    edits: list[int] = []
    waits: list[float] = []

    def prepare(loaded: Settings) -> Settings:
        edits.append(len(edits))
        target.write_text(gate(f"v{len(edits) + 1}"))  # moves on every attempt
        return loaded

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    pool = ChannelPool()
    try:
        with pytest.raises(ConfigError) as caught:
            await load_everything(
                config, pool, environ=environ, prepare=prepare, settle_s=0.5, sleep=sleep
            )
    finally:
        await pool.close()
    assert len(edits) == SETTLE_ATTEMPTS
    assert waits == [0.5] * (SETTLE_ATTEMPTS - 1)
    (problem,) = caught.value.problems
    assert MOVED in str(problem)


async def test_a_bad_policy_file_is_refused_at_once_without_retrying(
    orders_upstream: str, redis_server: RedisProcess, tmp_path: Path
) -> None:
    config, target = _config(tmp_path)
    target.write_text(gate("v1").replace("effect: deny", "effect: maybe"))
    environ = gateway_environ(orders_upstream, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    pool = ChannelPool()
    try:
        with pytest.raises(ConfigError) as caught:
            await load_everything(config, pool, environ=environ, sleep=sleep)
    finally:
        await pool.close()
    assert waits == []  # a config error is not a moving file
    assert MOVED not in str(caught.value)
