"""TaintToleration: Filter on NoSchedule/NoExecute taints; Score counts the
PreferNoSchedule taints a pod does not tolerate, fewer is better (kube's
``tainttoleration``, reference §3.6).

Filter rejects a node with a NoSchedule or NoExecute taint the pod does not
tolerate (UnschedulableAndUnresolvable). Score is the number of the node's
PreferNoSchedule taints not tolerated by the pod's tolerations with effect
PreferNoSchedule or empty; NormalizeScore is DefaultNormalizeScore reversed.
Taint sets are interned in the NodeTable, so each distinct set is checked
once per cycle and the answer spread over nodes by indexing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import numpy as np

from scorer.framework.events import ADD, NODE, UNSCHEDULABLE_POD, UPDATE, UPDATE_NODE_TAINT, ClusterEvent
from scorer.framework.status import Code, Status
from scorer.framework.types import FilterVerdict, NodeBatch
from scorer.plugins.helper.normalize import default_normalize_score

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry
    from scorer.framework.cycle_state import CycleState
    from scorer.framework.runtime import Handle
    from scorer.model import Pod, Taint, Toleration

NAME = "TaintToleration"
ERR_REASON_NOT_MATCH = "node(s) had untolerated taint(s)"
_FILTER_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
_SCORE_EFFECTS = frozenset({"PreferNoSchedule"})

_PRE_SCORE_KEY = "PreScore" + NAME


@attrs.frozen(slots=True)
class _PreScoreState:
    tolerations: tuple[Toleration, ...]  # the pod's tolerations with effect PreferNoSchedule or empty


def _pre_score_state(state: CycleState) -> _PreScoreState:
    found: _PreScoreState = state.read(_PRE_SCORE_KEY)
    return found


class TaintToleration:
    name = NAME

    def events_to_register(self) -> list[ClusterEvent]:
        """A new node, a node's taints changing, or the pod's tolerations changing."""
        return [ClusterEvent(NODE, ADD), ClusterEvent(NODE, UPDATE_NODE_TAINT), ClusterEvent(UNSCHEDULABLE_POD, UPDATE)]

    def filter_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> FilterVerdict | None:
        taint_sets = nodes.taint_sets
        if len(taint_sets) == 1:  # only the empty set: no node has taints
            return None
        tolerations = tuple(pod.tolerations)
        bad = np.array([_untolerated(ts, tolerations, _FILTER_EFFECTS) > 0 for ts in taint_sets], dtype=bool)
        verdict = FilterVerdict(len(nodes))
        verdict.reject(bad[nodes.taint_set_ids()], ERR_REASON_NOT_MATCH, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        return verdict

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status | None:
        prefer = tuple(t for t in pod.tolerations if t.effect in ("", "PreferNoSchedule"))
        state.write(_PRE_SCORE_KEY, _PreScoreState(prefer))
        return None

    def score_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> np.ndarray:
        tolerations = _pre_score_state(state).tolerations
        taint_sets = nodes.taint_sets
        if len(taint_sets) == 1:  # only the empty set: no node has taints, none is intolerable
            return np.zeros(len(nodes), dtype=np.int64)
        counts = np.array([_untolerated(ts, tolerations, _SCORE_EFFECTS) for ts in taint_sets], dtype=np.int64)
        per_node: np.ndarray = counts[nodes.taint_set_ids()]
        return per_node

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray) -> np.ndarray:
        return default_normalize_score(scores, reverse=True)


def _untolerated(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...], effects: frozenset[str]) -> int:
    return sum(
        1 for taint in taints if taint.effect in effects and not any(t.tolerates(taint) for t in tolerations)
    )


def factory(args: None, handle: Handle) -> TaintToleration:
    return TaintToleration()


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, plugin_type=TaintToleration)
