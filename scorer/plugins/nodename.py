"""NodeName: a pod that names a node (spec.nodeName) fits only that node."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from scorer.framework import Code, FilterVerdict, NodeBatch

if TYPE_CHECKING:
    from scorer.framework import CycleState
    from scorer.framework.catalog import PluginRegistry
    from scorer.model import Pod

NAME = "NodeName"
ERR_REASON = "node(s) didn't match the requested node name"


class NodeName:
    name = NAME

    def filter_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> FilterVerdict | None:
        if not pod.node_name:
            return None
        verdict = FilterVerdict(len(nodes))
        mask = np.array([n != pod.node_name for n in nodes.names], dtype=bool)
        verdict.reject(mask, ERR_REASON, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        return verdict


def factory(args: Any, handle: Any) -> NodeName:
    return NodeName()


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, plugin_type=NodeName)
