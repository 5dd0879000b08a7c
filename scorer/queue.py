"""The scheduling queue: kube-scheduler's PriorityQueue, without threads.

Pending pods live in exactly one of four pools (kube's names in brackets):

* **active** [activeQ] -- a heap ordered by the queue-sort plugin's ``less``
  (PrioritySort: higher priority first, then earlier ``timestamp``); equal
  pods keep insertion order. ``pop`` takes from here.
* **backoff** [podBackoffQ] -- pods that failed recently and may be retried
  once their backoff expires; a heap ordered by expiry. Expired pods move to
  active when ``flush_backoff_completed`` runs (every second from ``run``) or
  when ``pop`` finds the active pool empty.
* **unschedulable** [unschedulablePods] -- pods that failed and wait for a
  cluster event that one of their rejector plugins registered interest in,
  or for ``max_in_unschedulable`` (5 minutes) to pass.
* **gated** [unschedulablePods with Gated=true] -- pods a PreEnqueue plugin
  rejected (``pre_enqueue`` returned its name), such as pods with
  ``schedulingGates``. PreEnqueue runs on every insertion into active. Gated
  pods ignore cluster events and the 5-minute flush; they leave only through
  ``update`` or ``activate`` once ``pre_enqueue`` admits them.

Popped pods are *in flight* until ``add_unschedulable_if_not_present`` or
``done``. Cluster events seen while a pod is in flight are remembered, so a
pod that fails just after the event that would have helped it is retried
after backoff instead of waiting in the unschedulable pool.

Everything is synchronous and takes the time from the injected ``clock``,
except ``pop_wait`` and ``run``, which need a running asyncio loop.
Facts: reference/kube-scheduler.md §4.

Memory: every per-pod entry leaves with its pod (``delete``, ``done``), and
the events remembered for in-flight pods are capped. Besides its flushes,
``run`` hands freed memory back to the system once churn is over: when at
least ``RELEASE_AFTER_CHANGES`` pods were added, popped or deleted, or cluster
events arrived, since the last time, and then none for a whole
``quiet_period`` (10 s), it calls ``release_memory`` (``scorer.state.memory``:
a full collection, then glibc's ``malloc_trim``), and again every quiet period
while that still returns memory (what the recorder frees as it drains the
Events of the churn, after the queue went quiet), ``MAX_RELEASES`` times at
most. A scheduler that keeps scheduling never pays for it; one whose pods all
came and went gives its memory back within about 20 s of the last change.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

import attrs

from scorer.framework.events import (
    BACKOFF_COMPLETE,
    EVENT_FORCE_ACTIVATE,
    EVENT_UNSCHEDULABLE_POD_UPDATE,
    EVENT_UNSCHEDULABLE_TIMEOUT,
    FORCE_ACTIVATE,
    POD_ADD,
    SCHEDULE_ATTEMPT_FAILURE,
    ClusterEvent,
    matches,
)
from scorer.framework.types import QueuedPodInfo
from scorer.state import memory

if TYPE_CHECKING:
    from scorer.model import Pod

log = logging.getLogger("scorer.queue")

# Pool names, as in scheduler_pending_pods{queue} and scheduler_queue_incoming_pods_total{queue}.
ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"
IN_FLIGHT = "in_flight"  # not a pool: returned by add/update for a pod being scheduled

# Events remembered for in-flight pods; beyond this the oldest are dropped and
# pods that were in flight before them are treated as having seen a relevant event.
MAX_IN_FLIGHT_EVENTS = 10_000
# Pods added, popped or deleted and cluster events since memory was last released, before a quiet
# spell releases it again (a handful of pods freed nothing worth a full collection).
RELEASE_AFTER_CHANGES = 1_000
MAX_RELEASES = 6  # releases in one quiet spell, while each still returns memory


class _Keyed(Protocol):
    @property
    def key(self) -> str: ...


_E = TypeVar("_E", bound=_Keyed)


class _KeyedHeap(Generic[_E]):
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
class _ActiveEntry:
    key: str
    info: QueuedPodInfo
    seq: int  # insertion order, breaks ties that ``less`` leaves open


@attrs.define(slots=True, eq=False)
class _BackoffEntry:
    key: str
    info: QueuedPodInfo
    expiry: float
    seq: int


@attrs.define(slots=True, eq=False)
class _InFlight:
    uid: str
    first_event: int  # absolute index in the event log when the pod was popped
    own_events: list[ClusterEvent] = attrs.Factory(list)  # updates/activations of this pod
    latest_pod: Pod | None = None  # newest version seen by ``update`` during flight
    deleted: bool = False


class _Requeue(enum.Enum):
    """Where an event sends a pod (kube's queueing strategies)."""

    SKIP = "skip"  # stays in the unschedulable pool
    AFTER_BACKOFF = "after_backoff"  # backoff if still backing off, else active
    IMMEDIATELY = "immediately"  # active, skipping backoff (a Pending plugin's event)


class Nominator:
    """Pods nominated to run on a node, by node (kube's PodNominator, ``nominatedPodMap``).

    A pod gets a nominated node when preemption chose that node for it
    (``add(pod, node)``, recorded by the scheduling cycle at once, before the
    API write of ``status.nominatedNodeName`` comes back), or when it is
    queued with ``status.nominatedNodeName`` set (``add(pod)``). The queue
    keeps it current: an update replaces the pod (keeping an in-memory
    nomination the update does not know about yet, as kube does), a delete
    or a binding removes it. Later cycles count a nominated pod on its node
    for pods of equal or lower priority (``Framework.run_filters``' nominated
    pass). Pods are keyed by UID (``ns/name`` when the UID is empty).
    """

    __slots__ = ("_by_node", "_node_of")

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, Pod]] = {}  # node -> {pod id: pod}, in nomination order
        self._node_of: dict[str, str] = {}  # pod id -> node

    def __len__(self) -> int:
        return len(self._node_of)

    def __bool__(self) -> bool:
        return bool(self._node_of)

    def add(self, pod: Pod, node_name: str = "") -> None:
        """Nominate ``pod`` to ``node_name`` (default: the pod's own ``nominated_node_name``;
        neither: the pod has no nomination afterwards)."""
        self.delete(pod)
        node = node_name or pod.nominated_node_name
        if not node:
            return
        pid = _pod_id(pod)
        self._node_of[pid] = node
        self._by_node.setdefault(node, {})[pid] = pod

    def delete(self, pod: Pod) -> None:
        """``pod`` has no nomination any more (bound, deleted, or its nomination cleared)."""
        pid = _pod_id(pod)
        node = self._node_of.pop(pid, None)
        if node is None:
            return
        pods = self._by_node[node]
        pods.pop(pid, None)
        if not pods:
            del self._by_node[node]

    def update(self, old_pod: Pod, new_pod: Pod) -> None:
        """kube's UpdateNominatedPod: the pod object is replaced; an update that carries no
        nomination (old and new without one) keeps the nomination made in memory."""
        node = ""
        if not old_pod.nominated_node_name and not new_pod.nominated_node_name:
            node = self._node_of.get(_pod_id(old_pod), "")
        self.delete(old_pod)
        self.add(new_pod, node)

    def node_of(self, pod: Pod) -> str | None:
        """The node ``pod`` is nominated to, or None."""
        return self._node_of.get(_pod_id(pod))

    def nominated_pods_for_node(self, node_name: str) -> list[Pod]:
        """The pods nominated to ``node_name``, in nomination order."""
        pods = self._by_node.get(node_name)
        return list(pods.values()) if pods else []

    def nodes(self) -> list[str]:
        """The nodes some pod is nominated to."""
        return list(self._by_node)


def _pod_id(pod: Pod) -> str:
    return pod.uid or pod.key


class SchedulingQueue:
    """Holds pending pods and hands them to the scheduling loop in order.

    ``less`` is the queue-sort plugin's Less. ``pre_enqueue(pod)`` returns
    None to admit a pod into the active pool, or the name of the plugin that
    gates it. ``plugin_events`` maps a plugin name to the events it registered
    (kube's EventsToRegister). A rejector plugin missing from the mapping is
    interested in every event, as kube treats plugins without
    EnqueueExtensions; map it to ``()`` to say that no event helps.
    ``on_incoming(queue, event_label)`` is called for every insertion into a
    pool (for ``scheduler_queue_incoming_pods_total``);
    ``on_unschedulable(profile, plugins, delta)`` when a pod enters (+1) or
    leaves (-1, however it leaves) the unschedulable pool, with its
    schedulerName and rejector plugins (for ``scheduler_unschedulable_pods``).
    ``release_memory`` is called by ``run`` after churn, once nothing changed
    for ``quiet_period`` seconds (see the module docstring; None: never).
    Times are in seconds of ``clock``.

    Pool reactions, per method:

    ======================  ==========================================================
    add                     new pod -> active (``PodAdd``) or gated; a known pod is updated
    update                  active/backoff: replaced in place; gated: re-checked by
                            pre_enqueue; unschedulable: moves if the update event is
                            relevant; in flight: remembered; unknown: like add
    delete                  removed from every pool; an in-flight pod is not requeued
    pop                     best active pod (flushes expired backoff first if active is
                            empty); the pod is in flight until done/requeue
    add_unschedulable_...   failure: backoff/active if an event during flight was relevant
                            or no plugin rejected (error), else unschedulable
    move_all_to_active_...  unschedulable pods whose rejectors registered the event ->
                            backoff (still backing off) or active; gated pods stay
    flush_backoff_completed expired backoff -> active (``BackoffComplete``)
    flush_unschedulable_... unschedulable longer than max_in_unschedulable -> backoff/active
    activate                unschedulable/backoff/gated -> active (``ForceActivate``)
    ======================  ==========================================================

    add, update, delete and pop are O(log n); the event moves and the
    leftover flush walk the unschedulable pool, as kube's do.
    """

    def __init__(
        self,
        less: Callable[[QueuedPodInfo, QueuedPodInfo], bool],
        *,
        clock: Callable[[], float] = time.monotonic,
        initial_backoff: float = 1.0,
        max_backoff: float = 10.0,
        max_in_unschedulable: float = 300.0,
        pre_enqueue: Callable[[Pod], str | None] | None = None,
        plugin_events: Mapping[str, Sequence[ClusterEvent]] | None = None,
        on_incoming: Callable[[str, str], None] | None = None,
        on_unschedulable: Callable[[str, frozenset[str], int], None] | None = None,
        backoff_flush_period: float = 1.0,
        unschedulable_flush_period: float = 30.0,
        quiet_period: float = 10.0,
        release_memory: Callable[[], object] | None = memory.release_memory,
    ) -> None:
        if initial_backoff < 0:
            raise ValueError(f"initial_backoff must be >= 0 seconds, got {initial_backoff}")
        if max_backoff < initial_backoff:
            raise ValueError(
                f"max_backoff ({max_backoff}) must be >= initial_backoff ({initial_backoff})"
            )
        for name, period in (
            ("backoff_flush_period", backoff_flush_period),
            ("unschedulable_flush_period", unschedulable_flush_period),
            ("quiet_period", quiet_period),
        ):
            if period <= 0:
                raise ValueError(f"{name} must be > 0 seconds, got {period}")
        self._less = less
        self._clock = clock
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_in_unschedulable = max_in_unschedulable
        self._pre_enqueue = pre_enqueue
        self._plugin_events = {
            name: tuple(events) for name, events in (plugin_events or {}).items()
        }
        self._on_incoming = on_incoming
        self._on_unschedulable = on_unschedulable
        self._backoff_flush_period = backoff_flush_period
        self._unschedulable_flush_period = unschedulable_flush_period
        self._quiet_period = quiet_period
        self._release_memory = release_memory
        # Pods added, popped, deleted and cluster events: counted so far, at the last quiet check, and
        # when memory was last released; releases left in this quiet spell.
        self._changes = 0
        self._changes_checked = 0
        self._changes_released = 0
        self._releases_left = 0

        self._active: _KeyedHeap[_ActiveEntry] = _KeyedHeap(self._active_before)
        self._backoff: _KeyedHeap[_BackoffEntry] = _KeyedHeap(_backoff_before)
        self._unschedulable: dict[str, QueuedPodInfo] = {}
        self._gated: dict[str, QueuedPodInfo] = {}
        self._in_flight: dict[str, _InFlight] = {}
        # Events received while pods are in flight; _events[0] has absolute index _events_base.
        self._events: list[ClusterEvent] = []
        self._events_base = 0
        self._seq = itertools.count()
        self._scheduling_cycle = 0
        self._active_added = asyncio.Event()
        self.nominator = Nominator()

    # -- reading -------------------------------------------------------------

    @property
    def clock(self) -> Callable[[], float]:
        """The queue's time source (timestamps and ``initial_attempt_timestamp`` are its readings)."""
        return self._clock

    @property
    def scheduling_cycle(self) -> int:
        """Number of pops so far (kube's scheduling cycle counter)."""
        return self._scheduling_cycle

    def __len__(self) -> int:
        """Pending pods in all pools; in-flight pods are not counted."""
        return len(self._active) + len(self._backoff) + len(self._unschedulable) + len(self._gated)

    def __contains__(self, key: object) -> bool:
        """True if the pod ``ns/name`` is in one of the pools (not in flight)."""
        return isinstance(key, str) and (
            key in self._active
            or key in self._backoff
            or key in self._unschedulable
            or key in self._gated
        )

    def pending_counts(self) -> dict[str, int]:
        """Pods per pool, for ``scheduler_pending_pods{queue}``."""
        return {
            ACTIVE: len(self._active),
            BACKOFF: len(self._backoff),
            UNSCHEDULABLE: len(self._unschedulable),
            GATED: len(self._gated),
        }

    def pending_pods(self) -> list[QueuedPodInfo]:
        """Every pending pod: active (heap order, not sorted), backoff, unschedulable, gated."""
        return [
            *(entry.info for entry in self._active),
            *(entry.info for entry in self._backoff),
            *self._unschedulable.values(),
            *self._gated.values(),
        ]

    def is_in_flight(self, key: str) -> bool:
        """True between ``pop`` and ``done``/``add_unschedulable_if_not_present``."""
        return key in self._in_flight

    def next_backoff_expiry(self) -> float | None:
        """When the first backoff pod may move to active (for simulations to jump to)."""
        head = self._backoff.peek()
        return None if head is None else head.expiry

    def backoff_duration(self, info: QueuedPodInfo) -> float:
        """``initial × 2^(n−1)`` capped at ``max_backoff``; 0 before the first attempt.

        n is ``unschedulable_count``, or ``attempts`` when the pod only had errors.
        """
        if info.attempts == 0:
            return 0.0
        count = info.unschedulable_count or info.attempts
        # min() keeps 2.0**n finite; the cap is reached long before.
        return min(self.max_backoff, self.initial_backoff * 2.0 ** min(count - 1, 1000))

    def backoff_expiry(self, info: QueuedPodInfo) -> float:
        return info.timestamp + self.backoff_duration(info)

    # -- pod events ----------------------------------------------------------

    def add(self, pod: Pod) -> str:
        """A new pending pod: to active (event ``PodAdd``) or gated.

        A pod already queued or in flight is updated instead. Returns the
        pool the pod is in afterwards (``IN_FLIGHT`` for an in-flight pod).
        """
        key = pod.key
        flight = self._in_flight.get(key)
        if key in self or (flight is not None and not flight.deleted):
            return self.update(None, pod)
        self.nominator.add(pod)
        self._changes += 1
        return self._move_to_active(QueuedPodInfo(pod, timestamp=self._clock()), POD_ADD)

    def update(
        self,
        old_pod: Pod | None,
        new_pod: Pod,
        *,
        event: ClusterEvent = EVENT_UNSCHEDULABLE_POD_UPDATE,
    ) -> str:
        """A pending pod changed; its QueuedPodInfo counters are kept.

        * active/backoff: the pod object is replaced (active re-sorts it;
          the backoff expiry is unchanged);
        * gated: ``pre_enqueue`` runs again; admitted pods move to active;
        * unschedulable: the pod moves to backoff/active if ``event`` is
          relevant to its rejector plugins (the default, a generic
          ``UnschedulablePodUpdate``, matches any registered Pod update).
          Callers should skip updates that change only status or
          resourceVersion (kube's ``isPodUpdated``), or the scheduler's own
          condition patch would release every pod it just parked;
        * in flight: remembered; a later failure uses the new pod and counts
          ``event`` as seen during flight;
        * not queued: added to active (or gated) with ``event``'s label.

        ``old_pod`` is accepted for symmetry with informer handlers; the pod is
        found by ``new_pod.key``. Returns the pool the pod is in afterwards.
        """
        key = new_pod.key
        self.nominator.update(old_pod if old_pod is not None else new_pod, new_pod)
        flight = self._in_flight.get(key)
        if flight is not None and not flight.deleted:
            flight.latest_pod = new_pod
            flight.own_events.append(event)
            return IN_FLIGHT
        if (active := self._active.get(key)) is not None:
            active.info.pod = new_pod
            self._active.fix(key)
            return ACTIVE
        if (backed_off := self._backoff.get(key)) is not None:
            backed_off.info.pod = new_pod
            return BACKOFF
        if (gated := self._gated.get(key)) is not None:
            gated.pod = new_pod
            gating_plugin = self._run_pre_enqueue(new_pod)
            if gating_plugin is not None:
                gated.gating_plugin = gating_plugin
                return GATED
            del self._gated[key]
            return self._push_active(gated, event.label)
        if (parked := self._unschedulable.get(key)) is not None:
            parked.pod = new_pod
            hint = self._requeue_hint(parked, (event,))
            if hint is _Requeue.SKIP:
                return UNSCHEDULABLE
            self._unpark(key)
            return self._requeue(parked, hint, event.label, self._clock())
        return self._move_to_active(QueuedPodInfo(new_pod, timestamp=self._clock()), event.label)

    def delete(self, pod: Pod) -> None:
        """The pod is gone (deleted or bound elsewhere): remove it from every pool.

        An in-flight pod is marked so that its failure does not requeue it.
        """
        key = pod.key
        self._changes += 1
        self.nominator.delete(pod)
        self._active.remove(key)
        self._backoff.remove(key)
        self._unpark(key)
        self._gated.pop(key, None)
        if (flight := self._in_flight.get(key)) is not None:
            flight.deleted = True

    def update_status(self, old_pod: Pod, new_pod: Pod) -> None:
        """A pending pod changed only in its status (``nominatedNodeName``, phase): the
        nominator and the queued pod object follow it; the pod does not move (kube's
        Update of a pod that ``isPodUpdated`` says did not change)."""
        self.nominator.update(old_pod, new_pod)
        key = new_pod.key
        flight = self._in_flight.get(key)
        if flight is not None and not flight.deleted:
            flight.latest_pod = new_pod
            return
        for info in (getattr(self._active.get(key), "info", None), getattr(self._backoff.get(key), "info", None),
                     self._unschedulable.get(key), self._gated.get(key)):
            if info is not None and info.pod.uid == new_pod.uid:
                info.pod = new_pod
                return

    # -- the scheduling loop -------------------------------------------------

    def pop(self) -> QueuedPodInfo | None:
        """Take the best active pod, or None if there is none (never blocks).

        If active is empty, backoff pods whose expiry has passed move first.
        Increments ``attempts`` and the scheduling cycle, clears the rejector
        plugins of the previous attempt and marks the pod in flight.
        """
        now = self._clock()
        if not self._active:
            head = self._backoff.peek()
            if head is not None and head.expiry <= now:
                self.flush_backoff_completed(now)
        if not self._active:
            return None
        info = self._active.pop().info
        self._changes += 1
        info.attempts += 1
        info.unschedulable_plugins = frozenset()
        info.pending_plugins = frozenset()
        self._scheduling_cycle += 1
        self._in_flight[info.key] = _InFlight(
            uid=info.pod.uid, first_event=self._events_base + len(self._events)
        )
        return info

    async def pop_wait(self, timeout: float | None = None) -> QueuedPodInfo | None:
        """Like ``pop``, but waits until a pod enters active; None after ``timeout``.

        ``timeout`` is in seconds of the event loop, not of ``clock``. Backoff
        expiry does not wake it; ``run`` moves expired pods, which does.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            info = self.pop()
            if info is not None:
                return info
            self._active_added.clear()
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return None
            try:
                await asyncio.wait_for(self._active_added.wait(), remaining)
            except TimeoutError:
                return None

    def done(self, key: str) -> None:
        """The in-flight pod ``key`` left the scheduler (bound, or given up)."""
        if self._in_flight.pop(key, None) is not None:
            self._prune_events()

    def add_unschedulable_if_not_present(
        self,
        info: QueuedPodInfo,
        *,
        unschedulable_plugins: Iterable[str],
        pending_plugins: Iterable[str] = (),
        error: bool = False,
    ) -> str | None:
        """Requeue a pod whose attempt failed, and end its flight (call before ``done``).

        The timestamp is refreshed, ``unschedulable_count`` grows unless
        ``error``, and the rejector plugins are recorded. The pod goes to
        backoff (or active, if its backoff already expired) when it has no
        rejector plugins (an error) or an event that a rejector registered
        arrived during its flight (a Pending plugin's event: straight to
        active); otherwise to the unschedulable pool. Event label
        ``ScheduleAttemptFailure``.

        Returns the pool, or None if the pod is already queued or was deleted
        while in flight (then it is dropped).
        """
        key = info.key
        flight = self._in_flight.get(key)
        if flight is not None and flight.uid != info.pod.uid:
            return None  # an older incarnation of a pod that was deleted and re-created
        seen: list[ClusterEvent] | None = []  # None: the log lost events of this flight
        if flight is not None:
            del self._in_flight[key]
            if flight.first_event < self._events_base:
                seen = None
            else:
                seen = self._events[flight.first_event - self._events_base :]
                seen.extend(flight.own_events)
            self._prune_events()
            if flight.deleted:
                return None
        if key in self:
            return None
        now = self._clock()
        if flight is not None and flight.latest_pod is not None:
            info.pod = flight.latest_pod
        info.timestamp = now
        if not error:
            info.unschedulable_count += 1
        info.unschedulable_plugins = frozenset(unschedulable_plugins)
        info.pending_plugins = frozenset(pending_plugins)
        info.gated = False
        info.gating_plugin = None

        if seen is None:
            hint = _Requeue.AFTER_BACKOFF  # assume a dropped event mattered
        else:
            hint = self._requeue_hint(info, seen)
        if hint is _Requeue.SKIP:
            self._park(info)
            self._incoming(UNSCHEDULABLE, SCHEDULE_ATTEMPT_FAILURE)
            return UNSCHEDULABLE
        return self._requeue(info, hint, SCHEDULE_ATTEMPT_FAILURE, now)

    # -- cluster events and timers -------------------------------------------

    def move_all_to_active_or_backoff(self, event: ClusterEvent) -> int:
        """A cluster event: release the unschedulable pods it may help.

        A pod moves if ``event`` is a wildcard, if no plugin rejected it, or
        if one of its rejector plugins registered a matching event; it goes
        to backoff while still backing off, else to active (to active at once
        if the interested plugin was a Pending one). Gated pods stay. In-flight
        pods remember the event. Returns the number of pods moved.
        """
        self._changes += 1
        if self._in_flight:
            self._record_event(event)
        return self._move_unschedulable(list(self._unschedulable.values()), event)

    def flush_backoff_completed(self, now: float | None = None) -> int:
        """Move backoff pods whose expiry is <= now to active (``BackoffComplete``)."""
        now = self._clock() if now is None else now
        moved = 0
        while (head := self._backoff.peek()) is not None and head.expiry <= now:
            self._backoff.pop()
            self._move_to_active(head.info, BACKOFF_COMPLETE)
            moved += 1
        return moved

    def flush_unschedulable_leftover(self, now: float | None = None) -> int:
        """Move pods unschedulable for longer than ``max_in_unschedulable`` to backoff/active.

        Strictly longer, as in kube: a pod parked exactly 300 s ago stays.
        Event label ``UnschedulableTimeout``.
        """
        now = self._clock() if now is None else now
        stale = [
            info
            for info in self._unschedulable.values()
            if now - info.timestamp > self.max_in_unschedulable
        ]
        return self._move_unschedulable(stale, EVENT_UNSCHEDULABLE_TIMEOUT, now)

    def activate(self, keys: Iterable[str]) -> int:
        """Force pods to active (``ForceActivate``), e.g. on a plugin's request.

        Pods in backoff or unschedulable move; gated pods move if
        ``pre_enqueue`` now admits them; in-flight pods remember a
        ``ForceActivate`` event, so a failure sends them to backoff. Returns
        the number of pods that entered active.
        """
        return sum(self._activate_one(key) for key in keys)

    def _activate_one(self, key: str) -> bool:
        if (entry := self._backoff.remove(key)) is not None:
            return self._move_to_active(entry.info, FORCE_ACTIVATE) == ACTIVE
        if (info := self._unpark(key)) is not None:
            return self._move_to_active(info, FORCE_ACTIVATE) == ACTIVE
        if (gated := self._gated.get(key)) is not None:
            if self._run_pre_enqueue(gated.pod) is not None:
                return False
            del self._gated[key]
            self._push_active(gated, FORCE_ACTIVATE)
            return True
        flight = self._in_flight.get(key)
        if flight is not None and not flight.deleted:
            flight.own_events.append(EVENT_FORCE_ACTIVATE)
        return False

    def release_memory_if_quiet(self) -> bool:
        """Call ``release_memory`` if nothing changed since the previous call and either at least
        ``RELEASE_AFTER_CHANGES`` changes came before (churn ended), or the previous release in this
        quiet spell returned memory (``MAX_RELEASES`` at most); whether it was called. ``run`` calls
        it every ``quiet_period``."""
        changes, checked = self._changes, self._changes_checked
        self._changes_checked = changes
        if self._release_memory is None or changes != checked:
            return False
        if changes - self._changes_released >= RELEASE_AFTER_CHANGES:
            self._releases_left = MAX_RELEASES
        if not self._releases_left:
            return False
        self._releases_left -= 1
        started = time.monotonic()
        freed = self._release_memory()
        log.debug("quiet after %d pod changes and cluster events: memory released in %.3fs%s",
                  changes - self._changes_released, time.monotonic() - started, "" if freed else " (none left)")
        self._changes_released = changes
        if not freed:
            self._releases_left = 0
        return True

    async def run(self) -> None:
        """Flush expired backoff every ``backoff_flush_period`` and leftover
        unschedulable pods every ``unschedulable_flush_period``, and release
        memory after churn (``release_memory_if_quiet`` every ``quiet_period``),
        until cancelled.

        An exception from a flush (a raising ``less``/``pre_enqueue``/
        ``on_incoming``) ends ``run`` with that exception.
        """
        async with asyncio.TaskGroup() as group:
            group.create_task(
                _every(self._backoff_flush_period, self.flush_backoff_completed),
                name="queue-flush-backoff",
            )
            group.create_task(
                _every(self._unschedulable_flush_period, self.flush_unschedulable_leftover),
                name="queue-flush-unschedulable",
            )
            if self._release_memory is not None:
                group.create_task(
                    _every(self._quiet_period, self.release_memory_if_quiet),
                    name="queue-release-memory",
                )

    # -- internals -----------------------------------------------------------

    def _active_before(self, a: _ActiveEntry, b: _ActiveEntry) -> bool:
        if self._less(a.info, b.info):
            return True
        if self._less(b.info, a.info):
            return False
        return a.seq < b.seq

    def _incoming(self, queue: str, label: str) -> None:
        if self._on_incoming is not None:
            self._on_incoming(queue, label)

    def _run_pre_enqueue(self, pod: Pod) -> str | None:
        return None if self._pre_enqueue is None else self._pre_enqueue(pod)

    def _move_to_active(self, info: QueuedPodInfo, label: str) -> str:
        """Insert into active, or gated if a PreEnqueue plugin rejects the pod."""
        gating_plugin = self._run_pre_enqueue(info.pod)
        if gating_plugin is not None:
            info.gated = True
            info.gating_plugin = gating_plugin
            self._gated[info.key] = info
            self._incoming(GATED, label)
            return GATED
        return self._push_active(info, label)

    def _push_active(self, info: QueuedPodInfo, label: str) -> str:
        info.gated = False
        info.gating_plugin = None
        if info.initial_attempt_timestamp is None:  # kube's InitialAttemptTimestamp: gated time not counted
            info.initial_attempt_timestamp = self._clock()
        self._active.push(_ActiveEntry(info.key, info, next(self._seq)))
        self._incoming(ACTIVE, label)
        self._active_added.set()
        return ACTIVE

    def _park(self, info: QueuedPodInfo) -> None:
        """Into the unschedulable pool (the caller checked the pod is in no pool)."""
        self._unschedulable[info.key] = info
        if self._on_unschedulable is not None:
            self._on_unschedulable(info.pod.scheduler_name, _rejectors(info), 1)

    def _unpark(self, key: str) -> QueuedPodInfo | None:
        """Out of the unschedulable pool, if there."""
        info = self._unschedulable.pop(key, None)
        if info is not None and self._on_unschedulable is not None:
            self._on_unschedulable(info.pod.scheduler_name, _rejectors(info), -1)
        return info

    def _requeue(self, info: QueuedPodInfo, hint: _Requeue, label: str, now: float) -> str:
        expiry = self.backoff_expiry(info)
        if hint is _Requeue.AFTER_BACKOFF and expiry > now:
            self._backoff.push(_BackoffEntry(info.key, info, expiry, next(self._seq)))
            self._incoming(BACKOFF, label)
            return BACKOFF
        return self._move_to_active(info, label)

    def _move_unschedulable(
        self, infos: list[QueuedPodInfo], event: ClusterEvent, now: float | None = None
    ) -> int:
        now = self._clock() if now is None else now
        moved = 0
        for info in infos:
            hint = self._requeue_hint(info, (event,))
            if hint is _Requeue.SKIP:
                continue
            self._unpark(info.key)
            self._requeue(info, hint, event.label, now)
            moved += 1
        return moved

    def _requeue_hint(self, info: QueuedPodInfo, events: Iterable[ClusterEvent]) -> _Requeue:
        """Kube's queueing decision without hint functions: registered interest decides."""
        if not info.unschedulable_plugins and not info.pending_plugins:
            return _Requeue.AFTER_BACKOFF
        hint = _Requeue.SKIP
        for event in events:
            if event.is_wildcard:
                hint = _Requeue.AFTER_BACKOFF
                continue
            if any(self._interested(plugin, event) for plugin in info.pending_plugins):
                return _Requeue.IMMEDIATELY
            if any(self._interested(plugin, event) for plugin in info.unschedulable_plugins):
                hint = _Requeue.AFTER_BACKOFF
        return hint

    def _interested(self, plugin: str, event: ClusterEvent) -> bool:
        registered = self._plugin_events.get(plugin)
        if registered is None:
            return True
        return any(matches(candidate, event) for candidate in registered)

    def _record_event(self, event: ClusterEvent) -> None:
        self._events.append(event)
        overflow = len(self._events) - MAX_IN_FLIGHT_EVENTS
        if overflow > 0:
            del self._events[:overflow]
            self._events_base += overflow

    def _prune_events(self) -> None:
        """Forget the events that no in-flight pod still needs (all, if none is in flight)."""
        oldest = min(
            (flight.first_event for flight in self._in_flight.values()),
            default=self._events_base + len(self._events),
        )
        drop = oldest - self._events_base
        if drop > 0:
            del self._events[:drop]
            self._events_base += drop


def _rejectors(info: QueuedPodInfo) -> frozenset[str]:
    """The plugins that rejected the pod's last attempt (kube's UnschedulablePlugins ∪ PendingPlugins)."""
    if not info.pending_plugins:
        return info.unschedulable_plugins
    return info.unschedulable_plugins | info.pending_plugins


def _backoff_before(a: _BackoffEntry, b: _BackoffEntry) -> bool:
    return (a.expiry, a.seq) < (b.expiry, b.seq)


async def _every(period: float, action: Callable[[], object]) -> None:
    while True:
        await asyncio.sleep(period)
        action()
