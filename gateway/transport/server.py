"""Composition root: one `grpc.aio.Server` per listener (DESIGN §12), each with its own services,
credentials, health and reflection. grpcio cannot tell which port a call came in on, so a
shared server would expose ApprovalAdmin on the agents' port; separate servers make that
impossible (a test asserts UNIMPLEMENTED there)."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from capgate.v1 import admin_pb2, admin_pb2_grpc, gateway_pb2, gateway_pb2_grpc
from gateway.config.settings import Listener
from gateway.pipeline.call import Runtime
from gateway.pipeline.snapshot import Snapshot
from gateway.state.approvals.convert import to_proto
from gateway.transport import grpclog, reflection
from gateway.transport.admin.approvals import ApprovalAdminServicer
from gateway.transport.admin.cache import CacheAdminServicer
from gateway.transport.admin.edits import EditDecisions
from gateway.transport.admin.grants import GrantAdmin
from gateway.transport.admin.policy import PolicyAdminServicer
from gateway.transport.auth.listeners import build_authenticator, server_credentials
from gateway.transport.servicer import CapabilityGatewayServicer, Stage1

log = logging.getLogger("capgate.server")

# Health service names: "" and "capgate" = config and policies loaded (readiness);
# "capgate.redis" = Redis reachable, separate so a Redis blip never fails readiness (§12).
READY_SERVICE = "capgate"
REDIS_SERVICE = "capgate.redis"

_OPTIONS = [
    ("grpc.max_receive_message_length", 4 * 1024 * 1024),
    ("grpc.so_reuseport", 0),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
]


@dataclass
class ListenerServer:
    listener: Listener
    server: grpc.aio.Server
    health: health.HealthServicer
    port: int = 0
    stage1: Stage1 | None = None

    def rebind(self, listener: Listener) -> None:
        """New authentication settings for this listener (a reload); ValueError keeps the old."""
        if self.stage1 is not None:
            self.stage1.rebind(listener)
        self.listener = listener


@dataclass
class Servers:
    items: list[ListenerServer] = field(default_factory=list)

    def set_serving(self, service: str, serving: bool) -> None:
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for item in self.items:
            item.health.set(service, status)

    def not_serving(self) -> None:
        for item in self.items:
            for name in ("", READY_SERVICE):
                item.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)

    async def stop(self, grace_s: float) -> None:
        """Every listener at once stops taking calls and drains those in flight within the
        grace (one after another, a listener would take new calls while another drains)."""
        self.not_serving()
        await asyncio.gather(*(item.server.stop(grace_s) for item in self.items))


def _bind(server: grpc.aio.Server, listener: Listener) -> int:
    creds = server_credentials(listener)
    address = listener.address
    if address.startswith("unix://"):
        path = Path(address.removeprefix("unix://"))
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            path.unlink()
        address = f"unix:{path}"
    try:
        port = (
            server.add_secure_port(address, creds)
            if creds is not None
            else server.add_insecure_port(address)
        )
    except RuntimeError:
        # grpcio says only "Failed to bind": the listener, its address and the OS's reason
        # instead, a start refused like a config error (exit 2, no traceback).
        raise ValueError(
            f"listener {listener.name!r} cannot listen on {listener.address}: "
            f"{bind_failure(listener.address)}"
        ) from None
    return int(port)


def bind_failure(address: str) -> str:
    """Why `address` (host:port) cannot be bound, as the OS says when asked once more."""
    host, _, port = address.rpartition(":")
    bare = host.strip("[]")
    try:
        family = socket.AF_INET6 if ":" in bare else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((bare, int(port)))
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return f"{exc.strerror} (another process may be listening there)"
        return exc.strerror or str(exc)
    except ValueError:
        pass  # not host:port (a unix socket path): grpcio's word is all there is
    return "the address could not be bound"


def build_listener(
    listener: Listener,
    snapshot: Callable[[], Snapshot],
    runtime: Runtime,
    *,
    max_message_bytes: int,
    traced: Callable[[Any, str], Any] | None = None,
    reuse_port: bool = False,
) -> ListenerServer:
    options = [*_OPTIONS]
    options[0] = ("grpc.max_receive_message_length", max_message_bytes)
    # Off by default so that a second gateway on a taken port fails instead of silently
    # sharing it; on for the processes of `serve --workers N` (gateway/process/workers.py).
    options[1] = ("grpc.so_reuseport", 1 if reuse_port else 0)
    server = grpc.aio.server(options=options)
    # A SERVER span per RPC when tracing is on (gateway.telemetry.servicers).
    span = traced or (lambda servicer, _service: servicer)
    stage1 = Stage1(listener, build_authenticator(listener))
    services = [health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME]
    if listener.role == "admin":
        admin_names = [
            admin_pb2.DESCRIPTOR.services_by_name[n].full_name
            for n in ("ApprovalAdmin", "PolicyAdmin", "CacheAdmin")
        ]
        admin_pb2_grpc.add_ApprovalAdminServicer_to_server(
            span(
                ApprovalAdminServicer(
                    runtime.approvals,
                    authenticate=stage1.actor,
                    listener=listener,
                    drain=runtime.drain,
                    edits=EditDecisions(snapshot, runtime),
                    grants=GrantAdmin(snapshot, runtime, listener=listener),
                    view=lambda record: to_proto(
                        record,
                        include_input=True,
                        redactor=snapshot().approval_redactor(record.capability_id),
                        description=snapshot().capability_description(record.capability_id),
                    ),
                ),
                admin_names[0],
            ),
            server,
        )
        admin_pb2_grpc.add_PolicyAdminServicer_to_server(
            span(PolicyAdminServicer(stage1, snapshot, runtime), admin_names[1]), server
        )
        admin_pb2_grpc.add_CacheAdminServicer_to_server(
            span(CacheAdminServicer(stage1, runtime), admin_names[2]), server
        )
        services += admin_names
    else:
        name = gateway_pb2.DESCRIPTOR.services_by_name["CapabilityGateway"].full_name
        gateway_pb2_grpc.add_CapabilityGatewayServicer_to_server(
            span(CapabilityGatewayServicer(stage1, snapshot, runtime), name), server
        )
        services.append(name)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable(server, services)  # exactly this listener's services
    port = _bind(server, listener)
    if listener.address.startswith("unix://"):
        os.chmod(listener.address.removeprefix("unix://"), listener.socket_mode)
    return ListenerServer(listener, server, health_servicer, port, stage1)


async def start_listeners(
    listeners: tuple[Listener, ...],
    snapshot: Callable[[], Snapshot],
    runtime: Runtime,
    *,
    max_message_bytes: int,
    traced: Callable[[Any, str], Any] | None = None,
    reuse_port: bool = False,
) -> Servers:
    servers = Servers()
    grpclog.install()  # before any call: undecodable requests log one short line, rate-limited
    for listener in listeners:
        item = build_listener(
            listener,
            snapshot,
            runtime,
            max_message_bytes=max_message_bytes,
            traced=traced,
            reuse_port=reuse_port,
        )
        await item.server.start()
        if listener.address.startswith("unix://"):
            os.chmod(listener.address.removeprefix("unix://"), listener.socket_mode)
        servers.items.append(item)
        log.info(
            "listener %s (%s, surface %s) on %s",
            listener.name,
            listener.role,
            listener.surface,
            listener.address if not item.port else f"port {item.port}",
        )
    return servers
