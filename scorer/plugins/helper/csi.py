"""In-tree volume plugins and their CSI drivers (kube's csi-translation-lib, reference §10.5).

For the volume plugins: which in-tree plugin a pod volume or a PersistentVolume belongs to,
the CSI driver that took it over, whether that migration is on for a node
(``is_csi_migration_on``), and the ``(driver, volume handle)`` a migrated volume counts as.

Translation covers what the model keeps (``Volume.disk``, ``PersistentVolume.in_tree`` /
``in_tree_handle``): GCE PD, AWS EBS, Azure Disk and Cinder. Handles follow
csi-translation-lib: EBS ``aws://<zone>/<id>`` becomes ``<id>``; an inline GCE PD becomes
``projects/UNSPECIFIED/zones/UNSPECIFIED/disks/<pdName>`` and a PV's takes its zone label
(one zone: ``.../zones/<zone>/...``; several, ``__``-separated: ``.../regions/<region>/...``);
Azure Disk and Cinder keep their URI / ID. The handles only serve to recognise one volume used
by several pods, so a detail of that format (which csi-translation-lib applies when a PV carries
both zone labels) cannot change a count unless the same disk is used inline by one pod and
through a PV by another.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from scorer.model import Volume
from scorer.model.storage import CSINode, PersistentVolume

__all__ = [
    "AWS_EBS",
    "AZURE_DISK",
    "AZURE_FILE",
    "CINDER",
    "GCE_PD",
    "INLINE_SOURCE_PLUGINS",
    "IN_TREE_DRIVERS",
    "PORTWORX",
    "VSPHERE",
    "TranslationError",
    "csi_driver_of",
    "is_csi_migration_on",
    "is_csi_migration_on_for_plugin",
    "is_inline_migratable",
    "is_plugin_migrated_on_node",
    "translate_inline_volume",
    "translate_pv",
]

AWS_EBS = "kubernetes.io/aws-ebs"
GCE_PD = "kubernetes.io/gce-pd"
AZURE_DISK = "kubernetes.io/azure-disk"
AZURE_FILE = "kubernetes.io/azure-file"
CINDER = "kubernetes.io/cinder"
VSPHERE = "kubernetes.io/vsphere-volume"
PORTWORX = "kubernetes.io/portworx-volume"

# In-tree plugin name -> the CSI driver that replaces it.
IN_TREE_DRIVERS: Mapping[str, str] = MappingProxyType({
    AWS_EBS: "ebs.csi.aws.com",
    GCE_PD: "pd.csi.storage.gke.io",
    AZURE_DISK: "disk.csi.azure.com",
    AZURE_FILE: "file.csi.azure.com",
    CINDER: "cinder.csi.openstack.org",
    VSPHERE: "csi.vsphere.vmware.com",
    PORTWORX: "pxd.portworx.com",
})

# Pod volume source key -> its in-tree plugin (csi-translation-lib's IsInlineMigratable).
INLINE_SOURCE_PLUGINS: Mapping[str, str] = MappingProxyType({
    "gcePersistentDisk": GCE_PD,
    "awsElasticBlockStore": AWS_EBS,
    "azureDisk": AZURE_DISK,
    "azureFile": AZURE_FILE,
    "cinder": CINDER,
    "vsphereVolume": VSPHERE,
    "portworxVolume": PORTWORX,
})

# The plugins whose migration kube-scheduler counts (azure-file and vSphere never are).
# Portworx depends on the CSIMigrationPortworx gate, taken as on (its default since 1.31).
_MIGRATION_ON: frozenset[str] = frozenset({AWS_EBS, GCE_PD, AZURE_DISK, CINDER, PORTWORX})

_UNSPECIFIED = "UNSPECIFIED"
_GCE_ZONAL = "projects/{project}/zones/{zone}/disks/{name}"
_GCE_REGIONAL = "projects/{project}/regions/{region}/disks/{name}"
_EBS_ID = re.compile(r"^vol-[^/]*$")
_ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")


class TranslationError(Exception):
    """An in-tree volume csi-translation-lib cannot translate (an invalid EBS volume ID)."""


def csi_driver_of(plugin: str) -> str:
    """The CSI driver replacing in-tree ``plugin`` ("" when none does)."""
    return IN_TREE_DRIVERS.get(plugin, "")


def is_inline_migratable(volume: Volume) -> bool:
    """The pod volume is an inline in-tree source that csi-translation-lib can translate."""
    return volume.source in INLINE_SOURCE_PLUGINS


def is_csi_migration_on_for_plugin(plugin: str) -> bool:
    """Migration of in-tree ``plugin`` is on in kube-scheduler (its feature gate): aws-ebs,
    gce-pd, azure-disk, cinder, portworx."""
    return plugin in _MIGRATION_ON


def is_plugin_migrated_on_node(csi_node: CSINode | None, plugin: str) -> bool:
    """``plugin`` is listed in the node's ``storage.alpha.kubernetes.io/migrated-plugins``."""
    return csi_node is not None and plugin in csi_node.migrated_plugins


def is_csi_migration_on(csi_node: CSINode | None, plugin: str) -> bool:
    """kube's ``isCSIMigrationOn``: false without a CSINode; ``plugin`` is one whose migration
    is on (``is_csi_migration_on_for_plugin``) and the CSINode lists it as migrated."""
    return is_csi_migration_on_for_plugin(plugin) and is_plugin_migrated_on_node(csi_node, plugin)


def _ebs_volume_id(kubernetes_id: str) -> str:
    """kube's ``KubernetesVolumeIDToEBSVolumeID``: ``aws://<zone>/<id>`` -> ``<id>``."""
    if not kubernetes_id.startswith("aws://"):
        return kubernetes_id  # a bare volume ID
    volume_id = kubernetes_id[len("aws://"):].partition("/")[2].strip("/")
    if not _EBS_ID.match(volume_id):
        raise TranslationError(f"failed to translate Kubernetes ID to EBS Volume ID invalid format for AWS "
                               f"volume ({kubernetes_id})")
    return volume_id


def _handle(plugin: str, handle: str, zones: str = "") -> str:
    if plugin == AWS_EBS:
        return _ebs_volume_id(handle)
    if plugin == GCE_PD:
        parts = [z for z in zones.split("__") if z]
        if len(parts) == 1:
            return _GCE_ZONAL.format(project=_UNSPECIFIED, zone=parts[0], name=handle)
        if len(parts) > 1:
            region = parts[0].rsplit("-", 1)[0]
            return _GCE_REGIONAL.format(project=_UNSPECIFIED, region=region, name=handle)
        return _GCE_ZONAL.format(project=_UNSPECIFIED, zone=_UNSPECIFIED, name=handle)
    return handle


def translate_inline_volume(volume: Volume) -> tuple[str, str] | None:
    """``(driver, handle)`` of an inline in-tree volume; None when the model cannot translate
    its source (azureFile, vsphereVolume, portworxVolume: never counted). Raises
    TranslationError for an invalid EBS volume ID."""
    plugin = INLINE_SOURCE_PLUGINS.get(volume.source)
    if plugin is None or plugin in (AZURE_FILE, VSPHERE, PORTWORX) or not volume.disk:
        return None
    return IN_TREE_DRIVERS[plugin], _handle(plugin, volume.disk)


def translate_pv(pv: PersistentVolume) -> tuple[str, str] | None:
    """``(driver, handle)`` of a PV with an in-tree source (``pv.in_tree``); None when it has
    none. Raises TranslationError for an invalid EBS volume ID."""
    driver = IN_TREE_DRIVERS.get(pv.in_tree)
    if driver is None:
        return None
    zones = next((pv.labels[k] for k in _ZONE_LABELS if pv.labels.get(k)), "")
    return driver, _handle(pv.in_tree, pv.in_tree_handle, zones)
