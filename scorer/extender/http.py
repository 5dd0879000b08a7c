"""The extender's HTTP endpoints in the service's aiohttp application, and their metrics.

``POST <prefix>/filter`` and ``POST <prefix>/prioritize`` (prefix default
``/scheduler``, so kube-scheduler's ``urlPrefix`` is
``http://<scorer>:10259/scheduler`` with ``filterVerb: filter`` and
``prioritizeVerb: prioritize``). No ``bind`` or ``preempt`` verb: kube-scheduler
keeps binding and preempting, so two schedulers never race for a node.

Answers:

* 200 with the result (``ExtenderFilterResult``, ``HostPriorityList``);
* 400 with ``{"Error": ...}`` for a request that cannot be read (not JSON, no
  Pod, a Pod that does not decode, bad NodeNames): kube-scheduler logs it;
* a plugin that fails: filter answers 200 with ``Error`` set (kube-scheduler's
  scheduling error for the pod), prioritize 500 with ``{"Error": ...}``
  (kube-scheduler ignores a failed prioritize).

Metrics (the app's one registry): ``scorer_extender_requests_total{verb,result}``
(result ``success``, ``error``, ``bad_request``),
``scorer_extender_request_duration_seconds{verb}`` (reading the body to the
answer), ``scorer_extender_unknown_nodes_total`` (node names the cache did not
know). With ``--enable-debug-endpoints``, ``GET /debug/extender`` lists the last
decisions (``Extender.decisions``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, Histogram

from scorer.extender.extender import Extender, PluginFailure
from scorer.extender.wire import BadRequest, PodCache, PriorityWriter, filter_error, filter_result, read_args
from scorer.metrics import exponential_buckets

log = logging.getLogger("scorer.extender")

FILTER = "filter"
PRIORITIZE = "prioritize"
VERBS = (FILTER, PRIORITIZE)
RESULTS = ("success", "error", "bad_request")
DEFAULT_PREFIX = "/scheduler"
#: Request bodies up to this size: the Nodes form of 15,000 nodes at ~4 KiB each is ~60 MiB.
MAX_BODY = 128 * 1024 * 1024
BUCKETS = exponential_buckets(0.0001, 2, 16)  # 0.1 ms .. 3.3 s (kube-scheduler's default timeout is 5 s)


class ExtenderMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter("scorer_extender_requests",
                                "Extender requests by verb and result: success; error, a plugin failed (or a bug); "
                                "bad_request, the request could not be read (answered 400).",
                                ["verb", "result"], registry=registry)
        self.duration = Histogram("scorer_extender_request_duration_seconds",
                                  "Extender request latency by verb, from reading the body to the answer.",
                                  ["verb"], buckets=BUCKETS, registry=registry)
        self.unknown_nodes = Counter("scorer_extender_unknown_nodes",
                                     "Node names in extender requests that scorer's cache did not know (yet): "
                                     "they pass Filter and get the middle score.", registry=registry)
        self._children = {(verb, result): self.requests.labels(verb, result) for verb in VERBS for result in RESULTS}
        self._durations = {verb: self.duration.labels(verb) for verb in VERBS}

    def observe(self, verb: str, result: str, seconds: float) -> None:
        self._children[verb, result].inc()
        self._durations[verb].observe(seconds)


def _json(value: Any, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(value), status=status, content_type="application/json")


def add_routes(app: web.Application, extender: Extender, registry: CollectorRegistry, prefix: str = DEFAULT_PREFIX,
               *, debug: bool = False) -> ExtenderMetrics:
    """Serve the extender verbs under ``prefix`` (and ``/debug/extender`` with ``debug``)."""
    metrics = ExtenderMetrics(registry)
    extender.on_unknown = metrics.unknown_nodes.inc
    pods, priorities = PodCache(), PriorityWriter()  # (filter then prioritize: the same pod)
    prefix = prefix.rstrip("/")

    def endpoint(verb: str, handle: Callable[[bytes], web.Response]) -> Callable[[web.Request],
                                                                                 Awaitable[web.Response]]:
        async def serve(request: web.Request) -> web.Response:
            start = time.perf_counter()
            result = "success"
            try:
                response = handle(await request.read())
            except BadRequest as exc:
                result = "bad_request"
                response = _json({"Error": str(exc)}, 400)
            except web.HTTPRequestEntityTooLarge:
                result = "bad_request"
                response = _json({"Error": f"the request body is larger than {MAX_BODY} bytes"}, 413)
            except PluginFailure as exc:
                result = "error"
                response = _json(filter_error(str(exc))) if verb == FILTER else _json({"Error": str(exc)}, 500)
            except Exception as exc:  # a bug: kube-scheduler gets the error, the process keeps serving
                log.exception("extender %s failed", verb)
                result = "error"
                message = f"internal error: {type(exc).__name__}: {exc}"
                response = _json(filter_error(message)) if verb == FILTER else _json({"Error": message}, 500)
            metrics.observe(verb, result, time.perf_counter() - start)
            return response

        return serve

    def do_filter(body: bytes) -> web.Response:
        args = read_args(body, pods)
        passed, failed, unresolvable = extender.filter(args)
        return _json(filter_result(args, passed, failed, unresolvable))

    def do_prioritize(body: bytes) -> web.Response:
        args = read_args(body, pods)
        return web.Response(body=priorities.write(args.node_names, extender.prioritize(args)),
                            content_type="application/json")

    app.router.add_post(f"{prefix}/{FILTER}", endpoint(FILTER, do_filter))
    app.router.add_post(f"{prefix}/{PRIORITIZE}", endpoint(PRIORITIZE, do_prioritize))
    if debug:
        async def decisions(request: web.Request) -> web.Response:
            return web.Response(body=orjson.dumps({"profile": extender.profile,
                                                   "decisions": list(extender.decisions or ())},
                                                  option=orjson.OPT_INDENT_2), content_type="application/json")

        app.router.add_get("/debug/extender", decisions)
    return metrics
