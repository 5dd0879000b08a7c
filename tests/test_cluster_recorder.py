"""BufferedRecorder (scorer.cluster.recorder): enqueue without I/O, drain in order, count drops
and failed writes instead of blocking or dying."""

from __future__ import annotations

import asyncio
import logging

import pytest

from scorer.cluster.interface import EventRecorder
from scorer.cluster.memory import InMemoryCluster
from scorer.cluster.recorder import PREEMPTION_ATTEMPTS, BufferedRecorder
from scorer.testing import make_pod


class Sink:
    def __init__(self, fail_on=()):
        self.written = []
        self.fail_on = set(fail_on)
        self.gate: asyncio.Event | None = None

    async def write_event(self, pod, type_, reason, action, note):
        if self.gate is not None:
            await self.gate.wait()
        if note in self.fail_on:
            raise ConnectionError("apiserver unreachable")
        self.written.append(("event", pod.key, reason, note))

    async def write_pod_condition(self, pod, status, reason, message):
        self.written.append(("condition", pod.key, status, reason))


def test_it_is_an_event_recorder():
    assert isinstance(BufferedRecorder(Sink()), EventRecorder)
    with pytest.raises(ValueError, match="capacity must be >= 1"):
        BufferedRecorder(Sink(), capacity=0)


async def test_record_only_enqueues_and_flush_writes_in_order():
    sink = Sink()
    recorder = BufferedRecorder(sink)
    pod = make_pod("p")
    recorder.record(pod, "Warning", "FailedScheduling", "Scheduling", "first")
    recorder.set_pod_condition(pod, "False", "Unschedulable", "first")
    recorder.record(pod, "Normal", "Scheduled", "Binding", "second")
    assert sink.written == [] and recorder.pending == 3
    await recorder.flush()
    assert sink.written == [("event", "default/p", "FailedScheduling", "first"),
                            ("condition", "default/p", "False", "Unschedulable"),
                            ("event", "default/p", "Scheduled", "second")]
    assert recorder.pending == 0


async def test_a_full_buffer_drops_and_counts_instead_of_blocking(caplog):
    sink = Sink()
    recorder = BufferedRecorder(sink, capacity=2)
    pod = make_pod("p")
    with caplog.at_level(logging.WARNING, logger="scorer.cluster.recorder"):
        for i in range(5):
            recorder.record(pod, "Normal", "Scheduled", "Binding", str(i))
        assert recorder.dropped == 3 and recorder.pending == 2
        await recorder.flush()
    assert [w[3] for w in sink.written] == ["0", "1"]
    assert "event buffer full (2 entries)" in caplog.text
    assert "3 events dropped so far" in caplog.text


async def test_a_failed_write_is_logged_and_counted_and_the_drain_goes_on(caplog):
    sink = Sink(fail_on={"bad"})
    recorder = BufferedRecorder(sink)
    pod = make_pod("p")
    for note in ("ok", "bad", "after"):
        recorder.record(pod, "Normal", "Scheduled", "Binding", note)
    with caplog.at_level(logging.WARNING, logger="scorer.cluster.recorder"):
        await recorder.flush()
    assert [w[3] for w in sink.written] == ["ok", "after"] and recorder.failed == 1
    assert "writing an event for pod default/p failed: ConnectionError: apiserver unreachable" in caplog.text


async def test_run_drains_in_the_background():
    sink = Sink()
    recorder = BufferedRecorder(sink)
    task = asyncio.create_task(recorder.run())
    pod = make_pod("p")
    recorder.record(pod, "Normal", "Scheduled", "Binding", "one")
    for _ in range(100):
        if sink.written:
            break
        await asyncio.sleep(0)
    assert [w[3] for w in sink.written] == ["one"]
    # A slow sink: entries recorded meanwhile are written after, in order.
    sink.gate = asyncio.Event()
    recorder.record(pod, "Normal", "Scheduled", "Binding", "two")
    await asyncio.sleep(0)
    recorder.record(pod, "Normal", "Scheduled", "Binding", "three")
    sink.gate.set()
    await recorder.flush()
    assert [w[3] for w in sink.written] == ["one", "two", "three"]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


class PreemptingSink(Sink):
    async def write_pod_condition(self, pod, status, reason, message, nominated_node=None):
        self.written.append(("condition", pod.key, status, nominated_node))

    async def delete_pod(self, pod):
        self.written.append(("delete", pod.key))

    async def clear_nominated_node(self, pod):
        self.written.append(("clear", pod.key))


async def test_preemption_writes_are_ordered_and_never_dropped():
    sink = PreemptingSink()
    recorder = BufferedRecorder(sink, capacity=1)
    victim, preemptor, other = make_pod("victim"), make_pod("high"), make_pod("nominated-low")
    recorder.record(victim, "Normal", "Preempted", "Preempting", "by high")
    recorder.delete_pod(victim)  # the buffer is full: deletions still go in
    recorder.clear_nominated_node(other)
    recorder.set_pod_condition(preemptor, "False", "Unschedulable", "0/1", nominated_node="n1")  # dropped: full
    assert recorder.pending_deletions == 1 and recorder.dropped == 1
    await recorder.flush()
    assert sink.written == [("event", "default/victim", "Preempted", "by high"), ("delete", "default/victim"),
                            ("clear", "default/nominated-low")]
    assert recorder.pending_deletions == 0
    recorder.set_pod_condition(preemptor, "False", "Unschedulable", "0/1", nominated_node="n1")
    await recorder.flush()
    recorder.set_pod_condition(preemptor, "False", "Unschedulable", "0/1")
    await recorder.flush()
    assert sink.written[-2:] == [("condition", "default/high", "False", "n1"),
                                 ("condition", "default/high", "False", None)]


async def test_a_sink_without_nominations_still_gets_conditions():
    sink = Sink()  # written before nominated_node existed
    recorder = BufferedRecorder(sink)
    recorder.set_pod_condition(make_pod("p"), "False", "Unschedulable", "0/1")
    await recorder.flush()
    assert sink.written == [("condition", "default/p", "False", "Unschedulable")] and recorder.failed == 0


async def test_an_events_related_object_reaches_the_sink_only_when_there_is_one():
    sink = InMemoryCluster([], [], [])
    recorder = BufferedRecorder(sink)
    victim, preemptor = make_pod("victim"), make_pod("preemptor")
    recorder.record(victim, "Normal", "Preempted", "Preempting", "Preempted by pod x on node n1", related=preemptor)
    recorder.record(victim, "Warning", "FailedScheduling", "Scheduling", "no")
    await recorder.flush()
    assert [(e.reason, e.related) for e in sink.events] == [("Preempted", "default/preemptor"),
                                                           ("FailedScheduling", "")]
    # A sink written before related objects existed still gets the events without one.
    old = Sink()
    recorder = BufferedRecorder(old)
    recorder.record(victim, "Warning", "FailedScheduling", "Scheduling", "no")
    await recorder.flush()
    assert recorder.failed == 0 and len(old.written) == 1


# --- faults: failures aggregated, the drain paused, preemption writes retried, per-pod memory forgotten ---


class FlakySink(PreemptingSink):
    """Fails every write while ``down``; keeps what ``forget`` was told, in order with the writes."""

    def __init__(self):
        super().__init__()
        self.down = False
        self.failing_deletes = 0  # deletions that fail before one works

    async def write_event(self, pod, type_, reason, action, note):
        if self.down:
            raise ConnectionError("connection refused")
        self.written.append(("event", pod.key, reason, note))

    async def delete_pod(self, pod):
        if self.down or self.failing_deletes:
            self.failing_deletes = max(self.failing_deletes - 1, 0)
            raise ConnectionError("connection refused")
        await super().delete_pod(pod)

    def forget(self, pod_key):
        self.written.append(("forget", pod_key))


class Pauses:
    def __init__(self):
        self.taken: list[float] = []

    async def __call__(self, seconds):
        self.taken.append(seconds)


async def settle(condition, turns=10_000):
    for _ in range(turns):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the drain did not get there")


async def test_an_outage_is_a_few_counted_lines_and_its_end_one_more(caplog):
    sink, pauses = FlakySink(), Pauses()
    recorder = BufferedRecorder(sink, sleep=pauses)
    drain = asyncio.create_task(recorder.run())
    sink.down = True
    with caplog.at_level(logging.INFO, logger="scorer.cluster.recorder"):
        for i in range(500):
            recorder.record(make_pod(f"p{i}"), "Normal", "Scheduled", "Binding", f"n{i}")
        await settle(lambda: recorder.failed == 500)
        assert sink.written == []
        assert [r.getMessage() for r in caplog.records] == [
            "writing an event for pod default/p0 failed: ConnectionError: connection refused"]
        sink.down = False
        recorder.record(make_pod("back"), "Normal", "Scheduled", "Binding", "ok")
        await settle(lambda: sink.written)
        drain.cancel()
        await asyncio.gather(drain, return_exceptions=True)
    messages = [r.getMessage() for r in caplog.records]
    assert messages[1:] == ["writing events: ConnectionError: 499 more like this in the last 0s "
                            "(last: writing an event for pod default/p499 failed: ConnectionError: connection refused)",
                            "writing events works again"]
    assert sink.written == [("event", "default/back", "Scheduled", "ok")]


async def test_a_flush_outside_the_drain_task_writes_the_counts_not_yet_logged(caplog):
    sink = FlakySink()
    recorder = BufferedRecorder(sink, sleep=Pauses())
    sink.down = True
    for i in range(3):
        recorder.record(make_pod(f"p{i}"), "Normal", "Scheduled", "Binding", "x")
    with caplog.at_level(logging.WARNING, logger="scorer.cluster.recorder"):
        await recorder.flush()  # as at shutdown, after the drain task ended
    assert [r.getMessage()[:40] for r in caplog.records] == ["writing an event for pod default/p0 fail",
                                                             "writing events: ConnectionError: 2 more "]


async def test_failures_in_a_row_pause_the_drain_with_a_bounded_backoff_reset_by_a_success():
    sink, pauses = FlakySink(), Pauses()
    recorder = BufferedRecorder(sink, sleep=pauses)
    sink.down = True
    for i in range(12):
        recorder.record(make_pod(f"p{i}"), "Normal", "Scheduled", "Binding", "x")
    await recorder.flush()
    # No pause for the first two (a single write refused is not an outage), then 50 ms doubling up to 1 s.
    assert pauses.taken == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0, 1.0, 1.0]
    sink.down = False
    recorder.record(make_pod("ok"), "Normal", "Scheduled", "Binding", "x")
    await recorder.flush()
    sink.down = True
    recorder.record(make_pod("q"), "Normal", "Scheduled", "Binding", "x")
    await recorder.flush()
    assert len(pauses.taken) == 10  # the success started the count again: one failure, no pause


async def test_a_failed_deletion_is_tried_again_in_order_and_given_up_after_a_bound():
    sink, pauses = FlakySink(), Pauses()
    recorder = BufferedRecorder(sink, sleep=pauses)
    victim, other = make_pod("victim"), make_pod("other")
    given_up: list = []
    recorder.deletions_given_up.append(given_up.append)
    sink.failing_deletes = 2
    recorder.delete_pod(victim)
    recorder.record(other, "Normal", "Scheduled", "Binding", "after")
    await recorder.flush()
    assert sink.written == [("delete", "default/victim"), ("event", "default/other", "Scheduled", "after")]
    assert recorder.failed == 2 and recorder.pending_deletions == 0 and given_up == []
    # A deletion failing every time is given up after PREEMPTION_ATTEMPTS tries (the listeners hear of
    # it); the drain goes on.
    sink.down = True
    recorder.delete_pod(victim)
    await recorder.flush()
    assert recorder.failed == 2 + PREEMPTION_ATTEMPTS and recorder.pending_deletions == 0 and recorder.pending == 0
    assert given_up == [victim]


async def test_a_full_buffer_still_takes_deletions_while_the_drain_is_paused():
    sink = FlakySink()
    gate = asyncio.Event()

    async def held(seconds):
        await gate.wait()

    recorder = BufferedRecorder(sink, capacity=3, sleep=held)
    sink.down = True
    for i in range(3):
        recorder.record(make_pod(f"p{i}"), "Normal", "Scheduled", "Binding", "x")
    drain = asyncio.create_task(recorder.flush())
    for _ in range(20):
        await asyncio.sleep(0)
    assert recorder.pending == 0  # three failures: paused now
    for i in range(5):
        recorder.record(make_pod(f"q{i}"), "Normal", "Scheduled", "Binding", "x")
    recorder.delete_pod(make_pod("victim"))
    assert recorder.dropped == 2 and recorder.pending == 4
    sink.down = False
    gate.set()
    await drain
    assert sink.written[-1] == ("delete", "default/victim") and recorder.pending_deletions == 0


async def test_forget_reaches_the_sink_after_the_pods_last_writes_even_when_the_buffer_is_full():
    sink = FlakySink()
    recorder = BufferedRecorder(sink, capacity=2)
    p, q, r = make_pod("p"), make_pod("q"), make_pod("r")
    recorder.record(p, "Normal", "Scheduled", "Binding", "x")
    recorder.record(q, "Normal", "Scheduled", "Binding", "x")
    recorder.forget(p)  # full: enqueued all the same, after p's event
    recorder.record(p, "Normal", "Scheduled", "Binding", "dropped")
    recorder.forget(q)
    assert sink.written == [] and recorder.dropped == 1 and recorder.pending == 4
    recorder.forget(r)  # twice the capacity: told at once
    assert sink.written == [("forget", "default/r")]
    await recorder.flush()
    assert sink.written[1:] == [("event", "default/p", "Scheduled", "x"), ("event", "default/q", "Scheduled", "x"),
                                ("forget", "default/p"), ("forget", "default/q")]
    recorder.forget(r)  # nothing pending (a standby's recorder, which nothing drains): at once
    assert sink.written[-1] == ("forget", "default/r") and recorder.pending == 0
    # A writer that keeps nothing per pod (the in-memory cluster) is told all the same, and has nothing to drop.
    plain = BufferedRecorder(InMemoryCluster([], [], []))
    plain.forget(p)
    assert plain.pending == 0


class SlowSink(Sink):
    """Each Event waits for its own release: the writes under way are those started and not released."""

    def __init__(self, fail_on=()):
        super().__init__(fail_on)
        self.releases: dict[str, asyncio.Event] = {}
        self.started: list[str] = []

    async def write_event(self, pod, type_, reason, action, note):
        self.started.append(note)
        release = self.releases.setdefault(note, asyncio.Event())
        await release.wait()
        await super().write_event(pod, type_, reason, action, note)

    def under_way(self) -> list[str]:
        return [note for note in self.started if not self.releases[note].is_set()]

    def release(self, note: str) -> None:
        self.releases.setdefault(note, asyncio.Event()).set()


async def settled() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def flush_events(recorder: BufferedRecorder, count: int) -> tuple[list[str], asyncio.Task[None]]:
    """``count`` Scheduled Events of distinct pods recorded (notes ``e0``, ``e1``...), and their flush started."""
    notes = [f"e{i}" for i in range(count)]
    for i, note in enumerate(notes):
        recorder.record(make_pod(f"p{i}"), "Normal", "Scheduled", "Binding", note)
    return notes, asyncio.create_task(recorder.flush())


async def all_written(sink: SlowSink, recorder: BufferedRecorder, notes: list[str], flush: asyncio.Task[None]) -> None:
    """Release every Event: the flush ends with each one written and nothing left."""
    for note in notes:
        sink.release(note)
    await asyncio.wait_for(flush, 5)
    assert sorted(w[3] for w in sink.written) == sorted(notes) and recorder.pending == 0


async def test_events_of_distinct_pods_are_written_side_by_side_up_to_the_limit():
    from scorer.cluster.recorder import MAX_EVENT_WRITES

    sink = SlowSink()
    recorder = BufferedRecorder(sink)
    notes, flush = flush_events(recorder, MAX_EVENT_WRITES + 3)
    await settled()
    assert sink.under_way() == notes[:MAX_EVENT_WRITES]  # the limit, in the buffer's order
    sink.release("e3")
    await settled()
    assert sink.under_way() == [*notes[:3], *notes[4:MAX_EVENT_WRITES + 1]]  # one ended: the next one starts
    await all_written(sink, recorder, notes, flush)


async def test_events_go_one_at_a_time_while_bindings_are_under_way():
    from scorer.cluster.recorder import MAX_EVENT_WRITES

    sink = SlowSink()
    recorder = BufferedRecorder(sink)
    binding = [True]
    recorder.yield_to = lambda: binding[0]
    notes, flush = flush_events(recorder, MAX_EVENT_WRITES + 3)
    await settled()
    assert sink.under_way() == ["e0"]
    sink.release("e0")
    await settled()
    assert sink.under_way() == ["e1"]  # still binding: the next one alone
    binding[0] = False
    sink.release("e1")
    await settled()
    assert sink.under_way() == notes[2:MAX_EVENT_WRITES + 2]  # the bindings done: up to the limit again
    await all_written(sink, recorder, notes, flush)


async def test_events_do_not_yield_to_bindings_once_the_buffer_is_half_full():
    from scorer.cluster.recorder import MAX_EVENT_WRITES

    sink = SlowSink()
    recorder = BufferedRecorder(sink, capacity=2 * MAX_EVENT_WRITES + 4)
    recorder.yield_to = lambda: True  # bindings that never stop
    notes, flush = flush_events(recorder, 2 * MAX_EVENT_WRITES + 4)
    await settled()
    # the buffer full: side by side up to the limit while at least half the capacity waits ...
    assert sink.under_way() == notes[:MAX_EVENT_WRITES]
    for note in notes[:3]:
        sink.release(note)
    await settled()
    assert sink.under_way() == notes[3:MAX_EVENT_WRITES + 3] and recorder.pending == MAX_EVENT_WRITES + 1
    for note in notes[3:MAX_EVENT_WRITES + 3]:  # ... then, under half, one at a time again
        sink.release(note)
    await settled()
    assert sink.under_way() == [notes[MAX_EVENT_WRITES + 3]]
    await all_written(sink, recorder, notes, flush)


async def test_one_pods_writes_and_every_other_entry_keep_their_order():
    """A pod's second Event waits for its first; a condition (any entry but an Event) waits for the Events
    under way, and the Events after it for it."""
    sink = SlowSink()
    recorder = BufferedRecorder(sink)
    a, b, c = make_pod("a"), make_pod("b"), make_pod("c")
    recorder.record(a, "Normal", "Scheduled", "Binding", "a1")
    recorder.record(b, "Normal", "Scheduled", "Binding", "b1")
    recorder.record(a, "Normal", "Scheduled", "Binding", "a2")
    recorder.record(c, "Normal", "Scheduled", "Binding", "c1")
    recorder.set_pod_condition(c, "False", "Unschedulable", "x")
    recorder.record(b, "Normal", "Scheduled", "Binding", "b2")
    flush = asyncio.create_task(recorder.flush())
    await settled()
    assert sink.under_way() == ["a1", "b1"]  # a2 waits for a1, and the entries after it for a2
    sink.release("a1")
    await settled()
    assert sink.under_way() == ["b1", "a2", "c1"]
    for note in ("b1", "a2", "c1"):
        sink.release(note)
    await settled()
    assert sink.under_way() == ["b2"] and ("condition", "default/c", "False", "Unschedulable") in sink.written
    assert sink.written.index(("condition", "default/c", "False", "Unschedulable")) == 4  # after the four Events
    sink.release("b2")
    await asyncio.wait_for(flush, 5)
    assert [w[3] for w in sink.written if w[0] == "event"][-1] == "b2"


async def test_writes_failing_in_a_row_go_one_at_a_time():
    """The first Events go side by side and all fail: from then on (``BACKOFF_AFTER`` failures in a row) one
    at a time, each after its pause, until a write works again."""
    from scorer.cluster.recorder import BACKOFF_AFTER, MAX_EVENT_WRITES

    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    count = MAX_EVENT_WRITES + 4
    sink = Sink(fail_on={f"e{i}" for i in range(count)})
    in_flight = 0
    at_start: dict[str, int] = {}
    write = sink.write_event

    async def counted(pod, type_, reason, action, note):
        nonlocal in_flight
        in_flight += 1
        at_start[note] = in_flight
        await asyncio.sleep(0.001)
        try:
            await write(pod, type_, reason, action, note)
        finally:
            in_flight -= 1

    sink.write_event = counted
    recorder = BufferedRecorder(sink, sleep=sleep)
    for i in range(count):
        recorder.record(make_pod(f"p{i}"), "Normal", "Scheduled", "Binding", f"e{i}")
    recorder.record(make_pod("ok"), "Normal", "Scheduled", "Binding", "works")
    await recorder.flush()
    assert recorder.failed == count and at_start["e7"] == MAX_EVENT_WRITES  # the first ones side by side
    assert [at_start[f"e{i}"] for i in range(MAX_EVENT_WRITES, count)] == [1] * 4 and at_start["works"] == 1
    assert len(pauses) == count - BACKOFF_AFTER + 1 and sink.written == [("event", "default/ok", "Scheduled",
                                                                            "works")]
