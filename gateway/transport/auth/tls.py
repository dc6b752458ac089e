"""TLS server certificates that rotate without a restart.

cert-manager, Vault agents and mounted Kubernetes Secrets replace certificate files in place
(a Secret swaps its `..data` symlink). gRPC asks `RotatingCertificates.fetch` before each new TLS
handshake; it answers with a new configuration when the files changed and load as a matching
set (the certificate's public key is the private key's, the client CA bundle parses), and with
None (keep serving the current one) otherwise. A half-written rotation, say the certificate
replaced before its key, is therefore never served: the next handshake after the key lands picks
the pair up. Connections already open keep the certificate they were made with.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import ssl
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import grpc
from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

log = logging.getLogger("capgate.tls")

_Stamp = tuple[tuple[int, int, int] | None, ...]


def _stamp(files: Sequence[str]) -> _Stamp:
    """What identifies the current content of each file, cheaply (one stat each)."""
    out: list[tuple[int, int, int] | None] = []
    for path in files:
        try:
            st = os.stat(path)  # follows symlinks: a Secret's ..data swap changes the target
        except OSError:
            out.append(None)
        else:
            out.append((st.st_ino, st.st_mtime_ns, st.st_size))
    return tuple(out)


def _spki(key: object) -> bytes:
    return key.public_bytes(  # type: ignore[attr-defined, no-any-return]
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def check_pair(cert_pem: bytes, key_pem: bytes) -> None:
    """ValueError unless the chain's first certificate is the private key's (an encrypted or
    unsupported key is a ValueError too: the gateway cannot serve it)."""
    try:
        certs = x509.load_pem_x509_certificates(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (TypeError, UnsupportedAlgorithm) as exc:
        raise ValueError(f"the private key cannot be used ({type(exc).__name__})") from None
    if _spki(certs[0].public_key()) != _spki(key.public_key()):
        raise ValueError("the certificate does not belong to the private key")


def read_checked(
    listener: str, cert_file: str, key_file: str, ca_file: str | None = None
) -> tuple[bytes, bytes, bytes | None]:
    """The listener's certificate, key and client CA bundle, read once and checked: ValueError
    naming the listener and the problem (never the files' contents) unless they can serve."""
    try:
        cert, key = Path(cert_file).read_bytes(), Path(key_file).read_bytes()
        root = Path(ca_file).read_bytes() if ca_file else None
    except OSError as exc:
        raise ValueError(
            f"listener {listener!r}: cannot read {exc.filename}: {exc.strerror or exc}"
        ) from None
    try:
        check_pair(cert, key)
        if root is not None:
            x509.load_pem_x509_certificates(root)
    except ValueError as exc:
        raise ValueError(f"listener {listener!r}: TLS files: {exc}") from None
    return cert, key, root


class RotatingCertificates:
    """One listener's certificate, key and optional client CA, reloaded when they change."""

    def __init__(self, listener: str, cert_file: str, key_file: str, ca_file: str | None):
        self._listener = listener
        self._cert_file, self._key_file, self._ca_file = cert_file, key_file, ca_file
        self._files = (cert_file, key_file, *((ca_file,) if ca_file else ()))
        self._lock = threading.Lock()
        self._stamp = _stamp(self._files)
        self._refused: _Stamp | None = None
        self.initial = self._load()  # ValueError: the listener does not start

    def _load(self) -> grpc.ServerCertificateConfiguration:
        cert, key, root = read_checked(
            self._listener, self._cert_file, self._key_file, self._ca_file
        )
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=root)

    def fetch(self) -> grpc.ServerCertificateConfiguration | None:
        """Called by gRPC before each new handshake: a new configuration, or None to keep."""
        stamp: _Stamp | None = None
        try:
            stamp = _stamp(self._files)
            with self._lock:
                if stamp in (self._stamp, self._refused):
                    return None
                try:
                    config = self._load()
                except ValueError as exc:
                    self._refused = stamp  # said once per distinct state of the files
                    log.warning("%s; keeping the certificate in use", exc)
                    return None
                self._stamp, self._refused = stamp, None
        except Exception:  # never let a handshake fail because of the check itself
            with self._lock:
                self._refused = stamp  # and do not retry (and log) on every handshake
            log.exception("listener %s: TLS file check failed", self._listener)
            return None
        log.info("listener %s: TLS certificate reloaded", self._listener)
        return config

    def credentials(self) -> grpc.ServerCredentials:
        """Server credentials that call `fetch` before each handshake (client certificates
        required, and verified against the CA bundle, when there is one)."""
        return grpc.dynamic_ssl_server_credentials(
            self.initial,
            self.fetch,
            require_client_authentication=self._ca_file is not None,
        )


class CertificateFiles:
    """A certificate and key pair for an `ssl.SSLContext` (the MCP listener, served by uvicorn):
    `refresh` reloads the pair into the context when the files changed and match, so the next
    handshake presents it.

    The pair in use is kept in memory, and the context only ever loads bytes read once and
    proven first: they must match (`check_pair`) and load into a scratch context with the live
    one's protocol. Loading goes through private files (0600 in a 0700 directory) that are
    removed as soon as OpenSSL has read them, so no key outlives its use on disk. Should the
    live load still fail, the pair in use is loaded back. Construction reads and checks the
    files too: a pair that does not match refuses the listener (ValueError)."""

    def __init__(self, listener: str, cert_file: str, key_file: str) -> None:
        self._listener, self._cert_file, self._key_file = listener, cert_file, key_file
        self._stamp = _stamp((cert_file, key_file))  # before the files are read
        self._refused: _Stamp | None = None
        self._good = read_checked(listener, cert_file, key_file)[:2]

    @contextlib.contextmanager
    def materialized(self, pair: tuple[bytes, bytes] | None = None) -> Iterator[tuple[str, str]]:
        """Private files holding `pair` (default: the pair in use), removed on exit."""
        cert, key = pair or self._good
        directory = tempfile.mkdtemp(prefix="capgate-tls-")
        try:
            paths = (os.path.join(directory, "tls.crt"), os.path.join(directory, "tls.key"))
            for path, data in zip(paths, (cert, key), strict=True):
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
            yield paths
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    def refresh(self, context: ssl.SSLContext) -> bool:
        """True when the context took a new pair."""
        stamp = _stamp((self._cert_file, self._key_file))
        if stamp in (self._stamp, self._refused):
            return False
        self._refused = stamp  # until proven otherwise: a failure is said once per state
        try:
            pair = read_checked(self._listener, self._cert_file, self._key_file)[:2]
            with self.materialized(pair) as paths:
                ssl.SSLContext(context.protocol).load_cert_chain(*paths)  # the proof
                context.load_cert_chain(*paths)
        except (OSError, ValueError, ssl.SSLError) as exc:
            self._restore(context)
            if not isinstance(exc, ValueError):  # read_checked's ValueError names the listener
                exc = ValueError(f"listener {self._listener!r}: TLS files: {type(exc).__name__}")
            log.warning("%s; keeping the certificate in use", exc)
            return False
        self._stamp, self._refused, self._good = stamp, None, pair
        log.info("listener %s: TLS certificate reloaded", self._listener)
        return True

    def _restore(self, context: ssl.SSLContext) -> None:
        """Load the pair in use back (a failed load may have left the context without it)."""
        try:
            with self.materialized() as paths:
                context.load_cert_chain(*paths)
        except (OSError, ssl.SSLError):
            log.exception("listener %s: could not restore its TLS certificate", self._listener)
