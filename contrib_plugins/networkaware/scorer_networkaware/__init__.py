"""scorer-networkaware: the NetworkAware filter and score plugin for scorer (entry point group ``scorer``)."""

from __future__ import annotations

from scorer.plugin import PluginRegistry, hookimpl
from scorer_networkaware.plugin import ERR_REASON, NAME, NetworkAware, NetworkAwareArgs, factory, register

#: The plugin API this distribution is built for (``scorer.plugin.PLUGIN_API_VERSION``).
SCORER_PLUGIN_API = "1.0"

__all__ = ["ERR_REASON", "NAME", "SCORER_PLUGIN_API", "NetworkAware", "NetworkAwareArgs", "factory",
           "scorer_register_plugins"]


@hookimpl
def scorer_register_plugins(registry: PluginRegistry) -> None:
    register(registry)
