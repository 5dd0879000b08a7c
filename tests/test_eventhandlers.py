"""Event handlers (scorer.eventhandlers): every object change becomes cache updates and the
queue's ClusterEvents, as kube's eventhandlers.go; terminal pods hold no resources."""

from __future__ import annotations

import asyncio
import logging

import attrs
import pytest
from schedkit import build

from scorer.cluster.recorder import BufferedRecorder
from scorer.explain import explain_pod
from scorer.framework.events import ClusterEvent, matches
from scorer.model import ClaimRef, LabelSelector, Namespace, PodDisruptionBudget, SelectorOwner, load_objects
from scorer.simulate import simulate
from scorer.testing import make_csinode, make_node, make_pod, make_pv, make_pvc, make_storage_class


@pytest.fixture
def env(monkeypatch):
    """Handlers over an empty assembly; ``env.events`` lists the ClusterEvents sent to the queue."""
    asm, cluster = build(None, [], [])

    class Env:
        pass

    e = Env()
    e.asm, e.handlers, e.cache, e.queue = asm, asm.handlers, asm.cache, asm.queue
    e.events = []
    e.updates = []
    move = asm.queue.move_all_to_active_or_backoff
    update = asm.queue.update

    def record_move(event):
        e.events.append(event)
        return move(event)

    def record_update(old, new, *, event):
        e.updates.append(event)
        return update(old, new, event=event)

    monkeypatch.setattr(asm.queue, "move_all_to_active_or_backoff", record_move)
    monkeypatch.setattr(asm.queue, "update", record_update)
    return e


def labels(events):
    return [event.label for event in events]


def cpu_requested(cache, node):
    table = cache.table
    return int(table.requested[table.index[node], table.resource_index["cpu"]])


# -- nodes ---------------------------------------------------------------------------------------


def test_node_add_and_delete(env):
    node = make_node("n1")
    env.handlers.on_node_add(node)
    assert env.cache.node("n1") == node
    env.handlers.on_node_delete(node)
    assert env.cache.node("n1") is None
    assert labels(env.events) == ["NodeAdd", "NodeDelete"]


@pytest.mark.parametrize(("change", "expected"), [
    ({"labels": {"zone": "b"}}, ["NodeUpdateNodeLabel"]),
    ({"cpu": "8"}, ["NodeUpdateNodeAllocatable"]),
    ({"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}, ["NodeUpdateNodeTaint"]),
    ({"unschedulable": True}, ["NodeUpdateNodeTaint"]),
    ({"annotations": {"a": "b"}}, ["NodeUpdateNodeAnnotation"]),
    ({"labels": {"zone": "b"}, "cpu": "8"}, ["NodeUpdateNodeAllocatable", "NodeUpdateNodeLabel"]),
    ({"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}, []),  # nothing scheduling reads
])
def test_node_update_sends_one_event_per_changed_property(env, change, expected):
    old = make_node("n1", labels={"zone": "a"})
    new = make_node("n1", **{"labels": {"zone": "a"}, **change})
    env.handlers.on_node_add(old)
    env.events.clear()
    env.handlers.on_node_update(old, new)
    assert labels(env.events) == expected
    assert env.cache.node("n1") == new


# -- assigned pods -------------------------------------------------------------------------------


def test_assigned_pods_are_counted(env):
    env.handlers.on_node_add(make_node("n1"))
    env.events.clear()
    pod = make_pod("p", cpu="1", node_name="n1")
    env.handlers.on_pod_add(pod)
    assert cpu_requested(env.cache, "n1") == 1000
    env.handlers.on_pod_delete(pod)
    assert cpu_requested(env.cache, "n1") == 0
    assert labels(env.events) == ["AssignedPodAdd", "AssignedPodDelete"]


def test_a_bound_pod_leaves_the_queue_and_confirms_the_assumed_pod(env):
    env.handlers.on_node_add(make_node("n1"))
    pending = make_pod("p", cpu="1")
    env.handlers.on_pod_add(pending)
    assert pending.key in env.queue
    qpi = env.queue.pop()
    env.cache.assume(qpi.pod, "n1")
    env.events.clear()
    bound = attrs.evolve(pending, node_name="n1")
    env.handlers.on_pod_update(pending, bound)
    assert not env.cache.is_assumed(pending.key) and env.cache.pod_node[pending.key] == "n1"
    assert cpu_requested(env.cache, "n1") == 1000  # counted once
    assert labels(env.events) == ["AssignedPodAdd"]
    # The in-flight pod was marked deleted: a late failure does not requeue it.
    assert env.queue.add_unschedulable_if_not_present(qpi, unschedulable_plugins=()) is None


def test_a_pod_bound_by_another_scheduler_leaves_our_queue(env):
    env.handlers.on_node_add(make_node("n1"))
    pending = make_pod("p")
    env.handlers.on_pod_add(pending)
    env.handlers.on_pod_update(pending, attrs.evolve(pending, node_name="n1"))
    assert pending.key not in env.queue and env.cache.pod_node[pending.key] == "n1"


@pytest.mark.parametrize(("change", "action"), [
    ({"labels": {"app": "web"}}, "UpdatePodLabel"),
    ({"cpu": "500m"}, "UpdatePodScaleDown"),
    ({"tolerations": [{"key": "k", "operator": "Exists"}]}, "UpdatePodToleration"),
    ({"annotations": {"note": "x"}}, "UpdatePodOther"),
])
def test_assigned_pod_updates_name_what_changed(env, change, action):
    env.handlers.on_node_add(make_node("n1"))
    old = make_pod("p", cpu="1", node_name="n1")
    new = make_pod("p", **{"cpu": "1", "node_name": "n1", **change})
    env.handlers.on_pod_add(old)
    env.events.clear()
    env.handlers.on_pod_update(old, new)
    assert [(e.resource, e.action) for e in env.events] == [("AssignedPod", action)]
    assert env.cache.pods[new.key] == new


def test_an_update_kube_has_no_name_for_matches_only_plugins_registering_update(env):
    env.handlers.on_node_add(make_node("n1"))
    old = make_pod("p", node_name="n1")
    env.handlers.on_pod_add(old)
    env.events.clear()
    env.handlers.on_pod_update(old, make_pod("p", node_name="n1", annotations={"note": "x"}))
    [event] = env.events
    assert event.label == "AssignedPodUpdate"
    assert matches(ClusterEvent("Pod", "Update"), event)
    assert matches(ClusterEvent("AssignedPod", "All"), event)
    assert not matches(ClusterEvent("Pod", "UpdatePodLabel"), event)


def test_a_pod_seen_before_its_node_counts_when_the_node_arrives(env):
    env.handlers.on_pod_add(make_pod("early", cpu="1", node_name="late"))
    env.handlers.on_node_add(make_node("late"))
    assert cpu_requested(env.cache, "late") == 1000


def test_a_pod_that_would_overflow_its_node_is_logged_and_skipped(env, caplog):
    env.handlers.on_node_add(make_node("n1"))
    env.handlers.on_pod_add(make_pod("a", memory="5Ei", node_name="n1"))
    env.events.clear()
    with caplog.at_level(logging.ERROR, logger="scorer.eventhandlers"):
        env.handlers.on_pod_add(make_pod("b", memory="5Ei", node_name="n1"))
    assert "pod default/b" in caplog.text and "int64" in caplog.text
    assert "default/b" not in env.cache.pods
    assert env.events == []  # nothing changed, nothing to requeue for


def test_a_recreated_pod_replaces_the_old_one(env):
    env.handlers.on_node_add(make_node("n1"))
    old = make_pod("p", cpu="1", node_name="n1")
    env.handlers.on_pod_add(old)
    new = attrs.evolve(make_pod("p"), uid="another-uid")
    env.handlers.on_pod_update(old, new)
    assert "default/p" not in env.cache.pods and cpu_requested(env.cache, "n1") == 0
    assert "default/p" in env.queue


# -- unassigned pods -----------------------------------------------------------------------------


def test_pending_pods_of_other_schedulers_are_ignored(env):
    env.handlers.on_pod_add(make_pod("mine"))
    env.handlers.on_pod_add(make_pod("theirs", scheduler_name="another-scheduler"))
    assert "default/mine" in env.queue and "default/theirs" not in env.queue


def test_pending_pod_updates_go_to_the_queue_unless_only_the_status_changed(env):
    old = make_pod("p")
    env.handlers.on_pod_add(old)
    env.handlers.on_pod_update(old, attrs.evolve(old, phase="Pending", resource_version="7"))
    assert env.updates == []
    new = make_pod("p", labels={"app": "web"})
    env.handlers.on_pod_update(old, new)
    assert [(e.resource, e.action) for e in env.updates] == [("UnschedulablePod", "UpdatePodLabel")]
    assert env.queue.pop().pod == new


def test_removing_scheduling_gates_is_named(env):
    gated = make_pod("p", spec={"schedulingGates": [{"name": "wait"}]})
    env.handlers.on_pod_add(gated)
    assert env.queue.pending_counts()["gated"] == 1
    env.handlers.on_pod_update(gated, make_pod("p"))
    assert [e.action for e in env.updates] == ["UpdatePodSchedulingGatesEliminated"]
    assert env.queue.pending_counts()["active"] == 1


def test_a_deleted_pending_pod_leaves_the_queue(env):
    pod = make_pod("p")
    env.handlers.on_pod_add(pod)
    env.handlers.on_pod_delete(pod)
    assert len(env.queue) == 0 and env.events == []


def test_every_deleted_pod_is_forgotten_by_the_recorder_after_its_last_writes(env):
    """Per-pod memory of the cluster writer goes with the pod: the recorder is told of every pod deleted
    (pending, bound, turned terminal, re-created, another scheduler's), in order after its writes."""

    class RememberingSink:
        def __init__(self):
            self.log = []

        async def write_event(self, pod, type_, reason, action, note):
            self.log.append(("event", pod.key))

        async def write_pod_condition(self, pod, status, reason, message):
            self.log.append(("condition", pod.key))

        def forget(self, pod_key):
            self.log.append(("forget", pod_key))

    sink = RememberingSink()
    recorder = BufferedRecorder(sink)
    for fwk in env.asm.frameworks.values():
        fwk.handle.recorder = recorder
    env.handlers.on_node_add(make_node("n1"))
    pending, bound, theirs = make_pod("pending"), make_pod("bound", node_name="n1"), make_pod("theirs",
                                                                                             scheduler_name="x")
    for pod in (pending, bound, theirs):
        env.handlers.on_pod_add(pod)
    recorder.record(pending, "Warning", "FailedScheduling", "Scheduling", "no")
    env.handlers.on_pod_delete(pending)
    env.handlers.on_pod_delete(bound)
    env.handlers.on_pod_delete(theirs)
    running = make_pod("job", node_name="n1")
    env.handlers.on_pod_add(running)
    env.handlers.on_pod_update(running, attrs.evolve(running, phase="Succeeded"))
    old = make_pod("again")
    env.handlers.on_pod_add(old)
    env.handlers.on_pod_update(old, attrs.evolve(old, uid="a-new-uid"))
    asyncio.run(recorder.flush())
    assert sink.log == [("event", "default/pending"), ("forget", "default/pending"), ("forget", "default/bound"),
                        ("forget", "default/theirs"), ("forget", "default/job"), ("forget", "default/again")]


# -- terminal pods -------------------------------------------------------------------------------


def test_terminal_pods_hold_no_resources(env):
    env.handlers.on_node_add(make_node("n1"))
    done = attrs.evolve(make_pod("job-1", cpu="2", node_name="n1"), phase="Succeeded")
    env.handlers.on_pod_add(done)
    assert "default/job-1" not in env.cache.pods and cpu_requested(env.cache, "n1") == 0
    running = make_pod("job-2", cpu="2", node_name="n1")
    env.handlers.on_pod_add(running)
    env.events.clear()
    env.handlers.on_pod_update(running, attrs.evolve(running, phase="Failed"))
    assert cpu_requested(env.cache, "n1") == 0
    assert labels(env.events) == ["AssignedPodDelete"]
    env.handlers.on_pod_delete(attrs.evolve(running, phase="Failed"))
    assert labels(env.events) == ["AssignedPodDelete"]  # already gone: nothing more


def test_terminal_pending_pods_are_not_scheduled(env):
    env.handlers.on_pod_add(attrs.evolve(make_pod("failed"), phase="Failed"))
    assert len(env.queue) == 0
    pending = make_pod("p")
    env.handlers.on_pod_add(pending)
    env.handlers.on_pod_update(pending, attrs.evolve(pending, phase="Succeeded"))
    assert len(env.queue) == 0


COMPLETED_JOBS = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: v1
kind: List
items:
""" + "".join(f"""
- apiVersion: v1
  kind: Pod
  metadata: {{name: report-{i}, namespace: batch, labels: {{job-name: report}}}}
  spec:
    nodeName: n1
    restartPolicy: Never
    containers: [{{name: c, resources: {{requests: {{cpu: "2"}}}}}}]
  status: {{phase: {"Succeeded" if i < 2 else "Failed"}}}
""" for i in range(3)) + """
- apiVersion: v1
  kind: Pod
  metadata: {name: web, namespace: shop}
  spec:
    containers: [{name: c, resources: {requests: {cpu: "3"}}}]
"""


def test_completed_job_pods_do_not_keep_pending_pods_off_their_node():
    objects = load_objects(COMPLETED_JOBS, source="completed-jobs.yaml")
    report = simulate(objects, autoload=False)
    [placement] = report.placements
    assert placement.pod == "shop/web" and placement.node == "n1"
    explanation = explain_pod(objects, None, "shop/web", autoload=False)
    assert explanation["selected"] == "n1"


# -- namespaces ----------------------------------------------------------------------------------


def test_namespaces(env):
    ns = Namespace(name="shop", labels={"team": "a"})
    env.handlers.on_namespace_add(ns)
    env.handlers.on_namespace_update(ns, ns)
    relabelled = Namespace(name="shop", labels={"team": "b"})
    env.handlers.on_namespace_update(ns, relabelled)
    assert env.cache.namespaces["shop"] == relabelled
    env.handlers.on_namespace_delete(relabelled)
    assert "shop" not in env.cache.namespaces
    assert labels(env.events) == ["NamespaceAdd", "NamespaceUpdate", "NamespaceDelete"]


# -- workloads -----------------------------------------------------------------------------------


def test_workloads_are_kept_in_the_cache_and_requeue_nothing(env):
    """Services, controllers and PodDisruptionBudgets reach cache.workloads; no default plugin
    registers their events (later kube watches them only for plugins that do): no pod moves."""
    web = LabelSelector(match_labels={"app": "web"})
    service = SelectorOwner(kind="Service", namespace="shop", name="web", selector=web)
    replica_set = SelectorOwner(kind="ReplicaSet", namespace="shop", name="web-1", selector=web)
    budget = PodDisruptionBudget(namespace="shop", name="web", selector=web, disruptions_allowed=1)
    pod = make_pod("p", namespace="shop", labels={"app": "web", "tier": "a"})
    for obj in (service, replica_set, budget):
        env.handlers.on_workload_add(obj)
    assert env.cache.workloads.owners_of(pod) == [service, replica_set]
    assert env.cache.workloads.budgets_for("shop") == [budget]
    assert env.cache.workloads.default_selector(pod) is not None

    narrower = attrs.evolve(service, selector=LabelSelector(match_labels={"app": "web", "tier": "b"}))
    env.handlers.on_workload_update(service, narrower)
    assert env.cache.workloads.owners_of(pod) == [replica_set]
    spent = attrs.evolve(budget, disruptions_allowed=0)
    env.handlers.on_workload_update(budget, spent)
    assert env.cache.workloads.budgets_for("shop") == [spent]

    for obj in (narrower, replica_set, spent):
        env.handlers.on_workload_delete(obj)
    assert len(env.cache.workloads) == 0
    assert env.cache.workloads.default_selector(pod) is None
    assert env.events == [] and env.updates == []


# -- storage -------------------------------------------------------------------------------------


def test_storage_objects_are_kept_in_the_cache_and_send_their_events(env):
    """PVs, PVCs, StorageClasses, CSINodes... reach cache.volumes; each change is <Kind>Add,
    <Kind>Update or <Kind>Delete."""
    storage_class = make_storage_class("local", binding_mode="WaitForFirstConsumer")
    pv = make_pv("pv-1", storage_class="local")
    claim = make_pvc("data", storage_class="local")
    csinode = make_csinode("n1", drivers={"ebs.csi.aws.com": 25})
    for obj in (storage_class, pv, claim, csinode):
        env.handlers.on_storage_add(obj)
    volumes = env.cache.volumes
    assert volumes.classes == {"local": storage_class} and volumes.pv("pv-1") == pv
    assert volumes.pvc("default/data") == claim and volumes.csi_nodes == {"n1": csinode}
    assert labels(env.events) == ["StorageClassAdd", "PersistentVolumeAdd", "PersistentVolumeClaimAdd",
                                  "CSINodeAdd"]

    env.events.clear()
    bound = attrs.evolve(pv, claim_ref=ClaimRef(namespace="default", name="data"), phase="Bound",
                         resource_version="2")
    env.handlers.on_storage_update(pv, bound)
    assert volumes.pv("pv-1") == bound and volumes.pvs_of_class("local") == [bound]
    env.handlers.on_storage_delete(claim)
    env.handlers.on_storage_delete(csinode)
    assert volumes.pvc("default/data") is None and volumes.csi_nodes == {}
    assert env.events == [ClusterEvent("PersistentVolume", "Update"), ClusterEvent("PersistentVolumeClaim", "Delete"),
                          ClusterEvent("CSINode", "Delete")]


def test_a_delivered_pv_replaces_the_assumed_copy(env):
    pv = make_pv("pv-1", storage_class="local", resource_version="5")
    env.handlers.on_storage_add(pv)
    assumed = attrs.evolve(pv, claim_ref=ClaimRef(namespace="default", name="data"))
    env.cache.volumes.assume_pv(assumed)
    assert env.cache.volumes.pv("pv-1") == assumed
    written = attrs.evolve(assumed, resource_version="6")
    env.handlers.on_storage_update(pv, written)
    assert env.cache.volumes.pv("pv-1") == written and not env.cache.volumes.is_assumed_pv("pv-1")


def test_storage_handlers_never_raise(env, caplog):
    with caplog.at_level(logging.ERROR, logger="scorer.eventhandlers"):
        env.handlers.on_storage_add(make_node("n1"))
    assert "not a storage object" in caplog.text and env.events == []
