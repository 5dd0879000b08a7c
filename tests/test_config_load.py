"""Decoding, merging and validating KubeSchedulerConfiguration files (§1.1-§1.7)."""

from __future__ import annotations

import json
import textwrap
from datetime import timedelta

import attrs
import pytest
from test_config_catalog import NetworkTrafficArgs, make_catalog

from scorer.config import (
    V1,
    V1BETA1,
    V1BETA2,
    V1BETA3,
    Extender,
    ExtenderManagedResource,
    ExtenderTLSConfig,
    PluginConfig,
    PluginRef,
    PluginSet,
    load_config,
    load_config_text,
    merge_plugin_set,
)
from scorer.errors import ConfigError
from scorer.plugins.noderesources.fit import (
    NodeResourcesFitArgs,
    RequestedToCapacityRatioParam,
    ScoringStrategy,
    UtilizationShapePoint,
)
from scorer.plugins.noderesources.resources import ResourceSpec

CATALOG = make_catalog()
KIND = "KubeSchedulerConfiguration"


def config(version: str = V1, **fields):
    return {"apiVersion": version, "kind": KIND, **fields}


def profile(plugins=None, plugin_config=None, name="default-scheduler", **fields):
    out = {"schedulerName": name, **fields}
    if plugins is not None:
        out["plugins"] = plugins
    if plugin_config is not None:
        out["pluginConfig"] = plugin_config
    return out


def errors_of(data, catalog=CATALOG):
    with pytest.raises(ConfigError) as info:
        load_config(data, catalog)
    return info.value.errors


def text_errors(text: str, catalog=CATALOG):
    with pytest.raises(ConfigError) as info:
        load_config_text(textwrap.dedent(text), catalog, source="sched.yaml")
    assert info.value.source == "sched.yaml"
    return info.value.errors


def pairs(refs):
    return [(ref.name, ref.weight) for ref in refs]


# -- merging (§1.4) -------------------------------------------------------------------------


def refs(*entries):
    return tuple(PluginRef(e) if isinstance(e, str) else PluginRef(*e) for e in entries)


DEFAULT = PluginSet(enabled=refs("A", ("B", 2), "C"))


@pytest.mark.parametrize(
    ("custom", "enabled", "disabled"),
    [
        pytest.param(None, [("A", None), ("B", 2), ("C", None)], [], id="no-custom"),
        pytest.param(PluginSet(), [("A", None), ("B", 2), ("C", None)], [], id="empty-custom"),
        pytest.param(
            PluginSet(disabled=refs("B")), [("A", None), ("C", None)], ["B"], id="disable-one"
        ),
        pytest.param(
            PluginSet(enabled=refs("X"), disabled=refs("*")), [("X", None)], ["*"], id="star"
        ),
        pytest.param(
            PluginSet(enabled=refs(("B", 7))),
            [("A", None), ("B", 7), ("C", None)],
            [],
            id="weight-override-keeps-position",
        ),
        pytest.param(
            PluginSet(enabled=refs("Y", ("C", 4), "X")),
            [("A", None), ("B", 2), ("C", 4), ("Y", None), ("X", None)],
            [],
            id="custom-appended-in-order",
        ),
        pytest.param(
            PluginSet(enabled=refs(("B", 1), ("B", 5))),
            [("A", None), ("B", 5), ("C", None), ("B", 1)],
            [],
            id="duplicates-kept-last-replaces",
        ),
        pytest.param(
            PluginSet(enabled=refs(("B", 9)), disabled=refs("B")),
            [("A", None), ("C", None), ("B", 9)],
            ["B"],
            id="enabled-and-disabled-custom-is-appended",
        ),
        pytest.param(
            PluginSet(disabled=refs(("A", 3), "nope")),
            [("B", 2), ("C", None)],
            ["A", "nope"],
            id="disabled-keeps-names-only",
        ),
    ],
)
def test_merge_plugin_set(custom, enabled, disabled):
    merged = merge_plugin_set(DEFAULT, custom)
    assert pairs(merged.enabled) == enabled
    assert [ref.name for ref in merged.disabled] == disabled
    assert all(ref.weight is None for ref in merged.disabled)


def test_merge_keeps_default_disabled_after_custom_disabled():
    default = PluginSet(enabled=refs("A"), disabled=refs("Z"))
    merged = merge_plugin_set(default, PluginSet(disabled=refs("Q")))
    assert [ref.name for ref in merged.disabled] == ["Q", "Z"]


def test_user_sets_are_merged_with_v1_defaults_per_point():
    data = config(
        profiles=[
            profile(
                {
                    "multiPoint": {
                        "enabled": [
                            {"name": "TaintToleration", "weight": 5},
                            {"name": "NetworkTraffic"},
                        ],
                        "disabled": [{"name": "NodeAffinity"}],
                    },
                    "score": {"enabled": [{"name": "NetworkTraffic", "weight": 2}]},
                    "filter": {"disabled": [{"name": "*"}]},
                }
            )
        ]
    )
    plugins = load_config(data, CATALOG).profiles[0].plugins
    multi = pairs(plugins.multi_point.enabled)
    assert multi[4] == ("TaintToleration", 5)  # weight override in the default's place
    assert ("NodeAffinity", 2) not in multi
    assert multi[-1] == ("NetworkTraffic", None)
    assert [ref.name for ref in plugins.multi_point.disabled] == ["NodeAffinity"]
    assert pairs(plugins.score.enabled) == [("NetworkTraffic", 2)]
    assert [ref.name for ref in plugins.filter.disabled] == ["*"]
    assert plugins.filter.enabled == ()
    # where the user wrote it, for error messages; not part of equality
    assert plugins.score.enabled[0].path == "profiles[0].plugins.score.enabled[0]"
    assert plugins.multi_point.enabled[4].path == "profiles[0].plugins.multiPoint.enabled[0]"
    assert plugins.multi_point.enabled[0].path is None


def test_v1beta2_per_point_merge_with_weight_override_and_star():
    data = config(
        V1BETA2,
        profiles=[
            profile(
                {
                    "score": {
                        "enabled": [
                            {"name": "TaintToleration", "weight": 4},
                            {"name": "NetworkTraffic"},
                        ],
                        "disabled": [{"name": "ImageLocality"}],
                    },
                    "preScore": {"disabled": [{"name": "*"}]},
                }
            )
        ],
    )
    plugins = load_config(data, CATALOG).profiles[0].plugins
    assert pairs(plugins.score.enabled) == [
        ("NodeResourcesBalancedAllocation", 1),
        ("InterPodAffinity", 1),
        ("NodeResourcesFit", 1),
        ("NodeAffinity", 1),
        ("PodTopologySpread", 2),
        ("TaintToleration", 4),
        ("NetworkTraffic", None),
    ]
    assert plugins.pre_score.enabled == ()


# -- pluginConfig ---------------------------------------------------------------------------


def test_plugin_config_explicit_defaulted_in_place_and_defaults_appended_sorted():
    data = config(
        profiles=[
            profile(
                {"multiPoint": {"enabled": [{"name": "NetworkTraffic"}]}},
                [
                    {
                        "name": "NodeResourcesFit",
                        "args": {"scoringStrategy": {"type": "MostAllocated"}},
                    },
                    {"name": "TaintToleration"},
                ],
            )
        ]
    )
    entries = load_config(data, CATALOG).profiles[0].plugin_config
    assert entries == (
        PluginConfig(
            "NodeResourcesFit",
            NodeResourcesFitArgs(
                scoring_strategy=ScoringStrategy(
                    "MostAllocated", (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))
                )
            ),
        ),
        PluginConfig("TaintToleration", None),  # no args type: kept as written
        PluginConfig("NetworkTraffic", NetworkTrafficArgs()),  # default args appended
    )


def test_default_args_only_for_enabled_plugins():
    data = config(
        profiles=[
            profile(
                {
                    "multiPoint": {"disabled": [{"name": "*"}]},
                    "queueSort": {"enabled": [{"name": "PrioritySort"}]},
                }
            )
        ]
    )
    assert load_config(data, CATALOG).profiles[0].plugin_config == ()


def test_plugin_config_of_plugins_scorer_lacks_is_kept_raw_with_a_warning():
    data = config(
        profiles=[
            profile(
                plugin_config=[
                    {"name": "PodTopologySpread", "args": {"defaultingType": "List"}},
                    {"name": "Coscheduling", "args": {"permitWaitingTimeSeconds": 10}},
                    {"name": "NodeLabel", "args": {}},
                ]
            )
        ]
    )
    loaded = load_config(data, CATALOG)
    assert loaded.profiles[0].plugin_config[:2] == (
        PluginConfig("PodTopologySpread", {"defaultingType": "List"}),
        PluginConfig("Coscheduling", {"permitWaitingTimeSeconds": 10}),
    )
    assert [p.name for p in loaded.profiles[0].plugin_config] == [
        "PodTopologySpread",
        "Coscheduling",
        "NodeResourcesFit",
    ]
    assert loaded.warnings == (
        'profiles[0].pluginConfig[0]: scorer does not implement "PodTopologySpread" yet; '
        "its args are kept as written",
        'profiles[0].pluginConfig[1]: plugin "Coscheduling" is not installed; '
        "its args are kept as written",
        'profiles[0].pluginConfig[2]: args ignored: plugin "NodeLabel" was removed from Kubernetes '
        "(deprecated in v1beta2, not available since v1beta3); use NodeAffinity",
    )


def test_plugin_config_errors():
    data = config(
        profiles=[
            profile(
                plugin_config=[
                    {"name": "NetworkTraffic", "args": {"timeRange": 0, "device": "eth0"}},
                    {"name": "NetworkTraffic"},
                    {"args": {}},
                    {"name": "EBSLimits"},
                    {
                        "name": "NodeResourcesFit",
                        "args": {"kind": "NodeResourcesFitArgs", "apiVersion": V1},
                    },
                    {"name": "NodeResourcesFit", "args": []},
                ]
            )
        ]
    )
    assert errors_of(data) == [("profiles[0].pluginConfig[2].name", "Required value")]
    del data["profiles"][0]["pluginConfig"][2]
    assert errors_of(data) == [
        ("profiles[0].pluginConfig[0].args.device", "unknown field"),
        ("profiles[0].pluginConfig[1]", 'Duplicate value: "NetworkTraffic"'),
        (
            "profiles[0].pluginConfig[2].name",
            'plugin "EBSLimits" was removed from Kubernetes (dropped from the defaults in 1.31, '
            "removed in 1.32); use NodeVolumeLimits (CSI)",
        ),
        ("profiles[0].pluginConfig[4]", 'Duplicate value: "NodeResourcesFit"'),
    ]


# -- v1beta1 renamed plugins ----------------------------------------------------------------

SEED = """\
apiVersion: kubescheduler.config.k8s.io/v1beta1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: /mnt/d/src/go_work/customScheduler/scheduler.conf
profiles:
- schedulerName: custom-scheduler
  plugins:
    score:
      enabled:
      - name: "NetworkTraffic"
      disabled:
      - name: "*"
  pluginConfig:
  - name: "NetworkTraffic"
    args:
      ip: "http://10.0.0.4:9090"
      deviceName: "eth0"
      timeRange: 60
"""


def test_seed_article_v1beta1_config():
    loaded = load_config_text(SEED, CATALOG)
    assert loaded.api_version == V1BETA1
    assert (
        loaded.client_connection.kubeconfig == "/mnt/d/src/go_work/customScheduler/scheduler.conf"
    )
    (only,) = loaded.profiles
    assert only.scheduler_name == "custom-scheduler"
    assert pairs(only.plugins.score.enabled) == [("NetworkTraffic", None)]
    assert only.plugin_config == (
        PluginConfig("NetworkTraffic", NetworkTrafficArgs("http://10.0.0.4:9090", "eth0", 60)),
        PluginConfig("NodeResourcesFit", NodeResourcesFitArgs()),
    )
    # NodePreferAvoidPods was a default score plugin, but "*" disabled it: nothing to say
    assert not any("NodePreferAvoidPods" in w for w in loaded.warnings)


@pytest.mark.parametrize(
    ("legacy", "args", "strategy"),
    [
        (
            "NodeResourcesMostAllocated",
            {"resources": [{"name": "cpu", "weight": 3}]},
            ScoringStrategy("MostAllocated", (ResourceSpec("cpu", 3),)),
        ),
        (
            "NodeResourcesLeastAllocated",
            None,
            ScoringStrategy("LeastAllocated", (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))),
        ),
        (
            "RequestedToCapacityRatio",
            {
                "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}],
                "resources": [{"name": "cpu", "weight": 0}, {"name": "intel.com/foo", "weight": 3}],
            },
            ScoringStrategy(
                "RequestedToCapacityRatio",
                (ResourceSpec("cpu", 1), ResourceSpec("intel.com/foo", 3)),
                RequestedToCapacityRatioParam(
                    (UtilizationShapePoint(0, 0), UtilizationShapePoint(100, 10))
                ),
            ),
        ),
    ],
)
def test_v1beta1_resource_score_plugins_map_to_fit(legacy, args, strategy):
    entries = [{"name": "NodeResourcesFit", "args": {"ignoredResources": ["example.com/foo"]}}]
    if args is not None:
        entries.append({"name": legacy, "args": args})
    data = config(
        V1BETA1,
        profiles=[
            profile(
                {
                    "score": {
                        "enabled": [{"name": legacy, "weight": 5}],
                        "disabled": [{"name": "NodeResourcesLeastAllocated"}],
                    }
                },
                entries,
            )
        ],
    )
    loaded = load_config(data, CATALOG)
    score = pairs(loaded.profiles[0].plugins.score.enabled)
    assert ("NodeResourcesFit", 5) in score
    assert not any(name == legacy for name, _ in score)
    assert loaded.profiles[0].plugin_config == (
        PluginConfig(
            "NodeResourcesFit",
            NodeResourcesFitArgs(ignored_resources=("example.com/foo",), scoring_strategy=strategy),
        ),
    )
    assert (
        f'profiles[0].plugins.score: v1beta1 plugin "{legacy}" (weight 5) is read as '
        f"NodeResourcesFit with scoringStrategy.type {strategy.type}"
    ) in loaded.warnings


def test_v1beta1_user_legacy_plugin_replaces_the_default_least_allocated():
    data = config(
        V1BETA1,
        profiles=[
            profile({"score": {"enabled": [{"name": "NodeResourcesMostAllocated", "weight": 2}]}})
        ],
    )
    loaded = load_config(data, CATALOG)
    score = pairs(loaded.profiles[0].plugins.score.enabled)
    assert score.count(("NodeResourcesFit", 2)) == 1
    assert [name for name, _ in score].count("NodeResourcesFit") == 1
    assert score[-1] == ("NodeResourcesFit", 2)
    assert loaded.profiles[0].args_for("NodeResourcesFit").scoring_strategy.type == "MostAllocated"
    assert (
        'profiles[0].plugins.score: default plugin "NodeResourcesLeastAllocated" dropped: '
        '"NodeResourcesMostAllocated" also maps to NodeResourcesFit'
    ) in loaded.warnings


def test_v1beta1_legacy_errors():
    data = config(
        V1BETA1,
        profiles=[
            profile(
                {
                    "score": {
                        "enabled": [
                            {"name": "NodeResourcesMostAllocated"},
                            {"name": "RequestedToCapacityRatio"},
                        ]
                    },
                    "filter": {"enabled": [{"name": "NodeResourcesLeastAllocated"}]},
                },
                [
                    {
                        "name": "NodeResourcesMostAllocated",
                        "args": {"resources": [{"name": "cpu", "weight": 0}]},
                    },
                    {
                        "name": "NodeResourcesFit",
                        "args": {"scoringStrategy": {"type": "MostAllocated"}},
                    },
                ],
            )
        ],
    )
    assert errors_of(data) == [
        (
            "profiles[0].plugins.filter.enabled[0].name",
            'plugin "NodeResourcesLeastAllocated" is a score plugin',
        ),
        (
            "profiles[0].plugins.score.enabled[1].name",
            '"RequestedToCapacityRatio" and "NodeResourcesMostAllocated" '
            "(profiles[0].plugins.score.enabled[0]) both map to NodeResourcesFit; enable only one",
        ),
        ("profiles[0].pluginConfig[0].args.resources[0].weight", "must be in 1..100"),
        (
            "profiles[0].pluginConfig[1].args.scoringStrategy",
            "unknown field (not available in kubescheduler.config.k8s.io/v1beta1; "
            "it exists in v1, v1beta2, v1beta3)",
        ),
    ]


def test_v1beta1_requested_to_capacity_ratio_needs_a_shape():
    data = config(
        V1BETA1, profiles=[profile({"score": {"enabled": [{"name": "RequestedToCapacityRatio"}]}})]
    )
    assert errors_of(data) == [
        (
            "profiles[0].plugins.score.enabled[0].name",
            'plugin "RequestedToCapacityRatio" needs args with a "shape" in pluginConfig',
        )
    ]


@pytest.mark.parametrize("version", [V1, V1BETA3, V1BETA2])
def test_legacy_names_after_v1beta1_are_errors(version):
    data = config(
        version,
        profiles=[profile({"score": {"enabled": [{"name": "NodeResourcesMostAllocated"}]}})],
    )
    assert errors_of(data) == [
        (
            "profiles[0].plugins.score.enabled[0].name",
            'plugin "NodeResourcesMostAllocated" was replaced in v1beta2 by NodeResourcesFit '
            "with scoringStrategy.type MostAllocated",
        )
    ]


# -- plugin names ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "Foo",
            'unknown plugin "Foo"; installed: DefaultBinder, NetworkTraffic, NodeName, '
            "NodeResourcesFit, NodeUnschedulable, PrioritySort, TaintToleration",
        ),
        (
            "NodeAffinity",
            'plugin "NodeAffinity" is a kube-scheduler plugin that scorer does not implement yet',
        ),
        (
            "SelectorSpread",
            'plugin "SelectorSpread" was removed from Kubernetes (not available in v1); '
            "use PodTopologySpread",
        ),
        (
            "ServiceAffinity",
            'plugin "ServiceAffinity" was removed from Kubernetes (deprecated in v1beta2, '
            "not available since v1beta3); use InterPodAffinity",
        ),
        (
            "GCEPDLimits",
            'plugin "GCEPDLimits" was removed from Kubernetes (dropped from the defaults in 1.31, '
            "removed in 1.32); use NodeVolumeLimits (CSI)",
        ),
        ("*", '"*" is only allowed in disabled'),
        ("", "Required value"),
    ],
)
@pytest.mark.parametrize("point", ["score", "multiPoint"])
def test_user_plugin_names(name, message, point):
    enabled = [{"name": "TaintToleration"}, {"name": "NodeName"}, {"name": name}]
    data = config(profiles=[profile({point: {"enabled": enabled}})])
    assert errors_of(data) == [(f"profiles[0].plugins.{point}.enabled[2].name", message)]


def test_unknown_plugin_with_a_big_catalog_points_to_scorer_plugins():
    catalog = make_catalog(**{f"Plugin{i}": {"score"} for i in range(20)})
    data = config(profiles=[profile({"score": {"enabled": [{"name": "Foo"}]}})])
    assert errors_of(data, catalog) == [
        (
            "profiles[0].plugins.score.enabled[0].name",
            'unknown plugin "Foo"; run "scorer plugins" to list the installed plugins',
        )
    ]


def test_disabling_unknown_names_is_allowed_with_a_warning():
    data = config(
        profiles=[profile({"score": {"disabled": [{"name": "NodeAffinity"}, {"name": "Nope"}]}})]
    )
    loaded = load_config(data, CATALOG)
    assert loaded.warnings == (
        'profiles[0].plugins.score.disabled[1]: plugin "Nope" is not known; nothing to disable',
    )


# -- strict decoding ------------------------------------------------------------------------


def test_duplicate_keys_name_their_path():
    errors = text_errors(
        """\
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        parallelism: 4
        profiles:
        - schedulerName: a
          plugins:
            score:
              disabled: [{name: "*"}]
            score:
              enabled: [{name: TaintToleration, weight: 1, weight: 2}]
        parallelism: 8
        """
    )
    assert errors == [
        ("parallelism", 'duplicate field "parallelism" (again at line 11)'),
        ("profiles[0].plugins.score", 'duplicate field "score" (again at line 9)'),
        (
            "profiles[0].plugins.score.enabled[0].weight",
            'duplicate field "weight" (again at line 10)',
        ),
    ]


def test_duplicate_keys_are_reported_with_type_errors():
    errors = text_errors(
        """\
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        parallelism: "16"
        parallelism: "17"
        """
    )
    assert errors == [
        ("parallelism", 'duplicate field "parallelism" (again at line 4)'),
        ("parallelism", 'expected an integer, got string "17"'),
    ]


def test_yaml_merge_keys_are_not_duplicates():
    loaded = load_config_text(
        textwrap.dedent(
            """\
            apiVersion: kubescheduler.config.k8s.io/v1
            kind: KubeSchedulerConfiguration
            leaderElection: &le {leaderElect: false, resourceName: a}
            clientConnection:
              qps: 10
            profiles:
            - schedulerName: a
            """
        ),
        CATALOG,
    )
    assert loaded.leader_election.leader_elect is False


@pytest.mark.parametrize(
    ("fields", "errors"),
    [
        ({"parallelism": "16"}, [("parallelism", 'expected an integer, got string "16"')]),
        ({"parallelism": 2**31}, [("parallelism", f"must fit in a 32-bit integer, got {2**31}")]),
        ({"parallelism": True}, [("parallelism", "expected an integer, got boolean true")]),
        ({"enableProfiling": "yes"}, [("enableProfiling", 'expected a boolean, got string "yes"')]),
        ({"profiles": {"schedulerName": "x"}}, [("profiles", "expected a list, got object")]),
        ({"profiles": ["x"]}, [("profiles[0]", 'expected an object, got string "x"')]),
        (
            {"profiles": [{"schedulerName": 1}]},
            [("profiles[0].schedulerName", "expected a string, got integer 1")],
        ),
        ({"parallelizm": 4}, [("parallelizm", "unknown field")]),
        (
            {"leaderElection": {"leaderElection": True}},
            [("leaderElection.leaderElection", "unknown field")],
        ),
        (
            {"clientConnection": {"qps": "50"}},
            [("clientConnection.qps", 'expected a number, got string "50"')],
        ),
        (
            {"clientConnection": {"burst": 1.5}},
            [("clientConnection.burst", "expected an integer, got number 1.5")],
        ),
        (
            {"profiles": [{"plugins": {"unreserve": {}}}]},
            [("profiles[0].plugins.unreserve", "unknown field")],
        ),
        (
            {
                "profiles": [
                    {"plugins": {"score": {"enabled": [{"name": "NodeName", "wieght": 1}]}}}
                ]
            },
            [("profiles[0].plugins.score.enabled[0].wieght", "unknown field")],
        ),
        (
            {"profiles": [{"plugins": {"score": {"enabled": [{"weight": 1}]}}}]},
            [("profiles[0].plugins.score.enabled[0].name", "Required value")],
        ),
        (
            {
                "profiles": [
                    {"plugins": {"score": {"enabled": [{"name": "NodeName", "weight": "1"}]}}}
                ]
            },
            [
                (
                    "profiles[0].plugins.score.enabled[0].weight",
                    'expected an integer, got string "1"',
                )
            ],
        ),
        (
            {"profiles": [{"plugins": {"score": {"enabled": "NodeName"}}}]},
            [("profiles[0].plugins.score.enabled", 'expected a list, got string "NodeName"')],
        ),
        (
            {"extenders": [{"urlPrefix": "http://x", "weight": "2"}]},
            [("extenders[0].weight", 'expected an integer, got string "2"')],
        ),
        (
            {"extenders": [{"urlPrefix": "http://x", "enableHttps": True}]},
            [("extenders[0].enableHttps", "unknown field")],
        ),
        (
            {"extenders": [{"urlPrefix": "http://x", "tlsConfig": {"caData": "%%%"}}]},
            [("extenders[0].tlsConfig.caData", "expected a base64 string, got invalid base64")],
        ),
    ],
)
def test_strict_types_and_unknown_fields(fields, errors):
    assert errors_of(config(**fields)) == errors


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("leaseDuration", 15, 'expected a duration string such as "1m30s", got integer 15'),
        (
            "leaseDuration",
            "15",
            'missing unit in duration "15" (expected a duration such as "15s", "1m30s", "100ms")',
        ),
        (
            "renewDeadline",
            "10 seconds",
            'unknown unit " seconds" in duration "10 seconds" (expected a duration such as "15s", '
            '"1m30s", "100ms")',
        ),
        (
            "retryPeriod",
            "",
            'invalid duration "" (expected a duration such as "15s", "1m30s", "100ms")',
        ),
    ],
)
def test_bad_durations(field, value, message):
    assert errors_of(config(leaderElection={field: value})) == [
        (f"leaderElection.{field}", message)
    ]


def test_all_structural_errors_are_reported_together():
    errors = errors_of(
        config(
            parallelism="x",
            profiles=[{"schedulerName": 3}, {"plugins": {"score": {"enabled": [{"name": 1}]}}}],
            extenders=[{"httpTimeout": "soon"}],
        )
    )
    assert [path for path, _ in errors] == [
        "parallelism",
        "profiles[0].schedulerName",
        "profiles[1].plugins.score.enabled[0].name",
        "extenders[0].httpTimeout",
    ]


# -- header and version-specific fields -----------------------------------------------------


@pytest.mark.parametrize(
    ("data", "errors"),
    [
        (
            {"kind": KIND},
            [
                (
                    "apiVersion",
                    'Required value: one of "kubescheduler.config.k8s.io/v1", '
                    '"kubescheduler.config.k8s.io/v1beta3", "kubescheduler.config.k8s.io/v1beta2", '
                    '"kubescheduler.config.k8s.io/v1beta1"',
                )
            ],
        ),
        (
            {"apiVersion": "kubescheduler.config.k8s.io/v1alpha2", "kind": KIND},
            [
                (
                    "apiVersion",
                    'Unsupported value: "kubescheduler.config.k8s.io/v1alpha2": supported values: '
                    '"kubescheduler.config.k8s.io/v1", "kubescheduler.config.k8s.io/v1beta3", '
                    '"kubescheduler.config.k8s.io/v1beta2", "kubescheduler.config.k8s.io/v1beta1"',
                )
            ],
        ),
        ({"apiVersion": V1}, [("kind", 'Required value: "KubeSchedulerConfiguration"')]),
        (
            {"apiVersion": V1, "kind": "Policy"},
            [
                (
                    "kind",
                    'Unsupported value: "Policy": supported values: "KubeSchedulerConfiguration"',
                )
            ],
        ),
    ],
)
def test_header(data, errors):
    assert errors_of(data) == errors


def test_not_a_mapping():
    assert text_errors("- apiVersion\n") == [
        ("", "expected a KubeSchedulerConfiguration object, got list")
    ]


@pytest.mark.parametrize(
    ("version", "fields", "path", "available"),
    [
        (V1, {"healthzBindAddress": "0.0.0.0:10251"}, "healthzBindAddress", "v1beta1, v1beta2"),
        (
            V1BETA3,
            {"metricsBindAddress": "0.0.0.0:10251"},
            "metricsBindAddress",
            "v1beta1, v1beta2",
        ),
        (V1BETA3, {"delayCacheUntilActive": True}, "delayCacheUntilActive", "v1"),
        (
            V1BETA1,
            {"profiles": [{"plugins": {"multiPoint": {}}}]},
            "profiles[0].plugins.multiPoint",
            "v1, v1beta2, v1beta3",
        ),
        (
            V1BETA1,
            {"profiles": [{"plugins": {"preEnqueue": {}}}]},
            "profiles[0].plugins.preEnqueue",
            "v1, v1beta2, v1beta3",
        ),
        (
            V1BETA3,
            {"profiles": [{"percentageOfNodesToScore": 10}]},
            "profiles[0].percentageOfNodesToScore",
            "v1",
        ),
        (
            V1BETA2,
            {"profiles": [{"percentageOfNodesToScore": 10}]},
            "profiles[0].percentageOfNodesToScore",
            "v1",
        ),
    ],
)
def test_fields_of_other_versions_are_unknown(version, fields, path, available):
    assert errors_of(config(version, **fields)) == [
        (path, f"unknown field (not available in {version}; it exists in {available})")
    ]


@pytest.mark.parametrize("version", [V1BETA1, V1BETA2])
def test_bind_addresses_of_old_versions_are_ignored_with_a_warning(version):
    loaded = load_config(
        config(version, healthzBindAddress="0.0.0.0:10251", metricsBindAddress=""), CATALOG
    )
    ignored = f"is deprecated ({version}) and ignored: scorer serves /healthz and /metrics itself"
    assert loaded.warnings[:2] == (f"healthzBindAddress {ignored}", f"metricsBindAddress {ignored}")
    assert errors_of(config(version, healthzBindAddress=10251)) == [
        ("healthzBindAddress", "expected a string, got integer 10251")
    ]


def test_multi_point_and_pre_enqueue_accepted_from_v1beta2():
    data = config(
        V1BETA2,
        profiles=[
            profile({"multiPoint": {"enabled": [{"name": "NetworkTraffic"}]}, "preEnqueue": {}})
        ],
    )
    loaded = load_config(data, CATALOG)
    assert pairs(loaded.profiles[0].plugins.multi_point.enabled) == [("NetworkTraffic", None)]


def test_v1_only_fields():
    loaded = load_config(
        config(delayCacheUntilActive=True, profiles=[profile(percentageOfNodesToScore=30)]), CATALOG
    )
    assert loaded.delay_cache_until_active is True
    assert loaded.profiles[0].percentage_of_nodes_to_score == 30


# -- validation (§1.6) ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "errors"),
    [
        ({"parallelism": 0}, [("parallelism", "should be an integer value greater than zero")]),
        ({"parallelism": -3}, [("parallelism", "should be an integer value greater than zero")]),
        (
            {"percentageOfNodesToScore": 101},
            [("percentageOfNodesToScore", "not in valid range [0-100]")],
        ),
        (
            {"percentageOfNodesToScore": -1},
            [("percentageOfNodesToScore", "not in valid range [0-100]")],
        ),
        (
            {"profiles": [profile(percentageOfNodesToScore=200)]},
            [("profiles[0].percentageOfNodesToScore", "not in valid range [0-100]")],
        ),
        ({"podInitialBackoffSeconds": 0}, [("podInitialBackoffSeconds", "must be greater than 0")]),
        (
            {"podInitialBackoffSeconds": 20},
            [("podMaxBackoffSeconds", "must be greater than or equal to PodInitialBackoffSeconds")],
        ),
        (
            {"podInitialBackoffSeconds": 5, "podMaxBackoffSeconds": 4},
            [("podMaxBackoffSeconds", "must be greater than or equal to PodInitialBackoffSeconds")],
        ),
        ({"clientConnection": {"burst": -1}}, [("clientConnection.burst", "must be non-negative")]),
        (
            {"leaderElection": {"leaseDuration": "-1s"}},
            [
                ("leaderElection.leaseDuration", "must be greater than zero"),
                (
                    "leaderElection.leaseDuration",
                    "LeaseDuration must be greater than RenewDeadline",
                ),
            ],
        ),
        (
            {"leaderElection": {"renewDeadline": "-1s", "retryPeriod": "-2s"}},
            [
                ("leaderElection.renewDeadline", "must be greater than zero"),
                ("leaderElection.retryPeriod", "must be greater than zero"),
            ],
        ),
        (
            {"leaderElection": {"leaseDuration": "10s", "renewDeadline": "10s"}},
            [("leaderElection.leaseDuration", "LeaseDuration must be greater than RenewDeadline")],
        ),
        (
            {"leaderElection": {"resourceLock": "endpoints"}},
            [("leaderElection.resourceLock", 'resourceLock value must be "leases"')],
        ),
        (
            {"profiles": [profile(name="a"), profile(name="b"), profile(name="a")]},
            [("profiles[2].schedulerName", 'Duplicate value: "a"')],
        ),
        (
            {"profiles": [profile(name="a"), {}]},
            [("profiles[1].schedulerName", "Required value")],
        ),
        ({"profiles": [profile(name="")]}, [("profiles[0].schedulerName", "Required value")]),
        (
            {
                "profiles": [
                    profile(name="a"),
                    profile({"queueSort": {"enabled": [{"name": "PrioritySort"}]}}, name="b"),
                ]
            },
            [("profiles[1].plugins.queueSort", "must be the same for all profiles")],
        ),
        (
            {
                "profiles": [
                    profile(
                        {
                            "queueSort": {
                                "enabled": [{"name": "PrioritySort"}, {"name": "TaintToleration"}]
                            }
                        },
                        name="a",
                    )
                ]
            },
            [
                (
                    "profiles[0].plugins.queueSort.enabled",
                    "only one queue sort plugin can be enabled",
                )
            ],
        ),
    ],
)
def test_validation(fields, errors):
    assert errors_of(config(**fields)) == errors


def test_leader_election_checks_only_when_electing():
    loaded = load_config(
        config(leaderElection={"leaderElect": False, "resourceLock": "endpoints"}), CATALOG
    )
    assert loaded.leader_election.resource_lock == "endpoints"


@attrs.frozen
class SortArgs:
    a: int = 0


def test_queue_sort_args_must_match_across_profiles():
    catalog = {**CATALOG, "PrioritySort": attrs.evolve(CATALOG["PrioritySort"], args_type=SortArgs)}
    sort = {"queueSort": {"enabled": [{"name": "PrioritySort"}], "disabled": [{"name": "*"}]}}
    data = config(
        profiles=[
            profile(sort, [{"name": "PrioritySort", "args": {"a": 1}}], name="a"),
            profile(sort, [{"name": "PrioritySort", "args": {"a": 2}}], name="b"),
        ]
    )
    assert errors_of(data, catalog) == [
        ("profiles[1].pluginConfig[0].args", "must be the same for all profiles")
    ]


def test_args_given_to_a_plugin_without_an_args_type_are_refused():
    data = config(profiles=[profile(plugin_config=[{"name": "PrioritySort", "args": {"a": 1}},
                                                   {"name": "DefaultBinder", "args": {}},
                                                   {"name": "NodeName"}])])
    assert errors_of(data) == [
        ("profiles[0].pluginConfig[0].args",
         'plugin "PrioritySort" (test) takes no args: it registers no args_type to check them against; '
         "remove the args (or, as its author, register an args class)")
    ]


def test_extenders():
    data = config(
        extenders=[
            {
                "urlPrefix": "https://ext:8443/scheduler",
                "filterVerb": "filter",
                "prioritizeVerb": "prioritize",
                "weight": 5,
                "bindVerb": "bind",
                "enableHTTPS": True,
                "tlsConfig": {"insecure": True, "serverName": "ext", "caData": "Y2E="},
                "httpTimeout": "1m30s",
                "nodeCacheCapable": True,
                "managedResources": [{"name": "example.com/gpu", "ignoredByScheduler": True}],
                "ignorable": True,
            }
        ]
    )
    (extender,) = load_config(data, CATALOG).extenders
    assert extender == Extender(
        url_prefix="https://ext:8443/scheduler",
        filter_verb="filter",
        prioritize_verb="prioritize",
        weight=5,
        bind_verb="bind",
        enable_https=True,
        tls_config=ExtenderTLSConfig(insecure=True, server_name="ext", ca_data=b"ca"),
        http_timeout=timedelta(seconds=90),
        node_cache_capable=True,
        managed_resources=(ExtenderManagedResource("example.com/gpu", True),),
        ignorable=True,
    )


def test_extender_validation():
    data = config(
        extenders=[
            {
                "urlPrefix": "http://a",
                "prioritizeVerb": "p",
                "bindVerb": "b",
                "managedResources": [
                    {"name": "cpu"},
                    {"name": "example.com/gpu"},
                    {"name": "kubernetes.io/x"},
                ],
            },
            {"bindVerb": "b", "managedResources": [{"name": "example.com/gpu"}, {"name": "a/b/c"}]},
        ]
    )
    errors = errors_of(data)
    assert errors[:4] == [
        ("extenders[0].weight", "must have a positive weight applied to it"),
        ("extenders[0].managedResources[0].name", '"cpu": is an invalid extended resource name'),
        (
            "extenders[0].managedResources[2].name",
            '"kubernetes.io/x": is an invalid extended resource name',
        ),
        ("extenders[1].urlPrefix", "Required value"),
    ]
    assert errors[4] == (
        "extenders[1].managedResources[0].name",
        'duplicate extender managed resource name "example.com/gpu"',
    )
    assert errors[5][0] == "extenders[1].managedResources[1].name"
    assert errors[6] == (
        "extenders",
        "found 2 extenders implementing bind: only one extender can implement bind",
    )


def test_semantic_errors_are_collected_across_the_file():
    data = config(
        parallelism=0,
        podInitialBackoffSeconds=0,
        profiles=[
            profile({"score": {"enabled": [{"name": "Foo"}]}}, name="a"),
            profile(
                plugin_config=[{"name": "NetworkTraffic", "args": {"timeRange": -1}}], name="a"
            ),
        ],
    )
    assert [path for path, _ in errors_of(data)] == [
        "profiles[0].plugins.score.enabled[0].name",
        "profiles[1].pluginConfig[0].args.timeRange",
        "parallelism",
        "profiles[1].schedulerName",
        "podInitialBackoffSeconds",
    ]


# -- files ----------------------------------------------------------------------------------


def test_yaml_file(tmp_path):
    path = tmp_path / "sched.yaml"
    path.write_text(SEED)
    loaded = load_config(path, CATALOG)
    assert loaded.source == str(path)
    assert loaded.profiles[0].scheduler_name == "custom-scheduler"
    assert load_config(str(path), CATALOG) == loaded


def test_json_file_with_duplicate_keys(tmp_path):
    path = tmp_path / "sched.json"
    path.write_text(json.dumps(config(parallelism=2))[:-1] + ', "parallelism": 3}')
    with pytest.raises(ConfigError) as info:
        load_config(path, CATALOG)
    assert info.value.errors == [("parallelism", 'duplicate field "parallelism"')]
    path.write_text(json.dumps(config(parallelism=2)))
    assert load_config(path, CATALOG).parallelism == 2


@pytest.mark.parametrize(
    ("content", "name", "message"),
    [
        (None, "missing.yaml", "no such file"),
        ("", "empty.yaml", "the configuration is empty"),
        ("a: [1", "broken.yaml", "line 2, column 1: invalid YAML: "),
        ("{", "broken.json", "line 1, column 2: invalid JSON: "),
        ("apiVersion: v1\n---\nkind: x\n", "two.yaml", "expected one YAML document, found 2"),
        (
            "{1: 2, [a]: 3}",
            "keys.yaml",
            "line 1, column 8: invalid YAML: found a mapping key that is not a string",
        ),
    ],
)
def test_file_errors_name_the_file(tmp_path, content, name, message):
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError) as info:
        load_config(path, CATALOG)
    assert info.value.source == str(path)
    ((where, text),) = info.value.errors
    assert where == ""
    assert text.startswith(message)
    assert str(info.value).startswith(f"{path}: ")


def test_directory_is_not_a_config(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, CATALOG)
    assert info.value.errors == [("", "is a directory, not a file")]


def test_non_string_keys():
    errors = text_errors(
        """\
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        profiles:
        - 1: a
        """
    )
    assert errors == [("profiles[0]", "keys must be strings, got integer 1")]


def test_v1beta3_config_loads():
    loaded = load_config(
        config(
            V1BETA3,
            profiles=[
                profile({"multiPoint": {"enabled": [{"name": "NetworkTraffic", "weight": 3}]}})
            ],
        ),
        CATALOG,
    )
    assert pairs(loaded.profiles[0].plugins.multi_point.enabled)[-2:] == [
        ("SchedulingGates", None),
        ("NetworkTraffic", 3),
    ]
