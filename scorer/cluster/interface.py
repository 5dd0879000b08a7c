"""The seam between the scheduler and a cluster: every Protocol the scheduler depends on.

Two implementations exist or will: the in-memory cluster of simulate, explain,
the bench and the tests (``scorer.cluster.memory``), and the API reflectors
and client of ``scorer run`` (next). Nothing here knows which one it talks to.

Reading the cluster: a ``ClusterSource`` lists every object once, then feeds
each change (add, update, delete of namespaces, workloads, storage objects,
nodes and pods) to ``ObjectHandlers`` (``scorer.eventhandlers``), which update
the cache and turn the change into the queue's ClusterEvent.

Writing to the cluster: the ``Binder``, ``EventSink``, ``ClusterWriter``,
``VolumeWriter`` and ``EventRecorder`` Protocols are the framework's
(``scorer.framework.seams``: its ``Handle`` holds a Binder and an
EventRecorder), re-exported here with the cluster's other seams.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from scorer.errors import BindConflict, UpdateConflict
from scorer.framework.seams import Binder, ClusterWriter, EventRecorder, EventSink, VolumeWriter

if TYPE_CHECKING:
    from scorer.model import Namespace, Node, Pod, PodDisruptionBudget, SelectorOwner
    from scorer.model.storage import StorageObject

__all__ = ["BindConflict", "Binder", "ClusterSource", "ClusterWriter", "EventRecorder", "EventSink",
           "ObjectHandlers", "UpdateConflict", "VolumeWriter"]


@runtime_checkable
class ObjectHandlers(Protocol):
    """What a cluster source feeds: one call per object change (``scorer.eventhandlers``).

    ``old`` is the object as last delivered. Sources deliver the changes of
    one object in order. Workloads are the objects that select pods: Services,
    ReplicationControllers, ReplicaSets, StatefulSets (``SelectorOwner``) and
    PodDisruptionBudgets, one set of handlers for all of them; so are the storage objects
    (``scorer.model.storage``: PersistentVolumes, PersistentVolumeClaims, StorageClasses,
    CSINodes, CSIDrivers, CSIStorageCapacities).
    """

    def on_node_add(self, node: Node) -> None: ...

    def on_node_update(self, old: Node, new: Node) -> None: ...

    def on_node_delete(self, node: Node) -> None: ...

    def on_pod_add(self, pod: Pod) -> None: ...

    def on_pod_update(self, old: Pod, new: Pod) -> None: ...

    def on_pod_delete(self, pod: Pod) -> None: ...

    def on_namespace_add(self, namespace: Namespace) -> None: ...

    def on_namespace_update(self, old: Namespace, new: Namespace) -> None: ...

    def on_namespace_delete(self, namespace: Namespace) -> None: ...

    def on_workload_add(self, obj: SelectorOwner | PodDisruptionBudget) -> None: ...

    def on_workload_update(
        self, old: SelectorOwner | PodDisruptionBudget, new: SelectorOwner | PodDisruptionBudget
    ) -> None: ...

    def on_workload_delete(self, obj: SelectorOwner | PodDisruptionBudget) -> None: ...

    def on_storage_add(self, obj: StorageObject) -> None: ...

    def on_storage_update(self, old: StorageObject, new: StorageObject) -> None: ...

    def on_storage_delete(self, obj: StorageObject) -> None: ...


@runtime_checkable
class ClusterSource(Protocol):
    """Lists and watches the cluster's objects into ``ObjectHandlers``."""

    async def run(self, handlers: ObjectHandlers) -> None:
        """Deliver every object once (namespaces, workloads, storage objects, nodes, then pods),
        then each change, until cancelled. Reconnects and re-lists are the source's business."""

    def has_synced(self) -> bool:
        """True once the initial list has been delivered, but for pods that only
        wait to be scheduled, which may follow (the scheduling loop starts then)."""

    def has_delivered(self) -> bool:
        """True once the initial list has been delivered in full (``/readyz``)."""

    async def wait_for_sync(self) -> None:
        """Return once ``has_synced()`` is true."""
