"""Decoding the storage objects (scorer.model.decode.storage_from_dict) and pod volumes, and reading
them from cluster files (a kubectl export of pv,pvc,storageclass,csinode,csidriver)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from scorer.errors import ModelError
from scorer.model import (
    API_VERSIONS,
    READ_KINDS,
    STORAGE_KINDS,
    ClaimRef,
    CSIDriver,
    CSINode,
    CSINodeDriver,
    CSIStorageCapacity,
    LabelSelector,
    Node,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    TopologySelectorTerm,
    Volume,
    load_objects,
    object_from_dict,
    pod_from_dict,
    storage_from_dict,
)

GI = 1 << 30


def pv_dict() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": "pv-1", "uid": "u-pv", "resourceVersion": "42", "labels": {"zone": "a"},
                     "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
        "spec": {
            "capacity": {"storage": "10Gi"},
            "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
            "storageClassName": "fast",
            "volumeMode": "Block",
            "claimRef": {"kind": "PersistentVolumeClaim", "namespace": "shop", "name": "data", "uid": "u-c",
                         "resourceVersion": "7"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}},
            "csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-1"},
            "volumeAttributesClassName": "gold",
        },
        "status": {"phase": "Bound"},
    }


def pvc_dict() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "shop", "uid": "u-c", "resourceVersion": "7",
                     "annotations": {"volume.kubernetes.io/selected-node": "n1"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "web", "uid": "u-p",
                                          "controller": True}]},
        "spec": {
            "accessModes": ["ReadWriteOncePod"],
            "resources": {"requests": {"storage": "500Mi"}},
            "storageClassName": "fast",
            "volumeName": "pv-1",
            "selector": {"matchLabels": {"zone": "a"}},
        },
        "status": {"phase": "Bound"},
    }


def class_dict() -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "fast", "resourceVersion": "3"},
        "provisioner": "ebs.csi.aws.com",
        "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["a", "b"]}]}],
    }


def csinode_dict() -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": "n1", "annotations": {"storage.alpha.kubernetes.io/migrated-plugins":
                                                   "kubernetes.io/aws-ebs, kubernetes.io/gce-pd"}},
        "spec": {"drivers": [{"name": "ebs.csi.aws.com", "nodeID": "i-1", "allocatable": {"count": 25},
                              "topologyKeys": ["zone"]},
                             {"name": "other.csi", "nodeID": "n1"}]},
    }


def csidriver_dict() -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "ebs.csi.aws.com"},
            "spec": {"storageCapacity": True, "attachRequired": False}}


def capacity_dict() -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1beta1", "kind": "CSIStorageCapacity",
            "metadata": {"name": "cap-1", "namespace": "kube-system"},
            "storageClassName": "fast", "nodeTopology": {"matchLabels": {"zone": "a"}},
            "capacity": "100Gi", "maximumVolumeSize": "1Ti"}


def test_persistent_volume() -> None:
    pv = storage_from_dict(pv_dict())
    assert isinstance(pv, PersistentVolume)
    assert pv.key == "pv-1" and pv.uid == "u-pv" and pv.resource_version == "42"
    assert pv.labels == {"zone": "a"}
    assert pv.storage_class == "fast" and pv.capacity == 10 * GI
    assert pv.access_modes == ("ReadWriteOnce", "ReadOnlyMany") and pv.volume_mode == "Block"
    assert pv.claim_ref == ClaimRef(namespace="shop", name="data", uid="u-c", resource_version="7")
    assert pv.node_affinity is not None
    assert pv.node_affinity.matches(Node(name="x", labels={"kubernetes.io/hostname": "n1"}))
    assert not pv.node_affinity.matches(Node(name="n2", labels={"kubernetes.io/hostname": "n2"}))
    assert (pv.csi_driver, pv.csi_handle) == ("ebs.csi.aws.com", "vol-1")
    assert pv.phase == "Bound" and pv.volume_attributes_class == "gold" and not pv.deleting


def test_persistent_volume_defaults_and_the_beta_class_annotation() -> None:
    obj = {"apiVersion": "v1", "kind": "PersistentVolume",
           "metadata": {"name": "pv", "annotations": {"volume.beta.kubernetes.io/storage-class": "beta"},
                        "deletionTimestamp": "2024-01-01T00:00:00Z"},
           "spec": {"storageClassName": "ignored", "hostPath": {"path": "/x"}}}
    pv = storage_from_dict(obj)
    assert isinstance(pv, PersistentVolume)
    assert pv.storage_class == "beta"  # the annotation wins
    assert pv.volume_mode == "Filesystem" and pv.capacity == 0 and pv.phase == ""
    assert pv.claim_ref is None and pv.node_affinity is None and pv.csi_driver == "" and pv.in_tree == ""
    assert pv.deleting


@pytest.mark.parametrize(("source", "fields", "plugin", "handle"), [
    ("gcePersistentDisk", {"pdName": "disk-1"}, "kubernetes.io/gce-pd", "disk-1"),
    ("awsElasticBlockStore", {"volumeID": "vol-1"}, "kubernetes.io/aws-ebs", "vol-1"),
    ("azureDisk", {"diskURI": "uri", "diskName": "d"}, "kubernetes.io/azure-disk", "uri"),
    ("cinder", {"volumeID": "c-1"}, "kubernetes.io/cinder", "c-1"),
])
def test_persistent_volume_in_tree_sources(source: str, fields: dict[str, str], plugin: str, handle: str) -> None:
    obj = pv_dict()
    del obj["spec"]["csi"]
    obj["spec"][source] = fields
    pv = storage_from_dict(obj)
    assert isinstance(pv, PersistentVolume)
    assert (pv.in_tree, pv.in_tree_handle, pv.csi_driver) == (plugin, handle, "")


def test_persistent_volume_claim() -> None:
    pvc = storage_from_dict(pvc_dict())
    assert isinstance(pvc, PersistentVolumeClaim)
    assert pvc.key == "shop/data" and pvc.uid == "u-c" and pvc.resource_version == "7"
    assert pvc.access_modes == ("ReadWriteOncePod",) and pvc.request == 500 << 20
    assert pvc.storage_class == "fast" and pvc.volume_name == "pv-1" and pvc.phase == "Bound"
    assert pvc.selector == LabelSelector(match_labels={"zone": "a"})
    assert pvc.selected_node == "n1" and not pvc.fully_bound  # no bind-completed annotation
    assert pvc.owner_references[0].kind == "Pod" and pvc.owner_references[0].controller
    assert pvc.volume_mode == "Filesystem"


def test_persistent_volume_claim_without_request_class_or_namespace() -> None:
    obj = {"kind": "PersistentVolumeClaim", "metadata": {"name": "c",
           "annotations": {"volume.beta.kubernetes.io/storage-class": ""}},
           "spec": {"storageClassName": "fast"}}
    pvc = storage_from_dict(obj)
    assert isinstance(pvc, PersistentVolumeClaim)
    assert pvc.key == "default/c" and pvc.request is None and pvc.selector is None
    assert pvc.storage_class == ""  # the beta annotation wins, even empty


def test_storage_class() -> None:
    storage_class = storage_from_dict(class_dict())
    assert storage_class == StorageClass(
        name="fast", provisioner="ebs.csi.aws.com", volume_binding_mode="WaitForFirstConsumer",
        allowed_topologies=(TopologySelectorTerm(match_label_expressions=(("zone", ("a", "b")),)),),
        resource_version="3",
    )
    minimal = storage_from_dict({"apiVersion": "storage.k8s.io/v1beta1", "kind": "StorageClass",
                                 "metadata": {"name": "slow"}, "provisioner": "kubernetes.io/no-provisioner"})
    assert isinstance(minimal, StorageClass)
    assert minimal.volume_binding_mode == "Immediate"  # the API server's default


def test_csinode_csidriver_and_capacity() -> None:
    csinode = storage_from_dict(csinode_dict())
    assert isinstance(csinode, CSINode)
    assert csinode.drivers == (
        CSINodeDriver(name="ebs.csi.aws.com", node_id="i-1", allocatable=25, topology_keys=("zone",)),
        CSINodeDriver(name="other.csi", node_id="n1"),
    )
    assert csinode.limits() == {"ebs.csi.aws.com": 25}
    assert csinode.migrated_plugins == {"kubernetes.io/aws-ebs", "kubernetes.io/gce-pd"}
    assert storage_from_dict(csidriver_dict()) == CSIDriver(name="ebs.csi.aws.com", storage_capacity=True,
                                                            attach_required=False)
    assert storage_from_dict({"kind": "CSIDriver", "metadata": {"name": "d"}}) == CSIDriver(name="d")
    assert storage_from_dict(capacity_dict()) == CSIStorageCapacity(
        namespace="kube-system", name="cap-1", storage_class_name="fast",
        node_topology=LabelSelector(match_labels={"zone": "a"}), capacity=100 * GI, maximum_volume_size=1 << 40,
    )


def test_storage_kinds_are_read_kinds_with_their_api_versions() -> None:
    assert set(STORAGE_KINDS) <= set(READ_KINDS)
    assert API_VERSIONS["PersistentVolume"] == ("v1",)
    assert API_VERSIONS["StorageClass"] == ("storage.k8s.io/v1", "storage.k8s.io/v1beta1")
    assert "storage.k8s.io/v1alpha1" in API_VERSIONS["CSIStorageCapacity"]
    assert isinstance(object_from_dict(class_dict()), StorageClass)
    assert isinstance(object_from_dict({"metadata": {"name": "c"}}, kind="PersistentVolumeClaim"),
                      PersistentVolumeClaim)


def test_storage_from_dict_refuses_other_kinds() -> None:
    with pytest.raises(ModelError, match="object web: kind: expected one of StorageClass, CSIDriver"):
        storage_from_dict({"kind": "Pod", "metadata": {"name": "web"}})


Path_ = tuple[Any, ...]
DELETE = object()


def with_value(obj: dict[str, Any], path: Path_, value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    target = obj
    for key in path[:-1]:
        target = target[key]
    if value is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return obj


STORAGE_ERRORS = [
    # (object, path, value, label, field, reason)
    (pv_dict, ("apiVersion",), "storage.k8s.io/v1", "PersistentVolume pv-1", "apiVersion",
     'expected "v1" (the only version of PersistentVolume)'),
    (pv_dict, ("spec", "capacity", "storage"), "ten", "PersistentVolume pv-1", "spec.capacity.storage",
     'invalid quantity "ten"'),
    (pv_dict, ("spec", "capacity", "storage"), "-1Gi", "PersistentVolume pv-1", "spec.capacity.storage",
     "must not be negative"),
    (pv_dict, ("spec", "capacity", "storage"), [1], "PersistentVolume pv-1", "spec.capacity.storage",
     "expected a quantity"),
    (pv_dict, ("spec", "accessModes"), ["RWO"], "PersistentVolume pv-1", "spec.accessModes[0]",
     'unknown value "RWO", expected one of ReadWriteOnce, ReadOnlyMany, ReadWriteMany, ReadWriteOncePod'),
    (pv_dict, ("spec", "accessModes"), "ReadWriteOnce", "PersistentVolume pv-1", "spec.accessModes",
     "expected a list"),
    (pv_dict, ("spec", "volumeMode"), "Raw", "PersistentVolume pv-1", "spec.volumeMode",
     'unknown value "Raw", expected one of Filesystem, Block'),
    (pv_dict, ("status", "phase"), "Gone", "PersistentVolume pv-1", "status.phase",
     'unknown value "Gone", expected one of Pending, Available, Bound, Released, Failed'),
    (pv_dict, ("spec", "claimRef"), "data", "PersistentVolume pv-1", "spec.claimRef", "expected an object"),
    (pv_dict, ("spec", "claimRef", "name"), DELETE, "PersistentVolume pv-1", "spec.claimRef.name", "required"),
    (pv_dict, ("spec", "nodeAffinity", "required", "nodeSelectorTerms"), [], "PersistentVolume pv-1",
     "spec.nodeAffinity.required.nodeSelectorTerms", "must have at least one term"),
    (pv_dict, ("spec", "nodeAffinity", "required", "nodeSelectorTerms", 0, "matchExpressions", 0, "operator"),
     "Near", "PersistentVolume pv-1", "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].operator",
     'unknown operator "Near"'),
    (pv_dict, ("spec", "csi", "driver"), DELETE, "PersistentVolume pv-1", "spec.csi.driver", "required"),
    (pv_dict, ("spec", "csi", "volumeHandle"), 3, "PersistentVolume pv-1", "spec.csi.volumeHandle",
     "expected a string, got integer 3"),
    (pv_dict, ("spec", "gcePersistentDisk"), {"fsType": "ext4"}, "PersistentVolume pv-1",
     "spec.gcePersistentDisk.pdName", "required"),
    (pv_dict, ("metadata", "labels"), ["a"], "PersistentVolume pv-1", "metadata.labels", "expected a map"),
    (pvc_dict, ("spec", "resources", "requests", "storage"), "1Zz", "PersistentVolumeClaim shop/data",
     "spec.resources.requests.storage", "invalid quantity"),
    (pvc_dict, ("spec", "resources", "requests"), "1Gi", "PersistentVolumeClaim shop/data",
     "spec.resources.requests", "expected an object"),
    (pvc_dict, ("spec", "accessModes"), [None], "PersistentVolumeClaim shop/data", "spec.accessModes[0]",
     "expected a string, got null"),
    (pvc_dict, ("spec", "selector", "matchExpressions"), [{"key": "a", "operator": "Gt", "values": ["1"]}],
     "PersistentVolumeClaim shop/data", "spec.selector.matchExpressions[0].operator", 'unknown operator "Gt"'),
    (pvc_dict, ("status", "phase"), "Bound?", "PersistentVolumeClaim shop/data", "status.phase",
     "expected one of Pending, Bound, Lost"),
    (pvc_dict, ("spec", "volumeName"), 1, "PersistentVolumeClaim shop/data", "spec.volumeName",
     "expected a string"),
    (pvc_dict, ("metadata", "ownerReferences", 0, "kind"), DELETE, "PersistentVolumeClaim shop/data",
     "metadata.ownerReferences[0].kind", "required"),
    (class_dict, ("provisioner",), DELETE, "StorageClass fast", "provisioner", "required"),
    (class_dict, ("apiVersion",), "v1", "StorageClass fast", "apiVersion",
     'expected "storage.k8s.io/v1" or "storage.k8s.io/v1beta1"'),
    (class_dict, ("volumeBindingMode",), "Later", "StorageClass fast", "volumeBindingMode",
     'unknown value "Later", expected one of Immediate, WaitForFirstConsumer'),
    (class_dict, ("allowedTopologies", 0, "matchLabelExpressions", 0, "values"), [], "StorageClass fast",
     "allowedTopologies[0].matchLabelExpressions[0].values", "required"),
    (class_dict, ("allowedTopologies", 0, "matchLabelExpressions", 0, "key"), DELETE, "StorageClass fast",
     "allowedTopologies[0].matchLabelExpressions[0].key", "required"),
    (csinode_dict, ("spec", "drivers", 0, "allocatable", "count"), -1, "CSINode n1",
     "spec.drivers[0].allocatable.count", "-1"),
    (csinode_dict, ("spec", "drivers", 0, "allocatable", "count"), "25", "CSINode n1",
     "spec.drivers[0].allocatable.count", "expected an integer"),
    (csinode_dict, ("spec", "drivers", 1, "name"), DELETE, "CSINode n1", "spec.drivers[1].name", "required"),
    (csinode_dict, ("spec", "drivers"), {"name": "x"}, "CSINode n1", "spec.drivers", "expected a list"),
    (csidriver_dict, ("spec", "storageCapacity"), "yes", "CSIDriver ebs.csi.aws.com", "spec.storageCapacity",
     "expected a boolean"),
    (csidriver_dict, ("spec", "attachRequired"), 1, "CSIDriver ebs.csi.aws.com", "spec.attachRequired",
     "expected a boolean"),
    (capacity_dict, ("storageClassName",), DELETE, "CSIStorageCapacity kube-system/cap-1", "storageClassName",
     "required"),
    (capacity_dict, ("capacity",), "lots", "CSIStorageCapacity kube-system/cap-1", "capacity",
     'invalid quantity "lots"'),
    (capacity_dict, ("nodeTopology",), "zone=a", "CSIStorageCapacity kube-system/cap-1", "nodeTopology",
     "expected an object"),
    (capacity_dict, ("apiVersion",), "storage.k8s.io/v2", "CSIStorageCapacity kube-system/cap-1", "apiVersion",
     'expected "storage.k8s.io/v1" or "storage.k8s.io/v1beta1" or "storage.k8s.io/v1alpha1"'),
]


@pytest.mark.parametrize(("build", "path", "value", "label", "field", "reason"), STORAGE_ERRORS)
def test_storage_errors_name_object_and_field(build: Any, path: Path_, value: Any, label: str, field: str,
                                              reason: str) -> None:
    with pytest.raises(ModelError) as info:
        storage_from_dict(with_value(build(), path, value), origin="document 1 of c.yaml")
    message = str(info.value)
    assert message.startswith(f"{label} (document 1 of c.yaml): {field}: "), message
    assert reason in message, message


# --------------------------------------------------------------------------
# Pod volumes


def pod_with(volumes: list[Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"containers": [{"name": "c"}], "volumes": volumes}}


def test_pod_volumes_keep_each_source_and_its_fields() -> None:
    volumes = [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-web", "readOnly": True}},
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
        {"name": "gce", "gcePersistentDisk": {"pdName": "pd-1", "readOnly": True}},
        {"name": "ebs", "awsElasticBlockStore": {"volumeID": "vol-1"}},
        {"name": "iscsi", "iscsi": {"iqn": "iqn.1", "targetPortal": "1.2.3.4", "lun": 0}},
        {"name": "rbd", "rbd": {"image": "img", "monitors": ["m1", "m2"]}},
        {"name": "rbd2", "rbd": {"image": "img", "monitors": ["m1"], "pool": "p"}},
        {"name": "azure", "azureDisk": {"diskURI": "uri", "diskName": "d"}},
        {"name": "cinder", "cinder": {"volumeID": "c-1"}},
        {"name": "inline", "csi": {"driver": "inline.csi"}},
        {"name": "cfg", "configMap": {"name": "cfg"}},
        {"name": "tmp", "emptyDir": {}},
        {"name": "nfs", "nfs": {"server": "s", "path": "/"}},
        {"name": "none"},
    ]
    pod = pod_from_dict(pod_with(volumes))
    assert pod.volumes == (
        Volume(name="data", source="persistentVolumeClaim", claim_name="data-web", read_only=True),
        Volume(name="scratch", source="ephemeral", claim_name="web-scratch"),
        Volume(name="gce", source="gcePersistentDisk", disk="pd-1", read_only=True),
        Volume(name="ebs", source="awsElasticBlockStore", disk="vol-1"),
        Volume(name="iscsi", source="iscsi", disk="iqn.1"),
        Volume(name="rbd", source="rbd", disk="img", rbd_monitors=("m1", "m2"), rbd_pool="rbd"),
        Volume(name="rbd2", source="rbd", disk="img", rbd_monitors=("m1",), rbd_pool="p"),
        Volume(name="azure", source="azureDisk", disk="uri"),
        Volume(name="cinder", source="cinder", disk="c-1"),
        Volume(name="inline", source="csi", driver="inline.csi"),
        Volume(name="cfg", source="configMap"),
        Volume(name="tmp", source="emptyDir"),
        Volume(name="nfs", source="nfs"),
        Volume(name="none"),
    )
    assert pod.pvc_claims == ("data-web", "web-scratch")
    assert [v.is_claim for v in pod.volumes[:3]] == [True, True, False]


POD_VOLUME_ERRORS = [
    ({"name": "x", "emptyDir": {}, "hostPath": {"path": "/"}}, "spec.volumes[0]",
     "hostPath and emptyDir: a volume has only one source"),
    ({"name": "x", "gcePersistentDisk": {}}, "spec.volumes[0].gcePersistentDisk.pdName", "required"),
    ({"name": "x", "awsElasticBlockStore": {"volumeID": 1}}, "spec.volumes[0].awsElasticBlockStore.volumeID",
     "expected a string"),
    ({"name": "x", "iscsi": {"targetPortal": "p"}}, "spec.volumes[0].iscsi.iqn", "required"),
    ({"name": "x", "rbd": {"image": "i"}}, "spec.volumes[0].rbd.monitors", "required"),
    ({"name": "x", "rbd": {"image": "i", "monitors": "m"}}, "spec.volumes[0].rbd.monitors", "expected a list"),
    ({"name": "x", "azureDisk": {"diskName": "d"}}, "spec.volumes[0].azureDisk.diskURI", "required"),
    ({"name": "x", "cinder": {}}, "spec.volumes[0].cinder.volumeID", "required"),
    ({"name": "x", "csi": {}}, "spec.volumes[0].csi.driver", "required"),
    ({"name": "x", "csi": "driver"}, "spec.volumes[0].csi", "expected an object"),
    ({"name": "x", "persistentVolumeClaim": {"claimName": "c", "readOnly": "yes"}},
     "spec.volumes[0].persistentVolumeClaim.readOnly", "expected a boolean"),
]


@pytest.mark.parametrize(("volume", "field", "reason"), POD_VOLUME_ERRORS)
def test_pod_volume_errors_name_the_field(volume: dict[str, Any], field: str, reason: str) -> None:
    with pytest.raises(ModelError) as info:
        pod_from_dict(pod_with([volume]))
    assert str(info.value).startswith(f"Pod shop/web: {field}: "), str(info.value)
    assert reason in str(info.value)


# --------------------------------------------------------------------------
# Cluster files

KUBECTL_EXPORT = """\
apiVersion: v1
items:
- apiVersion: v1
  kind: PersistentVolume
  metadata:
    annotations:
      pv.kubernetes.io/provisioned-by: ebs.csi.aws.com
    creationTimestamp: "2024-05-01T10:00:00Z"
    finalizers:
    - kubernetes.io/pv-protection
    managedFields:
    - apiVersion: v1
      fieldsType: FieldsV1
      fieldsV1: {"f:spec": {"f:capacity": {}}}
      manager: csi-provisioner
      operation: Update
      time: "2024-05-01T10:00:00Z"
    name: pvc-1234
    resourceVersion: "1001"
    uid: 5a1e
  spec:
    accessModes:
    - ReadWriteOnce
    capacity:
      storage: 8Gi
    claimRef:
      apiVersion: v1
      kind: PersistentVolumeClaim
      name: data-db-0
      namespace: shop
      resourceVersion: "990"
      uid: c1a1
    csi:
      driver: ebs.csi.aws.com
      fsType: ext4
      volumeAttributes:
        storage.kubernetes.io/csiProvisionerIdentity: 1714-ebs
      volumeHandle: vol-0abc
    nodeAffinity:
      required:
        nodeSelectorTerms:
        - matchExpressions:
          - key: topology.ebs.csi.aws.com/zone
            operator: In
            values:
            - eu-west-1a
    persistentVolumeReclaimPolicy: Delete
    storageClassName: gp3
    volumeMode: Filesystem
  status:
    phase: Bound
- apiVersion: v1
  kind: PersistentVolumeClaim
  metadata:
    annotations:
      pv.kubernetes.io/bind-completed: "yes"
      pv.kubernetes.io/bound-by-controller: "yes"
      volume.beta.kubernetes.io/storage-provisioner: ebs.csi.aws.com
      volume.kubernetes.io/selected-node: ip-10-0-0-1
    finalizers:
    - kubernetes.io/pvc-protection
    labels:
      app: db
    name: data-db-0
    namespace: shop
    resourceVersion: "1003"
    uid: c1a1
  spec:
    accessModes:
    - ReadWriteOnce
    resources:
      requests:
        storage: 8Gi
    storageClassName: gp3
    volumeMode: Filesystem
    volumeName: pvc-1234
  status:
    accessModes:
    - ReadWriteOnce
    capacity:
      storage: 8Gi
    phase: Bound
- allowVolumeExpansion: true
  apiVersion: storage.k8s.io/v1
  kind: StorageClass
  metadata:
    annotations:
      storageclass.kubernetes.io/is-default-class: "true"
    name: gp3
    resourceVersion: "12"
  parameters:
    type: gp3
  provisioner: ebs.csi.aws.com
  reclaimPolicy: Delete
  volumeBindingMode: WaitForFirstConsumer
- apiVersion: storage.k8s.io/v1
  kind: CSINode
  metadata:
    name: ip-10-0-0-1
    ownerReferences:
    - apiVersion: v1
      kind: Node
      name: ip-10-0-0-1
      uid: n-1
  spec:
    drivers:
    - allocatable:
        count: 25
      name: ebs.csi.aws.com
      nodeID: i-0123
      topologyKeys:
      - topology.ebs.csi.aws.com/zone
- apiVersion: storage.k8s.io/v1
  kind: CSIDriver
  metadata:
    name: ebs.csi.aws.com
  spec:
    attachRequired: true
    fsGroupPolicy: ReadWriteOnceWithFSType
    podInfoOnMount: false
    requiresRepublish: false
    storageCapacity: false
    volumeLifecycleModes:
    - Persistent
kind: List
metadata:
  resourceVersion: ""
"""


def test_a_kubectl_export_of_storage_objects_reads_as_is() -> None:
    loaded = load_objects(KUBECTL_EXPORT, "storage.yaml")
    assert loaded.warnings == [] and loaded.skipped == []
    assert [type(obj).__name__ for obj in loaded.storage] == [
        "PersistentVolume", "PersistentVolumeClaim", "StorageClass", "CSINode", "CSIDriver"]
    pv, pvc, storage_class, csinode, driver = loaded.storage
    assert isinstance(pv, PersistentVolume) and isinstance(pvc, PersistentVolumeClaim)
    assert pv.claim_ref is not None and pv.claim_ref.key == pvc.key and pv.claim_ref.uid == pvc.uid
    assert pv.capacity == 8 * GI and pv.csi_driver == "ebs.csi.aws.com" and pv.phase == "Bound"
    assert pvc.fully_bound and pvc.selected_node == "ip-10-0-0-1"
    assert isinstance(storage_class, StorageClass) and storage_class.volume_binding_mode == "WaitForFirstConsumer"
    assert isinstance(csinode, CSINode) and csinode.limits() == {"ebs.csi.aws.com": 25}
    assert isinstance(driver, CSIDriver) and driver.storage_capacity is False


def test_a_storage_object_defined_twice_is_an_error() -> None:
    text = KUBECTL_EXPORT + "---\napiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pvc-1234}\n"
    with pytest.raises(ModelError, match=r"PersistentVolume pvc-1234 \(document 2 of s.yaml\): defined twice, "
                                         r"first in document 1 of s.yaml, items\[0\]"):
        load_objects(text, "s.yaml")


def test_a_bad_storage_object_in_a_list_names_the_item() -> None:
    text = KUBECTL_EXPORT.replace("volumeBindingMode: WaitForFirstConsumer", "volumeBindingMode: Whenever")
    with pytest.raises(ModelError) as info:
        load_objects(text, "s.yaml")
    assert str(info.value).startswith(
        "StorageClass gp3 (document 1 of s.yaml, items[2]): volumeBindingMode: unknown value \"Whenever\"")
