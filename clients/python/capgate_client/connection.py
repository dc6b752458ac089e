"""Connecting to a capgate listener: TCP or a unix socket, TLS optional, and the caller's
credentials — a bearer JWT, or on a unix socket the trusted-local actor metadata (docs/auth.md)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeAlias

import grpc

Token: TypeAlias = str | Callable[[], str]
Metadata: TypeAlias = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Tls:
    """TLS settings (PEM bytes). `root_certificates` defaults to the system's trusted roots."""

    root_certificates: bytes | None = None
    certificate_chain: bytes | None = None  # client certificate for mTLS listeners
    private_key: bytes | None = None
    server_name: str | None = None  # expected name when it differs from the target host


@dataclass(frozen=True, slots=True)
class LocalActor:
    """The actor a co-located app asserts on a trusted-local unix socket."""

    id: str
    kind: Literal["user", "service", "agent", "anonymous"] = "user"
    roles: tuple[str, ...] = ()

    def metadata(self) -> Metadata:
        md: list[tuple[str, str]] = [
            ("x-capgate-actor-id", self.id),
            ("x-capgate-actor-kind", self.kind),
        ]
        if self.roles:
            md.append(("x-capgate-actor-roles", ",".join(self.roles)))
        return tuple(md)


@dataclass(frozen=True, slots=True)
class Settings:
    """A validated connection: where, how, and as whom."""

    target: str
    tls: Tls | None
    token: Token | None
    local_actor: LocalActor | None
    timeout: float | None

    @classmethod
    def of(
        cls,
        target: str,
        *,
        token: Token | None,
        local_actor: LocalActor | None,
        tls: Tls | bool,
        timeout: float | None,
    ) -> Settings:
        if token is not None and local_actor is not None:
            raise ValueError("pass either token or local_actor, not both")
        unix = target.startswith("unix:")
        if local_actor is not None and not unix:
            # trusted-local is only sound where the kernel decides who may connect.
            raise ValueError(
                "local_actor needs a unix: target (trusted-local is unix sockets only)"
            )
        settings = Tls() if tls is True else (tls or None)
        return cls(target, settings, token, local_actor, timeout)

    def credentials(self) -> Metadata:
        """Per-call metadata carrying the caller's credentials."""
        if self.token is not None:
            token = self.token() if callable(self.token) else self.token
            return (("authorization", f"Bearer {token}"),)
        if self.local_actor is not None:
            return self.local_actor.metadata()
        return ()

    def aio_channel(self) -> grpc.aio.Channel:
        if self.tls is None:
            return grpc.aio.insecure_channel(self.target)
        return grpc.aio.secure_channel(self.target, *_secure(self.tls))

    def sync_channel(self) -> grpc.Channel:
        if self.tls is None:
            return grpc.insecure_channel(self.target)
        return grpc.secure_channel(self.target, *_secure(self.tls))


def _secure(tls: Tls) -> tuple[grpc.ChannelCredentials, list[tuple[str, str]]]:
    creds = grpc.ssl_channel_credentials(
        tls.root_certificates, tls.private_key, tls.certificate_chain
    )
    options = []
    if tls.server_name:
        options.append(("grpc.ssl_target_name_override", tls.server_name))
    return creds, options
