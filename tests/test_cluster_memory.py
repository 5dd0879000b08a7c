"""The in-memory cluster (scorer.cluster.memory): Binder, EventSink and ClusterSource as a
kube-apiserver with an instant watch would be."""

from __future__ import annotations

import asyncio

import attrs
import pytest

from scorer.cluster.interface import (
    BindConflict,
    Binder,
    ClusterSource,
    ClusterWriter,
    EventSink,
    ObjectHandlers,
)
from scorer.cluster.memory import InMemoryCluster
from scorer.errors import ScorerError
from scorer.eventhandlers import EventHandlers
from scorer.model import LabelSelector, Namespace, PodDisruptionBudget, SelectorOwner, load_objects
from scorer.testing import make_node, make_pod


class Recording:
    """ObjectHandlers that list the calls they get."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        if not name.startswith("on_"):
            raise AttributeError(name)
        return lambda *objs: self.calls.append((name, *(getattr(o, "key", None) or o.name for o in objs)))


def test_it_implements_the_cluster_protocols():
    cluster = InMemoryCluster([], [], [])
    for protocol in (Binder, EventSink, ClusterWriter, ClusterSource):
        assert isinstance(cluster, protocol)


def test_start_lists_namespaces_nodes_then_pods_and_syncs():
    cluster = InMemoryCluster([make_node("n1")], [make_pod("p"), make_pod("q", node_name="n1")],
                              [Namespace(name="default")])
    handlers = Recording()
    assert not cluster.has_synced()
    cluster.start(handlers)
    assert cluster.has_synced()
    assert handlers.calls == [("on_namespace_add", "default"), ("on_node_add", "n1"),
                              ("on_pod_add", "default/p"), ("on_pod_add", "default/q")]
    with pytest.raises(RuntimeError, match="already started"):
        cluster.start(handlers)


def test_start_lists_workloads_after_namespaces_before_nodes():
    service = SelectorOwner(kind="Service", name="web", selector=LabelSelector(match_labels={"app": "web"}))
    budget = PodDisruptionBudget(name="web")  # same name, another kind: both kept
    cluster = InMemoryCluster([make_node("n1")], [make_pod("p")], [Namespace(name="default")], [service, budget])
    assert set(cluster.workloads) == {"Service/default/web", "PodDisruptionBudget/default/web"}
    handlers = Recording()
    cluster.start(handlers)
    assert handlers.calls == [
        ("on_namespace_add", "default"), ("on_workload_add", "Service/default/web"),
        ("on_workload_add", "default/web"), ("on_node_add", "n1"), ("on_pod_add", "default/p"),
    ]


def test_from_objects_takes_the_workloads_of_a_cluster_file():
    loaded = load_objects(
        "kind: Service\nmetadata: {name: web}\nspec: {selector: {app: web}}\n---\n"
        "kind: PodDisruptionBudget\napiVersion: policy/v1\nmetadata: {name: web}\n"
        "spec: {selector: {matchLabels: {app: web}}}\n",
        "c.yaml",
    )
    cluster = InMemoryCluster.from_objects(loaded)
    assert list(cluster.workloads.values()) == loaded.workloads


def test_workload_changes_reach_the_handlers():
    service = SelectorOwner(kind="Service", name="web")
    reselected = attrs.evolve(service, selector=LabelSelector(match_labels={"app": "web"}))
    replica_set = SelectorOwner(kind="ReplicaSet", name="web")
    cluster = InMemoryCluster([], [], [])
    handlers = Recording()
    cluster.start(handlers)
    for obj in (service, reselected, replica_set):
        cluster.apply(obj)
    cluster.delete(reselected)
    cluster.delete(reselected)  # gone already: ignored
    assert handlers.calls == [
        ("on_workload_add", "Service/default/web"),
        ("on_workload_update", "Service/default/web", "Service/default/web"),
        ("on_workload_add", "ReplicaSet/default/web"),
        ("on_workload_delete", "Service/default/web"),
    ]
    assert list(cluster.workloads.values()) == [replica_set]


async def test_run_starts_and_waits_until_cancelled():
    cluster = InMemoryCluster([make_node("n1")], [], [])
    handlers = Recording()
    task = asyncio.create_task(cluster.run(handlers))
    await asyncio.wait_for(cluster.wait_for_sync(), timeout=5)
    assert handlers.calls == [("on_node_add", "n1")] and not task.done()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_changes_reach_the_handlers_as_a_watch_would_deliver_them():
    node, pod, ns = make_node("n1"), make_pod("p"), Namespace(name="shop")
    cluster = InMemoryCluster([], [], [])
    handlers = Recording()
    cluster.start(handlers)
    for obj in (node, node, pod, pod, ns, ns):
        cluster.apply(obj)
    for obj in (pod, node, ns, ns):
        cluster.delete(obj)
    assert handlers.calls == [
        ("on_node_add", "n1"), ("on_node_update", "n1", "n1"), ("on_pod_add", "default/p"),
        ("on_pod_update", "default/p", "default/p"), ("on_namespace_add", "shop"),
        ("on_namespace_update", "shop", "shop"), ("on_pod_delete", "default/p"), ("on_node_delete", "n1"),
        ("on_namespace_delete", "shop"),
    ]
    assert cluster.nodes == {} and cluster.pods == {} and cluster.namespaces == {}


async def test_bind_sets_the_node_and_delivers_the_bound_pod():
    pod = make_pod("p", cpu="1", labels={"app": "web"})
    cluster = InMemoryCluster([make_node("n1")], [pod], [])
    handlers = Recording()
    cluster.start(handlers)
    await cluster.bind(pod, "n1")
    bound = cluster.pods[pod.key]
    assert bound == attrs.evolve(pod, node_name="n1")
    assert bound.requests == pod.requests and bound.non_zero_cpu == pod.non_zero_cpu
    assert cluster.conditions[pod.key].status == "True" and cluster.binds == 1
    assert handlers.calls[-1] == ("on_pod_update", "default/p", "default/p")


@pytest.mark.parametrize(("change", "message", "error"), [
    ("gone", "pod default/p not found", BindConflict),
    ("recreated", "pod default/p not found", BindConflict),
    ("bound", "pod default/p is already assigned to node 'n1'", BindConflict),
    # Not a conflict: the binding cycle retries the pod (elsewhere, as the node is gone).
    ("no-node", "node 'n9' not found", ScorerError),
])
async def test_bind_conflicts(change, message, error):
    pod = make_pod("p")
    cluster = InMemoryCluster([make_node("n1")], [pod], [])
    node = "n1"
    if change == "gone":
        del cluster.pods[pod.key]
    elif change == "recreated":
        cluster.pods[pod.key] = attrs.evolve(pod, uid="other")
    elif change == "bound":
        cluster.pods[pod.key] = attrs.evolve(pod, node_name="n1")
    else:
        node = "n9"
    with pytest.raises(error, match=message) as raised:
        await cluster.bind(pod, node)
    assert isinstance(raised.value, BindConflict) == (error is BindConflict)


async def test_a_late_unschedulable_condition_does_not_undo_a_binding():
    pod = make_pod("p")
    cluster = InMemoryCluster([make_node("n1")], [pod], [])
    await cluster.write_pod_condition(pod, "False", "Unschedulable", "0/1 nodes are available")
    assert cluster.conditions[pod.key].reason == "Unschedulable"
    await cluster.bind(pod, "n1")
    await cluster.write_pod_condition(pod, "False", "Unschedulable", "written before the bind")
    assert cluster.conditions[pod.key].status == "True"
    await cluster.write_event(pod, "Normal", "Scheduled", "Binding", "ok")
    assert [(e.pod, e.reason) for e in cluster.events] == [("default/p", "Scheduled")]


def test_protocol_for_handlers_is_what_the_event_handlers_implement():
    assert issubclass(EventHandlers, ObjectHandlers)


async def test_preemption_writes_of_the_in_memory_cluster():
    victim, pending = make_pod("victim", node_name="n1"), make_pod("pending")
    cluster = InMemoryCluster([make_node("n1")], [victim, pending], [])
    await cluster.write_pod_condition(pending, "False", "Unschedulable", "0/1", nominated_node="n1")
    assert cluster.pods["default/pending"].nominated_node_name == "n1"
    await cluster.write_pod_condition(pending, "False", "Unschedulable", "0/1")  # None: left as it is
    assert cluster.pods["default/pending"].nominated_node_name == "n1"
    await cluster.clear_nominated_node(pending)
    assert cluster.pods["default/pending"].nominated_node_name == ""
    await cluster.delete_pod(attrs.evolve(victim, uid="other"))  # another incarnation: left alone
    assert "default/victim" in cluster.pods
    await cluster.delete_pod(victim)
    assert "default/victim" not in cluster.pods and cluster.preempted == ["default/victim"]
    await cluster.delete_pod(victim)  # already gone: fine
