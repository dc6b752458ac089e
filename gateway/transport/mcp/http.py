"""MCP Streamable HTTP: the one endpoint (POST, DELETE, and GET for a session's notification
stream when sessions live in Redis, gateway/transport/mcp/notify.py; else GET answers 405) and the
RFC 9728 metadata, as a small ASGI app.

Each request passes, in this order: Host allow-list (421), path, Origin (403 unless the
listener's own origin or listed), method, bearer JWT with the listener's validation (401 with
the resource-metadata challenge),
content negotiation (406, 415), body size (413), strict JSON (no duplicate keys, 64-bit
integers: §12), the message, the `MCP-Protocol-Version` header (400 when not spoken on
sessions) and the session (400 without one, 404 unknown or another actor's). Only then
does the handler run. A request's answer is JSON or, when the client prefers it, one SSE event.

A request runs in a task of its own (gateway/transport/mcp/inflight.py, ADR 0039) that its caller
can cancel: by going away, or in the handshake era by `notifications/cancelled` on its session.
One error boundary, here: whatever the handler raises besides a JSON-RPC error is answered
`-32603 "Internal error."` (HTTP 500; with the request's id once it is known), and the
listener keeps serving.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Final, Literal

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from gateway.config.settings import Listener, McpSettings
from gateway.errors import CapabilityError
from gateway.model import Actor, Limits
from gateway.pipeline.drain import Drain
from gateway.state.mcp_sessions import Session, SessionsFull, SessionStore, SessionsUnavailable
from gateway.telemetry import tracing
from gateway.transport.auth.base import AuthenticationFailed, Authenticator
from gateway.transport.auth.listeners import build_authenticator
from gateway.transport.mcp import guard, modern, notify
from gateway.transport.mcp.inflight import InFlight
from gateway.transport.mcp.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    Message,
    RpcError,
    error,
    parse_message,
    request_id,
    result,
)
from gateway.transport.mcp.protocol import (
    BATCH_VERSIONS,
    CANCELLED,
    SERVER_INFO,
    SESSIONLESS,
    SUPPORTED_VERSIONS,
    McpHandler,
    Reply,
)
from gateway.transport.mcp.streams import StreamSlots
from gateway.values.jsonvalue import parse_json

log = logging.getLogger("capgate.mcp")

Encoding = Literal["json", "sse"]
_ALLOW: Final = "POST, DELETE, OPTIONS"
_RETRY: Final = {"retry-after": "1"}
_MEDIA: Final = (("json", "application/json"), ("sse", "text/event-stream"))
_INTERNAL: Final = RpcError(INTERNAL_ERROR, "Internal error.")
_CANCELLED: Final = RpcError(REQUEST_CANCELLED, "Request cancelled.")


def negotiate(accept: str | None) -> Encoding | None:
    """The response encoding the client prefers (q-values, then order; JSON on a tie or
    without an Accept header), or None when it accepts neither."""
    if not accept:
        return "json"
    best: dict[str, tuple[float, int, int]] = {}  # kind -> (q, specificity, -position)
    for position, part in enumerate(accept.split(",")):
        media, *params = (p.strip().lower() for p in part.split(";"))
        q = 1.0
        for param in params:
            if param.startswith("q="):
                try:
                    q = float(param[2:])
                except ValueError:
                    q = 0.0
        for kind, full in _MEDIA:
            wildcard = full.split("/")[0] + "/*"
            specificity = {full: 2, wildcard: 1, "*/*": 0}.get(media)
            if specificity is not None and (kind not in best or specificity > best[kind][1]):
                best[kind] = (q, specificity, -position)
    choices = [(q, pos, kind == "json", kind) for kind, (q, _, pos) in best.items() if q > 0]
    if not choices:
        return None
    chosen: Encoding = "sse" if max(choices)[3] == "sse" else "json"
    return chosen


def accepts_sse(accept: str | None) -> bool:
    """Whether an Accept header lists `text/event-stream` (or `text/*`, `*/*`) with q > 0."""
    for part in (accept or "").split(","):
        media, *params = (p.strip().lower() for p in part.split(";"))
        if media in ("text/event-stream", "text/*", "*/*"):
            q = next((p[2:] for p in params if p.startswith("q=")), "1")
            try:
                if float(q) > 0:
                    return True
            except ValueError:
                continue
    return False


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status, headers, media_type="application/json")


def _fail(
    status: int,
    message: str,
    *,
    code: int = INVALID_REQUEST,
    data: Any = None,
    headers: dict[str, str] | None = None,
) -> Response:
    """A transport-level refusal: a JSON-RPC error without id (the spec allows one)."""
    return _json(status, error(None, RpcError(code, message, data)), headers)


def _encode(
    body: dict[str, Any], status: int, encoding: Encoding, headers: dict[str, str]
) -> Response:
    data = orjson.dumps(body)  # one line: no newline can end the SSE event early
    if encoding == "sse":
        return Response(
            b"event: message\ndata: " + data + b"\n\n",
            status,
            {**headers, "cache-control": "no-cache"},
            media_type="text/event-stream",
        )
    return Response(data, status, headers, media_type="application/json")


def _status(err: RpcError) -> int:
    """A JSON-RPC error's HTTP status on sessions: 500 for an internal error, else 200."""
    return 500 if err.code == INTERNAL_ERROR else 200


def _cancelled_id(params: dict[str, Any]) -> Any:
    """The `requestId` a `notifications/cancelled` names (anything else names no request)."""
    value = params.get("requestId")
    valid = isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
    return value if valid else None


# The answer to a request whose client went away (nobody reads it; uvicorn drops it).
_GONE: Final = Response(None, 204)


class _HeldStream(StreamingResponse):
    """A GET stream that gives its slot back however its ASGI call ends (the stream ran out,
    the drain ended it, the client went away, or sending failed before the first event)."""

    def __init__(self, body: Any, release: Any) -> None:
        super().__init__(body, 200, {"cache-control": "no-cache"}, media_type="text/event-stream")
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


async def _read_body(request: Request, limit: int) -> bytes | None:
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


class McpApp:
    """The ASGI application of one MCP listener."""

    def __init__(
        self,
        listener: Listener,
        handler: McpHandler,
        sessions: SessionStore,
        authenticator: Authenticator,
        *,
        hosts: guard.HostAllowList,
        bind_host: str = "",
        scheme: str,
        limits: Limits,
        issuers: tuple[str, ...],
        events: notify.SessionEvents | None = None,
        drain: Drain | None = None,
    ) -> None:
        self._name = listener.name
        self._settings = listener.mcp or McpSettings()
        self._handler = handler
        self._sessions = sessions
        self._auth = authenticator
        self._hosts = hosts
        self._bind_host = bind_host
        self._scheme = scheme
        self._limits = limits
        self._events = events
        self._drain = drain  # a shutdown ends the GET streams (gateway/pipeline/drain.py)
        self._slots = StreamSlots()
        self._inflight = InFlight()
        self._allow = "GET, POST, DELETE, OPTIONS" if events is not None else _ALLOW
        self._metadata_paths = guard.metadata_paths(self._settings)
        self._servers = guard.authorization_servers(self._settings, issuers)

    def rebind(self, listener: Listener) -> None:
        """Take the authenticator (and advertised issuers) of `listener`, reloaded; raises
        ValueError as `build_authenticator` does, and then keeps the running one."""
        self._auth = build_authenticator(listener)
        issuers = listener.jwt.issuers if listener.jwt is not None else ()
        self._servers = guard.authorization_servers(self._settings, issuers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan is off; websockets are not served
        request = Request(scope, receive)
        try:
            response = await self._route(request)
        except Exception as exc:  # the transport's one error boundary: answer, keep serving
            log.error("MCP request failed (%s)", type(exc).__name__)  # never a payload
            response = _json(500, error(None, _INTERNAL))
        await response(scope, receive, send)

    async def _route(self, request: Request) -> Response:
        host = request.headers.get("host", "")
        if not self._hosts.allows(host):
            return _fail(421, "Misdirected Request: this host name is not served here.")
        path = request.url.path
        if path in self._metadata_paths:
            return self._metadata(request, host)
        if path != self._settings.path:
            return _fail(404, "Not Found.")
        origin = request.headers.get("origin")
        if origin is not None and not guard.origin_allowed(
            self._settings, origin, self._own_origins(request, host)
        ):
            return _fail(403, "Forbidden: origin not allowed.")
        response = await self._endpoint(request, host)
        if origin is not None:
            response.headers["access-control-allow-origin"] = origin
            response.headers["access-control-expose-headers"] = guard.CORS_EXPOSED_HEADERS
            response.headers["vary"] = "Origin"
        return response

    def _own_origins(self, request: Request, host: str) -> frozenset[guard.Origin]:
        server = request.scope.get("server")  # the socket's own (host, port)
        port = server[1] if server and isinstance(server[1], int) else None
        return guard.own_origins(
            self._settings,
            scheme=self._scheme,
            host_header=host,
            bind_host=self._bind_host,
            port=port,
        )

    def _metadata(self, request: Request, host: str) -> Response:
        if request.method not in ("GET", "HEAD"):
            return _fail(405, "Method Not Allowed.", headers={"allow": "GET, HEAD"})
        resource = guard.resource_url(self._settings, scheme=self._scheme, host=host)
        document = guard.metadata_document(resource, self._servers, f"capgate ({self._name})")
        return _json(200, document, {"access-control-allow-origin": "*"})

    async def _endpoint(self, request: Request, host: str) -> Response:
        method = request.method
        if method == "OPTIONS":  # CORS preflight from an allowed origin
            return Response(
                None,
                204,
                {
                    "allow": self._allow,
                    "access-control-allow-methods": self._allow.removesuffix(", OPTIONS"),
                    "access-control-allow-headers": guard.CORS_REQUEST_HEADERS,
                    "access-control-max-age": "600",
                },
            )
        allowed = ("GET", "POST", "DELETE") if self._events is not None else ("POST", "DELETE")
        if method not in allowed:
            return _fail(405, "Method Not Allowed.", headers={"allow": self._allow})
        credentials = request.headers.getlist("authorization")
        try:
            actor = self._auth.authenticate(
                [("authorization", value) for value in credentials], {}, _peer(request)
            )
        except AuthenticationFailed as exc:
            return self._unauthorized(host, exc.reason if credentials else None)
        try:
            if method == "DELETE":
                return await self._delete(request, actor)
            if method == "GET":
                return await self._get(request, actor)
            return await self._post(request, actor)
        except SessionsUnavailable:
            return _fail(503, "Service Unavailable: sessions cannot be reached.", headers=_RETRY)
        except SessionsFull:
            return _fail(503, "Service Unavailable: no room for another session.", headers=_RETRY)

    def _unauthorized(self, host: str, reason: str | None) -> Response:
        resource = guard.resource_url(self._settings, scheme=self._scheme, host=host)
        header = guard.challenge(guard.metadata_url(resource), reason)
        message = f"Unauthorized: {reason}." if reason else "Unauthorized: bearer token required."
        return _fail(401, message, headers={"www-authenticate": header})

    async def _delete(self, request: Request, actor: Actor) -> Response:
        session_id = request.headers.get("mcp-session-id")
        if not session_id:
            return _fail(400, "Bad Request: Mcp-Session-Id header required.")
        if not await self._sessions.close(session_id, actor.identity):
            return _fail(404, "Session not found.")
        return Response(None, 204)

    async def _get(self, request: Request, actor: Actor) -> Response:
        """The session's notification stream (gateway/transport/mcp/notify.py), resumable."""
        assert self._events is not None
        if not accepts_sse(request.headers.get("accept")):
            return _fail(406, "Not Acceptable: accept text/event-stream.")
        session = await self._session(request, actor)
        if isinstance(session, Response):
            return session

        async def decided(approval_id: str) -> str | None:
            return await self._handler.decided(approval_id, actor)

        refused = self._slots.take(session.id, actor.identity)
        if refused == "session":
            return _fail(409, "Conflict: this session's notification streams are already open.")
        if refused == "actor":
            message = "Too Many Requests: too many notification streams open for this actor."
            return _fail(429, message, headers=_RETRY)
        last = notify.event_id(request.headers.get("last-event-id"))
        stream = self._events.stream(session.id, actor.identity, last, decided)
        if self._drain is not None:
            stream = self._drain.until_closing(stream)
        slot = (session.id, actor.identity)
        return _HeldStream(stream, lambda: self._slots.give(*slot))

    async def _session(self, request: Request, actor: Actor) -> Session | Response:
        """The request's session. Its `MCP-Protocol-Version`, when sent, must be one spoken on
        sessions (400, the spec's answer to an invalid or unsupported version); the session
        keeps the version `initialize` negotiated, and an absent header means that one."""
        version = request.headers.get(modern.VERSION_HEADER)
        if version is not None and version not in SUPPORTED_VERSIONS:
            return _fail(
                400,
                "Bad Request: unsupported MCP-Protocol-Version.",
                data={"supported": list(SUPPORTED_VERSIONS)},
            )
        session_id = request.headers.get("mcp-session-id")
        if not session_id:
            return _fail(400, "Bad Request: Mcp-Session-Id header required.")
        session = await self._sessions.get(session_id, actor.identity)
        if session is None:
            return _fail(404, "Session not found.")
        return session

    async def _post(self, request: Request, actor: Actor) -> Response:
        encoding = negotiate(request.headers.get("accept"))
        if encoding is None:
            return _fail(406, "Not Acceptable: accept application/json or text/event-stream.")
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json":
            return _fail(415, "Unsupported Media Type: send application/json.")
        body = await _read_body(request, self._limits.max_bytes)
        if body is None:
            return _fail(413, "Payload Too Large.")
        try:
            # The envelope may carry U+0000 (a `_meta` value is refused naming its field); a
            # tool's arguments meet the input rule, NUL refused, when the call parses them.
            value = parse_json(body, self._limits, what="message", allow_nul=True)
        except CapabilityError:
            return _fail(400, "Parse error.", code=PARSE_ERROR)
        with_session = "mcp-session-id" in request.headers
        if isinstance(value, list) and with_session:
            return await self._post_batch(request, actor, value, encoding)
        try:
            message = parse_message(value)
        except RpcError as err:
            return _json(400, error(request_id(value), err))
        twice = modern.repeated(request.headers)
        if twice is not None:  # before routing: which copy decides the era cannot be known
            return _json(modern.status_of(twice.code), error(request_id(value), twice))
        version = request.headers.get(modern.VERSION_HEADER)
        if modern.is_modern(version, SUPPORTED_VERSIONS, session=with_session):
            return await self._post_modern(request, actor, message, encoding)
        session: Session | Response | None = None
        if message.kind != "request" or message.method not in SESSIONLESS:
            session = await self._session(request, actor)
            if isinstance(session, Response):
                return session
        if message.kind != "request":
            if isinstance(session, Session) and message.method == CANCELLED:
                self._inflight.cancel((session.id, _cancelled_id(message.params)))
            return Response(None, 202)  # notifications and responses: accepted, no body
        try:
            reply = await self._answer(request, message, actor, session, stateless=False)
        except RpcError as err:
            return _encode(error(message.id, err), _status(err), encoding, {})
        if reply is None:
            return _GONE
        headers = {"mcp-session-id": reply.session_id} if reply.session_id else {}
        awaited = _awaited_approval(reply.result)
        if awaited is not None and isinstance(session, Session) and self._events is not None:
            await self._events.watch(session.id, actor.identity, awaited)
        return _encode(result(message.id, reply.result), 200, encoding, headers)

    async def _post_batch(
        self, request: Request, actor: Actor, values: list[Any], encoding: Encoding
    ) -> Response:
        """A JSON-RPC batch, which only 2025-03-26 sessions may send (later revisions removed
        batches; `initialize` is never part of one). Messages run one after another in order;
        each request gets its own answer, an invalid member its own error."""
        session = await self._session(request, actor)
        if isinstance(session, Response):
            return session
        if session.protocol_version not in BATCH_VERSIONS or not values:
            err = RpcError(INVALID_REQUEST, "Batched messages are not supported.")
            if values:
                return _json(400, error(None, err))
            return _json(400, error(None, RpcError(INVALID_REQUEST, "Invalid Request.")))
        answers: list[dict[str, Any]] = []
        for value in values:
            try:
                message = parse_message(value)
                if message.kind == "request" and message.method == "initialize":
                    raise RpcError(INVALID_REQUEST, "initialize cannot be batched.")
            except RpcError as err:
                answers.append(error(request_id(value), err))
                continue
            if message.kind != "request":
                continue
            try:
                reply = await self._answer(request, message, actor, session, stateless=False)
            except RpcError as err:
                answers.append(error(message.id, err))
                continue
            if reply is None:  # the client went away: the rest of the batch is not run
                return _GONE
            answers.append(result(message.id, reply.result))
        if not answers:
            return Response(None, 202)
        if encoding == "sse":
            events = b"".join(
                b"event: message\ndata: " + orjson.dumps(a) + b"\n\n" for a in answers
            )
            return Response(
                events, 200, {"cache-control": "no-cache"}, media_type="text/event-stream"
            )
        return Response(orjson.dumps(answers), 200, media_type="application/json")

    async def _answer(
        self,
        request: Request,
        message: Message,
        actor: Actor,
        session: Session | Response | None,
        *,
        stateless: bool,
    ) -> Reply | None:
        """The handler's reply, run so that its caller can cancel it (ADR 0039); None when the
        client went away. `initialize` is never cancelled (the spec forbids it)."""
        work = self._handle(request, message, actor, stateless=stateless)
        if message.method == "initialize":
            return await work
        key = (session.id, message.id) if isinstance(session, Session) else None
        try:
            return await self._inflight.run(key, work, request.receive)
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise  # this request itself is being cancelled (a server stop)
            raise _CANCELLED from None  # cancelled before anything ran or was recorded

    async def _handle(
        self, request: Request, message: Message, actor: Actor, *, stateless: bool
    ) -> Reply:
        """The handler's reply under the request's SERVER span (W3C context from headers);
        anything but a JSON-RPC error is an internal error (logged by type, never a payload)."""
        traceparent = request.headers.get("traceparent", "")
        carrier = [
            (k, request.headers[k]) for k in ("traceparent", "tracestate") if k in request.headers
        ]
        attributes = {
            "rpc.system": "jsonrpc",
            "rpc.method": message.method,
            "mcp.method.name": message.method,
        }
        try:
            with tracing.server_span(message.method, tracing.extract(tuple(carrier)), attributes):
                return await self._handler.handle(
                    message,
                    actor,
                    traceparent=traceparent,
                    stateless=stateless,
                )
        except (RpcError, SessionsUnavailable, SessionsFull):
            raise  # answered by the caller: the JSON-RPC error, or 503 (`_endpoint`)
        except Exception as exc:
            log.error("MCP %s failed (%s)", message.method, type(exc).__name__)
            raise _INTERNAL from None

    async def _post_modern(
        self, request: Request, actor: Actor, message: Message, encoding: Encoding
    ) -> Response:
        """One request of the stateless era (gateway/transport/mcp/modern.py): no session, the
        version and capabilities in `_meta`, headers that must agree with the body."""
        requested = request.headers.get(modern.VERSION_HEADER, "")
        if message.kind != "request":
            # No client notification means anything in this era; one at a version not spoken
            # here is told so, like a request.
            if requested not in modern.MODERN_VERSIONS:
                err = modern.unsupported(requested, SUPPORTED_VERSIONS)
                return _json(modern.status_of(err.code), error(None, err))
            return Response(None, 202)
        try:
            modern.classify(message.method, message.params, request.headers, SUPPORTED_VERSIONS)
            reply = await self._answer(request, message, actor, None, stateless=True)
        except RpcError as err:
            status = modern.status_of(err.code) if err.code != INTERNAL_ERROR else 500
            if status != 200:
                return _json(status, error(message.id, err))
            return _encode(error(message.id, err), 200, encoding, {})
        if reply is None:
            return _GONE
        shaped = modern.shape(message.method, reply.result, SERVER_INFO)
        return _encode(result(message.id, shaped), 200, encoding, {})


def _awaited_approval(value: dict[str, Any]) -> str | None:
    """The approval id of a call result that says the call awaits approval."""
    structured = value.get("structuredContent")
    if isinstance(structured, dict) and structured.get("status") == "approval_required":
        approval_id = structured.get("approval_id")
        return approval_id if isinstance(approval_id, str) else None
    return None


def _peer(request: Request) -> str:
    client = request.client
    return f"ipv4:{client.host}:{client.port}" if client else ""
