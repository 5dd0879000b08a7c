"""The queue's pools and their order: the pool names, the keyed heap under the active and
backoff pools, and the entries each of the two heaps holds.

The unschedulable and gated pools are plain dicts by pod key (``SchedulingQueue`` in
``scorer.queue.priority`` holds all four).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Generic, Protocol, TypeVar

import attrs

from scorer.framework.events import (
    BACKOFF_COMPLETE,
    FORCE_ACTIVATE,
    POD_ADD,
    SCHEDULE_ATTEMPT_FAILURE,
    UNSCHEDULABLE_TIMEOUT,
)
from scorer.framework.types import QueuedPodInfo

# Pool names, as in scheduler_pending_pods{queue} and scheduler_queue_incoming_pods_total{queue}.
ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"
IN_FLIGHT = "in_flight"  # not a pool: returned by add/update for a pod being scheduled

# The (pool, event) pairs the queue's own events can count in scheduler_queue_incoming_pods_total: they exist
# at 0 from the start, so that increase() sees the first of each (the cluster events' labels come as they
# happen). A new pod enters active or gated; a failed attempt any pool; a backoff that ends, active or gated;
# a pod unschedulable for too long, or activated, active, backoff or gated.
QUEUE_EVENT_POOLS: tuple[tuple[str, str], ...] = (
    *((pool, POD_ADD) for pool in (ACTIVE, GATED)),
    *((pool, SCHEDULE_ATTEMPT_FAILURE) for pool in (ACTIVE, BACKOFF, UNSCHEDULABLE, GATED)),
    *((pool, BACKOFF_COMPLETE) for pool in (ACTIVE, GATED)),
    *((pool, label) for label in (UNSCHEDULABLE_TIMEOUT, FORCE_ACTIVATE) for pool in (ACTIVE, BACKOFF, GATED)),
)


class _Keyed(Protocol):
    @property
    def key(self) -> str: ...


_E = TypeVar("_E", bound=_Keyed)


class KeyedHeap(Generic[_E]):
    """A binary heap with delete and re-sort by key in O(log n) (kube's internal heap).

    ``before(a, b)`` is the strict order; it must never call both ways true.
    """

    __slots__ = ("_before", "_entries", "_positions")

    def __init__(self, before: Callable[[_E, _E], bool]) -> None:
        self._before = before
        self._entries: list[_E] = []
        self._positions: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: str) -> bool:
        return key in self._positions

    def __iter__(self) -> Iterator[_E]:
        return iter(self._entries)

    def get(self, key: str) -> _E | None:
        position = self._positions.get(key)
        return None if position is None else self._entries[position]

    def peek(self) -> _E | None:
        return self._entries[0] if self._entries else None

    def push(self, entry: _E) -> None:
        self._entries.append(entry)
        self._positions[entry.key] = len(self._entries) - 1
        self._up(len(self._entries) - 1)

    def pop(self) -> _E:
        return self._remove_at(0)

    def remove(self, key: str) -> _E | None:
        position = self._positions.get(key)
        return None if position is None else self._remove_at(position)

    def fix(self, key: str) -> None:
        """Restore the order after the entry under ``key`` changed."""
        position = self._positions[key]
        if not self._up(position):
            self._down(position)

    def _remove_at(self, position: int) -> _E:
        last = len(self._entries) - 1
        if position != last:
            self._swap(position, last)
        entry = self._entries.pop()
        del self._positions[entry.key]
        if position < last and not self._up(position):
            self._down(position)
        return entry

    def _swap(self, i: int, j: int) -> None:
        entries = self._entries
        entries[i], entries[j] = entries[j], entries[i]
        self._positions[entries[i].key] = i
        self._positions[entries[j].key] = j

    def _up(self, position: int) -> bool:
        start = position
        while position > 0:
            parent = (position - 1) // 2
            if not self._before(self._entries[position], self._entries[parent]):
                break
            self._swap(position, parent)
            position = parent
        return position != start

    def _down(self, position: int) -> None:
        size = len(self._entries)
        while True:
            first = position
            for child in (2 * position + 1, 2 * position + 2):
                if child < size and self._before(self._entries[child], self._entries[first]):
                    first = child
            if first == position:
                return
            self._swap(position, first)
            position = first


@attrs.define(slots=True, eq=False)
class ActiveEntry:
    """A pod in the active heap."""

    key: str
    info: QueuedPodInfo
    seq: int  # insertion order, breaks ties that ``less`` leaves open


@attrs.define(slots=True, eq=False)
class BackoffEntry:
    """A pod in the backoff heap, until ``expiry`` (the queue's clock)."""

    key: str
    info: QueuedPodInfo
    expiry: float
    seq: int


def backoff_before(a: BackoffEntry, b: BackoffEntry) -> bool:
    """The backoff heap's order: earlier expiry first, then insertion order."""
    return (a.expiry, a.seq) < (b.expiry, b.seq)
