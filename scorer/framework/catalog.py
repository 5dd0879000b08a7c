"""The plugin catalog: what a plugin is, which extension points it implements,
and the registry plugin modules register into.

This is data only. The pluggy plugin manager that fills it (built-ins, then
entry points) is the composition root in ``scorer.registry``. A distribution
registers all or nothing (``PluginRegistry.load``): when its registration
fails, none of its plugins is kept and a ``LoadFailure`` says why. The
configuration layer reads the catalog as ``Mapping[str, PluginInfo]``; a
``PluginCatalog`` also carries the failures, so a profile that enables a
plugin of a broken distribution is told which one and why.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from scorer.errors import PluginError
from scorer.framework import interface

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

    @property
    def origin(self) -> str:
        """Where the plugin comes from, as messages name it: ``scorer-prefer-label 0.3.1``, ``scorer``."""
        return describe_origin(self.source, self.version)

    def describe(self) -> str:
        """``plugin "PreferLabel" (scorer-prefer-label 0.3.1)``: how errors name the plugin."""
        return f'plugin "{self.name}" ({self.origin})'


# The Protocols of each extension point (``scorer.framework.interface``). A plugin
# implements a point through one of them: Filter and Score have a vectorized and a
# per-node form.
POINT_PROTOCOLS: dict[str, tuple[type, ...]] = {
    "preEnqueue": (interface.PreEnqueuePlugin,),
    "queueSort": (interface.QueueSortPlugin,),
    "preFilter": (interface.PreFilterPlugin,),
    "filter": (interface.BatchFilterPlugin, interface.NodeFilterPlugin),
    "postFilter": (interface.PostFilterPlugin,),
    "preScore": (interface.PreScorePlugin,),
    "score": (interface.BatchScorePlugin, interface.NodeScorePlugin),
    "reserve": (interface.ReservePlugin,),
    "permit": (interface.PermitPlugin,),
    "preBind": (interface.PreBindPlugin,),
    "bind": (interface.BindPlugin,),
    "postBind": (interface.PostBindPlugin,),
}
# Protocols a plugin may add to the points it implements.
OPTIONAL_PROTOCOLS: tuple[type, ...] = (interface.ScoreExtensions, interface.EnqueueExtensions,
                                        interface.PreFilterExtensions)


def protocol_methods(protocol: type) -> tuple[str, ...]:
    """The methods a Protocol of ``scorer.framework.interface`` declares, in order."""
    return tuple(name for name, value in vars(protocol).items()
                 if inspect.isfunction(value) and not name.startswith("_"))


# The methods that implement each extension point: a plugin implements a point if it
# has any of them (vectorized ``*_batch`` or per node).
POINT_METHODS: dict[str, tuple[str, ...]] = {
    point: tuple(method for protocol in protocols for method in protocol_methods(protocol))
    for point, protocols in POINT_PROTOCOLS.items()
}


def extension_points_of(plugin_type: type | object) -> frozenset[str]:
    """Config keys of the extension points a plugin class (or object) implements."""
    return frozenset(
        point
        for point, methods in POINT_METHODS.items()
        if any(callable(getattr(plugin_type, m, None)) for m in methods)
    )


def check_plugin_type(name: str, plugin_type: type) -> frozenset[str]:
    """The extension points ``plugin_type`` claims, each checked against its Protocol.

    A point is claimed by having any of its methods. The Protocol the plugin
    follows there (the one whose method it has) must be met in full: every
    method present, callable, and accepting the arguments the framework
    passes. Optional Protocols (``normalize_score``, ``events_to_register``)
    are checked when present. Raises PluginError naming the plugin and the
    method.
    """
    points = []
    for point, protocols in POINT_PROTOCOLS.items():
        chosen = next((p for p in protocols if any(_has(plugin_type, m) for m in protocol_methods(p))), None)
        if chosen is None:
            continue
        _check_protocol(name, plugin_type, chosen)
        points.append(point)
    for protocol in OPTIONAL_PROTOCOLS:
        if any(_has(plugin_type, m) for m in protocol_methods(protocol)):
            _check_protocol(name, plugin_type, protocol)
    return frozenset(points)


@attrs.frozen(slots=True)
class LoadFailure:
    """An entry point (a distribution's plugins) that could not be loaded: recorded, never fatal.

    ``entry_point`` is the name ``--block-plugin`` takes; ``plugins`` the names it
    registered or tried to before it failed (none when it could not be imported);
    ``error`` says why, on one line.
    """

    entry_point: str
    distribution: str
    version: str
    error: str
    plugins: tuple[str, ...] = ()

    @property
    def origin(self) -> str:
        return describe_origin(self.distribution, self.version)

    def describe(self) -> str:
        """``scorer-bad 0.1.0 (entry point bad) failed to load: <error>``."""
        return f"{self.origin} (entry point {self.entry_point}) failed to load: {self.error}"


class PluginCatalog(dict[str, PluginInfo]):
    """The registered plugins by name, and the distributions that failed to load (``failures``)."""

    def __init__(self, plugins: Mapping[str, PluginInfo] | None = None,
                 failures: Iterable[LoadFailure] = ()) -> None:
        super().__init__(plugins or {})
        self.failures: tuple[LoadFailure, ...] = tuple(failures)

    def failure_of(self, name: str) -> LoadFailure | None:
        """The failure of the distribution that registered (or tried to register) plugin ``name``."""
        return next((failure for failure in self.failures if name in failure.plugins), None)


class PluginRegistry:
    """What plugin modules register into via ``scorer_register_plugins(registry)``.

    ``register(name, factory, args_type=..., plugin_type=...)``: ``factory`` is
    called as ``factory(args, handle)`` when a profile enables the plugin
    (``args`` is the converted ``args_type`` instance, or None). When
    ``factory`` is the plugin class itself, ``plugin_type`` may be omitted.
    A mistake raises PluginError naming the plugin; ``load`` turns it into a
    LoadFailure of the distribution.
    """

    def __init__(self) -> None:
        self.plugins: dict[str, PluginInfo] = {}
        self.failures: list[LoadFailure] = []
        self._source = "scorer"
        self._version = ""
        self._attempted: list[str] = []  # the names the distribution being loaded registered or tried to

    def register(
        self,
        name: str,
        factory: Callable[..., Any],
        *,
        args_type: type | None = None,
        plugin_type: type | None = None,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise PluginError(f"plugin name must be a non-empty string, got {name!r}")
        self._attempted.append(name)
        if not callable(factory):
            raise PluginError(f"factory of plugin {name!r} is not callable")
        existing = self.plugins.get(name)
        if existing is not None:
            raise PluginError(f"plugin {name!r} is already registered by {existing.origin}: plugin names are "
                              "unique; rename yours")
        kind = plugin_type if plugin_type is not None else factory
        if plugin_type is not None and not isinstance(plugin_type, type):
            raise PluginError(f"plugin_type of plugin {name!r} must be a class, got {plugin_type!r}")
        if args_type is not None and not isinstance(args_type, type):
            raise PluginError(f"args_type of plugin {name!r} must be a class, got {args_type!r}")
        points = check_plugin_type(f"plugin {name!r}", kind) if isinstance(kind, type) else frozenset()
        if not points:
            raise PluginError(
                f"plugin {name!r} implements no extension point: pass plugin_type=<the plugin's class> to"
                " registry.register(), or register the class itself as the factory"
            )
        self.plugins[name] = PluginInfo(
            name=name,
            factory=factory,
            extension_points=points,
            args_type=args_type,
            source=self._source,
            version=self._version,
        )

    def load(self, entry_point: str, distribution: str, version: str, register: Callable[[PluginRegistry], object],
             check: Callable[[PluginInfo], None] | None = None, *, isolate: bool = True) -> bool:
        """Register one distribution's plugins, all or nothing; returns whether it loaded.

        ``register(self)`` calls ``register`` for each of its plugins; ``check``, when given,
        checks each plugin it added (raising PluginError). If either raises, nothing the
        distribution registered is kept and a LoadFailure is recorded with the reason
        (``isolate=False``, for scorer's own plugins: the exception propagates).
        """
        before = dict(self.plugins)
        self._source, self._version, self._attempted = distribution, version, []
        try:
            register(self)
            for name in self.plugins.keys() - before.keys():
                if check is not None:
                    check(self.plugins[name])
        except (Exception, SystemExit) as exc:  # a broken plugin must not take scorer down
            if not isolate:
                raise
            self.plugins = before
            reason = failure_reason(exc)
            if not isinstance(exc, PluginError):
                reason = f"scorer_register_plugins raised {reason}"
            self.fail(entry_point, distribution, version, reason, self._attempted)
            return False
        finally:
            self._source, self._version = "scorer", ""
        return True

    def fail(self, entry_point: str, distribution: str, version: str, error: str,
             plugins: Iterable[str] = ()) -> None:
        """Record a distribution that could not be loaded."""
        self.failures.append(LoadFailure(entry_point, distribution, version, error, tuple(dict.fromkeys(plugins))))

    def catalog(self) -> PluginCatalog:
        return PluginCatalog(self.plugins, self.failures)


def failure_reason(exc: BaseException) -> str:
    """Why a distribution failed, on one line: a PluginError's message, else the exception raised."""
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    if isinstance(exc, PluginError):
        return text
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def describe_origin(source: str, version: str) -> str:
    """``scorer-prefer-label 0.3.1``: a distribution and its version, as messages name it."""
    return f"{source} {version}".strip()


def _has(plugin_type: type, method: str) -> bool:
    return getattr(plugin_type, method, None) is not None


def _check_protocol(name: str, plugin_type: type, protocol: type) -> None:
    """Every method of ``protocol`` on ``plugin_type``: present, callable, right arguments."""
    for method in protocol_methods(protocol):
        expected = inspect.signature(getattr(protocol, method))
        wanted = _call_form(method, expected, skip_self=True)
        attribute = getattr(plugin_type, method, None)
        if attribute is None:
            raise PluginError(f"{name}: {protocol.__name__} needs {wanted}, but {method} is missing")
        if not callable(attribute):
            raise PluginError(f"{name}: {method} is not callable ({type(attribute).__name__}); "
                              f"{protocol.__name__} needs {wanted}")
        try:
            actual = inspect.signature(attribute)
        except (TypeError, ValueError):  # a builtin without a signature: nothing to compare
            continue
        # A function in the class body is called on instances: ``self`` comes first.
        needs_self = inspect.isfunction(inspect.getattr_static(plugin_type, method))
        arguments = [None] * (len(expected.parameters) - (0 if needs_self else 1))
        try:
            actual.bind(*arguments)
        except TypeError:
            raise PluginError(f"{name}: {_call_form(method, actual)} cannot be called as {wanted} "
                              f"({protocol.__name__})") from None


def _call_form(method: str, signature: inspect.Signature, *, skip_self: bool = False) -> str:
    """``filter_batch(state, pod, nodes)``: the parameter names, without annotations."""
    names = [str(p.replace(annotation=inspect.Parameter.empty, default=inspect.Parameter.empty))
             for p in signature.parameters.values()]
    return f"{method}({', '.join(names[1:] if skip_self else names)})"
