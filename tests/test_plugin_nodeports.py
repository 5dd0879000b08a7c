"""NodePorts: host port conflicts by protocol, port and overlapping host IPs
(kube's HostPortInfo.CheckConflict), the Skip for pods without host ports,
and the per-table-version index of used ports."""

from __future__ import annotations

import numpy as np
import pytest
from pluginkit import requeues

from scorer.framework import Code, CycleState, NodeBatch, Status
from scorer.framework.catalog import PluginRegistry
from scorer.framework.events import ClusterEvent
from scorer.plugins import nodeports
from scorer.plugins.nodeports import ERR_REASON, NodePorts
from scorer.testing import make_cache, make_node, make_pod, run_plugin


def port(host_port, protocol="TCP", host_ip="", container_port=80):
    p = {"containerPort": container_port, "hostPort": host_port, "protocol": protocol}
    if host_ip:
        p["hostIP"] = host_ip
    return p


def pod_with_ports(name, *ports, node_name="", init_ports=(), host_network=False):
    spec = {"containers": [{"name": "c", "image": "nginx", "ports": list(ports)}]}
    if init_ports:
        spec["initContainers"] = [{"name": "i", "image": "busybox", "ports": list(init_ports)}]
    if host_network:
        spec["hostNetwork"] = True
    return make_pod(name, node_name=node_name, spec=spec)


NODES = ["empty", "tcp-any", "udp", "ip1", "ip2", "other-port", "init"]
EXISTING = [
    pod_with_ports("e1", port(8080), node_name="tcp-any"),  # hostIP "" = 0.0.0.0
    pod_with_ports("e2", port(8080, "UDP"), node_name="udp"),
    pod_with_ports("e3", port(8080, host_ip="10.0.0.1"), node_name="ip1"),
    pod_with_ports("e4", port(8080, host_ip="10.0.0.2"), node_name="ip2"),
    pod_with_ports("e5", port(9090), node_name="other-port"),
    pod_with_ports("e6", port(80, container_port=80), node_name="other-port"),  # hostPort 80
    pod_with_ports("e7", init_ports=(port(8080),), node_name="init"),  # init containers count
    make_pod("e8", node_name="empty"),
]


@pytest.mark.parametrize(
    ("wanted", "conflicting"),
    [
        # 0.0.0.0 conflicts with the same protocol/port on any IP.
        (port(8080), {"tcp-any", "ip1", "ip2", "init"}),
        # A specific IP conflicts with 0.0.0.0 and with the same IP only.
        (port(8080, host_ip="10.0.0.2"), {"tcp-any", "ip2", "init"}),
        (port(8080, host_ip="10.0.0.3"), {"tcp-any", "init"}),
        # Protocols are separate port spaces.
        (port(8080, "UDP"), {"udp"}),
        (port(8080, "SCTP"), set()),
        (port(9090, host_ip="10.0.0.1"), {"other-port"}),
    ],
)
def test_conflicts(wanted, conflicting):
    nodes = [make_node(n) for n in NODES]
    run = run_plugin(NodePorts(), pod_with_ports("p", wanted), nodes, pods=EXISTING)
    assert run.feasible == [n for n in NODES if n not in conflicting]
    for name in conflicting:
        status = run.filter[name]
        assert status.code == Code.UNSCHEDULABLE
        assert status.reasons == (ERR_REASON,)
        assert status.plugin == "NodePorts"


def test_any_wanted_port_conflicting_rejects_and_init_ports_are_wanted():
    nodes = [make_node(n) for n in NODES]
    pod = pod_with_ports("p", port(7000), init_ports=(port(9090, host_ip="10.9.9.9"),))
    run = run_plugin(NodePorts(), pod, nodes, pods=EXISTING)
    assert set(NODES) - set(run.feasible) == {"other-port"}


def test_host_network_pod_wants_its_container_ports():
    # With hostNetwork the API server defaults hostPort to containerPort (80).
    nodes = [make_node(n) for n in NODES]
    pod = pod_with_ports("p", {"containerPort": 80}, host_network=True)
    run = run_plugin(NodePorts(), pod, nodes, pods=EXISTING)
    assert run.filter["other-port"].reasons == (ERR_REASON,)
    assert len(run.feasible) == len(NODES) - 1


def test_pre_filter_skips_pod_without_host_ports():
    cache = make_cache([make_node("n")], EXISTING)
    batch = NodeBatch(cache.table, cache.table.rows())
    pod = pod_with_ports("p", {"containerPort": 8080})  # no hostPort
    assert NodePorts().pre_filter(CycleState(), pod, batch) == Status.skip()
    assert NodePorts().pre_filter(CycleState(), pod_with_ports("q", port(1)), batch) is None
    # Through the framework the Filter is then not called: every node passes.
    run = run_plugin(NodePorts(), pod, [make_node(n) for n in NODES], pods=EXISTING)
    assert run.feasible == NODES


def test_used_ports_follow_pod_changes():
    cache = make_cache([make_node("a"), make_node("b")])
    table = cache.table
    plugin = NodePorts()
    pod = pod_with_ports("p", port(8080))
    state = CycleState()
    assert plugin.pre_filter(state, pod, NodeBatch(table, table.rows())) is None

    def rejected() -> list[str]:
        verdict = plugin.filter_batch(state, pod, NodeBatch(table, table.rows()))
        return [table.names[i] for i in np.flatnonzero(verdict.failed)]

    assert rejected() == []
    holder = pod_with_ports("holder", port(8080))
    cache.assume(holder, "b")
    assert rejected() == ["b"]
    cache.forget(holder)
    assert rejected() == []


def test_registration():
    registry = PluginRegistry()
    nodeports.register(registry)
    info = registry.plugins["NodePorts"]
    assert info.extension_points == frozenset({"preFilter", "filter"})
    assert info.args_type is None


def test_events_to_register():
    plugin = NodePorts()
    assert plugin.events_to_register() == [ClusterEvent("AssignedPod", "Delete"), ClusterEvent("Node", "Add")]
    assert requeues(plugin, ClusterEvent("AssignedPod", "Delete"))  # its ports are free again
    assert requeues(plugin, ClusterEvent("Node", "Add"))
    assert not requeues(plugin, ClusterEvent("AssignedPod", "Add"))
    assert not requeues(plugin, ClusterEvent("Node", "UpdateNodeLabel"))
