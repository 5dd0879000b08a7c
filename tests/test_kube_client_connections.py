"""scorer.kube.client's connections: POSTs share a bounded pool of their own, streams (watches) never wait
behind them."""

from __future__ import annotations

import asyncio
import contextlib

from aiohttp import web

from scorer.kube.client import REQUEST_CONNECTIONS, ApiClient
from scorer.kube.config import ClusterAccess


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
