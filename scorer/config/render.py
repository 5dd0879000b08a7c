"""Printing a configuration: the effective v1 KubeSchedulerConfiguration, and the resolved plugins.

``effective_config`` is kube-shaped only (what kube-scheduler would print
for the same input, in v1), so it can be fed back to scorer or to
kube-scheduler. What scorer adds (resolved plugin order, weights, warnings)
is text from ``describe_resolved``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from scorer.config.convert import unstructure
from scorer.config.load import load_and_resolve
from scorer.config.types import (
    KIND,
    V1,
    PluginRef,
    PluginSet,
    Profile,
    ResolvedProfile,
    SchedulerConfig,
)
from scorer.framework.catalog import EXTENSION_POINTS, PluginInfo
from scorer.inputs.duration import format_duration


def effective_config(
    config: SchedulerConfig, resolved: Sequence[ResolvedProfile] | None = None
) -> dict[str, Any]:
    """The configuration as a v1 KubeSchedulerConfiguration mapping, defaults filled in.

    Plugin sets are shown merged with the defaults of the source's version,
    ``pluginConfig`` includes the defaulted args (with their ``apiVersion``
    and ``kind``, as kube prints them). ``resolved`` is accepted so callers
    can pass what they have; the kube shape does not depend on it.
    """
    del (
        resolved
    )  # the merged sets are the kube view; resolution is scorer's own (describe_resolved)
    election = config.leader_election
    connection = config.client_connection
    return {
        "apiVersion": V1,
        "kind": KIND,
        "parallelism": config.parallelism,
        "leaderElection": {
            "leaderElect": election.leader_elect,
            "leaseDuration": format_duration(election.lease_duration),
            "renewDeadline": format_duration(election.renew_deadline),
            "retryPeriod": format_duration(election.retry_period),
            "resourceLock": election.resource_lock,
            "resourceName": election.resource_name,
            "resourceNamespace": election.resource_namespace,
        },
        "clientConnection": {
            "kubeconfig": connection.kubeconfig,
            "acceptContentTypes": connection.accept_content_types,
            "contentType": connection.content_type,
            "qps": connection.qps,
            "burst": connection.burst,
        },
        "enableProfiling": config.enable_profiling,
        "enableContentionProfiling": config.enable_contention_profiling,
        "percentageOfNodesToScore": config.percentage_of_nodes_to_score,
        "podInitialBackoffSeconds": config.pod_initial_backoff_seconds,
        "podMaxBackoffSeconds": config.pod_max_backoff_seconds,
        "profiles": [_profile(profile) for profile in config.profiles],
        "extenders": [_extender(extender) for extender in config.extenders],
        "delayCacheUntilActive": config.delay_cache_until_active,
    }


def _profile(profile: Profile) -> dict[str, Any]:
    out: dict[str, Any] = {"schedulerName": profile.scheduler_name}
    if profile.percentage_of_nodes_to_score is not None:
        out["percentageOfNodesToScore"] = profile.percentage_of_nodes_to_score
    plugins = {
        key: _plugin_set(plugin_set)
        for key, plugin_set in profile.plugins.items()
        if plugin_set.enabled or plugin_set.disabled
    }
    out["plugins"] = plugins
    out["pluginConfig"] = [
        _plugin_config(entry.name, entry.args) for entry in profile.plugin_config
    ]
    return out


def _plugin_set(plugin_set: PluginSet) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if plugin_set.enabled:
        out["enabled"] = [_plugin_ref(ref) for ref in plugin_set.enabled]
    if plugin_set.disabled:
        out["disabled"] = [{"name": ref.name} for ref in plugin_set.disabled]
    return out


def _plugin_ref(ref: PluginRef) -> dict[str, Any]:
    return {"name": ref.name} if ref.weight is None else {"name": ref.name, "weight": ref.weight}


def _plugin_config(name: str, args: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name}
    if attrs.has(type(args)):
        out["args"] = {"apiVersion": V1, "kind": f"{name}Args", **unstructure(args)}
    elif args is not None:
        out["args"] = unstructure(args)
    return out


def _extender(extender: Any) -> dict[str, Any]:
    data = unstructure(extender)
    # kube prints every field of an extender, empty or not (no omitempty on most)
    defaults = {
        "urlPrefix": "",
        "filterVerb": "",
        "preemptVerb": "",
        "prioritizeVerb": "",
        "weight": 0,
        "bindVerb": "",
        "enableHTTPS": False,
        "httpTimeout": "0s",
        "nodeCacheCapable": False,
        "managedResources": [],
        "ignorable": False,
    }
    return {**defaults, **data}


def describe_resolved(
    resolved: ResolvedProfile | Sequence[ResolvedProfile], warnings: Sequence[str] = ()
) -> str:
    """Human text: per profile, each extension point's plugins in order, score weights, warnings.

    ``warnings`` are printed first (pass ``SchedulerConfig.warnings``).
    """
    profiles = (resolved,) if isinstance(resolved, ResolvedProfile) else tuple(resolved)
    lines: list[str] = []
    if warnings:
        lines.append("warnings:")
        lines.extend(f"  - {warning}" for warning in warnings)
    width = max(len(point) for point in EXTENSION_POINTS) + 1
    for profile in profiles:
        pct = profile.percentage_of_nodes_to_score
        pct_text = "global" if pct is None else f"{pct}%" if pct else "adaptive"
        lines.append(f'profile "{profile.scheduler_name}" (percentageOfNodesToScore: {pct_text})')
        for point in EXTENSION_POINTS:
            names = profile.points.get(point, ())
            if point == "score":
                shown = [f"{name} (weight {profile.weights.get(name, 1)})" for name in names]
            else:
                shown = list(names)
            lines.append(f"  {(point + ':').ljust(width)} {', '.join(shown) if shown else '-'}")
        if profile.weights:
            total = sum(profile.weights.values()) * 100
            lines.append(f"  max total score per node: {total}")
        for warning in profile.warnings:
            lines.append(f"  warning: {warning}")
    return "\n".join(lines) + "\n"


def validate_file(
    path: str | os.PathLike[str], catalog: Mapping[str, PluginInfo]
) -> tuple[SchedulerConfig, tuple[ResolvedProfile, ...]]:
    """Load and resolve a configuration file; one ConfigError listing every problem."""
    return load_and_resolve(path, catalog)
