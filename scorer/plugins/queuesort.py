"""PrioritySort: higher spec.priority first, then the earlier queue timestamp."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry
    from scorer.framework.types import QueuedPodInfo

NAME = "PrioritySort"


class PrioritySort:
    name = NAME

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        pa, pb = a.pod.priority, b.pod.priority
        return pa > pb or (pa == pb and a.timestamp < b.timestamp)


def factory(args: Any, handle: Any) -> PrioritySort:
    return PrioritySort()


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, plugin_type=PrioritySort)
