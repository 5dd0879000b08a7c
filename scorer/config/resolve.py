"""From a merged profile to what the framework runs (§1.5 of the reference).

kube-scheduler builds each extension point's list from its explicit
``enabled`` entries (unknown plugin, plugin not implementing the point and
duplicates are errors), then expands ``multiPoint`` into every point:

* nothing is expanded into a point whose ``disabled`` has ``*``;
* a multiPoint plugin is skipped where it does not implement the point or
  is disabled there; listed explicitly at the point it is an *override* (the
  explicit entry wins); listed twice in multiPoint for one point is an error;
* order: overrides (in explicit order), multiPoint-only plugins (multiPoint
  order), the remaining explicit plugins (explicit order).

Score weights come from ``score.enabled`` then ``multiPoint.enabled``, first
occurrence wins, 0 or unset means 1. Each profile needs exactly one
queueSort and at least one bind plugin, and all profiles the same queueSort.

Default plugins scorer does not implement are skipped with a warning; only
names the user wrote are errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scorer.config.convert import structure_into
from scorer.config.defaults import missing_plugin_message, no_args_message
from scorer.config.types import PluginRef, Profile, ResolvedProfile, SchedulerConfig
from scorer.errors import ConfigError
from scorer.framework.catalog import EXTENSION_POINTS, PluginInfo
from scorer.inputs.describe import quote

Catalog = Mapping[str, PluginInfo]

MAX_NODE_SCORE = 100
MAX_TOTAL_SCORE = 2**63 - 1


def resolve_profile(profile: Profile, catalog: Catalog) -> ResolvedProfile:
    """Expand multiPoint, order every extension point, compute score weights and args.

    Raises ConfigError (paths as in the source) when the profile cannot run.
    """
    errors: list[tuple[str, str]] = []
    resolved = _Resolver(profile, catalog, errors).resolve()
    if errors:
        raise ConfigError(errors)
    return resolved


def resolve_config(config: SchedulerConfig, catalog: Catalog) -> tuple[ResolvedProfile, ...]:
    """Resolve every profile and check they share one queueSort plugin and its args."""
    errors: list[tuple[str, str]] = []
    resolved = resolve_profiles(config.profiles, catalog, errors)
    if errors:
        raise ConfigError(errors, config.source)
    return resolved


def resolve_profiles(
    profiles: Sequence[Profile], catalog: Catalog, errors: list[tuple[str, str]]
) -> tuple[ResolvedProfile, ...]:
    """Resolve each profile, appending every problem to ``errors`` (nothing is raised);
    when all resolve, check they share one queueSort plugin and its args."""
    known_errors = len(errors)
    resolved = tuple(_Resolver(profile, catalog, errors).resolve() for profile in profiles)
    if not resolved or len(errors) > known_errors:
        return resolved
    first = resolved[0]
    first_sort = first.points["queueSort"]
    for profile, current in zip(profiles[1:], resolved[1:], strict=True):
        path = f"{_profile_path(profile)}.plugins.queueSort"
        sort = current.points["queueSort"]
        if sort != first_sort:
            errors.append(
                (
                    path,
                    f"different queue sort plugins for profile "
                    f"{quote(current.scheduler_name)}: {quote(', '.join(sort))}, "
                    f"first: {quote(', '.join(first_sort))}",
                )
            )
        elif sort and current.args.get(sort[0]) != first.args.get(first_sort[0]):
            errors.append(
                (
                    path,
                    "different queue sort plugin args for profile " + quote(current.scheduler_name),
                )
            )
    return resolved


def _profile_path(profile: Profile) -> str:
    return profile.path or f"profile {quote(profile.scheduler_name)}"


class _Resolver:
    def __init__(self, profile: Profile, catalog: Catalog, errors: list[tuple[str, str]]) -> None:
        self.profile = profile
        self.catalog = catalog
        self.errors = errors
        self.warnings: list[str] = []
        self.path = _profile_path(profile)

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def installed(self, ref: PluginRef) -> PluginInfo | None:
        """Catalog entry of a plugin; if missing: warn for defaults, error for user entries."""
        info = self.catalog.get(ref.name)
        if info is None:
            if ref.path is None:
                self.warn(f'default plugin "{ref.name}" is not implemented by scorer yet; skipped')
            elif not any(path == f"{ref.path}.name" for path, _ in self.errors):
                self.errors.append(
                    (f"{ref.path}.name", missing_plugin_message(ref.name, self.catalog))
                )
        return info

    def explicit(self, point: str) -> list[str]:
        """The point's own enabled list (updatePluginList)."""
        names: list[str] = []
        for ref in self.profile.plugins.get(point).enabled:
            info = self.installed(ref)
            if info is None:
                continue
            if point not in info.extension_points:
                implemented = ", ".join(p for p in EXTENSION_POINTS if p in info.extension_points)
                message = (
                    f'plugin "{ref.name}" does not implement {point} '
                    f"(it implements: {implemented or 'none'})"
                )
                if ref.path is None:
                    self.warn(f"default {message}; skipped there")
                else:
                    self.errors.append((f"{ref.path}.name", message))
                continue
            if ref.name in names:
                where = f"{ref.path}.name" if ref.path else f"{self.path}.plugins.{point}"
                self.errors.append(
                    (where, f"Duplicate value: {quote(ref.name)}: already enabled for {point}")
                )
                continue
            names.append(ref.name)
        return names

    def expand(self, point: str, explicit: list[str], reported: set[str]) -> tuple[str, ...]:
        """Fill ``point`` from multiPoint (expandMultiPointPlugins)."""
        disabled = self.profile.plugins.get(point).disabled_names()
        if "*" in disabled:
            return tuple(explicit)
        overrides: set[str] = set()
        multi_only: list[str] = []
        for ref in self.profile.plugins.multi_point.enabled:
            info = self.catalog.get(ref.name)
            if info is None or point not in info.extension_points or ref.name in disabled:
                continue
            if ref.name in explicit:
                overrides.add(ref.name)
            elif ref.name in multi_only:
                if ref.name not in reported:
                    reported.add(ref.name)
                    where = f"{ref.path}.name" if ref.path else f"{self.path}.plugins.multiPoint"
                    self.errors.append(
                        (
                            where,
                            f"Duplicate value: {quote(ref.name)}: already enabled in multiPoint",
                        )
                    )
            else:
                multi_only.append(ref.name)
        return (
            *(name for name in explicit if name in overrides),
            *multi_only,
            *(name for name in explicit if name not in overrides),
        )

    def weights(self, scored: tuple[str, ...]) -> dict[str, int]:
        """getScoreWeights: score.enabled then multiPoint.enabled, first wins, 0/unset -> 1."""
        weights: dict[str, int] = {}
        total = 0
        plugins = self.profile.plugins
        for ref in (*plugins.score.enabled, *plugins.multi_point.enabled):
            info = self.catalog.get(ref.name)
            if info is None or "score" not in info.extension_points or ref.name in weights:
                continue
            weight = ref.weight or 1
            if weight * MAX_NODE_SCORE > MAX_TOTAL_SCORE - total:
                self.errors.append(
                    (f"{self.path}.plugins.score", "total score of Score plugins could overflow")
                )
                break
            total += weight * MAX_NODE_SCORE
            weights[ref.name] = weight
        for name in scored:
            if weights.get(name, 1) < 0:
                self.warn(f'score plugin "{name}" has a negative weight ({weights[name]})')
        return {name: weights.get(name, 1) for name in scored}

    def args(self, names: tuple[str, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in names:
            info = self.catalog[name]
            index, args = next(
                (
                    (j, entry.args)
                    for j, entry in enumerate(self.profile.plugin_config)
                    if entry.name == name
                ),
                (None, None),
            )
            args_type = info.args_type
            # a Profile built in code may hold raw args, or none at all
            path = (
                f"{self.path}.pluginConfig[{index}].args"
                if index is not None
                else f"{self.path}.pluginConfig"
            )
            if args_type is None:
                if args is not None and args != {}:
                    self.errors.append((path, no_args_message(info)))
                args = None
            elif not isinstance(args, args_type):
                args = structure_into(
                    args_type, args, path, self.errors, kind=f"{name}Args", owner=info.describe()
                )
            out[name] = args
        return out

    def resolve(self) -> ResolvedProfile:
        for ref in self.profile.plugins.multi_point.enabled:
            self.installed(ref)
        reported: set[str] = set()
        points = {
            point: self.expand(point, self.explicit(point), reported) for point in EXTENSION_POINTS
        }
        queue_sort = points["queueSort"]
        if len(queue_sort) != 1:
            names = f" ({', '.join(queue_sort)})" if queue_sort else ""
            self.errors.append(
                (
                    f"{self.path}.plugins.queueSort",
                    f"exactly one queueSort plugin is required, got {len(queue_sort)}{names}",
                )
            )
        if not points["bind"]:
            self.errors.append(
                (f"{self.path}.plugins.bind", "at least one bind plugin is required")
            )
        instantiated = tuple(dict.fromkeys(name for names in points.values() for name in names))
        return ResolvedProfile(
            scheduler_name=self.profile.scheduler_name,
            percentage_of_nodes_to_score=self.profile.percentage_of_nodes_to_score,
            points=points,
            weights=self.weights(points["score"]),
            args=self.args(instantiated),
            warnings=tuple(self.warnings),
        )
