"""Event handlers: every object change of a cluster source becomes cache updates
and the queue's ClusterEvents (kube-scheduler's eventhandlers.go).

* Nodes: added to / updated in / removed from the cache. An add is
  ``NodeAdd``; an update is one event per scheduling property that changed
  (``UpdateNodeAllocatable``, ``UpdateNodeLabel``, ``UpdateNodeTaint`` also
  for ``spec.unschedulable``, ``UpdateNodeAnnotation``; the model keeps no
  node conditions, so ``UpdateNodeCondition`` is never sent), none when nothing
  scheduling reads changed; a delete is ``NodeDelete``.
* Assigned pods (``spec.nodeName`` set) are counted in the cache, which
  confirms a pod the scheduler assumed: ``AssignedPodAdd``, ``AssignedPodDelete``
  and, for updates, one ``AssignedPod`` event per changed property
  (``UpdatePodLabel``, ``UpdatePodScaleDown``, ``UpdatePodToleration``, or a
  generic update that only plugins registering ``Update`` match). A pod that
  gets bound leaves the scheduling queue.
* Unassigned pods whose ``spec.schedulerName`` is one of our profiles go to
  the queue (``add``/``update``/``delete``); updates that change only the
  status or resourceVersion are ignored (kube's isPodUpdated), or the
  scheduler's own condition writes would release every pod it parked. Pods
  of other schedulers are ignored.
* Pods in a terminal phase (Succeeded, Failed) hold no resources and are not
  scheduled: a pod turning terminal is handled as deleted.
* Namespaces: kept in the cache for the plugins that read their labels;
  ``NamespaceAdd``/``NamespaceUpdate``/``NamespaceDelete``.
* Workloads (Services, ReplicationControllers, ReplicaSets, StatefulSets,
  PodDisruptionBudgets): kept in the cache (``cache.workloads``) for default
  topology spreading and preemption; no pod is requeued. kube 1.20 moved every
  unschedulable pod on a Service change (for the ServiceAffinity plugin, not a
  default one) and on nothing for the others; later releases watch a kind
  only for the plugins that register its events, and no default plugin
  registers these, so a change of them requeues nothing.
* Storage objects (PersistentVolumes, PersistentVolumeClaims, StorageClasses,
  CSINodes, CSIDrivers, CSIStorageCapacities): kept in the cache
  (``cache.volumes``, which also drops VolumeBinding's assumed copy of a PV or
  PVC once a version at least as new arrives) for the volume plugins; each
  change is ``<Kind>Add``/``<Kind>Update``/``<Kind>Delete`` (``PersistentVolumeAdd``,
  ``CSINodeUpdate``...), which moves the pods whose rejecting plugins registered it.

A deleted pod waiting at Permit is rejected, so its binding cycle ends. Every
deleted pod (and a pod turning terminal, or re-created under its name) is
also told to the profiles' recorder (``forget``),
so that the cluster writer drops what it remembers of the pod (its last
condition, its Event series) in order after the pod's last writes: per-pod
memory goes with the pod, however many pods come and go.
A change the cache cannot count (``CacheError``: a node total would overflow)
is logged with the pod and skipped; the handlers never raise into the source.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TypeVar

import attrs

from scorer.cache import CacheError, ClusterCache
from scorer.framework.events import (
    ADD,
    ASSIGNED_POD,
    CSI_DRIVER,
    CSI_NODE,
    CSI_STORAGE_CAPACITY,
    DELETE,
    EVENT_ASSIGNED_POD_ADD,
    EVENT_ASSIGNED_POD_DELETE,
    EVENT_NAMESPACE_ADD,
    EVENT_NAMESPACE_DELETE,
    EVENT_NAMESPACE_UPDATE,
    EVENT_NODE_ADD,
    EVENT_NODE_DELETE,
    NODE,
    PERSISTENT_VOLUME,
    PERSISTENT_VOLUME_CLAIM,
    STORAGE_CLASS,
    UNSCHEDULABLE_POD,
    UPDATE,
    UPDATE_NODE_ALLOCATABLE,
    UPDATE_NODE_ANNOTATION,
    UPDATE_NODE_LABEL,
    UPDATE_NODE_TAINT,
    UPDATE_POD_LABEL,
    UPDATE_POD_OTHER,
    UPDATE_POD_SCALE_DOWN,
    UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
    UPDATE_POD_TOLERATION,
    ClusterEvent,
)
from scorer.framework.runtime import Framework
from scorer.model import Namespace, Node, Pod, PodDisruptionBudget, SelectorOwner
from scorer.model.storage import (
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    StorageObject,
)
from scorer.queue import SchedulingQueue

log = logging.getLogger("scorer.eventhandlers")

_Counted = TypeVar("_Counted", Node, Pod)  # what a cache change counts

# The event resource of each storage kind.
STORAGE_RESOURCES: dict[type, str] = {
    PersistentVolume: PERSISTENT_VOLUME,
    PersistentVolumeClaim: PERSISTENT_VOLUME_CLAIM,
    StorageClass: STORAGE_CLASS,
    CSINode: CSI_NODE,
    CSIDriver: CSI_DRIVER,
    CSIStorageCapacity: CSI_STORAGE_CAPACITY,
}

def node_update_events(old: Node, new: Node) -> list[ClusterEvent]:
    """kube's nodeSchedulingPropertiesChange: one event per changed property, in kube's order."""
    actions = []
    if old.unschedulable != new.unschedulable or old.taints != new.taints:
        actions.append(UPDATE_NODE_TAINT)
    if old.allocatable != new.allocatable:
        actions.append(UPDATE_NODE_ALLOCATABLE)
    if old.labels != new.labels:
        actions.append(UPDATE_NODE_LABEL)
    if old.annotations != new.annotations:
        actions.append(UPDATE_NODE_ANNOTATION)
    return [ClusterEvent(NODE, action) for action in actions]


def pod_update_events(old: Pod, new: Pod, resource: str) -> list[ClusterEvent]:
    """kube's PodSchedulingPropertiesChange for ``resource`` (AssignedPod or UnschedulablePod)."""
    actions = []
    if old.labels != new.labels:
        actions.append(UPDATE_POD_LABEL)
    if _scaled_down(old, new):
        actions.append(UPDATE_POD_SCALE_DOWN)
    if old.scheduling_gates and not new.scheduling_gates:
        actions.append(UPDATE_POD_SCHEDULING_GATES_ELIMINATED)
    if old.tolerations != new.tolerations:
        actions.append(UPDATE_POD_TOLERATION)
    if not actions:
        return [ClusterEvent(resource, UPDATE_POD_OTHER, resource + UPDATE)]
    return [ClusterEvent(resource, action) for action in actions]


def _scaled_down(old: Pod, new: Pod) -> bool:
    """A request of ``old`` was removed or lowered (kube's extractPodScaleDown)."""
    return any(new.requests.get(name, -1) < value for name, value in old.requests.items())


def _spec_changed(old: Pod, new: Pod) -> bool:
    """kube's isPodUpdated: anything but the status and resourceVersion changed."""
    def spec(pod: Pod) -> Pod:
        return attrs.evolve(pod, phase="", nominated_node_name="", resource_version="")

    return spec(old) != spec(new)


class EventHandlers:
    """Feeds ``cache`` and ``queue`` from a cluster source (implements ObjectHandlers).

    ``frameworks`` are the profiles by schedulerName: unassigned pods of
    other schedulers are ignored, and a deleted pod waiting at Permit is
    rejected through its profile.
    """

    def __init__(self, cache: ClusterCache, queue: SchedulingQueue, frameworks: Mapping[str, Framework]) -> None:
        self.cache = cache
        self.queue = queue
        self.frameworks = frameworks

    # -- nodes -------------------------------------------------------------------
    def on_node_add(self, node: Node) -> None:
        self._count(self.cache.add_node, node)
        self.queue.move_all_to_active_or_backoff(EVENT_NODE_ADD)

    def on_node_update(self, old: Node, new: Node) -> None:
        self._count(self.cache.update_node, new)
        for event in node_update_events(old, new):
            self.queue.move_all_to_active_or_backoff(event)

    def on_node_delete(self, node: Node) -> None:
        self.cache.remove_node(node.name)
        self.queue.move_all_to_active_or_backoff(EVENT_NODE_DELETE)

    # -- pods ----------------------------------------------------------------------
    def on_pod_add(self, pod: Pod) -> None:
        if pod.is_terminal:
            return
        if pod.node_name:
            self._add_assigned(pod)
        elif self._responsible(pod):
            self.queue.add(pod)

    def on_pod_update(self, old: Pod, new: Pod) -> None:
        if old.uid != new.uid:  # deleted and re-created under the same name
            self.on_pod_delete(old)
            self.on_pod_add(new)
            return
        if new.is_terminal:
            if not old.is_terminal:
                self.on_pod_delete(old)
            return
        if old.is_terminal:
            self.on_pod_add(new)
            return
        if new.node_name:
            if not old.node_name:
                # Bound (by us: this confirms the assumed pod; or by another scheduler: a placement).
                self.queue.delete(old)
                if self._count(self.cache.add_bound_pod, new):
                    self.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_ADD)
                return
            if self._count(self.cache.add_pod, new):
                for event in pod_update_events(old, new, ASSIGNED_POD):
                    self.queue.move_all_to_active_or_backoff(event)
            return
        if old.node_name:  # unbound: not something the API allows; start over
            self.on_pod_delete(old)
            self.on_pod_add(new)
            return
        if not self._responsible(new):
            self.queue.delete(new)
            return
        if not _spec_changed(old, new):
            self.queue.update_status(old, new)  # nominatedNodeName: the queue's nominator follows it
            return
        for event in pod_update_events(old, new, UNSCHEDULABLE_POD):
            self.queue.update(old, new, event=event)

    def on_pod_delete(self, pod: Pod) -> None:
        self._reject_waiting(pod)
        if pod.key in self.cache.pod_node:  # bound, or assumed while its binding was in flight
            self.cache.remove_pod(pod)
            self.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_DELETE)
        if not pod.node_name:
            self.queue.delete(pod)
        self._forget(pod)

    # -- namespaces ------------------------------------------------------------------
    def on_namespace_add(self, namespace: Namespace) -> None:
        self.cache.add_namespace(namespace)
        self.queue.move_all_to_active_or_backoff(EVENT_NAMESPACE_ADD)

    def on_namespace_update(self, old: Namespace, new: Namespace) -> None:
        self.cache.add_namespace(new)
        if old.labels != new.labels:
            self.queue.move_all_to_active_or_backoff(EVENT_NAMESPACE_UPDATE)

    def on_namespace_delete(self, namespace: Namespace) -> None:
        self.cache.remove_namespace(namespace.name)
        self.queue.move_all_to_active_or_backoff(EVENT_NAMESPACE_DELETE)

    # -- workloads -------------------------------------------------------------------
    def on_workload_add(self, obj: SelectorOwner | PodDisruptionBudget) -> None:
        self.cache.add_workload(obj)

    def on_workload_update(
        self, old: SelectorOwner | PodDisruptionBudget, new: SelectorOwner | PodDisruptionBudget
    ) -> None:
        self.cache.add_workload(new)  # replaces ``old`` (same kind, namespace and name)

    def on_workload_delete(self, obj: SelectorOwner | PodDisruptionBudget) -> None:
        self.cache.remove_workload(obj)

    # -- storage -------------------------------------------------------------------
    def on_storage_add(self, obj: StorageObject) -> None:
        self._storage_change(self.cache.add_storage, obj, ADD)

    def on_storage_update(self, old: StorageObject, new: StorageObject) -> None:
        self._storage_change(self.cache.add_storage, new, UPDATE)  # replaces ``old`` (same kind and key)

    def on_storage_delete(self, obj: StorageObject) -> None:
        self._storage_change(self.cache.remove_storage, obj, DELETE)

    def _storage_change(self, change: Callable[[StorageObject], None], obj: StorageObject, action: str) -> None:
        resource = STORAGE_RESOURCES.get(type(obj))
        if resource is None:
            log.error("not a storage object, ignored: %r", obj)
            return
        change(obj)
        self.queue.move_all_to_active_or_backoff(ClusterEvent(resource, action))

    # -- internals -----------------------------------------------------------------
    def _responsible(self, pod: Pod) -> bool:
        return pod.scheduler_name in self.frameworks

    def _add_assigned(self, pod: Pod) -> None:
        if self._count(self.cache.add_pod, pod):
            self.queue.move_all_to_active_or_backoff(EVENT_ASSIGNED_POD_ADD)

    def _count(self, change: Callable[[_Counted], None], obj: _Counted) -> bool:
        """Apply a cache change; a CacheError is logged (it names the pod) and skipped."""
        try:
            change(obj)
        except CacheError as exc:
            log.error("%s", exc)
            return False
        return True

    def _forget(self, pod: Pod) -> None:
        """Tell the recorder (the pod's profile's, else the first profile's: the Scheduler gives them all
        the same one) that ``pod`` is gone."""
        fwk = self.frameworks.get(pod.scheduler_name) or next(iter(self.frameworks.values()), None)
        if fwk is not None and fwk.handle.recorder is not None:
            fwk.handle.recorder.forget(pod)

    def _reject_waiting(self, pod: Pod) -> None:
        fwk = self.frameworks.get(pod.scheduler_name)
        waiting = fwk.handle.waiting_pods.get(pod.key) if fwk is not None else None
        if waiting is not None:
            waiting.reject("", "removed")
