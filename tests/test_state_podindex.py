"""The cache's PodIndex and Workloads: kept right through every pod change, read without scanning."""

from __future__ import annotations

import attrs
import pytest

from scorer.cache import ClusterCache
from scorer.model import (
    Affinity,
    LabelSelector,
    LabelSelectorRequirement,
    PodAffinityTerm,
    PodAntiAffinity,
    PodDisruptionBudget,
    SelectorOwner,
)
from scorer.state import podindex
from scorer.testing import make_node, make_pod


def _cache(*nodes: str) -> ClusterCache:
    cache = ClusterCache()
    for name in nodes:
        cache.add_node(make_node(name, cpu="4", memory="8Gi"))
    return cache


WEB = LabelSelector(match_labels={"app": "web"})


def test_selector_counts_follow_add_update_assume_forget_and_remove() -> None:
    cache = _cache("n1", "n2")
    counts = cache.pod_index.selector_counts("default", WEB)
    assert counts.total == 0
    cache.add_pod(make_pod("a", labels={"app": "web"}, node_name="n1"))
    cache.add_pod(make_pod("b", labels={"app": "db"}, node_name="n1"))
    cache.add_pod(make_pod("c", labels={"app": "web"}, namespace="other", node_name="n2"))
    assert counts.by_node == {"n1": 1} and counts.total == 1
    assert counts.per_row(cache.table).tolist() == [1, 0]
    cache.assume(make_pod("d", labels={"app": "web"}), "n2")
    assert counts.per_row(cache.table).tolist() == [1, 1]
    cache.forget(make_pod("d", labels={"app": "web"}))
    assert counts.per_row(cache.table).tolist() == [1, 0]
    # A label change of a bound pod (same requests: the cache's fast path) moves it out of the count.
    cache.add_pod(make_pod("a", labels={"app": "db"}, node_name="n1"))
    assert counts.total == 0 and counts.per_row(cache.table).tolist() == [0, 0]
    cache.add_pod(make_pod("b", labels={"app": "web"}, node_name="n1"))
    cache.remove_pod(make_pod("b", node_name="n1"))
    assert counts.total == 0 and counts.by_node == {}


def test_selector_counts_created_late_see_existing_pods_and_follow_row_moves() -> None:
    cache = _cache("n1", "n2", "n3")
    for i, node in enumerate(["n1", "n3", "n3"]):
        cache.add_pod(make_pod(f"p{i}", labels={"app": "web"}, node_name=node))
    counts = cache.pod_index.selector_counts("default", WEB)
    assert counts.per_row(cache.table).tolist() == [1, 0, 2]
    cache.remove_node("n1")  # n3 moves into row 0; n1's pod waits for its node
    assert cache.table.names == ["n3", "n2"]
    assert counts.per_row(cache.table).tolist() == [2, 0]
    assert counts.total == 3  # still counted by node name
    cache.add_node(make_node("n1", cpu="4", memory="8Gi"))
    assert counts.per_row(cache.table).tolist() == [2, 0, 1]


def test_deleting_pods_counted_only_when_asked() -> None:
    cache = _cache("n1")
    cache.add_pod(make_pod("a", labels={"app": "web"}, node_name="n1"))
    cache.add_pod(attrs.evolve(make_pod("b", labels={"app": "web"}, node_name="n1"), deleting=True))
    assert cache.pod_index.selector_counts("default", WEB).total == 2
    assert cache.pod_index.selector_counts("default", WEB, include_deleting=False).total == 1


def test_expressions_and_canonical_keys_share_one_count() -> None:
    cache = _cache("n1")
    cache.add_pod(make_pod("a", labels={"app": "web", "tier": "1"}, node_name="n1"))
    one = LabelSelector(match_expressions=(
        LabelSelectorRequirement(key="app", operator="In", values=("web", "api")),
        LabelSelectorRequirement(key="tier", operator="Exists"),
    ))
    same = LabelSelector(match_expressions=(
        LabelSelectorRequirement(key="tier", operator="Exists"),
        LabelSelectorRequirement(key="app", operator="In", values=("api", "web")),
    ))
    assert cache.pod_index.selector_counts("default", one) is cache.pod_index.selector_counts("default", same)
    assert cache.pod_index.selector_counts("default", one).total == 1


def test_least_recently_used_counts_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(podindex, "MAX_SELECTOR_COUNTS", 2)
    cache = _cache("n1")
    first = cache.pod_index.selector_counts("default", LabelSelector(match_labels={"a": "1"}))
    cache.pod_index.selector_counts("default", LabelSelector(match_labels={"a": "2"}))
    cache.pod_index.selector_counts("default", LabelSelector(match_labels={"a": "3"}))
    cache.add_pod(make_pod("p", labels={"a": "1"}, node_name="n1"))
    assert first.total == 0  # dropped: no longer kept up to date
    again = cache.pod_index.selector_counts("default", LabelSelector(match_labels={"a": "1"}))
    assert again is not first and again.total == 1


def test_extensions_are_backfilled_and_follow_pod_changes() -> None:
    cache = _cache("n1")
    anti = Affinity(pod_anti_affinity=PodAntiAffinity(required=(
        PodAffinityTerm(label_selector=WEB, topology_key="kubernetes.io/hostname"),)))
    cache.add_pod(make_pod("plain", node_name="n1"))
    cache.add_pod(attrs.evolve(make_pod("anti", node_name="n1"), affinity=anti))

    class Seen:
        def __init__(self, index: podindex.PodIndex) -> None:
            self.pods: dict[str, str] = {}

        def add(self, pod, node_name):  # type: ignore[no-untyped-def]
            self.pods[pod.key] = node_name

        def remove(self, pod, node_name):  # type: ignore[no-untyped-def]
            del self.pods[pod.key]

    seen = cache.pod_index.extension("seen", Seen)
    assert seen.pods == {"default/plain": "n1", "default/anti": "n1"}  # backfilled
    assert cache.pod_index.extension("seen", Seen) is seen
    cache.remove_pod(make_pod("anti", node_name="n1"))
    assert seen.pods == {"default/plain": "n1"}


def test_workloads_default_selector_and_budgets() -> None:
    cache = ClusterCache()
    pod = make_pod("p", labels={"app": "web", "pod-template-hash": "x1"})
    assert cache.workloads.default_selector(pod) is None
    cache.add_workload(SelectorOwner(kind="Service", name="web", selector=LabelSelector(match_labels={"app": "web"})))
    cache.add_workload(SelectorOwner(kind="ReplicaSet", name="web-x1", selector=LabelSelector(
        match_labels={"app": "web", "pod-template-hash": "x1"})))
    cache.add_workload(SelectorOwner(kind="ReplicaSet", name="other", selector=LabelSelector(
        match_labels={"app": "db"})))
    cache.add_workload(SelectorOwner(kind="StatefulSet", name="nothing", selector=None))
    cache.add_workload(SelectorOwner(kind="Service", namespace="elsewhere", name="web", selector=WEB))
    selector = cache.workloads.default_selector(pod)
    assert selector is not None
    assert selector.match_labels == {"app": "web"}
    assert {(r.key, r.operator, r.values) for r in selector.match_expressions} == {
        ("app", "In", ("web",)), ("pod-template-hash", "In", ("x1",))}
    assert selector.matches(pod.labels) and not selector.matches({"app": "web"})
    # A Service selecting everything adds nothing: an empty selector means no default spreading.
    lone = ClusterCache()
    lone.add_workload(SelectorOwner(kind="Service", name="all", selector=LabelSelector()))
    assert lone.workloads.default_selector(pod) is None

    budget = PodDisruptionBudget(name="web", selector=WEB, disruptions_allowed=1)
    cache.add_workload(budget)
    assert cache.workloads.budgets_for("default") == [budget] and budget.protects(pod)
    cache.remove_workload(budget)
    assert cache.workloads.budgets_for("default") == []
