"""A SERVER span per RPC, written as one small grpc.aio interceptor instead of the contrib
instrumentation package (which pulls in wrapt and instruments every server in the process).

The span follows the OpenTelemetry RPC conventions (`rpc.system`, `rpc.service`,
`rpc.method`, `rpc.grpc.status_code`), continues the caller's W3C `traceparent`, and records
only the status code: exception text and status details may carry payloads (SI-10). Health and
reflection RPCs get no span. Wrapped handlers are built once per handler and cached.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc
from opentelemetry.trace import Span, Status, StatusCode

from gateway.telemetry import tracing

_SKIP = ("/grpc.health.v1.Health/", "/grpc.reflection.")
Behavior = Callable[[Any, Any], Any]


def _finish(span: Span, context: Any, failed: BaseException | None) -> None:
    code = context.code()
    if code is None:
        code = grpc.StatusCode.OK if failed is None else grpc.StatusCode.UNKNOWN
    if isinstance(failed, asyncio.CancelledError):  # the caller went away
        code = grpc.StatusCode.CANCELLED
    span.set_attribute("rpc.grpc.status_code", code.value[0])
    if code is not grpc.StatusCode.OK:
        span.set_status(Status(StatusCode.ERROR, code.name))


def _attributes(method: str) -> dict[str, str]:
    service, _, name = method.lstrip("/").rpartition("/")
    return {"rpc.system": "grpc", "rpc.service": service, "rpc.method": name}


def _unary(method: str, inner: Callable[[Any, Any], Awaitable[Any]]) -> Behavior:
    name = method.lstrip("/")
    attributes = _attributes(method)

    async def behavior(request: Any, context: Any) -> Any:
        parent = tracing.extract(context.invocation_metadata() or ())
        with tracing.server_span(name, parent, attributes) as span:
            try:
                response = await inner(request, context)
            except BaseException as exc:
                _finish(span, context, exc)
                raise
            _finish(span, context, None)
            return response

    return behavior


def _stream(method: str, inner: Callable[[Any, Any], AsyncIterator[Any]]) -> Behavior:
    name = method.lstrip("/")
    attributes = _attributes(method)

    async def behavior(request: Any, context: Any) -> AsyncIterator[Any]:
        parent = tracing.extract(context.invocation_metadata() or ())
        with tracing.server_span(name, parent, attributes) as span:
            try:
                async for item in inner(request, context):
                    yield item
            except BaseException as exc:
                _finish(span, context, exc)
                raise
            _finish(span, context, None)

    return behavior


class ServerSpans(grpc.aio.ServerInterceptor):  # type: ignore[misc]  # grpc is untyped
    """Opens the SERVER span of every unary and server-streaming RPC."""

    def __init__(self) -> None:
        # Keyed by the handler object (one per method and server): one interceptor may serve
        # several listeners whose same-named methods belong to different servicers (SI-2).
        self._cache: dict[int, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        cached = self._cache.get(id(handler))
        if cached is not None and cached[0] is handler:
            return cached[1]
        method: str = handler_call_details.method
        wrapped = handler
        if method.startswith(_SKIP):
            pass
        elif handler.unary_unary is not None:
            wrapped = grpc.unary_unary_rpc_method_handler(
                _unary(method, handler.unary_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        elif handler.unary_stream is not None:
            wrapped = grpc.unary_stream_rpc_method_handler(
                _stream(method, handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        self._cache[id(handler)] = (handler, wrapped)
        return wrapped
