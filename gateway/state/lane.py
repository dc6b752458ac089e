"""A lean command path to one standalone Redis for the commands every call makes (ADR 0042).

redis-py's asyncio command path costs about 85 µs of CPU per command before the command's own
work (a pool checkout under a condition and a timeout, a retry wrapper, a stream reader, hooks),
and the limit check, the cache lookup and the cache store each pay it on a governed call. A
`Lane` sends those commands over one connection per process and event loop, pipelined: a
command is encoded here, written at once, and its future is resolved in arrival order by the
protocol's `data_received` (replies parsed by hiredis), with no task, lock or timer per command.

What it keeps from the redis-py path (gateway/state/connections.py):
- the same URL (`redis://`, `unix://`; user, password and database); TLS, Sentinel and Cluster
  stay on redis-py (`Lane.for_pool` returns None for them);
- the same bounds: connect 1 s, every command answered within `OPERATION_TIMEOUT_S` or the
  connection is dropped and every command waiting on it fails with `redis.exceptions.
  TimeoutError` (a stuck Redis, like a stuck redis-py socket read); at most `MAX_PENDING`
  commands wait on one connection, more fail at once with `ConnectionError`;
- the same errors: redis-py's exception classes for connection failures and error replies
  (`NOSCRIPT`, `READONLY`, `LOADING`, `OOM`, ... by their prefix), so `mapped_errors()` and the
  callers' handling do not change;
- scripts by `EVALSHA`, sent again as `EVAL` on `NOSCRIPT` (Redis restarted, `SCRIPT FLUSH`);
- one retry of a connection that could not be opened (nothing was sent); a command whose
  connection dropped after it was written is never sent again: it may have run (the limit
  check's receipt covers a lost reply, docs/limits.md).

A caller cancelled while its command is in flight only stops waiting: the reply still arrives in
order and is dropped, so the connection never falls out of step (redis-py drops a connection
whose command was cancelled instead).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
from collections import deque
from collections.abc import Awaitable, Sequence
from typing import Any, Final, Protocol, cast

import hiredis
from redis import exceptions as rexc
from redis.asyncio import ConnectionPool
from redis.asyncio.connection import Connection, UnixDomainSocketConnection

CONNECT_TIMEOUT_S: Final = 1.0
OPERATION_TIMEOUT_S: Final = 2.0
MAX_PENDING: Final = 8192  # commands waiting for a reply on one connection
_WATCH_S: Final = 0.25  # how often a connection with commands waiting checks the oldest
_RETRY_DELAY_S: Final = 0.05
# A connection unused this long is asked a PING alone before the next command goes on it, as
# redis-py's health check does: Redis (`timeout`), a proxy or a restart may have closed it
# while it was idle, and a command written on a closed connection fails though it never ran.
IDLE_CHECK_S: Final = 15.0

# Error replies by their first word, as redis-py maps them (a reply's text is never logged).
_ERRORS: Final[dict[str, type[rexc.RedisError]]] = {
    "NOSCRIPT": rexc.NoScriptError,
    "READONLY": rexc.ReadOnlyError,
    "LOADING": rexc.BusyLoadingError,
    "OOM": rexc.OutOfMemoryError,
    "MASTERDOWN": rexc.MasterDownError,
    "NOPERM": rexc.NoPermissionError,
    "NOAUTH": rexc.AuthenticationError,
    "WRONGPASS": rexc.AuthenticationError,
    "EXECABORT": rexc.ExecAbortError,
    "TRYAGAIN": rexc.TryAgainError,
    "CLUSTERDOWN": rexc.ClusterDownError,
}


# `ERR` replies redis-py maps to a class of their own by their text: the connection cannot be
# used (too many clients, a password Redis does not expect or refuses).
_ERR_TEXTS: Final[tuple[tuple[str, type[rexc.RedisError]], ...]] = (
    ("max number of clients reached", rexc.ConnectionError),
    ("invalid password", rexc.AuthenticationError),
    ("AUTH <password> called without any password configured", rexc.AuthenticationError),
    ("Client sent AUTH, but no password is set", rexc.AuthenticationError),
)


def _error(reply: hiredis.ReplyError) -> rexc.RedisError:
    text = str(reply)
    head, _, rest = text.partition(" ")
    if head == "ERR":
        for start, kind in _ERR_TEXTS:
            if rest.startswith(start):
                return kind(text)
    return _ERRORS.get(head, rexc.ResponseError)(text)


def encode(args: Sequence[Any]) -> bytes:
    """One command in RESP: bytes as they are, str as UTF-8, int and float as redis-py writes
    them (`repr`); anything else (bool, None, ...) is refused, as redis-py refuses it."""
    out = [b"*%d\r\n" % len(args)]
    append = out.append
    for arg in args:
        kind = type(arg)
        if kind is str:
            data = arg.encode()
        elif kind is bytes:
            data = arg
        elif kind is int or kind is float:
            data = repr(arg).encode()
        else:
            data = _other(arg)
        append(b"$%d\r\n%b\r\n" % (len(data), data))
    return b"".join(out)


def _other(arg: Any) -> bytes:
    if isinstance(arg, bytes | bytearray | memoryview):
        return bytes(arg)
    if isinstance(arg, str):
        return arg.encode()
    if isinstance(arg, int | float) and not isinstance(arg, bool):
        return repr(arg).encode()
    raise rexc.DataError(f"invalid input of type {type(arg).__name__!r}")


class _Slot:
    """A command written and not yet answered."""

    __slots__ = ("fallback", "future", "sent")

    def __init__(
        self, future: asyncio.Future[Any], fallback: tuple[Any, ...] | None, sent: float
    ) -> None:
        self.future = future
        self.fallback = fallback  # an EVALSHA's EVAL (its arguments), sent on NOSCRIPT
        self.sent = sent


class _Connection(asyncio.Protocol):
    """One pipelined connection: replies resolve the oldest waiting command."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.transport: asyncio.Transport | None = None
        self.reader = hiredis.Reader()
        self.pending: deque[_Slot] = deque()
        self.lost = False
        self.used = loop.time()  # when a command last went out on it
        self._watch: asyncio.TimerHandle | None = None

    def usable(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Open, of this loop, and not closing (Redis may have closed it a moment ago)."""
        transport = self.transport
        return (
            not self.lost
            and self.loop is loop
            and transport is not None
            and not transport.is_closing()
        )

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses; both write and abort
        self.transport = cast(asyncio.Transport, transport)

    def send(self, payload: bytes, fallback: tuple[Any, ...] | None = None) -> asyncio.Future[Any]:
        future = self.loop.create_future()
        self.send_into(future, payload, fallback)
        return future

    def send_into(
        self, future: asyncio.Future[Any], payload: bytes, fallback: tuple[Any, ...] | None
    ) -> None:
        if self.lost or self.transport is None:
            future.set_exception(rexc.ConnectionError("connection to Redis lost"))
            return
        if len(self.pending) >= MAX_PENDING:
            future.set_exception(rexc.ConnectionError("too many Redis commands waiting"))
            return
        now = self.used = self.loop.time()  # one clock: the watchdog's and the idle check's
        self.pending.append(_Slot(future, fallback, now))
        self.transport.write(payload)
        if self._watch is None:
            self._watch = self.loop.call_later(_WATCH_S, self._check)

    def data_received(self, data: bytes) -> None:
        reader = self.reader
        reader.feed(data)
        pending = self.pending
        while True:
            try:
                reply = reader.gets()
            except hiredis.ProtocolError:
                self._fail(rexc.ConnectionError("Redis sent a reply that does not parse"))
                return
            if reply is False:
                return
            if not pending:  # a reply nobody asked for: out of step, never guess
                self._fail(rexc.ConnectionError("Redis sent an unexpected reply"))
                return
            slot = pending.popleft()
            future = slot.future
            if isinstance(reply, hiredis.ReplyError):
                error = _error(reply)
                if slot.fallback is not None and isinstance(error, rexc.NoScriptError):
                    if not future.done():
                        self.send_into(future, encode(slot.fallback), None)
                    continue
                if not future.done():
                    future.set_exception(error)
            elif not future.done():
                future.set_result(reply)

    def _check(self) -> None:
        """Drop the connection when its oldest command has waited past the operation timeout
        (every command behind it is stuck too); otherwise look again while commands wait."""
        self._watch = None
        if not self.pending or self.lost:
            return
        if self.loop.time() - self.pending[0].sent > OPERATION_TIMEOUT_S:
            self._fail(rexc.TimeoutError("Timeout reading from Redis"))
            return
        self._watch = self.loop.call_later(_WATCH_S, self._check)

    def eof_received(self) -> bool:
        """Redis closed its side: nothing more will be answered here."""
        self._fail(rexc.ConnectionError("connection to Redis closed by the server"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(rexc.ConnectionError("connection to Redis lost"))

    def _fail(self, error: rexc.RedisError) -> None:
        self.lost = True
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        if self.transport is not None:
            self.transport.abort()
        pending, self.pending = self.pending, deque()
        for slot in pending:
            if not slot.future.done():
                slot.future.set_exception(error)

    def close(self) -> None:
        self._fail(rexc.ConnectionError("connection to Redis closed"))


class Script:
    """A Lua script run through a `Lane`: called as redis-py's registered scripts are."""

    __slots__ = ("_eval_head", "_lane", "_sha_head")

    def __init__(self, lane: Lane, source: str) -> None:
        self._lane = lane
        body = source.encode()
        sha = hashlib.sha1(body).hexdigest().encode()  # noqa: S324  # Redis names scripts so
        self._sha_head = (b"EVALSHA", sha)
        self._eval_head = (b"EVAL", body)

    def __call__(self, keys: Sequence[Any] = (), args: Sequence[Any] = ()) -> Awaitable[Any]:
        tail = (len(keys), *keys, *args)
        return self._lane.send(encode((*self._sha_head, *tail)), (*self._eval_head, *tail))


class Lane:
    """Pipelined commands to one standalone Redis (module docstring)."""

    def __init__(
        self,
        *,
        host: str | None = None,
        port: int = 6379,
        path: str | None = None,
        db: int = 0,
        username: str | None = None,
        password: str | None = None,
    ) -> None:
        self._host = host or "localhost"
        self._port = port
        self._path = path
        self._handshake: list[bytes] = []
        if password is not None:
            auth = ("AUTH", username, password) if username else ("AUTH", password)
            self._handshake.append(encode(auth))
        if db:
            self._handshake.append(encode(("SELECT", db)))
        self._conn: _Connection | None = None
        self._opening: asyncio.Future[_Connection] | None = None
        self._generation = 0  # bumped by aclose: a connection opened before it is closed

    @classmethod
    def for_pool(cls, pool: ConnectionPool) -> Lane | None:
        """A lane to the Redis `pool` connects to; None where the lane does not go (TLS, or
        any connection class of redis-py's other than plain TCP and Unix sockets)."""
        kwargs = pool.connection_kwargs
        common: dict[str, Any] = {
            "db": int(kwargs.get("db") or 0),
            "username": kwargs.get("username"),
            "password": kwargs.get("password"),
        }
        if pool.connection_class is Connection:
            host = kwargs.get("host", "localhost")
            return cls(host=host, port=int(kwargs.get("port", 6379)), **common)
        if pool.connection_class is UnixDomainSocketConnection:
            return cls(path=kwargs["path"], **common)
        return None

    def script(self, source: str) -> Script:
        return Script(self, source)

    def execute(self, *args: Any) -> Awaitable[Any]:
        """One command's reply (bytes, int, None, lists of them), or redis-py's exception."""
        return self.send(encode(args))

    def send(self, payload: bytes, fallback: tuple[Any, ...] | None = None) -> Awaitable[Any]:
        conn = self._conn
        loop = asyncio.get_running_loop()
        if conn is not None and conn.usable(loop) and loop.time() - conn.used < IDLE_CHECK_S:
            return conn.send(payload, fallback)
        return self._send_opening(payload, fallback)

    async def _send_opening(self, payload: bytes, fallback: tuple[Any, ...] | None) -> Any:
        conn = await self._connection()
        return await conn.send(payload, fallback)

    async def _connection(self) -> _Connection:
        loop = asyncio.get_running_loop()
        conn = self._conn
        if conn is not None and conn.usable(loop):
            if loop.time() - conn.used < IDLE_CHECK_S:
                return conn
            try:  # idle for a while: a PING alone tells whether it still answers
                await conn.send(b"*1\r\n$4\r\nPING\r\n")
            except rexc.RedisError:
                conn.close()
            else:
                return conn
        opening = self._opening
        if opening is None or opening.get_loop() is not loop:
            opening = self._opening = asyncio.ensure_future(self._open(loop))
            opening.add_done_callback(functools.partial(self._opened, self._generation))
        return await asyncio.shield(opening)

    def _opened(self, generation: int, opening: asyncio.Future[_Connection]) -> None:
        if self._opening is opening:
            self._opening = None
        if opening.cancelled() or opening.exception() is not None:
            return
        conn = opening.result()
        if generation != self._generation:  # closed while it was opening
            conn.close()
            return
        old, self._conn = self._conn, conn
        if old is not None and old is not conn:  # another event loop's, or a lost one
            with contextlib.suppress(RuntimeError):  # its loop is gone: so is its socket
                old.close()

    async def _open(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        try:
            return await self._connect(loop)
        except (rexc.ConnectionError, rexc.TimeoutError):
            await asyncio.sleep(_RETRY_DELAY_S)  # one retry: nothing was sent
            return await self._connect(loop)

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> _Connection:
        conn = _Connection(loop)
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                if self._path is not None:
                    await loop.create_unix_connection(lambda: conn, self._path)
                else:
                    await loop.create_connection(lambda: conn, self._host, self._port)
        except TimeoutError as exc:
            conn.close()
            raise rexc.TimeoutError("Timeout connecting to Redis") from exc
        except OSError as exc:
            raise rexc.ConnectionError(f"cannot connect to Redis ({type(exc).__name__})") from exc
        try:
            for command in self._handshake:
                await conn.send(command)
        except BaseException:
            conn.close()
            raise
        return conn

    async def aclose(self) -> None:
        """Close the connection; commands waiting on it fail with `ConnectionError`. A later
        command opens a new one."""
        self._generation += 1
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(RuntimeError):  # its loop is gone: so is its socket
                conn.close()


class ScriptCall(Protocol):
    """A registered script, the lane's or redis-py's."""

    def __call__(self, keys: Sequence[Any] = ..., args: Sequence[Any] = ...) -> Awaitable[Any]: ...
