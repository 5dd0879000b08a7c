"""The service's aiohttp application: the scheduler's long-lived parts and its HTTP endpoints.

``Service`` holds what ``scorer.service.build`` assembled (the ``Assembly``, a
cluster source, an optional leader elector, the API clients) and the state the
parts share (a stop request, the exit status, leading or not, shutting down).
``create_app(service)`` builds the aiohttp application: each part under its own
``web.AppKey`` (``SERVICE_KEY``, ``ASSEMBLY_KEY``, ``SOURCE_KEY``,
``ELECTOR_KEY``, ``SUPERVISOR_KEY``, ``CLIENTS_KEY``, ``FINALIZERS_KEY``,
``EXTENDER_KEY``), the parts' callbacks into the service wired there (a
reflector's ``on_invalid``, the elector's ``on_stopped_leading``), and one
cleanup context per long-lived part, which alone starts its tasks; they start
in this order and stop in the reverse one:

1. ``api-session``: the API clients' HTTP sessions (closed last);
2. ``binder``: on shutdown, after the scheduling loop has written the Events
   and conditions still buffered, the writer's Event series counts;
3. ``reflector:<resource>``, one per reflector of the API source (namespaces,
   nodes, pods; ``cluster-source`` for another source): they feed the event
   handlers, and are restarted with backoff if they crash;
4. ``metric-sources``: the background refreshers of the metric-driven plugins
   (with ``--metrics FILE``, the task that samples the snapshot again);
5. ``leader-elector``: campaigns for the Lease, renews it, releases it on
   shutdown; losing it stops scheduling at once and ends the process with
   exit status 1, so its pod restarts as a standby;
6. ``scheduling-loop``: waits for the caches to sync (and for leadership),
   then runs ``Scheduler.run``; on shutdown stops taking pods and lets
   in-flight bindings finish within ``binding_grace`` seconds (the rest are
   forgotten: the pod stays pending for the next leader). Not started with
   ``--no-scheduling`` (an extender only: nothing is bound).

Standbys keep their caches warm and serve the probes; only the leader
schedules (and counts its queue in ``scheduler_pending_pods``: ``standby_pending``).
HTTP: ``/metrics`` (the app's one collector registry), ``/healthz``,
``/livez``, ``/readyz`` (``scorer.service.health``); with
``--extender-profile``, kube-scheduler's extender verbs (``scorer.extender``);
``/configz``, ``/debug/queue`` (and ``/debug/extender``) only with
``--enable-debug-endpoints``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

import orjson
from aiohttp import web

from scorer import exposition, startup
from scorer.assembly import Assembly
from scorer.cluster.interface import ClusterSource
from scorer.config import effective_config
from scorer.extender import http as extender_http
from scorer.extender.extender import Extender
from scorer.kube.apiresources import unassigned_pod
from scorer.model import Pod
from scorer.service.health import HealthEndpoint, NamedCheck
from scorer.service.options import ServiceOptions
from scorer.tasks import Supervisor

log = logging.getLogger("scorer.service")

# SIGTERM to exit within 15 s: in-flight bindings get binding_grace (10 s), then the Events still buffered
# this long (Scheduler.stop's flush, bounded by the scheduler's stop_grace), the lease release 2 s.
FLUSH_TIMEOUT = 2.0
# /livez fails when the scheduling loop has not turned for this long (it turns at least every second).
LOOP_MAX_SILENCE = 60.0
# A MetricsSnapshot (--metrics FILE) is sampled again this often, so its values keep the ages it gives.
SNAPSHOT_RESAMPLE = 5.0
# With --enable-debug-endpoints, /debug/extender shows this many of the extender's last decisions.
EXTENDER_DECISIONS_KEPT = 20
#: Seconds a body no handler reads (the routes without one, a 413) is read and dropped after the answer, so
#: the client sees the answer before the connection closes (aiohttp's default: 10 s).
LINGERING_TIME = 2.0


class Elector(Protocol):
    """What the service needs of a leader elector (``scorer.kube.leader.LeaderElector``)."""

    on_stopped_leading: Callable[[], None] | None  # set by create_app: the service's lost_leadership

    @property
    def is_leader(self) -> bool: ...

    async def run(self) -> None: ...

    async def wait_until_leader(self) -> None: ...

    async def release(self) -> object: ...

    def healthy(self) -> bool: ...

    def state(self) -> str: ...


class Closable(Protocol):
    async def close(self) -> None: ...


class Service:
    """Every long-lived part of ``scorer run`` and the state they share; ``create_app(service)`` (or
    ``service.app()``) builds its aiohttp application."""

    def __init__(self, asm: Assembly, source: ClusterSource, options: ServiceOptions, *,
                 elector: Elector | None = None, clients: Sequence[Closable] = (),
                 source_status: Callable[[], Mapping[str, str]] | None = None,
                 finalizers: Sequence[Callable[[], Awaitable[object]]] = ()) -> None:
        self.asm = asm
        asm.scheduler.stop_grace = FLUSH_TIMEOUT  # the bindings' grace is passed to stop() explicitly
        self.source = source
        self.options = options
        self.elector = elector
        self.clients = list(clients)
        self.finalizers = list(finalizers)  # last writes before the sessions close (Event series counts)
        self.source_status = source_status
        self.supervisor = Supervisor(self._fatal, log=log)
        self.exit_code = 0
        self.shutting_down = False
        self.leadership_lost = False
        self.scheduling = False  # Scheduler.run started (this replica leads, or runs alone)
        self._stop_requested: asyncio.Event | None = None
        self._stop_task: asyncio.Task[None] | None = None
        self._invalid_reported: dict[str, str] = {}  # pod uid -> the message its Event gave

    # -- stopping -------------------------------------------------------------------
    @property
    def stop_requested(self) -> asyncio.Event:
        if self._stop_requested is None:
            self._stop_requested = asyncio.Event()
        return self._stop_requested

    def request_stop(self, exit_code: int = 0, reason: str = "") -> None:
        """Ask ``scorer.service.run`` to shut the service down (a signal, a fatal failure)."""
        if exit_code and not self.exit_code:
            self.exit_code = exit_code
        if not self.stop_requested.is_set():
            log.info("stopping%s", f": {reason}" if reason else "")
            self.stop_requested.set()

    def _fatal(self, name: str) -> None:
        self.request_stop(1, f"task {name} failed")

    # -- the parts ------------------------------------------------------------------
    async def run_elector(self) -> None:
        """The leader elector's task: campaign and renew until cancelled; its end means no longer leading."""
        assert self.elector is not None
        try:
            await self.elector.run()
            reason = "the elector stopped"
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # LeadershipLost, or a bug of the elector: either way, no longer leading
            reason = str(exc) or type(exc).__name__
        self.lost_leadership(reason)

    def lost_leadership(self, reason: str = "") -> None:
        """This replica no longer leads: stop scheduling at once, then exit non-zero so the pod
        restarts as a standby. (The elector's ``on_stopped_leading``; also called when its task
        ends.) Nothing to do while shutting down: the lease is being released on purpose."""
        if self.leadership_lost or self.shutting_down:
            return
        self.leadership_lost = True
        log.error("leader election lost%s: scheduling stops now and the process exits with status 1",
                  f" ({reason})" if reason else "")
        if self.scheduling:
            self._stop_task = asyncio.get_running_loop().create_task(self.asm.scheduler.stop(0.0),
                                                                     name="stop-scheduling")
        self.request_stop(1, "leader election lost")

    async def run_scheduling(self) -> None:
        """The scheduling loop's task: wait for the caches (and for leadership), then ``Scheduler.run``."""
        await self.source.wait_for_sync()
        startup.mark("synced")
        log.info("caches synced: %d nodes, %d assigned pods, %d pending pods queued", len(self.asm.cache.table),
                 len(self.asm.cache.pod_node), len(self.asm.queue.pending_pods()))
        if self.elector is not None and not self.elector.is_leader:
            log.info("waiting to become the leader")
            await self.elector.wait_until_leader()
        if self.shutting_down or self.leadership_lost:
            return
        log.info("scheduling pods of %s", ", ".join(sorted(self.asm.frameworks)))
        self.scheduling = True
        await self.asm.scheduler.run()
        if not (self.shutting_down or self.leadership_lost):
            raise RuntimeError("the scheduling loop ended")

    def begin_shutdown(self) -> None:
        """Readiness fails from now on; the cleanup contexts then stop the parts."""
        self.shutting_down = True

    # -- health -------------------------------------------------------------------
    def _check_synced(self) -> str | None:
        if self.source.has_delivered():
            return None
        waiting = [f"{name} {state}" for name, state in (self.source_status() if self.source_status else {}).items()]
        return "waiting for the caches to sync" + (f" ({'; '.join(waiting)})" if waiting else "")

    def _check_shutdown(self) -> str | None:
        return "shutting down" if self.shutting_down else None

    def _check_tasks(self) -> str | None:
        return self.supervisor.failure

    def _check_loop(self) -> str | None:
        if not self.scheduling or self.shutting_down:
            return None  # standby, or stopping: nothing to watch
        if self.asm.scheduler.healthy(LOOP_MAX_SILENCE):
            return None
        return self.asm.scheduler.failure or f"the scheduling loop has not turned for {LOOP_MAX_SILENCE:.0f}s"

    def _check_leader(self) -> str | None:
        if self.elector is None or self.elector.healthy():
            return None
        return "the lease was not renewed in time"

    def _info(self) -> dict[str, str]:
        info: dict[str, str] = {}
        if self.source_status is not None:
            info.update({f"informer/{name}": state for name, state in self.source_status().items()})
        if self.elector is not None:
            info["leader-election"] = self.elector.state()
        _, sources = self.asm.sources.readiness()
        info.update({f"metrics-source/{name}": state for name, state in sources.items()})
        return info

    def health_endpoints(self) -> list[HealthEndpoint]:
        ping = NamedCheck("ping", lambda: None)
        leader = [NamedCheck("leaderElection", self._check_leader)] if self.elector is not None else []
        tasks = NamedCheck("background-tasks", self._check_tasks)
        loop = NamedCheck("scheduling-loop", self._check_loop)
        return [
            HealthEndpoint("healthz", [ping, *leader, tasks, loop], self._info),
            HealthEndpoint("livez", [ping, tasks, loop], self._info),
            HealthEndpoint("readyz", [ping, *leader, NamedCheck("informer-sync", self._check_synced),
                                      NamedCheck("shutdown", self._check_shutdown)], self._info),
        ]

    def app(self) -> web.Application:
        """The service's aiohttp application (``create_app``)."""
        return create_app(self)

    # -- objects the cluster source cannot read -------------------------------------
    def on_invalid_object(self, resource: str, raw: Mapping[str, Any], message: str) -> None:
        """A pending pod of ours that cannot be decoded gets a FailedScheduling Event saying why
        (the source has logged it); it stays pending and is read again when it changes. Only the
        replica that schedules writes it: a standby's cluster writes would duplicate the leader's."""
        if resource != "pods" or not self.scheduling or self.shutting_down:
            return
        meta, spec = raw.get("metadata"), raw.get("spec")
        if not isinstance(meta, Mapping) or not isinstance(spec, Mapping):
            return
        name, namespace, uid = meta.get("name"), meta.get("namespace"), meta.get("uid")
        scheduler_name = spec.get("schedulerName") or "default-scheduler"
        if not (isinstance(name, str) and isinstance(namespace, str) and isinstance(uid, str)) or spec.get("nodeName"):
            return
        if scheduler_name not in self.asm.frameworks:
            return
        if self._invalid_reported.get(uid) == message:
            return  # the same problem in a later version (e.g. after the condition below was written)
        if len(self._invalid_reported) >= 10_000:
            self._invalid_reported.clear()
        self._invalid_reported[uid] = message
        pod = Pod(name=name, namespace=namespace, uid=uid, scheduler_name=str(scheduler_name))
        note = f"the pod cannot be read: {message}"
        self.asm.recorder.record(pod, "Warning", "FailedScheduling", "Scheduling", note[:1024])
        self.asm.recorder.set_pod_condition(pod, "False", "SchedulerError", note)


# -- the application -----------------------------------------------------------------
SERVICE_KEY = web.AppKey("service", Service)
ASSEMBLY_KEY = web.AppKey("assembly", Assembly)
SOURCE_KEY: web.AppKey[ClusterSource] = web.AppKey("cluster-source")
ELECTOR_KEY: web.AppKey[Elector | None] = web.AppKey("leader-elector")
SUPERVISOR_KEY = web.AppKey("supervisor", Supervisor)
CLIENTS_KEY: web.AppKey[Sequence[Closable]] = web.AppKey("api-clients")
FINALIZERS_KEY: web.AppKey[Sequence[Callable[[], Awaitable[object]]]] = web.AppKey("finalizers")
EXTENDER_KEY: web.AppKey[Extender | None] = web.AppKey("extender")
EXTENDER_VERBS_KEY: web.AppKey[extender_http.ExtenderVerbs | None] = web.AppKey("extender-verbs")


def create_app(service: Service) -> web.Application:
    """The aiohttp application of ``service``: its parts under their keys, its routes, one cleanup
    context per long-lived part (the module docstring)."""
    options = service.options
    # Only the extender's verbs take request bodies (its Nodes form carries whole Node objects); the
    # other routes never read one. What a connection may hold: see scorer.service.run.
    app = web.Application(client_max_size=extender_http.MAX_BODY if options.extender_profile else 1024,
                          handler_args={"keepalive_timeout": options.http_timeout,
                                        "lingering_time": LINGERING_TIME})
    asm = service.asm
    app[SERVICE_KEY] = service
    app[ASSEMBLY_KEY] = asm
    app[SOURCE_KEY] = service.source
    app[ELECTOR_KEY] = service.elector
    app[SUPERVISOR_KEY] = service.supervisor
    app[CLIENTS_KEY] = service.clients
    app[FINALIZERS_KEY] = service.finalizers
    # The parts' callbacks into the service (each part is made before the service that holds it).
    for reflector in _reflectors(service.source).values():
        reflector.on_invalid = service.on_invalid_object
    if service.elector is not None:
        service.elector.on_stopped_leading = service.lost_leadership
        asm.metrics.watch(pending=standby_pending(asm.queue.pending_counts, service.elector))
    for endpoint in service.health_endpoints():
        endpoint.add_routes(app)
    app.router.add_get("/metrics", _metrics)
    if options.enable_debug_endpoints:
        app.router.add_get("/configz", _configz)
        app.router.add_get("/debug/queue", _debug_queue)
    extender = verbs = None
    if options.extender_profile:
        extender = Extender(asm.frameworks[options.extender_profile], asm.cache, asm.sources,
                            keep=EXTENDER_DECISIONS_KEPT if options.enable_debug_endpoints else 0)
        verbs = extender_http.add_routes(app, extender, asm.metrics.collector_registry, options.extender_prefix,
                                         body_timeout=options.http_timeout, debug=options.enable_debug_endpoints,
                                         watched_pods=_watched_pods(service.source),
                                         pod_by_json=_pod_by_json(service.source))
    app[EXTENDER_KEY] = extender
    app[EXTENDER_VERBS_KEY] = verbs  # (served by the listener's lean front too: scorer.service.run)
    app.cleanup_ctx.extend([_api_session, _binder, *_cluster_source_contexts(service), _metric_sources,
                            _leader_elector, _scheduling_loop])
    return app


def standby_pending(counts: Callable[[], Mapping[str, int]], elector: Elector) -> Callable[[], Mapping[str, int]]:
    """``scheduler_pending_pods`` of a replica under leader election: its queue's ``counts`` while it
    leads, 0 per queue while it stands by. A standby's event handlers fill its queue with every pending
    pod (kube-scheduler 1.20's do too), but it schedules none of them: kube-scheduler with
    ``delayCacheUntilActive`` has an empty queue there, which is what this reports, so that a sum over
    the replicas counts each pending pod once."""
    return lambda: counts() if elector.is_leader else dict.fromkeys(counts(), 0)


def _reflectors(source: ClusterSource) -> Mapping[str, Any]:
    """The reflectors of an API source (``ApiSource.reflectors``); none for another source."""
    reflectors: Mapping[str, Any] | None = getattr(source, "reflectors", None)
    return reflectors or {}


def _watched_pods(source: ClusterSource) -> Callable[[str], Pod | None] | None:
    """The pods the pod reflector of an API source holds, by ``namespace/name`` (its store's keys); None
    for another source."""
    reflector = _reflectors(source).get("pods")
    if reflector is None:
        return None
    return lambda key: reflector.store.get(key)


def _pod_by_json(source: ClusterSource) -> Callable[[bytes], Pod | None] | None:
    """The pod the pod reflector of an API source holds whose JSON is the given bytes (kube-scheduler sends
    its extender the API server's JSON of a pod, byte for byte): from now on the reflector keeps the digests
    of the unassigned pods' JSON (``Reflector.keep_json_digests``). None for another source."""
    reflector = _reflectors(source).get("pods")
    if reflector is None:
        return None
    reflector.keep_json_digests(unassigned_pod)
    by_json: Callable[[bytes], Pod | None] = reflector.by_json
    return by_json


# -- cleanup contexts (one per long-lived part) ---------------------------------------
async def _api_session(app: web.Application) -> AsyncIterator[None]:
    yield
    for client in app[CLIENTS_KEY]:
        try:
            await client.close()
        except Exception as exc:  # closing must not hide the rest of the shutdown
            log.warning("closing an API session failed: %s: %s", type(exc).__name__, exc)


async def _binder(app: web.Application) -> AsyncIterator[None]:
    """Stopped after the scheduling loop (whose ``Scheduler.stop`` writes the Events and conditions
    still buffered): the writer's last writes (Event series counts), before the sessions close."""
    yield
    for finalize in app[FINALIZERS_KEY]:
        try:
            await finalize()
        except Exception as exc:
            log.warning("a last write before closing failed: %s: %s", type(exc).__name__, exc)


def _cluster_source_contexts(service: Service) -> list[Callable[[web.Application], AsyncIterator[None]]]:
    """One cleanup context per reflector of an API source (each a supervised task, restarted
    with backoff if it crashes); one for any other cluster source."""
    reflectors = _reflectors(service.source)
    if not reflectors:
        return [_part("cluster-source", functools.partial(service.source.run, service.asm.handlers))]
    parts = [_part(f"reflector:{name}", functools.partial(reflector.run, service.asm.handlers))
             for name, reflector in reflectors.items()]
    start_up: Callable[[], Awaitable[None]] | None = getattr(service.source, "start_up", None)
    if start_up is not None:  # (ApiSource.start_up: the bindings' connection, the early answers dropped)
        parts.append(_part("cluster-source:start-up", start_up, restart=False))
    return parts


def _part(name: str, run: Callable[[], Awaitable[None]], *,
          restart: bool = True) -> Callable[[web.Application], AsyncIterator[None]]:
    async def context(app: web.Application) -> AsyncIterator[None]:
        supervisor = app[SUPERVISOR_KEY]
        supervisor.start(name, run, restart=restart)
        yield
        await supervisor.stop(name)

    return context


async def _metric_sources(app: web.Application) -> AsyncIterator[None]:
    sources, supervisor = app[ASSEMBLY_KEY].sources, app[SUPERVISOR_KEY]
    sources.start()
    if sources.static_sources:  # a MetricsSnapshot (--metrics FILE): its values must not age
        supervisor.start("metrics-snapshot", functools.partial(_resample_snapshot, app), restart=True)
    yield
    if sources.static_sources:
        await supervisor.stop("metrics-snapshot")
    await sources.stop()


async def _resample_snapshot(app: web.Application) -> None:
    while True:
        app[ASSEMBLY_KEY].sources.resample_snapshot()
        await asyncio.sleep(SNAPSHOT_RESAMPLE)


async def _leader_elector(app: web.Application) -> AsyncIterator[None]:
    elector, supervisor = app[ELECTOR_KEY], app[SUPERVISOR_KEY]
    if elector is None:
        yield
        return
    service = app[SERVICE_KEY]
    supervisor.start("leader-elector", service.run_elector, restart=False)
    yield
    await supervisor.stop("leader-elector")
    if not service.leadership_lost:
        await elector.release()


async def _scheduling_loop(app: web.Application) -> AsyncIterator[None]:
    service, supervisor = app[SERVICE_KEY], app[SUPERVISOR_KEY]
    if service.options.no_scheduling:  # only the extender: nothing is bound
        yield
        return
    supervisor.start("scheduling-loop", service.run_scheduling, restart=False)
    yield
    service.shutting_down = True
    await app[ASSEMBLY_KEY].scheduler.stop(service.options.binding_grace)
    await supervisor.stop("scheduling-loop")


# -- HTTP -------------------------------------------------------------------------------
async def _metrics(request: web.Request) -> web.Response:
    body = exposition.render(request.app[ASSEMBLY_KEY].metrics.collector_registry)
    return web.Response(body=body, headers={"Content-Type": exposition.CONTENT_TYPE})


async def _configz(request: web.Request) -> web.Response:
    asm = request.app[ASSEMBLY_KEY]
    return _json(effective_config(asm.config, asm.resolved))


async def _debug_queue(request: web.Request) -> web.Response:
    queue = request.app[ASSEMBLY_KEY].queue
    return _json({"pending": queue.pending_counts(),
                  "pods": [{"pod": info.pod.key, "attempts": info.attempts,
                            "unschedulablePlugins": sorted(info.unschedulable_plugins)}
                           for info in queue.pending_pods()]})


def _json(value: Any) -> web.Response:
    return web.Response(body=orjson.dumps(value, option=orjson.OPT_INDENT_2), content_type="application/json")
