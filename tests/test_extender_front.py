"""The extender's lean front (``scorer.extender.front``): kube-scheduler's requests answered without aiohttp's
request objects, everything else handed to aiohttp, the same answers either way, and the service's bounds."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator

import attrs
import orjson
import pytest
from aiohttp import web
from servicekit import self_signed_certificate
from test_extender import NODES, api_pod, body, make_service, samples

from scorer.extender.front import FrontFactory
from scorer.service import app as service_app
from scorer.service import run as service_run
from scorer.service.app import Service

# (the service runs on uvloop by default, scorer.service.eventloop: these run on both loops)
pytestmark = pytest.mark.event_loops

KUBE_HEAD = ("POST {path} HTTP/1.1\r\nHost: 127.0.0.1:10259\r\nUser-Agent: Go-http-client/1.1\r\n"
             "Content-Length: {length}\r\nContent-Type: application/json\r\nAccept-Encoding: gzip\r\n\r\n")


def kube_request(path: str, payload: bytes) -> bytes:
    """A request as kube-scheduler 1.20's HTTP client writes it."""
    return KUBE_HEAD.format(path=path, length=len(payload)).encode() + payload


@contextlib.asynccontextmanager
async def serving(service: Service) -> AsyncIterator[tuple[int, int, FrontFactory]]:
    """``service``'s application on two listeners of one runner: as ``scorer run`` serves it (the front), and
    aiohttp alone; (the front's port, aiohttp's port, the front)."""
    runner = web.AppRunner(service.app(), access_log=None)
    await runner.setup()
    listener, front = await service_run.listen(runner, service.options, None)
    assert front is not None
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        yield listener.sockets[0].getsockname()[1], runner.addresses[0][1], front
    finally:
        service_run.stop_listening(listener, front)
        await runner.cleanup()


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """One answer: (status, headers with lower-case names, body by its Content-Length, else to the end)."""
    async with asyncio.timeout(10):
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {name.strip().lower(): value.strip() for name, _, value in
                   (line.partition(":") for line in lines[1:] if line)}
        if lines[0].split()[1].startswith("1"):  # (100 Continue: no body)
            payload = b""
        elif "content-length" in headers:
            payload = await reader.readexactly(int(headers["content-length"]))
        else:
            payload = await reader.read()
        return int(lines[0].split()[1]), headers, payload


FILTER = body(list(NODES))
HEAD = "POST /scheduler/filter HTTP/1.1\r\nHost: scorer\r\n"
# Requests served by the front and requests handed to aiohttp: each must get the same answer either way.
REQUESTS = {
    "kube filter": kube_request("/scheduler/filter", FILTER),
    "kube prioritize": kube_request("/scheduler/prioritize", body(["idle", "half"])),
    "not JSON": kube_request("/scheduler/filter", b"{"),
    "no pod": kube_request("/scheduler/prioritize", b'{"NodeNames":[]}'),
    "a bad node name": kube_request("/scheduler/filter", body(["idle", "Not_A_Node"])),
    "header names in any case, white space around the length":
        f"{HEAD}content-LENGTH:   {len(FILTER)} \r\nConnection: keep-alive\r\n\r\n".encode() + FILTER,
    "an empty body": f"{HEAD}Content-Length: 0\r\n\r\n".encode(),
    "no Content-Length": f"{HEAD}\r\n".encode(),
    "a query string": kube_request("/scheduler/filter?x=1", FILTER),
    "another path": kube_request("/scheduler/bind", FILTER),
    "HTTP/1.0": f"POST /scheduler/filter HTTP/1.0\r\nContent-Length: {len(FILTER)}\r\n\r\n".encode() + FILTER,
    "a probe": b"GET /healthz HTTP/1.1\r\nHost: scorer\r\n\r\n",
    "two lengths": f"{HEAD}Content-Length: {len(FILTER)}\r\nContent-Length: 3\r\n\r\n".encode() + FILTER,
    "a signed length": f"{HEAD}Content-Length: +{len(FILTER)}\r\n\r\n".encode() + FILTER,
    "a length that is not a number": f"{HEAD}Content-Length: abc\r\n\r\n".encode(),
    "a header line without a colon": f"{HEAD}Content-Length: {len(FILTER)}\r\nX-Broken\r\n\r\n".encode() + FILTER,
    "white space before the colon": f"{HEAD}Content-Length : {len(FILTER)}\r\n\r\n".encode() + FILTER,
    "chunked": f"{HEAD}Transfer-Encoding: chunked\r\n\r\n".encode()
    + b"%x\r\n%s\r\n0\r\n\r\n" % (len(FILTER), FILTER),
    "Expect: 100-continue": f"{HEAD}Content-Length: {len(FILTER)}\r\nExpect: 100-continue\r\n\r\n".encode() + FILTER,
}
# The ones the front answers itself (kept-alive: the connection stays the front's); the rest go to aiohttp.
SERVED = ("kube filter", "kube prioritize", "not JSON", "no pod", "a bad node name",
          "header names in any case, white space around the length", "an empty body")


@pytest.mark.parametrize("name", list(REQUESTS))
async def test_every_request_gets_the_answer_aiohttp_alone_gives(name):
    request = REQUESTS[name]
    async with serving(make_service()) as (front_port, aiohttp_port, front):
        alone = await ask_once(aiohttp_port, request)
        fronted = await ask_once(front_port, request, front)
    assert fronted[3] == (name in SERVED)  # answered by the front, or handed to aiohttp
    assert fronted[0] == alone[0], (fronted, alone)
    assert fronted[2] == alone[2]
    if fronted[0] != 400 or alone[1].get("content-type"):  # (aiohttp's parser errors are text/plain)
        assert fronted[1].get("content-type") == alone[1].get("content-type")


async def ask_once(port: int, request: bytes, front: FrontFactory | None = None
                   ) -> tuple[int, dict[str, str], bytes, bool]:
    """``request``'s answer on a connection of its own (an answer without a length: read to the end), and
    whether ``front`` held the connection once it answered."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        status, headers, payload = await read_answer(reader)
        if status == 100:  # (aiohttp answers Expect: 100-continue first)
            status, headers, payload = await read_answer(reader)
        return status, headers, payload, front is not None and len(front.fronts) == 1
    finally:
        writer.close()


async def test_kube_schedulers_requests_are_answered_by_the_front_until_another_comes():
    service = make_service()
    async with serving(service) as (port, _, front):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(kube_request("/scheduler/filter", FILTER))
            status, headers, payload = await read_answer(reader)
            assert status == 200 and orjson.loads(payload)["NodeNames"] == ["idle", "loud", "half"]
            assert headers["content-type"] == "application/json" and "date" in headers
            assert "connection" not in headers  # (kept alive)
            assert len(front.fronts) == 1  # the front answered
            writer.write(kube_request("/scheduler/prioritize", body(["idle", "loud", "half"])))
            status, _, payload = await read_answer(reader)
            assert status == 200 and [entry["Host"] for entry in orjson.loads(payload)] == ["idle", "loud", "half"]
            writer.write(b"GET /metrics HTTP/1.1\r\nHost: scorer\r\n\r\n")  # handed to aiohttp
            status, _, payload = await read_answer(reader)
            assert status == 200 and not front.fronts
            requests = samples(payload.decode(), "scorer_extender_requests_total")
            assert requests[(("result", "success"), ("verb", "filter"))] == 1
            assert requests[(("result", "success"), ("verb", "prioritize"))] == 1
            writer.write(kube_request("/scheduler/filter", FILTER))  # aiohttp's connection now: answered alike
            status, _, payload = await read_answer(reader)
            assert status == 200 and orjson.loads(payload)["NodeNames"] == ["idle", "loud", "half"]
        finally:
            writer.close()


async def test_a_trickled_head_and_pipelined_requests_are_answered_in_order():
    async with serving(make_service()) as (port, _, front):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            request = kube_request("/scheduler/filter", FILTER)
            for i in range(0, len(request), 7):  # seven bytes at a time
                writer.write(request[i:i + 7])
                await writer.drain()
                await asyncio.sleep(0.001)
            status, _, payload = await read_answer(reader)
            assert status == 200 and len(front.fronts) == 1
            pods = [api_pod(f"web-{i}") for i in range(5)]
            writer.write(b"".join(kube_request("/scheduler/prioritize", body(["idle", "half"], pod=pod))
                                  for pod in pods) + kube_request("/scheduler/filter", b"{"))
            answers = [await read_answer(reader) for _ in range(6)]
            assert [status for status, _, _ in answers] == [200] * 5 + [400]
            assert all([entry["Host"] for entry in orjson.loads(payload)] == ["idle", "half"]
                       for _, _, payload in answers[:5])
            assert len(front.fronts) == 1
        finally:
            writer.close()


async def test_connection_close_is_honoured_and_idle_or_slow_connections_are_closed():
    service = make_service(http_timeout=0.5)
    async with serving(service) as (port, _, front):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(kube_request("/scheduler/filter", FILTER).replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n",
                                                                       1))
        status, headers, _ = await read_answer(reader)
        assert status == 200 and headers["connection"] == "close"
        async with asyncio.timeout(5):
            assert await reader.read() == b""  # closed by the server
        writer.close()
        # idle, a head trickled past the timeout, a kept-alive connection after its answer: all closed
        idle = await asyncio.open_connection("127.0.0.1", port)
        slow = await asyncio.open_connection("127.0.0.1", port)
        kept = await asyncio.open_connection("127.0.0.1", port)
        kept[1].write(kube_request("/scheduler/filter", FILTER))
        assert (await read_answer(kept[0]))[0] == 200
        loop = asyncio.get_running_loop()
        start = loop.time()
        request = kube_request("/scheduler/filter", FILTER)

        async def trickle() -> None:
            for byte in request[:40]:
                slow[1].write(bytes([byte]))
                await asyncio.sleep(0.05)

        trickling = asyncio.create_task(trickle())
        async with asyncio.timeout(5):
            for reader, _ in (idle, slow, kept):
                assert await reader.read() == b""
        assert loop.time() - start < 3
        trickling.cancel()
        await asyncio.gather(trickling, return_exceptions=True)
        for _, stream in (idle, slow, kept):
            stream.close()
        assert not front.fronts


async def test_a_client_that_does_not_read_its_answers_is_not_read_from():
    async with serving(make_service()) as (port, _, front):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            request = kube_request("/scheduler/filter", body([*NODES, *(f"node-{i}" for i in range(400))]))
            count = 20_000_000 // len(request)
            sending = asyncio.create_task(send_all(writer, request, count))
            await asyncio.sleep(1.0)  # the server answers until its write buffer is full, then stops reading
            (connection,) = front.fronts
            assert connection.paused and len(connection.buffer) < 1024 * 1024
            answers = 0
            async with asyncio.timeout(60):
                while answers < count:
                    status, _, _ = await read_answer(reader)
                    assert status == 200
                    answers += 1
            await sending
        finally:
            writer.close()


async def send_all(writer: asyncio.StreamWriter, request: bytes, count: int) -> None:
    for _ in range(count):
        writer.write(request)
        await writer.drain()


@pytest.mark.parametrize(("prefix", "served"), [
    ("/scheduler", True), ("/", True), ("/a.b/ext_1~", True), ("/scheduler/", True),
    ("/schedülér", False), ("/sch%41", False), ("/a/../scheduler", False), ("/a/./b", False)])
def test_only_a_plain_prefix_is_served_by_the_front(prefix, served):
    # (aiohttp decodes a request's path before it routes it: such a prefix is left to aiohttp alone)
    verbs = make_service().app()[service_app.EXTENDER_VERBS_KEY]
    assert verbs is not None
    lines = FrontFactory(lambda: asyncio.Protocol(), verbs, prefix, 1.0, 1.0).lines
    base = prefix.rstrip("/")
    assert lines == ({f"POST {base}/filter HTTP/1.1".encode(): "filter",
                      f"POST {base}/prioritize HTTP/1.1".encode(): "prioritize"} if served else {})


async def test_the_front_serves_over_tls_and_hands_a_tls_connection_to_aiohttp(tmp_path):
    cert, key = self_signed_certificate(tmp_path)
    service = make_service()
    service.options = attrs.evolve(service.options, tls_cert_file=str(cert), tls_private_key_file=str(key))
    runner = web.AppRunner(service.app(), access_log=None)
    await runner.setup()
    listener, front = await service_run.listen(runner, service.options, service_run.server_ssl_context(service.options))
    assert front is not None
    try:
        client = ssl.create_default_context(cafile=str(cert))
        client.check_hostname = False
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.sockets[0].getsockname()[1], ssl=client)
        try:
            writer.write(kube_request("/scheduler/filter", FILTER))
            status, _, payload = await read_answer(reader)
            assert status == 200 and orjson.loads(payload)["NodeNames"] == ["idle", "loud", "half"]
            assert len(front.fronts) == 1
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: scorer\r\n\r\n")
            status, _, payload = await read_answer(reader)
            assert status == 200 and not front.fronts
        finally:
            writer.close()
    finally:
        service_run.stop_listening(listener, front)
        await runner.cleanup()


async def test_stopping_closes_the_fronts_connections():
    service = make_service()
    runner = web.AppRunner(service.app(), access_log=None)
    await runner.setup()
    listener, front = await service_run.listen(runner, service.options, None)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", listener.sockets[0].getsockname()[1])
        writer.write(kube_request("/scheduler/filter", FILTER))
        assert (await read_answer(reader))[0] == 200
        service_run.stop_listening(listener, front)
        async with asyncio.timeout(5):
            assert await reader.read() == b""
        writer.close()
    finally:
        service_run.stop_listening(listener, front)
        await runner.cleanup()
