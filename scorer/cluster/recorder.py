"""BufferedRecorder: the EventRecorder of every driver, over any EventSink.

The scheduling cycle calls ``record`` / ``set_pod_condition``, which append to
a bounded in-memory buffer and return: no I/O, no await. ``run`` drains the
buffer to the sink in the background, in order; ``flush`` drains it now.
When the buffer is full, new entries are dropped and counted (``dropped``)
rather than blocking the cycle; kube's event broadcaster drops the same way.
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


class BufferedRecorder:
    def __init__(self, sink: EventSink, *, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.sink = sink
        self.capacity = capacity
        self.dropped = 0
        self.failed = 0
        self._dropping = False
        self._buffer: collections.deque[tuple[int, Pod, tuple[str, ...]]] = collections.deque()
        self._lock = asyncio.Lock()  # one drain at a time keeps the writes in order
        self._wake: asyncio.Event | None = None

    @property
    def pending(self) -> int:
        """Entries enqueued and not yet written."""
        return len(self._buffer)

    def record(self, pod: Pod, type_: str, reason: str, action: str, note: str) -> None:
        self._put((_EVENT, pod, (type_, reason, action, note)))

    def set_pod_condition(self, pod: Pod, status: str, reason: str, message: str) -> None:
        self._put((_CONDITION, pod, (status, reason, message)))

    def _put(self, entry: tuple[int, Pod, tuple[str, ...]]) -> None:
        if len(self._buffer) >= self.capacity:
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
                        await self.sink.write_event(pod, *args)
                    else:
                        await self.sink.write_pod_condition(pod, *args)
                except Exception as exc:
                    self.failed += 1
                    log.warning("writing %s for pod %s failed: %s: %s",
                                "an event" if kind == _EVENT else "the PodScheduled condition",
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
