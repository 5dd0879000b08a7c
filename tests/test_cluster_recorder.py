"""BufferedRecorder (scorer.cluster.recorder): enqueue without I/O, drain in order, count drops
and failed writes instead of blocking or dying."""

from __future__ import annotations

import asyncio
import logging

import pytest

from scorer.cluster.interface import EventRecorder
from scorer.cluster.memory import InMemoryCluster
from scorer.cluster.recorder import BufferedRecorder
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
