"""The binding cycle (scorer.binding): WaitOnPermit, Bind, confirmation by the cluster source,
failure handling (Unreserve, forget, requeue, events, AssignedPodDelete)."""

from __future__ import annotations

import asyncio
import logging

import attrs
import pytest
from schedkit import build, config_with, schedule_all

from scorer.binding import BindingSlots
from scorer.errors import BindConflict, ScorerError
from scorer.framework import Code, Status
from scorer.testing import make_node, make_pod


class Gate:
    """A Permit plugin that holds every pod; tests allow or reject it through the handle."""

    name = "Gate"

    def permit(self, state, pod, node):
        return Status(Code.WAIT), 30.0


class Unreserving:
    """Reserve plugin that remembers what it had to undo."""

    name = "Unreserving"
    undone: list[str] = []

    def reserve(self, state, pod, node):
        return None

    def unreserve(self, state, pod, node):
        Unreserving.undone.append(f"{pod.key}@{node}")


def sample(asm, name, **labels):
    return asm.metrics.collector_registry.get_sample_value(name, labels) or 0.0


def refuse_binding(cluster, exc):
    """The cluster answers every bind with ``exc`` (an API 500: ScorerError; a 409: BindConflict)."""

    async def bind(pod, node_name):
        raise exc

    cluster.bind = bind


@pytest.mark.parametrize("change", ["gone", "bound elsewhere"])
async def test_a_bind_conflict_forgets_the_pod_and_does_not_requeue_it(change, caplog):
    pod = make_pod("p", cpu="1")
    reports = []
    asm, cluster = build(None, [make_node("n1"), make_node("n2")], [pod], on_report=reports.append)
    if change == "gone":
        del cluster.pods[pod.key]  # deleted; the watch has not said so yet: the API answers 404
    else:
        cluster.pods[pod.key] = attrs.evolve(pod, node_name="n2")  # another scheduler won: 409
    turn = asm.scheduler.schedule_one()
    with caplog.at_level(logging.DEBUG, logger="scorer.binding"):
        assert await turn.binding is False
    await asm.recorder.flush()
    assert asm.cache.sizes()["assumed_pods"] == 0 and asm.cache.table.requested.sum() == 0
    # Not requeued, no Event nor condition: the watch will show the pod deleted or bound.
    assert len(asm.queue) == 0 and not asm.queue.is_in_flight(pod.key)
    assert cluster.events == [] and pod.key not in cluster.conditions
    # One DEBUG line, nothing at INFO: under churn conflicts come by the thousand; the metric counts them.
    [record] = [r for r in caplog.records if r.name == "scorer.binding"]
    assert record.levelno == logging.DEBUG
    assert "default/p" in record.getMessage() and "not retried" in record.getMessage()
    assert reports[-1].outcome == "error" and reports[-1].message.startswith("binding rejected: pod default/p ")
    assert sample(asm, "scorer_bind_results_total", result="conflict") == 1
    assert sample(asm, "scorer_bind_results_total", result="error") == 0
    assert sample(asm, "scheduler_schedule_attempts_total", result="error", profile="default-scheduler") == 1
    if change == "bound elsewhere":  # the watch delivers the binding: counted, not pending
        asm.handlers.on_pod_update(pod, cluster.pods[pod.key])
        assert asm.cache.pod_node[pod.key] == "n2" and len(asm.queue) == 0


async def test_a_bind_error_forgets_the_pod_and_requeues_it_with_backoff():
    pod = make_pod("p", cpu="1")
    asm, cluster = build(None, [make_node("n1")], [pod])
    refuse_binding(cluster, ScorerError("binding default/p to n1: HTTP 500: Internal Server Error"))
    turn = asm.scheduler.schedule_one()
    assert await turn.binding is False
    await asm.recorder.flush()
    assert asm.cache.sizes()["assumed_pods"] == 0 and asm.cache.table.requested.sum() == 0
    assert asm.queue.pending_counts()["backoff"] == 1 and not asm.queue.is_in_flight(pod.key)
    note = cluster.events[-1].note
    assert note.startswith("binding rejected: ") and "HTTP 500" in note
    assert cluster.conditions[pod.key].reason == "SchedulerError"
    assert sample(asm, "scorer_bind_results_total", result="error") == 1
    assert sample(asm, "scorer_bind_results_total", result="conflict") == 0


async def test_a_node_missing_from_the_in_memory_cluster_is_retried_not_a_conflict():
    pod = make_pod("p", cpu="1")
    asm, cluster = build(None, [make_node("n1")], [pod])
    del cluster.nodes["n1"]  # gone; the watch has not said so yet
    assert await asm.scheduler.schedule_one().binding is False
    await asm.recorder.flush()
    assert asm.queue.pending_counts()["backoff"] == 1
    assert cluster.events[-1].note == "binding rejected: node 'n1' not found"


class FailingPreBind:
    """A PreBind plugin that returns an Error status (as VolumeBinding does when a volume write fails)."""

    name = "FailingPreBind"

    def pre_bind(self, state, pod, node):
        return Status.error("binding volumes: pv \"pv-1\" gone")


async def test_a_pre_bind_error_names_the_plugin_as_kube_does_and_requeues():
    pod = make_pod("p", cpu="1")
    asm, cluster = build(config_with("FailingPreBind"), [make_node("n1")], [pod], FailingPreBind)
    assert await asm.scheduler.schedule_one().binding is False
    await asm.recorder.flush()
    assert asm.cache.sizes()["assumed_pods"] == 0 and asm.queue.pending_counts()["backoff"] == 1
    # kube's RunPreBindPlugins wraps the status; no "binding rejected" (that is the Bind step's).
    assert cluster.events[-1].note == 'running PreBind plugin "FailingPreBind": binding volumes: pv "pv-1" gone'
    assert cluster.conditions[pod.key].reason == "SchedulerError"
    assert sample(asm, "scorer_bind_results_total", result="error") == 0  # Bind never ran


def test_a_bound_pod_is_confirmed_by_the_cluster_source():
    pod = make_pod("p", cpu="1")
    asm, cluster = build(None, [make_node("n1")], [pod])
    [turn] = schedule_all(asm)
    assert turn.binding.result() is True
    assert cluster.pods[pod.key].node_name == "n1"
    assert cluster.conditions[pod.key].status == "True"
    assert asm.cache.pod_node[pod.key] == "n1" and not asm.cache.is_assumed(pod.key)
    assert cluster.events[-1].note == "Successfully assigned default/p to n1"
    assert len(asm.queue) == 0 and not asm.queue.is_in_flight(pod.key)


@pytest.mark.parametrize("failure", ["conflict", "error"])
async def test_a_failed_binding_releases_pods_its_resources_may_now_fit(failure):
    nodes = [make_node("n1", cpu="1")]
    first, second = make_pod("first", cpu="1"), make_pod("second", cpu="1")
    Unreserving.undone = []
    asm, cluster = build(config_with("Unreserving"), nodes, [first, second], Unreserving)
    turn = asm.scheduler.schedule_one()  # "first" is assumed; its binding task has not run yet
    assert asm.scheduler.schedule_one().outcome == "unschedulable"  # no cpu left for "second"
    assert asm.queue.pending_counts()["unschedulable"] == 1
    refuse_binding(cluster, BindConflict("gone") if failure == "conflict" else ScorerError("HTTP 503"))
    assert await turn.binding is False
    assert Unreserving.undone == ["default/first@n1"]
    # Forgetting "first" is an AssignedPodDelete: "second" leaves the unschedulable pool;
    # "first" is requeued after an error, not after a conflict.
    backoff = 2 if failure == "error" else 1
    assert asm.queue.pending_counts() == {"active": 0, "backoff": backoff, "unschedulable": 0, "gated": 0}


@pytest.mark.parametrize("decision", ["allow", "reject", "timeout"])
def test_permit_wait_allow_reject_and_timeout(decision):
    nodes = [make_node("n1")]
    pod = make_pod("p", cpu="1")
    asm, cluster = build(config_with("Gate"), nodes, [pod], Gate)
    fwk = asm.frameworks["default-scheduler"]

    async def run():
        turn = asm.scheduler.schedule_one()
        attempt = turn.attempt
        assert attempt is not None and attempt.permit_wait == 30.0
        # The pod is assumed while it waits: its resources already count.
        assert asm.cache.is_assumed(pod.key)
        waiting = fwk.handle.waiting_pods[pod.key]
        if decision == "allow":
            waiting.allow("Gate")
        elif decision == "reject":
            waiting.reject("Gate", "quota exceeded")
        else:
            attempt.permit_wait = 0.01
        bound = await turn.binding
        await asm.recorder.flush()
        return bound

    bound = asyncio.run(run())
    assert fwk.handle.waiting_pods == {}
    if decision == "allow":
        assert bound and cluster.pods[pod.key].node_name == "n1"
        return
    assert not bound and cluster.pods[pod.key].node_name == ""
    assert not asm.cache.is_assumed(pod.key)
    expected = "quota exceeded" if decision == "reject" else "rejected due to timeout after waiting at permit"
    assert cluster.events[-1].note == f"0/1 nodes are available: {expected}."
    assert cluster.conditions[pod.key].reason == "Unschedulable"


async def test_a_pod_deleted_while_waiting_at_permit_is_rejected_and_dropped():
    pod = make_pod("p", cpu="1")
    asm, cluster = build(config_with("Gate"), [make_node("n1")], [pod], Gate)
    turn = asm.scheduler.schedule_one()
    await asyncio.sleep(0)  # the binding task waits at Permit
    cluster.delete(pod)
    assert await turn.binding is False
    assert asm.frameworks["default-scheduler"].handle.waiting_pods == {}
    assert pod.key not in asm.cache.pods
    assert len(asm.queue) == 0 and not asm.queue.is_in_flight(pod.key)


async def test_binding_slots_hand_over_in_turn_and_survive_cancellation():
    slots = BindingSlots(1)
    assert slots.try_acquire() and not slots.try_acquire()
    order = []

    async def take(name):
        await slots.acquire()
        order.append(name)

    first, second, third = (asyncio.create_task(take(n)) for n in ("first", "second", "third"))
    await asyncio.sleep(0)
    second.cancel()  # gives up while waiting
    await asyncio.sleep(0)
    slots.release()  # -> first
    await asyncio.sleep(0)
    assert order == ["first"] and slots.in_use == 1
    slots.release()  # -> third (second is gone)
    await asyncio.gather(first, third, second, return_exceptions=True)
    assert order == ["first", "third"] and slots.in_use == 1
    slots.release()
    assert slots.in_use == 0 and slots.try_acquire()
    with pytest.raises(ValueError, match="binding limit must be >= 1"):
        BindingSlots(0)
