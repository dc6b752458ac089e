"""Server-side helper for upstream services that capgate calls: the verified agent context.

The gateway forwards `x-capgate-*` metadata on every upstream call (DESIGN §8): execution id,
capability, surface, idempotency key, correlation id, approval id, `traceparent`, and the actor
as a token it signed. Only the token is authoritative; plain headers that repeat a signed claim
must agree with it, or the call is refused. The gateway reuses one token for the same actor,
upstream and surface for half its lifetime, so its token carries no `exec_id`/`cap`: the
execution id and capability then come from the metadata (both required), and a token replayed
within its lifetime proves the actor, not the execution (docs/auth.md).

    verifier = ActorTokenVerifier.from_file("jwks.json", issuer="capgate", audience="orders")
    server = grpc.aio.server(interceptors=[AgentContextInterceptor(verifier)])
    ...
    async def RefundOrder(self, request, context):
        agent = current_agent_context()   # who, for which execution, under which approval

Needs `cryptography`: install `capgate-client[server]`.

Governance hooks (`capgate.v1.Hook`, docs/hooks.md) are served with `serve_hooks` /
`HookServicer` from `capgate_client.hook`, re-exported here (they need no `cryptography`).
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import grpc

from capgate_client.actor_token import (
    MAX_LIFETIME_S,
    TOKEN_TYPE,
    ActorTokenInvalid,
    ActorTokenVerifier,
)
from capgate_client.hook import (
    HookServicer,
    PostFailure,
    PostInvoke,
    PostInvokeResult,
    PreInvoke,
    PreInvokeResult,
    serve_hooks,
)

__all__ = [
    "ACTOR_TOKEN_HEADER",
    "MAX_LIFETIME_S",
    "TOKEN_TYPE",
    "ActorTokenInvalid",
    "ActorTokenVerifier",
    "AgentActor",
    "AgentContext",
    "AgentContextInterceptor",
    "AgentContextInvalid",
    "HookServicer",
    "PostFailure",
    "PostInvoke",
    "PostInvokeResult",
    "PreInvoke",
    "PreInvokeResult",
    "current_agent_context",
    "read_agent_context",
    "serve_hooks",
]

ACTOR_TOKEN_HEADER: Final = "x-capgate-actor-token"  # noqa: S105 — a header name
_EXEMPT: Final = ("/grpc.health.v1.Health/", "/grpc.reflection.")
_current: contextvars.ContextVar[AgentContext] = contextvars.ContextVar("capgate_agent_context")


@dataclass(frozen=True, slots=True)
class AgentActor:
    """The actor the upstream serves; identity is the pair (issuer, id)."""

    id: str
    issuer: str
    kind: str
    roles: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AgentContext:
    """Who the upstream is serving, and for which governed execution."""

    execution_id: str
    capability_id: str
    surface: str
    idempotency_key: str  # the caller's key, else the execution id (seed 001)
    correlation_id: str
    approval_id: str | None  # set when the call runs an approved request
    approver: str | None
    traceparent: str | None
    actor: AgentActor
    claims: Mapping[str, Any]


class AgentContextInvalid(Exception):
    """No acceptable agent context: an actor token reason class, `missing_token`,
    `header_mismatch` or `missing_metadata` (a token without `exec_id`/`cap` and no
    `x-capgate-execution-id`/`x-capgate-capability` beside it); never token contents."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"capgate agent context refused: {reason}")
        self.reason = reason


def _headers(metadata: Iterable[tuple[str, str | bytes]] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in metadata or ():
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
        # A repeated key is joined as HTTP does, so it can never pass as a single valid value.
        out[key] = f"{out[key]}, {text}" if key in out else text
    return out


def read_agent_context(
    verifier: ActorTokenVerifier,
    metadata: Iterable[tuple[str, str | bytes]] | None,
    *,
    now: float | None = None,
) -> AgentContext:
    """Verify the actor token in `metadata` (e.g. `context.invocation_metadata()`)."""
    headers = _headers(metadata)
    token = headers.get(ACTOR_TOKEN_HEADER, "")
    if not token:
        raise AgentContextInvalid("missing_token")
    try:
        claims = verifier.verify(token, now=now)
    except ActorTokenInvalid as exc:
        raise AgentContextInvalid(exc.reason) from None
    signed = {
        "x-capgate-surface": claims["surface"],
        "x-capgate-approval-id": claims.get("approval_id", ""),
    }
    # Tokens signed before reuse (and other gateways) name the execution: headers must agree.
    for claim, name in (("exec_id", "x-capgate-execution-id"), ("cap", "x-capgate-capability")):
        if claim in claims:
            signed[name] = claims[claim]
    if any(name in headers and headers[name] != value for name, value in signed.items()):
        raise AgentContextInvalid("header_mismatch")
    execution_id = claims.get("exec_id") or headers.get("x-capgate-execution-id", "")
    capability_id = claims.get("cap") or headers.get("x-capgate-capability", "")
    if not execution_id or not capability_id:
        raise AgentContextInvalid("missing_metadata")
    return AgentContext(
        execution_id=execution_id,
        capability_id=capability_id,
        surface=claims["surface"],
        idempotency_key=headers.get("x-capgate-idempotency-key") or execution_id,
        correlation_id=headers.get("x-capgate-correlation-id", ""),
        approval_id=claims.get("approval_id"),
        approver=claims.get("approver"),
        traceparent=headers.get("traceparent"),
        actor=AgentActor(
            claims["sub"], claims["actor_iss"], claims["kind"], tuple(claims["roles"])
        ),
        claims=claims,
    )


def current_agent_context() -> AgentContext:
    """The verified agent context of the call being handled (set by `AgentContextInterceptor`).
    Raises LookupError outside such a call."""
    return _current.get()


class AgentContextInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """A grpc.aio server interceptor: verifies every call's agent context, refuses calls without
    a valid one with UNAUTHENTICATED, and makes it available to handlers through
    `current_agent_context()`. Methods under `exempt` prefixes (health, reflection) pass as is."""

    def __init__(self, verifier: ActorTokenVerifier, *, exempt: Sequence[str] = _EXEMPT) -> None:
        self._verifier = verifier
        self._exempt = tuple(exempt)

    async def intercept_service(
        self,
        continuation: Callable[[Any], Awaitable[Any]],
        handler_call_details: Any,
    ) -> Any:
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(self._exempt):
            return handler
        admit = self._admit
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                _unary(handler.unary_unary, admit),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(
                _unary(handler.stream_unary, admit),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                _streaming(handler.unary_stream, admit),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return grpc.stream_stream_rpc_method_handler(
            _streaming(handler.stream_stream, admit),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )

    async def _admit(self, context: Any) -> contextvars.Token[AgentContext]:
        try:
            agent = read_agent_context(self._verifier, context.invocation_metadata())
        except AgentContextInvalid as exc:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))
            raise  # unreachable: abort raises
        return _current.set(agent)


_Admit = Callable[[Any], Awaitable[contextvars.Token[AgentContext]]]


def _unary(behavior: Callable[..., Any], admit: _Admit) -> Callable[..., Awaitable[Any]]:
    async def wrapped(request: Any, context: Any) -> Any:
        token = await admit(context)
        try:
            result = behavior(request, context)
            return await result if inspect.isawaitable(result) else result
        finally:
            _current.reset(token)

    return wrapped


def _streaming(behavior: Callable[..., Any], admit: _Admit) -> Callable[..., AsyncIterator[Any]]:
    async def wrapped(request: Any, context: Any) -> AsyncIterator[Any]:
        token = await admit(context)
        try:
            responses = behavior(request, context)
            if inspect.isasyncgen(responses):
                async for item in responses:
                    yield item
            else:  # a handler that writes with context.write() and returns a coroutine
                await responses
        finally:
            # An abandoned stream may be closed from another context; the RPC's own task
            # context ends with the call anyway.
            with contextlib.suppress(ValueError):
                _current.reset(token)

    return wrapped
