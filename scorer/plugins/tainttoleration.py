"""TaintToleration: Filter on NoSchedule/NoExecute taints; Score counts the
PreferNoSchedule taints a pod does not tolerate (fewer is better).

Taint sets are interned in the NodeTable, so each distinct set is checked
once per cycle and the answer spread over nodes by indexing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from scorer.framework import Code, FilterVerdict, NodeBatch, Status
from scorer.plugins.helper.normalize import default_normalize_score

if TYPE_CHECKING:
    from scorer.framework import CycleState
    from scorer.framework.catalog import PluginRegistry
    from scorer.model import Pod, Taint, Toleration

NAME = "TaintToleration"
ERR_REASON_NOT_MATCH = "node(s) had untolerated taint(s)"
_PRE_SCORE_KEY = "PreScore" + NAME
_FILTER_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


def _untolerated(taints: tuple[Taint, ...], tolerations: tuple[Toleration, ...], effects: frozenset[str]) -> int:
    return sum(
        1 for taint in taints if taint.effect in effects and not any(t.tolerates(taint) for t in tolerations)
    )


class TaintToleration:
    name = NAME

    def filter_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> FilterVerdict | None:
        taint_sets = nodes.table.taint_sets
        if len(taint_sets) == 1:  # only the empty set: no node has taints
            return None
        tolerations = tuple(pod.tolerations)
        bad = np.array(
            [_untolerated(ts, tolerations, _FILTER_EFFECTS) > 0 for ts in taint_sets], dtype=bool
        )
        verdict = FilterVerdict(len(nodes))
        verdict.reject(bad[nodes.taint_set_ids()], ERR_REASON_NOT_MATCH, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        return verdict

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status | None:
        prefer = tuple(t for t in pod.tolerations if t.effect in ("", "PreferNoSchedule"))
        state.write(_PRE_SCORE_KEY, prefer)
        return None

    def score_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> np.ndarray:
        tolerations = state.read(_PRE_SCORE_KEY)
        counts = np.array(
            [_untolerated(ts, tolerations, frozenset({"PreferNoSchedule"})) for ts in nodes.table.taint_sets],
            dtype=np.int64,
        )
        return counts[nodes.taint_set_ids()]

    def normalize_score(self, state: CycleState, pod: Pod, scores: np.ndarray) -> np.ndarray:
        return default_normalize_score(scores, reverse=True)


def factory(args: Any, handle: Any) -> TaintToleration:
    return TaintToleration()


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, plugin_type=TaintToleration)
