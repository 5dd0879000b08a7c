"""NodeName: a pod naming a node fits only that node; a new node may be the one."""

from __future__ import annotations

import attrs
from pluginkit import requeues

from scorer.framework import Code
from scorer.framework.catalog import PluginRegistry
from scorer.framework.events import ClusterEvent
from scorer.plugins import nodename
from scorer.plugins.nodename import NodeName
from scorer.testing import make_node, make_pod, run_plugin


def test_node_name():
    nodes = [make_node("n1"), make_node("n2")]
    run = run_plugin(NodeName(), make_pod("p"), nodes)
    assert run.feasible == ["n1", "n2"]
    run = run_plugin(NodeName(), attrs.evolve(make_pod("p"), node_name="n2"), nodes)
    assert run.feasible == ["n2"]
    assert run.filter["n1"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert run.filter["n1"].reasons == ("node(s) didn't match the requested node name",)


def test_a_node_name_no_node_has_rejects_all():
    run = run_plugin(NodeName(), attrs.evolve(make_pod("p"), node_name="gone"), [make_node("n1")])
    assert run.feasible == []


def test_events_to_register():
    assert NodeName().events_to_register() == [ClusterEvent("Node", "Add")]
    assert requeues(NodeName(), ClusterEvent("Node", "Add"))
    assert not requeues(NodeName(), ClusterEvent("Node", "UpdateNodeLabel"))
    assert not requeues(NodeName(), ClusterEvent("AssignedPod", "Delete"))


def test_registration():
    registry = PluginRegistry()
    nodename.register(registry)
    info = registry.plugins["NodeName"]
    assert info.extension_points == frozenset({"filter"})
    assert info.args_type is None
    assert isinstance(info.factory(None, None), NodeName)
