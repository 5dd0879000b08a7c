"""Metric-driven scheduling against a REAL Prometheus (Debian's package) scraping a test exporter.

The exporter (promkit.Exporter, built with prometheus_client) publishes per-node
``node_network_receive_bytes_total`` counters growing at a rate each test sets;
the NetworkTraffic plugin queries ``rate(...)`` in bulk. Everything listens on
127.0.0.1; every wait is bounded.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest

from scorer.assembly import assemble
from scorer.cluster.memory import InMemoryCluster
from scorer.explain import explain_pod
from scorer.framework import NodeBatch
from scorer.model import LoadedObjects
from scorer.plugins.helper.metricreader import MISSING, STALE
from scorer.registry import build_registry
from scorer.simulate import simulate
from scorer.testing import make_node, make_pod

networktraffic = pytest.importorskip(
    "scorer_networktraffic", reason="contrib plugin not installed: pip install -e contrib_plugins/networktraffic")

pytestmark = pytest.mark.prometheus

COUNTER = "node_network_receive_bytes_total"
N_NODES = 10


def node_names(n: int = N_NODES) -> list[str]:
    return [f"n{i}" for i in range(n)]


def nodes(n: int = N_NODES) -> list:
    return [make_node(name, addresses=[{"type": "InternalIP", "address": f"10.0.0.{i + 1}"}])
            for i, name in enumerate(node_names(n))]


def publish(exporter, rates: dict[str, float], device: str) -> None:
    """Series of one test: each test uses its own device name, so series left by others never match."""
    for node, rate in rates.items():
        exporter.set_counter_rate(COUNTER, {"device": device, "node": node}, rate)


def rate_query(device: str) -> str:
    return f'sum by (node) (rate({COUNTER}{{device="{device}"}}[5s]))'


def config(address: str, device: str, **args) -> dict:
    plugin_args = {"address": address, "timeRange": "5s", "networkInterface": device,
                   "source": {"refreshInterval": "1s", "queryTimeout": "2s"}}
    plugin_args.update(args)
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{
            "schedulerName": "default-scheduler",
            "plugins": {"multiPoint": {"enabled": [{"name": "NetworkTraffic", "weight": 5}]}},
            "pluginConfig": [{"name": "NetworkTraffic", "args": plugin_args}],
        }],
    }


def registry():
    return build_registry(autoload=False, modules=[networktraffic])


def cluster(n_nodes: int, n_pods: int) -> LoadedObjects:
    return LoadedObjects(nodes=nodes(n_nodes), pods=[make_pod(f"p{i}", cpu="100m") for i in range(n_pods)])


@pytest.fixture(scope="module")
def prom_env(prometheus_bin, tmp_path_factory):
    """One exporter and one Prometheus for the module's tests that do not stop Prometheus."""
    from promkit import Exporter, PrometheusServer

    with Exporter() as exporter:
        with PrometheusServer(prometheus_bin, [exporter.target], scrape_interval="1s",
                              data_dir=tmp_path_factory.mktemp("prom")) as server:
            yield exporter, server


def ready(server, device: str, count: int, query: str | None = None) -> None:
    """Wait until the rate of every series of ``device`` is computable (two scrapes in the window)."""
    query = query or rate_query(device)
    server.wait_for_series(f"({query}) > 0", count, timeout=30)


def test_pods_land_on_the_quiet_nodes(prom_env):
    exporter, server = prom_env
    exporter.clear()
    rates = {name: 50e6 for name in node_names()}
    rates.update({"n3": 1e3, "n7": 2e3})
    publish(exporter, rates, "quiet")
    ready(server, "quiet", N_NODES)
    report = simulate(cluster(N_NODES, 4), config(server.url, "quiet", podTrafficEstimate=1e6), registry=registry())
    placed = Counter(p.node for p in report.placements)
    assert report.placed == 4
    assert set(placed) == {"n3", "n7"}, placed  # the in-flight estimate (1 MB/s) alternates them
    # 1e3 and 2e3 B/s both normalize to 100 next to 50 MB/s: the first pod is a tie between them.
    assert sum("NetworkTraffic +" in p.decided_by for p in report.placements) >= 2, report.placements


def test_query_count_does_not_grow_with_pods_or_nodes(prom_env):
    exporter, server = prom_env
    exporter.clear()
    publish(exporter, {name: 1e3 * (i + 1) for i, name in enumerate(node_names(50))}, "count")
    ready(server, "count", 50)
    counts = []
    for n_nodes, n_pods in ((5, 10), (50, 200)):
        before = server.query_api_calls()
        report = simulate(cluster(n_nodes, n_pods), config(server.url, "count"), registry=registry())
        counts.append(server.query_api_calls() - before)
        assert report.placed == n_pods
    assert counts == [1, 1]  # one bulk query per refresh, whatever the cluster size


def test_burst_of_identical_pods_spreads(prom_env):
    exporter, server = prom_env
    exporter.clear()
    publish(exporter, {name: 10e6 + 1e5 * i for i, name in enumerate(node_names())}, "burst")
    ready(server, "burst", N_NODES)
    report = simulate(cluster(N_NODES, 100), config(server.url, "burst"), registry=registry())
    placed = Counter(p.node for p in report.placements)
    assert report.placed == 100
    assert len(placed) == N_NODES and max(placed.values()) <= 15, placed


def test_instance_and_uname_mappings(prom_env):
    exporter, server = prom_env
    exporter.clear()
    for i, name in enumerate(node_names()):
        instance = f"10.0.0.{i + 1}:9100"
        exporter.set_counter_rate(COUNTER, {"device": "inst", "instance": instance}, 1e3 if name == "n5" else 9e6)
        exporter.set_gauge("node_uname_info", {"instance": instance, "nodename": name}, 1)
    ready(server, "inst", N_NODES, f'rate({COUNTER}{{device="inst"}}[5s])')
    server.wait_for_series("node_uname_info", N_NODES, timeout=30)
    for by in ("instance", "uname", "auto"):
        report = simulate(cluster(N_NODES, 1), config(server.url, "inst", source={
            "refreshInterval": "1s", "nodeMapping": {"by": by}}), registry=registry())
        assert report.placements[0].node == "n5", (by, report.placements[0])


def test_node_missing_from_results_and_unmatched_series(prom_env):
    exporter, server = prom_env
    exporter.clear()
    rates = {name: 5e6 for name in node_names()[:-1]}  # n9 publishes nothing
    rates["ghost"] = 1.0  # a node the cluster does not have
    publish(exporter, rates, "missing")
    ready(server, "missing", N_NODES)
    objects = cluster(N_NODES, 1)
    explanation = explain_pod(objects, config(server.url, "missing"), "p0", registry=registry())
    n9 = explanation["nodes"]["n9"]["metrics"]["network_receive_bytes_per_second"]
    assert n9 == {"plugin": "NetworkTraffic", "value": None, "ageSeconds": None, "state": "missing",
                  "inFlightPods": 0, "policy": "neutral"}
    assert explanation["nodes"]["n9"]["scores"]["NetworkTraffic"] == {
        "raw": -1, "normalized": 50, "weight": 5, "weighted": 250}
    n0 = explanation["nodes"]["n0"]["metrics"]["network_receive_bytes_per_second"]
    assert n0["state"] == "fresh" and n0["value"] > 0 and n0["ageSeconds"] < 3
    report = simulate(objects, config(server.url, "missing"), registry=registry())
    assert any("1 series matched no node" in w and 'node="ghost"' in w for w in report.warnings), report.warnings


@pytest.mark.parametrize(("query", "kind", "text"), [
    ("scorer_no_such_metric", "empty_result", "the query returned no series"),
    ("sum by (node) (rate(", "bad_query", "parse error"),
])
def test_empty_and_bad_queries_keep_scheduling(prom_env, query, kind, text):
    _, server = prom_env
    objects = cluster(N_NODES, 3)
    asm = assemble(config(server.url, "eth0", query=query), InMemoryCluster.from_objects(objects), registry=registry())
    hub = asm.sources
    asyncio.run(hub.refresh_all())
    (source,) = hub.prometheus_sources
    assert source.data.warming_up and source.data.last_error_kind == kind and text in source.data.last_error
    assert hub.collector_registry.get_sample_value("scorer_metrics_source_errors_total",
                                         {"source": source.name, "kind": kind}) == 1.0
    ready_flag, details = hub.readiness()
    assert not ready_flag and details[source.name].startswith("warming up")
    report = simulate(objects, config(server.url, "eth0", query=query), registry=registry())
    assert report.placed == 3  # warm-up fails open: neutral scores, pods still placed
    assert any(kind in w for w in report.warnings)


async def _schedule(asm, pods) -> list[str | None]:
    """Create ``pods`` in the started in-memory cluster and schedule each: one turn of the loop, bound."""
    placed = []
    cluster = asm.frameworks["default-scheduler"].handle.binder
    for pod in pods:
        cluster.apply(pod)  # the cluster source queues it
        turn = asm.scheduler.schedule_one()
        placed.append(turn.node if turn.binding is not None and await turn.binding else None)
    return placed


def _assembly(server_url: str, device: str, objects: LoadedObjects, **policy):
    args = {"policy": {"maxAge": "3s", **policy}}
    in_memory = InMemoryCluster.from_objects(objects)
    asm = assemble(config(server_url, device, **args), in_memory, registry=registry())
    in_memory.start(asm.handlers)
    return asm


async def _wait(predicate, timeout: float = 45.0, interval: float = 0.1) -> None:
    for _ in range(int(timeout / interval) + 1):
        if predicate():
            return
        await asyncio.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


def test_prometheus_down_then_back(prometheus_bin, tmp_path):
    from promkit import Exporter, PrometheusServer

    with Exporter() as exporter, PrometheusServer(prometheus_bin, [exporter.target], scrape_interval="1s",
                                                  data_dir=tmp_path / "prom") as server:
        rates = {name: 50e6 for name in node_names()}
        rates["n2"] = 1e3
        publish(exporter, rates, "eth0")
        ready(server, "eth0", N_NODES)
        objects = cluster(N_NODES, 0)
        asm = _assembly(server.url, "eth0", objects)
        hub = asm.sources
        (source,) = hub.prometheus_sources
        sample = hub.collector_registry.get_sample_value
        labels = {"source": source.name}

        async def scenario() -> None:
            hub.start()
            try:
                await _wait(lambda: not source.data.warming_up and len(source.data.values) == N_NODES)
                assert sample("scorer_metrics_source_up", labels) == 1.0
                [node] = await _schedule(asm, [make_pod("before", cpu="100m")])
                assert node == "n2"

                server.stop()
                stopped_at = time.time()
                healthy = {}  # generation -> the last good reading seen with it

                def failed() -> bool:
                    data = source.data
                    if data.healthy:
                        healthy[data.generation] = data
                    return data.last_error_kind == "connection"

                healthy[source.data.generation] = source.data
                await _wait(failed)
                kept = source.data
                # The last good values are kept with their original sample times, never zeroed or restamped.
                good = healthy[kept.generation]
                assert good.healthy and kept.last_error is not None
                assert kept.values == good.values and kept.sample_times == good.sample_times
                assert len(kept.values) == N_NODES and all(v > 0 for v in kept.values.values())
                assert max(kept.sample_times.values()) <= stopped_at and kept.last_success <= stopped_at
                assert sample("scorer_metrics_source_up", labels) == 0.0
                assert sample("scorer_metrics_source_errors_total", {**labels, "kind": "connection"}) >= 1
                last_success = sample("scorer_metrics_source_last_success_timestamp_seconds", labels)
                assert last_success == pytest.approx(kept.last_success)

                # Past maxAge (3s) every value is stale: the policy (neutral) applies, scheduling goes on.
                await _wait(lambda: time.time() - max(source.data.sample_times.values()) > 3.5)
                table = asm.cache.table
                reading = asm.frameworks["default-scheduler"].plugins["NetworkTraffic"].reader.read(
                    NodeBatch(table, table.rows()))
                assert set(reading.state.tolist()) == {STALE} and reading.fail_open
                placed = await _schedule(asm, [make_pod(f"during{i}", cpu="100m") for i in range(5)])
                assert None not in placed
                assert sample("scorer_metrics_policy_nodes_total",
                              {"plugin": "NetworkTraffic", "state": "stale", "policy": "neutral"}) >= N_NODES
                assert sample("scorer_metrics_source_value_age_seconds", {**labels, "bound": "newest"}) > 3

                server.start()
                await _wait(lambda: source.data.last_error is None and source.data.generation > kept.generation,
                            timeout=30)
                await _wait(lambda: len(source.data.values) == N_NODES
                            and max(source.data.sample_times.values()) > kept.last_success, timeout=30)
                assert sample("scorer_metrics_source_up", labels) == 1.0
                reading = asm.frameworks["default-scheduler"].plugins["NetworkTraffic"].reader.read(
                    NodeBatch(table, table.rows()))
                assert STALE not in reading.state.tolist() and MISSING not in reading.state.tolist()
            finally:
                await hub.stop()

        asyncio.run(scenario())


def test_slow_prometheus_times_out_without_blocking_cycles(prom_env):
    from promkit import DelayProxy

    exporter, server = prom_env
    exporter.clear()
    publish(exporter, {name: 1e6 for name in node_names()}, "slow")
    ready(server, "slow", N_NODES)
    with DelayProxy(server.url, delay_seconds=0.0) as proxy:
        objects = cluster(N_NODES, 0)
        cfg = config(proxy.url, "slow", source={"refreshInterval": "1s", "queryTimeout": "500ms"})
        in_memory = InMemoryCluster.from_objects(objects)
        asm = assemble(cfg, in_memory, registry=registry())
        in_memory.start(asm.handlers)
        hub = asm.sources
        (source,) = hub.prometheus_sources

        async def scenario() -> None:
            await hub.refresh_all()
            good = source.data
            assert good.healthy and len(good.values) == N_NODES
            proxy.delay = 2.0
            task = asyncio.ensure_future(source.refresh())
            await _wait(lambda: source.fetching)
            # A scheduling cycle runs while the fetch waits in its thread: cycles never wait on I/O.
            placed = await _schedule(asm, [make_pod("while-fetching", cpu="100m")])
            assert placed[0] is not None and source.fetching
            data = await task
            assert data.last_error_kind == "timeout"
            assert data.values == good.values and data.sample_times == good.sample_times
            assert data.last_success == good.last_success
            proxy.delay = 0.0
            data = await source.refresh()
            assert data.healthy and data.generation == good.generation + 1

        asyncio.run(scenario())
