"""JSON-RPC 2.0 messages as MCP uses them: one message per POST (batches, which only
2025-03-26 sessions may send, are split by gateway/transport/mcp/http.py), ids are strings or
integers, and every error has a fixed, value-free message."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
# A request cancelled before anything ran or was recorded (ADR 0039); the code JSON-RPC
# servers (LSP's RequestCancelled) use for it, from the range JSON-RPC reserves for servers.
REQUEST_CANCELLED: Final = -32800

RequestId = str | int
Kind = Literal["request", "notification", "response"]


class RpcError(Exception):
    """A JSON-RPC error answer. `message` is fixed text: it never echoes caller values."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


# SI-8: one object for "no such tool" and "a tool this caller may not see", so the two answers
# cannot differ in code, message or data.
UNKNOWN_TOOL: Final = RpcError(INVALID_PARAMS, "Unknown tool.")


@dataclass(frozen=True, slots=True)
class Message:
    kind: Kind
    id: RequestId | None = None
    method: str = ""
    params: dict[str, Any] = field(default_factory=dict)


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def parse_message(value: Any) -> Message:
    """One decoded JSON value as a message; `RpcError(INVALID_REQUEST)` when it is none."""
    if isinstance(value, list):
        raise RpcError(INVALID_REQUEST, "Batched messages are not supported.")
    if not isinstance(value, dict) or value.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, "Invalid Request.")
    method = value.get("method")
    if method is None:
        # A client's answer to a server request; capgate never sends requests, so only its
        # shape is checked.
        if _valid_id(value.get("id")) and ("result" in value or "error" in value):
            return Message("response", id=value["id"])
        raise RpcError(INVALID_REQUEST, "Invalid Request.")
    params = value.get("params", {})
    if not isinstance(method, str) or not isinstance(params, dict):
        raise RpcError(INVALID_REQUEST, "Invalid Request.")
    if "id" not in value:
        return Message("notification", method=method, params=params)
    if not _valid_id(value["id"]):
        raise RpcError(INVALID_REQUEST, "Invalid Request.")
    return Message("request", id=value["id"], method=method, params=params)


def request_id(value: Any) -> RequestId | None:
    """The id of a message that failed to parse, when it has a usable one (else null)."""
    if isinstance(value, dict) and _valid_id(value.get("id")):
        found: RequestId = value["id"]
        return found
    return None


def result(message_id: RequestId | None, value: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": message_id, "result": value}


def error(message_id: RequestId | None, err: RpcError) -> dict[str, Any]:
    body: dict[str, Any] = {"code": err.code, "message": err.message}
    if err.data is not None:
        body["data"] = err.data
    return {"jsonrpc": "2.0", "id": message_id, "error": body}
