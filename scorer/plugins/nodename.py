"""NodeName: a pod that names a node (``spec.nodeName``) fits only that node
(kube's ``nodename``); the others reject it, UnschedulableAndUnresolvable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scorer.framework.events import ADD, NODE, ClusterEvent
from scorer.framework.status import Code
from scorer.framework.types import FilterVerdict, NodeBatch

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry
    from scorer.framework.cycle_state import CycleState
    from scorer.framework.runtime import Handle
    from scorer.model import Pod

NAME = "NodeName"
ERR_REASON = "node(s) didn't match the requested node name"


class NodeName:
    name = NAME

    def events_to_register(self) -> list[ClusterEvent]:
        """The named node may be added later."""
        return [ClusterEvent(NODE, ADD)]

    def filter_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> FilterVerdict | None:
        if not pod.node_name:
            return None
        verdict = FilterVerdict(len(nodes))
        verdict.reject(~nodes.named((pod.node_name,)), ERR_REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        return verdict


def factory(args: None, handle: Handle) -> NodeName:
    return NodeName()


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, plugin_type=NodeName)
