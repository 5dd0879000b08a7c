"""An in-memory cluster: the cluster source of ``scorer simulate``, explain and the bench.

It holds Nodes, Pods and Namespaces loaded from a file, binds pods by setting
``spec.nodeName``, and keeps the Events and PodScheduled conditions the
scheduler writes, as a kube-apiserver would.
"""

from __future__ import annotations

import attrs

from scorer.errors import ScorerError
from scorer.model import LoadedObjects, Namespace, Node, Pod


class BindConflict(ScorerError):
    """The pod is gone or already bound (the API's 409/404)."""


@attrs.frozen(slots=True)
class Event:
    pod: str
    type: str
    reason: str
    action: str
    note: str


@attrs.frozen(slots=True)
class PodCondition:
    type: str
    status: str
    reason: str
    message: str


class InMemoryCluster:
    def __init__(self, nodes: list[Node], pods: list[Pod], namespaces: list[Namespace]) -> None:
        self.nodes: dict[str, Node] = {n.name: n for n in nodes}
        self.pods: dict[str, Pod] = {p.key: p for p in pods}
        self.namespaces: dict[str, Namespace] = {ns.name: ns for ns in namespaces}
        self.events: list[Event] = []
        self.conditions: dict[str, PodCondition] = {}
        self.binds = 0

    @classmethod
    def from_objects(cls, objects: LoadedObjects) -> InMemoryCluster:
        return cls(list(objects.nodes), list(objects.pods), list(objects.namespaces))

    async def bind(self, pod: Pod, node_name: str) -> None:
        current = self.pods.get(pod.key)
        if current is None or (pod.uid and current.uid != pod.uid):
            raise BindConflict(f"pod {pod.key} not found")
        if current.node_name:
            raise BindConflict(f"pod {pod.key} is already assigned to node {current.node_name!r}")
        if node_name not in self.nodes:
            raise BindConflict(f"node {node_name!r} not found")
        self.pods[pod.key] = attrs.evolve(current, node_name=node_name)
        self.conditions[pod.key] = PodCondition("PodScheduled", "True", "", "")
        self.binds += 1

    def record_event(self, pod: Pod, type_: str, reason: str, action: str, note: str) -> None:
        self.events.append(Event(pod.key, type_, reason, action, note))

    def set_pod_condition(self, pod: Pod, status: str, reason: str, message: str) -> None:
        self.conditions[pod.key] = PodCondition("PodScheduled", status, reason, message)

    def pending_pods(self) -> list[Pod]:
        return [p for p in self.pods.values() if not p.node_name]

    def bound_pods(self) -> list[Pod]:
        return [p for p in self.pods.values() if p.node_name]
