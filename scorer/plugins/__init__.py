"""Built-in plugins, registered through the same hook as third-party ones."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scorer.hookspecs import hookimpl

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry


@hookimpl
def scorer_register_plugins(registry: PluginRegistry) -> None:
    """Register kube-scheduler's plugins that scorer implements."""
    from scorer.plugins import (
        defaultbinder,
        imagelocality,
        nodeaffinity,
        nodename,
        nodeports,
        nodeunschedulable,
        queuesort,
        schedulinggates,
        tainttoleration,
    )
    from scorer.plugins.noderesources import balanced_allocation, fit

    for module in (schedulinggates, queuesort, nodeunschedulable, nodename, tainttoleration,
                   nodeaffinity, nodeports, fit, balanced_allocation, imagelocality, defaultbinder):
        module.register(registry)
