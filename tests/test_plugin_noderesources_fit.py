"""NodeResourcesFit: filter reasons and the three scoring strategies, with
expected values worked out by hand from kube-scheduler's integer formulas."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from pluginkit import requeues

from scorer.framework import Code, CycleState, NodeBatch
from scorer.framework.catalog import PluginRegistry
from scorer.framework.events import ClusterEvent
from scorer.plugins.noderesources import fit as fit_module
from scorer.plugins.noderesources.fit import (
    NodeResourcesFit,
    NodeResourcesFitArgs,
    RequestedToCapacityRatioParam,
    ScoringStrategy,
    UtilizationShapePoint,
)
from scorer.plugins.noderesources.resources import ResourceSpec, is_scalar_resource, scaled_ratio
from scorer.testing import make_cache, make_node, make_pod, run_plugin


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


# -- resources kube scores, and the scalar ones ---------------------------------------


@pytest.mark.parametrize(
    ("name", "scalar"),
    [
        ("example.com/gpu", True),  # extended
        ("hugepages-2Mi", True),
        ("attachable-volumes-aws-ebs", True),
        ("kubernetes.io/batch-cpu", True),  # prefixed native
        ("cpu", False),
        ("pods", False),
        ("foo", False),  # unprefixed and unknown
        ("requests.example.com/gpu", False),
    ],
)
def test_is_scalar_resource_has_kubes_meaning(name, scalar):
    assert is_scalar_resource(name) is scalar


def test_pods_and_unknown_names_in_the_strategy_are_not_scored():
    # kube's calculateResourceAllocatableRequest returns (0, 0) for them: only cpu counts.
    nodes = [make_node("a", cpu="4", pods=10), make_node("b", cpu="8", pods=10)]
    plugin = fit(resources=(("cpu", 1), ("pods", 5), ("foo", 5)))
    run = run_plugin(plugin, make_pod("p", cpu="1", requests={"foo": "1"}), nodes)
    assert run.raw_scores == {"a": 75, "b": 87}


def test_only_extended_resources_can_be_ignored():
    nodes = [make_node("n"), make_node("m")]
    pod = make_pod("p", requests={"hugepages-2Mi": "2Mi", "example.com/foo": "1"})
    run = run_plugin(fit(ignored_resources=("hugepages-2Mi", "example.com/foo")), pod, nodes)
    assert run.filter["n"].reasons == ("Insufficient hugepages-2Mi",)
    run = run_plugin(fit(ignored_resource_groups=("hugepages-2Mi",)), pod, nodes)
    assert run.filter["n"].reasons == ("Insufficient example.com/foo", "Insufficient hugepages-2Mi")


# -- huge values: exact integer ratios, no overflow, no numpy warning ----------------------

EI = 2**60


def strict_run(plugin, pod, nodes, pods=()):
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        return run_plugin(plugin, pod, nodes, pods=pods)


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        # memory (7Ei - 3Ei - 1Ei) * 100 // 7Ei = 42 (the product is beyond int64), cpu 75 -> 58.
        ("LeastAllocated", {"a": (75 + 3 * 100 // 7) // 2}),
        # memory 4Ei * 100 // 7Ei = 57, cpu 25 -> 41.
        ("MostAllocated", {"a": (25 + 4 * 100 // 7) // 2}),
    ],
)
def test_exact_scores_with_huge_allocatable(strategy, expected):
    nodes = [make_node("a", cpu="4", memory="7Ei"), make_node("b", cpu="4", memory="1Gi")]
    existing = [make_pod("e", cpu="0", memory="3Ei", node_name="a")]
    run = strict_run(fit(strategy), make_pod("p", cpu="1", memory="1Ei"), nodes, pods=existing)
    assert run.feasible == ["a"]
    assert run.raw_scores == expected
    assert run.error is None


@pytest.mark.parametrize(
    ("strategy", "memory_score"), [("LeastAllocated", 0), ("MostAllocated", 100), ("RequestedToCapacityRatio", 100)]
)
def test_requested_beyond_int64_saturates_as_over_capacity(strategy, memory_score):
    # The node's 7Ei plus the pod's 7Ei exceed int64: counted as over capacity, never wrapped.
    shape = ((0, 0), (100, 10)) if strategy == "RequestedToCapacityRatio" else None
    plugin = fit(strategy, resources=(("memory", 1),), shape=shape)
    nodes = [make_node("a", memory="7Ei"), make_node("b", memory="7Ei")]
    state = CycleState()
    cache = make_cache(nodes, [make_pod("e", memory="7Ei", node_name="a")])
    batch = NodeBatch(cache.table, cache.table.rows())
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        plugin.pre_score(state, make_pod("p", memory="7Ei"), batch)
        scores = plugin.score_batch(state, make_pod("p", memory="7Ei"), batch)
    # b: 7Ei of 7Ei -> Least 0, Most 100, ratio 100 (u = 100).
    assert scores.tolist() == [memory_score, memory_score]


def test_scaled_ratio_is_exact_beyond_int64_products():
    part = np.array([0, 3, 2**62, 2**63 - 2], dtype=np.int64)
    whole = np.array([0, 7, 2**63 - 1, 2**63 - 1], dtype=np.int64)
    assert scaled_ratio(part, whole, 100).tolist() == [0, 42, 2**62 * 100 // (2**63 - 1), 99]


# -- events and registration ----------------------------------------------------------


def test_events_to_register():
    plugin = fit()
    assert plugin.events_to_register() == [
        ClusterEvent("AssignedPod", "Delete"),
        ClusterEvent("Node", "Add"),
        ClusterEvent("Node", "UpdateNodeAllocatable"),
    ]
    assert requeues(plugin, ClusterEvent("AssignedPod", "Delete"))  # resources freed
    assert requeues(plugin, ClusterEvent("Node", "UpdateNodeAllocatable"))
    assert requeues(plugin, ClusterEvent("Node", "Update"))
    assert not requeues(plugin, ClusterEvent("AssignedPod", "Add"))  # a new pod only takes resources
    assert not requeues(plugin, ClusterEvent("Node", "UpdateNodeLabel"))


def test_registration():
    registry = PluginRegistry()
    fit_module.register(registry)
    info = registry.plugins["NodeResourcesFit"]
    assert info.extension_points == frozenset({"preFilter", "filter", "preScore", "score"})
    assert info.args_type is NodeResourcesFitArgs
    plugin = info.factory(None, None)
    assert plugin.strategy == "LeastAllocated" and plugin.resources == (("cpu", 1), ("memory", 1))
