"""NodeInfo: one node with what is on it, for per-node plugins."""

from __future__ import annotations

import attrs

from scorer.model import Node, Pod


@attrs.frozen(slots=True)
class NodeInfo:
    """One node with what is on it, for per-node plugins.

    ``requested`` sums the effective requests of the node's pods (assumed pods
    included); ``pods`` counts under ``requested["pods"]``. ``non_zero_cpu`` and
    ``non_zero_memory`` sum the pods' non-zero requests (kube's NonZeroRequested).
    """

    node: Node
    pods: tuple[Pod, ...]
    allocatable: dict[str, int]
    requested: dict[str, int]
    non_zero_cpu: int
    non_zero_memory: int

    @property
    def name(self) -> str:
        return self.node.name
