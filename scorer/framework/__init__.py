"""The scheduling framework: statuses, cycle state, plugin runtime."""

from scorer.framework.cycle_state import CycleState
from scorer.framework.events import ClusterEvent
from scorer.framework.status import Code, Status
from scorer.framework.types import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    FilterVerdict,
    NodeBatch,
    PreFilterResult,
    QueuedPodInfo,
)
from scorer.state.nodeinfo import NodeInfo

__all__ = [
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "ClusterEvent",
    "Code",
    "CycleState",
    "FilterVerdict",
    "NodeBatch",
    "NodeInfo",
    "PreFilterResult",
    "QueuedPodInfo",
    "Status",
]
