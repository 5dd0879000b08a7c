"""v1beta1 score plugins that became NodeResourcesFit scoring strategies.

In v1beta1, resource scoring was done by three score plugins with their own
args: ``NodeResourcesLeastAllocated`` and ``NodeResourcesMostAllocated``
(``resources``), and ``RequestedToCapacityRatio`` (``shape``, ``resources``).
v1beta2 replaced them with ``NodeResourcesFit.scoringStrategy``. scorer reads
them as that strategy, keeping the score weight.

The classes below are the v1beta1 args, decoded and validated at their own
paths before mapping, so errors point at what the user wrote. They are kept
apart from NodeResourcesFitArgs on purpose: they are frozen in time. What
v1beta1 checked of its own (weights) is checked here; the ``shape`` of
RequestedToCapacityRatio is checked by the args type NodeResourcesFit
registers in the catalog, which the shape becomes (``scorer.config.load``
reports those errors at the shape's own path), so the configuration layer
needs no plugin module and the shape rules exist once.
"""

from __future__ import annotations

from typing import Any

import attrs

from scorer.config.convert import unstructure

_MAX_WEIGHT = 100


@attrs.frozen(slots=True)
class LegacyResourceSpec:
    """v1beta1 ``ResourceSpec``."""

    name: str = ""
    weight: int = 0


@attrs.frozen(slots=True)
class LegacyShapePoint:
    """v1beta1 ``UtilizationShapePoint``."""

    utilization: int = attrs.field(default=0, metadata={"bits": 32})
    score: int = attrs.field(default=0, metadata={"bits": 32})


_DEFAULT_RESOURCES = (LegacyResourceSpec("cpu", 1), LegacyResourceSpec("memory", 1))


def _or_default(resources: Any) -> tuple[LegacyResourceSpec, ...]:
    return tuple(resources) if resources else _DEFAULT_RESOURCES


def _weights_or_one(resources: Any) -> tuple[LegacyResourceSpec, ...]:
    return tuple(r if r.weight else attrs.evolve(r, weight=1) for r in _or_default(resources))


def _weight_errors(resources: tuple[LegacyResourceSpec, ...]) -> list[tuple[str, str]]:
    # v1beta1 allowed weights above 100 for RequestedToCapacityRatio; NodeResourcesFit
    # does not, and that is what they are mapped to.
    return [
        (f"resources[{i}].weight", f"must be in 1..{_MAX_WEIGHT}")
        for i, r in enumerate(resources)
        if not 1 <= r.weight <= _MAX_WEIGHT
    ]


@attrs.frozen(slots=True)
class NodeResourcesLeastAllocatedArgs:
    """v1beta1 args: empty resources -> cpu and memory weight 1 (weight 0 is invalid)."""

    resources: tuple[LegacyResourceSpec, ...] = attrs.field(default=(), converter=_or_default)

    def validate(self) -> list[tuple[str, str]]:
        return _weight_errors(self.resources)


@attrs.frozen(slots=True)
class NodeResourcesMostAllocatedArgs:
    """v1beta1 args: empty resources -> cpu and memory weight 1 (weight 0 is invalid)."""

    resources: tuple[LegacyResourceSpec, ...] = attrs.field(default=(), converter=_or_default)

    def validate(self) -> list[tuple[str, str]]:
        return _weight_errors(self.resources)


@attrs.frozen(slots=True)
class RequestedToCapacityRatioArgs:
    """v1beta1 args: empty resources -> cpu and memory; weight 0 -> 1; shape required."""

    shape: tuple[LegacyShapePoint, ...] = ()
    resources: tuple[LegacyResourceSpec, ...] = attrs.field(default=(), converter=_weights_or_one)

    def validate(self) -> list[tuple[str, str]]:
        return _weight_errors(self.resources)


LEGACY_ARGS: dict[str, tuple[str, type]] = {
    "NodeResourcesLeastAllocated": ("LeastAllocated", NodeResourcesLeastAllocatedArgs),
    "NodeResourcesMostAllocated": ("MostAllocated", NodeResourcesMostAllocatedArgs),
    "RequestedToCapacityRatio": ("RequestedToCapacityRatio", RequestedToCapacityRatioArgs),
}


def scoring_strategy(name: str, args: Any) -> dict[str, Any]:
    """The v1 ``scoringStrategy`` mapping equivalent to legacy plugin ``name`` with ``args``."""
    strategy_type, _ = LEGACY_ARGS[name]
    strategy: dict[str, Any] = {"type": strategy_type, "resources": unstructure(args.resources)}
    if isinstance(args, RequestedToCapacityRatioArgs):
        strategy["requestedToCapacityRatio"] = {"shape": unstructure(args.shape)}
    return strategy
