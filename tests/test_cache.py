"""NodeTable columns and ClusterCache bookkeeping."""

from __future__ import annotations

import attrs
import pytest

from scorer.cache import PODS, CacheError, ClusterCache, NodeTable
from scorer.testing import make_node, make_pod


def test_add_pod_updates_columns():
    table = NodeTable(capacity=1)
    for i in range(5):  # forces growth
        table.add_node(make_node(f"n{i}", cpu="2", memory="4Gi"))
    pod = make_pod("p", cpu="250m", memory="1Gi")
    assert table.add_pod(pod, "n3")
    row = table.index["n3"]
    cpu, mem = table.resource_index["cpu"], table.resource_index["memory"]
    assert table.requested[row, cpu] == 250
    assert table.requested[row, mem] == 1024**3
    assert table.requested[row, PODS] == 1
    assert table.allocatable[row, cpu] == 2000
    # Adding the same pod again replaces it instead of double counting.
    table.add_pod(pod, "n3")
    assert table.requested[row, cpu] == 250
    assert table.remove_pod(pod, "n3")
    assert table.requested[row].tolist() == [0] * len(table.resource_names)
    assert not table.add_pod(pod, "missing")


def test_non_zero_requests_and_extended_columns():
    table = NodeTable()
    table.add_node(make_node("n", allocatable={"example.com/dongle": "3"}))
    table.add_pod(make_pod("bare"), "n")
    table.add_pod(make_pod("gpu", requests={"example.com/dongle": "2"}), "n")
    row = table.index["n"]
    assert table.non_zero_requested[row].tolist() == [200, 2 * 200 * 1024 * 1024]
    col = table.resource_index["example.com/dongle"]
    assert table.allocatable[row, col] == 3
    assert table.requested[row, col] == 2


def test_remove_node_moves_last_row():
    table = NodeTable()
    for name in ("a", "b", "c"):
        table.add_node(make_node(name, cpu={"a": "1", "b": "2", "c": "3"}[name]))
    table.add_pod(make_pod("p", cpu="1"), "c")
    pods = table.remove_node("a")
    assert pods == []
    assert table.names == ["c", "b"]
    assert table.index == {"c": 0, "b": 1}
    cpu = table.resource_index["cpu"]
    assert table.allocatable[0, cpu] == 3000
    assert table.requested[0, cpu] == 1000


@pytest.mark.parametrize("removed", ["a", "b"])
def test_a_node_added_after_a_removal_starts_with_no_requests(removed):
    """add_node takes the row past the end as it is: remove_node leaves that row zero, whether the
    last row moved into the removed one or the removed node was the last."""
    table = NodeTable()
    for name in ("a", "b"):
        table.add_node(make_node(name, cpu="4"))
        table.add_pod(make_pod(f"p-{name}", cpu="1", memory="1Gi"), name)
    table.remove_node(removed)
    row = table.add_node(make_node("c", cpu="4"))
    assert row == 1
    assert table.requested[row].tolist() == [0] * len(table.resource_names)
    assert table.non_zero_requested[row].tolist() == [0, 0]


def test_taint_sets_are_interned():
    table = NodeTable()
    taint = {"key": "k", "value": "v", "effect": "NoSchedule"}
    table.add_node(make_node("a", taints=[taint]))
    table.add_node(make_node("b", taints=[taint]))
    table.add_node(make_node("c"))
    assert table.taint_set[0] == table.taint_set[1] != table.taint_set[2] == 0
    assert len(table.taint_sets) == 2


def test_placement_listeners_hear_placements_by_any_scheduler_once():
    cache = ClusterCache()
    heard = []
    cache.placement_listeners.append(lambda pod, node: heard.append((pod.name, node)))
    cache.add_node(make_node("n1"))
    cache.add_node(make_node("n2"))
    cache.add_pod(make_pod("listed", node_name="n1"))  # arrived bound (the initial list): not a placement
    mine, theirs = make_pod("mine"), make_pod("theirs")
    cache.assume(mine, "n1")
    cache.add_bound_pod(attrs.evolve(mine, node_name="n1"))  # confirms the assumed pod: heard at assume only
    cache.add_bound_pod(attrs.evolve(theirs, node_name="n2"))  # bound by another scheduler
    lost = make_pod("lost")
    cache.assume(lost, "n1")
    cache.add_bound_pod(attrs.evolve(lost, node_name="n2"))  # another scheduler won the race elsewhere
    assert heard == [("mine", "n1"), ("theirs", "n2"), ("lost", "n1"), ("lost", "n2")]
    assert cache.pod_node == {"default/listed": "n1", "default/mine": "n1", "default/theirs": "n2",
                              "default/lost": "n2"} and not cache.assumed
    heard.clear()
    cache.remove_pod(theirs)  # deleted: no longer load
    cache.add_pod(attrs.evolve(mine, node_name="n1", phase="Succeeded"))  # terminal: no longer load
    cache.remove_pod(make_pod("unknown"))
    cache.add_bound_pod(attrs.evolve(make_pod("done"), node_name="n1", phase="Failed"))
    assert heard == [("theirs", None), ("mine", None)]


def test_cache_assume_forget_and_confirm():
    cache = ClusterCache()
    cache.add_node(make_node("n"))
    pod = make_pod("p", cpu="1")
    cache.assume(pod, "n")
    assert cache.is_assumed(pod.key)
    assert cache.sizes() == {"nodes": 1, "pods": 1, "assumed_pods": 1}
    cache.forget(pod)
    assert cache.sizes() == {"nodes": 1, "pods": 0, "assumed_pods": 0}
    assert cache.table.requested[0].sum() == 0
    import attrs

    cache.assume(pod, "n")
    version = cache.table.version
    bound = attrs.evolve(pod, node_name="n", labels={"app": "web"})
    cache.add_pod(bound)
    assert not cache.is_assumed(pod.key)
    assert cache.table.requested[0, PODS] == 1
    # Confirming replaces the object (its labels are read by inter-pod affinity) and bumps the version.
    assert cache.pods_on("n") == (bound,) and cache.pods[pod.key] is bound
    assert cache.table.version > version


def test_pod_seen_before_its_node():
    cache = ClusterCache()
    import attrs

    cache.add_pod(attrs.evolve(make_pod("p", cpu="1"), node_name="late"))
    cache.add_node(make_node("late"))
    assert cache.table.requested[0, PODS] == 1
    cache.remove_node("late")
    assert len(cache.table) == 0


def test_pods_are_indexed_by_node_and_wait_for_theirs():
    cache = ClusterCache()
    cache.add_pod(attrs.evolve(make_pod("a", cpu="1"), node_name="n1"))
    cache.add_pod(attrs.evolve(make_pod("b", cpu="2"), node_name="n2"))
    cache.add_node(make_node("n1"))
    cpu = cache.table.resource_index["cpu"]
    # Only n1's pod is counted when n1 arrives; n2's keeps waiting for its node.
    assert [p.name for p in cache.pods_on("n1")] == ["a"]
    assert cache.table.requested[0, cpu] == 1000
    assert [p.name for p in cache.pods_on("n2")] == ["b"]
    cache.add_node(make_node("n2"))
    assert cache.table.requested[cache.table.index["n2"], cpu] == 2000


def test_a_removed_node_keeps_its_pods_for_its_return():
    cache = ClusterCache()
    cache.add_node(make_node("n1"))
    pod = attrs.evolve(make_pod("a", cpu="1"), node_name="n1")
    cache.add_pod(pod)
    cache.remove_node("n1")
    assert cache.pods_on("n1") == (pod,)
    cache.remove_pod(pod)
    assert cache.pods_on("n1") == ()
    cache.add_node(make_node("n1"))
    assert cache.table.requested[0].sum() == 0


def test_a_pod_moving_between_nodes_is_counted_once():
    cache = ClusterCache()
    cache.add_node(make_node("n1"))
    cache.add_node(make_node("n2"))
    cache.add_pod(attrs.evolve(make_pod("a", cpu="1"), node_name="n1"))
    cache.add_pod(attrs.evolve(make_pod("a", cpu="1"), node_name="n2"))
    cpu = cache.table.resource_index["cpu"]
    assert cache.table.requested[:2, cpu].tolist() == [0, 1000]
    # Counted again with other requests on the same node: replaced, not added.
    cache.add_pod(attrs.evolve(make_pod("a", cpu="3"), node_name="n2"))
    assert cache.table.requested[:2, cpu].tolist() == [0, 3000]


def test_terminal_pods_are_not_counted():
    cache = ClusterCache()
    cache.add_node(make_node("n1"))
    running = attrs.evolve(make_pod("job", cpu="1"), node_name="n1")
    cache.add_pod(running)
    cache.add_pod(attrs.evolve(running, phase="Succeeded"))
    assert "default/job" not in cache.pods and cache.table.requested[0].sum() == 0
    cache.load([], [attrs.evolve(make_pod("done", cpu="1"), node_name="n1", phase="Failed")], [])
    assert cache.table.requested[0].sum() == 0


def test_totals_never_wrap_past_int64():
    cache = ClusterCache()
    cache.add_node(make_node("n1"))
    memory = cache.table.resource_index["memory"]
    cache.add_pod(attrs.evolve(make_pod("a", memory="4Ei"), node_name="n1"))
    cache.add_pod(attrs.evolve(make_pod("b", memory="3Ei"), node_name="n1"))
    with pytest.raises(CacheError, match=r"pod default/c: its memory request \(\d+\) would take node n1's "
                                         "requested memory past the int64 maximum"):
        cache.add_pod(attrs.evolve(make_pod("c", memory="2Ei"), node_name="n1"))
    with pytest.raises(CacheError, match="pod default/d"):
        cache.assume(make_pod("d", memory="2Ei"), "n1")
    assert set(cache.pods) == {"default/a", "default/b"} and not cache.assumed
    assert cache.table.requested[0, memory] == 7 * 2**60
    # Replacing a pod by a new version of itself is not an overflow.
    cache.add_pod(attrs.evolve(make_pod("a", memory="4Ei", cpu="1"), node_name="n1"))
    assert cache.table.requested[0, memory] == 7 * 2**60


def test_an_overflowing_pod_waiting_for_its_node_is_refused_when_the_node_arrives():
    cache = ClusterCache()
    cache.add_pod(attrs.evolve(make_pod("a", memory="5Ei"), node_name="late"))
    cache.add_pod(attrs.evolve(make_pod("b", memory="5Ei"), node_name="late"))
    with pytest.raises(CacheError, match="pod default/b"):
        cache.add_node(make_node("late"))
    assert cache.node("late") is not None
    assert set(cache.pods) == {"default/a"}


def test_a_victim_is_assumed_deleted_until_the_cluster_shows_its_state():
    cache = ClusterCache()
    cache.add_node(make_node("n", cpu="4"))
    victim = make_pod("v", cpu="1", node_name="n")
    cache.add_pod(victim)
    assert not cache.is_deleting(victim)
    cache.assume_deleted(make_pod("unknown", node_name="n"))  # not counted: nothing to assume
    assert cache.assumed_deletions == set()
    cache.assume_deleted(victim)
    assert cache.is_deleting(victim)
    assert cache.table.requested[0, PODS] == 1  # it still counts until it is gone
    # An update that is not the deletion (written before it) keeps the mark.
    relabelled = attrs.evolve(victim, labels={"app": "web"})
    cache.add_pod(relabelled)
    assert cache.is_deleting(relabelled)
    # The cluster shows it terminating: its own flag says so from now on.
    terminating = attrs.evolve(relabelled, deleting=True)
    cache.add_pod(terminating)
    assert cache.assumed_deletions == set() and cache.is_deleting(terminating)
    # Gone: nothing is left behind.
    cache.assume_deleted(terminating)
    cache.remove_pod(terminating)
    assert cache.assumed_deletions == set()
    # Given up: the pod is not terminating after all.
    cache.add_pod(victim)
    cache.assume_deleted(victim)
    cache.forget_deletion(victim)
    assert not cache.is_deleting(victim)
