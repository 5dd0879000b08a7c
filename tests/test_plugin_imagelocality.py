"""ImageLocality: image sizes scaled by spread, clamped sums mapped onto 0..100,
with expected values worked out by hand from kube's formulas."""

from __future__ import annotations

import warnings

import attrs
import numpy as np
import pytest

from scorer.framework import CycleState, NodeBatch
from scorer.framework.catalog import PluginRegistry
from scorer.model import ContainerImage
from scorer.plugins import imagelocality
from scorer.plugins.imagelocality import ImageLocality, calculate_priority, normalized_image_name
from scorer.testing import make_cache, make_node, make_pod, run_plugin

MB = 1024 * 1024


def node(name, *images):
    """A node with ``images``: (names, size in bytes) pairs."""
    return attrs.evolve(
        make_node(name),
        images=tuple(ContainerImage(names=tuple(names), size_bytes=size) for names, size in images),
    )


def pod(*images, init=()):
    return make_pod("p", spec={
        "containers": [{"name": f"c{i}", "image": image} for i, image in enumerate(images)],
        "initContainers": [{"name": f"i{i}", "image": image} for i, image in enumerate(init)],
    })


@pytest.mark.parametrize(
    ("name", "normalized"),
    [
        ("nginx", "nginx:latest"),
        ("nginx:1.25", "nginx:1.25"),
        ("localhost:5000/nginx", "localhost:5000/nginx:latest"),  # the ":" is the registry port
        ("localhost:5000/nginx:1.0", "localhost:5000/nginx:1.0"),
        ("registry.k8s.io/pause:3.10", "registry.k8s.io/pause:3.10"),
        ("nginx@sha256:abcd", "nginx@sha256:abcd"),
    ],
)
def test_normalized_image_name(name, normalized):
    assert normalized_image_name(name) == normalized


def test_worked_example_init_and_regular_containers():
    # 4 nodes. nginx:latest (500 MiB) on a and b, busybox:1.36 (100 MiB) on a and c:
    # both spread over 2/4 nodes -> scaled 250 MiB and 50 MiB.
    # 2 containers (1 init + 1 regular): max threshold 2000 MiB; min 23 MiB.
    nodes = [
        node("a", (["docker.io/library/nginx:latest", "nginx:latest"], 500 * MB),
             (["busybox:1.36"], 100 * MB)),
        node("b", (["nginx:latest"], 500 * MB)),
        node("c", (["busybox:1.36"], 100 * MB)),
        node("d"),
    ]
    run = run_plugin(ImageLocality(), pod("nginx", init=("busybox:1.36",)), nodes)
    assert run.raw_scores == {
        "a": 14,  # 300 MiB: 100 * (300 - 23) / (2000 - 23) = 27700 / 1977 = 14.01
        "b": 11,  # 250 MiB: 22700 / 1977 = 11.48
        "c": 1,  # 50 MiB: 2700 / 1977 = 1.37
        "d": 0,  # nothing: clamped to 23 MiB -> 0
    }
    assert run.scores == run.raw_scores  # no NormalizeScore


def test_clamped_to_max_threshold():
    # 1 container, image of 3000 MiB on every node: scaled 3000 MiB > 1000 MiB -> 100.
    nodes = [node(n, (["big:1"], 3000 * MB)) for n in ("a", "b")]
    assert run_plugin(ImageLocality(), pod("big:1"), nodes).raw_scores == {"a": 100, "b": 100}


def test_huge_images_saturate_instead_of_overflowing():
    # Two images of 2**62 bytes each: their sum is beyond int64 (it used to wrap negative and
    # score 0); it is far above the top threshold, so the node scores 100, without a numpy warning.
    nodes = [node("a", (["big:1"], 2**62), (["big:2"], 2**62)), node("b", (["big:1"], 2**62), (["big:2"], 2**62))]
    with warnings.catch_warnings(), np.errstate(all="raise"):
        warnings.simplefilter("error")
        assert run_plugin(ImageLocality(), pod("big:1", "big:2"), nodes).raw_scores == {"a": 100, "b": 100}


def test_spread_is_computed_first_as_in_go():
    # 11 nodes, 6 have an image of 983302144 bytes. kube: spread = 6/11 in float64, then
    # int64(983302144 * 0.5454545454545454) = 536346623 (exactly 536346624 in real numbers).
    # 1 container: 100 * (536346623 - 23 MiB) / (1000 MiB - 23 MiB)
    #   = 51222937500 / 1024458752 = 49.99999990 -> 49 (the exact product would give 50).
    nodes = [node(f"n{i}", (["app:v1"], 983302144)) if i < 6 else node(f"n{i}") for i in range(11)]
    run = run_plugin(ImageLocality(), pod("app:v1"), nodes)
    assert run.raw_scores == {f"n{i}": 49 if i < 6 else 0 for i in range(11)}


def test_same_image_in_two_containers_counts_twice():
    # 2 containers with the same 300 MiB image on 1 of 1 node: sum 600 MiB,
    # max threshold 2000 MiB: 100 * 577 / 1977 = 29.18 -> 29.
    nodes = [node("a", (["app:v1"], 300 * MB))]
    assert run_plugin(ImageLocality(), pod("app:v1", "app:v1"), nodes).raw_scores == {"a": 29}


def test_total_counts_all_nodes_not_only_candidates():
    # Scoring a subset still divides by every node of the table (the snapshot).
    nodes = [node("a", (["app:v1"], 800 * MB)), node("b"), node("c"), node("d")]
    cache = make_cache(nodes)
    batch = NodeBatch(cache.table, cache.table.rows()[:1])
    # 800 MiB * 1/4 = 200 MiB -> 100 * 177 / 977 = 18.1 -> 18
    assert ImageLocality().score_batch(CycleState(), pod("app:v1"), batch).tolist() == [18]


def test_index_follows_node_updates_but_not_pod_changes():
    cache = make_cache([node("a", (["app:v1"], 800 * MB)), node("b")])
    plugin = ImageLocality()

    def scores():
        batch = NodeBatch(cache.table, cache.table.rows())
        return plugin.score_batch(CycleState(), pod("app:v1"), batch).tolist()

    # 800 MiB * 1/2 = 400 MiB -> 100 * 377 / 977 = 38.6 -> 38
    assert scores() == [38, 0]
    index = plugin._index
    cache.assume(make_pod("x", cpu="1"), "a")  # pods change, images do not
    assert scores() == [38, 0]
    assert plugin._index is index
    cache.update_node(node("b", (["app:v1"], 800 * MB)))
    # 800 MiB * 2/2 -> 100 * 777 / 977 = 79.5 -> 79
    assert scores() == [79, 79]


def test_registration():
    registry = PluginRegistry()
    imagelocality.register(registry)
    info = registry.plugins["ImageLocality"]
    assert info.extension_points == frozenset({"score"})
    assert info.args_type is None


def test_calculate_priority_raises_to_the_minimum_before_lowering_to_the_maximum():
    # kube's calculatePriority: a pod without containers has a maximum of 0, below the 23 MiB
    # minimum; its sum (0) is raised to the minimum first, so it scores 0, not 100.
    assert calculate_priority(np.array([0], dtype=np.int64), 0).tolist() == [0]
    # With containers the usual clamp: below the minimum 0, at the maximum 100.
    mib = 1024 * 1024
    assert calculate_priority(np.array([0, 23 * mib, 2000 * mib], dtype=np.int64), 1).tolist() == [0, 0, 100]
