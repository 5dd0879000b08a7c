"""The composition root of plugins: a pluggy manager built by a factory.

``build_registry`` registers the built-ins, then the entry points of the
``scorer`` group, and fills a ``PluginRegistry`` (``scorer.framework.catalog``)
with what they register. Each distribution is loaded on its own, all or
nothing: a broken one becomes a ``LoadFailure`` (its entry point, distribution
and reason) and the others load as if it were not installed. So does one whose
module declares a plugin API this scorer does not provide (``SCORER_PLUGIN_API``,
checked against ``scorer.hookspecs.PLUGIN_API_VERSION`` before its hook runs).
"""

from __future__ import annotations

import difflib
import importlib.metadata
import os
import re
from collections.abc import Callable, Iterable
from typing import Any

import attrs
import pluggy

import scorer
from scorer import hookspecs
from scorer.config.convert import args_type_problems
from scorer.errors import PluginError
from scorer.framework.catalog import (
    EXTENSION_POINTS,
    POINT_METHODS,
    LoadFailure,
    PluginCatalog,
    PluginInfo,
    PluginRegistry,
    extension_points_of,
    failure_reason,
)
from scorer.hookspecs import API_DECLARATION, PLUGIN_API_VERSION, hookimpl
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
    "PluginCatalog",
    "PluginInfo",
    "PluginRegistry",
    "build_registry",
    "extension_points_of",
]

ENTRY_POINT_GROUP = "scorer"
AUTOLOAD_ENV = "SCORER_DISABLE_PLUGIN_AUTOLOAD"
BUILTINS = "scorer.builtins"  # the name of scorer's own hook implementation in the plugin manager
HOOK = "scorer_register_plugins"  # the one hook (``scorer.hookspecs``)

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
    tests and embedding), then entry points of the group ``scorer`` (sorted
    by name) unless autoload is off (argument, or env
    ``SCORER_DISABLE_PLUGIN_AUTOLOAD=1``). ``blocked`` names entry points not
    to load.

    A broken distribution never stops scorer: whatever its mistake (it
    cannot be imported, declares a plugin API this scorer does not provide,
    implements an unknown hook or none, its hook does not
    match the hook's signature or raises, a plugin without ``plugin_type``,
    with a method the framework cannot call, a name already taken, an args
    class scorer cannot convert), none of its plugins is registered and
    ``registry.failures`` records why, with the entry point name that
    ``--block-plugin`` takes. Only a failing built-in (a bug in scorer) raises.
    """
    if autoload is None:
        autoload = os.environ.get(AUTOLOAD_ENV, "") not in ("1", "true", "yes")
    blocked = set(blocked)
    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
    pm.add_hookspecs(hookspecs)
    registry = PluginRegistry()
    origins: dict[str, _Origin] = {}  # registered name -> where it comes from, in load order

    pm.register(_Builtins(), name=BUILTINS)
    for i, module in enumerate(modules):
        name = getattr(module, "__name__", f"module-{i}")
        _add(pm, registry, module, _Origin(name, name, ""), origins)
    if autoload:
        for ep in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            origin = _Origin(ep.name, ep.dist.name if ep.dist is not None else "?",
                             ep.dist.version if ep.dist is not None else "")
            if ep.name in blocked:
                pm.set_blocked(ep.name)
                continue
            if ep.name in origins or ep.name == BUILTINS:
                continue
            try:
                module = ep.load()
            except (Exception, SystemExit) as exc:  # a broken plugin must not take scorer down
                registry.fail(ep.name, origin.distribution, origin.version,
                              f"cannot import {ep.value}: {failure_reason(exc)}")
                continue
            if pm.is_registered(module):  # already given in ``modules``: keep one registration
                origins[pm.get_name(module) or ep.name] = origin
                continue
            _add(pm, registry, module, origin, origins)
    impls = {impl.plugin_name: impl for impl in pm.hook.scorer_register_plugins.get_hookimpls()}
    # A failing built-in is a bug in scorer: it raises.
    registry.load(BUILTINS, "scorer", scorer.__version__, _hook_of(impls[BUILTINS]), isolate=False)
    for name, origin in origins.items():
        registry.load(origin.entry_point, origin.distribution, origin.version, _hook_of(impls[name]),
                      _check_args_type)
    return registry


@attrs.frozen(slots=True)
class _Origin:
    """Where a registered hook implementation comes from: the entry point (the name
    ``--block-plugin`` takes; a module's name for ``modules``) and its distribution."""

    entry_point: str
    distribution: str
    version: str


def _add(pm: pluggy.PluginManager, registry: PluginRegistry, module: Any, origin: _Origin,
         origins: dict[str, _Origin]) -> None:
    """Register ``module`` with the plugin manager under its entry point's name, if it implements
    the hook and nothing else, for a plugin API this scorer provides; else record why it is not loaded."""
    name = origin.entry_point
    mismatch = _api_mismatch(module, origin.distribution)
    if mismatch:
        registry.fail(name, origin.distribution, origin.version, mismatch)
        return
    try:
        pm.register(module, name=name)
    except (pluggy.PluginValidationError, ValueError) as exc:
        registry.fail(name, origin.distribution, origin.version, _hook_mismatch(exc))
        return
    hooks = [caller.name for caller in pm.get_hookcallers(module) or ()]
    unknown = [hook for hook in hooks if hook != HOOK]
    if unknown:
        error = ", ".join(f"unknown hook {hook}{_did_you_mean(hook, [HOOK])}" for hook in unknown)
    elif not hooks:
        error = _no_hook(module)
    else:
        origins[name] = origin
        return
    pm.unregister(module)
    registry.fail(name, origin.distribution, origin.version, error)


def _api_mismatch(module: Any, distribution: str) -> str:
    """Why ``module`` cannot be loaded for the plugin API it declares (``SCORER_PLUGIN_API``); "" when this
    scorer provides it: the same major version, and a minor no newer. A module that declares none was
    written before the API had versions, for 1.0."""
    declared = getattr(module, API_DECLARATION, None)
    if declared is None:
        return ""
    version = re.fullmatch(r"(\d+)\.(\d+)", declared) if isinstance(declared, str) else None
    if version is None:
        return (f'{API_DECLARATION} must be the plugin API version it was built for, "MAJOR.MINOR" such as '
                f'"{PLUGIN_API_VERSION}", got {declared!r}')
    major, minor = (int(part) for part in PLUGIN_API_VERSION.split("."))
    provided = f"scorer {scorer.__version__} provides plugin API {PLUGIN_API_VERSION}"
    if int(version[1]) != major:
        return (f"built for plugin API {declared} ({API_DECLARATION}), but {provided}: install a release of "
                f"{distribution} built for plugin API {major}.x")
    if int(version[2]) > minor:
        return (f"built for plugin API {declared} ({API_DECLARATION}), but {provided}: upgrade scorer to a "
                f"release that provides plugin API {declared}")
    return ""


def _hook_of(impl: pluggy.HookImpl) -> Callable[[PluginRegistry], object]:
    """A distribution's ``scorer_register_plugins``, called with the registry."""
    return lambda registry: impl.function(registry=registry)


def _hook_mismatch(exc: Exception) -> str:
    """pluggy's several lines about a hook implementation whose arguments the hook does not have, as one."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if isinstance(exc, pluggy.PluginValidationError) and len(lines) > 1:
        return f"its hook does not match {HOOK}(registry): {'; '.join(lines[1:])}"
    return failure_reason(exc)


def _no_hook(module: Any) -> str:
    """Why ``module`` implements no hook: the hook is missing, misspelled, or not marked."""
    if callable(getattr(module, HOOK, None)):
        return f"{HOOK} is not marked with @scorer.plugin.hookimpl, so it is never called"
    names = [name for name in dir(module) if callable(getattr(module, name, None))]
    return f"it implements no hook: {HOOK} is missing{_did_you_mean(HOOK, names)}"


def _did_you_mean(name: str, candidates: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.8)
    return f" (did you mean {close[0]}?)" if close else ""


def _check_args_type(info: PluginInfo) -> None:
    """A plugin's args class must be one ``structure`` can convert: checked once, at registration."""
    if info.args_type is not None:
        problems = args_type_problems(info.args_type)
        if problems:
            raise PluginError(f"plugin {info.name!r}: args_type {'; '.join(problems)}")
