"""VolumeZone: kube 1.20's TestSingleZone, TestMultiZone and TestWithBinding (with current kube's
codes and texts: every claim failure is UnschedulableAndUnresolvable at PreFilter), the beta->GA
label fallback, ``__``-separated zone sets, the Skip for pods without bound PVs, and the Filter
without PreFilter state."""

from __future__ import annotations

import attrs
import pytest
from pluginkit import requeues

from scorer.framework import Code, CycleState, NodeBatch, Status
from scorer.framework.catalog import PluginRegistry
from scorer.framework.events import ClusterEvent
from scorer.model import Volume
from scorer.model.storage import PersistentVolume, PersistentVolumeClaim, StorageClass
from scorer.plugins import volumezone
from scorer.plugins.volumezone import ERR_REASON_CONFLICT, PVTopology, VolumeZone, label_zones, pv_topologies
from scorer.testing import make_cache, make_handle, make_node, make_pod

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"

CONFLICT = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (ERR_REASON_CONFLICT,))


def unresolvable(message):
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (message,))


def claim_pod(claim, name="pod_1", volume="vol_1"):
    if not claim:  # the API server (and scorer's decoder) refuse it; a hand-built pod may have it
        return attrs.evolve(make_pod(name), volumes=(Volume(name=volume, source="persistentVolumeClaim"),))
    return make_pod(name, spec={"volumes": [{"name": volume, "persistentVolumeClaim": {"claimName": claim}}]})


def pv(name, **labels):
    return PersistentVolume(name=name, labels=labels)


def pvc(name, volume_name="", storage_class=""):
    return PersistentVolumeClaim(name=name, volume_name=volume_name, storage_class=storage_class)


def run(pod, node_labels, objects, *, plugin=None, pre_filter=True):
    """PreFilter then Filter on one node ``host1``: the PreFilter status when not None, else
    the node's Filter status."""
    cache = make_cache([make_node("host1", labels=node_labels)])
    for obj in objects:
        cache.add_storage(obj)
    plugin = plugin or VolumeZone(make_handle(cache=cache))
    state = CycleState()
    batch = NodeBatch(cache.table, cache.table.rows())
    if pre_filter:
        pre = plugin.pre_filter(state, pod, batch)
        if pre is not None:
            return pre
    verdict = plugin.filter_batch(state, pod, batch)
    return Status() if verdict is None else verdict.status_at(0)


SINGLE_ZONE = [
    pv("Vol_1", **{BETA_ZONE: "us-west1-a"}),
    pv("Vol_2", **{BETA_REGION: "us-west1", "uselessLabel": "none"}),
    pv("Vol_3", **{BETA_REGION: "us-west1"}),
    pv("Vol_Stable_1", **{ZONE: "us-west1-a"}),
    pv("Vol_Stable_2", **{REGION: "us-west1", "uselessLabel": "none"}),
    pvc("PVC_1", "Vol_1"), pvc("PVC_2", "Vol_2"), pvc("PVC_3", "Vol_3"), pvc("PVC_4", "Vol_not_exist"),
    pvc("PVC_Stable_1", "Vol_Stable_1"), pvc("PVC_Stable_2", "Vol_Stable_2"),
]


@pytest.mark.parametrize(
    ("name", "claim", "labels", "want"),
    [
        ("pod without volume", None, {BETA_ZONE: "us-west1-a"}, Status.skip()),
        ("node without labels", "PVC_1", {}, Status()),
        ("beta zone label matched", "PVC_1", {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}, Status()),
        ("beta region label matched", "PVC_2", {BETA_REGION: "us-west1", "uselessLabel": "none"}, Status()),
        ("beta region label doesn't match", "PVC_2", {BETA_REGION: "no_us-west1", "uselessLabel": "none"}, CONFLICT),
        ("beta zone label doesn't match", "PVC_1", {BETA_ZONE: "no_us-west1-a", "uselessLabel": "none"}, CONFLICT),
        ("zone label matched", "PVC_Stable_1", {ZONE: "us-west1-a", "uselessLabel": "none"}, Status()),
        ("region label matched", "PVC_Stable_2", {REGION: "us-west1", "uselessLabel": "none"}, Status()),
        ("region label doesn't match", "PVC_Stable_2", {REGION: "no_us-west1", "uselessLabel": "none"}, CONFLICT),
        ("zone label doesn't match", "PVC_Stable_1", {ZONE: "no_us-west1-a", "uselessLabel": "none"}, CONFLICT),
        # current kube: a missing PV fails PreFilter with the lister's text
        ("pv not found", "PVC_4", {ZONE: "a"}, unresolvable('persistentvolume "Vol_not_exist" not found')),
    ],
)
def test_single_zone(name, claim, labels, want):
    pod = make_pod("pod_1") if claim is None else claim_pod(claim)
    assert run(pod, labels, SINGLE_ZONE) == want


MULTI_ZONE = [
    pv("Vol_1", **{BETA_ZONE: "us-west1-a"}),
    pv("Vol_2", **{BETA_ZONE: "us-west1-b", "uselessLabel": "none"}),
    pv("Vol_3", **{BETA_ZONE: "us-west1-c__us-west1-a"}),
    pv("Vol_Stable_1", **{ZONE: "us-west1-a"}),
    pv("Vol_Stable_2", **{ZONE: "us-west1-c__us-west1-a"}),
    pvc("PVC_1", "Vol_1"), pvc("PVC_2", "Vol_2"), pvc("PVC_3", "Vol_3"), pvc("PVC_4", "Vol_not_exist"),
    pvc("PVC_Stable_1", "Vol_Stable_1"), pvc("PVC_Stable_2", "Vol_Stable_2"),
]


@pytest.mark.parametrize(
    ("name", "claim", "labels", "want"),
    [
        ("node without labels", "PVC_3", {}, Status()),
        ("beta zone label matched", "PVC_3", {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}, Status()),
        ("beta zone label doesn't match", "PVC_1", {BETA_ZONE: "us-west1-b", "uselessLabel": "none"}, CONFLICT),
        ("zone label matched", "PVC_Stable_2", {ZONE: "us-west1-a", "uselessLabel": "none"}, Status()),
        ("zone label doesn't match", "PVC_Stable_1", {ZONE: "us-west1-b", "uselessLabel": "none"}, CONFLICT),
    ],
)
def test_multi_zone(name, claim, labels, want):
    assert run(claim_pod(claim), labels, MULTI_ZONE) == want


WITH_BINDING = [
    StorageClass(name="Class_Immediate", volume_binding_mode="Immediate"),
    StorageClass(name="Class_Wait", volume_binding_mode="WaitForFirstConsumer"),
    StorageClass(name="Class_Unset", volume_binding_mode=""),
    pv("Vol_1", **{BETA_ZONE: "us-west1-a"}),
    pvc("PVC_1", "Vol_1"),
    pvc("PVC_NoSC", storage_class="Class_0"),
    pvc("PVC_EmptySC"),
    pvc("PVC_WaitSC", storage_class="Class_Wait"),
    pvc("PVC_ImmediateSC", storage_class="Class_Immediate"),
    pvc("PVC_UnsetSC", storage_class="Class_Unset"),
]


@pytest.mark.parametrize(
    ("name", "claim", "want"),
    [
        ("label zone failure domain matched", "PVC_1", Status()),
        # 1.20: Error with the same text; now UnschedulableAndUnresolvable at PreFilter
        ("unbound volume empty storage class", "PVC_EmptySC",
         unresolvable("PersistentVolumeClaim had no pv name and storageClass name")),
        # 1.20: Error 'StorageClass "Class_0" claimed by PersistentVolumeClaim "PVC_NoSC" not found'
        ("unbound volume no storage class", "PVC_NoSC",
         unresolvable('storageclass.storage.k8s.io "Class_0" not found')),
        # 1.20's fake class had no mode (Error "VolumeBindingMode not set ..."); the API server defaults it
        ("unbound volume immediate binding mode", "PVC_ImmediateSC", unresolvable("PersistentVolume had no name")),
        ("unbound volume unset binding mode", "PVC_UnsetSC",
         unresolvable('VolumeBindingMode not set for StorageClass "Class_Unset"')),
        ("unbound volume wait binding mode", "PVC_WaitSC", Status.skip()),  # nothing left to check
        ("claim not found", "PVC_nope", unresolvable('persistentvolumeclaim "PVC_nope" not found')),
        ("claim without name", "", unresolvable("PersistentVolumeClaim had no name")),
    ],
)
def test_with_binding(name, claim, want):
    assert run(claim_pod(claim), {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}, WITH_BINDING) == want


@pytest.mark.parametrize(
    ("pv_labels", "node_labels", "ok"),
    [
        ({BETA_ZONE: "a"}, {ZONE: "a"}, True),  # beta PV label, node with the GA label only
        ({BETA_ZONE: "a"}, {ZONE: "b"}, False),
        ({BETA_REGION: "r"}, {REGION: "r"}, True),
        ({ZONE: "a"}, {BETA_ZONE: "a"}, False),  # no GA -> beta fallback
        ({BETA_ZONE: "a"}, {BETA_ZONE: "b", ZONE: "a"}, False),  # the beta label, when present, decides
        ({ZONE: "a", REGION: "r"}, {ZONE: "a", REGION: "r"}, True),
        ({ZONE: "a", REGION: "r"}, {ZONE: "a"}, False),  # the node lacks the region
        ({ZONE: "a", REGION: "r"}, {"other": "x"}, True),  # no zone label at all: passes
        ({ZONE: " a __ b "}, {ZONE: "b"}, True),  # spaces trimmed
        ({ZONE: "a____b"}, {ZONE: "c"}, True),  # an empty element: the label is ignored
        ({ZONE: ""}, {ZONE: "c"}, True),
    ],
)
def test_label_rules(pv_labels, node_labels, ok):
    objects = [pv("v", **pv_labels), pvc("c", "v"), pv("w")]
    got = run(claim_pod("c"), node_labels, objects)
    if pv_labels in ({ZONE: "a____b"}, {ZONE: ""}):
        assert got == Status.skip()  # no topology left
    else:
        assert got == (Status() if ok else CONFLICT)


def test_every_bound_pv_counts_and_other_volumes_are_ignored():
    cache = make_cache([make_node(n, labels={ZONE: z}) for n, z in (("a", "z1"), ("b", "z2"), ("c", "z3"))])
    for obj in (pv("v1", **{ZONE: "z1__z2"}), pv("v2", **{ZONE: "z2__z3"}), pvc("c1", "v1"), pvc("c2", "v2")):
        cache.add_storage(obj)
    pod = make_pod("p", spec={"volumes": [
        {"name": "a", "persistentVolumeClaim": {"claimName": "c1"}},
        {"name": "b", "configMap": {"name": "x"}},
        {"name": "c", "persistentVolumeClaim": {"claimName": "c2"}},
    ]})
    plugin = VolumeZone(make_handle(cache=cache))
    state = CycleState()
    batch = NodeBatch(cache.table, cache.table.rows())
    assert plugin.pre_filter(state, pod, batch) is None
    verdict = plugin.filter_batch(state, pod, batch)
    assert [verdict.status_at(i) for i in range(3)] == [CONFLICT, Status(), CONFLICT]


def test_pre_filter_skips_pods_without_claims():
    assert run(make_pod("p"), {ZONE: "a"}, []) == Status.skip()
    ephemeral = make_pod("p", spec={"volumes": [{"name": "e", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]})
    assert run(ephemeral, {ZONE: "a"}, []) == Status.skip()  # VolumeBinding's
    pv_without_zone = [pv("v"), pvc("c", "v")]
    assert run(claim_pod("c"), {ZONE: "a"}, pv_without_zone) == Status.skip()


def test_filter_without_pre_filter_state_computes_it():
    objects = [pv("v", **{ZONE: "a"}), pvc("c", "v")]
    assert run(claim_pod("c"), {ZONE: "b"}, objects, pre_filter=False) == CONFLICT
    assert run(claim_pod("c"), {ZONE: "a"}, objects, pre_filter=False) == Status()
    assert run(claim_pod("x"), {ZONE: "a"}, objects, pre_filter=False) == unresolvable(
        'persistentvolumeclaim "x" not found')


def test_pv_topologies_and_label_zones():
    cache = make_cache([])
    cache.add_storage(pv("v", **{ZONE: "a__b", BETA_REGION: "r", "x": "y"}))
    cache.add_storage(pvc("c", "v"))
    assert pv_topologies(claim_pod("c"), cache.volumes) == (
        PVTopology("v", BETA_REGION, frozenset({"r"})), PVTopology("v", ZONE, frozenset({"a", "b"})),
    )
    assert label_zones("a__b") == frozenset({"a", "b"})
    assert label_zones("a__") is None


def test_registration():
    registry = PluginRegistry()
    volumezone.register(registry)
    info = registry.plugins["VolumeZone"]
    assert info.extension_points == frozenset({"preFilter", "filter"})
    assert info.args_type is None


def test_events_to_register():
    plugin = VolumeZone(make_handle())
    assert requeues(plugin, ClusterEvent("StorageClass", "Add"))
    assert requeues(plugin, ClusterEvent("Node", "Add"))
    assert requeues(plugin, ClusterEvent("Node", "UpdateNodeLabel"))
    assert requeues(plugin, ClusterEvent("PersistentVolumeClaim", "Update"))
    assert requeues(plugin, ClusterEvent("PersistentVolume", "Add"))
    assert requeues(plugin, ClusterEvent("PersistentVolume", "Update"))
    assert not requeues(plugin, ClusterEvent("Node", "UpdateNodeTaint"))
    assert not requeues(plugin, ClusterEvent("AssignedPod", "Delete"))
