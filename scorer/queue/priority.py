"""``SchedulingQueue``: kube-scheduler's PriorityQueue, without threads: its pools, the moves
between them, the flushes that ``run`` makes on a timer.

The pools are described in the package docstring (``scorer.queue``); their building blocks are in
``scorer.queue.pools``, what is remembered of in-flight pods in ``scorer.queue.flight``, the
nominator in ``scorer.queue.nominator``, the memory hook in ``scorer.queue.quiet``.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

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
from scorer.queue.flight import EventLog, InFlight
from scorer.queue.nominator import Nominator
from scorer.queue.pools import (
    ACTIVE,
    BACKOFF,
    GATED,
    IN_FLIGHT,
    UNSCHEDULABLE,
    ActiveEntry,
    BackoffEntry,
    KeyedHeap,
    active_rank,
    backoff_rank,
)
from scorer.queue.quiet import QuietSpell
from scorer.state import memory

if TYPE_CHECKING:
    from scorer.model import Pod


class _Requeue(enum.Enum):
    """Where an event sends a pod (kube's queueing strategies)."""

    SKIP = "skip"  # stays in the unschedulable pool
    AFTER_BACKOFF = "after_backoff"  # backoff if still backing off, else active
    IMMEDIATELY = "immediately"  # active, skipping backoff (a Pending plugin's event)


class SchedulingQueue:
    """Holds pending pods and hands them to the scheduling loop in order.

    ``less`` is the queue-sort plugin's Less; the built-in PrioritySort's is recognized and
    its order kept as key tuples, with the same result (``scorer.queue.pools.active_rank``).
    ``pre_enqueue(pod)`` returns None to admit a pod into the active pool, or the name of the
    plugin that gates it. ``plugin_events`` maps a plugin name to the events it registered
    (kube's EventsToRegister). A rejector plugin missing from the mapping is
    interested in every event, as kube treats plugins without
    EnqueueExtensions; map it to ``()`` to say that no event helps.
    ``on_incoming(queue, event_label)`` is called for every insertion into a
    pool (for ``scheduler_queue_incoming_pods_total``);
    ``on_unschedulable(profile, plugins, delta)`` when a pod enters (+1) or
    leaves (-1, however it leaves) the unschedulable pool, with its
    schedulerName and rejector plugins (for ``scheduler_unschedulable_pods``).
    ``release_memory`` is called by ``run`` after churn, once nothing changed
    for ``quiet_period`` seconds (``scorer.queue.quiet``; None: never).
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
        self._clock = clock
        self.initial_backoff, self.max_backoff = initial_backoff, max_backoff
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
        self._quiet = QuietSpell(release_memory)  # counts pods added, popped, deleted and cluster events

        self._active: KeyedHeap[ActiveEntry] = KeyedHeap(active_rank(less))
        self._backoff: KeyedHeap[BackoffEntry] = KeyedHeap(backoff_rank)
        self._unschedulable: dict[str, QueuedPodInfo] = {}
        self._gated: dict[str, QueuedPodInfo] = {}
        self._in_flight: dict[str, InFlight] = {}
        self._events = EventLog()  # received while pods are in flight
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
        self._quiet.changes += 1
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
        self._quiet.changes += 1
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
        self._quiet.changes += 1
        info.attempts += 1
        info.unschedulable_plugins = frozenset()
        info.pending_plugins = frozenset()
        self._scheduling_cycle += 1
        self._in_flight.pop(info.key, None)  # (re-inserted at the end: the flights stay in pop order)
        self._in_flight[info.key] = InFlight(uid=info.pod.uid, first_event=self._events.end)
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
            seen = self._events.since(flight.first_event)
            if seen is not None:
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
        self._quiet.changes += 1
        if self._in_flight:
            self._events.record(event)
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
        """Release memory if the queue is quiet after churn (``QuietSpell.release_if_quiet``);
        whether it did. ``run`` calls it every ``quiet_period``."""
        return self._quiet.release_if_quiet()

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
            if self._quiet.release_memory is not None:
                group.create_task(
                    _every(self._quiet_period, self.release_memory_if_quiet),
                    name="queue-release-memory",
                )

    # -- internals -----------------------------------------------------------

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
        self._active.push(ActiveEntry(info.key, info, next(self._seq)))
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
            self._backoff.push(BackoffEntry(info.key, info, expiry, next(self._seq)))
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

    def _prune_events(self) -> None:
        """Forget the events that no in-flight pod still needs (all, if none is in flight). The flights are
        kept in pop order, so the first holds the oldest position in the log: O(1), where a minimum over
        every flight, at each pod's end, cost O(in flight) (thousands while bindings wait for the API)."""
        oldest = next(iter(self._in_flight.values()), None)
        self._events.prune(oldest.first_event if oldest is not None else self._events.end)


def _rejectors(info: QueuedPodInfo) -> frozenset[str]:
    """The plugins that rejected the pod's last attempt (kube's UnschedulablePlugins ∪ PendingPlugins)."""
    if not info.pending_plugins:
        return info.unschedulable_plugins
    return info.unschedulable_plugins | info.pending_plugins


async def _every(period: float, action: Callable[[], object]) -> None:
    while True:
        await asyncio.sleep(period)
        action()
