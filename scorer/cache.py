"""ClusterCache and its columnar NodeTable.

The NodeTable keeps what scheduling reads about nodes in numpy arrays aligned
by row: allocatable and requested per resource, non-zero requests, pod
counts, unschedulable flags and interned taint sets. Every event (node
add/update/delete, pod add/delete, assume/forget) updates one row in
O(resources); scheduling cycles read whole columns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from scorer.framework.labels import LabelColumn
from scorer.framework.types import NodeInfo
from scorer.model import Namespace, Node, Pod, Taint

BASE_RESOURCES: tuple[str, ...] = ("cpu", "memory", "ephemeral-storage", "pods")
PODS = 3  # column of the pod count in ``requested`` / allowed pods in ``allocatable``


class NodeTable:
    """Columnar node state. Row order is the order nodes are scanned in."""

    def __init__(self, capacity: int = 64) -> None:
        self.resource_names: list[str] = list(BASE_RESOURCES)
        self.resource_index: dict[str, int] = {r: i for i, r in enumerate(BASE_RESOURCES)}
        self._capacity = max(capacity, 1)
        width = len(self.resource_names)
        self.allocatable = np.zeros((self._capacity, width), dtype=np.int64)
        self.requested = np.zeros((self._capacity, width), dtype=np.int64)
        self.non_zero_requested = np.zeros((self._capacity, 2), dtype=np.int64)
        self.unschedulable = np.zeros(self._capacity, dtype=bool)
        self.taint_set = np.zeros(self._capacity, dtype=np.int32)
        self.taint_sets: list[tuple[Taint, ...]] = [()]
        self._taint_set_ids: dict[tuple[Taint, ...], int] = {(): 0}
        self.names: list[str] = []
        self.nodes: list[Node] = []
        self.pods: list[dict[str, Pod]] = []
        self.index: dict[str, int] = {}
        # Bumped on every change; lets plugins cache derived data per version.
        self.version = 0
        # Bumped when rows are added or removed (row -> node changes); caches of
        # per-row data that does not depend on pods key on it.
        self.layout_version = 0
        # Label columns by key, dropped whenever a node is added, updated or removed.
        self._label_columns: dict[str, LabelColumn] = {}

    def __len__(self) -> int:
        return len(self.names)

    # -- columns -------------------------------------------------------------
    def resource_column(self, resource: str) -> int:
        """Column of ``resource``, adding one (zeros) if the table lacks it."""
        col = self.resource_index.get(resource)
        if col is not None:
            return col
        col = len(self.resource_names)
        self.resource_names.append(resource)
        self.resource_index[resource] = col
        pad = np.zeros((self._capacity, 1), dtype=np.int64)
        self.allocatable = np.hstack([self.allocatable, pad])
        self.requested = np.hstack([self.requested, pad])
        return col

    def _grow(self) -> None:
        new = self._capacity * 2

        def grow(a: np.ndarray) -> np.ndarray:
            out = np.zeros((new, *a.shape[1:]), dtype=a.dtype)
            out[: self._capacity] = a
            return out

        self.allocatable = grow(self.allocatable)
        self.requested = grow(self.requested)
        self.non_zero_requested = grow(self.non_zero_requested)
        self.unschedulable = grow(self.unschedulable)
        self.taint_set = grow(self.taint_set)
        self._capacity = new

    def _intern_taints(self, taints: tuple[Taint, ...]) -> int:
        tid = self._taint_set_ids.get(taints)
        if tid is None:
            tid = len(self.taint_sets)
            self.taint_sets.append(taints)
            self._taint_set_ids[taints] = tid
        return tid

    def _write_node(self, row: int, node: Node) -> None:
        self.allocatable[row, :] = 0
        for resource, value in node.allocatable.items():
            col = self.resource_column(resource)
            self.allocatable[row, col] = value
        self.unschedulable[row] = node.unschedulable
        self.taint_set[row] = self._intern_taints(tuple(node.taints))
        self.nodes[row] = node
        self._label_columns.clear()

    def label_column(self, key: str) -> LabelColumn:
        """The values of label ``key`` over the rows, as codes (built once per node change)."""
        column = self._label_columns.get(key)
        if column is None:
            column = self._label_columns[key] = LabelColumn(key, self.nodes)
        return column

    # -- nodes ---------------------------------------------------------------
    def add_node(self, node: Node) -> int:
        if node.name in self.index:
            self.update_node(node)
            return self.index[node.name]
        row = len(self.names)
        if row >= self._capacity:
            self._grow()
        self.names.append(node.name)
        self.nodes.append(node)
        self.pods.append({})
        self.index[node.name] = row
        self.requested[row, :] = 0
        self.non_zero_requested[row, :] = 0
        self._write_node(row, node)
        self.version += 1
        self.layout_version += 1
        return row

    def update_node(self, node: Node) -> None:
        row = self.index[node.name]
        self._write_node(row, node)
        self.version += 1

    def remove_node(self, name: str) -> list[Pod]:
        """Drop a node; returns the pods that were on it. The last row moves into its place."""
        row = self.index.pop(name)
        pods = list(self.pods[row].values())
        last = len(self.names) - 1
        if row != last:
            for array in (self.allocatable, self.requested, self.non_zero_requested):
                array[row] = array[last]
            self.unschedulable[row] = self.unschedulable[last]
            self.taint_set[row] = self.taint_set[last]
            self.names[row] = self.names[last]
            self.nodes[row] = self.nodes[last]
            self.pods[row] = self.pods[last]
            self.index[self.names[row]] = row
        self.names.pop()
        self.nodes.pop()
        self.pods.pop()
        self._label_columns.clear()
        self.version += 1
        self.layout_version += 1
        return pods

    # -- pods ----------------------------------------------------------------
    def _account(self, pod: Pod, row: int, sign: int) -> None:
        for resource, value in pod.requests.items():
            col = self.resource_column(resource)
            self.requested[row, col] += sign * value
        self.requested[row, PODS] += sign
        self.non_zero_requested[row, 0] += sign * pod.non_zero_cpu
        self.non_zero_requested[row, 1] += sign * pod.non_zero_memory
        self.version += 1

    def add_pod(self, pod: Pod, node_name: str) -> bool:
        """Account ``pod`` on ``node_name``; False if that node is not in the table."""
        row = self.index.get(node_name)
        if row is None:
            return False
        previous = self.pods[row].get(pod.key)
        if previous is not None:
            self._account(previous, row, -1)
        self.pods[row][pod.key] = pod
        self._account(pod, row, +1)
        return True

    def remove_pod(self, pod: Pod, node_name: str) -> bool:
        row = self.index.get(node_name)
        if row is None:
            return False
        previous = self.pods[row].pop(pod.key, None)
        if previous is None:
            return False
        self._account(previous, row, -1)
        return True

    def node_info(self, row: int) -> NodeInfo:
        names = self.resource_names
        alloc = self.allocatable[row].tolist()
        req = self.requested[row].tolist()
        return NodeInfo(
            node=self.nodes[row],
            pods=tuple(self.pods[row].values()),
            allocatable={names[i]: v for i, v in enumerate(alloc) if v or i < len(BASE_RESOURCES)},
            requested={names[i]: v for i, v in enumerate(req) if v or i < len(BASE_RESOURCES)},
            non_zero_cpu=int(self.non_zero_requested[row, 0]),
            non_zero_memory=int(self.non_zero_requested[row, 1]),
        )

    def rows(self) -> np.ndarray:
        return np.arange(len(self.names), dtype=np.int64)


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
