"""Node state below both the cache and the framework: the columnar NodeTable,
its label columns, and NodeInfo (one node, for per-node plugins)."""

from scorer.state.labels import LabelColumn
from scorer.state.nodeinfo import NodeInfo
from scorer.state.nodetable import BASE_RESOURCES, PODS, NodeTable

__all__ = ["BASE_RESOURCES", "PODS", "LabelColumn", "NodeInfo", "NodeTable"]
