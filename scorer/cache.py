"""ClusterCache: what the scheduler knows of the cluster, over the columnar NodeTable.

Every event (node add/update/delete, pod add/delete, assume/forget) updates
one row of ``scorer.state.NodeTable`` in O(resources); scheduling cycles read
whole columns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from scorer.model import Namespace, Node, Pod
from scorer.state.nodetable import BASE_RESOURCES, PODS, NodeTable

__all__ = ["BASE_RESOURCES", "PODS", "ClusterCache", "NodeTable"]


class ClusterCache:
    """What the scheduler knows of the cluster: nodes, bound and assumed pods, namespaces.

    A pod is *assumed* on a node as soon as a cycle picks it, before binding
    completes, so the next cycle already counts its resources. ``forget``
    undoes that when binding fails; ``confirm`` makes it permanent.
    """

    def __init__(self) -> None:
        self.table = NodeTable()
        self.namespaces: dict[str, Namespace] = {}
        # Bound or assumed pods by key, with the node they count on.
        self.pods: dict[str, Pod] = {}
        self.pod_node: dict[str, str] = {}
        self.assumed: set[str] = set()
        # Called with (pod, node) when a pod is assumed and (pod, None) when it is
        # forgotten: the metrics hub counts placements not yet visible in metrics.
        self.placement_listeners: list[Callable[[Pod, str | None], None]] = []

    # -- nodes ---------------------------------------------------------------
    def add_node(self, node: Node) -> None:
        self.table.add_node(node)
        # Pods seen before their node (watch order) are accounted now.
        for key, node_name in self.pod_node.items():
            if node_name == node.name:
                self.table.add_pod(self.pods[key], node_name)

    def update_node(self, node: Node) -> None:
        if node.name in self.table.index:
            self.table.update_node(node)
        else:
            self.add_node(node)

    def remove_node(self, name: str) -> None:
        if name in self.table.index:
            self.table.remove_node(name)

    def node(self, name: str) -> Node | None:
        row = self.table.index.get(name)
        return None if row is None else self.table.nodes[row]

    # -- pods ----------------------------------------------------------------
    def add_pod(self, pod: Pod) -> None:
        """A pod bound to ``pod.node_name`` (from the cluster, or a confirmed binding)."""
        old_node = self.pod_node.get(pod.key)
        if old_node is not None and old_node != pod.node_name:
            self.table.remove_pod(self.pods[pod.key], old_node)
        self.pods[pod.key] = pod
        self.pod_node[pod.key] = pod.node_name
        self.assumed.discard(pod.key)
        self.table.add_pod(pod, pod.node_name)

    def remove_pod(self, pod: Pod) -> None:
        node_name = self.pod_node.pop(pod.key, None)
        old = self.pods.pop(pod.key, None)
        self.assumed.discard(pod.key)
        if node_name is not None and old is not None:
            self.table.remove_pod(old, node_name)

    def assume(self, pod: Pod, node_name: str) -> None:
        self.pods[pod.key] = pod
        self.pod_node[pod.key] = node_name
        self.assumed.add(pod.key)
        self.table.add_pod(pod, node_name)
        for listener in self.placement_listeners:
            listener(pod, node_name)

    def forget(self, pod: Pod) -> None:
        if pod.key in self.assumed:
            self.remove_pod(pod)
            for listener in self.placement_listeners:
                listener(pod, None)

    def is_assumed(self, key: str) -> bool:
        return key in self.assumed

    def add_namespace(self, namespace: Namespace) -> None:
        self.namespaces[namespace.name] = namespace

    def remove_namespace(self, name: str) -> None:
        self.namespaces.pop(name, None)

    def sizes(self) -> dict[str, int]:
        """For ``scheduler_cache_size{type}``."""
        return {"nodes": len(self.table), "pods": len(self.pods), "assumed_pods": len(self.assumed)}

    def load(self, nodes: Iterable[Node], pods: Iterable[Pod], namespaces: Iterable[Namespace]) -> None:
        for ns in namespaces:
            self.add_namespace(ns)
        for node in nodes:
            self.add_node(node)
        for pod in pods:
            if pod.node_name:
                self.add_pod(pod)
