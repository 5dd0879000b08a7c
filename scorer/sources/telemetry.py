"""scorer's own metrics about its metrics sources (``scorer_metrics_*``).

Counters and histograms are updated by the refreshers and the plugins;
gauges that depend on the current time (value age, nodes without data) are
computed when the collector registry is collected, so they are never stale
themselves. Label values are bounded: ``source`` is a configured source,
``kind`` one of ``ERROR_KINDS``, ``plugin`` a configured plugin, ``state``
one of ``STATES``, ``policy`` one of ``POLICIES``, ``bound`` oldest/newest.

The families live in the app's one collector registry
(``SchedulerMetrics.collector_registry``), registered once: a second
``SourceTelemetry`` on the same collector registry is an
error naming the cause, not prometheus_client's "Duplicated timeseries".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from scorer.metrics import labelled_child
from scorer.sources.args import ON_MISSING
from scorer.sources.data import ERROR_KINDS

if TYPE_CHECKING:
    from scorer.sources.source import MetricsSource

# 10 ms x 2^k up to ~41 s: a bulk instant query takes milliseconds; timeouts are seconds.
REFRESH_BUCKETS: tuple[float, ...] = tuple(0.01 * 2**k for k in range(13))
#: Label values of ``scorer_metrics_policy_nodes``: a node's data state, and the policy applied.
STATES: tuple[str, ...] = ("fresh", "stale", "missing", "warming-up")
POLICIES: tuple[str, ...] = ON_MISSING


class SourceTelemetry:
    """The ``scorer_metrics_*`` metrics, registered in ``collector_registry``."""

    def __init__(self, collector_registry: CollectorRegistry, sources: Callable[[], Sequence[MetricsSource]],
                 node_names: Callable[[], Iterable[str]], clock: Callable[[], float] = time.time) -> None:
        self.collector_registry = collector_registry
        try:
            self.refresh_duration = Histogram(
                "scorer_metrics_source_refresh_duration_seconds",
                "Duration of one refresh of a metrics source (the bulk query and its mapping to nodes).",
                ["source"], registry=collector_registry, buckets=REFRESH_BUCKETS)
        except ValueError:  # prometheus_client: "Duplicated timeseries in CollectorRegistry"
            raise ValueError("this collector registry already holds the scorer_metrics_* families of another "
                             "SourceHub: an app has one SourceHub per SchedulerMetrics (share it, or close() the "
                             "first before creating another)") from None
        self.errors = Counter(
            "scorer_metrics_source_errors",
            "Failed refreshes of a metrics source, by kind of failure.",
            ["source", "kind"], registry=collector_registry)
        self.queries = Counter(
            "scorer_metrics_source_queries",
            "PromQL queries sent to Prometheus by a metrics source.",
            ["source"], registry=collector_registry)
        self.policy_nodes = Counter(
            "scorer_metrics_policy_nodes",
            "Nodes a metrics-driven plugin scored or filtered under its data policy because their value "
            "was stale, missing or not fetched yet (one count per node per scheduling cycle).",
            ["plugin", "state", "policy"], registry=collector_registry)
        self._policy_children: dict[tuple[str, ...], Counter] = {}  # labelled children of policy_nodes
        self._gauges = _SourceGauges(sources, node_names, clock)
        collector_registry.register(self._gauges)

    def unregister(self) -> None:
        """Remove every family from the collector registry (the hub is closed)."""
        for collector in (self.refresh_duration, self.errors, self.queries, self.policy_nodes, self._gauges):
            self.collector_registry.unregister(collector)

    def count_policy(self, plugin: str, state: str, policy: str, nodes: int) -> None:
        """``nodes`` nodes of ``plugin`` in ``state`` got ``policy`` this cycle (both from fixed sets)."""
        labels = (plugin, state, policy)
        if labels not in self._policy_children and (state not in STATES or policy not in POLICIES):
            raise ValueError(f"unbounded label value: state {state!r}, policy {policy!r}")
        labelled_child(self._policy_children, self.policy_nodes, labels).inc(nodes)

    def source_registered(self, name: str) -> None:
        """Create the labelled children so every series exists from the start (at 0)."""
        for kind in ERROR_KINDS:
            self.errors.labels(name, kind)
        self.queries.labels(name)
        self.refresh_duration.labels(name)


class _SourceGauges(Collector):
    def __init__(self, sources: Callable[[], Sequence[MetricsSource]], node_names: Callable[[], Iterable[str]],
                 clock: Callable[[], float]) -> None:
        self._sources = sources
        self._node_names = node_names
        self._clock = clock

    def describe(self) -> Iterable[Any]:
        return []  # computed at collection time; nothing to check against at registration

    def collect(self) -> Iterator[GaugeMetricFamily]:
        now = self._clock()
        names = list(self._node_names())
        up = GaugeMetricFamily("scorer_metrics_source_up",
                               "1 if the latest refresh of the source succeeded, else 0.", labels=["source"])
        last = GaugeMetricFamily("scorer_metrics_source_last_success_timestamp_seconds",
                                 "Unix time of the last successful refresh (0: none yet, warming up).",
                                 labels=["source"])
        series = GaugeMetricFamily("scorer_metrics_source_series",
                                   "Series in the last successful result.", labels=["source"])
        unmatched = GaugeMetricFamily("scorer_metrics_source_unmatched_series",
                                      "Series of the last successful result that mapped to no node.",
                                      labels=["source"])
        missing = GaugeMetricFamily("scorer_metrics_source_nodes_without_data",
                                    "Nodes of the cluster for which the source holds no value at all.",
                                    labels=["source"])
        age = GaugeMetricFamily("scorer_metrics_source_value_age_seconds",
                                "Age of the source's values: the oldest and the newest sample over all nodes.",
                                labels=["source", "bound"])
        for source in self._sources():
            data = source.data
            up.add_metric([source.name], 1.0 if data.healthy else 0.0)
            last.add_metric([source.name], data.last_success or 0.0)
            series.add_metric([source.name], float(data.series))
            unmatched.add_metric([source.name], float(data.unmatched_count))
            missing.add_metric([source.name], float(sum(1 for n in names if n not in data.values)))
            times = list(data.sample_times.values())
            if times:
                age.add_metric([source.name, "oldest"], max(0.0, now - min(times)))
                age.add_metric([source.name, "newest"], max(0.0, now - max(times)))
        yield from (up, last, series, unmatched, missing, age)
