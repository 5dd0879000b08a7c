"""DefaultBinder: binds through the cluster source (the API's pods/binding, or
the in-memory cluster in simulate), as kube's ``defaultbinder``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scorer.framework.status import Status

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry
    from scorer.framework.cycle_state import CycleState
    from scorer.framework.runtime import Handle
    from scorer.model import Pod

NAME = "DefaultBinder"
ERR_NO_CLUSTER = "no cluster to bind to"


class DefaultBinder:
    name = NAME

    def __init__(self, binder: Any) -> None:
        self._binder = binder

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        if self._binder is None:
            return Status.error(ERR_NO_CLUSTER, NAME)
        await self._binder.bind(pod, node_name)
        return None


def factory(args: None, handle: Handle) -> DefaultBinder:
    return DefaultBinder(handle.binder)


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, plugin_type=DefaultBinder)
