"""Transport authentication (stage 1, SI-3) and the gateway-signed actor token sent upstream.

Public surface: `Authenticator`, `AuthenticationFailed`, `build_authenticator`,
`server_credentials`, `strip_capgate_metadata` (listeners); `ActorTokenSigner` (gateway side)
and `ActorTokenVerifier` / `ActorTokenInvalid` (upstream side). See docs/auth.md.
"""

from gateway.auth.actor_token import ActorTokenSigner
from gateway.auth.base import (
    AuthenticationFailed,
    Authenticator,
    build_authenticator,
    server_credentials,
    strip_capgate_metadata,
)
from gateway.auth.verify import ActorTokenInvalid, ActorTokenVerifier

__all__ = [
    "ActorTokenInvalid",
    "ActorTokenSigner",
    "ActorTokenVerifier",
    "AuthenticationFailed",
    "Authenticator",
    "build_authenticator",
    "server_credentials",
    "strip_capgate_metadata",
]
