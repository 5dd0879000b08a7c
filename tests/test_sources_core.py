"""scorer.sources without Prometheus: node mapping, vector parsing, snapshots, policies, in-flight, telemetry."""

from __future__ import annotations

from datetime import timedelta

import attrs
import numpy as np
import pytest

from scorer.errors import InputError
from scorer.framework import CycleState, FilterVerdict, NodeBatch
from scorer.hookspecs import hookimpl
from scorer.plugins.helper.metricreader import MetricReader, source_hub
from scorer.sources import (
    DataPolicyArgs,
    InFlightArgs,
    MetricsSnapshot,
    NodeIndex,
    NodeMapping,
    SourceArgs,
    SourceHub,
    load_snapshot,
    snapshot_from_documents,
)
from scorer.sources.source import FetchError, classify, parse_vector
from scorer.testing import make_cache, make_node, make_pod, make_source_hub

NODES = [
    make_node("n1", addresses=[{"type": "InternalIP", "address": "10.0.0.1"},
                               {"type": "Hostname", "address": "host-1"}]),
    make_node("n2", addresses=[{"type": "InternalIP", "address": "fd00::2"}]),
    make_node("n3"),
]


@pytest.mark.parametrize(("mapping", "labels", "node"), [
    (NodeMapping("auto"), {"node": "n1"}, "n1"),
    (NodeMapping("auto"), {"kubernetes_node": "n2"}, "n2"),
    (NodeMapping("auto"), {"nodename": "n3"}, "n3"),
    (NodeMapping("auto"), {"node": "unknown", "instance": "10.0.0.1:9100"}, "n1"),
    (NodeMapping("auto"), {"instance": "host-1:9100"}, "n1"),
    (NodeMapping("auto"), {"instance": "[fd00::2]:9100"}, "n2"),
    (NodeMapping("auto"), {"instance": "n3:9100"}, "n3"),
    (NodeMapping("auto"), {"instance": "10.9.9.9:9100"}, None),
    (NodeMapping("label", "hostname"), {"hostname": "n2", "node": "n1"}, "n2"),
    (NodeMapping("label", "hostname"), {"node": "n1"}, None),
    (NodeMapping("instance"), {"node": "n1", "instance": "fd00::2"}, "n2"),
    (NodeMapping("uname"), {"nodename": "n3", "instance": "10.0.0.1:9100"}, "n3"),
    (NodeMapping("uname"), {"instance": "10.0.0.1:9100"}, None),
])
def test_node_mapping(mapping, labels, node):
    assert mapping.node_of(labels, NodeIndex(NODES)) == node


def test_mapping_query_shapes():
    assert NodeMapping("auto").group_labels() == "node, kubernetes_node, nodename, instance"
    assert NodeMapping("label", "kubernetes_node").group_labels() == "kubernetes_node"
    assert NodeMapping("instance").wrap("q") == "q"
    assert NodeMapping("uname").wrap("sum by (instance) (x)") == (
        "(sum by (instance) (x)) * on(instance) group_left(nodename) max by (instance, nodename) (node_uname_info)")


def _series(labels, value, ts=100.0):
    return {"metric": labels, "value": [ts, str(value)]}


def test_parse_vector_combines_drops_and_reports():
    result = [
        _series({"node": "n1", "device": "eth0"}, 10, 100.0),
        _series({"node": "n1", "device": "eth1"}, 5, 101.0),
        _series({"node": "n2"}, "NaN"),
        _series({"node": "elsewhere"}, 7),
        _series({"node": "n3"}, 0),
    ]
    index = NodeIndex(NODES)
    values, times, series, unmatched = parse_vector(result, NodeMapping("auto"), index, "sum")
    assert values == {"n1": 15.0, "n3": 0.0}  # NaN dropped (no value, not zero); zero kept as zero
    assert times == {"n1": 101.0, "n3": 100.0}
    assert series == 5 and unmatched == ['{node="elsewhere"}']
    assert parse_vector(result, NodeMapping("auto"), index, "max")[0]["n1"] == 10.0
    assert parse_vector(result, NodeMapping("auto"), index, "mean")[0]["n1"] == 7.5


@pytest.mark.parametrize("result", [
    [{"metric": {}, "values": [[1, "2"]]}],  # a range vector
    [1.0, "2"],  # a scalar
    {"resultType": "vector"},
])
def test_parse_vector_rejects_other_shapes(result):
    with pytest.raises(FetchError) as err:
        parse_vector(result, NodeMapping("auto"), NodeIndex(NODES), "sum")
    assert err.value.kind == "bad_response"


def test_classify_client_errors():
    import requests
    from prometheus_api_client import PrometheusApiClientException

    body = b'{"status":"error","errorType":"bad_data","error":"1:5: parse error: unexpected <EOF>"}'
    bad = classify(PrometheusApiClientException(f"HTTP Status Code 400 ({body!r})"))
    assert bad.kind == "bad_query" and "parse error: unexpected <EOF>" in str(bad)
    assert classify(PrometheusApiClientException("HTTP Status Code 403 (b'no')")).kind == "auth"
    assert classify(PrometheusApiClientException("HTTP Status Code 503 (b'down')")).kind == "http"
    assert classify(requests.exceptions.ReadTimeout("read timed out")).kind == "timeout"
    assert classify(requests.exceptions.ConnectionError("refused")).kind == "connection"
    assert classify(requests.exceptions.SSLError("bad cert")).kind == "tls"
    assert classify(ValueError("Expecting value")).kind == "bad_response"


def test_snapshot_documents_merge_and_ages(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(
        "kind: MetricsSnapshot\nmetrics:\n  cpu:\n    n1: 5e-1\n    n2: {value: 0.25, age: 5m}\n    n3: null\n"
        "---\nkind: MetricsSnapshot\nmetrics:\n  cpu:\n    n1: 0.75\n  net: {n3: 12}\n")
    snap = load_snapshot(str(path))
    assert snap.metrics == {"cpu": {"n1": (0.75, 0.0), "n2": (0.25, 300.0)}, "net": {"n3": (12.0, 0.0)}}
    source = snap.source("cpu", loaded_at=1000.0)
    assert source.data.values == {"n1": 0.75, "n2": 0.25}
    assert source.data.sample_times == {"n1": 1000.0, "n2": 700.0}
    assert snap.source("absent", 1000.0).data.values == {}
    assert snapshot_from_documents([{"kind": "Pod"}], "x") is None


@pytest.mark.parametrize(("text", "message"), [
    ("kind: MetricsSnapshot\nmetrics: [1]\n",
     "metrics: expected a map of metric name to per-node values, got list"),
    ("kind: MetricsSnapshot\nmetrics: {cpu: {n1: high}}\n", "metrics.cpu.n1: expected a finite number"),
    ("kind: MetricsSnapshot\nmetrics: {cpu: {n1: .inf}}\n", "metrics.cpu.n1: expected a finite number"),
    ("kind: MetricsSnapshot\nmetrics: {cpu: {n1: {value: 1, age: soon}}}\n", "metrics.cpu.n1.age"),
    ("kind: MetricsSnapshot\nmetrics: {cpu: {n1: {value: 1, when: 2}}}\n", "metrics.cpu.n1.when: unknown field"),
    ("kind: MetricsSnapshot\nmetric: {}\n", "metric: unknown field"),
    ("kind: Pod\n", "no document of kind MetricsSnapshot"),
    ("kind: [\n", "bad.yaml: line 2, column 1: invalid YAML: "),
])
def test_snapshot_errors_name_the_field(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_snapshot(str(path))
    assert message in str(err.value)


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _reader(hub, policy=None, source_args=None, metric="cpu"):
    source_args = source_args or SourceArgs()
    source = hub.source(plugin="P", metric=metric, address="", query="q", source_args=source_args)
    return MetricReader(hub, "P", metric, source, policy or DataPolicyArgs(), source_args)


def _hub(values, clock):
    return SourceHub(snapshot=MetricsSnapshot({"cpu": values}), clock=clock)


def test_reader_states_ages_and_default_max_age():
    clock = Clock()
    hub = _hub({"n1": (0.5, 0.0), "n2": (0.2, 89.0), "n3": (0.9, 91.0)}, clock)
    reader = _reader(hub)  # maxAge unset: 3 x refreshInterval (30s) = 90s
    cache = make_cache([make_node(n) for n in ("n1", "n2", "n3", "n4")])
    reading = reader.read(NodeBatch(cache.table, cache.table.rows()))
    assert reading.state.tolist() == [0, 0, 1, 2]  # fresh, fresh, stale, missing
    assert reading.ages[:3].tolist() == [0.0, 89.0, 91.0] and np.isnan(reading.ages[3])
    assert not reading.fail_open
    # Failing open is about the whole cluster: a batch of stale and missing nodes does not, n1 is fresh.
    assert not reader.read(NodeBatch(cache.table, cache.table.rows()[2:])).fail_open
    scores = reader.apply_policy(np.array([10, 20, 30, 40]), reading)
    assert scores.tolist() == [10, 20, 50, 50]
    assert hub.telemetry.collector_registry.get_sample_value(
        "scorer_metrics_policy_nodes_total", {"plugin": "P", "state": "stale", "policy": "neutral"}) == 1.0
    clock.now += 10  # n2 ages past 90s
    assert reader.read(NodeBatch(cache.table, cache.table.rows())).state.tolist() == [0, 1, 1, 2]


@pytest.mark.parametrize(("on_missing", "expected"), [
    ("neutral", [10, 50, 50]), ("min", [10, 0, 0]), ("max", [10, 100, 100]), ("filter", [10, 0, 0]),
])
def test_policy_scores(on_missing, expected):
    clock = Clock()
    hub = _hub({"n1": (0.5, 0.0), "n2": (0.2, 600.0)}, clock)
    reader = _reader(hub, DataPolicyArgs(on_missing=on_missing))
    cache = make_cache([make_node(n) for n in ("n1", "n2", "n3")])
    reading = reader.read(NodeBatch(cache.table, cache.table.rows()))
    assert reader.apply_policy(np.array([10, 20, 30]), reading).tolist() == expected


def test_filter_policy_rejects_and_fails_open_without_fresh_data():
    clock = Clock()
    hub = _hub({"n1": (0.5, 0.0), "n2": (0.2, 600.0)}, clock)
    reader = _reader(hub, DataPolicyArgs(on_missing="filter", max_age=timedelta(seconds=60)))
    cache = make_cache([make_node(n) for n in ("n1", "n2", "n3")])
    batch = NodeBatch(cache.table, cache.table.rows())
    verdict = FilterVerdict(3)
    reader.filter_unusable(reader.read(batch), verdict)
    assert [verdict.status_at(i).reasons for i in range(3)] == [
        (), ("node(s) had stale cpu metrics (older than 60s)",), ("node(s) had no cpu metrics",)]
    clock.now += 120  # now nothing is fresh: fail open, nobody is rejected, everyone neutral
    reading = reader.read(batch)
    assert reading.fail_open
    verdict = FilterVerdict(3)
    reader.filter_unusable(reading, verdict)
    assert not verdict.failed.any()
    assert reader.apply_policy(np.array([10, 20, 30]), reading).tolist() == [50, 50, 50]


def test_in_flight_counts_until_a_later_sample_and_expires():
    clock = Clock(1000.0)
    hub = _hub({"n1": (0.5, 0.0), "n2": (0.5, 0.0)}, clock)
    reader = _reader(hub, DataPolicyArgs(in_flight=InFlightArgs(settle_time=timedelta(seconds=30),
                                                                 ttl=timedelta(seconds=300))))
    cache = make_cache([make_node("n1"), make_node("n2")])
    batch = NodeBatch(cache.table, cache.table.rows())
    hub.in_flight.placed(make_pod("a"), "n2", at=1000.0)
    hub.in_flight.placed(make_pod("a"), "n2", at=1005.0)  # the same placement again: keeps its time
    hub.in_flight.placed(make_pod("b"), "n2", at=1000.0)
    hub.in_flight.placed(make_pod("old"), "n1", at=960.0)  # sampled 1000 >= 960 + 30: already visible
    reading = reader.read(batch)
    assert reading.in_flight_counts().tolist() == [0, 2]
    assert reading.in_flight_sum(np.array([1.5, 2.5])).tolist() == [0.0, 4.0]
    assert hub.in_flight.entries["default/a"].placed_at == 1000.0
    recreated = attrs.evolve(make_pod("a"), uid="new-uid")  # deleted and re-created: a new placement
    hub.in_flight.placed(recreated, "n2", at=1010.0)
    assert hub.in_flight.entries["default/a"].placed_at == 1010.0
    hub.in_flight.placed(make_pod("ghost"), "gone-node", at=1000.0)  # a node not in the table
    hub.in_flight.removed(make_pod("b").key)
    assert reader.read(batch).in_flight_counts().tolist() == [0, 1]
    hub.in_flight.removed(make_pod("ghost").key)
    clock.now = 1400.0  # past the ttl
    assert reader.read(batch).in_flight_counts().tolist() == [0, 0]
    assert hub.in_flight.entries == {}


def test_in_flight_columns_follow_placements_between_reads():
    """Placements between reads are appended to the tracker's columns; a removal, or a node added to the
    table, rebuilds them: each read sees exactly the entries there are, on the right nodes."""
    clock = Clock(1000.0)
    hub = _hub({"n1": (0.5, 0.0), "n2": (0.5, 0.0)}, clock)
    reader = _reader(hub, DataPolicyArgs(in_flight=InFlightArgs(settle_time=timedelta(seconds=30))))
    cache = make_cache([make_node("n1"), make_node("n2")])
    batch = NodeBatch(cache.table, cache.table.rows())
    hub.in_flight.placed(make_pod("a"), "n2", at=1000.0)
    assert reader.read(batch).in_flight_counts().tolist() == [0, 1]
    hub.in_flight.placed(make_pod("b"), "n1", at=1000.0)
    hub.in_flight.placed(make_pod("c"), "n3", at=1000.0)  # not a node yet
    reading = reader.read(batch)
    assert reading.in_flight_counts().tolist() == [1, 1]
    assert [p.name for p in reading.in_flight_pods] == ["a", "b"]
    hub.in_flight.removed(make_pod("a").key)
    hub.in_flight.placed(make_pod("d"), "n2", at=1000.0)
    assert [p.name for p in reader.read(batch).in_flight_pods] == ["b", "d"]
    cache.add_node(make_node("n3"))
    batch = NodeBatch(cache.table, cache.table.rows())
    assert reader.read(batch).in_flight_counts().tolist() == [1, 1, 1]


def test_in_flight_sums_by_node_match_the_pods_one_by_one():
    """``in_flight_load`` (sums by row kept across reads, updated per placement) and ``in_flight_each``
    give exactly the floats of summing over ``in_flight_pods``, through placements, a removal, a
    later sample and a batch that is a subset of the nodes."""
    clock = Clock(1000.0)
    hub = _hub({"n1": (0.5, 0.0), "n2": (0.5, 0.0), "n3": (0.5, 0.0)}, clock)
    reader = _reader(hub, DataPolicyArgs(in_flight=InFlightArgs(settle_time=timedelta(seconds=30))))
    cache = make_cache([make_node(n) for n in ("n1", "n2", "n3")])
    rng = np.random.default_rng(7)
    cpu = {}

    def quantity(pod):
        return cpu[pod.name] * 0.85

    def check(batch):
        reading = reader.read(batch)
        one_by_one = reading.in_flight_sum(np.array([quantity(p) for p in reading.in_flight_pods]))
        assert reading.in_flight_load(quantity).tolist() == one_by_one.tolist()
        for per_pod in (0.1, 1 / 3, 0.0, -0.7, 1e308, np.nan):
            each = reading.in_flight_sum(np.full(len(reading.in_flight_pods), per_pod))
            np.testing.assert_array_equal(reading.in_flight_each(per_pod), each)
        assert reading.in_flight_counts().tolist() == np.bincount(reading.in_flight_positions,
                                                                  minlength=len(batch)).tolist()

    every = NodeBatch(cache.table, cache.table.rows())
    for i in range(40):
        cpu[f"p{i}"] = float(rng.uniform(1, 1000))
        hub.in_flight.placed(make_pod(f"p{i}"), f"n{1 + i % 3}", at=1000.0 + i)
        check(every if i % 2 else NodeBatch(cache.table, cache.table.rows()[1:]))
        if i == 20:
            hub.in_flight.removed(make_pod("p3").key)
    check(every)
    assert reader.read(every).in_flight_counts().tolist() == [13, 13, 13]


def test_in_flight_is_counted_when_a_reading_first_needs_it():
    """A read counts no new placement (a plugin keeping its results by row asks for none); the first
    reading asked counts every entry it saw, many at once or a few one by one, with the floats of
    summing pod by pod; an earlier reading asked after a later one still gives just its own entries."""
    clock = Clock(1000.0)
    hub = _hub({"n1": (0.5, 0.0), "n2": (0.5, 0.0), "n3": (0.5, 0.0)}, clock)
    reader = _reader(hub, DataPolicyArgs(in_flight=InFlightArgs(settle_time=timedelta(seconds=30))))
    cache = make_cache([make_node(n) for n in ("n1", "n2", "n3")])
    every = NodeBatch(cache.table, cache.table.rows())

    def quantity(pod):
        return int(pod.name[1:]) * 0.1

    def expected(reading):
        return reading.in_flight_sum(np.array([quantity(p) for p in reading.in_flight_pods])).tolist()

    hub.in_flight.placed(make_pod("p0"), "n1", at=1000.0)
    reader.read(every).in_flight_load(quantity)  # the sums by row exist from here on
    for i in range(1, 13):
        hub.in_flight.placed(make_pod(f"p{i}"), f"n{1 + i % 3}", at=1000.0)
    earlier = reader.read(every)
    flight = earlier._in_flight
    assert flight is not None and flight.seen == 1  # nothing counted by the read
    hub.in_flight.placed(make_pod("p13"), "n2", at=1000.0)
    later = reader.read(every)
    assert later.in_flight_load(quantity).tolist() == expected(later)  # 13 new entries at once
    assert flight.seen == 14
    assert earlier.in_flight_counts().tolist() == [5, 4, 4]  # its own 13 entries, not the 14th
    assert earlier.in_flight_load(quantity).tolist() == expected(earlier)
    for i in range(14, 17):
        hub.in_flight.placed(make_pod(f"p{i}"), "n3", at=1000.0)
    last = reader.read(every)
    assert last.in_flight_load(quantity).tolist() == expected(last)  # three, one by one
    assert last.in_flight_counts().tolist() == [5, 5, 7]


def test_a_reader_reads_once_per_cycle_given_the_cycle_state():
    """With the cycle's state, later batches of the same table get the first reading's time, states and
    in-flight pods (Filter's chunks and Score see one view); another table, or no state, reads anew."""
    clock = Clock(1000.0)
    hub = _hub({"n1": (0.5, 0.0), "n2": (0.2, 85.0), "n3": (0.9, 0.0)}, clock)
    reader = _reader(hub)  # maxAge 90s
    cache = make_cache([make_node(n) for n in ("n1", "n2", "n3")])
    state = CycleState()
    first = reader.read(NodeBatch(cache.table, cache.table.rows()[:2]), state=state)
    clock.now += 10  # n2 turns stale, and a pod is placed on n3: not within this cycle's view
    hub.in_flight.placed(make_pod("p"), "n3", at=clock.now)
    later = reader.read(NodeBatch(cache.table, cache.table.rows()[1:]), state=state)
    assert later.now == first.now == 1000.0
    assert later.state.tolist() == [0, 0] and later.values.tolist() == [0.2, 0.9]
    assert later.in_flight_counts().tolist() == [0, 0]
    fresh = reader.read(NodeBatch(cache.table, cache.table.rows()[1:]))
    assert fresh.state.tolist() == [1, 0] and fresh.in_flight_counts().tolist() == [0, 1]
    other = make_cache([make_node(n) for n in ("n3", "n1")])
    assert reader.read(NodeBatch(other.table, other.table.rows()), state=state).in_flight_counts().tolist() == [1, 0]


def test_states_follow_the_clock_both_ways():
    """States are kept between reads until a fresh value ages past maxAge, and recomputed when the
    clock goes back."""
    clock = Clock()
    hub = _hub({"n1": (0.5, 0.0), "n2": (0.2, 50.0), "n3": (0.9, 95.0)}, clock)
    reader = _reader(hub)  # maxAge 90s
    cache = make_cache([make_node(n) for n in ("n1", "n2", "n3")])
    batch = NodeBatch(cache.table, cache.table.rows())
    assert reader.read(batch).state.tolist() == [0, 0, 1]
    clock.now += 40  # n2 is 90s old: still fresh
    assert reader.read(batch).state.tolist() == [0, 0, 1]
    clock.now += 1
    reading = reader.read(batch)
    assert reading.state.tolist() == [0, 1, 1] and reading.usable.tolist() == [True, False, False]
    clock.now -= 30  # back in time: n2 is 61s old again
    assert reader.read(batch).state.tolist() == [0, 0, 1]
    assert reader.read(batch).ages.tolist() == [11.0, 61.0, 106.0]


def test_in_flight_disabled():
    clock = Clock()
    hub = _hub({"n1": (0.5, 0.0)}, clock)
    reader = _reader(hub, DataPolicyArgs(in_flight=InFlightArgs(enabled=False)))
    cache = make_cache([make_node("n1")])
    hub.in_flight.placed(make_pod("a"), "n1", at=clock.now)
    assert reader.read(NodeBatch(cache.table, cache.table.rows())).in_flight_counts().tolist() == [0]


def test_reader_follows_node_layout_changes():
    clock = Clock()
    hub = _hub({"n1": (1.0, 0.0), "n2": (2.0, 0.0), "n3": (3.0, 0.0)}, clock)
    reader = _reader(hub)
    cache = make_cache([make_node(n) for n in ("n1", "n2", "n3")])
    assert reader.read(NodeBatch(cache.table, cache.table.rows())).values.tolist() == [1.0, 2.0, 3.0]
    cache.remove_node("n1")  # the last row moves into the first
    batch = NodeBatch(cache.table, cache.table.rows())
    assert batch.names == ["n3", "n2"]
    assert reader.read(batch).values.tolist() == [3.0, 2.0]


class _ReadsCpu:
    """A minimal metric-driven score plugin for the assembly tests."""

    name = "ReadsCpu"
    policy = DataPolicyArgs()

    def __init__(self, args, handle) -> None:
        hub = source_hub(handle)
        source = hub.source(plugin=self.name, metric="cpu", address="", query="q", source_args=SourceArgs())
        self.reader = MetricReader(hub, self.name, "cpu", source, self.policy, SourceArgs())

    def score_batch(self, state, pod, nodes):
        return self.reader.apply_policy(np.zeros(len(nodes), dtype=np.int64), self.reader.read(nodes))


class _ReadsCpuWithoutInFlight(_ReadsCpu):
    name = "ReadsCpuWithoutInFlight"
    policy = DataPolicyArgs(in_flight=InFlightArgs(enabled=False))


class _ReadsCpuModule:
    __name__ = "reads_cpu"

    @staticmethod
    def scorer_register_plugins(registry):
        for cls in (_ReadsCpu, _ReadsCpuWithoutInFlight):
            registry.register(cls.name, cls, plugin_type=cls)


_ReadsCpuModule.scorer_register_plugins = hookimpl(_ReadsCpuModule.scorer_register_plugins)


def _assemble_reading(plugins, objects, **kwargs):
    from scorer.assembly import assemble
    from scorer.cluster.memory import InMemoryCluster
    from scorer.registry import build_registry

    config = None
    if plugins:
        config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                  "profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": name} for name in plugins]}}}]}
    cluster = InMemoryCluster.from_objects(objects)
    asm = assemble(config, cluster, registry=build_registry(autoload=False, modules=[_ReadsCpuModule]),
                   metrics_snapshot=MetricsSnapshot({"cpu": {"n1": (0.1, 0.0)}}), **kwargs)
    return asm, cluster


@pytest.mark.parametrize("plugins", [["ReadsCpu"], ["ReadsCpu", "ReadsCpuWithoutInFlight"],
                                     ["ReadsCpuWithoutInFlight"], []])
def test_assumed_pods_become_in_flight_through_the_cache(plugins):
    from scorer.model import LoadedObjects

    objects = LoadedObjects(nodes=[make_node("n1")])
    asm, _ = _assemble_reading(plugins, objects)
    asm.cache.load(objects.nodes, [], [])
    pod = make_pod("p")
    asm.cache.assume(pod, "n1")
    if "ReadsCpu" not in plugins:
        # No reader counts in-flight load: placements are not recorded (nothing would prune them).
        assert asm.cache.placement_listeners == [] and asm.sources.in_flight.entries == {}
        return
    assert asm.sources.in_flight.entries["default/p"].node == "n1"
    asm.cache.forget(pod)
    assert asm.sources.in_flight.entries == {}


async def test_pods_bound_by_any_scheduler_become_in_flight_once():
    from scorer.model import LoadedObjects

    now = [1000.0]
    listed = make_pod("listed", node_name="n1")
    mine, theirs = make_pod("mine"), make_pod("theirs", scheduler_name="other-scheduler")
    objects = LoadedObjects(nodes=[make_node("n1"), make_node("n2")], pods=[listed, mine, theirs])
    asm, cluster = _assemble_reading(["ReadsCpu"], objects, metrics_clock=lambda: now[0])
    cluster.start(asm.handlers)
    entries = asm.sources.in_flight.entries
    assert entries == {}  # pods bound before the scheduler started are in the metrics already
    heard = []
    asm.cache.placement_listeners.append(lambda pod, node: heard.append((pod.name, node)))

    turn = asm.scheduler.schedule_one()
    now[0] = 1010.0
    assert await turn.binding  # the watch confirms the assumed pod: the same placement, heard once
    await cluster.bind(theirs, "n2")  # another scheduler binds its pod
    assert heard == [("mine", turn.node), ("theirs", "n2")]
    assert {key: (e.node, e.placed_at) for key, e in entries.items()} == {
        "default/mine": (turn.node, 1000.0), "default/theirs": ("n2", 1010.0)}
    cluster.delete(cluster.pods[theirs.key])  # gone: its load with it
    assert list(entries) == ["default/mine"]


def test_hub_shares_sources_and_names_them():
    hub = SourceHub()
    a = hub.source(plugin="A", metric="net", address="http://127.0.0.1:9", query="q1", source_args=SourceArgs())
    b = hub.source(plugin="B", metric="net", address="http://127.0.0.1:9/", query="q1", source_args=SourceArgs())
    c = hub.source(plugin="C", metric="net", address="http://127.0.0.1:9", query="q2", source_args=SourceArgs())
    assert a is b and c is not a
    assert sorted(hub.sources) == ["net", "net#2"]
    with pytest.raises(ValueError, match="args.address: Required value"):
        hub.source(plugin="D", metric="x", address="", query="q", source_args=SourceArgs())
    # The hub checks TLS files when it builds a Prometheus source (args built without validation);
    # a snapshot's source never reads them (config validation checks them for every run).
    with pytest.raises(ValueError, match="args.source.caFile: file '/nonexistent/ca.pem' does not exist"):
        hub.source(plugin="E", metric="y", address="https://p:9090", query="q",
                   source_args=SourceArgs(ca_file="/nonexistent/ca.pem"))
    static = make_source_hub({"y": {"n1": 1.0}})
    assert static.source(plugin="E", metric="y", address="", query="q",
                         source_args=SourceArgs(ca_file="/nonexistent/ca.pem")).data.values == {"n1": 1.0}


def test_snapshot_without_the_metric_warns_and_has_no_data():
    hub = make_source_hub({"cpu": {"n1": 0.5}})
    source = hub.source(plugin="P", metric="memory", address="", query="q", source_args=SourceArgs())
    assert source.data.values == {}
    assert hub.warnings == ["P: the metrics snapshot (test snapshot) has no metric 'memory'; "
                            "every node has no data for it"]


def test_source_gauges_are_computed_at_collection():
    clock = Clock(1000.0)
    nodes = [make_node("n1"), make_node("n2")]
    hub = SourceHub(lambda: nodes, snapshot=MetricsSnapshot({"cpu": {"n1": (0.5, 30.0)}}), clock=clock)
    hub.source(plugin="P", metric="cpu", address="", query="q", source_args=SourceArgs())
    sample = hub.collector_registry.get_sample_value
    assert sample("scorer_metrics_source_up", {"source": "cpu"}) == 1.0
    assert sample("scorer_metrics_source_nodes_without_data", {"source": "cpu"}) == 1.0
    assert sample("scorer_metrics_source_value_age_seconds", {"source": "cpu", "bound": "oldest"}) == 30.0
    clock.now += 15
    assert sample("scorer_metrics_source_value_age_seconds", {"source": "cpu", "bound": "oldest"}) == 45.0
    assert sample("scorer_metrics_source_errors_total", {"source": "cpu", "kind": "timeout"}) == 0.0


@pytest.mark.parametrize(("args", "path", "message"), [
    ({"source": {"refreshInterval": "500ms"}}, "source.refreshInterval", "must be at least 1s"),
    ({"source": {"queryTimeout": "0s"}}, "source.queryTimeout", "must be greater than 0"),
    ({"source": {"nodeMapping": {"by": "zone"}}}, "source.nodeMapping.by", "Unsupported value"),
    ({"policy": {"onMissing": "zero"}}, "policy.onMissing", "Unsupported value"),
    ({"policy": {"maxAge": "-1s"}}, "policy.maxAge", "must be greater than 0"),
    ({"policy": {"inFlight": {"ttl": "0s"}}}, "policy.inFlight.ttl", "must be greater than 0"),
])
def test_shared_args_validation(args, path, message):
    import attrs

    from scorer.config.convert import structure
    from scorer.errors import ConfigError

    @attrs.frozen(slots=True, kw_only=True)
    class Holder:
        source: SourceArgs = SourceArgs()
        policy: DataPolicyArgs = DataPolicyArgs()

    globals()["Holder"] = Holder  # convert resolves annotations at module level
    with pytest.raises(ConfigError) as err:
        structure(Holder, args, "args")
    assert any(p == f"args.{path}" and message in m for p, m in err.value.errors), err.value.errors
