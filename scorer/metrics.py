"""The scheduler's own Prometheus metrics: one ``SchedulerMetrics`` per app.

``SchedulerMetrics`` owns the app's one ``CollectorRegistry``. The assembly
creates it (or takes the caller's) and hands it to every part that exports
metrics: the framework records extension-point and plugin timings here, the
queue its insertions and unschedulable pods, the scheduling and binding
cycles their attempts and binds, the metric sources (``scorer.sources``)
register their ``scorer_metrics_*`` telemetry into ``collector_registry``, and
the service serves ``collector_registry`` on ``/metrics``. Names, labels and buckets follow
kube-scheduler (reference/kube-scheduler.md §6); scorer's own families are
``scorer_*``. Label values are bounded sets: profile and plugin names come
from the configuration, statuses, extension points, queues and queue events
are fixed.

Recording is cheap on the hot path (about 17 histogram observations per bound pod): every
labelled child is looked up once (prometheus_client's ``labels()`` costs microseconds) and kept
in a dict, and the histograms of the scheduling and binding cycles are ``LoopHistogram``s, whose
observation is a ``bisect`` into the bounds and two plain updates, with none of prometheus_client's
locks and linear bucket scan; a scrape sees the same families and samples. The gauges that
describe state (``scheduler_pending_pods``, ``scheduler_cache_size``,
``scheduler_goroutines``) are computed when the collector registry is collected, from
the callables given to ``watch``, so scheduling pays nothing for them.

Counters whose label values are known in advance exist at 0 from the start
(``scheduler_schedule_attempts_total`` per profile and result once
``declare_profile`` ran, ``scorer_bind_results_total``), so that ``increase()``
and ``rate()`` see their first increment. The process families (``process_*``,
as Go's client exports them) come with every ``SchedulerMetrics``: kube-scheduler's
dashboards build their instance list from ``process_cpu_seconds_total``.

This module is a leaf: it imports only the package's version from scorer.
"""

from __future__ import annotations

import platform
import random
import resource
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.utils import INF, floatToGoString

from scorer import __version__, startup

M = TypeVar("M", Counter, Gauge, Histogram)


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Prometheus/client-go ``ExponentialBuckets``: start, start*factor, ... (count values), by repeated
    multiplication as Go computes them (``start * factor**i`` differs in the last digit: 2.2500000000000005e-05
    where kube-scheduler has 2.25e-05, and a query on the bound would not match)."""
    buckets = []
    for _ in range(count):
        buckets.append(start)
        start *= factor
    return tuple(buckets)


# Bucket lists of reference §6.
BUCKETS_ATTEMPT = exponential_buckets(0.001, 2, 15)  # B1
BUCKETS_EXTENSION_POINT = exponential_buckets(0.0001, 2, 12)  # B2
BUCKETS_PLUGIN = exponential_buckets(0.00001, 1.5, 20)  # B3
BUCKETS_SLI = exponential_buckets(0.01, 2, 20)  # B4
BUCKETS_POD_ATTEMPTS = exponential_buckets(1, 2, 5)  # B5
BUCKETS_PREEMPTION_VICTIMS = exponential_buckets(1, 2, 7)  # B6

# kube-scheduler records per-plugin durations in about 10% of cycles (pluginMetricsSamplePercent).
PLUGIN_METRICS_SAMPLE_PERCENT = 10
# scheduler_pod_scheduling_sli_duration_seconds{attempts}: "1".."14", then "15+".
SLI_ATTEMPTS_LABELS = 15

# scheduler_schedule_attempts_total{result}: the values scorer.cycle records.
ATTEMPT_RESULTS = ("scheduled", "unschedulable", "error")

# scorer_bind_results_total{result}: the Bind step's outcome.
BIND_BOUND = "bound"  # the cluster accepted the binding
BIND_CONFLICT = "conflict"  # refused for good (API 404/409): the pod is gone, re-created or bound already
BIND_ERROR = "error"  # any other failure (5xx, 429, timeout, a plugin error): the pod is requeued
BIND_RESULTS = (BIND_BOUND, BIND_CONFLICT, BIND_ERROR)

# scheduler_goroutines{operation}
OPERATION_BINDING = "binding"


class SchedulerMetrics:
    """The ``scheduler_*`` families scorer records, and scorer's own ``scorer_bind_results_total``
    and ``scorer_build_info``, in one collector registry.

    Recording methods (all cheap, none does I/O): ``observe_extension_point``,
    ``observe_plugin``, ``observe_attempt``, ``observe_algorithm``,
    ``observe_scheduled``, ``observe_incoming``, ``unschedulable_changed``,
    ``observe_preemption``, ``observe_bind``. Scrape-time gauges read the
    callables of ``watch``. Parts that keep their own collectors
    (metric-source telemetry) register them in ``collector_registry``.
    """

    def __init__(self, collector_registry: CollectorRegistry | None = None, *, rng: random.Random | None = None,
                 sample_percent: int = PLUGIN_METRICS_SAMPLE_PERCENT) -> None:
        self.collector_registry = collector_registry if collector_registry is not None else CollectorRegistry()
        self._rng = rng or random.Random()
        self.sample_percent = sample_percent
        reg = self.collector_registry
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be "
            "scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"], registry=reg)
        self.scheduling_attempt_duration = LoopHistogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"], buckets=BUCKETS_ATTEMPT, registry=reg)
        self.framework_extension_point_duration = LoopHistogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"], buckets=BUCKETS_EXTENSION_POINT, registry=reg)
        self.plugin_execution_duration = LoopHistogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"], buckets=BUCKETS_PLUGIN, registry=reg)
        self.scheduling_algorithm_duration = LoopHistogram(
            "scheduler_scheduling_algorithm_duration_seconds",
            "Scheduling algorithm latency in seconds", buckets=BUCKETS_ATTEMPT, registry=reg)
        self.pod_scheduling_sli_duration = LoopHistogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue "
            "and might involve multiple scheduling attempts.",
            ["attempts"], buckets=BUCKETS_SLI, registry=reg)
        self.pod_scheduling_attempts = LoopHistogram(
            "scheduler_pod_scheduling_attempts", "Number of attempts to successfully schedule a pod.",
            buckets=BUCKETS_POD_ATTEMPTS, registry=reg)
        self.queue_incoming_pods = Counter(
            "scheduler_queue_incoming_pods",
            "Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"], registry=reg)
        self.unschedulable_pods = Gauge(
            "scheduler_unschedulable_pods",
            "The number of unschedulable pods broken down by plugin name. A pod will increment the gauge for "
            "all plugins that caused it to not schedule and so this metric have meaning only when broken "
            "down by plugin.",
            ["plugin", "profile"], registry=reg)
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts", "Total preemption attempts in the cluster till now", registry=reg)
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims", "Number of selected preemption victims",
            buckets=BUCKETS_PREEMPTION_VICTIMS, registry=reg)
        self.bind_results = Counter(
            "scorer_bind_results",
            "Outcomes of the Bind step: 'bound'; 'conflict', the cluster refused it for good (the pod is "
            "gone, re-created, being deleted or bound already; not retried); 'error', any other failure "
            "(the pod is requeued with backoff).",
            ["result"], registry=reg)
        self.build_info = Gauge(
            "scorer_build_info", "scorer's version and the Python running it (always 1).",
            ["version", "python"], registry=reg)
        self.build_info.labels(__version__, platform.python_version()).set(1)
        self._state = _StateCollector()
        reg.register(self._state)
        ProcessCollector(registry=reg)
        reg.register(_AddressSpaceLimit())
        reg.register(_StartupPhases())
        # Labelled children by label values: prometheus_client's labels() costs microseconds, a dict
        # lookup does not (a LoopHistogram keeps its own).
        self._attempt_children: dict[tuple[str, str], tuple[Counter, HistogramChild]] = {}
        self._incoming_children: dict[tuple[str, ...], Counter] = {}
        self._unschedulable_children: dict[tuple[str, ...], Gauge] = {}
        self._sli_children: list[HistogramChild | None] = [None] * SLI_ATTEMPTS_LABELS  # by attempts - 1
        # Created now so that every result is exported (0) before the first binding.
        self._bind_children = {result: self.bind_results.labels(result) for result in BIND_RESULTS}

    def declare_profile(self, profile: str) -> None:
        """Export ``scheduler_schedule_attempts_total`` of ``profile`` at 0 for every result (the framework
        of each profile calls it), so that the first attempt of each kind is an increase."""
        for result in ATTEMPT_RESULTS:
            self.schedule_attempts.labels(result, profile)

    def sample_plugins(self) -> bool:
        """Whether this cycle records per-plugin durations (about ``sample_percent`` % of cycles)."""
        return self._rng.randrange(100) < self.sample_percent

    def observe_extension_point(self, point: str, status: str, profile: str, seconds: float) -> None:
        self.framework_extension_point_duration.labels(point, status, profile).observe(seconds)

    def observe_plugin(self, plugin: str, point: str, status: str, seconds: float) -> None:
        self.plugin_execution_duration.labels(plugin, point, status).observe(seconds)

    def observe_attempt(self, result: str, profile: str, seconds: float) -> None:
        """One scheduling attempt ended: ``result`` is scheduled, unschedulable or error."""
        children = self._attempt_children.get((result, profile))
        if children is None:
            children = self._attempt_children[result, profile] = (
                self.schedule_attempts.labels(result, profile),
                self.scheduling_attempt_duration.labels(result, profile))
        children[0].inc()
        children[1].observe(seconds)

    def observe_algorithm(self, seconds: float) -> None:
        """The scheduling algorithm found a node, in ``seconds``."""
        self.scheduling_algorithm_duration.observe(seconds)

    def observe_scheduled(self, attempts: int, seconds: float) -> None:
        """A pod was bound after ``attempts`` attempts, ``seconds`` after it first entered the active queue."""
        index = min(max(attempts, 1), SLI_ATTEMPTS_LABELS) - 1
        child = self._sli_children[index]
        if child is None:
            child = self._sli_children[index] = self.pod_scheduling_sli_duration.labels(sli_attempts_label(index + 1))
        child.observe(seconds)
        self.pod_scheduling_attempts.observe(attempts)

    def expect_incoming(self, pairs: Iterable[tuple[str, str]]) -> None:
        """Make ``scheduler_queue_incoming_pods_total`` of each (queue, event) pair exist at 0."""
        for queue, event in pairs:
            labelled_child(self._incoming_children, self.queue_incoming_pods, (queue, event))

    def observe_incoming(self, queue: str, event: str) -> None:
        """A pod entered the queue's pool ``queue`` (active, backoff, unschedulable, gated) on ``event``."""
        labelled_child(self._incoming_children, self.queue_incoming_pods, (queue, event)).inc()

    def unschedulable_changed(self, profile: str, plugins: Iterable[str], delta: int) -> None:
        """A pod of ``profile`` rejected by ``plugins`` entered (+1) or left (-1) the unschedulable pool."""
        children = self._unschedulable_children
        for plugin in plugins:
            labelled_child(children, self.unschedulable_pods, (plugin, profile)).inc(delta)

    def observe_preemption(self, victims: int) -> None:
        """A PostFilter preemption ran and selected ``victims`` pods."""
        self.preemption_attempts.inc()
        self.preemption_victims.observe(victims)

    def observe_bind(self, result: str) -> None:
        """The Bind step ended: ``result`` is one of BIND_RESULTS."""
        self._bind_children[result].inc()

    def watch(self, *, pending: Callable[[], Mapping[str, int]] | None = None,
              cache_sizes: Callable[[], Mapping[str, int]] | None = None,
              bindings: Callable[[], int] | None = None) -> None:
        """Where the scrape-time gauges read their values (the Scheduler gives its own):
        ``pending`` pods per queue for ``scheduler_pending_pods{queue}``, ``cache_sizes`` per type
        for ``scheduler_cache_size{type}``, ``bindings`` in flight for
        ``scheduler_goroutines{operation="binding"}``. A gauge without a callable has no sample."""
        state = self._state
        if pending is not None:
            state.pending = pending
        if cache_sizes is not None:
            state.cache_sizes = cache_sizes
        if bindings is not None:
            state.bindings = bindings


def sli_attempts_label(attempts: int) -> str:
    """The ``attempts`` label of the SLI histogram: "1".."14", or "15+"."""
    return str(attempts) if attempts < SLI_ATTEMPTS_LABELS else f"{SLI_ATTEMPTS_LABELS}+"


class _StateCollector:
    """``scheduler_pending_pods``, ``scheduler_cache_size`` and ``scheduler_goroutines``, read at collection."""

    def __init__(self) -> None:
        self.pending: Callable[[], Mapping[str, int]] | None = None
        self.cache_sizes: Callable[[], Mapping[str, int]] | None = None
        self.bindings: Callable[[], int] | None = None

    def describe(self) -> Iterator[Metric]:
        return self._families(samples=False)

    def collect(self) -> Iterator[Metric]:
        return self._families(samples=True)

    def _families(self, *, samples: bool) -> Iterator[Metric]:
        pending = GaugeMetricFamily(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' "
            "means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that "
            "the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that "
            "the scheduler never attempted to schedule because they are gated.",
            labels=["queue"])
        cache = GaugeMetricFamily(
            "scheduler_cache_size", "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            labels=["type"])
        goroutines = GaugeMetricFamily(
            "scheduler_goroutines", "Number of running goroutines split by the work they do such as binding.",
            labels=["operation"])
        if samples:
            for family, read in ((pending, self.pending), (cache, self.cache_sizes)):
                if read is not None:
                    for label, value in read().items():
                        family.add_metric([label], value)
            if self.bindings is not None:
                goroutines.add_metric([OPERATION_BINDING], self.bindings())
        yield pending
        yield cache
        yield goroutines


class _AddressSpaceLimit:
    """``process_virtual_memory_max_bytes``, which Go's process collector has and prometheus_client's
    has not: the soft limit on the address space, -1 when unlimited (as Go prints it)."""

    def describe(self) -> Iterator[Metric]:
        return self.collect()

    def collect(self) -> Iterator[Metric]:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        yield GaugeMetricFamily("process_virtual_memory_max_bytes",
                                "Maximum amount of virtual memory available in bytes.",
                                value=-1 if soft == resource.RLIM_INFINITY else soft)


class _StartupPhases:
    """``scorer_startup_seconds{phase}``: the phases of the process's start reached so far (``scorer.startup``)."""

    def describe(self) -> Iterator[Metric]:
        return self.collect()

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "scorer_startup_seconds",
            "Seconds from the start of scorer's code to each phase of its start-up: 'imported' (its modules "
            "loaded), 'built' (the service assembled), 'synced' (every first list delivered: scheduling "
            "starts, on a standby once it leads). A phase not reached yet has no sample.", labels=["phase"])
        for phase, seconds in startup.reached().items():
            family.add_metric([phase], seconds)
        yield family


class HistogramChild:
    """One series of a ``LoopHistogram``: the observations per bucket (not cumulative) and their sum."""

    __slots__ = ("_bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self.counts = [0] * len(bounds)
        self.sum = 0.0

    def observe(self, amount: float) -> None:
        """Count ``amount`` in the first bucket whose bound is at least ``amount`` (the last is +Inf)."""
        self.counts[bisect_left(self._bounds, amount)] += 1
        self.sum += amount


class LoopHistogram:
    """A histogram family observed from one thread only, the event loop's: prometheus_client's
    ``Histogram`` with the same constructor, ``labels`` and ``observe``, collected as the same samples
    (``_bucket`` per bound with prometheus_client's ``le`` text, ``_count``, ``_sum``, series in the
    order they were first used) less ``_created``, which scorer's ``/metrics`` leaves out anyway.

    An observation takes no lock and finds its bucket by ``bisect``: prometheus_client's takes a lock
    per value it changes and scans the bounds, about 1 us where this takes a fraction, and the
    scheduling and binding cycles observe some 17 times per pod. What observes it (``SchedulerMetrics``
    from the cycles, ``RestClientMetrics`` from the API client) runs on the event loop, which also
    serves ``/metrics``; the threads scorer starts (early lists, metric-source fetches) observe none."""

    def __init__(self, name: str, documentation: str, labelnames: Iterable[str] = (), *,
                 buckets: Iterable[float], registry: CollectorRegistry) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        bounds = [float(bound) for bound in buckets]
        if bounds != sorted(bounds):
            raise ValueError(f"{name}: buckets not in sorted order")
        if not bounds or bounds[-1] != INF:
            bounds.append(INF)
        self._bounds = tuple(bounds)
        # prometheus_client's text of each bound (le="1.0"; scorer.exposition rewrites it as Go's).
        self._le = tuple(floatToGoString(bound) for bound in bounds)  # type: ignore[no-untyped-call]
        self._children: dict[tuple[str, ...], HistogramChild] = {}
        if not self.labelnames:
            self.labels()  # the one series exists at 0 from the start, as prometheus_client's does
        registry.register(self)

    def labels(self, *values: str) -> HistogramChild:
        """The series of ``values`` (one per label name), created at the first call."""
        child = self._children.get(values)
        if child is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name}: {len(values)} label values for labels {self.labelnames}")
            child = self._children[values] = HistogramChild(self._bounds)
        return child

    def observe(self, amount: float) -> None:
        """Observe ``amount`` in a family without labels."""
        self.labels().observe(amount)

    def describe(self) -> Iterator[Metric]:
        yield Metric(self.name, self.documentation, "histogram")

    def collect(self) -> Iterator[Metric]:
        metric = Metric(self.name, self.documentation, "histogram")
        bucket, count, total = self.name + "_bucket", self.name + "_count", self.name + "_sum"
        for values, child in tuple(self._children.items()):
            labels = dict(zip(self.labelnames, values, strict=True))
            cumulative = 0.0
            for le, observed in zip(self._le, child.counts, strict=True):
                cumulative += observed
                metric.add_sample(bucket, {**labels, "le": le}, cumulative)
            metric.add_sample(count, labels, cumulative)
            metric.add_sample(total, labels, child.sum)
        yield metric


def labelled_child(children: dict[tuple[str, ...], M], family: M, labels: tuple[str, ...]) -> M:
    """``family.labels(*labels)``, kept in ``children`` after the first call."""
    child = children.get(labels)
    if child is None:
        child = children[labels] = family.labels(*labels)
    return child
