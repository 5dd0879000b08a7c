"""The queue's pools and their order: the pool names, the keyed heap under the active and
backoff pools, the entries each of the two heaps holds and how each heap ranks them.

The unschedulable and gated pools are plain dicts by pod key (``SchedulingQueue`` in
``scorer.queue.priority`` holds all four).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar

import attrs

from scorer.framework.events import (
    BACKOFF_COMPLETE,
    FORCE_ACTIVATE,
    POD_ADD,
    SCHEDULE_ATTEMPT_FAILURE,
    UNSCHEDULABLE_TIMEOUT,
)
from scorer.framework.types import QueuedPodInfo
from scorer.plugins.queuesort import PrioritySort, sort_key

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


class Rank(Protocol):
    """What the heap orders entries by: anything compared with ``<`` (a tuple compares in C)."""

    def __lt__(self, other: Any, /) -> bool: ...


_E = TypeVar("_E", bound=_Keyed)


class KeyedHeap(Generic[_E]):
    """A binary heap with delete and re-sort by key in O(log n) (kube's internal heap).

    Entries are ordered by ``rank(entry)``, taken when an entry is pushed or fixed and kept beside it, so
    that a sift compares ranks with ``<`` and calls no Python function when ranks are tuples. ``<`` must
    be a strict order: never true both ways.
    """

    __slots__ = ("_entries", "_positions", "_rank", "_ranks")

    def __init__(self, rank: Callable[[_E], Rank]) -> None:
        self._rank = rank
        self._entries: list[_E] = []
        self._ranks: list[Rank] = []  # _ranks[i] is the rank of _entries[i]
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
        self._ranks.append(self._rank(entry))
        self._positions[entry.key] = len(self._entries) - 1
        self._up(len(self._entries) - 1)

    def pop(self) -> _E:
        return self._remove_at(0)

    def remove(self, key: str) -> _E | None:
        position = self._positions.get(key)
        return None if position is None else self._remove_at(position)

    def fix(self, key: str) -> None:
        """Restore the order after the entry under ``key`` changed (its rank is taken again)."""
        position = self._positions[key]
        self._ranks[position] = self._rank(self._entries[position])
        if not self._up(position):
            self._down(position)

    def _remove_at(self, position: int) -> _E:
        entries, ranks = self._entries, self._ranks
        entry = entries[position]
        del self._positions[entry.key]
        last_entry, last_rank = entries.pop(), ranks.pop()
        if position < len(entries):  # the last entry fills the hole, then moves to its place
            entries[position], ranks[position] = last_entry, last_rank
            self._positions[last_entry.key] = position
            if not self._up(position):
                self._down(position)
        return entry

    # The sifts move the entry at ``position`` along a path, shifting the entries it passes by one step
    # and writing it once at its place: the comparisons and the final layout of swapping it step by step.

    def _up(self, position: int) -> bool:
        """Move the entry at ``position`` towards the root while it ranks before its parent; whether it moved."""
        entries, ranks, positions = self._entries, self._ranks, self._positions
        entry, rank = entries[position], ranks[position]
        start = position
        while position > 0:
            parent = (position - 1) >> 1
            parent_rank = ranks[parent]
            if not rank < parent_rank:
                break
            moved = entries[parent]
            entries[position], ranks[position] = moved, parent_rank
            positions[moved.key] = position
            position = parent
        if position == start:
            return False
        entries[position], ranks[position] = entry, rank
        positions[entry.key] = position
        return True

    def _down(self, position: int) -> None:
        """Move the entry at ``position`` towards the leaves while a child ranks before it (the first of
        the two children if both do)."""
        entries, ranks, positions = self._entries, self._ranks, self._positions
        entry, rank = entries[position], ranks[position]
        size = len(entries)
        start = position
        while (left := 2 * position + 1) < size:
            first, first_rank = position, rank
            left_rank = ranks[left]
            if left_rank < first_rank:
                first, first_rank = left, left_rank
            right = left + 1
            if right < size:
                right_rank = ranks[right]
                if right_rank < first_rank:
                    first, first_rank = right, right_rank
            if first == position:
                break
            moved = entries[first]
            entries[position], ranks[position] = moved, first_rank
            positions[moved.key] = position
            position = first
        if position != start:
            entries[position], ranks[position] = entry, rank
            positions[entry.key] = position


@attrs.define(slots=True, eq=False)
class ActiveEntry:
    """A pod in the active heap."""

    key: str
    info: QueuedPodInfo
    seq: int  # insertion order, breaks ties that ``less`` leaves open


def active_rank(less: Callable[[QueuedPodInfo, QueuedPodInfo], bool]) -> Callable[[ActiveEntry], Rank]:
    """The active heap's order: ``less`` (the QueueSort plugin's), then insertion order.

    For the built-in PrioritySort the rank is its key with ``seq`` appended, a tuple the heap compares
    in C (a pop at 3,000 pending pods otherwise calls ``less`` about 25 times); for any other plugin,
    a ``_ByLess`` whose ``<`` calls ``less``.
    """
    if getattr(less, "__func__", None) is PrioritySort.less:
        return _by_priority
    return lambda entry: _ByLess(entry.info, entry.seq, less)


def _by_priority(entry: ActiveEntry) -> tuple[int, float, int]:
    return (*sort_key(entry.info), entry.seq)


class _ByLess:
    """An active entry's rank under a QueueSort ``less``: before another if ``less`` says so, or if
    ``less`` holds neither way and it was inserted first."""

    __slots__ = ("info", "less", "seq")

    def __init__(self, info: QueuedPodInfo, seq: int, less: Callable[[QueuedPodInfo, QueuedPodInfo], bool]) -> None:
        self.info, self.seq, self.less = info, seq, less

    def __lt__(self, other: _ByLess) -> bool:
        if self.less(self.info, other.info):
            return True
        if self.less(other.info, self.info):
            return False
        return self.seq < other.seq


@attrs.define(slots=True, eq=False)
class BackoffEntry:
    """A pod in the backoff heap, until ``expiry`` (the queue's clock)."""

    key: str
    info: QueuedPodInfo
    expiry: float
    seq: int


def backoff_rank(entry: BackoffEntry) -> tuple[float, int]:
    """The backoff heap's order: earlier expiry first, then insertion order."""
    return entry.expiry, entry.seq
