"""What the benchmark sends and the gateway configs it runs: payloads, tokens, config files.

The configs are built here (ports and paths differ per run) and loaded by the real loader in
the real `capgate serve` process. One gateway serves the 0-, 3- and 10-policy capabilities
side by side (their policies are capability-scoped), the approval capability and a catalog of
100 capabilities for Describe; the audit-off and strict-audit variants differ only in `audit`.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from copy import deepcopy
from pathlib import Path
from typing import Any

import jwt
import orjson
import yaml

from capgate.v1 import gateway_pb2, procedure_pb2

HERE = Path(__file__).parent
POLICY_DIR = HERE / "policies"
THREE = ["anonymous-read-only", "amount-limits", "agent-role-required"]
SEVEN = [
    "high-risk-needs-mfa",
    "business-hours",
    "item-consistency",
    "order-id-format",
    "sanctions",
    "tenant-isolation",
    "mcp-no-bulk",
]
CATALOG_SIZE = 100
ISSUER = "bench-idp"
TENANT = "t1"

# ≈ 0.6 KB, shaped like a refund request (the governed path validates and evaluates all of it).
INPUT: dict[str, Any] = {
    "order_id": "ord-123456",
    "amount": 120.5,
    "currency": "EUR",
    "reason": "Customer reports the parcel arrived damaged; photos are attached to the ticket.",
    "items": [{"sku": f"SKU-{i:05d}", "qty": i + 1, "price": 12.5 * (i + 1)} for i in range(4)],
    "customer": {"id": "cus-98765", "tier": "gold", "country": "DE"},
}
INPUT_JSON = orjson.dumps(INPUT)

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["order_id", "amount"],
    "properties": {
        "order_id": {"type": "string", "minLength": 1, "maxLength": 64},
        "amount": {"type": "number", "exclusiveMinimum": 0},
        "currency": {"type": "string", "enum": ["EUR", "USD", "GBP"]},
        "reason": {"type": "string", "minLength": 1, "maxLength": 500},
        "items": {
            "type": "array",
            "maxItems": 100,
            "items": {
                "type": "object",
                "required": ["sku", "qty"],
                "properties": {
                    "sku": {"type": "string"},
                    "qty": {"type": "integer"},
                    "price": {"type": "number"},
                },
            },
        },
        "customer": {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "tier": {"type": "string"},
                "country": {"type": "string", "minLength": 2, "maxLength": 2},
            },
        },
    },
}
OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["refund_id", "order_id", "amount", "status"],
    "properties": {
        "refund_id": {"type": "string"},
        "order_id": {"type": "string"},
        "amount": {"type": "number"},
        "status": {"enum": ["REFUND_STATUS_PENDING", "REFUND_STATUS_SUCCEEDED"]},
    },
}

AGENT = {
    "sub": "bench-agent",
    "kind": "agent",
    "roles": ["agent", "support"],
    "mfa": True,
    "tenant": TENANT,
}
APPROVER = {"sub": "bench-approver", "kind": "user", "roles": ["approver", "manager"]}
GRANTED = "bench.granted"


def create_grant(redis_url: str) -> str:
    """A standing grant for the bench agent on `GRANTED` (ADR 0038) with what a grant can ask
    of a call: a constraint, an amount and a total that is never reached; its id."""
    return asyncio.run(create_grant_async(redis_url))


async def create_grant_async(redis_url: str) -> str:
    from gateway.config.settings import ApprovalSettings, RedisSettings  # noqa: PLC0415
    from gateway.model import Actor  # noqa: PLC0415
    from gateway.state.approvals.grants import GrantRecord, RedisGrantStore  # noqa: PLC0415
    from gateway.state.connections import connect  # noqa: PLC0415

    redis = connect(RedisSettings(url=redis_url))
    store = RedisGrantStore(redis, prefix="bench", settings=ApprovalSettings(), clock=time.time)
    roles = tuple(APPROVER["roles"])
    now = time.time()
    try:
        grant = await store.create(
            GrantRecord(
                id=secrets.token_hex(8),
                created_at=now,
                expires_at=now + 6 * 3600,
                created_by=Actor(id=APPROVER["sub"], kind="user", issuer=ISSUER, roles=roles),
                actor=Actor(id=AGENT["sub"], kind="agent", issuer=ISSUER),
                capability_id=GRANTED,
                constraint='input.amount <= 200.0 && input.currency == "EUR"',
                amount="input.amount",
                max_total=1e15,
                approver_roles=roles,
            )
        )
    finally:
        await redis.aclose()
    return grant.id


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def token(secret: str, claims: dict[str, Any], audience: str) -> str:
    """A bearer JWT the gateway verifies once and then finds in its verified-token cache."""
    now = int(time.time())
    body = {**claims, "iss": ISSUER, "aud": audience, "iat": now, "exp": now + 3000}
    return jwt.encode(body, secret, algorithm="HS256", headers={"kid": "bench"})


def bearer(secret: str, claims: dict[str, Any], audience: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token(secret, claims, audience)}")]


def local_actor() -> list[tuple[str, str]]:
    """trusted-local metadata: the application asserts the actor over the unix socket."""
    return [
        ("x-capgate-actor-id", AGENT["sub"]),
        ("x-capgate-actor-kind", "agent"),
        ("x-capgate-actor-roles", ",".join(AGENT["roles"])),
    ]


def procedure_request(capability_id: str = "bench.p3") -> bytes:
    return procedure_pb2.ProcedureInvokeRequest(
        capability_id=capability_id, input_json=INPUT_JSON.decode()
    ).SerializeToString()


def invoke_request(capability_id: str) -> bytes:
    return gateway_pb2.InvokeRequest(
        capability_id=capability_id, input_json=INPUT_JSON, metadata={"x-tenant": TENANT}
    ).SerializeToString()


def check_request(capability_id: str = "bench.p3") -> bytes:
    return gateway_pb2.CheckRequest(
        capability_id=capability_id, input_json=INPUT_JSON, metadata={"x-tenant": TENANT}
    ).SerializeToString()


def describe_request() -> bytes:
    return gateway_pb2.DescribeRequest().SerializeToString()


def opa_input() -> dict[str, Any]:
    """What OPA is asked: the same facts capgate's Check evaluates its three policies on."""
    return {
        "actor": {"id": AGENT["sub"], "kind": AGENT["kind"], "roles": AGENT["roles"]},
        "capability": {"id": "bench.p3", "side_effect": "write", "risk": "high", "tags": ["bench"]},
        "input": INPUT,
    }


def _capability(cap_id: str, policies: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "id": cap_id,
        "description": "Refund part or all of an order (benchmark capability).",
        "upstream": "bench",
        "side_effect": "write",
        "risk": "high",
        "tags": ["bench"],
        "expose": {"agent": True, "direct": True},
        "input_schema": INPUT_SCHEMA,
        "output_schema": OUTPUT_SCHEMA,
        "redact": {"output": [{"path": "$.card_last4", "action": "mask"}]},
        "policies": policies,
        **extra,
    }


def gateway_config(
    *,
    run_dir: Path,
    upstream: str,
    redis_url: str,
    secret: str,
    hmac_key: str,
    audit: str = "best_effort",
    prometheus: str | None = None,
    ports: tuple[int, int] = (0, 0),
    limits_redis_url: str | None = None,
) -> dict[str, Any]:
    """`limits_redis_url`: limit state's own Redis (ADR 0037); None: limits share `redis_url`.
    The production-shaped config (DESIGN §11): JSON-native upstream, JWT with the verified
    token cached (TCP) and trusted-local (unix socket), tracing on but unsampled (the sampler
    comes from OTEL_TRACES_SAMPLER in the gateway's environment), audit batched to Redis."""
    jwt_block = {
        "issuers": [ISSUER],
        "audience": "capgate",
        "attribute_claims": ["mfa", "tenant"],
        "keys": [{"kid": "bench", "alg": "HS256", "secret": secret}],
    }
    admin_jwt = {**deepcopy(jwt_block), "audience": "capgate-admin"}
    capabilities = [
        _capability("bench.p0", []),
        _capability("bench.p3", THREE),
        _capability("bench.p10", THREE + SEVEN),
        _capability(
            "bench.approve", [], approval={"required": True, "approvers": {"roles": ["approver"]}}
        ),
        # The result cache (docs/cache.md), as bench.p3 but a read: every call after the first
        # is a hit; with a 1ms TTL nearly every call misses, then stores (lookup + store).
        _capability("bench.cached", THREE, side_effect="read", cache={"ttl": "10m"}),
        _capability("bench.cached_miss", THREE, side_effect="read", cache={"ttl": "1ms"}),
        # One pre-hook (docs/hooks.md) on bench.p3's governed path: the bench upstream's
        # process serves it; its context is declared (and typed for policies) but read by none.
        _capability("bench.hooked", THREE, hooks=["bench_pre"]),
        # Two limits (docs/limits.md) on bench.p3's governed path, never reached: a per-actor
        # rate and a per-actor budget, checked and spent in one Redis script per call.
        _capability("bench.limited", THREE),
        # bench.p3 that needs approval, covered by a standing grant (ADR 0038, `grant`).
        _capability(
            GRANTED, THREE, approval={"required": True, "approvers": {"roles": ["approver"]}}
        ),
    ]
    capabilities += [
        _capability(f"bench.catalog.c{i:03d}", ["catalog-visibility"]) for i in range(CATALOG_SIZE)
    ]
    sinks = [] if audit == "off" else ["redis"]
    telemetry: dict[str, Any] = {"tracing": True, "otlp": True}
    if prometheus:
        telemetry["prometheus_address"] = prometheus
    return {
        "version": 1,
        "listeners": [
            {
                "name": "agents",
                "address": f"127.0.0.1:{ports[0]}",
                "surface": "agent",
                "auth": "jwt",
                "jwt": jwt_block,
            },
            {
                "name": "local",
                "address": f"unix://{run_dir}/capgate.sock",
                "surface": "direct",
                "auth": "trusted-local",
            },
            {
                "name": "admin",
                "address": f"127.0.0.1:{ports[1]}",
                "surface": "admin",
                "role": "admin",
                "auth": "jwt",
                "jwt": admin_jwt,
            },
        ],
        "upstreams": {
            "bench": {"address": upstream, "kind": "procedure"},
            "bench-hooks": {"address": upstream, "kind": "grpc"},
        },
        "hooks": [
            {
                "name": "bench_pre",
                "upstream": "bench-hooks",
                "calls": ["pre_invoke"],
                "scope": "capability",
                "context": {"in_arrears": "boolean"},
            }
        ],
        "capabilities": capabilities,
        "limits": [
            {
                "name": "bench_rate",
                "capabilities": ["bench.limited"],
                "key": "actor.id",
                "rate": {"limit": 1_000_000, "window": "1s"},
            },
            {
                "name": "bench_budget",
                "capabilities": ["bench.limited"],
                "key": "actor.id",
                "budget": {"amount": "1", "max": 1e15, "window": "24h"},
            },
        ],
        "policies": {"paths": [str(POLICY_DIR)]},
        "redis": {
            "url": redis_url,
            "key_prefix": "bench",
            **({"limits_url": limits_redis_url} if limits_redis_url else {}),
        },
        "approvals": {"max_pending_per_actor": 100_000, "default_expires_in": "15m"},
        "audit": {
            "sinks": sinks,
            "strict": audit == "strict",
            "hmac_key": hmac_key,
            "hmac_key_id": "bench-1",
            "redis_stream": "bench:audit",
            "redis_maxlen": 200_000,
        },
        "telemetry": telemetry,
        "defaults": {"timeout": "10s", "metadata_allowlist": ["x-tenant"]},
    }


def write_config(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path
