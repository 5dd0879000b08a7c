"""scorer-networktraffic: the NetworkTraffic score plugin for scorer (entry point group ``scorer``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scorer.hookspecs import hookimpl
from scorer_networktraffic.plugin import NAME, NetworkTraffic, NetworkTrafficArgs, register

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry

__all__ = ["NAME", "NetworkTraffic", "NetworkTrafficArgs", "scorer_register_plugins"]


@hookimpl
def scorer_register_plugins(registry: PluginRegistry) -> None:
    register(registry)
