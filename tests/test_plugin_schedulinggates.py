"""SchedulingGates: gated pods wait outside the active queue, with kube's message."""

from __future__ import annotations

import pytest
from pluginkit import requeues

from scorer.framework import Code
from scorer.framework.catalog import PluginRegistry
from scorer.framework.events import ClusterEvent
from scorer.plugins import schedulinggates
from scorer.plugins.schedulinggates import SchedulingGates
from scorer.testing import make_pod


def gated(*gates: str):
    return make_pod("p", spec={"schedulingGates": [{"name": g} for g in gates]})


@pytest.mark.parametrize(
    ("gates", "message"),
    [
        (("example.com/quota",), "waiting for scheduling gates: [example.com/quota]"),
        # Go's %v of a []string: space separated, in spec order.
        (("b", "a", "example.com/c"), "waiting for scheduling gates: [b a example.com/c]"),
    ],
)
def test_gated_pod_waits(gates, message):
    status = SchedulingGates().pre_enqueue(gated(*gates))
    assert status is not None
    assert status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == (message,)


def test_pod_without_gates_is_enqueued():
    assert SchedulingGates().pre_enqueue(make_pod("p")) is None


def test_registration():
    registry = PluginRegistry()
    schedulinggates.register(registry)
    info = registry.plugins["SchedulingGates"]
    assert info.extension_points == frozenset({"preEnqueue"})
    assert info.args_type is None
    assert info.factory(None, None).name == "SchedulingGates"


def test_events_to_register():
    plugin = SchedulingGates()
    assert plugin.events_to_register() == [ClusterEvent("UnschedulablePod", "Update")]
    assert requeues(plugin, ClusterEvent("UnschedulablePod", "Update"))
    assert not requeues(plugin, ClusterEvent("Node", "Add"))
