"""Approvals as the 2026-07-28 revision's multi round-trip requests (MRTR, SEP-2322).

A stateless-era `tools/call` that needs human approval, from a client that declares the
elicitation capability (form mode), is answered with `resultType: "input_required"`: one
`elicitation/create` form request (key `capgate_approval`, an empty form: the message says the
call awaits an approver and asks the user to continue once one has decided) and a `requestState`
the client echoes on its retry of the same call. The state is integrity-protected:

    v1.<base64url(payload JSON)>.<base64url(HMAC-SHA256(key, "v1." + payload part))>

with the payload `{"a": approval id, "iss", "sub": the actor, "s": surface, "t": tool name,
"h": SHA-256 of the arguments, "exp": the approval's expiry (unix s)}`. A retry is honoured only
when the MAC verifies and it comes from the same actor, surface, tool and arguments before the
expiry; anything else is `-32602 "Invalid requestState."` and nothing runs. An honoured retry
reads the approval exactly as `capgate_approval_status` does (bound to the requester inside
Redis, SI-8): pending asks again, approved runs the stored input once (Resume, SI-12), any other
decision is its error result. Clients without elicitation, and the handshake era, keep the
approval-required result and the status tool.

The key is derived from `audit.hmac_key` (HMAC-SHA256(audit key, "capgate/mcp/requestState/v1")),
so every replica verifies every other's states; without an audit key each process draws its own.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from gateway.transport.mcp.jsonrpc import INVALID_PARAMS, RpcError
from gateway.transport.mcp.modern import CLIENT_CAPABILITIES_KEY

INPUT_KEY: Final = "capgate_approval"
INVALID_STATE: Final = RpcError(INVALID_PARAMS, "Invalid requestState.")
_VERSION: Final = "v1"
_MAX_STATE: Final = 2048  # characters of a requestState accepted on a retry
_DERIVE: Final = b"capgate/mcp/requestState/v1"


def derive_key(audit_key: str) -> bytes:
    """The requestState key: from the audit HMAC key when set (shared by replicas), else random
    for this process."""
    if not audit_key:
        return os.urandom(32)
    return hmac.new(audit_key.encode(), _DERIVE, hashlib.sha256).digest()


def supports_elicitation(params: Mapping[str, Any]) -> bool:
    """Whether the request's client capabilities (in `_meta`) include form elicitation: an
    `elicitation` object that is empty (form implied) or lists `form`."""
    meta = params.get("_meta")
    caps = meta.get(CLIENT_CAPABILITIES_KEY) if isinstance(meta, Mapping) else None
    elicitation = caps.get("elicitation") if isinstance(caps, Mapping) else None
    if not isinstance(elicitation, Mapping):
        return False
    return not elicitation or isinstance(elicitation.get("form"), Mapping)


def arguments_digest(arguments: Mapping[str, Any]) -> str:
    return hashlib.sha256(orjson.dumps(arguments, option=orjson.OPT_SORT_KEYS)).hexdigest()


@dataclass(frozen=True, slots=True)
class Binding:
    """What a requestState is bound to besides the approval."""

    issuer: str
    subject: str
    surface: str
    tool: str
    digest: str


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class StateCodec:
    def __init__(self, key: bytes) -> None:
        self._key = key

    def _mac(self, signed: str) -> bytes:
        return hmac.new(self._key, signed.encode("ascii"), hashlib.sha256).digest()

    def seal(self, approval_id: str, binding: Binding, expires_at: int) -> str:
        payload = {
            "a": approval_id,
            "iss": binding.issuer,
            "sub": binding.subject,
            "s": binding.surface,
            "t": binding.tool,
            "h": binding.digest,
            "exp": expires_at,
        }
        signed = f"{_VERSION}.{_b64(orjson.dumps(payload))}"
        return f"{signed}.{_b64(self._mac(signed))}"

    def open(self, state: Any, binding: Binding, *, now: float) -> str:
        """The approval id a state names, or INVALID_STATE (the reason is never told)."""
        if not isinstance(state, str) or len(state) > _MAX_STATE or state.count(".") != 2:
            raise INVALID_STATE
        version, body, tag = state.split(".")
        try:
            mac = _unb64(tag)
            payload = orjson.loads(_unb64(body))
        except (binascii.Error, ValueError, orjson.JSONDecodeError):
            raise INVALID_STATE from None
        if version != _VERSION or not hmac.compare_digest(mac, self._mac(f"{version}.{body}")):
            raise INVALID_STATE
        if not isinstance(payload, dict):
            raise INVALID_STATE
        wanted = (binding.issuer, binding.subject, binding.surface, binding.tool, binding.digest)
        found = tuple(payload.get(k) for k in ("iss", "sub", "s", "t", "h"))
        expires, approval_id = payload.get("exp"), payload.get("a")
        if found != wanted or not isinstance(expires, int) or expires <= now:
            raise INVALID_STATE
        if not isinstance(approval_id, str) or not approval_id:
            raise INVALID_STATE
        return approval_id


def input_required(message: str, state: str) -> dict[str, Any]:
    """The `input_required` result asking the user to continue once an approver has decided."""
    return {
        "resultType": "input_required",
        "inputRequests": {
            INPUT_KEY: {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": message,
                    "requestedSchema": {"type": "object", "properties": {}},
                },
            }
        },
        "requestState": state,
    }


def continued(params: Mapping[str, Any]) -> bool:
    """Whether the user chose to continue: an `accept` answer to the approval request (a retry
    without an answer counts as one; `decline` or `cancel` do not)."""
    responses = params.get("inputResponses")
    if not isinstance(responses, Mapping) or INPUT_KEY not in responses:
        return True
    answer = responses[INPUT_KEY]
    return isinstance(answer, Mapping) and answer.get("action") == "accept"
