"""A client of one MCP server over Streamable HTTP, in either protocol era (docs/upstreams.md).

- Stateless era (`2026-07-28`): every request stands alone — `params._meta` carries the version
  and the client capabilities, the headers repeat the version, the method (`Mcp-Method`) and a
  tool call's name (`Mcp-Name`). Nothing is kept between requests.
- Handshake era (`2025-11-25`, `2025-06-18`, `2025-03-26`): `initialize` once per upstream,
  then `notifications/initialized`; later requests carry the `Mcp-Session-Id` and the
  negotiated `MCP-Protocol-Version`. The session is pooled: every call to the upstream shares
  it. A `404` for the session means the server forgot it (the request was not processed), so
  the client makes a new session and sends the request again, once.
- Credentials: the upstream's static `headers`, and with `oauth` an access token from its token
  endpoint (client credentials, gateway/upstream/oauth.py) as `Authorization: Bearer`. A `401`
  (not processed) drops that token and the request goes once more with a new one; 401/403
  are UNAUTHENTICATED/FORBIDDEN, as in `gateway.upstream.http`.
- `protocol: auto` sends `server/discover` in the stateless era first and keeps that era when
  the server lists `2026-07-28`; anything else falls back to `initialize`.

- Ending: a request abandoned after it went out (the caller cancelled, the deadline passed) is
  followed by `notifications/cancelled` with its id, because an MCP server does not take a
  closed connection for a cancellation; at shutdown, or when a reload retired the client and no
  snapshot in use holds it (gateway/upstream/lifetimes.py), a handshake-era session is ended
  with an HTTP `DELETE` carrying its `Mcp-Session-Id`. Both are bounded (`_FAREWELL_S`) and best
  effort: a server that refuses or does not answer changes nothing for the caller.

An answer is `application/json` or a `text/event-stream` whose events are read until the
response with the request's id (bounded by `max_response_bytes`). A
`notifications/tools/list_changed` seen in a stream starts a new tool-list `generation`.
Transport failures raise the governed errors of `gateway.upstream.http` (the same table);
a JSON-RPC error response raises `McpProtocolError`.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Mapping
from typing import Any, Final

import httpx2
import orjson

from gateway.errors import CapabilityError, Code
from gateway.upstream.httpclient import (
    AUTH_STATUSES,
    USER_AGENT,
    SentTracker,
    answered,
    retry_after,
    transport_errors,
    transport_failure,
)
from gateway.upstream.mcpspec import HANDSHAKE_VERSIONS, STATELESS_VERSION, McpUpstream
from gateway.upstream.oauth import TokenSource
from gateway.upstream.spec import Upstream
from gateway.upstream.state import (
    RETRY_AFTER_KEY,
    UPSTREAM_STATUS_KEY,
    ExecutionState,
    with_state,
)
from gateway.values.jsonvalue import parse_strict

__all__ = ["CLIENT_INFO", "McpClient", "McpProtocolError"]

CLIENT_INFO: Final = {"name": "capgate", "version": "0.1"}
_VERSION_KEY: Final = "io.modelcontextprotocol/protocolVersion"
_CAPABILITIES_KEY: Final = "io.modelcontextprotocol/clientCapabilities"
_CLIENT_INFO_KEY: Final = "io.modelcontextprotocol/clientInfo"
_LIST_CHANGED: Final = "notifications/tools/list_changed"
_RETRYABLE: Final = frozenset({429, 503})
_FAREWELL_S: Final = 2.0  # a notifications/cancelled or the session's DELETE, each
_MAX_TOOL_PAGES: Final = 100


class McpProtocolError(Exception):
    """A JSON-RPC error response (`code`, `message`); the message is the server's, not public."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"JSON-RPC error {code}: {message[:200]}")
        self.code = code


class _SessionGone(Exception):
    """The handshake-era session is unknown to the server (404): make a new one."""


class McpClient:
    """One upstream's MCP client; shared by every call to it (the session is pooled)."""

    def __init__(self, client: httpx2.AsyncClient, upstream: Upstream) -> None:
        spec = upstream.mcp or McpUpstream()
        self.upstream = upstream.name
        self._client = client
        self._url = f"{'https' if upstream.tls else 'http'}://{upstream.address}{spec.path}"
        self._protocol = spec.protocol
        self._max_bytes = upstream.max_response_bytes
        self._headers = httpx2.Headers(
            [
                ("user-agent", USER_AGENT),
                ("accept", "application/json, text/event-stream"),
                # identity: the answer is read raw, and max_response_bytes counts those bytes
                ("accept-encoding", "identity"),
            ]
        )
        self._headers.update(dict(spec.headers))
        self._oauth = (
            TokenSource(spec.oauth, upstream=upstream.name, ca_file=upstream.ca_file)
            if spec.oauth is not None
            else None
        )
        self._ids = itertools.count(1)
        self._lock = asyncio.Lock()
        self.era: str | None = None  # "stateless" or "handshake", once known
        self.version = ""
        self._session_id: str | None = None
        # Counts the tools/list_changed notifications seen; a tool list is of one generation.
        self.generation = 0
        self._tools: tuple[int, list[dict[str, Any]]] | None = None
        self._farewells: set[asyncio.Task[None]] = set()  # notifications/cancelled in flight
        self._closed = False

    # -- the two calls capgate makes ---------------------------------------------------------

    async def list_tools(self, *, sent: SentTracker | None = None) -> list[dict[str, Any]]:
        """Every tool the server lists (all pages)."""
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(_MAX_TOOL_PAGES):
            params = {"cursor": cursor} if cursor else {}
            result = await self.request("tools/list", params, sent=sent or SentTracker())
            page = result.get("tools")
            if not isinstance(page, list):
                raise self._invalid("tools/list result without a tools list")
            tools += [t for t in page if isinstance(t, dict)]
            cursor = result.get("nextCursor") if isinstance(result.get("nextCursor"), str) else None
            if not cursor:
                return tools
        raise self._invalid("tools/list has more than 100 pages")

    async def current_tools(self, *, refresh: bool = False) -> tuple[list[dict[str, Any]], int]:
        """The tool list of the current generation (listed again after list_changed, or when
        `refresh`), and that generation."""
        if not refresh and self._tools is not None and self._tools[0] == self.generation:
            return self._tools[1], self._tools[0]
        generation = self.generation
        tools = await self.list_tools()
        self._tools = (generation, tools)
        return tools, generation

    async def call_tool(
        self, name: str, arguments: Any, *, sent: SentTracker, headers: Mapping[str, str]
    ) -> dict[str, Any]:
        """The `tools/call` result (isError and all); protocol errors raise."""
        params = {"name": name, "arguments": arguments}
        return await self.request("tools/call", params, sent=sent, extra=headers)

    async def aclose(self) -> None:
        """End the session and close what the client owns besides the pooled HTTP client
        (the token source's): the cancellations still in flight get their bound, then a
        handshake-era session is ended with a DELETE (a 405, "not allowed", is an answer too)."""
        self._closed = True  # a request from now on would open a session nobody ends
        if self._farewells:
            await asyncio.wait(set(self._farewells), timeout=_FAREWELL_S)
        if self.era == "handshake" and self._session_id:
            session, self._session_id, self.era = self._session_id, None, None
            headers = self._headers.copy()
            headers.update({"mcp-protocol-version": self.version, "mcp-session-id": session})
            await self._farewell(self._delete(headers))
        if self._oauth is not None:
            await self._oauth.close()

    async def _delete(self, headers: httpx2.Headers) -> None:
        if self._oauth is not None:
            headers["authorization"] = f"Bearer {await self._oauth.token()}"
        response = await self._client.request("DELETE", self._url, headers=headers)
        await response.aclose()

    async def _farewell(self, coro: Any) -> None:
        """A best-effort message at the end of something: bounded, never raising."""
        try:
            async with asyncio.timeout(_FAREWELL_S):
                await coro
        except Exception:  # refused, unreachable, too slow: the caller's outcome stands
            return

    def _cancelled(self, request_id: Any, stateless: bool, sent_with: httpx2.Headers) -> None:
        """Tell the server that the request with `request_id` is abandoned (from a task of
        its own: the caller's task is being cancelled). The notice carries the headers the
        request went out with (its session, the actor token, the trace context), the
        stateless era's method header changed to the notice's."""
        params: dict[str, Any] = {"requestId": request_id, "reason": "the caller cancelled"}
        note = self._message("notifications/cancelled", params, stateless=stateless)
        del note["id"]  # a notification
        headers = sent_with.copy()
        if stateless:
            headers["mcp-method"] = "notifications/cancelled"
            headers.pop("mcp-name", None)
        task = asyncio.get_running_loop().create_task(
            self._farewell(self._post(note, headers, SentTracker())), name="mcp-cancelled"
        )
        self._farewells.add(task)
        task.add_done_callback(self._farewells.discard)

    # -- requests ----------------------------------------------------------------------------

    async def request(
        self,
        method: str,
        params: dict[str, Any],
        *,
        sent: SentTracker,
        extra: Mapping[str, str] = {},
    ) -> dict[str, Any]:
        """One JSON-RPC request in the server's era; the `result` object. A failure while the
        session is set up is NOT_STARTED: the request itself never went out."""
        if self._closed:  # shut down: no new session that no DELETE would end
            raise transport_failure(
                Code.UPSTREAM_UNAVAILABLE,
                f"upstream {self.upstream}: the client is closed",
                sent=False,
            )
        try:
            await self._ready()
        except CapabilityError as err:
            raise with_state(err, ExecutionState.NOT_STARTED) from None
        try:
            return await self._request(method, params, sent, extra)
        except _SessionGone:
            try:
                async with self._lock:
                    self.era, self._session_id = None, None  # others wait for the new one
                    await self._handshake()
            except CapabilityError as err:
                raise with_state(err, ExecutionState.NOT_STARTED) from None
            try:
                return await self._request(method, params, sent, extra)
            except _SessionGone:
                raise transport_failure(
                    Code.UPSTREAM_UNAVAILABLE,
                    f"upstream {self.upstream}: the MCP session was refused again",
                    sent=False,
                ) from None

    async def _ready(self) -> None:
        """The era is known once: `server/discover` or the handshake runs again only when
        none succeeded yet, or the server forgot its session (a server that issues no
        `Mcp-Session-Id` keeps the one handshake)."""
        if self.era is not None:
            return
        async with self._lock:
            if self.era is not None:
                return
            if self._protocol == STATELESS_VERSION or (
                self._protocol == "auto" and await self._discover()
            ):
                self.era, self.version = "stateless", STATELESS_VERSION
            else:
                await self._handshake()

    async def _discover(self) -> bool:
        """server/discover in the stateless era: does the server speak it?"""
        message = self._message("server/discover", {}, stateless=True)
        headers = self._stateless_headers("server/discover", {})
        status, _, body = await self._post(message, headers, SentTracker())
        if status != 200:
            return False
        try:
            result = _result_of(body, message["id"], self)
        except (McpProtocolError, CapabilityError):
            return False
        versions = result.get("supportedVersions")
        return isinstance(versions, list) and STATELESS_VERSION in versions

    async def _handshake(self) -> None:
        offered = self._protocol if self._protocol in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[0]
        params = {"protocolVersion": offered, "capabilities": {}, "clientInfo": CLIENT_INFO}
        message = self._message("initialize", params, stateless=False)
        status, headers, body = await self._post(message, httpx2.Headers(), SentTracker())
        if status in AUTH_STATUSES:  # the caller's request never went out: NOT_STARTED
            reason = f"upstream {self.upstream}: initialize answered HTTP {status}"
            error = CapabilityError(AUTH_STATUSES[status], reason=reason)
            error.details[UPSTREAM_STATUS_KEY] = f"HTTP {status}"
            raise with_state(error, ExecutionState.NOT_STARTED)
        if status != 200:
            raise self._unavailable(f"initialize answered HTTP {status}")
        result = _result_of(body, message["id"], self)
        version = result.get("protocolVersion")
        if version not in HANDSHAKE_VERSIONS:
            raise self._unavailable("initialize negotiated a version capgate does not speak")
        self.version, self._session_id = str(version), headers.get("mcp-session-id")
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await self._post(note, self._session_headers(), SentTracker())
        self.era = "handshake"  # last: until now, every other call waits on the lock

    async def _request(
        self, method: str, params: dict[str, Any], sent: SentTracker, extra: Mapping[str, str]
    ) -> dict[str, Any]:
        stateless = self.era == "stateless"
        message = self._message(method, params, stateless=stateless)
        headers = self._stateless_headers(method, params) if stateless else self._session_headers()
        headers.update(extra)
        try:
            status, answer_headers, body = await self._post(message, headers, sent)
        except asyncio.CancelledError:
            if sent.sent:  # it went out: it may be running there
                self._cancelled(message["id"], stateless, headers)
            raise
        if status == 404 and not stateless and self._session_id is not None:
            raise _SessionGone
        if status in AUTH_STATUSES:
            reason = f"upstream {self.upstream}: {method} answered HTTP {status}"
            raise answered(CapabilityError(AUTH_STATUSES[status], reason=reason), f"HTTP {status}")
        if status in _RETRYABLE:
            error = CapabilityError(
                Code.UPSTREAM_UNAVAILABLE, reason=f"upstream {self.upstream}: HTTP {status}"
            )
            after = retry_after(answer_headers)  # the least wait before a retry, as for http
            if after is not None:
                error.details[RETRY_AFTER_KEY] = after
            raise answered(error, f"HTTP {status}")
        if status != 200:
            reason = f"upstream {self.upstream}: {method} answered HTTP {status}"
            raise answered(CapabilityError(Code.EXECUTION_FAILED, reason=reason), f"HTTP {status}")
        return _result_of(body, message["id"], self)

    def _message(self, method: str, params: dict[str, Any], *, stateless: bool) -> dict[str, Any]:
        if stateless:
            meta = {
                _VERSION_KEY: STATELESS_VERSION,
                _CAPABILITIES_KEY: {},
                _CLIENT_INFO_KEY: CLIENT_INFO,
            }
            params = {**params, "_meta": {**params.get("_meta", {}), **meta}}
        return {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params}

    def _stateless_headers(self, method: str, params: Mapping[str, Any]) -> httpx2.Headers:
        headers = httpx2.Headers({"mcp-protocol-version": STATELESS_VERSION, "mcp-method": method})
        name = params.get("name")
        if method == "tools/call" and isinstance(name, str):
            headers["mcp-name"] = name if name.isascii() and name.isprintable() else ""
        return headers

    def _session_headers(self) -> httpx2.Headers:
        headers = httpx2.Headers({"mcp-protocol-version": self.version})
        if self._session_id:
            headers["mcp-session-id"] = self._session_id
        return headers

    async def _post(
        self, message: Mapping[str, Any], headers: httpx2.Headers, sent: SentTracker
    ) -> tuple[int, httpx2.Headers, bytes]:
        """POST one message; (status, headers, the JSON of the answer: the JSON body, or the
        data of the SSE event that answers the message's id, else b'')."""
        all_headers = self._headers.copy()
        all_headers.update(headers)
        all_headers["content-type"] = "application/json"
        if self._oauth is None:
            return await self._send(message, all_headers, sent)
        # A 401 means the request was not processed: the cached token is dropped and the
        # request sent once more with a fresh one (raises NOT_STARTED when none can be had).
        for attempt in range(2):
            bearer = await self._oauth.token()
            all_headers["authorization"] = f"Bearer {bearer}"
            answer = await self._send(message, all_headers, sent)
            if answer[0] != 401 or attempt == 1:
                return answer
            self._oauth.invalidate(bearer)
            sent.sent = sent.headers_written = False  # the refused request did nothing
        raise AssertionError("unreachable")

    async def _send(
        self, message: Mapping[str, Any], headers: httpx2.Headers, sent: SentTracker
    ) -> tuple[int, httpx2.Headers, bytes]:
        with transport_errors(self.upstream, sent):
            request = self._client.build_request(
                "POST",
                self._url,
                headers=headers,
                content=orjson.dumps(message),
                extensions={"trace": sent},
            )
            response = await self._client.send(request, stream=True)
            try:
                body = await self._read(response, message.get("id"))
            finally:
                await response.aclose()
        return response.status_code, response.headers, body

    async def _read(self, response: httpx2.Response, request_id: Any) -> bytes:
        """The answer's JSON: the body, or the data of the SSE event answering `request_id`.
        Every byte read counts against `max_response_bytes`, a line without its end too."""
        event_stream = response.headers.get("content-type", "").split(";", 1)[0].strip()
        size = 0
        # Linear in the answer however it is chunked: bytes are appended in place, and the
        # search for the next line end starts where the last one stopped.
        buffered = bytearray()
        start = 0  # where the current (unfinished) line begins
        scanned = 0  # no line end in buffered[start:scanned]
        data: list[bytes] = []
        async for chunk in response.aiter_raw():
            size += len(chunk)
            if size > self._max_bytes:
                raise self._too_large()
            buffered += chunk
            if event_stream != "text/event-stream":
                continue
            while (end := buffered.find(b"\n", scanned)) != -1:
                line = bytes(buffered[start:end]).removesuffix(b"\r")
                start = scanned = end + 1
                if line.startswith(b"data:"):
                    data.append(line[5:].removeprefix(b" "))
                elif not line and data:
                    event, data = b"\n".join(data), []
                    if self._answers(event, request_id):
                        return event
            scanned = len(buffered)
            if start:
                del buffered[:start]  # only the unfinished line stays
                scanned -= start
                start = 0
        if event_stream != "text/event-stream":
            return bytes(buffered)
        if buffered.startswith(b"data:"):
            data.append(bytes(buffered[5:]).removeprefix(b" "))
        if data and self._answers(b"\n".join(data), request_id):
            return b"\n".join(data)
        return b""

    def _answers(self, event: bytes, request_id: Any) -> bool:
        """Whether an SSE event is the response to `request_id` (notes list_changed)."""
        try:
            message = orjson.loads(event)
        except orjson.JSONDecodeError:
            return False
        if not isinstance(message, dict):
            return False
        if message.get("method") == _LIST_CHANGED:
            self.generation += 1
        return "id" in message and message.get("id") == request_id and "method" not in message

    def _too_large(self) -> CapabilityError:
        reason = f"upstream {self.upstream}: answer over max_response_bytes"
        return answered(CapabilityError(Code.OUTPUT_INVALID, reason=reason), "MCP answer")

    def _invalid(self, what: str) -> CapabilityError:
        reason = f"upstream {self.upstream}: {what}"
        return answered(CapabilityError(Code.EXECUTION_FAILED, reason=reason), "MCP answer")

    def _unavailable(self, what: str) -> CapabilityError:
        reason = f"upstream {self.upstream}: {what}"
        return transport_failure(Code.UPSTREAM_UNAVAILABLE, reason, sent=False)


def _result_of(body: bytes, request_id: Any, client: McpClient) -> dict[str, Any]:
    """The `result` of the JSON-RPC response in `body` (strict JSON); errors raise."""
    if not body:
        raise client._invalid("no JSON-RPC response")
    try:
        message = parse_strict(body, what="MCP response")
    except CapabilityError:
        raise client._invalid("the response is not strict JSON") from None
    if not isinstance(message, dict) or message.get("id") != request_id:
        raise client._invalid("not the JSON-RPC response to the request")
    error = message.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        text = error.get("message")
        raise McpProtocolError(
            code if isinstance(code, int) else 0, text if isinstance(text, str) else ""
        )
    result = message.get("result")
    if not isinstance(result, dict):
        raise client._invalid("a JSON-RPC response without a result object")
    return result
