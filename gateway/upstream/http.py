"""`kind: http` upstreams: a capability is one HTTP/JSON request (docs/upstreams.md, ADR 0028).

The request: the method and path template of the capability's `http` block, below the
upstream's configured origin and `base_path`. Each `{placeholder}` fills one whole path segment
with a string or integer of the value to send, percent-encoded so that every byte outside the
RFC 3986 unreserved set (`A-Z a-z 0-9 - . _ ~`) becomes `%XX`: a value can never add a segment
(`/`), a query (`?`), a fragment (`#`), userinfo (`@`), a scheme or port (`:`), or a line (CR,
LF), and `.`, `..` and the empty string are refused outright (INPUT_INVALID, nothing sent).
Query parameters are encoded the same way. The body is the value without the properties the
URL took, as JSON (`body: input`), or nothing. The scheme, host and port come from the
upstream's `address` and `tls` only — never from a value (No SSRF by construction).

`HttpCall.__call__` takes "the value to send": the validated input, or what stage 11's
`map_input` built from it; `request_for` is the same step on its own.

The answer, one table (`map_response`):

| answer                                   | code                 | exposed       | state       |
|------------------------------------------|----------------------|---------------|-------------|
| 2xx, strict JSON (empty body: null)      | (the output)         |               | COMPLETED   |
| 2xx, not strict JSON / over the limit    | OUTPUT_INVALID       | no            | COMPLETED   |
| a status listed in `contract_errors`     | EXECUTION_FAILED     | its message   | COMPLETED   |
| 401 / 403 (not in `contract_errors`)     | UNAUTHENTICATED / FORBIDDEN | yes    | COMPLETED   |
| 429, 503 (retryable; `Retry-After` kept) | UPSTREAM_UNAVAILABLE | yes           | COMPLETED   |
| a redirect not followed, any other status| EXECUTION_FAILED     | no (SI-9)     | COMPLETED   |
| no connection made (refused, DNS, TLS)   | UPSTREAM_UNAVAILABLE | yes           | NOT_STARTED |
| the deadline before the request went out | TIMEOUT              | yes           | NOT_STARTED |
| the deadline after the request went out  | TIMEOUT              | yes           | UNKNOWN     |
| the connection lost after sending        | UPSTREAM_UNAVAILABLE | yes           | UNKNOWN     |

Redirects (`max_redirects` > 0): same origin and below `base_path` only; 301/302/303 become a
GET without body, followed only by a GET or a side-effect-free capability; 307/308 keep method
and body, followed only for a side-effect-free or idempotent capability.

"Went out" is known exactly: the HTTP client reports when it starts sending the request
headers (httpcore's `trace` extension); before that nothing reached the upstream.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

import httpx2
import orjson

from gateway.errors import GENERIC_MESSAGE, CapabilityError, Code, InputIssue
from gateway.model import HttpRoute
from gateway.upstream.headers import Metadata
from gateway.upstream.httpclient import (
    AUTH_STATUSES,
    USER_AGENT,
    HttpClients,
    SentTracker,
    answered,
    deadline_exceeded,
    public_text,
    retry_after,
    transport_errors,
    transport_failure,
)
from gateway.upstream.httpspec import HttpUpstream
from gateway.upstream.spec import Upstream
from gateway.upstream.state import (
    RETRY_AFTER_KEY,
    ExecutionState,
    with_state,
)
from gateway.values.jsonvalue import parse_strict

__all__ = [
    "HttpCall",
    "HttpRequest",
    "http_call",
    "map_response",
    "request_for",
]


# httpx2 logs each request's URL at INFO, and a URL here carries input values (path segments
# and query): never in logs (§12). Its warnings and errors are kept.
logging.getLogger("httpx2").setLevel(logging.WARNING)
log = logging.getLogger("capgate.upstream")
_RETRYABLE: Final = frozenset({429, 503})
_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
# Followed as a GET without body (301/302 by long client practice, 303 by definition).
_REDIRECTS_TO_GET: Final = frozenset({301, 302, 303})
_SEGMENT_RULE: Final = "must be a non-empty string or integer other than . and .."
_QUERY_RULE: Final = "must be a string, number or boolean to be sent as a query parameter"
# Metadata the gRPC path sends that HTTP carries as headers of the same names.
_FORWARDED_PREFIXES: Final = ("x-capgate-", "traceparent", "tracestate")


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """What goes out: the method, the path and query below the origin, and the JSON body."""

    method: str
    target: str  # "/base/orders/A%2FB?x=1": path and query only, already encoded
    body: bytes | None


def _input_invalid(path: str, rule: str) -> CapabilityError:
    error = CapabilityError(
        Code.INPUT_INVALID,
        reason=f"http request: {path}: {rule}",
        issues=(InputIssue(path, rule),),
    )
    return with_state(error, ExecutionState.NOT_STARTED)


def _segment(value: Any, name: str) -> str:
    """One path segment from a value: every byte but the unreserved ones percent-encoded."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise _input_invalid(f"$.{name}", _SEGMENT_RULE)
    text = str(value)
    if text in ("", ".", ".."):
        raise _input_invalid(f"$.{name}", _SEGMENT_RULE)
    return _encoded(text, name)


def _encoded(text: str, name: str) -> str:
    try:
        return quote(text, safe="")
    except UnicodeEncodeError:  # a lone surrogate the parser let through: not sendable
        raise _input_invalid(f"$.{name}", "must be valid Unicode text") from None


def _query_value(value: Any, name: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return orjson.dumps(value).decode()
    if isinstance(value, str):
        return value
    raise _input_invalid(f"$.{name}", _QUERY_RULE)


def request_for(route: HttpRoute, base_path: str, value: Any) -> HttpRequest:
    """The request for `value` (the validated input, or what map_input built from it)."""
    fields: Mapping[str, Any] = value if isinstance(value, Mapping) else {}
    segments = [base_path]
    for part in route.path:
        if part.name:
            if part.name not in fields:
                raise _input_invalid(f"$.{part.name}", "is required in the URL path")
            segments.append("/" + _segment(fields[part.name], part.name))
        else:
            segments.append("/" + part.literal)
    target = "".join(segments) or "/"
    pairs = [
        f"{quote(name, safe='')}={_encoded(_query_value(fields[name], name), name)}"
        for name in route.query
        if name in fields and fields[name] is not None
    ]
    if pairs:
        target += "?" + "&".join(pairs)
    body: bytes | None = None
    if route.body == "input":
        bound = route.bound
        sent = {k: v for k, v in fields.items() if k not in bound} if fields else value
        body = orjson.dumps(sent)
    return HttpRequest(route.method, target, body)


def _contract_message(body: bytes, content_type: str) -> str:
    """The public message of a declared contract error: a JSON body's `message` (or `error`,
    or `error.message`, or `detail`), else a text/plain body, else the generic message."""
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict):
        for key in ("message", "error", "detail"):
            found = parsed.get(key)
            if isinstance(found, dict):
                found = found.get("message")
            if isinstance(found, str):
                return public_text(found)
        return GENERIC_MESSAGE
    if content_type.split(";", maxsplit=1)[0].strip().lower() == "text/plain":
        return public_text(body.decode("utf-8", errors="replace"))
    return GENERIC_MESSAGE


def map_response(
    status: int, headers: httpx2.Headers, body: bytes, *, route: HttpRoute, upstream: str
) -> Any:
    """The output of a final (non-redirect) answer, or the governed error (the module table)."""
    tag = f"HTTP {status}"
    reason = f"upstream {upstream}: {tag}"
    if 200 <= status < 300:
        if not body.strip():
            return None
        try:
            return parse_strict(body, what="response body")
        except CapabilityError as err:
            raise answered(
                CapabilityError(Code.OUTPUT_INVALID, reason=f"{reason}: {err.reason}"), tag
            ) from None
    if status in route.contract_errors:
        error = CapabilityError(
            Code.EXECUTION_FAILED,
            message=_contract_message(body, headers.get("content-type", "")),
            reason=f"{reason} (contract error)",
            expose_to_model=True,
        )
        error.details["contract_reason"] = f"http_{status}"
        raise answered(error, tag)
    if status in AUTH_STATUSES:
        raise answered(CapabilityError(AUTH_STATUSES[status], reason=reason), tag)
    if status in _RETRYABLE:
        error = CapabilityError(Code.UPSTREAM_UNAVAILABLE, reason=reason)
        after = retry_after(headers)
        if after is not None:
            error.details[RETRY_AFTER_KEY] = after
        raise answered(error, tag)
    raise answered(CapabilityError(Code.EXECUTION_FAILED, reason=reason), tag)


def _origin(url: httpx2.URL) -> tuple[str, str, int | None]:
    return (url.scheme, url.host, url.port)


def _below(path: str, base_path: str) -> bool:
    """Whether a (decoded) redirect path is `base_path` or below it, with no `.`/`..` segment
    left (a `%2e%2e` the upstream would decode included)."""
    if any(segment in (".", "..") for segment in path.split("/")):
        return False
    base = base_path.rstrip("/")
    return not base or path == base or path.startswith(base + "/")


class HttpCall:
    """The prepared call of one capability on a `kind: http` upstream."""

    def __init__(
        self,
        client: httpx2.AsyncClient,
        upstream: Upstream,
        route: HttpRoute,
        *,
        effect_free: bool = False,
        rerun_safe: bool = False,
    ) -> None:
        """`effect_free`: the capability's side effect is none or read; `rerun_safe`: that,
        or it is declared idempotent. Both decide which redirects are followed."""
        spec = upstream.http or HttpUpstream()
        self._effect_free = effect_free
        self._rerun_safe = rerun_safe or effect_free
        self.full_method = f"{route.method} {spec.base_path}{route.template}"
        # The attempt span's attributes (OpenTelemetry HTTP client conventions): the method and
        # the path template, never the path with the caller's values in it (SI-10).
        self.span_attributes: dict[str, str] = {
            "http.request.method": route.method,
            "url.template": f"{spec.base_path}{route.template}",
        }
        self.route = route
        self._client = client
        self._upstream = upstream.name
        self._base_path = spec.base_path
        self._origin = f"{'https' if upstream.tls else 'http'}://{upstream.address}"
        self._max_redirects = spec.max_redirects
        self._max_bytes = upstream.max_response_bytes
        # identity: the body is read raw (aiter_raw), and max_response_bytes counts those bytes
        self._headers = httpx2.Headers(
            [
                ("user-agent", USER_AGENT),
                ("accept", "application/json"),
                ("accept-encoding", "identity"),
            ]
        )
        self._headers.update(dict(spec.headers))
        if upstream.server_name:
            self._headers["host"] = upstream.server_name
        self._extensions = {"sni_hostname": upstream.server_name} if upstream.server_name else {}

    async def __call__(
        self,
        input_value: Any,
        *,
        timeout: float,  # noqa: ASYNC109 - the attempt's share of the deadline
        metadata: Metadata = (),
    ) -> Any:
        request = request_for(self.route, self._base_path, input_value)
        headers = self._headers.copy()
        for key, value in metadata:
            if key.startswith(_FORWARDED_PREFIXES):
                headers[key] = value
        if request.body is not None:
            headers["content-type"] = "application/json"
        sent = SentTracker()
        try:
            async with asyncio.timeout(timeout):
                return await self._exchange(request, headers, sent)
        except TimeoutError:
            raise deadline_exceeded(self._upstream, sent) from None

    async def _exchange(
        self, request: HttpRequest, headers: httpx2.Headers, sent: SentTracker
    ) -> Any:
        url = httpx2.URL(self._origin + request.target)
        method, body = request.method, request.body
        for hop in range(self._max_redirects + 1):
            status, answer_headers, payload = await self._send(
                self._build(method, url, headers, body, sent), sent
            )
            location = answer_headers.get("location")
            if status not in _REDIRECTS or location is None:
                return map_response(
                    status, answer_headers, payload, route=self.route, upstream=self._upstream
                )
            if hop == self._max_redirects:
                break
            url = self._redirect_target(url, location, status, method)
            if status in _REDIRECTS_TO_GET:
                method, body = "GET", None
                headers.pop("content-type", None)
        raise self._not_followed("redirect not followed (max_redirects)")

    def _redirect_target(
        self, url: httpx2.URL, location: str, status: int, method: str
    ) -> httpx2.URL:
        """Where a redirect may be followed, or the refusal (EXECUTION_FAILED, COMPLETED: the
        upstream answered). 301/302/303 are followed as a GET without body: only by a GET or a
        side-effect-free capability, never re-sending a write's body elsewhere; 307/308 keep
        method and body: only for a side-effect-free or idempotent capability. The target must
        be the same origin and below `base_path`, without dot segments."""
        if status in _REDIRECTS_TO_GET and method != "GET" and not self._effect_free:
            raise self._not_followed(f"HTTP {status} for a {method} with side effects")
        if status not in _REDIRECTS_TO_GET and not self._rerun_safe:
            raise self._not_followed(f"HTTP {status} for a capability that is not idempotent")
        target = url.join(location)
        if _origin(target) != _origin(url):
            raise self._not_followed("redirect to another origin refused")
        if not _below(target.path, self._base_path):
            raise self._not_followed("redirect outside base_path refused")
        return target

    def _not_followed(self, why: str) -> CapabilityError:
        reason = f"upstream {self._upstream}: {why}"
        return answered(CapabilityError(Code.EXECUTION_FAILED, reason=reason), "HTTP redirect")

    def _build(
        self,
        method: str,
        url: httpx2.URL,
        headers: httpx2.Headers,
        body: bytes | None,
        sent: SentTracker,
    ) -> httpx2.Request:
        try:
            return self._client.build_request(
                method,
                url,
                headers=headers,
                content=body,
                extensions={"trace": sent, **self._extensions},
            )
        except (httpx2.InvalidURL, ValueError, TypeError) as err:
            reason = f"upstream {self._upstream}: not sent: {type(err).__name__}"
            raise transport_failure(Code.EXECUTION_FAILED, reason, sent=False) from err

    async def _send(
        self, outgoing: httpx2.Request, sent: SentTracker
    ) -> tuple[int, httpx2.Headers, bytes]:
        with transport_errors(self._upstream, sent):
            response = await self._client.send(outgoing, stream=True)
            try:
                payload = await self._read(response)
            finally:
                await response.aclose()
        return response.status_code, response.headers, payload

    async def _read(self, response: httpx2.Response) -> bytes:
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_raw():
            size += len(chunk)
            if size > self._max_bytes:
                reason = f"upstream {self._upstream}: response over max_response_bytes"
                raise answered(
                    CapabilityError(Code.OUTPUT_INVALID, reason=reason),
                    f"HTTP {response.status_code}",
                )
            chunks.append(chunk)
        return b"".join(chunks)


def http_call(
    clients: HttpClients,
    upstream: Upstream,
    route: HttpRoute,
    *,
    effect_free: bool = False,
    rerun_safe: bool = False,
) -> HttpCall:
    """The prepared call of a capability on a `kind: http` upstream (`effect_free`,
    `rerun_safe`: as `HttpCall`'s)."""
    return HttpCall(
        clients.client(upstream),
        upstream,
        route,
        effect_free=effect_free,
        rerun_safe=rerun_safe,
    )
