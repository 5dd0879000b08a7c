"""NodeResourcesBalancedAllocation: favour nodes whose resource usage stays
balanced across resources once the pod is placed (kube ≤ 1.35 formula,
reference §3.5).

For each configured resource with allocatable > 0 the fraction
``min((node requested + pod request) / allocatable, 1)`` is taken, with the
pods' actual requests (not the non-zero defaults). The score is
``int64((1 - std) * 100)`` where std is ``|f1 - f2| / 2`` for two fractions
and the population standard deviation for more. The float64 operations are
done in Go's order, so results match bit for bit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from scorer.config.validation import extended_resource_name_errors, quote
from scorer.framework import NodeBatch, Status
from scorer.framework.types import MAX_NODE_SCORE
from scorer.plugins.noderesources.args import DEFAULT_RESOURCES, ResourceSpec, _default_resources

if TYPE_CHECKING:
    from scorer.framework import CycleState
    from scorer.framework.catalog import PluginRegistry
    from scorer.model import Pod

NAME = "NodeResourcesBalancedAllocation"
_PRE_SCORE_KEY = "PreScore" + NAME

# Resources kube reads from NodeInfo's own fields; others are scalar resources.
_NATIVE = ("cpu", "memory", "ephemeral-storage")


@attrs.frozen(slots=True)
class NodeResourcesBalancedAllocationArgs:
    """Args of NodeResourcesBalancedAllocation.

    Defaulting: no resources -> cpu and memory weight 1; a weight of 0 -> 1.
    Validation: every weight must be 1 (weights are not used by the formula),
    names unique.
    """

    resources: tuple[ResourceSpec, ...] = attrs.field(
        default=DEFAULT_RESOURCES, converter=_default_resources
    )

    def validate(self) -> list[tuple[str, str]]:
        errors: list[tuple[str, str]] = []
        seen: set[str] = set()
        for i, resource in enumerate(self.resources):
            if resource.name in seen:
                errors.append((f"resources[{i}].name", f"Duplicate value: {quote(resource.name)}"))
            seen.add(resource.name)
            if resource.weight != 1:
                message = f"Invalid value: {resource.weight}: must be 1"
                errors.append((f"resources[{i}].weight", message))
        return errors


def is_scalar_resource(name: str) -> bool:
    """kube's ``IsScalarResourceName``: extended, hugepages, ``*kubernetes.io/*``
    and attachable-volumes resources. ``pods`` and unknown unprefixed names are not."""
    return (
        name.startswith(("hugepages-", "attachable-volumes-"))
        or "kubernetes.io/" in name
        or not extended_resource_name_errors(name)
    )


class NodeResourcesBalancedAllocation:
    name = NAME

    def __init__(self, args: NodeResourcesBalancedAllocationArgs) -> None:
        self.args = args
        self.resources = tuple(r.name for r in args.resources)

    def _pod_requests(self, pod: Pod) -> tuple[int, ...]:
        return tuple(pod.requests.get(resource, 0) for resource in self.resources)

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status | None:
        requests = self._pod_requests(pod)
        if not any(requests):
            # Best-effort pods would otherwise pile onto one node (kubernetes#129138).
            return Status.skip()
        state.write(_PRE_SCORE_KEY, requests)
        return None

    def _allocatable_requested(self, nodes: NodeBatch, resource: str, pod_request: int
                               ) -> tuple[np.ndarray, np.ndarray] | None:
        """kube's calculateResourceAllocatableRequest (useRequested); None = resource skipped."""
        if resource not in _NATIVE and (pod_request == 0 or not is_scalar_resource(resource)):
            return None
        col = nodes.table.resource_index.get(resource)
        if col is None:
            return None
        rows = nodes.rows
        return nodes.table.allocatable[rows, col], nodes.table.requested[rows, col] + pod_request

    def score_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> np.ndarray:
        requests = state.get(_PRE_SCORE_KEY)
        if requests is None:  # PreScore disabled
            requests = self._pod_requests(pod)
            if not any(requests):
                return np.zeros(len(nodes), dtype=np.int64)
        fractions = []
        included = []
        for resource, pod_request in zip(self.resources, requests, strict=True):
            pair = self._allocatable_requested(nodes, resource, pod_request)
            if pair is None:
                continue
            allocatable, requested = pair
            present = allocatable != 0
            with np.errstate(divide="ignore", invalid="ignore"):
                fraction = requested.astype(np.float64) / allocatable.astype(np.float64)
            fractions.append(np.where(present, np.minimum(fraction, 1.0), 0.0))
            included.append(present)
        return _balanced_score(fractions, included, len(nodes))


def _balanced_score(
    fractions: list[np.ndarray], included: list[np.ndarray], size: int
) -> np.ndarray:
    """kube's balancedResourceScorer per node; fractions[i][n] counts where included[i][n]."""
    std = np.zeros(size, dtype=np.float64)
    if fractions:
        frac = np.stack(fractions, axis=1)
        mask = np.stack(included, axis=1)
        count = mask.sum(axis=1)
        # Exactly two: |f_first - f_second| / 2 (Go: math.Abs((f0 - f1) / 2)).
        two = count == 2
        if two.any():
            first = mask.argmax(axis=1)
            last = mask.shape[1] - 1 - mask[:, ::-1].argmax(axis=1)
            f0 = np.take_along_axis(frac, first[:, None], axis=1)[:, 0]
            f1 = np.take_along_axis(frac, last[:, None], axis=1)[:, 0]
            std = np.where(two, np.abs((f0 - f1) / 2), std)
        # More than two: population std, sums accumulated in resource order as Go does.
        many = count > 2
        if many.any():
            total = np.zeros(size, dtype=np.float64)
            for i in range(frac.shape[1]):
                total = np.where(mask[:, i], total + frac[:, i], total)
            mean = total / np.where(many, count, 1)
            squares = np.zeros(size, dtype=np.float64)
            for i in range(frac.shape[1]):
                deviation = frac[:, i] - mean
                squares = np.where(mask[:, i], squares + deviation * deviation, squares)
            std = np.where(many, np.sqrt(squares / np.where(many, count, 1)), std)
    # int64((1 - std) * 100): conversion truncates toward zero; the value is >= 0.
    return ((1.0 - std) * float(MAX_NODE_SCORE)).astype(np.int64)


def factory(
    args: NodeResourcesBalancedAllocationArgs | None, handle: Any
) -> NodeResourcesBalancedAllocation:
    if args is None:
        args = NodeResourcesBalancedAllocationArgs()
    return NodeResourcesBalancedAllocation(args)


def register(registry: PluginRegistry) -> None:
    registry.register(
        NAME,
        factory,
        args_type=NodeResourcesBalancedAllocationArgs,
        plugin_type=NodeResourcesBalancedAllocation,
    )
