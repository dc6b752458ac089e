"""The immutable snapshot an execution uses from start to end (DESIGN §12): the registry with
everything prepared at load — validators, redactors, upstream calls, descriptors — and the
compiled policy set. A reload builds a new one off the request path and swaps it atomically."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import orjson
from google.protobuf.descriptor_pool import DescriptorPool

from capgate.v1 import gateway_pb2, hook_pb2_grpc, procedure_pb2_grpc
from gateway.config.cachescope import ScopeKey, ScopeKeyError
from gateway.config.hookspec import NO_HOOKS, BoundHook, CapabilityHooks, context_types
from gateway.config.problems import PathParts, format_path
from gateway.config.revision import digest, key_files, policy_files, read_file
from gateway.config.settings import Settings
from gateway.config.source import config_files
from gateway.model import Capability
from gateway.pipeline.limits import CompiledLimit, compile_limits
from gateway.upstream.call import UpstreamCall
from gateway.upstream.channels import ChannelPool
from gateway.upstream.descriptors import (
    load_descriptor_set,
    load_from_reflection,
)
from gateway.upstream.errors import UpstreamConfigError, UpstreamUnreachable
from gateway.upstream.mapinput import InputMapper, MapInputError
from gateway.upstream.spec import Upstream
from gateway.upstream.targets import TargetRefused, UpstreamUnusable, prepare_target
from gateway.values.outputexpr import OutputExpr, OutputExprError
from gateway.values.redact import Redactor
from gateway.values.validation import SchemaValidator
from policy import LoadIssue, Phase, PolicyLoadError, PolicySet, load_policy_set
from policy.files import read_sources, revision_of


@dataclass(frozen=True, slots=True)
class SnapshotProblem:
    """One reason a config cannot become a snapshot, at a place in the config (`parts`, as
    in `capabilities[2].method`); `gateway.process.load` turns it into file:line."""

    parts: PathParts
    message: str
    # An upstream that did not answer at load (UpstreamUnreachable): may pass by itself.
    retryable: bool = False

    def __str__(self) -> str:
        return f"{format_path(self.parts)}: {self.message}"


class SnapshotError(Exception):
    """The config cannot become a snapshot (a load error: the old snapshot stays). It lists
    every problem found: capability problems (`problems`) and the policy set's (`policy_issues`,
    located in the policy files)."""

    def __init__(
        self, problems: Sequence[SnapshotProblem], policy_issues: Sequence[LoadIssue] = ()
    ) -> None:
        self.problems = list(problems)
        self.policy_issues = sorted(set(policy_issues))
        lines = [str(p) for p in self.problems] + [str(i) for i in self.policy_issues]
        count = len(lines)
        super().__init__(f"{count} problem(s):" + "".join(f"\n  {line}" for line in lines))

    @property
    def retryable(self) -> bool:
        """Whether the same config may load later: every problem is an upstream that did not
        answer (a policy or config problem needs a new content, docs/config.md "Reload")."""
        return (
            bool(self.problems)
            and not self.policy_issues
            and all(p.retryable for p in self.problems)
        )


class ContentMoved(SnapshotError):
    """The policy files changed after the content the settings were loaded from settled and
    before it compiled: nothing of it applies. The settings are stale, not wrong; loading them
    again once the files settled may succeed (`capgate serve` retries its initial load)."""


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
    # The result cache's scope (docs/cache.md) and the input mapper (stage 11), both compiled
    # and type-checked at load; None when the capability has none.
    cache_scope: ScopeKey | None = None
    input_mapper: InputMapper | None = None
    # The phases in which some policy can take a stance on this capability, computed once per
    # snapshot (stages 7 and 9 skip the others without asking the policy set). None: unknown,
    # so the stages ask (never a silent skip).
    policy_phases: frozenset[Phase] | None = None
    # The gateway limits that select this capability, in config order (docs/limits.md).
    limits: tuple[CompiledLimit, ...] = ()
    hooks: CapabilityHooks = NO_HOOKS  # the hooks that apply to it, per RPC (docs/hooks.md)


@dataclass(frozen=True, slots=True, weakref_slot=True)
class Snapshot:
    """One config's prepared capabilities and policies. The pool that built it keeps its
    upstream channels and clients open while it is referenced (`ChannelPool.hold`)."""

    settings: Settings
    capabilities: Mapping[str, Prepared]
    policies: PolicySet
    revision: str

    def approval_redactor(self, capability_id: str) -> Redactor | None:
        prepared = self.capabilities.get(capability_id)
        return prepared.approval_redactor if prepared is not None else None

    def capability_description(self, capability_id: str) -> str:
        """The capability's description, "" when it is not (or no longer) configured."""
        prepared = self.capabilities.get(capability_id)
        return prepared.capability.description if prepared is not None else ""


@dataclass
class SnapshotHolder:
    """The one mutable reference; reading `current` is atomic under asyncio."""

    current: Snapshot

    def swap(self, snapshot: Snapshot) -> None:
        self.current = snapshot


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:16]


# What a capability's upstream methods are looked up in: a descriptor pool, the reason there
# is none, or None when it was not resolved (server reflection, when not asked to resolve).
Descriptors: TypeAlias = DescriptorPool | UpstreamConfigError | None


@dataclass
class _Lookups:
    """Each gRPC upstream's descriptors, looked up once per load, and the capabilities that
    needed the ones that failed: a failure is the upstream's problem, reported once at the
    upstream's own line (its `descriptor_set`, or its `address` for server reflection) like
    every other upstream problem, not at each capability."""

    reflection: bool
    found: dict[str, Descriptors] = dataclasses.field(default_factory=dict)
    failed: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    async def of(self, upstream: Upstream, pool: ChannelPool, cap: Capability) -> Descriptors:
        if upstream.name not in self.found:
            self.found[upstream.name] = await self._look_up(upstream, pool)
        found = self.found[upstream.name]
        if isinstance(found, UpstreamConfigError):
            self.failed.setdefault(upstream.name, []).append(cap.id)
        return found

    async def _look_up(self, upstream: Upstream, pool: ChannelPool) -> Descriptors:
        try:
            if upstream.descriptor_set:
                return load_descriptor_set(upstream.descriptor_set)
            if self.reflection:
                return await load_from_reflection(pool.channel(upstream), timeout=5.0)
        except UpstreamConfigError as exc:
            return exc
        return None

    def problems(self, settings: Settings) -> list[SnapshotProblem]:
        out = []
        for name, needed_by in self.failed.items():
            upstream = settings.upstreams[name]
            key = "descriptor_set" if upstream.descriptor_set else "address"
            who = f"capabilit{'y' if len(needed_by) == 1 else 'ies'} {', '.join(needed_by)}"
            found = self.found[name]
            message = f"upstream {name} ({who}): {found}"
            unreachable = isinstance(found, UpstreamUnreachable)
            out.append(SnapshotProblem(("upstreams", name, key), message, unreachable))
        return out


def _refusal(
    cap: Capability, parts: PathParts, message: str, *, retryable: bool = False
) -> SnapshotProblem:
    """A problem naming the capability and its upstream (its place gives file:line)."""
    message = f"upstream {cap.upstream} (capability {cap.id}): {message}"
    return SnapshotProblem(parts, message, retryable)


async def _prepare(
    cap: Capability,
    index: int,
    *,
    settings: Settings,
    pool: ChannelPool,
    lookups: _Lookups,
    problems: list[SnapshotProblem],
    hmac_key: bytes,
    key_id: str,
) -> Prepared | Mapping[str, Any] | None:
    """The prepared capability; its input schema when its upstream was not resolved (server
    reflection not asked for), or None after recording why it cannot be prepared."""
    parts: PathParts = ("capabilities", index)
    upstream = settings.upstreams[cap.upstream]
    try:
        found = await prepare_target(
            cap,
            upstream,
            pool,
            connect=lookups.reflection,
            descriptors=lambda up, c: lookups.of(up, pool, c),
        )
    except UpstreamUnusable:
        return None  # the upstream's problem (`lookups.problems`)
    except UpstreamConfigError as exc:
        key = exc.key if isinstance(exc, TargetRefused) else None
        unreachable = isinstance(exc, UpstreamUnreachable)
        place = parts if key is None else (*parts, key)
        problems.append(_refusal(cap, place, str(exc), retryable=unreachable))
        return None
    if found is None:
        return cap.input_schema or {}
    return _complete(
        found.capability,
        parts,
        (found.input_schema, found.call, found.method),
        found.request_schema,
        settings=settings,
        pool=pool,
        problems=problems,
        hmac_key=hmac_key,
        key_id=key_id,
    )


def _complete(
    cap: Capability,
    parts: PathParts,
    target: tuple[Mapping[str, Any], UpstreamCall, str],  # input schema, call, full method
    request_schema: Mapping[str, Any] | None,
    *,
    settings: Settings,
    pool: ChannelPool,
    problems: list[SnapshotProblem],
    hmac_key: bytes,
    key_id: str,
) -> Prepared | None:
    """The prepared capability once its upstream target is known, whatever the upstream's
    kind: its cache scope and input mapper compiled; None after recording why not."""
    extras = _cache_and_mapper(cap, parts, target[0], request_schema, problems)
    try:
        prepared = _finish(
            cap, settings=settings, pool=pool, target=target, hmac_key=hmac_key, key_id=key_id
        )
    except (OutputExprError, UpstreamConfigError, ValueError) as exc:
        problems.append(SnapshotProblem(parts, f"capability {cap.id}: {exc}"))
        return None
    if extras is None:
        return None
    return dataclasses.replace(prepared, cache_scope=extras[0], input_mapper=extras[1])


def _cache_and_mapper(
    cap: Capability,
    parts: PathParts,
    input_schema: Mapping[str, Any],
    request_schema: Mapping[str, Any] | None,
    problems: list[SnapshotProblem],
) -> tuple[ScopeKey | None, InputMapper | None] | None:
    """The compiled cache scope and input mapper; None after recording why they do not
    compile (file:line of `cache.scope` or `map_input`)."""
    scope = mapper = None
    ok = True
    if cap.cache is not None:
        try:
            scope = ScopeKey(cap.cache)
        except ScopeKeyError as exc:
            problems.append(
                SnapshotProblem((*parts, "cache", "scope"), f"capability {cap.id}: {exc}")
            )
            ok = False
    if cap.map_input is not None and request_schema is not None:
        try:
            mapper = InputMapper(
                cap.map_input, request_schema=request_schema, input_schema=input_schema
            )
        except MapInputError as exc:
            problems.append(SnapshotProblem((*parts, "map_input"), f"capability {cap.id}: {exc}"))
            ok = False
    return (scope, mapper) if ok else None


def _finish(
    cap: Capability,
    *,
    settings: Settings,
    pool: ChannelPool,
    target: tuple[Mapping[str, Any], UpstreamCall, str],  # input schema, call, full method
    hmac_key: bytes,
    key_id: str,
) -> Prepared:
    input_schema, call, method = target
    upstream = settings.upstreams[cap.upstream]
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
        digest=_digest(
            upstream.name,
            method,
            hashlib.sha256(schema_json).hexdigest(),
            *_mapper_digest_parts(cap),
        ),
        descriptor=descriptor,
        policy_value=cap.as_policy_value(),
    )


def _mapper_digest_parts(cap: Capability) -> tuple[str, ...]:
    """map_input changes what the upstream receives: approvals bind it (docs/cache.md)."""
    if cap.map_input is None:
        return ()  # the digest of a capability without a mapper is as before
    schema = orjson.dumps(cap.map_input_schema, option=orjson.OPT_SORT_KEYS).decode()
    return (cap.map_input, schema)


_MOVED = (
    "the policy files changed after their content settled and before it compiled; nothing"
    " of it is applied (the next settled content is)"
)


def _compiled_as_settled(settings: Settings, policies: PolicySet) -> bool:
    """Whether the policy bytes that compiled are the ones `settings.revision` covers: the
    content the config watcher saw settle (or `serve` loaded). The files are read once more;
    that read must hold exactly the compiled bytes (`PolicySet.revision`) and, with the config
    and key files, hash to the settled revision. A second edit landing between the settle and
    this build (a half-written file compiled) fails it. Hand-built settings (no revision) have
    no settled content to compare with."""
    if not settings.revision:
        return True
    now = read_sources(_policy_files(settings.policy_paths))
    if revision_of(now) != policies.revision:
        return False  # moved since it compiled
    compiled = {source.label: source.data for source in now if source.data is not None}
    source = Path(settings.source)
    config = [(p, read_file(p)) for p in config_files(source)] if source.exists() else []
    watched = policy_files(settings.policy_paths) + key_files(settings.listeners)

    def read(path: Path) -> bytes:
        data = compiled.get(str(path))
        return data if data is not None else read_file(path)

    return digest(config, watched, read=read) == settings.revision


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


@dataclass(frozen=True, slots=True)
class Checked:
    """What `check_snapshot` found: the policy set, and the capabilities whose upstream
    methods were not looked up (server reflection, when not asked to resolve it)."""

    policies: PolicySet
    unresolved: tuple[str, ...]


async def build_snapshot(
    settings: Settings, pool: ChannelPool, *, hmac_key: bytes = b""
) -> Snapshot:
    """Prepare every capability and compile the policies; raises `SnapshotError` listing
    every problem (upstreams are resolved, by server reflection where there is no
    descriptor set)."""
    snapshot, _ = await _build(settings, pool, hmac_key=hmac_key, reflection=True)
    assert snapshot is not None  # every upstream was resolved
    return snapshot


async def check_snapshot(
    settings: Settings, pool: ChannelPool, *, resolve_reflection: bool
) -> Checked:
    """Everything `build_snapshot` checks, for `capgate config check`: the same code, and
    without `resolve_reflection` no upstream is contacted (capabilities of upstreams without
    a descriptor set are then checked against their configured input_schema, or as dyn)."""
    _, checked = await _build(
        settings, pool, hmac_key=settings.audit.hmac_key.encode(), reflection=resolve_reflection
    )
    return checked


async def _build(
    settings: Settings, pool: ChannelPool, *, hmac_key: bytes, reflection: bool
) -> tuple[Snapshot | None, Checked]:
    lookups = _Lookups(reflection)
    problems: list[SnapshotProblem] = []
    prepared: dict[str, Prepared] = {}
    registry: dict[str, dict[str, Any]] = {}
    unresolved: list[str] = []
    for index, cap in enumerate(settings.capabilities):
        outcome = await _prepare(
            cap,
            index,
            settings=settings,
            pool=pool,
            lookups=lookups,
            problems=problems,
            hmac_key=hmac_key,
            key_id=settings.audit.hmac_key_id,
        )
        if isinstance(outcome, Prepared):
            prepared[cap.id] = outcome
            schema: Mapping[str, Any] | None = outcome.input_validator.schema
        elif outcome is not None:
            unresolved.append(cap.id)
            schema = outcome or None  # {}: no schema known, input is dyn for the checker
        else:
            schema = cap.input_schema  # refused above; its policies are still checked
        entry = cap.as_policy_value()
        registry[cap.id] = entry if schema is None else {**entry, "input_schema": dict(schema)}
    problems += lookups.problems(settings)
    limits, limit_issues = compile_limits(settings.limits, registry)
    try:
        policies = load_policy_set(
            _policy_files(settings.policy_paths),
            registry=registry,
            limit_names=[spec.name for spec in settings.limits],
            hooks=context_types(settings.hooks),
        )
    except PolicyLoadError as exc:
        # The names the files define still tell which listed policies exist at all.
        problems += _unknown_policies(settings, exc.names)
        raise SnapshotError(problems, [*exc.errors, *limit_issues]) from None
    if not _compiled_as_settled(settings, policies):
        raise ContentMoved([SnapshotProblem(("policies", "paths"), _MOVED)])
    problems += _unknown_policies(settings, frozenset(policies.policy_names))
    bound = _bind_hooks(settings, pool, problems)
    if problems or limit_issues:
        raise SnapshotError(problems, limit_issues)
    checked = Checked(policies, tuple(unresolved))
    if unresolved:
        return None, checked
    for cap_id, p in prepared.items():
        phases = frozenset(
            phase
            for phase in Phase
            if policies.applies(phase, p.policy_value, p.capability.policies)
        )
        selected = tuple(lim for lim in limits if lim.selects(cap_id, p.capability.tags))
        prepared[cap_id] = dataclasses.replace(
            p, policy_phases=phases, limits=selected, hooks=_hooks_of(p.capability, bound)
        )
    revision = _digest(settings.revision, policies.revision)
    snapshot = Snapshot(
        settings=settings, capabilities=prepared, policies=policies, revision=revision
    )
    # Its channels and clients stay open while it is in use, and close once it is not and a
    # reload retired them (a call in flight finishes on the channel it started with).
    pool.hold(snapshot, settings.upstreams)
    return snapshot, checked


def _bind_hooks(
    settings: Settings, pool: ChannelPool, problems: list[SnapshotProblem]
) -> tuple[BoundHook, ...]:
    """Every configured hook with a stub on its upstream's pooled channel (TLS as upstreams)."""
    bound = []
    for index, spec in enumerate(settings.hooks):
        try:
            channel = pool.channel(settings.upstreams[spec.upstream])
        except UpstreamConfigError as exc:
            problems.append(
                SnapshotProblem(("hooks", index, "upstream"), f"hook {spec.name}: {exc}")
            )
            continue
        bound.append(BoundHook(spec, hook_pb2_grpc.HookStub(channel)))
    return tuple(bound)


def _hooks_of(cap: Capability, bound: tuple[BoundHook, ...]) -> CapabilityHooks:
    """The hooks applying to `cap` (selectors, or listed when capability-scoped), per RPC."""
    mine = [h for h in bound if h.spec.applies_to(cap.id, cap.tags, cap.hooks)]
    if not mine:
        return NO_HOOKS
    return CapabilityHooks(
        pre=tuple(h for h in mine if "pre_invoke" in h.spec.calls),
        post=tuple(h for h in mine if "post_invoke" in h.spec.calls),
        failure=tuple(h for h in mine if "post_failure" in h.spec.calls),
    )


def _unknown_policies(settings: Settings, known: frozenset[str]) -> list[SnapshotProblem]:
    """Capability-scoped policy names (`capabilities[i].policies`) the policy set lacks."""
    out = []
    for index, cap in enumerate(settings.capabilities):
        for position, name in enumerate(cap.policies):
            if name not in known:
                where = ("capabilities", index, "policies", position)
                message = f"capability {cap.id}: no policy named {name!r} in the policy set"
                out.append(SnapshotProblem(where, message))
    return out
