"""Say what to do when a command-line client and a listener disagree about TLS.

gRPC reports both mistakes — plaintext to a TLS listener, TLS to a plaintext one — and an
untrusted certificate as UNAVAILABLE with a transport detail ("Socket closed", "Handshake
failed"). `advice` probes the address once with a TLS handshake of its own and turns the
failure into the flag to pass. It never sends credentials: the probe is a bare handshake.
"""

from __future__ import annotations

import socket
import ssl
from urllib.parse import urlsplit


def _host_port(address: str) -> tuple[str, int] | None:
    """`host:port` or `[v6]:port` (with an optional `dns:`/`ipv4:`/`ipv6:` scheme); None for
    unix sockets and anything else gRPC resolves itself."""
    for scheme in ("dns:///", "dns:", "ipv4:", "ipv6:"):
        address = address.removeprefix(scheme)
    if address.startswith("unix:"):
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]") or "127.0.0.1", int(port)


def _handshake(
    host: str, port: int, context: ssl.SSLContext, timeout_s: float, name: str | None = None
) -> bool:
    """False when nothing accepts a TCP connection; raises what the TLS handshake raised."""
    try:
        raw = socket.create_connection((host, port), timeout_s)
    except OSError:
        return False
    with raw, context.wrap_socket(raw, server_hostname=name or host) as tls:
        tls.do_handshake()
    return True


def speaks_tls(host: str, port: int, timeout_s: float = 2.0, *, h2: bool = True) -> bool | None:
    """True when a TLS handshake (no verification) completes, False when the peer accepts the
    connection but does not answer with TLS, None when nothing accepts a connection there.
    `h2` offers ALPN h2, as a gRPC client does."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if h2:
        context.set_alpn_protocols(["h2"])
    try:
        return True if _handshake(host, port, context, timeout_s) else None
    except OSError:  # ssl.SSLError, a reset or a timeout: not a TLS server
        return False


def _trust_problem(
    host: str, port: int, ca_file: str | None, name: str | None, timeout_s: float
) -> str | None:
    """Why a verifying handshake (the CA file's, else the system's trust) fails, or None."""
    context = ssl.create_default_context(cafile=ca_file)
    context.set_alpn_protocols(["h2"])
    try:
        _handshake(host, port, context, timeout_s, name)
    except ssl.SSLCertVerificationError as exc:
        return str(exc.verify_message or exc.reason or exc)
    except (ssl.SSLError, OSError):
        return None
    return None


def advice(
    address: str,
    *,
    tls: bool,
    ca_file: str | None = None,
    server_name: str | None = None,
    timeout_s: float = 2.0,
) -> str | None:
    """What to change on the command line to reach `address`, or None when TLS is not it."""
    target = _host_port(address)
    if target is None:
        return None
    host, port = target
    peer = speaks_tls(host, port, timeout_s)
    if peer is None:
        return f"nothing accepts connections at {address}: is the listener running there?"
    if tls and not peer:
        return (
            f"the server at {address} speaks plaintext, not TLS: pass --insecure "
            "(plaintext is for loopback and unix sockets only)"
        )
    if not tls and peer:
        return (
            f"the server at {address} speaks TLS: drop --insecure, and pass --ca FILE "
            "(the PEM of the CA that issued its certificate) unless a public CA did"
        )
    if tls:
        problem = _trust_problem(host, port, ca_file, server_name, timeout_s)
        if problem:
            hint = (
                "pass --ca FILE with the CA that issued it"
                if not ca_file
                else "check --ca, and --server-name when the certificate names another host"
            )
            return f"the server at {address} speaks TLS, but its certificate: {problem}; {hint}"
    return None


def redis_advice(url: str, timeout_s: float = 2.0) -> str | None:
    """The same for a Redis URL: `redis://` to a TLS server or `rediss://` to a plaintext one."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname or "127.0.0.1", parts.port or 6379
    except ValueError:
        return None
    if parts.scheme not in ("redis", "rediss"):
        return None
    where = f"{host}:{port}"
    peer = speaks_tls(host, port, timeout_s, h2=False)
    if peer is None:
        return f"nothing accepts connections at {where}: is Redis running there?"
    if parts.scheme == "redis" and peer:
        return f"the server at {where} speaks TLS: use a rediss:// URL"
    if parts.scheme == "rediss" and not peer:
        return f"the server at {where} speaks plaintext, not TLS: use a redis:// URL"
    return None
