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
    VolumeWriter,
)
from scorer.cluster.memory import InMemoryCluster
from scorer.errors import ScorerError, UpdateConflict
from scorer.eventhandlers import EventHandlers
from scorer.model import (
    ClaimRef,
    LabelSelector,
    Namespace,
    PersistentVolume,
    PersistentVolumeClaim,
    PodDisruptionBudget,
    SelectorOwner,
    load_objects,
)
from scorer.testing import make_csinode, make_node, make_pod, make_pv, make_pvc, make_storage_class


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


# -- storage: the VolumeWriter and the PersistentVolume controller ------------------------------


def test_storage_is_listed_after_workloads_and_before_nodes_classes_first():
    claim = make_pvc("data", storage_class="local")
    cluster = InMemoryCluster([make_node("n1")], [], [Namespace(name="default")],
                              storage=[claim, make_storage_class("local", binding_mode="WaitForFirstConsumer")])
    handlers = Recording()
    cluster.start(handlers)
    assert handlers.calls == [("on_namespace_add", "default"), ("on_storage_add", "local"),
                              ("on_storage_add", "default/data"), ("on_node_add", "n1")]


def test_from_objects_takes_the_storage_of_a_cluster_file_and_binds_immediate_claims_at_load():
    loaded = load_objects("""
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: manual}
provisioner: kubernetes.io/no-provisioner
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: big}
spec: {storageClassName: manual, capacity: {storage: 100Gi}, accessModes: [ReadWriteOnce]}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: small}
spec: {storageClassName: manual, capacity: {storage: 5Gi}, accessModes: [ReadWriteOnce, ReadOnlyMany]}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: tiny}
spec: {storageClassName: manual, capacity: {storage: 1Gi}, accessModes: [ReadWriteOnce]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data, namespace: shop, uid: c-1}
spec: {storageClassName: manual, accessModes: [ReadWriteOnce], resources: {requests: {storage: 2Gi}}}
""")
    cluster = InMemoryCluster.from_objects(loaded)
    claim, pv = cluster.pvc("shop/data"), cluster.pv("small")  # the smallest that fits
    assert claim is not None and pv is not None
    assert claim.volume_name == "small" and claim.phase == "Bound" and claim.fully_bound
    assert claim.annotations == {"pv.kubernetes.io/bind-completed": "yes",
                                 "pv.kubernetes.io/bound-by-controller": "yes"}
    assert pv.claim_ref is not None and (pv.claim_ref.key, pv.claim_ref.uid) == ("shop/data", "c-1")
    assert pv.phase == "Bound" and pv.annotations == {"pv.kubernetes.io/bound-by-controller": "yes"}
    assert int(pv.resource_version) > 0 and int(claim.resource_version) > 0
    for name in ("big", "tiny"):
        other = cluster.pv(name)
        assert other is not None and other.claim_ref is None


def test_immediate_binding_honours_selector_volume_mode_and_class():
    selected = make_pvc("data", storage_class="", spec={"selector": {"matchLabels": {"disk": "ssd"}}})
    pvs = [make_pv("hdd", labels={"disk": "hdd"}), make_pv("ssd-block", labels={"disk": "ssd"},
                                                             spec={"volumeMode": "Block"}),
           make_pv("ssd-other-class", labels={"disk": "ssd"}, storage_class="x"),
           make_pv("ssd", labels={"disk": "ssd"})]
    cluster = InMemoryCluster([], [], [], storage=[selected, *pvs])
    claim = cluster.pvc("default/data")
    assert claim is not None and claim.volume_name == "ssd"


def test_a_wait_for_first_consumer_claim_waits_then_binds_when_the_scheduler_writes_the_claim_ref():
    local = make_storage_class("local", binding_mode="WaitForFirstConsumer")
    storage = [local, make_pv("pv-1", storage_class="local"), make_pvc("data", storage_class="local")]
    cluster = InMemoryCluster([make_node("n1")], [], [], storage=storage)
    handlers = Recording()
    cluster.start(handlers)
    claim, pv = cluster.pvc("default/data"), cluster.pv("pv-1")
    assert claim is not None and pv is not None
    assert claim.volume_name == "" and pv.claim_ref is None  # the controller waits for the scheduler
    handlers.calls.clear()

    ref = ClaimRef(namespace="default", name="data", uid=claim.uid)
    written = asyncio.run(cluster.update_persistent_volume(attrs.evolve(pv, claim_ref=ref)))
    assert written.claim_ref == ref and int(written.resource_version) > int(pv.resource_version)
    bound_pv, bound_claim = cluster.pv("pv-1"), cluster.pvc("default/data")
    assert bound_pv is not None and bound_claim is not None
    assert bound_pv.phase == "Bound" and "pv.kubernetes.io/bound-by-controller" not in bound_pv.annotations
    assert bound_claim.volume_name == "pv-1" and bound_claim.fully_bound and bound_claim.phase == "Bound"
    assert bound_claim.annotations["pv.kubernetes.io/bound-by-controller"] == "yes"
    # the write, then the controller's two updates, all delivered
    assert handlers.calls == [("on_storage_update", "pv-1", "pv-1"), ("on_storage_update", "pv-1", "pv-1"),
                              ("on_storage_update", "default/data", "default/data")]


def test_a_selected_node_on_a_claim_provisions_a_volume_on_that_node_and_binds_it():
    fast = make_storage_class("fast", provisioner="ebs.csi.aws.com", binding_mode="WaitForFirstConsumer")
    node = make_node("n1", labels={"kubernetes.io/hostname": "host-1"})
    cluster = InMemoryCluster([node], [], [], storage=[fast, make_pvc("data", storage_class="fast", request="3Gi")])
    handlers = Recording()
    cluster.start(handlers)
    claim = cluster.pvc("default/data")
    assert claim is not None and claim.volume_name == ""
    annotated = attrs.evolve(claim, annotations={**claim.annotations, "volume.kubernetes.io/selected-node": "n1"})
    written = asyncio.run(cluster.update_persistent_volume_claim(annotated))
    assert written.selected_node == "n1"
    name = f"pvc-{claim.uid}"
    pv, bound = cluster.pv(name), cluster.pvc("default/data")
    assert pv is not None and bound is not None
    assert (pv.storage_class, pv.capacity, pv.access_modes, pv.phase) == ("fast", 3 << 30, ("ReadWriteOnce",), "Bound")
    assert pv.annotations == {"pv.kubernetes.io/provisioned-by": "ebs.csi.aws.com"}
    assert (pv.csi_driver, pv.csi_handle) == ("ebs.csi.aws.com", name)
    assert pv.claim_ref is not None and pv.claim_ref.uid == claim.uid
    assert pv.node_affinity is not None and pv.node_affinity.matches(node)
    assert not pv.node_affinity.matches(make_node("n2", labels={"kubernetes.io/hostname": "host-2"}))
    assert bound.volume_name == name and bound.fully_bound and bound.selected_node == "n1"
    assert ("on_storage_add", name) in handlers.calls


def test_an_immediate_claim_of_a_provisioning_class_is_provisioned_without_node_affinity():
    gce = make_storage_class("standard", provisioner="kubernetes.io/gce-pd")
    cluster = InMemoryCluster([], [], [], storage=[gce, make_pvc("data", storage_class="standard")])
    pv = cluster.pv("pvc-uid-default-data")
    assert pv is not None and pv.node_affinity is None
    assert (pv.in_tree, pv.csi_driver) == ("kubernetes.io/gce-pd", "")


def test_no_provisioner_and_missing_classes_leave_claims_pending():
    local = make_storage_class("local", binding_mode="WaitForFirstConsumer")
    claims = [make_pvc("a", storage_class="local", annotations={"volume.kubernetes.io/selected-node": "n1"}),
              make_pvc("b", storage_class="missing")]
    cluster = InMemoryCluster([], [], [], storage=[local, *claims])
    assert [c.volume_name for c in cluster.storage.values() if isinstance(c, PersistentVolumeClaim)] == ["", ""]
    assert not any(isinstance(obj, PersistentVolume) for obj in cluster.storage.values())


def test_a_claim_with_a_volume_name_completes_the_binding_and_a_new_available_pv_binds_a_waiting_claim():
    cluster = InMemoryCluster([], [], [], storage=[make_pv("pv-1"), make_pvc("named", volume_name="pv-1",
                                                                             annotations={})])
    pv = cluster.pv("pv-1")
    assert pv is not None and pv.claim_ref is not None and pv.claim_ref.key == "default/named"
    assert pv.annotations == {"pv.kubernetes.io/bound-by-controller": "yes"}
    named = cluster.pvc("default/named")
    assert named is not None and "pv.kubernetes.io/bound-by-controller" not in named.annotations

    cluster.apply(make_pvc("waiting", storage_class=""))
    waiting = cluster.pvc("default/waiting")
    assert waiting is not None and waiting.volume_name == ""
    cluster.apply(make_pv("pv-2"))
    waiting = cluster.pvc("default/waiting")
    assert waiting is not None and waiting.volume_name == "pv-2"


def test_volume_writes_with_a_stale_resource_version_or_a_missing_object_conflict():
    cluster = InMemoryCluster([], [], [], storage=[make_pv("pv-1", resource_version="10"),
                                                   make_pvc("data", storage_class="x", resource_version="11")])
    assert isinstance(cluster, VolumeWriter)
    pv, claim = cluster.pv("pv-1"), cluster.pvc("default/data")
    assert pv is not None and claim is not None
    with pytest.raises(UpdateConflict, match="the object has been modified"):
        asyncio.run(cluster.update_persistent_volume(attrs.evolve(pv, resource_version="9")))
    with pytest.raises(UpdateConflict, match="not found"):
        asyncio.run(cluster.update_persistent_volume(attrs.evolve(pv, name="pv-2")))
    with pytest.raises(UpdateConflict, match="not found"):
        asyncio.run(cluster.update_persistent_volume(attrs.evolve(pv, uid="re-created")))
    with pytest.raises(UpdateConflict, match="the object has been modified"):
        asyncio.run(cluster.update_persistent_volume_claim(attrs.evolve(claim, resource_version="1")))
    written = asyncio.run(cluster.update_persistent_volume_claim(attrs.evolve(claim, annotations={"a": "b"})))
    assert written.resource_version == "12"  # above every version the cluster holds
    with pytest.raises(UpdateConflict):  # the version the first write replaced
        asyncio.run(cluster.update_persistent_volume_claim(attrs.evolve(claim, annotations={"a": "c"})))


def test_storage_objects_can_be_deleted():
    cluster = InMemoryCluster([], [], [], storage=[make_csinode("n1")])
    handlers = Recording()
    cluster.start(handlers)
    csinode = cluster.storage["CSINode/n1"]
    cluster.delete(csinode)
    assert cluster.storage == {} and handlers.calls[-1] == ("on_storage_delete", "n1")
