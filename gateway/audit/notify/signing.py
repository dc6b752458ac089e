"""Body signatures of webhook deliveries (HMAC-SHA256 over timestamp and body).

Headers: `X-Capgate-Timestamp: <unix seconds>` and
`X-Capgate-Signature: sha256=<hex HMAC-SHA256(secret, "<timestamp>." + body)>`. Binding the
timestamp lets a receiver refuse replays older than its tolerance; `verify` is the reference
check a receiver can copy (constant-time comparison).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

SIGNATURE_HEADER: Final = "X-Capgate-Signature"
TIMESTAMP_HEADER: Final = "X-Capgate-Timestamp"
DELIVERY_HEADER: Final = "X-Capgate-Delivery"
EVENT_HEADER: Final = "X-Capgate-Event"
PREFIX: Final = "sha256="
DEFAULT_TOLERANCE_S: Final = 300


def _mac(secret: str, timestamp: int, body: bytes) -> str:
    message = str(timestamp).encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """The `X-Capgate-Signature` value for `body` sent at `timestamp`."""
    return PREFIX + _mac(secret, timestamp, body)


def verify(
    secret: str,
    body: bytes,
    *,
    timestamp: str,
    signature: str,
    now: float,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
) -> bool:
    """True when `signature` signs `body` at `timestamp` and the timestamp is recent."""
    if not timestamp.isdigit() or not signature.startswith(PREFIX):
        return False
    sent = int(timestamp)
    if abs(now - sent) > tolerance_s:
        return False
    return hmac.compare_digest(signature, sign(secret, sent, body))
