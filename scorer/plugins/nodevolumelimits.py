"""NodeVolumeLimits: a node's CSI drivers attach at most ``allocatable.count`` volumes each
(kube's ``nodevolumelimits`` CSILimits, reference §10.5, as of ≈1.33-1.35).

PreFilter: Skip unless the pod has a ``persistentVolumeClaim`` or ``ephemeral`` volume, or an
inline in-tree volume that CSI migration can translate (``scorer.plugins.helper.csi``).

Filter, per node. The pod's attachable volumes, ``driver/handle`` -> driver, per volume:

- a claim (for an ``ephemeral`` volume ``<pod>-<volume>``, which the pod must control): bound
  to a CSI PV: its driver and handle; to an in-tree PV whose migration is on for the node
  (``is_csi_migration_on``: the CSINode lists the plugin as migrated): the translated driver
  and handle; unbound, or its PV missing: by the claim's StorageClass, its provisioner (an
  in-tree provisioner only when migrated: its CSI driver), the handle being
  ``<random prefix>-<namespace>/<claim>`` (one per claim, never equal to a real handle); no
  class or no such class: not counted;
- an inline in-tree volume migrated on the node: the translated driver and handle.

For the new pod a missing claim is UnschedulableAndUnresolvable (``looking up PVC
<ns>/<name>: persistentvolumeclaim "<name>" not found``) and other failures (a claim without
name, an ephemeral claim the pod does not control, an untranslatable volume) are Error;
for the pods already on the node a missing claim is not counted and other failures are
Error too (as kube's Filter does). No new volume, or no limit on the CSINode: Success.
Otherwise the volumes of the node's pods (bound and assumed) count once each per driver, the
pod's volumes already there are not new, and a driver with a limit where
``used + new > limit`` is Unschedulable ``node(s) exceed max volume count``.

Limits come from the CSINode's ``spec.drivers[].allocatable.count`` only (kube >= ≈1.33);
the ``attachable-volumes-*`` node allocatable of older releases is not read. VolumeAttachment
objects, which kube also counts (volumes attached to the node that no pod there uses), are not
kept by scorer: such attachments are not counted here.

Vectorized where it is cheap: the claim lookups of the new pod do not depend on the node, and
a node without a CSINode (or whose CSINode sets no limit, and does not migrate the pod's
inline volumes) passes without per-node work. Only nodes whose CSINode has limits are
examined one by one.
"""

from __future__ import annotations

import secrets
from collections import Counter
from typing import TYPE_CHECKING

import numpy as np

from scorer.framework.events import (
    ADD,
    ASSIGNED_POD,
    CSI_NODE,
    DELETE,
    PERSISTENT_VOLUME_CLAIM,
    UPDATE,
    ClusterEvent,
)
from scorer.framework.status import Code, Status
from scorer.framework.types import FilterVerdict, NodeBatch
from scorer.plugins.helper.csi import (
    IN_TREE_DRIVERS,
    INLINE_SOURCE_PLUGINS,
    TranslationError,
    is_csi_migration_on,
    is_inline_migratable,
    translate_inline_volume,
    translate_pv,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

    from scorer.framework.catalog import PluginRegistry
    from scorer.framework.cycle_state import CycleState
    from scorer.framework.runtime import Handle
    from scorer.model import Pod, Volume
    from scorer.model.storage import CSINode, PersistentVolumeClaim
    from scorer.state.volumes import VolumeObjects

NAME = "NodeVolumeLimits"
ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"

_EPHEMERAL = "ephemeral"


class _VolumeError(Exception):
    """A volume of the pod that cannot be resolved; ``not_found`` for a missing claim."""

    def __init__(self, message: str, not_found: bool = False) -> None:
        super().__init__(message)
        self.not_found = not_found

    def status(self) -> Status:
        code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if self.not_found else Code.ERROR
        return Status(code, (str(self),))


class NodeVolumeLimits:
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        # kube's randomVolumeIDPrefix: the handle of an unbound claim never equals a real one.
        self.volume_id_prefix = secrets.token_hex(16)
        # Per storage version: the CSINodes that set limits or migrate plugins, and the
        # attachable volumes of the pods on nodes (by pod key and migrated plugins).
        self._version = -1
        self._limited: dict[str, CSINode] = {}
        self._migrating: dict[str, CSINode] = {}
        self._existing: dict[tuple[str, frozenset[str]], tuple[Pod, dict[str, str] | _VolumeError]] = {}

    def events_to_register(self) -> list[ClusterEvent]:
        """A new or changed CSINode (limits, migrated plugins), a bound pod leaving (its
        volumes), a new claim (the one the pod waits for)."""
        return [ClusterEvent(CSI_NODE, ADD), ClusterEvent(CSI_NODE, UPDATE),
                ClusterEvent(ASSIGNED_POD, DELETE), ClusterEvent(PERSISTENT_VOLUME_CLAIM, ADD)]

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status | None:
        if not any(v.is_claim or is_inline_migratable(v) for v in pod.volumes):
            return Status.skip()
        return None

    def filter_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> FilterVerdict | None:
        if not pod.volumes:
            return None
        volumes = self.handle.cache.volumes
        verdict = FilterVerdict(len(nodes))
        # Nodes without a CSINode: the claims are looked up all the same (errors fail every such
        # node), nothing has a limit.
        try:
            self.attachable(pod, None, strict=True)
            base: Status | None = None
        except _VolumeError as error:
            base = error.status()
        examined = self._examined(pod, nodes, volumes)
        if base is not None:
            rest = np.ones(len(nodes), dtype=bool)
            rest[list(examined)] = False
            for reason in base.reasons:
                verdict.reject(rest, reason, base.code)
        table = nodes.table
        for i, csi_node in examined.items():
            status = self._filter_node(pod, csi_node, table.pods[int(nodes.rows[i])].values())
            if status is not None:
                verdict.reject_one(i, status)
        return verdict

    def _examined(self, pod: Pod, nodes: NodeBatch, volumes: VolumeObjects) -> dict[int, CSINode]:
        """Batch positions -> CSINode of the nodes that need per-node work: their CSINode sets a
        limit, or migrates one of the pod's inline volumes (whose translation may fail)."""
        self._refresh(volumes)
        by_name = self._limited
        inline = {INLINE_SOURCE_PLUGINS[v.source] for v in pod.volumes if is_inline_migratable(v)}
        if inline:
            by_name = {**by_name, **{
                name: c for name, c in self._migrating.items() if any(is_csi_migration_on(c, p) for p in inline)
            }}
        if not by_name:
            return {}
        positions = np.flatnonzero(nodes.named(by_name))
        names = nodes.table.names
        return {int(i): by_name[names[int(nodes.rows[i])]] for i in positions}

    def _refresh(self, volumes: VolumeObjects) -> None:
        if self._version == volumes.version:
            return
        self._version = volumes.version
        self._limited = {name: c for name, c in volumes.csi_nodes.items() if c.limits()}
        self._migrating = {name: c for name, c in volumes.csi_nodes.items() if c.migrated_plugins}
        self._existing.clear()

    def _attached(self, pod: Pod, csi_node: CSINode) -> dict[str, str]:
        """``attachable(pod, csi_node, strict=False)`` of a pod on a node, kept while neither
        the storage objects nor the pod change."""
        key = (pod.key, csi_node.migrated_plugins)
        entry = self._existing.get(key)
        if entry is None or entry[0] is not pod:
            try:
                result: dict[str, str] | _VolumeError = self.attachable(pod, csi_node, strict=False)
            except _VolumeError as error:
                result = error
            entry = self._existing[key] = (pod, result)
        if isinstance(entry[1], _VolumeError):
            raise entry[1]
        return entry[1]

    def _filter_node(self, pod: Pod, csi_node: CSINode, existing: Iterable[Pod]) -> Status | None:
        try:
            new = self.attachable(pod, csi_node, strict=True)
        except _VolumeError as error:
            return error.status()
        if not new:
            return None
        limits = csi_node.limits()
        if not limits:
            return None
        attached: dict[str, str] = {}
        try:
            for other in existing:
                if other.volumes:
                    attached.update(self._attached(other, csi_node))
        except _VolumeError as error:
            return Status.error(str(error))
        used: Counter[str] = Counter()
        for key, driver in attached.items():
            new.pop(key, None)  # one volume used by several pods counts once
            used[driver] += 1
        for driver, count in Counter(new.values()).items():
            limit = limits.get(driver)
            if limit is not None and used[driver] + count > limit:
                return Status(Code.UNSCHEDULABLE, (ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED,))
        return None

    # -- attachable volumes ------------------------------------------------------------
    def attachable(self, pod: Pod, csi_node: CSINode | None, *, strict: bool) -> dict[str, str]:
        """kube's ``filterAttachableVolumes``: ``driver/handle`` -> driver of the pod's volumes
        that attach through a CSI driver on a node with ``csi_node``. ``strict`` (the new pod):
        a missing claim raises; otherwise it is not counted. Raises _VolumeError."""
        volumes = self.handle.cache.volumes
        result: dict[str, str] = {}
        for volume in pod.volumes:
            if not volume.is_claim:
                if is_inline_migratable(volume):
                    self._add_inline(volume, csi_node, result)
                continue
            name = volume.claim_name
            if not name:
                raise _VolumeError("PersistentVolumeClaim had no name")
            claim = volumes.pvc(f"{pod.namespace}/{name}")
            if claim is None:
                if strict:
                    message = f'looking up PVC {pod.namespace}/{name}: persistentvolumeclaim "{name}" not found'
                    raise _VolumeError(message, not_found=True)
                continue
            if volume.source == _EPHEMERAL:
                _check_owner(pod, claim)
            driver, handle = self._driver_and_handle(csi_node, claim)
            if driver and handle:
                result[f"{driver}/{handle}"] = driver
        return result

    def _add_inline(self, volume: Volume, csi_node: CSINode | None, result: dict[str, str]) -> None:
        if not is_csi_migration_on(csi_node, INLINE_SOURCE_PLUGINS[volume.source]):
            return
        try:
            translated = translate_inline_volume(volume)
        except TranslationError as error:
            raise _VolumeError(f"converting volume({volume.name}) from inline to csi: {error}") from error
        if translated is not None:
            driver, handle = translated
            result[f"{driver}/{handle}"] = driver

    def _driver_and_handle(self, csi_node: CSINode | None, claim: PersistentVolumeClaim) -> tuple[str, str]:
        """kube's ``getCSIDriverInfo``: ("", "") when the claim's volume is not counted."""
        volumes = self.handle.cache.volumes
        if claim.volume_name:
            pv = volumes.pv(claim.volume_name)
            if pv is not None:
                if pv.csi_driver:
                    return pv.csi_driver, pv.csi_handle
                if not pv.in_tree or not is_csi_migration_on(csi_node, pv.in_tree):
                    return "", ""
                try:
                    translated = translate_pv(pv)
                except TranslationError:
                    return "", ""
                return translated if translated is not None else ("", "")
        # Unbound, or its PV is gone: count it by the class that will provision it.
        if not claim.storage_class:
            return "", ""
        storage_class = volumes.classes.get(claim.storage_class)
        if storage_class is None:
            return "", ""
        handle = f"{self.volume_id_prefix}-{claim.namespace}/{claim.name}"
        provisioner = storage_class.provisioner
        if provisioner in IN_TREE_DRIVERS:
            if not is_csi_migration_on(csi_node, provisioner):
                return "", ""
            return IN_TREE_DRIVERS[provisioner], handle
        return provisioner, handle


def _check_owner(pod: Pod, claim: PersistentVolumeClaim) -> None:
    """kube's ``ephemeral.VolumeIsForPod``: the pod controls the claim of its ephemeral volume."""
    controlled = any(ref.controller and ref.uid == pod.uid for ref in claim.owner_references)
    if claim.namespace != pod.namespace or not controlled:
        raise _VolumeError(f"PVC {claim.namespace}/{claim.name} was not created for pod "
                           f"{pod.namespace}/{pod.name} (pod is not owner)")


def factory(args: None, handle: Handle) -> NodeVolumeLimits:
    return NodeVolumeLimits(handle)


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, plugin_type=NodeVolumeLimits)
