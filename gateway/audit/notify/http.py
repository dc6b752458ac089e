"""A minimal HTTP/1.1 POST over asyncio streams, for webhook deliveries.

Why not a client library: a delivery needs one POST with a total time limit, cancellable with
its task, no redirects (a redirect would move a signed body to a place nobody configured) and
no cookies or proxies picked up from the environment. That is a few dozen lines of stdlib.
HTTPS verifies the server against the system trust store.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

MAX_HEADER_BYTES: Final = 64 * 1024


class DeliveryError(Exception):
    """The request could not be completed; the message names no URL (it may be a secret)."""


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    retry_after_s: float | None = None


def _target(url: str) -> tuple[str, int, bool, str]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise DeliveryError("not an http(s) URL")
    secure = parts.scheme == "https"
    port = parts.port or (443 if secure else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.hostname, port, secure, path


def _retry_after(value: str) -> float | None:
    value = value.strip()
    return float(value) if value.isdigit() else None  # HTTP dates are not worth honouring


async def post(url: str, body: bytes, headers: dict[str, str], *, timeout_s: float) -> Reply:
    """POST `body` to `url`; the status and Retry-After of the reply, or `DeliveryError`."""
    host, port, secure, path = _target(url)
    context = ssl.create_default_context() if secure else None
    writer: asyncio.StreamWriter | None = None
    try:
        async with asyncio.timeout(timeout_s):
            reader, writer = await asyncio.open_connection(
                host,
                port,
                ssl=context,
                server_hostname=host if secure else None,
                limit=MAX_HEADER_BYTES,
            )
            authority = host if port == (443 if secure else 80) else f"{host}:{port}"
            lines = [
                f"POST {path} HTTP/1.1",
                f"Host: {authority}",
                "Connection: close",
                f"Content-Length: {len(body)}",
            ]
            lines += [f"{name}: {value}" for name, value in headers.items()]
            writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
            await writer.drain()
            status_line = await reader.readline()
            fields = status_line.split(b" ", 2)
            if len(fields) < 2 or not fields[0].startswith(b"HTTP/1.") or not fields[1].isdigit():
                raise DeliveryError("malformed HTTP reply")
            retry_after = None
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b"\n", b""):
                    break
                name, _, value = line.decode("latin-1").partition(":")
                if name.strip().lower() == "retry-after":
                    retry_after = _retry_after(value)
            return Reply(int(fields[1]), retry_after)
    except TimeoutError:
        raise DeliveryError("timed out") from None
    except (OSError, ValueError, asyncio.LimitOverrunError, asyncio.IncompleteReadError) as exc:
        raise DeliveryError(type(exc).__name__) from None
    finally:
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)
