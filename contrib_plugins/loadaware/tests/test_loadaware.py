"""LoadAware: the TLP and LeastUtilized formulas, prediction with the incoming and in-flight
pods, memory weighting, thresholds, the data policy, PromQL per mapping mode, args
validation, and scheduling end to end."""

from __future__ import annotations

import os
import re
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import scorer_loadaware
import yaml
from scorer_loadaware import METRICS, NAME, LoadAware, LoadAwareArgs, least_utilized, target_packing
from scorer_loadaware.plugin import MAX_RAW_SCORE, factory

from scorer import testing
from scorer.plugin import ClusterEvent, Code, CycleState, NodeBatch, SourceHub
from scorer.testing import make_cache, make_handle, make_node, make_pod, make_source_hub, plugin_config, run_plugin

README = Path(__file__).resolve().parents[1] / "README.md"
PATH = "profiles[0].pluginConfig[0].args"


def args_from(data: dict | None) -> LoadAwareArgs:
    """Args as the configuration converts them (camelCase keys, validated)."""
    return testing.structure(LoadAwareArgs, data, "args", kind="LoadAwareArgs")


def build(metrics: dict, args: dict | None = None, hub: SourceHub | None = None) -> LoadAware:
    hub = hub if hub is not None else make_source_hub(metrics)
    return factory(args_from(args), make_handle(hub))


def nodes(*names: str, cpu: str = "4", memory: str = "32Gi") -> list:
    return [make_node(n, cpu=cpu, memory=memory) for n in names]


IDLE_POD = make_pod("idle", cpu="0", memory="0")  # estimates 0: predicted == measured


# -- the formulas ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "utilization", "expected"),
    [
        # target 40: (100 - 40) * U / 40 + 40 up to the target, 40 * (100 - U) / 60 above it
        (40, 0, 40),
        (40, 10, 55),
        (40, 20, 70),
        (40, 25, 77),  # 77.5
        (40, 40, 100),
        (40, 50, 33),  # 33.33
        (40, 70, 20),
        (40, 99, 0),  # 0.67
        (40, 100, 0),
        (40, 150, 0),
        # target 70: 30 * U / 70 + 70, then 70 * (100 - U) / 30
        (70, 0, 70),
        (70, 35, 85),
        (70, 70, 100),
        (70, 85, 35),
        # the extremes of targetUtilization
        (1, 0, 1),
        (1, 0.5, 50),  # 99 * 0.5 + 1 = 50.5
        (1, 50, 0),  # 50 / 99
        (99, 49.5, 99),  # 49.5 / 99 + 99 = 99.5
        (99, 99, 100),
        (99, 99.5, 49),  # 99 * 0.5 / 1 = 49.5
    ],
)
def test_target_packing_formula(target, utilization, expected):
    assert target_packing(np.array([utilization]), target).tolist() == [expected]


@pytest.mark.parametrize(
    ("utilization", "expected"), [(0, 100), (12.5, 87), (33.5, 66), (99.9, 0), (100, 0), (120, 0)]
)
def test_least_utilized_formula(utilization, expected):
    assert least_utilized(np.array([utilization])).tolist() == [expected]


def test_float_noise_does_not_cost_a_point():
    # 0.2 * 100 == 20.000000000000004 and 0.7 * 100 == 70.00000000000001: scores are exact.
    plugin = build({"cpu_utilization": {"a": 0.2, "b": 0.7, "c": 0.3}})
    run = run_plugin(plugin, IDLE_POD, nodes("a", "b", "c"))
    assert run.scores == {"a": 70, "b": 20, "c": 85}


def test_target_packing_through_the_plugin():
    values = {"u0": 0.0, "u10": 0.1, "u25": 0.25, "u40": 0.4, "u50": 0.5, "u70": 0.7, "u100": 1.0, "over": 1.3}
    plugin = build({"cpu_utilization": values})
    run = run_plugin(plugin, IDLE_POD, nodes(*values))
    assert run.scores == {"u0": 40, "u10": 55, "u25": 77, "u40": 100, "u50": 33, "u70": 20, "u100": 0, "over": 0}
    # Raw: predicted utilization in percent; measured values are clipped to 0..1.
    assert run.raw_scores == {"u0": 0, "u10": 10, "u25": 25, "u40": 40, "u50": 50, "u70": 70, "u100": 100,
                              "over": 100}


def test_custom_target():
    plugin = build({"cpu_utilization": {"a": 0.35, "b": 0.85, "c": 0.7}}, {"targetUtilization": 70})
    assert run_plugin(plugin, IDLE_POD, nodes("a", "b", "c")).scores == {"a": 85, "b": 35, "c": 100}


def test_least_utilized_through_the_plugin():
    plugin = build({"cpu_utilization": {"a": 0.0, "b": 0.335, "c": 0.9}}, {"strategy": "LeastUtilized"})
    run = run_plugin(plugin, IDLE_POD, nodes("a", "b", "c"))
    assert run.scores == {"a": 100, "b": 66, "c": 10}
    assert run.raw_scores == {"a": 0, "b": 34, "c": 90}  # 33.5 rounds half up


# -- the incoming pod's estimate -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "pod", "raw", "score"),
    [
        # 10% + 1000m * 0.85 / 4000m = 31.25% -> 60 * 31.25 / 40 + 40 = 86.875
        (None, make_pod("p", cpu="1"), 31, 86),
        # factor 1: 10% + 25% = 35% -> 92.5
        ({"estimator": {"cpuScalingFactor": 1}}, make_pod("p", cpu="1"), 35, 92),
        # no cpu request counts kube's 100m: 10% + 2.125% -> 58.19
        (None, make_pod("p"), 12, 58),
        # 2.5 x the request (a bursty workload): 10% + 62.5% -> 40 * 27.5 / 60 = 18.3
        ({"estimator": {"cpuScalingFactor": 2.5}}, make_pod("p", cpu="1"), 73, 18),
    ],
)
def test_incoming_pod_estimate(args, pod, raw, score):
    plugin = build({"cpu_utilization": {"a": 0.1}}, args)
    run = run_plugin(plugin, pod, nodes("a"))
    assert (run.raw_scores["a"], run.scores["a"]) == (raw, score)


def test_estimate_is_relative_to_the_node_size():
    plugin = build({"cpu_utilization": {"small": 0.1, "big": 0.1}}, {"strategy": "LeastUtilized"})
    run = run_plugin(plugin, make_pod("p", cpu="2"), [make_node("small", cpu="4"), make_node("big", cpu="16")])
    # 2000m * 0.85 = 1700m: 42.5% of 4 cores, 10.625% of 16.
    assert run.raw_scores == {"small": 53, "big": 21}
    assert run.scores == {"small": 47, "big": 79}


# -- memory ------------------------------------------------------------------------------------------


def test_memory_weighting():
    metrics = {
        "cpu_utilization": {"a": 0.2, "b": 0.6, "c": 0.1},
        "memory_utilization": {"a": 0.6, "b": 0.2, "c": None},
    }
    args = {"strategy": "LeastUtilized", "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 3}]}
    run = run_plugin(build(metrics, args), IDLE_POD, nodes("a", "b", "c"))
    # a: (80 + 3 * 40) / 4 = 50; b: (40 + 3 * 80) / 4 = 70;
    # c: cpu 90, memory missing -> neutral 50: (90 + 150) / 4 = 60.
    assert run.scores == {"a": 50, "b": 70, "c": 60}
    # raw: weighted mean predicted utilization; -1 when a scored resource has no fresh value
    assert run.raw_scores == {"a": 50, "b": 30, "c": -1}


def test_memory_estimate_of_the_incoming_pod():
    metrics = {"memory_utilization": {"a": 0.1}}
    args = {"strategy": "LeastUtilized", "resources": [{"name": "memory"}]}
    # 10% + 8Gi * 0.7 / 32Gi = 27.5%
    run = run_plugin(build(metrics, args), make_pod("p", cpu="1", memory="8Gi"), nodes("a"))
    assert (run.raw_scores["a"], run.scores["a"]) == (28, 72)
    args["estimator"] = {"memoryScalingFactor": 1.0}  # 10% + 25%
    run = run_plugin(build(metrics, args), make_pod("p", cpu="1", memory="8Gi"), nodes("a"))
    assert (run.raw_scores["a"], run.scores["a"]) == (35, 65)


def test_only_the_metrics_in_use_are_read():
    hub = make_source_hub({"cpu_utilization": {"a": 0.1}})
    build({}, None, hub)
    assert sorted(hub.sources) == ["cpu_utilization"]
    assert hub.warnings == []
    hub = make_source_hub({"cpu_utilization": {"a": 0.1}})
    build({}, {"usageThresholds": {"memory": 90}}, hub)  # a threshold reads memory without scoring it
    assert sorted(hub.sources) == ["cpu_utilization", "memory_utilization"]
    assert "no metric 'memory_utilization'" in hub.warnings[0]


# -- in-flight pods ----------------------------------------------------------------------------------


def place(hub: SourceHub, pod_name: str, node: str, cpu: str = "1", ago: float = 0.0) -> None:
    hub.in_flight.placed(make_pod(pod_name, cpu=cpu), node, at=hub.clock() - ago)


def test_in_flight_pods_raise_predicted_utilization():
    hub = make_source_hub({"cpu_utilization": {"a": 0.1, "b": 0.1}})
    plugin = build({}, {"strategy": "LeastUtilized"}, hub)
    place(hub, "p1", "a")
    place(hub, "p2", "a")
    run = run_plugin(plugin, IDLE_POD, nodes("a", "b"))
    # a: 10% + 2 * 21.25% = 52.5%
    assert run.raw_scores == {"a": 53, "b": 10}
    assert run.scores == {"a": 47, "b": 90}
    hub.in_flight.removed(make_pod("p1").key)  # Unreserve
    assert run_plugin(plugin, IDLE_POD, nodes("a", "b")).raw_scores == {"a": 31, "b": 10}


@pytest.mark.parametrize(
    ("ago", "sample_age", "policy", "counted"),
    [
        (59, 0, None, True),  # the sample was taken 59 s after placement: < settleTime (60 s)
        (61, 0, None, False),  # a sample 61 s after placement shows the pod
        (61, 0, {"inFlight": {"settleTime": "2m"}}, True),
        (0, 0, {"inFlight": {"enabled": False}}, False),
        (299, 400, None, True),  # within ttl (5m), the sample is older than the placement
        (301, 400, None, False),  # forgotten after ttl
    ],
)
def test_in_flight_settle_time_and_ttl(ago, sample_age, policy, counted):
    hub = make_source_hub({"cpu_utilization": {"a": (0.1, sample_age)}})
    args = {"strategy": "LeastUtilized", "policy": {"maxAge": "10m", **(policy or {})}}
    plugin = build({}, args, hub)
    place(hub, "p1", "a", ago=ago)
    assert run_plugin(plugin, IDLE_POD, nodes("a")).raw_scores["a"] == (31 if counted else 10)


def test_kept_verdicts_and_scores_match_computing_them_afresh():
    """Filter's verdicts and Score's scores kept by node (``RowMemo``) are what computing them on the
    batch gives, through placements, a removal, batches that cover part of the nodes, pods of
    another size, a node whose allocatable changes and a clock that makes a value stale."""
    names = [f"n{i}" for i in range(12)]
    clock = [1_000_000.0]
    hub = make_source_hub({"cpu_utilization": {n: (0.05 + 0.08 * i, 10.0 * i) for i, n in enumerate(names)}},
                          clock=lambda: clock[0])
    plugin = build({}, {"usageThresholds": {"cpu": 70}, "policy": {"maxAge": "100s"}}, hub)
    cache = make_cache(nodes(*names))
    rng = np.random.default_rng(5)
    small, large = make_pod("small", cpu="300m"), make_pod("large", cpu="2")
    reader = plugin.readers["cpu"]
    for step in range(60):
        hub.in_flight.placed(make_pod(f"p{step}", cpu="500m"), names[int(rng.integers(12))], at=clock[0])
        if step == 20:
            hub.in_flight.removed(make_pod("p3").key)
        if step == 30:
            cache.update_node(make_node("n4", cpu="8", memory="32Gi"))
        if step == 40:
            clock[0] += 15.0  # n9 (90s old) turns stale
        rows = np.sort(rng.choice(12, size=int(rng.integers(1, 13)), replace=False))
        batch = NodeBatch(cache.table, rows)
        pod = small if step % 7 else large
        state = CycleState()
        verdict = plugin.filter_batch(state, pod, batch)
        reading = reader.read(batch)
        over = reading.usable & (plugin.predict("cpu", reading, batch, None) > 70)
        assert verdict.failed.tolist() == over.tolist()
        raw = plugin.score_batch(state, pod, batch)
        expected_raw, score, predicted = plugin._scores("cpu", reading, batch, plugin.estimate(pod, "cpu"))
        assert raw.tolist() == expected_raw.tolist()
        assert plugin.normalize_score(state, pod, raw).tolist() == reader.apply_policy(score, reading).tolist()
    assert cache.table.nodes_version > 0


def test_in_flight_memory_uses_the_memory_factor():
    hub = make_source_hub({"memory_utilization": {"a": 0.1}})
    plugin = build({}, {"strategy": "LeastUtilized", "resources": [{"name": "memory"}]}, hub)
    hub.in_flight.placed(make_pod("big", cpu="1", memory="16Gi"), "a", at=hub.clock())
    # 10% + 16Gi * 0.7 / 32Gi = 45%
    assert run_plugin(plugin, IDLE_POD, nodes("a")).raw_scores["a"] == 45


BURST = """
kind: List
items:
- {kind: Node, metadata: {name: a}, status: {allocatable: {cpu: "32", memory: 64Gi, pods: "110"}}}
- {kind: Node, metadata: {name: b}, status: {allocatable: {cpu: "32", memory: 64Gi, pods: "110"}}}
- {kind: Node, metadata: {name: c}, status: {allocatable: {cpu: "32", memory: 64Gi, pods: "110"}}}
---
apiVersion: scorer.dev/v1alpha1
kind: MetricsSnapshot
metrics:
  cpu_utilization: {a: 0.10, b: 0.20, c: 0.20}
"""


def burst_cluster(pods: int = 6) -> str:
    text = "".join(
        f"---\nkind: Pod\nmetadata: {{name: burst-{i}}}\n"
        f"spec: {{containers: [{{name: c, resources: {{requests: {{cpu: '2'}}}}}}]}}\n"
        for i in range(pods)
    )
    return BURST + text


def only_loadaware(args: dict) -> dict:
    """A profile whose only score plugin is LoadAware (so the placements show its effect alone)."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{
            "schedulerName": "default-scheduler",
            "plugins": {"score": {"disabled": [{"name": "*"}], "enabled": [{"name": NAME}]},
                        "filter": {"enabled": [{"name": NAME}]}},
            "pluginConfig": [{"name": NAME, "args": args}],
        }],
    }


def placed_on(args: dict) -> Counter:
    registry = testing.build_registry(autoload=False, modules=[scorer_loadaware])
    report = testing.simulate(testing.load_objects(burst_cluster()), only_loadaware(args), registry=registry)
    assert report.placed == 6
    return Counter(p.node for p in report.placements)


def test_burst_piles_onto_one_node_without_in_flight():
    # Every pod sees a at 10% + its own 5.3%: all six go to a (the thundering herd).
    assert placed_on({"strategy": "LeastUtilized", "policy": {"inFlight": {"enabled": False}}}) == {"a": 6}


def test_burst_spreads_with_in_flight():
    # Each placement adds 2000m * 0.85 / 32000m = 5.3125% to its node until a sample shows it.
    counts = placed_on({"strategy": "LeastUtilized"})
    assert counts["a"] == 3 and counts["b"] + counts["c"] == 3
    assert min(counts["b"], counts["c"]) >= 1


def test_burst_packs_to_the_target_with_in_flight():
    # TargetPacking fills b and c (20%) up to the 40% target before a (10%): 20 + 3 * 5.3 = 36%,
    # a fourth pod would put the node at 41% (score 39) while the other is at 25% (score 77).
    counts = placed_on({})
    assert counts == {"b": 3, "c": 3}


# -- thresholds ----------------------------------------------------------------------------------------


def test_no_filtering_by_default():
    plugin = build({"cpu_utilization": {"a": 1.0, "b": 0.99}})
    run = run_plugin(plugin, IDLE_POD, nodes("a", "b"))
    assert run.feasible == ["a", "b"]
    assert plugin.filter_batch(None, IDLE_POD, None) is None  # nothing to do: not even a read


def test_cpu_threshold_filters_hot_nodes():
    hub = make_source_hub({"cpu_utilization": {"a": 0.3, "b": 0.6, "c": 0.45, "d": 0.5}})
    plugin = build({}, {"usageThresholds": {"cpu": 50}}, hub)
    place(hub, "p1", "c")  # c: 45% + 21.25% in flight
    # The incoming pod is not counted by Filter: 3 cores would put a at 93.75%, but a is not hot.
    run = run_plugin(plugin, make_pod("big", cpu="3"), nodes("a", "b", "c", "d"))
    assert run.feasible == ["a", "d"]  # d is at the threshold, not above it
    for node in ("b", "c"):
        status = run.filter[node]
        assert status.code == Code.UNSCHEDULABLE
        assert status.reasons == ("node(s) CPU utilization above the LoadAware threshold (50%)",)
        assert status.plugin == NAME


def test_memory_threshold_without_scoring_memory():
    metrics = {"cpu_utilization": {"a": 0.1, "b": 0.1}, "memory_utilization": {"a": 0.95, "b": 0.5}}
    plugin = build(metrics, {"usageThresholds": {"memory": 90}})
    run = run_plugin(plugin, IDLE_POD, nodes("a", "b"))
    assert run.feasible == ["b"]
    assert run.filter["a"].reasons == ("node(s) memory utilization above the LoadAware threshold (90%)",)
    assert run.scores == {"b": 55}  # scored by cpu only


def test_threshold_ignores_nodes_without_fresh_data():
    metrics = {"cpu_utilization": {"a": 0.9, "b": (0.9, 600), "c": None}}
    run = run_plugin(build(metrics, {"usageThresholds": {"cpu": 50}}), IDLE_POD, nodes("a", "b", "c"))
    assert run.feasible == ["b", "c"]  # the data policy (neutral) decides for b and c
    assert run.scores == {"b": 50, "c": 50}


# -- the data policy -------------------------------------------------------------------------------------

POLICY_METRICS = {"cpu_utilization": {"fresh": 0.2, "stale": (0.2, 120), "missing": None}}
POLICY_NODES = nodes("fresh", "stale", "missing")


@pytest.mark.parametrize(("on_missing", "score"), [("neutral", 50), ("min", 0), ("max", 100)])
def test_nodes_without_fresh_data_get_the_policy_score(on_missing, score):
    plugin = build(POLICY_METRICS, {"policy": {"maxAge": "1m", "onMissing": on_missing}})
    run = run_plugin(plugin, IDLE_POD, POLICY_NODES)
    assert run.feasible == ["fresh", "stale", "missing"]
    assert run.scores == {"fresh": 70, "stale": score, "missing": score}
    assert run.raw_scores == {"fresh": 20, "stale": -1, "missing": -1}


def test_on_missing_filter_rejects_nodes_without_fresh_data():
    plugin = build(POLICY_METRICS, {"policy": {"maxAge": "1m", "onMissing": "filter"}})
    run = run_plugin(plugin, IDLE_POD, POLICY_NODES)
    assert run.feasible == ["fresh"]
    assert run.filter["stale"].reasons == ("node(s) had stale cpu_utilization metrics (older than 60s)",)
    assert run.filter["missing"].reasons == ("node(s) had no cpu_utilization metrics",)
    assert run.scores == {"fresh": 70}


def test_on_missing_filter_checks_every_metric_read():
    metrics = {"cpu_utilization": {"a": 0.2, "b": 0.2}, "memory_utilization": {"a": 0.2, "b": None}}
    args = {"resources": [{"name": "cpu"}, {"name": "memory"}], "policy": {"onMissing": "filter"}}
    run = run_plugin(build(metrics, args), IDLE_POD, nodes("a", "b"))
    assert run.feasible == ["a"]
    assert run.filter["b"].reasons == ("node(s) had no memory_utilization metrics",)


@pytest.mark.parametrize(("age", "fresh"), [(89, True), (91, False)])
def test_default_max_age_is_three_refresh_intervals(age, fresh):
    plugin = build({"cpu_utilization": {"a": (0.2, age), "b": 0.2}}, {"policy": {"onMissing": "min"}})
    assert run_plugin(plugin, IDLE_POD, nodes("a", "b")).scores["a"] == (70 if fresh else 0)


@pytest.mark.parametrize("on_missing", ["neutral", "min", "max", "filter"])
def test_fail_open_when_no_node_has_fresh_data(on_missing):
    metrics = {"cpu_utilization": {"a": (0.2, 600), "b": (0.9, 600), "c": None}}
    args = {"usageThresholds": {"cpu": 50}, "policy": {"onMissing": on_missing}}
    run = run_plugin(build(metrics, args), IDLE_POD, nodes("a", "b", "c"))
    assert run.feasible == ["a", "b", "c"]
    assert run.scores == {"a": 50, "b": 50, "c": 50}


@pytest.mark.parametrize("on_missing", ["min", "filter"])
def test_warming_up_fails_open(on_missing):
    # A Prometheus source that has not fetched yet (nothing is started: no I/O in the test).
    node_list = nodes("a", "b")
    hub = SourceHub(lambda: node_list)
    args = {"address": "http://prometheus:9090", "usageThresholds": {"cpu": 10}, "policy": {"onMissing": on_missing}}
    plugin = build({}, args, hub)
    assert plugin.readers["cpu"].source.data.warming_up
    run = run_plugin(plugin, make_pod("p", cpu="1"), node_list)
    assert run.feasible == ["a", "b"]
    assert run.scores == {"a": 50, "b": 50}
    assert run.raw_scores == {"a": -1, "b": -1}


# -- PromQL -------------------------------------------------------------------------------------------------

CPU_RATE = 'rate(node_cpu_seconds_total{mode="idle"}[60s])'
MEM_RATIO = "node_memory_MemAvailable_bytes / node_memory_MemTotal_bytes"


def promql(args: dict, resource: str = "cpu") -> str:
    args = {"address": "http://prometheus:9090", **args}
    plugin = build({}, args, SourceHub())
    source = plugin.readers[resource].source
    assert source.spec.combine == "mean"
    return source.spec.promql


@pytest.mark.parametrize(
    ("mapping", "expected"),
    [
        (None, f"1 - avg by (node, kubernetes_node, nodename, instance) ({CPU_RATE})"),
        ({"by": "label", "label": "host"}, f"1 - avg by (host) ({CPU_RATE})"),
        ({"by": "instance"}, f"1 - avg by (instance) ({CPU_RATE})"),
        ({"by": "uname"}, f"(1 - avg by (instance) ({CPU_RATE})) * on(instance) group_left(nodename) "
                          "max by (instance, nodename) (node_uname_info)"),
    ],
)
def test_cpu_query_per_mapping_mode(mapping, expected):
    args = {} if mapping is None else {"source": {"nodeMapping": mapping}}
    assert promql(args) == expected


def test_memory_query_and_overrides():
    assert promql({"resources": [{"name": "memory"}]}, "memory") == (
        f"1 - avg by (node, kubernetes_node, nodename, instance) ({MEM_RATIO})")
    assert promql({"timeRange": "2m"}) == f"1 - avg by (node, kubernetes_node, nodename, instance) " \
                                          f"({CPU_RATE.replace('60s', '120s')})"
    assert promql({"timeRange": "1500ms"}).endswith("[1500ms]))")
    custom = {"cpuQuery": "avg by ({by}) (instance:node_cpu_utilisation:rate{range})",
              "timeRange": "5m", "source": {"nodeMapping": {"by": "instance"}}}
    assert promql(custom) == "avg by (instance) (instance:node_cpu_utilisation:rate300s)"
    assert promql({"resources": [{"name": "memory"}], "memoryQuery": "my_memory_ratio"}, "memory") == (
        "my_memory_ratio")


def test_plugins_with_the_same_query_share_a_source():
    hub = SourceHub()
    first = build({}, {"address": "http://prometheus:9090"}, hub)
    second = build({}, {"address": "http://prometheus:9090/", "strategy": "LeastUtilized"}, hub)
    assert first.readers["cpu"].source is second.readers["cpu"].source
    assert len(hub.prometheus_sources) == 1


def test_address_is_required_without_a_snapshot():
    with pytest.raises(ValueError, match="args.address: Required value"):
        build({}, None, SourceHub())


# -- args ------------------------------------------------------------------------------------------------------


def test_defaults():
    args = args_from(None)
    assert args == LoadAwareArgs()
    assert (args.strategy, args.target_utilization) == ("TargetPacking", 40)
    assert [(r.name, r.weight) for r in args.resources] == [("cpu", 1)]
    assert (args.usage_thresholds.cpu, args.usage_thresholds.memory) == (0, 0)
    assert (args.estimator.cpu_scaling_factor, args.estimator.memory_scaling_factor) == (0.85, 0.7)
    assert args.time_range.total_seconds() == 60
    assert args.read_resources == ("cpu",)


def config_with_args(args: dict) -> dict:
    return plugin_config(NAME, args)


@pytest.mark.parametrize(
    ("args", "errors"),
    [
        ({"targetUtilization": 0}, [("targetUtilization", "Invalid value: 0: must be in 1..99 (percent)")]),
        ({"targetUtilization": 100}, [("targetUtilization", "Invalid value: 100: must be in 1..99 (percent)")]),
        ({"strategy": "MostUtilized"},
         [("strategy", 'Unsupported value: "MostUtilized": supported values: "TargetPacking", "LeastUtilized"')]),
        ({"resources": []}, [("resources", "Required value: at least one of cpu, memory")]),
        ({"resources": [{"weight": 1}]}, [("resources[0].name", "Required value")]),
        ({"resources": [{"name": "nvidia.com/gpu", "weight": 0}]},
         [("resources[0].name", 'Unsupported value: "nvidia.com/gpu": supported values: "cpu", "memory"'),
          ("resources[0].weight", "Invalid value: 0: must be in 1..100")]),
        ({"resources": [{"name": "cpu"}, {"name": "memory", "weight": 101}, {"name": "cpu"}]},
         [("resources[1].weight", "Invalid value: 101: must be in 1..100"),
          ("resources[2].name", 'Duplicate value: "cpu"')]),
        ({"usageThresholds": {"cpu": 101, "memory": -1}},
         [("usageThresholds.cpu", "Invalid value: 101: must be in 0..100 (percent; 0 turns the threshold off)"),
          ("usageThresholds.memory", "Invalid value: -1: must be in 0..100 (percent; 0 turns the threshold off)")]),
        ({"usageThresholds": {"cpu": "80%"}}, [("usageThresholds.cpu", 'expected an integer, got string "80%"')]),
        ({"estimator": {"cpuScalingFactor": 85}},
         [("estimator.cpuScalingFactor", "Invalid value: 85: must be in (0, 10]: a fraction of the request "
                                         "(0.85 = 85%)")]),
        ({"estimator": {"memoryScalingFactor": 0}},
         [("estimator.memoryScalingFactor", "Invalid value: 0: must be in (0, 10]: a fraction of the request "
                                            "(0.85 = 85%)")]),
        ({"timeRange": "500ms"}, [("timeRange", "must be at least 1s")]),
        ({"timeRange": 60}, [("timeRange", 'expected a duration string such as "1m30s", got integer 60')]),
        ({"cpuQuery": "   "}, [("cpuQuery", "must not be blank (omit it for the default query)")]),
        ({"address": "prometheus:9090"},
         [("address", "'prometheus:9090' is not a URL; expected http://host:port or https://host:port")]),
        ({"policy": {"onMissing": "skip"}},
         [("policy.onMissing", 'Unsupported value: "skip": supported values: "neutral", "min", "max", "filter"')]),
        ({"policy": {"maxAge": "0s"}}, [("policy.maxAge", "must be greater than 0")]),
        ({"source": {"refreshInterval": "0s"}}, [("source.refreshInterval", "must be at least 1s")]),
        ({"usage_thresholds": {"cpu": 80}}, [("usage_thresholds", "unknown field")]),
        # non-finite and absurd numbers, as a JSON configuration can give them
        ({"targetUtilization": 1e308}, [("targetUtilization", "expected an integer, got number 1e+308")]),
        ({"usageThresholds": {"cpu": float("inf")}}, [("usageThresholds.cpu", "expected an integer, got number inf")]),
        ({"resources": [{"name": "cpu", "weight": 1e308}]},
         [("resources[0].weight", "expected an integer, got number 1e+308")]),
        ({"estimator": {"cpuScalingFactor": float("nan"), "memoryScalingFactor": 1e308}},
         [("estimator.cpuScalingFactor", "Invalid value: nan: must be in (0, 10]: a fraction of the request "
                                         "(0.85 = 85%)"),
          ("estimator.memoryScalingFactor", "Invalid value: 1e+308: must be in (0, 10]: a fraction of the "
                                            "request (0.85 = 85%)")]),
        ({"estimator": {"cpuScalingFactor": float("inf")}},
         [("estimator.cpuScalingFactor", "Invalid value: inf: must be in (0, 10]: a fraction of the request "
                                         "(0.85 = 85%)")]),
        # query templates
        ({"cpuQuery": "avg by ({by}) (rate(x[{rnage}]))"},
         [("cpuQuery", "unknown placeholder '{rnage}' (supported: {by}, {range})")]),
        ({"cpuQuery": 'avg by ({by}) (x{device=~"{device}"})'},
         [("cpuQuery", "unknown placeholder '{device}' (supported: {by}, {range})")]),
        ({"memoryQuery": "1 - avg by ({by}) (x})"}, [("memoryQuery", 'unbalanced "}" at character 21')]),
        # timings that contradict each other
        ({"policy": {"inFlight": {"settleTime": "10m", "ttl": "5m"}}},
         [("policy.inFlight.settleTime", "must not be longer than ttl (5m0s): a placement would be forgotten "
                                         "before its load is expected to show in the metric")]),
        ({"policy": {"maxAge": "10s"}},
         [("policy.maxAge", "must be at least source.refreshInterval (30s): every value would go stale between "
                            "two refreshes")]),
        ({"source": {"bearerTokenFile": "/nonexistent/token"}},
         [("source.bearerTokenFile", "file '/nonexistent/token' does not exist")]),
    ],
)
def test_invalid_args_name_the_field(args, errors):
    registry = testing.build_registry(autoload=False, modules=[scorer_loadaware])
    with pytest.raises(testing.ConfigError) as info:
        testing.load_config(config_with_args(args), registry.catalog())
    assert info.value.errors == [(f"{PATH}.{path}", message) for path, message in errors]


# -- extreme values ---------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["TargetPacking", "LeastUtilized"])
def test_extreme_requests_and_values_never_overflow(strategy):
    metrics = {"cpu_utilization": {"a": 1e308, "b": 0.5}, "memory_utilization": {"a": 0.1, "b": -1e308}}
    args = {"strategy": strategy, "resources": [{"name": "cpu"}, {"name": "memory"}],
            "estimator": {"memoryScalingFactor": 10}, "usageThresholds": {"memory": 90}}
    hub = make_source_hub(metrics)
    plugin = build({}, args, hub)
    hub.in_flight.placed(make_pod("huge", memory="7Ei"), "b", at=hub.clock())
    node_list = [make_node("a", memory="1"), make_node("b", memory="1Gi")]
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        run = run_plugin(plugin, make_pod("p", memory="7Ei"), node_list)
    assert run.error is None
    # b: 7Ei x 10 in flight on 1Gi is far above 90%; a: 10% measured, the incoming pod not counted
    assert run.feasible == ["a"]
    # a: cpu clipped to 100% (+ the pod's 100m), memory 7Ei x 10 / 1 byte: raw capped, score 0
    assert run.raw_scores == {"a": MAX_RAW_SCORE}
    assert run.scores == {"a": 0}


# -- requeue events --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("event", "interested"),
    [
        (ClusterEvent("Node", "Add"), True),
        (ClusterEvent("Node", "UpdateNodeAllocatable"), True),  # in-flight load is relative to it
        (ClusterEvent("Node", "Update"), True),  # a generic update may be one of allocatable
        (ClusterEvent("AssignedPod", "Delete"), True),  # its estimate and its usage go away
        (ClusterEvent("Pod", "Delete"), True),
        (ClusterEvent("Node", "UpdateNodeLabel"), False),
        (ClusterEvent("AssignedPod", "Add"), False),  # more load, never less
    ],
)
def test_events_to_register(event, interested):
    plugin = build({"cpu_utilization": {}}, {"usageThresholds": {"cpu": 80}})
    assert any(testing.matches(r, event) for r in plugin.events_to_register()) is interested


def test_pod_rejected_by_a_threshold_waits_for_a_deleted_pod():
    registry = testing.build_registry(autoload=False, modules=[scorer_loadaware])
    asm = testing.assemble(plugin_config(NAME, {"usageThresholds": {"cpu": 80}}), testing.InMemoryCluster([], [], []),
                           registry=registry, metrics_snapshot=testing.MetricsSnapshot({"cpu_utilization": {}}))
    asm.queue.add(make_pod("p"))
    info = asm.queue.pop()
    assert asm.queue.add_unschedulable_if_not_present(info, unschedulable_plugins=[NAME]) == "unschedulable"
    asm.queue.done(info.pod.key)
    assert asm.queue.move_all_to_active_or_backoff(ClusterEvent("AssignedPod", "Add")) == 0
    assert asm.queue.move_all_to_active_or_backoff(ClusterEvent("AssignedPod", "Delete")) == 1


# -- README ------------------------------------------------------------------------------------------------------


def readme_blocks(kind: str) -> list[str]:
    blocks = re.findall(r"```yaml\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    return [b for b in blocks if f"kind: {kind}" in b]


def test_readme_configuration_is_valid(monkeypatch):
    # The examples name in-cluster files (service-account CA and token), which validation checks exist.
    real_isfile, real_access = os.path.isfile, os.access
    monkeypatch.setattr(os.path, "isfile", lambda p: str(p).startswith("/var/run/secrets/") or real_isfile(p))
    monkeypatch.setattr(os, "access", lambda p, mode: str(p).startswith("/var/run/secrets/") or real_access(p, mode))
    registry = testing.build_registry(autoload=False, modules=[scorer_loadaware])
    configs = readme_blocks("KubeSchedulerConfiguration")
    assert configs
    for text in configs:
        config = testing.load_config_text(text, registry.catalog(), source=str(README))
        profile = testing.resolve_config(config, registry.catalog())[0]
        assert NAME in profile.points["score"]
        assert isinstance(profile.args[NAME], LoadAwareArgs)


def test_readme_snapshot_drives_a_simulation():
    blocks = readme_blocks("MetricsSnapshot")
    assert len(blocks) == 1
    snapshot = testing.snapshot_from_documents(list(yaml.safe_load_all(blocks[0])), str(README))
    assert snapshot is not None and set(snapshot.metrics) == set(METRICS.values())
    registry = testing.build_registry(autoload=False, modules=[scorer_loadaware])
    config = readme_blocks("KubeSchedulerConfiguration")[0]
    cluster = "\n---\n".join(
        f"kind: Node\nmetadata: {{name: {name}}}\nstatus: {{allocatable: {{cpu: '8', memory: 32Gi, pods: '110'}}}}"
        for name in snapshot.metrics["cpu_utilization"]
    ) + "\n---\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: c, resources: {requests: {cpu: 500m}}}]}\n"
    report = testing.simulate(testing.load_objects(cluster), yaml.safe_load(config), registry=registry,
                              metrics_snapshot=snapshot)
    assert report.placed == 1


# -- explain -------------------------------------------------------------------------------------------------------


def test_explain_shows_predicted_utilization_and_metrics():
    cluster = BURST + "---\nkind: Pod\nmetadata: {name: web}\n" \
                      "spec: {containers: [{name: c, resources: {requests: {cpu: '4'}}}]}\n"
    registry = testing.build_registry(autoload=False, modules=[scorer_loadaware])
    out = testing.explain_pod(testing.load_objects(cluster), only_loadaware({}), "default/web", registry=registry)
    # 4000m * 0.85 / 32000m = 10.625%: a 20.6% (score 70.9), b and c 30.6% (85.9)
    scores = {n: out["nodes"][n]["scores"][NAME] for n in "abc"}
    assert {n: (s["raw"], s["normalized"]) for n, s in scores.items()} == {"a": (21, 70), "b": (31, 85), "c": (31, 85)}
    metric = out["nodes"]["a"]["metrics"]["cpu_utilization"]
    assert (metric["plugin"], metric["value"], metric["state"], metric["policy"]) == (NAME, 0.1, "fresh", "fresh")
