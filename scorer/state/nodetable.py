"""The columnar NodeTable: what scheduling reads about nodes, one numpy row per node.

The NodeTable keeps what scheduling reads about nodes in numpy arrays aligned
by row: allocatable and requested per resource, non-zero requests, pod
counts, unschedulable flags and interned taint sets. Every event (node
add/update/delete, pod add/delete, assume/forget) updates one row in
O(resources); scheduling cycles read whole columns.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from scorer.model import Node, Pod, Taint
from scorer.state.labels import LabelColumn
from scorer.state.nodeinfo import NodeInfo

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
        # Bumped when a node is written (added, updated) or removed: caches of per-row
        # data derived from the nodes themselves (allocatable, labels), not their pods.
        self.nodes_version = 0
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
        self.allocatable[row] = 0
        for resource, value in node.allocatable.items():
            col = self.resource_column(resource)
            self.allocatable[row, col] = value
        self.unschedulable[row] = node.unschedulable
        self.taint_set[row] = self._intern_taints(tuple(node.taints))
        self.nodes[row] = node
        self._label_columns.clear()
        self.nodes_version += 1

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
        self.index[node.name] = row  # its requests are zero already: rows past the end are kept zero
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
        self.requested[last] = 0  # rows past the end stay zero, as add_node takes them
        self.non_zero_requested[last] = 0
        self.names.pop()
        self.nodes.pop()
        self.pods.pop()
        self._label_columns.clear()
        self.version += 1
        self.layout_version += 1
        self.nodes_version += 1
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

    # -- pods in bulk (what-if copies: the nominated-pods pass, preemption's dry run) --
    def pod_requests(self, pods: Sequence[Pod]) -> np.ndarray:
        """What accounting each pod changes, one int64 row per pod: its non-zero cpu and
        memory, then one column per resource of ``resource_names`` (the pod count column
        is 1). Adds the columns of resources the table lacks."""
        resources = dict.fromkeys(itertools.chain.from_iterable(pod.requests for pod in pods))  # encounter order
        for resource in resources:
            self.resource_column(resource)  # a new column for a resource the table lacks
        out = np.zeros((len(pods), len(self.resource_names) + 2), dtype=np.int64)
        if not len(pods):
            return out
        # Column by column: a few list comprehensions instead of a loop per pod and resource.
        out[:, 0] = [pod.non_zero_cpu for pod in pods]
        out[:, 1] = [pod.non_zero_memory for pod in pods]
        out[:, PODS + 2] = 1
        for resource in resources:
            out[:, self.resource_index[resource] + 2] += [pod.requests.get(resource, 0) for pod in pods]
        return out

    def add_pods_at(self, rows: Sequence[int], pods: Sequence[Pod], requests: np.ndarray | None = None) -> None:
        """``add_pod`` of ``pods[i]`` on row ``rows[i]`` for every i, in bulk: one numpy
        operation for all the requests. ``requests`` is ``pod_requests(pods)`` when the
        caller has it already. A pod already on its row (same key) is replaced."""
        if not len(pods):
            return
        matrix = self._requests_of(pods, requests)
        replaced: list[tuple[int, Pod]] = []
        for row, pod in zip(rows, pods, strict=True):
            on_row = self.pods[row]
            key = pod.key
            previous = on_row.get(key)
            if previous is not None:
                replaced.append((row, previous))
            on_row[key] = pod
        self._shift(rows, matrix, +1)
        if replaced:
            self._shift([row for row, _ in replaced], self.pod_requests([p for _, p in replaced]), -1)

    def remove_pods_at(self, rows: Sequence[int], pods: Sequence[Pod], requests: np.ndarray | None = None) -> None:
        """``remove_pod`` of ``pods[i]`` from row ``rows[i]`` for every i, in bulk (see
        ``add_pods_at``); a pod not on its row is skipped."""
        if not len(pods):
            return
        matrix = self._requests_of(pods, requests)
        on_rows = self.pods
        skipped: list[int] = []  # not on its row, or another pod of the same key was there
        other: list[tuple[int, Pod]] = []
        i = 0
        for row, pod in zip(rows, pods, strict=True):
            previous = on_rows[row].pop(pod.key, None)
            if previous is not pod:
                skipped.append(i)
                if previous is not None:
                    other.append((row, previous))
            i += 1
        if not skipped:
            self._shift(rows, matrix, -1)
        elif len(skipped) < len(pods):
            keep = np.ones(len(pods), dtype=bool)
            keep[skipped] = False
            self._shift(np.asarray(rows, dtype=np.int64)[keep], matrix[keep], -1)
        if other:
            self._shift([row for row, _ in other], self.pod_requests([p for _, p in other]), -1)

    def _requests_of(self, pods: Sequence[Pod], requests: np.ndarray | None) -> np.ndarray:
        if requests is None or requests.shape[1] != len(self.resource_names) + 2:
            return self.pod_requests(pods)
        return requests

    def _shift(self, rows: Sequence[int] | np.ndarray, matrix: np.ndarray, sign: int) -> None:
        at = np.asarray(rows, dtype=np.int64)
        delta = matrix if sign > 0 else -matrix
        np.add.at(self.non_zero_requested, at, delta[:, :2])
        np.add.at(self.requested, at, delta[:, 2:])
        self.version += 1

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

    def copy_rows(self, rows: np.ndarray, *, layout_version: int) -> NodeTable:
        """A new table holding ``rows`` of this one, in that order: their nodes, pods (the
        dicts copied) and columns, with the same resource columns and taint sets. Changing it
        leaves this table alone; ``layout_version`` tells its rows from this table's."""
        n = len(rows)
        out = NodeTable(capacity=max(n, 1))
        out.resource_names = list(self.resource_names)
        out.resource_index = dict(self.resource_index)
        size = max(n, 1)
        for name in ("allocatable", "requested", "non_zero_requested", "unschedulable", "taint_set"):
            column = getattr(self, name)
            copied = np.zeros((size, *column.shape[1:]), dtype=column.dtype)
            copied[:n] = column[rows]
            setattr(out, name, copied)
        out.taint_sets = list(self.taint_sets)
        out._taint_set_ids = dict(self._taint_set_ids)
        picked = rows.tolist()
        out.names = [self.names[r] for r in picked]
        out.nodes = [self.nodes[r] for r in picked]
        out.pods = [dict(self.pods[r]) for r in picked]
        out.index = {name: i for i, name in enumerate(out.names)}
        out.layout_version = layout_version
        return out

    def rows(self) -> np.ndarray:
        return np.arange(len(self.names), dtype=np.int64)
