"""Plugin registry: what plugins exist, where they come from, how to build them.

Filled in by the registry factory (built-ins, then entry points of the
``scorer`` group). The configuration layer reads it as a catalog:
``Mapping[str, PluginInfo]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs

# Extension point keys as they appear in KubeSchedulerConfiguration ``plugins``.
EXTENSION_POINTS: tuple[str, ...] = (
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
)


@attrs.frozen(slots=True)
class PluginInfo:
    """One registered plugin.

    ``extension_points`` holds config keys (``"filter"``, ``"score"`` ...) of
    the points the plugin implements. ``args_type`` is the attrs class its
    ``pluginConfig[].args`` are converted to (None: the plugin takes no args).
    ``source`` names where it came from: ``"scorer"`` for built-ins, else the
    distribution name; ``version`` is that distribution's version.
    """

    name: str
    factory: Callable[..., Any]
    extension_points: frozenset[str]
    args_type: type | None = None
    source: str = "scorer"
    version: str = ""


# The methods that implement each extension point. A plugin implements a point
# if it has any of the listed methods (vectorized ``*_batch`` or per node).
POINT_METHODS: dict[str, tuple[str, ...]] = {
    "preEnqueue": ("pre_enqueue",),
    "queueSort": ("less",),
    "preFilter": ("pre_filter",),
    "filter": ("filter_batch", "filter"),
    "postFilter": ("post_filter",),
    "preScore": ("pre_score",),
    "score": ("score_batch", "score"),
    "reserve": ("reserve",),
    "permit": ("permit",),
    "preBind": ("pre_bind",),
    "bind": ("bind",),
    "postBind": ("post_bind",),
}


def extension_points_of(plugin_type: type | object) -> frozenset[str]:
    """Config keys of the extension points a plugin class (or object) implements."""
    return frozenset(
        point
        for point, methods in POINT_METHODS.items()
        if any(callable(getattr(plugin_type, m, None)) for m in methods)
    )


@attrs.frozen(slots=True)
class LoadFailure:
    """An entry point that could not be loaded: recorded, never fatal."""

    entry_point: str
    distribution: str
    version: str
    error: str


class PluginRegistry:
    """What plugin modules register into via ``scorer_register_plugins(registry)``.

    ``register(name, factory, args_type=..., plugin_type=...)``: ``factory`` is
    called as ``factory(args, handle)`` when a profile enables the plugin
    (``args`` is the converted ``args_type`` instance, or None). When
    ``factory`` is the plugin class itself, ``plugin_type`` may be omitted.
    """

    def __init__(self) -> None:
        self.plugins: dict[str, PluginInfo] = {}
        self.failures: list[LoadFailure] = []
        self._source = "scorer"
        self._version = ""

    def register(
        self,
        name: str,
        factory: Callable[..., Any],
        *,
        args_type: type | None = None,
        plugin_type: type | None = None,
    ) -> None:
        from scorer.errors import PluginError

        if not isinstance(name, str) or not name:
            raise PluginError(f"{self._source}: plugin name must be a non-empty string, got {name!r}")
        if not callable(factory):
            raise PluginError(f"{self._source}: factory of plugin {name!r} is not callable")
        existing = self.plugins.get(name)
        if existing is not None:
            raise PluginError(
                f"plugin {name!r} is registered twice: by {_describe(existing.source, existing.version)}"
                f" and by {_describe(self._source, self._version)}"
            )
        kind = plugin_type if plugin_type is not None else factory
        points = extension_points_of(kind) if isinstance(kind, type) else frozenset()
        if not points:
            raise PluginError(
                f"{self._source}: plugin {name!r} implements no extension point; pass plugin_type="
                " or register the plugin class itself"
            )
        self.plugins[name] = PluginInfo(
            name=name,
            factory=factory,
            extension_points=points,
            args_type=args_type,
            source=self._source,
            version=self._version,
        )

    def catalog(self) -> dict[str, PluginInfo]:
        return dict(self.plugins)


def _describe(source: str, version: str) -> str:
    return f"{source} {version}".strip()


ENTRY_POINT_GROUP = "scorer"
AUTOLOAD_ENV = "SCORER_DISABLE_PLUGIN_AUTOLOAD"


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
    import importlib.metadata
    import os

    import pluggy

    from scorer import hookspecs
    from scorer import plugins as builtins

    if autoload is None:
        autoload = os.environ.get(AUTOLOAD_ENV, "") not in ("1", "true", "yes")
    blocked = set(blocked)
    pm = pluggy.PluginManager(ENTRY_POINT_GROUP)
    pm.add_hookspecs(hookspecs)
    registry = PluginRegistry()
    sources: dict[str, tuple[str, str]] = {}

    import scorer

    pm.register(builtins, name="scorer.builtins")
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
