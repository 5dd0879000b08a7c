"""scorer.kube.client's connections: POSTs share a bounded pool of their own, streams (watches) never wait
behind them; a watch's stream reads its socket in batches (``coalesce``)."""

from __future__ import annotations

import asyncio
import contextlib
import ssl

import pytest
from aiohttp import web
from servicekit import self_signed_certificate

from scorer.kube.client import REQUEST_CONNECTIONS, ApiClient, _pausable
from scorer.kube.config import ClusterAccess

# (the service runs on uvloop by default, scorer.service.eventloop: these run on both loops)
pytestmark = pytest.mark.event_loops


async def test_posts_share_a_bounded_pool_and_streams_do_not_wait_behind_them(aiohttp_server) -> None:
    peers: set[tuple[str, int]] = set()
    busy = peak = 0
    release_streams = asyncio.Event()
    pool_full = asyncio.Event()
    streams_open = 0

    async def binding(request: web.Request) -> web.Response:
        nonlocal busy, peak
        assert request.transport is not None
        # What every request of the client carries, on aiohttp's path and on the POSTs' own.
        assert (request.headers["User-Agent"], request.headers["Accept"]) == ("scorer/test", "application/json")
        assert request.headers["Authorization"] == "Bearer tok" and await request.json() == {}
        peers.add(request.transport.get_extra_info("peername")[:2])
        busy += 1
        peak = max(peak, busy)
        if busy == REQUEST_CONNECTIONS:
            pool_full.set()
        # Held until the pool's every connection carries one (else a burst may be answered before the last
        # connections open), at most 5 s.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(pool_full.wait(), 5)
        busy -= 1
        return web.json_response({}, status=201)

    async def watch(request: web.Request) -> web.StreamResponse:
        nonlocal streams_open
        response = web.StreamResponse()
        await response.prepare(request)
        streams_open += 1
        await response.write(b'{"type":"BOOKMARK"}\n')
        await asyncio.wait_for(release_streams.wait(), 10)
        return response

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/{namespace}/pods/{name}/binding", binding)
    app.router.add_get("/api/v1/pods", watch)
    server = await aiohttp_server(app)
    watches = REQUEST_CONNECTIONS + 4  # more streams than the POSTs' pool holds

    access = ClusterAccess(server=f"http://127.0.0.1:{server.port}", source="test", token="tok")
    async with ApiClient(access, user_agent="scorer/test") as client:

        async def hold_a_watch() -> bytes:
            async with client.stream("GET", "/api/v1/pods", params={"watch": "1"}) as stream:
                line = await stream.readline()
                await asyncio.wait_for(release_streams.wait(), 10)
                return line

        held = [asyncio.create_task(hold_a_watch()) for _ in range(watches)]
        for _ in range(200):
            if streams_open == watches:
                break
            await asyncio.sleep(0.01)
        assert streams_open == watches  # every stream got a connection of its own
        posts = REQUEST_CONNECTIONS + 24  # more than the pool holds
        answers = await asyncio.wait_for(asyncio.gather(*(
            client.request("POST", f"/api/v1/namespaces/ns/pods/p{i}/binding", body={}) for i in range(posts))), 20)
        assert [answer.status for answer in answers] == [201] * posts  # none waited behind the streams
        release_streams.set()
        assert await asyncio.gather(*held) == [b'{"type":"BOOKMARK"}\n'] * watches
    # The concurrent POSTs went over at most REQUEST_CONNECTIONS connections, reused.
    assert peak == REQUEST_CONNECTIONS and len(peers) == REQUEST_CONNECTIONS


def _watch_app(go: asyncio.Event, end: asyncio.Event) -> web.Application:
    """A watch that writes one event, then, once ``go`` is set, two more in two writes, and ends at ``end``."""

    async def watch(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write(b'{"type":"BOOKMARK","n":1}\n')
        await asyncio.wait_for(go.wait(), 10)
        await response.write(b'{"type":"BOOKMARK","n":2}\n')
        await response.write(b'{"type":"BOOKMARK","n":3}\n')
        await asyncio.wait_for(end.wait(), 10)
        return response

    app = web.Application()
    app.router.add_get("/api/v1/pods", watch)
    return app


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
async def test_a_coalescing_stream_leaves_its_socket_unread_after_a_line_and_reads_what_came_in_one_go(
        aiohttp_server, tmp_path, tls) -> None:
    go, end = asyncio.Event(), asyncio.Event()
    server_ssl = None
    if tls:
        cert, key = self_signed_certificate(tmp_path)
        server_ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_ssl.load_cert_chain(str(cert), str(key))
    server = await aiohttp_server(_watch_app(go, end), ssl=server_ssl)
    scheme = "https" if tls else "http"
    access = ClusterAccess(server=f"{scheme}://127.0.0.1:{server.port}", source="test",
                           insecure_skip_tls_verify=tls)
    async with ApiClient(access) as client:
        async with client.stream("GET", "/api/v1/pods", params={"watch": "1"}, coalesce=30.0) as stream:
            assert await stream.readline() == b'{"type":"BOOKMARK","n":1}\n'
            socket = _pausable(stream._response.connection.transport)
            assert socket is not None and not socket.is_reading()  # held for 30 s after the line
            go.set()
            second = asyncio.ensure_future(stream.readline())
            await asyncio.sleep(0.3)  # (both lines written meanwhile: they wait in the socket, unread)
            assert not second.done()
            if tls:  # (not even read into the TLS layer, whose buffer holds nothing: no wake-up per arrival)
                assert stream._response.connection.transport.get_read_buffer_size() == 0
            stream.release_hold()  # (the 30 s over)
            assert await asyncio.wait_for(second, 10) == b'{"type":"BOOKMARK","n":2}\n'
            assert not socket.is_reading()  # held again after that line ...
            # ... and the third line came with the second, in the one read: returned at once
            assert await asyncio.wait_for(stream.readline(), 1) == b'{"type":"BOOKMARK","n":3}\n'
            end.set()
        # left while held: the hold is let go (its timer cancelled) before the connection is released or closed
        assert stream._pause is None and (socket.is_closing() or socket.is_reading())


async def test_a_stream_without_coalesce_reads_its_socket_all_along(aiohttp_server) -> None:
    go, end = asyncio.Event(), asyncio.Event()
    server = await aiohttp_server(_watch_app(go, end))
    async with ApiClient(ClusterAccess(server=f"http://127.0.0.1:{server.port}", source="test")) as client:
        async with client.stream("GET", "/api/v1/pods", params={"watch": "1"}) as stream:
            assert await stream.readline() == b'{"type":"BOOKMARK","n":1}\n'
            socket = _pausable(stream._response.connection.transport)
            assert socket is not None and socket.is_reading()
            go.set()
            assert await asyncio.wait_for(stream.readline(), 10) == b'{"type":"BOOKMARK","n":2}\n'
            assert await asyncio.wait_for(stream.readline(), 10) == b'{"type":"BOOKMARK","n":3}\n'
            end.set()
