"""scorer-networkaware: the NetworkAware filter and score plugin for scorer (entry point group ``scorer``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scorer.hookspecs import hookimpl
from scorer_networkaware.plugin import ERR_REASON, NAME, NetworkAware, NetworkAwareArgs, factory, register

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry

__all__ = ["ERR_REASON", "NAME", "NetworkAware", "NetworkAwareArgs", "factory", "scorer_register_plugins"]


@hookimpl
def scorer_register_plugins(registry: PluginRegistry) -> None:
    register(registry)
