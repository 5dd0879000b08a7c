"""NodeUnschedulable: nodes with ``spec.unschedulable`` reject pods that do not
tolerate the ``node.kubernetes.io/unschedulable:NoSchedule`` taint (kube's
``nodeunschedulable``); the rejection is UnschedulableAndUnresolvable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scorer.framework.events import ADD, NODE, UPDATE_NODE_TAINT, ClusterEvent
from scorer.framework.status import Code
from scorer.framework.types import FilterVerdict, NodeBatch
from scorer.model import Taint

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry
    from scorer.framework.cycle_state import CycleState
    from scorer.framework.runtime import Handle
    from scorer.model import Pod

NAME = "NodeUnschedulable"
ERR_REASON = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", value="", effect="NoSchedule")


class NodeUnschedulable:
    name = NAME

    def events_to_register(self) -> list[ClusterEvent]:
        """A new node, or a node made schedulable (spec.unschedulable is a taint update)."""
        return [ClusterEvent(NODE, ADD), ClusterEvent(NODE, UPDATE_NODE_TAINT)]

    def filter_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> FilterVerdict | None:
        if any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations):
            return None
        verdict = FilterVerdict(len(nodes))
        verdict.reject(nodes.unschedulable(), ERR_REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        return verdict


def factory(args: None, handle: Handle) -> NodeUnschedulable:
    return NodeUnschedulable()


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, plugin_type=NodeUnschedulable)
