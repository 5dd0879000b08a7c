"""SchedulingGates: keep a pod out of the active queue while it has
``spec.schedulingGates`` (kube's PreEnqueue plugin ``schedulinggates``).

The pod waits, UnschedulableAndUnresolvable, with kube's message
``waiting for scheduling gates: [a b]``; an update that removes its gates
lets it in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scorer.framework.events import UNSCHEDULABLE_POD, UPDATE, ClusterEvent
from scorer.framework.status import Code, Status

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry
    from scorer.framework.runtime import Handle
    from scorer.model import Pod

NAME = "SchedulingGates"


class SchedulingGates:
    name = NAME

    def events_to_register(self) -> list[ClusterEvent]:
        """An update of the waiting pod may remove its gates."""
        return [ClusterEvent(UNSCHEDULABLE_POD, UPDATE)]

    def pre_enqueue(self, pod: Pod) -> Status | None:
        if not pod.scheduling_gates:
            return None
        # Go's %v of a []string: "[a b]".
        gates = " ".join(pod.scheduling_gates)
        message = f"waiting for scheduling gates: [{gates}]"
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (message,))


def factory(args: None, handle: Handle) -> SchedulingGates:
    return SchedulingGates()


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, plugin_type=SchedulingGates)
