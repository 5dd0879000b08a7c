"""Decoding the storage objects: PersistentVolume, PersistentVolumeClaim, StorageClass, CSINode, CSIDriver,
CSIStorageCapacity (``storage_from_dict`` in ``scorer.model.decode``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scorer.errors import QuantityError
from scorer.inputs.describe import expected, join_path, quote
from scorer.model.decode_fields import (
    FieldError,
    _bool,
    _choice,
    _mapping,
    _mappings,
    _optional_int,
    _optional_mapping,
    _owner_reference,
    _required_str,
    _str,
    _str_map,
    _str_tuple,
)
from scorer.model.decode_selectors import (
    _label_selector,
    _node_selector,
)
from scorer.model.storage import (
    ACCESS_MODES,
    ANN_STORAGE_CLASS_BETA,
    BINDING_MODES,
    CLAIM_PHASES,
    IMMEDIATE,
    VOLUME_MODES,
    VOLUME_PHASES,
    ClaimRef,
    CSIDriver,
    CSINode,
    CSINodeDriver,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    TopologySelectorTerm,
)
from scorer.quantity import resource_value

# PersistentVolume in-tree sources the CSI translation knows: (source key, plugin name, handle field).
_PV_IN_TREE: tuple[tuple[str, str, str], ...] = (
    ("gcePersistentDisk", "kubernetes.io/gce-pd", "pdName"),
    ("awsElasticBlockStore", "kubernetes.io/aws-ebs", "volumeID"),
    ("azureDisk", "kubernetes.io/azure-disk", "diskURI"),
    ("cinder", "kubernetes.io/cinder", "volumeID"),
)


def _storage_quantity(obj: Mapping[str, Any], key: str, path: str) -> int | None:
    """A storage quantity in bytes (``"10Gi"``), not negative; None when unset."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise FieldError(join_path(path, key), expected('a quantity like "10Gi"', value))
    try:
        amount = resource_value("storage", value)
    except QuantityError as error:
        raise FieldError(join_path(path, key), str(error)) from None
    if amount < 0:
        raise FieldError(join_path(path, key), f"must not be negative, got {quote(value)}")
    return amount


def _choices(obj: Mapping[str, Any], key: str, path: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    """A list of strings out of ``allowed`` (``accessModes``)."""
    values = _str_tuple(obj, key, path)
    for index, value in enumerate(values):
        if value not in allowed:
            raise FieldError(f"{join_path(path, key)}[{index}]",
                             f"unknown value {quote(value)}, expected one of {', '.join(allowed)}")
    return values


def _defaulted_choice(obj: Mapping[str, Any], key: str, path: str, allowed: tuple[str, ...], default: str) -> str:
    """A string out of ``allowed``; ``default`` (the API server's) when unset or empty."""
    if not obj.get(key):
        return default
    return _choice(obj, key, path, allowed)


def _storage_class_name(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str:
    """The beta annotation ``volume.beta.kubernetes.io/storage-class`` wins over
    ``spec.storageClassName`` (kube's ``GetPersistentVolume(Claim)Class``)."""
    annotations = _str_map(meta, "annotations", "metadata")
    if ANN_STORAGE_CLASS_BETA in annotations:
        return annotations[ANN_STORAGE_CLASS_BETA]
    return _str(spec, "storageClassName", "spec")


def _claim_ref(spec: Mapping[str, Any]) -> ClaimRef | None:
    ref = _optional_mapping(spec, "claimRef", "spec")
    if ref is None:
        return None
    path = "spec.claimRef"
    return ClaimRef(
        namespace=_str(ref, "namespace", path),
        name=_required_str(ref, "name", path),
        uid=_str(ref, "uid", path),
        resource_version=_str(ref, "resourceVersion", path),
    )


def _persistent_volume(
    obj: Mapping[str, Any], meta: Mapping[str, Any], namespace: str, name: str
) -> PersistentVolume:
    spec = _mapping(obj, "spec", "")
    status = _mapping(obj, "status", "")
    csi = _optional_mapping(spec, "csi", "spec")
    in_tree = in_tree_handle = ""
    for source, plugin, handle_field in _PV_IN_TREE:
        source_obj = _optional_mapping(spec, source, "spec")
        if source_obj is not None:
            in_tree = plugin
            in_tree_handle = _required_str(source_obj, handle_field, join_path("spec", source))
            break
    capacity = _storage_quantity(_mapping(spec, "capacity", "spec"), "storage", "spec.capacity")
    node_affinity = _optional_mapping(spec, "nodeAffinity", "spec")
    return PersistentVolume(
        name=name,
        uid=_str(meta, "uid", "metadata"),
        labels=_str_map(meta, "labels", "metadata"),
        annotations=_str_map(meta, "annotations", "metadata"),
        storage_class=_storage_class_name(meta, spec),
        capacity=capacity or 0,
        access_modes=_choices(spec, "accessModes", "spec", ACCESS_MODES),
        volume_mode=_defaulted_choice(spec, "volumeMode", "spec", VOLUME_MODES, "Filesystem"),
        claim_ref=_claim_ref(spec),
        node_affinity=None if node_affinity is None else _node_selector(
            node_affinity, "required", "spec.nodeAffinity"),
        phase=_defaulted_choice(status, "phase", "status", VOLUME_PHASES, ""),
        csi_driver="" if csi is None else _required_str(csi, "driver", "spec.csi"),
        csi_handle="" if csi is None else _required_str(csi, "volumeHandle", "spec.csi"),
        in_tree=in_tree,
        in_tree_handle=in_tree_handle,
        volume_attributes_class=_str(spec, "volumeAttributesClassName", "spec"),
        deleting=meta.get("deletionTimestamp") is not None,
        resource_version=_str(meta, "resourceVersion", "metadata"),
    )


def _persistent_volume_claim(
    obj: Mapping[str, Any], meta: Mapping[str, Any], namespace: str, name: str
) -> PersistentVolumeClaim:
    spec = _mapping(obj, "spec", "")
    status = _mapping(obj, "status", "")
    resources = _mapping(spec, "resources", "spec")
    requests = _mapping(resources, "requests", "spec.resources")
    return PersistentVolumeClaim(
        namespace=namespace,
        name=name,
        uid=_str(meta, "uid", "metadata"),
        labels=_str_map(meta, "labels", "metadata"),
        annotations=_str_map(meta, "annotations", "metadata"),
        owner_references=tuple(
            _owner_reference(item, path) for path, item in _mappings(meta, "ownerReferences", "metadata")
        ),
        access_modes=_choices(spec, "accessModes", "spec", ACCESS_MODES),
        volume_name=_str(spec, "volumeName", "spec"),
        storage_class=_storage_class_name(meta, spec),
        request=_storage_quantity(requests, "storage", "spec.resources.requests"),
        selector=_label_selector(spec, "selector", "spec"),
        volume_mode=_defaulted_choice(spec, "volumeMode", "spec", VOLUME_MODES, "Filesystem"),
        volume_attributes_class=_str(spec, "volumeAttributesClassName", "spec"),
        phase=_defaulted_choice(status, "phase", "status", CLAIM_PHASES, ""),
        deleting=meta.get("deletionTimestamp") is not None,
        resource_version=_str(meta, "resourceVersion", "metadata"),
    )


def _topology_term(obj: Mapping[str, Any], path: str) -> TopologySelectorTerm:
    expressions = []
    for item_path, item in _mappings(obj, "matchLabelExpressions", path):
        values = _str_tuple(item, "values", item_path)
        if not values:
            raise FieldError(join_path(item_path, "values"), "required, expected at least one value")
        expressions.append((_required_str(item, "key", item_path), values))
    return TopologySelectorTerm(match_label_expressions=tuple(expressions))


def _storage_class(obj: Mapping[str, Any], meta: Mapping[str, Any], namespace: str, name: str) -> StorageClass:
    # A StorageClass has no spec: its fields are at the top level.
    return StorageClass(
        name=name,
        provisioner=_required_str(obj, "provisioner", ""),
        volume_binding_mode=_defaulted_choice(obj, "volumeBindingMode", "", BINDING_MODES, IMMEDIATE),
        allowed_topologies=tuple(
            _topology_term(item, path) for path, item in _mappings(obj, "allowedTopologies", "")
        ),
        resource_version=_str(meta, "resourceVersion", "metadata"),
    )


def _csi_node(obj: Mapping[str, Any], meta: Mapping[str, Any], namespace: str, name: str) -> CSINode:
    spec = _mapping(obj, "spec", "")
    drivers = []
    for path, item in _mappings(spec, "drivers", "spec"):
        allocatable = _mapping(item, "allocatable", path)
        drivers.append(CSINodeDriver(
            name=_required_str(item, "name", path),
            node_id=_str(item, "nodeID", path),
            allocatable=_optional_int(allocatable, "count", join_path(path, "allocatable"), bits=32, low=0),
            topology_keys=_str_tuple(item, "topologyKeys", path),
        ))
    return CSINode(
        name=name,
        drivers=tuple(drivers),
        annotations=_str_map(meta, "annotations", "metadata"),
        resource_version=_str(meta, "resourceVersion", "metadata"),
    )


def _csi_driver(obj: Mapping[str, Any], meta: Mapping[str, Any], namespace: str, name: str) -> CSIDriver:
    spec = _mapping(obj, "spec", "")
    return CSIDriver(
        name=name,
        storage_capacity=_bool(spec, "storageCapacity", "spec") if spec.get("storageCapacity") is not None else None,
        attach_required=_bool(spec, "attachRequired", "spec") if spec.get("attachRequired") is not None else True,
        resource_version=_str(meta, "resourceVersion", "metadata"),
    )


def _csi_storage_capacity(
    obj: Mapping[str, Any], meta: Mapping[str, Any], namespace: str, name: str
) -> CSIStorageCapacity:
    # Like a StorageClass, a CSIStorageCapacity keeps its fields at the top level.
    return CSIStorageCapacity(
        namespace=namespace,
        name=name,
        storage_class_name=_required_str(obj, "storageClassName", ""),
        node_topology=_label_selector(obj, "nodeTopology", ""),
        capacity=_storage_quantity(obj, "capacity", ""),
        maximum_volume_size=_storage_quantity(obj, "maximumVolumeSize", ""),
        resource_version=_str(meta, "resourceVersion", "metadata"),
    )
