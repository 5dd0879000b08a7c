"""scorer-networktraffic: the NetworkTraffic score plugin for scorer (entry point group ``scorer``)."""

from __future__ import annotations

from scorer.plugin import PluginRegistry, hookimpl
from scorer_networktraffic.plugin import NAME, NetworkTraffic, NetworkTrafficArgs, register

#: The plugin API this distribution is built for (``scorer.plugin.PLUGIN_API_VERSION``).
SCORER_PLUGIN_API = "1.0"

__all__ = ["NAME", "SCORER_PLUGIN_API", "NetworkTraffic", "NetworkTrafficArgs", "scorer_register_plugins"]


@hookimpl
def scorer_register_plugins(registry: PluginRegistry) -> None:
    register(registry)
