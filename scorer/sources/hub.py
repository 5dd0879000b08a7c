"""SourceHub: the metrics sources of one scheduler, shared by its plugins.

Plugins ask the hub for a source (``hub.source(...)``); plugins that ask for
the same query on the same Prometheus with the same settings share one
source and one refresh task. The hub also keeps the placements made since
the last samples (``in_flight``), the source telemetry, and what each
plugin reads, for ``scorer explain``.

The assembly creates one hub per app and passes it to every framework as
``Handle.sources``; plugins reach it with ``source_hub(handle)``
(``scorer.plugins.helper.metricreader``), which never creates one. The hub's
telemetry registers into the app's ``SchedulerMetrics`` collector registry, so one
``SchedulerMetrics`` carries one hub at a time (a second one is an error;
``close()`` the first to replace it).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import numpy as np

from scorer.metrics import SchedulerMetrics
from scorer.model import Node, Pod
from scorer.sources.args import DataPolicyArgs, SourceArgs
from scorer.sources.source import MetricsSource, PrometheusSource, PrometheusSpec, StaticSource
from scorer.sources.static import MetricsSnapshot
from scorer.sources.telemetry import SourceTelemetry


@attrs.define(slots=True)
class InFlightPod:
    pod: Pod
    node: str
    placed_at: float


class InFlightTracker:
    """Pods placed recently, by pod key: assumed pods are added, forgotten ones removed, old ones pruned.

    ``columns(table)`` gives the entries as aligned columns (node row,
    placement time, pod), so readers test them in one vectorized step. New
    placements are appended in place (amortized O(1) each); any other change
    rebuilds the columns and bumps ``epoch``, so a reader that keeps per-node
    sums adds only the entries past those it saw while the epoch is the same.
    """

    PRUNE_EVERY = 1.0  # seconds between scans for entries past their ttl

    def __init__(self) -> None:
        self.entries: dict[str, InFlightPod] = {}
        self._pruned_at = float("-inf")
        self._columns_key: tuple[int, int] | None = None  # the table the columns were built for
        # The columns: the first ``_size`` items are the entries; arrays grow by doubling.
        self._rows = np.zeros(0, dtype=np.int64)
        self._times = np.zeros(0, dtype=np.float64)
        self._pods: list[Pod] = []
        self._size = 0
        # Since the columns were built: entries added at the end of ``entries`` (appended to the
        # columns), or any other change (the columns are rebuilt).
        self._added: list[InFlightPod] = []
        self._changed = False
        self._view: tuple[np.ndarray, np.ndarray, Sequence[Pod]] | None = None  # what columns() returned last
        self.epoch = 0
        self.changes = 0  # bumped by every change of ``entries``: readers that saw this count are up to date

    def placed(self, pod: Pod, node: str, at: float) -> None:
        entry = self.entries.get(pod.key)
        if entry is not None and entry.node == node and entry.pod.uid == pod.uid:
            return  # the same placement seen again
        added = self.entries[pod.key] = InFlightPod(pod, node, at)
        self.changes += 1
        if entry is not None:
            self._changed = True  # replaced in place: same position in ``entries``
        elif not self._changed:  # else the columns are rebuilt anyway
            self._added.append(added)

    def removed(self, pod_key: str) -> None:
        if self.entries.pop(pod_key, None) is not None:
            self._changed = True
            self.changes += 1

    def prune(self, now: float, ttl: float) -> None:
        if now - self._pruned_at < self.PRUNE_EVERY:
            return
        self._pruned_at = now
        old = [k for k, e in self.entries.items() if now - e.placed_at > ttl]
        for key in old:
            del self.entries[key]
        if old:
            self._changed = True
            self.changes += 1

    def columns(self, table: Any) -> tuple[np.ndarray, np.ndarray, Sequence[Pod]]:
        """(row in ``table`` or -1, placement time, pod) per entry, in the order of ``entries``; shared
        by every reader. The arrays are views that later placements do not change; the pods are
        indexed by entry (the sequence may hold later ones past the arrays' length)."""
        key = (id(table), table.layout_version)
        if self._changed or self._columns_key != key:
            self._rows, self._times, self._pods, self._size = np.zeros(0, dtype=np.int64), np.zeros(0), [], 0
            self._append(list(self.entries.values()), table)
            self.epoch += 1
            self._columns_key, self._added, self._changed, self._view = key, [], False, None
        elif self._added:
            self._append(self._added, table)
            self._added, self._view = [], None
        if self._view is None:  # the same views for every reader until the next change
            self._view = (self._rows[:self._size], self._times[:self._size], self._pods)
        return self._view

    def _append(self, entries: list[InFlightPod], table: Any) -> None:
        size, end = self._size, self._size + len(entries)
        if end > len(self._rows):  # grow by doubling: earlier views keep the old arrays
            capacity = max(2 * len(self._rows), end, 64)
            rows, times = np.zeros(capacity, dtype=np.int64), np.zeros(capacity, dtype=np.float64)
            rows[:size], times[:size] = self._rows[:size], self._times[:size]
            self._rows, self._times = rows, times
        index = table.index
        if len(entries) == 1:  # a placement per cycle
            entry = entries[0]
            self._rows[size], self._times[size] = index.get(entry.node, -1), entry.placed_at
            self._pods.append(entry.pod)
            self._size = end
            return
        self._rows[size:end] = np.fromiter((index.get(e.node, -1) for e in entries), np.int64, len(entries))
        self._times[size:end] = np.fromiter((e.placed_at for e in entries), np.float64, len(entries))
        self._pods.extend(entry.pod for entry in entries)
        self._size = end


@attrs.frozen(slots=True)
class Binding:
    """A plugin reading a source under a policy (what explain shows).

    ``reader`` is the plugin's reader (``MetricReader``); its ``policy``
    (DataPolicyArgs) says whether it counts in-flight placements.
    """

    plugin: str
    metric: str
    source: Any
    reader: Any

    @property
    def in_flight(self) -> bool:
        policy = getattr(self.reader, "policy", None)
        return isinstance(policy, DataPolicyArgs) and policy.in_flight.enabled


class SourceHub:
    """The metric sources of one app: a snapshot's static sources, or Prometheus sources refreshed in the
    background; their telemetry goes into ``metrics.collector_registry`` (a private ``SchedulerMetrics`` if none)."""

    #: Unmatched snapshot node names a warning shows (it always gives the count).
    WARN_UNMATCHED_SHOWN = 5

    def __init__(
        self,
        nodes: Callable[[], Sequence[Node]] = tuple,
        *,
        snapshot: MetricsSnapshot | None = None,
        metrics: SchedulerMetrics | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.nodes = nodes
        self.snapshot = snapshot
        self.clock = clock
        self.loaded_at = clock()
        # Telemetry registers into the app's one collector registry (a private one when used alone, as in tests).
        self.metrics = metrics if metrics is not None else SchedulerMetrics()
        self.collector_registry = self.metrics.collector_registry
        self.sources: dict[str, MetricsSource] = {}
        self._by_spec: dict[PrometheusSpec, PrometheusSource] = {}
        self.bindings: list[Binding] = []
        self.in_flight = InFlightTracker()
        self.warnings: list[str] = []
        self.telemetry = SourceTelemetry(self.collector_registry, lambda: list(self.sources.values()),
                                         lambda: [n.name for n in self.nodes()], clock)

    # -- sources -------------------------------------------------------------------
    def source(self, *, plugin: str, metric: str, address: str, query: str, source_args: SourceArgs,
               combine: str = "sum") -> MetricsSource:
        """The source for ``metric``: from the snapshot when the hub has one, else Prometheus at ``address``."""
        if self.snapshot is not None:
            existing = self.sources.get(metric)
            if existing is not None:
                return existing
            if metric not in self.snapshot.metrics:
                self.warnings.append(f"{plugin}: the metrics snapshot ({self.snapshot.origin}) has no metric "
                                     f"{metric!r}; every node has no data for it")
            static = self.snapshot.source(metric, self.loaded_at)
            names = [node.name for node in self.nodes()]
            if names:  # known already (nodes loaded before the plugins were built); else at refresh_all
                static.match_nodes(set(names))
            self._add(static)
            return static
        # Config validation checked the files; args built in Python may not have been validated.
        for key, message in source_args.file_errors():
            raise ValueError(f"args.source.{key}: {message}")
        if not address:
            raise ValueError("args.address: Required value: the Prometheus URL (http://host:port), unless a "
                             "metrics snapshot is given (scorer simulate --metrics FILE, or a MetricsSnapshot "
                             "document in the cluster file)")
        spec = PrometheusSpec(
            url=address.rstrip("/"), query=query, mapping=source_args.node_mapping.mapping(), combine=combine,
            interval=source_args.refresh_interval.total_seconds(),
            timeout=source_args.query_timeout.total_seconds(), ca_file=source_args.ca_file,
            bearer_token_file=source_args.bearer_token_file, insecure_skip_verify=source_args.insecure_skip_verify)
        shared = self._by_spec.get(spec)
        if shared is not None:
            return shared
        name = metric
        n = 2
        while name in self.sources:
            name = f"{metric}#{n}"
            n += 1
        prom = PrometheusSource(name, spec, self.nodes, self.telemetry, self.clock)
        self._by_spec[spec] = prom
        self._add(prom)
        return prom

    def _add(self, source: MetricsSource) -> None:
        self.sources[source.name] = source
        self.telemetry.source_registered(source.name)

    def bind(self, plugin: str, metric: str, source: MetricsSource, reader: Any) -> None:
        self.bindings.append(Binding(plugin, metric, source, reader))

    @property
    def in_flight_enabled(self) -> bool:
        """Whether some reader counts in-flight placements: only then are placements worth recording
        (the readers that count them also prune them)."""
        return any(binding.in_flight for binding in self.bindings)

    @property
    def prometheus_sources(self) -> list[PrometheusSource]:
        return list(self._by_spec.values())

    @property
    def static_sources(self) -> list[StaticSource]:
        return [s for s in self.sources.values() if isinstance(s, StaticSource)]

    def source_warnings(self) -> list[str]:
        """One line per source whose last refresh failed or whose values name no node (for simulate).

        A Prometheus source: the failed fetch, or the series that mapped to
        no node. A snapshot's metric: its node names that match no node of
        the cluster (a few of them, and the count).
        """
        out = []
        for source in self.prometheus_sources:
            data = source.data
            if data.last_error:
                out.append(f"metrics source {source.name} ({source.spec.url}): {data.last_error_kind}: "
                           f"{data.last_error}; plugins used their data policy")
            elif data.unmatched_count:
                out.append(f"metrics source {source.name}: {data.unmatched_count} series matched no node, "
                           f"e.g. {data.unmatched[0]}")
        for static in self.static_sources:
            data = static.data
            if data.unmatched_count:
                shown = ", ".join(repr(name) for name in data.unmatched[:self.WARN_UNMATCHED_SHOWN])
                more = ", ..." if data.unmatched_count > self.WARN_UNMATCHED_SHOWN else ""
                out.append(f"{static.origin}: metric {static.name!r}: {data.unmatched_count} of {data.series} "
                           f"node name(s) match no node of the cluster ({shown}{more}); their values are unused")
        return out

    # -- lifecycle -----------------------------------------------------------------
    async def refresh_all(self) -> None:
        """One refresh of every source: Prometheus sources query, concurrently (each in its own thread);
        a snapshot's sources check their node names against the cluster's nodes."""
        names = {node.name for node in self.nodes()}
        for static in self.static_sources:
            static.match_nodes(names)
        await asyncio.gather(*(s.refresh() for s in self._by_spec.values()))

    def resample_snapshot(self) -> None:
        """The snapshot's values sampled again now, each with the age the snapshot gives it (``run
        --metrics FILE``: the values do not age while the scheduler runs)."""
        now = self.clock()
        for static in self.static_sources:
            static.resample(now)

    def start(self) -> None:
        """Start every Prometheus source's refresh task (needs a running event loop)."""
        for source in self._by_spec.values():
            source.start()

    async def stop(self) -> None:
        await asyncio.gather(*(s.stop() for s in self._by_spec.values()))

    def close(self) -> None:
        """Take the telemetry out of the app's collector registry, so another hub can register (after ``stop``)."""
        self.telemetry.unregister()

    def readiness(self) -> tuple[bool, dict[str, str]]:
        """Ready once every source has had one successful fetch; details per source."""
        details = {}
        ready = True
        for name, source in self.sources.items():
            data = source.data
            if data.warming_up:
                ready = False
                details[name] = "warming up" + (f": {data.last_error}" if data.last_error else "")
            elif data.last_error:
                details[name] = f"degraded ({data.last_error_kind}): {data.last_error}"
            else:
                details[name] = "ok"
        return ready, details
