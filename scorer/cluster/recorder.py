"""BufferedRecorder: the EventRecorder of every driver, over any ClusterWriter.

The scheduling cycle calls ``record`` / ``set_pod_condition``, which append to
a bounded in-memory buffer and return: no I/O, no await. ``run`` drains the
buffer to the writer in the background, in order; ``flush`` drains it now.
Events of distinct pods are written side by side, up to ``MAX_EVENT_WRITES``
at once, but one at a time while ``yield_to`` says bindings are under way (the
scheduler's ``bindings_under_way``) and the buffer is less than half full: the
bindings come first, the Events still keep going, and bindings that never stop
do not leave them to fill the buffer and be dropped. One at a time throughout,
each Event waited its round trip and a scheduler binding 700 pods a second fell
behind: at 500 nodes, the last of 3,000 Scheduled Events came 4-6 s after the
last bind, against about 2 s now (side by side throughout: about 1.5 s, but
fewer pods bound a second, as the Events then compete with the bindings at the
API server). Two writes of one pod are never under way at once, and any other
entry waits for those under way, so each pod's writes keep their order and
every other kind keeps the buffer's. While writes fail in a row (below) they go
one at a time.
When the buffer is full, new entries are dropped and counted (``dropped``)
rather than blocking the cycle; kube's event broadcaster drops the same way.
Preemption's writes (``delete_pod`` of a victim, ``clear_nominated_node``)
are never dropped: a preemptor waits for its victims to go. They are written
in order with the rest, by the writer's ``delete_pod`` / ``clear_nominated_node``.
A victim whose deletion is given up is told to ``deletions_given_up`` (the
cache stops assuming it deleted).
Each buffer entry is one kind of write (``_Event``, ``_Condition``,
``_Deletion``, ``_NominationClearing``) or a ``_Forget``; the drain dispatches
on its type.

A write the writer fails is counted (``failed``) and the drain goes on; a failed
deletion or nomination clearing is tried again first, up to ``PREEMPTION_ATTEMPTS``
times in all. Failures are logged through a ``RepeatLog`` (``scorer.logsummary``),
one kind per write and exception type (``"writing events: ApiUnavailable"``):
the first at once, the repeats of the next 30 s as one counted line, and
"<what> works again" when a write of that kind next succeeds; an API outage is
a few lines, not one per Event. After ``BACKOFF_AFTER`` failures in a row (the
writer is unreachable, not one write refused) the drain pauses before each next
write, 50 ms doubling up to 1 s, until a write succeeds: it does not spin on an
unreachable server; the buffer fills meanwhile and drops new Events as above.

``forget(pod)`` tells the writer (``ClusterWriter.forget``: the API writer keeps
per-pod state) that the pod was deleted, in order after the writes enqueued for
it, so that what it remembers of the pod goes with the pod (the event handlers
call it); at once when nothing is pending. Like preemption's writes it is not
dropped when the buffer is full (up to twice the capacity: beyond, the writer is
told at once). The buffer keeps only the pod's key for it, not the deleted pod.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, ClassVar

import attrs

from scorer.framework.seams import ClusterWriter
from scorer.logsummary import RepeatLog

if TYPE_CHECKING:
    from scorer.model import Pod

log = logging.getLogger("scorer.cluster.recorder")

DEFAULT_CAPACITY = 10_000  # entries waiting to be written
BACKOFF_AFTER = 3  # failed writes in a row before the drain pauses between writes
MIN_PAUSE = 0.05  # seconds; doubled after each further failure ...
MAX_PAUSE = 1.0  # ... up to this
PREEMPTION_ATTEMPTS = 5  # tries of a victim's deletion or a nomination's clearing before it is given up
MAX_EVENT_WRITES = 8  # Events of distinct pods written at once (the drain's module docstring)

@attrs.frozen(slots=True)
class _PodWrite:
    """A write about ``pod``: ``what`` names it for its failures ("writing <what> for pod ..."),
    ``kind`` is the RepeatLog kind they are summed under (with the exception type)."""

    what: ClassVar[str]
    kind: ClassVar[str]
    pod: Pod


@attrs.frozen(slots=True)
class _Event(_PodWrite):
    """An Event regarding the pod; ``related`` its second object, if any."""

    what = "an event"
    kind = "writing events"
    type_: str
    reason: str
    action: str
    note: str
    related: Pod | None


@attrs.frozen(slots=True)
class _Condition(_PodWrite):
    """The pod's PodScheduled condition, and its nomination unless ``nominated_node`` is None."""

    status: str
    reason: str
    message: str
    nominated_node: str | None
    what = "the PodScheduled condition"
    kind = "writing PodScheduled conditions"


@attrs.frozen(slots=True)
class _PreemptionWrite(_PodWrite):
    """Never dropped, and tried again when it fails: ``attempt`` counts the tries (``PREEMPTION_ATTEMPTS``)."""

    attempt: int = 1


@attrs.frozen(slots=True)
class _Deletion(_PreemptionWrite):
    """The victim pod deleted."""

    what = "the deletion"
    kind = "deleting preempted pods"


@attrs.frozen(slots=True)
class _NominationClearing(_PreemptionWrite):
    """The nomination of a lower-priority pod cleared."""

    what = "the cleared nominatedNodeName"
    kind = "clearing nominatedNodeName"


@attrs.frozen(slots=True)
class _Forget:
    """A deleted pod the writer may forget: its key only, so that the buffer does not keep the
    deleted pod's object alive."""

    pod_key: str


_Write = _Event | _Condition | _Deletion | _NominationClearing
_Entry = _Write | _Forget


class BufferedRecorder:
    def __init__(self, sink: ClusterWriter, *, capacity: int = DEFAULT_CAPACITY,
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
        self.deletions_given_up: list[Callable[[Pod], None]] = []  # called with each victim given up
        self._lock = asyncio.Lock()  # one drain at a time keeps the writes in order
        self._wake: asyncio.Event | None = None
        self._repeats = RepeatLog(log)
        self._failing: dict[str, set[str]] = {}  # write's kind -> its RepeatLog kinds failing since it last worked
        self._failures_in_a_row = 0
        self._sleep = sleep  # the pauses after failures in a row (tests give their own)
        self.yield_to: Callable[[], bool] | None = None  # True: bindings under way, Events one at a time

    @property
    def pending(self) -> int:
        """Entries enqueued and not yet written."""
        return len(self._buffer)

    def record(self, pod: Pod, type_: str, reason: str, action: str, note: str,
               related: Pod | None = None) -> None:
        self._put(_Event(pod, type_, reason, action, note, related))

    def set_pod_condition(self, pod: Pod, status: str, reason: str, message: str,
                          nominated_node: str | None = None) -> None:
        self._put(_Condition(pod, status, reason, message, nominated_node))

    def delete_pod(self, pod: Pod) -> None:
        self.pending_deletions += 1
        self._put(_Deletion(pod), always=True)

    def clear_nominated_node(self, pod: Pod) -> None:
        self._put(_NominationClearing(pod), always=True)

    def forget(self, pod: Pod) -> None:
        """``pod`` was deleted: the writer may drop what it remembers of it once the writes enqueued
        before are done (at once when none is). Not dropped when the buffer is full (a write still
        buffered would leave its state behind for good), up to twice the capacity; beyond, told at
        once."""
        if not self._buffer or len(self._buffer) >= 2 * self.capacity:  # (empty: no write of the pod pending)
            self.sink.forget(pod.key)
            return
        self._put(_Forget(pod.key), always=True)

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
            writing: dict[asyncio.Future[None], str] = {}  # Events being written -> their pod's key
            try:
                while buffer or writing:
                    entry = buffer[0] if buffer else None
                    if (isinstance(entry, _Event) and len(writing) < self._event_writes()
                            and self._failures_in_a_row < BACKOFF_AFTER and entry.pod.key not in writing.values()):
                        buffer.popleft()
                        writing[asyncio.ensure_future(self._write_one(entry))] = entry.pod.key
                        continue
                    if writing:  # as many as may be, the same pod's, or an entry that waits for them: one ends
                        done, _ = await asyncio.wait(writing, return_when=asyncio.FIRST_COMPLETED)
                        for future in done:
                            del writing[future]
                        continue
                    entry = buffer.popleft()
                    if isinstance(entry, _Forget):
                        self.sink.forget(entry.pod_key)
                    else:
                        await self._write_one(entry)
            finally:
                for future in writing:  # (cancelled: shutdown)
                    future.cancel()
            if self._dropping:
                self._dropping = False
                log.warning("event buffer drained; %d events dropped so far", self.dropped)
            if self._wake is None:
                self._repeats.flush()

    def _event_writes(self) -> int:
        """How many Events may be under way now: one while ``yield_to`` says bindings are, unless the
        buffer is half full (bindings that never stop must not leave the Events to be dropped)."""
        if self.yield_to is not None and len(self._buffer) < self.capacity // 2 and self.yield_to():
            return 1
        return MAX_EVENT_WRITES

    async def _write_one(self, entry: _Write) -> None:
        """Write ``entry``; count and log a failure (``_failed``) or a success."""
        try:
            await self._write(entry)
        except Exception as exc:
            await self._failed(entry, exc)
            return
        self._failures_in_a_row = 0
        if self._failing:
            self._recovered(entry.kind)

    async def _write(self, entry: _Write) -> None:
        sink = self.sink
        if isinstance(entry, _Event):
            if entry.related is None:  # sinks written before related objects keep working
                await sink.write_event(entry.pod, entry.type_, entry.reason, entry.action, entry.note)
            else:
                await sink.write_event(entry.pod, entry.type_, entry.reason, entry.action, entry.note,
                                       entry.related)
        elif isinstance(entry, _Condition):
            if entry.nominated_node is None:  # sinks written before nominations keep working
                await sink.write_pod_condition(entry.pod, entry.status, entry.reason, entry.message)
            else:
                await sink.write_pod_condition(entry.pod, entry.status, entry.reason, entry.message,
                                               nominated_node=entry.nominated_node)
        elif isinstance(entry, _Deletion):
            await sink.delete_pod(entry.pod)
            self.pending_deletions -= 1
        else:
            await sink.clear_nominated_node(entry.pod)

    async def _failed(self, entry: _Write, exc: Exception) -> None:
        """Count and log a failed write; a preemption write is tried again first (``PREEMPTION_ATTEMPTS``);
        after ``BACKOFF_AFTER`` failures in a row, pause before the next write."""
        self.failed += 1
        self._failures_in_a_row += 1
        failure = f"{entry.kind}: {type(exc).__name__}"
        self._failing.setdefault(entry.kind, set()).add(failure)
        again = (attrs.evolve(entry, attempt=entry.attempt + 1)
                 if isinstance(entry, _PreemptionWrite) and entry.attempt < PREEMPTION_ATTEMPTS else None)
        self._repeats.warning(failure, "writing %s for pod %s failed%s: %s: %s", entry.what, entry.pod.key,
                              " (to be tried again)" if again is not None else "", type(exc).__name__, exc)
        if again is not None:
            self._buffer.appendleft(again)
        elif isinstance(entry, _Deletion):
            self.pending_deletions -= 1  # given up
            for listener in self.deletions_given_up:
                listener(entry.pod)
        beyond = self._failures_in_a_row - BACKOFF_AFTER
        if beyond >= 0:
            await self._sleep(min(MIN_PAUSE * 2 ** min(beyond, 10), MAX_PAUSE))

    def _recovered(self, kind: str) -> None:
        """A write of ``kind`` worked: the failures of that kind counted so far are logged."""
        for failure in self._failing.pop(kind, ()):
            self._repeats.recovered(failure, f"{kind} works again")

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
