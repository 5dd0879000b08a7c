"""Nominated pods and preemption end to end: the queue's Nominator, the nominated-pods Filter
pass (a nominated pod's request counts on its node for pods of equal or lower priority, not for
higher), the cycle recording the nomination, simulate placing the preemptor, explain deleting nothing."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import attrs
import numpy as np
from schedkit import build

from scorer.cluster.recorder import PREEMPTION_ATTEMPTS
from scorer.explain import explain_pod
from scorer.framework import CycleState, NodeBatch
from scorer.framework.events import EVENT_FORCE_ACTIVATE
from scorer.model import LabelSelector, LoadedObjects, PodDisruptionBudget
from scorer.plugins.defaultpreemption import MSG_PREFIX, MSG_TERMINATING
from scorer.queue import Nominator, SchedulingQueue
from scorer.simulate import simulate
from scorer.testing import make_node, make_pod, schedule_pending


def pod(name, cpu="1", priority=0, node="", **kwargs):
    return make_pod(name, cpu=cpu, priority=priority, node_name=node, **kwargs)


def nominated(p, node):
    return attrs.evolve(p, nominated_node_name=node)


# -- the Nominator ---------------------------------------------------------------------------------

def test_nominator_add_update_delete():
    nom = Nominator()
    a, b = pod("a"), pod("b")
    nom.add(a, "n1")
    nom.add(nominated(b, "n1"))
    assert [p.name for p in nom.nominated_pods_for_node("n1")] == ["a", "b"] and len(nom) == 2
    nom.add(a, "n2")  # re-nominated: moves
    assert [p.name for p in nom.nominated_pods_for_node("n1")] == ["b"] and nom.node_of(a) == "n2"
    # An update without a nomination keeps the one made in memory (the API write is not back yet).
    newer = attrs.evolve(a, labels={"v": "2"})
    nom.update(a, newer)
    assert nom.node_of(newer) == "n2" and nom.nominated_pods_for_node("n2") == [newer]
    nom.update(nominated(newer, "n2"), newer)  # the API cleared it
    assert nom.node_of(newer) is None and nom.nodes() == ["n1"]
    nom.delete(b)
    assert not nom and nom.nodes() == []
    nom.add(pod("c"))  # no nomination at all
    assert len(nom) == 0


def test_the_queue_feeds_its_nominator():
    queue = SchedulingQueue(lambda x, y: x.pod.priority > y.pod.priority)
    p = nominated(pod("p"), "n1")
    queue.add(p)
    assert queue.nominator.node_of(p) == "n1"
    queue.update_status(p, nominated(p, "n2"))
    assert queue.nominator.node_of(p) == "n2"
    [info] = queue.pending_pods()
    assert info.pod.nominated_node_name == "n2"  # the queued object follows the status
    queue.delete(p)
    assert not queue.nominator


def test_binding_and_deletion_remove_the_nomination():
    asm, cluster = build(None, [make_node("n1", cpu="4")], [nominated(pod("p"), "n1"), nominated(pod("q"), "n1")])
    assert len(asm.queue.nominator) == 2
    cluster.delete(cluster.pods["default/q"])
    asyncio.run(schedule_pending(asm.scheduler))
    assert cluster.pods["default/p"].node_name == "n1" and not asm.queue.nominator


# -- the nominated-pods Filter pass ----------------------------------------------------------------

def placement(pods, preemptor, nodes=None):
    nodes = nodes or [make_node("n1", cpu="4"), make_node("n2", cpu="4")]
    asm, _ = build(None, nodes, pods)
    fwk = asm.frameworks["default-scheduler"]
    return asm.scheduler.schedule_pod(fwk, CycleState(), preemptor, evaluate_all=True), asm


def test_a_nominated_pod_counts_for_equal_and_lower_priority_pods_only():
    pods = [pod("busy", "4", 0, "n2"), nominated(pod("waiting", "3", 10), "n1")]
    # Equal and lower priority: the nominated pod's 3 cpu count on n1, 2 cpu do not fit there.
    for priority in (10, 5):
        result, asm = placement(pods, pod("new", "2", priority))
        assert result.selected is None, priority
        assert result.node_statuses(asm.cache.table)["n1"].reasons == ("Insufficient cpu",)
    # Higher priority: the nomination does not hold it back.
    result, _ = placement(pods, pod("new", "2", 11))
    assert result.selected == "n1"
    # The nominated pod itself is not in its own way.
    result, _ = placement(pods, pods[1])
    assert result.selected == "n1"


def test_without_nominations_the_filter_pass_is_the_plain_one():
    result, asm = placement([pod("busy", "4", 0, "n2")], pod("new", "2"))
    assert result.selected == "n1" and not asm.queue.nominator


# -- the cycle, simulate, explain --------------------------------------------------------------------

def test_the_cycle_nominates_then_places_the_preemptor_once_the_victims_are_gone():
    nodes = [make_node("n1", cpu="4"), make_node("n2", cpu="4")]
    pods = [pod("low", "4", 1, "n1"), pod("mid", "4", 5, "n2"), pod("high", "4", 10),
            pod("lower-pending", "4", 2)]
    asm, cluster = build(None, nodes, pods)
    turns = asyncio.run(schedule_pending(asm.scheduler))
    by_pod = {t.pod.name: t for t in turns}
    assert by_pod["high"].outcome == "unschedulable"
    assert cluster.preempted == ["default/low"]
    assert cluster.pods["default/high"].nominated_node_name == "n1"
    assert asm.queue.nominator.node_of(cluster.pods["default/high"]) == "n1"
    condition = cluster.conditions["default/high"]
    assert condition.reason == "Unschedulable"
    assert condition.message.startswith("0/2 nodes are available: 2 Insufficient cpu.")
    # The freed node is held for the preemptor: the lower-priority pending pod does not take it.
    assert by_pod["lower-pending"].outcome == "unschedulable"
    asm.queue.flush_backoff_completed(1e9)
    asyncio.run(schedule_pending(asm.scheduler))
    high = cluster.pods["default/high"]
    assert high.node_name == "n1" and not asm.queue.nominator.node_of(high)
    assert asm.metrics.preemption_victims._sum.get() == 1


def test_simulate_preempts_respecting_a_budget_and_places_the_preemptor():
    objects = LoadedObjects(
        nodes=[make_node("n1", cpu="4"), make_node("n2", cpu="4")],
        pods=[pod("db-0", "4", 1, "n1", labels={"app": "db"}), pod("batch", "4", 5, "n2"), pod("urgent", "4", 100)])
    report = simulate(objects, autoload=False)
    by_pod = {p.pod: p for p in report.placements}
    assert by_pod["default/urgent"].node == "n1" and by_pod["default/urgent"].preempted == ("default/db-0",)
    assert by_pod["default/urgent"].nominated == "n1"
    assert by_pod["default/urgent"].decided_by == "preempted default/db-0 on nominated node n1"
    assert "default/db-0" not in report.cluster.pods
    assert [e.note for e in report.cluster.events if e.reason == "Preempted"] == [
        "Preempted by pod uid-default-urgent on node n1"]


def test_a_budget_sends_preemption_to_the_node_it_allows():
    nodes = [make_node("n1", cpu="4"), make_node("n2", cpu="4")]
    pods = [pod("db-0", "4", 1, "n1", labels={"app": "db"}), pod("batch", "4", 5, "n2"), pod("urgent", "4", 100)]
    asm, cluster = build(None, nodes, pods)
    asm.cache.add_workload(PodDisruptionBudget(name="db", selector=LabelSelector(match_labels={"app": "db"}),
                                               disruptions_allowed=0))
    asyncio.run(schedule_pending(asm.scheduler))
    assert cluster.preempted == ["default/batch"]
    asm.queue.flush_backoff_completed(1e9)
    asyncio.run(schedule_pending(asm.scheduler))
    assert cluster.pods["default/urgent"].node_name == "n2"


def retry(asm):
    """The preemptor back in the active queue at once (an event, its backoff over)."""
    asm.queue.move_all_to_active_or_backoff(EVENT_FORCE_ACTIVATE)
    asm.queue.flush_backoff_completed(1e9)


async def test_a_preemptor_retried_before_its_victims_deletion_is_written_waits_for_them():
    # The victims' deletions are enqueued, not yet written (a busy recorder), when the preemptor is
    # retried: the victims count as terminating already, so it waits for them (kube's eligibility)
    # instead of preempting them a second time.
    victims = [pod(f"low-{i}", "1", 1, "n1") for i in range(3)]
    asm, cluster = build(None, [make_node("n1", cpu="3")], [*victims, pod("high", "3", 10)])
    scheduler = asm.scheduler
    first = scheduler.schedule_one()
    assert (first.pod.name, first.outcome) == ("high", "unschedulable")
    assert scheduler.recorder.pending_deletions == 3 and len(cluster.pods) == 4
    retry(asm)
    second = scheduler.schedule_one()
    assert (second.pod.name, second.outcome) == ("high", "unschedulable")
    assert second.message.endswith(MSG_PREFIX + MSG_TERMINATING)
    assert scheduler.recorder.pending_deletions == 3
    await scheduler.recorder.flush()
    assert cluster.preempted == [v.key for v in victims]
    preempted = [e.pod for e in cluster.events if e.reason == "Preempted"]
    assert sorted(preempted) == [v.key for v in victims]  # one Event per victim
    retry(asm)
    await schedule_pending(scheduler)
    assert cluster.pods["default/high"].node_name == "n1"
    metrics = asm.metrics
    assert metrics.preemption_victims._sum.get() == 3
    assert metrics.collector_registry.get_sample_value("scheduler_preemption_victims_count") == 1
    # Every PostFilter run is an attempt (kube's deferred PreemptionAttempts.Inc()): the wait was one.
    assert metrics.collector_registry.get_sample_value("scheduler_preemption_attempts_total") == 2


async def test_a_victim_whose_deletion_is_given_up_is_preempted_again():
    asm, cluster = build(None, [make_node("n1", cpu="1")], [pod("low", "1", 1, "n1"), pod("high", "1", 10)])
    scheduler = asm.scheduler
    refused = []

    async def refuse(victim):
        refused.append(victim.key)
        raise RuntimeError("refused")

    cluster.delete_pod = refuse
    scheduler.schedule_one()
    assert asm.cache.is_deleting(cluster.pods["default/low"])
    await scheduler.recorder.flush()
    assert refused == ["default/low"] * PREEMPTION_ATTEMPTS
    assert not asm.cache.is_deleting(cluster.pods["default/low"])  # still there, not terminating
    retry(asm)
    scheduler.schedule_one()  # preempts again: nothing else would make room
    assert scheduler.recorder.pending_deletions == 1
    assert asm.metrics.collector_registry.get_sample_value("scheduler_preemption_victims_count") == 2


def test_explain_shows_the_nomination_without_deleting_anything():
    objects = LoadedObjects(nodes=[make_node("n1", cpu="4")], pods=[pod("low", "4", 1, "n1"), pod("high", "4", 10)])
    data = explain_pod(objects, None, "default/high", autoload=False)
    assert data["selected"] is None
    assert data["message"] == "0/1 nodes are available: 1 Insufficient cpu."
    assert data["preemption"] == {"nominatedNode": "n1", "victims": ["default/low"]}
    assert [p.key for p in objects.pods] == ["default/low", "default/high"]


async def test_an_assumed_pod_is_no_longer_nominated():
    asm, _ = build(None, [make_node("n1", cpu="4"), make_node("n2", cpu="4")], [nominated(pod("p", "1"), "n2")])
    turn = asm.scheduler.schedule_one()  # the binding task has not run yet: the pod is assumed
    assert turn.node == "n2" and asm.cache.is_assumed("default/p")
    assert not asm.queue.nominator
    await turn.binding


def no_op_extension():
    """A PreFilter extension that keeps no state: forces the node-by-node (pod-by-pod) paths."""
    return SimpleNamespace(name="NoOpExtension", add_pod=lambda *args: None, remove_pod=lambda *args: None)


def test_the_nominated_pods_pass_runs_every_node_at_once_as_node_by_node():
    # Nodes with nominated pods of several priorities: without PreFilter extension state every node
    # is filtered in one batch; the node-by-node pass (forced by an extension) finds the same.
    nodes = [make_node(f"n{i}", cpu="4") for i in range(6)]
    pods = [pod("busy", "1", 0, "n0"), pod("full", "3", 0, "n4"),
            nominated(pod("w1", "2", 10), "n0"), nominated(pod("w2", "3", 10), "n1"),
            nominated(pod("w3", "1", 3), "n2"), nominated(pod("w4", "2", 10), "n2"),
            nominated(pod("w5", "1", 20), "n3"), nominated(pod("w6", "1", 20), "n3"),
            nominated(pod("w7", "1", 5), "n4"), nominated(pod("w8", "1", 5), "n5")]
    preemptor = pod("new", "2", 5)
    outcomes = []
    for per_node in (False, True):
        asm, _ = build(None, nodes, pods)
        fwk = asm.frameworks["default-scheduler"]
        if per_node:
            fwk.pre_filter_extensions = [no_op_extension()]
        table = asm.cache.table
        rows = np.array([table.index[f"n{i}"] for i in (5, 4, 3, 2, 1, 0)], dtype=np.int64)
        state = CycleState()
        fwk.run_pre_filter(state, preemptor, NodeBatch(table, table.rows()))
        outcome = fwk.run_filters_with_nominated_pods(state, preemptor, table, rows)
        assert outcome.error is None
        statuses = {}
        for record in outcome.records:
            for j, position in enumerate(record.positions.tolist()):
                statuses[table.names[int(rows[position])]] = record.status_at(j)
        outcomes.append((outcome.alive.tolist(), statuses))
    assert outcomes[0] == outcomes[1]
    # cpu with the preemptor's 2: n5 3, n4 3 + 1 + 2, n3 1 + 1 + 2, n2 2 + 2 (w3 has a lower
    # priority), n1 3 + 2, n0 1 + 2 + 2; the nodes have 4.
    assert outcomes[0][0] == [True, False, True, True, False, False]
    assert set(outcomes[0][1]) == {"n4", "n1", "n0"}
    assert all(s.reasons == ("Insufficient cpu",) for s in outcomes[0][1].values())
