"""A lean HTTP/1.1 client for the API server's writes: a binding and an Event for every pod, status patches,
preemption's deletions, volume updates.

aiohttp spends about 100 us of CPU on a request here (its request and response objects, headers,
timers, tracing hooks), where writing the request and reading the answer on asyncio's streams takes
about 30 us (measured against the same loopback server, 3,000 small POSTs, 8 at a time). With two
writes per pod, that is a tenth of scorer's CPU per bound pod end to end, so ``ApiClient`` sends its
POSTs, PATCHes and DELETEs here (``Http1Pool``) and keeps aiohttp for the rest: lists, watches, PUTs.
A request's ``gate`` (the leader's fence) is asked once its connection is ready, right before it is
written: nothing between that answer and the socket can wait.

What it does: keep-alive connections, at most ``connections`` at once (callers wait for one beyond
that), idle ones kept for ``KEEPALIVE`` seconds; the request written in one go (HTTP/1.1, ``Host``,
``Content-Length``); the answer read whole: the status line and headers (at most ``MAX_HEAD``
bytes), then the body by ``Content-Length``, ``chunked``, or until the connection closes (at most
``MAX_BODY`` bytes). A connection goes back to the pool only after a complete answer that did not
say ``Connection: close``. What it does not do, because these requests need none of it: redirects,
compression, proxies, ``Expect: 100-continue``, pipelining.

Every failure is a ``TransportError`` naming what happened: refused, reset, TLS, an answer that is
not HTTP/1.x or is too large, the timeout (the whole request, waiting for a connection included).
The connection it happened on is closed. Nothing is sent twice: a POST is not idempotent (a binding
sent again would fail as a conflict after the first succeeded), so a kept-alive connection is
checked before it is used (one the server closed while idle is dropped then), and a request that
got no answer is the caller's to retry, as with aiohttp, which retries no POST either.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import time
import urllib.parse
from collections.abc import Callable, Mapping

#: How long an idle connection is kept (the API server closes idle ones after about 90 s).
KEEPALIVE = 30.0
#: The most bytes of a status line and headers, and of a body, read from an answer.
MAX_HEAD = 64 * 1024
MAX_BODY = 16 * 1024 * 1024


class TransportError(Exception):
    """The request got no complete HTTP answer (message: what happened)."""


class GateClosed(Exception):
    """Not sent: the request's ``gate`` said no once its connection was ready."""


class _Connection:
    __slots__ = ("reader", "writer", "idle_since")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = 0.0

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.writer.close()


class Http1Pool:
    """Requests to the server of ``base`` (``https://host:port/prefix``: the prefix starts every path)."""

    def __init__(self, base: str, ssl_context: ssl.SSLContext | None, *, connections: int) -> None:
        parts = urllib.parse.urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.ssl: ssl.SSLContext | None = None
        if parts.scheme == "https":
            self.ssl = ssl_context if ssl_context is not None else ssl.create_default_context()
        self._host_header = parts.netloc.rpartition("@")[2].encode("idna")
        self._slots = asyncio.Semaphore(connections)
        self._idle: list[_Connection] = []
        self.opened = 0  # connections made, for tests

    async def request(self, method: str, path: str, headers: Mapping[str, str], body: bytes | None,
                      timeout: float, gate: Callable[[], bool] | None = None) -> tuple[int, dict[str, str], bytes]:
        """(status, headers with lower-case names, body) of ``method`` ``path``; ``TransportError``. ``gate``,
        when given, is asked once the connection is ready, right before the request is written: False, and
        nothing is sent (``GateClosed``; the connection stays for the next request)."""
        if any("\r" in part or "\n" in part for part in (method, path, *headers.keys(), *headers.values())):
            raise TransportError("a line break in the request line or a header: not sent")
        head = [f"{method} {self.prefix}{path} HTTP/1.1".encode(), b"Host: " + self._host_header]
        head.extend(f"{name}: {value}".encode() for name, value in headers.items())
        head.append(b"Content-Length: %d" % len(body or b""))
        data = b"\r\n".join(head) + b"\r\n\r\n" + (body or b"")
        try:
            async with asyncio.timeout(timeout), self._slots:
                connection = await self._connection()
                if gate is not None and not gate():
                    self._keep(connection)
                    raise GateClosed(f"{method} {path}")
                try:
                    status, answer_headers, answer, keep = await self._exchange(connection, data, method)
                except BaseException:
                    connection.close()
                    raise
                if keep:
                    self._keep(connection)
                else:
                    connection.close()
                return status, answer_headers, answer
        except TimeoutError:
            raise TransportError(f"no answer within {timeout:g}s") from None
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as error:
            raise TransportError(f"{type(error).__name__}: {error}") from None

    async def prepare(self, timeout: float) -> None:
        """Open a connection to keep idle for the next request, unless one is: its TCP and TLS handshakes
        are then not the first request's. A failure is the next request's to meet."""
        if self._idle:
            return
        try:
            async with asyncio.timeout(timeout), self._slots:
                connection = await self._connection()
        except (TimeoutError, OSError, ValueError):
            return
        self._keep(connection)

    def _keep(self, connection: _Connection) -> None:
        """``connection`` idle from now, for the next request."""
        connection.idle_since = time.monotonic()
        self._idle.append(connection)

    async def _connection(self) -> _Connection:
        """A kept-alive connection that is still open, else a new one."""
        now = time.monotonic()
        while self._idle:
            connection = self._idle.pop()
            if now - connection.idle_since < KEEPALIVE and not connection.reader.at_eof():
                return connection
            connection.close()
        reader, writer = await asyncio.open_connection(self.host, self.port, ssl=self.ssl, limit=MAX_HEAD,
                                                       server_hostname=self.host if self.ssl else None)
        self.opened += 1
        return _Connection(reader, writer)

    async def _exchange(self, connection: _Connection, data: bytes, method: str
                        ) -> tuple[int, dict[str, str], bytes, bool]:
        """Send ``data``, read the answer: (status, headers, body, whether the connection may be kept)."""
        reader = connection.reader
        connection.writer.write(data)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as error:
            if not error.partial:
                raise TransportError("the server closed the connection without answering") from None
            raise TransportError("the connection closed in the middle of the answer's headers") from None
        lines = head[:-4].decode("latin-1").split("\r\n")
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
            raise TransportError(f"not an HTTP/1.x answer: {lines[0][:80]!r}")
        status = int(code)
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon:
                raise TransportError(f"a malformed header line: {line[:80]!r}")
            name, value = name.strip().lower(), value.strip()
            headers[name] = f"{headers[name]}, {value}" if name in headers else value
        keep = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
        if method == "HEAD" or status in (204, 304) or status < 200:
            return status, headers, b"", keep
        if "chunked" in headers.get("transfer-encoding", "").lower():
            return status, headers, await _chunked(reader), keep
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit() or int(length) > MAX_BODY:
                raise TransportError(f"a Content-Length of {length[:40]!r}")
            return status, headers, await reader.readexactly(int(length)), keep
        body = await reader.read(MAX_BODY + 1)  # (until the server closes: the answer ends there)
        while len(body) <= MAX_BODY and (more := await reader.read(MAX_BODY + 1 - len(body))):
            body += more
        if len(body) > MAX_BODY:
            raise TransportError(f"an answer of more than {MAX_BODY} bytes")
        return status, headers, body, False

    async def close(self) -> None:
        while self._idle:
            self._idle.pop().close()


async def _chunked(reader: asyncio.StreamReader) -> bytes:
    """A chunked body (trailers read and dropped)."""
    parts: list[bytes] = []
    size = 0
    while True:
        line = await reader.readuntil(b"\r\n")
        length = line.split(b";", 1)[0].strip()
        if not length or any(c not in b"0123456789abcdefABCDEF" for c in length):
            raise TransportError(f"a malformed chunk size: {line[:40]!r}")
        chunk = int(length, 16)
        if chunk == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass
            return b"".join(parts)
        size += chunk
        if size > MAX_BODY:
            raise TransportError(f"an answer of more than {MAX_BODY} bytes")
        parts.append(await reader.readexactly(chunk))
        if await reader.readexactly(2) != b"\r\n":
            raise TransportError("a chunk not followed by CRLF")
