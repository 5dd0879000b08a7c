"""What the framework needs from outside it: the Protocols of the cluster writers and of the recorder.

The framework's ``Handle`` holds a ``Binder`` (``handle.binder``) and an
``EventRecorder`` (``handle.recorder``); the plugins call them (DefaultBinder
binds through the Binder, DefaultPreemption deletes victims through the
recorder). Their implementations live in higher layers and conform
structurally: the in-memory cluster (``scorer.cluster.memory``) and the API
writer (``scorer.kube.writer``) are ``ClusterWriter``s, the buffered recorder
(``scorer.cluster.recorder``) is the ``EventRecorder`` over one. Defined here,
in the framework's layer, so that ``Handle`` can name them;
``scorer.cluster.interface`` re-exports them with the cluster's other seams.

A ``Binder`` binds a pod to a node (the Bind plugin DefaultBinder calls it
from the binding cycle). An ``EventRecorder`` takes Events and PodScheduled
conditions from the scheduling and binding cycles without doing I/O: it only
enqueues; a background drain writes them to a ``ClusterWriter``. A
``ClusterWriter`` is what the assembly takes: a Binder that is also an
``EventSink``, deletes preemption victims (``delete_pod``, enqueued by the
recorder like the rest) and drops what it remembers of a deleted pod
(``forget``). A ``VolumeWriter`` updates PersistentVolumes and
PersistentVolumeClaims (the VolumeBinding plugin's PreBind), with the
object's resourceVersion as precondition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from scorer.model import Pod
    from scorer.model.storage import PersistentVolume, PersistentVolumeClaim

__all__ = ["Binder", "ClusterWriter", "EventRecorder", "EventSink", "VolumeWriter"]


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

    def forget(self, pod_key: str) -> None:
        """The pod ``pod_key`` (``namespace/name``) was deleted: drop whatever is kept of it
        (the API writer's Event series and rate buckets); nothing for a writer that keeps
        nothing per pod."""


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
    drains the buffer to the writer in the background until cancelled;
    ``flush`` writes everything enqueued so far (drivers and tests call it
    before reading the writer).
    """

    def record(self, pod: Pod, type_: str, reason: str, action: str, note: str,
               related: Pod | None = None) -> None:
        """An Event regarding ``pod`` (``related``: the Event's second object, if any)."""

    def set_pod_condition(self, pod: Pod, status: str, reason: str, message: str,
                          nominated_node: str | None = None) -> None:
        """The pod's ``PodScheduled`` condition, and its nomination unless ``nominated_node`` is None."""

    def delete_pod(self, pod: Pod) -> None:
        """Preemption: delete the victim ``pod`` (in order with the other writes)."""

    def clear_nominated_node(self, pod: Pod) -> None:
        """Preemption: clear the nomination of a lower-priority pod."""

    def forget(self, pod: Pod) -> None:
        """``pod`` was deleted: the writer drops what it keeps of it, after the writes enqueued before."""

    async def flush(self) -> None:
        """Write everything enqueued so far."""

    async def run(self) -> None:
        """Drain to the writer whenever something is enqueued, until cancelled."""
