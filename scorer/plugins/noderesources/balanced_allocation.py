"""NodeResourcesBalancedAllocation: favour nodes whose resource usage stays
balanced across resources once the pod is placed (kube ≤ 1.35
``noderesources/balanced_allocation.go``, reference §3.5).

For each configured resource with allocatable != 0 the fraction
``min((node requested + pod request) / allocatable, 1)`` is taken, with the
pods' actual requests (not the non-zero defaults). The score is
``int64((1 - std) * 100)`` where std is ``|f1 - f2| / 2`` for two fractions
and the population standard deviation for more. The float64 operations are
done in Go's order, so results match bit for bit. PreScore skips pods that
request none of the resources (best-effort pods would otherwise pile onto
one node, kubernetes#129138).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import numpy as np

from scorer.framework.status import Status
from scorer.framework.types import MAX_NODE_SCORE, NodeBatch
from scorer.inputs.describe import quote
from scorer.plugins.noderesources.resources import (
    DEFAULT_RESOURCES,
    ResourceSpec,
    allocatable_and_requested,
    default_resources,
    pod_requests,
)

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry
    from scorer.framework.cycle_state import CycleState
    from scorer.framework.runtime import Handle
    from scorer.model import Pod

NAME = "NodeResourcesBalancedAllocation"


@attrs.frozen(slots=True)
class NodeResourcesBalancedAllocationArgs:
    """Args of NodeResourcesBalancedAllocation.

    Defaulting: no resources -> cpu and memory weight 1; a weight of 0 -> 1.
    Validation: every weight must be 1 (weights are not used by the formula),
    names unique.
    """

    resources: tuple[ResourceSpec, ...] = attrs.field(default=DEFAULT_RESOURCES, converter=default_resources)

    def validate(self) -> list[tuple[str, str]]:
        errors: list[tuple[str, str]] = []
        seen: set[str] = set()
        for i, resource in enumerate(self.resources):
            if resource.name in seen:
                errors.append((f"resources[{i}].name", f"Duplicate value: {quote(resource.name)}"))
            seen.add(resource.name)
            if resource.weight != 1:
                errors.append((f"resources[{i}].weight", f"Invalid value: {resource.weight}: must be 1"))
        return errors


_PRE_SCORE_KEY = "PreScore" + NAME


@attrs.frozen(slots=True)
class _PreScoreState:
    requests: tuple[int, ...]  # the pod's actual request of each configured resource


def _pre_score_state(state: CycleState) -> _PreScoreState | None:
    found: _PreScoreState | None = state.get(_PRE_SCORE_KEY)
    return found


class NodeResourcesBalancedAllocation:
    name = NAME

    def __init__(self, args: NodeResourcesBalancedAllocationArgs) -> None:
        self.args = args
        self.resources = tuple(r.name for r in args.resources)

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status | None:
        requests = pod_requests(pod, self.resources, non_zero=False)
        if not any(requests):
            return Status.skip()
        state.write(_PRE_SCORE_KEY, _PreScoreState(requests))
        return None

    def score_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> np.ndarray:
        pre = _pre_score_state(state)
        requests = pre.requests if pre is not None else pod_requests(pod, self.resources, non_zero=False)
        if not any(requests):  # PreScore disabled, best-effort pod
            return np.zeros(len(nodes), dtype=np.int64)
        fractions: list[np.ndarray] = []
        included: list[np.ndarray | None] = []
        for resource, pod_request in zip(self.resources, requests, strict=True):
            pair = allocatable_and_requested(nodes, resource, pod_request, non_zero=False)
            if pair is None:
                continue
            allocatable, requested = pair
            if int(allocatable.min()) > 0:  # the common case: no node without the resource
                # int64 / int64 divides as float64, the same operation as below.
                fractions.append(np.minimum(requested / allocatable, 1.0))
                included.append(None)
                continue
            present = allocatable != 0
            fraction = np.divide(
                requested.astype(np.float64), allocatable.astype(np.float64),
                out=np.zeros(len(nodes), dtype=np.float64), where=present,
            )
            fractions.append(np.minimum(fraction, 1.0))
            included.append(present)
        return _balanced_score(fractions, included, len(nodes))


def _balanced_score(fractions: list[np.ndarray], included: list[np.ndarray | None], size: int) -> np.ndarray:
    """kube's balancedResourceScorer per node; fractions[i][n] counts where included[i][n]
    (``included[i]`` None: on every node)."""
    if len(fractions) == 2:  # the default (cpu, memory): no stacking needed
        if included[0] is None and included[1] is None:
            scores: np.ndarray = ((1.0 - np.abs((fractions[0] - fractions[1]) / 2)) * MAX_NODE_SCORE).astype(np.int64)
            return scores
        both = _present(included[0], size) & _present(included[1], size)
        return ((1.0 - np.where(both, np.abs((fractions[0] - fractions[1]) / 2), 0.0)) * MAX_NODE_SCORE).astype(
            np.int64
        )
    std = np.zeros(size, dtype=np.float64)
    if fractions:
        frac = np.stack(fractions, axis=1)
        mask = np.stack([_present(m, size) for m in included], axis=1)
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


def _present(mask: np.ndarray | None, size: int) -> np.ndarray:
    return np.ones(size, dtype=bool) if mask is None else mask


def factory(args: NodeResourcesBalancedAllocationArgs | None, handle: Handle) -> NodeResourcesBalancedAllocation:
    return NodeResourcesBalancedAllocation(args if args is not None else NodeResourcesBalancedAllocationArgs())


def register(registry: PluginRegistry) -> None:
    registry.register(
        NAME, factory, args_type=NodeResourcesBalancedAllocationArgs, plugin_type=NodeResourcesBalancedAllocation
    )
