"""scorer.kube.source.ApiSource: the ClusterSource of a real cluster (the API server behind the fault proxy)."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import CollectorRegistry
from test_kube_reflector import Cluster, Recorder, running, sample, until

from scorer.cluster.interface import ClusterSource
from scorer.kube.client import ApiClient
from scorer.kube.config import ClusterAccess
from scorer.kube.source import ApiSource

kube = pytest.mark.kube
pytest_plugins = ("faultproxy",)


def test_the_source_is_a_cluster_source_and_checks_its_arguments() -> None:
    client = ApiClient(ClusterAccess(server="http://127.0.0.1:9", source="test"))

    def callback(resource, raw, message):
        return None

    source = ApiSource(client, on_invalid=callback)
    assert isinstance(source, ClusterSource)
    assert list(source.reflectors) == ["namespaces", "nodes", "pods"]
    assert all(r.on_invalid is callback for r in source.reflectors.values())
    assert source.status() == {"namespaces": "not started", "nodes": "not started", "pods": "not started"}
    assert not source.has_synced()
    with pytest.raises(ValueError, match="unknown resources \\['services'\\]"):
        ApiSource(client, resources=("pods", "services"))


async def test_handlers_missing_a_kind_are_refused_before_anything_runs() -> None:
    source = ApiSource(ApiClient(ClusterAccess(server="http://127.0.0.1:9", source="test")))
    with pytest.raises(TypeError, match="cannot receive namespaces"):
        await source.run(object())  # type: ignore[arg-type]


@kube
async def test_namespaces_then_nodes_then_pods_are_delivered_in_that_order(
        control_plane, fault_proxy, proxied_client) -> None:
    cluster = Cluster(control_plane)
    cluster.namespace("src-order")
    cluster.pod("src-order", "p")
    cluster.call("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "src-node"}},
                 expect=(201, 409))
    # The namespaces list is slow: the node and pod lists are done first and must wait for it.
    fault_proxy.add(method="GET", path="^/api/v1/namespaces$", watch=False, delay=1.0)
    registry = CollectorRegistry()
    source, recorder = ApiSource(proxied_client, registry=registry, page_size=50), Recorder()
    async with running(source.run(recorder)):
        await until(lambda: source.status()["pods"].startswith("listed, waiting"), "the pods to be listed")
        assert not source.has_synced() and recorder.events == []
        tasks = {task.get_name() for task in asyncio.all_tasks()}
        assert {"reflector:namespaces", "reflector:nodes", "reflector:pods"} <= tasks
        await asyncio.wait_for(source.wait_for_sync(), 15)
        assert source.has_synced()
        kinds = [kind for _, kind, _ in recorder.events]
        assert kinds == sorted(kinds, key=["namespace", "node", "pod"].index)
        assert {"src-order", "src-node", "src-order/p"} <= {key for _, _, key in recorder.events}
        await until(lambda: set(source.status().values()) == {"watching"}, "every watch")
    for resource in ("namespaces", "nodes", "pods"):
        assert sample(registry, "scorer_reflector_lists_total", resource=resource) == 1


@kube
async def test_a_crashed_reflector_task_is_logged_and_restarted(
        control_plane, fault_proxy, proxied_client, caplog) -> None:
    source, recorder = ApiSource(proxied_client, min_backoff=0.05), Recorder()
    nodes = source.reflectors["nodes"]
    real_run = nodes.run
    calls = []

    async def crash_once(handlers):
        calls.append(handlers)
        if len(calls) == 1:
            raise RuntimeError("a bug in the reflector")
        await real_run(handlers)

    nodes.run = crash_once  # type: ignore[method-assign]
    with caplog.at_level(logging.ERROR, logger="scorer.kube.source"):
        async with running(source.run(recorder)):
            await asyncio.wait_for(source.wait_for_sync(), 15)
    assert len(calls) == 2
    [crash] = caplog.records
    assert crash.getMessage() == "task reflector:nodes crashed; restarting it" and crash.exc_info is not None
