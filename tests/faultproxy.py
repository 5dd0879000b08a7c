"""A fault-injecting reverse proxy in front of the test kube-apiserver (tests/kubekit.py).

``FaultProxy(upstream)`` listens on 127.0.0.1 (plain HTTP) and forwards every
request to ``upstream`` (the API server's HTTPS URL, certificate not
verified), the client's headers (its bearer token) included. Watch responses
(``?watch=1``) are streamed through line by line; other responses are read
whole and forwarded.

Tests add ``Fault`` rules at runtime (``proxy.add(...)``): the first rule that
matches a request (method, a path regex, watch or not, a query regex) and
has uses left (``count``; None: every time) applies to it:

* ``delay``: wait that many seconds first (then the rest of the rule, or the
  request is forwarded);
* ``reset``: abort the connection at once (no answer);
* ``status`` (+ ``body``, ``headers``): answer that instead of forwarding (a
  200 with ``body`` lines makes a watch stream of those lines);
* ``drop_after_lines``: forward a streamed response, then abort the
  connection after that many lines;
* ``rewrite``: a function applied to each JSON document forwarded (each
  watch event; the whole body otherwise), returning the document to send.

``proxy.requests`` records every request (method, path, query, when);
``drop_streams()`` aborts every watch being streamed; ``write_kubeconfig``
writes a kubeconfig for the proxy with the test token.

Fixtures (a test module takes them with ``pytest_plugins = ("faultproxy",)``):
``fault_proxy``, a proxy in front of the session's ``control_plane``, and
``proxied_client``, an ``ApiClient`` that goes through it. (PYTEST_DONT_REWRITE:
the modules import this one before ``pytest_plugins`` registers it, and it
holds no test assertions to rewrite.)
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import attrs
import pytest
from aiohttp import web
from kubekit import TOKEN
from yarl import URL

from scorer.kube.client import ApiClient
from scorer.kube.config import load_kubeconfig

# Request headers passed to the API server; responses keep theirs but for framing.
FORWARDED_REQUEST_HEADERS = ("authorization", "accept", "content-type", "user-agent")
DROPPED_RESPONSE_HEADERS = ("content-length", "transfer-encoding", "content-encoding", "connection", "date", "server")


@attrs.define
class Fault:
    """One rule; ``hits`` counts the requests it applied to."""

    method: str | None = None
    path: str = ""
    watch: bool | None = None
    query: str | None = None
    count: int | None = 1
    delay: float = 0.0
    reset: bool = False
    status: int | None = None
    body: bytes | Mapping[str, Any] | None = None
    headers: Mapping[str, str] = attrs.Factory(dict)
    drop_after_lines: int | None = None
    rewrite: Callable[[Any], Any] | None = None
    hits: int = 0

    def matches(self, request: web.Request, watch: bool) -> bool:
        if self.count is not None and self.hits >= self.count:
            return False
        if self.method is not None and request.method != self.method:
            return False
        if self.watch is not None and watch != self.watch:
            return False
        if self.query is not None and not re.search(self.query, request.query_string):
            return False
        return re.search(self.path, request.path) is not None


@attrs.frozen
class Recorded:
    method: str
    path: str
    query: Mapping[str, str]
    time: float  # time.monotonic() when the request arrived

    @property
    def watch(self) -> bool:
        return self.query.get("watch") in ("1", "true")


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    """A ``Status`` object as the API server sends it."""
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


def watch_error_line(code: int = 410, reason: str = "Expired", message: str = "too old resource version") -> bytes:
    """The in-stream ``ERROR`` event of a watch."""
    return json.dumps({"type": "ERROR", "object": status_body(code, reason, message)}).encode() + b"\n"


class FaultProxy:
    """``async with FaultProxy(control_plane.url) as proxy:`` a proxy on ``proxy.url``."""

    def __init__(self, upstream: str, *, port: int = 0) -> None:
        self.upstream = upstream.rstrip("/")
        self.faults: list[Fault] = []
        self.requests: list[Recorded] = []
        self._port = port
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._streams: set[asyncio.Transport] = set()
        self.url = ""

    async def start(self) -> FaultProxy:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._session = aiohttp.ClientSession(read_bufsize=2**21, timeout=aiohttp.ClientTimeout(total=None))
        self._runner = web.AppRunner(app, handler_cancellation=True, shutdown_timeout=1.0, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self._port)
        await site.start()
        self.url = f"http://127.0.0.1:{site.port}"
        return self

    async def stop(self) -> None:
        self.drop_streams()
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def __aenter__(self) -> FaultProxy:
        return await self.start()

    async def __aexit__(self, *exc: Any) -> None:
        await self.stop()

    # -- the tests' side

    def add(self, **rule: Any) -> Fault:
        """Add a ``Fault(**rule)`` (after the ones already there) and return it."""
        fault = Fault(**rule)
        self.faults.append(fault)
        return fault

    def clear(self) -> None:
        self.faults.clear()

    def drop_streams(self) -> int:
        """Abort every response being streamed (watches); returns how many."""
        dropped = len(self._streams)
        for transport in list(self._streams):
            transport.abort()
        self._streams.clear()
        return dropped

    def watches(self, path: str = "") -> list[Recorded]:
        """The watch requests recorded (whose path contains ``path``)."""
        return [r for r in self.requests if r.watch and path in r.path]

    def write_kubeconfig(self, path: Path, token: str = TOKEN) -> Path:
        path.write_text(
            "apiVersion: v1\nkind: Config\ncurrent-context: proxy\n"
            f"clusters:\n- name: proxy\n  cluster: {{server: '{self.url}'}}\n"
            f"users:\n- name: test\n  user: {{token: {token}}}\n"
            "contexts:\n- name: proxy\n  context: {cluster: proxy, user: test}\n")
        return path

    # -- the proxy

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        watch = request.query.get("watch") in ("1", "true")
        self.requests.append(Recorded(request.method, request.path, dict(request.query), time.monotonic()))
        fault = next((f for f in self.faults if f.matches(request, watch)), None)
        if fault is not None:
            fault.hits += 1
            if fault.delay:
                await asyncio.sleep(fault.delay)
            if fault.reset:
                return self._abort(request)
            if fault.status is not None:
                body = fault.body if isinstance(fault.body, bytes | None) else json.dumps(fault.body).encode()
                return web.Response(status=fault.status, body=body or b"",
                                    headers={"Content-Type": "application/json", **fault.headers})
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() in FORWARDED_REQUEST_HEADERS}
        data = await request.read() if request.can_read_body else None
        try:
            upstream = await self._session.request(request.method, URL(self.upstream + request.raw_path, encoded=True),
                                                   headers=headers, data=data, ssl=False)
        except (aiohttp.ClientError, OSError):
            return self._abort(request)
        rewrite = fault.rewrite if fault is not None else None
        response_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in DROPPED_RESPONSE_HEADERS}
        try:
            if not (watch and upstream.status == 200):
                body = await upstream.read()
                if rewrite is not None and body:
                    body = json.dumps(rewrite(json.loads(body))).encode()
                return web.Response(status=upstream.status, body=body, headers=response_headers)
            return await self._stream(request, upstream, response_headers, fault)
        finally:
            upstream.close()

    async def _stream(self, request: web.Request, upstream: aiohttp.ClientResponse, headers: Mapping[str, str],
                      fault: Fault | None) -> web.StreamResponse:
        response = web.StreamResponse(status=upstream.status, headers=headers)
        await response.prepare(request)
        transport = request.transport
        assert transport is not None
        self._streams.add(transport)  # type: ignore[arg-type]
        lines = 0
        try:
            while line := await upstream.content.readline():
                if fault is not None and fault.rewrite is not None and line.strip():
                    line = json.dumps(fault.rewrite(json.loads(line))).encode() + b"\n"
                await response.write(line)
                lines += 1
                if fault is not None and fault.drop_after_lines is not None and lines >= fault.drop_after_lines:
                    transport.abort()
                    return response
            await response.write_eof()
        except (aiohttp.ClientError, OSError):
            transport.abort()  # the API server or the client went away: so does the other side
        finally:
            self._streams.discard(transport)  # type: ignore[arg-type]
        return response

    @staticmethod
    def _abort(request: web.Request) -> web.StreamResponse:
        if request.transport is not None:
            request.transport.abort()
        return web.Response(status=502)  # never sent: aiohttp drops a response to an aborted connection


@pytest.fixture
async def fault_proxy(control_plane):
    """A ``FaultProxy`` in front of the session's control plane, with no fault yet."""
    async with FaultProxy(control_plane.url) as proxy:
        yield proxy


@pytest.fixture
async def proxied_client(fault_proxy, tmp_path):
    """An ``ApiClient`` whose requests go through ``fault_proxy``."""
    async with ApiClient(load_kubeconfig(fault_proxy.write_kubeconfig(tmp_path / "kubeconfig"))) as client:
        yield client
