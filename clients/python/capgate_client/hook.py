"""Write a capgate governance hook (`capgate.v1.Hook`, docs/hooks.md) in a few lines.

The gateway calls a hook around a governed call: `PreInvoke` with the validated input (add
context attributes policies read as `hooks.<name>.<attr>`, replace the input, deny or ask for
an approval), `PostInvoke` with the validated output (replace it), `PostFailure` after a
failure (observe). A handler gets one typed request and returns one typed result; plain or
async functions both work. One server can serve several configured hooks: handlers may be a
mapping from the hook's configured name to a function.

    def standing(call: PreInvoke) -> PreInvokeResult:
        late = call.input.get("customer_id") in ARREARS
        return PreInvokeResult(context={"in_arrears": late})

    server, port = await serve_hooks("127.0.0.1:0", pre_invoke={"standing": standing})

A hook adds to governance and never bypasses it: its allow cannot remove a policy's deny,
hide or approval requirement, and whatever it returns is validated again by the gateway.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import grpc

from capgate_client._gen.capgate.v1 import hook_pb2, hook_pb2_grpc, types_pb2

__all__ = [
    "UNCHANGED",
    "HookCall",
    "HookServicer",
    "PostFailure",
    "PostInvoke",
    "PostInvokeResult",
    "PreInvoke",
    "PreInvokeResult",
    "serve_hooks",
]


class _Unchanged:
    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED: Final = _Unchanged()
"""The default of `updated_input` / `updated_output`: leave the value as it is."""

Decision = Literal["allow", "ask", "deny"]
_DECISIONS: Final = {
    None: hook_pb2.HOOK_DECISION_UNSPECIFIED,
    "allow": hook_pb2.HOOK_DECISION_ALLOW,
    "ask": hook_pb2.HOOK_DECISION_ASK,
    "deny": hook_pb2.HOOK_DECISION_DENY,
}


@dataclass(frozen=True, slots=True)
class HookCall:
    """What every hook call carries (never credentials)."""

    hook: str  # the hook's name in the gateway config
    execution_id: str
    capability_id: str
    capability_tags: tuple[str, ...]
    side_effect: str
    risk: str
    actor_id: str
    actor_issuer: str
    actor_kind: str
    actor_roles: tuple[str, ...]
    surface: str
    correlation_id: str
    metadata: Mapping[str, str]
    approval_id: str  # set when the call resumes an approval
    dry_run: bool  # CapabilityGateway.Check: nothing will run
    revision: str

    @classmethod
    def from_proto(cls, ctx: hook_pb2.HookContext) -> HookCall:
        return cls(
            hook=ctx.hook,
            execution_id=ctx.execution_id,
            capability_id=ctx.capability.id,
            capability_tags=tuple(ctx.capability.tags),
            side_effect=ctx.capability.side_effect,
            risk=ctx.capability.risk,
            actor_id=ctx.actor.id,
            actor_issuer=ctx.actor.issuer,
            actor_kind=ctx.actor.kind,
            actor_roles=tuple(ctx.actor.roles),
            surface=ctx.surface,
            correlation_id=ctx.correlation_id,
            metadata=dict(ctx.metadata),
            approval_id=ctx.approval_id,
            dry_run=ctx.dry_run,
            revision=ctx.revision,
        )


@dataclass(frozen=True, slots=True)
class PreInvoke:
    call: HookCall
    input: Any  # the validated input (on Resume: the approved one)


@dataclass(frozen=True, slots=True)
class PreInvokeResult:
    """`decision` None abstains; `context` holds only attributes declared for the hook in the
    gateway config, of their declared types; `updated_input` replaces the input."""

    decision: Decision | None = None
    message: str = ""
    context: Mapping[str, Any] = field(default_factory=dict)
    updated_input: Any = UNCHANGED


@dataclass(frozen=True, slots=True)
class PostInvoke:
    call: HookCall
    output: Any  # the validated output, before the gateway's redaction


@dataclass(frozen=True, slots=True)
class PostInvokeResult:
    updated_output: Any = UNCHANGED


@dataclass(frozen=True, slots=True)
class PostFailure:
    call: HookCall
    code: str  # ErrorCode name without its prefix, e.g. "POLICY_DENIED"
    stage: str
    execution_state: str  # NOT_STARTED, COMPLETED or UNKNOWN
    attempts: int


# A handler takes the RPC's typed request and returns its typed result, or an awaitable of it.
Handler = Callable[[Any], Any]
Handlers = Handler | Mapping[str, Handler] | None


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


async def _run(handlers: Handlers, hook: str, request: Any, context: Any) -> Any:
    handler = handlers.get(hook) if isinstance(handlers, Mapping) else handlers
    if handler is None:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"no handler for hook {hook!r}")
        raise AssertionError("abort raises")  # for the type checker: abort never returns
    result = handler(request)
    return await result if inspect.isawaitable(result) else result


class HookServicer(hook_pb2_grpc.HookServicer):  # type: ignore[misc]
    """`capgate.v1.Hook` from plain functions: one per RPC, or a mapping hook name → function
    (the configured name is in every request). An RPC without a handler is UNIMPLEMENTED."""

    def __init__(
        self,
        *,
        pre_invoke: Handlers = None,
        post_invoke: Handlers = None,
        post_failure: Handlers = None,
    ) -> None:
        self._pre = pre_invoke
        self._post = post_invoke
        self._failure = post_failure

    async def PreInvoke(
        self, request: hook_pb2.PreInvokeRequest, context: Any
    ) -> hook_pb2.PreInvokeResponse:
        call = HookCall.from_proto(request.context)
        result: PreInvokeResult = await _run(
            self._pre, call.hook, PreInvoke(call, json.loads(request.input_json)), context
        )
        answer = hook_pb2.PreInvokeResponse(
            decision=_DECISIONS[result.decision], message=result.message
        )
        if result.context:
            answer.context_json = _dumps(dict(result.context))
        if result.updated_input is not UNCHANGED:
            answer.updated_input_json = _dumps(result.updated_input)
        return answer

    async def PostInvoke(
        self, request: hook_pb2.PostInvokeRequest, context: Any
    ) -> hook_pb2.PostInvokeResponse:
        call = HookCall.from_proto(request.context)
        result: PostInvokeResult = await _run(
            self._post, call.hook, PostInvoke(call, json.loads(request.output_json)), context
        )
        answer = hook_pb2.PostInvokeResponse()
        if result.updated_output is not UNCHANGED:
            answer.updated_output_json = _dumps(result.updated_output)
        return answer

    async def PostFailure(
        self, request: hook_pb2.PostFailureRequest, context: Any
    ) -> hook_pb2.PostFailureResponse:
        call = HookCall.from_proto(request.context)
        failure = PostFailure(
            call=call,
            code=types_pb2.ErrorCode.Name(request.code).removeprefix("ERROR_CODE_"),
            stage=request.stage,
            execution_state=types_pb2.ExecutionState.Name(request.execution_state).removeprefix(
                "EXECUTION_STATE_"
            ),
            attempts=request.attempts,
        )
        await _run(self._failure, call.hook, failure, context)
        return hook_pb2.PostFailureResponse()


async def serve_hooks(
    address: str = "127.0.0.1:0",
    *,
    credentials: grpc.ServerCredentials | None = None,
    pre_invoke: Handlers = None,
    post_invoke: Handlers = None,
    post_failure: Handlers = None,
) -> tuple[grpc.aio.Server, int]:
    """Start a hook server on `address` (TLS with `credentials`); return it and its port."""
    server = grpc.aio.server()
    servicer = HookServicer(
        pre_invoke=pre_invoke, post_invoke=post_invoke, post_failure=post_failure
    )
    hook_pb2_grpc.add_HookServicer_to_server(servicer, server)
    if credentials is None:
        port = server.add_insecure_port(address)
    else:
        port = server.add_secure_port(address, credentials)
    await server.start()
    return server, port
