"""scorer-loadaware: the LoadAware filter and score plugin for scorer (entry point group ``scorer``)."""

from __future__ import annotations

from scorer.plugin import PluginRegistry, hookimpl
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

#: The plugin API this distribution is built for (``scorer.plugin.PLUGIN_API_VERSION``).
SCORER_PLUGIN_API = "1.0"

__all__ = [
    "METRICS",
    "NAME",
    "EstimatorArgs",
    "LoadAware",
    "LoadAwareArgs",
    "SCORER_PLUGIN_API",
    "ResourceWeight",
    "UsageThresholds",
    "least_utilized",
    "scorer_register_plugins",
    "target_packing",
]


@hookimpl
def scorer_register_plugins(registry: PluginRegistry) -> None:
    register(registry)
