"""PrioritySort: the queue's order (kube's ``queuesort/priority_sort.go``, reference §2.2).

``Less(a, b)``: the higher ``spec.priority`` first; at equal priority the
earlier queue timestamp (when the pod entered or re-entered the queue).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry
    from scorer.framework.runtime import Handle
    from scorer.framework.types import QueuedPodInfo

NAME = "PrioritySort"


class PrioritySort:
    name = NAME

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        pa, pb = a.pod.priority, b.pod.priority
        return pa > pb or (pa == pb and a.timestamp < b.timestamp)


def sort_key(info: QueuedPodInfo) -> tuple[int, float]:
    """``PrioritySort.less`` as a key: ``less(a, b)`` exactly when ``sort_key(a) < sort_key(b)``, and
    equal keys where ``less`` holds neither way. The queue compares these tuples in C instead of
    calling ``less`` at every step of a heap sift."""
    return -info.pod.priority, info.timestamp


def factory(args: None, handle: Handle) -> PrioritySort:
    return PrioritySort()


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, plugin_type=PrioritySort)
