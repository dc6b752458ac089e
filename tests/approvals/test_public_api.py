"""The API the pipeline, Resume and the servers call is a contract: its names are pinned here."""

from __future__ import annotations

import inspect

import gateway.state.approvals as approvals
from gateway.state.approvals import RedisApprovalStore
from gateway.state.idempotency import RedisIdempotencyStore


def _params(function: object) -> list[str]:
    return [p for p in inspect.signature(function).parameters if p != "self"]  # type: ignore[arg-type]


def test_the_package_exports_exactly_the_public_names() -> None:
    assert sorted(approvals.__all__) == [
        "ApprovalConsumed",
        "ApprovalEventRecord",
        "ApprovalRecord",
        "RedisApprovalStore",
        "Status",
        "WatchGap",
        "verify_input",
    ]


def test_store_method_signatures_are_stable() -> None:
    expected = {
        "__init__": ["redis", "prefix", "settings", "clock", "events_maxlen", "on_transition"],
        "create": ["record"],
        "get": ["approval_id"],
        "get_many": ["approval_ids"],
        "decide": ["approval_id", "approve", "approver", "via", "note", "input_hash", "edit"],
        "consume": ["approval_id", "requester", "surface", "execution_id"],
        "finish": ["approval_id", "envelope", "outcome_code", "resumed_execution_id"],
        "list": [
            "statuses",
            "capability_id",
            "requester_id",
            "page_size",
            "page_token",
            "visible",
        ],
        "watch": ["after_event_id"],
        "wait": ["approval_id", "timeout_s"],
        "expire_sweep": ["now"],
        "escalate_sweep": ["now"],
        "reconcile": [],
        "verify_input": ["record"],
    }
    for name, params in expected.items():
        assert _params(getattr(RedisApprovalStore, name)) == params, name


def test_idempotency_signatures_are_stable() -> None:
    assert _params(RedisIdempotencyStore.__init__) == ["redis", "prefix", "ttl_s", "clock"]
    assert _params(RedisIdempotencyStore.claim) == [
        "scope",
        "input_hash",
        "execution_id",
        "lease_s",
        "request_hash",
    ]
    # The early read (ADR 0034): what the claim would answer, without claiming.
    assert _params(RedisIdempotencyStore.peek) == ["scope", "request_hash"]
    assert _params(RedisIdempotencyStore.complete) == ["scope", "envelope", "execution_id"]
    assert _params(RedisIdempotencyStore.release) == ["scope", "execution_id"]
