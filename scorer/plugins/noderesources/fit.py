"""NodeResourcesFit: Filter on free allocatable resources; Score with one of
three strategies (LeastAllocated, MostAllocated, RequestedToCapacityRatio).

Integer arithmetic exactly as kube-scheduler (reference §3.4, §3.5): the
filter uses the pods' actual requests; scoring uses non-zero requests
(100m CPU, 200Mi memory per container that sets none) for cpu and memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import numpy as np

from scorer.framework import Code, FilterVerdict, NodeBatch, Status
from scorer.framework.types import MAX_NODE_SCORE
from scorer.plugins.helper.normalize import trunc_div
from scorer.plugins.noderesources.args import NodeResourcesFitArgs
from scorer.state import BASE_RESOURCES, PODS

if TYPE_CHECKING:
    from scorer.framework import CycleState
    from scorer.framework.catalog import PluginRegistry
    from scorer.model import Pod

NAME = "NodeResourcesFit"
_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10


def is_scalar_resource(name: str) -> bool:
    """Extended, hugepages and other non-native resources (kube's IsScalarResourceName)."""
    return name not in BASE_RESOURCES


@attrs.frozen(slots=True)
class _FilterState:
    requests: tuple[tuple[str, int], ...]  # (resource, amount > 0), kube's check order


class NodeResourcesFit:
    name = NAME

    def __init__(self, args: NodeResourcesFitArgs) -> None:
        self.args = args
        self.ignored_resources = frozenset(args.ignored_resources)
        self.ignored_groups = frozenset(args.ignored_resource_groups)
        strategy = args.scoring_strategy
        self.strategy = strategy.type
        self.resources = tuple((r.name, int(r.weight)) for r in strategy.resources)
        self.shape: tuple[tuple[int, int], ...] = ()
        if self.strategy == REQUESTED_TO_CAPACITY_RATIO and strategy.requested_to_capacity_ratio is not None:
            scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
            self.shape = tuple(
                (int(p.utilization), int(p.score) * scale) for p in strategy.requested_to_capacity_ratio.shape
            )

    # -- filter --------------------------------------------------------------------
    def _ignored(self, resource: str) -> bool:
        if resource in self.ignored_resources:
            return True
        group = resource.split("/", 1)[0] if "/" in resource else None
        return group is not None and group in self.ignored_groups

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status | None:
        requests = []
        for resource in ("cpu", "memory", "ephemeral-storage"):
            value = pod.requests.get(resource, 0)
            if value > 0:
                requests.append((resource, value))
        for resource in sorted(r for r in pod.requests if is_scalar_resource(r)):
            value = pod.requests[resource]
            if value > 0 and not self._ignored(resource):
                requests.append((resource, value))
        state.write(_PRE_FILTER_KEY, _FilterState(tuple(requests)))
        return None

    def filter_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> FilterVerdict:
        pre: _FilterState = state.read(_PRE_FILTER_KEY)
        table = nodes.table
        rows = nodes.rows
        verdict = FilterVerdict(len(nodes))
        allowed = table.allocatable[rows, PODS]
        verdict.reject(table.requested[rows, PODS] + 1 > allowed, "Too many pods")
        for resource, amount in pre.requests:
            col = table.resource_index.get(resource)
            if col is None:
                allocatable = np.zeros(len(rows), dtype=np.int64)
                requested = allocatable
            else:
                allocatable = table.allocatable[rows, col]
                requested = table.requested[rows, col]
            insufficient = amount > allocatable - requested
            unresolvable = amount > allocatable
            reason = f"Insufficient {resource}"
            verdict.reject(insufficient & ~unresolvable, reason, Code.UNSCHEDULABLE)
            verdict.reject(insufficient & unresolvable, reason, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        return verdict

    # -- score -----------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status | None:
        requests = []
        for resource, _ in self.resources:
            if resource == "cpu":
                requests.append(pod.non_zero_cpu)
            elif resource == "memory":
                requests.append(pod.non_zero_memory)
            else:
                requests.append(pod.requests.get(resource, 0))
        state.write(_PRE_SCORE_KEY, tuple(requests))
        return None

    def _allocatable_requested(self, nodes: NodeBatch, resource: str, pod_request: int
                               ) -> tuple[np.ndarray, np.ndarray] | None:
        """kube's calculateResourceAllocatableRequest for all nodes; None = resource skipped."""
        if pod_request == 0 and is_scalar_resource(resource):
            return None
        table = nodes.table
        col = table.resource_index.get(resource)
        if col is None:
            return None
        allocatable = table.allocatable[nodes.rows, col]
        if resource in ("cpu", "memory"):
            used = table.non_zero_requested[nodes.rows, 0 if resource == "cpu" else 1]
        else:
            used = table.requested[nodes.rows, col]
        return allocatable, used + pod_request

    def score_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> np.ndarray:
        pod_requests = state.get(_PRE_SCORE_KEY)
        if pod_requests is None:
            self.pre_score(state, pod, nodes)
            pod_requests = state.read(_PRE_SCORE_KEY)
        n = len(nodes)
        total = np.zeros(n, dtype=np.int64)
        weight_sum = np.zeros(n, dtype=np.int64)
        for (resource, weight), pod_request in zip(self.resources, pod_requests, strict=True):
            pair = self._allocatable_requested(nodes, resource, pod_request)
            if pair is None:
                continue
            allocatable, requested = pair
            present = allocatable != 0
            safe_alloc = np.where(present, allocatable, 1)
            if self.strategy == LEAST_ALLOCATED:
                score = np.where(requested > allocatable, 0, (allocatable - requested) * MAX_NODE_SCORE // safe_alloc)
                include = present
            elif self.strategy == MOST_ALLOCATED:
                score = np.minimum(requested, allocatable) * MAX_NODE_SCORE // safe_alloc
                include = present
            else:
                utilization = np.where(requested > allocatable, MAX_UTILIZATION,
                                       requested * MAX_UTILIZATION // safe_alloc)
                score = self._broken_linear(utilization)
                include = present & (score > 0)
            total += np.where(include, score * weight, 0)
            weight_sum += np.where(include, weight, 0)
        safe_sum = np.where(weight_sum == 0, 1, weight_sum)
        if self.strategy == REQUESTED_TO_CAPACITY_RATIO:
            # math.Round(total / weightSum), half away from zero; both are >= 0.
            result = (2 * total + safe_sum) // (2 * safe_sum)
        else:
            result = total // safe_sum
        return np.where(weight_sum == 0, 0, result)

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


def factory(args: NodeResourcesFitArgs | None, handle: Any) -> NodeResourcesFit:
    return NodeResourcesFit(args if args is not None else NodeResourcesFitArgs())


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, args_type=NodeResourcesFitArgs, plugin_type=NodeResourcesFit)
