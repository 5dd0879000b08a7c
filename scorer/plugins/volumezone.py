"""VolumeZone: a node must be in the zone (and region) of the pod's bound PersistentVolumes
(kube's ``volumezone``, reference §10.4).

PreFilter collects the PV topologies of the pod's ``persistentVolumeClaim`` volumes (generic
ephemeral volumes are VolumeBinding's), in volume order, the first failure winning; every
failure is UnschedulableAndUnresolvable:

- claim name "": ``PersistentVolumeClaim had no name``; claim missing:
  ``persistentvolumeclaim "<name>" not found``;
- claim not bound (no ``spec.volumeName``): no class: ``PersistentVolumeClaim had no pv name
  and storageClass name``; class missing: ``storageclass.storage.k8s.io "<class>" not found``;
  binding mode unset: ``VolumeBindingMode not set for StorageClass "<class>"``;
  ``WaitForFirstConsumer``: the claim is skipped (VolumeBinding places it);
  ``Immediate``: ``PersistentVolume had no name``;
- PV missing: ``persistentvolume "<name>" not found``.

For each of ``failure-domain.beta.kubernetes.io/zone``, ``.../region``,
``topology.kubernetes.io/zone``, ``.../region`` on the PV, its value is a set of zones
separated by ``__`` (spaces trimmed; an empty element makes the label ignored). No topology:
Skip.

Filter, over the batch with the label columns: a node with none of the four labels passes
(single-zone clusters); otherwise, for each PV topology, the node's value of that key (for a
beta key the node's GA key when it lacks the beta one) must be in the set, else
UnschedulableAndUnresolvable ``node(s) had no available volume zone``.

``StorageClass.volume_binding_mode`` "" stands for an unset mode (the API server defaults it
to Immediate, so only a hand-built object has it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import numpy as np

from scorer.framework.events import (
    ADD,
    NODE,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    STORAGE_CLASS,
    UPDATE,
    UPDATE_NODE_LABEL,
    ClusterEvent,
)
from scorer.framework.status import Code, Status
from scorer.framework.types import FilterVerdict, NodeBatch
from scorer.model.storage import WAIT_FOR_FIRST_CONSUMER

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry
    from scorer.framework.cycle_state import CycleState
    from scorer.framework.runtime import Handle
    from scorer.model import Pod
    from scorer.model.storage import PersistentVolume
    from scorer.state.volumes import VolumeObjects

NAME = "VolumeZone"
ERR_REASON_CONFLICT = "node(s) had no available volume zone"

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
# In kube's order (PV labels are read in it).
TOPOLOGY_LABELS: tuple[str, ...] = (BETA_ZONE, BETA_REGION, ZONE, REGION)
# A beta key the node lacks is looked up under its GA name (never the other way round).
_GA_LABEL = {BETA_ZONE: ZONE, BETA_REGION: REGION}

_PRE_FILTER_KEY = "PreFilter" + NAME
_UNRESOLVABLE = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


@attrs.frozen(slots=True)
class PVTopology:
    """One zone or region label of a PV: the label key and the values it allows."""

    pv_name: str
    key: str
    values: frozenset[str]


@attrs.frozen(slots=True)
class _PreFilterState:
    topologies: tuple[PVTopology, ...]


def _pre_filter_state(state: CycleState) -> _PreFilterState | None:
    found: _PreFilterState | None = state.get(_PRE_FILTER_KEY)
    return found


class VolumeZone:
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self.handle = handle

    def events_to_register(self) -> list[ClusterEvent]:
        """A new class (WaitForFirstConsumer claims are skipped), a new or relabelled node,
        a new or changed claim or PV."""
        return [
            ClusterEvent(STORAGE_CLASS, ADD),
            ClusterEvent(NODE, ADD), ClusterEvent(NODE, UPDATE_NODE_LABEL),
            ClusterEvent(PERSISTENT_VOLUME_CLAIM, ADD), ClusterEvent(PERSISTENT_VOLUME_CLAIM, UPDATE),
            ClusterEvent(PERSISTENT_VOLUME, ADD), ClusterEvent(PERSISTENT_VOLUME, UPDATE),
        ]

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status | None:
        if not pod.volumes:
            return Status.skip()
        topologies = pv_topologies(pod, self.handle.cache.volumes)
        if isinstance(topologies, Status):
            return topologies
        if not topologies:
            return Status.skip()
        state.write(_PRE_FILTER_KEY, _PreFilterState(topologies))
        return None

    def filter_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> FilterVerdict | None:
        if not pod.volumes:
            return None
        pre = _pre_filter_state(state)
        verdict = FilterVerdict(len(nodes))
        if pre is None:  # PreFilter disabled: compute it here
            topologies = pv_topologies(pod, self.handle.cache.volumes)
            if isinstance(topologies, Status):
                everywhere = np.ones(len(nodes), dtype=bool)
                for reason in topologies.reasons:
                    verdict.reject(everywhere, reason, topologies.code)
                return verdict
        else:
            topologies = pre.topologies
        if not topologies:
            return None
        columns = {key: _Column(nodes, key) for key in TOPOLOGY_LABELS}
        constrained = np.zeros(len(nodes), dtype=bool)
        for column in columns.values():
            constrained |= column.present
        fits = np.ones(len(nodes), dtype=bool)
        for topology in topologies:
            column = columns[topology.key]
            ok = column.within(topology.values)
            fallback = _GA_LABEL.get(topology.key)
            if fallback is not None:
                ga = columns[fallback]
                ok = np.where(column.present, ok, ga.within(topology.values))
            fits &= ok
        verdict.reject(constrained & ~fits, ERR_REASON_CONFLICT, _UNRESOLVABLE)
        return verdict


class _Column:
    """A zone label over the batch: ``present`` per node, and membership of its value."""

    __slots__ = ("column", "codes", "present")

    def __init__(self, nodes: NodeBatch, key: str) -> None:
        self.column = nodes.label_column(key)
        self.codes = self.column.codes[nodes.rows]
        missing = self.column.code_of.get(None)
        self.present = self.codes != missing if missing is not None else np.ones(len(nodes), dtype=bool)

    def within(self, values: frozenset[str]) -> np.ndarray:
        """Bool per node: it has the label and its value is one of ``values`` (False where absent)."""
        lut = np.fromiter((v is not None and v in values for v in self.column.code_of), dtype=bool,
                          count=len(self.column.code_of))
        inside: np.ndarray = lut[self.codes]
        return inside


def pv_topologies(pod: Pod, volumes: VolumeObjects) -> tuple[PVTopology, ...] | Status:
    """The zone and region labels of the PVs of the pod's claims, or the status of the first
    claim that fails (UnschedulableAndUnresolvable)."""
    topologies: list[PVTopology] = []
    for volume in pod.volumes:
        if volume.source != "persistentVolumeClaim":
            continue
        name = volume.claim_name
        if not name:
            return Status(_UNRESOLVABLE, ("PersistentVolumeClaim had no name",))
        claim = volumes.pvc(f"{pod.namespace}/{name}")
        if claim is None:
            return Status(_UNRESOLVABLE, (f'persistentvolumeclaim "{name}" not found',))
        if not claim.volume_name:
            class_name = claim.storage_class
            if not class_name:
                return Status(_UNRESOLVABLE, ("PersistentVolumeClaim had no pv name and storageClass name",))
            storage_class = volumes.classes.get(class_name)
            if storage_class is None:
                return Status(_UNRESOLVABLE, (f'storageclass.storage.k8s.io "{class_name}" not found',))
            if not storage_class.volume_binding_mode:
                return Status(_UNRESOLVABLE, (f'VolumeBindingMode not set for StorageClass "{class_name}"',))
            if storage_class.volume_binding_mode == WAIT_FOR_FIRST_CONSUMER:
                continue  # VolumeBinding decides where it is provisioned
            return Status(_UNRESOLVABLE, ("PersistentVolume had no name",))
        pv = volumes.pv(claim.volume_name)
        if pv is None:
            return Status(_UNRESOLVABLE, (f'persistentvolume "{claim.volume_name}" not found',))
        topologies.extend(_topologies_of(pv))
    return tuple(topologies)


def _topologies_of(pv: PersistentVolume) -> list[PVTopology]:
    out = []
    for key in TOPOLOGY_LABELS:
        value = pv.labels.get(key)
        if value is None:
            continue
        zones = label_zones(value)
        if zones is not None:
            out.append(PVTopology(pv.name, key, zones))
    return out


def label_zones(value: str) -> frozenset[str] | None:
    """kube's ``LabelZonesToSet``: ``a__b`` -> {a, b}, spaces trimmed; None when an element is
    empty (the label is then ignored)."""
    zones = [part.strip() for part in value.split("__")]
    if any(not zone for zone in zones):
        return None
    return frozenset(zones)


def factory(args: None, handle: Handle) -> VolumeZone:
    return VolumeZone(handle)


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, plugin_type=VolumeZone)
