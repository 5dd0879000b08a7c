"""What the queue remembers of a pod in flight (popped, its attempt not ended yet): the pod's
own updates and activations, and the cluster events received since it was popped.

A pod that fails just after the event that would have helped it is then retried after backoff
instead of waiting in the unschedulable pool. The events are kept once, in an ``EventLog`` shared
by every in-flight pod (each remembers where the log stood when it was popped); events that no
in-flight pod still needs are dropped, and the log is capped (``MAX_IN_FLIGHT_EVENTS``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from scorer.framework.events import ClusterEvent

if TYPE_CHECKING:
    from scorer.model import Pod

# Events remembered for in-flight pods; beyond this the oldest are dropped and
# pods that were in flight before them are treated as having seen a relevant event.
MAX_IN_FLIGHT_EVENTS = 10_000


@attrs.define(slots=True, eq=False)
class InFlight:
    """One pod in flight."""

    uid: str
    first_event: int  # absolute index in the event log when the pod was popped
    own_events: list[ClusterEvent] = attrs.Factory(list)  # updates/activations of this pod
    latest_pod: Pod | None = None  # newest version seen by ``update`` during flight
    deleted: bool = False


class EventLog:
    """The cluster events received while pods are in flight, by absolute index (the first
    one kept has index ``base``); at most ``MAX_IN_FLIGHT_EVENTS``, the oldest dropped."""

    __slots__ = ("_base", "_events")

    def __init__(self) -> None:
        self._events: list[ClusterEvent] = []
        self._base = 0

    @property
    def end(self) -> int:
        """The absolute index the next event will get."""
        return self._base + len(self._events)

    def record(self, event: ClusterEvent) -> None:
        self._events.append(event)
        overflow = len(self._events) - MAX_IN_FLIGHT_EVENTS
        if overflow > 0:
            del self._events[:overflow]
            self._base += overflow

    def since(self, first: int) -> list[ClusterEvent] | None:
        """The events from absolute index ``first`` on (a new list), or None if some were dropped."""
        if first < self._base:
            return None
        return self._events[first - self._base :]

    def prune(self, oldest: int) -> None:
        """Forget the events before absolute index ``oldest``."""
        drop = oldest - self._base
        if drop > 0:
            del self._events[:drop]
            self._base += drop
