"""kube-scheduler's defaults per API version (§1.1, §1.7, §2.1)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from test_config_catalog import full_catalog, make_catalog

from scorer.config import (
    V1,
    V1BETA1,
    V1BETA2,
    V1BETA3,
    ClientConnection,
    LeaderElection,
    PluginConfig,
    PluginRef,
    load_config,
    resolve_config,
)
from scorer.config.defaults import default_plugins
from scorer.plugins.noderesources.fit import NodeResourcesFitArgs

V1_MULTI_POINT = [
    ("SchedulingGates", None),
    ("PrioritySort", None),
    ("NodeUnschedulable", None),
    ("NodeName", None),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", None),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", None),
    ("NodeVolumeLimits", None),
    ("VolumeBinding", None),
    ("VolumeZone", None),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", None),
]

V1BETA3_MULTI_POINT = [
    ("PrioritySort", None),
    ("NodeUnschedulable", None),
    ("NodeName", None),
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    ("NodePorts", None),
    ("NodeResourcesFit", 1),
    ("VolumeRestrictions", None),
    ("EBSLimits", None),
    ("GCEPDLimits", None),
    ("NodeVolumeLimits", None),
    ("AzureDiskLimits", None),
    ("VolumeBinding", None),
    ("VolumeZone", None),
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DefaultPreemption", None),
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    ("DefaultBinder", None),
    ("SchedulingGates", None),
]

PER_POINT_FILTER = [
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
]


def pairs(refs: tuple[PluginRef, ...]) -> list[tuple[str, int | None]]:
    return [(ref.name, ref.weight) for ref in refs]


def names(refs: tuple[PluginRef, ...]) -> list[str]:
    return [ref.name for ref in refs]


def header(version: str) -> dict:
    return {"apiVersion": version, "kind": "KubeSchedulerConfiguration"}


# -- declared defaults ----------------------------------------------------------------------


def test_v1_default_multi_point_list_order_and_weights():
    plugins = default_plugins(V1)
    assert pairs(plugins.multi_point.enabled) == V1_MULTI_POINT
    assert all(not s.enabled for key, s in plugins.items() if key != "multiPoint")


def test_v1beta3_default_multi_point_list_order_and_weights():
    plugins = default_plugins(V1BETA3)
    assert pairs(plugins.multi_point.enabled) == V1BETA3_MULTI_POINT
    assert all(not s.enabled for key, s in plugins.items() if key != "multiPoint")


@pytest.mark.parametrize(
    ("version", "point", "expected"),
    [
        (V1BETA2, "preEnqueue", [("SchedulingGates", None)]),
        (V1BETA2, "queueSort", [("PrioritySort", None)]),
        (
            V1BETA2,
            "preFilter",
            [
                ("NodeResourcesFit", None),
                ("NodePorts", None),
                ("VolumeRestrictions", None),
                ("PodTopologySpread", None),
                ("InterPodAffinity", None),
                ("VolumeBinding", None),
                ("NodeAffinity", None),
            ],
        ),
        (V1BETA2, "filter", [(name, None) for name in PER_POINT_FILTER]),
        (V1BETA2, "postFilter", [("DefaultPreemption", None)]),
        (
            V1BETA2,
            "preScore",
            [
                ("InterPodAffinity", None),
                ("PodTopologySpread", None),
                ("TaintToleration", None),
                ("NodeAffinity", None),
                ("NodeResourcesFit", None),
                ("NodeResourcesBalancedAllocation", None),
            ],
        ),
        (
            V1BETA2,
            "score",
            [
                ("NodeResourcesBalancedAllocation", 1),
                ("ImageLocality", 1),
                ("InterPodAffinity", 1),
                ("NodeResourcesFit", 1),
                ("NodeAffinity", 1),
                ("PodTopologySpread", 2),
                ("TaintToleration", 1),
            ],
        ),
        (V1BETA2, "reserve", [("VolumeBinding", None)]),
        (V1BETA2, "preBind", [("VolumeBinding", None)]),
        (V1BETA2, "bind", [("DefaultBinder", None)]),
        (V1BETA2, "multiPoint", []),
        (V1BETA1, "preEnqueue", []),
        (V1BETA1, "queueSort", [("PrioritySort", None)]),
        (
            V1BETA1,
            "preFilter",
            [
                ("NodeResourcesFit", None),
                ("NodePorts", None),
                ("PodTopologySpread", None),
                ("InterPodAffinity", None),
                ("VolumeBinding", None),
                ("NodeAffinity", None),
            ],
        ),
        (V1BETA1, "filter", [(name, None) for name in PER_POINT_FILTER]),
        (V1BETA1, "postFilter", [("DefaultPreemption", None)]),
        (
            V1BETA1,
            "preScore",
            [
                ("InterPodAffinity", None),
                ("PodTopologySpread", None),
                ("TaintToleration", None),
                ("NodeAffinity", None),
            ],
        ),
        (
            V1BETA1,
            "score",
            [
                ("NodeResourcesBalancedAllocation", 1),
                ("ImageLocality", 1),
                ("InterPodAffinity", 1),
                ("NodeResourcesLeastAllocated", 1),
                ("NodeAffinity", 1),
                ("NodePreferAvoidPods", 10000),
                ("PodTopologySpread", 2),
                ("TaintToleration", 1),
            ],
        ),
        (V1BETA1, "reserve", [("VolumeBinding", None)]),
        (V1BETA1, "preBind", [("VolumeBinding", None)]),
        (V1BETA1, "bind", [("DefaultBinder", None)]),
        (V1BETA1, "multiPoint", []),
    ],
)
def test_per_point_defaults_of_v1beta2_and_v1beta1(version, point, expected):
    assert pairs(default_plugins(version).get(point).enabled) == expected


# -- top-level defaults ---------------------------------------------------------------------


@pytest.mark.parametrize("version", [V1, V1BETA3, V1BETA2, V1BETA1])
def test_top_level_defaults(version):
    config = load_config(header(version), make_catalog())
    assert config.api_version == version
    assert config.parallelism == 16
    assert config.leader_election == LeaderElection(
        leader_elect=True,
        lease_duration=timedelta(seconds=15),
        renew_deadline=timedelta(seconds=10),
        retry_period=timedelta(seconds=2),
        resource_lock="leases",
        resource_name="kube-scheduler",
        resource_namespace="kube-system",
    )
    assert config.client_connection == ClientConnection(
        kubeconfig="",
        accept_content_types="",
        content_type="application/vnd.kubernetes.protobuf",
        qps=50.0,
        burst=100,
    )
    assert config.enable_profiling is True
    assert config.enable_contention_profiling is True
    assert config.percentage_of_nodes_to_score == 0
    assert config.pod_initial_backoff_seconds == 1
    assert config.pod_max_backoff_seconds == 10
    assert config.extenders == ()
    assert config.delay_cache_until_active is False
    assert [p.scheduler_name for p in config.profiles] == ["default-scheduler"]
    assert config.profiles[0].percentage_of_nodes_to_score is None


def test_none_is_the_v1_default_configuration():
    assert load_config(None, make_catalog()) == load_config(header(V1), make_catalog())


@pytest.mark.parametrize(
    ("data", "field", "expected"),
    [
        ({"leaderElection": {"leaseDuration": "0s"}}, "lease", timedelta(seconds=15)),
        ({"leaderElection": {"leaseDuration": "30s"}}, "lease", timedelta(seconds=30)),
        ({"leaderElection": {"resourceName": ""}}, "name", "kube-scheduler"),
        ({"leaderElection": {"leaderElect": False}}, "elect", False),
        ({"leaderElection": {"leaderElect": None}}, "elect", True),
        ({"clientConnection": {"qps": 0}}, "qps", 50.0),
        ({"clientConnection": {"qps": 7.5}}, "qps", 7.5),
        ({"clientConnection": {"burst": 0}}, "burst", 100),
        (
            {"clientConnection": {"contentType": ""}},
            "content",
            "application/vnd.kubernetes.protobuf",
        ),
        ({"enableProfiling": False}, "contention", False),
        ({"enableProfiling": False, "enableContentionProfiling": True}, "contention", True),
        ({"enableProfiling": True, "enableContentionProfiling": False}, "contention", False),
        ({"percentageOfNodesToScore": 0}, "percentage", 0),
        ({"percentageOfNodesToScore": 40}, "percentage", 40),
        ({"profiles": []}, "profiles", ["default-scheduler"]),
        ({"profiles": [{}]}, "profiles", ["default-scheduler"]),
    ],
)
def test_zero_values_and_pointers(data, field, expected):
    config = load_config({**header(V1), **data}, make_catalog())
    actual = {
        "lease": config.leader_election.lease_duration,
        "name": config.leader_election.resource_name,
        "elect": config.leader_election.leader_elect,
        "qps": config.client_connection.qps,
        "burst": config.client_connection.burst,
        "content": config.client_connection.content_type,
        "contention": config.enable_contention_profiling,
        "percentage": config.percentage_of_nodes_to_score,
        "profiles": [p.scheduler_name for p in config.profiles],
    }[field]
    assert actual == expected


# -- defaults as loaded and resolved --------------------------------------------------------


def test_v1_loaded_profile_keeps_the_declared_multi_point_and_default_args():
    profile = load_config(None, make_catalog()).profiles[0]
    assert pairs(profile.plugins.multi_point.enabled) == V1_MULTI_POINT
    assert profile.plugins.multi_point.disabled == ()
    # default args for every enabled plugin with an args type (NetworkTraffic is not enabled)
    assert profile.plugin_config == (PluginConfig("NodeResourcesFit", NodeResourcesFitArgs()),)


V1_RESOLVED = {
    "preEnqueue": ("SchedulingGates",),
    "queueSort": ("PrioritySort",),
    "preFilter": (
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
    ),
    "filter": (
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "NodeVolumeLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
    ),
    "postFilter": ("DefaultPreemption",),
    "preScore": (
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeResourcesBalancedAllocation",
    ),
    "score": (
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeResourcesBalancedAllocation",
        "ImageLocality",
    ),
    "reserve": ("VolumeBinding",),
    "permit": (),
    "preBind": ("VolumeBinding",),
    "bind": ("DefaultBinder",),
    "postBind": (),
}


def test_v1_resolved_with_every_plugin_implemented():
    catalog = full_catalog()
    (resolved,) = resolve_config(load_config(None, catalog), catalog)
    assert resolved.points == V1_RESOLVED
    assert resolved.weights == {
        "TaintToleration": 3,
        "NodeAffinity": 2,
        "NodeResourcesFit": 1,
        "PodTopologySpread": 2,
        "InterPodAffinity": 2,
        "NodeResourcesBalancedAllocation": 1,
        "ImageLocality": 1,
    }
    assert sum(resolved.weights.values()) * 100 == 1200  # §2.1: max total per node
    assert resolved.warnings == ()


@pytest.mark.parametrize(
    ("version", "weights"),
    [
        (
            V1BETA3,
            {
                "TaintToleration": 3,
                "NodeAffinity": 2,
                "NodeResourcesFit": 1,
                "PodTopologySpread": 2,
                "InterPodAffinity": 2,
                "NodeResourcesBalancedAllocation": 1,
                "ImageLocality": 1,
            },
        ),
        (
            V1BETA2,
            {
                "NodeResourcesBalancedAllocation": 1,
                "ImageLocality": 1,
                "InterPodAffinity": 1,
                "NodeResourcesFit": 1,
                "NodeAffinity": 1,
                "PodTopologySpread": 2,
                "TaintToleration": 1,
            },
        ),
        (
            V1BETA1,
            {
                "NodeResourcesBalancedAllocation": 1,
                "ImageLocality": 1,
                "InterPodAffinity": 1,
                "NodeResourcesFit": 1,
                "NodeAffinity": 1,
                "PodTopologySpread": 2,
                "TaintToleration": 1,
            },
        ),
    ],
)
def test_older_versions_resolved_weights_in_order(version, weights):
    catalog = full_catalog()
    config = load_config(header(version), catalog)
    (resolved,) = resolve_config(config, catalog)
    assert list(resolved.weights.items()) == list(weights.items())
    assert resolved.points["bind"] == ("DefaultBinder",)
    assert resolved.points["queueSort"] == ("PrioritySort",)


@pytest.mark.parametrize(
    ("version", "dropped"),
    [
        (V1, []),
        (V1BETA3, ["EBSLimits", "GCEPDLimits", "AzureDiskLimits"]),
        (V1BETA2, ["EBSLimits", "GCEPDLimits", "AzureDiskLimits"]),
        (V1BETA1, ["EBSLimits", "GCEPDLimits", "AzureDiskLimits", "NodePreferAvoidPods"]),
    ],
)
def test_removed_default_plugins_are_dropped_with_a_warning(version, dropped):
    config = load_config(header(version), make_catalog())
    short = version.rsplit("/", 1)[1]
    assert [w.split('"')[1] for w in config.warnings if "dropped" in w] == dropped
    for name in dropped:
        assert f'default plugin "{name}" of {short} dropped: removed from Kubernetes' in " ".join(
            config.warnings
        )
    enabled = {ref.name for _, s in config.profiles[0].plugins.items() for ref in s.enabled}
    assert not enabled & set(dropped)


def test_v1beta1_default_least_allocated_becomes_fit_scoring_silently():
    config = load_config(header(V1BETA1), make_catalog())
    score = config.profiles[0].plugins.score
    assert names(score.enabled)[3] == "NodeResourcesFit"
    assert score.enabled[3].weight == 1
    assert config.profiles[0].args_for("NodeResourcesFit") == NodeResourcesFitArgs()
    assert not any("read as" in w for w in config.warnings)


# -- the built-in plugins against kube's default profile (issue 9, item 7) ---------------------------

VOLUME_PLUGINS = ("VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone")
FULL_V1_WEIGHTS = {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1, "PodTopologySpread": 2,
                   "InterPodAffinity": 2, "NodeResourcesBalancedAllocation": 1, "ImageLocality": 1}


def builtin_defaults():
    """The default profile (no config file) resolved against scorer's built-in plugins, and the
    default plugins the resolution skipped (what the startup note lists)."""
    from scorer.registry import build_registry

    catalog = build_registry(autoload=False).catalog()
    (resolved,) = resolve_config(load_config(None, catalog), catalog)
    prefix, suffix = 'default plugin "', '" is not implemented by scorer yet; skipped'
    assert all(w.startswith(prefix) and w.endswith(suffix) for w in resolved.warnings), resolved.warnings
    return resolved, [w[len(prefix):-len(suffix)] for w in resolved.warnings]


def test_builtin_default_profile_is_kubes_whole_default_profile_in_order_and_weights():
    resolved, missing = builtin_defaults()
    assert missing == []
    assert resolved.points == V1_RESOLVED
    assert resolved.weights == FULL_V1_WEIGHTS


def test_the_volume_plugins_are_in_the_default_profile_at_kubes_points():
    resolved, _ = builtin_defaults()
    for name in VOLUME_PLUGINS:
        assert name in resolved.points["preFilter"] and name in resolved.points["filter"]
    assert resolved.points["reserve"] == ("VolumeBinding",) and resolved.points["preBind"] == ("VolumeBinding",)
    assert not set(VOLUME_PLUGINS) & set(resolved.points["score"])  # StorageCapacityScoring is off


def test_no_startup_note_when_every_default_plugin_is_implemented(capsys, monkeypatch, tmp_path):
    from scorer.cli import main

    monkeypatch.setenv("SCORER_DISABLE_PLUGIN_AUTOLOAD", "1")
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text('kind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: "1", pods: "10"}}\n')
    assert main(["simulate", "--cluster", str(cluster)]) == 0
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert notes == []
