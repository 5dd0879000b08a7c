"""InterPodAffinity's indexes: existing pods' terms grouped, and counts per topology value.

``ExistingTerms`` is a ``PodIndex`` extension (``pod_index.extension(NAME, ...)``):
it is told of every pod the cache counts or stops counting (add, update,
remove, assume, forget) and groups the existing pods' terms by kind (required
affinity, required anti-affinity, preferred affinity, preferred anti-affinity),
by ``AffinityTerm`` and by weight, each group holding how many such terms sit
on each node (``NodeCounts``). A cycle then visits the distinct groups (few:
the pods of one workload share their terms) and tests the incoming pod against
each group once, instead of visiting pods.

``TopologyCounts`` is a count (or score) per value of one topology key, kept as
an array over the codes of the cache table's ``LabelColumn`` for that key
(built with one ``np.bincount`` over the rows), plus a dict for values that
column does not know (added by ``add``, i.e. by preemption's what-ifs). It is
keyed by label *values*, so it answers for a batch over any table, the
cache's or a scratch one.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from scorer.framework.types import NodeBatch
from scorer.model import Pod
from scorer.plugins.interpodaffinity.terms import AffinityTerm, pod_terms
from scorer.state.labels import LabelColumn
from scorer.state.nodetable import NodeTable
from scorer.state.podindex import NodeCounts, PodIndex, has_pod_affinity_terms

# Kinds of existing pods' terms.
REQUIRED_AFFINITY = 0
REQUIRED_ANTI_AFFINITY = 1
PREFERRED_AFFINITY = 2
PREFERRED_ANTI_AFFINITY = 3

GroupKey = tuple[AffinityTerm, int]  # (term, weight); weight 0 for required terms


class ExistingTerms:
    """The existing pods' affinity terms, grouped (see the module docstring)."""

    def __init__(self, pod_index: PodIndex) -> None:
        self.table = pod_index.table
        # kind -> (term, weight) -> counts per node
        self.groups: tuple[dict[GroupKey, NodeCounts], ...] = ({}, {}, {}, {})

    def add(self, pod: Pod, node_name: str) -> None:
        self._change(pod, node_name, +1)

    def remove(self, pod: Pod, node_name: str) -> None:
        self._change(pod, node_name, -1)

    def _change(self, pod: Pod, node_name: str, delta: int) -> None:
        if not has_pod_affinity_terms(pod):
            return
        for kind, key in entries(pod):
            groups = self.groups[kind]
            counts = groups.get(key)
            if counts is None:
                counts = groups[key] = NodeCounts()
            counts.change(node_name, delta, self.table)
            if counts.total <= 0:
                del groups[key]

    def of_kind(self, kind: int) -> Iterator[tuple[AffinityTerm, int, NodeCounts]]:
        for (term, weight), counts in self.groups[kind].items():
            yield term, weight, counts


def entries(pod: Pod) -> Iterator[tuple[int, GroupKey]]:
    """(kind, (term, weight)) for each term of ``pod``; kinds with an invalid term are left out,
    as kube leaves them out of the existing pod's PodInfo."""
    terms, _ = pod_terms(pod)
    for term in terms.required_affinity:
        yield REQUIRED_AFFINITY, (term, 0)
    for term in terms.required_anti_affinity:
        yield REQUIRED_ANTI_AFFINITY, (term, 0)
    for weight, term in terms.preferred_affinity:
        yield PREFERRED_AFFINITY, (term, weight)
    for weight, term in terms.preferred_anti_affinity:
        yield PREFERRED_ANTI_AFFINITY, (term, weight)


class TopologyCounts:
    """A count per value of label ``key`` (see the module docstring)."""

    __slots__ = ("key", "column", "by_code", "extra")

    def __init__(self, key: str, column: LabelColumn | None = None, by_code: np.ndarray | None = None) -> None:
        self.key = key
        self.column = column
        self.by_code = by_code if by_code is not None else np.zeros(0, dtype=np.int64)
        self.extra: dict[str, int] = {}

    @classmethod
    def from_rows(cls, key: str, table: NodeTable, per_row: np.ndarray) -> TopologyCounts:
        """Sum ``per_row`` (aligned with ``table``'s rows) per value of ``key``; nodes without
        the key count nowhere."""
        column = table.label_column(key)
        codes = column.codes
        if len(codes) == 0:
            return cls(key, column, np.zeros(len(column.code_of), dtype=np.int64))
        by_code = np.bincount(codes, weights=per_row, minlength=len(column.code_of))
        by_code = np.rint(by_code).astype(np.int64)
        missing = column.code_of.get(None)
        if missing is not None:
            by_code[missing] = 0
        return cls(key, column, by_code)

    def clone(self) -> TopologyCounts:
        other = TopologyCounts(self.key, self.column, self.by_code.copy())
        other.extra = dict(self.extra)
        return other

    def count(self, value: str) -> int:
        column = self.column
        code = column.code_of.get(value) if column is not None else None
        if code is not None:
            return int(self.by_code[code])
        return self.extra.get(value, 0)

    def add(self, value: str, delta: int) -> None:
        column = self.column
        code = column.code_of.get(value) if column is not None else None
        if code is not None:
            self.by_code[code] += delta
        else:
            self.extra[value] = self.extra.get(value, 0) + delta

    def any(self) -> bool:
        """Some value has a non-zero count (kube's map is not empty)."""
        return bool(self.by_code.any()) or any(self.extra.values())

    def for_batch(self, nodes: NodeBatch) -> np.ndarray:
        """int64 count of each node's value (0 where the node lacks the key)."""
        column = nodes.label_column(self.key)
        if column is self.column and not self.extra:
            counts: np.ndarray = self.by_code[column.codes[nodes.rows]]
            return counts
        lut = np.fromiter(
            (0 if value is None else self.count(value) for value in column.code_of),
            dtype=np.int64, count=len(column.code_of),
        )
        looked_up: np.ndarray = lut[column.codes[nodes.rows]]
        return looked_up


class RowSums:
    """Per topology key, a sum of per-row arrays (weighted), turned into ``TopologyCounts``.
    The first array added for a key is shared until a second one comes."""

    __slots__ = ("table", "sums", "_owned")

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self.sums: dict[str, np.ndarray] = {}
        self._owned: set[str] = set()

    def add(self, key: str, per_row: np.ndarray, weight: int = 1) -> None:
        current = self.sums.get(key)
        if current is None:
            if weight == 1:
                self.sums[key] = per_row
            else:
                self.sums[key] = per_row * weight
                self._owned.add(key)
            return
        if key not in self._owned:
            current = self.sums[key] = current.astype(np.int64, copy=True)
            self._owned.add(key)
        current += per_row * weight if weight != 1 else per_row

    def counts(self) -> dict[str, TopologyCounts]:
        return {key: TopologyCounts.from_rows(key, self.table, rows) for key, rows in self.sums.items()}
