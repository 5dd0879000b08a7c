"""VolumeRestrictions: inline disk conflicts per kind (kube 1.20's TestGCEDiskConflicts,
TestAWSDiskConflicts, TestRBDDiskConflicts, TestISCSIDiskConflicts) and the read-only rules,
ReadWriteOncePod claims in use (PreFilter lookups, the 1.33 wording, AddPod/RemovePod), the
Skip for pods with nothing to check, and the per-table-version disk index."""

from __future__ import annotations

import numpy as np
import pytest
from pluginkit import requeues

from scorer.framework import Code, CycleState, NodeBatch, Status
from scorer.framework.catalog import PluginRegistry
from scorer.framework.events import ClusterEvent
from scorer.model.storage import PersistentVolumeClaim
from scorer.plugins import volumerestrictions
from scorer.plugins.volumerestrictions import (
    ERR_REASON_DISK_CONFLICT,
    ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,
    VolumeRestrictions,
)
from scorer.testing import make_cache, make_handle, make_node, make_pod, run_plugin

GCE = {"gcePersistentDisk": {"pdName": "foo"}}
GCE2 = {"gcePersistentDisk": {"pdName": "bar"}}
AWS = {"awsElasticBlockStore": {"volumeID": "foo"}}
AWS2 = {"awsElasticBlockStore": {"volumeID": "bar"}}
RBD = {"rbd": {"monitors": ["a", "b"], "pool": "foo", "image": "bar", "fsType": "ext4"}}
RBD2 = {"rbd": {"monitors": ["c", "d"], "pool": "foo", "image": "bar", "fsType": "ext4"}}
ISCSI = {"iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2016-12.server:storage.target01", "lun": 0}}
ISCSI2 = {"iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2017-12.server:storage.target01", "lun": 0}}


def read_only(source):
    (key, fields), = source.items()
    return {key: {**fields, "readOnly": True}}


def vol_pod(name, *sources, node_name="", namespace="default"):
    volumes = [{"name": f"v{i}", **source} for i, source in enumerate(sources)]
    return make_pod(name, node_name=node_name, namespace=namespace, spec={"volumes": volumes})


def claim_source(name):
    return {"persistentVolumeClaim": {"claimName": name}}


def run(pod, cache, plugin=None):
    """PreFilter then Filter over every node: the PreFilter status when it is not None, else each
    node's Filter status."""
    plugin = plugin or VolumeRestrictions(make_handle(cache=cache))
    state = CycleState()
    batch = NodeBatch(cache.table, cache.table.rows())
    pre = plugin.pre_filter(state, pod, batch)
    if pre is not None:
        return pre
    verdict = plugin.filter_batch(state, pod, batch)
    return {name: verdict.status_at(i) for i, name in enumerate(batch.names)}


DISK = Status(Code.UNSCHEDULABLE, (ERR_REASON_DISK_CONFLICT,))


@pytest.mark.parametrize(("same", "different"), [(GCE, GCE2), (AWS, AWS2), (RBD, RBD2), (ISCSI, ISCSI2)],
                         ids=["gce", "aws", "rbd", "iscsi"])
@pytest.mark.parametrize(
    ("case", "wanted_ok"), [("nothing", True), ("one state", True), ("same state", False), ("different state", True)]
)
def test_kube_disk_conflicts(same, different, case, wanted_ok):
    """kube 1.20 TestGCE/AWS/RBD/ISCSIDiskConflicts: the node runs a pod with ``same``."""
    existing = [] if case == "nothing" else [vol_pod("existing", same, node_name="node")]
    pod = {"nothing": make_pod("pod"), "one state": make_pod("pod"), "same state": vol_pod("pod", same),
           "different state": vol_pod("pod", different)}[case]
    got = run(pod, make_cache([make_node("node")], existing))
    if wanted_ok:
        assert got == Status.skip() or got["node"].is_success()
    else:
        assert got["node"] == DISK


@pytest.mark.parametrize(
    ("mine", "theirs", "conflict"),
    [
        (read_only(GCE), read_only(GCE), False),  # two read-only mounts of a PD share it
        (read_only(GCE), GCE, True),
        (GCE, read_only(GCE), True),
        (read_only(AWS), read_only(AWS), True),  # EBS: read-only does not matter
        (read_only(ISCSI), read_only(ISCSI), False),
        (ISCSI, read_only(ISCSI), True),
        (read_only(RBD), read_only(RBD), False),
        (read_only(RBD), RBD, True),
        ({"rbd": {"monitors": ["x", "b"], "pool": "foo", "image": "bar"}}, RBD, True),  # one monitor in common
        ({"rbd": {"monitors": ["a"], "pool": "other", "image": "bar"}}, RBD, False),  # another pool
        ({"rbd": {"monitors": ["a"], "pool": "foo", "image": "baz"}}, RBD, False),  # another image
        ({"rbd": {"monitors": ["a"], "image": "bar"}}, {"rbd": {"monitors": ["a"], "pool": "rbd", "image": "bar"}},
         True),  # the pool defaults to "rbd"
        (GCE, {"awsElasticBlockStore": {"volumeID": "foo"}}, False),  # same name, different kind
    ],
)
def test_read_only_and_rbd_rules(mine, theirs, conflict):
    cache = make_cache([make_node("node"), make_node("other")], [vol_pod("existing", theirs, node_name="node")])
    got = run(vol_pod("pod", mine), cache)
    assert got["node"] == (DISK if conflict else Status())
    assert got["other"].is_success()


def test_only_nodes_using_the_disk_fail_and_all_pods_there_count():
    nodes = [make_node(n) for n in ("a", "b", "c")]
    existing = [
        vol_pod("p1", GCE2, node_name="a"),
        vol_pod("p2", {"configMap": {"name": "x"}}, GCE, node_name="b"),  # second volume matches
        make_pod("p3", node_name="c"),
    ]
    got = run(vol_pod("pod", {"emptyDir": {}}, GCE), make_cache(nodes, existing))
    assert {n for n, s in got.items() if not s.is_success()} == {"b"}


def test_through_the_framework():
    nodes = [make_node("a"), make_node("b")]
    plugin = VolumeRestrictions(make_handle())
    result = run_plugin(plugin, vol_pod("pod", AWS), nodes, pods=[vol_pod("e", AWS, node_name="b")])
    assert result.feasible == ["a"]
    assert result.filter["b"].reasons == (ERR_REASON_DISK_CONFLICT,)
    assert result.filter["b"].plugin == "VolumeRestrictions"


def test_pre_filter_skips_pods_with_nothing_to_check():
    cache = make_cache([make_node("n")])
    cache.add_storage(PersistentVolumeClaim(name="rwo", access_modes=("ReadWriteOnce",)))
    assert run(make_pod("pod"), cache) == Status.skip()
    assert run(vol_pod("pod", {"configMap": {"name": "c"}}, {"emptyDir": {}}), cache) == Status.skip()
    assert run(vol_pod("pod", claim_source("rwo")), cache) == Status.skip()
    # ephemeral volumes are not looked at
    assert run(vol_pod("pod", {"ephemeral": {"volumeClaimTemplate": {"spec": {}}}}), cache) == Status.skip()


def test_missing_claim_is_unresolvable():
    cache = make_cache([make_node("n")])
    got = run(vol_pod("pod", GCE, claim_source("nope")), cache)
    assert got == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ('persistentvolumeclaim "nope" not found',))


def rwop_cache(*pods):
    cache = make_cache([make_node("a"), make_node("b")], pods)
    cache.add_storage(PersistentVolumeClaim(name="once", access_modes=("ReadWriteOncePod",)))
    cache.add_storage(PersistentVolumeClaim(namespace="other", name="once", access_modes=("ReadWriteOncePod",)))
    return cache


RWOP = Status(Code.UNSCHEDULABLE, (ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT,))


def test_read_write_once_pod_claim_in_use_fails_every_node():
    cache = rwop_cache(vol_pod("user", claim_source("once"), node_name="a"))
    got = run(vol_pod("pod", claim_source("once")), cache)
    assert got == {"a": RWOP, "b": RWOP}


def test_read_write_once_pod_claim_not_in_use_or_used_in_another_namespace():
    assert run(vol_pod("pod", claim_source("once")), rwop_cache()) == Status.skip()
    cache = rwop_cache(vol_pod("user", claim_source("once"), node_name="a", namespace="other"))
    assert run(vol_pod("pod", claim_source("once")), cache) == Status.skip()


def test_assumed_pods_use_claims_too():
    cache = rwop_cache()
    cache.assume(vol_pod("user", claim_source("once")), "b")
    assert run(vol_pod("pod", claim_source("once")), cache) == {"a": RWOP, "b": RWOP}


def test_disk_conflict_comes_first():
    cache = rwop_cache(vol_pod("user", claim_source("once"), GCE, node_name="a"))
    got = run(vol_pod("pod", GCE, claim_source("once")), cache)
    assert got == {"a": DISK, "b": RWOP}


def test_add_pod_and_remove_pod_change_the_count():
    user = vol_pod("user", claim_source("once"), node_name="a")
    cache = rwop_cache(user)
    plugin = VolumeRestrictions(make_handle(cache=cache))
    pod = vol_pod("pod", claim_source("once"))
    batch = NodeBatch(cache.table, cache.table.rows())
    state = CycleState()
    assert plugin.pre_filter(state, pod, batch) is None
    info = cache.table.node_info(0)
    assert plugin.affected_by(state, pod, user)
    assert not plugin.affected_by(state, pod, make_pod("plain"))
    clone = state.clone()
    plugin.remove_pod(clone, pod, user, info)
    assert not plugin.filter_batch(clone, pod, batch).failed.any()  # preemption frees the claim
    assert plugin.filter_batch(state, pod, batch).failed.all()  # the original state is untouched
    plugin.add_pod(clone, pod, user, info)
    assert plugin.filter_batch(clone, pod, batch).failed.all()
    plugin.add_pod(clone, pod, make_pod("plain"), info)  # a pod without the claim changes nothing
    assert plugin.filter_batch(clone, pod, batch).failed.all()


def test_filter_without_pre_filter_state_works_the_state_out():
    """A v1beta1/v1beta2 profile lists VolumeRestrictions at filter only (kube 1.20 had no PreFilter):
    Filter works the state out itself, disk conflicts and missing claims alike."""
    cache = make_cache([make_node("n"), make_node("m")], [vol_pod("user", GCE, node_name="n")])
    plugin = VolumeRestrictions(make_handle(cache=cache))
    batch = NodeBatch(cache.table, cache.table.rows())
    verdict = plugin.filter_batch(CycleState(), vol_pod("pod", GCE), batch)
    assert verdict.status_at(0).reasons == (ERR_REASON_DISK_CONFLICT,) and verdict.status_at(1).is_success()
    claim = make_pod("claims", volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "gone"}}])
    status = plugin.filter_batch(CycleState(), claim, batch).status_at(1)
    assert (status.code, status.reasons) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                             ('persistentvolumeclaim "gone" not found',))


def test_disk_index_follows_pod_changes():
    cache = make_cache([make_node("a"), make_node("b")])
    table = cache.table
    plugin = VolumeRestrictions(make_handle(cache=cache))
    pod = vol_pod("pod", AWS)
    state = CycleState()
    assert plugin.pre_filter(state, pod, NodeBatch(table, table.rows())) is None

    def rejected():
        verdict = plugin.filter_batch(state, pod, NodeBatch(table, table.rows()))
        return [table.names[i] for i in np.flatnonzero(verdict.failed)]

    assert rejected() == []
    holder = vol_pod("holder", AWS)
    cache.assume(holder, "b")
    assert rejected() == ["b"]
    cache.forget(holder)
    assert rejected() == []


def test_registration():
    registry = PluginRegistry()
    volumerestrictions.register(registry)
    info = registry.plugins["VolumeRestrictions"]
    assert info.extension_points == frozenset({"preFilter", "filter"})
    assert info.args_type is None


def test_events_to_register():
    plugin = VolumeRestrictions(make_handle())
    assert plugin.events_to_register() == [
        ClusterEvent("AssignedPod", "Delete"), ClusterEvent("Node", "Add"),
        ClusterEvent("PersistentVolumeClaim", "Add"),
    ]
    assert requeues(plugin, ClusterEvent("AssignedPod", "Delete"))
    assert requeues(plugin, ClusterEvent("PersistentVolumeClaim", "Add"))
    assert not requeues(plugin, ClusterEvent("AssignedPod", "Add"))
    assert not requeues(plugin, ClusterEvent("PersistentVolume", "Add"))
