"""Resolution of profiles: multiPoint expansion (§1.5), score weights, framework requirements."""

from __future__ import annotations

import pytest
from test_config_catalog import NetworkTrafficArgs, make_catalog

from scorer.config import (
    V1,
    V1BETA2,
    PluginConfig,
    PluginRef,
    Plugins,
    PluginSet,
    Profile,
    load_and_resolve,
    load_config,
    resolve_config,
    resolve_profile,
)
from scorer.errors import ConfigError
from scorer.plugins.noderesources.fit import NodeResourcesFitArgs

# Fake plugins: A filter+score, B filter, C score, D preFilter+filter+score, X filter.
CATALOG = make_catalog(
    A={"filter", "score"},
    B={"filter"},
    C={"score"},
    D={"preFilter", "filter", "score"},
    X={"filter"},
    OtherSort={"queueSort"},
)
BASE = [{"name": "PrioritySort"}, {"name": "DefaultBinder"}]


def load(
    plugins: dict, *, version: str = V1, plugin_config=None, catalog=CATALOG, extra_profiles=()
):
    """A config whose multiPoint defaults are disabled, so only what the test lists runs."""
    plugins = dict(plugins)
    multi = dict(plugins.get("multiPoint", {}))
    multi["enabled"] = BASE + list(multi.get("enabled", []))
    multi.setdefault("disabled", [{"name": "*"}])
    plugins["multiPoint"] = multi
    first = {"schedulerName": "default-scheduler", "plugins": plugins}
    if plugin_config is not None:
        first["pluginConfig"] = plugin_config
    data = {
        "apiVersion": version,
        "kind": "KubeSchedulerConfiguration",
        "profiles": [first, *extra_profiles],
    }
    return load_config(data, catalog)


def resolve(plugins: dict, **kw):
    config = load(plugins, **kw)
    return resolve_config(config, kw.get("catalog", CATALOG))[0]


def resolve_errors(plugins: dict, **kw):
    config = load(plugins, **kw)
    with pytest.raises(ConfigError) as info:
        resolve_config(config, kw.get("catalog", CATALOG))
    return info.value.errors


@pytest.mark.parametrize(
    ("plugins", "filter", "score", "weights"),
    [
        pytest.param(
            {"multiPoint": {"enabled": [{"name": "A"}, {"name": "B"}]}},
            ("A", "B"),
            ("A",),
            {"A": 1},
            id="expansion-by-implemented-points",
        ),
        pytest.param(
            {
                "multiPoint": {"enabled": [{"name": "A"}, {"name": "B"}]},
                "filter": {"disabled": [{"name": "A"}]},
            },
            ("B",),
            ("A",),
            {"A": 1},
            id="disabled-at-one-point",
        ),
        pytest.param(
            {
                "multiPoint": {"enabled": [{"name": "A", "weight": 3}, {"name": "C", "weight": 2}]},
                "score": {"enabled": [{"name": "A", "weight": 5}]},
            },
            ("A",),
            ("A", "C"),
            {"A": 5, "C": 2},
            id="explicit-weight-overrides-multipoint",
        ),
        pytest.param(
            {
                "multiPoint": {"enabled": [{"name": "A"}, {"name": "B"}, {"name": "D"}]},
                "filter": {"enabled": [{"name": "D"}, {"name": "B"}]},
            },
            ("D", "B", "A"),
            ("A", "D"),
            {"A": 1, "D": 1},
            id="overrides-first-in-explicit-order",
        ),
        pytest.param(
            {
                "multiPoint": {"enabled": [{"name": "A"}, {"name": "B"}, {"name": "D"}]},
                "filter": {"enabled": [{"name": "X"}, {"name": "B"}]},
            },
            ("B", "A", "D", "X"),
            ("A", "D"),
            {"A": 1, "D": 1},
            id="overrides-then-multipoint-then-explicit",
        ),
        pytest.param(
            {
                "multiPoint": {"enabled": [{"name": "A"}, {"name": "B"}]},
                "filter": {"enabled": [{"name": "X"}], "disabled": [{"name": "*"}]},
            },
            ("X",),
            ("A",),
            {"A": 1},
            id="star-disabled-point-gets-no-multipoint",
        ),
        pytest.param(
            {
                "multiPoint": {
                    "enabled": [{"name": "A"}],
                    "disabled": [{"name": "A"}, {"name": "*"}],
                }
            },
            ("A",),
            ("A",),
            {"A": 1},
            id="enabled-beats-disabled-within-multipoint",
        ),
        pytest.param(
            {"score": {"enabled": [{"name": "C", "weight": 0}, {"name": "A"}]}},
            (),
            ("C", "A"),
            {"C": 1, "A": 1},
            id="weight-zero-or-unset-is-one",
        ),
        pytest.param(
            {
                "multiPoint": {"enabled": [{"name": "C", "weight": 7}]},
                "score": {"enabled": [{"name": "C"}]},
            },
            (),
            ("C",),
            {"C": 1},
            id="score-entry-wins-even-without-weight",
        ),
        pytest.param(
            {
                "multiPoint": {"enabled": [{"name": "C", "weight": 7}]},
                "score": {"disabled": [{"name": "C"}]},
            },
            (),
            (),
            {},
            id="disabled-score-has-no-weight",
        ),
    ],
)
def test_multi_point_expansion(plugins, filter, score, weights):
    resolved = resolve(plugins)
    assert resolved.points["filter"] == filter
    assert resolved.points["score"] == score
    assert resolved.weights == weights
    assert resolved.points["queueSort"] == ("PrioritySort",)
    assert resolved.points["bind"] == ("DefaultBinder",)


def test_default_multi_point_with_user_overrides():
    config = load_config(
        {
            "apiVersion": V1,
            "kind": "KubeSchedulerConfiguration",
            "profiles": [
                {
                    "plugins": {
                        "multiPoint": {"enabled": [{"name": "NetworkTraffic", "weight": 5}]},
                        "score": {
                            "enabled": [{"name": "NodeResourcesFit", "weight": 4}],
                            "disabled": [{"name": "TaintToleration"}],
                        },
                    }
                }
            ],
        },
        CATALOG,
    )
    (resolved,) = resolve_config(config, CATALOG)
    assert resolved.points["score"] == ("NodeResourcesFit", "NetworkTraffic")
    assert resolved.weights == {"NodeResourcesFit": 4, "NetworkTraffic": 5}
    assert resolved.points["filter"] == (
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeResourcesFit",
    )
    assert resolved.points["preScore"] == ("TaintToleration", "NodeResourcesFit")


@pytest.mark.parametrize(
    ("plugins", "errors"),
    [
        pytest.param(
            {"filter": {"enabled": [{"name": "C"}]}},
            [
                (
                    "profiles[0].plugins.filter.enabled[0].name",
                    'plugin "C" does not implement filter (it implements: score)',
                )
            ],
            id="point-not-implemented",
        ),
        pytest.param(
            {
                "score": {
                    "enabled": [{"name": "NetworkTraffic"}, {"name": "NetworkTraffic", "weight": 2}]
                }
            },
            [
                (
                    "profiles[0].plugins.score.enabled[1].name",
                    'Duplicate value: "NetworkTraffic": already enabled for score',
                )
            ],
            id="duplicate-explicit",
        ),
        pytest.param(
            {"filter": {"enabled": [{"name": "X"}, {"name": "B"}, {"name": "X"}]}},
            [
                (
                    "profiles[0].plugins.filter.enabled[2].name",
                    'Duplicate value: "X": already enabled for filter',
                )
            ],
            id="duplicate-explicit-appended",
        ),
        pytest.param(
            {"multiPoint": {"enabled": [{"name": "A"}, {"name": "A"}]}},
            # the helper puts PrioritySort and DefaultBinder first
            [
                (
                    "profiles[0].plugins.multiPoint.enabled[3].name",
                    'Duplicate value: "A": already enabled in multiPoint',
                )
            ],
            id="duplicate-multipoint",
        ),
        pytest.param(
            {"multiPoint": {"enabled": [{"name": "PrioritySort"}]}},
            [
                (
                    "profiles[0].plugins.multiPoint.enabled[2].name",
                    'Duplicate value: "PrioritySort": already enabled in multiPoint',
                )
            ],
            id="duplicate-multipoint-queue-sort",
        ),
        pytest.param(
            {"multiPoint": {"enabled": [{"name": "OtherSort"}]}},
            [
                (
                    "profiles[0].plugins.queueSort",
                    "exactly one queueSort plugin is required, got 2 (PrioritySort, OtherSort)",
                )
            ],
            id="two-queue-sorts",
        ),
        pytest.param(
            {"queueSort": {"disabled": [{"name": "*"}]}},
            [("profiles[0].plugins.queueSort", "exactly one queueSort plugin is required, got 0")],
            id="no-queue-sort",
        ),
        pytest.param(
            {"bind": {"disabled": [{"name": "DefaultBinder"}]}},
            [("profiles[0].plugins.bind", "at least one bind plugin is required")],
            id="no-bind",
        ),
    ],
)
def test_resolution_errors(plugins, errors):
    assert resolve_errors(plugins) == errors


def test_duplicate_in_multi_point_is_fine_when_overridden_at_the_point():
    resolved = resolve(
        {
            "multiPoint": {"enabled": [{"name": "C"}, {"name": "C"}]},
            "score": {"enabled": [{"name": "C", "weight": 2}]},
        }
    )
    assert resolved.points["score"] == ("C",)
    assert resolved.weights == {"C": 2}


def test_errors_of_all_profiles_are_collected_with_the_source():
    config = load(
        {"filter": {"enabled": [{"name": "C"}]}},
        extra_profiles=[{"schedulerName": "b", "plugins": {"bind": {"disabled": [{"name": "*"}]}}}],
    )
    with pytest.raises(ConfigError) as info:
        resolve_config(config, CATALOG)
    assert info.value.source == "<mapping>"
    assert [path for path, _ in info.value.errors] == [
        "profiles[0].plugins.filter.enabled[0].name",
        "profiles[1].plugins.bind",
    ]


def test_all_profiles_need_the_same_queue_sort():
    config = load(
        {},
        extra_profiles=[
            {
                "schedulerName": "b",
                "plugins": {
                    "multiPoint": {
                        "enabled": [{"name": "OtherSort"}],
                        "disabled": [{"name": "PrioritySort"}],
                    }
                },
            }
        ],
    )
    with pytest.raises(ConfigError) as info:
        resolve_config(config, CATALOG)
    assert info.value.errors == [
        (
            "profiles[1].plugins.queueSort",
            'different queue sort plugins for profile "b": "OtherSort", first: "PrioritySort"',
        )
    ]


def test_not_implemented_defaults_are_skipped_with_warnings():
    config = load_config(None, CATALOG)
    (resolved,) = resolve_config(config, CATALOG)
    assert resolved.warnings == tuple(
        f'default plugin "{name}" is not implemented by scorer yet; skipped'
        for name in (
            "SchedulingGates",
            "NodeAffinity",
            "NodePorts",
            "VolumeRestrictions",
            "NodeVolumeLimits",
            "VolumeBinding",
            "VolumeZone",
            "PodTopologySpread",
            "InterPodAffinity",
            "DefaultPreemption",
            "NodeResourcesBalancedAllocation",
            "ImageLocality",
        )
    )
    assert resolved.points == {
        "preEnqueue": (),
        "queueSort": ("PrioritySort",),
        "preFilter": ("NodeResourcesFit",),
        "filter": ("NodeUnschedulable", "NodeName", "TaintToleration", "NodeResourcesFit"),
        "postFilter": (),
        "preScore": ("TaintToleration", "NodeResourcesFit"),
        "score": ("TaintToleration", "NodeResourcesFit"),
        "reserve": (),
        "permit": (),
        "preBind": (),
        "bind": ("DefaultBinder",),
        "postBind": (),
    }
    assert resolved.weights == {"TaintToleration": 3, "NodeResourcesFit": 1}
    assert resolved.percentage_of_nodes_to_score is None


def test_default_plugin_missing_a_point_in_scorer_is_skipped_there():
    catalog = make_catalog(without=["TaintToleration"], TaintToleration={"filter", "score"})
    config = load_config({"apiVersion": V1BETA2, "kind": "KubeSchedulerConfiguration"}, catalog)
    (resolved,) = resolve_config(config, catalog)
    assert "TaintToleration" not in resolved.points["preScore"]
    assert resolved.points["score"] == ("NodeResourcesFit", "TaintToleration")
    assert (
        'default plugin "TaintToleration" does not implement preScore '
        "(it implements: filter, score); skipped there"
    ) in resolved.warnings


def test_args_of_every_instantiated_plugin():
    resolved = resolve(
        {
            "multiPoint": {
                "enabled": [{"name": "NetworkTraffic"}, {"name": "NodeResourcesFit"}, {"name": "A"}]
            }
        },
        plugin_config=[
            {"name": "A", "args": {}},
            {"name": "NetworkTraffic", "args": {"timeRange": 5}},
        ],
    )
    assert resolved.args == {
        "PrioritySort": None,
        "NodeResourcesFit": NodeResourcesFitArgs(),
        "A": None,  # no args type: empty args are none; others are refused (test_config_load)
        "DefaultBinder": None,
        "NetworkTraffic": NetworkTrafficArgs(time_range=5),
    }
    assert set(resolved.args) == set(resolved.plugin_names)


def test_profile_percentage_is_kept_none_meaning_global():
    config = load_config(
        {
            "apiVersion": V1,
            "kind": "KubeSchedulerConfiguration",
            "percentageOfNodesToScore": 50,
            "profiles": [
                {"schedulerName": "a", "percentageOfNodesToScore": 10},
                {"schedulerName": "b"},
            ],
        },
        CATALOG,
    )
    first, second = resolve_config(config, CATALOG)
    assert (first.scheduler_name, first.percentage_of_nodes_to_score) == ("a", 10)
    assert (second.scheduler_name, second.percentage_of_nodes_to_score) == ("b", None)


def hand_built(score: tuple[PluginRef, ...], plugin_config=()) -> Profile:
    return Profile(
        scheduler_name="manual",
        plugins=Plugins(
            queue_sort=PluginSet(enabled=(PluginRef("PrioritySort"),)),
            bind=PluginSet(enabled=(PluginRef("DefaultBinder"),)),
            score=PluginSet(enabled=score),
        ),
        plugin_config=plugin_config,
    )


def test_resolve_profile_converts_raw_args_of_hand_built_profiles():
    profile = hand_built(
        (PluginRef("NetworkTraffic", 2), PluginRef("NodeResourcesFit")),
        (PluginConfig("NetworkTraffic", {"deviceName": "eth1"}),),
    )
    resolved = resolve_profile(profile, CATALOG)
    assert resolved.args["NetworkTraffic"] == NetworkTrafficArgs(device_name="eth1")
    assert resolved.args["NodeResourcesFit"] == NodeResourcesFitArgs()
    assert resolved.weights == {"NetworkTraffic": 2, "NodeResourcesFit": 1}


def test_resolve_profile_errors_of_hand_built_profiles():
    profile = hand_built(
        (PluginRef("Nope"), PluginRef("NetworkTraffic")),
        (PluginConfig("NetworkTraffic", {"timeRange": "x"}),),
    )
    with pytest.raises(ConfigError) as info:
        resolve_profile(profile, CATALOG)
    assert info.value.errors == [
        ('profile "manual".pluginConfig[0].args.timeRange', 'expected an integer, got string "x"')
    ]
    user = hand_built((PluginRef("Nope", path="profiles[3].plugins.score.enabled[0]"),))
    with pytest.raises(ConfigError) as info:
        resolve_profile(user, CATALOG)
    assert info.value.errors[0][0] == "profiles[3].plugins.score.enabled[0].name"
    assert info.value.errors[0][1].startswith('unknown plugin "Nope"')


def test_weight_overflow_and_negative_weights():
    with pytest.raises(ConfigError) as info:
        resolve_profile(hand_built((PluginRef("C", 2**62), PluginRef("A", 2**62))), CATALOG)
    assert info.value.errors == [
        ('profile "manual".plugins.score', "total score of Score plugins could overflow")
    ]
    resolved = resolve(
        {"score": {"enabled": [{"name": "C", "weight": -2}]}},
    )
    assert resolved.weights == {"C": -2}
    assert resolved.warnings == ('score plugin "C" has a negative weight (-2)',)


# -- every error in one pass (load_and_resolve) ---------------------------------------------


def profile_with(name: str, plugins: dict, **fields) -> dict:
    multi = {"enabled": [*BASE, *plugins.pop("multi", [])], "disabled": [{"name": "*"}]}
    return {"schedulerName": name, "plugins": {"multiPoint": multi, **plugins}, **fields}


ONE_ERROR_OF_EACH_STAGE = {
    "apiVersion": V1,
    "kind": "KubeSchedulerConfiguration",
    "podInitialBackoffSeconds": 5,
    "podMaxBackoffSeconds": 2,  # validation of the defaulted top level
    "profiles": [
        # decoding: a string where an int belongs; its resolve error below is not reached
        profile_with("broken", {"filter": {"enabled": [{"name": "C"}]}}, percentageOfNodesToScore="x"),
        # plugin args: converted and validated while defaulting
        profile_with(
            "args",
            {"multi": [{"name": "NodeResourcesFit"}]},
            pluginConfig=[{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "Bogus"}}}],
        ),
        # resolution against the catalog: C is a score plugin
        profile_with("resolve", {"filter": {"enabled": [{"name": "C"}]}}),
        profile_with("fine", {}),
    ],
}


def test_every_stage_reports_in_one_error():
    with pytest.raises(ConfigError) as info:
        load_and_resolve(ONE_ERROR_OF_EACH_STAGE, CATALOG)
    errors = dict(info.value.errors)
    assert list(errors) == [
        "profiles[0].percentageOfNodesToScore",  # decoding
        "profiles[1].pluginConfig[0].args.scoringStrategy.type",  # plugin args
        "podMaxBackoffSeconds",  # validation
        "profiles[2].plugins.filter.enabled[0].name",  # resolution
    ]
    assert errors["profiles[0].percentageOfNodesToScore"].startswith("expected an integer")
    assert errors["profiles[1].pluginConfig[0].args.scoringStrategy.type"].startswith('Unsupported value: "Bogus"')
    assert errors["podMaxBackoffSeconds"] == "must be greater than or equal to PodInitialBackoffSeconds"
    assert errors["profiles[2].plugins.filter.enabled[0].name"] == (
        'plugin "C" does not implement filter (it implements: score)'
    )
    assert info.value.source == "<mapping>"


def test_load_config_reports_decoding_and_validation_together():
    with pytest.raises(ConfigError) as info:
        load_config(ONE_ERROR_OF_EACH_STAGE, CATALOG)
    assert [path for path, _ in info.value.errors] == [
        "profiles[0].percentageOfNodesToScore",
        "profiles[1].pluginConfig[0].args.scoringStrategy.type",
        "podMaxBackoffSeconds",
    ]


def test_a_broken_top_level_field_does_not_hide_the_profiles():
    data = {**ONE_ERROR_OF_EACH_STAGE, "parallelism": "many", "profiles": ONE_ERROR_OF_EACH_STAGE["profiles"][2:]}
    with pytest.raises(ConfigError) as info:
        load_and_resolve(data, CATALOG)
    assert [path for path, _ in info.value.errors] == [
        "parallelism",
        "profiles[0].plugins.filter.enabled[0].name",
    ]


def test_load_and_resolve_returns_what_load_and_resolve_give():
    data = {"apiVersion": V1, "kind": "KubeSchedulerConfiguration", "profiles": [profile_with("fine", {})]}
    config, resolved = load_and_resolve(data, CATALOG)
    assert config == load_config(data, CATALOG)
    assert resolved == resolve_config(config, CATALOG)
