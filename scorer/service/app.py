"""The service's aiohttp application: the scheduler's long-lived parts and its HTTP endpoints.

``Service`` holds what ``scorer.service.build`` assembled (the ``Assembly``, a
cluster source, an optional leader elector, the API clients) and
``Service.app()`` builds the aiohttp application. Each long-lived part is one
cleanup context, started in this order and stopped in the reverse one:

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
schedules. HTTP: ``/metrics`` (the app's one registry), ``/healthz``,
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
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from scorer.assembly import Assembly
from scorer.cluster.interface import ClusterSource
from scorer.config import effective_config
from scorer.extender import http as extender_http
from scorer.extender.extender import Extender
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
    """Every long-lived part of ``scorer run``; ``app()`` is its aiohttp application."""

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
        self.extender: Extender | None = None  # with --extender-profile, made by app()

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
    async def _run_source(self) -> None:
        await self.source.run(self.asm.handlers)

    async def _run_elector(self) -> None:
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

    async def _run_scheduling(self) -> None:
        await self.source.wait_for_sync()
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

    # -- cleanup contexts (one per long-lived part) ---------------------------------
    async def _api_session(self, app: web.Application) -> AsyncIterator[None]:
        yield
        for client in self.clients:
            try:
                await client.close()
            except Exception as exc:  # closing must not hide the rest of the shutdown
                log.warning("closing an API session failed: %s: %s", type(exc).__name__, exc)

    async def _binder(self, app: web.Application) -> AsyncIterator[None]:
        """Stopped after the scheduling loop (whose ``Scheduler.stop`` writes the Events and conditions
        still buffered): the writer's last writes (Event series counts), before the sessions close."""
        yield
        for finalize in self.finalizers:
            try:
                await finalize()
            except Exception as exc:
                log.warning("a last write before closing failed: %s: %s", type(exc).__name__, exc)

    def _cluster_source_contexts(self) -> list[Callable[[web.Application], AsyncIterator[None]]]:
        """One cleanup context per reflector of an API source (each a supervised task, restarted
        with backoff if it crashes); one for any other cluster source."""
        reflectors: Mapping[str, Any] | None = getattr(self.source, "reflectors", None)
        if not reflectors:
            return [self._part("cluster-source", self._run_source)]
        return [self._part(f"reflector:{name}", functools.partial(reflector.run, self.asm.handlers))
                for name, reflector in reflectors.items()]

    def _part(self, name: str, run: Callable[[], Awaitable[None]]) -> Callable[[web.Application],
                                                                               AsyncIterator[None]]:
        async def context(app: web.Application) -> AsyncIterator[None]:
            self.supervisor.start(name, run, restart=True)
            yield
            await self.supervisor.stop(name)

        return context

    async def _metric_sources(self, app: web.Application) -> AsyncIterator[None]:
        self.asm.sources.start()
        if self.asm.sources.static_sources:  # a MetricsSnapshot (--metrics FILE): its values must not age
            self.supervisor.start("metrics-snapshot", self._resample_snapshot, restart=True)
        yield
        if self.asm.sources.static_sources:
            await self.supervisor.stop("metrics-snapshot")
        await self.asm.sources.stop()

    async def _resample_snapshot(self) -> None:
        while True:
            self.asm.sources.resample_snapshot()
            await asyncio.sleep(SNAPSHOT_RESAMPLE)

    async def _leader_elector(self, app: web.Application) -> AsyncIterator[None]:
        if self.elector is None:
            yield
            return
        self.supervisor.start("leader-elector", self._run_elector, restart=False)
        yield
        await self.supervisor.stop("leader-elector")
        if not self.leadership_lost:
            await self.elector.release()

    async def _scheduling_loop(self, app: web.Application) -> AsyncIterator[None]:
        if self.options.no_scheduling:  # only the extender: nothing is bound
            yield
            return
        self.supervisor.start("scheduling-loop", self._run_scheduling, restart=False)
        yield
        self.shutting_down = True
        await self.asm.scheduler.stop(self.options.binding_grace)
        await self.supervisor.stop("scheduling-loop")

    def begin_shutdown(self) -> None:
        """Readiness fails from now on; the cleanup contexts then stop the parts."""
        self.shutting_down = True

    # -- health -------------------------------------------------------------------
    def _check_synced(self) -> str | None:
        if self.source.has_synced():
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

    # -- HTTP ---------------------------------------------------------------------
    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self.asm.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _configz(self, request: web.Request) -> web.Response:
        return _json(effective_config(self.asm.config, self.asm.resolved))

    async def _debug_queue(self, request: web.Request) -> web.Response:
        queue = self.asm.queue
        return _json({"pending": queue.pending_counts(),
                      "pods": [{"pod": info.pod.key, "attempts": info.attempts,
                                "unschedulablePlugins": sorted(info.unschedulable_plugins)}
                               for info in queue.pending_pods()]})

    def app(self) -> web.Application:
        options = self.options
        # Only the extender's verbs take request bodies (its Nodes form carries whole Node objects); the
        # other routes never read one. What a connection may hold: see scorer.service.run.
        app = web.Application(client_max_size=extender_http.MAX_BODY if options.extender_profile else 1024,
                              handler_args={"keepalive_timeout": options.http_timeout,
                                            "lingering_time": LINGERING_TIME})
        app[SERVICE_KEY] = self
        for endpoint in self.health_endpoints():
            endpoint.add_routes(app)
        app.router.add_get("/metrics", self._metrics)
        if options.enable_debug_endpoints:
            app.router.add_get("/configz", self._configz)
            app.router.add_get("/debug/queue", self._debug_queue)
        if options.extender_profile:
            self.extender = Extender(self.asm.frameworks[options.extender_profile], self.asm.cache, self.asm.sources,
                                     keep=EXTENDER_DECISIONS_KEPT if options.enable_debug_endpoints else 0)
            extender_http.add_routes(app, self.extender, self.asm.metrics.registry, options.extender_prefix,
                                     body_timeout=options.http_timeout, debug=options.enable_debug_endpoints)
        app.cleanup_ctx.extend([self._api_session, self._binder, *self._cluster_source_contexts(),
                                self._metric_sources, self._leader_elector, self._scheduling_loop])
        return app

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


SERVICE_KEY = web.AppKey("service", Service)


def _json(value: Any) -> web.Response:
    return web.Response(body=orjson.dumps(value, option=orjson.OPT_INDENT_2), content_type="application/json")
