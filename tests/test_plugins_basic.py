"""PrioritySort, NodeName, NodeUnschedulable, TaintToleration, DefaultBinder."""

from __future__ import annotations

import asyncio

import attrs

from scorer.cluster.memory import InMemoryCluster
from scorer.framework import Code, CycleState
from scorer.framework.types import QueuedPodInfo
from scorer.plugins.defaultbinder import DefaultBinder
from scorer.plugins.nodename import NodeName
from scorer.plugins.nodeunschedulable import NodeUnschedulable
from scorer.plugins.queuesort import PrioritySort
from scorer.plugins.tainttoleration import TaintToleration
from scorer.testing import make_node, make_pod, run_plugin


def qpi(pod, timestamp):
    return QueuedPodInfo(pod=pod, timestamp=timestamp)


def test_priority_sort():
    less = PrioritySort().less
    high, low = make_pod("high", priority=100), make_pod("low", priority=1)
    assert less(qpi(high, 5.0), qpi(low, 1.0))
    assert not less(qpi(low, 1.0), qpi(high, 5.0))
    a, b = make_pod("a"), make_pod("b")
    assert less(qpi(a, 1.0), qpi(b, 2.0))
    assert not less(qpi(a, 2.0), qpi(b, 2.0))


def test_node_name():
    nodes = [make_node("n1"), make_node("n2")]
    run = run_plugin(NodeName(), make_pod("p"), nodes)
    assert run.feasible == ["n1", "n2"]
    run = run_plugin(NodeName(), attrs.evolve(make_pod("p"), node_name="n2"), nodes)
    assert run.feasible == ["n2"]
    assert run.filter["n1"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert run.filter["n1"].reasons == ("node(s) didn't match the requested node name",)


def test_node_unschedulable():
    nodes = [make_node("ok"), make_node("cordoned", unschedulable=True)]
    run = run_plugin(NodeUnschedulable(), make_pod("p"), nodes)
    assert run.feasible == ["ok"]
    assert run.filter["cordoned"].reasons == ("node(s) were unschedulable",)
    assert run.filter["cordoned"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    tolerant = make_pod("t", tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                                           "effect": "NoSchedule"}])
    assert run_plugin(NodeUnschedulable(), tolerant, nodes).feasible == ["ok", "cordoned"]


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


def test_default_binder_binds_in_memory():
    node = make_node("n1")
    pod = make_pod("p")
    cluster = InMemoryCluster([node], [pod], [])
    binder = DefaultBinder(cluster)
    assert asyncio.run(binder.bind(CycleState(), pod, "n1")) is None
    assert cluster.pods[pod.key].node_name == "n1"
    status = asyncio.run(DefaultBinder(None).bind(CycleState(), pod, "n1"))
    assert status.code == Code.ERROR
