"""Audit event fields (DESIGN §9, §12): the input HMAC and its rotatable key id, the true
reason without upstream free text, approval transitions — never payloads (SI-10)."""

from __future__ import annotations

import dataclasses
from typing import Any

import grpc

from capgate.v1 import gateway_pb2, types_pb2
from gateway.audit.events import InputHasher, approval_event, reason_of
from gateway.config.settings import AuditSettings, Settings
from gateway.errors import TABLE, CapabilityError, Code, not_found
from gateway.model import Actor
from gateway.pipeline.call import Call
from gateway.pipeline.events import build, completion_fields, failure_fields, replay_event
from gateway.pipeline.snapshot import Snapshot
from gateway.state.approvals.records import ApprovalRecord
from gateway.upstream.status import map_status

KEY = "audit-key-0123456789-0123456789-abcdef"
ALICE = Actor(id="alice", kind="user", issuer="idp", roles=("agent",))


def call_with(value: Any, *, key: str = KEY, key_id: str = "k1", **kw: Any) -> Call:
    settings = Settings(
        listeners=(),
        upstreams={},
        capabilities=(),
        audit=AuditSettings(hmac_key=key, hmac_key_id=key_id),
    )
    snapshot = Snapshot(
        settings=settings,
        capabilities={},
        policies=None,  # type: ignore[arg-type]
        revision="rev-1",
    )
    call = Call(
        snapshot=snapshot,
        surface="agent",
        actor=ALICE,
        capability_id="orders.refund",
        raw_input=b"",
        execution_id="e1",
        **kw,
    )
    call.input = value
    return call


def test_every_event_names_who_what_where_and_the_revision() -> None:
    call = call_with(None, correlation_id="corr-9", approval_id="apr-1")
    event = build("capability.requested", call, 1_700_000_000.25)
    assert event == {
        "event": "capability.requested",
        "event_id": "e1:capability.requested:0",
        "time": "2023-11-14T22:13:20.250+00:00",
        "execution_id": "e1",
        "capability_id": "orders.refund",
        "surface": "agent",
        "actor_id": "alice",
        "actor_issuer": "idp",
        "actor_kind": "user",
        "revision": "rev-1",
        "correlation_id": "corr-9",
        "approval_id": "apr-1",
        "execution_state": "NOT_STARTED",
    }  # no input_hmac before validation (call.input is None)


def test_the_input_hmac_binds_the_value_not_its_spelling_and_names_its_key() -> None:
    a = build("capability.started", call_with({"order_id": "o-1", "amount": 5}), 0)
    b = build("capability.started", call_with({"amount": 5, "order_id": "o-1"}), 0)
    other = build("capability.started", call_with({"order_id": "o-1", "amount": 6}), 0)
    assert a["input_hmac"] == b["input_hmac"] != other["input_hmac"]
    assert len(a["input_hmac"]) == 32
    assert a["input_hmac_key_id"] == "k1"
    assert "o-1" not in str(a)  # a keyed digest, never the value (SI-10)


def test_an_input_a_hook_replaced_gets_its_own_hmac() -> None:
    # Computed once per input object: later events of the call reuse it, and a pre-hook that
    # replaces the input (input_update) makes the events after it carry the new input's HMAC.
    call = call_with({"order_id": "o-1"})
    first = build("capability.requested", call, 0)["input_hmac"]
    assert build("capability.denied", call, 0)["input_hmac"] == first
    call.input = {"order_id": "o-2"}
    replaced = build("capability.started", call, 0)["input_hmac"]
    assert replaced != first
    assert replaced == InputHasher(KEY.encode(), "k1").digest({"order_id": "o-2"})


def test_rotating_the_key_changes_the_digest_and_the_key_id() -> None:
    value = {"order_id": "o-1"}
    old = build("capability.started", call_with(value), 0)
    new = build("capability.started", call_with(value, key=KEY[::-1], key_id="k2"), 0)
    assert (new["input_hmac_key_id"], old["input_hmac_key_id"]) == ("k2", "k1")
    assert new["input_hmac"] != old["input_hmac"]
    assert new["input_hmac"] == InputHasher(KEY[::-1].encode(), "k2").digest(value)


def test_the_hmac_is_computed_once_per_input_and_not_without_a_key() -> None:
    call = call_with({"order_id": "o-1"})
    first = build("capability.started", call, 0)
    call.input["order_id"] = "mutated"  # the same object: the digest is not computed again
    assert build("capability.completed", call, 0)["input_hmac"] == first["input_hmac"]
    assert "input_hmac" not in build("capability.started", call_with({"a": 1}, key=""), 0)


def test_upstream_free_text_never_reaches_the_reason() -> None:
    err = map_status(grpc.StatusCode.INTERNAL, "db password hunter2 leaked", (), upstream="orders")
    assert reason_of(err) == "upstream status INTERNAL"
    fields = failure_fields(call_with(None), err, 1.0)
    assert "hunter2" not in str(fields)
    assert fields["code"] == "EXECUTION_FAILED"


def test_a_concealed_denial_keeps_its_true_reason_and_the_stances() -> None:
    fields = failure_fields(call_with(None), not_found("hidden"), 2.5)
    assert fields == {
        "code": "CAPABILITY_NOT_FOUND",
        "stage": "discovery",
        "outcome": "failed",
        "attempt": 0,
        "duration_ms": 2.5,
        "reason": "hidden",
        "concealed": True,
        "stances": [],
    }


def test_only_a_machine_contract_reason_is_kept() -> None:
    err = CapabilityError(Code.EXECUTION_FAILED, reason="x", expose_to_model=True)
    err.details["contract_reason"] = "ORDER_LOCKED"
    assert failure_fields(call_with(None), err, 0)["contract_reason"] == "ORDER_LOCKED"
    err.details["contract_reason"] = "locked because customer jane@example.com asked"
    assert "contract_reason" not in failure_fields(call_with(None), err, 0)


def test_terminal_fields_follow_the_error_table() -> None:
    for code, spec in TABLE.items():
        fields = failure_fields(call_with(None), CapabilityError(code), 0)
        assert (fields["code"], fields["stage"], fields["outcome"]) == (
            code.value,
            spec.stage,
            spec.kind.value,
        )
        assert fields["stances"] == []  # every terminal event carries the stances (none here)


def test_completion_records_attempts_and_upstream_time() -> None:
    call = call_with({"a": 1})
    call.attempts = 2
    call.upstream_s = 0.0123
    assert completion_fields(call, 15.0) == {
        "outcome": "completed",
        "attempt": 2,
        "duration_ms": 15.0,
        "upstream_ms": 12.3,
        "stances": [],
    }


def test_an_approval_decision_names_approver_requester_and_inbox_but_no_input() -> None:
    record = ApprovalRecord(
        id="apr-7",
        capability_id="orders.refund",
        capability_digest="d",
        surface="agent",
        requester=ALICE,
        input={"order_id": "o-SECRET"},
        input_hash="h" * 64,
        created_at=1.0,
        expires_at=2.0,
        requesting_execution_id="e1",
        note="call me at 555-0100",
    )
    bob = Actor(id="bob", kind="user", issuer="idp")
    inbox = Actor(id="inbox", kind="service", issuer="mtls")
    decided = dataclasses.replace(record, status="approved", decided_by=bob, decided_via=inbox)
    event = approval_event("approved", decided, 10.0, "rev-2")
    assert event["event"] == "capability.approved"
    assert event["event_id"] == "apr-7:capability.approved"
    assert (event["actor_id"], event["requester_id"], event["via_id"]) == ("bob", "alice", "inbox")
    assert (event["execution_id"], event["approval_id"], event["revision"]) == (
        "e1",
        "apr-7",
        "rev-2",
    )
    assert "o-SECRET" not in str(event)
    assert "555-0100" not in str(event)
    expired = approval_event("expired", record, 10.0, "rev-2")
    assert expired["event"] == "capability.approval_expired"
    assert "actor_id" not in expired
    assert approval_event("rejected", decided, 1.0, "r")["event"] == "capability.rejected"


def test_a_replay_ends_in_the_stored_outcomes_event_marked_as_replay() -> None:
    done = gateway_pb2.ExecutionResult(
        execution_id="e0", execution_state=types_pb2.EXECUTION_STATE_COMPLETED
    )
    done.completed.output_json = '{"secret": "SENTINEL"}'
    event = replay_event(call_with({"a": 1}), done, "idempotency", 0, 1.5)
    assert event["event"] == "capability.completed" and event["execution_id"] == "e1"
    assert (event["replayed"], event["replay_of"], event["replay_source"]) == (
        True,
        "e0",
        "idempotency",
    )
    assert event["execution_state"] == "COMPLETED" and event["stances"] == []
    assert "SENTINEL" not in str(event)  # never the stored output (SI-10)
    timeout = gateway_pb2.ExecutionResult(
        execution_id="e0", execution_state=types_pb2.EXECUTION_STATE_UNKNOWN
    )
    timeout.cancelled.code = types_pb2.ERROR_CODE_TIMEOUT
    timeout.cancelled.stage = "execution"
    event = replay_event(call_with(None), timeout, "approval", 0, 1.0)
    assert (event["event"], event["code"], event["execution_state"]) == (
        "capability.cancelled",
        "TIMEOUT",
        "UNKNOWN",
    )
    newer = gateway_pb2.ExecutionResult(execution_id="e0")
    newer.failed.code = 9999  # a code of a newer build: still one terminal event
    assert replay_event(call_with(None), newer, "idempotency", 0, 1.0)["event"] == (
        "capability.failed"
    )
