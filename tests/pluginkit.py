"""Test kit for the built-in plugins' tests: what a plugin's ``events_to_register`` does in a queue."""

from __future__ import annotations

from typing import Any

from scorer.framework.events import ClusterEvent
from scorer.queue import UNSCHEDULABLE, SchedulingQueue
from scorer.testing import make_pod


def requeues(plugin: Any, event: ClusterEvent) -> bool:
    """Whether ``event`` releases a pod that ``plugin`` rejected from the unschedulable pool
    of a queue wired with the plugin's ``events_to_register`` (as the assembly wires it)."""
    queue = SchedulingQueue(
        lambda a, b: a.timestamp < b.timestamp, plugin_events={plugin.name: plugin.events_to_register()}
    )
    queue.add(make_pod("rejected"))
    info = queue.pop()
    assert info is not None
    assert queue.add_unschedulable_if_not_present(info, unschedulable_plugins=(plugin.name,)) == UNSCHEDULABLE
    return queue.move_all_to_active_or_backoff(event) == 1
