"""PodTopologySpread: spread a pod's group evenly over topology domains (kube's
``podtopologyspread``, reference §2.3 and §3.10).

Constraints (``common.pod_constraints``): the pod's own
``topologySpreadConstraints``, or, if it has none, the default constraints
(``System``: hostname maxSkew 3 and zone maxSkew 5, ScheduleAnyway; ``List``:
the args') with the selector of the Services/RCs/RSs/StatefulSets selecting
the pod. Matching pods: same namespace as the pod, selector matches, not
terminating. A node *counts* for a constraint when it has every topology key
of the pod's constraints and passes the constraint's node inclusion policies
(``nodeAffinityPolicy`` Honor by default, ``nodeTaintsPolicy`` Ignore).

PreFilter (``DoNotSchedule`` constraints; none -> Skip): per constraint i,
over all nodes that count, ``match_i[v]`` = matching pods on the nodes of
domain v (the domains are the values of those nodes, also with 0 pods), and
``min_i`` = min over domains, or 0 when there are fewer domains than
``minDomains``.

Filter, per constraint in order, first failure wins::

    node lacks topology key          -> UnschedulableAndUnresolvable "... (missing required label)"
    match_i[value] + self_i - min_i > maxSkew_i  -> Unschedulable
        (self_i = 1 if the pod matches its own selector; match_i[v] = 0 for non-domains)

PreScore (``ScheduleAnyway`` constraints; none -> Skip): with
``requireAll = pod has own constraints or defaultingType is List``, feasible
nodes lacking one of the keys are *ignored* (score 0). For a non-hostname
constraint, the domains are the values of feasible non-ignored nodes, and
``count_i[v]`` sums matching pods over all nodes that count (with
``requireAll``: that have every key) in domain v; hostname constraints use the
node's own matching pods. ``w_i = ln(domains_i + 2)`` (hostname:
``ln(feasible non-ignored nodes + 2)``).

Score: ``raw = round( Σ_i [ count_i(node) × w_i + (maxSkew_i − 1) ] )`` over
the constraints whose key the node has; ignored nodes 0.
NormalizeScore: ignored -> 0; else, with min/max over the other nodes (max
at least 0), ``max == 0 -> 100`` else ``100 × (max + min − raw) // max``.

Indexed: matching pods per node come from ``cache.pod_index.selector_counts``
(incremental), aggregated per topology value with ``np.bincount`` over the
label codes; a cycle is O(nodes) numpy, never O(pods). The PreFilter state
is keyed by topology *values* (per constraint: value -> code -> count), so
Filter may run on a scratch table (preemption) and ``add_pod`` /
``remove_pod`` update a copy of it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from scorer.framework.events import (
    ADD,
    DELETE,
    NODE,
    POD,
    UPDATE_NODE_LABEL,
    UPDATE_NODE_TAINT,
    UPDATE_POD_LABEL,
    ClusterEvent,
)
from scorer.framework.status import Code, Status
from scorer.framework.types import MAX_NODE_SCORE, FilterVerdict, NodeBatch
from scorer.plugins.podtopologyspread.args import (
    PodTopologySpreadArgs,
)
from scorer.plugins.podtopologyspread.common import (
    DO_NOT_SCHEDULE,
    SCHEDULE_ANYWAY,
    Constraint,
    Inclusion,
    key_columns,
    matching_pods,
    node_included,
    pod_constraints,
)

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry
    from scorer.framework.cycle_state import CycleState
    from scorer.framework.runtime import Handle
    from scorer.model import Pod
    from scorer.state.labels import LabelColumn
    from scorer.state.nodeinfo import NodeInfo


NAME = "PodTopologySpread"
ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME


class _PreFilterState:
    """Per DoNotSchedule constraint: matching pods per topology value over the domains.

    ``code_of[i]`` maps a value to its code (the label column of the table
    PreFilter ran on, shared until a new value is added); ``counts[i][code]``
    is the number of matching pods in that domain, ``domains[i][code]``
    whether the value is a domain (some counting node has it). Copied by
    ``clone``; ``add`` changes this object, so only a clone's.
    """

    __slots__ = ("constraints", "code_of", "counts", "domains")

    def __init__(self, constraints: tuple[Constraint, ...], code_of: list[dict[str | None, int]],
                 counts: list[np.ndarray], domains: list[np.ndarray]) -> None:
        self.constraints = constraints
        self.code_of = code_of
        self.counts = counts
        self.domains = domains

    def clone(self) -> _PreFilterState:
        return _PreFilterState(self.constraints, list(self.code_of),
                               [c.copy() for c in self.counts], [d.copy() for d in self.domains])

    def min_match(self, i: int) -> int | None:
        """The global minimum of constraint ``i``: 0 with fewer domains than minDomains,
        None when there is no domain at all (and minDomains is not above 0)."""
        domains = self.domains[i]
        n = int(domains.sum())
        if n < self.constraints[i].min_domains:
            return 0
        if n == 0:
            return None
        return int(self.counts[i][domains].min())

    def count_lut(self, i: int, column: LabelColumn) -> np.ndarray:
        """Matching pods per code of ``column`` (0 for values that are no domain)."""
        code_of = self.code_of[i]
        if column.code_of is code_of:
            return self.counts[i]
        counts = self.counts[i]
        return np.array([counts[code_of[v]] if v in code_of else 0 for v in column.code_of], dtype=np.int64)

    def add(self, i: int, value: str, delta: int) -> None:
        code_of = self.code_of[i]
        code = code_of.get(value)
        if code is None:  # a value PreFilter did not see becomes a domain (kube creates the entry)
            code = len(code_of)
            self.code_of[i] = {**code_of, value: code}
            self.counts[i] = np.append(self.counts[i], 0)
            self.domains[i] = np.append(self.domains[i], False)
        self.counts[i][code] += delta
        self.domains[i][code] = True


_EMPTY_PRE_FILTER = _PreFilterState((), [], [], [])


class _PreScoreState:
    """Per ScheduleAnyway constraint: its weight and the counts per code of its label column
    (None for hostname constraints, counted per node: ``per_node``). ``ignored`` is
    written by Score for NormalizeScore (aligned with the scored nodes)."""

    __slots__ = ("constraints", "require_all", "weights", "counts", "per_node", "ignored")

    def __init__(self, constraints: tuple[Constraint, ...], require_all: bool, weights: list[float],
                 counts: list[np.ndarray | None], per_node: list[np.ndarray | None]) -> None:
        self.constraints = constraints
        self.require_all = require_all
        self.weights = weights
        self.counts = counts
        self.per_node = per_node  # hostname: matching pods per row of the table (all rows)
        self.ignored: np.ndarray | None = None


def _pre_filter_state(state: CycleState) -> _PreFilterState | None:
    found: _PreFilterState | None = state.get(_PRE_FILTER_KEY)
    return found


def _pre_score_state(state: CycleState) -> _PreScoreState | None:
    found: _PreScoreState | None = state.get(_PRE_SCORE_KEY)
    return found


def _all_keys(columns: Sequence[tuple[np.ndarray, np.ndarray]], size: int) -> np.ndarray:
    has_all = np.ones(size, dtype=bool)
    for _, has in columns:
        has_all &= has
    return has_all


class PodTopologySpread:
    name = NAME

    def __init__(self, args: PodTopologySpreadArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle

    def events_to_register(self) -> list[ClusterEvent]:
        """Pods added, deleted or relabelled (they change the counts); nodes added, deleted,
        relabelled (domains) or retainted (nodeTaintsPolicy)."""
        return [
            ClusterEvent(POD, ADD), ClusterEvent(POD, DELETE), ClusterEvent(POD, UPDATE_POD_LABEL),
            ClusterEvent(NODE, ADD), ClusterEvent(NODE, DELETE), ClusterEvent(NODE, UPDATE_NODE_LABEL),
            ClusterEvent(NODE, UPDATE_NODE_TAINT),
        ]

    def _constraints(self, pod: Pod, action: str) -> tuple[Constraint, ...]:
        return pod_constraints(pod, action, self.args, self.handle.cache.workloads)

    # -- filter --------------------------------------------------------------------
    def _calc_pre_filter(self, pod: Pod, nodes: NodeBatch) -> _PreFilterState:
        constraints = self._constraints(pod, DO_NOT_SCHEDULE)
        if not constraints:
            return _EMPTY_PRE_FILTER
        columns = key_columns(nodes, constraints)
        has_all = _all_keys(columns, len(nodes))
        inclusion = Inclusion(pod, nodes)
        code_of, counts, domains = [], [], []
        for c, (codes, _) in zip(constraints, columns, strict=True):
            column = nodes.label_column(c.topology_key)
            size = len(column.code_of)
            counting = has_all & inclusion.mask(c)
            domain_codes = codes[counting]
            pods = matching_pods(self.handle.cache, nodes, pod.namespace, c.selector)[counting]
            code_of.append(column.code_of)
            domains.append(np.bincount(domain_codes, minlength=size) > 0)
            counts.append(np.bincount(domain_codes, weights=pods, minlength=size).astype(np.int64))
        return _PreFilterState(constraints, code_of, counts, domains)

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status | None:
        pre = self._calc_pre_filter(pod, nodes)
        if not pre.constraints:
            return Status.skip()
        state.write(_PRE_FILTER_KEY, pre)
        return None

    def filter_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> FilterVerdict | None:
        pre = _pre_filter_state(state)
        if pre is None:  # PreFilter disabled: compute it over the cache's nodes
            table = self.handle.cache.table
            pre = self._calc_pre_filter(pod, NodeBatch(table, table.rows()))
        if not pre.constraints:
            return None
        verdict = FilterVerdict(len(nodes))
        decided = np.zeros(len(nodes), dtype=bool)
        for i, c in enumerate(pre.constraints):
            column = nodes.label_column(c.topology_key)
            codes = column.codes[nodes.rows]
            missing_code = column.code_of.get(None)
            missing = codes == missing_code if missing_code is not None else np.zeros(len(nodes), dtype=bool)
            verdict.reject(missing & ~decided, ERR_REASON_NODE_LABEL_NOT_MATCH, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
            decided |= missing
            min_match = pre.min_match(i)
            if min_match is None:
                continue
            self_match = 1 if c.matches(pod) else 0
            skewed = pre.count_lut(i, column)[codes] + self_match - min_match > c.max_skew
            skewed &= ~decided
            verdict.reject(skewed, ERR_REASON_CONSTRAINTS_NOT_MATCH, Code.UNSCHEDULABLE)
            decided |= skewed
        return verdict

    # -- PreFilterExtensions -------------------------------------------------------------
    def _update(self, state: CycleState, pod: Pod, other: Pod, node_info: NodeInfo, delta: int) -> None:
        """kube's updateWithPod, on a copy of the state written back to ``state``."""
        pre = _pre_filter_state(state)
        node = node_info.node
        if pre is None or not pre.constraints or other.namespace != pod.namespace:
            return
        if any(c.topology_key not in node.labels for c in pre.constraints):
            return
        changed = pre.clone()
        for i, c in enumerate(pre.constraints):
            if c.matches(other) and node_included(c, pod, node):
                changed.add(i, node.labels[c.topology_key], delta)
        state.write(_PRE_FILTER_KEY, changed)

    def add_pod(self, state: CycleState, pod: Pod, pod_to_add: Pod, node: NodeInfo) -> Status | None:
        self._update(state, pod, pod_to_add, node, +1)
        return None

    def affected_by(self, state: CycleState, pod: Pod, other: Pod) -> bool:
        """Whether ``_update`` may count ``other``: of the pod's namespace, matched by a
        DoNotSchedule constraint's selector (node inclusion aside: a superset)."""
        pre = _pre_filter_state(state)
        if pre is None or not pre.constraints or other.namespace != pod.namespace:
            return False
        return any(c.matches(other) for c in pre.constraints)

    def remove_pod(self, state: CycleState, pod: Pod, pod_to_remove: Pod, node: NodeInfo) -> Status | None:
        self._update(state, pod, pod_to_remove, node, -1)
        return None

    # -- score ---------------------------------------------------------------------
    def _calc_pre_score(self, pod: Pod, nodes: NodeBatch) -> _PreScoreState | None:
        constraints = self._constraints(pod, SCHEDULE_ANYWAY)
        table = nodes.table
        if not constraints or len(table) == 0:
            return None
        # Only explicit constraints and List defaults need every key: with the system
        # defaults, nodes without a zone label are still spread by hostname.
        require_all = bool(pod.topology_spread_constraints) or not self.args.system_defaulted
        feasible = key_columns(nodes, constraints)
        kept = _all_keys(feasible, len(nodes)) if require_all else np.ones(len(nodes), dtype=bool)
        everywhere = NodeBatch(table, table.rows())
        all_columns = key_columns(everywhere, constraints)
        all_has_all = _all_keys(all_columns, len(table)) if require_all else np.ones(len(table), dtype=bool)
        inclusion = Inclusion(pod, everywhere)
        cache = self.handle.cache
        weights: list[float] = []
        counts: list[np.ndarray | None] = []
        per_node: list[np.ndarray | None] = []
        for c, (codes, has), (all_codes, all_has) in zip(constraints, feasible, all_columns, strict=True):
            if c.per_node:
                weights.append(math.log(int(kept.sum()) + 2))
                counts.append(None)
                per_node.append(matching_pods(cache, everywhere, pod.namespace, c.selector))
                continue
            size = len(table.label_column(c.topology_key).code_of)
            domains = np.bincount(codes[kept & has], minlength=size) > 0
            weights.append(math.log(int(domains.sum()) + 2))
            counting = all_has_all & all_has & inclusion.mask(c)
            pods = matching_pods(cache, everywhere, pod.namespace, c.selector)[counting]
            total = np.bincount(all_codes[counting], weights=pods, minlength=size).astype(np.int64)
            counts.append(np.where(domains, total, 0))
            per_node.append(None)
        return _PreScoreState(constraints, require_all, weights, counts, per_node)

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status | None:
        pre = self._calc_pre_score(pod, nodes)
        if pre is None:
            return Status.skip()
        state.write(_PRE_SCORE_KEY, pre)
        return None

    def score_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> np.ndarray:
        pre = _pre_score_state(state)
        if pre is None:  # PreScore disabled
            pre = self._calc_pre_score(pod, nodes)
            if pre is None:
                return np.zeros(len(nodes), dtype=np.int64)
            state.write(_PRE_SCORE_KEY, pre)
        columns = key_columns(nodes, pre.constraints)
        score = np.zeros(len(nodes), dtype=np.float64)
        for i, c in enumerate(pre.constraints):
            codes, has = columns[i]
            per_node, counts = pre.per_node[i], pre.counts[i]
            if per_node is not None:  # hostname: the node's own matching pods
                count = per_node[nodes.rows]
            else:
                assert counts is not None
                count = counts[codes]
            score += np.where(has, count * pre.weights[i] + float(c.max_skew - 1), 0.0)
        ignored = ~_all_keys(columns, len(nodes)) if pre.require_all else np.zeros(len(nodes), dtype=bool)
        pre.ignored = ignored
        raw = np.floor(score + 0.5).astype(np.int64)  # Go's math.Round (scores are not negative)
        raw[ignored] = 0
        return raw

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray) -> np.ndarray:
        pre = _pre_score_state(state)
        ignored = pre.ignored if pre is not None and pre.ignored is not None else np.zeros(len(scores), bool)
        kept = ~ignored
        out = np.zeros(len(scores), dtype=np.int64)
        if not kept.any():
            return out
        low = int(scores[kept].min())
        high = max(int(scores[kept].max()), 0)
        if high == 0:
            out[kept] = MAX_NODE_SCORE
        else:
            out[kept] = MAX_NODE_SCORE * (high + low - scores[kept]) // high
        return out


def factory(args: PodTopologySpreadArgs | None, handle: Handle) -> PodTopologySpread:
    return PodTopologySpread(args if args is not None else PodTopologySpreadArgs(), handle)


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, args_type=PodTopologySpreadArgs, plugin_type=PodTopologySpread)
