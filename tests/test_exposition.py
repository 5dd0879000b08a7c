"""The /metrics text as kube-scheduler (Go's client) writes it: numbers, bucket bounds, no _created."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.parser import text_string_to_metric_families

from scorer.exposition import go_float, render
from scorer.metrics import (
    BUCKETS_ATTEMPT,
    BUCKETS_EXTENSION_POINT,
    BUCKETS_PLUGIN,
    BUCKETS_POD_ATTEMPTS,
    BUCKETS_PREEMPTION_VICTIMS,
    BUCKETS_SLI,
    SchedulerMetrics,
    exponential_buckets,
)


# What strconv.FormatFloat(f, 'g', -1, 64) prints (Go 1.15, the version kube 1.20 is built with).
@pytest.mark.parametrize(("value", "text"), [
    (0.0, "0"), (-0.0, "-0"), (1.0, "1"), (-1.0, "-1"), (2.0, "2"), (16.0, "16"), (100000.0, "100000"),
    (1e6, "1e+06"), (1.5e7, "1.5e+07"), (123456.0, "123456"), (1234567.0, "1.234567e+06"), (1e21, "1e+21"),
    (0.5, "0.5"), (0.001, "0.001"), (0.0001, "0.0001"), (1e-05, "1e-05"), (2.25e-05, "2.25e-05"),
    (0.00015, "0.00015"), (1.5e-07, "1.5e-07"), (123.45, "123.45"), (0.1 + 0.2, "0.30000000000000004"),
    (-0.004, "-0.004"), (5e-324, "5e-324"), (1.7976931348623157e308, "1.7976931348623157e+308"),
    (float("inf"), "+Inf"), (float("-inf"), "-Inf"), (float("nan"), "NaN"),
])
def test_numbers_are_written_as_go_writes_them(value, text):
    assert go_float(value) == text


def test_exponential_buckets_multiply_as_go_does():
    # prometheus.ExponentialBuckets(0.00001, 1.5, 20): repeated multiplication; these are the bounds
    # kube-scheduler 1.20.2 prints (scraped), where start * factor**i gives 2.25e-05 and 3.375e-05.
    assert [go_float(b) for b in BUCKETS_PLUGIN][:4] == ["1e-05", "1.5000000000000002e-05", "2.2500000000000005e-05",
                                                         "3.375000000000001e-05"]
    assert [go_float(b) for b in BUCKETS_PLUGIN][-2:] == ["0.014778918800354007", "0.02216837820053101"]
    assert exponential_buckets(0.5, 2, 3) == (0.5, 1.0, 2.0)
    assert [go_float(b) for b in BUCKETS_ATTEMPT][:4] == ["0.001", "0.002", "0.004", "0.008"]
    assert [go_float(b) for b in BUCKETS_POD_ATTEMPTS] == ["1", "2", "4", "8", "16"]
    assert [go_float(b) for b in BUCKETS_PREEMPTION_VICTIMS] == ["1", "2", "4", "8", "16", "32", "64"]
    assert go_float(BUCKETS_EXTENSION_POINT[0]) == "0.0001" and go_float(BUCKETS_SLI[-1]) == "5242.88"


def test_render_writes_go_bounds_and_no_created_series():
    collector_registry = CollectorRegistry()
    Counter("things", "Things.", ["kind"], registry=collector_registry).labels("a\"b").inc(3)
    Gauge("level", "Level.", registry=collector_registry).set(2.5)
    Histogram("attempts", "Attempts.", buckets=(1, 2, 4), registry=collector_registry).observe(1)
    text = render(collector_registry).decode()
    assert "_created" not in text
    assert 'attempts_bucket{le="1"} 1\n' in text and 'attempts_bucket{le="+Inf"} 1\n' in text
    assert "attempts_count 1\n" in text and "attempts_sum 1\n" in text
    assert 'things_total{kind="a\\"b"} 3\n' in text and "level 2.5\n" in text
    assert "# TYPE things_total counter\n" in text and "# TYPE attempts histogram\n" in text
    # Still the Prometheus text format: it parses, with the same families and samples.
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert set(families) == {"things", "level", "attempts"}
    assert families["things"].samples[0].labels == {"kind": 'a"b'}


def test_the_scheduler_metrics_text_has_kube_bucket_bounds():
    metrics = SchedulerMetrics()
    metrics.pod_scheduling_attempts.observe(1)
    metrics.plugin_execution_duration.labels("DefaultBinder", "Bind", "Success").observe(0.01)
    text = render(metrics.collector_registry).decode()
    assert 'scheduler_pod_scheduling_attempts_bucket{le="1"} 1\n' in text
    assert 'le="1.0"' not in text and "_created" not in text
    assert ('scheduler_plugin_execution_duration_seconds_bucket{extension_point="Bind",le="2.2500000000000005e-05",'
            'plugin="DefaultBinder",status="Success"} 0\n') in text
