"""The decoded KubeSchedulerConfiguration (defaults applied, plugin sets merged).

Field names are the snake_case forms of kube's JSON names; values are what
kube-scheduler holds after decoding and defaulting (§1 of the reference).
Durations are ``timedelta``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import attrs

from scorer.framework.catalog import EXTENSION_POINTS

# Re-exported by scorer.config; GROUP, MULTI_POINT and PLUGIN_SET_ATTRIBUTES are for its own modules.
__all__ = [
    "API_VERSIONS",
    "DEFAULT_SCHEDULER_NAME",
    "KIND",
    "PLUGIN_SET_KEYS",
    "V1",
    "V1BETA1",
    "V1BETA2",
    "V1BETA3",
    "ClientConnection",
    "Extender",
    "ExtenderManagedResource",
    "ExtenderTLSConfig",
    "LeaderElection",
    "PluginConfig",
    "PluginRef",
    "Plugins",
    "PluginSet",
    "Profile",
    "ResolvedProfile",
    "SchedulerConfig",
]

GROUP = "kubescheduler.config.k8s.io"
V1 = f"{GROUP}/v1"
V1BETA3 = f"{GROUP}/v1beta3"
V1BETA2 = f"{GROUP}/v1beta2"
V1BETA1 = f"{GROUP}/v1beta1"
API_VERSIONS: tuple[str, ...] = (V1, V1BETA3, V1BETA2, V1BETA1)
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "default-scheduler"

# Plugin set keys of ``profiles[].plugins`` in kube's field order (multiPoint last).
PLUGIN_SET_KEYS: tuple[str, ...] = (*EXTENSION_POINTS, "multiPoint")
MULTI_POINT = "multiPoint"
# Config key -> attribute of Plugins: "preFilter" -> "pre_filter".
PLUGIN_SET_ATTRIBUTES: dict[str, str] = {
    key: "".join("_" + c.lower() if c.isupper() else c for c in key) for key in PLUGIN_SET_KEYS
}


@attrs.frozen(slots=True)
class LeaderElection:
    """``leaderElection`` (component-base LeaderElectionConfiguration), scheduler defaults."""

    leader_elect: bool = True
    lease_duration: timedelta = timedelta(seconds=15)
    renew_deadline: timedelta = timedelta(seconds=10)
    retry_period: timedelta = timedelta(seconds=2)
    resource_lock: str = "leases"
    resource_name: str = "kube-scheduler"
    resource_namespace: str = "kube-system"


@attrs.frozen(slots=True)
class ClientConnection:
    """``clientConnection`` (component-base ClientConnectionConfiguration), scheduler defaults."""

    kubeconfig: str = ""
    accept_content_types: str = ""
    content_type: str = "application/vnd.kubernetes.protobuf"
    qps: float = 50.0
    burst: int = attrs.field(default=100, metadata={"bits": 32})


@attrs.frozen(slots=True)
class ExtenderTLSConfig:
    """``extenders[].tlsConfig``; ``*_data`` (base64 in the file) wins over ``*_file``."""

    insecure: bool = False
    server_name: str = ""
    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    cert_data: bytes = b""
    key_data: bytes = b""
    ca_data: bytes = b""


@attrs.frozen(slots=True)
class ExtenderManagedResource:
    """``extenders[].managedResources[]``."""

    name: str = ""
    ignored_by_scheduler: bool = False


@attrs.frozen(slots=True)
class Extender:
    """``extenders[]``: an HTTP extender (§1.3).

    ``http_timeout`` of 0 means the runtime default of 5s (kube's
    ``DefaultExtenderTimeout``), which is applied by the caller, not here.
    """

    url_prefix: str = ""
    filter_verb: str = ""
    preempt_verb: str = ""
    prioritize_verb: str = ""
    weight: int = 0
    bind_verb: str = ""
    enable_https: bool = attrs.field(default=False, metadata={"json": "enableHTTPS"})
    tls_config: ExtenderTLSConfig | None = None
    http_timeout: timedelta = timedelta(0)
    node_cache_capable: bool = False
    managed_resources: tuple[ExtenderManagedResource, ...] = ()
    ignorable: bool = False


@attrs.frozen(slots=True)
class PluginRef:
    """An entry of ``enabled``/``disabled``: a plugin name and an optional score weight.

    ``path`` is where the user wrote it (``profiles[0].plugins.score.enabled[2]``);
    None for entries that come from the version's defaults. It is not part of
    equality.
    """

    name: str
    weight: int | None = None
    path: str | None = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen(slots=True)
class PluginSet:
    """``enabled`` and ``disabled`` plugins of one extension point (or multiPoint)."""

    enabled: tuple[PluginRef, ...] = ()
    disabled: tuple[PluginRef, ...] = ()

    def enabled_names(self) -> tuple[str, ...]:
        return tuple(ref.name for ref in self.enabled)

    def disabled_names(self) -> frozenset[str]:
        return frozenset(ref.name for ref in self.disabled)


@attrs.frozen(slots=True)
class Plugins:
    """``profiles[].plugins``: one PluginSet per extension point, plus multiPoint."""

    pre_enqueue: PluginSet = PluginSet()
    queue_sort: PluginSet = PluginSet()
    pre_filter: PluginSet = PluginSet()
    filter: PluginSet = PluginSet()
    post_filter: PluginSet = PluginSet()
    pre_score: PluginSet = PluginSet()
    score: PluginSet = PluginSet()
    reserve: PluginSet = PluginSet()
    permit: PluginSet = PluginSet()
    pre_bind: PluginSet = PluginSet()
    bind: PluginSet = PluginSet()
    post_bind: PluginSet = PluginSet()
    multi_point: PluginSet = PluginSet()

    def get(self, key: str) -> PluginSet:
        """The set for a config key: ``plugins.get("score")``, ``plugins.get("multiPoint")``."""
        return getattr(self, PLUGIN_SET_ATTRIBUTES[key])  # type: ignore[no-any-return]

    def items(self) -> tuple[tuple[str, PluginSet], ...]:
        """``(config key, set)`` pairs in kube's field order."""
        return tuple((key, self.get(key)) for key in PLUGIN_SET_KEYS)

    @classmethod
    def from_sets(cls, sets: dict[str, PluginSet]) -> Plugins:
        """Build from ``{config key: set}``; missing keys are empty."""
        return cls(**{PLUGIN_SET_ATTRIBUTES[key]: value for key, value in sets.items()})


@attrs.frozen(slots=True)
class PluginConfig:
    """``profiles[].pluginConfig[]``.

    ``args`` is an instance of the plugin's args type when the plugin is
    installed and has one, otherwise the mapping as written.
    """

    name: str
    args: Any = None


@attrs.frozen(slots=True)
class Profile:
    """``profiles[]`` after defaulting: plugin sets merged with the version's defaults.

    ``path`` (``profiles[1]``) locates the profile in the source for error
    messages; it is not part of equality.
    """

    scheduler_name: str
    percentage_of_nodes_to_score: int | None = None
    plugins: Plugins = Plugins()
    plugin_config: tuple[PluginConfig, ...] = ()
    path: str = attrs.field(default="", eq=False, repr=False)

    def args_for(self, name: str) -> Any:
        """The ``pluginConfig`` args of plugin ``name``, or None."""
        for entry in self.plugin_config:
            if entry.name == name:
                return entry.args
        return None


@attrs.frozen(slots=True)
class SchedulerConfig:
    """A decoded, defaulted and validated KubeSchedulerConfiguration.

    ``api_version`` is the version the source was written in; the values are
    what kube-scheduler would hold for it. ``warnings`` lists what was
    accepted but ignored or changed (deprecated fields, plugins removed from
    Kubernetes, v1beta1 plugins mapped to NodeResourcesFit). ``source`` names
    the file (or ``<input>``).
    """

    api_version: str = V1
    parallelism: int = 16
    leader_election: LeaderElection = LeaderElection()
    client_connection: ClientConnection = ClientConnection()
    enable_profiling: bool = True
    enable_contention_profiling: bool = True
    percentage_of_nodes_to_score: int = 0
    pod_initial_backoff_seconds: int = 1
    pod_max_backoff_seconds: int = 10
    profiles: tuple[Profile, ...] = ()
    extenders: tuple[Extender, ...] = ()
    delay_cache_until_active: bool = False
    warnings: tuple[str, ...] = attrs.field(default=(), eq=False)
    source: str = attrs.field(default="", eq=False, repr=False)


@attrs.frozen(slots=True)
class ResolvedProfile:
    """A profile as the framework runs it (§1.5): multiPoint expanded, weights final.

    ``points`` maps every extension point key (``queueSort``, ``filter``,
    ``score`` ...) to the plugin names to run there, in order.
    ``weights`` has the weight of every plugin in ``points["score"]``.
    ``args`` has an entry for every plugin that runs anywhere: its converted
    args, the raw mapping for plugins without an args type, or None.
    ``percentage_of_nodes_to_score`` is the profile's own value; None means
    the global one applies. ``warnings`` lists default plugins that were
    skipped because scorer does not implement them.
    """

    scheduler_name: str
    percentage_of_nodes_to_score: int | None
    points: dict[str, tuple[str, ...]]
    weights: dict[str, int]
    args: dict[str, Any]
    warnings: tuple[str, ...] = ()

    @property
    def plugin_names(self) -> tuple[str, ...]:
        """Every plugin that runs in this profile, in order of first appearance."""
        return tuple(dict.fromkeys(name for names in self.points.values() for name in names))
