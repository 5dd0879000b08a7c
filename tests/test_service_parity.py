"""kube-scheduler parity against a real kube-apiserver: default spreading of a ReplicaSet's pods,
and pod affinity that is evaluated, not refused.

No controller manager runs: the ReplicaSet and the Service are inert API objects that scorer reads
through its reflectors, and the test creates the pods they would own.
"""

from __future__ import annotations

from collections import Counter

import pytest
from kubekit import ControlPlane
from servicekit import Cluster, ScorerProcess, node_manifest, pod_manifest, scheduler_config, wait_until

pytestmark = [pytest.mark.kube, pytest.mark.slow]

ZONE = "topology.kubernetes.io/zone"


@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    with ControlPlane(tmp_path_factory.mktemp("parity-plane")) as control_plane:
        yield control_plane


@pytest.fixture
def cluster(plane):
    api = Cluster(plane)
    yield api
    api.delete_all_nodes()


@pytest.fixture
def scorer(plane, tmp_path):
    started: list[ScorerProcess] = []

    def start(scheduler: str) -> ScorerProcess:
        config = scheduler_config(tmp_path / f"{scheduler}.yaml", scheduler)
        proc = ScorerProcess(tmp_path, config, plane.kubeconfig, name=scheduler, extra_args=("--seed", "3"))
        started.append(proc)
        proc.wait_ready()
        return proc

    yield start
    for proc in started:
        proc.stop()


def bound_when(cluster: Cluster, namespace: str, count: int) -> dict[str, str] | None:
    """The bound pods of ``namespace`` once there are ``count`` of them."""
    bound = cluster.bound(namespace)
    return bound if len(bound) == count else None


def test_replicaset_pods_spread_across_zones_by_the_system_default_constraints(cluster, scorer):
    namespace, scheduler = "spread", "scorer-spread"
    cluster.ensure_namespace(namespace)
    # One big node in zone a, a small one in b and c: without spreading, every pod would go to the
    # big node (NodeResourcesFit and BalancedAllocation both prefer it, by a few points).
    cluster.create_all([node_manifest("a1", cpu="64", memory="256Gi", labels={ZONE: "a"}),
                        node_manifest("b1", cpu="4", memory="16Gi", labels={ZONE: "b"}),
                        node_manifest("c1", cpu="4", memory="16Gi", labels={ZONE: "c"})])
    template = {"metadata": {"labels": {"app": "web"}},
                "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "pause"}]}}
    cluster.call("POST", f"/apis/apps/v1/namespaces/{namespace}/replicasets",
                 {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web"},
                  "spec": {"replicas": 6, "selector": {"matchLabels": {"app": "web"}}, "template": template}})
    proc = scorer(scheduler)
    wait_until(lambda: proc.metric("scorer_reflector_lists_total", {"resource": "replicasets"}) >= 1, 20,
               "the ReplicaSet reflector listed")

    # Control: pods no ReplicaSet or Service selects have no default constraints and all go to a1.
    cluster.create_all([pod_manifest(f"solo-{i}", namespace=namespace, scheduler=scheduler,
                                     labels={"app": "solo"}) for i in range(3)])
    solo = wait_until(lambda: bound_when(cluster, namespace, 3), 30, "3 solo pods bound")
    assert set(solo.values()) == {"a1"}

    cluster.create_all([pod_manifest(f"web-{i}", namespace=namespace, scheduler=scheduler,
                                     labels={"app": "web"}) for i in range(6)])
    bound = wait_until(lambda: bound_when(cluster, namespace, 9), 30, "6 web pods bound")
    zones = Counter({"a1": "a", "b1": "b", "c1": "c"}[node] for name, node in bound.items() if name.startswith("web"))
    assert zones == {"a": 2, "b": 2, "c": 2}, bound


def test_required_pod_anti_affinity_is_evaluated(cluster, scorer):
    namespace, scheduler = "anti", "scorer-anti"
    cluster.ensure_namespace(namespace)
    cluster.create_all([node_manifest("anti-0"), node_manifest("anti-1")])
    proc = scorer(scheduler)
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    cluster.create_all([pod_manifest(f"web-{i}", namespace=namespace, scheduler=scheduler, labels={"app": "web"},
                                     spec={"affinity": anti}) for i in range(3)])
    bound = wait_until(lambda: bound_when(cluster, namespace, 2), 30, "two web pods bound")
    assert sorted(bound.values()) == ["anti-0", "anti-1"]
    (pending,) = {"web-0", "web-1", "web-2"} - set(bound)
    events = wait_until(lambda: [e for e in cluster.events(namespace, pending) if e["reason"] == "FailedScheduling"],
                        30, "the third pod's FailedScheduling event")
    note = events[0]["note"]
    # Each node holds a web pod the pending pod's own anti-affinity excludes (kube checks that before the symmetry).
    assert note.startswith("0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules"), note
    # Parked among the unschedulable pods, rejected by InterPodAffinity (a binding of the other pods may
    # move it to be retried first: wait for it to settle).
    wait_until(lambda: proc.metric("scheduler_unschedulable_pods", {"plugin": "InterPodAffinity"}) == 1, 20,
               "the pod counted as unschedulable by InterPodAffinity")
