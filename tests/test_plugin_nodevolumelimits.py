"""NodeVolumeLimits: kube 1.20's TestCSILimits (limits from the CSINode; 1.20's node-allocatable
limits are no longer read), CSI migration of in-tree PVs, classes and inline volumes through the
CSINode's migrated-plugins annotation, generic ephemeral volumes, lookup errors, the Skip, and
the per-node work only where a CSINode sets limits."""

from __future__ import annotations

import attrs
import pytest
from pluginkit import requeues

from scorer.framework import Code, CycleState, NodeBatch, Status
from scorer.framework.catalog import PluginRegistry
from scorer.framework.events import ClusterEvent
from scorer.model import OwnerReference
from scorer.model.storage import (
    ANN_MIGRATED_PLUGINS,
    CSINode,
    CSINodeDriver,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
)
from scorer.plugins import nodevolumelimits
from scorer.plugins.helper.csi import is_csi_migration_on, translate_inline_volume, translate_pv
from scorer.plugins.nodevolumelimits import ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, NodeVolumeLimits
from scorer.testing import make_cache, make_handle, make_node, make_pod

EBS_CSI = "ebs.csi.aws.com"
GCE_CSI = "pd.csi.storage.gke.io"
EBS_IN_TREE = "kubernetes.io/aws-ebs"
HOSTPATH = "kubernetes.io/hostpath"
NODE = "node-for-max-pd-test-1"

EXCEEDED = Status(Code.UNSCHEDULABLE, (ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,))


def claims_pod(name, *claims, node_name="", namespace="default"):
    volumes = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return make_pod(name, node_name=node_name, namespace=namespace, spec={"volumes": volumes})


def storage(drivers, sc_provisioner):
    """kube's getFakeCSIPVLister / getFakeCSIPVCLister / getFakeCSIStorageClassLister."""
    objects: list = []
    for driver in drivers:
        for j in range(4):
            name = f"csi-{driver}-{j}"
            if driver == EBS_IN_TREE:
                objects.append(PersistentVolume(name=name, in_tree=EBS_IN_TREE, in_tree_handle=name))
            elif driver == HOSTPATH:
                objects.append(PersistentVolume(name=name))
            else:
                objects.append(PersistentVolume(name=name, csi_driver=driver, csi_handle=name))
            objects.append(PersistentVolumeClaim(name=name, volume_name=name))
    objects.append(PersistentVolumeClaim(name="csi-4", storage_class="csi-sc"))
    objects.append(PersistentVolumeClaim(name="csi-5"))
    objects.append(PersistentVolumeClaim(name="csi-6", storage_class="csi-sc", volume_name="missing-in-action"))
    objects.append(StorageClass(name="csi-sc", provisioner=sc_provisioner))
    return objects


def csi_node(drivers, limit, *, with_limits=True, migrated=""):
    annotations = {ANN_MIGRATED_PLUGINS: migrated} if migrated else {}
    return CSINode(name=NODE, annotations=annotations, drivers=tuple(
        CSINodeDriver(name=d, node_id=NODE, allocatable=limit if with_limits else None) for d in drivers))


def run(pod, existing, objects, nodes=None):
    """PreFilter, then each node's Filter status (the PreFilter status when not None)."""
    cache = make_cache(nodes or [make_node(NODE)], existing)
    for obj in objects:
        cache.add_storage(obj)
    plugin = NodeVolumeLimits(make_handle(cache=cache))
    state = CycleState()
    batch = NodeBatch(cache.table, cache.table.rows())
    pre = plugin.pre_filter(state, pod, batch)
    if pre is not None:
        return pre
    verdict = plugin.filter_batch(state, pod, batch)
    return {name: verdict.status_at(i) for i, name in enumerate(batch.names)}


running = claims_pod("running", "csi-ebs.csi.aws.com-3", node_name=NODE)
pending_volume = claims_pod("pending", "csi-4", node_name=NODE)
unbound_pvc2 = claims_pod("unbound2", "csi-4", node_name=NODE)
missing_pv = claims_pod("missing-pv", "csi-6", node_name=NODE)
no_sc_pvc = claims_pod("no-sc", "csi-5", node_name=NODE)
gce_two = claims_pod("gce-two", f"csi-{GCE_CSI}-1", f"csi-{GCE_CSI}-2", node_name=NODE)
in_tree_one = claims_pod("in-tree-one", f"csi-{EBS_IN_TREE}-0", node_name=NODE)
in_tree_two = claims_pod("in-tree-two", f"csi-{EBS_IN_TREE}-1", f"csi-{EBS_IN_TREE}-2", node_name=NODE)
ebs_one = claims_pod("ebs-one", "csi-ebs.csi.aws.com-0", node_name=NODE)
ebs_two = claims_pod("ebs-two", "csi-ebs.csi.aws.com-1", "csi-ebs.csi.aws.com-2", node_name=NODE)
non_migratable = claims_pod("hostpath", f"csi-{HOSTPATH}-0", node_name=NODE)


def incoming(pod):
    return attrs.evolve(pod, node_name="", name="new")


# (test, new pod, existing pods, maxVols, driverNames, migration enabled, limitSource, fails).
# 1.20's limitSource "node" (node allocatable attachable-volumes-csi-*) is a CSINode limit here:
# kube >= 1.33 reads limits from the CSINode only (test_node_allocatable_is_not_a_limit).
CSI_LIMITS = [
    ("fits when node volume limit >= new pods CSI volume", ebs_one, [running, ebs_two], 4, [EBS_CSI], False,
     "csinode", False),
    ("doesn't when node volume limit <= pods CSI volume", ebs_one, [running, ebs_two], 2, [EBS_CSI], False,
     "csinode", True),
    ("should when driver does not support volume limits", ebs_one, [running, ebs_two], 2, [EBS_CSI], False,
     "csinode-with-no-limit", False),
    ("count pending PVCs towards volume limit <= pods CSI volume", ebs_one, [pending_volume, ebs_two], 2,
     [EBS_CSI], False, "csinode", True),
    ("count multiple pending pvcs towards volume limit >= pods CSI volume", ebs_one,
     [pending_volume, unbound_pvc2, ebs_two], 4, [EBS_CSI], False, "csinode", False),
    ("should count PVCs with invalid PV name but valid SC", ebs_one, [missing_pv, ebs_two], 2, [EBS_CSI], False,
     "csinode", True),
    ("don't count pvcs with missing SC towards volume limit", ebs_one, [running, no_sc_pvc], 2, [EBS_CSI], False,
     "csinode", False),
    ("count pvcs with the same type towards volume limit", ebs_one, [gce_two, ebs_two], 2, [EBS_CSI, GCE_CSI],
     False, "csinode", True),
    ("don't count pvcs with different type towards volume limit", gce_two, [ebs_two, running], 2,
     [EBS_CSI, GCE_CSI], False, "csinode", False),
    ("should count in-tree volumes if migration is enabled", in_tree_one, [in_tree_two], 2, [EBS_IN_TREE, EBS_CSI],
     True, "csinode", True),
    ("should count unbound in-tree volumes if migration is enabled", pending_volume, [in_tree_two], 2,
     [EBS_IN_TREE, EBS_CSI], True, "csinode", True),
    ("should not count in-tree volume if migration is disabled", in_tree_one, [in_tree_two], 2,
     [EBS_IN_TREE, EBS_CSI], False, "csinode", False),
    ("should not limit pod if volume used does not report limits", in_tree_one, [in_tree_two], 2,
     [EBS_IN_TREE, EBS_CSI], True, "csinode-with-no-limit", False),
    ("should not limit in-tree pod if migration is disabled", in_tree_one, [in_tree_two], 2,
     [EBS_IN_TREE, EBS_CSI], False, "csinode-with-no-limit", False),
    ("should not count non-migratable in-tree volumes", non_migratable, [ebs_two], 2, [HOSTPATH, EBS_CSI], True,
     "csinode", False),
    ("should count in-tree and csi volumes if migration is enabled (when scheduling in-tree volumes)", in_tree_one,
     [ebs_two], 2, [EBS_IN_TREE, EBS_CSI], True, "csinode", True),
    ("should count in-tree and csi volumes if migration is enabled (when scheduling csi volumes)", ebs_one,
     [in_tree_two], 2, [EBS_IN_TREE, EBS_CSI], True, "csinode", True),
    ("should not count in-tree and count csi volumes if migration is disabled (when scheduling csi volumes)",
     ebs_one, [ebs_two, in_tree_two], 3, [EBS_IN_TREE, EBS_CSI], False, "csinode", False),
    ("should not count in-tree and count csi volumes if migration is disabled (when scheduling in-tree volumes)",
     in_tree_one, [ebs_two], 2, [EBS_IN_TREE, EBS_CSI], False, "csinode", False),
]


@pytest.mark.parametrize(("test", "new", "existing", "max_vols", "drivers", "migration", "source", "fails"),
                         CSI_LIMITS, ids=[c[0] for c in CSI_LIMITS])
def test_csi_limits(test, new, existing, max_vols, drivers, migration, source, fails):
    objects = [*storage(drivers, drivers[0]),
               csi_node(drivers, max_vols, with_limits=source == "csinode",
                        migrated=EBS_IN_TREE if migration else "")]
    got = run(incoming(new), existing, objects)
    assert got[NODE] == (EXCEEDED if fails else Status())


def test_node_allocatable_is_not_a_limit():
    # 1.20 "doesn't when node volume limit <= pods CSI volume" with limitSource "node": now it fits.
    node = make_node(NODE, allocatable={"attachable-volumes-csi-ebs.csi.aws.com": "2"})
    got = run(incoming(ebs_one), [running, ebs_two], storage([EBS_CSI], EBS_CSI), nodes=[node])
    assert got[NODE] == Status()


def test_only_nodes_whose_csinode_limits_the_driver_fail():
    nodes = [make_node(n) for n in ("limited", "unlimited", "no-csinode", "other-driver")]
    on = [claims_pod(f"e-{n.name}", "csi-ebs.csi.aws.com-1", node_name=n.name) for n in nodes]
    objects = [
        *storage([EBS_CSI], EBS_CSI),
        CSINode(name="limited", drivers=(CSINodeDriver(name=EBS_CSI, allocatable=1),)),
        CSINode(name="unlimited", drivers=(CSINodeDriver(name=EBS_CSI),)),
        CSINode(name="other-driver", drivers=(CSINodeDriver(name=GCE_CSI, allocatable=0),)),
    ]
    got = run(incoming(ebs_one), on, objects, nodes=nodes)
    assert got == {"limited": EXCEEDED, "unlimited": Status(), "no-csinode": Status(), "other-driver": Status()}


def test_a_volume_already_on_the_node_is_not_new():
    objects = [*storage([EBS_CSI], EBS_CSI), csi_node([EBS_CSI], 2)]
    # ebs-two uses -1 and -2 (limit reached); the new pod uses -1 too: nothing new to attach.
    got = run(incoming(claims_pod("p", "csi-ebs.csi.aws.com-1")), [ebs_two], objects)
    assert got[NODE] == Status()
    got = run(incoming(claims_pod("p", "csi-ebs.csi.aws.com-1", "csi-ebs.csi.aws.com-3")), [ebs_two], objects)
    assert got[NODE] == EXCEEDED


def test_missing_claim_of_the_new_pod_is_unresolvable_on_every_node():
    nodes = [make_node(NODE), make_node("bare")]
    objects = [*storage([EBS_CSI], EBS_CSI), csi_node([EBS_CSI], 5)]
    got = run(incoming(claims_pod("p", "csi-ebs.csi.aws.com-0", "nope")), [], objects, nodes=nodes)
    want = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                  ('looking up PVC default/nope: persistentvolumeclaim "nope" not found',))
    assert got == {NODE: want, "bare": want}


def test_missing_claim_of_a_pod_on_the_node_is_not_counted():
    objects = [*storage([EBS_CSI], EBS_CSI), csi_node([EBS_CSI], 1)]
    got = run(incoming(ebs_one), [claims_pod("gone", "nope", node_name=NODE)], objects)
    assert got[NODE] == Status()


def ephemeral_pod(name, node_name="", uid=None):
    pod = make_pod(name, node_name=node_name, spec={"volumes": [
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]})
    return pod if uid is None else attrs.evolve(pod, uid=uid)


def ephemeral_claim(pod_name, owner_uid, controller=True):
    return PersistentVolumeClaim(name=f"{pod_name}-scratch", storage_class="csi-sc", owner_references=(
        OwnerReference(kind="Pod", name=pod_name, uid=owner_uid, controller=controller),))


def test_ephemeral_volumes():
    base = [StorageClass(name="csi-sc", provisioner=EBS_CSI), csi_node([EBS_CSI], 1)]
    pod = ephemeral_pod("new")
    # owned by the pod: counted (a new volume of the class's driver); 1 + 1 > 1 with ebs-one there
    owned = [*base, ephemeral_claim("new", pod.uid), *storage([EBS_CSI], EBS_CSI)[:2]]
    assert run(pod, [claims_pod("ebs", "csi-ebs.csi.aws.com-0", node_name=NODE)], owned)[NODE] == EXCEEDED
    assert run(pod, [], owned)[NODE] == Status()
    # not controlled by the pod: Error
    got = run(pod, [], [*base, ephemeral_claim("new", "someone-else")])[NODE]
    assert got == Status(Code.ERROR,
                         ("PVC default/new-scratch was not created for pod default/new (pod is not owner)",))
    got = run(pod, [], [*base, ephemeral_claim("new", pod.uid, controller=False)])[NODE]
    assert got.code == Code.ERROR
    # not created yet: unresolvable
    got = run(pod, [], base)[NODE]
    assert got == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                         ('looking up PVC default/new-scratch: persistentvolumeclaim "new-scratch" not found',))


def inline_pod(name, *sources, node_name=""):
    volumes = [{"name": f"v{i}", **s} for i, s in enumerate(sources)]
    return make_pod(name, node_name=node_name, spec={"volumes": volumes})


def test_inline_in_tree_volumes_count_when_migrated():
    ebs = {"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/vol-1"}}
    same = {"awsElasticBlockStore": {"volumeID": "vol-1"}}  # the same volume, bare ID
    other = {"awsElasticBlockStore": {"volumeID": "vol-2"}}
    migrated = [csi_node([EBS_CSI], 1, migrated=EBS_IN_TREE)]
    assert run(inline_pod("p", ebs), [inline_pod("e", other, node_name=NODE)], migrated)[NODE] == EXCEEDED
    assert run(inline_pod("p", ebs), [inline_pod("e", same, node_name=NODE)], migrated)[NODE] == Status()
    not_migrated = [csi_node([EBS_CSI], 1)]
    assert run(inline_pod("p", ebs), [inline_pod("e", other, node_name=NODE)], not_migrated)[NODE] == Status()


def test_untranslatable_inline_volume_is_an_error_where_migrated():
    bad = {"awsElasticBlockStore": {"volumeID": "aws://us-east-1a/not-a-volume"}}
    nodes = [make_node(NODE), make_node("plain")]
    got = run(inline_pod("p", bad), [], [csi_node([EBS_CSI], 5, migrated=EBS_IN_TREE)], nodes=nodes)
    assert got[NODE].code == Code.ERROR
    assert got[NODE].reasons[0].startswith("converting volume(v0) from inline to csi: ")
    assert got["plain"] == Status()


def test_pre_filter_skip():
    assert run(make_pod("p"), [], []) == Status.skip()
    assert run(inline_pod("p", {"configMap": {"name": "c"}}, {"csi": {"driver": EBS_CSI}}), [], []) == Status.skip()
    assert run(inline_pod("p", {"rbd": {"monitors": ["a"], "image": "i"}}), [], []) == Status.skip()
    # migratable inline sources do not skip, even those never counted (azureFile)
    assert run(inline_pod("p", {"azureFile": {"secretName": "s", "shareName": "x"}}), [], []) == {NODE: Status()}
    assert run(inline_pod("p", {"gcePersistentDisk": {"pdName": "d"}}), [], []) == {NODE: Status()}


def test_attached_volumes_follow_storage_changes():
    cache = make_cache([make_node(NODE)], [claims_pod("e", "late", node_name=NODE)])
    for obj in (*storage([EBS_CSI], EBS_CSI), csi_node([EBS_CSI], 1)):
        cache.add_storage(obj)
    plugin = NodeVolumeLimits(make_handle(cache=cache))
    batch = NodeBatch(cache.table, cache.table.rows())
    pod = incoming(ebs_one)

    def status():
        return plugin.filter_batch(CycleState(), pod, batch).status_at(0)

    assert status() == Status()  # "late" does not exist: not counted
    cache.add_storage(PersistentVolume(name="late-pv", csi_driver=EBS_CSI, csi_handle="h"))
    cache.add_storage(PersistentVolumeClaim(name="late", volume_name="late-pv"))
    assert status() == EXCEEDED


def test_csi_helper():
    node = csi_node([EBS_CSI], 1, migrated="kubernetes.io/aws-ebs, kubernetes.io/azure-file")
    assert is_csi_migration_on(node, EBS_IN_TREE)
    assert not is_csi_migration_on(node, "kubernetes.io/azure-file")  # never counted by the scheduler
    assert not is_csi_migration_on(node, "kubernetes.io/gce-pd")  # not listed
    assert not is_csi_migration_on(None, EBS_IN_TREE)
    gce = make_pod("p", spec={"volumes": [{"name": "d", "gcePersistentDisk": {"pdName": "disk"}}]}).volumes[0]
    assert translate_inline_volume(gce) == (GCE_CSI, "projects/UNSPECIFIED/zones/UNSPECIFIED/disks/disk")
    pv = PersistentVolume(name="v", in_tree="kubernetes.io/gce-pd", in_tree_handle="disk",
                          labels={"topology.kubernetes.io/zone": "us-c1-a"})
    assert translate_pv(pv) == (GCE_CSI, "projects/UNSPECIFIED/zones/us-c1-a/disks/disk")
    regional = attrs.evolve(pv, labels={"topology.kubernetes.io/zone": "us-c1-a__us-c1-b"})
    assert translate_pv(regional) == (GCE_CSI, "projects/UNSPECIFIED/regions/us-c1/disks/disk")
    assert translate_pv(PersistentVolume(name="v")) is None


def test_registration():
    registry = PluginRegistry()
    nodevolumelimits.register(registry)
    info = registry.plugins["NodeVolumeLimits"]
    assert info.extension_points == frozenset({"preFilter", "filter"})
    assert info.args_type is None


def test_events_to_register():
    plugin = NodeVolumeLimits(make_handle())
    assert plugin.events_to_register() == [
        ClusterEvent("CSINode", "Add"), ClusterEvent("CSINode", "Update"),
        ClusterEvent("AssignedPod", "Delete"), ClusterEvent("PersistentVolumeClaim", "Add"),
    ]
    assert requeues(plugin, ClusterEvent("CSINode", "Update"))
    assert requeues(plugin, ClusterEvent("AssignedPod", "Delete"))
    assert not requeues(plugin, ClusterEvent("Node", "Add"))
