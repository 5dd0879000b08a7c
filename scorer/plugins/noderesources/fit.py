"""NodeResourcesFit: Filter on free allocatable resources; Score with one of
three strategies (kube's ``noderesources/fit.go``, reference §2.3, §3.4, §3.5).

Filter: a node fits when its pod count stays within ``pods`` and, for every
resource the pod requests (cpu, memory, ephemeral-storage and scalar
resources, minus ignored extended resources), ``request <= allocatable -
requested``; a request above the allocatable itself is unresolvable. The
filter uses the pods' actual requests.

Score, per resource ``r`` with allocatable > 0 (scoring uses the non-zero
requests, 100m CPU and 200Mi memory per container that sets none):

* LeastAllocated: ``(allocatable - requested) * 100 / allocatable`` (0 when over);
* MostAllocated: ``min(requested, allocatable) * 100 / allocatable``;
* RequestedToCapacityRatio: the shape's broken-linear function of
  ``requested * 100 / allocatable`` (100 when over), shape scores x10.

The node score is the weighted mean in integers (RequestedToCapacityRatio
rounds it half away from zero and counts only resources scoring > 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs
import numpy as np

from scorer.framework.events import (
    ADD,
    ASSIGNED_POD,
    DELETE,
    NODE,
    UPDATE_NODE_ALLOCATABLE,
    ClusterEvent,
)
from scorer.framework.status import Code, Status
from scorer.framework.types import MAX_NODE_SCORE, FilterVerdict, NodeBatch
from scorer.inputs.describe import quote
from scorer.inputs.names import qualified_name_errors
from scorer.plugins.helper.normalize import trunc_div
from scorer.plugins.noderesources.resources import (
    NATIVE_RESOURCES,
    ResourceSpec,
    allocatable_and_requested,
    default_resources,
    is_extended_resource,
    is_scalar_resource,
    pod_requests,
    scaled_ratio,
)

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry
    from scorer.framework.cycle_state import CycleState
    from scorer.framework.runtime import Handle
    from scorer.model import Pod

NAME = "NodeResourcesFit"
ERR_REASON_TOO_MANY_PODS = "Too many pods"
ERR_REASON_INSUFFICIENT = "Insufficient {}"

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
SCORING_STRATEGY_TYPES: tuple[str, ...] = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
MAX_RESOURCE_WEIGHT = 100
MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10  # shape scores are 0..10, scaled to 0..100 when scoring


@attrs.frozen(slots=True)
class UtilizationShapePoint:
    """A point of the RequestedToCapacityRatio function: utilization 0..100 -> score 0..10."""

    utilization: int = attrs.field(default=0, metadata={"bits": 32})
    score: int = attrs.field(default=0, metadata={"bits": 32})


@attrs.frozen(slots=True)
class RequestedToCapacityRatioParam:
    """``scoringStrategy.requestedToCapacityRatio``: the piecewise linear shape."""

    shape: tuple[UtilizationShapePoint, ...] = ()

    def validate(self) -> list[tuple[str, str]]:
        return shape_errors(self.shape)


@attrs.frozen(slots=True)
class ScoringStrategy:
    """``scoringStrategy``: how NodeResourcesFit scores nodes. ``resources`` are
    defaulted as kube does (empty -> cpu and memory weight 1; weight 0 -> 1)."""

    type: str = ""
    resources: tuple[ResourceSpec, ...] = attrs.field(default=(), converter=default_resources)
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None

    def validate(self) -> list[tuple[str, str]]:
        errors: list[tuple[str, str]] = []
        if self.type not in SCORING_STRATEGY_TYPES:
            supported = ", ".join(quote(t) for t in SCORING_STRATEGY_TYPES)
            errors.append(("type", f"Unsupported value: {quote(self.type)}: supported values: {supported}"))
        for i, resource in enumerate(self.resources):
            if not 1 <= resource.weight <= MAX_RESOURCE_WEIGHT:
                errors.append((f"resources[{i}].weight", f"must be in 1..{MAX_RESOURCE_WEIGHT}"))
        has_ratio = self.requested_to_capacity_ratio is not None
        if self.type == REQUESTED_TO_CAPACITY_RATIO and not has_ratio:
            message = f"Required value: required when type is {REQUESTED_TO_CAPACITY_RATIO}"
            errors.append(("requestedToCapacityRatio", message))
        if self.type != REQUESTED_TO_CAPACITY_RATIO and has_ratio:
            message = f"Forbidden: only allowed when type is {REQUESTED_TO_CAPACITY_RATIO}"
            errors.append(("requestedToCapacityRatio", message))
        return errors


def _default_strategy() -> ScoringStrategy:
    return ScoringStrategy(type=LEAST_ALLOCATED)


@attrs.frozen(slots=True)
class NodeResourcesFitArgs:
    """Args of NodeResourcesFit (kubescheduler.config.k8s.io/v1), with kube's defaults.

    ``ignored_resources`` and ``ignored_resource_groups`` (the part before
    ``/``) name extended resources the filter does not check.
    ``scoring_strategy`` drives the score; none given -> LeastAllocated over
    cpu and memory. Validation (``ValidateNodeResourcesFitArgs``) runs when
    the configuration is loaded, so errors carry their path.
    """

    ignored_resources: tuple[str, ...] = ()
    ignored_resource_groups: tuple[str, ...] = ()
    scoring_strategy: ScoringStrategy = attrs.field(factory=_default_strategy)

    def validate(self) -> list[tuple[str, str]]:
        """Checks of the fields of this object; the strategy validates itself."""
        errors: list[tuple[str, str]] = []
        for i, name in enumerate(self.ignored_resources):
            errors.extend((f"ignoredResources[{i}]", msg) for msg in qualified_name_errors(name))
        for i, group in enumerate(self.ignored_resource_groups):
            path = f"ignoredResourceGroups[{i}]"
            if "/" in group:
                errors.append((path, "resource group name can't contain '/'"))
            errors.extend((path, msg) for msg in qualified_name_errors(group))
        return errors


def shape_errors(shape: Sequence[UtilizationShapePoint]) -> list[tuple[str, str]]:
    """kube's ``validateFunctionShape``: at least one point, utilization strictly
    increasing (first offender only), utilization in 0..100, score in 0..10."""
    if not shape:
        return [("shape", "Required value: at least one point must be specified")]
    errors: list[tuple[str, str]] = []
    for i in range(1, len(shape)):
        if shape[i - 1].utilization >= shape[i].utilization:
            errors.append((f"shape[{i}].utilization", "utilization values must be sorted in increasing order"))
            break
    for i, point in enumerate(shape):
        if not 0 <= point.utilization <= MAX_UTILIZATION:
            errors.append((f"shape[{i}].utilization", f"not in valid range [0, {MAX_UTILIZATION}]"))
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            errors.append((f"shape[{i}].score", f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"))
    return errors


_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME


@attrs.frozen(slots=True)
class _PreFilterState:
    requests: tuple[tuple[str, int], ...]  # (resource, amount > 0), kube's check order


@attrs.frozen(slots=True)
class _PreScoreState:
    requests: tuple[int, ...]  # the pod's scoring request of each strategy resource


def _pre_filter_state(state: CycleState) -> _PreFilterState:
    found: _PreFilterState = state.read(_PRE_FILTER_KEY)
    return found


def _pre_score_state(state: CycleState) -> _PreScoreState | None:
    found: _PreScoreState | None = state.get(_PRE_SCORE_KEY)
    return found


class NodeResourcesFit:
    name = NAME

    def __init__(self, args: NodeResourcesFitArgs) -> None:
        self.args = args
        self.ignored_resources = frozenset(args.ignored_resources)
        self.ignored_groups = frozenset(args.ignored_resource_groups)
        strategy = args.scoring_strategy
        self.strategy = strategy.type
        self.resources = tuple((r.name, int(r.weight)) for r in strategy.resources)
        self.resource_names = tuple(name for name, _ in self.resources)
        self.shape: tuple[tuple[int, int], ...] = ()
        if self.strategy == REQUESTED_TO_CAPACITY_RATIO and strategy.requested_to_capacity_ratio is not None:
            scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
            self.shape = tuple(
                (int(p.utilization), int(p.score) * scale) for p in strategy.requested_to_capacity_ratio.shape
            )

    def events_to_register(self) -> list[ClusterEvent]:
        """A bound pod leaving frees resources; a new node or more allocatable adds some."""
        return [
            ClusterEvent(ASSIGNED_POD, DELETE),
            ClusterEvent(NODE, ADD),
            ClusterEvent(NODE, UPDATE_NODE_ALLOCATABLE),
        ]

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status | None:
        requests = [(r, pod.requests.get(r, 0)) for r in NATIVE_RESOURCES if pod.requests.get(r, 0) > 0]
        for resource in sorted(r for r in pod.requests if r not in NATIVE_RESOURCES and is_scalar_resource(r)):
            value = pod.requests[resource]
            if value > 0 and not self._ignored(resource):
                requests.append((resource, value))
        state.write(_PRE_FILTER_KEY, _PreFilterState(tuple(requests)))
        return None

    def filter_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> FilterVerdict | None:
        pre = _pre_filter_state(state)
        if self._fits_everywhere(pre, nodes):
            return None
        verdict = FilterVerdict(len(nodes))
        verdict.reject(nodes.requested("pods") + 1 > nodes.allocatable("pods"), ERR_REASON_TOO_MANY_PODS)
        for resource, amount in pre.requests:
            allocatable = nodes.allocatable(resource)
            insufficient = amount > allocatable - nodes.requested(resource)
            unresolvable = amount > allocatable
            reason = ERR_REASON_INSUFFICIENT.format(resource)
            verdict.reject(insufficient & ~unresolvable, reason, Code.UNSCHEDULABLE)
            verdict.reject(insufficient & unresolvable, reason, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        return verdict

    @staticmethod
    def _fits_everywhere(pre: _PreFilterState, nodes: NodeBatch) -> bool:
        """True when no node of the batch lacks room: the pod count and every request
        within ``allocatable - requested`` (one pass over the batch's resource matrices;
        ``filter_batch`` then rejects nothing). False when any check fails or a requested
        resource has no column: the filter then finds which nodes and why."""
        index = nodes.table.resource_index
        free = nodes.resource_matrix("allocatable") - nodes.resource_matrix("requested")
        if (free[:, index["pods"]] < 1).any():
            return False
        for resource, amount in pre.requests:
            col = index.get(resource)
            if col is None or (free[:, col] < amount).any():
                return False
        return True

    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status | None:
        state.write(_PRE_SCORE_KEY, _PreScoreState(pod_requests(pod, self.resource_names, non_zero=True)))
        return None

    def score_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> np.ndarray:
        pre = _pre_score_state(state)
        requests = pre.requests if pre is not None else pod_requests(pod, self.resource_names, non_zero=True)
        total = np.zeros(len(nodes), dtype=np.int64)
        weight_sum = np.zeros(len(nodes), dtype=np.int64)
        for (resource, weight), pod_request in zip(self.resources, requests, strict=True):
            pair = allocatable_and_requested(nodes, resource, pod_request, non_zero=True)
            if pair is None:
                continue
            score, include = self._resource_score(*pair)
            if weight == 1:
                total += score
                weight_sum += include
            else:
                total += score * weight
                weight_sum += include * weight
        # Where no resource counts the score is 0; when every node has one (the common case)
        # the masking below changes nothing and is skipped.
        counted_everywhere = not len(weight_sum) or int(weight_sum.min()) > 0
        safe_sum = weight_sum if counted_everywhere else np.where(weight_sum == 0, 1, weight_sum)
        if self.strategy == REQUESTED_TO_CAPACITY_RATIO:
            # math.Round(total / weightSum), half away from zero; both are >= 0.
            result = (2 * total + safe_sum) // (2 * safe_sum)
        else:
            result = total // safe_sum
        return result if counted_everywhere else np.where(weight_sum == 0, 0, result)

    def _ignored(self, resource: str) -> bool:
        """Only extended resources can be ignored, by name or by the group before ``/``."""
        if not is_extended_resource(resource):
            return False
        return resource in self.ignored_resources or resource.split("/", 1)[0] in self.ignored_groups

    def _resource_score(self, allocatable: np.ndarray, requested: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One resource's score per node (0 where it does not count) and where it counts:
        allocatable != 0, and for RequestedToCapacityRatio a score > 0."""
        present = allocatable != 0
        capacity = np.maximum(allocatable, 0)
        if self.strategy == LEAST_ALLOCATED:
            free = np.maximum(capacity - requested, 0)
            return scaled_ratio(free, capacity, MAX_NODE_SCORE), present
        used = np.minimum(requested, capacity)
        if self.strategy == MOST_ALLOCATED:
            return scaled_ratio(used, capacity, MAX_NODE_SCORE), present
        # Over capacity counts as full utilization: min(requested, capacity) gives exactly 100.
        score = self._broken_linear(scaled_ratio(used, capacity, MAX_UTILIZATION))
        include = present & (score > 0)
        return np.where(include, score, 0), include

    def _broken_linear(self, utilization: np.ndarray) -> np.ndarray:
        """kube's BuildBrokenLinearFunction over the scaled shape (Go integer division)."""
        shape = self.shape
        out = np.full(len(utilization), shape[-1][1], dtype=np.int64)
        done = np.zeros(len(utilization), dtype=bool)
        for i, (x, y) in enumerate(shape):
            hit = (utilization <= x) & ~done
            if i == 0:
                value = np.full(len(utilization), y, dtype=np.int64)
            else:
                x0, y0 = shape[i - 1]
                value = y0 + trunc_div((y - y0) * (utilization - x0), x - x0)
            out = np.where(hit, value, out)
            done |= hit
        return out


def factory(args: NodeResourcesFitArgs | None, handle: Handle) -> NodeResourcesFit:
    return NodeResourcesFit(args if args is not None else NodeResourcesFitArgs())


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, args_type=NodeResourcesFitArgs, plugin_type=NodeResourcesFit)
