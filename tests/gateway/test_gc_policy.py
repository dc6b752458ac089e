"""The serving process's GC policy through the real gateway (ADR 0041): start-up frozen out of
the cyclic collector, and a reload gives the old snapshot back to it, so a snapshot is never
kept alive by the freeze."""

from __future__ import annotations

import asyncio
import gc
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from gateway.config.loader import load_settings
from gateway.process import gcpolicy
from gateway.process import serve as serve_module
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE, gateway_environ

pytestmark = pytest.mark.integration


@pytest.fixture
def thawed() -> Iterator[None]:
    """The test process's own objects are never left frozen for the tests after this one."""
    yield
    gc.unfreeze()


async def test_a_reload_gives_the_old_snapshot_back_to_the_collector_and_freezes_again(
    orders_upstream: str,
    redis_server: RedisProcess,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    thawed: None,
) -> None:
    monkeypatch.setattr(gcpolicy, "REFREEZE_AFTER_S", 0.05)
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(HERE / "../../examples/orders/orders.pb")
    data["policies"]["paths"] = [str(HERE / "../../examples/policies")]
    environ = gateway_environ(orders_upstream, redis_server.url, tempfile.mkdtemp(prefix="cg-"))
    (tmp_path / "gateway.yaml").write_text(yaml.safe_dump(data))
    gw = await start(load_settings(tmp_path / "gateway.yaml", environ=environ))
    try:
        # Something alive when the process froze holds the snapshot in a reference cycle (as
        # a call in flight can): only the cyclic collector can free it once it is dropped.
        holder: list[object] = [gw.holder.current]
        holder.append(holder)
        old = weakref.ref(gw.holder.current)
        gw.freeze_gc = True  # what `capgate serve` sets once started
        gcpolicy.settle()
        assert gc.get_freeze_count() > 0
        del holder
        data["capabilities"] = [c for c in data["capabilities"] if c["id"] != "orders.cancel"]
        (tmp_path / "gateway.yaml").write_text(yaml.safe_dump(data))
        await gw.reload(load_settings(tmp_path / "gateway.yaml", environ=environ))
        assert "orders.cancel" not in gw.holder.current.capabilities
        assert gc.get_freeze_count() == 0  # given back at the swap
        refreeze = [t for t in gw.tasks if t.get_name() == "gc-refreeze"]
        assert len(refreeze) == 1
        await asyncio.wait_for(refreeze[0], 10)
        assert old() is None  # collected: the freeze did not keep it
        assert gc.get_freeze_count() > 0  # and what lives is frozen again
    finally:
        await gw.stop(0.2)


def test_serve_applies_the_policy_and_start_alone_does_not() -> None:
    """`start()` serves embedders and tests, whose process is theirs: only `serve` freezes."""
    assert serve_module.Gateway.__dataclass_fields__["freeze_gc"].default is False
