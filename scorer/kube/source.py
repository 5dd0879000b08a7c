"""``ApiSource``: the ``ClusterSource`` of a real cluster, one reflector per resource.

``run(handlers)`` starts a reflector for each resource (by default
namespaces; the workloads: services, replicationcontrollers, replicasets,
statefulsets, poddisruptionbudgets; nodes; the storage objects of the volume
plugins: storageclasses, csidrivers, csinodes, csistoragecapacities,
persistentvolumes, persistentvolumeclaims; pods) as a task named
``reflector:<resource>``. The lists run concurrently, but each first list is
delivered only after the one before it (``resources`` order), so the
handlers see every namespace, then every workload, then every node, then
every storage object, then every pod, as the ``ClusterSource`` contract says
(the storage objects are there before the pods that use them). The watches
start once every list is delivered (``watch_after``: their TLS handshakes, a
dozen, would otherwise compete with the lists for the CPU on the way to the
first bind), then run side by side. ``has_synced`` waits for every list
(``has_delivered`` for their deferred pods too); a resource the server does
not serve at all (CSIStorageCapacities on most 1.20 servers) counts as synced
with no objects. Everything runs on the caller's event loop: the handlers are
synchronous and need no locking.

Each reflector retries on its own (``scorer.kube.reflector``'s Faults):
after an API outage of any length every one is back within about 2 s of the
server answering again (the connection backoff: 0.2 s doubling to 2 s), and
one that finds its resourceVersion gone (410, as after an API server
restart) re-lists at once, within a random 0.5 s so that they do not all
list together. ``delays`` (``RetryDelays``) sets those waits for every
reflector. During an outage each reflector logs a few lines (its first
failure, a counted summary every 2 minutes, one INFO line once back in
step).

``status()`` (``/readyz?verbose``'s ``informer/<resource>`` lines) is each
reflector's ``state()``: what it is doing, when it last listed and when its
watch last had an event or bookmark.

A reflector never lets an error escape; should one crash all the same (a bug),
its task (a ``scorer.tasks.Supervisor`` task) logs it with its name and restarts
it after the relist backoff (``delays.relist`` doubling to ``delays.relist_cap``),
and the restarted reflector re-lists against what it delivered before.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math

from prometheus_client import CollectorRegistry

from scorer.cluster.interface import ObjectHandlers
from scorer.kube.apiresources import RESOURCES, STORAGE_RESOURCES, WORKLOAD_RESOURCES, bind_handlers
from scorer.kube.client import ApiClient
from scorer.kube.listing import DEFAULT_PAGE_SIZE
from scorer.kube.reflector import (
    DEFAULT_DELAYS,
    DEFAULT_WATCH_TIMEOUT,
    WATCH_COALESCE,
    InvalidCallback,
    Reflector,
    ReflectorMetrics,
    RetryDelays,
)
from scorer.tasks import Supervisor

log = logging.getLogger("scorer.kube.source")

DEFAULT_RESOURCES = ("namespaces", *WORKLOAD_RESOURCES, "nodes", *STORAGE_RESOURCES, "pods")


class ApiSource:
    """Lists and watches ``resources`` (names of ``RESOURCES``) of the API server behind ``client``.

    ``collector_registry`` receives the ``scorer_reflector_*`` metrics (a private one if
    None); ``on_invalid(resource, raw, message)`` is told of each malformed
    object (once per resourceVersion); ``delays``: every reflector's waits
    before trying again, and the restart backoff of a crashed one;
    ``watch_coalesce``: how long every watch's socket is left unread after an
    event (``Reflector``'s).
    """

    def __init__(self, client: ApiClient, *, collector_registry: CollectorRegistry | None = None,
                 page_size: int = DEFAULT_PAGE_SIZE, watch_timeout: float = DEFAULT_WATCH_TIMEOUT,
                 on_invalid: InvalidCallback | None = None, resources: tuple[str, ...] = DEFAULT_RESOURCES,
                 delays: RetryDelays = DEFAULT_DELAYS, watch_coalesce: float = WATCH_COALESCE) -> None:
        unknown = [name for name in resources if name not in RESOURCES]
        if unknown or not resources:
            raise ValueError(f"unknown resources {unknown or list(resources)}: expected some of {sorted(RESOURCES)}")
        self.metrics = ReflectorMetrics(collector_registry)
        self.client = client
        self.delays = delays
        self.reflectors: dict[str, Reflector] = {}
        previous: Reflector | None = None
        for name in resources:
            reflector = Reflector(client, RESOURCES[name], metrics=self.metrics, page_size=page_size,
                                  watch_timeout=watch_timeout, on_invalid=on_invalid, delays=delays,
                                  deliver_after=previous.wait_for_sync if previous is not None else None,
                                  watch_after=self.wait_for_sync, watch_coalesce=watch_coalesce)
            self.reflectors[name] = previous = reflector

    async def run(self, handlers: ObjectHandlers) -> None:
        """Run every reflector until cancelled (cancelling and awaiting them all)."""
        for reflector in self.reflectors.values():
            bind_handlers(reflector.resource, handlers)  # a handlers object that lacks a kind fails here, at once
        # A crashed reflector restarts after the relist backoff, which only grows (healthy_run: never reset).
        supervisor = Supervisor(log=log, initial_backoff=self.delays.relist, max_backoff=self.delays.relist_cap,
                                healthy_run=math.inf)
        for name, reflector in self.reflectors.items():
            supervisor.start(f"reflector:{name}", functools.partial(reflector.run, handlers), restart=True)
        supervisor.start("start-up", self.start_up, restart=False)
        try:
            await asyncio.Event().wait()  # until cancelled
        finally:
            await supervisor.stop()

    async def start_up(self) -> None:
        """What runs beside the reflectors at start (``run``, and the service, which runs them one by
        one): the writes' connection opened while the lists arrive (the first binding makes no TCP and
        TLS handshake); once every resource is synced, the early answers no reflector asked for dropped
        (``scorer.kube.early``)."""
        await self.client.prepare_writes()
        await self.wait_for_sync()
        if self.client.early is not None:
            self.client.early.discard()

    def has_synced(self) -> bool:
        """True once every resource's first list was delivered."""
        return all(reflector.has_synced() for reflector in self.reflectors.values())

    def has_delivered(self) -> bool:
        """True once every resource's first list was delivered in full (``Reflector.has_delivered``)."""
        return all(reflector.has_delivered() for reflector in self.reflectors.values())

    async def wait_for_sync(self) -> None:
        for reflector in self.reflectors.values():
            await reflector.wait_for_sync()

    def status(self) -> dict[str, str]:
        """Each resource's state (``Reflector.state()``), for ``/readyz?verbose``."""
        return {name: reflector.state() for name, reflector in self.reflectors.items()}
