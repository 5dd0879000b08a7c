"""A stand-in HTTP extender that does no work: the extender protocol's own cost, measured beside scorer's.

``python -m scorer.bench.standin PORT`` serves, on 127.0.0.1, what the bench
reads from scorer as kube-scheduler's extender: ``POST /scheduler/filter``
(every node passes), ``POST /scheduler/prioritize`` (every node scores 0),
``GET /readyz`` and ``GET /metrics`` (scorer's extender metrics). It parses each
request's JSON and writes a real answer, but decodes no Pod and runs no plugin:
a ``kube-scheduler+stand-in`` point is what kube-scheduler pays for two HTTP
round trips per pod to a second process on the same machine, the ceiling of any
extender there. It runs on the event loop ``scorer run`` runs on by default
(``scorer.service.eventloop``: uvloop where it is installed), so the two are
compared on the same one.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable, Sequence

import orjson
from aiohttp import web

from scorer import exposition
from scorer.extender.http import DEFAULT_PREFIX, FILTER, PRIORITIZE, ExtenderMetrics
from scorer.metrics import SchedulerMetrics
from scorer.service import eventloop

Handler = Callable[[web.Request], Awaitable[web.Response]]


def node_names(body: bytes) -> list[str]:
    """The request's ``NodeNames`` (kube-scheduler writes the Go field names), [] when absent or not JSON."""
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        return []
    names = obj.get("NodeNames") if isinstance(obj, dict) else None
    return names if isinstance(names, list) else []


def answer(verb: str, names: list[str]) -> bytes:
    if verb == FILTER:
        return orjson.dumps({"Nodes": None, "NodeNames": names, "FailedNodes": {},
                             "FailedAndUnresolvableNodes": {}, "Error": ""})
    return orjson.dumps([{"Host": name, "Score": 0} for name in names])


def app() -> web.Application:
    # (SchedulerMetrics is the one place a collector registry is made; only its extender families count)
    collector_registry = SchedulerMetrics().collector_registry
    metrics = ExtenderMetrics(collector_registry)

    def verb_handler(verb: str) -> Handler:
        async def serve(request: web.Request) -> web.Response:
            start = time.perf_counter()
            body = answer(verb, node_names(await request.read()))
            metrics.observe(verb, "success", time.perf_counter() - start)
            return web.Response(body=body, content_type="application/json")
        return serve

    async def readyz(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def metrics_text(request: web.Request) -> web.Response:
        body = exposition.render(collector_registry)
        return web.Response(body=body, headers={"Content-Type": exposition.CONTENT_TYPE})

    application = web.Application(client_max_size=64 << 20)
    for verb in (FILTER, PRIORITIZE):
        application.router.add_post(f"{DEFAULT_PREFIX}/{verb}", verb_handler(verb))
    application.router.add_get("/readyz", readyz)
    application.router.add_get("/metrics", metrics_text)
    return application


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or not args[0].isdigit() or not 0 < int(args[0]) < 65536:
        print("usage: python -m scorer.bench.standin PORT (1-65535)", file=sys.stderr)
        return 2
    web.run_app(app(), host="127.0.0.1", port=int(args[0]), print=None, handle_signals=True,
                loop=eventloop.choose()())
    return 0


if __name__ == "__main__":
    sys.exit(main())
