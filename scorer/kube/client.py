"""A small asyncio client for the Kubernetes REST API: aiohttp, the token bucket, bounded requests.

``ApiClient.request`` sends one request to the API server of a
``ClusterAccess`` (its TLS settings and bearer token, re-read when its file
rotates) after taking a token from the qps/burst bucket, and returns the
status, headers and body. Transport failures (refused, reset, TLS, timeout)
are an ``ApiUnavailable`` naming the server; HTTP statuses are the caller's
to interpret (``ApiResponse.reason()`` gives the API's own message).

``ApiClient.stream`` is the same for a response read as it arrives, line by
line (a watch): no total timeout, only one between reads, which a watch
sets a little above its ``timeoutSeconds``.

**Connections.** HTTP/1.1 takes a connection per request in flight, and each
new one costs a TLS handshake on both sides (about a millisecond of CPU each
here; kube-scheduler's HTTP/2 multiplexes up to 250 streams on one). The writes
(a binding and an Event per pod: the requests scorer sends most, and in bursts;
status patches, deletions) go through ``scorer.kube.http1``'s lean client, a
third of aiohttp's CPU per request, and share at most ``REQUEST_CONNECTIONS``
(64) kept-alive connections, waiting for one beyond that. More bindings under
way at once bind faster (likely because etcd commits writes under way at once
together): at 500 nodes on 2 cores, 3,000 pods bound first to last at
1,313-1,515 pods/s with 16 connections and 1,500-1,814 with 64 (six interleaved
rounds each; 128 did not do better), for the same CPU per pod. The rest (lists,
watches, PUTs) goes through one aiohttp session, where a reflector's watch
reuses the connection its list was answered on.

**Fencing.** A client given a ``fence`` (the service gives the leader's
elector's ``is_leader`` to the client of bindings, deletions and status
writes) asks it right before each write (any verb but GET and HEAD) is sent,
after the token bucket: when it answers False the write is not sent and
``FencedWrite`` (an ``ApiUnavailable``) is raised. A process that wakes up
after its lease's renew deadline passed (paused, starved) therefore sends
nothing. A write already on the wire when the deadline passes cannot be
recalled; the API's own preconditions (the pod's UID, resourceVersions) stay
the last line.

**Metrics.** A client given ``RestClientMetrics`` counts what client-go
counts, with its names, labels and buckets, so kube-scheduler's dashboards
read scorer's API traffic: ``rest_client_requests_total{code,method,host}``
for every request sent (``code`` "<error>" when no answer came), and
``rest_client_request_duration_seconds{verb,url}`` for every ``request``
(from before the token bucket to the end of the body, as client-go times
it; a watch, ``stream``, is counted but not timed, as in client-go). ``url``
is client-go's template of the request: the server and the path with the
namespace and the object's name replaced (``.../namespaces/%7Bnamespace%7D/
pods/%7Bname%7D/binding``) and every query value by ``%7Bvalue%7D``: a bounded set.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import urllib.parse
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, cast

import aiohttp
import aiohttp.http_exceptions
import attrs
import orjson
from prometheus_client import CollectorRegistry, Counter

from scorer.errors import ScorerError
from scorer.kube.config import ClusterAccess
from scorer.kube.early import EarlyAnswer, EarlyListError, EarlyLists
from scorer.kube.http1 import GateClosed, Http1Pool, TransportError
from scorer.kube.ratelimit import TokenBucket
from scorer.logsummary import RepeatLog
from scorer.metrics import LoopHistogram, exponential_buckets, labelled_child

log = logging.getLogger("scorer.kube.client")

# kube-scheduler's clientConnection defaults.
DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
DEFAULT_TIMEOUT = 30.0
# A Kubernetes object can be about 1.5 MB; aiohttp's default buffer fails lines over 512 KiB.
READ_BUFSIZE = 2**21
EARLY_SLICE = 2**16  # bytes of an early answer handed out at a time (EarlyApiStream)
# The most connections the writes use at once (module docstring's Connections).
REQUEST_CONNECTIONS = 64


# client-go's rest_client_request_duration_seconds buckets.
REQUEST_DURATION_BUCKETS = exponential_buckets(0.001, 2, 10)
NO_ANSWER = "<error>"  # client-go's code label of a request that got no response
# The parts of client-go's URL template (finalURLTemplate), escaped as Go's url.String() writes them.
_NAMESPACE, _NAME, _VALUE = "%7Bnamespace%7D", "%7Bname%7D", "%7Bvalue%7D"
_NAMED_SUBRESOURCES = frozenset({"finalize", "status"})  # /$RESOURCE/$NAME/status, not /namespaces/$NS/$RESOURCE


class ApiUnavailable(ScorerError):
    """The API server could not be reached or did not answer in time."""


class FencedWrite(ApiUnavailable):
    """A write not sent: the client's fence said this process may not write (its lease ran out)."""


WRITE_FREE_METHODS = frozenset({"GET", "HEAD"})  # what a fenced client still sends
# The writes sent through the lean client (``Http1Pool``) when they have no query: the per-pod ones
# (bindings, Events, status patches, preemption's deletions) and the volume updates. There the fence is
# asked again right before the request is written, once a connection is ready: a process paused after
# the first check (by SIGSTOP, say, until its lease is gone) sends nothing when it wakes. A PUT (the
# lease's renewals) goes through aiohttp.
LEAN_METHODS = frozenset({"POST", "PATCH", "DELETE"})


@attrs.frozen(slots=True)
class ApiResponse:
    status: int
    body: bytes
    headers: Mapping[str, str] = attrs.field(factory=dict)

    def json(self) -> Any:
        return orjson.loads(self.body) if self.body else None

    def reason(self) -> str:
        """The message of the API's ``Status`` object, else the start of the body."""
        try:
            data = self.json()
        except orjson.JSONDecodeError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("message"), str):
            return str(data["message"])
        return self.body[:200].decode("utf-8", "replace")


# What a failed transport raises in aiohttp (LineTooLong, a line over 2 * READ_BUFSIZE, is an HttpProcessingError).
_TRANSPORT_ERRORS = (TimeoutError, aiohttp.ClientError, aiohttp.http_exceptions.HttpProcessingError, OSError)


class RestClientMetrics:
    """client-go's ``rest_client_*`` request families in ``collector_registry`` (one per app, shared by
    its clients); labelled children are kept by label values, so a request pays two dict lookups. The
    duration is a ``LoopHistogram``: requests are made and timed on the event loop only."""

    def __init__(self, collector_registry: CollectorRegistry) -> None:
        self.requests = Counter("rest_client_requests",
                                "Number of HTTP requests, partitioned by status code, method, and host.",
                                ["code", "method", "host"], registry=collector_registry)
        self.duration = LoopHistogram("rest_client_request_duration_seconds",
                                      "Request latency in seconds. Broken down by verb and URL.",
                                      ["verb", "url"], buckets=REQUEST_DURATION_BUCKETS, registry=collector_registry)
        self._requests: dict[tuple[str, ...], Counter] = {}

    def count(self, code: str, method: str, host: str) -> None:
        labelled_child(self._requests, self.requests, (code, method, host)).inc()

    def observe(self, verb: str, url: str, seconds: float) -> None:
        self.duration.labels(verb, url).observe(seconds)


def url_template(path: str, params: Mapping[str, str] | None = None) -> str:
    """client-go's ``finalURLTemplate`` of a request path and its query parameters: after ``/api/v1``
    or ``/apis/GROUP/VERSION``, the namespace and the object's name replaced by ``{namespace}`` and
    ``{name}``, every query value by ``{value}`` (keys sorted), braces escaped; a path outside
    ``/api`` and ``/apis`` is ``/{prefix}``."""
    segments = path.split("/")
    if len(segments) < 2 or segments[1] not in ("api", "apis"):
        return "/%7Bprefix%7D"
    index = 3 if segments[1] == "api" else 4  # the first segment after the group and version
    tail = len(segments) - index
    if tail == 2:  # $RESOURCE/$NAME
        segments[index + 1] = _NAME
    elif tail == 3:  # $RESOURCE/$NAME/status, else namespaces/$NAMESPACE/$RESOURCE
        segments[index + 1] = _NAME if segments[index + 2] in _NAMED_SUBRESOURCES else _NAMESPACE
    elif tail == 4:  # namespaces/$NAMESPACE/$RESOURCE/$NAME
        segments[index + 1] = _NAMESPACE
        if segments[index + 3] not in _NAMED_SUBRESOURCES:
            segments[index + 3] = _NAME
    elif tail == 5:  # namespaces/$NAMESPACE/$RESOURCE/$NAME/$SUBRESOURCE
        segments[index + 1] = _NAMESPACE
        segments[index + 3] = _NAME
    template = "/".join(segments)
    if params:
        template += "?" + "&".join(f"{urllib.parse.quote_plus(key)}={_VALUE}" for key in sorted(params))
    return template


class ApiStream:
    """A response being received (``ApiClient.stream``): the status and headers, then the body.

    ``readline()`` returns the next line (with its newline; ``b""`` at the end
    of the body); ``readchunk()`` what has arrived of the body (``b""`` at its
    end); ``read()`` the rest of the body. A connection that breaks or
    stays silent past the read timeout raises ``ApiUnavailable``.

    ``coalesce`` (seconds; a watch's): once ``readline`` has returned a line, the
    connection's socket is not read again for that long. Lines already received
    are still returned at once; what arrives meanwhile waits in the socket and is
    read in one go, one wake-up of the event loop and one TLS read for all of it.
    A line after a quiet spell is read at once, so the wait is only added while
    lines keep coming, and then at most ``coalesce`` per line. Over TLS the TLS
    transport is paused and its read buffer limits set to 0 for the wait, so its
    TLS layer stops reading the socket too (pausing it alone only stops handing
    on what it decrypted); Python's TLS layer and uvloop's behave alike here
    (both tested: ``tests/test_kube_client_connections.py``).
    """

    def __init__(self, response: aiohttp.ClientResponse, what: str, coalesce: float = 0.0) -> None:
        self.status = response.status
        self.headers: Mapping[str, str] = response.headers
        self._response = response
        self._what = what
        self.coalesce = coalesce
        # (the transport paused, its TLS read limits to restore, its resume)
        self._pause: tuple[asyncio.ReadTransport, tuple[int, int] | None, asyncio.TimerHandle] | None = None

    async def readline(self) -> bytes:
        try:
            line = await self._response.content.readline()
        except _TRANSPORT_ERRORS as error:
            raise _unavailable(self._what, error) from None
        if line and self.coalesce > 0 and self._pause is None:
            self._hold()
        return line

    def _hold(self) -> None:
        """Stop reading the socket for ``coalesce`` seconds (unless it is not being read now: closing, or
        paused by the flow control of TLS or aiohttp)."""
        connection = self._response.connection
        transport = _pausable(connection.transport) if connection is not None else None
        if transport is None or transport.is_closing() or not transport.is_reading():
            return
        transport.pause_reading()
        limits = None
        if transport.get_extra_info("ssl_object") is not None:  # (no room for what is not decrypted yet)
            tls: Any = transport
            limits = tls.get_read_buffer_limits()
            tls.set_read_buffer_limits(high=0, low=0)
        self._pause = transport, limits, asyncio.get_running_loop().call_later(self.coalesce, self.release_hold)

    def release_hold(self) -> None:
        """Read the socket again (the ``coalesce`` wait is over, or the stream is left)."""
        held, self._pause = self._pause, None
        if held is not None:
            transport, limits, timer = held
            timer.cancel()
            if transport.is_closing():
                return
            if limits is not None:
                low, high = limits
                cast(Any, transport).set_read_buffer_limits(high=high, low=low)
            if not transport.is_reading():
                transport.resume_reading()

    async def readchunk(self) -> bytes:
        try:
            return await self._response.content.readany()
        except _TRANSPORT_ERRORS as error:
            raise _unavailable(self._what, error) from None

    async def read(self) -> bytes:
        try:
            return await self._response.read()
        except _TRANSPORT_ERRORS as error:
            raise _unavailable(self._what, error) from None

    def response(self, body: bytes) -> ApiResponse:
        """The status, ``body`` (from ``read()``) and headers as an ``ApiResponse`` (for its ``reason()``)."""
        return ApiResponse(self.status, body, dict(self.headers))


def _pausable(transport: asyncio.BaseTransport | None) -> asyncio.ReadTransport | None:
    """``transport`` when its reading can be paused, else None. Recognised by its methods: uvloop's
    transports do not derive from asyncio's classes."""
    pausable = all(callable(getattr(transport, method, None)) for method in ("pause_reading", "resume_reading",
                                                                             "is_reading", "is_closing"))
    return cast(asyncio.ReadTransport, transport) if pausable else None


class EarlyApiStream(ApiStream):
    """An answer asked for before the client existed (``scorer.kube.early``), read as an ``ApiStream``.

    Much of the body is often in when it is first read (it arrived while the modules loaded): it is
    handed out ``EARLY_SLICE`` bytes at a time, the event loop free between two (the other reflectors'
    requests go on while a 5 MB list is decoded), as a body arriving from the network would be."""

    def __init__(self, answer: EarlyAnswer, what: str) -> None:  # (no aiohttp response behind it)
        self.status = answer.status
        self.headers = answer.headers
        self._answer = answer
        self._what = what
        self._lines = b""
        self._held = memoryview(b"")  # what arrived and is not handed out yet

    @staticmethod
    async def wait_head(answer: EarlyAnswer) -> bool:
        """True once ``answer``'s status and headers are in; False when its request failed before."""
        while True:
            head, version = answer.head()
            if head is not None:
                return head
            await _early_change(answer, version)

    async def readchunk(self) -> bytes:
        if self._held:
            await asyncio.sleep(0)
            piece, self._held = self._held[:EARLY_SLICE], self._held[EARLY_SLICE:]
            return bytes(piece)
        while True:
            try:
                chunk, version = self._answer.chunks()
            except EarlyListError as error:
                raise ApiUnavailable(f"{self._what}: {error}") from None
            if chunk is not None:
                if len(chunk) <= EARLY_SLICE:
                    return chunk
                self._held = memoryview(chunk)[EARLY_SLICE:]
                return chunk[:EARLY_SLICE]
            await _early_change(self._answer, version)

    async def readline(self) -> bytes:
        while b"\n" not in self._lines and (chunk := await self.readchunk()):
            self._lines += chunk
        line, newline, self._lines = self._lines.partition(b"\n")
        return line + newline

    async def read(self) -> bytes:
        body = [self._lines]
        while chunk := await self.readchunk():
            body.append(chunk)
        self._lines = b""
        return b"".join(body)


async def _early_change(answer: EarlyAnswer, version: int) -> None:
    """Wait until ``answer``'s thread publishes after ``version`` (at once if it has)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()

    def wake() -> None:  # (on the thread)
        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits any more
            loop.call_soon_threadsafe(_set_done, future)

    if answer.wake_after(version, wake):
        await future


def _set_done(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _unavailable(what: str, error: BaseException) -> ApiUnavailable:
    return ApiUnavailable(f"{what}: {type(error).__name__}: {error or 'timed out'}")


class ApiClient:
    """Requests to one API server; ``close()`` (or ``async with``) ends its connections."""

    def __init__(self, access: ClusterAccess, *, qps: float = DEFAULT_QPS, burst: int = DEFAULT_BURST,
                 timeout: float = DEFAULT_TIMEOUT, user_agent: str = "scorer",
                 fence: Callable[[], bool] | None = None, metrics: RestClientMetrics | None = None,
                 early: EarlyLists | None = None) -> None:
        self.access = access
        self.early = early  # answers asked for before this client existed, taken by stream()
        self.metrics = metrics
        self._host = urllib.parse.urlsplit(access.server).netloc  # the host label
        self.fence = fence  # asked before each write; False: not sent (FencedWrite)
        self.fenced = 0  # writes not sent because of the fence
        self.bucket = TokenBucket(qps, burst)
        self.timeout = aiohttp.ClientTimeout(total=timeout)
        self.user_agent = user_agent
        self.requests = 0  # sent, for tests and metrics
        self._ssl = access.ssl_context()
        self._session: aiohttp.ClientSession | None = None
        self._writes: Http1Pool | None = None
        self._writes_loop: asyncio.AbstractEventLoop | None = None
        self._repeats = RepeatLog(log)

    def _write_pool(self) -> Http1Pool:
        """The lean client of the writes (``LEAN_METHODS``), made on first use in the running event loop."""
        loop = asyncio.get_running_loop()
        if self._writes is None or self._writes_loop is not loop:
            self._writes, self._writes_loop = Http1Pool(self.access.server, self._ssl,
                                                        connections=REQUEST_CONNECTIONS), loop
        return self._writes

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(read_bufsize=READ_BUFSIZE, timeout=self.timeout,
                                                  headers={"User-Agent": self.user_agent})
        return self._session

    async def request(self, method: str, path: str, *, body: Any = None, params: Mapping[str, str] | None = None,
                      content_type: str = "application/json") -> ApiResponse:
        """One request, its answer whole. A GET the client's ``early`` answers hold (a discovery document) is
        read from there instead of asking again, through ``stream`` (which takes it and counts it)."""
        start = time.perf_counter()
        if self.early is not None and method == "GET" and body is None and path in self.early.answers:
            async with self.stream(method, path, params=params, read_timeout=self.timeout.total, timed=True) as held:
                return ApiResponse(held.status, await held.read(), dict(held.headers))
        await self.bucket.acquire()
        fence = self.fence if method not in WRITE_FREE_METHODS else None
        if fence is not None and not fence():
            raise self._fenced(method, path)
        headers = {**self.access.headers(), "Accept": "application/json", "User-Agent": self.user_agent}
        data = None
        if body is not None:
            data = orjson.dumps(body)
            headers["Content-Type"] = content_type
        code: str | None = NO_ANSWER  # None: not sent (the fence's second answer was no)
        try:
            if method in LEAN_METHODS and not params:  # (the fence asked again once the connection is ready)
                try:
                    status, answer_headers, answer = await self._write_pool().request(
                        method, path, headers, data, self.timeout.total or DEFAULT_TIMEOUT, gate=fence)
                except GateClosed:
                    code = None
                    raise self._fenced(method, path) from None
                code = str(status)
                return ApiResponse(status, answer, answer_headers)
            async with self._open().request(method, self.access.server + path, data=data, params=params,
                                            headers=headers, ssl=self._ssl if self._ssl is not None else True
                                            ) as response:
                code = str(response.status)
                return ApiResponse(response.status, await response.read(), dict(response.headers))
        except (*_TRANSPORT_ERRORS, TransportError) as error:
            raise _unavailable(f"{method} {self.access.server}{path}", error) from None
        finally:
            if code is not None:  # (sent: counted and timed)
                self.requests += 1
                if self.metrics is not None:
                    self.metrics.count(code, method, self._host)
                    self.metrics.observe(method, self.access.server + url_template(path, params),
                                         time.perf_counter() - start)

    def _fenced(self, method: str, path: str) -> FencedWrite:
        """The ``FencedWrite`` of a write not sent, counted and logged."""
        self.fenced += 1
        self._repeats.warning("fenced writes", "not sending %s %s: this process does not hold the leader "
                              "lease (its renew deadline passed)", method, path)
        return FencedWrite(f"{method} {path}: not sent: this process does not hold the leader lease")

    async def prepare_writes(self) -> None:
        """Open a connection for the writes (bindings, Events) ahead of the first (``Http1Pool.prepare``)."""
        try:
            pool = self._write_pool()
        except ValueError:  # (not an http(s) server: the first write says so)
            return
        await pool.prepare(self.timeout.total or DEFAULT_TIMEOUT)

    @contextlib.asynccontextmanager
    async def stream(self, method: str, path: str, *, params: Mapping[str, str] | None = None,
                     read_timeout: float | None = None, timed: bool = False, coalesce: float = 0.0
                     ) -> AsyncIterator[ApiStream]:
        """``async with client.stream("GET", path, params=...) as stream:`` the response as it arrives.

        Takes a bucket token like ``request``. The connection must be made
        within the client's timeout; then there is no total timeout, only
        ``read_timeout`` seconds at most of silence (waiting for the headers,
        then between two reads; None: no limit). ``timed``: the request's
        duration, until the ``async with`` ends, goes to the client's metrics
        (a LIST read as it arrives; not a watch, whose duration is its timeout). ``coalesce``: ``ApiStream``'s,
        for a watch.
        Transport failures, on connecting or while reading, are ``ApiUnavailable``.
        The answer is asked for uncompressed (a list is read as the server writes it, and a scheduler sits
        beside its API server: compressing 20 MB of nodes costs the server more than sending them).

        The answer the client's ``early`` lists hold for this very request is read instead of asking again.
        """
        start = time.perf_counter()
        what = f"{method} {self.access.server}{path}"
        answer = self.early.take(path, params) if self.early is not None and method == "GET" else None
        if answer is not None and await EarlyApiStream.wait_head(answer):
            if self.metrics is not None:
                self.metrics.count(str(answer.status), method, self._host)
            try:
                yield EarlyApiStream(answer, what)
            finally:
                answer.discard()
                if timed and self.metrics is not None:
                    self.metrics.observe(method, self.access.server + url_template(path, params),
                                         time.perf_counter() - answer.started)
            return
        await self.bucket.acquire()
        headers = {**self.access.headers(), "Accept": "application/json", "Accept-Encoding": "identity"}
        timeout = aiohttp.ClientTimeout(total=None, connect=self.timeout.total, sock_read=read_timeout)
        self.requests += 1
        try:
            response = await self._open().request(method, self.access.server + path, params=params,
                                                  headers=headers, timeout=timeout,
                                                  ssl=self._ssl if self._ssl is not None else True)
        except _TRANSPORT_ERRORS as error:
            if self.metrics is not None:
                self.metrics.count(NO_ANSWER, method, self._host)
            raise _unavailable(what, error) from None
        if self.metrics is not None:
            self.metrics.count(str(response.status), method, self._host)
        stream = ApiStream(response, what, coalesce)
        try:
            yield stream
        finally:
            stream.release_hold()
            if timed and self.metrics is not None:
                self.metrics.observe(method, self.access.server + url_template(path, params),
                                     time.perf_counter() - start)
            if response.content.at_eof():
                response.release()  # the connection can serve another request
            else:
                response.close()  # left mid-body (a watch given up): the connection goes

    async def close(self) -> None:
        if self.early is not None:
            self.early.discard()
        if self._writes is not None:
            await self._writes.close()
        if self._session is not None:
            await self._session.close()

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()
