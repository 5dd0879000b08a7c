"""NodeResourcesFitArgs (kubescheduler.config.k8s.io/v1) with kube's defaults and validation.

Defaulting (``SetDefaults_NodeResourcesFitArgs``): no ``scoringStrategy`` ->
LeastAllocated over cpu and memory with weight 1; a strategy with no
resources -> cpu and memory weight 1; a resource weight of 0 -> 1. The
strategy ``type`` is not defaulted when a strategy is given.

Validation (``ValidateNodeResourcesFitArgs``; kube runs it when the plugin is
built, scorer when the configuration is loaded so errors carry their path):
type is one of the three strategies, weights in 1..100,
RequestedToCapacityRatio needs ``requestedToCapacityRatio`` (and nothing
else may have it), shape rules, ignored resources are qualified names and
resource groups have no ``/``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from scorer.config.validation import qualified_name_errors, quote

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
SCORING_STRATEGY_TYPES: tuple[str, ...] = (
    LEAST_ALLOCATED,
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
)

MAX_RESOURCE_WEIGHT = 100
MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10  # shape scores are 0..10, scaled to 0..100 when scoring


@attrs.frozen(slots=True)
class ResourceSpec:
    """A resource to score and its weight."""

    name: str = ""
    weight: int = 0


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
        """kube's ``validateFunctionShape``."""
        return shape_errors(self.shape)


DEFAULT_RESOURCES: tuple[ResourceSpec, ...] = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))


def _default_resources(resources: Any) -> tuple[ResourceSpec, ...]:
    """Empty -> cpu and memory weight 1; weight 0 -> 1 (kube's defaulting)."""
    if not resources:
        return DEFAULT_RESOURCES
    return tuple(r if r.weight != 0 else attrs.evolve(r, weight=1) for r in resources)


@attrs.frozen(slots=True)
class ScoringStrategy:
    """``scoringStrategy``: how NodeResourcesFit scores nodes."""

    type: str = ""
    resources: tuple[ResourceSpec, ...] = attrs.field(default=(), converter=_default_resources)
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None

    def validate(self) -> list[tuple[str, str]]:
        errors: list[tuple[str, str]] = []
        if self.type not in SCORING_STRATEGY_TYPES:
            supported = ", ".join(quote(t) for t in SCORING_STRATEGY_TYPES)
            errors.append(
                ("type", f"Unsupported value: {quote(self.type)}: supported values: {supported}")
            )
        for i, resource in enumerate(self.resources):
            if not 1 <= resource.weight <= MAX_RESOURCE_WEIGHT:
                errors.append((f"resources[{i}].weight", f"must be in 1..{MAX_RESOURCE_WEIGHT}"))
        if self.type == REQUESTED_TO_CAPACITY_RATIO and self.requested_to_capacity_ratio is None:
            errors.append(
                (
                    "requestedToCapacityRatio",
                    f"Required value: required when type is {REQUESTED_TO_CAPACITY_RATIO}",
                )
            )
        if (
            self.type != REQUESTED_TO_CAPACITY_RATIO
            and self.requested_to_capacity_ratio is not None
        ):
            errors.append(
                (
                    "requestedToCapacityRatio",
                    f"Forbidden: only allowed when type is {REQUESTED_TO_CAPACITY_RATIO}",
                )
            )
        return errors


def _default_strategy() -> ScoringStrategy:
    return ScoringStrategy(type=LEAST_ALLOCATED)


@attrs.frozen(slots=True)
class NodeResourcesFitArgs:
    """Args of the NodeResourcesFit plugin.

    ``ignored_resources`` and ``ignored_resource_groups`` (the part before
    ``/``) only affect the filter. ``scoring_strategy`` drives the score.
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


def shape_errors(shape: Sequence[Any]) -> list[tuple[str, str]]:
    """kube's ``validateFunctionShape`` for points with ``utilization`` and ``score``."""
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
