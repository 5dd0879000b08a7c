"""PodIndex: the counted pods (bound and assumed) indexed for pod-aware plugins.

InterPodAffinity and PodTopologySpread ask questions about existing pods
("how many pods of namespace N match selector S, per node?", "which pods carry
affinity terms?"). Walking every pod in each cycle would make a cycle
O(pods); instead the ClusterCache tells this index of every pod it starts or
stops counting (add, update, remove, assume, forget), and the index keeps:

* ``by_namespace``: the counted pods of each namespace, by key;
* ``SelectorCounts``: for a (namespace, selector) pair a plugin asked about,
  the number of matching pods per node, kept up to date from then on in
  O(1) per pod event, and readable as an int64 array aligned with the
  NodeTable's rows (``per_row``), rebuilt only when rows are added or removed;
* extensions: indexes of a plugin's own (``extension(name, factory)``), fed the
  same pod events, created once per cache and filled with the pods counted so far.

A pod is counted on the node the cache counts it on, also while that node is
not in the NodeTable (it was deleted, or not seen yet): such pods do not
appear in ``per_row``, as kube's snapshot does not list them.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol, TypeVar

import numpy as np

from scorer.model import LabelSelector, Pod
from scorer.state.nodetable import NodeTable

# How many SelectorCounts an index keeps; the least recently asked for are dropped beyond that.
MAX_SELECTOR_COUNTS = 512


class PodListener(Protocol):
    """What an extension index implements: told of each pod counted and uncounted."""

    def add(self, pod: Pod, node_name: str) -> None: ...

    def remove(self, pod: Pod, node_name: str) -> None: ...


L = TypeVar("L", bound=PodListener)


def has_pod_affinity_terms(pod: Pod) -> bool:
    """The pod has pod affinity or anti-affinity terms, required or preferred."""
    affinity = pod.affinity
    if affinity is None:
        return False
    pa, paa = affinity.pod_affinity, affinity.pod_anti_affinity
    return bool((pa is not None and (pa.required or pa.preferred))
                or (paa is not None and (paa.required or paa.preferred)))


class NodeCounts:
    """A count per node name, readable as an int64 array aligned with a NodeTable's rows
    (``per_row``), rebuilt only when rows are added or removed. ``version`` is bumped on
    every change."""

    __slots__ = ("by_node", "total", "version", "_rows", "_layout")

    def __init__(self) -> None:
        self.by_node: dict[str, int] = {}
        self.total = 0
        self.version = 0
        self._rows: np.ndarray | None = None
        self._layout = -1

    def change(self, node_name: str, delta: int, table: NodeTable) -> None:
        count = self.by_node.get(node_name, 0) + delta
        if count:
            self.by_node[node_name] = count
        else:
            self.by_node.pop(node_name, None)
        self.total += delta
        self.version += 1
        rows = self._rows
        if rows is not None and self._layout == table.layout_version:
            row = table.index.get(node_name)
            if row is not None:
                rows[row] += delta

    def per_row(self, table: NodeTable) -> np.ndarray:
        """int64 count per row of ``table`` (nodes not in the table are left out).
        Shared and kept up to date: read it, do not modify it."""
        rows = self._rows
        if rows is None or self._layout != table.layout_version or len(rows) != len(table):
            rows = np.zeros(len(table), dtype=np.int64)
            index = table.index
            for node_name, count in self.by_node.items():
                row = index.get(node_name)
                if row is not None:
                    rows[row] = count
            self._rows = rows
            self._layout = table.layout_version
        return rows


class SelectorCounts(NodeCounts):
    """Pods of ``namespace`` matching ``selector``, counted per node name.

    ``include_deleting`` false leaves out pods being deleted (PodTopologySpread
    does not count terminating pods; InterPodAffinity does).
    """

    __slots__ = ("namespace", "selector", "include_deleting")

    def __init__(self, namespace: str, selector: LabelSelector, include_deleting: bool) -> None:
        super().__init__()
        self.namespace = namespace
        self.selector = selector
        self.include_deleting = include_deleting

    def counts(self, pod: Pod) -> bool:
        return (pod.namespace == self.namespace and (self.include_deleting or not pod.deleting)
                and self.selector.matches(pod.labels))


class PodIndex:
    """The ClusterCache's index of counted pods (see the module docstring)."""

    def __init__(self, table: NodeTable, pod_node: Mapping[str, str]) -> None:
        self.table = table
        self._pod_node = pod_node  # the cache's pod key -> node name
        self.by_namespace: dict[str, dict[str, Pod]] = {}
        self._counts: OrderedDict[tuple[object, ...], SelectorCounts] = OrderedDict()
        self._counts_by_namespace: dict[str, dict[tuple[object, ...], SelectorCounts]] = {}
        self._extensions: dict[str, PodListener] = {}

    def __len__(self) -> int:
        return sum(len(pods) for pods in self.by_namespace.values())

    # -- fed by the cache ------------------------------------------------------------
    def add(self, pod: Pod, node_name: str) -> None:
        self.by_namespace.setdefault(pod.namespace, {})[pod.key] = pod
        for counts in self._counts_by_namespace.get(pod.namespace, {}).values():
            if counts.counts(pod):
                counts.change(node_name, +1, self.table)
        for extension in self._extensions.values():
            extension.add(pod, node_name)

    def remove(self, pod: Pod, node_name: str) -> None:
        pods = self.by_namespace.get(pod.namespace)
        if pods is None or pods.pop(pod.key, None) is None:
            return
        if not pods:
            del self.by_namespace[pod.namespace]
        for counts in self._counts_by_namespace.get(pod.namespace, {}).values():
            if counts.counts(pod):
                counts.change(node_name, -1, self.table)
        for extension in self._extensions.values():
            extension.remove(pod, node_name)

    # -- read by plugins ----------------------------------------------------------------
    def pods(self) -> Iterator[tuple[Pod, str]]:
        """Every counted pod with the node it counts on."""
        pod_node = self._pod_node
        for pods in self.by_namespace.values():
            for key, pod in pods.items():
                yield pod, pod_node[key]


    def selector_counts(self, namespace: str, selector: LabelSelector, *,
                        include_deleting: bool = True) -> SelectorCounts:
        """The per-node counts of the pods of ``namespace`` that ``selector`` matches.

        Created on first use (one pass over that namespace's pods), then kept
        up to date by every pod event; the least recently used beyond
        ``MAX_SELECTOR_COUNTS`` are dropped.
        """
        key = (namespace, include_deleting, selector.canonical)
        counts = self._counts.get(key)
        if counts is not None:
            self._counts.move_to_end(key)
            return counts
        counts = SelectorCounts(namespace, selector, include_deleting)
        pod_node = self._pod_node
        for pod_key, pod in self.by_namespace.get(namespace, {}).items():
            if counts.counts(pod):
                counts.change(pod_node[pod_key], +1, self.table)
        self._counts[key] = counts
        self._counts_by_namespace.setdefault(namespace, {})[key] = counts
        while len(self._counts) > MAX_SELECTOR_COUNTS:
            old_key, old = self._counts.popitem(last=False)
            in_namespace = self._counts_by_namespace[old.namespace]
            del in_namespace[old_key]
            if not in_namespace:
                del self._counts_by_namespace[old.namespace]
        return counts

    def extension(self, name: str, factory: Callable[[PodIndex], L]) -> L:
        """The extension index registered under ``name``, created by ``factory(self)`` and
        told of every pod counted so far when first asked for; shared by all profiles."""
        existing = self._extensions.get(name)
        if existing is not None:
            return existing  # type: ignore[return-value]
        extension = factory(self)
        for pod, node_name in self.pods():
            extension.add(pod, node_name)
        self._extensions[name] = extension
        return extension
