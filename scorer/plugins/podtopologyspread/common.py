"""What PreFilter and PreScore share: the pod's constraints and the nodes that count.

A pod's constraints (kube's ``filterTopologySpreadConstraints`` /
``buildDefaultConstraints``): its own ``topologySpreadConstraints`` with the
given ``whenUnsatisfiable``; if it has none at all, the args' default
constraints with that action, whose selector is the pod's default selector
(``Workloads.default_selector``: the Services, ReplicationControllers,
ReplicaSets and StatefulSets selecting it; none selects it -> no default
constraints). ``matchLabelKeys`` add ``key In (pod's value)`` to the selector
for each key the pod has (kube >= 1.27). A constraint without
``labelSelector`` matches no pod.

A node counts for a constraint (kube >= 1.26, node inclusion policies) when
it has every topology key of the pod's constraints (of that action), and:
``nodeAffinityPolicy: Honor`` (the default) -> it matches the pod's
``nodeSelector`` and required node affinity; ``nodeTaintsPolicy: Honor``
(default Ignore) -> it has no NoSchedule/NoExecute taint the pod does not
tolerate.

Matching pods are counted from the cache's ``PodIndex``
(``selector_counts(namespace, selector, include_deleting=False)``): the pods
of the incoming pod's namespace, terminating pods left out, per node, kept
up to date by every pod event; a cycle never walks the pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import attrs
import numpy as np

from scorer.framework.cycle_state import CycleState
from scorer.framework.types import NodeBatch
from scorer.model import LabelSelector, LabelSelectorRequirement, untolerated_taints
from scorer.plugins.nodeaffinity import NodeAffinity, NodeAffinityArgs
from scorer.plugins.podtopologyspread.args import LABEL_HOSTNAME, PodTopologySpreadArgs

if TYPE_CHECKING:
    from scorer.cache import ClusterCache
    from scorer.model import Node, Pod, TopologySpreadConstraint
    from scorer.state.workloads import Workloads

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"
_FILTER_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
# NodeAffinity without addedAffinity decides "matches the pod's nodeSelector and required
# node affinity" (kube's GetRequiredNodeAffinity(pod).Match) over a batch, the same way its Filter does.
_REQUIRED_AFFINITY = NodeAffinity(NodeAffinityArgs())


@attrs.frozen(slots=True)
class Constraint:
    """One constraint as the plugin evaluates it (kube's internal topologySpreadConstraint).

    ``selector`` None matches no pod. ``min_domains`` is 1 unless given.
    """

    max_skew: int
    topology_key: str
    selector: LabelSelector | None
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE

    @property
    def per_node(self) -> bool:
        """Hostname constraints are scored per node (kube compares the key with kubernetes.io/hostname)."""
        return self.topology_key == LABEL_HOSTNAME

    def matches(self, pod: Pod) -> bool:
        return self.selector is not None and self.selector.matches(pod.labels)


def _with_match_label_keys(
    selector: LabelSelector | None, keys: Iterable[str], labels: dict[str, str]
) -> LabelSelector | None:
    """kube's mergeLabelSetWithSelector: ``key In (value)`` for each key the pod has a label for.
    A missing selector stays one (kube's Nothing selector ignores added requirements)."""
    if selector is None:
        return None
    extra = tuple(
        LabelSelectorRequirement(key=key, operator="In", values=(labels[key],)) for key in keys if key in labels
    )
    if not extra:
        return selector
    return LabelSelector(match_labels=selector.match_labels, match_expressions=selector.match_expressions + extra)


def _constraint(c: TopologySpreadConstraint, selector: LabelSelector | None) -> Constraint:
    return Constraint(
        max_skew=c.max_skew,
        topology_key=c.topology_key,
        selector=selector,
        # minDomains is honoured for DoNotSchedule only (the API forbids it with ScheduleAnyway).
        min_domains=c.min_domains if c.min_domains is not None else 1,
        node_affinity_policy=c.node_affinity_policy or HONOR,
        node_taints_policy=c.node_taints_policy or IGNORE,
    )


def pod_constraints(
    pod: Pod, action: str, args: PodTopologySpreadArgs, workloads: Workloads
) -> tuple[Constraint, ...]:
    """The pod's constraints with ``whenUnsatisfiable == action`` (see the module docstring)."""
    if pod.topology_spread_constraints:
        return tuple(
            _constraint(c, _with_match_label_keys(c.label_selector, c.match_label_keys, pod.labels))
            for c in pod.topology_spread_constraints
            if c.when_unsatisfiable == action
        )
    defaults = [c for c in args.effective_default_constraints if c.when_unsatisfiable == action]
    if not defaults:
        return ()
    selector = workloads.default_selector(pod)
    if selector is None:
        return ()
    return tuple(_constraint(c, selector) for c in defaults)


# -- nodes, vectorized -------------------------------------------------------------------


def key_columns(nodes: NodeBatch, constraints: Sequence[Constraint]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per constraint: (label code per node of ``nodes``, the node has the key)."""
    out = []
    for c in constraints:
        column = nodes.label_column(c.topology_key)
        codes = column.codes[nodes.rows]
        missing = column.code_of.get(None)
        has = codes != missing if missing is not None else np.ones(len(codes), dtype=bool)
        out.append((codes, has))
    return out


class Inclusion:
    """Which nodes of a batch count for each constraint: the policy masks, built once per batch."""

    def __init__(self, pod: Pod, nodes: NodeBatch) -> None:
        self.pod = pod
        self.nodes = nodes
        self._affinity: np.ndarray | None = None
        self._taints: np.ndarray | None = None

    def affinity(self) -> np.ndarray:
        """The node matches the pod's nodeSelector and required node affinity."""
        if self._affinity is None:
            pod, nodes = self.pod, self.nodes
            na = pod.affinity.node_affinity if pod.affinity is not None else None
            if not pod.node_selector and (na is None or na.required is None):
                self._affinity = np.ones(len(nodes), dtype=bool)
            else:
                self._affinity = ~_REQUIRED_AFFINITY.filter_batch(CycleState(), pod, nodes).failed
        return self._affinity

    def tolerated(self) -> np.ndarray:
        """The node has no NoSchedule/NoExecute taint the pod does not tolerate."""
        if self._taints is None:
            sets = self.nodes.taint_sets
            bad = np.array([bool(untolerated_taints(ts, self.pod.tolerations, _FILTER_EFFECTS)) for ts in sets],
                           dtype=bool)
            self._taints = ~bad[self.nodes.taint_set_ids()]
        return self._taints

    def mask(self, c: Constraint) -> np.ndarray:
        """The nodes ``c``'s policies include (before the topology key checks)."""
        mask = np.ones(len(self.nodes), dtype=bool)
        if c.node_affinity_policy == HONOR:
            mask &= self.affinity()
        if c.node_taints_policy == HONOR:
            mask &= self.tolerated()
        return mask


def node_included(c: Constraint, pod: Pod, node: Node) -> bool:
    """``Inclusion.mask`` for one node (kube's matchNodeInclusionPolicies)."""
    if c.node_affinity_policy == HONOR:
        if any(node.labels.get(k) != v for k, v in pod.node_selector.items()):
            return False
        na = pod.affinity.node_affinity if pod.affinity is not None else None
        if na is not None and na.required is not None and not na.required.matches(node):
            return False
    return not (c.node_taints_policy == HONOR and untolerated_taints(node.taints, pod.tolerations, _FILTER_EFFECTS))


def matching_pods(cache: ClusterCache, nodes: NodeBatch, namespace: str, selector: LabelSelector | None) -> np.ndarray:
    """int64 per node of ``nodes``: its pods of ``namespace`` matching ``selector``, not terminating.

    On the cache's table this reads the PodIndex's incremental counts; on any
    other table (a scratch table of preemption) it counts that table's pods.
    """
    if selector is None:
        return np.zeros(len(nodes), dtype=np.int64)
    index = cache.pod_index
    if nodes.table is index.table:
        per_row = index.selector_counts(namespace, selector, include_deleting=False).per_row(nodes.table)
        counts: np.ndarray = per_row[nodes.rows]
        return counts
    table_pods = nodes.table.pods
    return np.fromiter(
        (sum(1 for p in table_pods[r].values()
             if p.namespace == namespace and not p.deleting and selector.matches(p.labels))
         for r in nodes.rows.tolist()),
        dtype=np.int64, count=len(nodes),
    )
