"""NodeUnschedulable: cordoned nodes reject pods that do not tolerate the unschedulable taint."""

from __future__ import annotations

from pluginkit import requeues

from scorer.framework import Code
from scorer.framework.catalog import PluginRegistry
from scorer.framework.events import ClusterEvent
from scorer.plugins import nodeunschedulable
from scorer.plugins.nodeunschedulable import NodeUnschedulable
from scorer.testing import make_node, make_pod, run_plugin


def test_node_unschedulable():
    nodes = [make_node("ok"), make_node("cordoned", unschedulable=True)]
    run = run_plugin(NodeUnschedulable(), make_pod("p"), nodes)
    assert run.feasible == ["ok"]
    assert run.filter["cordoned"].reasons == ("node(s) were unschedulable",)
    assert run.filter["cordoned"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    tolerant = make_pod("t", tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                                           "effect": "NoSchedule"}])
    assert run_plugin(NodeUnschedulable(), tolerant, nodes).feasible == ["ok", "cordoned"]


def test_events_to_register():
    plugin = NodeUnschedulable()
    assert plugin.events_to_register() == [ClusterEvent("Node", "Add"), ClusterEvent("Node", "UpdateNodeTaint")]
    assert requeues(plugin, ClusterEvent("Node", "Add"))
    assert requeues(plugin, ClusterEvent("Node", "UpdateNodeTaint"))  # uncordoned
    assert requeues(plugin, ClusterEvent("Node", "Update"))  # a generic update may uncordon it
    assert not requeues(plugin, ClusterEvent("Node", "UpdateNodeLabel"))
    assert not requeues(plugin, ClusterEvent("AssignedPod", "Delete"))


def test_registration():
    registry = PluginRegistry()
    nodeunschedulable.register(registry)
    info = registry.plugins["NodeUnschedulable"]
    assert info.extension_points == frozenset({"filter"})
    assert info.args_type is None
    assert isinstance(info.factory(None, None), NodeUnschedulable)
