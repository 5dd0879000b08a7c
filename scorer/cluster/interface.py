"""The seam between the scheduler and a cluster: every Protocol the scheduler depends on.

Two implementations exist or will: the in-memory cluster of simulate, explain,
the bench and the tests (``scorer.cluster.memory``), and the API reflectors
and client of ``scorer run`` (next). Nothing here knows which one it talks to.

Reading the cluster: a ``ClusterSource`` lists every object once, then feeds
each change (add, update, delete of namespaces, workloads, storage objects,
nodes and pods) to ``ObjectHandlers`` (``scorer.eventhandlers``), which update
the cache and turn the change into the queue's ClusterEvent.

Writing to the cluster: a ``Binder`` binds a pod to a node (the Bind plugin
DefaultBinder calls it from the binding cycle). An ``EventRecorder`` takes
Events and PodScheduled conditions from the scheduling and binding cycles
without doing I/O: it only enqueues; a background drain writes them to an
``EventSink``. A ``ClusterWriter`` is what the assembly takes: a Binder that
is also an EventSink (the in-memory cluster, or the API client), and deletes
preemption victims (``delete_pod``, enqueued by the recorder like the rest).
A ``VolumeWriter`` updates PersistentVolumes and PersistentVolumeClaims (the
VolumeBinding plugin's PreBind), with the object's resourceVersion as
precondition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from scorer.errors import BindConflict, UpdateConflict

if TYPE_CHECKING:
    from scorer.model import Namespace, Node, Pod, PodDisruptionBudget, SelectorOwner
    from scorer.model.storage import PersistentVolume, PersistentVolumeClaim, StorageObject

__all__ = ["BindConflict", "Binder", "ClusterSource", "ClusterWriter", "EventRecorder", "EventSink",
           "ObjectHandlers", "UpdateConflict", "VolumeWriter"]


@runtime_checkable
class Binder(Protocol):
    async def bind(self, pod: Pod, node_name: str) -> None:
        """Bind ``pod`` (matched by namespace, name and UID) to ``node_name``.

        Returns once the cluster accepted the binding; raises ``BindConflict``
        (``scorer.errors``) when it refused it for good (the pod gone,
        re-created, being deleted or bound already: not retried), and any
        other exception on failures worth retrying (transport, 5xx, 429).
        The binding reaches the scheduler's cache through the cluster source,
        as an update of the pod (that confirms the pod the cycle assumed).
        """


@runtime_checkable
class EventSink(Protocol):
    """Where recorded Events and pod conditions are written (the API, or memory).

    Writes are asynchronous and may arrive after later changes of the pod: a
    sink must not turn a bound pod's PodScheduled condition back to False.
    """

    async def write_event(self, pod: Pod, type_: str, reason: str, action: str, note: str,
                          related: Pod | None = None) -> None:
        """An Event regarding ``pod`` (``type_`` Normal or Warning; kube's reason, action and note);
        ``related`` is the Event's second object (the preemptor of a Preempted Event). Recorders
        pass it only when there is one, so sinks written before it keep working."""

    async def write_pod_condition(self, pod: Pod, status: str, reason: str, message: str,
                                  nominated_node: str | None = None) -> None:
        """Set the pod's ``PodScheduled`` condition (status ``"False"`` on failures) and, unless
        ``nominated_node`` is None, its ``status.nominatedNodeName`` (``""`` clears it)."""


@runtime_checkable
class ClusterWriter(Binder, EventSink, Protocol):
    """What the scheduler writes to a cluster: bindings, Events, pod conditions, and what
    preemption does (victims deleted, nominations of other pods cleared)."""

    async def delete_pod(self, pod: Pod) -> None:
        """Delete ``pod`` (a preemption victim), matched by UID, with its own grace period, as
        kube-scheduler does; a pod already gone (or re-created) is fine."""

    async def clear_nominated_node(self, pod: Pod) -> None:
        """Clear ``status.nominatedNodeName`` of ``pod`` (its node was taken by a preemptor)."""


@runtime_checkable
class VolumeWriter(Protocol):
    """Updates of PersistentVolumes and PersistentVolumeClaims (VolumeBinding's PreBind).

    Each write is a PUT with the object's ``resource_version`` as precondition. It returns
    the object as the cluster stored it (its new ``resource_version``); raises
    ``UpdateConflict`` (``scorer.errors``) when the object is gone or its resourceVersion
    changed (not retried: re-read it), and any other exception on failures worth retrying.
    The change also reaches the scheduler's cache through the cluster source, as an update.
    """

    async def update_persistent_volume(self, pv: PersistentVolume) -> PersistentVolume:
        """Write ``pv``'s ``spec.claimRef`` and ``metadata.annotations``."""

    async def update_persistent_volume_claim(self, pvc: PersistentVolumeClaim) -> PersistentVolumeClaim:
        """Write ``pvc``'s ``metadata.annotations`` (the selected node)."""


@runtime_checkable
class EventRecorder(Protocol):
    """Events and pod conditions from the cycles: enqueued at once, written later.

    ``record`` and ``set_pod_condition`` never block and never do I/O, whatever
    backs the recorder, so the scheduling cycle stays free of I/O. ``run``
    drains the buffer to the sink in the background until cancelled;
    ``flush`` writes everything enqueued so far (drivers and tests call it
    before reading the sink).
    """

    def record(self, pod: Pod, type_: str, reason: str, action: str, note: str,
               related: Pod | None = None) -> None: ...

    def set_pod_condition(self, pod: Pod, status: str, reason: str, message: str,
                          nominated_node: str | None = None) -> None: ...

    def delete_pod(self, pod: Pod) -> None:
        """Preemption: delete the victim ``pod`` (in order with the other writes)."""

    def clear_nominated_node(self, pod: Pod) -> None:
        """Preemption: clear the nomination of a lower-priority pod."""

    async def flush(self) -> None: ...

    async def run(self) -> None: ...


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
        """True once the initial list has been delivered (for ``/readyz``; the
        scheduling loop should not start before)."""

    async def wait_for_sync(self) -> None:
        """Return once ``has_synced()`` is true."""
