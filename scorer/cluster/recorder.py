"""BufferedRecorder: the EventRecorder of every driver, over any EventSink.

The scheduling cycle calls ``record`` / ``set_pod_condition``, which append to
a bounded in-memory buffer and return: no I/O, no await. ``run`` drains the
buffer to the sink in the background, in order; ``flush`` drains it now.
When the buffer is full, new entries are dropped and counted (``dropped``)
rather than blocking the cycle; kube's event broadcaster drops the same way.
Preemption's writes (``delete_pod`` of a victim, ``clear_nominated_node``)
are never dropped: a preemptor waits for its victims to go. They are written
in order with the rest, by the sink's ``delete_pod`` / ``clear_nominated_node``.

A write the sink fails is counted (``failed``) and the drain goes on; a failed
deletion or nomination clearing is tried again first, up to ``PREEMPTION_ATTEMPTS``
times in all. Failures are logged through a ``RepeatLog`` (``scorer.logsummary``),
one kind per write and exception type (``"writing events: ApiUnavailable"``):
the first at once, the repeats of the next 30 s as one counted line, and
"<what> works again" when a write of that kind next succeeds; an API outage is
a few lines, not one per Event. After ``BACKOFF_AFTER`` failures in a row (the
sink is unreachable, not one write refused) the drain pauses before each next
write, 50 ms doubling up to 1 s, until a write succeeds: it does not spin on an
unreachable server; the buffer fills meanwhile and drops new Events as above.

``forget(pod)`` tells a sink that keeps per-pod state (``ApiWriter.forget``)
that the pod was deleted, in order after the writes enqueued for it, so that
what it remembers of the pod goes with the pod (the event handlers call it);
at once when nothing is pending. Like preemption's writes it is not dropped
when the buffer is full (up to twice the capacity: beyond, the sink is told at
once). The buffer keeps only the pod's key for it, not the deleted pod.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from scorer.cluster.interface import EventSink
from scorer.logsummary import RepeatLog

if TYPE_CHECKING:
    from scorer.model import Pod

log = logging.getLogger("scorer.cluster.recorder")

DEFAULT_CAPACITY = 10_000  # entries waiting to be written
BACKOFF_AFTER = 3  # failed writes in a row before the drain pauses between writes
MIN_PAUSE = 0.05  # seconds; doubled after each further failure ...
MAX_PAUSE = 1.0  # ... up to this
PREEMPTION_ATTEMPTS = 5  # tries of a victim's deletion or a nomination's clearing before it is given up

_EVENT = 0
_CONDITION = 1
_DELETE = 2
_CLEAR_NOMINATION = 3
_FORGET = 4
_WHAT = {_EVENT: "an event", _CONDITION: "the PodScheduled condition", _DELETE: "the deletion",
         _CLEAR_NOMINATION: "the cleared nominatedNodeName"}
# What failed, for RepeatLog's kinds (with the exception type).
_KIND = {_EVENT: "writing events", _CONDITION: "writing PodScheduled conditions",
         _DELETE: "deleting preempted pods", _CLEAR_NOMINATION: "clearing nominatedNodeName"}

# (what, the pod, the write's arguments); a forget is (_FORGET, the pod's key, ()): a deleted pod's object is
# not kept alive by the buffer for it.
_Entry = tuple[int, "Pod | str", tuple[object, ...]]


class BufferedRecorder:
    def __init__(self, sink: EventSink, *, capacity: int = DEFAULT_CAPACITY,
                 sleep: Callable[[float], Awaitable[object]] = asyncio.sleep) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.sink = sink
        self.capacity = capacity
        self.dropped = 0
        self.failed = 0
        self._dropping = False
        self._buffer: collections.deque[_Entry] = collections.deque()
        self.pending_deletions = 0  # victims enqueued and not yet deleted
        self._lock = asyncio.Lock()  # one drain at a time keeps the writes in order
        self._wake: asyncio.Event | None = None
        self._repeats = RepeatLog(log)
        self._failing: dict[int, set[str]] = {}  # write -> the RepeatLog kinds failing since it last worked
        self._failures_in_a_row = 0
        self._forget = getattr(sink, "forget", None)  # a sink that keeps per-pod state
        self._sleep = sleep  # the pauses after failures in a row (tests give their own)

    @property
    def pending(self) -> int:
        """Entries enqueued and not yet written."""
        return len(self._buffer)

    def record(self, pod: Pod, type_: str, reason: str, action: str, note: str,
               related: Pod | None = None) -> None:
        self._put((_EVENT, pod, (type_, reason, action, note) if related is None
                   else (type_, reason, action, note, related)))

    def set_pod_condition(self, pod: Pod, status: str, reason: str, message: str,
                          nominated_node: str | None = None) -> None:
        self._put((_CONDITION, pod, (status, reason, message, nominated_node)))

    def delete_pod(self, pod: Pod) -> None:
        self.pending_deletions += 1
        self._put((_DELETE, pod, (1,)), always=True)

    def clear_nominated_node(self, pod: Pod) -> None:
        self._put((_CLEAR_NOMINATION, pod, (1,)), always=True)

    def forget(self, pod: Pod) -> None:
        """``pod`` was deleted: the sink may drop what it remembers of it once the writes enqueued
        before are done (at once when none is). Not dropped when the buffer is full (a write still
        buffered would leave its state behind for good), up to twice the capacity; beyond, told at
        once. Nothing for a sink without ``forget``."""
        if self._forget is None:
            return
        if not self._buffer or len(self._buffer) >= 2 * self.capacity:  # (empty: no write of the pod pending)
            self._forget(pod.key)
            return
        self._put((_FORGET, pod.key, ()), always=True)

    def _put(self, entry: _Entry, *, always: bool = False) -> None:
        if len(self._buffer) >= self.capacity and not always:
            if not self._dropping:
                self._dropping = True
                log.warning("event buffer full (%d entries): dropping events until the sink catches up",
                            self.capacity)
            self.dropped += 1
            return
        self._buffer.append(entry)
        if self._wake is not None:
            self._wake.set()

    async def flush(self) -> None:
        """Write everything enqueued so far (and whatever is enqueued meanwhile). Outside ``run``
        (shutdown, drivers), the failures still counted are logged too."""
        async with self._lock:
            buffer = self._buffer
            while buffer:
                kind, pod, args = buffer.popleft()
                if isinstance(pod, str):  # _FORGET
                    if self._forget is not None:
                        self._forget(pod)
                    continue
                try:
                    await self._write(kind, pod, args)
                except Exception as exc:
                    await self._failed(kind, pod, args, exc)
                    continue
                self._failures_in_a_row = 0
                if self._failing:
                    self._recovered(kind)
            if self._dropping:
                self._dropping = False
                log.warning("event buffer drained; %d events dropped so far", self.dropped)
            if self._wake is None:
                self._repeats.flush()

    async def _write(self, kind: int, pod: Pod, args: tuple[object, ...]) -> None:
        sink = self.sink
        if kind == _EVENT:
            await sink.write_event(pod, *args)  # type: ignore[arg-type]
        elif kind == _CONDITION:
            status, reason, message, nominated = args
            if nominated is None:  # sinks written before nominations keep working
                await sink.write_pod_condition(pod, status, reason, message)  # type: ignore[arg-type]
            else:
                await sink.write_pod_condition(pod, status, reason, message,  # type: ignore[arg-type]
                                               nominated_node=nominated)  # type: ignore[arg-type]
        elif kind == _DELETE:
            await sink.delete_pod(pod)  # type: ignore[attr-defined]
            self.pending_deletions -= 1
        else:
            await sink.clear_nominated_node(pod)  # type: ignore[attr-defined]

    async def _failed(self, kind: int, pod: Pod, args: tuple[object, ...], exc: Exception) -> None:
        """Count and log a failed write; a preemption write is tried again first (``PREEMPTION_ATTEMPTS``);
        after ``BACKOFF_AFTER`` failures in a row, pause before the next write."""
        self.failed += 1
        self._failures_in_a_row += 1
        failure = f"{_KIND[kind]}: {type(exc).__name__}"
        self._failing.setdefault(kind, set()).add(failure)
        attempt = args[0] if kind in (_DELETE, _CLEAR_NOMINATION) else None
        again = attempt + 1 if isinstance(attempt, int) and attempt < PREEMPTION_ATTEMPTS else None
        self._repeats.warning(failure, "writing %s for pod %s failed%s: %s: %s", _WHAT[kind], pod.key,
                              " (to be tried again)" if again is not None else "", type(exc).__name__, exc)
        if again is not None:
            self._buffer.appendleft((kind, pod, (again,)))
        elif kind == _DELETE:
            self.pending_deletions -= 1  # given up
        beyond = self._failures_in_a_row - BACKOFF_AFTER
        if beyond >= 0:
            await self._sleep(min(MIN_PAUSE * 2 ** min(beyond, 10), MAX_PAUSE))

    def _recovered(self, kind: int) -> None:
        """A write of ``kind`` worked: the failures of that kind counted so far are logged."""
        for failure in self._failing.pop(kind, ()):
            self._repeats.recovered(failure, f"{_KIND[kind]} works again")

    async def run(self) -> None:
        """Drain the buffer whenever something is enqueued, until cancelled."""
        wake = self._wake = asyncio.Event()
        try:
            while True:
                if not self._buffer:
                    await wake.wait()
                wake.clear()
                await self.flush()
        finally:
            self._wake = None
