"""An in-memory cluster: the cluster of ``scorer simulate``, explain, the bench and the tests.

It holds Nodes, Pods, Namespaces, workloads (Services, ReplicationControllers,
ReplicaSets, StatefulSets, PodDisruptionBudgets) and storage objects
(PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes, CSIDrivers,
CSIStorageCapacities), and implements the seams of ``scorer.cluster.interface``
the way a kube-apiserver would:

* ``Binder``: ``bind`` sets ``spec.nodeName`` and ``PodScheduled=True``, or
  raises ``BindConflict`` (pod gone or re-created, already bound: not
  retried), or ``ScorerError`` for an unknown node (retried: the API server
  would not refuse it, but a simulation should not bind to a missing node);
* ``EventSink``: keeps the Events and PodScheduled conditions written to it;
* the rest of ``ClusterWriter``: ``delete_pod`` deletes a preemption victim at
  once, ``clear_nominated_node`` clears a nomination; ``forget`` has nothing
  to drop (nothing is kept of a pod beyond the pod itself);
* ``VolumeWriter``: ``update_persistent_volume`` / ``update_persistent_volume_claim``
  write a PV's claimRef and annotations, a PVC's annotations, with the
  resourceVersion as precondition (``UpdateConflict`` when it is stale or the
  object gone); every storage write gives the object a new resourceVersion,
  greater than any the cluster holds;
* ``ClusterSource``: ``start(handlers)`` lists every object into the event
  handlers (namespaces, workloads, storage objects, nodes, then pods, in the
  order given), and from then on every change made through it (``bind``,
  ``apply``, ``delete``, the volume writes, the PV controller below) reaches
  the handlers at once, as a watch without latency would deliver it.

The PersistentVolume controller's binding (reference/kube-scheduler.md §10.6.10)
is emulated, synchronously: once when the cluster is made, and after every
write or ``apply`` of a storage object, until nothing changes:

* a PV without a claimRef and without a phase (a manifest, an export without
  status) or Pending is Available, as the controller's first sync makes it;

* a PVC with ``spec.volumeName``, or one named by a PV's claimRef (its uid, when
  both have one, must match), is bound to that PV: the PV gets the claimRef
  (``pv.kubernetes.io/bound-by-controller: yes`` if the controller set it) and
  phase Bound; the PVC ``spec.volumeName`` (bound-by-controller when set here),
  ``pv.kubernetes.io/bind-completed: yes`` and phase Bound;
* an unbound PVC of an Immediate class (or of no class) is bound to the best
  Available PV: same class, its access modes contained, capacity at least the
  request, same volumeMode, the selector matching; the smallest such PV (by
  name among equals); node affinity is ignored, as the controller ignores it;
* a PVC with no PV to bind whose class has a provisioner (not
  ``kubernetes.io/no-provisioner``) is "provisioned" when it carries the
  ``volume.kubernetes.io/selected-node`` annotation (WaitForFirstConsumer, the
  scheduler chose a node), or its class is Immediate: a PV
  ``pvc-<claim uid>`` (``pvc-<namespace>-<name>`` without a uid) of the class,
  with the claim's request as capacity, its access modes and volumeMode,
  ``pv.kubernetes.io/provisioned-by``, a claimRef to the claim, and, for a
  selected node, node affinity ``kubernetes.io/hostname In [<the node's
  hostname label, else its name>]`` (this cluster assumes every provisioner
  makes node-local volumes); a CSI provisioner's PV has ``spec.csi`` (driver =
  the provisioner), an in-tree one's (gce-pd, aws-ebs, azure-disk, cinder) the
  in-tree source. It is then bound as above.

Not emulated: reclaiming (a deleted claim leaves its PV as it is), Lost claims,
the controller's Events, expansion.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, TypeVar

import attrs

from scorer.cluster.interface import BindConflict, ObjectHandlers
from scorer.errors import ScorerError, UpdateConflict
from scorer.model import (
    ClusterObject,
    LoadedObjects,
    Namespace,
    Node,
    NodeSelector,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    Pod,
    PodDisruptionBudget,
    SelectorOwner,
)
from scorer.model.storage import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_PROVISIONED_BY,
    IMMEDIATE,
    NO_PROVISIONER,
    STORAGE_KINDS,
    ClaimRef,
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    StorageObject,
)
from scorer.state.volumes import resource_version_number

Workload = SelectorOwner | PodDisruptionBudget
_S = TypeVar("_S")
_Versioned = TypeVar("_Versioned", PersistentVolume, PersistentVolumeClaim)
_STORAGE_TYPES = (PersistentVolume, PersistentVolumeClaim, StorageClass, CSINode, CSIDriver, CSIStorageCapacity)
HOSTNAME_LABEL = "kubernetes.io/hostname"
# In-tree provisioners whose PVs the CSI translation knows (PersistentVolume.in_tree).
_IN_TREE_PROVISIONERS = frozenset({
    "kubernetes.io/gce-pd", "kubernetes.io/aws-ebs", "kubernetes.io/azure-disk", "kubernetes.io/cinder",
})
# Rounds of the PV controller's sync before giving up (each round binds or provisions something).
_MAX_SYNC_ROUNDS = 1000

__all__ = ["BindConflict", "Event", "InMemoryCluster", "PodCondition", "UpdateConflict", "storage_key",
           "workload_key"]


@attrs.frozen(slots=True)
class Event:
    pod: str
    type: str
    reason: str
    action: str
    note: str
    related: str = ""  # the key of the Event's related pod (the preemptor of a Preempted Event)


@attrs.frozen(slots=True)
class PodCondition:
    type: str
    status: str
    reason: str
    message: str


class InMemoryCluster:
    """``workloads`` are keyed by ``workload_key`` (``Service/ns/name``, ``PodDisruptionBudget/ns/name``),
    ``storage`` by ``storage_key`` (``PersistentVolume/name``, ``PersistentVolumeClaim/ns/name``)."""

    def __init__(
        self,
        nodes: list[Node],
        pods: list[Pod],
        namespaces: list[Namespace],
        workloads: list[Workload] | tuple[Workload, ...] = (),
        storage: Iterable[StorageObject] = (),
    ) -> None:
        self.nodes: dict[str, Node] = {n.name: n for n in nodes}
        self.pods: dict[str, Pod] = {p.key: p for p in pods}
        self.namespaces: dict[str, Namespace] = {ns.name: ns for ns in namespaces}
        self.workloads: dict[str, Workload] = {workload_key(w): w for w in workloads}
        self.storage: dict[str, StorageObject] = {storage_key(obj): _first_sync(obj) for obj in storage}
        # The last resourceVersion given or seen: storage writes go above every version held.
        self._version = max((resource_version_number(obj.resource_version) for obj in self.storage.values()),
                            default=0)
        # The PV controller's work: claims to look at, and unbound claims waiting for an Available PV.
        self._dirty: set[str] = {obj.key for obj in self.storage.values() if isinstance(obj, PersistentVolumeClaim)}
        self._unmatched: set[str] = set()
        self._claim_pvs: dict[str, set[str]] = {}  # names of the PVs whose claimRef names a claim, by its key
        for obj in self.storage.values():
            if isinstance(obj, PersistentVolume) and obj.claim_ref is not None:
                self._claim_pvs.setdefault(obj.claim_ref.key, set()).add(obj.name)
        self.events: list[Event] = []
        self.conditions: dict[str, PodCondition] = {}
        self.binds = 0
        self.preempted: list[str] = []  # victims deleted by delete_pod, in order
        self._handlers: ObjectHandlers | None = None
        self._synced = asyncio.Event()
        self.sync_volumes()

    @classmethod
    def from_objects(cls, objects: LoadedObjects) -> InMemoryCluster:
        return cls(list(objects.nodes), list(objects.pods), list(objects.namespaces), list(objects.workloads),
                   list(objects.storage))

    # -- Binder ---------------------------------------------------------------
    async def bind(self, pod: Pod, node_name: str) -> None:
        current = self.pods.get(pod.key)
        if current is None or (pod.uid and current.uid != pod.uid):
            raise BindConflict(f"pod {pod.key} not found")
        if current.node_name:
            raise BindConflict(f"pod {pod.key} is already assigned to node {current.node_name!r}")
        if node_name not in self.nodes:
            raise ScorerError(f"node {node_name!r} not found")
        bound = _with_node(current, node_name)
        self.pods[pod.key] = bound
        self.conditions[pod.key] = PodCondition("PodScheduled", "True", "", "")
        self.binds += 1
        if self._handlers is not None:
            self._handlers.on_pod_update(current, bound)

    # -- EventSink ------------------------------------------------------------
    async def write_event(self, pod: Pod, type_: str, reason: str, action: str, note: str,
                          related: Pod | None = None) -> None:
        self.events.append(Event(pod.key, type_, reason, action, note, related.key if related is not None else ""))

    async def write_pod_condition(self, pod: Pod, status: str, reason: str, message: str,
                                  nominated_node: str | None = None) -> None:
        current = self.pods.get(pod.key)
        if current is not None and current.node_name and status != "True":
            return  # written after the pod was bound: the binding's PodScheduled=True stands
        self.conditions[pod.key] = PodCondition("PodScheduled", status, reason, message)
        if nominated_node is not None:
            self._set_nominated_node(pod, nominated_node)

    # -- preemption (ClusterWriter) ------------------------------------------------
    async def delete_pod(self, pod: Pod) -> None:
        """Delete a preemption victim at once (no kubelet here: no grace period); a pod
        already gone or re-created under the same name is left alone."""
        current = self.pods.get(pod.key)
        if current is not None and (not pod.uid or current.uid == pod.uid):
            self.preempted.append(pod.key)
            self.delete(current)

    async def clear_nominated_node(self, pod: Pod) -> None:
        self._set_nominated_node(pod, "")

    def forget(self, pod_key: str) -> None:
        """Nothing to drop: the Events and conditions written are the cluster's record, kept."""

    def _set_nominated_node(self, pod: Pod, node: str) -> None:
        """``status.nominatedNodeName`` of the pending pod, as an API status patch would set it."""
        current = self.pods.get(pod.key)
        if current is None or current.node_name or (pod.uid and current.uid != pod.uid):
            return
        if current.nominated_node_name != node:
            self.apply(attrs.evolve(current, nominated_node_name=node))

    # -- ClusterSource --------------------------------------------------------
    def start(self, handlers: ObjectHandlers) -> None:
        """List every object into ``handlers``; later changes reach them at once."""
        if self._handlers is not None:
            raise RuntimeError("the in-memory cluster is already started")
        self._handlers = handlers
        for namespace in self.namespaces.values():
            handlers.on_namespace_add(namespace)
        for workload in self.workloads.values():
            handlers.on_workload_add(workload)
        order = {kind: index for index, kind in enumerate(STORAGE_KINDS)}  # classes before claims and volumes
        for obj in sorted(self.storage.values(), key=lambda obj: order[type(obj).__name__]):
            handlers.on_storage_add(obj)
        for node in self.nodes.values():
            handlers.on_node_add(node)
        for pod in self.pods.values():
            handlers.on_pod_add(pod)
        self._synced.set()

    async def run(self, handlers: ObjectHandlers) -> None:
        """``start``, then wait (changes are delivered by the calls that make them) until cancelled."""
        self.start(handlers)
        await asyncio.Event().wait()

    def has_synced(self) -> bool:
        return self._synced.is_set()

    def has_delivered(self) -> bool:
        return self._synced.is_set()  # (every object is delivered before the sync)

    async def wait_for_sync(self) -> None:
        await self._synced.wait()

    # -- changes, as an API client would make them --------------------------------
    def apply(self, obj: ClusterObject) -> None:
        """Create or replace a Node, Pod, Namespace, workload or storage object (by kind and name)
        and tell the handlers; a storage object then runs the PV controller (module docstring)."""
        if isinstance(obj, _STORAGE_TYPES):
            obj = _first_sync(obj)
        self._put(obj)
        if isinstance(obj, _STORAGE_TYPES):
            self._version = max(self._version, resource_version_number(obj.resource_version))
            self.sync_volumes()

    def delete(self, obj: ClusterObject) -> None:
        """Remove a Node, Pod, Namespace, workload or storage object (by kind and name) and tell the
        handlers; unknown objects are ignored."""
        store, key, kind = self._store_of(obj)
        old = store.pop(key, None)
        if isinstance(old, PersistentVolume) and old.claim_ref is not None:
            self._claim_pvs.get(old.claim_ref.key, set()).discard(old.name)
        if self._handlers is not None and old is not None:
            getattr(self._handlers, f"on_{kind}_delete")(old)

    def _put(self, obj: ClusterObject) -> None:
        store, key, kind = self._store_of(obj)
        old = store.get(key)
        store[key] = obj
        if isinstance(obj, PersistentVolumeClaim):
            self._dirty.add(obj.key)
        elif isinstance(obj, PersistentVolume):
            if isinstance(old, PersistentVolume) and old.claim_ref is not None:
                self._claim_pvs.get(old.claim_ref.key, set()).discard(old.name)
            if obj.claim_ref is not None:
                self._claim_pvs.setdefault(obj.claim_ref.key, set()).add(obj.name)
                self._dirty.add(obj.claim_ref.key)
            else:
                self._dirty |= self._unmatched
        elif isinstance(obj, StorageClass):
            self._dirty.update(claim.key for claim in self.storage.values()
                               if isinstance(claim, PersistentVolumeClaim) and claim.storage_class == obj.name)
        if self._handlers is not None and old is None:
            getattr(self._handlers, f"on_{kind}_add")(obj)
        elif self._handlers is not None:
            getattr(self._handlers, f"on_{kind}_update")(old, obj)

    def _store_of(self, obj: ClusterObject) -> tuple[dict[str, Any], str, str]:
        # Any: the store of obj's kind, each a dict of its own type (dicts are invariant: no one type covers them)
        if isinstance(obj, Node):
            return self.nodes, obj.name, "node"
        if isinstance(obj, Pod):
            return self.pods, obj.key, "pod"
        if isinstance(obj, Namespace):
            return self.namespaces, obj.name, "namespace"
        if isinstance(obj, _STORAGE_TYPES):
            return self.storage, storage_key(obj), "storage"
        return self.workloads, workload_key(obj), "workload"

    # -- VolumeWriter -------------------------------------------------------------
    async def update_persistent_volume(self, pv: PersistentVolume) -> PersistentVolume:
        """Write ``pv``'s claimRef and annotations if its resourceVersion (and uid, when given) is
        the stored one; returns the PV as written (the PV controller may change it right after)."""
        current = self._current(pv, self.pv(pv.name), f"persistentvolume {pv.name!r}")
        written = attrs.evolve(current, claim_ref=pv.claim_ref, annotations=dict(pv.annotations),
                               resource_version=self._next_version())
        self._put(written)
        self.sync_volumes()
        return written

    async def update_persistent_volume_claim(self, pvc: PersistentVolumeClaim) -> PersistentVolumeClaim:
        """Write ``pvc``'s annotations, as ``update_persistent_volume``."""
        current = self._current(pvc, self.pvc(pvc.key), f"persistentvolumeclaim {pvc.key!r}")
        written = attrs.evolve(current, annotations=dict(pvc.annotations), resource_version=self._next_version())
        self._put(written)
        self.sync_volumes()
        return written

    def _current(self, given: _Versioned, current: _Versioned | None, what: str) -> _Versioned:
        if current is None or (given.uid and current.uid != given.uid):
            raise UpdateConflict(f"{what} not found")
        if given.resource_version != current.resource_version:
            raise UpdateConflict(
                f"Operation cannot be fulfilled on {what}: the object has been modified; please apply your "
                f"changes to the latest version and try again (resourceVersion {given.resource_version!r}, "
                f"stored {current.resource_version!r})"
            )
        return current

    def _next_version(self) -> str:
        self._version += 1
        return str(self._version)

    # -- the PersistentVolume controller's binding (module docstring) ----------------
    def sync_volumes(self) -> None:
        """Bind and provision until nothing changes; every change reaches the handlers.

        Only the claims a change may concern are looked at (the claim written, the claim a PV
        names, the waiting claims when an Available PV appears, the claims of a class)."""
        for _ in range(_MAX_SYNC_ROUNDS):
            if not self._dirty:
                return
            keys = sorted(self._dirty)
            self._dirty.clear()
            for key in keys:
                self._sync_claim(key)
        raise ScorerError("the in-memory PersistentVolume controller did not settle")  # pragma: no cover

    def _sync_claim(self, key: str) -> None:
        claim = self.pvc(key)
        self._unmatched.discard(key)
        if claim is None or claim.deleting:
            return
        pv = self._volume_for(claim)
        if pv is not None:
            self._bind(pv, claim)
        elif not claim.volume_name:
            self._unmatched.add(key)

    def _volume_for(self, claim: PersistentVolumeClaim) -> PersistentVolume | None:
        """The PV to bind ``claim`` to (made now, if provisioned), None when there is none yet."""
        if claim.volume_name:
            pv = self.pv(claim.volume_name)
            if pv is None or pv.deleting:
                return None  # the claim stays Pending
            if pv.claim_ref is None:
                return pv if _satisfies(pv, claim) else None
            return pv if _names(pv.claim_ref, claim) else None  # else bound to another claim
        for name in sorted(self._claim_pvs.get(claim.key, ())):
            pv = self.pv(name)
            if (pv is not None and not pv.deleting and pv.claim_ref is not None and _names(pv.claim_ref, claim)
                    and _satisfies(pv, claim)):
                return pv  # pre-bound (by the scheduler, an administrator, a provisioner)
        storage_class = self.storage_class(claim.storage_class) if claim.storage_class else None
        if claim.storage_class and storage_class is None:
            return None  # the class is missing: nothing to bind or provision
        immediate = storage_class is None or storage_class.volume_binding_mode == IMMEDIATE
        if immediate:
            pvs = (obj for obj in self.storage.values() if isinstance(obj, PersistentVolume) and not obj.deleting)
            available = [pv for pv in pvs if pv.claim_ref is None and pv.phase in ("", "Available")
                         and pv.storage_class == claim.storage_class and _satisfies(pv, claim)
                         and (claim.selector is None or claim.selector.matches(pv.labels))]
            if available:
                return min(available, key=lambda pv: (pv.capacity, pv.name))
        if (storage_class is not None and storage_class.provisioner not in ("", NO_PROVISIONER)
                and (immediate or claim.selected_node)):
            return self._provision(claim, storage_class)
        return None

    def _provision(self, claim: PersistentVolumeClaim, storage_class: StorageClass) -> PersistentVolume:
        provisioner = storage_class.provisioner
        name = f"pvc-{claim.uid}" if claim.uid else f"pvc-{claim.namespace}-{claim.name}"
        node_affinity = None
        if claim.selected_node:
            node = self.nodes.get(claim.selected_node)
            hostname = node.labels.get(HOSTNAME_LABEL, node.name) if node is not None else claim.selected_node
            node_affinity = NodeSelector(terms=(NodeSelectorTerm(match_expressions=(
                NodeSelectorRequirement(key=HOSTNAME_LABEL, operator="In", values=(hostname,)),)),))
        in_tree = provisioner in _IN_TREE_PROVISIONERS
        pv = PersistentVolume(
            name=name,
            uid=f"uid-{name}",
            annotations={ANN_PROVISIONED_BY: provisioner},
            storage_class=storage_class.name,
            capacity=claim.request or 0,
            access_modes=claim.access_modes,
            volume_mode=claim.volume_mode,
            claim_ref=ClaimRef(namespace=claim.namespace, name=claim.name, uid=claim.uid),
            node_affinity=node_affinity,
            phase="Pending",
            csi_driver="" if in_tree else provisioner,
            csi_handle="" if in_tree else name,
            in_tree=provisioner if in_tree else "",
            in_tree_handle=name if in_tree else "",
            resource_version=self._next_version(),
        )
        self._put(pv)
        return pv

    def _bind(self, pv: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
        """kube's ``bind``: the PV's claimRef and phase, then the claim's volumeName, annotation and
        phase; each object written only if it changes. True if something changed."""
        changed = False
        ref = ClaimRef(namespace=claim.namespace, name=claim.name, uid=claim.uid,
                       resource_version=claim.resource_version)
        annotations = dict(pv.annotations)
        if pv.claim_ref is None:
            annotations[ANN_BOUND_BY_CONTROLLER] = "yes"
        elif pv.claim_ref.uid or not claim.uid:
            ref = pv.claim_ref  # as written (pre-bound with the uid, or the claim has none)
        else:
            ref = attrs.evolve(pv.claim_ref, uid=claim.uid)
        bound_pv = attrs.evolve(pv, claim_ref=ref, annotations=annotations, phase="Bound")
        if bound_pv != pv:
            self._put(attrs.evolve(bound_pv, resource_version=self._next_version()))
            changed = True
        claim_annotations = dict(claim.annotations)
        claim_annotations.setdefault(ANN_BIND_COMPLETED, "yes")
        if not claim.volume_name:
            claim_annotations[ANN_BOUND_BY_CONTROLLER] = "yes"
        bound_claim = attrs.evolve(claim, volume_name=pv.name, annotations=claim_annotations, phase="Bound")
        if bound_claim != claim:
            self._put(attrs.evolve(bound_claim, resource_version=self._next_version()))
            changed = True
        return changed

    # -- reading ------------------------------------------------------------------
    def pv(self, name: str) -> PersistentVolume | None:
        obj = self.storage.get(f"PersistentVolume/{name}")
        return obj if isinstance(obj, PersistentVolume) else None

    def pvc(self, key: str) -> PersistentVolumeClaim | None:
        """The PersistentVolumeClaim ``namespace/name``."""
        obj = self.storage.get(f"PersistentVolumeClaim/{key}")
        return obj if isinstance(obj, PersistentVolumeClaim) else None

    def storage_class(self, name: str) -> StorageClass | None:
        obj = self.storage.get(f"StorageClass/{name}")
        return obj if isinstance(obj, StorageClass) else None

    def pending_pods(self) -> list[Pod]:
        return [p for p in self.pods.values() if not p.node_name]


def workload_key(obj: Workload) -> str:
    """``kind/namespace/name``: a Service and a PodDisruptionBudget may share a name."""
    return obj.key if isinstance(obj, SelectorOwner) else f"PodDisruptionBudget/{obj.key}"


def storage_key(obj: StorageObject) -> str:
    """``kind/name`` or ``kind/namespace/name``."""
    return f"{type(obj).__name__}/{obj.key}"


def _names(ref: ClaimRef, claim: PersistentVolumeClaim) -> bool:
    """The claimRef names ``claim``: namespace and name, and the uid when both have one (objects
    from files may have none)."""
    return (ref.namespace == claim.namespace and ref.name == claim.name
            and (not ref.uid or not claim.uid or ref.uid == claim.uid))


def _satisfies(pv: PersistentVolume, claim: PersistentVolumeClaim) -> bool:
    """What kube checks of a PV pre-bound to the claim: its access modes contain the claim's, its
    capacity covers the request, same volumeMode (class and selector are checked only when the
    controller picks an Available PV)."""
    return (all(mode in pv.access_modes for mode in claim.access_modes)
            and pv.capacity >= (claim.request or 0)
            and pv.volume_mode == claim.volume_mode)


_POD_FIELDS = tuple(field.name for field in attrs.fields(Pod))  # the derived ones (init=False) too


def _with_node(pod: Pod, node_name: str) -> Pod:
    """``attrs.evolve(pod, node_name=node_name)`` without recomputing the derived requests
    (they do not depend on the node): a third of the in-memory bind's cost otherwise."""
    bound = object.__new__(Pod)
    for name in _POD_FIELDS:
        object.__setattr__(bound, name, getattr(pod, name))
    object.__setattr__(bound, "node_name", node_name)
    return bound


def _first_sync(obj: _S) -> _S:
    """The PersistentVolume controller's first sync of a volume: one without a claimRef whose phase is
    unset or Pending becomes Available (other objects as they are)."""
    if isinstance(obj, PersistentVolume) and obj.claim_ref is None and obj.phase in ("", "Pending"):
        return attrs.evolve(obj, phase="Available")
    return obj
