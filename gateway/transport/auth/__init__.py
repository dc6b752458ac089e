"""Transport authentication (stage 1, SI-3): who is calling, decided by the listener.

Public surface: `Authenticator`, `AuthenticationFailed`, `build_authenticator`,
`server_credentials`, `strip_capgate_metadata`. The gateway-signed actor token sent upstream is
gateway/upstream/actor_token.py's (`ActorTokenSigner`); upstreams verify it with the client
package: `capgate_client.server.ActorTokenVerifier` (Go, TypeScript and Java have theirs).
See docs/auth.md.
"""

from gateway.transport.auth.base import AuthenticationFailed, Authenticator, strip_capgate_metadata
from gateway.transport.auth.listeners import build_authenticator, server_credentials

__all__ = [
    "AuthenticationFailed",
    "Authenticator",
    "build_authenticator",
    "server_credentials",
    "strip_capgate_metadata",
]
