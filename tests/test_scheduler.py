"""The Scheduler and its loop: schedule_one, run and stop, concurrent bindings (a pod held at
Permit does not stall the others), bounded bindings, guarded tasks, liveness."""

from __future__ import annotations

import asyncio
import logging

import pytest
from schedkit import RaisingFilter, build, config_with, schedule_all

from scorer.framework import Code, Status
from scorer.testing import make_node, make_pod


class HoldLabelled:
    """Permit: holds pods labelled ``hold`` until a test allows them through the handle."""

    name = "HoldLabelled"

    def permit(self, state, pod, node):
        if pod.labels.get("hold"):
            return Status(Code.WAIT), 30.0
        return None


class SlowPreBind:
    """PreBind: waits until ``release`` is set, counting how many pods wait at once."""

    name = "SlowPreBind"
    release: asyncio.Event | None = None
    inside = 0
    most = 0

    async def pre_bind(self, state, pod, node):
        cls = SlowPreBind
        cls.inside += 1
        cls.most = max(cls.most, cls.inside)
        try:
            if cls.release is not None:
                await cls.release.wait()
            else:
                await asyncio.sleep(0.01)
        finally:
            cls.inside -= 1


@pytest.fixture(autouse=True)
def _reset_slow_pre_bind():
    SlowPreBind.release, SlowPreBind.inside, SlowPreBind.most = None, 0, 0


async def until(predicate, turns: int = 2000) -> None:
    """Let the event loop run until ``predicate()`` holds (bounded: fails instead of hanging)."""
    for _ in range(turns):
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition not reached")


def test_raising_filter_is_an_error_naming_the_plugin_and_the_pod_is_retried():
    nodes = [make_node("n1"), make_node("n2")]
    pod = make_pod("p")
    asm, cluster = build(config_with("RaisingFilter"), nodes, [pod], RaisingFilter)
    schedule_all(asm)
    event = cluster.events[-1]
    assert event.reason == "FailedScheduling"
    assert 'RaisingFilter' in event.note and "boom" in event.note
    assert cluster.conditions[pod.key].reason == "SchedulerError"
    # Nothing is lost: the pod waits in backoff for its retry.
    assert asm.queue.pending_counts()["backoff"] == 1
    assert cluster.pods[pod.key].node_name == ""


def test_simulated_burst_places_every_pod_and_respects_capacity():
    nodes = [make_node(f"n{i}", cpu="2", memory="4Gi", pods=10) for i in range(3)]
    pods = [make_pod(f"p{i}", cpu="500m", memory="512Mi") for i in range(14)]
    asm, cluster = build(None, nodes, pods)
    schedule_all(asm)
    placed = [p for p in cluster.pods.values() if p.node_name]
    assert len(placed) == 12  # 4 per node by cpu
    per_node = {n.name: sum(1 for p in placed if p.node_name == n.name) for n in nodes}
    assert per_node == {"n0": 4, "n1": 4, "n2": 4}
    failures = [e for e in cluster.events if e.reason == "FailedScheduling"]
    assert len(failures) == 2
    assert failures[0].note == ("0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are "
                                "available: 3 No preemption victims found for incoming pod.")
    assert asm.queue.pending_counts()["unschedulable"] == 2
    assert {e.reason for e in cluster.events} == {"Scheduled", "FailedScheduling"}


async def test_schedule_one_returns_none_without_an_active_pod():
    asm, _ = build(None, [make_node("n1")], [])
    assert asm.scheduler.schedule_one() is None


async def test_a_pod_held_at_permit_does_not_stall_the_others():
    nodes = [make_node("n1"), make_node("n2")]
    pods = [make_pod("held", labels={"hold": "yes"}), make_pod("a"), make_pod("b")]
    asm, cluster = build(config_with("HoldLabelled"), nodes, pods, HoldLabelled)
    scheduler = asm.scheduler
    loop = asyncio.create_task(scheduler.run())
    await until(lambda: cluster.pods["default/a"].node_name and cluster.pods["default/b"].node_name)
    # "held" was scheduled first and is still waiting at Permit, assumed on its node.
    assert cluster.pods["default/held"].node_name == ""
    assert asm.cache.is_assumed("default/held")
    assert [t.get_name() for t in scheduler.binding_tasks] == ["bind:default/held"]
    asm.frameworks["default-scheduler"].handle.waiting_pods["default/held"].allow("HoldLabelled")
    await until(lambda: cluster.pods["default/held"].node_name)
    await scheduler.stop()
    await loop
    assert [e.pod for e in cluster.events] == ["default/a", "default/b", "default/held"]
    assert {e.reason for e in cluster.events} == {"Scheduled"}


async def test_stop_lets_bindings_finish_within_the_grace_then_cancels_and_requeues():
    nodes = [make_node("n1"), make_node("n2")]
    pods = [make_pod("held", labels={"hold": "yes"}), make_pod("slow")]
    asm, cluster = build(config_with("HoldLabelled", "SlowPreBind"), nodes, pods, HoldLabelled, SlowPreBind)
    scheduler = asm.scheduler
    loop = asyncio.create_task(scheduler.run())
    await until(lambda: len(scheduler.binding_tasks) == 2)
    await scheduler.stop(grace=0.5)
    await loop
    # The slow binding finished within the grace period; the held one was cancelled.
    assert cluster.pods["default/slow"].node_name
    assert cluster.pods["default/held"].node_name == ""
    assert not scheduler.binding_tasks
    assert not asm.cache.is_assumed("default/held") and "default/held" not in asm.cache.pods
    assert asm.frameworks["default-scheduler"].handle.waiting_pods == {}
    assert "default/held" in asm.queue and not asm.queue.is_in_flight("default/held")
    assert asm.queue.pending_counts()["backoff"] == 1
    errors = asm.metrics.collector_registry.get_sample_value(
        "scheduler_schedule_attempts_total", {"result": "error", "profile": "default-scheduler"})
    assert errors == 1.0
    # The recorder was flushed: the Scheduled event is written.
    assert [(e.pod, e.reason) for e in cluster.events] == [("default/slow", "Scheduled")]


async def test_stop_wakes_an_idle_loop_and_liveness_follows_the_loop():
    asm, _ = build(None, [make_node("n1")], [])
    scheduler = asm.scheduler
    scheduler.pop_timeout = 60.0  # an idle loop would sleep this long in pop_wait
    assert not scheduler.healthy(max_silence=5.0)
    loop = asyncio.create_task(scheduler.run())
    await until(lambda: scheduler.heartbeat > 0)
    assert scheduler.healthy(max_silence=5.0)
    assert not scheduler.healthy(max_silence=-1.0)  # a heartbeat older than max_silence is not live
    await asyncio.wait_for(scheduler.stop(), timeout=10.0)
    await loop
    assert not scheduler.healthy(max_silence=5.0)


async def test_a_scheduler_stopped_before_its_loop_started_does_not_run():
    asm, cluster = build(None, [make_node("n1")], [make_pod("p")])
    loop = asyncio.create_task(asm.scheduler.run())
    await asm.scheduler.stop()  # the shutdown of a service that had just started
    await asyncio.wait_for(loop, timeout=10.0)
    assert cluster.pods["default/p"].node_name == "" and "default/p" in asm.queue


async def test_the_idle_loop_schedules_a_pod_that_arrives():
    asm, cluster = build(None, [make_node("n1")], [])
    loop = asyncio.create_task(asm.scheduler.run())
    await asyncio.sleep(0.01)
    cluster.apply(make_pod("late"))  # the cluster source delivers a new pending pod
    await until(lambda: cluster.pods["default/late"].node_name == "n1")
    await asm.scheduler.stop()
    await loop


async def test_cancelling_run_cancels_bindings_and_requeues_their_pods():
    pods = [make_pod("held", labels={"hold": "yes"})]
    asm, cluster = build(config_with("HoldLabelled"), [make_node("n1")], pods, HoldLabelled)
    loop = asyncio.create_task(asm.scheduler.run())
    await until(lambda: asm.scheduler.binding_tasks)
    loop.cancel()
    with pytest.raises(asyncio.CancelledError):
        await loop
    assert not asm.scheduler.binding_tasks
    assert "default/held" in asm.queue and not asm.cache.is_assumed("default/held")


async def test_bindings_past_permit_are_bounded():
    pods = [make_pod(f"p{i}") for i in range(5)]
    asm, cluster = build(config_with("SlowPreBind"), [make_node("n1")], pods, SlowPreBind,
                         max_concurrent_bindings=2)
    SlowPreBind.release = asyncio.Event()
    turns = [asm.scheduler.schedule_one() for _ in range(5)]
    assert [t.outcome for t in turns] == ["binding"] * 5
    await until(lambda: SlowPreBind.inside == 2)
    for _ in range(10):
        await asyncio.sleep(0)
    assert SlowPreBind.inside == 2  # the other three wait for a slot
    SlowPreBind.release.set()
    assert await asyncio.gather(*(t.binding for t in turns)) == [True] * 5
    assert SlowPreBind.most == 2
    assert all(p.node_name == "n1" for p in cluster.pods.values())


async def test_the_recorder_knows_when_bindings_are_under_way():
    """The recorder's Events go one at a time while a binding is past Permit (``yield_to``)."""
    asm, _ = build(config_with("SlowPreBind"), [make_node("n1")], [make_pod("p")], SlowPreBind)
    assert asm.recorder.yield_to == asm.scheduler.bindings_under_way and not asm.scheduler.bindings_under_way()
    SlowPreBind.release = asyncio.Event()
    turn = asm.scheduler.schedule_one()
    await until(lambda: SlowPreBind.inside == 1)
    assert asm.scheduler.bindings_under_way()
    SlowPreBind.release.set()
    assert await turn.binding
    assert not asm.scheduler.bindings_under_way()


async def test_a_crashing_binding_task_is_logged_and_its_pod_requeued(caplog, monkeypatch):
    asm, cluster = build(None, [make_node("n1")], [make_pod("p", cpu="1")])

    async def crash(attempt, slots=None):
        raise RuntimeError("bug in the binding cycle")

    monkeypatch.setattr(asm.scheduler.binding, "run", crash)
    with caplog.at_level(logging.ERROR, logger="scorer.scheduler"):
        turn = asm.scheduler.schedule_one()
        assert await turn.binding is False
    assert "binding task bind:default/p crashed" in caplog.text
    await asm.recorder.flush()
    assert cluster.events[-1].note == "binding rejected: RuntimeError: bug in the binding cycle"
    assert cluster.conditions["default/p"].reason == "SchedulerError"
    assert not asm.cache.is_assumed("default/p") and asm.cache.table.requested[0].sum() == 0
    assert asm.queue.pending_counts()["backoff"] == 1


async def test_a_crashing_scheduling_cycle_is_logged_and_its_pod_requeued(caplog, monkeypatch):
    asm, cluster = build(None, [make_node("n1")], [make_pod("p")])

    def crash(*args, **kwargs):
        raise KeyError("bug in the algorithm")

    monkeypatch.setattr(asm.scheduler.algorithm, "schedule_pod", crash)
    with caplog.at_level(logging.ERROR, logger="scorer.scheduler"):
        turn = asm.scheduler.schedule_one()
    assert turn.outcome == "error" and "KeyError" in turn.message
    assert "scheduling cycle of pod default/p crashed" in caplog.text
    assert asm.queue.pending_counts()["backoff"] == 1 and not asm.queue.is_in_flight("default/p")


async def _crash() -> None:
    raise RuntimeError("drain broke")


async def _give_up() -> None:
    return None


@pytest.mark.parametrize(("part", "run", "failure", "logged"), [
    ("recorder", _crash, "event-recorder: RuntimeError: drain broke",
     "task event-recorder crashed: RuntimeError: drain broke"),
    ("queue", _give_up, "queue-flush: ended", "task queue-flush ended unexpectedly"),
], ids=["crashed", "returned"])
async def test_a_crashed_background_task_is_logged_and_makes_the_scheduler_unhealthy(caplog, monkeypatch, part, run,
                                                                                     failure, logged):
    asm, _ = build(None, [make_node("n1")], [])
    monkeypatch.setattr(getattr(asm, part), "run", run)
    loop = asyncio.create_task(asm.scheduler.run())
    with caplog.at_level(logging.ERROR, logger="scorer.scheduler"):
        await until(lambda: asm.scheduler.failure is not None)
    assert asm.scheduler.failure == failure
    assert logged in caplog.text
    assert not asm.scheduler.healthy(max_silence=60.0)
    await asm.scheduler.stop()
    await loop


async def test_the_loop_yields_to_the_event_loop_once_per_interval():
    asm, _ = build(None, [], [])
    scheduler = asm.scheduler
    scheduler.yield_interval = 60.0
    ran = []

    async def turn():
        asyncio.get_running_loop().call_soon(ran.append, "other work")
        await scheduler.maybe_yield()
        return list(ran)

    assert await turn() == ["other work"]  # the first call yields
    ran.clear()
    assert await turn() == []  # within the interval: no yield, the callback waits
    await asyncio.sleep(0)
    assert ran == ["other work"]


def test_scheduler_options_are_checked():
    asm, _ = build(None, [], [])
    with pytest.raises(ValueError, match="max_concurrent_bindings must be >= 1"):
        type(asm.scheduler)(asm.cache, asm.frameworks, asm.queue, asm.recorder, max_concurrent_bindings=0)
    with pytest.raises(ValueError, match="pop_timeout must be > 0"):
        type(asm.scheduler)(asm.cache, asm.frameworks, asm.queue, asm.recorder, pop_timeout=0)
    with pytest.raises(ValueError, match="yield_interval must be >= 0"):
        type(asm.scheduler)(asm.cache, asm.frameworks, asm.queue, asm.recorder, yield_interval=-1)
