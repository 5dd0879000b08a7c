"""The extender's HTTP endpoints in the service's aiohttp application, and their metrics.

``ExtenderVerbs`` answers a verb from a request body already read; the aiohttp
routes here call it, and so does the lean front (``scorer.extender.front``),
which answers kube-scheduler's requests on the service's listener before
aiohttp sees them: the answers, limits and metrics below hold for both.

``POST <prefix>/filter`` and ``POST <prefix>/prioritize`` (prefix default
``/scheduler``, so kube-scheduler's ``urlPrefix`` is
``http://<scorer>:10259/scheduler`` with ``filterVerb: filter`` and
``prioritizeVerb: prioritize``). No ``bind`` or ``preempt`` verb: kube-scheduler
keeps binding and preempting, so two schedulers never race for a node.

Answers:

* 200 with the result (``ExtenderFilterResult``, ``HostPriorityList``);
* 400 with ``{"Error": ...}`` for a request that cannot be read (not JSON, no
  Pod, a Pod that does not decode, a node name that is not one; the message
  names the field: ``NodeNames[3]: ...``): kube-scheduler logs it;
* 413 for a body larger than ``MAX_BODY``: refused from its Content-Length
  before any of it is read (a chunked body without one is read up to the
  limit); 408 for a body that has not fully arrived ``body_timeout`` seconds
  after the request's head (the service's ``http_timeout``, 15 s); 400 for one
  cut off; 503 for the request whose bytes take the bodies being read at once,
  all requests together, over ``MAX_BODIES_READING`` (256 MiB: the memory many
  large requests at once may take stays bounded). These close the connection;
* a plugin that fails: filter answers 200 with ``Error`` set (kube-scheduler's
  scheduling error for the pod), prioritize 500 with ``{"Error": ...}``
  (kube-scheduler ignores a failed prioritize).

Metrics (the app's one collector registry): ``scorer_extender_requests_total{verb,result}``
(result ``success``, ``error``, ``bad_request``: a body refused counts as one),
``scorer_extender_request_duration_seconds{verb}`` (reading the body to the
answer), ``scorer_extender_unknown_nodes_total`` (node names the cache did not
know), ``scorer_extender_pods_by_json_total`` (requests whose Pod was the
watch's by its JSON, ``PodCache.by_bytes``),
``scorer_extender_scored_ahead_total{result}`` (prioritize answers computed
once filter's answer was written, ``ScoreAhead``: ``used`` by the prioritize that
followed, or ``unused``). With ``--enable-debug-endpoints``, ``GET /debug/extender``
lists the last decisions (``Extender.decisions``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram

from scorer.extender.extender import Extender, PluginFailure, ScoreAhead
from scorer.extender.wire import BadRequest, ExtenderArgs, NameList, PodCache, filter_error, filter_result, read_args
from scorer.framework import CycleState
from scorer.metrics import exponential_buckets
from scorer.model import Pod

log = logging.getLogger("scorer.extender")

FILTER = "filter"
PRIORITIZE = "prioritize"
VERBS = (FILTER, PRIORITIZE)
RESULTS = ("success", "error", "bad_request")
AHEAD_RESULTS = ("used", "unused")
DEFAULT_PREFIX = "/scheduler"
#: Request bodies up to this size: the Nodes form of 15,000 nodes at ~4 KiB each is ~60 MiB.
MAX_BODY = 128 * 1024 * 1024
#: The bytes of request bodies read at once, all requests together: past it, the request whose bytes
#: went over is refused (503). kube-scheduler sends one request at a time.
MAX_BODIES_READING = 2 * MAX_BODY
BUCKETS = exponential_buckets(0.0001, 2, 16)  # 0.1 ms .. 3.3 s (kube-scheduler's default timeout is 5 s)


class ExtenderMetrics:
    def __init__(self, collector_registry: CollectorRegistry) -> None:
        self.requests = Counter("scorer_extender_requests",
                                "Extender requests by verb and result: success; error, a plugin failed (or a bug); "
                                "bad_request, the request could not be read (answered 400).",
                                ["verb", "result"], registry=collector_registry)
        self.duration = Histogram("scorer_extender_request_duration_seconds",
                                  "Extender request latency by verb, from reading the body to the answer.",
                                  ["verb"], buckets=BUCKETS, registry=collector_registry)
        self.unknown_nodes = Counter("scorer_extender_unknown_nodes",
                                     "Node names in extender requests that scorer's cache did not know (yet): "
                                     "they pass Filter and get the middle score.", registry=collector_registry)
        self.pods_by_json = Counter("scorer_extender_pods_by_json",
                                    "Extender requests whose Pod was, byte for byte, the JSON the service's watch "
                                    "decoded a pod from: that pod, the request's head not parsed.",
                                    registry=collector_registry)
        self.scored_ahead = Counter("scorer_extender_scored_ahead",
                                    "prioritize answers computed once filter's answer was written, before "
                                    "kube-scheduler asked: used by the prioritize that followed, or unused.",
                                    ["result"], registry=collector_registry)
        self._children = {(verb, result): self.requests.labels(verb, result) for verb in VERBS for result in RESULTS}
        self._durations = {verb: self.duration.labels(verb) for verb in VERBS}
        self._ahead = {result: self.scored_ahead.labels(result) for result in AHEAD_RESULTS}

    def observe(self, verb: str, result: str, seconds: float) -> None:
        self._children[verb, result].inc()
        self._durations[verb].observe(seconds)

    def count_ahead(self, result: str) -> None:
        """One answer scored ahead ``used`` or ``unused`` (``ScoreAhead.counted``)."""
        self._ahead[result].inc()


class _AnswerThen(web.Response):
    """A response that calls ``then`` soon after its last bytes went to the transport: the next request of
    the client is not kept waiting for it."""

    def __init__(self, *, body: bytes, then: Callable[[], None]) -> None:
        super().__init__(body=body, content_type="application/json")
        self._then: Callable[[], None] | None = then

    async def write_eof(self, data: bytes = b"") -> None:
        await super().write_eof(data)
        then, self._then = self._then, None
        if then is not None:
            asyncio.get_running_loop().call_soon(then)


def _json(value: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(value), status=status, content_type="application/json")


class BodyRefused(Exception):
    """A request body not read: too large, too slow, cut off, or too much read at once (``status``: 413,
    408, 400, 503)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status

    @classmethod
    def late(cls, timeout: float) -> BodyRefused:
        return cls(408, f"the request body did not arrive within {timeout:g}s")

    @classmethod
    def busy(cls) -> BodyRefused:
        return cls(503, f"busy: other requests' bodies take the {MAX_BODIES_READING} bytes read at once; try again")


class RequestBodies:
    """Reads request bodies, the bytes read at once across requests counted against ``MAX_BODIES_READING``:
    the aiohttp routes' (``read``) and the lean front's (``reserve``, ``release``) together."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.reading = 0  # bytes of bodies being read, all requests together

    async def read(self, request: web.Request) -> bytes | bytearray:
        """The request's body, within ``timeout`` seconds; ``BodyRefused`` when its Content-Length is over
        ``MAX_BODY`` (nothing is read), when it grows over ``MAX_BODY`` or the bodies read at once over
        ``MAX_BODIES_READING``, when it is late or cut off. A body that has all arrived with the request's
        head (kube-scheduler's, as a rule) is taken at once: nothing to wait for, the same limits."""
        length = request.content_length
        if length is not None and length > MAX_BODY:
            raise BodyRefused(413, f"the request body is larger than {MAX_BODY} bytes (Content-Length {length})")
        if request.content.is_eof() and request.content.exception() is None:
            whole = request.content.read_nowait()
            self._limit(len(whole), self.reading + len(whole))
            return whole
        body = bytearray()  # (one buffer: past glibc's mmap threshold, given back to the system when freed)
        counted = 0
        try:
            async with asyncio.timeout(self.timeout):
                while chunk := await request.content.readany():
                    self.reading += len(chunk)
                    counted += len(chunk)
                    body += chunk
                    self._limit(len(body), self.reading)
        except TimeoutError:
            raise BodyRefused.late(self.timeout) from None
        except (ConnectionError, web.RequestPayloadError) as exc:  # the client went away, a malformed chunk
            raise BodyRefused(400, f"the request body could not be read: {exc}") from None
        finally:
            self.reading -= counted
        return body

    @staticmethod
    def _limit(size: int, reading: int) -> None:
        """``BodyRefused`` when a body of ``size`` bytes is over ``MAX_BODY`` (without a Content-Length: chunked),
        or the bodies being read, ``reading`` bytes with it, over ``MAX_BODIES_READING``."""
        if size > MAX_BODY:
            raise BodyRefused(413, f"the request body is larger than {MAX_BODY} bytes")
        if reading > MAX_BODIES_READING:
            raise BodyRefused.busy()

    def reserve(self, length: int) -> None:
        """Count a body of ``length`` bytes, about to be read whole, among the bodies being read; ``BodyRefused``
        (503) when that would take them over ``MAX_BODIES_READING`` (nothing counted)."""
        if self.reading + length > MAX_BODIES_READING:
            raise BodyRefused.busy()
        self.reading += length

    def release(self, length: int) -> None:
        """A body ``reserve`` counted is read, refused or gone."""
        self.reading -= length


class Answer:
    """An extender answer: its HTTP ``status``, its JSON ``body``, and ``then``, to be called soon after its
    last bytes went to the transport (None: nothing)."""

    __slots__ = ("status", "body", "then")

    def __init__(self, status: int, body: bytes, then: Callable[[], None] | None = None) -> None:
        self.status = status
        self.body = body
        self.then = then


class ExtenderVerbs:
    """The extender's verbs over request bodies already read, as both servers of them call them: the aiohttp
    routes (``add_routes``) and the lean front (``scorer.extender.front``). ``answer`` never raises: a request
    that cannot be read, a plugin that fails, a bug, each has its answer (module docstring); each request is
    counted in ``metrics``."""

    def __init__(self, extender: Extender, metrics: ExtenderMetrics, bodies: RequestBodies,
                 watched_pods: Callable[[str], Pod | None] | None = None,
                 pod_by_json: Callable[[bytes], Pod | None] | None = None) -> None:
        self.extender = extender
        self.metrics = metrics
        self.bodies = bodies
        extender.on_unknown = metrics.unknown_nodes.inc
        # (filter then prioritize: the same pod, the names it passed)
        self.pods, self.names = PodCache(watched_pods, pod_by_json), extender.names
        self.pods.on_by_json = metrics.pods_by_json.inc
        self.ahead = ScoreAhead(metrics.count_ahead)
        self._handlers: dict[str, Callable[[bytes | bytearray], Answer]] = {FILTER: self._filter,
                                                                             PRIORITIZE: self._prioritize}

    def answer(self, verb: str, body: bytes | bytearray, start: float) -> Answer:
        """The answer to ``verb`` (``FILTER`` or ``PRIORITIZE``) with request ``body``; ``start``: when the
        request's reading began (``time.perf_counter``), for its duration metric."""
        result = "success"
        try:
            answer = self._handlers[verb](body)
        except BadRequest as exc:
            result = "bad_request"
            answer = Answer(400, orjson.dumps({"Error": str(exc)}))
        except PluginFailure as exc:
            result = "error"
            answer = self._failed(verb, str(exc))
        except Exception as exc:  # a bug: kube-scheduler gets the error, the process keeps serving
            log.exception("extender %s failed", verb)
            result = "error"
            answer = self._failed(verb, f"internal error: {type(exc).__name__}: {exc}")
        self.metrics.observe(verb, result, time.perf_counter() - start)
        return answer

    def refused(self, verb: str, start: float) -> None:
        """Count a request whose body was refused unread (answered 413, 408, 400 or 503)."""
        self.metrics.observe(verb, "bad_request", time.perf_counter() - start)

    @staticmethod
    def _failed(verb: str, message: str) -> Answer:
        if verb == FILTER:  # (kube-scheduler's scheduling error for the pod)
            return Answer(200, orjson.dumps(filter_error(message)))
        return Answer(500, orjson.dumps({"Error": message}))  # (kube-scheduler ignores a failed prioritize)

    def _filter(self, body: bytes | bytearray) -> Answer:
        extender, ahead = self.extender, self.ahead
        args = read_args(body, self.pods, self.names)
        passed, failed, unresolvable = extender.filter(args)
        answer = orjson.dumps(filter_result(args, passed, failed, unresolvable))
        pod, kept, state = args.pod, extender.last_passed, extender.last_state
        go = ahead.filtered(pod, kept, keeping_decisions=extender.decisions is not None)
        if not go or kept is None or state is None:
            return Answer(200, answer)
        return Answer(200, answer, lambda: self._score_ahead(pod, kept, state))

    def _score_ahead(self, pod: Pod, kept: NameList, state: CycleState) -> None:
        extender, ahead = self.extender, self.ahead
        if not ahead.wanted(pod, kept):  # (prioritize, or another filter, came first)
            return
        args = ExtenderArgs(pod, kept.names, None, kept)
        unknown: list[int] = []  # (counted when the answer is used: the metric counts names in requests)
        counting, extender.on_unknown = extender.on_unknown, unknown.append
        try:
            answer = self.names.write_kept(args, extender.prioritize(args, state))
        except Exception:  # (the prioritize request computes it again and answers what went wrong)
            return
        finally:
            extender.on_unknown = counting
        ahead.store(pod, kept, answer, sum(unknown))

    def _prioritize(self, body: bytes | bytearray) -> Answer:
        args = read_args(body, self.pods, self.names)
        taken = self.ahead.take(args.pod, args.kept)
        if taken is None:
            return Answer(200, self.names.write_kept(args, self.extender.prioritize(args)))
        answer, unknown = taken
        if unknown:
            self.metrics.unknown_nodes.inc(unknown)
        return Answer(200, answer)


def add_routes(app: web.Application, extender: Extender, collector_registry: CollectorRegistry,
               prefix: str = DEFAULT_PREFIX, *, body_timeout: float, debug: bool = False,
               watched_pods: Callable[[str], Pod | None] | None = None,
               pod_by_json: Callable[[bytes], Pod | None] | None = None) -> ExtenderVerbs:
    """Serve the extender verbs under ``prefix`` (and ``/debug/extender`` with ``debug``); a request body
    must arrive within ``body_timeout`` seconds. ``watched_pods``: the pods the service's watch holds, by
    ``namespace/name``, and ``pod_by_json`` by their JSON (``PodCache``: a request's pod is the watch's
    where it can be). Returns the verbs, which the lean front (``scorer.extender.front``) serves too."""
    verbs = ExtenderVerbs(extender, ExtenderMetrics(collector_registry), RequestBodies(body_timeout), watched_pods,
                          pod_by_json)
    prefix = prefix.rstrip("/")

    def endpoint(verb: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def serve(request: web.Request) -> web.Response:
            start = time.perf_counter()
            try:
                body = await verbs.bodies.read(request)
            except BodyRefused as exc:
                verbs.refused(verb, start)
                response = _json({"Error": str(exc)}, exc.status)
                response.force_close()  # (the rest of the body is not read)
                return response
            answer = verbs.answer(verb, body, start)
            if answer.then is not None:
                return _AnswerThen(body=answer.body, then=answer.then)
            return web.Response(body=answer.body, status=answer.status, content_type="application/json")

        return serve

    app.router.add_post(f"{prefix}/{FILTER}", endpoint(FILTER))
    app.router.add_post(f"{prefix}/{PRIORITIZE}", endpoint(PRIORITIZE))
    if debug:
        async def decisions(request: web.Request) -> web.Response:
            return web.Response(body=orjson.dumps({"profile": extender.profile,
                                                   "decisions": list(extender.decisions or ())},
                                                  option=orjson.OPT_INDENT_2), content_type="application/json")

        app.router.add_get("/debug/extender", decisions)
    return verbs
