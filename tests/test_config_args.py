"""NodeResourcesFitArgs: kube's defaulting and validation (§2.3), alone and inside a config."""

from __future__ import annotations

import pytest
from test_config_catalog import make_catalog

from scorer.config import load_config, structure, unstructure
from scorer.errors import ConfigError
from scorer.plugins.noderesources.fit import (
    NodeResourcesFitArgs,
    RequestedToCapacityRatioParam,
    ScoringStrategy,
    UtilizationShapePoint,
)
from scorer.plugins.noderesources.resources import ResourceSpec

CPU_MEMORY = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))
SUPPORTED = '"LeastAllocated", "MostAllocated", "RequestedToCapacityRatio"'


def fit_args(data: object) -> NodeResourcesFitArgs:
    return structure(NodeResourcesFitArgs, data, "args", kind="NodeResourcesFitArgs")


def fit_errors(data: object) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        fit_args(data)
    return info.value.errors


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(
            None,
            NodeResourcesFitArgs(scoring_strategy=ScoringStrategy("LeastAllocated", CPU_MEMORY)),
            id="no-args",
        ),
        pytest.param(
            {"scoringStrategy": None},
            NodeResourcesFitArgs(scoring_strategy=ScoringStrategy("LeastAllocated", CPU_MEMORY)),
            id="null-strategy",
        ),
        pytest.param(
            {"scoringStrategy": {"type": "MostAllocated"}},
            NodeResourcesFitArgs(scoring_strategy=ScoringStrategy("MostAllocated", CPU_MEMORY)),
            id="empty-resources-become-cpu-memory",
        ),
        pytest.param(
            {"scoringStrategy": {"type": "MostAllocated", "resources": []}},
            NodeResourcesFitArgs(scoring_strategy=ScoringStrategy("MostAllocated", CPU_MEMORY)),
            id="explicit-empty-resources",
        ),
        pytest.param(
            {
                "scoringStrategy": {
                    "type": "LeastAllocated",
                    "resources": [
                        {"name": "cpu", "weight": 0},
                        {"name": "nvidia.com/gpu", "weight": 5},
                    ],
                }
            },
            NodeResourcesFitArgs(
                scoring_strategy=ScoringStrategy(
                    "LeastAllocated", (ResourceSpec("cpu", 1), ResourceSpec("nvidia.com/gpu", 5))
                )
            ),
            id="weight-0-becomes-1",
        ),
        pytest.param(
            {
                "ignoredResources": ["example.com/foo"],
                "ignoredResourceGroups": ["example.com"],
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {
                        "shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]
                    },
                },
            },
            NodeResourcesFitArgs(
                ignored_resources=("example.com/foo",),
                ignored_resource_groups=("example.com",),
                scoring_strategy=ScoringStrategy(
                    "RequestedToCapacityRatio",
                    CPU_MEMORY,
                    RequestedToCapacityRatioParam(
                        (UtilizationShapePoint(0, 10), UtilizationShapePoint(100, 0))
                    ),
                ),
            ),
            id="rtcr",
        ),
        pytest.param(
            {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "NodeResourcesFitArgs"},
            NodeResourcesFitArgs(),
            id="header-accepted",
        ),
    ],
)
def test_defaults(data, expected):
    assert fit_args(data) == expected


def test_python_construction_applies_the_same_defaults():
    assert NodeResourcesFitArgs().scoring_strategy == ScoringStrategy("LeastAllocated", CPU_MEMORY)
    assert ScoringStrategy("MostAllocated").resources == CPU_MEMORY
    assert ScoringStrategy("MostAllocated", (ResourceSpec("cpu", 0),)).resources == (
        ResourceSpec("cpu", 1),
    )


def shape(*points: tuple[int, int]) -> dict:
    return {"shape": [{"utilization": u, "score": s} for u, s in points]}


@pytest.mark.parametrize(
    ("data", "errors"),
    [
        pytest.param(
            {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 1}]}},
            [
                (
                    "args.scoringStrategy.type",
                    f'Unsupported value: "": supported values: {SUPPORTED}',
                )
            ],
            id="type-is-not-defaulted",
        ),
        pytest.param(
            {"scoringStrategy": {"type": "Balanced"}},
            [
                (
                    "args.scoringStrategy.type",
                    f'Unsupported value: "Balanced": supported values: {SUPPORTED}',
                )
            ],
            id="unknown-type",
        ),
        pytest.param(
            {
                "scoringStrategy": {
                    "type": "LeastAllocated",
                    "resources": [
                        {"name": "cpu", "weight": 100},
                        {"name": "memory", "weight": 101},
                        {"name": "x", "weight": -1},
                    ],
                }
            },
            [
                ("args.scoringStrategy.resources[1].weight", "must be in 1..100"),
                ("args.scoringStrategy.resources[2].weight", "must be in 1..100"),
            ],
            id="weights-1-to-100",
        ),
        pytest.param(
            {"scoringStrategy": {"type": "RequestedToCapacityRatio"}},
            [
                (
                    "args.scoringStrategy.requestedToCapacityRatio",
                    "Required value: required when type is RequestedToCapacityRatio",
                )
            ],
            id="rtcr-requires-param",
        ),
        pytest.param(
            {
                "scoringStrategy": {
                    "type": "MostAllocated",
                    "requestedToCapacityRatio": shape((0, 0)),
                }
            },
            [
                (
                    "args.scoringStrategy.requestedToCapacityRatio",
                    "Forbidden: only allowed when type is RequestedToCapacityRatio",
                )
            ],
            id="param-forbidden-for-other-types",
        ),
        pytest.param(
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": {"shape": []},
                }
            },
            [
                (
                    "args.scoringStrategy.requestedToCapacityRatio.shape",
                    "Required value: at least one point must be specified",
                )
            ],
            id="shape-needs-a-point",
        ),
        pytest.param(
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": shape((10, 1), (10, 2), (5, 3)),
                }
            },
            [
                (
                    "args.scoringStrategy.requestedToCapacityRatio.shape[1].utilization",
                    "utilization values must be sorted in increasing order",
                )
            ],
            id="shape-strictly-increasing-first-offender-only",
        ),
        pytest.param(
            {
                "scoringStrategy": {
                    "type": "RequestedToCapacityRatio",
                    "requestedToCapacityRatio": shape((-1, 11), (101, -1)),
                }
            },
            [
                (
                    "args.scoringStrategy.requestedToCapacityRatio.shape[0].utilization",
                    "not in valid range [0, 100]",
                ),
                (
                    "args.scoringStrategy.requestedToCapacityRatio.shape[0].score",
                    "not in valid range [0, 10]",
                ),
                (
                    "args.scoringStrategy.requestedToCapacityRatio.shape[1].utilization",
                    "not in valid range [0, 100]",
                ),
                (
                    "args.scoringStrategy.requestedToCapacityRatio.shape[1].score",
                    "not in valid range [0, 10]",
                ),
            ],
            id="shape-ranges",
        ),
        pytest.param(
            {"ignoredResourceGroups": ["example.com/gpu", "ok.io"]},
            [("args.ignoredResourceGroups[0]", "resource group name can't contain '/'")],
            id="groups-without-slash",
        ),
        pytest.param(
            {"ignoredResources": ["-bad"]},
            [
                (
                    "args.ignoredResources[0]",
                    "name part must consist of alphanumeric characters, '-', '_' or '.', and must "
                    "start and end with an alphanumeric character (e.g. 'MyName', 'my.name' or "
                    "'123-abc')",
                )
            ],
            id="ignored-resources-are-qualified-names",
        ),
        pytest.param(
            {
                "scoringStrategy": {
                    "type": "LeastAllocated",
                    "resources": [{"name": "cpu", "weight": "1"}],
                }
            },
            [("args.scoringStrategy.resources[0].weight", 'expected an integer, got string "1"')],
            id="strict-types",
        ),
        pytest.param(
            {"scoringStrategy": {"type": "LeastAllocated", "shape": []}},
            [("args.scoringStrategy.shape", "unknown field")],
            id="unknown-field",
        ),
        pytest.param(
            {"kind": "NodeResourcesBalancedAllocationArgs"},
            [
                (
                    "args.kind",
                    'expected "NodeResourcesFitArgs", got "NodeResourcesBalancedAllocationArgs"',
                )
            ],
            id="wrong-kind",
        ),
    ],
)
def test_validation(data, errors):
    assert fit_errors(data) == errors


def test_unstructure_is_kube_shaped():
    assert unstructure(NodeResourcesFitArgs()) == {
        "scoringStrategy": {
            "type": "LeastAllocated",
            "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
        }
    }


def test_validated_when_the_config_is_loaded_with_the_full_path():
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "pluginConfig": [
                    {"name": "NetworkTraffic", "args": {}},
                    {
                        "name": "NodeResourcesFit",
                        "args": {
                            "scoringStrategy": {
                                "type": "MostAllocated",
                                "resources": [{"name": "cpu", "weight": 200}],
                            }
                        },
                    },
                ],
            }
        ],
    }
    with pytest.raises(ConfigError) as info:
        load_config(config, make_catalog())
    assert info.value.errors == [
        (
            "profiles[0].pluginConfig[1].args.scoringStrategy.resources[0].weight",
            "must be in 1..100",
        )
    ]
    assert (
        "profiles[0].pluginConfig[1].args.scoringStrategy.resources[0].weight: must be in 1..100"
        in str(info.value)
    )


def v1beta1_ratio_config(args: dict) -> dict:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1beta1",
        "kind": "KubeSchedulerConfiguration",
        "profiles": [
            {
                "schedulerName": "default-scheduler",
                "plugins": {"score": {"enabled": [{"name": "RequestedToCapacityRatio", "weight": 2}]}},
                "pluginConfig": [{"name": "RequestedToCapacityRatio", "args": args}],
            }
        ],
    }


def test_v1beta1_shape_is_checked_by_fit_args_at_the_path_written():
    # The configuration has no shape rules of its own: NodeResourcesFit's args type (from the
    # catalog) checks the shape it becomes, and errors point at the v1beta1 args.
    args = {"shape": [{"utilization": 50, "score": 11}, {"utilization": 40, "score": 1}],
            "resources": [{"name": "cpu", "weight": 101}]}
    with pytest.raises(ConfigError) as info:
        load_config(v1beta1_ratio_config(args), make_catalog())
    assert info.value.errors == [
        ("profiles[0].pluginConfig[0].args.resources[0].weight", "must be in 1..100"),
        (
            "profiles[0].pluginConfig[0].args.shape[1].utilization",
            "utilization values must be sorted in increasing order",
        ),
        ("profiles[0].pluginConfig[0].args.shape[0].score", "not in valid range [0, 10]"),
    ]
    with pytest.raises(ConfigError) as info:
        load_config(v1beta1_ratio_config({"shape": []}), make_catalog())
    assert info.value.errors == [
        ("profiles[0].pluginConfig[0].args.shape", "Required value: at least one point must be specified")
    ]


def test_v1beta1_valid_shape_becomes_the_fit_strategy():
    args = {"shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]}
    loaded = load_config(v1beta1_ratio_config(args), make_catalog())
    strategy = loaded.profiles[0].args_for("NodeResourcesFit").scoring_strategy
    assert strategy.requested_to_capacity_ratio == RequestedToCapacityRatioParam(
        (UtilizationShapePoint(0, 0), UtilizationShapePoint(100, 10))
    )
