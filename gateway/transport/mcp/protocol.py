"""The MCP methods of one listener, on top of the same pipelines as gRPC (stages 2-15).
Every `tools/call` enters a pipeline (gateway/transport/mcp/execute.py): a name that is no tool here
and an approval id that is unknown are audited like gRPC's Invoke and Resume of them (SI-8).

`initialize` negotiates the version and opens a session; `tools/list` is Describe for the
listener's surface; `tools/call` is Invoke; `capgate_approval_status` checks or resumes the
caller's own approval (Resume; nothing here can decide one); `ping`; and `server/discover`
lists both eras' versions. Stateless 2026-07-28 requests reach the same methods without a
session (gateway/transport/mcp/modern.py), where `initialize` and `ping` no longer exist (ADR 0010).
The actor always comes from the listener's authentication (SI-3) and the surface from the listener
(SI-2).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata as importlib_metadata
from typing import Any, Final

from capgate.v1 import types_pb2
from gateway.config.mcpnames import APPROVAL_TOOL, ToolTable, build_table, tool_name
from gateway.config.settings import Listener, McpSettings
from gateway.errors import CapabilityError, Code, InputIssue
from gateway.model import Actor
from gateway.pipeline import discovery
from gateway.pipeline import runner as pipeline
from gateway.pipeline.call import Call, Runtime
from gateway.pipeline.envelope import error_proto
from gateway.pipeline.snapshot import Snapshot
from gateway.state.approvals.convert import to_proto
from gateway.state.approvals.records import ApprovalRecord
from gateway.state.mcp_sessions import SessionStore
from gateway.transport.mcp import execute, mrtr, tools
from gateway.transport.mcp.jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND, Message, RpcError
from gateway.transport.mcp.modern import MODERN_VERSIONS
from gateway.values.jsonvalue import dumps
from gateway.values.validation import UNEXPECTED_PROPERTY, pointer

log = logging.getLogger("capgate.mcp")

# The handshake era's versions, newest first. 2025-03-26 is the first with Streamable HTTP;
# 2024-11-05 (HTTP+SSE transport) is answered with the newest in `initialize`, as the spec's
# negotiation says, and refused in the MCP-Protocol-Version header.
SUPPORTED_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26")
BATCH_VERSIONS: Final = frozenset({"2025-03-26"})  # JSON-RPC batches: removed in 2025-06-18
SESSIONLESS: Final = frozenset({"initialize", "server/discover"})
# The requests this listener serves (docs/mcp.md's method table lists exactly these; a test
# compares them); any other method is METHOD_NOT_FOUND. `initialize` and `ping` only in the
# handshake era. The one notification it acts on: CANCELLED (handshake era; every other
# notification is accepted and changes nothing).
_TOOL_LISTS_KEPT: Final = 256
METHODS: Final = ("initialize", "ping", "server/discover", "tools/list", "tools/call")
CANCELLED: Final = "notifications/cancelled"
_HANDSHAKE_ONLY: Final = frozenset({"initialize", "ping"})
_INVALID_PARAMS: Final = RpcError(INVALID_PARAMS, "Invalid params.")
_MAX_META_TEXT: Final = 256
_MAX_ISSUES: Final = 20
_NOT_STARTED: Final = types_pb2.EXECUTION_STATE_NOT_STARTED


def _server_version() -> str:
    try:
        return importlib_metadata.version("capgate")
    except importlib_metadata.PackageNotFoundError:
        return "0"


SERVER_INFO: Final = {"name": "capgate", "title": "capgate", "version": _server_version()}


@dataclass(frozen=True, slots=True)
class Catalog:
    """The tools of one snapshot for this listener, built once per revision (STYLE 4)."""

    snapshot: Snapshot
    table: ToolTable
    static: Mapping[str, dict[str, Any]]  # capability id -> static tool part
    # The name each capability unexposed on this surface would have, when no tool has it:
    # calling it runs stage 4's refusal (`not-exposed`), as gRPC's Invoke of its id does.
    unexposed: Mapping[str, str]  # tool name -> capability id


@dataclass(frozen=True, slots=True)
class Reply:
    result: dict[str, Any]
    session_id: str | None = None  # set by initialize


def _meta_text(params: dict[str, Any], key: str) -> str:
    meta = params.get("_meta")
    value = meta.get(tools.META + key, "") if isinstance(meta, dict) else ""
    if not isinstance(value, str) or len(value) > _MAX_META_TEXT:
        raise _INVALID_PARAMS
    return value


class McpHandler:
    def __init__(
        self,
        listener: Listener,
        snapshot: Callable[[], Snapshot],
        runtime: Runtime,
        sessions: SessionStore,
        *,
        state_key: bytes | None = None,
    ) -> None:
        self._surface = listener.surface
        self._settings = listener.mcp or McpSettings()
        self._snapshot = snapshot
        self._rt = runtime
        self._sessions = sessions
        self._status_tool = self._settings.approval_tool and runtime.approvals is not None
        self._catalog: Catalog | None = None
        # Tool lists by the Describe answer they were built from (see `_list`).
        self._tools: dict[int, tuple[Any, list[dict[str, Any]]]] = {}
        self._states = mrtr.StateCodec(state_key or mrtr.derive_key(""))

    async def handle(
        self, message: Message, actor: Actor, *, traceparent: str = "", stateless: bool = False
    ) -> Reply:
        """One request's result; `RpcError` for JSON-RPC errors. `stateless`: a 2026-07-28
        request (gateway/transport/mcp/modern.py), where the handshake and `ping` no longer
        exist."""
        method = message.method
        if method not in METHODS or (stateless and method in _HANDSHAKE_ONLY):
            raise RpcError(METHOD_NOT_FOUND, "Method not found.")
        params = message.params
        match method:
            case "initialize":
                return await self._initialize(params, actor)
            case "ping":
                return Reply({})
            case "server/discover":
                return Reply(self._discover())
            case "tools/list":
                return Reply(self._list(params, actor))
            case "tools/call":
                return Reply(await self._call(params, actor, traceparent, stateless))
        raise AssertionError(f"{method} is in METHODS without a handler")

    def _capabilities(self) -> dict[str, Any]:
        return {"tools": {"listChanged": False}}

    async def _initialize(self, params: dict[str, Any], actor: Actor) -> Reply:
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise _INVALID_PARAMS
        # Version negotiation: the client's version when spoken here, else the newest one.
        version = requested if requested in SUPPORTED_VERSIONS else SUPPORTED_VERSIONS[0]
        session = await self._sessions.open(actor.identity, version)
        result = {
            "protocolVersion": version,
            "capabilities": self._capabilities(),
            "serverInfo": SERVER_INFO,
            "instructions": self._instructions(),
        }
        return Reply(result, session_id=session.id)

    def _instructions(self) -> str:
        instructions = (
            "Tools are capabilities governed by capgate. A refused call returns an error result "
            "whose structuredContent.code says why."
        )
        if self._status_tool:
            instructions += (
                " A call may instead say it awaits human approval: tell the user, and once it is "
                f"decided call {APPROVAL_TOOL} with the approval id to run it."
            )
        return instructions

    def _discover(self) -> dict[str, Any]:
        # Both eras are spoken: a 2026-07-28 client adopts the stateless revision, an older
        # one keeps to initialize (the dual-era rule).
        return {
            "supportedVersions": [*MODERN_VERSIONS, *SUPPORTED_VERSIONS],
            "capabilities": self._capabilities(),
            "serverInfo": SERVER_INFO,
            "instructions": self._instructions(),
            "resultType": "complete",
            "ttlMs": 0,
            "cacheScope": "private",
        }

    def _catalog_of(self, snapshot: Snapshot) -> Catalog:
        cached = self._catalog
        if cached is not None and cached.snapshot is snapshot:
            return cached
        schemas: dict[str, dict[str, Any]] = {}
        for cap_id, prepared in snapshot.capabilities.items():
            if not prepared.capability.exposed_on(self._surface):
                continue
            schema = tools.input_schema(prepared.descriptor.input_schema_json)
            if schema is None:
                log.warning("capability %s is not an MCP tool: its input is not an object", cap_id)
                continue
            schemas[cap_id] = schema
        table, clashes = build_table(
            schemas, self._settings.tool_names, approval_tool=self._status_tool
        )
        for clash in clashes:
            log.error("MCP tool left out (revision %s): %s", snapshot.revision, clash)
        static = {
            cap_id: tools.static_tool(
                name, snapshot.capabilities[cap_id].capability, schemas[cap_id]
            )
            for name, cap_id in table.by_name.items()
        }
        self._catalog = Catalog(snapshot, table, static, self._unexposed(snapshot, table))
        return self._catalog

    def _unexposed(self, snapshot: Snapshot, table: ToolTable) -> dict[str, str]:
        names: dict[str, list[str]] = {}
        for cap_id, prepared in snapshot.capabilities.items():
            if not prepared.capability.exposed_on(self._surface):
                names.setdefault(tool_name(cap_id, self._settings.tool_names), []).append(cap_id)
        # A name a tool has, or two unexposed capabilities share, means no unexposed one.
        return {
            name: owners[0]
            for name, owners in names.items()
            if len(owners) == 1 and table.capability(name) is None and name != APPROVAL_TOOL
        }

    def _list(self, params: dict[str, Any], actor: Actor) -> dict[str, Any]:
        if params.get("cursor") is not None:
            raise RpcError(INVALID_PARAMS, "Invalid cursor.")  # the list is never paginated
        snapshot = self._snapshot()
        catalog = self._catalog_of(snapshot)
        described = discovery.describe(
            snapshot, self._rt, surface=self._surface, actor=actor, ids=[]
        )
        # Describe answers from its per-snapshot cache (the same response object for actors
        # its policies cannot tell apart): the tools built from one answer are reused with it.
        found = self._tools.get(id(described))
        if found is not None and found[0] is described:
            listed = found[1]
        else:
            listed = [
                tools.tool(catalog.static[d.id], d)
                for d in described.capabilities
                if d.id in catalog.static
            ]
            if len(self._tools) >= _TOOL_LISTS_KEPT:
                self._tools.clear()
            self._tools[id(described)] = (described, listed)  # holds it: the id stays its own
        if self._status_tool:
            return {"tools": [*listed, tools.APPROVAL_STATUS_TOOL]}
        return {"tools": list(listed)}

    async def _call(
        self, params: dict[str, Any], actor: Actor, traceparent: str, stateless: bool = False
    ) -> dict[str, Any]:
        # Every params check comes before the name lookup, so that a malformed call is answered
        # the same way whether or not the tool exists or is hidden (SI-8).
        name, arguments = params.get("name"), params.get("arguments")
        arguments = {} if arguments is None else arguments
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise _INVALID_PARAMS
        idempotency_key = _meta_text(params, "idempotencyKey")
        correlation_id = _meta_text(params, "correlationId")
        if self._status_tool and name == APPROVAL_TOOL:
            return await self._approval_status(arguments, actor, correlation_id, traceparent)
        mrtr_client = stateless and self._rt.approvals is not None
        binding = mrtr.Binding(
            *actor.identity, self._surface, name, mrtr.arguments_digest(arguments)
        )
        if mrtr_client and "requestState" in params:  # a retry of an input_required answer
            return await self._continue(params, binding, actor, correlation_id, traceparent)
        snapshot = self._snapshot()  # one snapshot from start to end (§12)
        catalog = self._catalog_of(snapshot)
        cap_id = catalog.table.capability(name) or catalog.unexposed.get(name)
        call = Call(
            snapshot=snapshot,
            surface=self._surface,
            actor=actor,
            # An unknown name is audited as what the caller asked for (stage 2, SI-8).
            capability_id=name if cap_id is None else cap_id,
            raw_input=dumps(arguments),
            idempotency_key=idempotency_key,
            correlation_id=correlation_id,
            traceparent=traceparent,
        )
        stages = execute.UNKNOWN_TOOL_STAGES if cap_id is None else pipeline.INVOKE
        result = await execute.run(call, self._rt, stages)
        if (
            mrtr_client
            and result.WhichOneof("outcome") == "approval_required"
            and mrtr.supports_elicitation(params)
        ):
            approval = result.approval_required.approval
            state = self._states.seal(approval.id, binding, approval.expires_at.seconds)
            return mrtr.input_required(_awaiting(approval), state)
        return tools.call_result(result, status_tool=self._status_tool)

    async def decided(self, approval_id: str, actor: Actor) -> str | None:
        """The status of `actor`'s own approval once it is no longer pending, else None
        (`not_found` when it is gone or not theirs: SI-8 as everywhere)."""
        try:
            record = await self._rt.approvals.get_own(
                approval_id, requester=actor, surface=self._surface
            )
        except CapabilityError:
            return None  # unreachable now: the next poll asks again
        if record is None:
            return "not_found"
        return None if record.status == "pending" else str(record.status)

    async def _continue(
        self,
        params: dict[str, Any],
        binding: mrtr.Binding,
        actor: Actor,
        correlation_id: str,
        traceparent: str,
    ) -> dict[str, Any]:
        """A client's retry with the requestState of an approval it was asked to wait for: the
        approval's status, its decision's result, or another round while it is pending."""
        state = params.get("requestState")
        approval_id = self._states.open(state, binding, now=self._rt.wall())
        assert isinstance(state, str)
        resume = mrtr.continued(params)
        peeked = await self._peek(approval_id, actor)
        if isinstance(peeked, ApprovalRecord) and peeked.status == "pending" and resume:
            view = self._requester_view(peeked)
            return mrtr.input_required(_awaiting(view), state)
        return await self._status(
            approval_id,
            resume,
            peeked,
            actor,
            correlation_id=correlation_id,
            traceparent=traceparent,
        )

    def _requester_view(self, record: ApprovalRecord) -> types_pb2.Approval:
        """As GetApproval shows it: no input; an edit's patch after the capability's
        `redact.approval_input` rules (ADR 0040)."""
        redactor = self._snapshot().approval_redactor(record.capability_id)
        return to_proto(record, include_input=False, redactor=redactor)

    async def _peek(
        self, approval_id: str, actor: Actor
    ) -> ApprovalRecord | CapabilityError | None:
        """The caller's own approval, None when unknown or another's, or why it cannot be read
        (APPROVAL_UNAVAILABLE while Redis is away): bound to the requester and the surface it
        asked on inside Redis, so anything else reads, and costs, as an unknown id (SI-8)."""
        try:
            record: ApprovalRecord | None = await self._rt.approvals.get_own(
                approval_id, requester=actor, surface=self._surface
            )
        except CapabilityError as err:
            return err
        return record

    async def _approval_status(
        self, arguments: dict[str, Any], actor: Actor, correlation_id: str, traceparent: str
    ) -> dict[str, Any]:
        approval_id, resume = arguments.get("approval_id"), arguments.get("resume", True)
        unexpected = sorted(k for k in arguments if k not in ("approval_id", "resume"))
        issues = [InputIssue(pointer([k]), UNEXPECTED_PROPERTY) for k in unexpected[:_MAX_ISSUES]]
        if not isinstance(approval_id, str) or not 0 < len(approval_id) <= 128:
            issues.append(InputIssue("$.approval_id", "must be a string of 1 to 128 characters"))
        if not isinstance(resume, bool):
            issues.append(InputIssue("$.resume", "must be a boolean"))
        if issues:
            return _failure(CapabilityError(Code.INPUT_INVALID, issues=tuple(issues)))
        assert isinstance(approval_id, str) and isinstance(resume, bool)
        peeked = await self._peek(approval_id, actor)
        return await self._status(
            approval_id,
            resume,
            peeked,
            actor,
            correlation_id=correlation_id,
            traceparent=traceparent,
        )

    async def _status(
        self,
        approval_id: str,
        resume: bool,
        peeked: ApprovalRecord | CapabilityError | None,
        actor: Actor,
        *,
        correlation_id: str,
        traceparent: str,
    ) -> dict[str, Any]:
        """A pending approval, or any with `resume: false`, is reported as GetApproval would
        (no execution). Otherwise Resume runs, as on gRPC: an approved call once, a decided or
        unknown id, or a store that cannot be reached, to its audited refusal."""
        if isinstance(peeked, ApprovalRecord) and (peeked.status == "pending" or not resume):
            view = self._requester_view(peeked)
            return tools.approval_result(view, {}, status_tool=True, requested=False)
        if not resume:
            unread = peeked if isinstance(peeked, CapabilityError) else None
            return _failure(unread or CapabilityError(Code.APPROVAL_NOT_FOUND))
        call = Call(
            snapshot=self._snapshot(),
            surface=self._surface,
            actor=actor,
            capability_id="",
            raw_input=b"",
            approval_id=approval_id,
            correlation_id=correlation_id,
            traceparent=traceparent,
        )
        result = await execute.run(call, self._rt, pipeline.RESUME)
        return tools.call_result(result, status_tool=True, conceal_not_found=False)


def _awaiting(approval: types_pb2.Approval) -> str:
    text = (
        f"This call has not run: it needs human approval first (approval id {approval.id}, "
        f"expires {approval.expires_at.ToJsonString()})."
    )
    if approval.message:
        text += f" {approval.message}"
    return text + " Continue once an approver has decided to run it or see the decision."


def _failure(err: CapabilityError) -> dict[str, Any]:
    return tools.error_result(error_proto(err, _NOT_STARTED), {})
