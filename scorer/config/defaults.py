"""kube-scheduler's default plugins per API version, and plugins that are gone.

These are the *declared* defaults, as kube-scheduler has them (§2.1, §1.7 of
the reference). Plugins of these lists that scorer has not implemented stay
here; resolution skips them with a warning. Plugins removed from Kubernetes
are dropped from the defaults while decoding (with a warning).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from scorer.config.types import V1, V1BETA1, V1BETA2, V1BETA3, PluginRef, Plugins, PluginSet
from scorer.framework.catalog import PluginCatalog, PluginInfo
from scorer.inputs.describe import quote

_MAX_LISTED_PLUGINS = 12


def _refs(*entries: str | tuple[str, int]) -> tuple[PluginRef, ...]:
    return tuple(
        PluginRef(entry) if isinstance(entry, str) else PluginRef(entry[0], entry[1])
        for entry in entries
    )


def _plugins(*sets: tuple[str, PluginSet]) -> Plugins:
    return Plugins.from_sets(dict(sets))


def _only(key: str, *entries: str | tuple[str, int]) -> tuple[str, PluginSet]:
    return key, PluginSet(enabled=_refs(*entries))


# The multiPoint lists of v1 and v1beta3 differ only in the in-tree volume limit
# plugins and in where SchedulingGates stands (§2.1 and its version notes); the
# rest of both is these two runs, in this order and with these weights.
_MULTI_POINT_TO_VOLUME_RESTRICTIONS = (
    "PrioritySort",
    "NodeUnschedulable",
    "NodeName",
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    "NodePorts",
    ("NodeResourcesFit", 1),
    "VolumeRestrictions",
)
_MULTI_POINT_FROM_VOLUME_BINDING = (
    "VolumeBinding",
    "VolumeZone",
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    "DefaultPreemption",
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    "DefaultBinder",
)

# v1, Kubernetes 1.31-1.36 (default_plugins.go), without DynamicResources.
_V1 = _plugins(
    _only(
        "multiPoint",
        "SchedulingGates",
        *_MULTI_POINT_TO_VOLUME_RESTRICTIONS,
        "NodeVolumeLimits",
        *_MULTI_POINT_FROM_VOLUME_BINDING,
    )
)

# v1beta3 as served last (Kubernetes 1.28): the in-tree volume limit plugins are
# still listed (they are dropped as removed), SchedulingGates is appended at the
# end because the PodSchedulingReadiness gate is on.
_V1BETA3 = _plugins(
    _only(
        "multiPoint",
        *_MULTI_POINT_TO_VOLUME_RESTRICTIONS,
        "EBSLimits",
        "GCEPDLimits",
        "NodeVolumeLimits",
        "AzureDiskLimits",
        *_MULTI_POINT_FROM_VOLUME_BINDING,
        "SchedulingGates",
    )
)

_PER_POINT_FILTER = (
    "NodeUnschedulable",
    "NodeName",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    "NodeResourcesFit",
    "VolumeRestrictions",
    "EBSLimits",
    "GCEPDLimits",
    "NodeVolumeLimits",
    "AzureDiskLimits",
    "VolumeBinding",
    "VolumeZone",
    "PodTopologySpread",
    "InterPodAffinity",
)


def _per_point(
    *,
    pre_enqueue: tuple[str, ...] = (),
    pre_filter: tuple[str, ...],
    pre_score: tuple[str, ...],
    score: tuple[tuple[str, int], ...],
) -> Plugins:
    """Defaults given per extension point (v1beta2, v1beta1): the two versions differ
    only in preEnqueue, preFilter, preScore and score."""
    return _plugins(
        _only("preEnqueue", *pre_enqueue),
        _only("queueSort", "PrioritySort"),
        _only("preFilter", *pre_filter),
        _only("filter", *_PER_POINT_FILTER),
        _only("postFilter", "DefaultPreemption"),
        _only("preScore", *pre_score),
        _only("score", *score),
        _only("reserve", "VolumeBinding"),
        _only("preBind", "VolumeBinding"),
        _only("bind", "DefaultBinder"),
    )


# v1beta2 as served last (Kubernetes 1.27): all score weights 1 except
# PodTopologySpread 2.
_V1BETA2 = _per_point(
    pre_enqueue=("SchedulingGates",),
    pre_filter=(
        "NodeResourcesFit",
        "NodePorts",
        "VolumeRestrictions",
        "PodTopologySpread",
        "InterPodAffinity",
        "VolumeBinding",
        "NodeAffinity",
    ),
    pre_score=(
        "InterPodAffinity",
        "PodTopologySpread",
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "NodeResourcesBalancedAllocation",
    ),
    score=(
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
        ("InterPodAffinity", 1),
        ("NodeResourcesFit", 1),
        ("NodeAffinity", 1),
        ("PodTopologySpread", 2),
        ("TaintToleration", 1),
    ),
)

# v1beta1 (algorithmprovider, Kubernetes 1.21) with DefaultPodTopologySpread on,
# so without SelectorSpread.
_V1BETA1 = _per_point(
    pre_filter=(
        "NodeResourcesFit",
        "NodePorts",
        "PodTopologySpread",
        "InterPodAffinity",
        "VolumeBinding",
        "NodeAffinity",
    ),
    pre_score=("InterPodAffinity", "PodTopologySpread", "TaintToleration", "NodeAffinity"),
    score=(
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
        ("InterPodAffinity", 1),
        ("NodeResourcesLeastAllocated", 1),
        ("NodeAffinity", 1),
        ("NodePreferAvoidPods", 10000),
        ("PodTopologySpread", 2),
        ("TaintToleration", 1),
    ),
)

_DEFAULT_PLUGINS: dict[str, Plugins] = {
    V1: _V1,
    V1BETA3: _V1BETA3,
    V1BETA2: _V1BETA2,
    V1BETA1: _V1BETA1,
}


def default_plugins(api_version: str) -> Plugins:
    """The declared default plugin sets of ``api_version`` (including removed plugins)."""
    return _DEFAULT_PLUGINS[api_version]


# In-tree plugins of current kube-scheduler (any of them may be missing from scorer):
# the v1 defaults and DynamicResources, which they leave out (§2.1).
KUBE_PLUGINS: frozenset[str] = frozenset({*_V1.multi_point.enabled_names(), "DynamicResources"})


@attrs.frozen(slots=True)
class RemovedPlugin:
    """A plugin that Kubernetes removed without a replacement of the same name."""

    name: str
    history: str  # when, as far as the reference says
    instead: str = ""  # what to use instead, if anything

    def message(self) -> str:
        text = f'plugin "{self.name}" was removed from Kubernetes ({self.history})'
        return f"{text}; {self.instead}" if self.instead else text


REMOVED_PLUGINS: dict[str, RemovedPlugin] = {
    p.name: p
    for p in (
        RemovedPlugin(
            "NodeLabel", "deprecated in v1beta2, not available since v1beta3", "use NodeAffinity"
        ),
        RemovedPlugin(
            "ServiceAffinity",
            "deprecated in v1beta2, not available since v1beta3",
            "use InterPodAffinity",
        ),
        RemovedPlugin("NodePreferAvoidPods", "deprecated in v1beta2, not available since v1beta3"),
        RemovedPlugin("SelectorSpread", "not available in v1", "use PodTopologySpread"),
        RemovedPlugin(
            "AzureDiskLimits",
            "dropped from the defaults in 1.31, removed in 1.32",
            "use NodeVolumeLimits (CSI)",
        ),
        RemovedPlugin(
            "CinderLimits",
            "dropped from the defaults in 1.31, removed in 1.32",
            "use NodeVolumeLimits (CSI)",
        ),
        RemovedPlugin(
            "EBSLimits",
            "dropped from the defaults in 1.31, removed in 1.32",
            "use NodeVolumeLimits (CSI)",
        ),
        RemovedPlugin(
            "GCEPDLimits",
            "dropped from the defaults in 1.31, removed in 1.32",
            "use NodeVolumeLimits (CSI)",
        ),
    )
}

# v1 validation rejects these in enabled lists and pluginConfig (§1.6).
INVALID_IN_V1: frozenset[str] = frozenset(
    {"AzureDiskLimits", "CinderLimits", "EBSLimits", "GCEPDLimits"}
)

FIT = "NodeResourcesFit"


def missing_plugin_message(name: str, catalog: Mapping[str, PluginInfo]) -> str:
    """Why a plugin name the user wrote cannot be used: its distribution failed to load, or
    it was removed, is not implemented, or is unknown (then the distributions that failed to
    load are named: one of them may be the one that provides it)."""
    failures = catalog.failures if isinstance(catalog, PluginCatalog) else ()
    failed = next((failure for failure in failures if name in failure.plugins), None)
    if failed is not None:
        return f'plugin "{name}" is not available: {failed.describe()}'
    if name in REMOVED_PLUGINS:
        return REMOVED_PLUGINS[name].message()
    if name in KUBE_PLUGINS:
        return f'plugin "{name}" is a kube-scheduler plugin that scorer does not implement yet'
    names = sorted(catalog)
    if not names:
        available = "no plugins are installed"
    elif len(names) > _MAX_LISTED_PLUGINS:
        available = 'run "scorer plugins" to list the installed plugins'
    else:
        available = "installed: " + ", ".join(names)
    if failures:
        available += "; " + "; ".join(failure.describe() for failure in failures)
    return f"unknown plugin {quote(name)}; {available}"


def no_args_message(info: PluginInfo) -> str:
    """Why ``pluginConfig[].args`` given to a plugin without an args type are refused."""
    return (f"{info.describe()} takes no args: it registers no args_type to check them against; "
            "remove the args (or, as its author, register an args class)")
