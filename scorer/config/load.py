"""Decoding, defaulting and validating a KubeSchedulerConfiguration (§1 of the reference).

Order, as in kube-scheduler: strict decode (unknown fields, duplicate keys,
wrong types, fields of another API version), then defaulting (top-level
values, plugin sets merged with the version's defaults, pluginConfig args
converted and default args appended), then validation. Every problem of
every phase is collected and raised as one ConfigError with kube-style
paths: the top level and each profile are decoded on their own, and a
profile that cannot be decoded is left out of the later phases while the
others go through them. ``load_and_resolve`` adds the resolution of the
profiles against the catalog (``scorer.config.resolve``) to the same pass.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import attrs

from scorer.config.convert import plain, structure_into
from scorer.config.defaults import (
    FIT,
    INVALID_IN_V1,
    KUBE_PLUGINS,
    REMOVED_PLUGINS,
    default_plugins,
    missing_plugin_message,
    no_args_message,
)
from scorer.config.legacy import LEGACY_ARGS, RequestedToCapacityRatioArgs, scoring_strategy
from scorer.config.resolve import resolve_profiles
from scorer.config.text import parse_text, read_file
from scorer.config.types import (
    API_VERSIONS,
    DEFAULT_SCHEDULER_NAME,
    KIND,
    MULTI_POINT,
    PLUGIN_SET_ATTRIBUTES,
    PLUGIN_SET_KEYS,
    V1,
    V1BETA1,
    V1BETA2,
    ClientConnection,
    Extender,
    LeaderElection,
    PluginConfig,
    PluginRef,
    Plugins,
    PluginSet,
    Profile,
    ResolvedProfile,
    SchedulerConfig,
)
from scorer.errors import ConfigError
from scorer.framework.catalog import PluginInfo
from scorer.inputs.describe import describe_value, join_path, quote
from scorer.inputs.names import extended_resource_name_errors

Catalog = Mapping[str, PluginInfo]
T = TypeVar("T")
_ComponentConfig = TypeVar("_ComponentConfig", LeaderElection, ClientConnection)

# -- wire shapes: what the file may contain, None where kube has a pointer ---------------


@attrs.frozen(slots=True)
class _WirePlugin:
    name: str
    weight: int | None = attrs.field(default=None, metadata={"bits": 32})


@attrs.frozen(slots=True)
class _WirePluginSet:
    enabled: tuple[_WirePlugin, ...] = ()
    disabled: tuple[_WirePlugin, ...] = ()


@attrs.frozen(slots=True)
class _WirePlugins:
    pre_enqueue: _WirePluginSet | None = None
    queue_sort: _WirePluginSet | None = None
    pre_filter: _WirePluginSet | None = None
    filter: _WirePluginSet | None = None
    post_filter: _WirePluginSet | None = None
    pre_score: _WirePluginSet | None = None
    score: _WirePluginSet | None = None
    reserve: _WirePluginSet | None = None
    permit: _WirePluginSet | None = None
    pre_bind: _WirePluginSet | None = None
    bind: _WirePluginSet | None = None
    post_bind: _WirePluginSet | None = None
    multi_point: _WirePluginSet | None = None


@attrs.frozen(slots=True)
class _WirePluginConfig:
    name: str
    args: Any = None


@attrs.frozen(slots=True)
class _WireProfile:
    scheduler_name: str | None = None
    percentage_of_nodes_to_score: int | None = attrs.field(default=None, metadata={"bits": 32})
    plugins: _WirePlugins | None = None
    plugin_config: tuple[_WirePluginConfig, ...] = ()


@attrs.frozen(slots=True)
class _WireConfig:
    parallelism: int | None = attrs.field(default=None, metadata={"bits": 32})
    leader_election: LeaderElection | None = None
    client_connection: ClientConnection | None = None
    enable_profiling: bool | None = None
    enable_contention_profiling: bool | None = None
    percentage_of_nodes_to_score: int | None = attrs.field(default=None, metadata={"bits": 32})
    pod_initial_backoff_seconds: int | None = None
    pod_max_backoff_seconds: int | None = None
    profiles: tuple[Any, ...] = ()  # each profile is decoded on its own (see _Decoder.collect)
    extenders: tuple[Extender, ...] = ()
    delay_cache_until_active: bool = False


# Fields that exist only in some versions: (allowed versions, where they were introduced).
_V1BETA2_AND_LATER = frozenset(API_VERSIONS) - {V1BETA1}
_PLUGIN_SET_SINCE = {MULTI_POINT: _V1BETA2_AND_LATER, "preEnqueue": _V1BETA2_AND_LATER}
_BIND_ADDRESS_FIELDS = ("healthzBindAddress", "metricsBindAddress")
# Where NodeResourcesFitArgs holds what a v1beta1 RequestedToCapacityRatio ``shape`` becomes.
_LEGACY_SHAPE_PATH = "scoringStrategy.requestedToCapacityRatio."


# -- entry points ---------------------------------------------------------------------------


def load_config(
    source: str | os.PathLike[str] | Mapping[str, Any] | None, catalog: Catalog
) -> SchedulerConfig:
    """Decode, default and validate a KubeSchedulerConfiguration.

    ``source`` is a file path (YAML, or JSON by extension), an already decoded
    mapping, or None for kube-scheduler's default configuration (v1).
    ``catalog`` names the installed plugins. Raises ConfigError listing every
    problem with its field path.
    """
    decoder, data = _open(source, catalog)
    return decoder.decode(data)


def load_and_resolve(
    source: str | os.PathLike[str] | Mapping[str, Any] | None, catalog: Catalog
) -> tuple[SchedulerConfig, tuple[ResolvedProfile, ...]]:
    """``load_config`` then ``resolve_config`` in one pass: one ConfigError with every problem.

    Decoding, defaulting and validation (plugin args included) report what
    they find in every profile; each profile without errors of its own is
    then resolved against the catalog, so a broken profile does not hide the
    problems of the others and nothing is reported in rounds.
    """
    decoder, data = _open(source, catalog)
    config, ready = decoder.collect(data)
    resolved = resolve_profiles(ready, catalog, decoder.errors)
    decoder.check()
    assert config is not None  # no config means an error was recorded
    return config, resolved


def load_config_text(text: str, catalog: Catalog, source: str = "<input>") -> SchedulerConfig:
    """Like ``load_config`` for YAML (or JSON) text; ``source`` names it in errors."""
    decoder = _Decoder(catalog, source)
    return decoder.decode(parse_text(text, source, errors=decoder.errors))


def decode_config(data: Any, catalog: Catalog, source: str = "<input>") -> SchedulerConfig:
    """Decode, default and validate already parsed data (plain dicts and lists)."""
    return _Decoder(catalog, source).decode(data)


def _open(
    source: str | os.PathLike[str] | Mapping[str, Any] | None, catalog: Catalog
) -> tuple[_Decoder, Any]:
    """A decoder named after ``source`` and the data to decode (a file is read here)."""
    if source is None:
        return _Decoder(catalog, "<defaults>"), {"apiVersion": V1, "kind": KIND}
    if isinstance(source, Mapping):
        return _Decoder(catalog, "<mapping>"), source
    name = os.fspath(source)
    decoder = _Decoder(catalog, name)
    return decoder, read_file(name, decoder.errors)


def merge_plugin_set(default: PluginSet, custom: PluginSet | None) -> PluginSet:
    """kube's ``mergePluginSet`` (§1.4).

    ``disabled`` keeps the user's then the default's disabled names. Unless
    ``*`` is disabled, the default plugins stay in order, minus disabled ones,
    and a user entry with the same name takes the default's place (weight
    override without reordering). Other user entries follow in their order;
    duplicates are kept here and rejected when the profile is resolved.
    """
    custom = custom or PluginSet()
    disabled = tuple(
        PluginRef(ref.name, None, ref.path) for ref in (*custom.disabled, *default.disabled)
    )
    disabled_names = {ref.name for ref in disabled}
    custom_by_name = {ref.name: index for index, ref in enumerate(custom.enabled)}  # last one wins
    replaced: set[int] = set()
    enabled: list[PluginRef] = []
    if "*" not in disabled_names:
        for ref in default.enabled:
            if ref.name in disabled_names:
                continue
            index = custom_by_name.get(ref.name)
            if index is not None:
                ref = custom.enabled[index]
                replaced.add(index)
            enabled.append(ref)
    enabled.extend(ref for index, ref in enumerate(custom.enabled) if index not in replaced)
    return PluginSet(enabled=tuple(enabled), disabled=disabled)


# -- the decoder ----------------------------------------------------------------------------


class _Decoder:
    def __init__(self, catalog: Catalog, source: str) -> None:
        self.catalog = catalog
        self.source = source
        self.version = V1
        self.errors: list[tuple[str, str]] = []
        self.warnings: list[str] = []

    def error(self, path: str, message: str) -> None:
        self.errors.append((path, message))

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def check(self) -> None:
        if self.errors:
            raise ConfigError(self.errors, self.source)

    def check_percentage(self, path: str, value: int | None) -> None:
        if value is not None and not 0 <= value <= 100:
            self.error(path, "not in valid range [0-100]")

    # phase 1: strict decoding

    def decode(self, data: Any) -> SchedulerConfig:
        config, _ = self.collect(data)
        self.check()
        assert config is not None  # no config means an error was recorded
        return config

    def collect(self, data: Any) -> tuple[SchedulerConfig | None, tuple[Profile, ...]]:
        """Decode, default and validate, recording every error instead of raising.

        Returns the configuration (None when the header is unusable) and the
        profiles that have no error of their own. The top level and each
        profile are decoded separately: a profile that cannot be decoded is
        left out of defaulting, the others are still defaulted and validated.
        """
        if not isinstance(data, Mapping):
            self.error("", f"expected a KubeSchedulerConfiguration object, got {describe_value(data)}")
            return None, ()
        known_errors = len(self.errors)
        self.version = self._header(data)
        if len(self.errors) > known_errors:  # without a version the fields cannot be checked
            return None, ()
        body = self._gate_version_fields(data)
        top_errors: list[tuple[str, str]] = []
        wire = structure_into(_WireConfig, body, "", top_errors)
        raw_profiles = body.get("profiles")
        profile_errors: list[tuple[str, str]] = []
        wire_profiles: list[tuple[int, _WireProfile | None]] = []
        if raw_profiles is None or isinstance(raw_profiles, list):  # else reported as not a list
            wire_profiles = [
                (i, structure_into(_WireProfile, raw, f"profiles[{i}]", profile_errors))
                for i, raw in enumerate(raw_profiles or ())
            ] or [(0, _WireProfile())]  # kube adds one empty profile
        self.errors.extend(_in_document_order(list(body), "profiles", top_errors, profile_errors))
        return self._default_and_validate(wire or _WireConfig(), wire_profiles)

    def _header(self, data: Mapping[str, Any]) -> str:
        api_version, kind = data.get("apiVersion"), data.get("kind")
        supported = ", ".join(quote(v) for v in API_VERSIONS)
        if api_version is None:
            self.error("apiVersion", f"Required value: one of {supported}")
        elif api_version not in API_VERSIONS:
            self.error(
                "apiVersion",
                f"Unsupported value: {quote(api_version)}: supported values: {supported}",
            )
        if kind is None:
            self.error("kind", f"Required value: {quote(KIND)}")
        elif kind != KIND:
            self.error("kind", f"Unsupported value: {quote(kind)}: supported values: {quote(KIND)}")
        return api_version if api_version in API_VERSIONS else V1

    def _not_in_version(self, path: str, versions: Iterable[str]) -> None:
        short = ", ".join(sorted(v.rsplit("/", 1)[1] for v in versions))
        self.error(path, f"unknown field (not available in {self.version}; it exists in {short})")

    def _gate_version_fields(self, data: Mapping[str, Any]) -> dict[str, Any]:
        """Drop fields of other API versions (error), or deprecated ones (warning)."""
        body = {k: v for k, v in data.items() if k not in ("apiVersion", "kind")}
        for key in _BIND_ADDRESS_FIELDS:
            if key not in body:
                continue
            value = body.pop(key)
            if self.version not in (V1BETA1, V1BETA2):
                self._not_in_version(key, (V1BETA1, V1BETA2))
            elif value is not None and not isinstance(value, str):
                self.error(key, f"expected a string, got {describe_value(value)}")
            else:
                self.warn(
                    f"{key} is deprecated ({self.version}) and ignored: "
                    "scorer serves /healthz and /metrics itself"
                )
        if "delayCacheUntilActive" in body and self.version != V1:
            body.pop("delayCacheUntilActive")
            self._not_in_version("delayCacheUntilActive", (V1,))
        profiles = body.get("profiles")
        if isinstance(profiles, list):
            body["profiles"] = [self._gate_profile(i, p) for i, p in enumerate(profiles)]
        return body

    def _gate_profile(self, index: int, profile: Any) -> Any:
        if not isinstance(profile, Mapping):
            return profile
        profile = dict(profile)
        if "percentageOfNodesToScore" in profile and self.version != V1:
            profile.pop("percentageOfNodesToScore")
            self._not_in_version(f"profiles[{index}].percentageOfNodesToScore", (V1,))
        plugins = profile.get("plugins")
        if isinstance(plugins, Mapping):
            plugins = dict(plugins)
            for key, versions in _PLUGIN_SET_SINCE.items():
                if key in plugins and self.version not in versions:
                    plugins.pop(key)
                    self._not_in_version(f"profiles[{index}].plugins.{key}", versions)
            profile["plugins"] = plugins
        return profile

    # phase 2: defaulting and validation

    def _default_and_validate(
        self, wire: _WireConfig, wire_profiles: list[tuple[int, _WireProfile | None]]
    ) -> tuple[SchedulerConfig, tuple[Profile, ...]]:
        """The defaulted configuration (profiles that could not be decoded left out) and the
        profiles with no error of their own."""
        default = SchedulerConfig()  # kube's defaults for unset (nil) fields
        enable_profiling = _given(wire.enable_profiling, default.enable_profiling)
        profiles: list[Profile] = []
        ready: list[Profile] = []
        for i, wire_profile in wire_profiles:
            if wire_profile is None:
                continue  # its decoding errors are recorded
            known_errors = len(self.errors)
            profile = self._profile(i, wire_profile, single=len(wire_profiles) == 1)
            profiles.append(profile)
            if len(self.errors) == known_errors:
                ready.append(profile)
        config = SchedulerConfig(
            api_version=self.version,
            parallelism=_given(wire.parallelism, default.parallelism),
            leader_election=_zeros_defaulted(
                wire.leader_election or LeaderElection(),
                "lease_duration",
                "renew_deadline",
                "retry_period",
                "resource_lock",
                "resource_name",
                "resource_namespace",
            ),
            client_connection=_zeros_defaulted(
                wire.client_connection or ClientConnection(), "content_type", "qps", "burst"
            ),
            enable_profiling=enable_profiling,
            # kube defaults it to true only when profiling is on; unset otherwise (false)
            enable_contention_profiling=_given(wire.enable_contention_profiling, enable_profiling),
            percentage_of_nodes_to_score=_given(
                wire.percentage_of_nodes_to_score, default.percentage_of_nodes_to_score
            ),
            pod_initial_backoff_seconds=_given(
                wire.pod_initial_backoff_seconds, default.pod_initial_backoff_seconds
            ),
            pod_max_backoff_seconds=_given(
                wire.pod_max_backoff_seconds, default.pod_max_backoff_seconds
            ),
            profiles=tuple(profiles),
            extenders=wire.extenders,
            delay_cache_until_active=wire.delay_cache_until_active,
            source=self.source,
        )
        self._validate_top_level(config)
        return attrs.evolve(config, warnings=tuple(self.warnings)), tuple(ready)

    def _validate_top_level(self, config: SchedulerConfig) -> None:
        """kube's ValidateKubeSchedulerConfiguration, minus per-profile checks done earlier."""
        if config.client_connection.burst < 0:
            self.error("clientConnection.burst", "must be non-negative")
        election = config.leader_election
        if election.leader_elect:
            for key, value in (
                ("leaseDuration", election.lease_duration),
                ("renewDeadline", election.renew_deadline),
                ("retryPeriod", election.retry_period),
            ):
                if value.total_seconds() <= 0:
                    self.error(f"leaderElection.{key}", "must be greater than zero")
            if election.lease_duration <= election.renew_deadline:
                self.error(
                    "leaderElection.leaseDuration",
                    "LeaseDuration must be greater than RenewDeadline",
                )
            for key, text in (
                ("resourceLock", election.resource_lock),
                ("resourceName", election.resource_name),
                ("resourceNamespace", election.resource_namespace),
            ):
                if not text:
                    self.error(f"leaderElection.{key}", f"{key} is required")
            if election.resource_lock != "leases":
                self.error("leaderElection.resourceLock", 'resourceLock value must be "leases"')
        if config.parallelism <= 0:
            self.error("parallelism", "should be an integer value greater than zero")
        seen: set[str] = set()
        for profile in config.profiles:
            if profile.scheduler_name in seen:
                self.error(
                    f"{profile.path}.schedulerName",
                    f"Duplicate value: {quote(profile.scheduler_name)}",
                )
            seen.add(profile.scheduler_name)
        if config.profiles:
            self._validate_common_queue_sort(config.profiles)
        self.check_percentage("percentageOfNodesToScore", config.percentage_of_nodes_to_score)
        if config.pod_initial_backoff_seconds <= 0:
            self.error("podInitialBackoffSeconds", "must be greater than 0")
        if config.pod_max_backoff_seconds < config.pod_initial_backoff_seconds:
            self.error(
                "podMaxBackoffSeconds", "must be greater than or equal to PodInitialBackoffSeconds"
            )
        self._validate_extenders(config.extenders)

    def _validate_common_queue_sort(self, profiles: tuple[Profile, ...]) -> None:
        """kube's validateCommonQueueSort: the queueSort set and its args equal in every profile."""
        first = profiles[0]
        canon = first.plugins.queue_sort
        if len(canon.enabled) > 1:
            self.error(
                f"{first.path}.plugins.queueSort.enabled", "only one queue sort plugin can be enabled"
            )
        name = canon.enabled[0].name if canon.enabled else ""
        args = first.args_for(name) if name else None
        for profile in profiles[1:]:
            if profile.plugins.queue_sort != canon:
                self.error(f"{profile.path}.plugins.queueSort", "must be the same for all profiles")
            for j, entry in enumerate(profile.plugin_config):
                if name and entry.name == name and entry.args != args:
                    self.error(
                        f"{profile.path}.pluginConfig[{j}].args", "must be the same for all profiles"
                    )

    def _validate_extenders(self, extenders: tuple[Extender, ...]) -> None:
        binders = 0
        managed: set[str] = set()
        for i, extender in enumerate(extenders):
            path = f"extenders[{i}]"
            if not extender.url_prefix:
                self.error(f"{path}.urlPrefix", "Required value")
            if extender.prioritize_verb and extender.weight <= 0:
                self.error(f"{path}.weight", "must have a positive weight applied to it")
            if extender.bind_verb:
                binders += 1
            for j, resource in enumerate(extender.managed_resources):
                name_path = f"{path}.managedResources[{j}].name"
                for message in extended_resource_name_errors(resource.name):
                    self.error(name_path, f"{quote(resource.name)}: {message}")
                if resource.name in managed:
                    self.error(
                        name_path,
                        f"duplicate extender managed resource name {quote(resource.name)}",
                    )
                managed.add(resource.name)
        if binders > 1:
            self.error(
                "extenders",
                f"found {binders} extenders implementing bind: "
                "only one extender can implement bind",
            )

    # profiles

    def _profile(self, index: int, wire: _WireProfile, *, single: bool) -> Profile:
        path = f"profiles[{index}]"
        name = wire.scheduler_name
        if name is None and single:
            name = DEFAULT_SCHEDULER_NAME
        if not name:
            self.error(f"{path}.schedulerName", "Required value")
        self.check_percentage(f"{path}.percentageOfNodesToScore", wire.percentage_of_nodes_to_score)
        plugins, legacy = self._plugins(path, wire.plugins)
        plugin_config = self._plugin_config(path, wire.plugin_config, plugins, legacy)
        return Profile(
            scheduler_name=name or "",
            percentage_of_nodes_to_score=wire.percentage_of_nodes_to_score,
            plugins=plugins,
            plugin_config=plugin_config,
            path=path,
        )

    def _plugins(self, path: str, wire: _WirePlugins | None) -> tuple[Plugins, PluginRef | None]:
        """Merged plugin sets, and the v1beta1 score plugin mapped to NodeResourcesFit (or None)."""
        defaults = default_plugins(self.version)
        merged: dict[str, PluginSet] = {}
        for key in PLUGIN_SET_KEYS:
            wire_set = getattr(wire, PLUGIN_SET_ATTRIBUTES[key]) if wire else None
            custom = self._user_set(f"{path}.plugins.{key}", key, wire_set)
            merged[key] = self._drop_removed(merge_plugin_set(defaults.get(key), custom))
        legacy = None
        if self.version == V1BETA1:
            merged["score"], legacy = self._map_legacy_score(path, merged["score"])
        return Plugins.from_sets(merged), legacy

    def _drop_removed(self, plugin_set: PluginSet) -> PluginSet:
        """Default plugins that Kubernetes removed are dropped (user entries are errors)."""
        kept = []
        for ref in plugin_set.enabled:
            if ref.path is None and ref.name in REMOVED_PLUGINS:
                self.warn(
                    f'default plugin "{ref.name}" of {self.version.rsplit("/", 1)[1]} dropped: '
                    f"removed from Kubernetes ({REMOVED_PLUGINS[ref.name].history})"
                )
            else:
                kept.append(ref)
        return attrs.evolve(plugin_set, enabled=tuple(kept))

    def _user_set(self, path: str, key: str, wire: _WirePluginSet | None) -> PluginSet | None:
        if wire is None:
            return None
        enabled = []
        for j, plugin in enumerate(wire.enabled):
            ref = PluginRef(plugin.name, plugin.weight, f"{path}.enabled[{j}]")
            self._check_enabled_name(key, ref)
            enabled.append(ref)
        disabled = []
        for j, plugin in enumerate(wire.disabled):
            ref = PluginRef(plugin.name, None, f"{path}.disabled[{j}]")
            if not plugin.name:
                self.error(f"{ref.path}.name", "Required value")
            elif not self._is_known(plugin.name):
                self.warn(f'{ref.path}: plugin "{plugin.name}" is not known; nothing to disable')
            disabled.append(ref)
        return PluginSet(enabled=tuple(enabled), disabled=tuple(disabled))

    def _is_known(self, name: str) -> bool:
        return (
            name == "*"
            or name in self.catalog
            or name in KUBE_PLUGINS
            or name in REMOVED_PLUGINS
            or name in LEGACY_ARGS
        )

    def _check_enabled_name(self, key: str, ref: PluginRef) -> None:
        """A plugin the user enabled must exist in scorer (the point is checked on resolution)."""
        path, name = f"{ref.path}.name", ref.name
        if not name:
            self.error(path, "Required value")
        elif name == "*":
            self.error(path, '"*" is only allowed in disabled')
        elif name in self.catalog:
            return
        elif name in LEGACY_ARGS:
            strategy = LEGACY_ARGS[name][0]
            if self.version != V1BETA1:
                self.error(
                    path,
                    f'plugin "{name}" was replaced in v1beta2 by {FIT} '
                    f"with scoringStrategy.type {strategy}",
                )
            elif key != "score":
                self.error(path, f'plugin "{name}" is a score plugin')
            elif FIT not in self.catalog:
                self.error(path, f'plugin "{name}" maps to {FIT}, which is not installed')
        else:
            self.error(path, missing_plugin_message(name, self.catalog))

    def _map_legacy_score(self, path: str, score: PluginSet) -> tuple[PluginSet, PluginRef | None]:
        """v1beta1: one resource score plugin remains and becomes NodeResourcesFit.

        Returns the new score set and the legacy entry that was mapped (None
        if the remaining one is NodeResourcesFit itself or there is none).
        """
        candidates = [ref for ref in score.enabled if ref.name in LEGACY_ARGS or ref.name == FIT]
        if not candidates:
            return score, None
        written = [ref for ref in candidates if ref.path is not None]
        if written and len(candidates) > len(written):
            for ref in candidates:
                if ref.path is None:
                    self.warn(
                        f'{path}.plugins.score: default plugin "{ref.name}" dropped: '
                        f'"{written[0].name}" also maps to {FIT}'
                    )
            candidates = written
        keep = candidates[0]
        for ref in candidates[1:]:
            self.error(
                f"{ref.path}.name",
                f'"{ref.name}" and "{keep.name}" ({keep.path}) both map to {FIT}; enable only one',
            )
        legacy = keep if keep.name in LEGACY_ARGS else None
        enabled = []
        for ref in score.enabled:
            if ref.name not in LEGACY_ARGS and ref.name != FIT:
                enabled.append(ref)
            elif ref is keep:
                enabled.append(PluginRef(FIT, ref.weight, ref.path) if legacy else ref)
        return attrs.evolve(score, enabled=tuple(enabled)), legacy

    # pluginConfig

    def _plugin_config(
        self,
        path: str,
        entries: tuple[_WirePluginConfig, ...],
        plugins: Plugins,
        legacy: PluginRef | None,
    ) -> tuple[PluginConfig, ...]:
        strategy = self._legacy_strategy(path, entries, legacy) if self.version == V1BETA1 else None
        out: list[PluginConfig] = []
        seen: set[str] = set()
        for j, entry in enumerate(entries):
            entry_path = f"{path}.pluginConfig[{j}]"
            if not entry.name:
                self.error(f"{entry_path}.name", "Required value")
                continue
            if entry.name in seen:
                self.error(entry_path, f"Duplicate value: {quote(entry.name)}")
                continue
            seen.add(entry.name)
            converted = self._plugin_args(entry_path, entry, strategy)
            if converted is not None:
                out.append(converted)
        for name in sorted(_enabled_names(plugins) - seen):
            info = self.catalog.get(name)
            if info is None or info.args_type is None:
                continue
            data = {"scoringStrategy": strategy} if name == FIT and strategy else {}
            errors: list[tuple[str, str]] = []
            args = structure_into(info.args_type, data, "", errors, kind=f"{name}Args", owner=info.describe())
            for sub, message in errors:
                self.error(
                    f"{path}.pluginConfig",
                    f'default args of plugin "{name}": {join_path("args", sub)}: {message}',
                )
            out.append(PluginConfig(name, args))
        return tuple(out)

    def _plugin_args(
        self, path: str, entry: _WirePluginConfig, strategy: dict[str, Any] | None
    ) -> PluginConfig | None:
        name, raw = entry.name, entry.args
        info = self.catalog.get(name)
        if name in LEGACY_ARGS and self.version == V1BETA1:
            return None  # already folded into NodeResourcesFit's args
        if info is not None:
            if info.args_type is None:
                if raw is None or raw == {}:
                    return PluginConfig(name, None)
                self.error(f"{path}.args", no_args_message(info))
                return None
            if name == FIT and self.version == V1BETA1:
                if isinstance(raw, Mapping) and "scoringStrategy" in raw:
                    self._not_in_version(f"{path}.args.scoringStrategy", _V1BETA2_AND_LATER)
                    return None
                if strategy and (raw is None or isinstance(raw, Mapping)):
                    raw = {**(raw or {}), "scoringStrategy": strategy}
            args = structure_into(
                info.args_type, raw, f"{path}.args", self.errors, kind=f"{name}Args", owner=info.describe()
            )
            return PluginConfig(name, args)
        if name in REMOVED_PLUGINS:
            if self.version == V1 and name in INVALID_IN_V1:
                self.error(f"{path}.name", REMOVED_PLUGINS[name].message())
            else:
                self.warn(f"{path}: args ignored: {REMOVED_PLUGINS[name].message()}")
            return None
        if name in LEGACY_ARGS:
            self.warn(
                f'{path}: args of "{name}" ignored: replaced in v1beta2 by {FIT} '
                f"with scoringStrategy.type {LEGACY_ARGS[name][0]}"
            )
            return None
        if name in KUBE_PLUGINS:
            self.warn(
                f'{path}: scorer does not implement "{name}" yet; its args are kept as written'
            )
        else:
            self.warn(f'{path}: plugin "{name}" is not installed; its args are kept as written')
        return PluginConfig(name, plain(raw))

    def _check_legacy_shape(self, path: str, strategy: dict[str, Any]) -> None:
        """A v1beta1 ``shape`` becomes NodeResourcesFit's; the args type that plugin registers
        checks it, and its errors are reported where the user wrote the shape (``path``)."""
        info = self.catalog.get(FIT)
        if info is None or info.args_type is None:
            return
        errors: list[tuple[str, str]] = []
        structure_into(info.args_type, {"scoringStrategy": strategy}, "", errors)
        for sub, message in errors:
            if sub.startswith(_LEGACY_SHAPE_PATH):
                self.error(join_path(path, sub.removeprefix(_LEGACY_SHAPE_PATH)), message)

    def _legacy_strategy(
        self, path: str, entries: tuple[_WirePluginConfig, ...], chosen: PluginRef | None
    ) -> dict[str, Any] | None:
        """Decode v1beta1 resource score args; the scoring strategy of the enabled one."""
        strategy = None
        found = False
        for j, entry in enumerate(entries):
            if entry.name not in LEGACY_ARGS:
                continue
            entry_path = f"{path}.pluginConfig[{j}]"
            _, cls = LEGACY_ARGS[entry.name]
            known_errors = len(self.errors)
            args = structure_into(
                cls, entry.args, f"{entry_path}.args", self.errors, kind=f"{entry.name}Args"
            )
            if isinstance(args, RequestedToCapacityRatioArgs):
                self._check_legacy_shape(f"{entry_path}.args", scoring_strategy(entry.name, args))
            if len(self.errors) > known_errors:
                args = None  # reported where the user wrote it, not again as NodeResourcesFit's
            if chosen is None or entry.name != chosen.name:
                self.warn(
                    f'{entry_path}: args of "{entry.name}" ignored: '
                    "the plugin is not enabled for score"
                )
                continue
            if args is not None and not found:
                strategy = scoring_strategy(entry.name, args)
            found = True
        if chosen is None:
            return None
        if not found:
            _, cls = LEGACY_ARGS[chosen.name]
            if cls is RequestedToCapacityRatioArgs:
                self.error(
                    f"{chosen.path or path + '.plugins.score'}.name",
                    f'plugin "{chosen.name}" needs args with a "shape" in pluginConfig',
                )
                return None
            strategy = scoring_strategy(chosen.name, cls())
        if strategy is not None and (chosen.path is not None or found):
            weight = chosen.weight if chosen.weight is not None else 1
            self.warn(
                f'{path}.plugins.score: v1beta1 plugin "{chosen.name}" (weight {weight}) '
                "is read as "
                f"{FIT} with scoringStrategy.type {strategy['type']}"
            )
        return strategy


# -- helpers --------------------------------------------------------------------------------


def _in_document_order(
    keys: list[str], key: str, top_errors: list[tuple[str, str]], key_errors: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """The errors of the top level and those of ``key`` (decoded apart), in the order of
    the document's ``keys``: ``key_errors`` before the errors of the keys that follow it."""
    following = set(keys[keys.index(key) + 1 :]) if key in keys else set()
    split = next(
        (i for i, (path, _) in enumerate(top_errors) if re.split(r"[.\[]", path, maxsplit=1)[0] in following),
        len(top_errors),
    )
    return [*top_errors[:split], *key_errors, *top_errors[split:]]


def _given(value: T | None, default: T) -> T:
    return default if value is None else value


def _enabled_names(plugins: Plugins) -> set[str]:
    return {ref.name for _, plugin_set in plugins.items() for ref in plugin_set.enabled}


def _zeros_defaulted(value: _ComponentConfig, *fields: str) -> _ComponentConfig:
    """``value`` with each of ``fields`` that is zero ("", 0, no duration) set to the
    default of its type (component-base + scheduler defaulting)."""
    default = type(value)()
    return attrs.evolve(value, **{field: getattr(value, field) or getattr(default, field) for field in fields})
