"""The plugin catalog: what a plugin is, which extension points it implements,
and the registry plugin modules register into.

This is data only. The pluggy plugin manager that fills it (built-ins, then
entry points) is the composition root in ``scorer.registry``. The
configuration layer reads the catalog as ``Mapping[str, PluginInfo]``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from scorer.errors import PluginError

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
