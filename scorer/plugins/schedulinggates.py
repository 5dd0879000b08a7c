"""SchedulingGates: keep a pod out of the active queue while it has
``spec.schedulingGates`` (kube's PreEnqueue plugin of the same name)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scorer.framework import Code, Status

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry
    from scorer.model import Pod

NAME = "SchedulingGates"


class SchedulingGates:
    name = NAME

    def pre_enqueue(self, pod: Pod) -> Status | None:
        """UnschedulableAndUnresolvable while any gate remains; the pod is
        re-checked when an update removes its gates."""
        if not pod.scheduling_gates:
            return None
        # Go's %v of a []string: "[a b]".
        gates = " ".join(pod.scheduling_gates)
        message = f"waiting for scheduling gates: [{gates}]"
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, (message,))


def factory(args: Any, handle: Any) -> SchedulingGates:
    return SchedulingGates()


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, plugin_type=SchedulingGates)
