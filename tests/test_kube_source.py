"""scorer.kube.source.ApiSource: the ClusterSource of a real cluster (the API server behind the fault proxy)."""

from __future__ import annotations

import asyncio
import logging

import pytest
from prometheus_client import CollectorRegistry
from schedkit import build
from test_kube_reflector import Cluster, Recorder, running, sample, until

from scorer.cluster.interface import ClusterSource
from scorer.kube.apiresources import STORAGE_RESOURCES, WORKLOAD_RESOURCES
from scorer.kube.client import ApiClient
from scorer.kube.config import ClusterAccess
from scorer.kube.reflector import WATCH_COALESCE, RetryDelays
from scorer.kube.source import ApiSource
from scorer.model import LabelSelector, LabelSelectorRequirement, Pod

kube = pytest.mark.kube
pytest_plugins = ("faultproxy",)


def test_the_source_is_a_cluster_source_and_checks_its_arguments() -> None:
    client = ApiClient(ClusterAccess(server="http://127.0.0.1:9", source="test"))

    def callback(resource, raw, message):
        return None

    source = ApiSource(client, on_invalid=callback)
    assert isinstance(source, ClusterSource)
    assert list(source.reflectors) == ["namespaces", "services", "replicationcontrollers", "replicasets",
                                       "statefulsets", "poddisruptionbudgets", "nodes", "storageclasses",
                                       "csidrivers", "csinodes", "csistoragecapacities", "persistentvolumes",
                                       "persistentvolumeclaims", "pods"]
    assert all(r.on_invalid is callback for r in source.reflectors.values())
    assert all(r.delays == RetryDelays() for r in source.reflectors.values())
    delays = RetryDelays(connect=0.1, connect_cap=1.0)
    assert all(r.delays is delays for r in ApiSource(client, delays=delays).reflectors.values())
    assert {r.watch_coalesce for r in source.reflectors.values()} == {WATCH_COALESCE}
    assert {r.watch_coalesce for r in ApiSource(client, watch_coalesce=0.02).reflectors.values()} == {0.02}
    assert set(source.status().values()) == {"not started"}
    assert not source.has_synced()
    with pytest.raises(ValueError, match="unknown resources \\['deployments'\\]"):
        ApiSource(client, resources=("pods", "deployments"))


async def test_handlers_missing_a_kind_are_refused_before_anything_runs() -> None:
    source = ApiSource(ApiClient(ClusterAccess(server="http://127.0.0.1:9", source="test")))
    with pytest.raises(TypeError, match="cannot receive namespaces"):
        await source.run(object())  # type: ignore[arg-type]


@kube
async def test_namespaces_then_workloads_then_nodes_then_pods_are_delivered_in_that_order(
        control_plane, fault_proxy, proxied_client) -> None:
    cluster = Cluster(control_plane)
    cluster.namespace("src-order")
    cluster.pod("src-order", "p")
    cluster.call("POST", "/api/v1/namespaces/src-order/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}}, expect=(201, 409))
    cluster.call("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "src-node"}},
                 expect=(201, 409))
    # The namespaces list is slow: the node and pod lists are done first and must wait for it.
    fault_proxy.add(method="GET", path="^/api/v1/namespaces$", watch=False, delay=1.0)
    collector_registry = CollectorRegistry()
    source, recorder = ApiSource(proxied_client, collector_registry=collector_registry, page_size=50), Recorder()
    async with running(source.run(recorder)):
        await until(lambda: source.status()["pods"].startswith("listed, waiting"), "the pods to be listed")
        assert not source.has_synced() and recorder.events == []
        tasks = {task.get_name() for task in asyncio.all_tasks()}
        assert {"reflector:namespaces", "reflector:nodes", "reflector:pods"} <= tasks
        await asyncio.wait_for(source.wait_for_sync(), 15)
        assert source.has_synced()
        kinds = [kind for _, kind, _ in recorder.events]
        assert kinds == sorted(kinds, key=["namespace", "workload", "node", "storage", "pod"].index)
        assert {"src-order", "Service/src-order/web", "src-node", "src-order/p"} <= {
            key for _, _, key in recorder.events}
        await until(lambda: all(state.startswith("watching (listed ") for state in source.status().values()),
                    "every watch")
    for resource in source.reflectors:
        assert sample(collector_registry, "scorer_reflector_lists_total", resource=resource) == 1
    # kube-apiserver 1.20 serves PodDisruptionBudgets in policy/v1beta1 only, CSIStorageCapacities in
    # storage.k8s.io/v1alpha1 only (the session's control plane enables it: kubekit).
    assert source.reflectors["poddisruptionbudgets"].path == "/apis/policy/v1beta1/poddisruptionbudgets"
    assert source.reflectors["csistoragecapacities"].path == "/apis/storage.k8s.io/v1alpha1/csistoragecapacities"


@kube
async def test_storage_objects_made_through_the_api_reach_the_cache(control_plane, fault_proxy,
                                                                   proxied_client) -> None:
    """A StorageClass, a PV, a PVC, a CSINode, a CSIDriver and a CSIStorageCapacity arrive in cache.volumes
    through the storage handlers, and so do an update and the deletes."""
    ns = "src-storage"
    cluster = Cluster(control_plane)
    cluster.namespace(ns)
    objects = {
        "/apis/storage.k8s.io/v1/storageclasses": {
            "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "src-local"},
            "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"},
        "/api/v1/persistentvolumes": {
            "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "src-pv"},
            "spec": {"capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "src-local",
                     "local": {"path": "/mnt/disk"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In", "values": ["src-node"]}]}]}}}},
        f"/api/v1/namespaces/{ns}/persistentvolumeclaims": {
            "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "src-local",
                     "resources": {"requests": {"storage": "1Gi"}}}},
        "/apis/storage.k8s.io/v1/csinodes": {
            "apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": "src-node"},
            "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 1}}]}},
        "/apis/storage.k8s.io/v1/csidrivers": {
            "apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "src.csi.example.com"},
            "spec": {"attachRequired": False}},
        f"/apis/storage.k8s.io/v1alpha1/namespaces/{ns}/csistoragecapacities": {
            "apiVersion": "storage.k8s.io/v1alpha1", "kind": "CSIStorageCapacity", "metadata": {"name": "cap"},
            "storageClassName": "src-local", "capacity": "10Gi"},
    }
    for path, obj in objects.items():
        cluster.call("POST", path, obj)
    asm, _ = build(None, [], [])
    source = ApiSource(proxied_client, resources=("namespaces", *STORAGE_RESOURCES))
    volumes = asm.cache.volumes
    try:
        async with running(source.run(asm.handlers)):
            await asyncio.wait_for(source.wait_for_sync(), 15)
            assert volumes.classes["src-local"].volume_binding_mode == "WaitForFirstConsumer"
            assert volumes.pvs["src-pv"].capacity == 2 * 2**30
            assert volumes.pvcs[f"{ns}/data"].request == 2**30
            assert volumes.csi_nodes["src-node"].limits() == {"ebs.csi.aws.com": 1}
            assert volumes.csi_drivers["src.csi.example.com"].attach_required is False
            assert volumes.capacities[f"{ns}/cap"].capacity == 10 * 2**30
            cluster.call("PATCH", f"/api/v1/namespaces/{ns}/persistentvolumeclaims/data",
                         {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "src-node"}}})
            await until(lambda: volumes.pvcs[f"{ns}/data"].selected_node == "src-node", "the update")
            for path, obj in objects.items():
                item = f"{path}/{obj['metadata']['name']}"
                cluster.call("DELETE", item)
                if obj["kind"] in ("PersistentVolume", "PersistentVolumeClaim"):
                    # No protection controller runs here to drop the pv/pvc-protection finalizers.
                    cluster.call("PATCH", item, {"metadata": {"finalizers": None}}, expect=(200, 404))
            await until(lambda: not volumes.pvcs.get(f"{ns}/data") and "src-pv" not in volumes.pvs
                        and "src-local" not in volumes.classes and "src-node" not in volumes.csi_nodes
                        and not volumes.capacities.get(f"{ns}/cap"), "the deletes")
    finally:
        for path, obj in objects.items():
            item = f"{path}/{obj['metadata']['name']}"
            control_plane.request("DELETE", item)
            control_plane.request("PATCH", item, b'{"metadata": {"finalizers": null}}', "application/merge-patch+json")


@kube
async def test_workloads_created_updated_and_deleted_through_the_api_reach_the_cache(
        control_plane, fault_proxy, proxied_client) -> None:
    """A ReplicaSet, a Service and a PodDisruptionBudget made through the API arrive in
    cache.workloads through the event handlers, and so do their updates and deletes."""
    ns = "src-workloads"
    cluster = Cluster(control_plane)
    cluster.namespace(ns)
    labels = {"app": "shop"}
    cluster.call("POST", f"/apis/apps/v1/namespaces/{ns}/replicasets", {
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "shop"},
        "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "c", "image": "pause"}]}}}})
    asm, _ = build(None, [], [])
    source = ApiSource(proxied_client, resources=("namespaces", *WORKLOAD_RESOURCES))
    workloads = asm.cache.workloads
    pod = Pod(namespace=ns, name="p", labels={"app": "shop", "tier": "web"})

    def kinds() -> list[str]:
        return sorted(owner.kind for owner in workloads.owners_of(pod))

    async with running(source.run(asm.handlers)):
        await asyncio.wait_for(source.wait_for_sync(), 15)
        assert kinds() == ["ReplicaSet"]  # listed
        cluster.call("POST", f"/api/v1/namespaces/{ns}/services", {
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": "shop"},
            "spec": {"selector": labels, "ports": [{"port": 80}]}})
        cluster.call("POST", f"/apis/policy/v1beta1/namespaces/{ns}/poddisruptionbudgets", {
            "apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget", "metadata": {"name": "shop"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}}})
        await until(lambda: kinds() == ["ReplicaSet", "Service"] and workloads.budgets_for(ns), "the adds")
        [budget] = workloads.budgets_for(ns)
        assert budget.selector == LabelSelector(match_labels=labels) and budget.protects(pod)
        assert workloads.default_selector(pod) == LabelSelector(
            match_labels=labels,
            match_expressions=(LabelSelectorRequirement(key="app", operator="In", values=("shop",)),))
        # Updates: the Service selects another tier, the budget's status is written by the disruption
        # controller (none runs here: the test writes it).
        cluster.call("PATCH", f"/api/v1/namespaces/{ns}/services/shop", {"spec": {"selector": {"tier": "db"}}})
        status = cluster.call("GET", f"/apis/policy/v1beta1/namespaces/{ns}/poddisruptionbudgets/shop")
        status["status"] = {"disruptionsAllowed": 2, "currentHealthy": 3, "desiredHealthy": 1,
                            "expectedPods": 3, "observedGeneration": 1}
        cluster.call("PUT", f"/apis/policy/v1beta1/namespaces/{ns}/poddisruptionbudgets/shop/status", status)
        await until(lambda: kinds() == ["ReplicaSet"] and workloads.budgets_for(ns)[0].disruptions_allowed == 2,
                    "the updates")
        # Deletes.
        for path in (f"/apis/apps/v1/namespaces/{ns}/replicasets/shop", f"/api/v1/namespaces/{ns}/services/shop",
                     f"/apis/policy/v1beta1/namespaces/{ns}/poddisruptionbudgets/shop"):
            cluster.call("DELETE", path)
        await until(lambda: not workloads.owners.get(ns) and not workloads.budgets_for(ns), "the deletes")


@kube
async def test_a_crashed_reflector_task_is_logged_and_restarted(
        control_plane, fault_proxy, proxied_client, caplog) -> None:
    source, recorder = ApiSource(proxied_client, delays=RetryDelays(relist=0.05)), Recorder()
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
