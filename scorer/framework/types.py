"""Data handed to plugins: node batches (vectorized), node infos (per node), verdicts."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import attrs
import numpy as np

from scorer.framework.status import Code, Status
from scorer.model import Node, Pod, Taint
from scorer.state.labels import LabelColumn
from scorer.state.nodeinfo import NodeInfo
from scorer.state.nodetable import NodeTable

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0
_RESOURCE_MATRICES = ("allocatable", "requested", "non_zero_requested")
_NON_ZERO_COLUMNS = {"cpu": 0, "memory": 1}


class NodeBatch:
    """The candidate nodes of one plugin call, as rows of the columnar NodeTable.

    Vectorized plugins read whole columns (``allocatable("cpu")``) and return
    one value per node, in ``rows`` order. ``rows`` must not be modified.
    """

    __slots__ = ("table", "rows", "_version", "_matrices")

    def __init__(self, table: NodeTable, rows: np.ndarray) -> None:
        self.table = table
        self.rows = rows
        self._version = -1
        self._matrices: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def names(self) -> list[str]:
        names = self.table.names
        return [names[r] for r in self.rows.tolist()]

    def node(self, i: int) -> Node:
        return self.table.nodes[int(self.rows[i])]

    def nodes(self) -> list[Node]:
        nodes = self.table.nodes
        return [nodes[r] for r in self.rows.tolist()]

    def named(self, names: Iterable[str]) -> np.ndarray:
        """Bool per node: its name is one of ``names``."""
        hit = np.zeros(len(self.table), dtype=bool)
        for name in names:
            row = self.table.index.get(name)
            if row is not None:
                hit[row] = True
        named: np.ndarray = hit[self.rows]
        return named

    def node_infos(self) -> Iterator[NodeInfo]:
        for r in self.rows.tolist():
            yield self.table.node_info(r)

    def has_resource(self, resource: str) -> bool:
        """True if some node of the table has or uses ``resource`` (it has a column)."""
        return resource in self.table.resource_index

    def resource_matrix(self, kind: str) -> np.ndarray:
        """The batch's rows of the table's ``allocatable``, ``requested`` (columns:
        ``table.resource_index``) or ``non_zero_requested`` (cpu, memory) matrix, read-only.

        Gathered once per batch while the table does not change (``table.version``) and
        shared by the plugins that read resources (a row gather of the whole matrix
        costs less than one gather of a single column)."""
        table = self.table
        matrices = self._matrices
        if self._version != table.version:
            matrices.clear()
            self._version = table.version
        matrix = matrices.get(kind)
        if matrix is None:
            if kind not in _RESOURCE_MATRICES:
                raise ValueError(f"no resource matrix {kind!r}, expected one of {', '.join(_RESOURCE_MATRICES)}")
            matrix = matrices[kind] = getattr(table, kind).take(self.rows, axis=0)
            matrix.flags.writeable = False
        return matrix

    def allocatable(self, resource: str) -> np.ndarray:
        """int64 allocatable of ``resource`` per node (0 where the node has none)."""
        col = self.table.resource_index.get(resource)
        if col is None:
            return np.zeros(len(self.rows), dtype=np.int64)
        return self.resource_matrix("allocatable")[:, col].copy()

    def requested(self, resource: str) -> np.ndarray:
        """int64 sum of the pods' requests of ``resource`` per node."""
        col = self.table.resource_index.get(resource)
        if col is None:
            return np.zeros(len(self.rows), dtype=np.int64)
        return self.resource_matrix("requested")[:, col].copy()

    def non_zero_requested(self, resource: str) -> np.ndarray:
        """kube's NonZeroRequested for ``cpu`` or ``memory``."""
        col = _NON_ZERO_COLUMNS[resource]
        return self.resource_matrix("non_zero_requested")[:, col].copy()

    def taint_set_ids(self) -> np.ndarray:
        """Per node, the id of its taint set in ``taint_sets``."""
        ids: np.ndarray = self.table.taint_set[self.rows]
        return ids

    @property
    def taint_sets(self) -> list[tuple[Taint, ...]]:
        """The distinct taint sets of the table (id 0 is the empty set); index with ``taint_set_ids()``."""
        return self.table.taint_sets

    def unschedulable(self) -> np.ndarray:
        unschedulable: np.ndarray = self.table.unschedulable[self.rows]
        return unschedulable

    def label_column(self, key: str) -> LabelColumn:
        """Label ``key`` over the whole table as codes: ``column.equals(value, nodes.rows)``,
        or ``column.codes[nodes.rows]`` with ``column.code_of``. Cached until a node changes."""
        return self.table.label_column(key)


# Severity order of rejection codes inside a FilterVerdict (0 = passes).
_SEVERITY = {
    Code.UNSCHEDULABLE: 1,
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: 2,
    Code.PENDING: 3,
    Code.ERROR: 4,
}
_SEVERITY_CODE = {v: k for k, v in _SEVERITY.items()}
_ERROR_LEVEL = _SEVERITY[Code.ERROR]


def severity_level(code: Code) -> int:
    """The level of a rejection ``code`` in ``FilterVerdict.severity`` (1 Unschedulable ... 4 Error)."""
    return _SEVERITY[code]


class FilterVerdict:
    """A vectorized Filter result over a NodeBatch.

    ``reject(mask, reason, code)`` rejects the nodes where ``mask`` is true with
    one reason; a node rejected several times gets every reason, in call order,
    and the most severe code (Error > Pending > UnschedulableAndUnresolvable >
    Unschedulable). Reject only through ``reject``/``reject_one``: the framework
    reads a verdict without reasons as rejecting nothing, and the Error flag they
    keep, without a pass over ``severity``.
    """

    __slots__ = ("size", "reasons", "_levels", "_severity", "_errors")

    def __init__(self, size: int) -> None:
        self.size = size
        self.reasons: list[tuple[str, np.ndarray]] = []
        self._levels: list[int] = []  # the severity level of each reason
        self._severity: np.ndarray | None = None  # made when asked for (one reason needs none)
        self._errors = False  # some node was rejected with Error

    def reject(self, mask: np.ndarray, reason: str, code: Code = Code.UNSCHEDULABLE) -> None:
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (self.size,):
            raise ValueError(f"mask has shape {mask.shape}, expected ({self.size},)")
        if not np.count_nonzero(mask):  # (cheaper than any())
            return
        level = _SEVERITY[code]
        if self._severity is not None:
            np.maximum(self._severity, level, out=self._severity, where=mask)
        self.reasons.append((reason, mask))
        self._levels.append(level)
        self._errors |= level == _ERROR_LEVEL

    @property
    def severity(self) -> np.ndarray:
        """int8 per node: 0 passes, else the level of its most severe rejection (``severity_level``)."""
        if self._severity is None:
            severity = self._severity = np.zeros(self.size, dtype=np.int8)
            for (_, mask), level in zip(self.reasons, self._levels, strict=True):
                np.maximum(severity, level, out=severity, where=mask)
        return self._severity

    @severity.setter
    def severity(self, severity: np.ndarray) -> None:
        self._severity = severity

    def rejected(self) -> tuple[np.ndarray, np.ndarray]:
        """(positions of the rejected nodes, ascending; their ``severity``)."""
        if len(self.reasons) == 1 and self._severity is None:  # (a bool mask's positions come cheaper)
            positions = self.reasons[0][1].nonzero()[0]
            levels = np.empty(len(positions), dtype=np.int8)
            levels.fill(self._levels[0])  # (cheaper than np.full)
            return positions, levels
        severity = self.severity
        positions = severity.nonzero()[0]
        return positions, severity[positions]

    def reject_one(self, index: int, status: Status) -> None:
        mask = np.zeros(self.size, dtype=bool)
        mask[index] = True
        if not status.reasons:
            self.reject(mask, "", status.code)
            return
        for reason in status.reasons:
            self.reject(mask, reason, status.code)

    @property
    def failed(self) -> np.ndarray:
        return self.severity > 0

    def first_error(self, plugin: str = "") -> Status | None:
        """The status of the first node rejected with Error (a per-node plugin failed), or None."""
        if not self._errors:
            return None
        errors = np.flatnonzero(self.severity == _ERROR_LEVEL)
        return self.status_at(int(errors[0]), plugin) if len(errors) else None

    def status_at(self, index: int, plugin: str = "") -> Status:
        level = int(self.severity[index])
        if level == 0:
            return Status(plugin=plugin)
        reasons = tuple(r for r, m in self.reasons if m[index] and r)
        return Status(_SEVERITY_CODE[level], reasons, plugin)


@attrs.frozen(slots=True)
class PreFilterResult:
    """PreFilter's narrowing of the candidate nodes (None = all nodes)."""

    node_names: frozenset[str] | None = None
    status: Status = Status()


@attrs.define(slots=True)
class QueuedPodInfo:
    """A pending pod with its queue bookkeeping (kube's framework.QueuedPodInfo).

    ``timestamp`` is when the pod (re)entered the queue; PrioritySort and the
    backoff expiry use it. ``attempts`` counts pops; ``unschedulable_count``
    counts Unschedulable results (not errors) and drives the backoff.
    ``unschedulable_plugins``/``pending_plugins`` name the plugins that
    rejected the last attempt; only events they registered move the pod.
    """

    pod: Pod
    timestamp: float
    initial_attempt_timestamp: float | None = None
    attempts: int = 0
    unschedulable_count: int = 0
    unschedulable_plugins: frozenset[str] = frozenset()
    pending_plugins: frozenset[str] = frozenset()
    gated: bool = False
    gating_plugin: str | None = None

    @property
    def key(self) -> str:
        return self.pod.key
