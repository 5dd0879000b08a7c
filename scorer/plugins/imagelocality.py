"""ImageLocality: favour nodes that already have the pod's container images
(kube's ``imagelocality``, reference §3.9). No NormalizeScore: the score is
already 0..100.

Each image found on the node contributes its size scaled by the share of
nodes that have it, ``int64(float64(size) * (float64(numNodes) /
float64(totalNodes)))`` as kube's ``scaledImageScore``, so an image present
everywhere does not pull every pod to the same place. The sum is clamped to
[23 MiB, 1000 MiB x containers] and mapped linearly onto 0..100.

Node image lists only change with node updates, so they are indexed once per
set of nodes (image name -> rows of the nodes that have it) and a cycle does
one numpy update per container of the pod.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from scorer.framework.types import MAX_NODE_SCORE, NodeBatch
from scorer.plugins.helper.normalize import trunc_div

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry
    from scorer.framework.cycle_state import CycleState
    from scorer.framework.runtime import Handle
    from scorer.model import Node, Pod
    from scorer.state import NodeTable

NAME = "ImageLocality"
MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB
DEFAULT_IMAGE_TAG = "latest"


class ImageLocality:
    name = NAME

    def __init__(self) -> None:
        self._index: _ImageIndex | None = None

    def _images(self, table: NodeTable) -> _ImageIndex:
        index = self._index
        if index is None or not index.still_valid(table):
            index = self._index = _ImageIndex(table)
        return index

    def score_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> np.ndarray:
        table = nodes.table
        index = self._images(table)
        total_nodes = len(table)
        containers = (*pod.init_containers, *pod.containers)
        names = (normalized_image_name(container.image) for container in containers)
        found = [(name, index.rows_of[name]) for name in names if name in index.rows_of]
        if not found:  # no node has any of the pod's images: every sum is 0, and so is every score
            return np.zeros(len(nodes), dtype=np.int64)
        # Sums at or above the top threshold all score 100: saturating there keeps
        # huge image sizes from overflowing int64 without changing any score.
        ceiling = MAX_CONTAINER_THRESHOLD * len(containers)
        # Sums over the batch's nodes only; each stays within [0, ceiling].
        sums = np.zeros(len(nodes), dtype=np.int64)
        for name, rows in found:
            # kube's scaledImageScore, in the same float64 operations.
            spread = float(len(rows)) / float(total_nodes)
            scaled = min(int(float(index.sizes[name]) * spread), ceiling)
            if len(rows) == total_nodes:  # on every node (rows are distinct)
                sums = np.minimum(sums + scaled, ceiling)
            else:
                sums = np.minimum(sums + np.where(index.mask_of(name)[nodes.rows], scaled, 0), ceiling)
        return calculate_priority(sums, len(containers))


def normalized_image_name(name: str) -> str:
    """Append ``:latest`` when the name has no tag (no ``:`` after the last ``/``)."""
    if name.rfind(":") <= name.rfind("/"):
        return f"{name}:{DEFAULT_IMAGE_TAG}"
    return name


def calculate_priority(sum_scores: np.ndarray, num_containers: int) -> np.ndarray:
    """kube's calculatePriority per node: clamp into [23 MiB, 1000 MiB x containers],
    then ``100 * (sum - min) / (max - min)`` in integers."""
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    # kube's order: raise to the minimum first, else lower to the maximum (a pod without
    # containers has a maximum of 0, below the minimum: its sum, 0, scores 0).
    clamped = np.where(sum_scores < MIN_THRESHOLD, MIN_THRESHOLD, np.minimum(sum_scores, max_threshold))
    span = max_threshold - MIN_THRESHOLD
    if span > 0:  # with containers: clamped >= MIN_THRESHOLD, Go's division is the floor division
        return MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // span
    return trunc_div(MAX_NODE_SCORE * (clamped - MIN_THRESHOLD), span)


class _ImageIndex:
    """The images of one table's nodes: ``rows_of[name]`` are the rows of the
    nodes listing the image name, ``sizes[name]`` its size.

    The size is the one of the first node (in row order) listing the name:
    kube's cache keeps the size reported by the first node that had it.
    """

    __slots__ = ("table", "nodes_version", "nodes", "sizes", "rows_of", "_masks")

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self.nodes_version = table.nodes_version
        self.nodes: list[Node] = list(table.nodes)
        self.sizes: dict[str, int] = {}
        rows_of: dict[str, list[int]] = {}
        for row, node in enumerate(self.nodes):
            for image in node.images:
                for name in image.names:
                    self.sizes.setdefault(name, image.size_bytes)
                    rows = rows_of.setdefault(name, [])
                    if not rows or rows[-1] != row:  # a node counts once per name
                        rows.append(row)
        self.rows_of = {name: np.array(rows, dtype=np.int64) for name, rows in rows_of.items()}
        self._masks: dict[str, np.ndarray] = {}

    def mask_of(self, name: str) -> np.ndarray:
        """Bool per row: the node lists image ``name`` (built once per name and index)."""
        mask = self._masks.get(name)
        if mask is None:
            mask = self._masks[name] = np.zeros(len(self.nodes), dtype=bool)
            mask[self.rows_of[name]] = True
        return mask

    def still_valid(self, table: NodeTable) -> bool:
        """Built from ``table`` as its nodes are now (``nodes_version`` moves on every node write;
        the pods placed every cycle leave it alone)."""
        return self.table is table and self.nodes_version == table.nodes_version


def factory(args: None, handle: Handle) -> ImageLocality:
    return ImageLocality()


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, plugin_type=ImageLocality)
