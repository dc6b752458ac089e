"""The immutable snapshot an execution uses from start to end (DESIGN §12): the registry with
everything prepared at load — validators, redactors, upstream calls, descriptors — and the
compiled policy set. A reload builds a new one off the request path and swaps it atomically."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from capgate.v1 import gateway_pb2, procedure_pb2_grpc
from gateway.model import Capability
from gateway.outputexpr import OutputExpr
from gateway.redact import Redactor
from gateway.settings import Settings, Upstream
from gateway.upstream.call import UpstreamCall, grpc_call, procedure_call
from gateway.upstream.channels import ChannelPool
from gateway.upstream.descriptors import (
    MethodInfo,
    load_descriptor_set,
    load_from_reflection,
    resolve_method,
)
from gateway.upstream.schema import derive_schema
from gateway.validation import SchemaValidator
from policy import Phase, PolicySet, load_policy_set

PROCEDURE_METHOD = "/capgate.v1.Procedure/Invoke"


class SnapshotError(Exception):
    """The config cannot become a snapshot (a load error: the old snapshot stays)."""


@dataclass(frozen=True, slots=True)
class Prepared:
    """One capability with everything a request needs, built once at load."""

    capability: Capability
    input_validator: SchemaValidator
    output_validator: SchemaValidator | None
    redact_output: Callable[[Any], Any]
    approval_redactor: Redactor
    upstream_call: UpstreamCall
    digest: str  # upstream + method + schema version: bound into approvals (§12)
    output_expr: OutputExpr | None
    inline_approver: Any  # capgate.v1.Approver stub when approval.inline_approver is set
    descriptor: gateway_pb2.CapabilityDescriptor
    policy_value: Mapping[str, Any]
    # The phases in which some policy can take a stance on this capability, computed once per
    # snapshot (stages 7 and 9 skip the others without asking the policy set). None: unknown,
    # so the stages ask (never a silent skip).
    policy_phases: frozenset[Phase] | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    settings: Settings
    capabilities: Mapping[str, Prepared]
    policies: PolicySet
    revision: str

    def approval_redactor(self, capability_id: str) -> Redactor | None:
        prepared = self.capabilities.get(capability_id)
        return prepared.approval_redactor if prepared is not None else None


@dataclass
class SnapshotHolder:
    """The one mutable reference; reading `current` is atomic under asyncio."""

    current: Snapshot

    def swap(self, snapshot: Snapshot) -> None:
        self.current = snapshot


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


async def _method(
    upstream: Upstream, method: str, pool: ChannelPool, cache: dict[str, Any]
) -> MethodInfo:
    descriptors = cache.get(upstream.name)
    if descriptors is None:
        if upstream.descriptor_set:
            descriptors = load_descriptor_set(upstream.descriptor_set)
        else:
            descriptors = await load_from_reflection(pool.channel(upstream), timeout=5.0)
        cache[upstream.name] = descriptors
    return resolve_method(descriptors, method)


async def _prepare(
    cap: Capability,
    *,
    settings: Settings,
    pool: ChannelPool,
    cache: dict[str, Any],
    hmac_key: bytes,
    key_id: str,
) -> Prepared:
    upstream = settings.upstreams[cap.upstream]
    channel = pool.channel(upstream)
    call: UpstreamCall
    if upstream.kind == "procedure":
        if cap.input_schema is None:
            raise SnapshotError(f"capability {cap.id}: a procedure upstream needs input_schema")
        input_schema: Mapping[str, Any] = cap.input_schema
        call = procedure_call(channel, cap.id, upstream=upstream)
        method = cap.method or PROCEDURE_METHOD
    else:
        info = await _method(upstream, cap.method, pool, cache)
        input_schema = (
            cap.input_schema if cap.input_schema is not None else derive_schema(info.input)
        )
        call = grpc_call(channel, info, upstream=upstream)
        method = info.full_method
    schema_json = orjson.dumps(input_schema, option=orjson.OPT_SORT_KEYS)
    output_redactor = Redactor(cap.redact.output, hmac_key=hmac_key, key_id=key_id)
    descriptor = gateway_pb2.CapabilityDescriptor(
        id=cap.id,
        description=cap.description,
        input_schema_json=schema_json.decode(),
        side_effect=cap.side_effect,
        risk=cap.risk,
        tags=list(cap.tags),
    )
    return Prepared(
        capability=cap,
        input_validator=SchemaValidator(input_schema),
        output_validator=SchemaValidator(cap.output_schema) if cap.output_schema else None,
        redact_output=functools.partial(output_redactor.apply, in_place=True),
        approval_redactor=Redactor(cap.redact.approval_input, hmac_key=hmac_key, key_id=key_id),
        upstream_call=call,
        output_expr=OutputExpr(cap.redact.output_expr) if cap.redact.output_expr else None,
        inline_approver=(
            procedure_pb2_grpc.ApproverStub(
                pool.channel(settings.upstreams[cap.approval.inline_approver])
            )
            if cap.approval.inline_approver
            else None
        ),
        digest=_digest(upstream.name, method, hashlib.sha256(schema_json).hexdigest()),
        descriptor=descriptor,
        policy_value=cap.as_policy_value(),
    )


def _policy_files(paths: tuple[str, ...]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files += sorted(
                p
                for p in path.rglob("*.yaml")
                if not p.name.endswith("_test.yaml") and ".." not in p.parts[-2:]
            )
        else:
            files.append(path)
    return sorted(files, key=str)


async def build_snapshot(
    settings: Settings, pool: ChannelPool, *, hmac_key: bytes = b""
) -> Snapshot:
    """Prepare every capability and compile the policies; raises on any load error."""
    cache: dict[str, Any] = {}
    prepared: dict[str, Prepared] = {}
    for cap in settings.capabilities:
        prepared[cap.id] = await _prepare(
            cap,
            settings=settings,
            pool=pool,
            cache=cache,
            hmac_key=hmac_key,
            key_id=settings.audit.hmac_key_id,
        )
    registry = {
        cap_id: {**p.policy_value, "input_schema": dict(p.input_validator.schema)}
        for cap_id, p in prepared.items()
    }
    policies = load_policy_set(_policy_files(settings.policy_paths), registry=registry)
    known = set(policies.policy_names)
    missing = sorted(
        {n for p in prepared.values() for n in p.capability.policies if n not in known}
    )
    if missing:
        raise SnapshotError(f"capabilities list unknown policies: {', '.join(missing)}")
    for cap_id, p in prepared.items():
        phases = frozenset(
            phase
            for phase in Phase
            if policies.applies(phase, p.policy_value, p.capability.policies)
        )
        prepared[cap_id] = dataclasses.replace(p, policy_phases=phases)
    revision = _digest(settings.revision, policies.revision)
    return Snapshot(settings=settings, capabilities=prepared, policies=policies, revision=revision)
