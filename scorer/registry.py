"""The composition root of plugins: a pluggy manager built by a factory.

``build_registry`` registers the built-ins, then the entry points of the
``scorer`` group, and fills a ``PluginRegistry`` (``scorer.framework.catalog``)
with what they register.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import Iterable
from typing import Any

import pluggy

import scorer
from scorer import hookspecs
from scorer.framework.catalog import (
    EXTENSION_POINTS,
    POINT_METHODS,
    LoadFailure,
    PluginInfo,
    PluginRegistry,
    extension_points_of,
)
from scorer.hookspecs import hookimpl
from scorer.plugins import (
    defaultbinder,
    defaultpreemption,
    imagelocality,
    interpodaffinity,
    nodeaffinity,
    nodename,
    nodeports,
    nodeunschedulable,
    nodevolumelimits,
    podtopologyspread,
    queuesort,
    schedulinggates,
    tainttoleration,
    volumebinding,
    volumerestrictions,
    volumezone,
)
from scorer.plugins.noderesources import balanced_allocation, fit

__all__ = [
    "AUTOLOAD_ENV",
    "ENTRY_POINT_GROUP",
    "EXTENSION_POINTS",
    "POINT_METHODS",
    "LoadFailure",
    "PluginInfo",
    "PluginRegistry",
    "build_registry",
    "extension_points_of",
]

ENTRY_POINT_GROUP = "scorer"
AUTOLOAD_ENV = "SCORER_DISABLE_PLUGIN_AUTOLOAD"

# The built-in plugin modules, in kube-scheduler's default order (§2.1).
BUILTIN_PLUGINS = (
    schedulinggates,
    queuesort,
    nodeunschedulable,
    nodename,
    tainttoleration,
    nodeaffinity,
    nodeports,
    fit,
    volumerestrictions,
    nodevolumelimits,
    volumebinding,
    volumezone,
    podtopologyspread,
    interpodaffinity,
    defaultpreemption,
    balanced_allocation,
    imagelocality,
    defaultbinder,
)


class _Builtins:
    """scorer's own hook implementation: registers the built-in plugins."""

    @hookimpl
    def scorer_register_plugins(self, registry: PluginRegistry) -> None:
        for module in BUILTIN_PLUGINS:
            module.register(registry)


def build_registry(
    *,
    autoload: bool | None = None,
    blocked: Iterable[str] = (),
    modules: Iterable[Any] = (),
) -> PluginRegistry:
    """Build a fresh plugin manager and registry (never at import time).

    Order: built-ins, then ``modules`` (objects implementing the hooks, for
    tests and embedding), then entry points of the group ``scorer`` unless
    autoload is off (argument, or env ``SCORER_DISABLE_PLUGIN_AUTOLOAD=1``),
    then ``check_pending()``. ``blocked`` names entry points not to load.
    An entry point that fails to import is recorded in ``registry.failures``.
    Two plugins with the same name are a PluginError naming both sources.
    """
    if autoload is None:
        autoload = os.environ.get(AUTOLOAD_ENV, "") not in ("1", "true", "yes")
    blocked = set(blocked)
    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
    pm.add_hookspecs(hookspecs)
    registry = PluginRegistry()
    sources: dict[str, tuple[str, str]] = {}

    pm.register(_Builtins(), name="scorer.builtins")
    sources["scorer.builtins"] = ("scorer", scorer.__version__)
    for i, module in enumerate(modules):
        name = getattr(module, "__name__", f"module-{i}")
        pm.register(module, name=name)
        sources[name] = (name, "")
    if autoload:
        for ep in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            dist = ep.dist.name if ep.dist is not None else "?"
            version = ep.dist.version if ep.dist is not None else ""
            if ep.name in blocked or ep.name in sources:
                if ep.name in blocked:
                    pm.set_blocked(ep.name)
                continue
            try:
                module = ep.load()
                if pm.is_registered(module):  # already given in ``modules``: keep one registration
                    sources[pm.get_name(module) or ep.name] = (dist, version)
                    continue
                pm.register(module, name=ep.name)
            except Exception as exc:  # a broken plugin must not take scorer down
                registry.failures.append(LoadFailure(ep.name, dist, version, f"{type(exc).__name__}: {exc}"))
                continue
            sources[ep.name] = (dist, version)
    pm.check_pending()
    for impl in reversed(pm.hook.scorer_register_plugins.get_hookimpls()):
        registry._source, registry._version = sources.get(impl.plugin_name, (impl.plugin_name, ""))
        impl.function(registry=registry)
    registry._source, registry._version = "scorer", ""
    return registry
