"""OAuth 2.0 client credentials towards an upstream (RFC 6749 §4.4): the access token capgate
sends as `Authorization: Bearer` to a `kind: mcp` upstream (docs/upstreams.md section 10).

The token endpoint, client id and secret are config (the secret via `{{ env.X }}`); nothing
from a caller reaches the token request. The client authenticates with HTTP Basic (RFC 6749
§2.3.1). A token is reused until `expires_in` minus a margin (at least half its lifetime) has
passed on the injected monotonic clock (no `expires_in`: one hour; a numeric string is read as
a number), and one fetch at a time runs per upstream. A token the upstream answers 401 to is
dropped (`invalidate`), and the MCP client sends that request once more with a new one. The
token endpoint is verified against the system trust store (plus the upstream's `ca_file`); an
`http://` endpoint is accepted on loopback only (the config check says so).
"""

from __future__ import annotations

import asyncio
import re
import ssl
import time
from collections.abc import Callable
from typing import Final

import httpx2
import orjson

from gateway.errors import CapabilityError, Code
from gateway.upstream.mcpspec import OAuthClient
from gateway.upstream.state import ExecutionState, with_state

__all__ = ["MARGIN_S", "TokenSource", "renew_after"]

MARGIN_S: Final = 30.0  # a token is renewed this long before it expires
_DEFAULT_LIFETIME_S: Final = 3600.0
_MAX_ANSWER: Final = 65536
_MAX_LIFETIME_S: Final = 86400.0
_DIGITS: Final = re.compile(r"[0-9]{1,9}(?:\.[0-9]{1,6})?")


def renew_after(expires_in: object) -> float:
    """Seconds after the fetch started when a token of this `expires_in` (a JSON number, or a
    string of digits as some servers send; else one hour; at most a day) is fetched again:
    `MARGIN_S` before it expires, but never before half its lifetime, so a short-lived token
    is not fetched again on every call."""
    lifetime = _DEFAULT_LIFETIME_S
    if isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool):
        lifetime = float(expires_in)
    elif isinstance(expires_in, str) and _DIGITS.fullmatch(expires_in.strip()):
        lifetime = float(expires_in.strip())
    lifetime = min(max(lifetime, 0.0), _MAX_LIFETIME_S)  # NaN/inf cannot come from orjson
    return max(lifetime - MARGIN_S, lifetime / 2)


class TokenSource:
    """Access tokens for one upstream, fetched when missing or about to expire."""

    def __init__(
        self,
        spec: OAuthClient,
        *,
        upstream: str,
        ca_file: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._spec = spec
        self._upstream = upstream
        self._clock = clock
        context = ssl.create_default_context()
        if ca_file:
            context.load_verify_locations(ca_file)
        self._client = httpx2.AsyncClient(verify=context, trust_env=False, timeout=10.0)
        self._lock = asyncio.Lock()
        self._token: tuple[str, float] | None = None  # (token, renew at)
        self.fetches = 0

    async def token(self) -> str:
        """A valid access token; raises UPSTREAM_UNAVAILABLE (NOT_STARTED) when none can be
        had (nothing was sent to the upstream)."""
        known = self._token
        if known is not None and self._clock() < known[1]:
            return known[0]
        async with self._lock:
            known = self._token
            if known is not None and self._clock() < known[1]:
                return known[0]
            self._token = await self._fetch()
            return self._token[0]

    async def _fetch(self) -> tuple[str, float]:
        form = {"grant_type": "client_credentials"}
        if self._spec.scope:
            form["scope"] = self._spec.scope
        if self._spec.audience:
            form["audience"] = self._spec.audience
        started = self._clock()
        self.fetches += 1
        try:
            answer = await self._client.post(
                self._spec.token_url,
                data=form,
                auth=(self._spec.client_id, self._spec.client_secret),
                headers={"accept": "application/json"},
            )
        except httpx2.HTTPError as err:
            raise self._failed(f"token endpoint: {type(err).__name__}") from err
        if answer.status_code != 200 or len(answer.content) > _MAX_ANSWER:
            raise self._failed(f"token endpoint answered HTTP {answer.status_code}")
        try:
            body = orjson.loads(answer.content)
        except orjson.JSONDecodeError:
            raise self._failed("token endpoint answer is not JSON") from None
        token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token or not token.isascii() or "\n" in token:
            raise self._failed("token endpoint answer has no usable access_token")
        return token, started + renew_after(body.get("expires_in"))

    def invalidate(self, token: str) -> None:
        """Forget `token` (the upstream answered 401 to it); a newer one is kept."""
        if self._token is not None and self._token[0] == token:
            self._token = None

    def _failed(self, what: str) -> CapabilityError:
        # The secret and the token never appear in the reason (§12).
        error = CapabilityError(
            Code.UPSTREAM_UNAVAILABLE, reason=f"upstream {self._upstream}: {what}"
        )
        return with_state(error, ExecutionState.NOT_STARTED)

    async def close(self) -> None:
        await self._client.aclose()
