"""NodeResourcesBalancedAllocation (kube <= 1.35 formula): fractions of
allocatable after placing the pod, std over them, int64((1 - std) * 100).
Expected values are worked out by hand; float64 effects are spelled out."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from scorer.config.convert import structure
from scorer.errors import ConfigError
from scorer.framework import CycleState, NodeBatch
from scorer.framework.catalog import PluginRegistry
from scorer.plugins.noderesources import balanced_allocation
from scorer.plugins.noderesources.balanced_allocation import (
    NodeResourcesBalancedAllocation,
    NodeResourcesBalancedAllocationArgs,
)
from scorer.plugins.noderesources.resources import ResourceSpec
from scorer.testing import make_cache, make_node, make_pod, run_plugin


def balanced(*resources: str) -> NodeResourcesBalancedAllocation:
    specs = tuple(ResourceSpec(name, 1) for name in resources)
    return NodeResourcesBalancedAllocation(NodeResourcesBalancedAllocationArgs(resources=specs))


def test_two_resources_worked_example():
    nodes = [
        make_node("even", cpu="4", memory="8Gi"),
        make_node("cpu-heavy", cpu="2", memory="16Gi"),
        make_node("capped", cpu="1", memory="4Gi"),
    ]
    existing = [
        make_pod("e1", cpu="1", memory="2Gi", node_name="even"),
        make_pod("e2", cpu="500m", node_name="capped"),
    ]
    pod = make_pod("p", cpu="1", memory="2Gi")
    run = run_plugin(balanced("cpu", "memory"), pod, nodes, pods=existing)
    assert run.raw_scores == {
        # cpu 2000/4000 = 0.5, memory 4Gi/8Gi = 0.5 -> std 0 -> 100
        "even": 100,
        # cpu 1000/2000 = 0.5, memory 2Gi/16Gi = 0.125 -> std 0.1875 -> 81.25 -> 81
        "cpu-heavy": 81,
        # cpu 1500/1000 capped at 1, memory 2Gi/4Gi = 0.5 -> std 0.25 -> 75
        "capped": 75,
    }
    assert run.scores == run.raw_scores  # no NormalizeScore


def test_float64_truncation_as_go():
    # cpu 100/1000 = 0.1, memory 8Gi/10Gi = 0.8: in exact arithmetic std = 0.35 and the
    # score 65, but in float64 (0.1 - 0.8) / 2 = -0.35000000000000003 and
    # (1 - 0.35000000000000003) * 100 = 64.99999999999999, which int64() truncates to 64.
    run = run_plugin(balanced("cpu", "memory"), make_pod("p", cpu="100m", memory="8Gi"),
                     [make_node("n", cpu="1", memory="10Gi")])
    assert run.raw_scores == {"n": 64}


def test_uses_actual_requests_not_non_zero_defaults():
    # The existing pod requests nothing: it counts 0 (not 100m / 200Mi).
    # cpu 1000/4000 = 0.25, memory 0/8Gi = 0 -> std 0.125 -> 87.5 -> 87.
    run = run_plugin(balanced("cpu", "memory"), make_pod("p", cpu="1"),
                     [make_node("n", cpu="4", memory="8Gi")], pods=[make_pod("e", node_name="n")])
    assert run.raw_scores == {"n": 87}


def test_three_resources_population_std():
    # "eph": cpu 2000/4000 = 0.5, memory 2Gi/8Gi = 0.25, ephemeral-storage 0/100Gi = 0.
    #   mean 0.25, variance (0.0625 + 0 + 0.0625) / 3 = 0.041666..., std 0.2041241452319315
    #   -> 79.587... -> 79.
    # "no-eph" has no ephemeral-storage allocatable: that resource is left out, two
    #   fractions remain: |0.5 - 0.25| / 2 = 0.125 -> 87.
    nodes = [make_node("eph", cpu="4", memory="8Gi", allocatable={"ephemeral-storage": "100Gi"}),
             make_node("no-eph", cpu="4", memory="8Gi")]
    plugin = balanced("cpu", "memory", "ephemeral-storage")
    run = run_plugin(plugin, make_pod("p", cpu="2", memory="2Gi"), nodes)
    assert run.raw_scores == {"eph": 79, "no-eph": 87}


def test_extended_resource_only_when_requested():
    nodes = [make_node("gpu", cpu="4", memory="8Gi", allocatable={"nvidia.com/gpu": "4"}),
             make_node("plain", cpu="4", memory="8Gi")]
    existing = [make_pod("e", cpu="500m", memory="1Gi", node_name="gpu"),
                make_pod("f", cpu="500m", memory="1Gi", node_name="plain")]
    plugin = balanced("cpu", "memory", "nvidia.com/gpu")
    run = run_plugin(plugin, make_pod("p", cpu="1", memory="2Gi", requests={"nvidia.com/gpu": "2"}),
                     nodes, pods=existing)
    # gpu: cpu 1500/4000 = 0.375, memory 3Gi/8Gi = 0.375, gpu 2/4 = 0.5
    #   mean 0.41666..., variance (2 * 0.041666...^2 + 0.083333...^2) / 3 -> std 0.0589 -> 94.
    # plain: no gpu allocatable -> 0.375 and 0.375 -> 100.
    assert run.raw_scores == {"gpu": 94, "plain": 100}
    # Without a gpu request the gpu column is skipped everywhere.
    run = run_plugin(plugin, make_pod("q", cpu="1", memory="2Gi"), nodes, pods=existing)
    assert run.raw_scores == {"gpu": 100, "plain": 100}


def test_pods_resource_is_never_scored():
    # kube finds "pods" neither among native nor scalar resources: skipped.
    nodes = [make_node("a", cpu="2", memory="16Gi"), make_node("b", cpu="4", memory="4Gi")]
    pod = make_pod("p", cpu="1", memory="2Gi")
    with_pods = run_plugin(balanced("cpu", "memory", "pods"), pod, nodes)
    assert with_pods.raw_scores == run_plugin(balanced("cpu", "memory"), pod, nodes).raw_scores
    # a: 0.5 vs 0.125 -> 81; b: 0.25 vs 0.5 -> 87.
    assert with_pods.raw_scores == {"a": 81, "b": 87}


@pytest.mark.parametrize(
    "pod",
    [
        make_pod("best-effort"),
        make_pod("gpu-only", requests={"nvidia.com/gpu": "1"}),  # nothing among cpu/memory
        make_pod("zero", cpu="0", memory="0"),
    ],
    ids=lambda p: p.name,
)
def test_pre_score_skips_pods_requesting_none_of_the_resources(pod):
    run = run_plugin(balanced("cpu", "memory"), pod, [make_node("a"), make_node("b")])
    assert run.score_skipped
    assert run.raw_scores == {}


def test_pod_requesting_one_resource_is_scored():
    nodes = [make_node("a", cpu="4", memory="32Gi"), make_node("b", cpu="4", memory="16Gi")]
    run = run_plugin(balanced("cpu", "memory"), make_pod("p", memory="8Gi"), nodes)
    assert not run.score_skipped
    # a: cpu 0, memory 0.25 -> 87; b: cpu 0, memory 0.5 -> 75.
    assert run.raw_scores == {"a": 87, "b": 75}


def test_score_without_pre_score():
    cache = make_cache([make_node("a", cpu="4", memory="8Gi")])
    batch = NodeBatch(cache.table, cache.table.rows())
    plugin = balanced("cpu", "memory")
    assert plugin.score_batch(CycleState(), make_pod("be"), batch).tolist() == [0]
    scores = plugin.score_batch(CycleState(), make_pod("p", cpu="2", memory="2Gi"), batch)
    assert scores.dtype == np.int64
    assert scores.tolist() == [87]  # 0.5 vs 0.25


def test_huge_requests_saturate_without_numpy_warnings():
    # a: memory 7Ei used + 6Ei wanted exceeds int64: the fraction is 1 (capped), never a wrapped
    # negative; cpu 1/4 -> |0.25 - 1| / 2 = 0.375 -> 62. b: memory 6Ei/7Ei, as float64.
    nodes = [make_node("a", cpu="4", memory="7Ei"), make_node("b", cpu="4", memory="7Ei")]
    existing = [make_pod("e", cpu="0", memory="7Ei", node_name="a")]
    pod = make_pod("p", cpu="1", memory="6Ei")
    cache = make_cache(nodes, existing)
    batch = NodeBatch(cache.table, cache.table.rows())
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        scores = balanced("cpu", "memory").score_batch(CycleState(), pod, batch)
    b_memory = float(6 * 2**60) / float(7 * 2**60)
    assert scores.tolist() == [62, int((1 - abs((0.25 - b_memory) / 2)) * 100)]


def test_nodes_without_a_resource_leave_it_out():
    # b has no allocatable memory column value (0): only cpu counts there -> std 0 -> 100.
    cache = make_cache([make_node("a", cpu="4", memory="8Gi"), make_node("b", cpu="4", memory="0")])
    batch = NodeBatch(cache.table, cache.table.rows())
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        scores = balanced("cpu", "memory").score_batch(CycleState(), make_pod("p", cpu="2", memory="2Gi"), batch)
    assert scores.tolist() == [87, 100]


def test_args_defaults():
    default = (ResourceSpec("cpu", 1), ResourceSpec("memory", 1))
    assert NodeResourcesBalancedAllocationArgs().resources == default
    assert structure(NodeResourcesBalancedAllocationArgs, {}).resources == default
    assert structure(NodeResourcesBalancedAllocationArgs, {"resources": []}).resources == default
    args = structure(
        NodeResourcesBalancedAllocationArgs,
        {"resources": [{"name": "cpu"}, {"name": "nvidia.com/gpu", "weight": 0}]},
    )
    assert args.resources == (ResourceSpec("cpu", 1), ResourceSpec("nvidia.com/gpu", 1))


def test_args_validation():
    data = {"resources": [
        {"name": "cpu", "weight": 2}, {"name": "memory"}, {"name": "cpu", "weight": 1},
    ]}
    with pytest.raises(ConfigError) as info:
        structure(NodeResourcesBalancedAllocationArgs, data, "profiles[0].pluginConfig[0].args",
                  kind="NodeResourcesBalancedAllocationArgs")
    assert info.value.errors == [
        ("profiles[0].pluginConfig[0].args.resources[0].weight", "Invalid value: 2: must be 1"),
        ("profiles[0].pluginConfig[0].args.resources[2].name", 'Duplicate value: "cpu"'),
    ]


def test_registration():
    registry = PluginRegistry()
    balanced_allocation.register(registry)
    info = registry.plugins["NodeResourcesBalancedAllocation"]
    assert info.extension_points == frozenset({"preScore", "score"})
    assert info.args_type is NodeResourcesBalancedAllocationArgs
    assert info.factory(None, None).resources == ("cpu", "memory")
