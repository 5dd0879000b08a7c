"""ClusterCache: what the scheduler knows of the cluster, over the columnar NodeTable.

Every event (node add/update/delete, pod add/delete, assume/forget) updates
one row of ``scorer.state.NodeTable`` in O(resources); scheduling cycles read
whole columns. Pods are indexed by node: the table keeps the pods of each of
its rows, and pods whose node is not (or no longer) in the table wait under
that node's name, so adding a node touches only its own pods.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from scorer.errors import ScorerError
from scorer.model import Namespace, Node, Pod, PodDisruptionBudget, SelectorOwner
from scorer.model.storage import StorageObject
from scorer.state.nodetable import BASE_RESOURCES, PODS, NodeTable
from scorer.state.podindex import PodIndex
from scorer.state.volumes import VolumeObjects
from scorer.state.workloads import Workloads

__all__ = ["BASE_RESOURCES", "PODS", "CacheError", "ClusterCache", "NodeTable"]

_INT64_MAX = int(np.iinfo(np.int64).max)
# Below _MANY pods of requests below _SMALL each, a node's totals stay under 2**62: no check needed.
_SMALL = 1 << 48
_MANY = 1 << 14


class CacheError(ScorerError):
    """A pod the cache refuses to count: a node total would overflow int64."""


class ClusterCache:
    """What the scheduler knows of the cluster: nodes, bound and assumed pods, namespaces.

    A pod is *assumed* on a node as soon as a cycle picks it, before binding
    completes, so the next cycle already counts its resources. ``forget``
    undoes that when binding fails; ``add_pod`` (or ``add_bound_pod``) of the
    bound pod (from the cluster source) confirms it. Pods in a terminal phase
    (Succeeded, Failed) hold no resources and are never counted.

    ``placement_listeners`` hear of placements, for the metric sources'
    in-flight load: ``(pod, node)`` when a pod is assumed, or when a pod seen
    pending is bound by another scheduler (``add_bound_pod``; a binding that
    confirms the pod assumed on that node is not a new placement), and
    ``(pod, None)`` when a counted pod stops counting (forgotten, deleted,
    terminal). Pods that arrive bound (``add_pod``: the initial list, a
    re-list) are not placements: their load is in the metrics already.

    A pod preemption chose as a victim is *assumed deleted* (``assume_deleted``)
    as soon as its deletion is enqueued, before the cluster shows it
    terminating: ``is_deleting`` says so from then on, so that the preemptor's
    next attempt waits for it instead of preempting again. The pod still counts
    on its node, as it does until it is gone. The cluster's own state
    supersedes the mark (an update with a deletionTimestamp, or the pod
    removed); ``forget_deletion`` undoes it when the deletion is given up.
    """

    def __init__(self) -> None:
        self.table = NodeTable()
        self.namespaces: dict[str, Namespace] = {}
        # Bound or assumed pods by key, with the node they count on.
        self.pods: dict[str, Pod] = {}
        self.pod_node: dict[str, str] = {}
        # The same pods, indexed for pod-aware plugins (told of every change of ``pods``).
        self.pod_index = PodIndex(self.table, self.pod_node)
        # Owners (default spreading) and PodDisruptionBudgets (preemption).
        self.workloads = Workloads()
        # PVs, PVCs, StorageClasses, CSINodes, CSIDrivers, CSIStorageCapacities (volume plugins),
        # with VolumeBinding's assumed PVs and PVCs.
        self.volumes = VolumeObjects()
        self.assumed: set[str] = set()
        # Keys of the victims whose deletion is enqueued and not yet seen (see the class docstring).
        self.assumed_deletions: set[str] = set()
        # Pods whose node is not in the table (seen before it, or it was deleted), by node name.
        self._waiting: dict[str, dict[str, Pod]] = {}
        # Nodes that counted a request of _SMALL or more: their totals are checked in full.
        self._large: set[str] = set()
        # Called with (pod, node) when a pod is placed and (pod, None) when it stops counting
        # (see the class docstring): the metrics hub counts placements not yet visible in metrics.
        self.placement_listeners: list[Callable[[Pod, str | None], None]] = []

    # -- nodes ---------------------------------------------------------------
    def add_node(self, node: Node) -> None:
        """Add (or update) a node; the pods seen before it are counted now.

        Raises CacheError naming the pods that would overflow the node's totals:
        the node is added, those pods are not counted.
        """
        if node.name in self.table.index:
            self.table.update_node(node)
            return
        row = self.table.add_node(node)
        waiting = self._waiting.pop(node.name, None)
        if not waiting:
            return
        refused = []
        for pod in waiting.values():
            try:
                self._check_room(pod, row)
            except CacheError as exc:
                refused.append(str(exc))
                self.pod_index.remove(pod, node.name)
                self.pods.pop(pod.key, None)
                self.pod_node.pop(pod.key, None)
                self.assumed.discard(pod.key)
                continue
            self.table.add_pod(pod, node.name)
        if refused:
            raise CacheError("; ".join(refused))

    def update_node(self, node: Node) -> None:
        if node.name in self.table.index:
            self.table.update_node(node)
        else:
            self.add_node(node)

    def remove_node(self, name: str) -> None:
        """Drop a node. Its pods stay known and count again if the node comes back."""
        if name in self.table.index:
            pods = self.table.remove_node(name)
            if pods:
                self._waiting[name] = {pod.key: pod for pod in pods}

    def node(self, name: str) -> Node | None:
        row = self.table.index.get(name)
        return None if row is None else self.table.nodes[row]

    def pods_on(self, node_name: str) -> tuple[Pod, ...]:
        """The bound and assumed pods on ``node_name`` (also while the node is unknown)."""
        row = self.table.index.get(node_name)
        pods = self.table.pods[row] if row is not None else self._waiting.get(node_name, {})
        return tuple(pods.values())

    # -- pods ----------------------------------------------------------------
    def add_pod(self, pod: Pod) -> None:
        """A pod bound to ``pod.node_name`` (from the cluster, or a confirmed binding).

        A pod in a terminal phase is removed instead. Raises CacheError, and
        changes nothing, if counting the pod would overflow its node's totals.
        """
        if pod.is_terminal:
            self.remove_pod(pod)
            return
        key, node_name = pod.key, pod.node_name
        if pod.deleting:
            self.assumed_deletions.discard(key)  # the cluster shows it terminating now
        table = self.table
        row = table.index.get(node_name)
        if row is not None:
            previous = table.pods[row].get(key)
            if previous is not None and _same_requests(previous, pod):
                # Counted already (the bound pod confirms the one a cycle assumed): only the object changes.
                table.pods[row][key] = pod
                table.version += 1
                self.pod_index.remove(previous, node_name)
                self.pods[key] = pod
                self.pod_index.add(pod, node_name)
                self.assumed.discard(key)
                return
            self._check_room(pod, row)
        old_node = self.pod_node.get(key)
        if old_node is not None:
            self.pod_index.remove(self.pods[key], old_node)
            if old_node != node_name:
                self._uncount(self.pods[key], old_node)
        self.pods[key] = pod
        self.pod_node[key] = node_name
        self.pod_index.add(pod, node_name)
        self.assumed.discard(key)
        if row is not None:
            table.add_pod(pod, node_name)
        else:
            self._waiting.setdefault(node_name, {})[key] = pod

    def add_bound_pod(self, pod: Pod) -> None:
        """A pod seen pending is now bound to ``pod.node_name``, by this scheduler or another.

        Counted as ``add_pod`` counts it; the placement listeners hear of it,
        unless it confirms the pod this scheduler assumed on that node (they
        heard of that one when it was assumed).
        """
        key = pod.key
        confirms = key in self.assumed and self.pod_node.get(key) == pod.node_name
        self.add_pod(pod)
        if not confirms and not pod.is_terminal:
            for listener in self.placement_listeners:
                listener(pod, pod.node_name)

    def remove_pod(self, pod: Pod) -> None:
        old = self.pods.get(pod.key)
        node_name = self.pod_node.get(pod.key)
        if node_name is not None and old is not None:
            self.pod_index.remove(old, node_name)
        self.pod_node.pop(pod.key, None)
        self.pods.pop(pod.key, None)
        self.assumed.discard(pod.key)
        self.assumed_deletions.discard(pod.key)
        if node_name is not None and old is not None:
            self._uncount(old, node_name)
            for listener in self.placement_listeners:
                listener(old, None)

    def assume(self, pod: Pod, node_name: str) -> None:
        """Count ``pod`` on ``node_name`` (a node of the table) before it is bound.

        Raises CacheError, and changes nothing, if that would overflow the node's totals.
        """
        self._check_room(pod, self.table.index[node_name])
        old_node = self.pod_node.get(pod.key)
        if old_node is not None:
            self.pod_index.remove(self.pods[pod.key], old_node)
            if old_node != node_name:
                self._uncount(self.pods[pod.key], old_node)
        self.pods[pod.key] = pod
        self.pod_node[pod.key] = node_name
        self.pod_index.add(pod, node_name)
        self.assumed.add(pod.key)
        self.table.add_pod(pod, node_name)
        for listener in self.placement_listeners:
            listener(pod, node_name)

    def forget(self, pod: Pod) -> None:
        if pod.key in self.assumed:
            self.remove_pod(pod)

    def is_assumed(self, key: str) -> bool:
        return key in self.assumed

    def assume_deleted(self, pod: Pod) -> None:
        """Preemption enqueued the deletion of ``pod``, a counted pod: it is terminating as far as
        ``is_deleting`` tells, until the cluster shows its real state or ``forget_deletion``."""
        if pod.key in self.pod_node:
            self.assumed_deletions.add(pod.key)

    def forget_deletion(self, pod: Pod) -> None:
        """The deletion of ``pod`` was given up: it is no longer assumed terminating."""
        self.assumed_deletions.discard(pod.key)

    def is_deleting(self, pod: Pod) -> bool:
        """``pod`` is terminating: it has a deletionTimestamp, or its deletion is assumed."""
        return pod.deleting or pod.key in self.assumed_deletions

    def add_namespace(self, namespace: Namespace) -> None:
        self.namespaces[namespace.name] = namespace

    def remove_namespace(self, name: str) -> None:
        self.namespaces.pop(name, None)

    def add_workload(self, obj: SelectorOwner | PodDisruptionBudget) -> None:
        """Add or replace a Service, ReplicationController, ReplicaSet, StatefulSet or PodDisruptionBudget."""
        self.workloads.add(obj)

    def remove_workload(self, obj: SelectorOwner | PodDisruptionBudget) -> None:
        self.workloads.remove(obj)

    def add_storage(self, obj: StorageObject) -> None:
        """Add or replace a PV, PVC, StorageClass, CSINode, CSIDriver or CSIStorageCapacity."""
        self.volumes.add(obj)

    def remove_storage(self, obj: StorageObject) -> None:
        self.volumes.remove(obj)

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

    # -- internals -------------------------------------------------------------
    def _uncount(self, pod: Pod, node_name: str) -> None:
        if node_name in self.table.index:
            self.table.remove_pod(pod, node_name)
            return
        waiting = self._waiting.get(node_name)
        if waiting is not None:
            waiting.pop(pod.key, None)
            if not waiting:
                del self._waiting[node_name]

    def _check_room(self, pod: Pod, row: int) -> None:
        """Raise CacheError if counting ``pod`` on ``row`` would take a column past int64."""
        table = self.table
        node_name = table.names[row]
        small = (max(pod.requests.values(), default=0) < _SMALL and pod.non_zero_cpu < _SMALL
                 and pod.non_zero_memory < _SMALL)
        if small and node_name not in self._large and len(table.pods[row]) < _MANY:
            return
        if not small:
            self._large.add(node_name)  # conservative: marked even if the pod is refused
        previous = table.pods[row].get(pod.key)  # a pod counted again replaces itself
        before = previous.requests if previous is not None else {}
        requested = table.requested[row].tolist()
        for resource, value in pod.requests.items():
            col = table.resource_index.get(resource)
            current = requested[col] - before.get(resource, 0) if col is not None else 0
            if current + value > _INT64_MAX:
                raise self._overflow(pod, row, resource, value)
        cpu, memory = table.non_zero_requested[row].tolist()
        if previous is not None:
            cpu, memory = cpu - previous.non_zero_cpu, memory - previous.non_zero_memory
        if cpu + pod.non_zero_cpu > _INT64_MAX:
            raise self._overflow(pod, row, "cpu", pod.non_zero_cpu)
        if memory + pod.non_zero_memory > _INT64_MAX:
            raise self._overflow(pod, row, "memory", pod.non_zero_memory)

    def _overflow(self, pod: Pod, row: int, resource: str, value: int) -> CacheError:
        return CacheError(f"pod {pod.key}: its {resource} request ({value}) would take node "
                          f"{self.table.names[row]}'s requested {resource} past the int64 maximum; "
                          "the pod is not counted")


def _same_requests(a: Pod, b: Pod) -> bool:
    return (a.requests == b.requests and a.non_zero_cpu == b.non_zero_cpu
            and a.non_zero_memory == b.non_zero_memory)
