"""An in-memory cluster: the cluster of ``scorer simulate``, explain, the bench and the tests.

It holds Nodes, Pods, Namespaces and workloads (Services, ReplicationControllers,
ReplicaSets, StatefulSets, PodDisruptionBudgets), and implements the three seams of
``scorer.cluster.interface`` the way a kube-apiserver would:

* ``Binder``: ``bind`` sets ``spec.nodeName`` and ``PodScheduled=True``, or
  raises ``BindConflict`` (pod gone or re-created, already bound: not
  retried), or ``ScorerError`` for an unknown node (retried: the API server
  would not refuse it, but a simulation should not bind to a missing node);
* ``EventSink``: keeps the Events and PodScheduled conditions written to it;
* ``ClusterSource``: ``start(handlers)`` lists every object into the event
  handlers (namespaces, workloads, nodes, then pods, in the order given), and from then
  on every change made through it (``bind``, ``apply``, ``delete``) reaches
  the handlers at once, as a watch without latency would deliver it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import attrs

from scorer.cluster.interface import BindConflict, ObjectHandlers
from scorer.errors import ScorerError
from scorer.model import ClusterObject, LoadedObjects, Namespace, Node, Pod, PodDisruptionBudget, SelectorOwner

Workload = SelectorOwner | PodDisruptionBudget

__all__ = ["BindConflict", "Event", "InMemoryCluster", "PodCondition", "workload_key"]


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
    """``workloads`` are keyed by ``workload_key`` (``Service/ns/name``, ``PodDisruptionBudget/ns/name``)."""

    def __init__(
        self,
        nodes: list[Node],
        pods: list[Pod],
        namespaces: list[Namespace],
        workloads: list[Workload] | tuple[Workload, ...] = (),
    ) -> None:
        self.nodes: dict[str, Node] = {n.name: n for n in nodes}
        self.pods: dict[str, Pod] = {p.key: p for p in pods}
        self.namespaces: dict[str, Namespace] = {ns.name: ns for ns in namespaces}
        self.workloads: dict[str, Workload] = {workload_key(w): w for w in workloads}
        self.events: list[Event] = []
        self.conditions: dict[str, PodCondition] = {}
        self.binds = 0
        self.preempted: list[str] = []  # victims deleted by delete_pod, in order
        self._handlers: ObjectHandlers | None = None
        self._synced = asyncio.Event()

    @classmethod
    def from_objects(cls, objects: LoadedObjects) -> InMemoryCluster:
        return cls(list(objects.nodes), list(objects.pods), list(objects.namespaces), list(objects.workloads))

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

    async def wait_for_sync(self) -> None:
        await self._synced.wait()

    # -- changes, as an API client would make them --------------------------------
    def apply(self, obj: ClusterObject) -> None:
        """Create or replace a Node, Pod, Namespace or workload (by kind and name) and tell the handlers."""
        store, key, kind = self._store_of(obj)
        old = store.get(key)
        store[key] = obj
        if self._handlers is not None and old is None:
            getattr(self._handlers, f"on_{kind}_add")(obj)
        elif self._handlers is not None:
            getattr(self._handlers, f"on_{kind}_update")(old, obj)

    def delete(self, obj: ClusterObject) -> None:
        """Remove a Node, Pod, Namespace or workload (by kind and name) and tell the handlers;
        unknown objects are ignored."""
        store, key, kind = self._store_of(obj)
        old = store.pop(key, None)
        if self._handlers is not None and old is not None:
            getattr(self._handlers, f"on_{kind}_delete")(old)

    def _store_of(self, obj: ClusterObject) -> tuple[dict[str, Any], str, str]:
        if isinstance(obj, Node):
            return self.nodes, obj.name, "node"
        if isinstance(obj, Pod):
            return self.pods, obj.key, "pod"
        if isinstance(obj, Namespace):
            return self.namespaces, obj.name, "namespace"
        return self.workloads, workload_key(obj), "workload"

    # -- reading ------------------------------------------------------------------
    def pending_pods(self) -> list[Pod]:
        return [p for p in self.pods.values() if not p.node_name]


def workload_key(obj: Workload) -> str:
    """``kind/namespace/name``: a Service and a PodDisruptionBudget may share a name."""
    return obj.key if isinstance(obj, SelectorOwner) else f"PodDisruptionBudget/{obj.key}"


_POD_FIELDS = tuple(field.name for field in attrs.fields(Pod))  # the derived ones (init=False) too


def _with_node(pod: Pod, node_name: str) -> Pod:
    """``attrs.evolve(pod, node_name=node_name)`` without recomputing the derived requests
    (they do not depend on the node): a third of the in-memory bind's cost otherwise."""
    bound = object.__new__(Pod)
    for name in _POD_FIELDS:
        object.__setattr__(bound, name, getattr(pod, name))
    object.__setattr__(bound, "node_name", node_name)
    return bound
