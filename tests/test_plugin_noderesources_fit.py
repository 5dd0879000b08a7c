"""NodeResourcesFit: filter reasons and the three scoring strategies, with
expected values worked out by hand from kube-scheduler's integer formulas."""

from __future__ import annotations

import pytest

from scorer.framework import Code
from scorer.plugins.noderesources.args import (
    NodeResourcesFitArgs,
    RequestedToCapacityRatioParam,
    ResourceSpec,
    ScoringStrategy,
    UtilizationShapePoint,
)
from scorer.plugins.noderesources.fit import NodeResourcesFit
from scorer.testing import make_node, make_pod, run_plugin


def fit(strategy="LeastAllocated", resources=(("cpu", 1), ("memory", 1)), shape=None, **kw):
    rtcr = None
    if shape is not None:
        rtcr = RequestedToCapacityRatioParam(shape=tuple(UtilizationShapePoint(u, s) for u, s in shape))
    return NodeResourcesFit(NodeResourcesFitArgs(
        scoring_strategy=ScoringStrategy(
            type=strategy,
            resources=tuple(ResourceSpec(name, weight) for name, weight in resources),
            requested_to_capacity_ratio=rtcr,
        ),
        **kw,
    ))


def test_filter_reasons_and_codes():
    nodes = [
        make_node("roomy", cpu="4", memory="8Gi"),
        make_node("busy", cpu="4", memory="8Gi"),
        make_node("tiny", cpu="1", memory="1Gi"),
        make_node("full", cpu="4", memory="8Gi", pods=1),
    ]
    existing = [make_pod("e1", cpu="3", memory="7Gi", node_name="busy"),
                make_pod("e2", cpu="100m", node_name="full")]
    run = run_plugin(fit(), make_pod("p", cpu="2", memory="2Gi"), nodes, pods=existing)
    assert run.feasible == ["roomy"]
    busy = run.filter["busy"]
    assert busy.code == Code.UNSCHEDULABLE
    assert busy.reasons == ("Insufficient cpu", "Insufficient memory")
    # 2 CPU > 1 CPU allocatable: preemption cannot help.
    tiny = run.filter["tiny"]
    assert tiny.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert tiny.reasons == ("Insufficient cpu", "Insufficient memory")
    assert run.filter["full"].reasons == ("Too many pods",)
    assert run.filter["full"].plugin == "NodeResourcesFit"


def test_filter_extended_and_ignored_resources():
    nodes = [make_node("gpu", allocatable={"nvidia.com/gpu": "2"}), make_node("plain")]
    pod = make_pod("p", cpu="100m", requests={"nvidia.com/gpu": "1", "example.com/foo": "3"})
    run = run_plugin(fit(ignored_resources=("example.com/foo",)), pod, nodes)
    assert run.feasible == ["gpu"]
    assert run.filter["plain"].reasons == ("Insufficient nvidia.com/gpu",)
    run = run_plugin(fit(ignored_resource_groups=("example.com", "nvidia.com")), pod, nodes)
    assert run.feasible == ["gpu", "plain"]


def test_least_allocated_worked_example():
    # Node a: 4000m / 10Gi with 1000m + 2Gi used; pod 1000m + 1Gi.
    #   cpu: (4000-2000)*100/4000 = 50; memory: (10-3)*100/10 = 70 -> (50+70)/2 = 60.
    # Node b: 8000m / 10Gi, empty.
    #   cpu: (8000-1000)*100/8000 = 87 (87.5 truncated); memory: 90 -> 177/2 = 88.
    nodes = [make_node("a", cpu="4", memory="10Gi"), make_node("b", cpu="8", memory="10Gi")]
    run = run_plugin(fit(), make_pod("p", cpu="1", memory="1Gi"), nodes,
                     pods=[make_pod("e", cpu="1", memory="2Gi", node_name="a")])
    assert run.raw_scores == {"a": 60, "b": 88}
    assert run.scores == run.raw_scores  # no NormalizeScore


def test_least_allocated_weights_and_non_zero_defaults():
    # Pod without requests is scored as 100m / 200Mi (kube's non-zero defaults).
    # Node 1000m / 1000Mi: cpu (1000-100)*100/1000 = 90; memory (1000-200)*100/1000 = 80.
    # Weights cpu 3, memory 1: (90*3 + 80*1) / 4 = 350/4 = 87.
    nodes = [make_node("n", cpu="1", memory="1000Mi")]
    run = run_plugin(fit(resources=(("cpu", 3), ("memory", 1))), make_pod("p"), nodes + [make_node("m")])
    assert run.raw_scores["n"] == 87


def test_most_allocated_caps_at_capacity():
    # cpu: min(3000+2000, 4000)*100/4000 = 100; memory: (1Gi)*100/4Gi = 25 -> 62.
    nodes = [make_node("a", cpu="4", memory="4Gi"), make_node("b", cpu="4", memory="4Gi")]
    existing = [make_pod("e", cpu="3", node_name="a")]
    run = run_plugin(fit("MostAllocated"), make_pod("p", cpu="2", memory="1Gi"), nodes, pods=existing)
    # The filter rejects a (5 CPU > 4); scores only for feasible b: cpu 50, memory 25 -> 37.
    assert run.feasible == ["b"]
    assert run.raw_scores == {"b": 37}


def test_requested_to_capacity_ratio_shape_and_rounding():
    # Shape (0,10) (100,0) scaled x10: f(u) = 100 + (0-100)*(u-0)/100 = 100 - u (Go division truncates).
    # Node 4000m / 16Gi, pod 1000m / 2Gi, used 1500m / 0:
    #   cpu u = 2500*100/4000 = 62 -> 38; memory u = 2Gi*100/16Gi = 12 -> 88.
    #   round((38*1 + 88*2) / 3) = round(71.33) = 71.
    nodes = [make_node("a", cpu="4", memory="16Gi"), make_node("b", cpu="4", memory="16Gi")]
    existing = [make_pod("e", cpu="1500m", memory="0", node_name="a")]
    plugin = fit("RequestedToCapacityRatio", resources=(("cpu", 1), ("memory", 2)), shape=((0, 10), (100, 0)))
    run = run_plugin(plugin, make_pod("p", cpu="1", memory="2Gi"), nodes, pods=existing)
    assert run.raw_scores["a"] == 71
    # b: cpu u = 25 -> 75; memory 88 -> round((75 + 176)/3) = round(83.67) = 84.
    assert run.raw_scores["b"] == 84


def test_requested_to_capacity_ratio_skips_zero_scores_and_rounds_half_up():
    # Shape (0,0) (100,10): f(u) = 100*u/100 = u. Empty node, pod 50% cpu, 0 memory request explicit.
    # cpu u = 50 -> 50; memory: non-zero default applies only when memory is missing; explicit 0 -> u = 0
    # -> score 0 is excluded from the mean -> 50.
    nodes = [make_node("a", cpu="2", memory="4Gi"), make_node("b", cpu="2", memory="4Gi")]
    plugin = fit("RequestedToCapacityRatio", shape=((0, 0), (100, 10)))
    run = run_plugin(plugin, make_pod("p", cpu="1", memory="0"), nodes)
    assert run.raw_scores == {"a": 50, "b": 50}


def test_broken_linear_between_points():
    # Shape (0,0) (50,10) (100,0) -> scaled (0,0) (50,100) (100,0). u=75: 100 + (0-100)*(75-50)/50 = 50.
    plugin = fit("RequestedToCapacityRatio", resources=(("cpu", 1),), shape=((0, 0), (50, 10), (100, 0)))
    import numpy as np

    assert plugin._broken_linear(np.array([0, 25, 50, 75, 100, 120])).tolist() == [0, 50, 100, 50, 0, 0]


def test_scalar_resource_scored_only_when_requested():
    # gpu in the strategy: pod without gpu request -> resource skipped (only cpu counts).
    nodes = [make_node("a", cpu="4", allocatable={"nvidia.com/gpu": "4"}), make_node("b", cpu="4")]
    plugin = fit(resources=(("cpu", 1), ("nvidia.com/gpu", 5)))
    run = run_plugin(plugin, make_pod("p", cpu="1"), nodes)
    assert run.raw_scores == {"a": 75, "b": 75}
    run = run_plugin(plugin, make_pod("q", cpu="1", requests={"nvidia.com/gpu": "1"}), nodes)
    # a: cpu 75*1 + gpu (4-1)*100/4=75*5 -> 75; b filtered (no gpu).
    assert run.feasible == ["a"]
    assert run.raw_scores == {"a": 75}


@pytest.mark.parametrize("strategy", ["LeastAllocated", "MostAllocated"])
def test_scores_stay_in_range_when_overcommitted(strategy):
    # Existing pods exceed allocatable (possible after a node shrinks): scores stay in [0, 100].
    nodes = [make_node("a", cpu="1", memory="1Gi"), make_node("b")]
    existing = [make_pod(f"e{i}", cpu="1", memory="1Gi", node_name="a") for i in range(3)]
    plugin = fit(strategy)
    run = run_plugin(plugin, make_pod("p", cpu="0", memory="0"), nodes, pods=existing)
    assert all(0 <= s <= 100 for s in run.raw_scores.values())
