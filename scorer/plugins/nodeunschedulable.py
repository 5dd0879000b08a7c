"""NodeUnschedulable: nodes with spec.unschedulable reject pods that do not
tolerate the ``node.kubernetes.io/unschedulable:NoSchedule`` taint."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scorer.framework import Code, FilterVerdict, NodeBatch
from scorer.model import Taint

if TYPE_CHECKING:
    from scorer.framework import CycleState
    from scorer.framework.catalog import PluginRegistry
    from scorer.model import Pod

NAME = "NodeUnschedulable"
ERR_REASON = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", value="", effect="NoSchedule")


class NodeUnschedulable:
    name = NAME

    def filter_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> FilterVerdict | None:
        if any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations):
            return None
        verdict = FilterVerdict(len(nodes))
        verdict.reject(nodes.unschedulable(), ERR_REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        return verdict


def factory(args: Any, handle: Any) -> NodeUnschedulable:
    return NodeUnschedulable()


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, plugin_type=NodeUnschedulable)
