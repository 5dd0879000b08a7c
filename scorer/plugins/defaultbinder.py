"""DefaultBinder: binds through the cluster source (the API's pods/binding, or
the in-memory cluster in simulate), as kube's ``defaultbinder``.

A binding the cluster refuses for good (``BindConflict``: the API's 404 or
409, the pod gone, re-created, being deleted or bound already) comes back as
a ``BindConflictStatus``: an Error status the binding cycle recognises
(``is_bind_conflict``) and does not retry, since the cluster source will show
what became of the pod. Any other failure the binder reports (a
``ScorerError`` such as ``ApiUnavailable``: 5xx, 429, a timeout) is a plain
Error status with the binder's message, as kube's ``binding rejected: <err>``;
the binding cycle requeues the pod with backoff. Other exceptions (bugs)
raise through and the framework reports them with their type. Other Bind
plugins may return ``bind_conflict(message, plugin)`` for a conflict.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from scorer.errors import BindConflict, ScorerError
from scorer.framework.status import Code, Status

if TYPE_CHECKING:
    from scorer.framework.catalog import PluginRegistry
    from scorer.framework.cycle_state import CycleState
    from scorer.framework.runtime import Handle
    from scorer.framework.seams import Binder
    from scorer.model import Pod

NAME = "DefaultBinder"
ERR_NO_CLUSTER = "no cluster to bind to"


@attrs.frozen(slots=True)
class BindConflictStatus(Status):
    """An Error status: the cluster refused the binding for good; retrying cannot help."""


def bind_conflict(message: str, plugin: str = NAME) -> Status:
    """The status of a Bind plugin whose binding the cluster refused for good."""
    return BindConflictStatus(Code.ERROR, (message,), plugin)


def is_bind_conflict(status: Status) -> bool:
    return isinstance(status, BindConflictStatus)


class DefaultBinder:
    """Binds through ``binder`` (the handle's); None: every bind is an Error status."""

    name = NAME

    def __init__(self, binder: Binder | None) -> None:
        self._binder = binder

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        if self._binder is None:
            return Status.error(ERR_NO_CLUSTER, NAME)
        try:
            await self._binder.bind(pod, node_name)
        except BindConflict as exc:
            return bind_conflict(str(exc))
        except ScorerError as exc:
            return Status.error(str(exc), NAME)
        return None


def factory(args: None, handle: Handle) -> DefaultBinder:
    return DefaultBinder(handle.binder)


def register(registry: PluginRegistry) -> None:
    registry.register(NAME, factory, plugin_type=DefaultBinder)
