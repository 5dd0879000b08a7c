"""VolumeRestrictions: disks a node's pods already use, and ReadWriteOncePod claims in use
(kube's ``volumerestrictions``, reference §10.3).

PreFilter: the pod's inline GCE PD, AWS EBS, RBD and iSCSI volumes need a disk check; each
``persistentVolumeClaim`` volume's claim is looked up (missing: UnschedulableAndUnresolvable
``persistentvolumeclaim "<name>" not found``) and those with access mode ``ReadWriteOncePod``
are counted when some pod of the cache (assumed pods included) already uses a claim of that
namespace and name. Nothing to check and no claim in use: Skip.

Filter, in this order:

1. Disk conflict, Unschedulable ``node(s) had no available disk``: a volume to check and a
   volume of a pod on the node name the same disk: GCE PD ``pdName`` unless both are
   read-only; EBS ``volumeID`` (read-only or not); iSCSI ``iqn`` unless both are read-only;
   RBD same pool and image with a monitor in common, unless both are read-only.
2. A ReadWriteOncePod claim in use: Unschedulable (preemption may free it) on every node,
   ``node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode
   already in-use by another pod`` (kube >= 1.33's wording).

AddPod / RemovePod (preemption, nominated pods) add or subtract the other pod's claim
volumes whose name is one of the pod's ReadWriteOncePod claims.

Few pods use inline disks, so the disks of the whole table are indexed once per table
version (as NodePorts indexes host ports), and a check touches only the nodes that use the
same disk.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import numpy as np

from scorer.framework.events import ADD, ASSIGNED_POD, DELETE, NODE, PERSISTENT_VOLUME_CLAIM, ClusterEvent
from scorer.framework.status import Code, Status
from scorer.framework.types import FilterVerdict, NodeBatch
from scorer.model.storage import READ_WRITE_ONCE_POD

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry
    from scorer.framework.cycle_state import CycleState
    from scorer.framework.runtime import Handle
    from scorer.model import Pod, Volume
    from scorer.state import NodeTable
    from scorer.state.nodeinfo import NodeInfo

NAME = "VolumeRestrictions"
ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by another pod"
)

_PRE_FILTER_KEY = "PreFilter" + NAME
_CLAIM = "persistentVolumeClaim"
# The inline sources a disk conflict is checked for.
_DISK_SOURCES = frozenset({"gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi"})
# The sources where two read-only uses of one disk do not conflict (EBS conflicts anyway).
_READ_ONLY_SHARES = frozenset({"gcePersistentDisk", "rbd", "iscsi"})

# The index key of a disk use: (source, disk) and, for RBD, (source, pool, image, monitor).
_DiskKey = tuple[str, ...]


@attrs.frozen(slots=True)
class _PreFilterState:
    disks: tuple[Volume, ...]  # the pod's volumes that need a disk check
    rwop_claims: frozenset[str]  # names of the pod's ReadWriteOncePod claims
    conflicts: int  # how many of those some pod already uses


def _pre_filter_state(state: CycleState) -> _PreFilterState | None:
    found: _PreFilterState | None = state.get(_PRE_FILTER_KEY)
    return found


class VolumeRestrictions:
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle
        self._disks: _UsedDisks | None = None

    def events_to_register(self) -> list[ClusterEvent]:
        """A bound pod leaving frees its disks and claims; a new node has no disk in use; a new
        claim may be the one the pod waits for."""
        return [ClusterEvent(ASSIGNED_POD, DELETE), ClusterEvent(NODE, ADD),
                ClusterEvent(PERSISTENT_VOLUME_CLAIM, ADD)]

    # -- PreFilter -------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status | None:
        computed = self._pre_filter_state_of(pod)
        if isinstance(computed, Status):
            return computed
        state.write(_PRE_FILTER_KEY, computed)
        return None

    def _pre_filter_state_of(self, pod: Pod) -> _PreFilterState | Status:
        """PreFilter's state for ``pod``, or its Skip or rejection."""
        if not pod.volumes:
            return Status.skip()
        disks = tuple(v for v in pod.volumes if v.source in _DISK_SOURCES)
        claims = self.handle.cache.volumes
        rwop: list[str] = []
        for volume in pod.volumes:
            if volume.source != _CLAIM:
                continue
            claim = claims.pvc(f"{pod.namespace}/{volume.claim_name}")
            if claim is None:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                              (f'persistentvolumeclaim "{volume.claim_name}" not found',))
            if READ_WRITE_ONCE_POD in claim.access_modes:
                rwop.append(volume.claim_name)
        conflicts = self._claims_in_use(pod.namespace, rwop) if rwop else 0
        if not disks and not conflicts:
            return Status.skip()
        return _PreFilterState(disks, frozenset(rwop), conflicts)

    def _claims_in_use(self, namespace: str, names: list[str]) -> int:
        """How many of ``names`` a pod of the cache (bound or assumed) uses in ``namespace``."""
        wanted = set(names)
        used: set[str] = set()
        for other in self.handle.cache.pods.values():
            if other.namespace != namespace:
                continue
            for volume in other.volumes:
                if volume.source == _CLAIM and volume.claim_name in wanted:
                    used.add(volume.claim_name)
        return sum(1 for name in names if name in used)

    # -- PreFilterExtensions ----------------------------------------------------------
    def _update(self, state: CycleState, other: Pod, delta: int) -> None:
        pre = _pre_filter_state(state)
        if pre is None or not pre.rwop_claims:
            return
        n = sum(1 for v in other.volumes if v.source == _CLAIM and v.claim_name in pre.rwop_claims)
        if n:
            state.write(_PRE_FILTER_KEY, attrs.evolve(pre, conflicts=pre.conflicts + delta * n))

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node: NodeInfo) -> Status | None:
        self._update(state, pod_to_add, +1)
        return None

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node: NodeInfo) -> Status | None:
        self._update(state, pod_to_remove, -1)
        return None

    def affected_by(self, state: CycleState, pod: Pod, other: Pod) -> bool:
        """Only a pod using one of the pod's ReadWriteOncePod claim names changes the count."""
        pre = _pre_filter_state(state)
        if pre is None or not pre.rwop_claims:
            return False
        return any(v.source == _CLAIM and v.claim_name in pre.rwop_claims for v in other.volumes)

    # -- Filter -----------------------------------------------------------------------
    def filter_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> FilterVerdict | None:
        verdict = FilterVerdict(len(nodes))
        disks = tuple(v for v in pod.volumes if v.source in _DISK_SOURCES)
        conflict = np.zeros(len(nodes), dtype=bool)
        if disks:
            conflict = self._used_disks(nodes.table).conflicting_rows(disks)[nodes.rows]
            verdict.reject(conflict, ERR_REASON_DISK_CONFLICT, Code.UNSCHEDULABLE)
        pre = _pre_filter_state(state)
        if pre is None:
            # The profile runs this Filter without its PreFilter (a v1beta1/v1beta2 configuration lists
            # VolumeRestrictions at filter only, as kube 1.20 had no PreFilter): work the state out here.
            computed = self._pre_filter_state_of(pod)
            if isinstance(computed, Status):
                if not computed.is_skip():
                    for reason in computed.reasons:
                        verdict.reject(~conflict, reason, computed.code)
                return verdict
            pre = computed
        if pre.conflicts > 0:
            verdict.reject(~conflict, ERR_REASON_READ_WRITE_ONCE_POD_CONFLICT, Code.UNSCHEDULABLE)
        return verdict

    def _used_disks(self, table: NodeTable) -> _UsedDisks:
        used = self._disks
        if used is None or used.table is not table or used.version != table.version:
            used = self._disks = _UsedDisks(table)
        return used


class _UsedDisks:
    """The inline disks used on every node of one table version.

    ``rows[key]`` holds the table rows whose pods use that disk; ``writable[key]`` those
    where some use is not read-only.
    """

    __slots__ = ("table", "version", "rows", "writable")

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self.version = table.version
        rows: dict[_DiskKey, list[int]] = {}
        writable: dict[_DiskKey, list[int]] = {}
        for row, pods in enumerate(table.pods):
            for pod in pods.values():
                for volume in pod.volumes:
                    if volume.source not in _DISK_SOURCES:
                        continue
                    for key in _disk_keys(volume):
                        rows.setdefault(key, []).append(row)
                        if not volume.read_only:
                            writable.setdefault(key, []).append(row)
        self.rows = {key: np.array(r, dtype=np.int64) for key, r in rows.items()}
        self.writable = {key: np.array(r, dtype=np.int64) for key, r in writable.items()}

    def conflicting_rows(self, disks: tuple[Volume, ...]) -> np.ndarray:
        """Bool per table row: a pod there uses one of ``disks`` in a conflicting way."""
        conflict = np.zeros(len(self.table), dtype=bool)
        for volume in disks:
            # Two read-only uses share a disk (not on EBS): then only writable uses conflict.
            index = self.writable if volume.read_only and volume.source in _READ_ONLY_SHARES else self.rows
            for key in _disk_keys(volume):
                taken = index.get(key)
                if taken is not None:
                    conflict[taken] = True
        return conflict


def _disk_keys(volume: Volume) -> tuple[_DiskKey, ...]:
    """The index keys of an inline disk: one per RBD monitor (a monitor in common is enough),
    else one."""
    if volume.source == "rbd":
        return tuple(("rbd", volume.rbd_pool, volume.disk, monitor) for monitor in volume.rbd_monitors)
    return ((volume.source, volume.disk),)


def factory(args: None, handle: Handle) -> VolumeRestrictions:
    return VolumeRestrictions(handle)


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, plugin_type=VolumeRestrictions)
