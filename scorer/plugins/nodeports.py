"""NodePorts: reject nodes where a host port the pod wants is already taken
(kube's ``nodeports``).

A wanted ``(hostIP, protocol, hostPort)`` conflicts with a used one with the
same protocol and port when the IPs overlap: equal, or either is ``0.0.0.0``
(an empty hostIP means ``0.0.0.0``), as kube's ``HostPortInfo.CheckConflict``.

Few pods use host ports, so the used ports of the whole table are indexed once
per table version by ``(protocol, port)`` and then by host IP, and a check
touches only the nodes that use the wanted port.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs
import numpy as np

from scorer.framework.events import ADD, ASSIGNED_POD, DELETE, NODE, ClusterEvent
from scorer.framework.status import Code, Status
from scorer.framework.types import FilterVerdict, NodeBatch

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry
    from scorer.framework.cycle_state import CycleState
    from scorer.framework.runtime import Handle
    from scorer.model import ContainerPort, Pod
    from scorer.state import NodeTable

NAME = "NodePorts"
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
DEFAULT_BIND_ALL_HOST_IP = "0.0.0.0"

# (host IP, protocol, port) with kube's sanitizing applied.
HostPort = tuple[str, str, int]

_PRE_FILTER_KEY = "PreFilter" + NAME


@attrs.frozen(slots=True)
class _PreFilterState:
    wanted: tuple[HostPort, ...]  # the pod's host ports, sanitized


def _pre_filter_state(state: CycleState) -> _PreFilterState | None:
    found: _PreFilterState | None = state.get(_PRE_FILTER_KEY)
    return found


class NodePorts:
    name = NAME

    def __init__(self) -> None:
        self._used: _UsedPorts | None = None

    def events_to_register(self) -> list[ClusterEvent]:
        """A bound pod leaving frees its ports; a new node has all of them free."""
        return [ClusterEvent(ASSIGNED_POD, DELETE), ClusterEvent(NODE, ADD)]

    def pre_filter(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> Status | None:
        wanted = _wanted_ports(pod)
        if not wanted:
            return Status.skip()
        state.write(_PRE_FILTER_KEY, _PreFilterState(wanted))
        return None

    def filter_batch(self, state: CycleState, pod: Pod, nodes: NodeBatch) -> FilterVerdict | None:
        pre = _pre_filter_state(state)
        wanted = pre.wanted if pre is not None else _wanted_ports(pod)  # None: PreFilter disabled
        if not wanted:
            return None
        conflict = self._used_ports(nodes.table).conflicting_rows(wanted)
        verdict = FilterVerdict(len(nodes))
        verdict.reject(conflict[nodes.rows], ERR_REASON, Code.UNSCHEDULABLE)
        return verdict

    def _used_ports(self, table: NodeTable) -> _UsedPorts:
        used = self._used
        if used is None or used.table is not table or used.version != table.version:
            used = self._used = _UsedPorts(table)
        return used


class _UsedPorts:
    """The host ports in use on every node of one table version.

    ``by_port[(protocol, port)][host_ip]`` is the array of table rows whose
    pods use that port on that IP.
    """

    __slots__ = ("table", "version", "by_port")

    def __init__(self, table: NodeTable) -> None:
        self.table = table
        self.version = table.version
        rows_of: dict[tuple[str, int], dict[str, list[int]]] = {}
        for row, pods in enumerate(table.pods):
            for pod in pods.values():
                for port in pod.host_ports:
                    ip, protocol, number = _sanitize(port)
                    rows_of.setdefault((protocol, number), {}).setdefault(ip, []).append(row)
        self.by_port = {
            key: {ip: np.array(rows, dtype=np.int64) for ip, rows in by_ip.items()}
            for key, by_ip in rows_of.items()
        }

    def conflicting_rows(self, wanted: tuple[HostPort, ...]) -> np.ndarray:
        """Bool per table row: some wanted port is taken there."""
        conflict = np.zeros(len(self.table), dtype=bool)
        for ip, protocol, number in wanted:
            by_ip = self.by_port.get((protocol, number))
            if not by_ip:
                continue
            if ip == DEFAULT_BIND_ALL_HOST_IP:
                for rows in by_ip.values():
                    conflict[rows] = True
                continue
            for key in (DEFAULT_BIND_ALL_HOST_IP, ip):
                taken = by_ip.get(key)
                if taken is not None:
                    conflict[taken] = True
        return conflict


def _sanitize(port: ContainerPort) -> HostPort:
    return (port.host_ip or DEFAULT_BIND_ALL_HOST_IP, port.protocol or "TCP", port.host_port)


def _wanted_ports(pod: Pod) -> tuple[HostPort, ...]:
    return tuple(_sanitize(p) for p in pod.host_ports)


def factory(args: None, handle: Handle) -> NodePorts:
    return NodePorts()


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, plugin_type=NodePorts)
