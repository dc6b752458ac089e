"""Transport authentication (stage 1, SI-3) and the gateway-signed actor token sent upstream.

Public surface: `Authenticator`, `AuthenticationFailed`, `build_authenticator`,
`server_credentials`, `strip_capgate_metadata` (listeners); `ActorTokenSigner` (gateway side).
Upstreams verify actor tokens with the client package: `capgate_client.server.ActorTokenVerifier`
(Go, TypeScript and Java have theirs). See docs/auth.md.
"""

from gateway.transport.auth.base import (
    AuthenticationFailed,
    Authenticator,
    build_authenticator,
    server_credentials,
    strip_capgate_metadata,
)
from gateway.upstream.actor_token import ActorTokenSigner

__all__ = [
    "ActorTokenSigner",
    "AuthenticationFailed",
    "Authenticator",
    "build_authenticator",
    "server_credentials",
    "strip_capgate_metadata",
]
