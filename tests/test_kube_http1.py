"""scorer.kube.http1: the lean HTTP/1.1 client of POSTs, against a scripted server on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from scorer.kube import http1
from scorer.kube.http1 import Http1Pool, TransportError

Answer = Callable[[bytes, asyncio.StreamWriter], Awaitable[bool]]  # (request, writer) -> keep the connection


class Server:
    """Reads whole requests (head and Content-Length body) and answers each with ``answer``."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[bytes] = []
        self.connections = 0

    async def __aenter__(self) -> Server:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                if not await self.answer(request, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def created(body: bytes = b'{"kind":"Binding"}', extra: bytes = b"") -> Answer:
    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n" + extra
                     + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        return b"connection: close" not in extra.lower()
    return answer


def pool(server: Server) -> Http1Pool:
    return Http1Pool(f"http://127.0.0.1:{server.port}/prefix", None, connections=4)


async def test_a_post_is_sent_whole_and_its_connection_kept_for_the_next() -> None:
    async with Server(created()) as server:
        client = pool(server)
        for i in range(3):
            status, headers, body = await client.request(
                "POST", f"/api/v1/namespaces/ns/pods/p{i}/binding", {"Authorization": "Bearer t"}, b'{"a":1}', 5)
            assert (status, headers["content-type"], body) == (201, "application/json", b'{"kind":"Binding"}')
        await client.close()
    assert client.opened == 1 and server.connections == 1
    first = server.requests[0].split(b"\r\n")
    assert first[0] == b"POST /prefix/api/v1/namespaces/ns/pods/p0/binding HTTP/1.1"
    assert f"Host: 127.0.0.1:{server.port}".encode() in first and b"Authorization: Bearer t" in first
    assert b"Content-Length: 7" in first and server.requests[0].endswith(b'\r\n\r\n{"a":1}')


async def test_a_prepared_connection_serves_the_first_request() -> None:
    async with Server(created()) as server:
        client = pool(server)
        await client.prepare(5)
        await client.prepare(5)  # one is idle already: no second
        assert client.opened == 1 and not server.requests
        status, _, _ = await client.request("POST", "/binding", {}, b"{}", 5)
        assert status == 201 and client.opened == 1 and server.connections == 1
        await client.close()
    refused = Http1Pool("http://127.0.0.1:9", None, connections=1)
    await refused.prepare(5)  # (nothing listens there: the next request meets that)
    assert refused.opened == 0


async def test_chunked_and_until_close_bodies_and_connection_close() -> None:
    async def chunked(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nTrailer: x\r\n\r\n")
        return True

    async with Server(chunked) as server:
        client = pool(server)
        assert (await client.request("POST", "/x", {}, None, 5))[2] == b"hello world"
        assert (await client.request("POST", "/x", {}, None, 5))[2] == b"hello world"
        assert client.opened == 1

    async def until_close(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\n\r\nall of it")
        return False

    async with Server(until_close) as server:
        client = pool(server)
        for _ in range(2):
            assert (await client.request("POST", "/x", {}, None, 5))[2] == b"all of it"
        assert client.opened == 2  # the end of the body was the end of the connection

    async with Server(created(extra=b"Connection: close\r\n")) as server:
        client = pool(server)
        for _ in range(2):
            assert (await client.request("POST", "/x", {}, None, 5))[0] == 201
        assert client.opened == 2


async def test_a_kept_connection_the_server_closed_is_not_used_again() -> None:
    async def once_per_connection(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        return False  # then closes: the client's kept connection is at its end

    async with Server(once_per_connection) as server:
        client = pool(server)
        await client.request("POST", "/a", {}, b"1", 5)
        await asyncio.sleep(0.05)
        assert (await client.request("POST", "/b", {}, b"2", 5))[0] == 201
    assert client.opened == 2 and [r.split(b" ")[1] for r in server.requests] == [b"/prefix/a", b"/prefix/b"]


async def test_a_post_without_an_answer_is_not_sent_again() -> None:
    async def answers_only_the_first(request: bytes, writer: asyncio.StreamWriter) -> bool:
        if b"/first" not in request:
            return False  # read, then closed without a word
        writer.write(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
        return True

    async with Server(answers_only_the_first) as server:
        client = pool(server)
        await client.request("POST", "/first", {}, None, 5)
        with pytest.raises(TransportError, match="closed the connection without answering"):
            await client.request("POST", "/second", {}, None, 5)
    assert [r.split(b" ")[1] for r in server.requests] == [b"/prefix/first", b"/prefix/second"]


@pytest.mark.parametrize(("answer", "message"), [
    (b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP/1.x answer"),
    (b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "a malformed header line"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n", "a Content-Length of '99999999999'"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "a malformed chunk size"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "IncompleteReadError"),
    (b"HTTP/1.1 200 OK\r\nX: " + b"a" * (70 * 1024), "LimitOverrunError"),
    (b"HTTP/1.1 2", "in the middle of the answer's headers"),
])
async def test_a_broken_answer_is_a_transport_error_naming_it(answer: bytes, message: str) -> None:
    async def broken(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(answer)
        await writer.drain()
        return False

    async with Server(broken) as server:
        client = pool(server)
        with pytest.raises(TransportError, match=message.replace("(", r"\(")):
            await client.request("POST", "/x", {}, None, 5)


async def test_no_answer_in_time_refused_and_too_large_are_transport_errors(monkeypatch) -> None:
    async def silent(request: bytes, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(10)
        return False

    async with Server(silent) as server:
        with pytest.raises(TransportError, match="no answer within 0.2s"):
            await pool(server).request("POST", "/x", {}, None, 0.2)
    with pytest.raises(TransportError, match="ConnectionRefusedError"):
        await Http1Pool(f"http://127.0.0.1:{server.port}", None, connections=1).request("POST", "/x", {}, None, 5)
    monkeypatch.setattr(http1, "MAX_BODY", 10)

    async def large(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 11)
        return False

    async with Server(large) as server:
        with pytest.raises(TransportError, match="more than 10 bytes"):
            await pool(server).request("POST", "/x", {}, None, 5)


async def test_requests_beyond_the_connections_wait_for_one() -> None:
    busy = peak = 0

    async def slow(request: bytes, writer: asyncio.StreamWriter) -> bool:
        nonlocal busy, peak
        busy += 1
        peak = max(peak, busy)
        await asyncio.sleep(0.02)
        busy -= 1
        writer.write(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")
        return True

    async with Server(slow) as server:
        client = pool(server)
        answers = await asyncio.gather(*(client.request("POST", "/x", {}, None, 5) for _ in range(20)))
    assert [a[0] for a in answers] == [201] * 20 and peak == 4 and client.opened == 4


async def test_a_line_break_in_the_path_or_a_header_is_not_sent() -> None:
    async with Server(created()) as server:
        client = pool(server)
        for path, headers in (("/x\r\nX-Evil: 1", {}), ("/x", {"Authorization": "Bearer t\r\nX-Evil: 1"})):
            with pytest.raises(TransportError, match="a line break"):
                await client.request("POST", path, headers, None, 5)
    assert server.requests == []


async def test_a_closed_gate_sends_nothing_and_keeps_the_connection() -> None:
    async with Server(created()) as server:
        client = pool(server)
        asked: list[str] = []

        def gate(answer: bool) -> Callable[[], bool]:
            def ask() -> bool:
                asked.append("once the connection is ready")
                return answer
            return ask

        assert (await client.request("POST", "/a", {}, b"{}", 5.0, gate=gate(True)))[0] == 201
        with pytest.raises(http1.GateClosed, match=r"^PATCH /b$"):
            await client.request("PATCH", "/b", {}, b"{}", 5.0, gate=gate(False))
        assert (await client.request("DELETE", "/c", {}, None, 5.0))[0] == 201
        await asyncio.sleep(0.05)
        assert [r.split(b" ")[:2] for r in server.requests] == [[b"POST", b"/prefix/a"], [b"DELETE", b"/prefix/c"]]
        assert len(asked) == 2 and server.connections == client.opened == 1
        await client.close()


def test_only_http_urls() -> None:
    with pytest.raises(ValueError, match="not an http"):
        Http1Pool("unix:///var/run/x", None, connections=1)
