"""DefaultBinder: binds through the cluster source (the API's pods/binding, or
the in-memory cluster in simulate)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scorer.framework import Status

if TYPE_CHECKING:
    from scorer.framework import CycleState
    from scorer.framework.catalog import PluginRegistry
    from scorer.model import Pod

NAME = "DefaultBinder"


class DefaultBinder:
    name = NAME

    def __init__(self, binder: Any) -> None:
        self._binder = binder

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        if self._binder is None:
            return Status.error("no cluster to bind to", NAME)
        await self._binder.bind(pod, node_name)
        return None


def factory(args: Any, handle: Any) -> DefaultBinder:
    return DefaultBinder(handle.binder)


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, plugin_type=DefaultBinder)
