"""SchedulerMetrics: the kube-scheduler families (reference §6) and scorer's own, moved by pods run
through the in-memory scheduler and read back from the one collector registry."""

from __future__ import annotations

import platform
import resource

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from schedkit import build, schedule_all

from scorer import __version__
from scorer.metrics import (
    BUCKETS_EXTENSION_POINT,
    BUCKETS_POD_ATTEMPTS,
    LoopHistogram,
    SchedulerMetrics,
    sli_attempts_label,
)
from scorer.testing import make_node, make_pod, schedule_pending

PROFILE = "default-scheduler"

# Reference §6, as kube prints them.
B1 = "0.001 0.002 0.004 0.008 0.016 0.032 0.064 0.128 0.256 0.512 1.024 2.048 4.096 8.192 16.384"
B4 = ("0.01 0.02 0.04 0.08 0.16 0.32 0.64 1.28 2.56 5.12 10.24 20.48 40.96 81.92 163.84 327.68 655.36 "
      "1310.72 2621.44 5242.88")
B5 = "1.0 2.0 4.0 8.0 16.0"
B6 = "1.0 2.0 4.0 8.0 16.0 32.0 64.0"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def value(asm, name, **labels):
    return asm.metrics.collector_registry.get_sample_value(name, labels)


def buckets(metrics: SchedulerMetrics, family: str) -> str:
    """The bucket bounds of ``family`` as exposed (+Inf left out), from its first labelled child."""
    for metric in metrics.collector_registry.collect():
        if metric.name == family:
            first = None
            bounds = []
            for sample in metric.samples:
                if not sample.name.endswith("_bucket"):
                    continue
                key = tuple(v for k, v in sorted(sample.labels.items()) if k != "le")
                first = key if first is None else first
                if key == first and sample.labels["le"] != "+Inf":
                    bounds.append(sample.labels["le"])
            return " ".join(bounds)
    raise AssertionError(f"no family {family}")


def test_buckets_names_and_labels_follow_kube_scheduler():
    metrics = SchedulerMetrics()
    metrics.observe_algorithm(0.01)
    metrics.observe_scheduled(1, 1.0)
    metrics.observe_preemption(2)
    assert buckets(metrics, "scheduler_scheduling_algorithm_duration_seconds") == B1
    assert buckets(metrics, "scheduler_pod_scheduling_sli_duration_seconds") == B4
    assert buckets(metrics, "scheduler_pod_scheduling_attempts") == B5
    assert buckets(metrics, "scheduler_preemption_victims") == B6
    text = generate_latest(metrics.collector_registry).decode()
    for line in ("# TYPE scheduler_pending_pods gauge", "# TYPE scheduler_queue_incoming_pods_total counter",
                 "# TYPE scheduler_unschedulable_pods gauge", "# TYPE scheduler_preemption_attempts_total counter",
                 "# TYPE scheduler_cache_size gauge", "# TYPE scheduler_goroutines gauge",
                 "# TYPE scorer_bind_results_total counter", "# TYPE scorer_build_info gauge",
                 # the four families that came first, unchanged
                 "# TYPE scheduler_schedule_attempts_total counter",
                 "# TYPE scheduler_scheduling_attempt_duration_seconds histogram",
                 "# TYPE scheduler_framework_extension_point_duration_seconds histogram",
                 "# TYPE scheduler_plugin_execution_duration_seconds histogram"):
        assert line in text
    # Series that exist before anything happened: bind results at 0, build info at 1.
    for result in ("bound", "conflict", "error"):
        assert metrics.collector_registry.get_sample_value("scorer_bind_results_total", {"result": result}) == 0
    assert metrics.collector_registry.get_sample_value(
        "scorer_build_info", {"version": __version__, "python": platform.python_version()}) == 1


def test_the_queues_own_incoming_series_exist_at_0_from_the_start():
    asm, _ = build(None, [make_node("n1")], [])
    for queue, event in (("active", "PodAdd"), ("gated", "PodAdd"), ("unschedulable", "ScheduleAttemptFailure"),
                         ("backoff", "ScheduleAttemptFailure"), ("active", "BackoffComplete"),
                         ("active", "UnschedulableTimeout"), ("backoff", "UnschedulableTimeout"),
                         ("active", "ForceActivate")):
        assert value(asm, "scheduler_queue_incoming_pods_total", queue=queue, event=event) == 0, (queue, event)
    # A cluster event's label comes with its first move (there are too many to list them all).
    assert value(asm, "scheduler_queue_incoming_pods_total", queue="active", event="NodeAdd") is None


@pytest.mark.parametrize(("attempts", "label"), [(1, "1"), (14, "14"), (15, "15+"), (40, "15+")])
def test_sli_attempts_label(attempts, label):
    assert sli_attempts_label(attempts) == label


async def test_a_pod_scheduled_at_once_moves_the_queue_algorithm_sli_bind_and_cache_families():
    clock = Clock()
    asm, _ = build(None, [make_node("n1"), make_node("n2")], [make_pod("a", cpu="1"), make_pod("b", cpu="1")],
                   clock=clock)
    assert value(asm, "scheduler_pending_pods", queue="active") == 2
    assert value(asm, "scheduler_pending_pods", queue="gated") == 0
    assert value(asm, "scheduler_queue_incoming_pods_total", queue="active", event="PodAdd") == 2
    assert value(asm, "scheduler_cache_size", type="nodes") == 2
    clock.now = 102.5  # the pods wait 2.5 s in the queue
    turn = asm.scheduler.schedule_one()
    assert value(asm, "scheduler_cache_size", type="assumed_pods") == 1
    assert value(asm, "scheduler_goroutines", operation="binding") == 1  # its binding task is in flight
    assert value(asm, "scheduler_scheduling_algorithm_duration_seconds_count") == 1
    await schedule_pending(asm.scheduler)
    assert turn.binding.result() is True
    assert value(asm, "scheduler_goroutines", operation="binding") == 0
    assert value(asm, "scheduler_pending_pods", queue="active") == 0
    assert value(asm, "scheduler_cache_size", type="pods") == 2
    assert value(asm, "scheduler_cache_size", type="assumed_pods") == 0
    assert value(asm, "scheduler_scheduling_algorithm_duration_seconds_count") == 2
    assert value(asm, "scheduler_pod_scheduling_sli_duration_seconds_count", attempts="1") == 2
    assert value(asm, "scheduler_pod_scheduling_sli_duration_seconds_sum", attempts="1") == 5.0
    assert value(asm, "scheduler_pod_scheduling_attempts_count") == 2
    assert value(asm, "scheduler_pod_scheduling_attempts_sum") == 2
    assert value(asm, "scorer_bind_results_total", result="bound") == 2
    assert value(asm, "scheduler_schedule_attempts_total", result="scheduled", profile=PROFILE) == 2


def test_an_unschedulable_pod_counts_per_rejector_until_it_leaves_then_binds_on_a_later_attempt():
    clock = Clock()
    asm, cluster = build(None, [make_node("small", cpu="1")], [make_pod("big", cpu="2")], clock=clock)
    [turn] = schedule_all(asm)
    assert turn.outcome == "unschedulable"
    assert value(asm, "scheduler_scheduling_algorithm_duration_seconds_count") == 0  # it found no node
    assert value(asm, "scheduler_unschedulable_pods", plugin="NodeResourcesFit", profile=PROFILE) == 1
    assert value(asm, "scheduler_pending_pods", queue="unschedulable") == 1
    assert value(asm, "scheduler_queue_incoming_pods_total", queue="unschedulable",
                 event="ScheduleAttemptFailure") == 1

    clock.now = 130.0
    cluster.apply(make_node("large", cpu="4"))  # NodeAdd: NodeResourcesFit registered it
    assert value(asm, "scheduler_unschedulable_pods", plugin="NodeResourcesFit", profile=PROFILE) == 0
    assert value(asm, "scheduler_pending_pods", queue="unschedulable") == 0
    assert value(asm, "scheduler_queue_incoming_pods_total", queue="active", event="NodeAdd") == 1
    [turn] = schedule_all(asm)
    assert turn.binding.result() is True
    # Since the pod first entered the active queue (100), over its two attempts.
    assert value(asm, "scheduler_pod_scheduling_sli_duration_seconds_sum", attempts="2") == 30.0
    assert value(asm, "scheduler_pod_scheduling_attempts_sum") == 2
    assert value(asm, "scheduler_pod_scheduling_attempts_bucket", le="1.0") == 0
    assert value(asm, "scheduler_pod_scheduling_attempts_bucket", le="2.0") == 1


def test_the_unschedulable_gauge_drops_when_the_pod_is_deleted_and_gated_pods_are_counted_apart():
    gated = make_pod("gated", spec={"schedulingGates": [{"name": "example.com/wait"}]})
    big = make_pod("big", cpu="2")
    asm, cluster = build(None, [make_node("small", cpu="1")], [big, gated])
    assert value(asm, "scheduler_pending_pods", queue="gated") == 1
    assert value(asm, "scheduler_queue_incoming_pods_total", queue="gated", event="PodAdd") == 1
    schedule_all(asm)
    assert value(asm, "scheduler_unschedulable_pods", plugin="NodeResourcesFit", profile=PROFILE) == 1
    cluster.delete(big)
    assert value(asm, "scheduler_unschedulable_pods", plugin="NodeResourcesFit", profile=PROFILE) == 0
    assert value(asm, "scheduler_pending_pods", queue="gated") == 1


def test_preemption_series_exist_before_any_preemption_and_count_victims():
    metrics = SchedulerMetrics()
    assert metrics.collector_registry.get_sample_value("scheduler_preemption_attempts_total") == 0
    assert metrics.collector_registry.get_sample_value("scheduler_preemption_victims_count") == 0
    metrics.observe_preemption(3)
    metrics.observe_preemption(0)
    assert metrics.collector_registry.get_sample_value("scheduler_preemption_attempts_total") == 2
    assert metrics.collector_registry.get_sample_value("scheduler_preemption_victims_sum") == 3
    assert metrics.collector_registry.get_sample_value("scheduler_preemption_victims_bucket", {"le": "2.0"}) == 1


def test_state_gauges_have_no_samples_until_something_is_watched():
    metrics = SchedulerMetrics()
    assert metrics.collector_registry.get_sample_value("scheduler_pending_pods", {"queue": "active"}) is None
    counts = {"active": 3}
    metrics.watch(pending=lambda: counts)
    counts["active"] = 5  # read when collected, not when watched
    assert metrics.collector_registry.get_sample_value("scheduler_pending_pods", {"queue": "active"}) == 5
    assert metrics.collector_registry.get_sample_value("scheduler_goroutines", {"operation": "binding"}) is None


def test_attempt_counters_of_every_profile_and_result_exist_at_0_from_the_start():
    asm, _ = build(None, [make_node("n1")], [])
    for result in ("scheduled", "unschedulable", "error"):
        assert value(asm, "scheduler_schedule_attempts_total", result=result, profile=PROFILE) == 0, result


def test_the_process_families_are_go_clients():
    """kube-scheduler's dashboards list instances by process_cpu_seconds_total; Go's process collector also
    has process_virtual_memory_max_bytes (-1: unlimited)."""
    registry = SchedulerMetrics().collector_registry
    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes",
                 "process_start_time_seconds", "process_open_fds", "process_max_fds"):
        assert registry.get_sample_value(name) is not None, name
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    assert registry.get_sample_value("process_virtual_memory_max_bytes") == (
        -1 if soft == resource.RLIM_INFINITY else soft)


def samples_less_created(registry: CollectorRegistry):
    return [(metric.name, metric.type, metric.documentation,
             [(sample.name, sample.labels, sample.value) for sample in metric.samples
              if not sample.name.endswith("_created")])
            for metric in registry.collect()]


@pytest.mark.parametrize("labelnames, buckets", [(("point", "status"), BUCKETS_EXTENSION_POINT),
                                                 ((), BUCKETS_POD_ATTEMPTS)])
def test_a_loop_histogram_collects_what_prometheus_clients_histogram_does(labelnames, buckets):
    """Same family, series order, bucket texts, counts and sums (on a bound, between, past the last,
    negative, whole numbers), less _created; an unlabelled family's series exists at 0 from the start."""
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    loop = LoopHistogram("h_seconds", "Help.", labelnames, buckets=buckets, registry=ours)
    reference = Histogram("h_seconds", "Help.", labelnames, buckets=buckets, registry=theirs)
    assert samples_less_created(ours) == samples_less_created(theirs)
    values = ("Filter", "Success"), ("Bind", "Error"), ("Filter", "Success")
    amounts = (buckets[0], buckets[3], (buckets[1] + buckets[2]) / 2, buckets[-1] * 3, -1.0, 0, 2, 0.0004)
    for i, amount in enumerate(amounts):
        labels = values[i % len(values)][:len(labelnames)]
        (loop.labels(*labels) if labels else loop).observe(amount)
        (reference.labels(*labels) if labels else reference).observe(amount)
    assert samples_less_created(ours) == samples_less_created(theirs)
    with pytest.raises(ValueError, match="h_seconds"):
        loop.labels("one", "two", "three")
