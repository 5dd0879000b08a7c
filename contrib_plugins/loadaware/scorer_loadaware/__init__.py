"""scorer-loadaware: the LoadAware filter and score plugin for scorer (entry point group ``scorer``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scorer.hookspecs import hookimpl
from scorer_loadaware.plugin import (
    METRICS,
    NAME,
    EstimatorArgs,
    LoadAware,
    LoadAwareArgs,
    ResourceWeight,
    UsageThresholds,
    least_utilized,
    register,
    target_packing,
)

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry

__all__ = [
    "METRICS",
    "NAME",
    "EstimatorArgs",
    "LoadAware",
    "LoadAwareArgs",
    "ResourceWeight",
    "UsageThresholds",
    "least_utilized",
    "scorer_register_plugins",
    "target_packing",
]


@hookimpl
def scorer_register_plugins(registry: PluginRegistry) -> None:
    register(registry)
