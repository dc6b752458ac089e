"""Caller authentication with a verified client certificate (DESIGN §12, SI-3).

The certificate chain is verified by grpc during the TLS handshake (`server_credentials` sets
`require_client_auth`); this module only turns the verified certificate into an actor:
- the SPIFFE ID (the one `spiffe://` URI SAN) when present — an X.509 SVID carries exactly one
  URI SAN, so several `spiffe://` URIs are refused as ambiguous;
- else the first DNS SAN;
- never the subject CN (deprecated for identity, RFC 6125) and never the untyped
  `x509_subject_alternative_name` list, where a DNS name and a URI cannot be told apart.
grpc's typed `peer_uri` / `peer_dns` properties are used when present; otherwise the SANs are read
from `x509_pem_cert` with `cryptography` (parsed once per certificate, LRU-cached).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, TypeAlias

from cryptography import x509

from gateway.config.settings import MtlsAuth
from gateway.model import Actor
from gateway.transport.auth.base import (
    AUTHENTICATED_KINDS,
    AuthContext,
    AuthenticationFailed,
    Metadata,
)
from gateway.transport.auth.lru import LruCache

SPIFFE_SCHEME: Final = "spiffe://"
_PEM_CACHE_ENTRIES: Final = 1024
_Sans: TypeAlias = tuple[tuple[str, ...], tuple[str, ...]]  # (URI SANs, DNS SANs)


def _text(values: Sequence[bytes]) -> tuple[str, ...]:
    try:
        return tuple(v.decode("utf-8") for v in values)
    except UnicodeDecodeError:
        raise AuthenticationFailed("unreadable client certificate") from None


def _sans_from_pem(pem: bytes) -> _Sans:
    try:
        cert = x509.load_pem_x509_certificate(pem)
    except ValueError:
        raise AuthenticationFailed("unreadable client certificate") from None
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return (), ()
    uris = ext.get_values_for_type(x509.UniformResourceIdentifier)
    return tuple(uris), tuple(ext.get_values_for_type(x509.DNSName))


class MtlsAuthenticator:
    """Actor = the client certificate's SPIFFE ID, else its first DNS SAN; roles from config."""

    def __init__(self, settings: MtlsAuth | None = None) -> None:
        settings = settings or MtlsAuth()
        if settings.kind not in AUTHENTICATED_KINDS:
            raise ValueError(f"mTLS actor kind must be one of {sorted(AUTHENTICATED_KINDS)}")
        if not settings.issuer:
            raise ValueError("mTLS auth needs an issuer name")
        self._settings = settings
        self._roles = {name: tuple(roles) for name, roles in settings.roles.items()}
        self._pem_sans: LruCache[bytes, _Sans] = LruCache(_PEM_CACHE_ENTRIES)

    def authenticate(self, metadata: Metadata, auth_context: AuthContext, peer: str) -> Actor:
        identity = self.identity(auth_context)
        if "\x00" in identity:  # policies would read it only up to the NUL (jsonvalue.py)
            raise AuthenticationFailed("certificate identity contains U+0000 (NUL)")
        return Actor(
            id=identity,
            kind=self._settings.kind,
            issuer=self._settings.issuer,
            roles=self._roles.get(identity, ()),
        )

    def identity(self, auth_context: AuthContext) -> str:
        """The verified certificate's identity: SPIFFE ID, else first DNS SAN."""
        if list(auth_context.get("transport_security_type", ())) != [b"ssl"]:
            raise AuthenticationFailed("client certificate required")
        uris, dns = self._sans(auth_context)
        spiffe = [uri for uri in uris if uri.startswith(SPIFFE_SCHEME)]
        if len(spiffe) > 1:
            raise AuthenticationFailed("ambiguous SPIFFE identity")
        if spiffe:
            return spiffe[0]
        if dns:
            return dns[0]
        raise AuthenticationFailed("no usable identity in client certificate")

    def _sans(self, auth_context: AuthContext) -> _Sans:
        if "peer_uri" in auth_context or "peer_dns" in auth_context:
            return (
                _text(auth_context.get("peer_uri", ())),
                _text(auth_context.get("peer_dns", ())),
            )
        pems = list(auth_context.get("x509_pem_cert", ()))
        if len(pems) != 1:
            raise AuthenticationFailed("client certificate required")
        cached = self._pem_sans.get(pems[0])
        if cached is None:
            cached = _sans_from_pem(pems[0])
            self._pem_sans.put(pems[0], cached)
        return cached
