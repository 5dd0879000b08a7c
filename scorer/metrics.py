"""The scheduler's own Prometheus metrics: one ``SchedulerMetrics`` per app.

``SchedulerMetrics`` owns the app's one ``CollectorRegistry``. The assembly
creates it (or takes the caller's) and hands it to every part that exports
metrics: the framework records extension-point and plugin timings here, the
metric sources (``scorer.sources``) register their ``scorer_metrics_*``
telemetry into ``registry``, and the service serves ``registry`` on
``/metrics``. Names, labels and buckets follow kube-scheduler
(reference/kube-scheduler.md §6); scorer's own families are ``scorer_*``.
Label values are bounded sets: profile and plugin names come from the
configuration, statuses and extension points are fixed.

This module is a leaf: it imports nothing else of scorer.
"""

from __future__ import annotations

import random
from typing import TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram

M = TypeVar("M", Counter, Histogram)


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Prometheus/client-go ``ExponentialBuckets``: start, start*factor, ... (count values)."""
    return tuple(start * factor**i for i in range(count))


# Bucket lists of reference §6.
BUCKETS_ATTEMPT = exponential_buckets(0.001, 2, 15)  # B1
BUCKETS_EXTENSION_POINT = exponential_buckets(0.0001, 2, 12)  # B2
BUCKETS_PLUGIN = exponential_buckets(0.00001, 1.5, 20)  # B3

# kube-scheduler records per-plugin durations in about 10% of cycles (pluginMetricsSamplePercent).
PLUGIN_METRICS_SAMPLE_PERCENT = 10


class SchedulerMetrics:
    """The ``scheduler_*`` families scorer records, in one registry.

    The service issue adds the queue, cache and binding families here; parts
    that keep their own collectors (metric-source telemetry) register them in
    ``registry``.
    """

    def __init__(self, registry: CollectorRegistry | None = None, *, rng: random.Random | None = None,
                 sample_percent: int = PLUGIN_METRICS_SAMPLE_PERCENT) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._rng = rng or random.Random()
        self.sample_percent = sample_percent
        self.schedule_attempts = Counter(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be "
            "scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"], registry=self.registry)
        self.scheduling_attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"], buckets=BUCKETS_ATTEMPT, registry=self.registry)
        self.framework_extension_point_duration = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"], buckets=BUCKETS_EXTENSION_POINT, registry=self.registry)
        self.plugin_execution_duration = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"], buckets=BUCKETS_PLUGIN, registry=self.registry)
        # Labelled children by label values: labels() costs microseconds, a dict lookup does not.
        self._attempt_children: dict[tuple[str, str], tuple[Counter, Histogram]] = {}
        self._point_children: dict[tuple[str, ...], Histogram] = {}
        self._plugin_children: dict[tuple[str, ...], Histogram] = {}

    def sample_plugins(self) -> bool:
        """Whether this cycle records per-plugin durations (about ``sample_percent`` % of cycles)."""
        return self._rng.randrange(100) < self.sample_percent

    def observe_extension_point(self, point: str, status: str, profile: str, seconds: float) -> None:
        histogram = self.framework_extension_point_duration
        labelled_child(self._point_children, histogram, (point, status, profile)).observe(seconds)

    def observe_plugin(self, plugin: str, point: str, status: str, seconds: float) -> None:
        labelled_child(self._plugin_children, self.plugin_execution_duration, (plugin, point, status)).observe(seconds)

    def observe_attempt(self, result: str, profile: str, seconds: float) -> None:
        """One scheduling attempt ended: ``result`` is scheduled, unschedulable or error."""
        children = self._attempt_children.get((result, profile))
        if children is None:
            children = self._attempt_children[result, profile] = (
                self.schedule_attempts.labels(result, profile),
                self.scheduling_attempt_duration.labels(result, profile))
        children[0].inc()
        children[1].observe(seconds)


def labelled_child(children: dict[tuple[str, ...], M], family: M, labels: tuple[str, ...]) -> M:
    """``family.labels(*labels)``, kept in ``children`` after the first call."""
    child = children.get(labels)
    if child is None:
        child = children[labels] = family.labels(*labels)
    return child
