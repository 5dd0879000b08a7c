"""Storage objects as the volume plugins read them (reference/kube-scheduler.md §10.1).

PersistentVolume, PersistentVolumeClaim, StorageClass, CSINode, CSIDriver and
CSIStorageCapacity (``Volume``, one entry of a pod's ``spec.volumes``, is in
``scorer.model.objects`` with the Pod).
Only the fields the four volume plugins (VolumeRestrictions, VolumeZone,
NodeVolumeLimits, VolumeBinding) and the PersistentVolume controller's
binding read are kept. Quantities are bytes.

``scorer.model.decode`` builds these from API objects; the scheduler keeps
them in ``scorer.state.volumes.VolumeObjects`` (the cache's ``volumes``).
Like the other model classes they are frozen; changed copies are made with
``attrs.evolve`` (VolumeBinding's assumed PVs and PVCs).
"""

from __future__ import annotations

import attrs

from scorer.model.objects import LabelSelector, NodeSelector, OwnerReference, Volume

__all__ = [
    "ACCESS_MODES",
    "ANN_BIND_COMPLETED",
    "ANN_BOUND_BY_CONTROLLER",
    "ANN_MIGRATED_PLUGINS",
    "ANN_PROVISIONED_BY",
    "ANN_SELECTED_NODE",
    "ANN_STORAGE_CLASS_BETA",
    "ANN_STORAGE_PROVISIONER",
    "ANN_STORAGE_PROVISIONER_BETA",
    "BINDING_MODES",
    "CLAIM_PHASES",
    "IMMEDIATE",
    "NO_PROVISIONER",
    "READ_WRITE_ONCE_POD",
    "STORAGE_KINDS",
    "VOLUME_MODES",
    "VOLUME_PHASES",
    "WAIT_FOR_FIRST_CONSUMER",
    "CSIDriver",
    "CSINode",
    "CSINodeDriver",
    "CSIStorageCapacity",
    "ClaimRef",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "StorageClass",
    "StorageObject",
    "TopologySelectorTerm",
    "Volume",
]

# The kinds of this module, in the order a source lists them (classes before the claims and
# volumes that name them).
STORAGE_KINDS: tuple[str, ...] = (
    "StorageClass", "CSIDriver", "CSINode", "CSIStorageCapacity", "PersistentVolume", "PersistentVolumeClaim",
)

ACCESS_MODES: tuple[str, ...] = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
VOLUME_MODES: tuple[str, ...] = ("Filesystem", "Block")
IMMEDIATE = "Immediate"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
BINDING_MODES: tuple[str, ...] = (IMMEDIATE, WAIT_FOR_FIRST_CONSUMER)
VOLUME_PHASES: tuple[str, ...] = ("Pending", "Available", "Bound", "Released", "Failed")
CLAIM_PHASES: tuple[str, ...] = ("Pending", "Bound", "Lost")
NO_PROVISIONER = "kubernetes.io/no-provisioner"

# Annotations (reference §10.1).
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
ANN_STORAGE_PROVISIONER_BETA = "volume.beta.kubernetes.io/storage-provisioner"
ANN_PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
ANN_STORAGE_CLASS_BETA = "volume.beta.kubernetes.io/storage-class"
ANN_MIGRATED_PLUGINS = "storage.alpha.kubernetes.io/migrated-plugins"


@attrs.frozen(slots=True, kw_only=True)
class ClaimRef:
    """A PersistentVolume's ``spec.claimRef`` (the claim it is bound or pre-bound to)."""

    namespace: str = ""
    name: str = ""
    uid: str = ""
    resource_version: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@attrs.frozen(slots=True, kw_only=True)
class PersistentVolume:
    """A PersistentVolume.

    ``storage_class``: the beta annotation ``volume.beta.kubernetes.io/storage-class`` if set,
    else ``spec.storageClassName`` ("" for none). ``capacity``: ``spec.capacity.storage`` in
    bytes (0 when unset). ``node_affinity``: ``spec.nodeAffinity.required`` (None: any node).
    ``csi_driver``/``csi_handle``: ``spec.csi``. ``in_tree``/``in_tree_handle``: an in-tree
    source the CSI translation knows (``kubernetes.io/gce-pd`` with ``pdName``,
    ``kubernetes.io/aws-ebs`` with ``volumeID``, ``kubernetes.io/azure-disk`` with
    ``diskURI``, ``kubernetes.io/cinder`` with ``volumeID``), else "". ``deleting``:
    ``metadata.deletionTimestamp`` is set.
    """

    name: str
    uid: str = ""
    labels: dict[str, str] = attrs.Factory(dict)
    annotations: dict[str, str] = attrs.Factory(dict)
    storage_class: str = ""
    capacity: int = 0
    access_modes: tuple[str, ...] = ()
    volume_mode: str = "Filesystem"
    claim_ref: ClaimRef | None = None
    node_affinity: NodeSelector | None = None
    phase: str = ""
    csi_driver: str = ""
    csi_handle: str = ""
    in_tree: str = ""
    in_tree_handle: str = ""
    volume_attributes_class: str = ""
    deleting: bool = False
    resource_version: str = ""

    @property
    def key(self) -> str:
        return self.name


@attrs.frozen(slots=True, kw_only=True)
class PersistentVolumeClaim:
    """A PersistentVolumeClaim.

    ``storage_class``: the beta annotation if set, else ``spec.storageClassName`` ("" for
    none). ``request``: ``spec.resources.requests.storage`` in bytes, None when unset.
    ``selector``: ``spec.selector`` (None: unset). ``phase``: ``status.phase``.
    """

    namespace: str = "default"
    name: str
    uid: str = ""
    labels: dict[str, str] = attrs.Factory(dict)
    annotations: dict[str, str] = attrs.Factory(dict)
    owner_references: tuple[OwnerReference, ...] = ()
    access_modes: tuple[str, ...] = ()
    volume_name: str = ""
    storage_class: str = ""
    request: int | None = None
    selector: LabelSelector | None = None
    volume_mode: str = "Filesystem"
    volume_attributes_class: str = ""
    phase: str = ""
    deleting: bool = False
    resource_version: str = ""

    @property
    def key(self) -> str:
        """``namespace/name``."""
        return f"{self.namespace}/{self.name}"

    @property
    def fully_bound(self) -> bool:
        """``spec.volumeName`` set and the PV controller's ``pv.kubernetes.io/bind-completed``
        annotation present (any value): kube's ``IsFullyBound``."""
        return bool(self.volume_name) and ANN_BIND_COMPLETED in self.annotations

    @property
    def selected_node(self) -> str:
        """The ``volume.kubernetes.io/selected-node`` annotation ("" when absent)."""
        return self.annotations.get(ANN_SELECTED_NODE, "")


@attrs.frozen(slots=True, kw_only=True)
class TopologySelectorTerm:
    """One ``allowedTopologies`` term: every ``(key, values)`` must hold (a node label with
    one of the values)."""

    match_label_expressions: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        return all(key in labels and labels[key] in values for key, values in self.match_label_expressions)


@attrs.frozen(slots=True, kw_only=True)
class StorageClass:
    """A StorageClass (storage.k8s.io/v1). ``volume_binding_mode`` defaults to Immediate, as the
    API server defaults it."""

    name: str
    provisioner: str = ""
    volume_binding_mode: str = IMMEDIATE
    allowed_topologies: tuple[TopologySelectorTerm, ...] = ()
    resource_version: str = ""

    @property
    def key(self) -> str:
        return self.name


@attrs.frozen(slots=True, kw_only=True)
class CSINodeDriver:
    """One ``spec.drivers[]`` entry of a CSINode; ``allocatable`` is ``allocatable.count``
    (None when unset: no limit)."""

    name: str
    node_id: str = ""
    allocatable: int | None = None
    topology_keys: tuple[str, ...] = ()


@attrs.frozen(slots=True, kw_only=True)
class CSINode:
    """A CSINode (named like its node). ``migrated_plugins``: the in-tree plugin names of the
    ``storage.alpha.kubernetes.io/migrated-plugins`` annotation."""

    name: str
    drivers: tuple[CSINodeDriver, ...] = ()
    annotations: dict[str, str] = attrs.Factory(dict)
    resource_version: str = ""

    @property
    def key(self) -> str:
        return self.name

    @property
    def migrated_plugins(self) -> frozenset[str]:
        value = self.annotations.get(ANN_MIGRATED_PLUGINS, "")
        return frozenset(part.strip() for part in value.split(",") if part.strip())

    def limits(self) -> dict[str, int]:
        """Driver name -> ``allocatable.count``, for the drivers that set one."""
        return {d.name: d.allocatable for d in self.drivers if d.allocatable is not None}


@attrs.frozen(slots=True, kw_only=True)
class CSIDriver:
    """A CSIDriver; ``storage_capacity`` is ``spec.storageCapacity`` (None when unset)."""

    name: str
    storage_capacity: bool | None = None
    attach_required: bool = True
    resource_version: str = ""

    @property
    def key(self) -> str:
        return self.name


@attrs.frozen(slots=True, kw_only=True)
class CSIStorageCapacity:
    """A CSIStorageCapacity; ``node_topology`` None selects no node; ``capacity`` and
    ``maximum_volume_size`` in bytes, None when unset."""

    namespace: str = "default"
    name: str
    storage_class_name: str = ""
    node_topology: LabelSelector | None = None
    capacity: int | None = None
    maximum_volume_size: int | None = None
    resource_version: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


StorageObject = (
    PersistentVolume | PersistentVolumeClaim | StorageClass | CSINode | CSIDriver | CSIStorageCapacity
)
