"""BufferedRecorder: the EventRecorder of every driver, over any EventSink.

The scheduling cycle calls ``record`` / ``set_pod_condition``, which append to
a bounded in-memory buffer and return: no I/O, no await. ``run`` drains the
buffer to the sink in the background, in order; ``flush`` drains it now.
When the buffer is full, new entries are dropped and counted (``dropped``)
rather than blocking the cycle; kube's event broadcaster drops the same way.
Preemption's writes (``delete_pod`` of a victim, ``clear_nominated_node``)
are never dropped: a preemptor waits for its victims to go. They are written
in order with the rest, by the sink's ``delete_pod`` / ``clear_nominated_node``.
A write the sink fails is logged and counted (``failed``); the drain goes on.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import TYPE_CHECKING

from scorer.cluster.interface import EventSink

if TYPE_CHECKING:
    from scorer.model import Pod

log = logging.getLogger("scorer.cluster.recorder")

DEFAULT_CAPACITY = 10_000  # entries waiting to be written

_EVENT = 0
_CONDITION = 1
_DELETE = 2
_CLEAR_NOMINATION = 3
_WHAT = {_EVENT: "an event", _CONDITION: "the PodScheduled condition", _DELETE: "the deletion",
         _CLEAR_NOMINATION: "the cleared nominatedNodeName"}


class BufferedRecorder:
    def __init__(self, sink: EventSink, *, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.sink = sink
        self.capacity = capacity
        self.dropped = 0
        self.failed = 0
        self._dropping = False
        self._buffer: collections.deque[tuple[int, Pod, tuple[str | Pod | None, ...]]] = collections.deque()
        self.pending_deletions = 0  # victims enqueued and not yet deleted
        self._lock = asyncio.Lock()  # one drain at a time keeps the writes in order
        self._wake: asyncio.Event | None = None

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
        self._put((_DELETE, pod, ()), always=True)

    def clear_nominated_node(self, pod: Pod) -> None:
        self._put((_CLEAR_NOMINATION, pod, ()), always=True)

    def _put(self, entry: tuple[int, Pod, tuple[str | Pod | None, ...]], *, always: bool = False) -> None:
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
        """Write everything enqueued so far (and whatever is enqueued meanwhile)."""
        async with self._lock:
            buffer = self._buffer
            while buffer:
                kind, pod, args = buffer.popleft()
                try:
                    if kind == _EVENT:
                        await self.sink.write_event(pod, *args)  # type: ignore[arg-type]
                    elif kind == _CONDITION:
                        status, reason, message, nominated = args
                        if nominated is None:  # sinks written before nominations keep working
                            await self.sink.write_pod_condition(pod, status, reason, message)  # type: ignore[arg-type]
                        else:
                            await self.sink.write_pod_condition(pod, status, reason, message,  # type: ignore[arg-type]
                                                                nominated_node=nominated)  # type: ignore[arg-type]
                    elif kind == _DELETE:
                        self.pending_deletions -= 1
                        await self.sink.delete_pod(pod)  # type: ignore[attr-defined]
                    else:
                        await self.sink.clear_nominated_node(pod)  # type: ignore[attr-defined]
                except Exception as exc:
                    self.failed += 1
                    log.warning("writing %s for pod %s failed: %s: %s", _WHAT[kind],
                                pod.key, type(exc).__name__, exc)
            if self._dropping:
                self._dropping = False
                log.warning("event buffer drained; %d events dropped so far", self.dropped)

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
