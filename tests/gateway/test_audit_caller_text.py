"""Caller-supplied strings in the audit trail cannot disguise or inflate it (issue 14 follow-up
D), through the real gateway's `file` sink (JSON lines), the real upstream and Redis.

Hostile values — bidi overrides and isolates, zero-width and other format characters, NUL,
CR/LF, blank-looking letters, a backslash, thousands of characters, and a seeded random family
over all of Unicode — are sent as correlation ids (refused at stage 5, but `capability.requested`
at stage 2 records them first), capability ids nobody serves, and approval ids on Resume. Every
string in every event written must show itself (`str.isprintable`, no blank-looking letters),
be at most 256 characters, and be the one escaping function's form of what was sent."""

from __future__ import annotations

import random
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from capgate.v1 import gateway_pb2
from gateway.audit.events import MAX_TEXT, caller_text
from gateway.audit.sinks import MemorySink
from gateway.config.loader import load_settings
from gateway.process.serve import start
from gateway.state.embedded import RedisProcess
from tests.gateway.conftest import HERE, gateway_environ
from tests.gateway.harness import Env

pytestmark = pytest.mark.integration

HOSTILE = [
    "refund \u202e9876-5432\u202c",  # right-to-left override: renders reversed
    "ok\u2066evil\u2069",  # bidi isolate
    "zero\u200bwidth\u200d\ufeff",
    "nul\x00cr\rlf\nend",
    "blank\u3164\u2800\U000e0041tag",
    "back\\u202eslash",  # a literal backslash-u: must not read as an escape
    "\u202e" * 5000,
    "x" * 20_000,
]
BLANK = {0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0, 0x2800}


def random_texts(seed: int, count: int) -> list[str]:
    """Seeded strings over all of Unicode (no surrogates: protobuf strings are UTF-8)."""
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        chars = []
        for _ in range(rng.randint(1, 40)):
            code = rng.choice(
                (rng.randint(0, 0x7F), rng.randint(0x80, 0x3000), rng.randint(0, 0x10FFFF))
            )
            if 0xD800 <= code <= 0xDFFF:
                code = 0x202E
            chars.append(chr(code))
        texts.append("".join(chars))
    return texts


@pytest.fixture
async def file_env(
    orders_upstream: str, redis_server: RedisProcess, tmp_path: Path
) -> AsyncIterator[tuple[Env, Path]]:
    data = yaml.safe_load((HERE / "gateway.yaml").read_text())
    data["upstreams"]["orders"]["descriptor_set"] = str(HERE / "../../examples/orders/orders.pb")
    data["policies"]["paths"] = [str(HERE / "../../examples/policies")]
    trail = tmp_path / "audit.jsonl"
    data["audit"]["sinks"] = ["file"]
    data["audit"]["file"] = str(trail)
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(data))
    run_dir = tempfile.mkdtemp(prefix="cg-")
    settings = load_settings(
        config, environ=gateway_environ(orders_upstream, redis_server.url, run_dir)
    )
    gw = await start(settings, extra_sinks=[MemorySink()])
    env = Env(gw=gw, audit=MemorySink(), orders_address=orders_upstream, socket_path="")
    try:
        yield env, trail
    finally:
        for channel in env.channels.values():
            await channel.close()
        await gw.stop(0.5)


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*strings(k), *strings(v))]
    if isinstance(value, list):
        return [s for item in value for s in strings(item)]
    return []


def shows_itself(text: str) -> bool:
    return all(c.isprintable() and ord(c) not in BLANK for c in text)


async def test_hostile_caller_strings_are_escaped_and_bounded_in_the_trail(
    file_env: tuple[Env, Path],
) -> None:
    env, trail = file_env
    sent = [*HOSTILE, *random_texts(seed=14, count=120)]
    for text in sent:
        await env.invoke("orders.get", {"order_id": "o-1001"}, correlation_id=text)
        await env.invoke(text, {})
        await env.gateway().Resume(
            gateway_pb2.ResumeRequest(approval_id=text), metadata=env.metadata("agents", "alice")
        )
    await env.gw.runtime.audit.flush()  # type: ignore[attr-defined]
    events = [orjson.loads(line) for line in trail.read_bytes().splitlines()]
    assert len(events) >= 3 * len(sent)
    for event in events:
        for text in strings(event):
            assert shows_itself(text), (event["event"], text[:80])
            assert len(text) <= MAX_TEXT, (event["event"], len(text))
    requested = [e for e in events if e["event"] == "capability.requested"]
    correlation = {e["correlation_id"] for e in requested if "correlation_id" in e}
    capability_ids = {e["capability_id"] for e in requested}
    approval_ids = {e["approval_id"] for e in requested if "approval_id" in e}
    for text in sent:
        assert caller_text(text) in correlation
        assert caller_text(text) in capability_ids
        assert caller_text(text) in approval_ids
    # The escapes say what was there: the override, and a literal backslash kept apart.
    assert "refund \\u202e9876-5432\\u202c" in correlation
    assert "back\\\\u202eslash" in correlation
