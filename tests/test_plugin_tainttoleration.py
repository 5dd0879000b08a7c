"""TaintToleration: Filter on NoSchedule/NoExecute taints, Score by untolerated
PreferNoSchedule taints with reverse DefaultNormalizeScore (reference §3.6)."""

from __future__ import annotations

from pluginkit import requeues

from scorer.framework import Code, CycleState, NodeBatch
from scorer.framework.catalog import PluginRegistry
from scorer.framework.events import ClusterEvent
from scorer.plugins import tainttoleration
from scorer.plugins.tainttoleration import TaintToleration
from scorer.testing import make_cache, make_node, make_pod, run_plugin


def test_taint_toleration_filter():
    nodes = [
        make_node("clean"),
        make_node("gpu", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        make_node("evict", taints=[{"key": "bad", "effect": "NoExecute"}]),
        make_node("soft", taints=[{"key": "maint", "effect": "PreferNoSchedule"}]),
    ]
    run = run_plugin(TaintToleration(), make_pod("p"), nodes)
    assert run.feasible == ["clean", "soft"]
    assert run.filter["gpu"].reasons == ("node(s) had untolerated taint(s)",)
    assert run.filter["gpu"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    pod = make_pod("g", tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu",
                                      "effect": "NoSchedule"}])
    assert run_plugin(TaintToleration(), pod, nodes).feasible == ["clean", "gpu", "soft"]
    everything = make_pod("all", tolerations=[{"operator": "Exists"}])
    assert len(run_plugin(TaintToleration(), everything, nodes).feasible) == 4


def test_comparison_operators_tolerate_nothing():
    """Gt and Lt (a later Kubernetes feature, off here): the pod is read, and these
    tolerations tolerate no taint, for Filter and for Score."""
    nodes = [
        make_node("clean"),
        make_node("hard", taints=[{"key": "level", "value": "5", "effect": "NoSchedule"}]),
        make_node("soft", taints=[{"key": "level", "value": "5", "effect": "PreferNoSchedule"}]),
    ]
    for operator in ("Gt", "Lt"):
        pod = make_pod("p", tolerations=[{"key": "level", "operator": operator, "value": "3"},
                                         {"key": "level", "operator": operator, "value": "7"}])
        run = run_plugin(TaintToleration(), pod, nodes)
        assert run.feasible == ["clean", "soft"]
        assert run.raw_scores == {"clean": 0, "soft": 1}


def test_taint_toleration_score_reverse_normalized():
    # Raw = untolerated PreferNoSchedule taints: clean 0, one 1, two 2.
    # Reverse DefaultNormalizeScore with max 2: 100 - 100*s/2 -> 100, 50, 0.
    nodes = [
        make_node("clean"),
        make_node("one", taints=[{"key": "a", "effect": "PreferNoSchedule"}]),
        make_node("two", taints=[{"key": "a", "effect": "PreferNoSchedule"},
                                 {"key": "b", "value": "x", "effect": "PreferNoSchedule"}]),
    ]
    run = run_plugin(TaintToleration(), make_pod("p"), nodes)
    assert run.raw_scores == {"clean": 0, "one": 1, "two": 2}
    assert run.scores == {"clean": 100, "one": 50, "two": 0}
    # A toleration with an empty effect counts for PreferNoSchedule taints.
    pod = make_pod("t", tolerations=[{"key": "a", "operator": "Exists"}])
    run = run_plugin(TaintToleration(), pod, nodes)
    assert run.raw_scores == {"clean": 0, "one": 0, "two": 1}
    assert run.scores == {"clean": 100, "one": 100, "two": 0}
    # All zero: reverse normalization gives every node 100.
    assert run_plugin(TaintToleration(), make_pod("p"), [make_node("x"), make_node("y")]).scores == {
        "x": 100, "y": 100}


def test_score_reads_what_pre_score_kept():
    # Score uses the tolerations PreScore kept (PreferNoSchedule or empty effect), not the pod's.
    cache = make_cache([make_node("one", taints=[{"key": "a", "effect": "PreferNoSchedule"}])])
    batch = NodeBatch(cache.table, cache.table.rows())
    plugin, state = TaintToleration(), CycleState()
    tolerating = make_pod("t", tolerations=[{"key": "a", "operator": "Exists", "effect": "PreferNoSchedule"}])
    plugin.pre_score(state, tolerating, batch)
    assert plugin.score_batch(state, make_pod("other"), batch).tolist() == [0]


def test_events_to_register():
    plugin = TaintToleration()
    assert plugin.events_to_register() == [
        ClusterEvent("Node", "Add"), ClusterEvent("Node", "UpdateNodeTaint"), ClusterEvent("UnschedulablePod", "Update")
    ]
    assert requeues(plugin, ClusterEvent("Node", "UpdateNodeTaint"))
    assert requeues(plugin, ClusterEvent("UnschedulablePod", "Update"))  # the pod's tolerations changed
    assert not requeues(plugin, ClusterEvent("Node", "UpdateNodeLabel"))
    assert not requeues(plugin, ClusterEvent("AssignedPod", "Delete"))


def test_registration():
    registry = PluginRegistry()
    tainttoleration.register(registry)
    info = registry.plugins["TaintToleration"]
    assert info.extension_points == frozenset({"filter", "preScore", "score"})
    assert info.args_type is None
    assert isinstance(info.factory(None, None), TaintToleration)
