"""The purge's log line through the real gateway (admin listener, real Redis): the caller's
token subject is written as the audit trail keeps it (gateway.audit.events.caller_text), so a
hostile subject cannot forge a log line or reorder it with bidi controls."""

from __future__ import annotations

import logging

import pytest

from capgate.v1 import admin_pb2, admin_pb2_grpc
from tests.gateway.harness import Env, token

HOSTILE = "root\r\n2026-12-01 INFO capgate: forged line\u202egnp.exe\u2066"


async def test_a_hostile_subject_is_escaped_in_the_purge_log_line(
    env: Env, caplog: pytest.LogCaptureFixture
) -> None:
    stub = admin_pb2_grpc.CacheAdminStub(env.channel("admin"))
    bearer = [("authorization", f"Bearer {token('root', audience='capgate-admin', sub=HOSTILE)}")]
    with caplog.at_level(logging.INFO, logger="capgate"):
        await stub.PurgeCache(
            admin_pb2.PurgeCacheRequest(capability_id="orders.get"), metadata=bearer
        )
    [line] = [r.getMessage() for r in caplog.records if "purged by" in r.getMessage()]
    assert "\r" not in line and "\n" not in line
    assert "\u202e" not in line and "\u2066" not in line
    assert "root\\u000d\\u000a2026-12-01" in line and "\\u202egnp.exe\\u2066" in line
